r"""The channel of a mechanism on Z as a convolution: EM products in ``O(k log k)`` by FFT.

For a mechanism on Z with a translation-invariant kernel (``SparseLaplace``,
``SparseGaussian``) restricted to the domain ``lo..hi`` with the extended
window, every row is the same window shifted: ``Q(y | x) = w(y - x)`` for
``|y - x| <= t``, and the outputs are ``lo - t .. hi + t`` (``m = k + s - 1``
of them).  So the estimators' two products are a convolution and a
correlation with the window ``w`` (length ``s``):

.. math::

    (Q^T p)_j = \sum_x p_x\, w(j - x), \qquad (Q r)_x = \sum_j r_j\, w(j - x),

each ``O(m log m)`` by a real FFT of length ``L >= m`` (no wrap-around:
``w`` is zero outside ``0..s-1``) instead of ``O(k s)`` as a sparse product.
That is what makes the regularization path of ``method="auto"`` and the
bootstrap affordable on domains of ``10^4`` values with windows of hundreds.
The transforms themselves and their threads are :mod:`sparseldp.estimation._fft`'s.

Column scaling as in :class:`~sparseldp.estimation.model._Model`:
``S[x, j] = w(j - x) / max_x' w(j - x')``, i.e. ``w_rel(j - x) f_j`` with
``w_rel = w / max w`` and ``f_j = max w / max_x' w(j - x') >= 1`` (``f_j > 1``
only on the ``s - 1`` outputs at each end).  The operators below apply
exactly this ``S`` (restricted to the observed outputs ``obs``), so they are
drop-in replacements for ``model.columns(obs)`` in every EM-type iteration:
the FFT products times ``f_j`` where ``f_j <=`` :data:`_EDGE_SCALE` (their
roundoff grows with ``f_j``), the exact sparse columns at the far ends.
Measured (a Gaussian window of 701 on 1,000 values, where the ends are 1,400
of the 1,700 outputs): ``auto`` 16.4-18.3 s against 21.2 s with every end
output exact, its bootstrap (B = 200) 14.8-15.1 s against 17.3 s, the same
estimate and intervals to 1e-12.

Accuracy (which way it errs).  A floating-point FFT convolution of
nonnegative vectors errs by about ``log2(L)`` units of roundoff *relative to
the largest entry of the result*, not entrywise.  Entries of ``Q^T p`` below
``_fft._REL_FLOOR`` times the column's largest entry carry no correct digits,
so they are raised to that floor (never negative, never zero); entries above
it are accurate to about ``1e-12`` relative.  This is used only where an
approximate product is the right tool: the iterations of EMS and of early-
stopped EM, the held-out scores of the selection and the bootstrap refits.
The log-likelihood and the certified gap that an estimate reports are always
computed with the exact sparse channel (``frequencies._result``).

Single precision (``_fft_em.em_rows(dtype=np.float32)``) serves one caller: the
bootstrap's refits of ``auto``'s ``"em steps=t"`` member, a Monte Carlo
quantity whose spread is far above float32's roundoff (``intervals.bootstrap``,
``precision``).  The same rule holds with its own floor,
``_fft._REL_FLOOR_SINGLE``: entries are accurate to about ``1e-6`` of the
row's largest entry, and the run's iterates stay within a few ``1e-6`` of
the double run's, relative to the largest probability.
"""

from __future__ import annotations

import numpy as np
import scipy.fft as sfft
import scipy.sparse as sp

from ._fft import _IRFFT, _REL_FLOOR, _RFFT, fft_workers
from ._fft_em import ITERATE_FLOOR, em_rows, g_rows

# what the estimators use (ITERATE_FLOOR is _fft_em's, the floor of the iterates these products step)
__all__ = ["ITERATE_FLOOR", "fft_pair", "gram_band_of", "window_of", "window_scales"]

# End outputs whose column scale f_j is at most this go through the FFT too (times f_j): their entries
# err by at most f_j times the FFT's roundoff relative to the column's largest entry; beyond, exact.
_EDGE_SCALE = 100.0
# Use the FFT products when the window has at least this many entries ...
_MIN_WINDOW = 24
# ... and the channel at least this many stored entries (below, sparse products are as fast).
_MIN_NNZ = 200_000
# ... or this many, for products applied to a batch of at least _BATCH_ROWS rows at once (the bootstrap's
# "em steps=t" refits, in blocks of 25 rows at B = 200): the FFT's per-call cost is shared by the rows.
# Measured (Laplace windows, plain EM steps, the FFT in single precision against sparse products in
# double; us a row and step with 25 / 100 rows): 1,000 values and a window of 59 (59,000 entries)
# 23.2 / 17.7 against 43.8 / 50.4, a window of 25 (25,000) 16.3 / 11.7 against 22.5 / 23.7, 300
# values and a window of 59 (17,700) 10.4 / 6.3 against 13.2 / 9.0; 200 values and a window of 25
# (5,000) 5.3 / 4.0 against 4.8 / 3.1.
_MIN_NNZ_BATCH = 20_000
_BATCH_ROWS = 16


