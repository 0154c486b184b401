r"""An estimated distribution drawn for a data team: what ``sparseldp estimate --plot`` writes.

:func:`render_estimate` draws the estimate (bars up to 40 values, a step line beyond), its per-value
band, a second per-value interval as an outline (the likelihood-ratio intervals), the mean with its
confidence interval and, for simulations, the true distribution.  Only
:class:`matplotlib.figure.Figure` with the Agg canvas is used (no pyplot state).
"""

from __future__ import annotations

import io
import math

import numpy as np

__all__ = ["render_estimate"]

# ---------------------------------------------------------------------------
# an estimated distribution, for a data team
# ---------------------------------------------------------------------------
# Domains up to this many values are drawn as bars; wider ones as a filled step line
# (1-pixel bars alias into spikes).
_BAR_MAX = 40
# A confidence band narrower than this many pixels is hard to see: drawn as a capped error bar instead.
_BAND_MIN_PX = 10.0
_EST_SIZE = (8.0, 4.8)
# With a likelihood-ratio outline reaching more than this many times the highest of the estimate, its band and
# the truth, the outline gets a panel of its own below (the figure this much taller): on one scale the estimate
# would be squashed to the bottom of the axes (e.g. per-value upper ends of 12% over an estimate of 2%).
_LR_OWN_PANEL = 2.0
_EST_LR_HEIGHT = 2.4
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
        Where its upper ends reach more than twice the highest of the estimate, its band and the truth
        (likelihood-ratio ends follow the spikes of the maximum-likelihood estimate: 12% over an estimate
        of 2% is usual under a wide kernel), it is drawn in a panel of its own below, over the estimate
        and the truth again, so the estimate keeps the upper panel's scale.
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

    top = max(float(share.max()), float(truth.max()) if truth is not None else 0.0,
              float(band_hi.max()) if band_hi is not None else 0.0)
    lr_top = float(lr_hi.max()) if lr_hi is not None else 0.0
    own_panel = lr_top > _LR_OWN_PANEL * top  # the outline on its own scale, below (_LR_OWN_PANEL)
    size = (_EST_SIZE[0], _EST_SIZE[1] + (_EST_LR_HEIGHT if own_panel else 0.0))
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    if own_panel:
        grid = fig.add_gridspec(2, 1, height_ratios=(_EST_SIZE[1] - 0.8, _EST_LR_HEIGHT))
        ax = fig.add_subplot(grid[0])
        ax_lr = fig.add_subplot(grid[1], sharex=ax)
    else:
        ax = ax_lr = fig.add_subplot()
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
    if own_panel:  # the estimate again, thin, so the outline below reads against it
        _steps(ax_lr, x, edges, share, consecutive, color=_C_EST, linewidth=1.0, zorder=3)
    if lr_lo is not None:  # the second interval: an outline, so the first band stays readable beneath it
        if k <= _BAR_MAX:  # beside each bar, so the two error bars do not overlap
            h = _bars(ax_lr, x + (0.0 if own_panel else 0.25), lr_lo, lr_hi, ecolor=_C_LR, capsize=2.0)
        else:
            style = dict(color=_C_LR, linewidth=1.0, linestyle=(0, (4, 2)), zorder=3.5)
            h = _steps(ax_lr, x, edges, lr_hi, consecutive, **style)
            _steps(ax_lr, x, edges, lr_lo, consecutive, **style)
        legend.append((h, str(lr_label) + (" (below)" if own_panel else "")))
    if truth is not None:
        style = dict(color=_C_TRUE, linewidth=1.3, linestyle="--", zorder=4)
        h = _steps(ax, x, edges, truth, consecutive, **style)
        legend.append((h, "true share"))
        if own_panel:
            _steps(ax_lr, x, edges, truth, consecutive, **{**style, "linewidth": 1.0})

    top = max(top, 0.0 if own_panel else lr_top)
    top = top if top > 0 else 1.0
    ax.set_ylim(0.0, top * 1.22)  # headroom for the error bar of a narrow interval
    if own_panel:
        ax_lr.set_ylim(0.0, lr_top * 1.08)
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
        if own_panel:
            ax_lr.axvline(m, color=_C_MEAN, linewidth=1.2, zorder=5)
        if band_px >= _BAND_MIN_PX:
            band = ax.axvspan(c_lo, c_hi, color=_C_MEAN, alpha=0.25, linewidth=0, zorder=3.5)
            legend.append(((band, line), _mean_text(mean)))
        else:
            if c_hi > c_lo:  # a band this thin would be invisible: a capped marker above the distribution
                ax.errorbar([m], [top * 1.11], xerr=[[m - c_lo], [c_hi - m]], fmt="D", color=_C_MEAN,
                            markersize=5, capsize=5, capthick=1.5, elinewidth=1.5, zorder=6)
            legend.append((line, _mean_text(mean)))

    ax_lr.set_xlabel(_text(column))
    ax.set_ylabel("estimated share")
    if own_panel:
        ax.tick_params(labelbottom=False)
        ax_lr.set_ylabel("share the reports allow")
    for a in ((ax,) if ax is ax_lr else (ax, ax_lr)):
        a.yaxis.set_major_formatter(_percent_formatter())
        a.grid(True, axis="y", alpha=0.3, zorder=0)
        a.set_axisbelow(True)
        for side in ("top", "right"):
            a.spines[side].set_visible(False)
    if k <= 15 and consecutive:
        ax.set_xticks(x)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(nbins=12, integer=True, steps=[1, 2, 5, 10]))

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
