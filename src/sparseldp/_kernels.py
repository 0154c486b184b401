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

import math

import numpy as np

__all__ = ["LaplaceKernel", "GaussianKernel", "logsubexp", "check_gaussian_s", "GAUSSIAN_MAX_S"]

_NEG_INF = -np.inf
#: Largest Gaussian support size: the suffix array holds t + 2 floats (2^26 radii, 512 MiB).
GAUSSIAN_MAX_S = (1 << 27) + 1


def check_gaussian_s(s: int, name: str = "s") -> int:
    """``s <= GAUSSIAN_MAX_S``: the Gaussian kernel's exact sums need O(s) memory."""
    if s > GAUSSIAN_MAX_S:
        raise ValueError(
            f"{name} must be an odd integer in [1, 2^27 + 1 = {GAUSSIAN_MAX_S}] for the Gaussian family "
            f"(its exact accounting keeps one log suffix sum per offset, O(s) memory); got {s}"
        )
    return s


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

    def __repr__(self) -> str:
        return f"SparseLaplace(lam={self.lam!r}, s={2 * self.t + 1})"

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
        if nblocks <= _MAX_BLOCKS:
            m = np.arange(nblocks, dtype=float)
            scale = np.exp(-lam * block * m)
            s1 = float(np.sum(scale * (m * block * a0 + a1)))
            s2 = float(np.sum(scale * ((m * block) ** 2 * a0 + 2 * m * block * a1 + a2)))
        else:
            _, s1, s2 = _laplace_blocks_by_doubling(lam, block, nblocks, (float(a0), float(a1), float(a2)))
        if rem:
            j = nblocks * block + np.arange(1, rem + 1, dtype=float)
            wj = np.exp(-lam * j)
            s1 += float((j * wj).sum())
            s2 += float((j * j * wj).sum())
        return s1, s2


# Blocks of 2^20 radii summed as one array; beyond (t > 2^40) the blocks are combined by doubling.
_MAX_BLOCKS = 1 << 20


def _laplace_blocks_by_doubling(lam: float, block: int, nblocks: int, one):
    """``(sum q^j, sum j q^j, sum j^2 q^j)`` over ``j = 1 .. nblocks * block`` in O(log nblocks).

    ``one`` holds the three sums over one block ``j = 1 .. block``.  A range
    shifted by ``d`` contributes ``q^d (S0, d S0 + S1, d^2 S0 + 2 d S1 + S2)``, so
    sums over ``n1 + n2`` blocks follow from those over ``n1`` and ``n2`` blocks;
    binary doubling needs ``2 log2(nblocks)`` such steps, each adding positive
    terms only (no cancellation), and constant memory.
    """

    def shifted(S, d):
        q = math.exp(-lam * d)
        return (q * S[0], q * (d * S[0] + S[1]), q * (d * d * S[0] + 2.0 * d * S[1] + S[2]))

    def add(A, B):
        return (A[0] + B[0], A[1] + B[1], A[2] + B[2])

    total, covered = (0.0, 0.0, 0.0), 0  # sums over the first `covered` blocks
    power, size = one, 1  # sums over `size` consecutive blocks starting at j = 1
    n = nblocks
    while n:
        if n & 1:
            total = add(total, shifted(power, float(covered) * block))
            covered += size
        n >>= 1
        if n:
            power = add(power, shifted(power, float(size) * block))
            size *= 2
    return total


class GaussianKernel(_Kernel):
    """``w(k) = exp(-k^2 / (2 sigma^2))`` on ``|k| <= t``; one log suffix-sum array."""

    def __init__(self, sigma: float, t: int):
        self.sigma = float(sigma)
        self.t = int(t)
        check_gaussian_s(2 * self.t + 1)
        # sigma^2 may underflow to 0: then c = inf (a point mass at 0), handled by log_w
        den = 2.0 * self.sigma * self.sigma
        self._c = 1.0 / den if den > 0 else math.inf
        j = np.arange(self.t + 1, dtype=float)
        logw = self.log_w(j)
        suffix = np.empty(self.t + 2)
        suffix[: self.t + 1] = np.logaddexp.accumulate(logw[::-1])[::-1]
        suffix[self.t + 1] = _NEG_INF
        self._suffix = suffix  # suffix[j] = log sum_{i=j}^{t} w(i)

    def __repr__(self) -> str:
        return f"SparseGaussian(sigma={self.sigma!r}, s={2 * self.t + 1})"

    def log_w(self, k):
        k = np.asarray(k, dtype=float)
        if np.isinf(self._c):  # sigma so small that sigma^2 underflows: w = 1{k = 0}
            return np.where(k == 0, 0.0, _NEG_INF)
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
        with np.errstate(divide="ignore", over="ignore"):  # c = 0 (huge sigma): the bound is +inf
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
        kappa = h / 2.0 - np.where(eps > 0, self.sigma * self.sigma * eps, 0.0) / h  # never inf * 0
        k = np.ceil(kappa) - 1.0
    return np.where(h > 0, k, -np.inf)


LaplaceKernel.last_excess_index = _laplace_last_excess
GaussianKernel.last_excess_index = _gaussian_last_excess
