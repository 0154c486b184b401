"""render_estimate: the picture behind ``sparseldp estimate --plot``.

Formats and determinism on the bytes; what is drawn (axis labels, title,
legend, bars or steps, band or error bar) on the Figure itself, captured
as it is saved.
"""

import re
import struct

import numpy as np
import pytest
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.patches import StepPatch

from sparseldp.estimation import MeanEstimate
from sparseldp.figures import render_estimate

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

AGES = np.arange(100)
_BIMODAL = 0.6 * np.exp(-0.5 * ((AGES - 30) / 8.0) ** 2) + 0.4 * np.exp(-0.5 * ((AGES - 72) / 6.0) ** 2)
BIMODAL = _BIMODAL / _BIMODAL.sum()
MEAN = float(BIMODAL @ AGES)


def _mean(value, half_width, n=50_000, confidence=0.95):
    return MeanEstimate(value, stderr=half_width / 1.96, ci=(value - half_width, value + half_width),
                        confidence=confidence, method="em-fisher", n=n)


@pytest.fixture
def saved(monkeypatch):
    """The Figure objects that render_estimate saves, in order."""
    figures = []
    original = Figure.savefig

    def spy(self, *args, **kwargs):
        figures.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    return figures


def _legend_texts(fig):
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def test_png_and_pdf_bytes_are_deterministic():
    kwargs = dict(mean=_mean(MEAN, 0.5), column="age", guarantee="(eps = 1, delta = 1e-06)-LDP, H = 5",
                  method="ems", n=50_000, true_p=BIMODAL)
    png = render_estimate(AGES, BIMODAL, **kwargs)
    assert png.startswith(PNG_SIGNATURE)
    width, height = struct.unpack(">II", png[16:24])  # IHDR: 8 x 4.8 inches at 130 dpi
    assert (width, height) == (1040, 624)
    assert render_estimate(AGES, BIMODAL, **kwargs) == png
    pdf = render_estimate(AGES, BIMODAL, fmt="pdf", **kwargs)
    assert pdf.startswith(b"%PDF")
    assert render_estimate(AGES, BIMODAL, fmt="pdf", **kwargs) == pdf
    assert b"CreationDate" not in pdf


@pytest.mark.parametrize("fmt", ["svg", "PNG", "", None, 3])
def test_bad_fmt_names_it(fmt):
    with pytest.raises(ValueError, match=r"fmt must be 'png' or 'pdf'; got " + re.escape(repr(fmt))):
        render_estimate(AGES, BIMODAL, fmt=fmt)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(values=AGES, p=BIMODAL[:-1]), ValueError, r"p must have one entry per value \(100\); got 99"),
        (dict(values=AGES, p=-BIMODAL), ValueError, "p must be >= 0"),
        (dict(values=AGES, p=np.full(100, np.nan)), ValueError, "p must contain finite numbers"),
        (dict(values=[], p=[]), ValueError, "values must be a nonempty 1-D array"),
        (dict(values=AGES, p=["a"] * 100), TypeError, "p must be a 1-D array of real numbers"),
        (dict(values=AGES, p=BIMODAL, true_p=BIMODAL[:3]), ValueError, "true_p must have one entry per value"),
        (dict(values=AGES, p=BIMODAL, n=2.5), TypeError, "n must be an integer or None"),
    ],
)
def test_bad_inputs(kwargs, exc, match):
    values, p = kwargs.pop("values"), kwargs.pop("p")
    with pytest.raises(exc, match=match):
        render_estimate(values, p, **kwargs)


def test_wide_domain_is_a_step_line_with_labels_title_and_error_bar(saved):
    # a 95% interval of width 0.2 on 0..99 is about 2 pixels: drawn as an error bar
    render_estimate(AGES, BIMODAL, mean=_mean(MEAN, 0.1), column="age", method="ems", n=1_234_567,
                    guarantee="(eps = 1, delta = 1e-06)-LDP, H = 5", true_p=BIMODAL)
    (fig,) = saved
    ax = fig.axes[0]
    assert ax.get_xlabel() == "age" and ax.get_ylabel() == "estimated share"
    title = ax.get_title(loc="left")
    assert "1,234,567 reports" in title and "EMS" in title and "(eps = 1, delta = 1e-06)-LDP, H = 5" in title
    assert any(isinstance(a, StepPatch) for a in ax.patches)
    assert not any(isinstance(c, BarContainer) for c in ax.containers)
    assert any(isinstance(c, ErrorbarContainer) for c in ax.containers)
    legend = _legend_texts(fig)
    assert "true share" in legend
    assert any(t.startswith("mean ") and "95% CI" in t for t in legend)