class _Conv:
    """Shared FFT state: the window's spectrum, the observed outputs, the exact edge columns."""

    def __init__(self, w_rel: np.ndarray, k: int, f: np.ndarray, obs: np.ndarray, S):
        self.k = k
        self.s = w_rel.size
        self.m = k + self.s - 1
        self.w_rel = w_rel
        self.obs = obs
        at_edge = f[obs] > _EDGE_SCALE  # the ends whose scale f_j is too large for the FFT's roundoff
        self.i_edge = np.flatnonzero(at_edge)  # positions in obs of the end columns (exact, sparse)
        self.i_mid = np.flatnonzero(~at_edge)
        self.mid = obs[self.i_mid]
        # the FFT length from the outputs that go through the FFT when all are observed (a function of the
        # channel alone, so products on a subset of outputs are those on all, bit for bit)
        through = np.flatnonzero(f <= _EDGE_SCALE)
        self.L = _fft_length(k, self.s, through)
        # the FFT outputs that may be read (no wrap-around there): the floor is relative to their largest
        self.span = slice(int(through[0]), int(through[-1]) + 1) if through.size else slice(0, 0)
        self.W = sfft.rfft(w_rel, self.L)
        self.Wc = np.conj(self.W)
        f_mid = f[self.mid]
        self.f_mid = None if np.all(f_mid == 1.0) else f_mid  # the column scales of the FFT outputs
        cols = obs[self.i_edge]
        # an end output sees only the s - 1 values at its end: read those rows, not all of S
        near = np.unique(np.r_[np.arange(min(self.s - 1, k)), np.arange(max(k - self.s + 1, 0), k)])
        part = sp.coo_array(sp.csc_array(S[near])[:, cols])
        # the exact end columns on the values that reach them: E is len(edge_rows) x len(cols)
        used = np.unique(part.row)
        self.edge_rows = near[used]
        E = sp.coo_array((part.data, (np.searchsorted(used, part.row), part.col)), shape=(used.size, cols.size))
        self.E = sp.csr_array(E)
        self.ET = sp.csr_array(E.T)
        # contiguous runs as slices (every output observed: the bootstrap), else index arrays
        self.mid_ix = _as_slice(self.mid)
        self.i_mid_ix = _as_slice(self.i_mid)

    def _fft(self, X, spectrum, n):
        workers = fft_workers(X.shape[0])
        if X.shape[1] != self.L:  # zero-padded to the transform's length
            Xp = np.zeros((X.shape[0], self.L), X.dtype)
            Xp[:, :X.shape[1]] = X
            X = Xp
        F = _RFFT(X, workers)
        F *= spectrum
        return _IRFFT(F, self.L, workers)[:, :n]

    def conv(self, P: np.ndarray) -> np.ndarray:
        """``(S^T P)`` on the observed outputs; ``P`` is ``(k,)`` or ``(k, b)``."""
        one = P.ndim == 1
        X = P[None, :] if one else np.ascontiguousarray(P.T)  # FFTs along contiguous rows (no copy for F order)
        Z = self._fft(X, self.W, self.m)
        floor = _REL_FLOOR * Z[:, self.span].max(axis=1, keepdims=True, initial=0.0)
        out = np.empty((X.shape[0], self.obs.size))
        if isinstance(self.i_mid_ix, slice):
            np.maximum(Z[:, self.mid_ix], floor, out=out[:, self.i_mid_ix])
        else:
            out[:, self.i_mid_ix] = np.maximum(Z[:, self.mid_ix], floor)
        if self.f_mid is not None:
            out[:, self.i_mid_ix] *= self.f_mid
        if self.i_edge.size:
            out[:, self.i_edge] = (self.ET @ X[:, self.edge_rows].T).T
        return out[0] if one else out.T

    def corr(self, R: np.ndarray) -> np.ndarray:
        """``S R`` for ``R`` on the observed outputs, ``(len(obs),)`` or ``(len(obs), b)``."""
        one = R.ndim == 1
        X = R[None, :] if one else np.ascontiguousarray(R.T)
        full = np.zeros((X.shape[0], self.L))  # the inputs on the middle outputs, zero-padded to L
        full[:, self.mid_ix] = X[:, self.i_mid_ix]
        if self.f_mid is not None:
            full[:, self.mid_ix] *= self.f_mid
        Z = self._fft(full, self.Wc, self.k)
        np.maximum(Z, 0.0, out=Z)
        if self.i_edge.size:
            Z[:, self.edge_rows] += (self.E @ X[:, self.i_edge].T).T
        return Z[0] if one else Z.T

    def em_rows(self, P: np.ndarray, C: np.ndarray, steps: int, inv_n=None, observe=None,
                dtype=np.float64, relax: int = 0) -> np.ndarray:
        """Up to ``steps`` plain (or over-relaxed) EM steps on every row of ``P`` (:func:`._fft_em.em_rows`)."""
        return em_rows(self, P, C, steps, inv_n, observe, dtype, relax)

    def g_rows(self, P: np.ndarray, C: np.ndarray, dtype=np.float64):
        """``(p, g)``: a row buffer and the EM factor of its rows (:func:`._fft_em.g_rows`)."""
        return g_rows(self, P, C, dtype)

    def gram_band(self, w: np.ndarray) -> np.ndarray:
        r"""``S diag(w) S^T`` (``k x k``, ``w`` on the observed outputs) in LAPACK's upper banded storage.

        Entry ``(x, x + d)`` (``0 <= d < s``) is ``sum_j w_j S[x, j] S[x + d, j]``.  On the middle
        outputs ``S[x, j] = w_rel(j - x)``, so each superdiagonal ``d`` is one correlation of the
        weights with ``u_d(i) = w_rel(i) w_rel(i - d)``: all ``s`` of them by one forward and ``s``
        inverse FFTs (the spectra of ``u_d`` are computed once).  The end outputs add their exact
        sparse product.  Returns ``ab`` (``s x k``) with ``ab[s - 1 + x - y, y] = M[x, y]`` for ``x <= y``
        (``scipy.linalg.solveh_banded``'s upper form).  Used by Newton's step
        (``_newton._newton``), whose result is checked by the exact certificate.
        """
        k, s = self.k, self.s
        if getattr(self, "_U", None) is None:
            w_rel = self.w_rel
            U = np.zeros((s, s))
            for d in range(s):
                U[d, d:] = w_rel[d:] * w_rel[: s - d]
            self._U = np.conj(sfft.rfft(U, self.L, axis=1))
        full = np.zeros(self.L)
        full[self.mid] = w[self.i_mid] if self.f_mid is None else w[self.i_mid] * self.f_mid ** 2
        Z = sfft.irfft(self._U * sfft.rfft(full, self.L)[None, :], self.L, axis=1)[:, :k]
        ab = np.zeros((s, k))
        for d in range(min(s, k)):
            ab[s - 1 - d, d:] = Z[d, : k - d]
        if self.i_edge.size:
            Me = sp.coo_array(self.E @ sp.diags_array(w[self.i_edge]) @ self.ET)
            r, c = self.edge_rows[Me.row], self.edge_rows[Me.col]
            up = r <= c
            np.add.at(ab, (s - 1 + r[up] - c[up], c[up]), Me.data[up])
        return ab


