"""The root search of :func:`~sparseldp.core.accounting.epsilon_for_delta` on the overlap's segments.

For a log-concave kernel and one separation ``h``, ``delta_h`` is convex and
piecewise linear in ``e^eps``; its pieces (segments) end at the overlap losses.
Here: the table of the overlap at the segment ends (:func:`_segment_table`,
O(s) once per separation) and its closed-form root (:func:`_table_root`,
O(log s)); the Newton search from segment to segment for separations with too
many segments to tabulate (:func:`_newton_root`); the bisection on the
rigorous upper bound that certifies an answer (:func:`_bisect_certified`);
and the margin beyond which a nearest value decides (:func:`_near_margin`).
All are nearest-value searches except the last bisection: every answer is
certified with the upper bound by the caller.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right

import numpy as np

from ..kernels.rounding import _s_exp, logsubexp


def _bisect_certified(upper, delta: float, lo: float, hi: float, rtol: float) -> float:
    """Bisect ``[lo, hi]`` (``upper(hi) <= delta < upper(lo)``) to ``hi - lo <= rtol * hi``; return the
    certified end ``hi`` (every returned eps has ``upper(eps) <= delta``)."""
    for _ in range(200):
        if hi - lo <= rtol * max(hi, 1e-300):
            break
        mid = 0.5 * (lo + hi)
        if upper(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def _lsub(x: float, y: float) -> float:
    """``log(e^x - e^y)`` (``-inf`` when ``y >= x``) with the math module: for the root search only."""
    if not y < x:
        return -math.inf
    if y == -math.inf:
        return x
    g = -math.expm1(y - x)
    return x + math.log(g) if g > 0.0 else -math.inf


# Evaluations the segment search may spend before it hands over to bisection.
_SEGMENT_STEPS = 60


def _near_margin(delta: float, eps: float = 0.0) -> float:
    """Far above any rounding error of a nearest value (measured below ``4e-15 + 2e-15 eps``): a nearest value
    beyond ``delta`` by more than this means that the exact one (and so every upper bound) is beyond too."""
    return 1e-12 + 1e-14 * eps + 1e-9 * delta


def _segment_table(kernel, h: int, log_c: float):
    r"""The overlap excess of separation ``h`` tabulated at its breakpoints (nearest values).

    With the segments ``(K_j, L_j)`` of :meth:`~sparseldp.core.kernels.LogConcaveKernel.segments`
    (``L_j`` decreasing), on ``L_{j+1} <= eps < L_j`` the excess set is ``[h - t, K_j]`` and the
    overlap is ``A_j - e^eps B_j``, ``A_j = sum_{k=h-t}^{K_j} w(k) / C_t``, ``B_j =
    sum_{k=-t}^{K_j-h} w(k) / C_t`` (:mod:`sparseldp.core.accounting`).  The table holds ``log A_j``, ``log B_j``,
    ``L_j`` and ``log O_j``, the overlap at ``eps = L_j`` (continuous there: the points entering
    the excess set at ``L_j`` contribute 0), increasing in ``j`` (made monotone against rounding
    by a running maximum), and ``log O(0)``.  Returns None when there is no segment or the values
    are not finite (the Newton search takes over).
    """
    t = kernel.t
    K, L = kernel.segments(h)
    if K.size == 0 or not np.all(np.isfinite(L)):
        return None
    with np.errstate(all="ignore"):
        log_a = kernel.log_range(np.full_like(K, h - t), K) - log_c
        log_b = kernel.log_range(np.full_like(K, -t), K - h) - log_c
        log_o = np.maximum.accumulate(logsubexp(log_a, L + log_b))
        log_o0 = float(logsubexp(log_a[-1], log_b[-1]))
    if not (np.all(np.isfinite(log_a)) and np.all(np.isfinite(log_b))):
        return None
    # compact double arrays that index to Python floats at list speed (bisect reads them directly)
    return (array("d", log_o.tolist()), max(log_o0, float(log_o[-1])), array("d", L.tolist()),
            array("d", log_a.tolist()), array("d", log_b.tolist()))


def _table_root(table, log_target: float):
    """``(root, log B)``: the nearest ``eps`` where the overlap equals ``e^log_target``, located by bisection
    on the table's breakpoint values and solved in closed form on its segment (``A_j - e^eps B_j = target``,
    ``eps = log(A_j - target) - log B_j``, clamped to the segment); ``(0.0, .)`` when the overlap at
    ``eps = 0`` is within the target; None when the target lies below the first breakpoint value."""
    log_o, log_o0, L, log_a, log_b = table
    if not log_target < log_o0:
        return 0.0, log_b[-1]
    j = bisect_right(log_o, log_target) - 1
    if j < 0:
        return None
    lb = log_b[j]
    es = _lsub(log_a[j], log_target) - lb
    left = L[j + 1] if j + 1 < len(L) else 0.0
    if es < left:
        es = left
    right = L[j]
    if es > right:
        es = right
    return (es if es > 0.0 else 0.0), lb


def _newton_root(kernel, h: int, log_c: float, log_target: float, hi: float, delta: float, rtol: float):
    """``(root, log B)``: the nearest-value root of ``delta_h(eps) = leak + e^log_target`` segment by segment,
    for separations with too many segments to tabulate (see :func:`epsilon_for_delta`); None if the
    search does not settle.  ``hi`` is the largest overlap loss (the overlap vanishes beyond)."""
    t = kernel.t
    lo = 0.0
    x, log_b = 0.0, None
    for _ in range(_SEGMENT_STEPS):
        K = kernel.last_excess_s(x, h)
        if K < h - t:  # no excess at x: delta_h(x) = leak < delta
            hi = min(hi, x)
            x = 0.5 * (lo + hi)
            continue
        # the range sums with the C library's functions: the search needs nearest values, not the array
        # path's bits (its answer is certified with the rigorous twins)
        log_a = kernel._range_fast(h - t, K) - log_c
        log_b = kernel._range_fast(-t, K - h) - log_c
        log_o = _lsub(log_a, x + log_b)  # log overlap at x
        if x == 0.0 and not math.exp(log_o) > math.exp(log_target) + _near_margin(delta):
            return 0.0, log_b  # eps = 0 may be certified: the caller checks
        # this segment's line leak + A - g B: its root, exact if it lies on the segment, else below the root
        es = _lsub(log_a, log_target) - log_b
        left = kernel.loss_s(h, K + 1) if K < t else -math.inf
        if left <= es <= kernel.loss_s(h, K):
            return max(es, 0.0), log_b
        if es > lo:
            lo = es
        if log_o > log_target:
            lo = max(lo, x)
        else:
            hi = min(hi, x)
        if not hi - lo > 0.25 * rtol * hi:
            return hi, log_b
        # Newton on log(overlap) (its slope is -g B / overlap); log(overlap) is concave on a segment, so
        # from the left Newton overshoots: halve the step towards the lower bound (measured: 3.1 steps
        # on average over both families, s up to 2 * 10^4, delta from 0.3 down to 1e-12; at most 7)
        xn = x + (log_o - log_target) * _s_exp(log_o - x - log_b) if log_o > -math.inf else math.nan
        if log_o > log_target and lo < xn < hi:
            xn = lo + 0.5 * (xn - lo)
        x = xn if lo < xn < hi else 0.5 * (lo + hi)
    return None
