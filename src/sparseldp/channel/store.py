"""The stored arrays of a channel and the indexes computed from them.

:class:`_ChannelStore` is the private base of
:class:`sparseldp.channel.SparseChannel`: it holds the CSR probabilities, their
exact logarithms and the labels (immutable), looks labels up, and caches what
the accounting needs: the pair backend (:mod:`~sparseldp.channel.band` or
:mod:`~sparseldp.channel.flat`), the ordered pairs in range by rank distance,
and the per-row rounding bounds.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._validation import check_int_array
from .band import _Band
from .construct import _default_alpha, _row_ids
from .flat import _Flat
from .validation import _labels

# Use the band layout when n * W <= _BAND_RATIO * nnz (W = widest row span).
_BAND_RATIO = 4.0


class _ChannelStore:
    """Immutable storage and indexes of a :class:`sparseldp.channel.SparseChannel` (see there)."""

    __slots__ = ("_matrix", "_logdata", "_inputs", "_outputs", "_meta", "_cache")

    # -- storage -----------------------------------------------------------------
    def _setup(self, indptr, indices, logp, shape, inputs, outputs, meta, data=None):
        n, m = shape
        inputs = _labels(inputs, "inputs", n, "row")
        outputs = _labels(outputs, "outputs", m, "column")
        if data is None:
            data = np.exp(logp)
        mat = sp.csr_array((data, indices, indptr), shape=(n, m))
        mat.has_sorted_indices = True
        for arr in (mat.data, mat.indices, mat.indptr):
            arr.setflags(write=False)
        logp = np.asarray(logp, dtype=float)
        logp.setflags(write=False)
        object.__setattr__(self, "_matrix", mat)
        object.__setattr__(self, "_logdata", logp)
        object.__setattr__(self, "_inputs", inputs)
        object.__setattr__(self, "_outputs", outputs)
        object.__setattr__(self, "_meta", dict(meta))
        object.__setattr__(self, "_cache", {})

    # -- immutability ----------------------------------------------------------
    def __setattr__(self, name, value):
        raise AttributeError(f"SparseChannel is immutable; cannot set {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"SparseChannel is immutable; cannot delete {name!r}")

    # -- label lookup ----------------------------------------------------------
    def _sorted_inputs(self):
        c = self._cache.get("sorted_inputs")
        if c is None:
            order = np.argsort(self._inputs, kind="stable")
            c = (order, self._inputs[order])
            self._cache["sorted_inputs"] = c
        return c

    def _rows_of(self, x, name="x"):
        x = check_int_array(x, name)
        order, xs = self._sorted_inputs()
        pos = np.clip(np.searchsorted(xs, x), 0, xs.size - 1)
        bad = xs[pos] != x
        if np.any(bad):
            v = int(np.asarray(x)[bad].flat[0])
            raise ValueError(
                f"{name} must be one of the channel's {xs.size} input values "
                f"(between {int(xs[0])} and {int(xs[-1])}); got {v}"
            )
        return order[pos]

    def _cols_of(self, y):
        y = check_int_array(y, "y")
        c = self._cache.get("sorted_outputs")
        if c is None:
            order = np.argsort(self._outputs, kind="stable")
            c = (order, self._outputs[order])
            self._cache["sorted_outputs"] = c
        order, ys = c
        pos = np.clip(np.searchsorted(ys, y), 0, ys.size - 1)
        found = ys[pos] == y
        return np.where(found, order[pos], -1)

    def _keys(self):
        keys = self._cache.get("keys")
        if keys is None:
            m = self._matrix
            keys = _row_ids(m.indptr) * m.shape[1] + m.indices
            self._cache["keys"] = keys
        return keys

    def _lookup(self, rows, cols):
        """Positions in the CSR data of ``(rows, cols)`` and whether each is stored."""
        keys = self._keys()
        want = rows * self._matrix.shape[1] + cols
        pos = np.searchsorted(keys, want)
        pos = np.minimum(pos, max(keys.size - 1, 0))
        found = (keys[pos] == want) & (cols >= 0)
        return pos, found

    # -- indexes for the accounting ----------------------------------------------
    def _row_bounds(self):
        """Per row: ``(alpha, mass, ent, nnz, lmax)`` for :func:`_pair_upper` (cached).

        ``alpha`` from the constructor's rounding model; ``mass = sum_y Q~(y|x)``
        and ``ent = sum_y Q~(y|x) |log Q~(y|x)|`` (rounded up by 1%, far more
        than their own rounding); ``lmax = max_y |log Q~(y|x)|``.
        """
        rb = self._cache.get("row_bounds")
        if rb is None:
            m = self._matrix
            starts = m.indptr[:-1]
            alpha = self._meta.get("_alpha")
            if alpha is None:
                alpha = _default_alpha(m.indptr)
            alpha = np.asarray(alpha, dtype=float)
            mass = np.add.reduceat(m.data, starts) * 1.01
            absl = np.abs(self._logdata)
            with np.errstate(invalid="ignore"):
                ent = np.add.reduceat(np.where(m.data > 0, m.data * absl, 0.0), starts) * 1.01
            lmax = np.maximum.reduceat(np.where(np.isfinite(absl), absl, 0.0), starts)
            rb = (alpha, mass, ent, np.diff(m.indptr).astype(float), lmax)
            self._cache["row_bounds"] = rb
        return rb

    def _z_kernel(self, H):
        """``(kernel on Z, min(H, b - a))`` for extended radius windows, else ``None``.

        Every pair of an extended-window channel is the Z mechanism's pair at the
        same separation (docs/paper.md, "Output alphabet"), so its accounting is that mechanism's on
        range ``min(H, b - a)``: the same numbers, and rigorous bounds that are
        tighter than the generic per-pair ones.
        """
        meta = self._meta
        kernel = meta.get("_kernel")
        if meta.get("window") != "extended" or kernel is None:
            return None
        a, b = meta["domain"]
        span = b - a
        return kernel, (span if H is None else min(H, span))

    def _backend(self):
        b = self._cache.get("backend")
        if b is None:
            m = self._matrix
            n = m.shape[0]
            first = m.indices[m.indptr[:-1]]
            last = m.indices[m.indptr[1:] - 1]
            width = int((last - first).max()) + 1
            if n * width <= _BAND_RATIO * max(m.nnz, 1):
                b = _Band(self, first, width)
            else:
                b = _Flat(self)
            self._cache["backend"] = b
        return b

    def _flat(self):
        f = self._cache.get("flat")
        if f is None:
            f = _Flat(self)
            self._cache["flat"] = f
        return f

    def _pair_shifts(self, H):
        """Yield ``(I, J)`` sorted-position arrays of ordered pairs in range, by rank distance."""
        _, xs = self._sorted_inputs()
        n = xs.size
        for k in range(1, n):
            if H is None:
                i = np.arange(n - k, dtype=np.int64)
            else:
                sep = xs[k:] - xs[:-k]  # negative only on int64 wrap-around: then > 2^63 apart
                ok = (sep >= 0) & (sep <= H)
                if not ok.any():
                    return
                i = np.flatnonzero(ok).astype(np.int64)
            yield i, i + k
            yield i + k, i
