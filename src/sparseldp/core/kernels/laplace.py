r"""The discrete Laplace kernel (Definition 6): ``log w(k) = -lam |k|``.

Every sum is a geometric closed form.  The overlap excess is split into three
nonnegative products (no cancellation, see :meth:`LaplaceKernel.numerator_terms`)
and the excess set is decided *exactly*: ``lam m > eps`` is evaluated with an
error-free product (Dekker's ``TwoProduct``), so ``eps`` within rounding of
``lam h`` is classified correctly and ``lam m - eps`` is known to 2 ulp.
"""

from __future__ import annotations

import decimal
import math

import numpy as np

from .base import _FLIP, MEMO_INDICES, LogConcaveKernel, _lin, _lin_add
from .laplace_moments import laplace_moment_sums
from .rounding import (
    _FN_REL,
    TINY,
    U,
    _INF,
    _NEG_INF,
    _add,
    _ex,
    _exm1,
    _exp_dn,
    _exp_up,
    _lg,
    _log1mexp,
    _nextafter,
    _quiet,
    _s_add,
    _s_ceil,
    _s_dn,
    _s_exp_up,
    _s_ldexp,
    _s_log1mexp,
    _s_log_up,
    _s_two_prod,
    _s_up,
    _two_prod,
    dn,
    up,
)


