r"""Products with two-level channels by prefix sums: ``O(k + m)`` per product instead of ``O(k m)``.

Randomized response, the square wave, the Piecewise Mechanism and the Piecewise part of the Hybrid Mechanism
give every output ``y`` one probability on an interval of inputs and one lower probability on all the others.
After the column scaling of :class:`~sparseldp.estimation.model._Model` (each column divided by its largest
entry) the channel is

.. math::

    S[x, y] = c_y + (1 - c_y)\, 1\{x_0(y) \le x < x_1(y)\},

with the rows' intervals of outputs nondecreasing too (each row's high outputs are contiguous).  Then

.. math::

    (S^T p)_y = c_y \sum_x p_x + (1 - c_y) \sum_{x_0(y) \le x < x_1(y)} p_x, \qquad
    (S r)_x = \sum_y c_y r_y + \sum_{y_0(x) \le y < y_1(x)} (1 - c_y) r_y,

two prefix sums and two gathers per product.  Columns that are not of this form (the Hybrid Mechanism's
two Duchi outputs) are kept as a dense block and multiplied as such.

Rounding.  Each entry is checked to lie within :data:`_REL_TOL` (relative) of the structure's value; the
rows' normalization leaves equal probabilities a few units in the last place apart.  A windowed sum is a
difference of prefix sums, exact to about ``1e-16`` times the total; every output above is at least ``c``
times that total, so the relative error is about ``1e-16 / c``.
The structure is used only where every ``c_y`` is at least :data:`_C_MIN` (``eps`` up to about 13.8
for randomized response), which keeps it below ``1e-10``.  Like the FFT products of
:mod:`sparseldp.estimation._toeplitz` they serve iterations: certificates and reported
log-likelihoods use the exact matrix.

Measured (``benchmarks/bench_twolevel.py``, one BLAS thread, 5 columns): the Piecewise Mechanism at eps = 1
on 400 values (642 outputs), 4.9x / 5.6x faster than the dense ``S^T P`` / ``S R`` (212 / 206 us); randomized
response on 1,000 values, 13-14x.  Below about ``10^5`` entries the dense products are faster
(:data:`_MIN_ENTRIES`).
"""

from __future__ import annotations

import numpy as np

# entries within this relative distance of 1 or of their column's low value count as equal to it (rows are
# normalized one by one, which leaves equal probabilities a few units in the last place apart)
_REL_TOL = 1e-12
# the smallest low value c_y the prefix sums are used for (relative rounding about 1e-16 / c)
_C_MIN = 1e-6
# the smallest channel (inputs x observed outputs) they are used for: below it dense products are faster
# (measured, one BLAS thread, k-RR on k values, 1 / 5 columns: two-level 22 / 60 us against dense 20 / 52 us at
# k = 300, 25 / 73 us against 46 / 106 us at k = 400, 21 / 47 against 9 / 22 us at k = 200)
_MIN_ENTRIES = 100_000
# at most this share of the outputs may be irregular (kept as a dense block)
_MAX_ODD_SHARE = 0.1


def _two_valued(S: np.ndarray, low: np.ndarray, top: np.ndarray) -> np.ndarray:
    """Per column of ``S``: whether every entry is a 1 (``top``) or within :data:`_REL_TOL` of the column's
    ``low``."""
    return (top | (S <= low[None, :] * (1.0 + _REL_TOL))).all(axis=0)


