"""Certificates: rigorous bounds on ``delta*`` of the realized distributions.

:class:`Certificate` is the result; :func:`certify` (radius mechanisms) and
:func:`certify_channel` (finite channels) compute it from the integer counts
of :mod:`.quantize` and :mod:`.channel_tables`: leakage summed exactly,
``e^eps`` bracketed by doubles (:func:`_exp_bounds`), each overlap term
bounded in double arithmetic with a proven error bound (:func:`_term_bounds`)
and rounded outward to whole ``2^-62`` units, the units summed exactly, and
the totals rounded outward to doubles (:func:`_certificate`).  See "What is
certified" in :mod:`sparseldp.sampling`.
"""

from __future__ import annotations

import decimal
import math
import sys
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .._validation import check_int, check_nonnegative
from .channel_tables import ChannelTables, channel_sampling_tables
from .quantize import _TWO64, MechanismTables, _cumsum, _is_channel, sampling_tables

# Realized vs ideal differences below these are "do not matter" (see certify).
_ABS_TOL = 1e-12
_REL_TOL = 1e-2


@dataclass(frozen=True)
class Certificate:
    """A rigorous statement about the *realized* (quantized) distribution.

    Attributes
    ----------
    eps, H
        The target the certificate is for.
    delta_star_upper : float
        Rigorous upper bound on ``max`` over neighbouring pairs (separation
        ``1..H``) of the hockey-stick divergence ``sum_y [P(y|x) - e^eps P(y|x')]_+``
        of the realized distribution; never below its exact value.
    delta_star_lower : float
        Rigorous lower bound on the same quantity (at the worst pair).
    delta_star_ideal : float or None
        The floating-point ``delta_star`` of the ideal mechanism (channel: its
        own ``delta_star`` if it has one).
    worst_pair : tuple of int
        The pair ``(x, x')`` attaining the upper bound (``(0, h)`` on Z).
    max_pmf_error : float
        ``max |realized - ideal|`` over all probabilities.
    floored : int
        Number of probabilities below ``2^-64`` that were raised to ``2^-64``.
    method : str
        How the bound was obtained.
    warning : str or None
        Set when the realized ``delta_star`` provably differs from the ideal
        one by more than 1e-12 absolutely or 1% relatively (for instance an
        ideal delta* below ``2^-64``, the smallest leakage any realized window
        can have).
    """

    eps: float
    H: int | None
    delta_star_upper: float
    delta_star_lower: float
    delta_star_ideal: float | None
    worst_pair: tuple
    max_pmf_error: float
    floored: int
    method: str
    warning: str | None

    @property
    def exact(self) -> bool:
        """True when the bracket ``[lower, upper]`` pins the realized delta* to 1e-12."""
        return self.delta_star_upper - self.delta_star_lower <= _ABS_TOL

    @property
    def delta_star(self) -> float:
        """The safe end: :attr:`delta_star_upper`."""
        return self.delta_star_upper


_U = 2.0**-53
_U_SAFE = 2.0**-53 + 2.0**-93  # u (1 + 2^-40) >= u (1 + u)^3
_C2 = 2.0 + 2.0**-40  # >= 2 + u
_ELL_CAP = 2.0**70  # e^eps beyond this: every overlap term is negative anyway


def _exp_bounds(eps: float) -> tuple[float, float]:
    """Doubles ``lo <= e^eps <= hi`` (rigorous), both capped at ``2^70``.

    The cap keeps the double arithmetic finite.  It is harmless in both
    directions: every partner count is >= 1 and every count <= 2^64 < 2^70, so
    with ``ell >= 2^70`` each overlap term ``c - ell c'`` is negative, for the
    capped value and for the true ``e^eps`` alike.

    ``decimal``'s ``exp`` is correctly rounded to nearest, so its neighbours one
    unit in the last place away bracket ``e^eps``; converting those to double
    with a directed correction keeps the bracket.
    """
    if eps == 0:
        return 1.0, 1.0
    if eps >= 49.0:  # e^49 > 2^70: both ends capped (decimal exp would overflow for huge eps)
        return _ELL_CAP, _ELL_CAP
    ctx = decimal.Context(prec=40, Emin=decimal.MIN_EMIN, Emax=decimal.MAX_EMAX)
    v = ctx.exp(decimal.Decimal(eps))
    lo_d, hi_d = v.next_minus(ctx), v.next_plus(ctx)
    lo = _float_down(Fraction(lo_d))
    hi = _float_up(Fraction(hi_d))
    return min(lo, _ELL_CAP), min(hi, _ELL_CAP)


