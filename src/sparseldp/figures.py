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
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._frozen import ArrayValue
from .core.families import get_family
from .reproduce import EXPERIMENTS, ROMAN, compute_table, write_files

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


# ---------------------------------------------------------------------------
# an estimated distribution, for a data team
# ---------------------------------------------------------------------------
# Domains up to this many values are drawn as bars; wider ones as a filled step line
# (1-pixel bars alias into spikes).
_BAR_MAX = 40
# A confidence band narrower than this many pixels is hard to see: drawn as a capped error bar instead.
_BAND_MIN_PX = 10.0
_EST_SIZE = (8.0, 4.8)
_EST_DPI = 130
_METHOD_LABEL = {
    "em": "maximum-likelihood (EM)",
    "ems": "smoothed EM (EMS)",
    "inversion": "least-squares inversion",
}
_C_EST, _C_MEAN, _C_TRUE, _C_LR = "#3b75af", "#c0392b", "#222222", "#d35400"


def _text(value) -> str:
    """User text shown literally: a ``$`` would otherwise start matplotlib mathtext."""
    return str(value).replace("$", r"\$")


def _as_distribution(arr, name: str, size: int | None = None) -> np.ndarray:
    a = np.asarray(arr)
    if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise TypeError(f"{name} must be a 1-D array of real numbers; got {a.dtype} array")
    a = a.astype(float)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a nonempty 1-D array; got shape {a.shape}")
    if size is not None and a.size != size:
        raise ValueError(f"{name} must have one entry per value ({size}); got {a.size}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must contain finite numbers only")
    return a


def _percent_formatter():
    """Percent tick labels with as few decimals as the ticks need (``0.5%``, not ``0.50%``)."""
    from matplotlib.ticker import Formatter

    class _Percent(Formatter):
        def format_ticks(self, values):
            pct = 100.0 * np.asarray(values, dtype=float)
            d = next((d for d in range(6) if np.allclose(np.round(pct, d), pct, rtol=0, atol=1e-9)), 6)
            # a share above 100% is only headroom: no label there
            return [f"{v:.{d}f}%" if v <= 100.0 + 1e-9 else "" for v in pct]

        def __call__(self, x, pos=None):
            return self.format_ticks([x])[0]

    return _Percent()


def _mean_text(mean) -> str:
    """``mean 49.41 ± 0.20 (95% CI 49.01 to 49.81)``: two significant digits of the standard error."""
    v, se = float(mean), float(mean.stderr)
    lo, hi = float(mean.ci[0]), float(mean.ci[1])
    if se == 0.0 and lo == hi:
        return f"mean {v:,.0f} (exact)" if v.is_integer() else f"mean {v:.10g} (exact)"
    digits = 1 - math.floor(math.log10(se)) if se > 0 else 3
    if digits > 8:  # a standard error below 1e-8: fixed decimals would be unreadable
        f = lambda x: f"{x:.4g}"  # noqa: E731
    else:
        f = lambda x: f"{x:,.{max(digits, 0)}f}"  # noqa: E731
    return f"mean {f(v)} \u00b1 {f(se)} ({float(mean.confidence):.0%} CI {f(lo)} to {f(hi)})"