def test_small_domain_is_bars_with_a_visible_band(saved):
    values = np.arange(1, 6)
    p = np.array([0.1, 0.25, 0.3, 0.2, 0.15])
    render_estimate(values, p, mean=_mean(3.1, 0.3, n=3000), column="satisfaction", n=3000)
    (fig,) = saved
    ax = fig.axes[0]
    assert any(isinstance(c, BarContainer) for c in ax.containers)
    assert not any(isinstance(c, ErrorbarContainer) for c in ax.containers)
    assert list(ax.get_xticks()) == [1, 2, 3, 4, 5]
    assert ax.get_xlabel() == "satisfaction"
    assert any("2.80 to 3.40" in t for t in _legend_texts(fig))


def test_without_mean_and_on_a_one_value_domain(saved):
    assert render_estimate(AGES, BIMODAL, mean=None).startswith(PNG_SIGNATURE)
    exact = MeanEstimate(5.0, stderr=0.0, ci=(5.0, 5.0), confidence=0.95, method="one-value-domain", n=10)
    assert render_estimate([5], [1.0], mean=exact, column="rating", n=10).startswith(PNG_SIGNATURE)
    no_mean, one = saved
    assert _legend_texts(no_mean) == ["estimated share"]
    assert "mean 5 (exact)" in _legend_texts(one)
    assert one.axes[0].get_xlabel() == "rating"


def test_dollar_in_column_name_is_literal(saved):
    render_estimate(AGES, BIMODAL, column="income_$", method="inversion")
    (fig,) = saved
    fig.canvas.draw()  # mathtext would fail to parse an unbalanced $
    assert fig.axes[0].get_xlabel() == r"income_\$"