def _float_down(q: Fraction) -> float:
    try:
        f = float(q)
    except OverflowError:
        return sys.float_info.max
    return math.nextafter(f, -math.inf) if Fraction(f) > q else f


def _float_up(q: Fraction) -> float:
    try:
        f = float(q)
    except OverflowError:
        return math.inf
    return math.nextafter(f, math.inf) if Fraction(f) < q else f


def _term_bounds(a, b, ell, *, upper: bool) -> np.ndarray:
    r"""Per-term integers ``Y_k`` (units of 4 counts) bracketing ``[c_k - ell c'_k]_+``.

    ``a = fl(c_k)``, ``b = fl(c'_k)`` are the counts rounded to nearest double
    (exactly what ``float(int)`` does), ``ell`` a double.  Upper: ``4 Y_k >=
    [c_k - ell c'_k]_+``; lower: ``4 Y_k <= [c_k - ell c'_k]_+``.

    Proof.  With round-to-nearest and no underflow/overflow (all values are 0
    or >= 1 and <= 2^70 * 2^64), ``x = fl(x)(1 + d)``, ``|d| <= u = 2^-53``.
    Let ``p = fl(ell b)``, ``d_k = fl(a - p)``, ``tau = c_k - ell c'_k``.  Then
    ``|a - c_k| <= u a``, ``|p - ell b| <= u p``, ``ell |b - c'_k| <= ell u b
    <= u (1+u) p`` and ``|d_k - (a - p)| <= u |d_k|``, so

    ``|tau - d_k| <= e_k := u (|d_k| + a + (2 + u) p)``.

    The code evaluates ``e'_k = fl(fl(fl(|d_k| + a) + fl(C2 p)) U)`` with
    ``C2 = 2 + 2^-40 >= 2 + u`` and ``U = u (1 + 2^-40) >= u (1+u)^3``; each of
    the three roundings of nonnegative values loses at most a factor
    ``1/(1+u)``, so ``e'_k >= e_k``.  Upper: ``tau <= d_k + e'_k =: v``.  With
    ``z = fl(v)``, round-to-nearest gives ``v <= z + ulp/2 <= nextafter(z, +inf)``
    (and ``z = 0`` only if ``v = 0``: every nonzero value here is >= 2^-53,
    far from underflow; ``z < 0`` means ``v <= 0``).  ``nextafter`` is exact, so
    is the division by 4, and the ceiling only rounds up.  Lower is the mirror
    image: ``tau >= d_k - e'_k >= nextafter(fl(d_k - e'_k), -inf)`` and the
    floor rounds down.  Because ``[.]_+`` is monotone the bounds carry over to
    the positive parts.  Every ``Y_k <= 2^62 (1 + 2^-40)`` is an
    integer-valued double below ``2^63``, so the int64 conversion and the
    int64 sum (of at most ~2^20 terms) are exact.

    Size of the slack: on the terms with ``v > 0`` we have ``p <= a (1+3u)``,
    so ``e_k <= 3 u a (1 + 4u)``, plus one ulp ``<= 2 u a`` from ``nextafter``
    and at most 4 counts from the ceiling: in total below ``5 u = 5.6e-16``
    times the row mass plus ``s 2^-62``, whatever ``eps``.
    """
    p = ell * b
    d = a - p
    e = (np.abs(d) + a + _C2 * p) * _U_SAFE
    if upper:
        z = np.nextafter(d + e, np.inf)
        z = np.maximum(z, 0.0) * 0.25
        return np.ceil(z).astype(np.int64)
    z = np.nextafter(d - e, -np.inf)
    z = np.maximum(z, 0.0) * 0.25
    return np.floor(z).astype(np.int64)


