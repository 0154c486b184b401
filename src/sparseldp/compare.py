r"""Baselines and the sparse mechanisms side by side, under one exact accountant.

For a target ``(eps, delta)`` on range ``H`` over a domain ``a..b``,
:func:`compare` calibrates every family of :data:`COMPARE_FAMILIES` with
:func:`sparseldp.design.finite.calibrate` -- all are channels on the same
domain, accounted by the same exact code (:meth:`SparseChannel.delta`,
Theorem 2) -- and reports for each:

* the best parameters meeting the target and the certificate ``delta_star``
  (a rigorous upper bound on the exact defect, ``<= delta``);
* ``R1``, ``R2``: ``E|Y - x|`` and ``E(Y - x)^2`` averaged over the input
  distribution (the given ``population``, else uniform);
* the mean support size (outputs a report can take for one input);
* the estimation error: total-variation distance between the true histogram
  of a simulated population of ``n`` people and the maximum-likelihood
  estimate (:func:`sparseldp.estimate_frequencies`) from their reports.

The simulation uses ``rng`` (normalized once): ``None`` draws from the
operating system's secure source (not reproducible); an ``int`` seed or a
Generator makes the whole comparison reproducible -- appropriate here because
nothing private is protected by a simulation.  Every family sees the *same*
simulated inputs, so their errors differ only by the mechanisms.

The default population (when none is given) is a fixed, smooth two-bump
distribution over the domain (``default_population``), so that both the body
and the edges of the domain carry mass.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ._validation import check_int
from .errors import InfeasibleError
from .channel import check_domain
from .design.finite import _check_prior
from .baselines import FAMILIES
from .estimation import ConvergenceWarning, estimate_frequencies_full
from .design.finite import _check_target, calibrate
from .sampling import sample_channel

__all__ = ["COMPARE_FAMILIES", "Comparison", "ComparisonRow", "compare", "default_population"]

# Largest simulated population: inputs and reports are held as int64 arrays (2 GiB each at the cap).
_N_MAX = 1 << 28

#: Families compared, in table order (names of :data:`sparseldp.baselines.FAMILIES`).
COMPARE_FAMILIES = ("rr", "geometric-clamp", "geometric-fold", "discrete-gaussian", "sparse-laplace",
                    "sparse-gaussian")

_LABELS = {
    "rr": "k-ary randomized response",
    "geometric-clamp": "geometric (discrete Laplace), clamped",
    "geometric-fold": "geometric (discrete Laplace), folded",
    "discrete-gaussian": "discrete Gaussian, clamped",
    "sparse-laplace": "sparse Laplace, clipped window",
    "sparse-gaussian": "sparse Gaussian, clipped window",
}


def default_population(domain) -> np.ndarray:
    """A smooth two-bump distribution on ``a..b``: bumps at 30% and 70% of the domain
    (widths 8% and 15%, weights 1 and 0.6) over a 5% uniform floor."""

    a, b = check_domain(domain)
    k = b - a + 1
    u = (np.arange(k) + 0.5) / k
    p = np.exp(-0.5 * ((u - 0.3) / 0.08) ** 2) + 0.6 * np.exp(-0.5 * ((u - 0.7) / 0.15) ** 2)
    p = p / p.sum()
    return 0.95 * p + 0.05 / k


@dataclass(frozen=True)
class ComparisonRow:
    """One family's result; ``error`` is set (and the numbers are None) when infeasible."""

    family: str
    label: str
    params: dict | None
    delta_star: float | None
    r1: float | None
    r2: float | None
    support: float | None
    tv: float | None
    converged: bool | None
    estimate: np.ndarray | None = field(default=None, repr=False)
    error: str | None = None
    tv_ems: float | None = None
    estimate_ems: np.ndarray | None = field(default=None, repr=False)

    def to_dict(self) -> dict:
        out = {"family": self.family, "label": self.label}
        if self.error is not None:
            out["error"] = self.error
            return out
        out.update({"params": self.params, "delta_star": self.delta_star, "r1": self.r1, "r2": self.r2,
                    "mean_support": self.support, "tv": self.tv, "tv_ems": self.tv_ems,
                    "em_converged": self.converged})
        return out


