"""Finite channels: realized row tables and the branch-free row sampler.

A channel is duck-typed (``.matrix`` CSR row-stochastic, ``.inputs``,
``.outputs``, e.g. :class:`~sparseldp.SparseChannel`); this package never
imports :mod:`sparseldp.channel`.  :func:`channel_sampling_tables` quantizes
every row to integer counts summing to ``2^64`` (:class:`ChannelTables`,
cached per channel); :func:`sample_channel` draws from them with a
fixed-step binary search per row, and :func:`channel_sampling_pmf` returns
the realized row.  The certificate of these rows is in :mod:`.certificate`.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from .._rng import as_bit_source
from .._validation import check_int
from ._integers import _CHUNK, _as_int_input, _branchless_count_le
from .quantize import _TWO64


@dataclass(frozen=True, eq=False)
class ChannelTables:
    """Realized rows of a finite channel and their flat threshold table.

    Row ``r`` (input ``inputs[r]``) occupies positions ``indptr[r]:indptr[r+1]``
    of ``indices`` (output columns, increasing) and ``counts`` (uint64, >= 1,
    summing to ``2^64`` per row; a row with a single output stores 0, meaning
    ``2^64``).  ``thresholds`` holds the within-row cumulative counts, with the
    last position of every row set to ``2^64 - 1`` (it is never needed).
    """

    inputs: np.ndarray
    outputs: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    counts: np.ndarray
    thresholds: np.ndarray
    order: np.ndarray  # argsort of inputs
    sorted_inputs: np.ndarray
    contiguous: bool
    steps: int
    max_pmf_error: float
    floored: int
    # for certify_channel: counts as doubles (rounded to nearest), split 4 (c >> 2) + (c & 3),
    # first column of each row and whether every row is one run of columns
    cf: np.ndarray
    quarter: np.ndarray
    rem4: np.ndarray
    first: np.ndarray
    banded: bool
    lazy: dict = field(default_factory=dict, repr=False)

    def row_classes(self) -> np.ndarray:
        """Class id per row: equal ids <=> equal counts on the same column pattern up to a shift.

        The defect of a pair depends only on (class of x, class of x', shift of
        their first columns), so :func:`certify_channel` evaluates each such
        triple once (e.g. one pair per separation for extended windows).
        """
        cls = self.lazy.get("row_classes")
        if cls is None:
            ids: dict = {}
            ptr, idx, c = self.indptr.tolist(), self.indices, self.counts
            cls = np.empty(len(ptr) - 1, dtype=np.int64)
            for r in range(len(ptr) - 1):
                a, b = ptr[r], ptr[r + 1]
                key = (c[a:b].tobytes(), (idx[a:b] - idx[a]).tobytes())
                cls[r] = ids.setdefault(key, len(ids))
            self.lazy["row_classes"] = cls
        return cls

    def row_counts(self, r: int) -> list[int]:
        seg = self.counts[self.indptr[r] : self.indptr[r + 1]]
        return [int(c) if c else _TWO64 for c in seg]

    def pmf(self, x):
        """``(outputs, probabilities as Fractions)`` of the realized row for input ``x``."""
        x = check_int(x, "x")
        r = _rows_of(self, np.array([x], dtype=np.int64))[0]
        cols = self.indices[self.indptr[r] : self.indptr[r + 1]]
        return self.outputs[cols], [Fraction(c, _TWO64) for c in self.row_counts(r)]


_CHANNEL_CACHE: dict[int, tuple] = {}
_CACHE_KEY = "sparseldp.sampling.tables"


def channel_sampling_tables(channel) -> ChannelTables:
    """Quantize every row of ``channel.matrix`` to integer counts summing to ``2^64``.

    Each row's ideal probabilities are the stored matrix entries normalized by
    their row sum, ``q = v / sum(v)`` (double precision: the channel's matrix is
    itself a double approximation of its kernel).  Counts are
    ``c = max(floor(2^64 q), 1)`` (every stored entry, even an explicit zero,
    keeps mass >= 2^-64) and the row's deficit ``2^64 - sum(c)``, computed
    exactly in uint64 arithmetic modulo 2^64, is added to the row's largest
    entry, so each row sums to exactly ``2^64``.  The realized rows are then
    within about ``2^-52`` of the matrix rows (``max_pmf_error`` says how far).

    Cached per channel object: in the channel's own ``_cache`` dict when it has
    one (:class:`~sparseldp.SparseChannel`), else keyed by a weak reference.
    """
    own = getattr(channel, "_cache", None)
    if isinstance(own, dict):  # SparseChannel keeps derived data in its own cache dict
        tables = own.get(_CACHE_KEY)
        if tables is None:
            tables = own[_CACHE_KEY] = _build_channel_tables(channel)
        return tables
    key = id(channel)
    hit = _CHANNEL_CACHE.get(key)
    if hit is not None and hit[0]() is channel:
        return hit[1]
    tables = _build_channel_tables(channel)
    try:
        ref = weakref.ref(channel, lambda _r, key=key: _CHANNEL_CACHE.pop(key, None))
    except TypeError:  # neither a cache dict nor weak-referenceable: no caching
        return tables
    _CHANNEL_CACHE[key] = (ref, tables)
    return tables


def _build_channel_tables(channel) -> ChannelTables:
    for attr in ("matrix", "inputs", "outputs"):
        if not hasattr(channel, attr):
            raise TypeError(f"channel must have .matrix, .inputs and .outputs (a SparseChannel); "
                            f"got {type(channel).__name__} without .{attr}")
    mat = channel.matrix.tocsr()
    if not mat.has_sorted_indices:
        mat = mat.sorted_indices()
    indptr = np.asarray(mat.indptr, dtype=np.int64)
    indices = np.asarray(mat.indices, dtype=np.int64)
    data = np.asarray(mat.data, dtype=np.float64)
    inputs = np.asarray(channel.inputs, dtype=np.int64).reshape(-1)
    outputs = np.asarray(channel.outputs, dtype=np.int64).reshape(-1)
    nrows = indptr.size - 1
    if inputs.size != nrows:
        raise ValueError(f"channel.inputs must have one value per matrix row ({nrows}); got {inputs.size}")
    lens = np.diff(indptr)
    if nrows == 0 or np.any(lens == 0):
        raise ValueError("channel.matrix must have at least one stored entry in every row")
    if np.any(~np.isfinite(data)) or np.any(data < 0):
        raise ValueError("channel.matrix entries must be finite and >= 0")
    row = np.repeat(np.arange(nrows), lens)
    sums = np.add.reduceat(data, indptr[:-1])
    if np.any(sums <= 0):
        raise ValueError("channel.matrix rows must have positive mass")
    q = data / sums[row]
    ideal = q * 2.0**64
    floored = int(np.count_nonzero(ideal < 1.0))
    # largest double below 2^64 is 2^64 - 2048; the deficit step fixes the rest
    c = np.minimum(np.maximum(np.floor(ideal), 1.0), 2.0**64 - 2048.0).astype(np.uint64)
    rowsum = np.add.reduceat(c, indptr[:-1])  # modulo 2^64
    deficit = (np.uint64(0) - rowsum)  # 2^64 - sum, modulo 2^64 (two's complement)
    # first position of the largest entry of each row
    rowmax = np.maximum.reduceat(data, indptr[:-1])
    cand = np.flatnonzero(data == rowmax[row])
    _, first = np.unique(row[cand], return_index=True)
    mode = cand[first]
    c[mode] += deficit  # wraps: a single-entry row becomes 0, i.e. 2^64
    exact = c.astype(np.float64)
    exact[c == 0] = 2.0**64
    max_err = float(np.max(np.abs(exact * 2.0**-64 - q)))
    thresholds = np.cumsum(c, dtype=np.uint64)  # rows sum to 0 mod 2^64: within-row sums
    thresholds[indptr[1:] - 1] = np.uint64(_TWO64 - 1)
    order = np.argsort(inputs, kind="stable")
    sorted_inputs = inputs[order]
    if np.any(np.diff(sorted_inputs) == 0):
        raise ValueError("channel.inputs must be distinct")
    contiguous = bool(int(sorted_inputs[-1]) - int(sorted_inputs[0]) == nrows - 1)  # no int64 wrap-around
    steps = int(math.ceil(math.log2(int(lens.max())))) if lens.max() > 1 else 0
    cf = c.astype(np.float64)  # uint64 -> double rounds to nearest
    cf[c == 0] = 2.0**64
    quarter = (c >> np.uint64(2)).astype(np.int64)
    quarter[c == 0] = 1 << 62
    rem4 = (c & np.uint64(3)).astype(np.int64)
    first = indices[indptr[:-1]]
    banded = bool(np.all(indices[indptr[1:] - 1] - first == lens - 1))
    for arr in (indptr, indices, c, thresholds, order, sorted_inputs, inputs, outputs, cf, quarter, rem4, first):
        arr.setflags(write=False)
    return ChannelTables(inputs, outputs, indptr, indices, c, thresholds, order, sorted_inputs,
                         contiguous, steps, max_err, floored, cf, quarter, rem4, first, banded)


def _rows_of(tab: ChannelTables, x: np.ndarray) -> np.ndarray:
    """Row index of each input value; ``ValueError`` naming the first unknown value."""
    n_in = tab.sorted_inputs.size
    if tab.contiguous:
        pos = x - tab.sorted_inputs[0]
        ok = (pos >= 0) & (pos < n_in)
        pos = np.where(ok, pos, 0)
    else:
        steps = int(math.ceil(math.log2(n_in))) if n_in > 1 else 0
        cnt = _branchless_count_le(tab.sorted_inputs, np.zeros(x.size, np.int64),
                                   np.full(x.size, n_in, np.int64), x, steps)
        pos = np.maximum(cnt - 1, 0)
        ok = (cnt >= 1) & (tab.sorted_inputs[pos] == x)
    if not ok.all():
        bad = int(x[np.flatnonzero(~ok)[0]])
        lo, hi = int(tab.sorted_inputs[0]), int(tab.sorted_inputs[-1])
        allowed = (f"an integer in [{lo}, {hi}]" if tab.contiguous
                   else f"one of the channel's {n_in} inputs in [{lo}, {hi}]")
        raise ValueError(f"x must be {allowed}; got {bad}")
    return tab.order[pos]


def sample_channel(channel, x, *, rng=None):
    """Report for each input ``x`` an output of ``channel`` from its realized row.

    ``Pr[y = outputs[j] | x] = c_{r,j} / 2^64`` exactly, with the row counts of
    :func:`channel_sampling_tables`.  ``x`` must hold values of
    ``channel.inputs`` (``ValueError`` naming the first other value); the
    result is an int64 array of the same shape (a scalar for a scalar).
    ``rng`` as in :func:`sample`: ``None`` is the OS secure source, a seed or
    Generator is reproducible simulation, not for production.
    """
    tab = channel_sampling_tables(channel)
    source = as_bit_source(rng)
    arr = _as_int_input(x)
    flat = arr.reshape(-1).astype(np.int64, copy=False)
    n = flat.size
    out = np.empty(n, dtype=np.int64)
    lens = np.diff(tab.indptr)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        rows = _rows_of(tab, flat[start:stop])
        base = tab.indptr[rows]
        length = lens[rows]
        u = source.words(stop - start)
        j = _branchless_count_le(tab.thresholds, base, length, u, tab.steps)
        j = np.minimum(j, length - 1)
        np.take(tab.outputs, tab.indices[base + j], out=out[start:stop])
    return out.reshape(arr.shape)[()]


def channel_sampling_pmf(channel, x):
    """``(outputs, Fractions)``: the realized row :func:`sample_channel` draws from for input ``x``."""
    return channel_sampling_tables(channel).pmf(x)