def _hockey_bounds_mech(tab: MechanismTables, ell_lo: float, ell_hi: float, H: int):
    """``(max_h upper_h, argmax h, lower at that h)`` as exact integers (counts)."""
    t = tab.t
    s = 2 * t + 1
    cf = np.array([float(c) for c in tab.counts])  # float(int) rounds to nearest
    prefix = list(_cumsum(tab.counts))
    best, best_h = -1, 1
    for h in range(1, min(H, 2 * t) + 1):
        # leakage k = -t..h-t-1 (exact integers); overlap k = h-t..t, partner k-h
        val = prefix[h - 1] + 4 * int(_term_bounds(cf[h:], cf[: s - h], ell_lo, upper=True).sum())
        if val > best:
            best, best_h = val, h
    h = best_h
    low = prefix[h - 1] + 4 * int(_term_bounds(cf[h:], cf[: s - h], ell_hi, upper=False).sum())
    return best, best_h, low


def _warning(lower: float, upper: float, ideal: float | None, max_err: float, floored: int) -> str | None:
    """A message when the realized delta* *provably* differs from the ideal one in a way that matters.

    The realized value lies in ``[lower, upper]``; it matters when it is
    certainly more than 1e-12 away from the ideal value, or certainly more than
    1% away relatively (e.g. a tiny ideal delta* below the ``2^-64`` floor that
    any realized leakage has: one count out of ``2^64``).
    """
    if ideal is None:
        return None
    matters = (
        lower - ideal > _ABS_TOL
        or ideal - upper > _ABS_TOL
        or lower > ideal * (1.0 + _REL_TOL)
        or upper < ideal * (1.0 - _REL_TOL)
    )
    if not matters:
        return None
    why = (
        f"{floored} probabilities below 2^-64 were raised to 2^-64"
        if floored
        else f"quantization to multiples of 2^-64 moved probabilities by up to {max_err:.3g}"
    )
    return (
        f"the realized (sampled) distribution's delta* is in [{lower:.6g}, {upper:.6g}], "
        f"the ideal mechanism's delta* is {ideal:.6g}: {why}; "
        f"rely on delta_star_upper, not on the ideal value"
    )


def certify(mechanism, eps, H) -> Certificate:
    r"""Certify ``delta*(eps; H)`` of the distribution :func:`sample` actually draws.

    For the realized counts ``c_k`` (symmetric, so both orders of a pair agree,
    docs/paper.md, "delta* and ordered pairs"),

    .. math::

        \delta^{real}_h(\varepsilon) = 2^{-64}\Big[\sum_{k=-t}^{h-t-1} c_k
            + \sum_{k=h-t}^{t} [c_k - e^{\varepsilon} c_{k-h}]_+\Big]

    (the realized counterpart of Theorems 3 and 9) and exactly 1 for
    ``h > 2t``.  The leakage sum is computed in exact integers.  For the
    overlap, ``e^eps`` is replaced by a double ``ell <= e^eps`` (from a
    correctly rounded 40-digit decimal ``exp``, moved one unit outward, then
    rounded down to double), which can only increase each positive part; each
    term is then bounded above in double arithmetic with a proven error bound
    and rounded up to a whole number of 4-count units (:func:`_term_bounds`),
    and the units are summed in exact integers.  The maximum over
    ``1 <= h <= H`` of these integers, divided by ``2^64`` and rounded up to a
    double, is ``delta_star_upper``.  The same computation with
    ``ell >= e^eps`` and rounding down at the worst ``h`` gives
    ``delta_star_lower``.  Total slack below ``5.6e-16 + s 2^-62``;
    cost O(H s) vectorized (about a second for s = 20001, H = 3000).

    Parameters
    ----------
    mechanism : SparseLaplace or SparseGaussian
        (a finite channel is handed to :func:`certify_channel`)
    eps : float >= 0
    H : int >= 1
        Privacy range (Definition 7).
    """
    if _is_channel(mechanism):
        return certify_channel(mechanism, eps, H)
    tab = sampling_tables(mechanism)
    eps = check_nonnegative(eps, "eps")
    H = check_int(H, "H", minimum=1)
    t = tab.t
    ell_lo, ell_hi = _exp_bounds(eps)
    if H > 2 * t:
        # h = 2t + 1: disjoint windows, delta = 1 exactly
        upper_n = lower_n = _TWO64
        worst = 2 * t + 1
    else:
        upper_n, worst, lower_n = _hockey_bounds_mech(tab, ell_lo, ell_hi, H)
    return _certificate(
        eps, H, upper_n, lower_n, float(mechanism.delta_star(eps, H)), (0, int(worst)), tab,
        "exact integer counts c_k/2^64; leakage summed exactly; overlap with e^eps bounded "
        "outward (decimal exp, directed to double) and per-term double arithmetic with a proven "
        "error bound, rounded outward to 2^-62 units and summed exactly",
    )


