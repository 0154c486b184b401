r"""Exact privacy accounting for the radius-truncated mechanisms on Y = Z.

For an s-sparse mechanism with window radius ``t = (s-1)/2`` and kernel ``w``,
the ordered defect between inputs ``0`` and ``h`` (Theorems 3 and 9) is

.. math::

    \delta_h(\varepsilon) = \frac{1}{C_t}\Big[\sum_{k=-t}^{h-t-1} w(k)
        + \sum_{k=h-t}^{t} [w(k) - e^{\varepsilon} w(k-h)]_+\Big],
    \qquad 0 \le h \le 2t,

and exactly 1 for ``h > 2t``.  The first sum is the *support leakage*, the
second the *overlap excess* (Remark 2).

Both kernels are symmetric and log-concave, so the overlap loss
``L_h(k) = log w(k) - log w(k-h)`` is nonincreasing in ``k``: the set where it
exceeds ``eps`` is a prefix ``h-t <= k <= K_h`` (for the Gaussian this is
Proposition 2's ``k < kappa_h``).  Hence

.. math::

    \text{overlap} = \frac{1}{C_t}\Big[\sum_{k=h-t}^{K_h} w(k)
        - e^{\varepsilon}\sum_{k=-t}^{K_h-h} w(k)\Big],

two range sums, each O(1) from closed forms (Laplace) or a log suffix-sum array
(Gaussian).  ``delta_star`` over ``1 <= h <= H`` therefore costs O(H) after an
O(t) (Gaussian) or O(1) (Laplace) set-up, never O(H s).

All sums are carried in log space; results are exact up to floating-point
rounding (absolute error a few units of 1e-16 times ``e^eps``).  For a rigorous
upper bound on the realized sampler, see :mod:`sparseldp.sampling`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._kernels import logsubexp
from .errors import InfeasibleError

__all__ = [
    "Defect",
    "defect_parts",
    "delta_profile",
    "epsilon_for_delta",
    "max_overlap_loss",
]

# Entries of the (eps x h) grid evaluated at once; bounds working memory.
_GRID_CHUNK = 1 << 22


@dataclass(frozen=True)
class Defect:
    """The defect ``delta_h(eps)`` split as in Remark 2.

    ``total = support_leakage + overlap``; every field broadcasts like the
    ``eps`` and ``h`` it was computed from (floats for scalar input).
    """

    total: np.ndarray | float
    support_leakage: np.ndarray | float
    overlap: np.ndarray | float


def defect_parts(kernel, eps, h):
    """Return ``(total, support_leakage, overlap)`` arrays broadcast over ``eps`` and ``h``.

    ``kernel`` is a :mod:`sparseldp._kernels` kernel; ``eps`` float array >= 0,
    ``h`` int64 array >= 0.  Exactly 1.0 (all leakage) for ``h > 2t``.
    """
    t = kernel.t
    eps = np.asarray(eps, dtype=float)
    h = np.asarray(h, dtype=np.int64)
    eps, h = np.broadcast_arrays(eps, h)
    disjoint = h > 2 * t
    hh = np.where(disjoint, 0, h)
    log_c = kernel.log_normalizer

    # support leakage: sum_{k=-t}^{h-t-1} w(k) (a tail for h <= t, both signs beyond)
    log_leak = kernel.log_range(np.full_like(hh, -t), hh - t - 1) - log_c
    # overlap excess on [h-t, K_h]
    last = kernel.last_excess_index(hh, eps)
    lo = hh - t
    last = np.clip(last, lo - 1, t).astype(np.int64)
    nonempty = last >= lo
    a_hi = np.where(nonempty, last, lo)
    log_a = kernel.log_range(lo, a_hi)
    log_b = kernel.log_range(np.full_like(lo, -t), a_hi - hh)
    log_ov = logsubexp(log_a, eps + log_b) - log_c
    overlap = np.where(nonempty, np.exp(log_ov), 0.0)
    leak = np.exp(log_leak)
    leak = np.where(disjoint, 1.0, leak)
    overlap = np.where(disjoint, 0.0, overlap)
    total = np.where(disjoint, 1.0, np.minimum(leak + overlap, 1.0))
    return total, leak, overlap


def delta_profile(kernel, eps, H: int):
    """``delta_star(eps) = max_{1 <= h <= H} delta_h(eps)`` for an array of ``eps``.

    Also returns the maximizing ``h``.  Evaluated on an (eps x h) grid in chunks
    so that working memory stays bounded.
    """
    eps = np.asarray(eps, dtype=float)
    flat = eps.reshape(-1)
    best = np.full(flat.shape, -np.inf)
    arg = np.zeros(flat.shape, dtype=np.int64)
    # only h <= 2t + 1 matters: beyond, delta_h = 1 = delta_{2t+1}
    h_top = min(H, 2 * kernel.t + 1)
    # the separations too are taken in chunks, so that a huge min(H, s) costs time, not memory
    width = min(h_top, _GRID_CHUNK)
    rows = max(1, _GRID_CHUNK // width)
    for h0 in range(1, h_top + 1, width):
        hs = np.arange(h0, min(h_top, h0 + width - 1) + 1, dtype=np.int64)
        for start in range(0, flat.size, rows):
            e = flat[start : start + rows, None]
            total, _, _ = defect_parts(kernel, e, hs[None, :])
            idx = np.argmax(total, axis=1)
            val = total[np.arange(total.shape[0]), idx]
            better = val > best[start : start + rows]  # strict: the smallest maximizing h is kept
            best[start : start + rows] = np.where(better, val, best[start : start + rows])
            arg[start : start + rows] = np.where(better, hs[idx], arg[start : start + rows])
    return best.reshape(eps.shape), arg.reshape(eps.shape)


def max_overlap_loss(kernel, H: int) -> float:
    """``max_{1<=h<=min(H,2t)} max_k L_h(k)`` on the overlap: the eps above which overlap vanishes."""
    t = kernel.t
    h_top = min(H, 2 * t)
    if h_top < 1:
        return 0.0
    out = -np.inf
    for h0 in range(1, h_top + 1, _GRID_CHUNK):
        hs = np.arange(h0, min(h_top, h0 + _GRID_CHUNK - 1) + 1, dtype=np.int64)
        # loss is nonincreasing in k, so its max on [h-t, t] is at k = h - t
        k = hs - t
        out = max(out, float(np.max(kernel.log_w(k) - kernel.log_w(k - hs))))
    return out


def epsilon_for_delta(kernel, delta: float, H: int, *, rtol: float = 1e-12) -> float:
    """Smallest ``eps >= 0`` with ``delta_star(eps) <= delta`` (to ``rtol``, rounded up).

    ``delta_star`` is continuous and nonincreasing in ``eps`` and equals the
    worst support leakage once ``eps`` reaches the largest overlap loss, so the
    target is feasible iff that leakage is ``<= delta``; bisection then returns
    the upper end of the final bracket, which always satisfies the target.
    """
    eps_hi = max_overlap_loss(kernel, H)
    worst_leak = float(_leak_star(kernel, H))
    if worst_leak > delta:
        raise InfeasibleError(
            f"support leakage alone is {worst_leak:.6g} > delta = {delta:g} at some separation "
            f"h <= H = {H}: no eps makes this mechanism ({kernel!r}) (eps, delta)-LDP"
        )
    if delta_profile(kernel, 0.0, H)[0] <= delta:
        return 0.0
    lo, hi = 0.0, max(eps_hi, 0.0)
    # guarantee the bracket: at eps = max loss the overlap is exactly empty
    while delta_profile(kernel, hi, H)[0] > delta:
        hi = 2 * hi + 1e-300
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if delta_profile(kernel, mid, H)[0] <= delta:
            hi = mid
        else:
            lo = mid
        if hi - lo <= rtol * max(hi, 1e-300):
            break
    return float(hi)


def _leak_star(kernel, H: int) -> float:
    h_top = min(H, 2 * kernel.t + 1)
    out = 0.0
    for h0 in range(1, h_top + 1, _GRID_CHUNK):
        _, leak, _ = defect_parts(kernel, np.inf, np.arange(h0, min(h_top, h0 + _GRID_CHUNK - 1) + 1))
        out = max(out, float(leak.max()))
    return out