def _fft_length(k: int, s: int, mid: np.ndarray) -> int:
    r"""The FFT length for products whose outputs through the FFT are ``mid`` (sorted, in ``0..m-1``).

    A circular convolution of length ``L`` adds the linear convolution's output ``j + L`` to output
    ``j``.  The outputs read, ``a <= j < b`` (``a, b`` the ends of ``mid``), stay clean when
    ``L >= m - a`` and ``L >= b``; the correlation back onto the values ``0..k-1`` from inputs on
    ``a..b-1`` then stays clean too (a negative index ``x >= a - s + 1`` wraps to ``x + L >= k``).
    So ``L`` is the next fast length from ``max(k, m - a, b)``, not from ``m``: the end outputs
    handled exactly (:data:`_EDGE_SCALE`) need no room.  A window of 275 on 10^4 values: 10,240
    (2^11 5) instead of 10,368 (2^7 3^4), 9 % less time per transform.
    """
    m = k + s - 1
    need = m if mid.size == 0 else max(k, m - int(mid[0]), int(mid[-1]) + 1)
    return sfft.next_fast_len(need, real=True)


def _as_slice(ix: np.ndarray):
    """``ix`` as a slice when it is one contiguous increasing run, else ``ix`` itself."""
    if ix.size and int(ix[-1]) - int(ix[0]) + 1 == ix.size:
        return slice(int(ix[0]), int(ix[-1]) + 1)
    return ix


class _ConvA:
    """``A`` (``k x len(obs)``): ``A @ R``."""

    def __init__(self, conv: _Conv):
        self._c = conv
        self.shape = (conv.k, conv.obs.size)

    def __matmul__(self, R):
        return self._c.corr(np.asarray(R, dtype=float))

    def em_rows(self, P, C, steps, inv_n=None, observe=None, dtype=np.float64, relax=0):
        """Plain (or over-relaxed) EM steps on rows (:meth:`_Conv.em_rows`)."""
        return self._c.em_rows(P, C, steps, inv_n, observe, dtype, relax)

    def g_rows(self, P, C, dtype=np.float64):
        """The EM map's factor on rows (:meth:`_Conv.g_rows`)."""
        return self._c.g_rows(P, C, dtype)


