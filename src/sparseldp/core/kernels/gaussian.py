r"""The Gaussian kernel (Definition 13): ``log w(k) = -k^2 / (2 sigma^2)``.

Every range sum is the difference of two entries of one suffix array
``S_j = log sum_{i >= j} w(i)``, built with a priori error bounds by the base class in
:mod:`.gaussian_suffix`.  Here: the kernel, the defect numerator of Theorem 9 (the excess set
ends below Proposition 2's ``kappa_h``) and its scalar twins.
"""

from __future__ import annotations

import decimal
import math

import numpy as np

from .base import _FLIP, MEMO_INDICES, LogConcaveKernel, _lin_add
from .gaussian_suffix import _BoundAt, _SuffixArray, _head_end
from .rounding import (
    _FN_REL,
    TINY,
    _NEG_INF,
    _add,
    _ex,
    _exm1,
    _exp_dn,
    _exp_up,
    _flip,
    _log1mexp,
    _log_up,
    _logsubexp,
    _quiet,
    _INF,
    _nextafter,
    _s_add,
    _s_exp_up,
    _s_ceil,
    _s_log_up,
    _s_logaddexp,
    _s_logsubexp_dn,
    _s_logsubexp_near,
    _s_logsubexp_up,
    dn,
    logsubexp,
    up,
)

#: Largest Gaussian support size.  The exact accounting keeps a log suffix sum per
#: offset with its compensation term and error bounds (about 50 bytes per offset at
#: peak): measured 417 MB for ``account`` at s = 2^23 + 1, within the 512 MiB stated
#: in the README (2^27 + 1 took 5.9 GB).
GAUSSIAN_MAX_S = (1 << 23) + 1


def check_gaussian_s(s: int, name: str = "s") -> int:
    """``s <= GAUSSIAN_MAX_S``: the Gaussian kernel's exact sums need O(s) memory."""
    if s > GAUSSIAN_MAX_S:
        raise ValueError(
            f"{name} must be an odd integer in [1, 2^23 + 1 = {GAUSSIAN_MAX_S}] for the Gaussian family "
            f"(its exact accounting keeps one log suffix sum per offset, O(s) memory); got {s}"
        )
    return s


