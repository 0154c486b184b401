"""Banded pair backend: rows held as an ``n x W`` band, pairs evaluated with strided slices.

Chosen for channels whose every row's support lies inside a short run of
columns (the window mechanisms); see ``SparseChannel._backend``.  A backend
yields blocks of ordered pairs ``(I, J)`` (positions in the sorted input
order); a block gives the pairs' sums of positive parts (``totals``) and their
support structure (``structure``).
"""

from __future__ import annotations

import numpy as np

from .construct import _NEG_INF, _row_ids
from .terms import _BLOCK_ELEMS, _linear_and_log, _log_path_sum

# Runs of pairs at least this long with a common column offset use strided slices.
_MIN_RUN = 16


class _Band:
    """Rows held as an ``n x W`` band in sorted-input order: ``V[p, c] = Q(first_p + c | row_p)``."""

    def __init__(self, ch, first_by_row, width):
        m = ch._matrix
        order, _ = ch._sorted_inputs()
        n = m.shape[0]
        self.ch = ch
        self.order = order
        self.W = width
        pos_of_row = np.empty(n, dtype=np.int64)
        pos_of_row[order] = np.arange(n)
        self.first = np.asarray(first_by_row, dtype=np.int64)[order]
        rows = _row_ids(m.indptr)
        p = pos_of_row[rows]
        c = m.indices - self.first[p]
        self._flat_idx = p * width + c
        self.V = np.zeros((n, width))
        self.V.ravel()[self._flat_idx] = m.data
        self._LV = None
        self.max_rows = max(1, _BLOCK_ELEMS // width)

    @property
    def LV(self):
        if self._LV is None:
            LV = np.full(self.V.shape, _NEG_INF)
            LV.ravel()[self._flat_idx] = self.ch._logdata
            self._LV = LV
        return self._LV

    def blocks(self, I, J):
        if I.size == 0:
            return
        d = self.first[I] - self.first[J]
        W = self.W
        d = np.clip(d, -W, W)  # beyond one width the rows cannot overlap
        n = I.size
        if n > 1:
            brk = np.flatnonzero((np.diff(I) != 1) | (np.diff(J) != 1) | (np.diff(d) != 0)) + 1
        else:
            brk = np.zeros(0, dtype=np.int64)
        starts = np.concatenate([[0], brk])
        ends = np.concatenate([brk, [n]])
        lens = ends - starts
        long = lens >= _MIN_RUN
        mr = self.max_rows
        for s0, e0 in zip(starts[long].tolist(), ends[long].tolist()):
            for a in range(s0, e0, mr):
                b = min(e0, a + mr)
                yield _BandBlock(self, I[a:b], J[a:b], int(d[a]), True, slice(a, b))
        if not long.all():
            short = np.flatnonzero(np.repeat(~long, lens))
            for a in range(0, short.size, mr):
                sel = short[a : a + mr]
                yield _BandBlock(self, I[sel], J[sel], d[sel], False, sel)


class _BandBlock:
    __slots__ = ("band", "I", "J", "d", "is_slice", "pos")

    def __init__(self, band, I, J, d, is_slice, pos=None):
        self.band, self.I, self.J, self.d, self.is_slice = band, I, J, d, is_slice
        self.pos = pos  # where the block's pairs sit in the (I, J) arrays given to blocks()

    def _rows(self, A):
        if self.is_slice:
            return A[self.I[0] : self.I[-1] + 1]
        return A[self.I]

    def _q_full(self, A, fill):
        """``Q[r, c] = A`` at column ``first_I + c`` of row ``J`` (``fill`` off the band)."""
        W = self.band.W
        r = self.I.size
        if self.is_slice:
            d = self.d
            c0, c1 = max(0, -d), min(W, W - d)
            out = np.full((r, W), fill)
            if c0 < c1:
                out[:, c0:c1] = A[self.J[0] : self.J[-1] + 1, c0 + d : c1 + d]
            return out
        cols = np.arange(W, dtype=np.int64)[None, :] + self.d[:, None]
        valid = (cols >= 0) & (cols < W)
        idx = self.J[:, None] * W + np.clip(cols, 0, W - 1)
        out = np.take(A.ravel(), idx)
        out[~valid] = fill
        return out

    def totals(self, eps):
        """``sum_y [Q(y|x) - e^eps Q(y|x')]_+`` per pair: array (len(eps), r)."""
        band = self.band
        V = band.V
        r = self.I.size
        res = np.empty((eps.size, r))
        lin, u = _linear_and_log(eps)
        if lin.any():
            P = self._rows(V)
            if self.is_slice:
                W, d = band.W, self.d
                c0, c1 = max(0, -d), min(W, W - d)
                if c0 >= c1:
                    res[lin] = P.sum(axis=1)
                else:
                    outside = P[:, :c0].sum(axis=1) + P[:, c1:].sum(axis=1)
                    Pin = P[:, c0:c1]
                    Qin = V[self.J[0] : self.J[-1] + 1, c0 + d : c1 + d]
                    tmp = np.empty(Pin.shape)
                    for k in np.flatnonzero(lin):
                        np.multiply(Qin, -u[k], out=tmp)
                        tmp += Pin
                        np.maximum(tmp, 0.0, out=tmp)
                        res[k] = tmp.sum(axis=1) + outside
            else:
                Q = self._q_full(V, 0.0)
                tmp = np.empty(P.shape)
                for k in np.flatnonzero(lin):
                    np.multiply(Q, -u[k], out=tmp)
                    tmp += P
                    np.maximum(tmp, 0.0, out=tmp)
                    res[k] = tmp.sum(axis=1)
        if not lin.all():
            P = self._rows(V)
            X = self._log_ratio()
            for k in np.flatnonzero(~lin):
                res[k] = _log_path_sum(P, X, eps[k]).sum(axis=1)
        return res

    def _log_ratio(self):
        LP = self._rows(self.band.LV)
        LQ = self._q_full(self.band.LV, _NEG_INF)
        with np.errstate(invalid="ignore"):
            X = LP - LQ  # +inf off S(x'), nan off S(x) (P = 0 there)
        X[LP == _NEG_INF] = _NEG_INF
        return X

    def structure(self):
        """Per pair: (support leakage, any support mismatch, max log ratio on the common support)."""
        P = self._rows(self.band.V)
        X = self._log_ratio()
        miss = X == np.inf
        leak = np.where(miss, P, 0.0).sum(axis=1)
        common = np.where(miss, _NEG_INF, X).max(axis=1)
        return leak, miss.any(axis=1), common
