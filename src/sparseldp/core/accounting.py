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
(Gaussian), after an O(t) (Gaussian) or O(1) (Laplace) set-up, never O(s) per
separation.

The worst separation (a lemma)
------------------------------
For a log-concave kernel with positive weights on its window, ``delta_h(eps)``
is nondecreasing in ``h`` -- strictly increasing for ``0 <= h <= 2t + 1`` -- so

.. math::

    \delta^*(\varepsilon; H) = \max_{1 \le h \le H} \delta_h(\varepsilon)
        = \delta_{\min(H,\,2t+1)}(\varepsilon).

*Proof.*  Let ``F(c) = sum_{y <= c} M(y | 0)`` and ``g = e^eps >= 1``.  By the
prefix structure above (and because the leakage outputs ``y < h - t`` are all
excess points) the excess set of separation ``h >= 1`` is a half-line
``{y <= c_h}`` within the window, so ``delta_h = F(c_h) - g F(c_h - h)``.  The
same half-line is one event for the pair ``(0, h')`` with ``h' > h``, hence
``delta_{h'} >= F(c_h) - g F(c_h - h') >= delta_h`` since ``F`` is
nondecreasing (the hockey-stick divergence is a supremum over events).  For
``h' = h + 1 <= 2t + 1`` the gain is strict: if ``c_h >= h - t`` it is at
least ``g M(c_h - h | 0) > 0`` (``-t <= c_h - h <= t``); otherwise
``c_h = h - t - 1`` and the half-line ``{y <= h - t}`` gives
``delta_{h+1} >= F(h - t) = delta_h + M(h - t | 0) > 0``.  ``delta_0 = 0``
and ``delta_h = 1`` for ``h > 2t``.  []

This is the classical monotonicity of the privacy profile of a location family
with monotone likelihood ratio; it rests on log-concavity alone (the same
assumption as the prefix structure).  So :func:`delta_profile` evaluates one
separation per ``eps`` for :class:`~sparseldp.core.kernels.LogConcaveKernel`
s -- O(1) whatever ``H`` -- and the worst separation it reports is
``min(H, 2t + 1)`` (the smallest maximizer of the exact values).  Kernels
without the prefix structure still take the maximum over every ``h``.  Being
the exact value at one separation, the bounds stay rigorous: the upper bound
at ``h = min(H, 2t + 1)`` is at least ``delta_h`` there, which is ``delta*``.

Scalars at function-call cost
-----------------------------
One ``(eps, h)`` pair through numpy costs about 100 numpy calls of ~1 us each.
For a Python float ``eps`` and int ``h`` (:func:`defect_scalar`; also
:func:`delta_profile`, :func:`certified_delta_star` and
:func:`epsilon_for_delta` with one ``eps``) the log-concave kernels' *scalar
twins* repeat the same formulas, operation for operation, on Python floats,
calling numpy's own elementary functions on one float
(:mod:`sparseldp.core.kernels.rounding`, "scalar twins"), and give *the same
numbers* as the array path, bit for bit (so the bounds are rigorous for the
same reasons).  What does not depend on ``eps`` is computed once and kept on
the kernel: the support leakage per separation, and the overlap's range sums
per last excess index ``K`` (:meth:`~sparseldp.core.kernels.LogConcaveKernel.overlap_s`;
bounded memory) -- the values the operations give, so nothing changes but
the cost: about 2 microseconds for a value, 3 to 4 for an upper bound
(``tests/test_interactive.py`` checks hits against misses and the array path;
benchmarks/bench_interactive.py measures both).  Only the root search inside
:func:`epsilon_for_delta` uses the C library's functions (nearest values are
all it needs; its answer is certified with the twins).

Which way the numbers err
-------------------------
All sums are carried in log space (:mod:`sparseldp.core.kernels`).  Two kinds of
value come out of the same formulas:

