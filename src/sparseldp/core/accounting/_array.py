"""The array path of the accountant: ``delta_h(eps)`` over arrays of ``(eps, h)``.

:class:`Defect`; :func:`defect_parts` (nearest values) and
:func:`defect_bounds` (rigorous bounds) of each pair, from a log-concave
kernel's closed forms (:func:`_prefix_parts`) or by direct summation over the
window for any kernel (:func:`_generic_parts`); :func:`delta_profile`, the
worst separation over ``h <= H`` (one separation for a log-concave kernel, by
the lemma of the package docstring), and :func:`max_overlap_loss`.  The
formulas and which way each number errs are in the package docstring
(:mod:`sparseldp.core.accounting`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels import LogConcaveKernel, _exp_dn, _exp_up, bounded_sum, dn, normalizer_bound, up
from ..kernels.rounding import _flip
from ._scalar import defect_scalar

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
    cache = kernel._cache.setdefault("generic_tables", {})
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
    """Leakage and overlap by direct summation over the window (no shape assumed); see the package docstring."""
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


def _sum2(a, b, mode):
    s = a + b
    if mode == "up":
        return np.where(b > 0, up(s), s)  # adding an exact zero is exact
    if mode == "dn":
        return np.where(b > 0, dn(s), s)
    return s

def defect_parts(kernel, eps, h, *, method: str = "auto"):
    """Return ``(total, support_leakage, overlap)`` arrays broadcast over ``eps`` and ``h``.

    ``kernel`` is a :class:`sparseldp.core.kernels.Kernel`; ``eps`` float array >= 0,
    ``h`` int64 array >= 0.  Exactly 1.0 (all leakage) for ``h > 2t`` and 0.0
    for ``h = 0``.  Round-to-nearest values (package docstring: not a bound).
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
    ``delta_h`` at ``h = min(H, 2t + 1)`` by the lemma of the package docstring:
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

