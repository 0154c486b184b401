r"""Error against eps for every family at a fixed ``(delta, H)``, and the figures of a comparison.

:func:`sweep` runs :func:`sparseldp.compare.compare` at each ``eps`` of a list
with everything else fixed (same seed, so every ``eps`` sees the same people)
and keeps the metrics of every family; :meth:`Sweep.figure` draws one panel
per metric, error against ``eps`` on log-log axes, one line per family (a
family that cannot meet a target, or is too large to simulate there, has a
gap).  Calibrations are cached (:mod:`sparseldp.compare.calibration`), so a
sweep that includes the target ``eps`` of an earlier comparison reuses it.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_positive

__all__ = ["Sweep", "sweep", "SWEEP_METRICS", "comparison_figure", "render_figure"]

#: The panels of the sweep figure, in order.
SWEEP_METRICS = ("r2", "w1", "tv", "mean", "quantile")
_TITLES = {"r2": r"per-report $R_2 = \mathrm{E}(v(Y) - x)^2$", "r1": r"per-report $R_1$",
           "w1": "W1 error, default estimator", "tv": "TV error, default estimator",
           "w1-ems": "W1 error, EMS", "tv-ems": "TV error, EMS", "mean": "RMSE of the mean",
           "quantile": "quantile error (10..90%)"}


@dataclass(frozen=True)
class Sweep:
    """Metrics of every family at every ``eps``: ``values[metric][family][i]`` at ``eps[i]`` (nan: no row)."""

    eps: tuple[float, ...]
    delta: float
    H: int
    domain: tuple[int, int]
    n: int
    trials: int
    families: tuple[str, ...]
    values: dict = field(repr=False)
    target_eps: float | None = None
    seeded: bool = False

    def to_dict(self) -> dict:
        return {"eps": list(self.eps), "delta": self.delta, "H": self.H, "domain": list(self.domain), "n": self.n,
                "trials": self.trials, "families": list(self.families),
                "values": {m: {f: [None if math.isnan(v) else v for v in vals] for f, vals in fam.items()}
                           for m, fam in self.values.items()}}

    def figure(self, metrics=SWEEP_METRICS):
        """One panel per metric: error against eps (log-log), a line per family."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        metrics = tuple(metrics)
        ncol = min(3, len(metrics))
        nrow = math.ceil(len(metrics) / ncol)
        fig = Figure(figsize=(4.6 * ncol, 3.6 * nrow + 0.8), layout="constrained")
        FigureCanvasAgg(fig)
        axes = np.atleast_1d(fig.subplots(nrow, ncol, squeeze=False)).ravel()
        styles = ["-o", "-s", "-^", "-v", "-D", "-P", "-X", "-*", "-h", "-<", "->"]
        for ax, metric in zip(axes, metrics):
            for i, fam in enumerate(self.families):
                y = np.array(self.values[metric][fam], dtype=float)
                if np.all(np.isnan(y)):
                    continue
                ax.plot(self.eps, y, styles[i % len(styles)], color=f"C{i % 10}", ms=4, lw=1.3,
                        label=fam, alpha=0.9)
            ax.set_xscale("log", base=2)
            finite = np.array([v for fam in self.families for v in self.values[metric][fam]], dtype=float)
            if np.nanmin(finite, initial=np.inf) > 0:  # an error of exactly 0 (a quantile) has no logarithm
                ax.set_yscale("log")
            ax.set_xlabel(r"$\varepsilon$")
            ax.set_title(_TITLES.get(metric, metric), fontsize=10)
            if self.target_eps is not None:
                ax.axvline(self.target_eps, color="gray", ls=":", lw=1)
            ax.grid(True, which="both", alpha=0.25)
        for ax in axes[len(metrics):]:
            ax.set_visible(False)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=min(5, max(1, len(labels))), fontsize=8,
                   frameon=False)
        fig.suptitle(f"delta = {self.delta:g}, H = {self.H}, domain {self.domain[0]}..{self.domain[1]}; "
                     f"n = {self.n:,} reports, {self.trials} trial{'s' if self.trials > 1 else ''}", fontsize=10)
        return fig

    def render(self, fmt: str = "png", metrics=SWEEP_METRICS) -> bytes:
        """The figure as PNG or PDF bytes (no timestamps)."""
        return render_figure(self.figure(metrics), fmt)