* :func:`defect_parts` / :func:`delta_profile` (``mode="near"``): ordinary
  round-to-nearest evaluation.  Not a bound: it may lie on either side of the
  exact value.  Measured against 80-digit references (12,000 random cases with
  ``s <= 2001`` and 80 with ``s`` up to ``2 * 10^5``, both families, including
  ``eps`` within rounding of an overlap loss and ``sigma >= 154``): within
  ``1.3e-15`` absolute of the exact value, on either side, plus about
  ``1e-17 eps`` for the Gaussian family with very large ``eps`` (``8.7e-15`` was
  seen at ``eps ~ 870``).  The Laplace excess set is decided exactly and its
  overlap is a sum of products of nonnegative factors; the Gaussian suffix
  sums are compensated, so the error no longer grows with ``s``.
* :func:`defect_bounds` / :func:`delta_profile` with ``mode="up"`` (``"dn"``):
  a rigorous upper (lower) bound on the exact value, from outward-rounded
  arithmetic and a priori error bounds on the kernel's sums (never below
  (above) the exact value in the same measurements).  Every certified answer
  of the package (``epsilon``, ``is_ldp``, the designers) compares the *upper*
  bound with its target, so no certificate claims a ``delta`` below the exact
  one.  The upper bound exceeds the exact value by at most about ``2.5e-14``
  (measured), plus about ``2.5e-16 eps`` for the Gaussian family (the factor
  ``e^eps`` is formed in log space), and is exactly 1.0 when the exact value
  is 1 (``h > 2t``).

Kernels without the prefix structure (the generic path)
-------------------------------------------------------
Kernels that are not a :class:`~sparseldp.core.kernels.LogConcaveKernel` (e.g.
:class:`~sparseldp.core.kernels.GeneralKernel`: staircases, zeros inside the
window) are accounted by summing the definition directly:
``C_t delta_h = sum_{y=-t}^{t} [w(|y|) - e^eps w(|y - h|)]_+`` with
``w(|y - h|) = 0`` off ``S(h)``, so the terms with ``y < h - t`` are the support
leakage and the others the overlap excess.  O(s) per separation, vectorized
over (eps, h) pairs; log-concavity is never used.  Every kernel offers it
(``method="generic"``), which the tests use to cross-check the closed forms.

