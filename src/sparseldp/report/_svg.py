"""Hand-written inline SVG charts for the privacy report: small, static, no script, no font files.

Three kinds, enough for the report: :func:`line_chart` (privacy profiles,
linear or log10 y), :func:`bar_chart` (stacked bars: the defect split into
support leakage and overlap) and :func:`pmf_chart` (one row of the channel).
Each returns one ``<figure>`` holding an ``<svg class="plot" data-plot=KEY>``
with a ``<title>`` and ``<desc>`` (read by screen readers) and fixed
``width``/``height``, so it renders at a known size with CSS or without.
Text is real SVG text in the page's font; every drawn series carries
``data-series`` so tests can find it.  Values that are not finite, or not
positive on a log axis, are left out of a line (never drawn at a made-up
place); the caller says so in the caption when it matters.
"""

from __future__ import annotations

import decimal
import math
from html import escape

import numpy as np

__all__ = ["line_chart", "bar_chart", "pmf_chart", "PALETTE", "fmt_num", "html_num", "num_parts", "svg_num"]

#: Colour-blind-safe colours (Okabe and Ito), in the order series use them.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")

_W, _H = 720, 320
_ML, _MR, _MT, _MB = 78, 22, 40, 50  # margins: axis labels left and bottom, legend on top


def num_parts(x, digits: int = 6, direction: str = "nearest") -> tuple[str, int | None]:
    """``(mantissa, exponent)`` of ``x`` to ``digits`` significant digits (exponent ``None``: plain decimal).

    ``direction`` is ``"nearest"``, ``"up"`` or ``"down"``: a displayed upper
    bound is rounded up and a lower bound down, so that the digits shown keep
    the direction of the bound.
    """
    x = float(x)
    if x == 0.0:
        return "0", None
    if math.isinf(x):
        return ("∞" if x > 0 else "−∞"), None
    rounding = {"nearest": decimal.ROUND_HALF_EVEN, "up": decimal.ROUND_CEILING, "down": decimal.ROUND_FLOOR}[direction]
    d = decimal.Decimal(x)  # exact
    q = d.quantize(decimal.Decimal(1).scaleb(d.adjusted() - digits + 1), rounding=rounding)
    exp = q.adjusted()
    if -4 <= exp < 6:
        text = format(q, "f")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return text.replace("-", "−"), None
    mant = format(q.scaleb(-exp), "f")
    if "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    return mant.replace("-", "−"), exp


def fmt_num(x, digits: int = 6, direction: str = "nearest") -> str:
    """A number as plain text (``2.5×10^-7``); see :func:`num_parts`."""
    mant, exp = num_parts(x, digits, direction)
    return mant if exp is None else f"{mant}×10^{exp}"


def html_num(x, digits: int = 6, direction: str = "nearest") -> str:
    """A number as HTML, the exponent as a superscript (``2.5×10<sup>−7</sup>``); see :func:`num_parts`."""
    mant, exp = num_parts(x, digits, direction)
    if exp is None:
        return mant
    return ("" if mant == "1" else f"{mant}×") + f"10<sup>{str(exp).replace('-', '−')}</sup>"


def svg_num(x, digits: int = 6) -> str:
    """A number as SVG text, the exponent raised with a ``tspan``."""
    mant, exp = num_parts(x, digits)
    if exp is None:
        return mant
    return (("" if mant == "1" else f"{mant}×") + f'10<tspan dy="-6" font-size="9">{str(exp).replace("-", "−")}'
            "</tspan>")


def _a(value) -> str:
    return escape(str(value), quote=True)


