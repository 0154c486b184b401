r"""Numeric LDP mechanisms of the literature as exact finite channels on an integer domain ``a..b``.

* :func:`square_wave`: Square Wave (Li, Wang, Lopuhaä-Zwakenberg, Li and
  Škorić, "Estimating Numerical Distributions under Local Differential
  Privacy", SIGMOD 2020), discrete form with the authors' band width;
* :func:`piecewise`: the Piecewise Mechanism (Wang, Xiao, Yang, Zhao, Hu, Lin,
  Yang and Yu, "Collecting and Analyzing Multidimensional Data with Local
  Differential Privacy", ICDE 2019), discretized so that it stays exactly
  unbiased;
* :func:`duchi`: Duchi, Jordan and Wainwright's one-bit mechanism for the mean
  ("Local Privacy and Statistical Minimax Rates", FOCS 2013), on two labels;
* :func:`hybrid`: the Hybrid Mechanism of Wang et al. (ICDE 2019): the
  Piecewise Mechanism with probability ``alpha``, Duchi's otherwise.

Notation: ``k = b - a + 1`` input values, ``h = (k - 1)/2``, ``x_mid = (a + b)/2``,
``u = x - x_mid`` and ``t = u / h`` in ``[-1, 1]`` (the papers' input scale),
``z = e^{eps/2}``.

Each is a dense channel whose every probability ratio between two rows is at
most ``e^eps`` by construction, so it is pure ``eps``-LDP on every range ``H``:
:meth:`SparseChannel.pure_epsilon` returns ``eps`` (up to rounding) for
``k >= 2`` and ``delta_star(eps') > 0`` for any ``eps' < eps``.  All
probabilities come from closed-form log weights normalized by
:class:`~sparseldp.SparseChannel` (exact to its stated rounding bounds).

Unbiased means.  :func:`piecewise`, :func:`duchi` and :func:`hybrid` carry the
papers' unbiased per-report estimators: :func:`report_estimates` gives the
estimate ``x^(y)`` of every output label (``E[x^(Y) | x] = x`` exactly), and
:func:`estimator_variance` / :func:`closed_form_variance` its variance per
input, from the channel matrix and in closed form.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from .._validation import INT64_MAX, INT64_MIN, check_int, check_nonnegative, check_positive
from ..channel import SparseChannel, check_domain, check_entries
from .classic import _dense_parts

__all__ = [
    "square_wave",
    "square_wave_band",
    "piecewise",
    "duchi",
    "hybrid",
    "hybrid_alpha",
    "EPS_STAR",
    "report_estimates",
    "estimator_variance",
    "closed_form_variance",
    "UNBIASED_FAMILIES",
    "ESTIMATOR_SOURCE",
]

#: The Hybrid Mechanism's threshold ``eps*``: below it HM is Duchi's mechanism alone (Wang et al. 2019),
#: ``eps* = log((-5 + 2 (6353 - 405 sqrt(241))^(1/3) + 2 (6353 + 405 sqrt(241))^(1/3)) / 27)``, about 0.61.
EPS_STAR = math.log((-5.0 + 2.0 * (6353.0 - 405.0 * math.sqrt(241.0)) ** (1.0 / 3.0)
                     + 2.0 * (6353.0 + 405.0 * math.sqrt(241.0)) ** (1.0 / 3.0)) / 27.0)

#: Families with an unbiased per-report mean estimator (:func:`report_estimates`).
UNBIASED_FAMILIES = ("piecewise", "duchi", "hybrid")
#: Who published each family's unbiased estimator (how estimates made with it are labelled).
ESTIMATOR_SOURCE = {"piecewise": "Wang et al. 2019", "hybrid": "Wang et al. 2019", "duchi": "Duchi et al. 2013"}

# Largest resolution of the Piecewise Mechanism's output grid (cells per input step).
_RESOLUTION_MAX = 1 << 16


def _log1pexp(v: float) -> float:
    """``log(1 + e^v)`` without overflow."""
    return v + math.log1p(math.exp(-v)) if v > 0 else math.log1p(math.exp(v))


def _check_labels(lo: int, hi: int, what: str) -> None:
    if lo < INT64_MIN or hi > INT64_MAX:
        raise ValueError(f"domain must leave room for the {what} output labels {lo}..{hi} in int64; "
                         "use a domain nearer 0")


def _build(logw: np.ndarray, inputs, outputs, meta) -> SparseChannel:
    k, m = logw.shape
    indptr, indices = _dense_parts(k, m)
    return SparseChannel._from_log_parts(indptr, indices, logw.ravel(), (k, m), inputs, outputs, meta)


# ---------------------------------------------------------------------------
# Square Wave
# ---------------------------------------------------------------------------
def _sw_b(eps: float) -> float:
    r"""The continuous optimal half-width ``b(eps) = (eps e^eps - e^eps + 1) / (2 e^eps (e^eps - 1 - eps))``.

    Below ``eps = 1/2`` numerator and denominator are summed as series of positive terms,
    ``sum_{n>=2} (n - 1) eps^n / n!`` and ``2 e^eps sum_{n>=2} eps^n / n!`` (no cancellation;
    the limit at ``eps = 0`` is ``1/2``); above, the form
    ``(eps - 1 + e^{-eps}) / (2 (e^eps - 1 - eps))``; 0 once ``e^eps`` overflows.
    """
    if eps == 0.0:
        return 0.5
    if eps < 0.5:
        num = den = 0.0
        term = eps  # eps^n / n! for n = 1
        for n in range(2, 30):
            term *= eps / n
            num += (n - 1) * term
            den += term
        return num / (2.0 * math.exp(eps) * den)
    if eps > 700.0:
        return 0.0
    return (eps + math.expm1(-eps)) / (2.0 * (math.expm1(eps) - eps))


def square_wave_band(eps, k) -> int:
    r"""The discrete Square Wave's band half-width: ``floor(b(eps) k)`` (Li et al. 2020).

    ``b(eps) = (eps e^eps - e^eps + 1) / (2 e^eps (e^eps - 1 - eps))`` is the
    continuous optimum for inputs in ``[0, 1]``; on ``k`` values the band is
    ``b(eps) k`` values wide on each side (floor of the double-precision
    product).  Tends to ``floor(k/2)`` as ``eps -> 0`` and to 0 as ``eps`` grows.
    """
    eps = check_nonnegative(eps, "eps")
    k = check_int(k, "k", minimum=1)
    return int(math.floor(_sw_b(eps) * k))


def square_wave(*, eps, domain, band=None) -> SparseChannel:
    r"""Discrete Square Wave on ``a..b`` (Li et al., SIGMOD 2020).

    Outputs ``a - band .. b + band`` (the domain extended by the band on both
    sides, ``m = k + 2 band`` labels):

    .. math::

        Q(y \mid x) = \begin{cases} p = \dfrac{e^\varepsilon}{(2\,\mathrm{band} + 1) e^\varepsilon + k - 1}
                        & |y - x| \le \mathrm{band} \\[1ex]
                        q = p\, e^{-\varepsilon} & \text{otherwise.} \end{cases}

    Derivation from the continuous mechanism (inputs in ``[0, 1]``, outputs in
    ``[-b, 1 + b]``, density ratio ``e^eps`` inside ``|v - v'| <= b``): the
    ``k`` inputs are ``k`` cells of width ``1/k``, so the band of half-width
    ``b`` covers ``b k`` cells on each side; rounding down to ``band = floor(b k)``
    (:func:`square_wave_band`, the authors' choice) gives ``2 band + 1``
    outputs at ``p`` and the other ``k - 1`` at ``q``, and the normalization
    ``(2 band + 1) p + (k - 1) q = 1`` fixes ``p``.  Every column takes only the
    values ``p`` and ``q``, so the channel is exactly ``eps``-LDP on any range;
    ``band = 0`` is k-ary randomized response.  The authors estimate the input
    distribution with EMS (``estimate_frequencies(..., method="ems")``).

    ``band`` (an integer ``>= 0``) overrides the default ``floor(b(eps) k)``.
    """
    eps = check_nonnegative(eps, "eps")
    a, b = check_domain(domain)
    k = b - a + 1
    band = square_wave_band(eps, k) if band is None else check_int(band, "band", minimum=0, maximum=k)
    m = k + 2 * band
    check_entries(k, m, f"domain ({a}, {b}) (the Square Wave is dense over {m} outputs)")
    _check_labels(a - band, b + band, "Square Wave")
    i = np.arange(k, dtype=np.int64)[:, None]
    j = np.arange(m, dtype=np.int64)[None, :]
    # row i (input a + i) puts the weight e^eps on labels a + i - band .. a + i + band, columns i .. i + 2 band
    logw = np.where((j >= i) & (j <= i + 2 * band), eps, 0.0)
    x = np.arange(a, b + 1, dtype=np.int64)
    y = np.arange(a - band, b + band + 1, dtype=np.int64)
    # every row holds the same log weights (2 band + 1 of eps, k - 1 of 0) in another order, so the exact
    # normalizers are equal and every exact log ratio is eps, 0 or -eps: the pure epsilon is eps exactly
    meta = {"family": "square-wave", "param": ("eps", eps), "domain": (a, b), "_built_domain": (a, b), "band": band,
            "_pure_eps_up": eps}
    return _build(logw, x, y, meta)


# ---------------------------------------------------------------------------
# Piecewise Mechanism
# ---------------------------------------------------------------------------
def _pm_parts(eps: float, k: int, s: int, B: int):
    """``(m, Q, P - Q, gamma)`` of the discrete PM with band ``B`` cells and ``s`` cells per input step."""
    m = (k - 1) * s + B
    e = math.exp(-eps)
    den = B + (m - B) * e
    pq = -math.expm1(-eps) / den
    return m, e / den, pq, pq * B * s


def _pm_variance(eps: float, k: int, s: int, B: int, u):
    r"""Variance of the discrete PM's unbiased estimate at ``u = x - x_mid`` (the docstring of :func:`piecewise`)."""
    m, Q, pq, gamma = _pm_parts(eps, k, s, B)
    c = s * np.asarray(u, dtype=float)
    var_v = Q * m * (m * m - 1) / 12.0 + pq * B * (B * B - 1) / 12.0 + pq * B * m * Q * c * c
    return var_v / (gamma * gamma)


def _pm_band(eps: float, k: int, s: int) -> int:
    """The band ``B``: ``floor`` or ``ceil`` of ``(k - 1) s e^{-eps/2}`` (at least 1), whichever has the
    smaller worst-case variance (the larger ``B`` on a tie)."""
    if k == 1:
        return 1
    target = (k - 1) * s * math.exp(-eps / 2.0)
    cands = sorted({max(1, math.floor(target)), max(1, math.ceil(target))}, reverse=True)
    h = (k - 1) / 2.0
    return min(cands, key=lambda B: float(_pm_variance(eps, k, s, B, h)))


def _pm_logw(eps: float, k: int, s: int, B: int) -> np.ndarray:
    m = (k - 1) * s + B
    i = np.arange(k, dtype=np.int64)[:, None]
    j = np.arange(m, dtype=np.int64)[None, :]
    return np.where((j >= i * s) & (j < i * s + B), eps, 0.0)


def _pm_labels(a: int, s: int, B: int, m: int) -> tuple[int, int]:
    lo = a * s - (B - 1) // 2
    return lo, lo + m - 1


def piecewise(*, eps, domain, resolution=1) -> SparseChannel:
    r"""The Piecewise Mechanism (Wang et al., ICDE 2019) discretized to an exact, unbiased finite channel.

    The continuous mechanism maps ``t`` in ``[-1, 1]`` to ``t*`` in ``[-C, C]``,
    ``C = (z + 1)/(z - 1)``, with density ``p = z(z - 1)/(2(z + 1))`` on the
    band ``[l(t), l(t) + C - 1]``, ``l(t) = (C + 1) t / 2 - (C - 1)/2``, and
    ``p e^{-eps}`` elsewhere; ``E[t*] = t`` and
    ``Var[t*] = t^2/(z - 1) + (z + 3)/(3 (z - 1)^2)``.  The band moves by
    ``(C + 1)/(k - 1)`` per input step and is ``C - 1`` long: their ratio is
    ``(C - 1)/(C + 1) = e^{-eps/2}``.

    Discretization.  The output interval is cut into cells so that every
    band edge falls on a cell boundary: the band moves by ``s = resolution``
    cells per input step and is ``B`` cells long, ``m = (k - 1) s + B`` cells
    in all, and the report is the cell.  ``B`` is the floor or the ceiling of
    ``(k - 1) s e^{-eps/2}`` (at least 1), whichever gives the smaller
    worst-case variance; the cell probabilities are ``P`` in the band and
    ``Q = P e^{-eps}`` outside, ``B P + (m - B) Q = 1``:

    .. math::

        Q(j \mid x) = \begin{cases} P & s(x - a) \le j < s(x - a) + B \\ P e^{-\varepsilon} & \text{otherwise,}
        \end{cases} \qquad j = 0, \dots, m - 1.

    Every column takes only the values ``P`` and ``Q``: exactly ``eps``-LDP.
    When ``(k - 1) s e^{-eps/2}`` is an integer this is exactly the paper's
    mechanism on the inputs ``t_x`` followed by reporting the cell of ``t*``
    (cells of width ``w = 2C/m``); otherwise the band is rounded to whole
    cells.

    Labels: cell ``j`` is reported as ``s a - floor((B - 1)/2) + j``; with the
    default ``resolution = 1`` the labels are on the input scale and the band
    of ``x`` is ``x - floor((B - 1)/2) .. x + floor(B/2)``.

    Unbiased estimate (:func:`report_estimates`).  With ``v_j = j - (m - 1)/2``,
    ``E[v_J | x] = gamma u`` exactly, ``gamma = (P - Q) B s``, so
    ``x^ = x_mid + v_J / gamma`` is unbiased, with variance
    (:func:`closed_form_variance`)

    .. math::

        \mathrm{Var}[\hat x \mid x] = \frac{Q \frac{m (m^2 - 1)}{12} + (P - Q) B \frac{B^2 - 1}{12}
              + (P - Q) B\, m Q\, s^2 u^2}{\gamma^2}.

    When the band edges fall on cell boundaries this equals the paper's
    variance minus the within-cell variance: ``h^2 (Var[t*] - w^2/12)``
    (reporting the cell removes the uniform noise inside it), and it
    tends to the paper's ``h^2 Var[t*]`` as ``s`` grows.  ``eps`` must be
    ``> 0`` (at 0 the reports carry no information and no unbiased estimator
    exists).
    """
    eps = check_positive(eps, "eps")
    a, b = check_domain(domain)
    s = check_int(resolution, "resolution", minimum=1, maximum=_RESOLUTION_MAX)
    k = b - a + 1
    B = _pm_band(eps, k, s)
    m = (k - 1) * s + B
    check_entries(k, m, f"domain ({a}, {b}) (the Piecewise Mechanism is dense over {m} outputs)")
    lo, hi = _pm_labels(a, s, B, m)
    _check_labels(lo, hi, "Piecewise Mechanism")
    x = np.arange(a, b + 1, dtype=np.int64)
    y = np.arange(lo, hi + 1, dtype=np.int64)
    # rows are permutations of one another (B log weights eps, m - B zeros): exact pure epsilon eps, as for
    # square_wave
    meta = {"family": "piecewise", "param": ("eps", eps), "domain": (a, b), "_built_domain": (a, b),
            "resolution": s, "B": B, "_pure_eps_up": eps}
    return _build(_pm_logw(eps, k, s, B), x, y, meta)


# ---------------------------------------------------------------------------
# Duchi et al. and the Hybrid Mechanism
# ---------------------------------------------------------------------------
def _duchi_logp(eps: float, k: int) -> np.ndarray:
    """``k x 2`` log probabilities of the labels ``(a, b)`` (normalized)."""
    i = np.arange(k, dtype=float)
    with np.errstate(divide="ignore"):
        li, lj = np.log(i), np.log((k - 1) - i)
    # weights i e^eps + (k - 1 - i) for b and (k - 1 - i) e^eps + i for a; they sum to (k - 1)(e^eps + 1)
    log_norm = math.log(k - 1) + _log1pexp(eps)
    return np.stack([np.logaddexp(lj + eps, li), np.logaddexp(li + eps, lj)], axis=1) - log_norm


def duchi(*, eps, domain) -> SparseChannel:
    r"""Duchi, Jordan and Wainwright's one-bit mechanism for the mean, on the two labels ``a`` and ``b``.

    The paper's mechanism reports ``+-C``, ``C = (e^eps + 1)/(e^eps - 1)``,
    with ``P(+C | t) = 1/2 + t (e^eps - 1)/(2 (e^eps + 1))``; here ``+C`` is
    the label ``b`` and ``-C`` the label ``a`` (no output grid is needed):

    .. math::

        Q(b \mid x) = \frac{(1 + t) e^\varepsilon + (1 - t)}{2 (e^\varepsilon + 1)}, \qquad
        Q(a \mid x) = 1 - Q(b \mid x), \qquad t = \frac{x - x_{mid}}{h}.

    The two ends ``t = -1, 1`` have the ratio ``e^eps`` exactly; nearer
    inputs less, so the pure epsilon on a range ``H < b - a`` is smaller than
    ``eps``.  Unbiased estimate: ``x^(b) = x_mid + h C``, ``x^(a) = x_mid - h C``
    (:func:`report_estimates`), with ``Var[x^ | x] = h^2 (C^2 - t^2)``, the
    paper's formula exactly.  A one-value domain has the one label ``a``.
    ``eps`` must be ``> 0``.
    """
    eps = check_positive(eps, "eps")
    a, b = check_domain(domain)
    k = b - a + 1
    x = np.arange(a, b + 1, dtype=np.int64)
    meta = {"family": "duchi", "param": ("eps", eps), "domain": (a, b), "_built_domain": (a, b)}
    if k == 1:
        return _build(np.zeros((1, 1)), x, [a], meta)
    check_entries(k, 2, f"domain ({a}, {b})")
    return _build(_duchi_logp(eps, k), x, [a, b], meta)


def hybrid_alpha(eps) -> float:
    r"""The Hybrid Mechanism's mixing probability: ``1 - e^{-eps/2}`` for ``eps > eps*``, else 0 (Wang et al.)."""
    eps = check_positive(eps, "eps")
    return -math.expm1(-eps / 2.0) if eps > EPS_STAR else 0.0


def hybrid(*, eps, domain, resolution=1) -> SparseChannel:
    r"""The Hybrid Mechanism (Wang et al., ICDE 2019) as a finite channel.

    With probability ``alpha = 1 - e^{-eps/2}`` (when ``eps > eps*``, about
    0.61; else ``alpha = 0``, :func:`hybrid_alpha`) the report is the
    discrete Piecewise Mechanism's (:func:`piecewise`, same ``resolution``),
    otherwise Duchi et al.'s (:func:`duchi`).  The report says which branch
    made it: the PM labels ``L0 .. L1`` of :func:`piecewise`, and Duchi's two
    outputs as the labels ``L0 - 1`` (``-C``) and ``L1 + 1`` (``+C``).  Each
    column is one branch's column scaled by its branch probability, so the
    ratio of two rows is still at most ``e^eps``: exactly ``eps``-LDP.  With
    ``alpha = 0`` the channel is :func:`duchi`'s (labels ``a``, ``b``).

    Unbiased estimate: each branch's own (:func:`report_estimates`), so
    ``Var[x^ | x] = alpha Var_PM(x) + (1 - alpha) Var_Duchi(x)``.  For the
    continuous mechanism the ``t^2`` terms cancel (``alpha/(z - 1) = 1/z``) and
    the variance is ``h^2 [(z + 3)/(3 z (z - 1)) + (e^eps + 1)^2/(z (e^eps - 1)^2)]``
    for every input (the paper's worst case); the discretization subtracts
    ``alpha h^2 w^2/12`` where the band edges fall on cell boundaries.
    """
    eps = check_positive(eps, "eps")
    a, b = check_domain(domain)
    s = check_int(resolution, "resolution", minimum=1, maximum=_RESOLUTION_MAX)
    k = b - a + 1
    alpha = hybrid_alpha(eps)
    x = np.arange(a, b + 1, dtype=np.int64)
    if alpha == 0.0 or k == 1:
        meta = {"family": "hybrid", "param": ("eps", eps), "domain": (a, b), "_built_domain": (a, b),
                "resolution": s, "alpha": 0.0}
        if k == 1:
            return _build(np.zeros((1, 1)), x, [a], meta)
        return _build(_duchi_logp(eps, k), x, [a, b], meta)
    B = _pm_band(eps, k, s)
    m = (k - 1) * s + B
    check_entries(k, m + 2, f"domain ({a}, {b}) (the Hybrid Mechanism is dense over {m + 2} outputs)")
    lo, hi = _pm_labels(a, s, B, m)
    _check_labels(lo - 1, hi + 1, "Hybrid Mechanism")
    # normalized PM row: e^eps / (B e^eps + m - B) = 1 / (B + (m - B) e^{-eps}) in the band
    pm = _pm_logw(eps, k, s, B) - eps - math.log(B + (m - B) * math.exp(-eps))
    du = _duchi_logp(eps, k) - eps / 2.0  # log(1 - alpha) = -eps/2
    logw = np.concatenate([du[:, :1], pm + math.log(alpha), du[:, 1:]], axis=1)
    y = np.arange(lo - 1, hi + 2, dtype=np.int64)
    meta = {"family": "hybrid", "param": ("eps", eps), "domain": (a, b), "_built_domain": (a, b), "resolution": s,
            "B": B, "alpha": alpha}
    return _build(logw, x, y, meta)


# ---------------------------------------------------------------------------
# unbiased mean estimators
# ---------------------------------------------------------------------------
def _geometry(channel):
    fam = getattr(channel, "family", None)
    if fam not in UNBIASED_FAMILIES or not isinstance(channel, SparseChannel):
        raise ValueError(f"channel must be built by piecewise(), duchi() or hybrid() (families "
                         f"{', '.join(UNBIASED_FAMILIES)}); got family {fam!r}")
    # the constructors above record their geometry with the channel (its metadata); the domain it was
    # built on survives a restriction of its rows (to_channel), which keeps every output
    meta = channel._meta
    (_, eps), (a, b) = meta["param"], meta.get("_built_domain", meta["domain"])
    return fam, eps, a, b, meta


def _pm_estimates(eps, a, b, s, B):
    k = b - a + 1
    m, _, _, gamma = _pm_parts(eps, k, s, B)
    return (a + b) / 2.0 + (np.arange(m) - (m - 1) / 2.0) / gamma


def _duchi_estimates(eps, a, b):
    h = (b - a) / 2.0
    c = 1.0 / math.tanh(eps / 2.0)
    return np.array([(a + b) / 2.0 - h * c, (a + b) / 2.0 + h * c])


def report_estimates(channel) -> np.ndarray:
    r"""The papers' unbiased per-report estimates ``x^(y)``, one per label of ``channel.outputs`` (same order).

    For :func:`piecewise`, :func:`duchi` and :func:`hybrid` channels (see their
    docstrings): ``sum_y Q(y | x) x^(y) = x`` for every input.  The mean of
    ``n`` reports' estimates is an unbiased estimate of the inputs' mean,
    with variance ``(1/n^2) sum_i Var[x^ | x_i]`` (:func:`estimator_variance`).
    A one-value domain ``a..a`` has the estimate ``a``.  A channel restricted
    to part of its inputs (``to_channel``) keeps its outputs and their
    estimates.
    """
    fam, eps, a, b, meta = _geometry(channel)
    if a == b:
        return np.full(channel.n_outputs, float(a))
    if fam == "duchi" or meta.get("alpha") == 0.0:
        return _duchi_estimates(eps, a, b)
    pm = _pm_estimates(eps, a, b, meta["resolution"], meta["B"])
    if fam == "piecewise":
        return pm
    return np.concatenate([_duchi_estimates(eps, a, b)[:1], pm, _duchi_estimates(eps, a, b)[1:]])


# Stored entries per block of estimator_variance.
_VAR_BLOCK = 1 << 20


def estimator_variance(channel) -> np.ndarray:
    r"""``Var[x^(Y) | x]`` for every input (order of ``channel.inputs``), from the channel matrix.

    ``sum_y Q(y|x) (x^(y) - x)^2 - (E[x^ | x] - x)^2`` (the bias term is 0 up to
    rounding); independent of the closed forms of :func:`closed_form_variance`.
    ``O(nnz)`` time over the stored entries, taken in blocks of about
    :data:`_VAR_BLOCK` of them, so the extra memory stays a few tens of MB even
    for a Piecewise channel stored densely (``5000`` values: ``4 x 10^7`` entries,
    where a dense copy and its temporaries peaked near 1 GB).
    """
    est = report_estimates(channel)
    M = sp.csr_array(channel.matrix)
    x = channel.inputs.astype(float)
    k = M.shape[0]
    out = np.empty(k)
    # row blocks of about _VAR_BLOCK stored entries each
    cuts = np.searchsorted(M.indptr, np.arange(_VAR_BLOCK, M.nnz, _VAR_BLOCK))
    bounds = np.unique(np.clip(np.concatenate(([0], cuts, [k])), 0, k)).tolist()
    for lo, hi in zip(bounds, bounds[1:]):
        a, b = int(M.indptr[lo]), int(M.indptr[hi])
        rows = np.repeat(np.arange(hi - lo), np.diff(M.indptr[lo:hi + 1]))
        q, e = M.data[a:b], est[M.indices[a:b]]
        dev = e - x[lo:hi][rows]
        second = np.bincount(rows, q * dev * dev, minlength=hi - lo)
        bias = np.bincount(rows, q * e, minlength=hi - lo) - x[lo:hi]
        out[lo:hi] = second - bias * bias
    return out


def closed_form_variance(channel) -> np.ndarray:
    """The variance of :func:`report_estimates` per input in closed form (the constructors' docstrings)."""
    fam, eps, a, b, meta = _geometry(channel)
    k = b - a + 1
    u = channel.inputs.astype(float) - (a + b) / 2.0
    if k == 1:
        return np.zeros(1)
    h = (k - 1) / 2.0
    duchi_var = h * h / math.tanh(eps / 2.0) ** 2 - u * u
    if fam == "duchi" or meta.get("alpha") == 0.0:
        return duchi_var
    pm_var = _pm_variance(eps, k, meta["resolution"], meta["B"], u)
    if fam == "piecewise":
        return pm_var
    alpha = meta["alpha"]
    return alpha * pm_var + (1.0 - alpha) * duchi_var