class LaplaceKernel(LogConcaveKernel):
    r"""``w(k) = exp(-lam |k|)`` on ``|k| <= t``; geometric closed forms.

    With ``q = e^{-lam}`` and ``G(a, n) = sum_{j=a}^{a+n-1} q^j
    = q^a (1 - q^n) / (1 - q)``, every quantity is a product of factors
    ``e^{-lam a}``, ``1 - e^{-x}`` and ``1/(1 - q)``, each evaluated (in log
    space) to a few ulp: no subtraction of nearly equal numbers occurs.
    """

    def __init__(self, lam: float, t: int):
        super().__init__()  # the caches (Kernel, "Caches")
        self.lam = float(lam)
        self.t = int(t)
        # log(1 - e^{-lam}) without cancellation for tiny lam, and its bounds (scalar twins: the values of
        # _log1mexp, at function-call cost)
        self._log_one_minus_q = _s_log1mexp(self.lam, "near")
        self._l1mq = {"near": self._log_one_minus_q, "up": _s_log1mexp(self.lam, "up"),
                      "dn": _s_log1mexp(self.lam, "dn")}
        # lam = f 2^E with 1/2 <= f < 1: products f * m are error-free for integers m <= 2^53
        f, E = math.frexp(self.lam)
        self._lam_f, self._lam_e = float(f), int(E)

    def __repr__(self) -> str:
        return f"SparseLaplace(lam={self.lam!r}, s={2 * self.t + 1})"

    def decimal_weights(self, ctx) -> list:
        """``w(0..t) = q^k``, ``q = e^{-lam}``, as Decimals in context ``ctx`` (used by :mod:`sparseldp.sampling`).

        Each step multiplies correctly rounded numbers, so ``w(k)`` has relative
        error below ``k + 2`` units of the context's precision.
        """
        D = decimal.Decimal
        with decimal.localcontext(ctx):
            w = [D(1)]
            q = (-D(self.lam)).exp()
            for _ in range(self.t):
                w.append(w[-1] * q)
        return w

    def log_w(self, k):
        return -self.lam * np.abs(np.asarray(k, dtype=float))

    @_quiet
    def weights(self, mode: str = "near") -> np.ndarray:
        """``w(0..t) = e^{-lam k}``: nearest, or rigorous bounds (``lam k`` rounded outward, ``exp`` to 2 ulp)."""
        k = np.arange(self.t + 1, dtype=float)
        if mode == "near":
            return np.exp(-self.lam * k)
        if mode == "up":
            return np.where(k == 0, 1.0, _exp_up(-dn(self.lam * k)))
        return np.where(k == 0, 1.0, _exp_dn(-up(self.lam * k)))

    def _log_geom(self, a, n, mode):
        """``log G(a, n) = -lam a + log(1 - q^n) - log(1 - q)`` for float arrays ``a >= 0``, ``n >= 1``."""
        lam = self.lam
        if mode == "near":
            return -lam * a + _log1mexp(lam * n, "near") - self._log_one_minus_q
        if mode == "up":
            s = up(-dn(lam * a) + _log1mexp(up(lam * n), "up"))
            return up(s - self._l1mq["dn"])
        s = dn(-up(lam * a) + _log1mexp(dn(lam * n), "dn"))
        return dn(s - self._l1mq["up"])

    def _range_nonneg(self, a, b, mode):
        # sum_{i=a}^{b} q^i = G(a, n),  n = b - a + 1
        a = np.asarray(a, dtype=float)
        b = np.minimum(np.asarray(b, dtype=float), self.t)
        n = b - a + 1
        val = self._log_geom(a, np.maximum(n, 1.0), mode)
        return np.where(n >= 1, val, _NEG_INF)

    @_quiet
    def tail_bound(self) -> float:
        """Rigorous upper bound on ``sum_{j > t} w(j) = q^{t+1} / (1 - q)`` (exact geometric tail)."""
        arg = up(-dn(self.lam * (self.t + 1.0)) - self._l1mq["dn"])
        return float(_exp_up(arg))

    # -- the overlap excess, decided exactly -------------------------------------
    def _lam_m_minus_eps(self, m, eps, mode="near"):
        """``lam m - eps`` for integer-valued float arrays ``m >= 0``: ``(positive, value)``.

        ``value`` is rounded to nearest, or a lower (``mode="dn"``) / upper (``"up"``) bound.

        ``positive`` is the exact sign.  In plain floating point
        ``fl(fl(lam m) - eps)`` is used, with outward rounding for the bounds;
        where ``|lam m - eps| <= 2^-20 lam m`` (cancellation could hide the sign
        or the leading bits) the exact split is used instead: ``lam m = 2^E (p + e)``
        exactly (``TwoProduct`` of the mantissa ``f`` and ``m``), and the sign of
        ``fl((p - eps') + e)``, ``eps' = eps 2^-E``, is exact (``p - eps'`` is exact
        by Sterbenz's lemma there, and one correctly rounded addition keeps the
        sign), with ``lam m - eps`` then known to 2 ulp.
        """
        # (the caller suppresses floating-point warnings)
        p = self.lam * m
        near = p - eps
        d = near if mode == "near" else (up(up(p) - eps) if mode == "up" else dn(dn(p) - eps))
        amb = np.abs(near) <= 2.0**-20 * p
        if amb.any():
            shape = amb.shape
            idx = np.flatnonzero(amb.reshape(-1))
            mm = np.broadcast_to(m, shape).reshape(-1)[idx]
            ee = np.ldexp(np.broadcast_to(eps, shape).reshape(-1)[idx], -self._lam_e)
            pp, e = _two_prod(self._lam_f, mm)
            df = pp - ee
            near = np.array(np.broadcast_to(near, shape), dtype=float)
            near.reshape(-1)[idx] = df + e  # the sign is exact; scaled below
            pos = near > 0
            near.reshape(-1)[idx] = np.ldexp(near.reshape(-1)[idx], self._lam_e)
            if mode == "near":
                d = near
            else:
                d = np.array(np.broadcast_to(d, shape), dtype=float)
                if mode == "up":
                    d.reshape(-1)[idx] = up(np.ldexp(up(up(df) + e), self._lam_e))
                else:
                    d.reshape(-1)[idx] = dn(np.ldexp(dn(dn(df) + e), self._lam_e))
            return pos, d
        return near > 0, d

    def _last_excess(self, h, eps, k1, cap, exact=True):
        """Exact largest ``k`` in ``[k1, cap]`` with ``lam (h - 2k) > eps`` (``k1 - 1`` if none).

        ``h``, ``k1``, ``cap`` float arrays of integers, ``eps`` finite with
        ``lam h > eps``.  ``K = ceil(x) - 1`` with ``x = (h - eps/lam)/2``; the
        rounded ``x`` errs by at most ``2u (h + eps/lam)``, so ``K`` is certain
        unless ``x`` lies that close to an integer.  Those few are corrected by
        the exact ``lam (h - 2K) - eps`` and verified with exact comparisons.
        """
        lam = self.lam
        r = eps / lam
        x = (h - r) / 2.0
        K = np.minimum(np.maximum(np.ceil(x) - 1.0, k1 - 1.0), cap)
        if not exact:  # nearest values: an index at a near tie contributes a rounding-sized term either way
            return K
        amb = ~(np.abs(x - np.round(x)) > 4.0 * U * (h + np.abs(r)) + 1e-300)
        if not amb.any():
            return K
        idx = np.flatnonzero(amb)
        hs, es, a1, cp = h[idx], eps[idx], k1[idx], cap[idx]
        Ks = K[idx]
        _, d0 = self._lam_m_minus_eps(hs - 2.0 * Ks, es)
        Ks = np.minimum(np.maximum(Ks + np.ceil(d0 / (2.0 * lam)) - 1.0, a1 - 1.0), cp)
        for _ in range(8):
            here = self._lam_m_minus_eps(hs - 2.0 * Ks, es)[0]
            nxt = self._lam_m_minus_eps(hs - 2.0 * Ks - 2.0, es)[0]
            bad_here = (Ks >= a1) & ~here  # K claims an excess point it does not have
            bad_next = (Ks + 1.0 <= cp) & nxt  # the next point is an excess point too
            if not (bad_here.any() or bad_next.any()):
                K = K.copy()
                K[idx] = Ks
                return K
            Ks = np.where(bad_here, Ks - 1.0, np.where(bad_next, Ks + 1.0, Ks))
        raise RuntimeError("internal error: the Laplace excess boundary did not settle")  # pragma: no cover

    @_quiet
    def numerator_terms(self, eps, h, mode):
        r"""The defect numerator ``C_t delta_h(eps)`` as nonnegative log terms (Theorem 3).

        ``eps`` float, ``h`` int64 arrays of one shape with ``0 <= h <= 2t``.
        Returns a list of ``(log_value, nonempty, part)`` with ``part`` in
        ``{"leak", "overlap"}``.  The overlap loss is ``lam h`` for ``k <= 0``
        and ``lam (h - 2k)`` for ``0 <= k <= h``, so the excess set on
        ``[h - t, t]`` is ``[h - t, 0]`` (when ``h <= t`` and ``lam h > eps``)
        followed by ``[k1, K]``, ``k1 = max(1, h - t)``.  With ``d = lam h - eps``
        and ``d_K = lam (h - 2K) - eps`` (both > 0, from an exact product):

        * region 1: ``(1 - e^{-d}) G(0, t - h + 1)``;
        * region 2: ``sum_{k=k1}^{K} (q^k - e^eps q^{h-k})
          = q^{k1} (1 - q^{K-k1}) (1-q^n)/(1-q) + (1 - e^{-d_K}) q^K (1-q^n)/(1-q)``,
          ``n = K - k1 + 1``,

        three products of nonnegative factors.
        """
        t = self.t
        hf = h.astype(float)
        small = h <= t
        terms = []
        # support leakage: k = -t .. h-t-1
        a1 = np.where(small, t - hf + 1.0, 1.0)
        n1 = np.where(small, hf, float(t))
        ne1 = np.where(small, h >= 1, t >= 1)
        terms.append((self._log_geom(a1, np.maximum(n1, 1.0), mode), ne1, "leak"))
        ne2 = ~small
        terms.append((self._log_geom(np.zeros_like(hf), np.maximum(hf - t, 1.0), mode), ne2, "leak"))
        # overlap: only where lam h > eps (decided exactly); computed on that subset
        shape = hf.shape
        pos, dh = self._lam_m_minus_eps(hf, eps, mode)
        idx = np.flatnonzero(pos.reshape(-1) & (h.reshape(-1) >= 1))
        logs = [np.full(hf.size, _NEG_INF) for _ in range(3)]
        nes = [np.zeros(hf.size, dtype=bool) for _ in range(3)]
        if idx.size:
            hs = hf.reshape(-1)[idx]
            es = np.broadcast_to(eps, shape).reshape(-1)[idx]
            d = dh.reshape(-1)[idx]
            sm = hs <= t
            # region 1: k = h-t .. 0, all with loss lam h
            g = self._log_geom(np.zeros_like(hs), np.maximum(t - hs + 1.0, 1.0), mode)
            logs[0][idx] = np.where(sm, _add(_log1mexp(d, mode), g, mode), _NEG_INF)
            nes[0][idx] = sm
            # region 2: k = k1 .. K
            k1 = np.maximum(1.0, hs - t)
            cap = np.ceil(hs / 2.0) - 1.0
            K = self._last_excess(hs, es, k1, cap, exact=mode != "near")
            has = K >= k1
            Ks = np.where(has, K, k1)
            n = Ks - k1 + 1.0
            _, dk = self._lam_m_minus_eps(hs - 2.0 * Ks, es, mode)
            if mode == "near":  # K may sit one past a near tie: its term is then within rounding of 0
                dk = np.maximum(dk, 0.0)
            common = self._log_geom(np.zeros_like(hs), n, mode)  # log (1 - q^n)/(1 - q)
            lam = self.lam
            if mode == "near":
                v1 = -lam * k1 + _log1mexp(lam * (Ks - k1), "near") + common
                v2 = _log1mexp(dk, "near") - lam * Ks + common
            else:
                lamk1 = up(lam * k1) if mode == "dn" else dn(lam * k1)
                lamK = up(lam * Ks) if mode == "dn" else dn(lam * Ks)
                lamd = dn(lam * (Ks - k1)) if mode == "dn" else up(lam * (Ks - k1))
                v1 = _add(_add(-lamk1, _log1mexp(lamd, mode), mode), common, mode)
                v2 = _add(_add(_log1mexp(dk, mode), -lamK, mode), common, mode)
            more = has & (Ks > k1)
            logs[1][idx] = np.where(more, v1, _NEG_INF)
            nes[1][idx] = more
            logs[2][idx] = np.where(has, v2, _NEG_INF)
            nes[2][idx] = has
        for lv, ne in zip(logs, nes):
            terms.append((lv.reshape(shape), ne.reshape(shape), "overlap"))
        return terms

    # -- scalar twins (see LogConcaveKernel): one (eps, h), Python floats ---------------
    def _log_geom_s(self, a: float, n: float, mode: str) -> float:
        """Scalar :meth:`_log_geom`."""
        lam = self.lam
        if mode == "near":
            return -lam * a + _s_log1mexp(lam * n, "near") - self._log_one_minus_q
        if mode == "up":
            s = _nextafter(-_nextafter(lam * a, -_INF) + _s_log1mexp(_nextafter(lam * n, _INF), "up"), _INF)
            return _nextafter(s - self._l1mq["dn"], _INF)
        s = _nextafter(-_nextafter(lam * a, _INF) + _s_log1mexp(_nextafter(lam * n, -_INF), "dn"), -_INF)
        return _nextafter(s - self._l1mq["up"], -_INF)

    def _range_nonneg_s(self, a: int, b: int, mode: str) -> float:
        a = float(a)
        n = float(min(b, self.t)) - a + 1.0
        return self._log_geom_s(a, n, mode) if n >= 1.0 else _NEG_INF

    def _lam_m_minus_eps_s(self, m: float, eps: float, mode: str = "near"):
        """Scalar :meth:`_lam_m_minus_eps`: ``(lam m - eps > 0 exactly, value)``."""
        p = self.lam * m
        near = p - eps
        if abs(near) <= 2.0**-20 * p:
            pp, e = _s_two_prod(self._lam_f, m)
            df = pp - _s_ldexp(eps, -self._lam_e)
            r = df + e
            if mode == "near":
                return r > 0, _s_ldexp(r, self._lam_e)
            if mode == "up":
                return r > 0, _s_up(_s_ldexp(_s_up(_s_up(df) + e), self._lam_e))
            return r > 0, _s_dn(_s_ldexp(_s_dn(_s_dn(df) + e), self._lam_e))
        if mode == "near":
            return near > 0, near
        if mode == "up":
            return near > 0, _s_up(_s_up(p) - eps)
        return near > 0, _s_dn(_s_dn(p) - eps)

    def _last_excess_s(self, h: float, eps: float, k1: float, cap: float, exact: bool = True) -> float:
        """Scalar :meth:`_last_excess`."""
        lam = self.lam
        r = eps / lam
        x = (h - r) / 2.0
        K = min(max(_s_ceil(x) - 1.0, k1 - 1.0), cap)
        if not exact:
            return K
        if abs(x - float(round(x))) > 4.0 * U * (h + abs(r)) + 1e-300:
            return K
        _, d0 = self._lam_m_minus_eps_s(h - 2.0 * K, eps)
        K = min(max(K + _s_ceil(d0 / (2.0 * lam)) - 1.0, k1 - 1.0), cap)
        for _ in range(8):
            here = self._lam_m_minus_eps_s(h - 2.0 * K, eps)[0]
            nxt = self._lam_m_minus_eps_s(h - 2.0 * K - 2.0, eps)[0]
            if K >= k1 and not here:  # K claims an excess point it does not have
                K -= 1.0
            elif K + 1.0 <= cap and nxt:  # the next point is an excess point too
                K += 1.0
            else:
                return K
        raise RuntimeError("internal error: the Laplace excess boundary did not settle")  # pragma: no cover

    def _leak_terms_s(self, h: int, mode: str) -> list:
        """The leakage terms of :meth:`numerator_terms` for one ``h`` (the nonempty ones, as log values)."""
        t = self.t
        hf = float(h)
        if h <= t:
            return [self._log_geom_s(t - hf + 1.0, max(hf, 1.0), mode)] if h >= 1 else []
        terms = [self._log_geom_s(1.0, max(float(t), 1.0), mode)] if t >= 1 else []
        terms.append(self._log_geom_s(0.0, max(hf - t, 1.0), mode))
        return terms

    def _h_consts_s(self, h: int, mode: str):
        """Per-separation constants of :meth:`overlap_s`: ``(h, G, k1, cap, log C, {K: ...})``."""
        t = self.t
        hf = float(h)
        # region 1 (k = h-t .. 0) exists for h <= t; its geometric sum G(0, t - h + 1)
        g = self._log_geom_s(0.0, max(t - hf + 1.0, 1.0), mode) if h <= t else None
        got = (hf, g, max(1.0, hf - t), _s_ceil(hf / 2.0) - 1.0, self.log_normalizer_bound(_FLIP[mode]), {})
        self._memo(mode)[h] = got
        return got

    def _k_consts_s(self, kmemo: dict, K: float, k1: float, log_c: float, mode: str):
        """Per-``K`` constants of :meth:`overlap_s`: ``(v1 or None, lam K, common)`` with ``v1`` the first
        region-2 term already normalized (it depends on ``K`` alone), ``common = log (1 - q^n)/(1 - q)``."""
        n = K - k1 + 1.0
        common = self._log_geom_s(0.0, n, mode)
        lam = self.lam
        if mode == "near":
            lamK = lam * K
            v1 = -lam * k1 + _s_log1mexp(lam * (K - k1), "near") + common
        else:
            lamk1 = _s_up(lam * k1) if mode == "dn" else _s_dn(lam * k1)
            lamK = _s_up(lam * K) if mode == "dn" else _s_dn(lam * K)
            lamd = _s_dn(lam * (K - k1)) if mode == "dn" else _s_up(lam * (K - k1))
            v1 = _s_add(_s_add(-lamk1, _s_log1mexp(lamd, mode), mode), common, mode)
        v1 = _lin(v1, log_c, mode) if K > k1 else None
        if len(kmemo) >= MEMO_INDICES:
            kmemo.clear()
        got = kmemo[K] = (v1, lamK, common)
        return got

    def overlap_s(self, eps: float, h: int, mode: str) -> float:
        """Scalar twin of the overlap terms of :meth:`numerator_terms` (region 1, then region 2's two
        products), normalized and summed (see :meth:`LogConcaveKernel.overlap_s`)."""
        hc = self._smemo[mode].get(h) or self._h_consts_s(h, mode)
        hf, g, k1, cap, log_c, kmemo = hc
        if mode == "up":
            return self._overlap_up_s(eps, hf, g, k1, cap, log_c, kmemo)
        pos, d = self._lam_m_minus_eps_s(hf, eps, mode)
        if not pos:
            return 0.0
        if mode == "near":
            ov = 0.0 if g is None else _ex(_lg(-_exm1(-d)) + g - log_c)
            K = self._last_excess_s(hf, eps, k1, cap, exact=False)
            if not K >= k1:
                return ov
            v1, lamK, common = kmemo.get(K) or self._k_consts_s(kmemo, K, k1, log_c, mode)
            if v1 is not None:
                ov += v1
            _, dk = self._lam_m_minus_eps_s(hf - 2.0 * K, eps, mode)
            dk = max(dk, 0.0)  # K may sit one past a near tie: its term is then within rounding of 0
            return ov + _ex(_lg(-_exm1(-dk)) - lamK + common - log_c)
        ov = 0.0  # "dn"
        if g is not None:  # region 1: (1 - e^{-d}) G(0, t - h + 1)
            ov = _lin_add(ov, _s_add(_s_log1mexp(d, mode), g, mode), log_c, mode)
        K = self._last_excess_s(hf, eps, k1, cap)
        if not K >= k1:
            return ov
        v1, lamK, common = kmemo.get(K) or self._k_consts_s(kmemo, K, k1, log_c, mode)
        if v1 is not None:
            ov = _nextafter(ov + v1, _NEG_INF) if v1 > 0 else ov + v1
        _, dk = self._lam_m_minus_eps_s(hf - 2.0 * K, eps, mode)
        return _lin_add(ov, _s_add(_s_add(_s_log1mexp(dk, mode), -lamK, mode), common, mode), log_c, mode)

    def _overlap_up_s(self, eps, hf, g, k1, cap, log_c, kmemo):
        """:meth:`overlap_s` in mode ``"up"``: the operations of the ``"dn"`` branch with the directions
        reversed, and the helpers (``_lam_m_minus_eps_s`` and ``_last_excess_s`` away from ties,
        ``_s_log1mexp``, ``_s_add``, ``_lin_add``) written out: the hot path of every certificate."""
        lam = self.lam
        p = lam * hf
        d = p - eps
        if abs(d) <= 2.0**-20 * p:  # near a tie: the exact split
            pos, d = self._lam_m_minus_eps_s(hf, eps, "up")
            if not pos:
                return 0.0
        elif d > 0:
            d = _nextafter(_nextafter(p, _INF) - eps, _INF)
        else:
            return 0.0
        ov = 0.0
        if g is not None:  # region 1
            r = -_exm1(-d)
            r = _nextafter(r + (_FN_REL * abs(r) + TINY), _INF)
            r = _nextafter(_s_log_up(r if not r > 1.0 else 1.0) + g, _INF)
            v = _s_exp_up(_nextafter(r - log_c, _INF))
            ov = _nextafter(v, _INF) if v > 0 else v
        r = eps / lam
        x = (hf - r) / 2.0
        if abs(x - float(round(x))) > 4.0 * U * (hf + abs(r)) + 1e-300:  # K is certain (_last_excess_s)
            K = min(max(_s_ceil(x) - 1.0, k1 - 1.0), cap)
        else:
            K = self._last_excess_s(hf, eps, k1, cap)
        if not K >= k1:
            return ov
        v1, lamK, common = kmemo.get(K) or self._k_consts_s(kmemo, K, k1, log_c, "up")
        if v1 is not None:
            ov = _nextafter(ov + v1, _INF) if v1 > 0 else ov + v1
        m = hf - 2.0 * K
        p = lam * m
        dk = p - eps
        if abs(dk) <= 2.0**-20 * p:
            dk = self._lam_m_minus_eps_s(m, eps, "up")[1]
        else:
            dk = _nextafter(_nextafter(p, _INF) - eps, _INF)
        r = -_exm1(-dk)
        r = _nextafter(r + (_FN_REL * abs(r) + TINY), _INF)
        r = _nextafter(_nextafter(_s_log_up(r if not r > 1.0 else 1.0) - lamK, _INF) + common, _INF)
        v = _s_exp_up(_nextafter(r - log_c, _INF))
        return _nextafter(ov + v, _INF) if v > 0 else ov + v

    def segments(self, h: int):
        """:meth:`LogConcaveKernel.segments`: the loss ``lam (|k - h| - |k|)`` is ``lam h`` on ``k <= 0`` (one
        run, ending at ``K = 0``, when ``h <= t``) and ``lam (h - 2k)`` on ``0 <= k < h/2``."""
        t = self.t
        K = np.arange(max(0, h - t), (h + 1) // 2, dtype=np.int64)
        return K, self.lam * (np.abs(K - h) - np.abs(K)).astype(float)

    def segment_count(self, h: int) -> int:
        return max(0, (h + 1) // 2 - max(0, h - self.t))

    def _half_fast(self, i: int, j: int) -> float:
        lam = self.lam
        g = -math.expm1(-lam * float(j - i + 1))
        return -lam * float(i) + (math.log(g) if g > 0.0 else _NEG_INF) - self._log_one_minus_q

    def loss_s(self, h: int, k: int) -> float:
        return self.lam * float(abs(k - h) - abs(k))

    def last_excess_s(self, eps: float, h: int) -> int:
        t = self.t
        none = h - t - 1
        if not self.lam * h > eps:
            return none
        k1 = max(1, h - t)
        K = self._last_excess_s(float(h), eps, float(k1), _s_ceil(h / 2.0) - 1.0, exact=False)
        if K >= k1:
            return int(K)
        return 0 if h <= t else none

    def moment_sums(self):
        return laplace_moment_sums(self.lam, self.t)