class _ConvAT:
    """``A^T`` (``len(obs) x k``): ``AT @ P``."""

    def __init__(self, conv: _Conv):
        self._c = conv
        self.shape = (conv.obs.size, conv.k)

    def __matmul__(self, P):
        return self._c.conv(np.asarray(P, dtype=float))


def window_of(logm_csr, k: int) -> np.ndarray | None:
    """The common log-window of a ``k``-row CSR log-channel whose rows are one window shifted by one
    output per row (``None`` otherwise).  ``O(nnz)``: every row is compared with the first.
    """
    indptr, indices, data = logm_csr.indptr, logm_csr.indices, np.asarray(logm_csr.data, dtype=float)
    nnz = np.diff(indptr)
    if k == 0 or nnz.size != k or not np.all(nnz == nnz[0]) or nnz[0] == 0:
        return None
    s = int(nnz[0])
    idx = indices.reshape(k, s)
    first = idx[0]
    if not np.all(np.diff(first) == 1) or not np.all(idx == first[None, :] + np.arange(k)[:, None]):
        return None
    rows = data.reshape(k, s)
    if not np.array_equal(rows, np.broadcast_to(rows[0], rows.shape)):
        return None
    return rows[0].copy()


def window_scales(log_window: np.ndarray, log_cs: np.ndarray):
    """``(w_rel, f)``: the window scaled to a largest entry of 1 and the column scales, ``S = T diag(f)`` with
    ``T[x, x + d] = w_rel[d]`` (``f`` is 1 where a column holds the window's peak, more at the ends, and
    ``inf`` on an end column far below the peak, which stays exact and sparse)."""
    top = float(log_window.max())
    with np.errstate(over="ignore"):
        return np.exp(log_window - top), np.exp(top - np.asarray(log_cs, dtype=float))


def gram_band_of(log_window: np.ndarray | None, k: int, log_cs: np.ndarray, obs: np.ndarray, S):
    """``w -> S diag(w) S^T`` on the observed outputs ``obs`` in upper banded storage by FFT
    (:meth:`_Conv.gram_band`), for a channel that is a shifted window of at least :data:`_MIN_WINDOW`
    entries; ``None`` otherwise.  Unlike the EM products (:func:`fft_pair`), the Gram pays on any such
    channel: the sparse product behind ``_ipm._sparse_band`` costs about ``m s^2``, the FFT ``s``
    inverse transforms of length ``L``.  Measured (one BLAS thread, one call, sparse product against FFT):
    500 values under the Laplace window of 137, 26.9 ms against 1.35 ms; 1,000 values, 50.6 / 1.9 ms; a
    window of 45 on 500 / 2,000 values, 3.9 / 14.5 ms against 0.55 / 1.1 ms; the Gaussian window of 113 on
    500 values, 29.8 / 1.3 ms (channels whose EM products stay sparse, which had no FFT band before
    2026-11-30; larger ones, e.g. 2,000 values under the window of 137, had it already).  Its roundoff is that of
    the FFT products (module docstring); the interior point and Newton steps it serves are checked by the
    exact certificate."""
    if log_window is None or log_window.size < _MIN_WINDOW:
        return None
    w_rel, f = window_scales(log_window, log_cs)
    return _Conv(w_rel, k, f, np.asarray(obs, dtype=np.int64), S).gram_band


def fft_pair(log_window: np.ndarray | None, k: int, log_cs: np.ndarray, obs: np.ndarray, S, batch: int = 1):
    """``(A, AT)`` for the observed outputs ``obs`` of the column-scaled channel ``S`` (``k x m``,
    sparse or dense), by FFT in the middle and exactly at the ends; ``None`` when the channel is not
    a shifted window or the FFT would not pay (module docstring) for products on ``batch`` rows at once
    (:data:`_MIN_NNZ`, or :data:`_MIN_NNZ_BATCH` from :data:`_BATCH_ROWS` rows)."""
    # a shifted window stores exactly its s entries in each of the k rows
    min_nnz = _MIN_NNZ_BATCH if batch >= _BATCH_ROWS else _MIN_NNZ
    if log_window is None or log_window.size < _MIN_WINDOW or log_window.size * k < min_nnz:
        return None
    w_rel, f = window_scales(log_window, log_cs)  # f > 1 on the s - 1 outputs at each end
    conv = _Conv(w_rel, k, f, np.asarray(obs, dtype=np.int64), S)
    return _ConvA(conv), _ConvAT(conv)