class GaussianKernel(_SuffixArray, LogConcaveKernel):
    """``w(k) = exp(-k^2 / (2 sigma^2))`` on ``|k| <= t``; one log suffix-sum array with error bounds."""

    def __init__(self, sigma: float, t: int):
        super().__init__()  # the caches (Kernel, "Caches"): here also "elog", "sbounds" and "bounds_s"
        self.sigma = float(sigma)
        self.t = int(t)
        check_gaussian_s(2 * self.t + 1)
        # sigma^2 may underflow to 0: then c = inf (a point mass at 0), handled by log_w
        den = 2.0 * self.sigma * self.sigma
        self._c = 1.0 / den if den > 0 else math.inf
        # rigorous bounds on c = 1 / (2 sigma^2) (sigma^2 subnormal or overflowing included)
        s2 = self.sigma * self.sigma
        s2_dn = max(float(dn(s2)), 0.0)
        s2_up = float(up(s2))
        den_dn = min(2.0 * s2_dn, float(np.finfo(float).max))
        self._c_up = float(up(1.0 / den_dn)) if den_dn > 0 else math.inf
        self._c_dn = max(float(dn(1.0 / (2.0 * s2_up))), 0.0) if 2.0 * s2_up < math.inf else 0.0
        self._s2 = (s2_dn, s2_up)
        self._J = _head_end(self._c, self.t)
        with np.errstate(all="ignore"):
            self._suffix = self._build_suffix()  # suffix[j] = log sum_{i=j}^{t} w(i)

    def __repr__(self) -> str:
        return f"SparseGaussian(sigma={self.sigma!r}, s={2 * self.t + 1})"

    def decimal_weights(self, ctx) -> list:
        """``w(0..t)`` as Decimals in context ``ctx`` by the exact-ratio recurrence ``w(k) = w(k-1) a b^(k-1)``.

        ``a = e^{-c}``, ``b = e^{-2c}``, ``c = 1/(2 sigma^2)``; each step multiplies
        correctly rounded numbers, so ``w(k)`` has relative error below ``(k^2 + 2)``
        units of the context's precision (used by :mod:`sparseldp.sampling`).
        """
        D = decimal.Decimal
        with decimal.localcontext(ctx):
            w = [D(1)]
            sig = D(self.sigma)
            c = D(1) / (2 * sig * sig)
            a = (-c).exp()
            b = a * a
            m = a
            for _ in range(self.t):
                w.append(w[-1] * m)
                m = m * b
        return w

    def log_w(self, k):
        k = np.asarray(k, dtype=float)
        if np.isinf(self._c):  # sigma so small that sigma^2 underflows: w = 1{k = 0}
            return np.where(k == 0, 0.0, _NEG_INF)
        return -(k * k) * self._c

    @_quiet
    def weights(self, mode: str = "near") -> np.ndarray:
        """``w(0..t) = e^{-k^2 c}``, ``c = 1/(2 sigma^2)``: nearest, or rigorous bounds (``k^2`` is exact for
        ``k <= 2^26``; ``c`` is enclosed in ``[c_dn, c_up]``, products rounded outward, ``exp`` to 2 ulp)."""
        k = np.arange(self.t + 1, dtype=float)
        if not self._c < math.inf:
            return np.where(k == 0, 1.0, 0.0)
        if mode == "near":
            return np.exp(-(k * k) * self._c)
        if mode == "up":
            return np.where(k == 0, 1.0, _exp_up(-dn((k * k) * self._c_dn)))
        return np.where(k == 0, 1.0, _exp_dn(-up((k * k) * self._c_up)))

    # -- range sums (two entries of the suffix array) and the defect numerator ----------
    def _range_nonneg(self, a, b, mode):
        a = np.asarray(a, dtype=np.int64)
        b = np.minimum(np.asarray(b, dtype=np.int64), self.t)
        empty = a > b
        top = self.t + 1
        ai = np.minimum(np.maximum(a, 0), top)
        bi = np.minimum(np.maximum(b + 1, 0), top)
        if mode == "near":
            val = logsubexp(self._suffix[ai], self._suffix[bi])
        elif mode == "up":
            val = _logsubexp(self._suffix_bounds(ai, "up"), self._suffix_bounds(bi, "dn"), "up")
        else:
            val = _logsubexp(self._suffix_bounds(ai, "dn"), self._suffix_bounds(bi, "up"), "dn")
        return np.where(empty, _NEG_INF, val)

    def tail_bound(self) -> float:
        """Rigorous upper bound on ``sum_{j > t} w(j)``.

        For ``j >= t+1``, ``j^2 >= (t+1)^2 + 2(t+1)(j-t-1)``, so the tail is at most
        the geometric series ``w(t+1) / (1 - exp(-(t+1)/sigma^2))``.
        """
        u = float(self.t + 1)
        with np.errstate(all="ignore"):
            arg = up(-dn(u * u * self._c_dn) - _log1mexp(dn(2.0 * u * self._c_dn), "dn"))
            return float(_exp_up(arg))

    def last_excess_index(self, h, eps):
        """Largest ``k`` with ``(h^2 - 2kh)/(2 sigma^2) > eps``: ``k < kappa_h`` (Proposition 2), rounded."""
        h = np.asarray(h, dtype=float)
        eps = np.asarray(eps, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            kappa = h / 2.0 - np.where(eps > 0, self.sigma * self.sigma * eps, 0.0) / h  # never inf * 0
            k = np.ceil(kappa) - 1.0
        return np.where(h > 0, k, -np.inf)

    @_quiet
    def numerator_terms(self, eps, h, mode):
        r"""The defect numerator ``Gamma_t delta_h(eps)`` as nonnegative log terms (Theorem 9).

        Leakage ``sum_{k=-t}^{h-t-1} w(k)``; overlap ``A - e^eps B`` with
        ``A = sum_{k=h-t}^{K} w(k)``, ``B = sum_{k=-t}^{K-h} w(k)`` and ``K`` the
        last index below Proposition 2's ``kappa_h = h/2 - sigma^2 eps / h``.
        For the bounds ``kappa`` is enclosed in ``[kappa_dn, kappa_up]`` (directed
        rounding); indices ``k <= K_lo = ceil(kappa_dn) - 1`` are certainly in the
        excess set, and the at most few indices in ``(K_lo, K_hi]`` have
        ``0 <= L(k) - eps <= 2 h c (kappa_up - kappa_dn)``, so their positive parts
        are at most ``w(k) min(1, 2 h c (kappa_up - kappa_dn))`` (an extra term
        of the upper bound; the lower bound omits them).
        """
        t = self.t
        terms = [(self._range(np.full_like(h, -t), h - t - 1, mode), h >= 1, "leak")]
        lo = h - t
        if mode == "near":
            last = self.last_excess_index(h, eps)
            last = np.minimum(np.maximum(last, lo - 1), t).astype(np.int64)
            nonempty = (last >= lo) & (h >= 1)
            a_hi = np.where(nonempty, last, lo)
            log_a = self._range(lo, a_hi, "near")
            log_b = self._range(np.full_like(lo, -t), a_hi - h, "near")
            ov = np.where(nonempty, logsubexp(log_a, eps + log_b), _NEG_INF)
            terms.append((ov, nonempty, "overlap"))
            return terms
        hf = h.astype(float)
        s2_dn, s2_up = self._s2
        se_up = up(s2_up * eps)
        se_dn = np.maximum(dn(s2_dn * eps), 0.0)
        k_up = up(hf / 2.0 - dn(se_dn / hf))
        k_dn = dn(hf / 2.0 - up(se_up / hf))
        pos_h = h >= 1
        lof = lo - 1.0
        K_lo = np.ceil(k_dn) - 1.0
        K_hi = np.ceil(k_up) - 1.0
        K_lo = np.where(pos_h & np.isfinite(K_lo), np.minimum(np.maximum(K_lo, lof), float(t)), lof).astype(np.int64)
        K_hi = np.where(pos_h & np.isfinite(K_hi), np.minimum(np.maximum(K_hi, lof), float(t)), lof).astype(np.int64)
        K_hi = np.maximum(K_hi, K_lo)
        nonempty = K_lo >= lo
        a_hi = np.where(nonempty, K_lo, lo)
        log_a = self._range(lo, a_hi, mode)
        log_b = self._range(np.full_like(lo, -t), a_hi - h, _flip(mode))
        if mode == "up":
            ov = _logsubexp(log_a, dn(eps + log_b), "up")
        else:
            ov = _logsubexp(log_a, up(eps + log_b), "dn")
        terms.append((np.where(nonempty, ov, _NEG_INF), nonempty, "overlap"))
        if mode == "up":
            edge = K_hi > K_lo
            if edge.any():
                F = up(up(2.0 * hf * self._c_up) * up(k_up - k_dn))
                lf = _log_up(np.minimum(np.where(edge, F, 0.0), 1.0))
                b_lo = np.where(edge, K_lo + 1, lo)
                b_hi = np.where(edge, K_hi, lo)
                lb = _add(self._range(b_lo, b_hi, "up"), lf, "up")
                terms.append((np.where(edge, lb, _NEG_INF), edge, "overlap"))
        return terms

    # -- scalar twins (see LogConcaveKernel): one (eps, h), Python floats ---------------
    def _bounds_s(self):
        """``(lower, upper)`` bounds on the suffix array, indexable with ``.item(i)`` (built once)."""
        got = self._cache.get("bounds_s")
        if got is None:
            if self.t < (1 << 22):
                self._suffix_bounds(0, "dn")  # builds the bound arrays (as the array path does)
                got = self._cache["sbounds"]
            else:  # as the array path: per index, without two more O(t) arrays
                got = (_BoundAt(self, "dn"), _BoundAt(self, "up"))
            self._cache["bounds_s"] = got
        return got

    def _range_nonneg_s(self, a: int, b: int, mode: str) -> float:
        t = self.t
        b = min(b, t)
        if a > b:
            return _NEG_INF
        ai = min(max(a, 0), t + 1)
        bi = min(max(b + 1, 0), t + 1)
        if mode == "near":
            return _s_logsubexp_near(self._suffix.item(ai), self._suffix.item(bi))
        lo, hi = self._bounds_s()
        if mode == "up":
            return _s_logsubexp_up(hi.item(ai), lo.item(bi))
        return _s_logsubexp_dn(lo.item(ai), hi.item(bi))

    def _range_s(self, a: int, b: int, mode: str) -> float:
        """Scalar :meth:`_range` (the two halves of :meth:`_range_nonneg_s` inlined)."""
        t = self.t
        if mode == "near":
            big = small = self._suffix
            sub = _s_logsubexp_near
        else:
            lo, hi = self._cache.get("bounds_s") or self._bounds_s()
            if mode == "up":
                big, small, sub = hi, lo, _s_logsubexp_up
            else:
                big, small, sub = lo, hi, _s_logsubexp_dn
        neg = pos = _NEG_INF
        if a <= -1:  # [a, min(b, -1)] mirrored to [max(1, -b), -a]
            i, j = max(1, -b), min(-a, t)
            if i <= j:
                neg = sub(big.item(i), small.item(j + 1))
        if b >= 0:
            i, j = max(0, a), min(b, t)
            if i <= j:
                pos = sub(big.item(i), small.item(j + 1))
        if neg == _NEG_INF:
            return pos
        if pos == _NEG_INF:
            return neg
        return _s_logaddexp(neg, pos, mode)

    def _last_near_s(self, eps: float, h: int) -> int:
        """Nearest-value last excess index, clamped to ``[h - t - 1, t]`` (as in :meth:`numerator_terms`)."""
        kappa = h / 2.0 - (self.sigma * self.sigma * eps if eps > 0 else 0.0) / h
        last = _s_ceil(kappa) - 1.0
        if last != last:  # 0 * inf (sigma^2 underflowing, eps = inf): no excess point, as the array path
            return h - self.t - 1
        return int(min(max(last, float(h - self.t - 1)), float(self.t)))

    def _leak_terms_s(self, h: int, mode: str) -> list:
        """The leakage term of :meth:`numerator_terms`: ``log sum_{k=-t}^{h-t-1} w(k)``."""
        return [self._range_s(-self.t, h - self.t - 1, mode)] if h >= 1 else []

    def _h_consts_s(self, h: int, mode: str):
        """Per-separation constants of :meth:`overlap_s`: ``(log C, {K: (log A_K, log B_K)})``."""
        got = (self.log_normalizer_bound(_FLIP[mode]), {})
        self._memo(mode)[h] = got
        return got

    def _k_consts_s(self, kmemo: dict, h: int, K: int, mode: str):
        """``(log A_K, log B_K)``: ``A_K = sum_{k=h-t}^{K} w(k)``, ``B_K = sum_{k=-t}^{K-h} w(k)``, as
        :meth:`numerator_terms` bounds them (``A`` in ``mode``, ``B`` the other way)."""
        t = self.t
        got = (self._range_s(h - t, K, mode), self._range_s(-t, K - h, _FLIP[mode]))
        if len(kmemo) >= MEMO_INDICES:
            kmemo.clear()
        kmemo[K] = got
        return got

    def overlap_s(self, eps: float, h: int, mode: str) -> float:
        """Scalar twin of the overlap terms of :meth:`numerator_terms` (``A - e^eps B`` over the excess set
        and, for ``"up"``, the edge term), normalized and summed (see :meth:`LogConcaveKernel.overlap_s`)."""
        t = self.t
        log_c, kmemo = self._smemo[mode].get(h) or self._h_consts_s(h, mode)
        lo = h - t
        if mode == "near":
            last = self._last_near_s(eps, h)
            if last < lo:
                return 0.0
            log_a, log_b = kmemo.get(last) or self._k_consts_s(kmemo, h, last, mode)
            return _ex(_s_logsubexp_near(log_a, eps + log_b) - log_c)
        hf = float(h)
        s2_dn, s2_up = self._s2
        se_up = _nextafter(s2_up * eps, _INF)
        se_dn = _nextafter(s2_dn * eps, -_INF)
        if se_dn < 0.0:  # max(se_dn, 0.0), NaN kept
            se_dn = 0.0
        k_up = _nextafter(hf / 2.0 - _nextafter(se_dn / hf, -_INF), _INF)
        k_dn = _nextafter(hf / 2.0 - _nextafter(se_up / hf, _INF), -_INF)
        # K = ceil(k) - 1 clamped to [lo - 1, t] (lo - 1 when k is not finite), in integers: the values of
        # the float expression of numerator_terms, since |k| < 2^53 wherever the clamp does not decide
        K_lo = K_hi = lo - 1
        if -_INF < k_dn < _INF:
            K_lo = min(max(math.ceil(k_dn) - 1, lo - 1), t)
        if -_INF < k_up < _INF:
            K_hi = min(max(math.ceil(k_up) - 1, lo - 1), t)
        ov = 0.0
        if K_lo >= lo:
            log_a, log_b = kmemo.get(K_lo) or self._k_consts_s(kmemo, h, K_lo, mode)
            if mode == "up":
                # _s_logsubexp_up(log_a, eps + log_b rounded down) and _lin_add, inlined (the hot path)
                x = log_a
                if x == _NEG_INF:
                    lv = _NEG_INF
                else:
                    z = _nextafter(_nextafter(eps + log_b, _NEG_INF) - x, _NEG_INF)
                    lv = _nextafter(x, _INF)
                    if z < 0:
                        g = -_exm1(z)
                        g = _nextafter(g + (_FN_REL * g + TINY), _INF)
                        v = _nextafter(x + _s_log_up(g if not g > 1.0 else 1.0), _INF)
                        if not lv < v:
                            lv = v
                v = _s_exp_up(_nextafter(lv - log_c, _INF))
                ov = _nextafter(v, _INF) if v > 0 else v
            else:
                ov = _lin_add(ov, _s_logsubexp_dn(log_a, _nextafter(eps + log_b, _INF)), log_c, mode)
        if mode == "up" and K_hi > K_lo:
            # the indices within rounding of kappa: their positive parts are at most w(k) min(1, F)
            F = _nextafter(_nextafter(2.0 * hf * self._c_up, _INF) * _nextafter(k_up - k_dn, _INF), _INF)
            lf = _s_log_up(min(F, 1.0))
            key = (K_lo, K_hi)
            edge = kmemo.get(key)
            if edge is None:
                if len(kmemo) >= MEMO_INDICES:
                    kmemo.clear()
                edge = kmemo[key] = self._range_s(K_lo + 1, K_hi, "up")
            ov = _lin_add(ov, _s_add(edge, lf, "up"), log_c, mode)
        return ov

    def segments(self, h: int):
        """:meth:`LogConcaveKernel.segments`: the loss ``h (h - 2k) / (2 sigma^2)`` is strictly decreasing in
        ``k``, so every ``k`` of ``[h - t, min(t, ceil(h/2) - 1)]`` ends a run of its own."""
        K = np.arange(h - self.t, min(self.t, (h + 1) // 2 - 1) + 1, dtype=np.int64)
        return K, self._c * float(h) * (h - 2 * K).astype(float)

    def segment_count(self, h: int) -> int:
        return max(0, min(self.t, (h + 1) // 2 - 1) - (h - self.t) + 1)

    def _half_fast(self, i: int, j: int) -> float:
        x, y = self._suffix.item(i), self._suffix.item(j + 1)  # log S_i, log S_{j+1}
        if not y < x:  # as logsubexp: -inf (also within rounding, far in the tail)
            return _NEG_INF
        if y == _NEG_INF:
            return x
        g = -math.expm1(y - x)
        return x + (math.log(g) if g > 0.0 else _NEG_INF)

    def loss_s(self, h: int, k: int) -> float:
        return self._c * float(h) * float(h - 2 * k)

    def last_excess_s(self, eps: float, h: int) -> int:
        return self._last_near_s(eps, h)

    def moment_sums(self):
        t = self.t
        if t == 0:
            return 0.0, 0.0
        # beyond j = 40 sigma + 1 every term is below e^{-800}: exactly zero in double
        jmax = int(min(t, np.ceil(40.0 * self.sigma) + 1))
        s1 = s2 = 0.0
        chunk = 1 << 22
        for start in range(1, jmax + 1, chunk):
            j = np.arange(start, min(jmax, start + chunk - 1) + 1, dtype=float)
            wj = np.exp(-(j * j) * self._c)
            s1 += float((j * wj).sum())
            s2 += float((j * j * wj).sum())
        return s1, s2
