"""A general kernel: any nonnegative symmetric weights ``w(0..t)`` on the window, no shape assumed.

Accounted by the generic path of :mod:`sparseldp.core.accounting`;
:func:`normalizer_bound` is that path's normalizer.
"""

from __future__ import annotations

import decimal

import numpy as np

from .base import Kernel
from .rounding import _NEG_INF, _log_dn, _log_up, _quiet, _two_prod, bounded_sum, dn, log_dn, log_up, up


def check_weights(weights, name: str = "weights") -> np.ndarray:
    """Validate kernel weights ``w(0), ..., w(t)``: a 1-d array of finite reals ``>= 0`` with ``w(0) > 0``.

    Returns a read-only float64 copy (``-0.0`` becomes ``0.0``).  ``TypeError``
    for a non-numeric argument, ``ValueError`` (naming the argument, the
    allowed range and the value) otherwise.
    """
    allowed = "a 1-d sequence of finite real numbers >= 0 (w(0), ..., w(t)) with w(0) > 0"
    if isinstance(weights, (str, bytes)) or callable(weights):
        raise TypeError(f"{name} must be {allowed}; got {type(weights).__name__} {weights!r}"[:300])
    arr = np.asarray(weights)
    if arr.dtype.kind == "b" or (arr.dtype.kind == "O" and any(isinstance(v, (bool, np.bool_)) for v in arr.flat)):
        raise TypeError(f"{name} must be {allowed}; got booleans {weights!r}"[:300])
    if arr.dtype.kind not in "iuf":
        try:
            if arr.dtype.kind in "cSUV":
                raise TypeError
            arr = arr.astype(float)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be {allowed}; got {type(weights).__name__} {weights!r}"[:300]) from None
    if arr.ndim != 1 or arr.size < 1:
        raise ValueError(f"{name} must be {allowed}; got an array of shape {arr.shape}")
    if arr.size > (MAX_KERNEL_S + 1) // 2:
        raise ValueError(f"{name} must have at most {(MAX_KERNEL_S + 1) // 2} entries (s <= {MAX_KERNEL_S}); "
                         f"got {arr.size}")
    with np.errstate(over="ignore", invalid="ignore"):
        w = np.asarray(arr, dtype=float) + 0.0
    bad = ~(np.isfinite(w) & (w >= 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name} must be {allowed}; got {name}[{i}] = {arr[i].item()!r}")
    if not w[0] > 0:
        raise ValueError(f"{name}[0] = w(0) must be a real number > 0 (every input can report itself); got {arr[0].item()!r}")
    w = w.copy()
    w.setflags(write=False)
    return w


#: Largest support of a general kernel: its accounting is O(s) per separation and its sampler keeps
#: one exact count per offset (the sampler's own limit, 2^22 + 1).
MAX_KERNEL_S = (1 << 22) + 1


def _exact_log_concave(w) -> bool:
    """Whether ``w(0..t)`` (mirrored, zero beyond) is log-concave, decided exactly.

    Log-concave on Z iff the support is an interval and ``w(k)^2 >= w(k-1) w(k+1)``
    inside it.  With ``w = m 2^e`` (``frexp``, ``m`` in ``[1/2, 1)``) the products
    of mantissas are formed error-free (Dekker's ``TwoProduct``, no underflow
    since ``m >= 1/2``) and compared together with the exponent sums.
    """
    pos = w > 0
    m_last = int(np.flatnonzero(pos)[-1])
    if not pos[: m_last + 1].all():
        return False
    if m_last == 0:
        return True
    v = w[: m_last + 1]
    full = np.concatenate([[0.0], v[:0:-1], v, [0.0]])  # w(-m-1..m+1): zero beyond the support
    mid, lo, hi = full[1:-1], full[:-2], full[2:]
    keep = (lo > 0) & (hi > 0)  # where a neighbour is 0 the inequality holds trivially
    mid, lo, hi = mid[keep], lo[keep], hi[keep]
    if mid.size == 0:
        return True
    fm, em = np.frexp(mid)
    fl, el = np.frexp(lo)
    fh, eh = np.frexp(hi)
    p1, e1 = _two_prod(fm, fm)
    p2, e2 = _two_prod(fl, fh)
    D = 2 * em.astype(np.int64) - (el.astype(np.int64) + eh.astype(np.int64))
    # p1 + e1 in [1/4, 1), p2 + e2 in [1/4, 1): D >= 2 decides ">", D <= -2 decides "<"
    Dc = np.clip(D, -1, 1)
    q1, r1 = np.ldexp(p1, Dc), np.ldexp(e1, Dc)  # exact: a power-of-two scaling of normal numbers
    ge = (q1 > p2) | ((q1 == p2) & (r1 >= e2))
    ok = np.where(D >= 2, True, np.where(D <= -2, False, ge))
    return bool(ok.all())


class GeneralKernel(Kernel):
    r"""Any symmetric nonnegative kernel: ``w(k) = weights[|k|]`` on ``|k| <= t = len(weights) - 1``.

    No shape is assumed: the accountant sums ``[P(y|0) - e^eps P(y|h)]_+``
    over the window directly (:mod:`sparseldp.core.accounting`, generic path), so
    zeros inside the window and non-monotone (e.g. staircase) weights are
    fine.  ``log_concave`` is ``True`` only when verified exactly
    (:func:`_exact_log_concave`); it is informational, no path relies on it.

    Scale and rounding: the weights are stored scaled by the power of two
    ``2^-E`` that brings the largest into ``[1/2, 1)`` (so no sum overflows).
    That scaling is exact unless a scaled weight falls into the subnormal
    range; :meth:`weights` then brackets the exact scaled value by one unit
    each way (``"dn"``/``"up"``), so every bound stays rigorous.
    """

    def __init__(self, weights):
        super().__init__()  # the caches (Kernel, "Caches")
        w = check_weights(weights)
        self.t = int(w.size - 1)
        self._orig = w
        E = int(np.frexp(np.max(w))[1])
        ws = np.ldexp(w, -E)
        back = np.ldexp(ws, E)  # exact: scaling back up cannot round
        w_dn = np.where(back > w, np.maximum(dn(ws), 0.0), ws)
        w_up = np.where(back < w, up(ws), ws)
        self._w = {"near": ws, "dn": w_dn, "up": w_up}
        for a in self._w.values():
            a.setflags(write=False)
        with np.errstate(divide="ignore"):
            self._logw = np.log(ws)
        self.log_concave = _exact_log_concave(ws)

    def __repr__(self) -> str:
        w = self._orig
        shown = ", ".join(repr(float(v)) for v in w[:6]) + (", ..." if w.size > 6 else ("," if w.size == 1 else ""))
        return f"SparseKernel(weights=({shown}), s={2 * self.t + 1})"

    @property
    def original_weights(self) -> np.ndarray:
        """The weights as given (read-only), before the power-of-two scaling."""
        return self._orig

    def weights(self, mode: str = "near") -> np.ndarray:
        return self._w[mode]

    def log_w(self, k):
        k = np.abs(np.asarray(k))
        inside = k <= self.t
        idx = np.where(inside, k, 0).astype(np.int64)
        return np.where(inside, self._logw[idx], _NEG_INF)

    def log_normalizer_bound(self, mode: str) -> float:
        key = "logc_" + mode
        got = self._cache.get(key)
        if got is None:
            c = normalizer_bound(self._w[mode], mode)
            with np.errstate(divide="ignore"):
                got = float(np.log(c)) if mode == "near" else float(log_up(c) if mode == "up" else log_dn(c))
            self._cache[key] = got
        return got

    @_quiet
    def log_range(self, a, b, mode="near"):
        """``log sum_{k=a}^{b} w(|k|)`` summed directly over the window (O(s) per range, in chunks);
        bounds from outward-bounded weights and :func:`bounded_sum`."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        a, b = np.broadcast_arrays(a, b)
        shape = a.shape
        af, bf = a.reshape(-1), b.reshape(-1)
        t = self.t
        full = np.concatenate([self._w[mode][:0:-1], self._w[mode]])  # w(-t..t)
        k = np.arange(-t, t + 1, dtype=np.int64)
        out = np.empty(af.size)
        rows = max(1, (1 << 20) // full.size)
        for start in range(0, af.size, rows):
            lo, hi = af[start : start + rows, None], bf[start : start + rows, None]
            x = np.where((k[None, :] >= lo) & (k[None, :] <= hi), full[None, :], 0.0)
            s = bounded_sum(x, axis=1, mode=mode)
            out[start : start + rows] = np.log(s) if mode == "near" else (_log_up(s) if mode == "up" else _log_dn(s))
        return out.reshape(shape)

    def moment_sums(self):
        if self.t == 0:
            return 0.0, 0.0
        j = np.arange(1, self.t + 1, dtype=float)
        wj = self._w["near"][1:]
        return float(np.sum(j * wj)), float(np.sum(j * j * wj))

    def decimal_weights(self, ctx) -> list:
        """The given ``w(0..t)`` as Decimals: ``Decimal(float)`` is exact (``ctx`` is not needed)."""
        return [decimal.Decimal(v) for v in self._orig.tolist()]


def normalizer_bound(w, mode: str) -> float:
    """``C = w(0) + 2 sum_{j=1}^t w(j)`` from weights ``w(0..t)`` (bounds when ``w`` holds bounds):
    nearest, or a rigorous upper (``"up"``) / lower (``"dn"``) bound (:func:`bounded_sum`)."""
    rest = float(bounded_sum(w[1:], mode=mode)) if w.size > 1 else 0.0
    c = float(w[0]) + 2.0 * rest  # 2 x is exact
    if mode == "near" or rest == 0.0:
        return c
    return float(up(c) if mode == "up" else dn(c))