def _certificate(eps, H, upper_n, lower_n, ideal, worst, tab, method) -> Certificate:
    """Round the exact integer bounds (units of 2^-64) outward and package them."""
    upper = min(_float_up(Fraction(upper_n, _TWO64)), 1.0)
    lower = min(_float_down(Fraction(lower_n, _TWO64)), upper)
    return Certificate(
        eps=eps,
        H=H,
        delta_star_upper=upper,
        delta_star_lower=lower,
        delta_star_ideal=ideal,
        worst_pair=worst,
        max_pmf_error=tab.max_pmf_error,
        floored=tab.floored,
        method=method,
        warning=_warning(lower, upper, ideal, tab.max_pmf_error, tab.floored),
    )


# Pairs evaluated together in certify_channel: bounds working memory.
_PAIR_ENTRIES = 1 << 20


def _pair_bounds(tab: ChannelTables, keys, ncols, r1, r2, ell, *, upper: bool):
    """Exact integers bracketing ``sum_y [c_{r1}(y) - ell c_{r2}(y)]_+`` per pair (in counts).

    Outputs of ``r1`` that ``r2`` cannot produce (support leakage) add their
    counts exactly; the others add ``4 Y`` from :func:`_term_bounds`.  Each
    count is split as ``4 (c >> 2) + (c & 3)`` so that both kinds sum in int64
    (per pair at most ``2^62`` plus the slack) without rounding.
    """
    lens = tab.indptr[r1 + 1] - tab.indptr[r1]
    total = int(lens.sum())
    seg_start = np.cumsum(lens) - lens
    e = np.repeat(tab.indptr[r1] - seg_start, lens) + np.arange(total, dtype=np.int64)
    cols = tab.indices[e]
    r2e = np.repeat(r2, lens)
    if tab.banded:
        # every row's outputs are one run of columns: locate by arithmetic
        rel = cols - tab.first[r2e]
        len2 = tab.indptr[r2e + 1] - tab.indptr[r2e]
        found = (rel >= 0) & (rel < len2)
        pos = tab.indptr[r2e] + np.clip(rel, 0, len2 - 1)
    else:
        q = r2e * ncols + cols
        pos = np.minimum(np.searchsorted(keys, q), keys.size - 1)
        found = keys[pos] == q
    b = np.where(found, tab.cf[pos], 0.0)
    units = np.where(found, _term_bounds(tab.cf[e], b, ell, upper=upper), tab.quarter[e])
    rem = np.where(found, 0, tab.rem4[e])
    u_sum = np.add.reduceat(units, seg_start).astype(object)
    r_sum = np.add.reduceat(rem, seg_start).astype(object)
    return 4 * u_sum + r_sum


