r"""k-fold composition of a privacy loss distribution whose finite losses lie on a lattice.

One report's privacy loss takes the values ``L_i = unit * (c0 + step * i)``,
``i = 0..n-1`` (integers ``c0``, ``step > 0``) with probabilities ``p_i``,
and ``+inf`` with probability ``p_inf`` (the support leakage).  The loss of
``k`` independent reports is the sum of ``k`` such losses, so its finite part
lives on the same lattice, ``L_m = unit * (k c0 + step * m)``,
``m = 0..k(n-1)``, with the ``k``-fold convolution ``p^{*k}`` as
probabilities, and its infinity mass is ``1 - (1 - p_inf)^k``.  The composed
hockey-stick divergence (the ``delta`` of the ``k`` reports) is

.. math::

    \delta_k(\varepsilon) = 1 - (1 - p_\infty)^k
        + \sum_{m:\, L_m > \varepsilon} p^{*k}(m)\,(1 - e^{\varepsilon - L_m}),

with no discretization of the losses.

**Accuracy.**  ``p^{*k}`` is computed as ``irfft(rfft(q~)^k)`` (the power by
binary powering) on an exponentially *tilted* copy ``q~_i = q_i e^{tau i} /
Z(tau)`` of the normalized finite pmf ``q = p / (1 - p_inf)``: tilting
commutes with convolution, ``q^{*k}(m) = Z^k e^{-tau m} q~^{*k}(m)``, and the
FFT's rounding error is uniform in absolute terms, of the order of
``k u log2(N)`` times the peak of ``q~^{*k}``.  The tilt is the saddle point
``k E_{q~}[i] = m_eps`` (``m_eps`` the lattice coordinate of ``eps``,
``tau >= 0``), which puts the peak where the terms of ``delta_k(eps)`` are,
so small deltas keep their relative accuracy (an FFT of ``p`` itself would
lose every term below about ``1e-16`` of its peak).  A tilt is reused for
another ``eps`` while the tilted mass there is within a factor 4 of the best
tilt's (``k D(tau_e, tau_b) <= log 4``, ``D`` the Bregman divergence of the
cumulant function ``Lambda(tau) = log Z(tau)``).

For every ``eps`` an a posteriori bound on the error is formed from the FFT
error model of Higham, *Accuracy and Stability of Numerical Algorithms*
(2002), Section 24.1 (``||fl(F x) - F x||_2 <= 6 u log2(N) ||F x||_2``,
twiddle factors to 1 ulp), the perturbation of the ``k``-th power
(``|(F + e)^k - F^k| <= k |e| (|F| + |e|)^{k-1}``, binary powering adding
``4 k u |F|^k``) and the Cauchy-Schwarz inequality.  Measured errors are about
``1e-13`` relative (against direct convolution and exact enumeration in
mpmath, tests/test_composition.py and benchmarks/bench_composition.py); the
bound is typically ``1e-14`` to ``1e-9`` relative (largest for ``k = 10^3``
at ``n = 2000`` lattice points).  It is a model-based bound, not an
outward-rounded certificate.  ``k = 1`` needs no FFT (a direct sum).

Lattice points whose mass is below ``ABS_FLOOR / (k n)`` are dropped from the
ends of the lattice (they cannot change any delta by more than ``ABS_FLOOR``;
this only shortens lattices of kernels much narrower than their window).
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
from scipy import fft as _fft
from scipy.special import logsumexp

__all__ = ["LatticeLoss", "KFold", "LatticeTooLarge", "MAX_POINTS", "ABS_FLOOR"]

_U = 2.0**-53
#: Largest composed lattice (``k (n - 1) + 1`` points) composed by FFT: arrays of 64 MB each.
MAX_POINTS = 1 << 23
#: Absolute error allowed for dropping lattice points of negligible mass (deltas below it are not resolved).
ABS_FLOOR = 1e-300
#: A cached tilt serves an eps while its tilted mass there is within this factor of the best tilt's.
_LOG_REUSE = math.log(4.0)
#: Tilted compositions kept per object (each holds arrays of the composed lattice's length).
_CACHE = 4
_SPLIT = 134217729.0  # 2^27 + 1, Veltkamp's splitter


def _two_prod(a, b):
    """Dekker's error-free product ``a * b = p + e`` (elementwise; no overflow here)."""
    p = a * b
    c = _SPLIT * a
    ah = c - (c - a)
    al = a - ah
    c = _SPLIT * b
    bh = c - (c - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _dot(a, b) -> float:
    """``sum(a * b)`` by numpy's pairwise summation: error ``O(log n) u`` per term, and no BLAS call (whose
    threads, on a busy machine, cost milliseconds even for short vectors)."""
    return float(np.sum(a * b))


def _power(z, k: int):
    """``z^k`` elementwise by binary powering (``<= 2 log2 k`` complex products)."""
    result = None
    base = z
    while True:
        if k & 1:
            result = base.copy() if result is None else result * base
        k >>= 1
        if not k:
            return result
        base = base * base


class LatticeLoss:
    """The privacy loss of one report: ``L_i = unit (c0 + step i)`` with log-probabilities ``logp[i]``.

    ``log_inf`` and ``log_fin`` are the logs of the infinity mass and of the
    finite mass ``1 - p_inf`` (both given, each accurate in its own right:
    ``1 - p_inf`` is never formed by subtraction).  ``logp`` may hold
    ``-inf``; its total need not be ``exp(log_fin)`` exactly (points of
    negligible mass may have been dropped, ``dropped`` bounds their total).
    """

    def __init__(self, logp, *, unit: float, c0: int, step: int, log_inf: float, log_fin: float,
                 dropped: float = 0.0):
        self.logp = np.asarray(logp, dtype=float)
        self.unit = float(unit)
        self.c0 = int(c0)
        self.step = int(step)
        self.log_inf = float(log_inf)
        self.log_fin = float(log_fin)
        self.dropped = float(dropped)

    @property
    def n(self) -> int:
        return int(self.logp.size)

    def trimmed(self, k: int) -> "LatticeLoss":
        """Drop end points of mass below ``ABS_FLOOR / (k n)``: ``k``-fold deltas move by at most ``ABS_FLOOR``."""
        if self.n == 0:
            return self
        floor = math.log(ABS_FLOOR) - math.log(k) - math.log(self.n)
        keep = self.logp >= floor
        if keep.all():
            return self
        if not keep.any():
            first, last = 0, -1
        else:
            first = int(np.argmax(keep))
            last = self.n - 1 - int(np.argmax(keep[::-1]))
        gone = np.concatenate([self.logp[:first], self.logp[last + 1:]])
        dropped = self.dropped + k * float(np.exp(logsumexp(gone)))
        return LatticeLoss(self.logp[first:last + 1], unit=self.unit, c0=self.c0 + self.step * first,
                           step=self.step, log_inf=self.log_inf, log_fin=self.log_fin, dropped=dropped)


class LatticeTooLarge(ValueError):
    """The composed lattice of ``k`` reports would have ``npts = k (n - 1) + 1`` points, more than ``max_points``."""

    def __init__(self, message: str, *, n: int, npts: int, max_points: int):
        super().__init__(message)
        self.n, self.npts, self.max_points = n, npts, max_points


class KFold:
    """``k`` reports of one :class:`LatticeLoss`: ``delta(eps)`` with an error bound, ``epsilon(delta)``.

    The loss is trimmed for ``k`` here (:meth:`LatticeLoss.trimmed`), once; a composed lattice of more
    than ``max_points`` (at most :data:`MAX_POINTS`) points raises :class:`LatticeTooLarge` before any
    array of its length is made.
    """

    def __init__(self, loss: LatticeLoss, k: int, *, max_points: int = MAX_POINTS):
        self.k = int(k)
        loss = loss.trimmed(self.k)
        self.loss = loss
        n = loss.n
        #: log of the finite mass of k reports, and the infinity mass 1 - (1 - p_inf)^k
        self.log_fin_k = self.k * loss.log_fin
        self.inf_mass = float(-math.expm1(self.log_fin_k))  # 1 when the rows are disjoint (log_fin = -inf)
        self.npts = 0 if n == 0 else self.k * (n - 1) + 1
        if self.npts > max_points:
            limit = f"2^23 = {MAX_POINTS}" if max_points == MAX_POINTS else f"{max_points}"
            raise LatticeTooLarge(
                f"k (n - 1) + 1 must be at most {limit} (points of the composed privacy loss "
                f"lattice; n = {n} per report); got k = {self.k}, {self.npts} points: use fewer reports, a "
                f"smaller support, or the dp-accounting route (sparseldp.composition.to_pld)",
                n=n, npts=self.npts, max_points=max_points)
        if n == 0:
            return
        self._i = np.arange(n, dtype=float)
        self._logq = loss.logp - loss.log_fin  # the finite part as a distribution (total <= 1)
        # composed coefficients c_m = k c0 + step m (integers, exact as doubles) and L_m = unit c_m as hi + lo
        cmax = max(abs(self.k * loss.c0), abs(self.k * loss.c0 + loss.step * (self.npts - 1)))
        if cmax > 2**53:
            raise ValueError(f"the composed privacy loss lattice has coefficients up to {cmax} > 2^53 "
                             f"(k = {self.k}): use fewer reports")
        self._ck0 = float(self.k * loss.c0)
        top_hi, top_lo = _two_prod(loss.unit, float(self.k * loss.c0 + loss.step * (self.npts - 1)))
        if not (math.isfinite(top_hi) and math.isfinite(loss.unit * self._ck0)):
            raise ValueError("the privacy loss overflows a double (the kernel is too narrow for its lattice)")
        # the largest finite loss, rounded up: delta_k(eps) is the infinity mass alone from here on
        self.max_loss = float(np.nextafter(top_hi + top_lo, np.inf))
        self._j = np.arange(self.npts, dtype=float)
        self._cache: OrderedDict = OrderedDict()

    # -- the tilt ---------------------------------------------------------------------------
    def _cumulants(self, tau: float):
        """``(Lambda, mu, var)`` of the index under ``q`` tilted by ``tau``: ``Lambda = log sum q_i e^{tau i}``."""
        a = self._logq + tau * self._i
        mx = float(np.max(a))
        w = np.exp(a - mx)
        z = float(w.sum())
        mu = _dot(w, self._i) / z
        var = _dot(w, (self._i - mu) ** 2) / z
        return mx + math.log(z), mu, var

    def _saddle(self, target: float):
        """``tau >= 0`` with ``k mu(tau) = target`` (0 when ``target`` is at or below the mean), and its cumulants."""
        k = self.k
        lam, mu, var = self._cumulants(0.0)
        if k * mu >= target or var == 0.0:
            return 0.0, lam, mu
        lo, hi, tau = 0.0, math.inf, 0.0
        for _ in range(200):
            if abs(k * mu - target) <= 0.1 * math.sqrt(k * var) + 1e-9 * target:
                break  # within a tenth of a standard deviation of the composed tilted law: good enough
            if k * mu < target:
                lo = tau
            else:
                hi = tau
            step = (target - k * mu) / (k * var) if var > 0 else math.inf
            new = tau + step
            if not (lo < new < hi):
                new = 0.5 * (lo + hi) if hi < math.inf else max(2.0 * tau, tau + 1.0)
            if new == tau:
                break
            tau = new
            lam, mu, var = self._cumulants(tau)
        return tau, lam, mu

    def _tilted(self, tau: float):
        """The tilted composed pmf ``q~^{*k}`` (and what the error bound needs), cached by ``tau``."""
        if tau in self._cache:
            self._cache.move_to_end(tau)
            return self._cache[tau]
        k, N = self.k, self.npts
        a = self._logq + tau * self._i
        lam = float(logsumexp(a))
        qt = np.exp(a - lam)
        if k == 1:
            out, e_inf, e_2 = qt, 0.0, 0.0
        else:
            L = _fft.next_fast_len(N, real=True)
            F = _fft.rfft(qt, L)
            with np.errstate(under="ignore", over="ignore", invalid="ignore", divide="ignore"):
                # coefficients whose k-th power is below 1e-300 are set to 0 (changing G by less than that;
                # counted below): the powers never turn subnormal, which would cost 100x in arithmetic
                small = np.abs(F) < 10.0 ** (-300.0 / k)
                nsmall = int(np.count_nonzero(small))
                F[small] = 0.0
                G = _power(F, k)
                out = _fft.irfft(G, L)[:N]
                # --- the error model (module docstring): Sum_i |error of G_i| over the full spectrum ---
                wt = np.full(F.size, 2.0)  # rfft holds half the spectrum: the other half mirrors it
                wt[0] = 1.0
                if L % 2 == 0:
                    wt[-1] = 1.0
                c1 = 6.0 * _U * math.ceil(math.log2(max(L, 2)))
                eps_f = c1 * math.sqrt(L) * math.sqrt(_dot(qt, qt))  # >= ||fl(F) - F||_2 >= each |error|
                # (|F| + eps_f)^(2(k - 1)), floored at e^-700 (an upper bound, kept out of the subnormals)
                rp2 = np.exp(np.maximum((2.0 * (k - 1)) * np.log(np.abs(F) + eps_f), -700.0))
                gk = np.maximum(np.abs(G), 1e-150)
                # |(F + e)^k - F^k| <= k |e| (|F| + eps_f)^(k-1); binary powering adds <= 4 k u |F^k|
                l1 = k * eps_f * math.sqrt(_dot(wt, rp2)) + 4.0 * k * _U * _dot(wt, gk) + 2.0 * nsmall * 1e-300
                l2 = k * eps_f * (1.0 + eps_f) ** (k - 1) + 4.0 * k * _U * math.sqrt(_dot(wt, gk * gk))
                n2 = math.sqrt(_dot(out, out))
                e_inf = l1 / L + c1 * n2 + _U * float(np.max(np.abs(out)))  # each point
                e_2 = l2 / math.sqrt(L) + c1 * n2 + _U * n2  # 2-norm of the error vector
            out = np.maximum(out, 0.0)
        entry = (tau, lam, out, e_inf, e_2)
        self._cache[tau] = entry
        if len(self._cache) > _CACHE:
            self._cache.popitem(last=False)
        return entry

    def _tilt_for(self, eps: float, m_eps: float):
        tau_e, lam_e, mu_e = self._saddle(m_eps)
        for tau_b, entry in reversed(self._cache.items()):
            lam_b = entry[1]
            if self.k * (lam_b - lam_e - (tau_b - tau_e) * mu_e) <= _LOG_REUSE:
                self._cache.move_to_end(tau_b)
                return entry
        return self._tilted(tau_e)

    # -- delta ------------------------------------------------------------------------------
    def _gap(self, eps: float, m):
        """``eps - L_m`` for lattice indices ``m`` (array), nearly exactly: ``unit c_m`` as an exact sum ``hi + lo``."""
        c = self._ck0 + self.loss.step * np.asarray(m, dtype=float)  # integers below 2^53: exact
        hi, lo = _two_prod(self.loss.unit, c)
        return (eps - hi) - lo

    def _first_above(self, eps: float) -> int:
        """Smallest ``m`` with ``L_m > eps`` (``npts`` if none), by the same test the weights use."""
        unit, step = self.loss.unit, self.loss.step
        m = int(math.floor((eps / unit - self.k * self.loss.c0) / step)) + 1
        m = min(max(m, 0), self.npts)
        while m > 0 and self._gap(eps, m - 1) < 0:
            m -= 1
        while m < self.npts and not self._gap(eps, m) < 0:
            m += 1
        return m

    def finite_part(self, eps: float, slope: bool = False):
        """``(sum_{L_m > eps} p^{*k}(m) (1 - e^{eps - L_m}), error bound)`` for one ``eps >= 0``.

        With ``slope=True`` also the derivative of its log in ``eps``,
        ``-sum_{L_m > eps} p^{*k}(m) e^{eps - L_m} / value`` (``-inf`` when the value is 0).
        """
        if self.npts == 0 or eps >= self.max_loss or (m_lo := self._first_above(eps)) >= self.npts:
            return (0.0, 0.0, -math.inf) if slope else (0.0, 0.0)
        m_eps = (eps / self.loss.unit - self.k * self.loss.c0) / self.loss.step
        tau, lam, qk, e_inf, e_2 = self._tilt_for(eps, m_eps) if self.k > 1 else self._tilted(0.0)
        m_hi = self.npts if tau <= 0 else min(self.npts, m_lo + int(800.0 / tau) + 1)
        j = self._j[: m_hi - m_lo]
        unit_step = self.loss.unit * self.loss.step
        # eps - L_m: exactly where |eps - L_m| < 1 (the weight 1 - e^{eps - L} is then sensitive to it),
        # plainly beyond (the weight's relative error is then below 2 u |L_m|, counted in the bound)
        near = int(min(j.size, math.ceil(1.0 / unit_step) + 2))
        d = eps - self.loss.unit * (self._ck0 + self.loss.step * (m_lo + j))
        d[:near] = self._gap(eps, m_lo + j[:near])
        with np.errstate(under="ignore"):
            decay = np.exp(np.maximum(-tau * j, -745.0))
            g = decay * -np.expm1(d)
        s = _dot(qk[m_lo:m_hi], g)
        far = 0.0 if near >= j.size else 2.0 * _U * (abs(eps) + 1.0 + unit_step * (m_hi - m_lo)) * s
        if self.k == 1:
            err_t = 2.0 * (g.size + 4) * _U * s + far
        else:
            tail = (self.npts - m_hi) * math.exp(-800.0) * (1.0 + e_inf)
            err_t = min(e_inf * float(g.sum()), e_2 * math.sqrt(_dot(g, g))) + 8.0 * _U * s + tail + far
        scale = self.log_fin_k + self.k * lam - tau * m_lo
        with np.errstate(over="ignore", under="ignore"):
            value = math.exp(scale + math.log(s)) if s > 0 else 0.0
            err = math.exp(scale + math.log(err_t)) if err_t > 0 else 0.0
        if slope:
            with np.errstate(under="ignore"):
                s2 = _dot(qk[m_lo:m_hi], decay * np.exp(d))
            return value, err, (-s2 / s if s > 0 else -math.inf)
        return value, err

    def delta(self, eps: np.ndarray):
        """``(delta_k(eps), error bound)`` arrays for an array of ``eps >= 0`` (any shape)."""
        eps = np.asarray(eps, dtype=float)
        flat = eps.reshape(-1)
        vals = np.empty(flat.size)
        errs = np.empty(flat.size)
        order = np.argsort(flat, kind="stable")  # neighbouring eps share tilts
        base = self.inf_mass
        base_err = 4.0 * _U * (self.k + 4) * base + self.loss.dropped
        for idx in order:  # one pass per eps, each vectorized over the lattice
            v, e = self.finite_part(float(flat[idx]))
            vals[idx] = min(1.0, base + v)
            errs[idx] = e + base_err + 2.0 * _U * vals[idx]
        return vals.reshape(eps.shape), errs.reshape(eps.shape)

    def _chernoff_eps(self, target: float) -> float:
        """The ``eps`` where the Chernoff bound on the finite part equals ``exp(target)``: there
        ``sum_{m > m_eps} p^{*k}(m) <= (1 - p_inf)^k exp(k Lambda(tau) - tau m_eps)`` (any ``tau >= 0``,
        tightest at the saddle of ``eps``) is the target, so the finite part is at most the target."""
        k = self.k

        def bound(tau):
            lam, mu, _ = self._cumulants(tau)
            return self.log_fin_k + k * (lam - tau * mu), mu

        lo, hi = 0.0, 1.0
        u, mu = bound(hi)
        while u > target and hi < 1e12:
            lo, hi = hi, 4.0 * hi
            u, mu = bound(hi)
        if u > target:
            return self.max_loss
        while hi - lo > 1e-9 * hi:
            mid = 0.5 * (lo + hi)
            if bound(mid)[0] > target:
                lo = mid
            else:
                hi = mid
        u, mu = bound(hi)
        eps = self.loss.unit * (self._ck0 + self.loss.step * k * mu)
        return min(max(eps, 0.0), self.max_loss)

    def epsilon(self, delta: float) -> float:
        """Smallest ``eps`` (to about ``1e-13`` relative) with computed ``delta_k(eps) <= delta``.

        The caller has checked ``inf_mass <= delta < delta_k(0)`` (and nudges
        the answer up past the last rounding).  Newton's method on ``f(eps) =
        log(finite part) - log(delta - inf_mass)``, nearly linear in ``eps``
        (the log of a tail), kept in a bracket ``f(a) > 0 >= f(b)`` (bisection
        when a step leaves it), started from the Chernoff point
        (:meth:`_chernoff_eps`), which lies a fraction of a standard deviation
        of the composed loss above the answer: usually one tilt serves the
        whole search.
        """
        if delta <= self.inf_mass:
            return self.max_loss  # every eps below the largest finite loss leaves some finite excess
        target = math.log(delta - self.inf_mass)
        x = self._chernoff_eps(target)
        a, b = 0.0, self.max_loss  # f(0) > 0 (checked by the caller); f(max_loss) = -inf
        for _ in range(200):
            v, _, dlog = self.finite_part(x, slope=True)
            fx = (math.log(v) if v > 0 else -math.inf) - target
            if fx > 0:
                a = x
            else:
                b = x
            if fx == 0 or b - a <= 1e-13 * b:
                return b
            new = x - fx / dlog if math.isfinite(fx) and dlog < 0 else math.nan
            if not (a < new < b):
                new = 0.5 * (a + b)
            if abs(new - x) <= 1e-13 * x:
                return new if fx > 0 else x
            x = new
        return b