@dataclass(frozen=True)
class Comparison:
    """All rows of a comparison, with the target and the simulation settings."""

    eps: float
    delta: float
    H: int
    domain: tuple[int, int]
    n: int
    seeded: bool
    seed: int | None
    true_histogram: np.ndarray = field(repr=False)
    rows: tuple[ComparisonRow, ...]

    def to_dict(self) -> dict:
        return {"eps": self.eps, "delta": self.delta, "H": self.H, "domain": list(self.domain), "n": self.n,
                "seed": self.seed, "seeded": self.seeded, "families": [r.to_dict() for r in self.rows]}

    def figure(self):
        """A matplotlib Figure: R2 and TV error per family, and the estimates against the truth."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        ok = [r for r in self.rows if r.error is None]
        fig = Figure(figsize=(12.0, 4.6), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1, 1, 1.6]})
        names = [r.family for r in ok]
        colors = [f"C{i}" for i in range(len(ok))]
        y = np.arange(len(ok))
        axes[0].barh(y, [r.r2 for r in ok], color=colors)
        axes[0].set_yticks(y, names, fontsize=8)
        axes[0].invert_yaxis()
        axes[0].set_xscale("log")
        axes[0].set_xlabel(r"$R_2 = \mathrm{E}(Y - x)^2$ (log scale)")
        axes[1].barh(y - 0.2, [r.tv for r in ok], height=0.4, color=colors, alpha=0.45, label="EM (MLE)")
        axes[1].barh(y + 0.2, [r.tv_ems for r in ok], height=0.4, color=colors, label="EMS (smoothed)")
        axes[1].set_yticks(y, [""] * len(ok))
        axes[1].invert_yaxis()
        axes[1].set_xlabel("TV error (pale: EM, solid: EMS)")
        xs = np.arange(self.domain[0], self.domain[1] + 1)
        axes[2].step(xs, self.true_histogram, where="mid", color="black", lw=2.0, label="true histogram")
        for r, c in zip(ok, colors):
            axes[2].plot(xs, r.estimate_ems, color=c, lw=1.2, alpha=0.9, label=f"{r.family} (EMS)")
        axes[2].set_xlabel("value")
        axes[2].set_ylabel("frequency")
        axes[2].legend(fontsize=7, frameon=False)
        sim = f"seed {self.seed}" if self.seeded else "OS randomness"
        fig.suptitle(f"(eps, delta) = ({self.eps:g}, {self.delta:g}) on range H = {self.H}, domain "
                     f"{self.domain[0]}..{self.domain[1]}; n = {self.n:,} simulated reports ({sim})", fontsize=10)
        return fig

    def render(self, fmt: str = "png") -> bytes:
        """The figure as PNG or PDF bytes (no timestamps)."""
        if fmt not in ("png", "pdf"):
            raise ValueError(f"fmt must be 'png' or 'pdf'; got {fmt!r}")
        buf = io.BytesIO()
        metadata = {"CreationDate": None} if fmt == "pdf" else {"Software": None}
        self.figure().savefig(buf, format=fmt, dpi=130, metadata=metadata)
        return buf.getvalue()


def _check_population(population, k: int) -> np.ndarray | None:
    if population is None:
        return None

    return _check_prior(population, k, "population")


def _generator(rng):
    """A numpy Generator for the simulation and whether it is seeded (reproducible)."""
    if rng is None:
        return np.random.default_rng(), False, None  # fresh OS entropy
    if isinstance(rng, (bool, np.bool_)):
        raise TypeError(f"rng must be None, an int seed >= 0 or a numpy Generator; got bool {rng!r}")
    if isinstance(rng, (int, np.integer)):
        seed = check_int(rng, "rng", minimum=0)
        return np.random.default_rng(seed), True, seed
    if isinstance(rng, (np.random.Generator, np.random.SeedSequence, np.random.BitGenerator)):
        return np.random.default_rng(rng), True, None
    raise TypeError(
        f"rng must be None, an int seed >= 0 or a numpy Generator; got {type(rng).__name__} {rng!r}"[:300]
    )


def compare(*, eps, delta, H, domain, n=100_000, population=None, families=None, rng=None, objective="r2",
            progress=None) -> Comparison:
    r"""Calibrate every family to ``(eps, delta)`` on range ``H`` and compare them.

    Parameters
    ----------
    eps, delta, H, domain
        The target and the finite input domain ``(a, b)``.
    n : int >= 1
        Simulated population size.
    population : array of ``b - a + 1`` weights, optional
        Input distribution (default :func:`default_population`); also the
        weights of the ``R1``/``R2`` averages (uniform when not given).
    families : iterable of str, optional
        Subset of :data:`COMPARE_FAMILIES` (default: all).
    rng : None, int or numpy Generator
        Simulation randomness: ``None`` is the OS's secure source (not
        reproducible); a seed makes the comparison reproducible.
    objective : {"r2", "r1"}
        What the sparse families' joint design minimizes.
    progress : callable(str), optional
        Called with each family's name before it is processed.

    Returns
    -------
    Comparison
        A family that cannot meet the target gets a row with ``error`` set.
    """

    eps, delta, H, domain = _check_target(eps, delta, H, domain)
    n = check_int(n, "n", minimum=1)
    n = check_int(n, "n", minimum=1, maximum=_N_MAX)  # the simulation holds n inputs and n reports
    a, b = domain
    k = b - a + 1
    given = _check_population(population, k)
    pop = given if given is not None else default_population(domain)
    prior = given  # None -> uniform R averages
    if families is None:
        families = COMPARE_FAMILIES
    if isinstance(families, (str, bytes)) or not isinstance(families, Iterable):
        raise TypeError(f"families must be an iterable of names from {list(COMPARE_FAMILIES)}; "
                        f"got {type(families).__name__} {families!r}")
    families = tuple(families)
    for f in families:
        if f not in FAMILIES:
            raise ValueError(f"families must be names from {list(COMPARE_FAMILIES)}; got {f!r}")
    gen, seeded, seed = _generator(rng)
    counts = gen.multinomial(n, pop)
    x = np.repeat(np.arange(a, b + 1, dtype=np.int64), counts)
    truth = counts / n
    rows = []
    for name in families:
        if progress is not None:
            progress(name)
        try:
            d = calibrate(name, eps=eps, delta=delta, H=H, domain=domain, objective=objective, prior=prior)
        except InfeasibleError as exc:
            rows.append(ComparisonRow(name, _LABELS.get(name, name), None, None, None, None, None, None, None,
                                      error=str(exc)))
            continue
        ch = d.channel
        reports = sample_channel(ch, x, rng=gen)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # reported in the row instead
            est = estimate_frequencies_full(reports, ch, domain=domain)
            ems = estimate_frequencies_full(reports, ch, domain=domain, method="ems")
        tv = 0.5 * float(np.abs(est.p - truth).sum())
        tv_ems = 0.5 * float(np.abs(ems.p - truth).sum())
        support = float(np.diff(ch.matrix.indptr).mean())
        rows.append(ComparisonRow(name, _LABELS.get(name, name), dict(d.params), d.delta_star, d.r1, d.r2,
                                  support, tv, est.converged, np.array(est.p), tv_ems=tv_ems,
                                  estimate_ems=np.array(ems.p)))
    truth.setflags(write=False)
    return Comparison(eps, delta, H, domain, n, seeded, seed, truth, tuple(rows))


def _fmt_params(params: dict) -> str:
    parts = []
    for key, val in params.items():
        parts.append(f"{key}={val}" if isinstance(val, (int, np.integer)) else f"{key}={val:.4g}")
    return ", ".join(parts)


def format_params(params: dict | None) -> str:
    """``lam=0.2247, s=59`` for tables."""
    return "-" if params is None else _fmt_params(params)
