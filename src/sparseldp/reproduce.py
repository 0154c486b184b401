r"""The paper's Tables I-IV, computed (Section "Numerical illustrations").

Each table fixes three of ``(eps, H, s, lam | sigma)`` and sweeps the fourth;
every row reports

.. math::

    \delta^*(\varepsilon; H) = \max_{1 \le h \le H} \delta_h(\varepsilon),
    \qquad R_1 = E|Y - x|, \qquad R_2 = E(Y - x)^2,

evaluated exactly from Theorems 3 and 9 (``delta_h``) and Propositions 1 and 3
(``R1``, ``R2``) through :class:`~sparseldp.SparseLaplace` /
:class:`~sparseldp.SparseGaussian` (``.delta_star``, ``.r1``, ``.r2``).  Only
the experimental *settings* live here (:data:`EXPERIMENTS`); no value from the
paper's tables is stored, so the output is a genuine reproduction (the tests
compare it with the printed four-decimal values).

=========  ==========  =======================  ==========================
table      family      fixed                    swept
=========  ==========  =======================  ==========================
Table I    Laplace     eps = 1, lam = 0.5, H = 3  s = 3, 5, ..., 13
Table II   Gaussian    eps = 1, sigma = 2, H = 3  s = 3, 5, ..., 15
Table III  Laplace     eps = 1, H = 2, s = 7      lam = 0.2, 0.4, ..., 1.2
Table IV   Gaussian    eps = 1, H = 2, s = 7      sigma = 0.8, 1, 1.2, 1.5, 2, 2.5, 3
=========  ==========  =======================  ==========================

Writers: :func:`to_csv` (full double precision, machine-readable),
:func:`to_markdown` and :func:`to_latex` (four decimals, as printed in the
paper; LaTeX with ``booktabs`` rules and the paper's labels).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from ._files import atomic_write, atomic_write_all, ensure_directory
from .core.families import get_family

__all__ = [
    "Experiment",
    "Table",
    "EXPERIMENTS",
    "ROMAN",
    "compute_table",
    "tables",
    "to_csv",
    "to_markdown",
    "to_latex",
    "render_tables",
    "write_tables",
    "write_files",
    "atomic_write",
    "ensure_directory",
]

ROMAN = {1: "I", 2: "II", 3: "III", 4: "IV"}


@dataclass(frozen=True)
class Experiment:
    """One sweep of the numerical section.

    ``family`` is ``"laplace"`` or ``"gaussian"``; ``swept`` is ``"s"`` or the
    family's parameter name; ``values`` are the swept values; the three other
    quantities of ``(eps, H, s, param)`` are fixed (``s`` or ``param`` is
    ``None`` when swept).
    """

    number: int
    key: str
    label: str
    family: str
    eps: float
    H: int
    swept: str
    values: tuple
    s: int | None = None
    param: float | None = None

    def __post_init__(self):
        allowed = ("s", get_family(self.family).param)
        if self.swept not in allowed:
            raise ValueError(f"swept must be one of {allowed}; got {self.swept!r}")
        if (self.swept == "s") != (self.s is None) or (self.swept == "s") == (self.param is None):
            raise ValueError("exactly the swept quantity among s and the parameter must be None")

    @property
    def param_name(self) -> str:
        return get_family(self.family).param

    def mechanism(self, value):
        """The mechanism of the row whose swept quantity equals ``value``."""
        s = value if self.swept == "s" else self.s
        param = self.param if self.swept == "s" else value
        return get_family(self.family).make(param, s)

    @property
    def title(self) -> str:
        """E.g. ``Table I: Laplace support-size sweep at (eps, lam, H) = (1, 0.5, 3)``."""
        fam = get_family(self.family).title
        if self.swept == "s":
            what = "support-size sweep"
            fixed = f"(eps, {self.param_name}, H) = ({self.eps:g}, {self.param:g}, {self.H})"
        else:
            what = f"{get_family(self.family).sweep} sweep"
            fixed = f"(eps, H, s) = ({self.eps:g}, {self.H}, {self.s})"
        return f"Table {ROMAN[self.number]}: {fam} {what} at {fixed}"


#: The paper's experimental settings (Section "Numerical illustrations").
EXPERIMENTS: tuple[Experiment, ...] = (
    Experiment(1, "table1_laplace_support", "tab:laplace-sweep-s", "laplace", eps=1.0, H=3,
               swept="s", values=(3, 5, 7, 9, 11, 13), param=0.5),
    Experiment(2, "table2_gaussian_support", "tab:gaussian-sweep-s", "gaussian", eps=1.0, H=3,
               swept="s", values=(3, 5, 7, 9, 11, 13, 15), param=2.0),
    Experiment(3, "table3_laplace_lambda", "tab:laplace-sweep-lambda", "laplace", eps=1.0, H=2,
               swept="lam", values=(0.2, 0.4, 0.6, 0.8, 1.0, 1.2), s=7),
    Experiment(4, "table4_gaussian_sigma", "tab:gaussian-sweep-sigma", "gaussian", eps=1.0, H=2,
               swept="sigma", values=(0.8, 1.0, 1.2, 1.5, 2.0, 2.5, 3.0), s=7),
)


@dataclass(frozen=True)
class Table:
    """A computed table: ``rows[i] = (swept value, delta_star, r1, r2)``."""

    experiment: Experiment
    rows: tuple[tuple[float, float, float, float], ...]

    columns = ("value", "delta_star", "r1", "r2")

    @property
    def number(self) -> int:
        return self.experiment.number

    @property
    def key(self) -> str:
        return self.experiment.key

    def column(self, name: str) -> list[float]:
        """One column by name (``"delta_star"``, ``"r1"``, ``"r2"`` or the swept name)."""
        names = (self.experiment.swept, *self.columns[1:])
        if name not in names:
            raise ValueError(f"column must be one of {names}; got {name!r}")
        i = names.index(name)
        return [row[i] for row in self.rows]

    def header(self) -> list[str]:
        """Plain-text column headers, e.g. ``["s", "delta*(1, 0.5, s; 3)", "R1(0.5, s)", "R2(0.5, s)"]``."""
        return _headers_plain(self.experiment)

    def cells(self, digits: int = 4) -> list[list[str]]:
        """Rows as strings: the swept value, then the three numbers to ``digits`` decimals."""
        return [[_fmt_value(self.experiment, value)] + [f"{x:.{digits}f}" for x in (d, r1, r2)]
                for value, d, r1, r2 in self.rows]


def compute_table(experiment: Experiment) -> Table:
    """Evaluate one experiment exactly (Theorems 3/9, Propositions 1/3)."""
    rows = []
    for value in experiment.values:
        m = experiment.mechanism(value)
        rows.append((value, float(m.delta_star(experiment.eps, experiment.H)), m.r1, m.r2))
    return Table(experiment, tuple(rows))


def tables() -> list[Table]:
    """Tables I-IV, computed."""
    return [compute_table(e) for e in EXPERIMENTS]


# -- writers ------------------------------------------------------------------------


def _fmt_value(experiment: Experiment, value) -> str:
    if experiment.swept == "s":
        return str(int(value))
    return f"{value:.1f}" if round(value, 1) == value else f"{value:g}"


def _headers_plain(e: Experiment) -> list[str]:
    p = e.param_name
    if e.swept == "s":
        args_d = f"{e.eps:g}, {e.param:g}, s; {e.H}"
        args_r = f"{e.param:g}, s"
    else:
        args_d = f"{e.eps:g}, {p}, {e.s}; {e.H}"
        args_r = f"{p}, {e.s}"
    return [e.swept, f"delta*({args_d})", f"R1({args_r})", f"R2({args_r})"]


def _headers_latex(e: Experiment) -> list[str]:
    family = get_family(e.family)
    sym = {"s": "s", family.param: family.symbol}
    g_star = rf"^{{\mathrm {family.mark},*}}" if family.mark else "^*"
    g = rf"^{{\mathrm {family.mark}}}" if family.mark else ""
    if e.swept == "s":
        args_d = f"{e.eps:g},{e.param:g},s;{e.H}"
        args_r = f"{e.param:g},s"
    else:
        args_d = f"{e.eps:g},{sym[e.swept]},{e.s};{e.H}"
        args_r = f"{sym[e.swept]},{e.s}"
    return [f"${sym[e.swept]}$", rf"$\delta{g_star}({args_d})$", f"$R_1{g}({args_r})$", f"$R_2{g}({args_r})$"]


def to_csv(table: Table) -> str:
    """CSV with a header ``<swept>,delta_star,r1,r2`` and full double precision (``repr``)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([table.experiment.swept, "delta_star", "r1", "r2"])
    for value, d, r1, r2 in table.rows:
        w.writerow([_fmt_value(table.experiment, value), repr(d), repr(r1), repr(r2)])
    return buf.getvalue()


