"""General pair backend: the entries of row ``x``, and row ``x'`` looked up at them by sorted keys.

Used for channels that are not banded, and for single pairs (``_pair_split``,
the tangent slopes of the epsilon search).  Blocks expose the same
``totals`` / ``structure`` interface as :mod:`sparseldp.channel.band`.
"""

from __future__ import annotations

import math

import numpy as np

from .construct import _NEG_INF, _segment_positions
from .terms import _BLOCK_ELEMS, _linear_and_log, _log_path_sum


class _Flat:
    """General layout: the entries of row x, and row x' looked up at them by sorted keys."""

    def __init__(self, ch):
        self.ch = ch
        self.order, _ = ch._sorted_inputs()
        m = ch._matrix
        self.indptr = m.indptr
        self.nnz_row = np.diff(m.indptr)

    def blocks(self, I, J):
        if I.size == 0:
            return
        lens = self.nnz_row[self.order[I]]
        csum = np.cumsum(lens)
        start = 0
        n = I.size
        while start < n:
            base = csum[start - 1] if start else 0
            stop = int(np.searchsorted(csum, base + _BLOCK_ELEMS, side="right"))
            stop = min(n, max(stop, start + 1))
            yield _FlatBlock(self, I[start:stop], J[start:stop], slice(start, stop))
            start = stop

    def gather(self, rows_i, rows_j):
        ch = self.ch
        m = ch._matrix
        lens = self.nnz_row[rows_i]
        seg = np.cumsum(lens) - lens
        e = _segment_positions(self.indptr[rows_i], lens)
        cols = m.indices[e]
        pos, found = ch._lookup(np.repeat(rows_j, lens), cols)
        return seg, e, pos, found


class _FlatBlock:
    __slots__ = ("flat", "I", "J", "_g", "pos")

    def __init__(self, flat, I, J, pos=None):
        self.flat, self.I, self.J = flat, I, J
        self._g = None
        self.pos = pos

    def _gather(self):
        if self._g is None:
            o = self.flat.order
            self._g = self.flat.gather(o[self.I], o[self.J])
        return self._g

    def totals(self, eps):
        seg, e, pos, found = self._gather()
        ch = self.flat.ch
        data = ch._matrix.data
        P = data[e]
        res = np.empty((eps.size, self.I.size))
        lin, u = _linear_and_log(eps)
        if lin.any():
            Q = np.where(found, data[pos], 0.0)
            tmp = np.empty(P.shape)
            for k in np.flatnonzero(lin):
                np.multiply(Q, -u[k], out=tmp)
                tmp += P
                np.maximum(tmp, 0.0, out=tmp)
                res[k] = np.add.reduceat(tmp, seg)
        if not lin.all():
            X = self._log_ratio()
            for k in np.flatnonzero(~lin):
                res[k] = np.add.reduceat(_log_path_sum(P, X, eps[k]), seg)
        return res

    def _log_ratio(self):
        seg, e, pos, found = self._gather()
        ld = self.flat.ch._logdata
        return np.where(found, ld[e] - ld[pos], np.inf)

    def structure(self):
        seg, e, pos, found = self._gather()
        P = self.flat.ch._matrix.data[e]
        X = self._log_ratio()
        miss = ~found
        leak = np.add.reduceat(np.where(miss, P, 0.0), seg)
        anymiss = np.add.reduceat(miss.astype(np.int64), seg) > 0
        common = np.maximum.reduceat(np.where(miss, _NEG_INF, X), seg)
        return leak, anymiss, common

    def slope(self, eps):
        """``d Delta / d u`` at ``u = e^eps`` (a subgradient): ``-sum_{p > u q} q``."""
        seg, e, pos, found = self._gather()
        data = self.flat.ch._matrix.data
        P = data[e]
        Q = np.where(found, data[pos], 0.0)
        u = math.exp(eps)
        return np.add.reduceat(np.where(P - u * Q > 0, -Q, 0.0), seg)
