"""Log-space tail and range sums of the two radius-truncated kernels.

A kernel is a symmetric weight ``w(k) = w(|k|)``, nonincreasing in ``|k|``,
restricted to the window ``|k| <= t``:

* discrete Laplace (Definition 6): ``log w(k) = -lam |k|``;
* Gaussian (Definition 13): ``log w(k) = -k^2 / (2 sigma^2)``.

Everything the accountant needs reduces to sums of ``w`` over integer ranges,
which are served here in log space so that nothing underflows: the Laplace
sums are geometric series in closed form (O(1) each, for any ``t``, including
``t`` in the billions); the Gaussian ones come from one suffix array of
``log sum_{i >= j} w(i)`` built with ``np.logaddexp.accumulate`` (O(t) once per
mechanism, then O(1) a lookup).
"""

from __future__ import annotations

import numpy as np

__all__ = ["LaplaceKernel", "GaussianKernel", "logsubexp"]

_NEG_INF = -np.inf


def logsubexp(x, y):
    """``log(exp(x) - exp(y))`` for ``x >= y``, elementwise; ``-inf`` when equal."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        out = x + np.log(-np.expm1(y - x))
    return np.where((y >= x) | np.isneginf(x), _NEG_INF, np.where(np.isneginf(y), x, out))


class _Kernel:
    """Common range-sum logic; subclasses give ``log_w`` and ``log_range_nonneg``."""

    t: int

    def log_w(self, k):  # pragma: no cover - abstract
        raise NotImplementedError

    def log_range_nonneg(self, a, b):  # pragma: no cover - abstract
        """``log sum_{i=a}^{b} w(i)`` for integer arrays ``0 <= a``, ``b <= t``; ``-inf`` if ``a > b``."""
        raise NotImplementedError

    def log_range(self, a, b):
        """``log sum_{k=a}^{b} w(k)`` for ``-t <= a``, ``b <= t`` (any sign), by symmetry."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        a, b = np.broadcast_arrays(a, b)
        # negative part [a, min(b, -1)] mirrored to [max(1, -b), -a]
        neg = self.log_range_nonneg(np.maximum(1, -b), -a)
        pos = self.log_range_nonneg(np.maximum(0, a), b)
        neg = np.where(a <= -1, neg, _NEG_INF)
        pos = np.where(b >= 0, pos, _NEG_INF)
        return np.logaddexp(neg, pos)

    @property
    def log_normalizer(self) -> float:
        """``log C_t = log sum_{|k| <= t} w(k)`` (Definitions 6 and 13)."""
        return float(np.logaddexp(self.log_range_nonneg(0, self.t), self.log_range_nonneg(1, self.t)))

    def moment_sums(self):
        """``(sum_{j=1}^t j w(j), sum_{j=1}^t j^2 w(j))`` for Propositions 1 and 3."""
        raise NotImplementedError  # pragma: no cover