def to_markdown(table: Table, digits: int = 4) -> str:
    """A GitHub-flavoured Markdown table, values to ``digits`` decimals, title as a heading line."""
    e = table.experiment
    head = table.header()
    lines = [f"**{e.title}**", "", "| " + " | ".join(head) + " |", "|" + "|".join(["---:"] * len(head)) + "|"]
    for cells in table.cells(digits):
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_latex(table: Table, digits: int = 4) -> str:
    """A ``table`` environment with ``booktabs`` rules, values to ``digits`` decimals."""
    e = table.experiment
    caption = e.title.split(": ", 1)[1].replace("eps", r"\varepsilon").replace("lam", r"\lambda")
    caption = caption.replace("sigma", r"\sigma")
    # the fixed tuple in the caption goes to math mode
    pre, _, fixed = caption.partition(" at ")
    caption = f"{pre} at ${fixed}$." if fixed else pre + "."
    lines = [
        r"\begin{table}[ht]",
        r"\centering",
        r"\small",
        r"\begin{tabular}{cccc}",
        r"\toprule",
        " & ".join(_headers_latex(e)) + r" \\",
        r"\midrule",
    ]
    for cells in table.cells(digits):
        lines.append(" & ".join(cells) + r" \\")
    lines += [
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{{caption} Computed exactly by sparseldp ({get_family(e.family).theorems}).}}",
        rf"\label{{{e.label}}}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


_WRITERS = {"csv": to_csv, "md": to_markdown, "tex": to_latex}


def render_tables(computed: list[Table] | None = None) -> dict[str, str]:
    """File name -> contents for every table in every format (``<key>.csv|md|tex``)."""
    computed = tables() if computed is None else computed
    return {f"{t.key}.{ext}": write(t) for t in computed for ext, write in _WRITERS.items()}


def write_tables(out_dir, computed: list[Table] | None = None) -> list[Path]:
    """Write Tables I-IV as CSV, Markdown and LaTeX into ``out_dir``; returns the paths."""
    return write_files(out_dir, render_tables(computed))


# -- files ----------------------------------------------------------------------------


def write_files(out_dir, files: dict[str, bytes | str]) -> list[Path]:
    """Create ``out_dir`` and write each ``name -> contents`` atomically; returns the paths."""
    out = ensure_directory(out_dir)
    return atomic_write_all({out / name: data for name, data in files.items()})  # all or nothing
