r"""The paper's Figures 1-4, computed and drawn (matplotlib, Agg, no pyplot).

The figures are empty in the paper's source; their captions define them
(docs/paper.md, "Figures 1-4").  Each shows the exact privacy defect
``delta* = max_{1<=h<=H} delta_h(eps)`` (Theorems 3 and 9) and the first
distortion moment ``R1 = E|Y - x|`` (Propositions 1 and 3) against one swept
quantity, on two y-axes:

=========  ==========  ===========================  ================================
figure     family      fixed                        swept
=========  ==========  ===========================  ================================
Figure 1   Laplace     eps = 1, lam = 0.8, H = 2    s = 1, 3, ..., 25
Figure 2   Gaussian    eps = 1, sigma = 1.5, H = 2  s = 1, 3, ..., 25
Figure 3   Laplace     eps = 1, H = 2, s = 7        lam in [0.02, 2] (dense)
Figure 4   Gaussian    eps = 1, H = 2, s = 7        sigma in [0.3, 4] (dense)
=========  ==========  ===========================  ================================

``s`` is discrete, so Figures 1-2 plot every odd ``s`` with markers and a line
at the feasibility threshold ``s = H + 1`` (Theorem 4: below it
``delta_H = 1``).  Figures 3-4 sweep the continuous parameter densely, mark the
rows of Tables III and IV (which share their settings) and the minimizer of
``delta*`` (refined by a bounded scalar search around the best grid point;
``delta*`` is a maximum of piecewise-smooth functions, so this is a local
refinement, labelled as approximate).  Tables I and II use different settings
from Figures 1 and 2, so no table points are drawn there.

:func:`render_estimate` draws an estimated distribution with its mean and
confidence interval (what ``sparseldp estimate --plot`` writes).

Only :class:`matplotlib.figure.Figure` with the Agg canvas is used: importing
this module never changes the global pyplot backend.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._frozen import ArrayValue
from ..core.families import get_family
from ..reproduce import EXPERIMENTS, ROMAN, compute_table, write_files
from .estimate import render_estimate

__all__ = [
    "FigureSpec",
    "FigureData",
    "FIGURES",
    "figure_data",
    "make_figure",
    "render_estimate",
    "render_figure",
    "render_figures",
    "write_figures",
]



@dataclass(frozen=True)
class FigureSpec:
    """One figure: the family, the fixed settings and the swept grid.

    ``grid`` is ``(start, stop, num)``: odd ``s`` from ``start`` to ``stop``
    when ``swept == "s"``; else ``num`` evenly spaced parameter values.
    ``table`` is the number of the paper's table with the same settings (its
    rows are marked), or ``None``.
    """

    number: int
    key: str
    family: str
    eps: float
    H: int
    swept: str
    grid: tuple
    s: int | None = None
    param: float | None = None
    table: int | None = None

    @property
    def param_name(self) -> str:
        return get_family(self.family).param

    def values(self) -> np.ndarray:
        start, stop, num = self.grid
        if self.swept == "s":
            return np.arange(start, stop + 1, 2, dtype=np.int64)
        return np.linspace(start, stop, num)

    def mechanism(self, value):
        s = int(value) if self.swept == "s" else self.s
        param = self.param if self.swept == "s" else float(value)
        return get_family(self.family).make(param, s)

    @property
    def title(self) -> str:
        family = get_family(self.family)
        fam = family.title
        if self.swept == "s":
            return (f"Figure {self.number}: {fam} support-size tradeoff, "
                    rf"$(\varepsilon, {family.symbol}, H) = ({self.eps:g}, {self.param:g}, {self.H})$")
        what = family.sweep
        return (f"Figure {self.number}: {fam} {what} sweep, "
                rf"$(\varepsilon, H, s) = ({self.eps:g}, {self.H}, {self.s})$")


#: Figures 1-4 as defined by the paper's captions (docs/paper.md, "Figures 1-4").
FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(1, "figure1_laplace_support", "laplace", 1.0, 2, "s", (1, 25, None), param=0.8),
    FigureSpec(2, "figure2_gaussian_support", "gaussian", 1.0, 2, "s", (1, 25, None), param=1.5),
    FigureSpec(3, "figure3_laplace_lambda", "laplace", 1.0, 2, "lam", (0.02, 2.0, 400), s=7, table=3),
    FigureSpec(4, "figure4_gaussian_sigma", "gaussian", 1.0, 2, "sigma", (0.3, 4.0, 400), s=7, table=4),
)


@dataclass(frozen=True, eq=False)
class FigureData(ArrayValue):
    """The numbers behind one figure (all computed exactly)."""

    spec: FigureSpec
    x: np.ndarray
    delta_star: np.ndarray
    r1: np.ndarray
    table_x: np.ndarray | None = None
    table_delta_star: np.ndarray | None = None
    table_r1: np.ndarray | None = None
    argmin_x: float | None = None
    min_delta_star: float | None = None


def _evaluate(spec: FigureSpec, xs) -> tuple[np.ndarray, np.ndarray]:
    ds, r1 = [], []
    for x in xs:
        m = spec.mechanism(x)
        ds.append(float(m.delta_star(spec.eps, spec.H)))
        r1.append(m.r1)
    return np.asarray(ds), np.asarray(r1)


def figure_data(number: int) -> FigureData:
    """Compute Figure ``number`` (1-4): the sweep, the table points and the minimizer."""
    if number not in (1, 2, 3, 4):
        raise ValueError(f"figure number must be one of 1, 2, 3, 4; got {number!r}")
    spec = FIGURES[number - 1]
    x = spec.values()
    extra = {}
    if spec.table is not None:
        table = compute_table(EXPERIMENTS[spec.table - 1])
        extra["table_x"] = np.asarray(table.column(spec.swept), dtype=float)
        extra["table_delta_star"] = np.asarray(table.column("delta_star"))
        extra["table_r1"] = np.asarray(table.column("r1"))
        # the curve passes exactly through the marked rows
        x = np.union1d(x, extra["table_x"])
    ds, r1 = _evaluate(spec, x)
    if spec.swept != "s":
        from scipy.optimize import minimize_scalar

        i = int(np.argmin(ds))
        lo, hi = x[max(i - 1, 0)], x[min(i + 1, x.size - 1)]
        res = minimize_scalar(lambda v: _evaluate(spec, [v])[0][0], bounds=(lo, hi), method="bounded",
                              options={"xatol": 1e-10})
        best_x, best = (float(res.x), float(res.fun)) if res.fun <= ds[i] else (float(x[i]), float(ds[i]))
        extra["argmin_x"], extra["min_delta_star"] = best_x, best
    return FigureData(spec, x, ds, r1, **extra)


def make_figure(number: int, data: FigureData | None = None):
    """A :class:`matplotlib.figure.Figure` for Figure ``number`` (two y-axes: delta* and R1)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    data = figure_data(number) if data is None else data
    spec = data.spec
    fig = Figure(figsize=(7.0, 5.0), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax2 = ax.twinx()
    c_d, c_r = "tab:blue", "tab:red"
    xsym = "s" if spec.swept == "s" else get_family(spec.family).symbol
    mark = get_family(spec.family).mark
    dstar_label = rf"$\delta^{{\mathrm{{{mark}}},*}}$" if mark else r"$\delta^*$"
    r1_label = rf"$R_1^{{\mathrm{{{mark}}}}}$" if mark else r"$R_1$"
    discrete = spec.swept == "s"
    style = dict(marker="o", markersize=4) if discrete else {}
    handles = []
    handles += ax.plot(data.x, data.delta_star, color=c_d, lw=1.8, label=f"{dstar_label} (privacy defect, left)", **style)
    handles += ax2.plot(data.x, data.r1, color=c_r, lw=1.8, ls="--",
                        label=f"{r1_label} = E|Y - x| (distortion, right)", **(dict(style, marker="s") if discrete else {}))
    if data.table_x is not None:
        handles.append(ax.scatter(data.table_x, data.table_delta_star, s=60, facecolors="none", edgecolors="black",
                                  linewidths=1.3, zorder=5, label=f"Table {ROMAN[spec.table]} rows (both curves)"))
        ax2.scatter(data.table_x, data.table_r1, s=60, facecolors="none", edgecolors="black", linewidths=1.3, zorder=5)
    if data.argmin_x is not None:
        handles += ax.plot([data.argmin_x], [data.min_delta_star], marker="*", ms=13, color="goldenrod",
                           mec="black", ls="none", zorder=6,
                           label=rf"min {dstar_label} $\approx$ {data.min_delta_star:.4f} at ${xsym}$ = {data.argmin_x:.3f}")
    if discrete:
        thr = spec.H + 1
        handles.append(ax.axvline(thr, color="gray", lw=1, ls=":",
                                  label=f"s = H + 1 = {thr} (Theorem 4 threshold)"))
        ax.set_xticks(data.x[:: max(1, data.x.size // 10)])
    ax.set_xlabel(f"${xsym}$" + (" (support size)" if discrete else
                                 (" (inverse temperature)" if spec.swept == "lam" else " (scale)")))
    ax.set_ylabel(f"{dstar_label}$(\\varepsilon; H)$  (max over $1 \\leq h \\leq H$)", color=c_d)
    ax2.set_ylabel(f"{r1_label}", color=c_r)
    ax.tick_params(axis="y", colors=c_d)
    ax2.tick_params(axis="y", colors=c_r)
    ax.set_ylim(0, 1.05)
    ax2.set_ylim(0, max(float(np.max(data.r1)) * 1.1, 1e-12))
    ax.grid(True, alpha=0.3)
    ax.set_title(spec.title, fontsize=10.5)
    # below the axes, so that it never hides a curve
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=8.5, frameon=False)
    return fig


def render_figure(number: int, fmt: str, data: FigureData | None = None) -> bytes:
    """Figure ``number`` as ``png`` (150 dpi) or ``pdf`` bytes (no timestamps, reproducible)."""
    if fmt not in ("png", "pdf"):
        raise ValueError(f"fmt must be 'png' or 'pdf'; got {fmt!r}")
    fig = make_figure(number, data)
    buf = io.BytesIO()
    metadata = {"CreationDate": None} if fmt == "pdf" else {"Software": None}
    fig.savefig(buf, format=fmt, dpi=150, metadata=metadata)
    return buf.getvalue()


def render_figures(formats=("png", "pdf")) -> dict[str, bytes]:
    """File name -> bytes for Figures 1-4 in each format (``<key>.png``, ``<key>.pdf``)."""
    out = {}
    for spec in FIGURES:
        data = figure_data(spec.number)
        for fmt in formats:
            out[f"{spec.key}.{fmt}"] = render_figure(spec.number, fmt, data)
    return out


def write_figures(out_dir, formats=("png", "pdf")) -> list[Path]:
    """Write Figures 1-4 as PNG and PDF into ``out_dir`` (atomically, file by file)."""
    return write_files(out_dir, render_figures(formats))