class TwoLevel:
    """The two-level structure of a dense column-scaled channel ``S`` (``k x m``), found once per model
    (:meth:`of`); :meth:`pair` gives the products for a sorted subset of its columns.

    A column whose entries are all 1 (an output every input of the domain gives alike: a domain narrower than
    the channel's) is two-level with ``c = 1``; it takes no part in the rows' intervals."""

    def __init__(self, S: np.ndarray, regular: np.ndarray, c: np.ndarray, x0: np.ndarray, x1: np.ndarray,
                 ylo: np.ndarray, yhi: np.ndarray):
        self.S = S  # the exact matrix (columns taken for the pair's ``matrix``)
        self.k = S.shape[0]
        self.regular = regular  # m: whether column y is two-level
        self.rank = np.cumsum(regular) - regular  # m: y's position among the regular columns
        self.c = c  # per regular column: the low value
        self.x0, self.x1 = x0, x1  # per regular column: the rows [x0, x1) that hold 1 (empty where c = 1)
        self.ylo, self.yhi = ylo, yhi  # per row: its first and last output holding 1 (yhi < ylo: none)

    @classmethod
    def of(cls, S: np.ndarray) -> "TwoLevel | None":
        """The structure of ``S`` (dense, ``k x m``, every column's largest entry 1), checked entry by entry
        (to :data:`_REL_TOL`); ``None`` where ``S`` is not of this form (module docstring), or where it has a
        low value below :data:`_C_MIN` or more than :data:`_MAX_ODD_SHARE` irregular columns."""
        k, m = S.shape
        if k < 2 or m == 0:
            return None
        mid = S[:, m // 2 : m // 2 + 1]  # one column first: a kernel's takes many values; most channels stop here
        if not _two_valued(mid, mid.min(axis=0), mid >= 1.0 - _REL_TOL).all():
            return None
        c_all = S.min(axis=0)
        flat = c_all >= 1.0 - _REL_TOL  # every entry 1: c = 1, no interval
        top = (S >= 1.0 - _REL_TOL) & ~flat[None, :]
        regular = _two_valued(S, c_all, top)
        # a banded column's 1s must be contiguous rows
        first = np.argmax(top, axis=0)
        last = k - 1 - np.argmax(top[::-1], axis=0)
        regular &= flat | (top.sum(axis=0) == last - first + 1)
        if (~regular).sum() > _MAX_ODD_SHARE * m or not regular.any():
            return None
        banded = regular & ~flat
        c = np.where(flat, 1.0, c_all)[regular]
        if c.min() < _C_MIN:
            return None
        # each row's 1s contiguous among the banded columns (in output order)
        cols = np.flatnonzero(banded)
        ylo, yhi = np.ones(k, np.int64), np.zeros(k, np.int64)  # rows without a 1: an empty interval
        if cols.size:
            T = top[:, cols]
            has = T.any(axis=1)
            j0 = np.argmax(T, axis=1)
            j1 = T.shape[1] - 1 - np.argmax(T[:, ::-1], axis=1)
            if not np.array_equal(T.sum(axis=1), np.where(has, j1 - j0 + 1, 0)):
                return None
            ylo[has], yhi[has] = cols[j0[has]], cols[j1[has]]
        x0 = np.where(flat, 0, first)[regular]
        x1 = np.where(flat, 0, last + 1)[regular]
        return cls(S, regular, c, x0, x1, ylo, yhi)

    def pair(self, idx: np.ndarray):
        """``(A, AT)`` for the columns ``idx`` (sorted): objects with ``@``, ``shape`` and ``matrix`` (the
        exact dense columns); ``None`` where ``idx`` is not sorted or the products would not pay
        (:data:`_MIN_ENTRIES`)."""
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size == 0 or np.any(np.diff(idx) <= 0) or self.k * idx.size < _MIN_ENTRIES:
            return None
        products = _Products(self, idx)
        return _Side(products, False), _Side(products, True)


class _Products:
    """The two products on the columns ``idx`` of a :class:`TwoLevel` channel."""

    def __init__(self, tl: TwoLevel, idx: np.ndarray):
        self.k, self.m = tl.k, idx.size
        self._tl, self._idx = tl, idx
        reg = tl.regular[idx]
        self.reg_pos = np.flatnonzero(reg)
        self.odd_pos = np.flatnonzero(~reg)
        g = idx[reg]  # the regular columns taken, in output order
        ranks = tl.rank[g]
        self.c = tl.c[ranks][:, None]
        self.one_minus_c = 1.0 - self.c  # 0 on the all-1 columns: they take no part in the rows' sums
        self.x0, self.x1 = tl.x0[ranks], tl.x1[ranks]
        # each row's taken regular columns [y0, y1) (positions among them) from its first and last output at 1
        self.y0 = np.searchsorted(g, tl.ylo, "left")
        self.y1 = np.maximum(np.searchsorted(g, tl.yhi, "right"), self.y0)
        self.E = np.ascontiguousarray(tl.S[:, idx[~reg]]) if self.odd_pos.size else None
        self._matrix = self._matrix_t = None

    @property
    def matrix(self) -> np.ndarray:
        """The exact columns ``S[:, idx]`` (built on first use)."""
        if self._matrix is None:
            self._matrix = np.ascontiguousarray(self._tl.S[:, self._idx])
        return self._matrix

    @property
    def matrix_t(self) -> np.ndarray:
        """Their transpose, contiguous (built on first use)."""
        if self._matrix_t is None:
            self._matrix_t = np.ascontiguousarray(self.matrix.T)
        return self._matrix_t

    def at(self, P: np.ndarray) -> np.ndarray:
        """``S^T P`` (``P``: ``k`` or ``k x b``)."""
        P = np.asarray(P, dtype=float)
        flat = P.ndim == 1
        P2 = P[:, None] if flat else P
        cum = np.empty((self.k + 1, P2.shape[1]))
        cum[0] = 0.0
        np.cumsum(P2, axis=0, out=cum[1:])
        reg = cum.take(self.x1, axis=0)  # the band's sums, then c * total + (1 - c) * band, in place
        reg -= cum.take(self.x0, axis=0)
        reg *= self.one_minus_c
        reg += self.c * cum[-1]
        if self.E is None:
            out = reg
        else:
            out = np.empty((self.m, P2.shape[1]))
            out[self.reg_pos] = reg
            out[self.odd_pos] = self.E.T @ P2
        return out[:, 0] if flat else out

    def a(self, R: np.ndarray) -> np.ndarray:
        """``S R`` (``R``: ``m`` or ``m x b``, rows in ``idx``'s order)."""
        R = np.asarray(R, dtype=float)
        flat = R.ndim == 1
        R2 = R[:, None] if flat else R
        Rr = R2 if self.E is None else R2[self.reg_pos]
        W = self.one_minus_c * Rr
        cum = np.empty((W.shape[0] + 1, W.shape[1]))
        cum[0] = 0.0
        np.cumsum(W, axis=0, out=cum[1:])
        out = cum.take(self.y1, axis=0)
        out -= cum.take(self.y0, axis=0)
        out += self.c[:, 0] @ Rr
        if self.E is not None:
            out += self.E @ R2[self.odd_pos]
        return out[:, 0] if flat else out


class _Side:
    """``A`` (``k x len(idx)``: ``A @ R``) or, ``transposed``, ``A^T`` (``len(idx) x k``: ``AT @ P``) of the
    two-level products."""

    def __init__(self, products: _Products, transposed: bool):
        self._p, self._t = products, transposed
        self.shape = (products.m, products.k) if transposed else (products.k, products.m)

    def __matmul__(self, X):
        return self._p.at(X) if self._t else self._p.a(X)

    @property
    def matrix(self) -> np.ndarray:
        return self._p.matrix_t if self._t else self._p.matrix

    def toarray(self) -> np.ndarray:
        return self.matrix


def dense_of(M):
    """The dense matrix behind ``M``: ``M`` itself if it is an array, the two-level products' ``matrix``,
    else ``None`` (sparse or FFT products)."""
    if isinstance(M, np.ndarray):
        return M
    return getattr(M, "matrix", None)