def certify_channel(channel, eps, H) -> Certificate:
    r"""Certify ``delta*`` of the realized rows of a finite channel (Theorems 2 and 8).

    ``delta* = max_{x != x', |x - x'| <= H} sum_y [P(y|x) - e^eps P(y|x')]_+``
    over ordered pairs of inputs of ``channel.inputs`` (clipped windows are not
    symmetric, so both orders are evaluated; pairs whose rows are equal up to a
    shift of the columns are evaluated once), with ``P`` the realized counts
    ``c / 2^64`` of :func:`channel_sampling_tables`.  Leakage (outputs the
    partner cannot produce) is summed exactly; overlap terms are bounded
    outward exactly as in :func:`certify`; the slack is below
    ``5.6e-16 + (row length) 2^-62``.  ``delta_star_ideal`` is
    ``channel.delta_star(eps, H)`` when the channel provides it.  ``H=None``
    covers every pair of inputs (as :meth:`SparseChannel.delta` does).
    """
    tab = channel_sampling_tables(channel)
    eps = check_nonnegative(eps, "eps")
    H = None if H is None else check_int(H, "H", minimum=1)
    ell_lo, ell_hi = _exp_bounds(eps)
    ncols = int(tab.outputs.size)
    nrows = tab.indptr.size - 1
    if tab.banded:
        keys = None
    else:
        row = np.repeat(np.arange(nrows, dtype=np.int64), np.diff(tab.indptr))
        keys = row * ncols + tab.indices
    xs = tab.sorted_inputs
    cls = tab.row_classes()
    best, best_pair = -1, None
    avg_len = max(1, tab.counts.size // max(1, nrows))
    block = max(1, _PAIR_ENTRIES // avg_len)
    # pairs by rank distance k in the sorted inputs (at most n - 1 passes, whatever the
    # spread of the labels): separations only grow with k, so stop at the first k with
    # no pair in range
    for k in range(1, xs.size):
        sep = xs[k:] - xs[:-k]  # >= 0 for sorted inputs; negative only on int64 wrap-around (huge)
        i = np.flatnonzero((sep >= 0) & (sep <= H)) if H is not None else np.arange(xs.size - k)
        if i.size == 0:
            break
        ra, rb = tab.order[i], tab.order[i + k]
        r1 = np.concatenate([ra, rb])
        r2 = np.concatenate([rb, ra])
        # one representative (the first) per (class, class, column shift)
        triple = np.stack([cls[r1], cls[r2], tab.first[r2] - tab.first[r1]], axis=1)
        _, rep = np.unique(triple, axis=0, return_index=True)
        rep.sort()
        r1, r2 = r1[rep], r2[rep]
        for s0 in range(0, r1.size, block):
            vals = _pair_bounds(tab, keys, ncols, r1[s0:s0 + block], r2[s0:s0 + block], ell_lo, upper=True)
            k = int(np.argmax(vals))
            if vals[k] > best:
                best = int(vals[k])
                best_pair = (int(r1[s0 + k]), int(r2[s0 + k]))
    if best_pair is None:
        upper_n = lower_n = 0
        worst = ()
    else:
        upper_n = best
        r1 = np.array([best_pair[0]], dtype=np.int64)
        r2 = np.array([best_pair[1]], dtype=np.int64)
        lower_n = int(_pair_bounds(tab, keys, ncols, r1, r2, ell_hi, upper=False)[0])
        worst = (int(tab.inputs[best_pair[0]]), int(tab.inputs[best_pair[1]]))
    ideal_fn = getattr(channel, "delta_star", None)
    ideal = float(ideal_fn(eps, H)) if callable(ideal_fn) else None
    return _certificate(
        eps, H, upper_n, lower_n, ideal, worst, tab,
        "exact integer row counts c/2^64; ordered pairs with separation 1..H; leakage summed "
        "exactly; overlap with e^eps bounded outward and per-term double arithmetic with a "
        "proven error bound, rounded outward to 2^-62 units and summed exactly",
    )