def _nice_step(span: float, target: int = 6) -> float:
    raw = span / max(target, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * mag >= raw:
            return m * mag
    return 10.0 * mag  # pragma: no cover


def _linear_ticks(lo: float, hi: float) -> tuple[float, float, list[float]]:
    """A range containing ``[lo, hi]`` with round ends, and its ticks."""
    if not hi > lo:
        hi = lo + (abs(lo) if lo else 1.0)
    step = _nice_step(hi - lo)
    a = math.floor(lo / step + 1e-9) * step
    b = math.ceil(hi / step - 1e-9) * step
    ticks = [a + i * step for i in range(int(round((b - a) / step)) + 1)]
    return a, b, [0.0 if abs(t) < step * 1e-9 else t for t in ticks]


def _log_ticks(lo: float, hi: float) -> tuple[float, float, list[tuple[float, str]]]:
    """log10 range containing ``[lo, hi]`` (both > 0) and its ticks ``(log10 value, label)``.

    Whole decades are labelled (every few when there are many); a range of at
    most two decades also gets ``2`` and ``5`` times each decade.  A curve at
    the top decade gets a little head room so that it does not sit on the frame.
    """
    la, lb = math.log10(lo), math.log10(hi)
    a = math.floor(la)
    b = math.ceil(lb)
    if b <= a:  # one value, at a power of ten: the decade below it
        a = b - 1
    top = b + 0.08 if lb > b - 0.02 else float(b)
    every = max(1, math.ceil((b - a) / 8))
    ticks = [(float(e), _pow10_label(e)) for e in range(b, a - 1, -every)][::-1]
    if b - a <= 2:
        for e in range(a, b):
            for m in (2, 5):
                v = math.log10(m) + e
                if a - 1e-9 <= v <= top:
                    ticks.append((v, svg_num(m * 10.0 ** e, 3) if abs(e) > 3 else f"{m * 10.0 ** e:g}"))
        ticks.sort()
    return float(a), top, ticks


def _tick_label(v: float) -> str:
    return svg_num(v, 4)


def _pow10_label(e: int) -> str:
    return "1" if e == 0 else f'10<tspan dy="-6" font-size="9">{e}</tspan>'


class _Frame:
    """The plot area and the maps from data to pixels."""

    def __init__(self, xlim, ylim, logy: bool, width=_W, height=_H):
        self.w, self.h = width, height
        self.x0, self.x1 = _ML, width - _MR
        self.y0, self.y1 = height - _MB, _MT  # pixel y grows downwards
        self.xlim, self.ylim, self.logy = xlim, ylim, logy

    def px(self, x):
        a, b = self.xlim
        return self.x0 + (np.asarray(x, dtype=float) - a) / (b - a) * (self.x1 - self.x0)

    def py(self, y):
        a, b = self.ylim
        y = np.asarray(y, dtype=float)
        if self.logy:
            with np.errstate(divide="ignore", invalid="ignore"):
                y = np.log10(y)
        return self.y0 - (y - a) / (b - a) * (self.y0 - self.y1)


def _open(key: str, title: str, desc: str, width=_W, height=_H) -> list[str]:
    tid = f"plot-{key}-title"
    return [
        f'<svg class="plot" data-plot="{_a(key)}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-labelledby="{tid}">',
        f'<title id="{tid}">{escape(title)}</title><desc>{escape(desc)}</desc>',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]


def _axes(f: _Frame, xticks, yticks, xlabel: str, ylabel: str, *, ylog_ticks=None, xtick_labels=None) -> list[str]:
    out = ['<g class="axes" font-size="12" fill="#333">']
    ticks = [(t, _tick_label(t)) for t in yticks] if ylog_ticks is None else [(10.0 ** t, lab) for t, lab in ylog_ticks]
    for yv, label in ticks:
        y = float(f.py(yv))
        out.append(f'<line x1="{f.x0}" x2="{f.x1}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e6e6e6"/>')
        out.append(f'<text x="{f.x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
    for i, t in enumerate(xticks):
        x = float(f.px(t))
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.y0}" y2="{f.y0 + 5}" stroke="#666"/>')
        label = escape(xtick_labels[i]) if xtick_labels is not None else _tick_label(t)
        out.append(f'<text x="{x:.1f}" y="{f.y0 + 19}" text-anchor="middle">{label}</text>')
    out.append(f'<rect x="{f.x0}" y="{f.y1}" width="{f.x1 - f.x0}" height="{f.y0 - f.y1}" fill="none" '
               'stroke="#666"/>')
    out.append(f'<text x="{(f.x0 + f.x1) / 2:.1f}" y="{f.h - 10}" text-anchor="middle" font-size="13">'
               f'{escape(xlabel)}</text>')
    cy = (f.y0 + f.y1) / 2
    out.append(f'<text x="16" y="{cy:.1f}" text-anchor="middle" font-size="13" '
               f'transform="rotate(-90 16 {cy:.1f})">{escape(ylabel)}</text>')
    out.append("</g>")
    return out


def _legend(f: _Frame, items) -> list[str]:
    """One row of ``(label, colour, kind)`` entries above the plot area; kind is line, dash, box or dot."""
    out = ['<g class="legend" font-size="12" fill="#333">']
    x = f.x0
    y = 18
    for label, colour, kind in items:
        if kind == "box":
            out.append(f'<rect x="{x}" y="{y - 9}" width="14" height="10" fill="{colour}"/>')
        elif kind == "dot":
            out.append(f'<circle cx="{x + 7}" cy="{y - 4}" r="4" fill="{colour}"/>')
        else:
            dash = ' stroke-dasharray="5 3"' if kind == "dash" else ""
            out.append(f'<line x1="{x}" x2="{x + 18}" y1="{y - 4}" y2="{y - 4}" stroke="{colour}" '
                       f'stroke-width="2.5"{dash}/>')
        out.append(f'<text x="{x + 22}" y="{y}">{escape(label)}</text>')
        x += 34 + 7 * len(label)
    out.append("</g>")
    return out


def _polyline_segments(px, py) -> list[str]:
    """SVG path data for the finite runs of a line (gaps where a value cannot be drawn)."""
    ok = np.isfinite(px) & np.isfinite(py)
    parts, run = [], []
    for x, y, good in zip(px.tolist(), py.tolist(), ok.tolist()):
        if good:
            run.append(f"{x:.1f},{y:.1f}")
        elif run:
            parts.append(run)
            run = []
    if run:
        parts.append(run)
    return ["M" + " L".join(r) for r in parts if r]


def _figure(svg: list[str], caption: str) -> str:
    return "<figure class=\"chart\">" + "".join(svg) + f"<figcaption>{caption}</figcaption></figure>"


def line_chart(*, key: str, title: str, desc: str, caption: str, series, xlabel: str, ylabel: str,
               logy: bool = False, xlim=None, points=(), hlines=(), vlines=()) -> str:
    """Lines ``series = [(label, xs, ys, colour, dashed)]``; ``points = [(label, x, y, colour)]`` markers;
    ``hlines``/``vlines = [(label, value, colour)]`` reference lines.  ``caption`` is HTML (trusted)."""
    xs_all = np.concatenate([np.asarray(s[1], dtype=float) for s in series])
    ys_all = np.concatenate([np.asarray(s[2], dtype=float) for s in series]
                            + [np.array([p[2] for p in points], dtype=float)]
                            + [np.array([h[1] for h in hlines], dtype=float)])
    if logy and not np.any(np.isfinite(ys_all) & (ys_all > 0)):
        logy = False  # nothing positive to draw on a log scale (e.g. delta = 0 everywhere): a linear one
    ys_ok = ys_all[np.isfinite(ys_all) & ((ys_all > 0) if logy else True)]
    if xlim is None:
        xlim = (float(np.nanmin(xs_all)), float(np.nanmax(xs_all)))
    xa, xb = float(xlim[0]), float(xlim[1])
    xticks = [t for t in _linear_ticks(xa, xb)[2] if xa - 1e-9 * (xb - xa) <= t <= xb + 1e-9 * (xb - xa)]
    if logy:
        lo = float(ys_ok.min()) if ys_ok.size else 1e-12
        hi = float(ys_ok.max()) if ys_ok.size else 1.0
        ya, yb, yticks = _log_ticks(lo, hi)
        f = _Frame((xa, xb), (ya, yb), True)
        axes = _axes(f, xticks, None, xlabel, ylabel, ylog_ticks=yticks)
    else:
        lo = min(0.0, float(ys_ok.min())) if ys_ok.size else 0.0
        hi = float(ys_ok.max()) if ys_ok.size else 1.0
        ya, yb, yticks = _linear_ticks(lo, hi)
        f = _Frame((xa, xb), (ya, yb), False)
        axes = _axes(f, xticks, yticks, xlabel, ylabel)
    svg = _open(key, title, desc) + axes
    svg.append(f'<clipPath id="clip-{_a(key)}"><rect x="{f.x0}" y="{f.y1}" width="{f.x1 - f.x0}" '
               f'height="{f.y0 - f.y1}"/></clipPath>')
    svg.append(f'<g clip-path="url(#clip-{_a(key)})">')
    legend = []
    for label, value, colour in hlines:
        y = float(f.py(value))
        if np.isfinite(y):
            svg.append(f'<line data-series="{_a(label)}" x1="{f.x0}" x2="{f.x1}" y1="{y:.1f}" y2="{y:.1f}" '
                       f'stroke="{colour}" stroke-width="1.5" stroke-dasharray="2 3"/>')
            legend.append((label, colour, "dash"))
    for label, value, colour in vlines:
        x = float(f.px(value))
        svg.append(f'<line data-series="{_a(label)}" x1="{x:.1f}" x2="{x:.1f}" y1="{f.y1}" y2="{f.y0}" '
                   f'stroke="{colour}" stroke-width="1.2" stroke-dasharray="4 3"/>')
        legend.append((label, colour, "dash"))
    for label, xs, ys, colour, dashed in series:
        xs = np.asarray(xs, dtype=float)
        ys = np.asarray(ys, dtype=float)
        if logy:
            ys = np.where(ys > 0, ys, np.nan)
        d = " ".join(_polyline_segments(f.px(xs), f.py(ys)))
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        svg.append(f'<path data-series="{_a(label)}" d="{d}" fill="none" stroke="{colour}" stroke-width="2.2" '
                   f'stroke-linejoin="round"{dash}/>')
        legend.append((label, colour, "dash" if dashed else "line"))
    for label, x, y, colour in points:
        cx, cy = float(f.px(x)), float(f.py(y))
        if np.isfinite(cx) and np.isfinite(cy):
            svg.append(f'<circle data-series="{_a(label)}" cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="{colour}" '
                       'stroke="#fff" stroke-width="1.5"/>')
    seen = set()
    for label, _, _, colour in points:
        if label not in seen:
            seen.add(label)
            legend.append((label, colour, "dot"))
    svg.append("</g>")
    svg += _legend(f, legend)
    svg.append("</svg>")
    return _figure(svg, caption)


def bar_chart(*, key: str, title: str, desc: str, caption: str, categories, stacks, xlabel: str,
              ylabel: str) -> str:
    """Stacked bars: ``categories`` (labels along x), ``stacks = [(label, values, colour)]`` from the bottom up."""
    n = len(categories)
    totals = np.sum([np.asarray(v, dtype=float) for _, v, _ in stacks], axis=0)
    ya, yb, yticks = _linear_ticks(0.0, float(totals.max()) if n and totals.max() > 0 else 1.0)
    f = _Frame((-0.5, n - 0.5), (ya, yb), False)
    every = max(1, math.ceil(n / 20))
    xt = list(range(0, n, every))
    svg = _open(key, title, desc) + _axes(f, xt, yticks, xlabel, ylabel,
                                          xtick_labels=[str(categories[i]) for i in xt])
    bw = max(1.0, 0.7 * (f.x1 - f.x0) / max(n, 1))
    base = np.zeros(n)
    for label, values, colour in stacks:
        v = np.asarray(values, dtype=float)
        svg.append(f'<g data-series="{_a(label)}" fill="{colour}">')
        for i in range(n):
            top, bottom = float(f.py(base[i] + v[i])), float(f.py(base[i]))
            x = float(f.px(i)) - bw / 2
            if bottom - top > 0:
                svg.append(f'<rect x="{x:.1f}" y="{top:.2f}" width="{bw:.1f}" height="{bottom - top:.2f}"/>')
        svg.append("</g>")
        base = base + v
    svg += _legend(f, [(label, colour, "box") for label, _, colour in stacks])
    svg.append("</svg>")
    return _figure(svg, caption)


def pmf_chart(*, key: str, title: str, desc: str, caption: str, xs, ps, x0: int, xlabel: str, ylabel: str,
              colour: str = PALETTE[0]) -> str:
    """A probability mass function: bars (or a step outline when there are too many to see), ``x0`` marked."""
    xs = np.asarray(xs, dtype=float)
    ps = np.asarray(ps, dtype=float)
    pad = 0.5 + 0.04 * (xs.max() - xs.min() + 1)
    xa, xb = float(xs.min() - pad), float(xs.max() + pad)
    _, _, xticks = _linear_ticks(xa, xb)
    xticks = [t for t in xticks if xa <= t <= xb and float(t).is_integer()]
    ya, yb, yticks = _linear_ticks(0.0, float(ps.max()))
    f = _Frame((xa, xb), (ya, yb), False)
    svg = _open(key, title, desc) + _axes(f, xticks, yticks, xlabel, ylabel)
    if xs.size <= 160:
        bw = max(1.0, 0.8 * (f.x1 - f.x0) / (xb - xa))
        svg.append(f'<g data-series="pmf" fill="{colour}">')
        for x, p in zip(xs.tolist(), ps.tolist()):
            top, bottom = float(f.py(p)), float(f.py(0.0))
            svg.append(f'<rect x="{float(f.px(x)) - bw / 2:.2f}" y="{top:.2f}" width="{bw:.2f}" '
                       f'height="{max(bottom - top, 0.0):.2f}"/>')
        svg.append("</g>")
    else:  # a step outline: one bar per output would be thinner than a pixel
        half = 0.5 * float(np.min(np.diff(xs)))  # outputs may be bins of several (their centres)
        edges_x = np.repeat(np.r_[xs - half, xs[-1] + half], 2)[1:-1]
        edges_y = np.repeat(ps, 2)
        pts = " L".join(f"{a:.1f},{b:.1f}" for a, b in zip(f.px(edges_x).tolist(), f.py(edges_y).tolist()))
        base = float(f.py(0.0))
        d = f"M{float(f.px(xs[0] - half)):.1f},{base:.1f} L{pts} L{float(f.px(xs[-1] + half)):.1f},{base:.1f} Z"
        svg.append(f'<path data-series="pmf" d="{d}" fill="{colour}" fill-opacity="0.85" stroke="{colour}"/>')
    x = float(f.px(x0))
    svg.append(f'<line data-series="input" x1="{x:.1f}" x2="{x:.1f}" y1="{f.y1}" y2="{f.y0}" stroke="#333" '
               'stroke-width="1.2" stroke-dasharray="4 3"/>')
    svg += _legend(f, [("P(Y = y | x)", colour, "box"), (f"input x = {x0}", "#333", "dash")])
    svg.append("</svg>")
    return _figure(svg, caption)