def test_per_value_intervals_are_drawn_and_checked():
    from sparseldp.figures import render_estimate

    values = np.arange(0, 60)
    p = np.full(60, 1 / 60)
    png = render_estimate(values, p, ci=(p * 0.9, p * 1.1), fmt="png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    small = np.arange(1, 6)
    q = np.full(5, 0.2)
    assert render_estimate(small, q, ci=(q - 0.01, q + 0.01)) != render_estimate(small, q)
    with pytest.raises(TypeError, match="ci must be a pair"):
        render_estimate(small, q, ci=q)
    with pytest.raises(ValueError, match="ci low must have one entry per value"):
        render_estimate(small, q, ci=(q[:3], q))


@pytest.mark.parametrize("values", [AGES, np.arange(0, 200, 2)])  # consecutive (stairs) and gapped (steps)
def test_with_intervals_the_band_is_the_only_shaded_area(saved, values):
    # a filled area under the estimate in the band's colour would read as the band itself
    from matplotlib.collections import PolyCollection

    p = BIMODAL
    render_estimate(values, p, ci=(0.9 * p, 1.1 * p))
    render_estimate(values, p)
    with_band, without = saved
    filled = lambda fig: [a for a in fig.axes[0].get_children()  # noqa: E731
                          if isinstance(a, PolyCollection) or (isinstance(a, StepPatch) and a.get_fill())]
    band = filled(with_band)
    assert len(band) == 1 and "interval per value" in _legend_texts(with_band)
    render_estimate(values, p, ci=(0.9 * p, 1.1 * p), ci_label="95% interval per value (robust)")
    assert "95% interval per value (robust)" in _legend_texts(saved[-1])
    (verts,) = [path.vertices for path in band[0].get_paths()]
    assert verts[:, 1].min() >= 0.9 * p.min() - 1e-15  # it spans low..high, not 0..estimate
    assert len(filled(without)) == 1  # no band: the area under the estimate is shaded


@pytest.mark.parametrize("values", [AGES, np.arange(0, 200, 2), np.arange(1, 6)])  # stairs, steps, bars
def test_the_likelihood_ratio_interval_is_an_outline_beside_the_band(saved, values):
    p = BIMODAL if values.size == AGES.size else np.full(values.size, 1 / values.size)
    render_estimate(values, p, ci=(0.9 * p, 1.1 * p), lr=(0.5 * p, 1.5 * p + 0.01),
                    lr_label="95% likelihood-ratio interval per value")
    (fig,) = saved
    ax = fig.axes[0]
    assert "95% likelihood-ratio interval per value" in _legend_texts(fig)
    if values.size <= 40:  # bars: a second set of error bars, beside the bootstrap's
        bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert len(bars) == 2
        segments = bars[1].lines[2][0].get_segments()
        assert all(seg[0][0] == pytest.approx(x + 0.25) for seg, x in zip(segments, values))
        # each from low to high
        ends = np.array([sorted((seg[0][1], seg[1][1])) for seg in segments])
        np.testing.assert_allclose(ends, np.stack([0.5 * p, 1.5 * p + 0.01], axis=1))
        # an interval that excludes the estimate is drawn as it is, not stretched to it
        render_estimate(values, p, lr=(1.2 * p, 1.5 * p))
        (bars,) = [c for c in saved[-1].axes[0].containers if isinstance(c, ErrorbarContainer)]
        low = min(min(seg[0][1], seg[1][1]) for seg in bars.lines[2][0].get_segments())
        assert low == pytest.approx(1.2 * p.min())
    else:  # an unfilled line at each end, in the interval's own colour
        from matplotlib.colors import to_hex

        from sparseldp.figures.estimate import _C_LR

        lines = [a for a in ax.get_children() if isinstance(a, StepPatch) and not a.get_fill()
                 and to_hex(a.get_edgecolor()) == _C_LR]
        lines += [a for a in ax.get_lines() if to_hex(a.get_color()) == _C_LR]
        assert len(lines) == 2
    assert ax.get_ylim()[1] >= float((1.5 * p + 0.01).max())
    with pytest.raises(TypeError, match="lr must be a pair"):
        render_estimate(values, p, lr=p)
    with pytest.raises(ValueError, match="lr high must have one entry per value"):
        render_estimate(values, p, lr=(p, p[:2]))


@pytest.mark.parametrize("values", [AGES, np.arange(1, 6)])  # steps and bars
def test_a_likelihood_ratio_outline_far_above_the_estimate_gets_a_panel_of_its_own(saved, values):
    p = BIMODAL if values.size == AGES.size else np.full(values.size, 1 / values.size)
    high = 5.0 * p + 0.05  # far above: on one scale the estimate would fill a sixth of the axes
    render_estimate(values, p, ci=(0.9 * p, 1.1 * p), lr=(0.0 * p, high), true_p=p, mean=_mean(float(p @ values), 0.5),
                    lr_label="95% likelihood-ratio interval per value")
    (fig,) = saved
    assert len(fig.axes) == 2
    top, below = fig.axes
    assert top.get_ylim()[1] < 2.0 * float(1.1 * p.max())  # the estimate keeps its scale
    assert below.get_ylim()[1] >= float(high.max())
    assert below.get_shared_x_axes().joined(top, below)
    assert "95% likelihood-ratio interval per value (below)" in _legend_texts(fig)
    assert below.get_xlabel() and not top.get_xlabel()
    from matplotlib.colors import to_hex

    from sparseldp.figures.estimate import _C_LR

    if values.size <= 40:
        assert not [c for c in top.containers if isinstance(c, ErrorbarContainer)
                    and to_hex(c.lines[2][0].get_color()[0]) == _C_LR]
        assert any(isinstance(c, ErrorbarContainer) for c in below.containers)
    else:
        def outlines(ax):
            return [a for a in ax.get_children() if isinstance(a, StepPatch) and not a.get_fill()
                    and to_hex(a.get_edgecolor()) == _C_LR]
        assert len(outlines(below)) == 2 and not outlines(top)
    # just under the threshold: one panel, scaled to the outline
    render_estimate(values, p, ci=(0.9 * p, 1.1 * p), lr=(0.0 * p, 1.9 * 1.1 * p))
    assert len(saved[-1].axes) == 1
