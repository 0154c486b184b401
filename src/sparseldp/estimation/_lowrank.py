r"""Low-rank factors of wide smooth channels, for the interior point's Newton systems.

A channel whose kernel is smooth and wide against the domain is numerically of low rank: its
column-scaled matrix is ``S = T diag(f)`` (``k x m``), ``T`` a Toeplitz section of the window ``w``
and ``f`` the columns' scales, and by Szegő's theorem the singular values of such a section are
distributed like the values ``|W(omega)|`` of the window's transform over the frequencies.  A
Gaussian window of scale ``sigma`` has ``|W(omega)| ~ exp(-sigma^2 omega^2 / 2)``, so only about
``k sqrt(2 log(1 / rtol)) / (pi sigma)`` singular values exceed ``rtol`` times the largest: 117 of
1,000 at ``rtol = 1e-11`` under the Gaussian design of (1, 1e-6, 5) (``sigma`` 21.1, window 349),
where the interior point's banded Cholesky works on a band of 349.  A Laplace window's transform decays like ``1 / omega^2`` and
such a channel has no useful low rank.

:func:`factor` finds ``T = L V^T + E``, ``V`` with orthonormal columns and ``||E||_2`` about
``rtol ||T||_2``, by randomized subspace iteration (Halko, Martinsson and Tropp, SIAM Review 53,
2011, Algorithm 4.4) from a fixed seed (a numerical sketch, not a privacy mechanism: the same
channel gives the same factor).  ``_ipm._ipm`` then solves its Newton systems
``(A diag(w) A^T + diag(d)) x = b`` by Woodbury's identity in ``O((k + m) r^2)`` instead of a
Cholesky factorization of the ``k x k`` Gram (the columns' scales ride in the weights): its iterates
are those of the exact solver to the factor's ``rtol`` (the same iteration counts; likelihood-ratio
intervals within 5e-7 relative of the Cholesky's at ``rtol = 1e-10`` on the case above),
and its certificate uses the exact products, so nothing rests on the factor but speed.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.fft as sfft
import scipy.linalg as sla

# Singular values below this share of the largest are dropped (the Newton systems' Gram then has a relative
# error of about twice this, beside the factorizations' own roundoff).  At 1e-13, 1e-10 and 1e-8 the likelihood-
# ratio searches of the module docstring's case (the mean, variance, three quantiles and a range query) took
# 1,785 / 1,785 / 1,792 interior-point iterations, as the Cholesky's 1,785, with the ends within 2e-8 / 5e-7 /
# 1e-4 relative of the Cholesky's.
_RTOL = 1e-11
# Columns of the sketch beyond the rank sought, and power iterations (one suffices for spectra that decay
# this fast; each adds two products with S).
_OVERSAMPLE = 16
_POWER = 1
# The sketch's seed: fixed, so that the factor is a function of the channel alone.
_SEED = 20261130


def rank_estimate(w_rel: np.ndarray, k: int, rtol: float = _RTOL) -> int:
    """The numerical rank of a ``k``-row Toeplitz section of the window ``w_rel`` (``w_rel.size`` entries)
    by Szegő's count: ``k`` times the share of the frequencies where the window's transform exceeds
    ``rtol`` times its largest value, plus the sketch's margin, at most ``k``.  Measured against the SVD
    (``rtol`` 1e-11, Gaussian designs): 42 / 117 / 332 on 300 / 1,000 / 3,000 values under the window of
    349 (estimated 49 / 124 / 339), 64 on 1,000 under 695 (70)."""
    s = int(w_rel.size)
    size = 1 << max(12, (8 * s - 1).bit_length())
    W = np.abs(np.fft.rfft(np.asarray(w_rel, dtype=float), size))
    share = np.count_nonzero(W > rtol * W.max()) / W.size
    return int(min(k, math.ceil(share * k) + _OVERSAMPLE))


class Section:
    """The ``k x (k + s - 1)`` Toeplitz section ``T[x, x + d] = w[d]`` of a window ``w`` (``s`` entries) as an
    operator for :func:`factor`: ``T @ X`` and ``T.T @ Y`` (on columns) by FFT convolution,
    ``O((k + s) log(k + s))`` per column instead of the ``k s`` of the stored entries.  Measured (3,000 values, the Gaussian window of
    695, 200 columns): 46 / 23 ms against 172 / 143 ms for the sparse products, equal to 3e-15 relative."""

    def __init__(self, w: np.ndarray, k: int, transposed: bool = False):
        self.w, self.k, self.transposed = np.asarray(w, dtype=float), int(k), transposed
        m = self.k + self.w.size - 1
        self.shape = (m, self.k) if transposed else (self.k, m)

    @property
    def T(self) -> "Section":
        return Section(self.w, self.k, not self.transposed)

    def __matmul__(self, X):
        X = np.asarray(X, dtype=float)
        one = X.ndim == 1
        X2 = X[:, None] if one else X
        k, m = self.k, self.k + self.w.size - 1
        # one transform length for both products: a circular product of length >= m has no wrap-around in
        # the m outputs of the full convolution, nor in the k outputs of the valid correlation (its indices
        # x + d stay below m).  scipy.fft directly, not scipy.signal (whose import costs about a second)
        n = sfft.next_fast_len(m, real=True)
        W = sfft.rfft(self.w, n)
        if self.transposed:  # (T^T Y)[j] = sum_d w[d] Y[j - d]: the full convolution
            out = sfft.irfft(sfft.rfft(X2, n, axis=0) * W[:, None], n, axis=0)[:m]
        else:  # (T X)[x] = sum_d w[d] X[x + d]: the valid correlation
            out = sfft.irfft(sfft.rfft(X2, n, axis=0) * np.conj(W)[:, None], n, axis=0)[:k]
        return out[:, 0] if one else out


def factor(S, rank_guess: int, max_rank: int, rtol: float = _RTOL):
    """``(L, V)`` with ``S = L V^T`` up to ``rtol`` of ``||S||_2`` (``S``: the section ``T`` of the module
    docstring, or any matrix) (``L = U diag(sigma)``, ``k x r``; ``V``,
    ``m x r``, orthonormal columns), or ``None`` where the rank exceeds ``max_rank``.

    ``S``: dense or sparse ``k x m``, or a :class:`Section`.  The sketch starts with ``rank_guess`` columns (plus
    :data:`_OVERSAMPLE`) and doubles until the singular values it finds fall below ``rtol`` with room to
    spare and a random probe ``S x`` is reproduced to ``100 rtol`` relative."""
    k, m = S.shape
    full = min(k, m)
    gen = np.random.default_rng(_SEED)
    width = min(full, max(1, int(rank_guess)) + _OVERSAMPLE)
    while True:
        Q = np.linalg.qr(S @ gen.standard_normal((m, width)))[0]
        for _ in range(_POWER):
            Q = np.linalg.qr(np.asarray(S.T @ Q))[0]
            Q = np.linalg.qr(np.asarray(S @ Q))[0]
        B = np.asarray(S.T @ Q).T  # Q^T S, l x m
        U, sv, Vt = sla.svd(B, full_matrices=False, check_finite=False)
        if sv.size == 0 or sv[0] <= 0.0:
            return None
        r = int(np.count_nonzero(sv > rtol * sv[0]))
        if r <= width - _OVERSAMPLE // 2 or width == full:
            L = (Q @ U[:, :r]) * sv[:r]
            V = np.ascontiguousarray(Vt[:r].T)
            x = gen.standard_normal(m)
            y = np.asarray(S @ x)
            if r <= max_rank and np.linalg.norm(y - L @ (V.T @ x)) <= 100.0 * rtol * max(np.linalg.norm(y), 1e-300):
                return L, V
            if r > max_rank or width == full:
                return None
        if width >= max_rank + _OVERSAMPLE or width == full:
            return None
        width = min(full, 2 * width)
