"""What a comparison returns: one :class:`ComparisonRow` per family, the :class:`Comparison` that holds
them, and the :class:`Recommendation` it makes for a metric of :data:`METRICS`.

:meth:`Comparison.ranking` orders the families by a metric (smaller is better),
:meth:`Comparison.recommend` names the best with the numbers behind it, and
:meth:`Comparison.spec` writes a family's calibrated channel as a mechanism spec.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .._frozen import ArrayValue

__all__ = ["METRICS", "Comparison", "ComparisonRow", "Recommendation", "format_params"]

#: Metrics a recommendation can target: name -> (row attribute, description).  Smaller is better for all.
METRICS = {
    "w1": ("w1", "Wasserstein-1 error of the distribution (default estimator)"),
    "tv": ("tv", "total-variation error of the distribution (default estimator)"),
    "w1-ems": ("w1_ems", "Wasserstein-1 error of the distribution (EMS estimator)"),
    "tv-ems": ("tv_ems", "total-variation error of the distribution (EMS estimator)"),
    "mean": ("mean_rmse", "RMSE of the estimated mean"),
    "quantile": ("quantile_error", "mean absolute error of the 10/25/50/75/90% quantiles"),
    "r2": ("r2", "per-report distortion E(v(Y) - x)^2"),
    "r1": ("r1", "per-report distortion E|v(Y) - x|"),
}


@dataclass(frozen=True)
class ComparisonRow:
    """One family's result; ``error`` is set (and the numbers are None) when it could not be run.

    ``mean_method`` says how the mean was estimated (``"unbiased (paper)"``,
    ``"report mean"``, ``"unbiased (channel inversion)"``: linear and unbiased, RMSE exact; ``"EM estimate"``: the
    mean of the maximum-likelihood estimate, RMSE over the trials);
    ``mean_rmse_estimate`` is the RMSE of the mean of the frequency estimate
    behind ``w1`` (the default estimator) for every family.
    """

    family: str
    label: str
    params: dict | None = None
    delta_star: float | None = None
    r1: float | None = None
    r2: float | None = None
    support: float | None = None
    tv: float | None = None
    w1: float | None = None
    tv_ems: float | None = None
    w1_ems: float | None = None
    mean_rmse: float | None = None
    mean_method: str | None = None
    mean_rmse_estimate: float | None = None
    quantile_error: float | None = None
    converged: bool | None = None
    estimate: np.ndarray | None = field(default=None, repr=False)
    estimate_ems: np.ndarray | None = field(default=None, repr=False)
    channel: object = field(default=None, repr=False, compare=False)
    note: str = field(default="", repr=False)
    error: str | None = None

    def metric(self, name: str) -> float | None:
        """The value of a :data:`METRICS` entry (``None`` when not measured)."""
        return getattr(self, METRICS[_check_metric(name)][0])

    def to_dict(self) -> dict:
        out = {"family": self.family, "label": self.label}
        if self.error is not None:
            out["error"] = self.error
            return out
        out.update({"params": self.params, "delta_star": self.delta_star, "r1": self.r1, "r2": self.r2,
                    "mean_support": self.support, "tv": self.tv, "w1": self.w1, "tv_ems": self.tv_ems,
                    "w1_ems": self.w1_ems, "mean_rmse": self.mean_rmse, "mean_method": self.mean_method,
                    "mean_rmse_estimate": self.mean_rmse_estimate,
                    "quantile_error": self.quantile_error, "em_converged": self.converged})
        return out


@dataclass(frozen=True)
class Recommendation:
    """The best family for one metric, with the ranking behind it (smaller is better)."""

    metric: str
    winner: ComparisonRow
    value: float
    ranking: tuple[tuple[str, float], ...]

    def describe(self) -> str:
        """One sentence: the winner, its value and how far ahead of the runner-up it is."""
        desc = METRICS[self.metric][1]
        text = (f"best for {self.metric} ({desc}): {self.winner.family} ({format_params(self.winner.params)}), "
                f"{self.value:.4g}")
        if self.metric == "mean":
            text += (f" (exact, {self.winner.mean_method})" if self.winner.mean_method != "EM estimate"
                     else " (mean of the EM estimate, measured over the trials)")
        if len(self.ranking) > 1:
            name, val = self.ranking[1]
            ratio = val / self.value if self.value > 0 else math.inf
            text += f"; runner-up {name} {val:.4g} ({ratio:.3g}x)"
        return text


def _check_metric(metric) -> str:
    if not isinstance(metric, str) or metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}; got {metric!r}")
    return metric


@dataclass(frozen=True, eq=False)
class Comparison(ArrayValue):
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
    trials: int = 1
    source: str = "simulated population"
    mean_trials: int = 1

    def row(self, family: str) -> ComparisonRow:
        for r in self.rows:
            if r.family == family:
                return r
        raise ValueError(f"family must be one of the compared families {[r.family for r in self.rows]}; "
                         f"got {family!r}")

    def ranking(self, metric: str) -> list[tuple[ComparisonRow, float]]:
        """Rows with a finite value of ``metric``, best first (ties keep table order)."""
        metric = _check_metric(metric)
        vals = [(r, r.metric(metric)) for r in self.rows if r.error is None]
        vals = [(r, float(v)) for r, v in vals if v is not None and math.isfinite(v)]
        return sorted(vals, key=lambda rv: rv[1])

    def recommend(self, metric: str) -> Recommendation:
        """The family with the smallest ``metric`` (:data:`METRICS`); ``ValueError`` when none was measured."""
        ranked = self.ranking(metric)
        if not ranked:
            raise ValueError(f"no compared family has a value for metric {metric!r}")
        return Recommendation(metric, ranked[0][0], ranked[0][1], tuple((r.family, v) for r, v in ranked))

    def spec(self, family: str):
        """The mechanism spec (:mod:`sparseldp.spec`) of ``family``'s calibrated channel, with its target,
        certificate and report distortion (``r1``, ``r2`` of the label, uniform over the domain, as the
        spec loader recomputes them), ready for ``sparseldp privatize``."""
        from ..spec import spec_from_channel

        r = self.row(family)
        if r.error is not None or r.channel is None:
            raise ValueError(f"family {family!r} has no calibrated channel in this comparison: {r.error}")
        ch = r.channel
        return spec_from_channel(ch, eps=self.eps, delta=self.delta, H=self.H, delta_star=r.delta_star,
                                 r1=float(np.mean(ch.distortion(1))), r2=float(np.mean(ch.distortion(2))))

    def to_dict(self) -> dict:
        return {"eps": self.eps, "delta": self.delta, "H": self.H, "domain": list(self.domain), "n": self.n,
                "trials": self.trials, "mean_trials": self.mean_trials, "truth": self.source, "seed": self.seed, "seeded": self.seeded,
                "families": [r.to_dict() for r in self.rows]}

    def figure(self):
        """A matplotlib Figure: R2 and W1 per family, and the estimates against the truth."""
        from .sweep import comparison_figure

        return comparison_figure(self)

    def render(self, fmt: str = "png") -> bytes:
        """The figure as PNG or PDF bytes (no timestamps)."""
        from .sweep import render_figure

        return render_figure(self.figure(), fmt)


def _fmt_params(params: dict) -> str:
    parts = []
    for key, val in params.items():
        if isinstance(val, str):
            parts.append(f"{key}={val}")
        else:
            parts.append(f"{key}={val}" if isinstance(val, (int, np.integer)) else f"{key}={val:.4g}")
    return ", ".join(parts)


def format_params(params: dict | None) -> str:
    """``lam=0.2247, s=59`` for tables."""
    return "-" if params is None else _fmt_params(params)