class LaplaceKernel(_Kernel):
    """``w(k) = exp(-lam |k|)`` on ``|k| <= t``; geometric closed forms."""

    def __init__(self, lam: float, t: int):
        self.lam = float(lam)
        self.t = int(t)
        # log(1 - e^{-lam}) without cancellation for tiny lam
        self._log_one_minus_q = float(np.log(-np.expm1(-self.lam)))

    def log_w(self, k):
        return -self.lam * np.abs(np.asarray(k, dtype=float))

    def log_range_nonneg(self, a, b):
        # sum_{i=a}^{b} q^i = q^a (1 - q^{n}) / (1 - q),  n = b - a + 1
        a = np.asarray(a, dtype=float)
        b = np.minimum(np.asarray(b, dtype=float), self.t)
        n = b - a + 1
        ns = np.maximum(n, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            val = -self.lam * a + np.log(-np.expm1(-self.lam * ns)) - self._log_one_minus_q
        return np.where(n >= 1, val, _NEG_INF)

    def tail_bound(self) -> float:
        """Rigorous upper bound on ``sum_{j > t} w(j)`` (exact geometric tail)."""
        return float(np.exp(-self.lam * (self.t + 1) - self._log_one_minus_q))

    def moment_sums(self):
        t, lam = self.t, self.lam
        if t == 0:
            return 0.0, 0.0
        block = min(t, 1 << 20)
        i = np.arange(1, block + 1, dtype=float)
        wi = np.exp(-lam * i)
        a0, a1, a2 = wi.sum(), (i * wi).sum(), (i * i * wi).sum()
        # j = m*block + i: sum over blocks m of q^{m block} (sums shifted by m block)
        nblocks, rem = divmod(t, block)
        m = np.arange(nblocks, dtype=float)
        scale = np.exp(-lam * block * m)
        s1 = float(np.sum(scale * (m * block * a0 + a1)))
        s2 = float(np.sum(scale * ((m * block) ** 2 * a0 + 2 * m * block * a1 + a2)))
        if rem:
            j = nblocks * block + np.arange(1, rem + 1, dtype=float)
            wj = np.exp(-lam * j)
            s1 += float((j * wj).sum())
            s2 += float((j * j * wj).sum())
        return s1, s2


class GaussianKernel(_Kernel):
    """``w(k) = exp(-k^2 / (2 sigma^2))`` on ``|k| <= t``; one log suffix-sum array."""

    def __init__(self, sigma: float, t: int):
        self.sigma = float(sigma)
        self.t = int(t)
        self._c = 1.0 / (2.0 * self.sigma * self.sigma)
        j = np.arange(self.t + 1, dtype=float)
        logw = -(j * j) * self._c
        suffix = np.empty(self.t + 2)
        suffix[: self.t + 1] = np.logaddexp.accumulate(logw[::-1])[::-1]
        suffix[self.t + 1] = _NEG_INF
        self._suffix = suffix  # suffix[j] = log sum_{i=j}^{t} w(i)

    def log_w(self, k):
        k = np.asarray(k, dtype=float)
        return -(k * k) * self._c

    def log_range_nonneg(self, a, b):
        a = np.asarray(a, dtype=np.int64)
        b = np.minimum(np.asarray(b, dtype=np.int64), self.t)
        empty = a > b
        ai = np.clip(a, 0, self.t + 1)
        bi = np.clip(b + 1, 0, self.t + 1)
        val = logsubexp(self._suffix[ai], self._suffix[bi])
        return np.where(empty, _NEG_INF, val)

    def tail_bound(self) -> float:
        """Upper bound on ``sum_{j > t} w(j)``.

        For ``j >= t+1``, ``j^2 >= (t+1)^2 + 2(t+1)(j-t-1)``, so the tail is at most
        the geometric series ``w(t+1) / (1 - exp(-(t+1)/sigma^2))``.
        """
        u = self.t + 1
        return float(np.exp(-u * u * self._c - np.log(-np.expm1(-2.0 * u * self._c))))

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


def _laplace_last_excess(self, h, eps):
    """Largest ``k`` with overlap loss ``lam(|k-h| - |k|) > eps`` (or ``-inf``).

    The loss equals ``lam h`` for ``k <= 0``, ``lam (h - 2k)`` on ``[0, h]`` and
    ``-lam h`` beyond, so it is nonincreasing in ``k`` and the excess set is the
    prefix ``k < (h - eps/lam)/2`` whenever ``lam h > eps`` (Theorem 5's condition
    ``lam H <= eps`` is exactly the case where it is empty).
    """
    h = np.asarray(h, dtype=float)
    eps = np.asarray(eps, dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):
        k = np.ceil((h - eps / self.lam) / 2.0) - 1.0
    return np.where(self.lam * h > eps, k, -np.inf)


def _gaussian_last_excess(self, h, eps):
    """Largest ``k`` with ``(h^2 - 2kh)/(2 sigma^2) > eps``: ``k < kappa_h`` (Proposition 2)."""
    h = np.asarray(h, dtype=float)
    eps = np.asarray(eps, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        kappa = h / 2.0 - self.sigma * self.sigma * eps / h
        k = np.ceil(kappa) - 1.0
    return np.where(h > 0, k, -np.inf)


LaplaceKernel.last_excess_index = _laplace_last_excess
GaussianKernel.last_excess_index = _gaussian_last_excess
