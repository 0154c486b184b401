r"""O(1) closed forms of ``delta_h`` and of the distortion moments, for the designers' searches.

Scalar, pure-Python evaluations of the exact formulas at one separation ``h``
(Theorems 3 and 9) and of ``R1``, ``R2`` (Propositions 1 and 3), O(1) whatever
the radius ``t``: the designers (:mod:`sparseldp.design`) call them thousands
of times per design, where the accountant's arrays cost O(H) and, for the
Gaussian family, O(t) per mechanism.  They are reached through the registry
(:class:`~sparseldp.core.families.DesignSearch`).  ``t = math.inf`` gives the
``s -> infinity`` limit.

Which way they err: rounded to nearest, never certificates (every design is
certified with the accountant's rigorous upper bound,
:meth:`SparseLaplace.delta_star_upper`, before it is returned).  Measured
against the accountant and 40-digit references: within ``4e-15`` relative
(Laplace) and ``2e-12`` relative (Gaussian, the largest errors deep in the
tails, below ``1e-50``) of the exact defect; moments within ``1e-14`` relative.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import erfcx as _erfcx, gammainc as _gammainc

__all__ = ["laplace_log_delta", "laplace_moments", "gaussian_log_delta", "gaussian_moments", "lam_m_minus_eps"]

_NEG_INF = -math.inf
_INF = math.inf


def _lae(a: float, b: float) -> float:
    """``log(e^a + e^b)``."""
    if a < b:
        a, b = b, a
    if b == _NEG_INF:
        return a
    return a + math.log1p(math.exp(b - a))


def _lse(a: float, b: float) -> float:
    """``log(e^a - e^b)`` for ``a >= b`` (``-inf`` when equal)."""
    if b == _NEG_INF:
        return a
    if b >= a:
        return _NEG_INF
    return a + math.log(-math.expm1(b - a))


def _l1me(x: float) -> float:
    """``log(1 - e^{-x})`` for ``x >= 0`` without cancellation (``-inf`` at 0)."""
    if x <= 0.0:
        return _NEG_INF
    if x == _INF:
        return 0.0
    return math.log(-math.expm1(-x)) if x < 0.693 else math.log1p(-math.exp(-x))


def lam_m_minus_eps(lam: float, m: int, eps: float) -> float:
    """``lam m - eps`` with the exact sign, to a few ulp (``m`` an integer below 2^53).

    ``lam m = p + e`` exactly (Dekker's product with Veltkamp's split), so
    ``(p - eps) + e`` is one rounding away from the exact value whenever
    ``p - eps`` is exact (Sterbenz), which covers every near tie.
    """
    b = float(m)
    p = lam * b
    c = 134217729.0 * lam
    ah = c - (c - lam)
    al = lam - ah
    c = 134217729.0 * b
    bh = c - (c - b)
    bl = b - bh
    return (p - eps) + (((ah * bh - p) + ah * bl + al * bh) + al * bl)


def laplace_log_delta(lam: float, t, eps: float, h: int) -> float:
    """``log delta_h(eps)`` of ``Q_{lam, 2t+1}`` (Theorem 3) in O(1), rounded to nearest.

    The split of :meth:`sparseldp.core.kernels.LaplaceKernel.numerator_terms`:
    leakage ``G(t-h+1, h)``, and where ``lam h > eps`` (decided exactly) the
    overlap ``(1 - e^{-d}) G(0, t-h+1)`` plus the region ``k1..K``, with
    ``G(a, n) = sum_{j=a}^{a+n-1} e^{-lam j}``; every term a product of
    nonnegative factors, summed in log space.
    """
    if h > 2 * t:
        return 0.0
    l1q = _l1me(lam)

    def lg(a, n):  # log G(a, n), n >= 1 (may be inf)
        return -lam * a + _l1me(lam * n) - l1q

    terms = []
    if t == _INF:
        logc = math.log1p(math.exp(-lam)) - l1q
    else:
        logc = _lae(lg(0, t + 1), lg(1, t) if t >= 1 else _NEG_INF)
        if h <= t:
            terms.append(lg(t - h + 1, h))
        else:
            terms.append(lg(1, t))
            terms.append(lg(0, h - t))
    d = lam_m_minus_eps(lam, h, eps)
    if d > 0:
        if h <= t:
            terms.append(_l1me(d) + lg(0, t - h + 1))
        k1 = max(1, h - t) if t != _INF else 1
        cap = (h + 1) // 2 - 1
        K = min(math.ceil((h - eps / lam) / 2.0) - 1, cap)
        for _ in range(8):  # settle K exactly: the largest k <= cap with lam (h - 2k) > eps
            if K >= k1 and not lam_m_minus_eps(lam, h - 2 * K, eps) > 0:
                K -= 1
            elif K + 1 <= cap and lam_m_minus_eps(lam, h - 2 * K - 2, eps) > 0:
                K += 1
            else:
                break
        if K >= k1:
            common = _l1me(lam * (K - k1 + 1)) - l1q
            if K > k1:
                terms.append(-lam * k1 + _l1me(lam * (K - k1)) + common)
            terms.append(_l1me(lam_m_minus_eps(lam, h - 2 * K, eps)) - lam * K + common)
    total = _NEG_INF
    for v in terms:
        total = _lae(total, v)
    return total - logc


def _alternating(first: float, ratio, weight) -> float:
    """``sum_{n>=1} weight(n) a_n`` with ``a_1 = first``, ``a_{n+1} = a_n ratio(n)``, to full precision."""
    total, term, n = 0.0, first, 1
    while True:
        add = weight(n) * term
        total += add
        if add == 0.0 or abs(add) <= 1e-17 * abs(total):
            return total
        term *= ratio(n)
        n += 1


def laplace_moments(lam: float, t) -> tuple[float, float]:
    """``(R1, R2)`` of ``Q_{lam, 2t+1}`` (Proposition 1) in O(1), for every ``lam t``.

    With ``A = 1 - q``, ``q = e^{-lam}``, ``r = A / lam``, ``x = lam t``,
    ``Q = e^{-x}`` and ``phi_k(x) = 1 - e^{-x} sum_{n<k} x^n/n!`` (regularized
    incomplete gamma):

    * ``sum_{j<=t} q^j = q (1 - Q) / A``,
    * ``sum_{j<=t} j q^j = q [phi_2 + x Q (1 - r)] / A^2``,
    * ``sum_{j<=t} j^2 q^j = q [2 phi_3 + x^2 Q (1 - r^2) + x Q psi - lam r phi_2] / A^3``,
      ``psi = 2 - r (2 + lam)``,

    the geometric closed forms rewritten so that no two large terms cancel
    (``1 - r`` and ``psi`` from their series for small ``lam``).
    """
    if t == 0:
        return 0.0, 0.0
    if lam > 40.0:  # q < 5e-18: every sum is q to double precision (and e^lam may overflow)
        r = 2.0 * math.exp(-lam) / (1.0 + 2.0 * math.exp(-lam))
        return r, r
    A = -math.expm1(-lam)
    em = math.expm1(lam)  # A / q
    if lam >= 0.05:
        om = (lam + math.expm1(-lam)) / lam  # 1 - r
    else:
        om = -_alternating(-lam / 2.0, lambda n: -lam / (n + 2), lambda n: 1.0)
    r = 1.0 - om
    if lam >= 1.0:
        psi = 2.0 - r * (2.0 + lam)
    else:  # sum_{n>=2} (-1)^n (n - 1) lam^n / (n + 1)!
        psi = _alternating(lam * lam / 6.0, lambda n: -lam / (n + 3), lambda n: float(n))
    if t == _INF:
        xQ = x2Q = 0.0
        phi2 = phi3 = one_q = 1.0
    else:
        x = lam * t
        Q = math.exp(-x)
        xQ, x2Q = x * Q, x * x * Q
        phi2, phi3 = float(_gammainc(2.0, x)), float(_gammainc(3.0, x))
        one_q = -math.expm1(-x)
    s0 = one_q / em
    s1 = (phi2 + xQ * om) / (em * A)
    s2 = (2.0 * phi3 + x2Q * om * (1.0 + r) + xQ * psi - lam * r * phi2) / (em * A * A)
    c = 1.0 + 2.0 * s0
    return 2.0 * s1 / c, 2.0 * s2 / c


# Euler-Maclaurin coefficients B_2m / (2m)!
_EMC = tuple(b / math.factorial(2 * m) for m, b in enumerate(
    (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798, -174611 / 330,
     854513 / 138, -236364091 / 2730, 8553103 / 6, -23749461029 / 870), start=1))
_SQ = math.sqrt(math.pi / 2.0)
_RT2 = math.sqrt(2.0)
# weights below e^-760 of w(0) are negligible next to any delta >= 1e-300 (relative 1e-9)
_LOG_CUT = 760.0
_SHORT = 24


class _GaussSums:
    """Sums of ``w(k) = e^{-k^2 c}``, ``c = 1/(2 sigma^2)``, in log space, O(1) each.

    For ``sigma >= 2`` the Euler-Maclaurin formula with the derivatives
    ``f^{(n)}(x) = (-1/sigma)^n He_n(x/sigma) f(x)`` (probabilists' Hermite
    polynomials) gives tails and heads in closed form (``erfcx``/``erf`` plus a
    few correction terms); its terms shrink like ``(x / (2 pi sigma^2))^2``, so it
    is used where ``(2x + 1) c < 2``; beyond, consecutive weights shrink by
    ``e^-2`` or more and are summed directly, as are short ranges and every
    sum for ``sigma < 2``.  Full sums use Poisson summation
    (``sum_k w(k) = sigma sqrt(2 pi)`` up to ``e^{-2 pi^2 sigma^2}``).
    """

    __slots__ = ("s", "c", "J", "direct", "half")

    def __init__(self, sigma: float):
        self.s = sigma
        self.c = 1.0 / (2.0 * sigma * sigma)
        self.J = int(math.sqrt(_LOG_CUT / self.c)) + 1  # w(j) < e^-760 beyond J
        self.direct = sigma < 2.0
        self.half = None if self.direct else math.log(sigma * _SQ + 0.5)  # log sum_{k >= 0} w(k)

    def _direct(self, a: int, b) -> float:
        """``log sum_{k=a}^{b} w(k)`` for ``0 <= a``, term by term (``b`` clipped at ``J``)."""
        b = min(b, self.J)
        if a > b:
            return _NEG_INF
        c = self.c
        top = -a * a * c
        if b - a < _SHORT:
            acc = 0.0
            for k in range(a, b + 1):
                v = math.exp(-k * k * c - top)
                acc += v
                if v < 1e-18 * acc:
                    break
            return top + math.log(acc)
        k = np.arange(a, b + 1, dtype=float)
        return top + math.log(float(np.exp(-(k * k) * c - top).sum()))

    def _corrections(self, z: float, scale: float, sign: float) -> float:
        """``sign sum_m C_m sigma^{-(2m-1)} He_{2m-1}(z) scale``, summed until negligible next to ``scale``."""
        he_prev, he, n = 1.0, z, 1
        sp = 1.0 / self.s
        inv2 = sp * sp
        total = 0.0
        for coef in _EMC:
            term = coef * sp * he * scale
            total += term
            if abs(term) <= 1e-17 * scale:
                break
            nxt = z * he - n * he_prev
            he_prev, he = nxt, z * nxt - (n + 1) * he
            n += 2
            sp *= inv2
        return sign * total

    def tail(self, a: int) -> float:
        """``log sum_{k >= a} w(k)`` for ``a >= 0``."""
        if a > self.J:
            return _NEG_INF
        if self.direct or (2 * a + 1) * self.c >= 2.0:
            return self._direct(a, self.J)
        z = a / self.s
        br = self.s * _SQ * float(_erfcx(z / _RT2)) + 0.5
        br += self._corrections(z, 1.0, 1.0)
        return -a * a * self.c + math.log(br)

    def head(self, b: int) -> float:
        """``log sum_{k=0}^{b} w(k)`` for ``b >= 0``."""
        if self.direct:
            return self._direct(0, b)
        if b >= self.J:
            return self.half
        if (2 * b + 1) * self.c >= 2.0:
            return _lse(self.half, self.tail(b + 1))
        z = b / self.s
        fb = math.exp(-b * b * self.c)
        v = self.s * _SQ * math.erf(z / _RT2) + 0.5 * (1.0 + fb)
        return math.log(v + self._corrections(z, fb, -1.0))

    def pos(self, a: int, b) -> float:
        """``log sum_{k=a}^{b} w(k)`` for ``0 <= a`` (``b`` may be ``inf``)."""
        if a > b or a > self.J:
            return _NEG_INF
        if b >= self.J:
            return self.half if (a == 0 and not self.direct) else self.tail(a)
        if self.direct or b - a < _SHORT:
            return self._direct(a, b)
        if a == 0:
            return self.head(b)
        # the representation whose two sums are the smaller: relative error ~ u (sum / range)
        if a >= 0.7 * self.s:
            return _lse(self.tail(a), self.tail(b + 1))
        return _lse(self.head(b), self.head(a - 1))

    def range(self, a, b) -> float:
        """``log sum_{k=a}^{b} w(|k|)`` for integers (or infinities) ``a <= b`` of any sign."""
        if a > b:
            return _NEG_INF
        if a >= 0:
            return self.pos(a, b)
        if b <= 0:
            return self.pos(-b, -a)
        return _lae(self.pos(0, b), self.pos(1, -a))


def gaussian_log_delta(sigma: float, t, eps: float, h: int) -> float:
    """``log delta_h(eps)`` of ``G_{sigma, 2t+1}`` (Theorem 9) in O(1), rounded to nearest.

    Leakage ``sum_{k=-t}^{h-t-1} w(k)`` and overlap ``A - e^eps B`` with ``A``,
    ``B`` the sums up to Proposition 2's ``kappa_h = h/2 - sigma^2 eps / h``, as in
    :meth:`sparseldp.core.kernels.GaussianKernel.numerator_terms`, each sum
    from :class:`_GaussSums`.
    """
    if h > 2 * t:
        return 0.0
    g = _GaussSums(sigma)
    if t == _INF:
        logc = _lae(g.pos(0, _INF), g.pos(1, _INF))
        leak, lo, left = _NEG_INF, _NEG_INF, _NEG_INF
    else:
        logc = _lae(g.pos(0, t), g.pos(1, t))
        leak, lo, left = g.range(-t, h - t - 1), h - t, -t
    kappa = h / 2.0 - sigma * sigma * eps / h
    K = min(math.ceil(kappa) - 1, t) if math.isfinite(kappa) else _NEG_INF
    overlap = _lse(g.range(lo, K), eps + g.range(left, K - h)) if K >= lo else _NEG_INF
    return _lae(leak, overlap) - logc


def gaussian_moments(sigma: float, t) -> tuple[float, float]:
    """``(R1, R2)`` of ``G_{sigma, 2t+1}`` (Proposition 3) in O(1) for ``sigma >= 25``.

    Sums run to ``b = min(t, J)`` (beyond ``J`` every weight is below
    ``e^-760``).  For ``sigma >= 25`` (then ``b <= 1.6 sigma^2``) the
    Euler-Maclaurin formula on ``[0, b]`` for ``x^k w(x)``, ``k = 0, 1, 2``
    (``x w = -sigma^2 w'``, ``x^2 w = sigma^4 w'' + sigma^2 w``), with the
    integrals in closed form (a series for ``x^2 w`` when ``b < sigma``, where
    the closed form would cancel); below, direct sums of at most ``J`` terms.
    """
    if t == 0:
        return 0.0, 0.0
    s = sigma
    c = 1.0 / (2.0 * s * s)
    J = int(math.sqrt(_LOG_CUT / c)) + 1
    b = J if t >= J else int(t)
    if s < 25.0:
        j = np.arange(1, b + 1, dtype=float)
        w = np.exp(-(j * j) * c)
        C = 1.0 + 2.0 * float(w.sum())
        return 2.0 * float((j * w).sum()) / C, 2.0 * float((j * j * w).sum()) / C
    z = b / s
    fb = math.exp(-b * b * c)
    i0 = s * _SQ * math.erf(z / _RT2)
    if z < 1.0:  # int_0^b x^2 w = b^3 sum_n (-z^2/2)^n / (n! (2n + 3))
        u = -z * z / 2.0
        i2 = b ** 3 * (1.0 / 3.0 + _alternating(u, lambda n: u / (n + 1), lambda n: 1.0 / (2 * n + 3)))
    else:
        i2 = s * s * (i0 - b * fb)
    S0 = i0 + 0.5 * (1.0 + fb)
    S1 = s * s * -math.expm1(-z * z / 2.0) + 0.5 * b * fb
    S2 = i2 + 0.5 * b * b * fb
    # sum_m C_m (g^{(2m-1)}(b) - g^{(2m-1)}(0)) with He_n(z) and He_n(0) by the recurrence
    He, He0 = [1.0, z], [1.0, 0.0]
    p = 1.0 / s
    for m, coef in enumerate(_EMC, start=1):
        while len(He) < 2 * m + 2:
            n = len(He) - 1
            He.append(z * He[n] - n * He[n - 1])
            He0.append(-n * He0[n - 1])
        d0 = -coef * p * He[2 * m - 1] * fb
        d1 = coef * s * p * (He0[2 * m] - He[2 * m] * fb)
        d2 = -coef * s * s * p * (He[2 * m + 1] + He[2 * m - 1]) * fb
        S0, S1, S2 = S0 + d0, S1 + d1, S2 + d2
        if abs(d0) <= 1e-17 * S0 and abs(d1) <= 1e-17 * S1 and abs(d2) <= 1e-17 * S2:
            break
        p /= s * s
    C = 2.0 * S0 - 1.0
    return 2.0 * S1 / C, 2.0 * S2 / C