def sweep(eps_values, *, delta, H, domain, metrics=SWEEP_METRICS, target_eps=None, progress=None,
          **compare_kwargs) -> Sweep:
    """Run :func:`sparseldp.compare.compare` at every ``eps`` in ``eps_values`` (sorted; each ``> 0``).

    ``compare_kwargs`` go to every comparison (``n``, ``population``,
    ``data``, ``families``, ``rng``, ``window``, ...); with an ``int`` seed
    every ``eps`` sees the same simulated people.  ``progress(eps, family)``
    is called before each family.
    """
    from . import METRICS, compare

    eps_list = sorted({check_positive(e, "eps") for e in eps_values})
    if not eps_list:
        raise ValueError("eps_values must hold at least one eps > 0")
    for m in metrics:
        if m not in METRICS:
            raise ValueError(f"metrics must be names from {', '.join(METRICS)}; got {m!r}")
    results = []
    for e in eps_list:
        cb = None if progress is None else (lambda name, e=e: progress(e, name))
        results.append(compare(eps=e, delta=delta, H=H, domain=domain, progress=cb, **compare_kwargs))
    families = tuple(r.family for r in results[0].rows)
    values = {m: {f: tuple(_value(res.row(f), m) for res in results) for f in families} for m in METRICS}
    first = results[0]
    return Sweep(tuple(eps_list), first.delta, first.H, first.domain, first.n, first.trials, families, values,
                 target_eps, first.seeded)


def _value(row, metric) -> float:
    if row.error is not None:
        return math.nan
    v = row.metric(metric)
    return math.nan if v is None else float(v)


def comparison_figure(comparison):
    """One comparison: R2 and W1 per family (bars) and the default estimates against the truth."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ok = [r for r in comparison.rows if r.error is None]
    fig = Figure(figsize=(12.0, 4.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1, 1, 1.6]})
    names = [r.family for r in ok]
    colors = [f"C{i % 10}" for i in range(len(ok))]
    y = np.arange(len(ok))
    axes[0].barh(y, [r.r2 for r in ok], color=colors)
    axes[0].set_yticks(y, names, fontsize=8)
    axes[0].invert_yaxis()
    axes[0].set_xscale("log")
    axes[0].set_xlabel(r"$R_2 = \mathrm{E}(v(Y) - x)^2$ (log scale)")
    axes[1].barh(y - 0.2, [r.w1 for r in ok], height=0.4, color=colors, alpha=0.45, label="default")
    axes[1].barh(y + 0.2, [r.w1_ems if r.w1_ems is not None else 0.0 for r in ok], height=0.4, color=colors,
                 label="EMS")
    axes[1].set_yticks(y, [""] * len(ok))
    axes[1].invert_yaxis()
    axes[1].set_xlabel("W1 error (pale: default estimator, solid: EMS)")
    xs = np.arange(comparison.domain[0], comparison.domain[1] + 1)
    axes[2].step(xs, comparison.true_histogram, where="mid", color="black", lw=2.0, label="true histogram")
    for r, c in zip(ok, colors):
        axes[2].plot(xs, r.estimate, color=c, lw=1.1, alpha=0.85, label=r.family)
    axes[2].set_xlabel("value")
    axes[2].set_ylabel("frequency")
    axes[2].legend(fontsize=7, frameon=False)
    sim = f"seed {comparison.seed}" if comparison.seeded else "OS randomness"
    fig.suptitle(f"(eps, delta) = ({comparison.eps:g}, {comparison.delta:g}) on range H = {comparison.H}, domain "
                 f"{comparison.domain[0]}..{comparison.domain[1]}; n = {comparison.n:,} reports ({sim})", fontsize=10)
    return fig


def render_figure(fig, fmt: str = "png") -> bytes:
    """A figure as PNG or PDF bytes (no timestamps)."""
    if fmt not in ("png", "pdf"):
        raise ValueError(f"fmt must be 'png' or 'pdf'; got {fmt!r}")
    buf = io.BytesIO()
    metadata = {"CreationDate": None} if fmt == "pdf" else {"Software": None}
    fig.savefig(buf, format=fmt, dpi=130, metadata=metadata)
    return buf.getvalue()