* ``"near"``: the sums of the rounded terms; each term errs by about
  ``u (w(y) + e^eps w(y-h))``, so the value is within a few ``u`` of the exact
  one relative to ``C_t`` (plus the kernel's own weight rounding).
* ``"up"`` (``"dn"``): rigorous.  The kernel gives elementwise bounds on its
  weights (:meth:`~sparseldp.core.kernels.Kernel.weights`, exact for a general
  kernel); ``e^eps`` is enclosed by ``exp_dn``/``exp_up`` (exactly 1 at
  ``eps = 0``); each term ``a - e^eps b`` is formed with the product rounded
  inward and the difference outward (``np.nextafter``); each sum of ``n``
  nonnegative terms is widened by the factor ``1 +- 2 n u``, which bounds
  the error of any summation order (Higham, Section 4.2); the normalizer is
  bounded the other way and the quotient rounded outward.  ``h = 0`` gives
  exactly 0, ``h > 2t`` exactly 1.

For a rigorous bound on the realized (quantized) sampler, see :mod:`sparseldp.sampling`.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

import math

from .kernels import LogConcaveKernel, _exp_dn, _exp_up, bounded_sum, dn, normalizer_bound, up
from .kernels.rounding import _INF, _nextafter, _s_exp, logsubexp
from ..errors import InfeasibleError

__all__ = [
    "Defect",
    "defect_parts",
    "defect_bounds",
    "leak_star",
    "certified_delta_star",
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


def _uses_prefix(kernel, method: str) -> bool:
    """Whether to use the closed-form, prefix-structured path (log-concave kernels only)."""
    if method not in ("auto", "generic"):
        raise ValueError(f"method must be 'auto' or 'generic'; got {method!r}")
    return method == "auto" and isinstance(kernel, LogConcaveKernel) and kernel.log_concave


def _combine(kernel, eps, h, mode, method="auto"):
    """``(total, support_leakage, overlap)`` from the kernel, in one mode."""
    t = kernel.t
    eps = np.asarray(eps, dtype=float)
    h = np.asarray(h, dtype=np.int64)
    eps, h = np.broadcast_arrays(eps, h)
    disjoint = h > 2 * t
    hh = np.where(disjoint, 0, h)
    eps = np.array(eps)  # a contiguous copy (broadcast views are read-only)
    if _uses_prefix(kernel, method):
        leak, overlap = _prefix_parts(kernel, eps, hh, mode)
    else:
        leak, overlap = _generic_parts(kernel, eps, hh, mode)
    total = _sum2(leak, overlap, mode)
    if mode != "near":
        # safety net for degenerate parameters (e.g. lam a subnormal number): a bound that is
        # not a number falls back to the trivial one (1 above, 0 below)
        trivial = 1.0 if mode == "up" else 0.0
        leak, overlap, total = (np.where(np.isnan(x), trivial, x) for x in (leak, overlap, total))
    if mode == "dn":
        leak, overlap, total = (np.maximum(x, 0.0) for x in (leak, overlap, total))
    leak = np.where(disjoint, 1.0, np.minimum(leak, 1.0))
    overlap = np.where(disjoint, 0.0, np.minimum(overlap, 1.0))
    total = np.where(disjoint, 1.0, np.minimum(total, 1.0))
    return total, leak, overlap


def _prefix_parts(kernel, eps, hh, mode):
    """Leakage and overlap from a log-concave kernel's numerator terms (Theorems 3 and 9)."""
    # the numerator over the normalizer: for an upper bound divide by a lower bound of C_t
    log_c = kernel.log_normalizer_bound(_flip(mode))
    leak = np.zeros(hh.shape)
    overlap = np.zeros(hh.shape)
    with np.errstate(all="ignore"):
        for logv, nonempty, part in kernel.numerator_terms(eps, hh, mode):
            if mode == "near":
                v = np.exp(logv - log_c)
            elif mode == "up":
                v = _exp_up(up(logv - log_c))  # includes the 2^-1072 underflow slack
            else:
                v = _exp_dn(dn(logv - log_c))
            v = np.where(nonempty, v, 0.0)
            if part == "leak":
                leak = _sum2(leak, v, mode)
            else:
                overlap = _sum2(overlap, v, mode)
    return leak, overlap


# Entries of the (pairs x window) block evaluated at once by the generic path.
_GENERIC_CHUNK = 1 << 20


def _generic_tables(kernel, mode):
    """``(a, b_padded, C)`` for the generic path (cached per kernel and mode).

    ``a[c] = w(|c - t|)`` over the window ``y = c - t``; ``b_padded[j] = w(|j - 3t|)``
    for ``j >= 2t`` and 0 below, so that ``b_padded[c - h + 2t] = w(|y - h|) 1{y - h >= -t}``
    for ``0 <= h <= 2t``.  For ``"up"`` ``a`` holds upper and ``b`` lower weight bounds and
    ``C`` a lower bound on the normalizer (``"dn"`` the other way round).
    """
    cache = kernel.__dict__.setdefault("_generic_tables", {})
    got = cache.get(mode)
    if got is None:
        t = kernel.t
        wa = np.asarray(kernel.weights(mode), dtype=float)
        wb = np.asarray(kernel.weights(_flip(mode)), dtype=float)
        a = np.concatenate([wa[:0:-1], wa])
        b = np.concatenate([np.zeros(2 * t), wb[:0:-1], wb])
        got = (a, b, normalizer_bound(np.asarray(kernel.weights(_flip(mode)), dtype=float), _flip(mode)))
        cache[mode] = got
    return got


def _generic_parts(kernel, eps, hh, mode):
    """Leakage and overlap by direct summation over the window (no shape assumed); see the module docstring."""
    t = kernel.t
    s = 2 * t + 1
    a, bpad, C = _generic_tables(kernel, mode)
    shape = hh.shape
    ef = eps.reshape(-1)
    hf = hh.reshape(-1)
    leak = np.zeros(hf.size)
    overlap = np.zeros(hf.size)
    cols = np.arange(s, dtype=np.int64)
    rows = max(1, _GENERIC_CHUNK // s)
    with np.errstate(all="ignore"):
        if mode == "near":
            E = np.exp(ef)
        else:
            # e^eps bounded inward for the subtracted product: below for "up", above for "dn"
            E = np.where(ef == 0.0, 1.0, _exp_dn(ef) if mode == "up" else _exp_up(ef))
        for start in range(0, hf.size, rows):
            hb = hf[start : start + rows, None]
            Eb = E[start : start + rows, None]
            B = bpad[cols[None, :] - hb + 2 * t]
            if mode == "near":
                d = a[None, :] - Eb * B
            elif mode == "up":
                d = up(a[None, :] - dn(Eb * B))
            else:
                d = dn(a[None, :] - up(Eb * B))
            d = np.maximum(np.where(B > 0, d, a[None, :]), 0.0)  # B = 0: no e^eps * 0 (inf * 0 at eps = inf)
            in_leak = cols[None, :] < hb  # y < h - t: outside S(h)
            leak[start : start + rows] = bounded_sum(np.where(in_leak, d, 0.0), axis=1, mode=mode, n=s)
            overlap[start : start + rows] = bounded_sum(np.where(in_leak, 0.0, d), axis=1, mode=mode, n=s)
        if mode == "near":
            leak, overlap = leak / C, overlap / C
        elif mode == "up":
            leak, overlap = up(leak / C), up(overlap / C)
        else:
            leak, overlap = dn(leak / C), dn(overlap / C)
    zero = hf == 0  # the exact value is 0: P(y|0) - e^eps P(y|0) <= 0
    leak = np.where(zero, 0.0, leak).reshape(shape)
    overlap = np.where(zero, 0.0, overlap).reshape(shape)
    return leak, overlap


def _flip(mode):
    return {"near": "near", "up": "dn", "dn": "up"}[mode]


def _sum2(a, b, mode):
    s = a + b
    if mode == "up":
        return np.where(b > 0, up(s), s)  # adding an exact zero is exact
    if mode == "dn":
        return np.where(b > 0, dn(s), s)
    return s


def defect_scalar(kernel, eps: float, h: int, mode: str = "near"):
    """``(total, support_leakage, overlap)`` of one pair as floats: the scalar twin of :func:`_combine`.

    ``kernel`` a :class:`~sparseldp.core.kernels.LogConcaveKernel`, ``eps`` a float
    ``>= 0`` (``inf`` allowed: the mass no ``eps`` covers), ``h`` an int ``>= 0``.
    The same terms, order, rounding directions and safety nets as the array
    path (module docstring, "Scalars at function-call cost"): ``"near"``
    rounds to nearest, ``"up"`` / ``"dn"`` are rigorous bounds.  The leakage
    (:meth:`~sparseldp.core.kernels.LogConcaveKernel.leak_s`) does not depend
    on ``eps`` and is computed once per ``h``; the overlap
    (:meth:`~sparseldp.core.kernels.LogConcaveKernel.overlap_s`) reuses its
    ``eps``-free pieces.
    """
    if h > 2 * kernel.t:
        return 1.0, 1.0, 0.0
    if h >= 1:
        leak = kernel.leak_s(h, mode)
        overlap = kernel.overlap_s(eps, h, mode)
    else:
        leak = overlap = 0.0
    total = leak + overlap
    if mode == "near":
        # min(x, 1.0) without the builtin's cost; NaN passes through as in np.minimum
        return (total if not total > 1.0 else 1.0), (leak if not leak > 1.0 else 1.0), \
            (overlap if not overlap > 1.0 else 1.0)
    if overlap > 0:
        total = _nextafter(total, _INF if mode == "up" else -_INF)
    # the array path's safety net for degenerate parameters: a bound that is not a number is trivial
    trivial = 1.0 if mode == "up" else 0.0
    if leak != leak:
        leak = trivial
    if overlap != overlap:
        overlap = trivial
    if total != total:
        total = trivial
    if mode == "dn":
        leak, overlap, total = max(leak, 0.0), max(overlap, 0.0), max(total, 0.0)
    return min(total, 1.0), min(leak, 1.0), min(overlap, 1.0)


def _upper_total(kernel, eps: float, h: int) -> float:
    """``defect_scalar(kernel, eps, h, "up")[0]`` for ``1 <= h <= 2t``: the same operations, without the split."""
    overlap = kernel.overlap_s(eps, h, "up")
    total = kernel.leak_s(h, "up") + overlap
    if overlap > 0:
        total = _nextafter(total, _INF)
    return total if total < 1.0 else 1.0  # NaN (a degenerate bound) is the trivial bound 1


def defect_parts(kernel, eps, h, *, method: str = "auto"):
    """Return ``(total, support_leakage, overlap)`` arrays broadcast over ``eps`` and ``h``.

    ``kernel`` is a :class:`sparseldp.core.kernels.Kernel`; ``eps`` float array >= 0,
    ``h`` int64 array >= 0.  Exactly 1.0 (all leakage) for ``h > 2t`` and 0.0
    for ``h = 0``.  Round-to-nearest values (module docstring: not a bound).
    ``method="auto"`` uses the closed forms for log-concave kernels and the
    generic direct sum otherwise; ``"generic"`` forces the direct sum.
    """
    return _combine(kernel, eps, h, "near", method)


def defect_bounds(kernel, eps, h, *, upper: bool = True, method: str = "auto"):
    """Rigorous bounds ``(total, support_leakage, overlap)``: each is ``>=`` (``upper``) or ``<=``
    the exact value.  ``total`` is exactly 1.0 when the windows are disjoint (``h > 2t``); an
    upper bound is 0.0 only where the exact value is 0 (``h = 0``).  ``method`` as in
    :func:`defect_parts`."""
    return _combine(kernel, eps, h, "up" if upper else "dn", method)


def delta_profile(kernel, eps, H: int, mode: str = "near", *, method: str = "auto"):
    """``delta_star(eps) = max_{1 <= h <= H} delta_h(eps)`` for an array of ``eps``.

    Also returns the smallest maximizing ``h``.  ``mode="near"`` rounds to
    nearest; ``"up"`` (``"dn"``) gives a rigorous upper (lower) bound on
    ``delta_star``.  For a log-concave kernel (``method="auto"``) this is
    ``delta_h`` at ``h = min(H, 2t + 1)`` by the lemma of the module docstring:
    O(1) per ``eps`` whatever ``H``, through the scalar twins for a single
    ``eps``.  Otherwise (generic path) the maximum over an (eps x h) grid
    evaluated in chunks, so that working memory stays bounded (O(s) per
    ``(eps, h)``).
    """
    if _uses_prefix(kernel, method):
        h_top = min(H, 2 * kernel.t + 1)
        if np.ndim(eps) == 0:
            e = float(eps)
            return np.asarray(defect_scalar(kernel, e, h_top, mode)[0]), np.asarray(h_top, dtype=np.int64)
        eps = np.asarray(eps, dtype=float)
        flat = eps.reshape(-1)
        total = np.empty(flat.shape)
        for start in range(0, flat.size, _GRID_CHUNK):  # bounded working memory
            total[start : start + _GRID_CHUNK] = _combine(kernel, flat[start : start + _GRID_CHUNK],
                                                          np.int64(h_top), mode)[0]
        return total.reshape(eps.shape), np.full(eps.shape, h_top, dtype=np.int64)
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
            total, _, _ = _combine(kernel, e, hs[None, :], mode, method)
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
    if not _uses_prefix(kernel, "auto"):
        return _generic_max_loss(kernel, h_top)
    out = -np.inf
    for h0 in range(1, h_top + 1, _GRID_CHUNK):
        hs = np.arange(h0, min(h_top, h0 + _GRID_CHUNK - 1) + 1, dtype=np.int64)
        # loss is nonincreasing in k, so its max on [h-t, t] is at k = h - t
        k = hs - t
        with np.errstate(all="ignore"):
            loss = kernel.log_w(k) - kernel.log_w(k - hs)
        # -inf - (-inf): a kernel so narrow that its weights underflow; the loss is then beyond every double
        out = max(out, float(np.max(np.where(np.isnan(loss), np.inf, loss))))
    return out


def _generic_max_loss(kernel, h_top: int) -> float:
    """Largest finite ``log w(|y|) - log w(|y - h|)`` over the overlaps, ``1 <= h <= h_top``.

    No shape assumed: every point is visited (O(h_top s)).  Points where the
    neighbour's weight is 0 have infinite loss whatever ``eps``; they are left
    out here (their mass stays in the defect for every ``eps``), so beyond the
    returned value ``delta_h(eps)`` no longer depends on ``eps``.
    """
    t = kernel.t
    s = 2 * t + 1
    lw = kernel.log_w(np.arange(-t, t + 1))
    lpad = np.concatenate([np.full(2 * t, -np.inf), lw])
    cols = np.arange(s, dtype=np.int64)
    out = 0.0
    rows = max(1, _GENERIC_CHUNK // s)
    with np.errstate(all="ignore"):
        for h0 in range(1, h_top + 1, rows):
            hs = np.arange(h0, min(h_top, h0 + rows - 1) + 1, dtype=np.int64)[:, None]
            lb = lpad[cols[None, :] - hs + 2 * t]
            loss = lw[None, :] - lb
            ok = np.isfinite(lb) & np.isfinite(lw)[None, :] & (cols[None, :] >= hs)
            if ok.any():
                out = max(out, float(np.max(loss[ok])))
    return out


def epsilon_for_delta(kernel, delta: float, H: int, *, rtol: float = 1e-12) -> float:
    """Smallest ``eps >= 0`` (to ``rtol``) whose *upper bound* ``delta_star_upper(eps) <= delta``.

    So the exact ``delta_star`` at the returned ``eps`` is ``<= delta``: the
    answer is a certificate.  ``delta >= 1`` is always met (``eps = 0``).
    ``delta_star`` is continuous and nonincreasing in ``eps`` and equals the
    worst support leakage once ``eps`` reaches the largest overlap loss (where
    the exactly decided excess sets are empty), so the target is feasible iff
    that leakage is ``<= delta``.  Every returned ``eps`` has been checked
    with the upper bound.

    *Log-concave kernels* (:func:`_epsilon_segments`): one separation
    ``h = min(H, 2t + 1)`` matters (the lemma of the module docstring).  As a
    function of ``g = e^eps``, ``delta_h`` is convex and piecewise linear: on
    the segment where the excess set is ``[h - t, K]`` it is
    ``leak + A_K - g B_K`` with ``A_K = sum_{k=h-t}^{K} w(k) / C_t`` and
    ``B_K = sum_{k=-t}^{K-h} w(k) / C_t``, and the segment ends are the overlap
    losses ``L_h(K+1) <= eps < L_h(K)``.  The segment holding the root is
    located by bisection over the overlap's values at the segment ends
    (:func:`_segment_table`: computed once per separation in O(s), kept on the
    kernel) and the root is the segment line's, in closed form,
    ``eps = log(A_K - (delta - leak)) - log B_K``: O(log s), a microsecond.
    Separations with more than ``_TABLE_MAX`` segments search segment by
    segment instead (:func:`_newton_root`): each visited segment's line gives
    its root in closed form (a lower bound on the root, by convexity), Newton
    steps on ``log(delta_h - leak)`` move between segments, and a bracket
    guards both; a handful of O(1) evaluations.  The candidate
    ``root (1 + rtol / 2)`` is then checked once with the upper bound (the
    scalar twins: the number :meth:`delta_star_upper` returns there); if the
    bound is still above ``delta`` (its slack moves the answer by more than
    ``rtol``), the search steps up from there and bisects on the upper bound
    to ``rtol``, like the general path.

    *Other kernels*: bisection on the nearest values, then up until the
    rigorous bound meets the target, then bisection on the bound.

    Raises :class:`InfeasibleError` when the leakage exceeds ``delta`` (then no
    ``eps`` works), or when it is within rounding of ``delta`` so that no
    ``eps`` can be *certified* (the message says which).
    """
    if delta >= 1.0:
        return 0.0
    if _uses_prefix(kernel, "auto"):
        got = _epsilon_segments(kernel, float(delta), min(H, 2 * kernel.t + 1), rtol)
        if got is not None:
            return got
    # general kernels, or a case the segment search declined

    def upper(e):
        return float(delta_profile(kernel, e, H, "up")[0])

    def near(e):
        return float(delta_profile(kernel, e, H, "near")[0])

    leak_up = upper(np.inf)
    if leak_up > delta:
        leak_lo = float(delta_profile(kernel, np.inf, H, "dn")[0])
        if leak_lo > delta:
            raise InfeasibleError(
                f"the mass no eps can cover (support leakage, and outputs of zero weight under the neighbour) "
                f"is {leak_lo:.6g} > delta = {delta:g} at some separation "
                f"h <= H = {H}: no eps makes this mechanism ({kernel!r}) (eps, delta)-LDP"
            )
        raise InfeasibleError(
            f"the support leakage (in [{leak_lo:.17g}, {leak_up:.17g}]) is within rounding of "
            f"delta = {delta!r} at some h <= H = {H}: no eps can be certified for this mechanism ({kernel!r})"
        )
    if upper(0.0) <= delta:
        return 0.0
    # feasible end: at eps >= the largest overlap loss the overlap is empty
    hi = min(max(max_overlap_loss(kernel, H), 0.0), float(np.finfo(float).max))
    while upper(hi) > delta:
        hi = 2 * hi + 1e-300
        if not np.isfinite(hi):
            raise InfeasibleError(
                f"no finite eps makes this mechanism ({kernel!r}) (eps, {delta:g})-LDP on range H = {H}: "
                "its overlap loss exceeds every double"
            )
    # phase 1: bisection on the nearest values, inside [0, hi]
    lo, mid_hi = 0.0, hi
    if near(0.0) <= delta:
        mid_hi = 0.0
    else:
        for _ in range(200):
            mid = 0.5 * (lo + mid_hi)
            if near(mid) <= delta:
                mid_hi = mid
            else:
                lo = mid
            if mid_hi - lo <= rtol * max(mid_hi, 1e-300):
                break
    # phase 2: the smallest eps >= mid_hi (to rtol) that the upper bound certifies
    if upper(mid_hi) <= delta:
        return float(mid_hi)
    lo = mid_hi
    step = rtol * (mid_hi if mid_hi > 0 else hi)
    while True:
        cand = lo + step
        if cand >= hi:
            cand = hi
        if upper(cand) <= delta:
            hi = cand
            break
        lo = cand
        step *= 4.0
    return float(_bisect_certified(upper, delta, lo, hi, rtol))


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


#: Largest number of segments (runs of equal overlap loss) tabulated per separation for ``epsilon``
#: (40 bytes each; at most ``_SETUPS`` separations are kept per kernel: 5 MB at most).
_TABLE_MAX = 1 << 14
_SETUPS = 8


def _epsilon_setup(kernel, h: int):
    """Per-separation constants of the root search (cached on the kernel, a few separations):
    ``(log C, leak, hi, table)`` -- the nearest ``log C_t``, the nearest support leakage, the largest
    overlap loss ``L_h(h - t)`` and the segment table (:func:`_segment_table`, or None)."""
    cache = kernel.__dict__.setdefault("_epsilon_setup", {})
    got = cache.get(h)
    if got is None:
        if len(cache) >= _SETUPS:
            cache.clear()
        t = kernel.t
        log_c = kernel.log_normalizer_bound("near")
        table = _segment_table(kernel, h, log_c) if kernel.segment_count(h) <= _TABLE_MAX else None
        got = cache[h] = (log_c, _s_exp(kernel._range_fast(-t, h - t - 1) - log_c), kernel.loss_s(h, h - t), table)
    return got


def _segment_table(kernel, h: int, log_c: float):
    r"""The overlap excess of separation ``h`` tabulated at its breakpoints (nearest values).

    With the segments ``(K_j, L_j)`` of :meth:`~sparseldp.core.kernels.LogConcaveKernel.segments`
    (``L_j`` decreasing), on ``L_{j+1} <= eps < L_j`` the excess set is ``[h - t, K_j]`` and the
    overlap is ``A_j - e^eps B_j``, ``A_j = sum_{k=h-t}^{K_j} w(k) / C_t``, ``B_j =
    sum_{k=-t}^{K_j-h} w(k) / C_t`` (module docstring).  The table holds ``log A_j``, ``log B_j``,
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


def _epsilon_segments(kernel, delta: float, h: int, rtol: float):
    """:func:`epsilon_for_delta` for a log-concave kernel at separation ``h = min(H, 2t + 1)`` (see there).

    The nearest-value root comes from the segment table (:func:`_segment_table`: one bisection
    over the breakpoints and a closed form, O(log s)) when the separation has at most
    ``_TABLE_MAX`` segments, else from the Newton search over segments (:func:`_newton_root`).
    It is then certified once with the rigorous upper bound (the scalar twins).

    Returns the certified ``eps`` (its upper bound checked ``<= delta``), or
    None when the case is not a plain one -- the leakage above ``delta`` or
    within ``1e-9`` (relative) of it, infinite losses, a bracket that does not
    close -- and the caller's general search (with its error messages) takes
    over.
    """
    if not (1 <= h <= 2 * kernel.t and 0.0 < delta < 1.0):
        return None
    log_c, leak, hi, table = kernel.__dict__.get("_epsilon_setup", _NO_SETUP).get(h) or _epsilon_setup(kernel, h)
    # the leakage must be clearly below delta (the nearest value errs by ~1e-15 relative; were it
    # wrong, the certification below would fail and the general search take over)
    if not leak < delta * (1.0 - 1e-9):
        return None
    if not hi > 0.0:  # h = 2t: no overlap excess at any eps >= 0, delta_h = leak
        return 0.0 if defect_scalar(kernel, 0.0, h, "up")[0] <= delta else None
    if not hi < math.inf:
        return None
    log_target = math.log(delta - leak)  # the overlap allowed
    found = _table_root(table, log_target) if table is not None else None
    if found is None:
        found = _newton_root(kernel, h, log_c, log_target, hi, delta, rtol)
        if found is None:
            return None
    root, log_b = found
    if not math.isfinite(root):
        return None
    if root == 0.0 and _upper_total(kernel, 0.0, h) <= delta:
        return 0.0
    # certify: the upper bound just above the nearest-value root
    cand = root * (1.0 + 0.5 * rtol)
    u = _upper_total(kernel, cand, h)
    if u <= delta:
        return cand

    def upper(e):
        return _upper_total(kernel, e, h)

    # the bound's slack moves the answer by more than rtol: step up from cand, then bisect on the bound
    lo = cand
    slope = _s_exp(cand + log_b) if log_b is not None else 0.0  # -d delta_h / d eps there
    step = 2.0 * (u - delta) / slope if slope > 0 else math.inf
    step = max(step, rtol * cand, 1e-300)
    for _ in range(_SEGMENT_STEPS):
        hi = lo + step
        if not math.isfinite(hi):
            return None
        if upper(hi) <= delta:
            break
        lo, step = hi, 4.0 * step
    else:
        return None
    return _bisect_certified(upper, delta, lo, hi, rtol)


_NO_SETUP: dict = {}


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


def certified_delta_star(kernel, eps, H: int, delta: float) -> float:
    """For searches: a number that is ``<= delta`` only if the rigorous upper bound is.

    The nearest value is computed first; when it exceeds ``delta`` by more than
    any rounding error of this module (``1e-12 + 1e-14 eps + 1e-9 delta``, far
    above the measured ``4e-15 + 2e-15 eps``) it is returned as is (the point is
    not certifiable), otherwise the upper bound is.  So a point is accepted
    (value ``<= delta``) only on the strength of the upper bound; the shortcut
    can at worst pass over a point that is feasible within rounding.  A scalar
    ``eps`` with a log-concave kernel costs two scalar-twin evaluations at
    ``h = min(H, 2t + 1)`` (a few microseconds each).
    """
    if np.ndim(eps) == 0 and _uses_prefix(kernel, "auto"):
        e, h = float(eps), min(H, 2 * kernel.t + 1)
        near = defect_scalar(kernel, e, h, "near")[0]
        if near > delta + _near_margin(delta, e):
            return near
        return defect_scalar(kernel, e, h, "up")[0]
    near = float(delta_profile(kernel, eps, H, "near")[0])
    if near > delta + _near_margin(delta, float(eps)):
        return near
    return float(delta_profile(kernel, eps, H, "up")[0])


def leak_star(kernel, H: int, *, upper: bool = True) -> float:
    """Rigorous upper (lower) bound on the worst support leakage ``max_{1<=h<=H} delta_h(inf)``."""
    return float(delta_profile(kernel, np.inf, H, "up" if upper else "dn")[0])