def _legend_columns(labels, most: int = 3, chars: int = 90) -> int:
    """The most legend columns (at most ``most``) whose widest labels add up to at most ``chars`` characters,
    as the legend fills them (column by column), so that no label runs off the figure."""
    for ncol in range(min(most, len(labels)), 1, -1):
        rows = -(-len(labels) // ncol)
        if sum(max(len(lab) for lab in labels[i:i + rows]) for i in range(0, len(labels), rows)) <= chars:
            return ncol
    return 1


def _steps(ax, x, edges, y, consecutive: bool, **style):
    """``y`` as a step line, one step per value: stairs over the cell ``edges`` of consecutive values, else
    steps centred on the values ``x``; the artist (for the legend)."""
    return ax.stairs(y, edges, **style) if consecutive else ax.step(x, y, where="mid", **style)[0]


def _bars(ax, x, lo, hi, **style):
    """An error bar from ``lo`` to ``hi`` at each ``x`` (centred on the interval: it need not hold the
    estimate, as a likelihood-ratio interval may rule a regularized estimate out); the container."""
    return ax.errorbar(x, 0.5 * (lo + hi), yerr=0.5 * (hi - lo), fmt="none", elinewidth=1.0, zorder=4, **style)


def _pair(ci, name: str, k: int):
    """A per-value interval ``(low, high)`` of ``k`` values each, checked; ``(None, None)`` for ``None``."""
    if ci is None:
        return None, None
    if not (isinstance(ci, (tuple, list)) and len(ci) == 2):
        raise TypeError(f"{name} must be a pair (low, high) of arrays or None; got {type(ci).__name__}")
    return _as_distribution(ci[0], f"{name} low", k), _as_distribution(ci[1], f"{name} high", k)


def render_estimate(values, p, *, mean=None, column="value", guarantee=None, method="em", n=None, fmt="png",
                    true_p=None, ci=None, ci_label="interval per value", lr=None,
                    lr_label="likelihood-ratio interval per value") -> bytes:
    r"""Draw an estimated distribution with its mean and confidence interval; PNG or PDF bytes.

    Parameters
    ----------
    values : 1-D int array
        The domain ``lo..hi`` (consecutive integers; a gapped set of values
        is drawn as a step line through them).
    p : 1-D array
        The estimated share of each value (``>= 0``, e.g.
        :func:`sparseldp.estimate_frequencies`).
    mean : MeanEstimate, optional
        Drawn as a vertical line with its confidence band; when the band is
        narrower than a few pixels it is drawn as an error bar above the
        distribution.  The legend states the value, standard error and
        interval either way.
    column : str
        The column's name: the x-axis label.
    guarantee : str, optional
        The privacy guarantee, e.g. ``"(eps = 1, delta <= 1e-06)-LDP, H = 5"``,
        second line of the title.
    method : str
        The estimator (``"em"``, ``"ems"``, ``"inversion"`` or any text).
    n : int, optional
        Number of reports, shown in the title with thousands separators.
    fmt : {"png", "pdf"}
    true_p : 1-D array, optional
        A known true distribution on the same values, overlaid as a dashed
        line (for demos and simulations).
    ci : (low, high) pair of 1-D arrays, optional
        A per-value interval (e.g. ``Bootstrap.interval("p")``), drawn as a band.
    ci_label : str
        The band's legend entry (say the level, and whether the intervals are robust).
    lr : (low, high) pair of 1-D arrays, optional
        A second per-value interval (e.g. ``Profile.interval("p")``, what the reports alone allow),
        drawn as an outline: a step line at each end (dashed), or on bars an error bar beside each bar.
    lr_label : str
        Its legend entry.

    Domains of at most 40 values are drawn as bars, wider ones as a filled
    step line (one step per value, so nothing aliases into spikes).  The
    output is deterministic: no timestamp or software version is written
    into the file, so the same inputs give the same bytes.  Uses the Agg
    canvas directly (no pyplot state).
    """
    if not isinstance(fmt, str) or fmt not in ("png", "pdf"):
        raise ValueError(f"fmt must be 'png' or 'pdf'; got {fmt!r}")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    x = _as_distribution(values, "values")
    share = _as_distribution(p, "p", x.size)
    if share.min() < 0:
        raise ValueError(f"p must be >= 0; got {share.min()!r} at value {x[int(np.argmin(share))]:g}")
    truth = None if true_p is None else _as_distribution(true_p, "true_p", x.size)
    band_lo, band_hi = _pair(ci, "ci", x.size)  # per-value interval (e.g. a bootstrap's): a band around the estimate
    lr_lo, lr_hi = _pair(lr, "lr", x.size)
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer))):
        raise TypeError(f"n must be an integer or None; got {type(n).__name__} {n!r}")

    fig = Figure(figsize=_EST_SIZE, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    k = x.size
    consecutive = k == 1 or bool(np.all(np.diff(x) == 1))
    edges = np.append(x - 0.5, x[-1] + 0.5)
    legend = []  # (handle, label); a handle may be a tuple, drawn on top of each other
    if k <= _BAR_MAX:
        legend.append((ax.bar(x, share, width=0.8, color=_C_EST, alpha=0.85, edgecolor="white", linewidth=0.6,
                              zorder=2), "estimated share"))
    else:
        if band_lo is None:  # with a band, the only shading is the band: a filled area would read as one
            if consecutive:
                ax.stairs(share, edges, fill=True, color=_C_EST, alpha=0.3, zorder=2)
            else:
                ax.fill_between(x, share, step="mid", color=_C_EST, alpha=0.3, zorder=2)
        legend.append((_steps(ax, x, edges, share, consecutive, color=_C_EST, linewidth=1.4, zorder=3),
                       "estimated share"))
    if band_lo is not None:
        if k <= _BAR_MAX:  # bars: an error bar per value (a band behind bars would be hidden)
            h = _bars(ax, x, band_lo, band_hi, ecolor="#1f2d3d", capsize=2.5)
        else:
            h = ax.fill_between(x, band_lo, band_hi, step="mid", color=_C_EST, alpha=0.35, linewidth=0,
                                zorder=2.5)
        legend.append((h, str(ci_label)))
    if lr_lo is not None:  # the second interval: an outline, so the first band stays readable beneath it
        if k <= _BAR_MAX:  # beside each bar, so the two error bars do not overlap
            h = _bars(ax, x + 0.25, lr_lo, lr_hi, ecolor=_C_LR, capsize=2.0)
        else:
            style = dict(color=_C_LR, linewidth=1.0, linestyle=(0, (4, 2)), zorder=3.5)
            h = _steps(ax, x, edges, lr_hi, consecutive, **style)
            _steps(ax, x, edges, lr_lo, consecutive, **style)
        legend.append((h, str(lr_label)))
    if truth is not None:
        style = dict(color=_C_TRUE, linewidth=1.3, linestyle="--", zorder=4)
        h = _steps(ax, x, edges, truth, consecutive, **style)
        legend.append((h, "true share"))

    top = max(float(share.max()), float(truth.max()) if truth is not None else 0.0,
              float(band_hi.max()) if band_hi is not None else 0.0, float(lr_hi.max()) if lr_hi is not None else 0.0)
    top = top if top > 0 else 1.0
    ax.set_ylim(0.0, top * 1.22)  # headroom for the error bar of a narrow interval
    x_lo, x_hi = float(x[0]) - 0.5, float(x[-1]) + 0.5
    if mean is not None:  # a report mean can fall outside the domain: keep it in view
        m, c_lo, c_hi = float(mean), float(mean.ci[0]), float(mean.ci[1])
        x_lo, x_hi = min(x_lo, m, c_lo), max(x_hi, m, c_hi)
    pad = 0.01 * (x_hi - x_lo)
    ax.set_xlim(x_lo - pad, x_hi + pad)

    if mean is not None:
        axes_px = fig.get_figwidth() * _EST_DPI * 0.85  # the axes' share of the width, near enough
        band_px = (c_hi - c_lo) / (x_hi - x_lo + 2 * pad) * axes_px
        line = ax.axvline(m, color=_C_MEAN, linewidth=1.8, zorder=5)
        if band_px >= _BAND_MIN_PX:
            band = ax.axvspan(c_lo, c_hi, color=_C_MEAN, alpha=0.25, linewidth=0, zorder=3.5)
            legend.append(((band, line), _mean_text(mean)))
        else:
            if c_hi > c_lo:  # a band this thin would be invisible: a capped marker above the distribution
                ax.errorbar([m], [top * 1.11], xerr=[[m - c_lo], [c_hi - m]], fmt="D", color=_C_MEAN,
                            markersize=5, capsize=5, capthick=1.5, elinewidth=1.5, zorder=6)
            legend.append((line, _mean_text(mean)))

    ax.set_xlabel(_text(column))
    ax.set_ylabel("estimated share")
    ax.yaxis.set_major_formatter(_percent_formatter())
    if k <= 15 and consecutive:
        ax.set_xticks(x)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(nbins=12, integer=True, steps=[1, 2, 5, 10]))
    ax.grid(True, axis="y", alpha=0.3, zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)

    what = _METHOD_LABEL.get(method, _text(method))
    title = f"Estimated distribution of {_text(column)}: {what}"
    if n is not None:
        title += f", {int(n):,} report{'s' if int(n) != 1 else ''}"
    if guarantee:
        title += "\n" + _text(guarantee)
    ax.set_title(title, fontsize=10.5, loc="left")
    labels = [lab for _, lab in legend]
    fig.legend([h for h, _ in legend], labels, loc="outside lower center", ncol=_legend_columns(labels),
               fontsize=9, frameon=False)

    buf = io.BytesIO()
    metadata = {"CreationDate": None} if fmt == "pdf" else {"Software": None}
    fig.savefig(buf, format=fmt, dpi=_EST_DPI, metadata=metadata)
    return buf.getvalue()
