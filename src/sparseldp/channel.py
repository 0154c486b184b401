r"""General sparse channels on finite alphabets (Definitions 1 and 9, Theorems 1, 2, 7, 8).

A channel is a row-stochastic matrix ``Q(y | x)`` over finite input and output
alphabets, given through nonnegative weights

.. math::

    Q(y \mid x) = \frac{w(x, y)\, 1\{y \in S(x)\}}{\sum_{y' \in S(x)} w(x, y')},

where the support ``S(x)`` is the set of outputs with ``w(x, y) > 0`` (the
sparsity pattern of the stored matrix).  The sparse discrete-Laplace family
(``w = e^{-lam d(x,y)}``) and the sparse Gaussian family
(``w = e^{-d^2/(2 sigma^2)}``) are the two cases the paper studies; any
weights are accepted here.

Privacy (Section "Preliminaries" and the definition of the privacy range):
``Q`` is ``(eps, delta)``-LDP on range ``H`` iff for every *ordered* pair of
inputs with ``0 < |x - x'| <= H`` the hockey-stick defect

.. math::

    \Delta_\varepsilon(x, x') = \sum_y [Q(y|x) - e^\varepsilon Q(y|x')]_+
      = \underbrace{Q(S(x) \setminus S(x') \mid x)}_{\text{support leakage}}
      + \underbrace{\sum_{y \in S(x) \cap S(x')} [Q(y|x) - e^\varepsilon Q(y|x')]_+}_{\text{overlap excess}}

is at most ``delta`` (Theorem 2 for the Laplace family, Theorem 8 for the
Gaussian family, Remark 2 for the split).  Pure ``eps``-LDP (Theorems 1 and 7)
holds iff every pair in range has the *same* support and the log ratio on it is
at most ``eps`` (docs/paper.md, "Pure LDP needs a common support": pure LDP forces input-*independent* supports).

Results are cited by the compiled paper's numbers (README, "Citing the paper's
results"): Theorems 1/7 pure LDP, Theorems 2/8 the general defect.

Computation.  ``delta`` visits ordered pairs by increasing rank distance in the
sorted input order and stops as soon as no pair of that rank distance is
within ``H`` (separations only grow with rank distance), or once the defect
reaches 1.  Each pair costs ``O(|S(x)|)``: the positive part is only nonzero on
``S(x)``, so row ``x'`` is only looked up at the points of ``S(x)``.  Banded
channels (every row's support inside a short run of columns, as for the window
mechanisms) are held as an ``n x W`` band and handled with strided slices;
other channels with a sorted-key lookup.  Nothing of size
``n_inputs x n_outputs`` is ever built unless the channel itself is dense.

Numbers: probabilities are stored together with their logarithms
(``log_matrix``) so that supports are structural (a probability that
underflows to ``0.0`` is still in the support).  :meth:`SparseChannel.delta`
is a sum of nonnegative terms rounded to nearest (not a bound: it may lie a few
``1e-16`` on either side of the exact value); for ``eps > 700`` the terms are
evaluated in log space as ``Q(y|x) (1 - e^{eps - L})``.

Which way the numbers err.  "Exact" means the channel defined by its
construction: the given weights normalized exactly (or the exact ``exp`` of
given log weights, normalized), and for :meth:`SparseChannel.laplace` /
:meth:`SparseChannel.gaussian` the exact kernel.  Every constructor records a
per-row bound ``alpha_x`` such that each stored probability and log
probability of row ``x`` is within relative (resp. absolute) error
``alpha_x + beta |log Q~(y|x)|`` (``beta = 8u``, ``u = 2^-53``) of the exact
one (derivations at :func:`_log_normalize_bounds` and the constructors).
:meth:`SparseChannel.delta_star_upper` turns these into a rigorous upper bound
per pair (:func:`_pair_upper`), and every certified answer (``epsilon``,
``is_ldp``, :mod:`sparseldp.finite_design`) compares that bound with its
target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ._kernels import GaussianKernel, LaplaceKernel
from ._validation import (
    INT64_MAX,
    INT64_MIN,
    broadcast,
    check_eps_array,
    check_int,
    check_int_array,
    check_nonnegative,
    check_odd_s,
    check_positive,
    check_probability,
)
from .accounting import Defect, delta_profile, epsilon_for_delta
from .errors import InfeasibleError

__all__ = ["SparseChannel", "WorstPair", "check_domain", "check_window", "check_entries", "MAX_ENTRIES"]

#: Largest number of stored entries (inputs x row length) of a channel built from a domain.
MAX_ENTRIES = 1 << 27

_NEG_INF = -np.inf
# Above this eps, e^eps overflows in float64: defects are then evaluated in log space.
_EPS_LINEAR_MAX = 700.0
# Working-set size (array elements) of one block of pairs.
_BLOCK_ELEMS = 1 << 19
# Runs of pairs at least this long with a common column offset use strided slices.
_MIN_RUN = 16
# Use the band layout when n * W <= _BAND_RATIO * nnz (W = widest row span).
_BAND_RATIO = 4.0
_WINDOWS = ("extended", "clipped")
_U = 2.0**-53
# relative error of a stored probability: alpha_x + _BETA |log Q~(y|x)| (module docstring)
_BETA = 8.0 * _U
# absolute slack per stored entry for probabilities in the subnormal range
_SUB = 2.0**-1073


# ---------------------------------------------------------------------------
# validation helpers shared with sparseldp.baselines
# ---------------------------------------------------------------------------
def check_domain(domain, name: str = "domain") -> tuple[int, int]:
    """``domain = (a, b)``: a pair of int64 integers with ``a <= b`` (tuple, list or 1-D array)."""
    allowed = f"{name} must be a pair (lo, hi) of integers with lo <= hi"
    if isinstance(domain, np.ndarray):
        if domain.ndim != 1:
            raise ValueError(f"{allowed}; got an array of shape {domain.shape}")
        domain = tuple(domain.tolist()) if domain.dtype.kind in "iu" else tuple(domain)
    if not isinstance(domain, (tuple, list)):
        raise TypeError(f"{allowed}; got {type(domain).__name__} {domain!r}"[:300])
    if len(domain) != 2:
        raise ValueError(f"{allowed}; got {domain!r}"[:300])
    lo = check_int(domain[0], f"{name} lo", minimum=INT64_MIN, maximum=INT64_MAX)
    hi = check_int(domain[1], f"{name} hi", minimum=INT64_MIN, maximum=INT64_MAX)
    if hi < lo:
        raise ValueError(f"{allowed}; got ({lo}, {hi})")
    return lo, hi


def check_entries(n_rows: int, row_len: int, what: str) -> None:
    """Refuse a channel whose stored entries would exceed :data:`MAX_ENTRIES`.

    Every entry costs its probability, its logarithm and its column index (and
    temporaries while building): beyond ``2^27`` entries (several GB) the
    request cannot be served, and a clear error beats an out-of-memory kill.
    """
    total = int(n_rows) * int(row_len)
    if total > MAX_ENTRIES:
        raise ValueError(
            f"{what}: the channel would store {n_rows} x {row_len} = {total} entries, more than the "
            f"2^27 = {MAX_ENTRIES} allowed; use a smaller domain (or support)"
        )


def check_window(window) -> str:
    """``window`` is ``"extended"`` or ``"clipped"`` (docs/paper.md, "Output alphabet")."""
    if window not in _WINDOWS:
        raise ValueError(f"window must be 'extended' or 'clipped'; got {window!r}")
    return window


def _check_H(H):
    return None if H is None else check_int(H, "H", minimum=1)


def _labels(value, name: str, count: int, what: str) -> np.ndarray:
    if value is None:
        arr = np.arange(count, dtype=np.int64)
    else:
        if isinstance(value, (str, bytes)):
            raise TypeError(f"{name} must be a 1-D array of distinct integers; got {value!r}")
        arr = check_int_array(value, name)
        if arr.ndim != 1:
            raise ValueError(f"{name} must be a 1-D array of distinct integers; got shape {arr.shape}")
        if arr.size != count:
            raise ValueError(
                f"{name} must have one value per {what} of weights ({count}); got {arr.size} values"
            )
        srt = np.sort(arr)
        dup = np.flatnonzero(srt[1:] == srt[:-1])
        if dup.size:
            raise ValueError(f"{name} must be distinct integers; {int(srt[dup[0]])} appears more than once")
        arr = arr.copy()
    arr.setflags(write=False)
    return arr


def _row_ids(indptr: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))


def _segment_positions(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(starts[i], starts[i] + lens[i])`` without a Python loop."""
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    seg = np.cumsum(lens) - lens
    return np.repeat(starts - seg, lens) + np.arange(total, dtype=np.int64)


def _log_normalize(indptr, logw, *, with_offset=False):
    """Per-row ``log w - log sum w`` (rows nonempty), stable via the row maximum.

    With ``with_offset`` also returns the per-row offset ``mx + log z`` that was
    subtracted (its size enters the rounding bound, :func:`_log_normalize_bounds`).
    """
    starts = indptr[:-1]
    mx = np.maximum.reduceat(logw, starts)
    rows = _row_ids(indptr)
    z = np.add.reduceat(np.exp(logw - mx[rows]), starts)
    off = mx + np.log(z)
    logp = logw - off[rows]
    return (logp, off) if with_offset else logp


def _log_normalize_bounds(n, off, *, extra=0.0):
    r"""Per-row ``alpha`` with ``|log p~ - log p| <= alpha + 1.01u |log p|`` for :func:`_log_normalize`.

    For a row of ``n`` log weights ``l_y`` with maximum ``mx``: ``d_y = fl(l_y - mx)``
    errs by ``u |d_y|``; ``e_y = fl(exp(d_y))`` by ``(u |d_y| + 4u) e^{d_y}``, and
    ``e^d |d| <= 1/e``; the sum ``z`` (any order) by ``(n - 1) u`` relative, so
    ``|z~/z - 1| <= u (1.4 n + 4)`` (``z >= 1``); ``log z`` adds ``4u log n``
    (2 ulp of a value ``<= log n``); ``off = fl(mx + log z)`` adds ``u |off|``;
    ``log p = fl(l_y - off)`` adds ``u |log p|``.  Total
    ``u (1.42 n + 4.1 + 4 log n + |off|) + u |log p|``, times 1.01; ``extra``
    (in units of ``u``) adds the caller's own terms.
    """
    n = np.asarray(n, dtype=float)
    off = np.abs(np.asarray(off, dtype=float))
    off = np.where(np.isfinite(off), off, 0.0)
    return 1.01 * _U * (1.42 * n + 4.1 + 4.0 * np.log(np.maximum(n, 1.0)) + off + extra)


def _default_alpha(indptr):
    """Bound used when a channel carries none (e.g. restored from an older pickle): rows assumed
    normalized by :func:`_log_normalize` from log weights of moderate size (offset below 1e3)."""
    n = np.diff(np.asarray(indptr)).astype(float)
    return _log_normalize_bounds(n, np.full(n.shape, 1e3), extra=8.2)


# ---------------------------------------------------------------------------
# result object
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class WorstPair:
    """``delta = sup`` of the ordered defect over pairs in range, and a pair attaining it.

    ``x``/``x_prime`` are the input values of a maximizing ordered pair (the
    first one met scanning pairs by increasing rank distance); both are
    ``None`` when no pair of distinct inputs lies within ``H``.  The split
    ``support_leakage + overlap`` is the defect of that pair (Remark 2).  For
    an array of ``eps`` every field is an array of the same shape.
    """

    delta: float | np.ndarray
    x: int | np.ndarray | None
    x_prime: int | np.ndarray | None
    support_leakage: float | np.ndarray
    overlap: float | np.ndarray
    eps: float | np.ndarray
    H: int | None


# ---------------------------------------------------------------------------
# the channel
# ---------------------------------------------------------------------------
class SparseChannel:
    r"""A finite channel ``Q(y | x) ∝ w(x, y) 1{y in S(x)}`` (Definitions 1 and 9).

    Parameters
    ----------
    weights : array_like or scipy.sparse matrix, shape (n_inputs, n_outputs)
        Nonnegative finite weights ``w(x, y) 1{y in S(x)}``; rows are inputs,
        columns outputs.  Zeros are outside the support.  Every row needs a
        positive sum; rows are normalized here.  Sparse input stays sparse.
    inputs : 1-D integer array_like, optional
        Distinct input values of the rows (default ``0 .. n_inputs - 1``).  The
        privacy range ``|x - x'| <= H`` is measured on these values.
    outputs : 1-D integer array_like, optional
        Distinct output labels of the columns (default ``0 .. n_outputs - 1``):
        the values reported and read back by estimation.

    Notes
    -----
    The channel is immutable: its arrays are read-only and attributes cannot
    be set.  ``matrix`` holds the probabilities in CSR form; its sparsity
    pattern is exactly the supports ``S(x)`` (an entry can be ``0.0`` only
    through underflow of a mathematically positive probability, whose exact
    logarithm is kept in ``log_matrix``).

    The window constructors :meth:`laplace` and :meth:`gaussian` build the
    paper's s-sparse mechanisms on a finite domain directly in banded form.

    Examples
    --------
    >>> ch = SparseChannel([[2, 1, 0], [0, 1, 2]])
    >>> float(ch.pmf(0, 0))
    0.6666666666666666
    >>> ch.pure_epsilon()                      # supports differ (Theorem 1)
    inf
    >>> round(float(ch.delta_star(0.0)), 4)   # total variation
    0.6667
    """

    __slots__ = ("_matrix", "_logdata", "_inputs", "_outputs", "_meta", "_cache")

    def __init__(self, weights, inputs=None, outputs=None):
        indptr, indices, vals, shape, dup = _weights_to_csr(weights)
        with np.errstate(divide="ignore"):
            logp, off = _log_normalize(indptr, np.log(vals), with_offset=True)
        # linear probabilities straight from the weights (correctly rounded quotients)
        starts = indptr[:-1]
        rows = _row_ids(indptr)
        scaled = vals / np.maximum.reduceat(vals, starts)[rows]
        data = scaled / np.add.reduceat(scaled, starts)[rows]
        # rounding model: the data are (w / max) / sum(w / max): u for each quotient, u for the
        # quotients inside the sum, (n - 1) u for the sum, so (n + 2) u, plus 2 (dup - 1) u when
        # duplicate COO entries were summed; the logs: log of each weight (4u |log w|, and
        # |log w| <= |log p| + |offset|), then _log_normalize_bounds
        n = np.diff(indptr).astype(float)
        a_data = (n + 2.0 + 2.0 * (dup - 1)) * 1.01 * _U
        a_log = _log_normalize_bounds(n, off, extra=4.0 * np.abs(off) + dup)
        meta = {"_alpha": np.maximum(a_data, a_log)}
        self._setup(indptr, indices, logp, shape, inputs, outputs, meta, data=data)

    # -- construction --------------------------------------------------------
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

    @classmethod
    def _from_log_parts(cls, indptr, indices, logw, shape, inputs=None, outputs=None, meta=None, *, normalized=False):
        """Internal fast path: a CSR pattern with log weights (rows nonempty, indices sorted)."""
        self = object.__new__(cls)
        indptr = np.asarray(indptr, dtype=np.int64)
        indices = np.asarray(indices, dtype=np.int64)
        logw = np.asarray(logw, dtype=float)
        meta = dict(meta or {})
        if normalized:
            logp = logw
            if "_alpha" not in meta:  # pragma: no cover - every internal caller passes its bound
                meta["_alpha"] = _default_alpha(indptr)
        else:
            logp, off = _log_normalize(indptr, logw, with_offset=True)
            # data = exp(logp): the log error plus 4.1u for exp
            meta["_alpha"] = _log_normalize_bounds(np.diff(indptr).astype(float), off, extra=4.1)
        self._setup(indptr, indices, logp, shape, inputs, outputs, meta)
        return self

    @classmethod
    def from_log_weights(cls, log_weights, inputs=None, outputs=None) -> "SparseChannel":
        """Build from log weights: ``log_weights`` is a scipy.sparse matrix whose
        stored entries are the support and whose values are ``log w(x, y)``
        (finite; an explicit ``-inf`` entry means "not in the support").

        Use this when weights underflow in linear space (e.g. ``lam |x - y|``
        in the thousands): normalization is done in log space and the support
        is kept exactly.  Build the matrix from explicit entries, e.g.
        ``scipy.sparse.coo_array((logw, (rows, cols)), shape=...)``: converting
        a dense array drops the entries equal to ``0.0``, which here are log
        weights of 1, not absent outputs.
        """
        if not sp.issparse(log_weights):
            raise TypeError(
                f"log_weights must be a scipy.sparse matrix (its stored entries are the support); "
                f"got {type(log_weights).__name__}"
            )
        if log_weights.ndim != 2:
            raise ValueError(f"log_weights must be 2-D; got shape {log_weights.shape}")
        if np.iscomplexobj(log_weights.data) or not np.issubdtype(log_weights.dtype, np.number):
            raise TypeError(f"log_weights must hold real numbers; got dtype {log_weights.dtype}")
        coo = sp.coo_array(log_weights)
        vals = np.asarray(coo.data, dtype=float)
        if np.isnan(vals).any() or np.isposinf(vals).any():
            bad = float(vals[np.isnan(vals) | np.isposinf(vals)][0])
            raise ValueError(f"log_weights must be real numbers < +inf (or -inf outside the support); got {bad!r}")
        keep = vals > _NEG_INF
        rows, cols, vals = coo.row[keep].astype(np.int64), coo.col[keep].astype(np.int64), vals[keep]
        n, m = log_weights.shape
        order = np.lexsort((cols, rows))
        rows, cols, vals = rows[order], cols[order], vals[order]
        if rows.size > 1:
            dup = (rows[1:] == rows[:-1]) & (cols[1:] == cols[:-1])
            if dup.any():
                k = int(np.flatnonzero(dup)[0])
                raise ValueError(
                    f"log_weights has a duplicate entry at (row {rows[k]}, column {cols[k]}); "
                    "log weights cannot be summed"
                )
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
        _check_rows_nonempty(indptr, "log_weights")
        return cls._from_log_parts(indptr, cols, vals, (n, m), inputs, outputs)

    @classmethod
    def laplace(cls, *, lam, s, domain, window="extended") -> "SparseChannel":
        r"""The s-sparse discrete-Laplace mechanism (Definition 6) on inputs ``a..b``.

        ``Q(y | x) = e^{-lam |y - x|} / Z_x`` on the window ``W(x)``:

        * ``window="extended"``: ``W(x) = {x - t, ..., x + t}``, outputs
          ``a - t .. b + t``; every row is exactly the mechanism on Z, so
          ``Z_x = C_t`` and the defect of a pair depends on ``|x - x'|`` only
          (Theorem 3);
        * ``window="clipped"``: ``W(x) = {x - t, ..., x + t} ∩ [a, b]``,
          outputs ``a .. b``, renormalized per row, so ``Z_x`` varies near the
          edges and only the general Theorem 2 applies (docs/paper.md, "Output alphabet").

        Built banded in ``O(n s)`` time and memory from log-space kernel sums.
        """
        lam = check_positive(lam, "lam")
        s = check_odd_s(s, "s")
        a, b = check_domain(domain)
        window = check_window(window)
        kernel = LaplaceKernel(lam, (s - 1) // 2)
        return cls._radius(kernel, "laplace", ("lam", lam), s, a, b, window)

    @classmethod
    def gaussian(cls, *, sigma, s, domain, window="extended") -> "SparseChannel":
        r"""The s-sparse Gaussian mechanism (Definition 13, ``Q(y | x) ∝ e^{-(y-x)^2/(2 sigma^2)}``)
        on inputs ``a..b``; windows as in :meth:`laplace` (Theorem 9 applies when
        extended, only the general Theorem 8 when clipped)."""
        sigma = check_positive(sigma, "sigma")
        s = check_odd_s(s, "s")
        a, b = check_domain(domain)
        window = check_window(window)
        kernel = GaussianKernel(sigma, (s - 1) // 2)
        return cls._radius(kernel, "gaussian", ("sigma", sigma), s, a, b, window)

    @classmethod
    def _radius(cls, kernel, family, param, s, a, b, window):
        t = kernel.t
        n = b - a + 1
        if window == "extended" and (a - t < INT64_MIN or b + t > INT64_MAX):
            raise ValueError(
                f"domain must lie in [{INT64_MIN + t}, {INT64_MAX - t}] so that the extended outputs "
                f"lo - t .. hi + t (t = {t}) fit in int64; got ({a}, {b})"
            )
        check_entries(n, s if window == "extended" else min(s, n), f"domain ({a}, {b}) with s = {s}")
        x = np.arange(a, b + 1, dtype=np.int64)
        meta = {"family": family, "param": param, "s": s, "domain": (a, b), "window": window, "_kernel": kernel}
        # rounding model: log p = fl(log w - log Z) with |log w~ - log w| <= 3.0002u |log w|
        # (Gaussian: c = 1/(2 sigma^2) to 2u, times k^2 exactly; Laplace: u), |log w| <= |log p| + |log Z|,
        # the kernel's rigorous bounds on log Z, and 4.1u for exp: alpha = 1.01 (eZ + 3.0002u |log Z|) + 4.1u
        # (the |log p| terms, 4.0002u |log p|, are within beta)
        if window == "extended":
            lz = kernel.log_normalizer
            ez = max(kernel.log_normalizer_bound("up") - lz, lz - kernel.log_normalizer_bound("dn"))
            meta["_alpha"] = np.full(n, 1.01 * (ez + 3.0002 * _U * abs(lz)) + 4.1 * _U)
        if window == "extended":
            offsets = np.arange(-t, t + 1, dtype=np.int64)
            row_log = kernel.log_w(offsets) - kernel.log_normalizer
            indptr = np.arange(n + 1, dtype=np.int64) * s
            indices = (np.arange(n, dtype=np.int64)[:, None] + np.arange(s, dtype=np.int64)[None, :]).ravel()
            logp = np.tile(row_log, n)
            outputs = np.arange(a - t, b + t + 1, dtype=np.int64)
        else:
            lo = np.maximum(x - t, a)
            hi = np.minimum(x + t, b)
            lens = hi - lo + 1
            indptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(lens, out=indptr[1:])
            y = _segment_positions(lo, lens)
            rows = np.repeat(np.arange(n, dtype=np.int64), lens)
            log_z = kernel.log_range(lo - x, hi - x)
            ez = np.maximum(kernel.log_range(lo - x, hi - x, "up") - log_z, log_z - kernel.log_range(lo - x, hi - x, "dn"))
            meta["_alpha"] = 1.01 * (ez + 3.0002 * _U * np.abs(log_z)) + 4.1 * _U
            logp = kernel.log_w(y - x[rows]) - log_z[rows]
            indices = y - a
            outputs = x
        return cls._from_log_parts(indptr, indices, logp, (n, outputs.size), x, outputs, meta, normalized=True)

    # -- immutability ----------------------------------------------------------
    def __setattr__(self, name, value):
        raise AttributeError(f"SparseChannel is immutable; cannot set {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"SparseChannel is immutable; cannot delete {name!r}")

    def __reduce__(self):
        m = self._matrix
        return (
            _rebuild,
            (m.indptr, m.indices, self._logdata, m.data, m.shape, self._inputs, self._outputs, self._meta),
        )

    def __repr__(self) -> str:
        extra = ""
        if self._meta.get("family") is not None:
            name, value = self._meta["param"]
            extra = f", family={self._meta['family']!r}, {name}={value!r}"
            if self._meta.get("s") is not None:
                extra += f", s={self._meta['s']}"
            if self._meta.get("domain") is not None:
                extra += f", domain={self._meta['domain']}"
            if self._meta.get("window") is not None:
                extra += f", window={self._meta['window']!r}"
        return (
            f"SparseChannel(n_inputs={self.n_inputs}, n_outputs={self.n_outputs}, "
            f"nnz={self._matrix.nnz}{extra})"
        )

    # -- description -------------------------------------------------------------
    @property
    def matrix(self) -> sp.csr_array:
        """``Q`` as a read-only CSR array (rows = inputs, columns = outputs); pattern = supports."""
        return self._matrix

    @property
    def log_matrix(self) -> sp.csr_array:
        """``log Q`` on the support (same pattern as :attr:`matrix`; exact even where ``Q`` underflows)."""
        mat = self._cache.get("log_matrix")
        if mat is None:
            m = self._matrix
            mat = sp.csr_array((self._logdata, m.indices, m.indptr), shape=m.shape)
            mat.has_sorted_indices = True
            self._cache["log_matrix"] = mat
        return mat

    @property
    def inputs(self) -> np.ndarray:
        return self._inputs

    @property
    def outputs(self) -> np.ndarray:
        return self._outputs

    @property
    def n_inputs(self) -> int:
        return int(self._matrix.shape[0])

    @property
    def n_outputs(self) -> int:
        return int(self._matrix.shape[1])

    @property
    def family(self) -> str | None:
        """Name of the construction (``"laplace"``, ``"gaussian"`` or a baseline name); ``None`` for raw weights."""
        return self._meta.get("family")

    @property
    def parameter(self) -> tuple[str, float] | None:
        """``("lam", value)`` / ``("sigma", value)`` / ... when built by a named constructor.

        The same representation as :attr:`sparseldp.SparseLaplace.parameter`; ``None``
        for a channel built from raw weights.
        """
        return self._meta.get("param")

    @property
    def param(self) -> tuple[str, float] | None:  # transitional spelling of :attr:`parameter`
        return self.parameter

    @property
    def s(self) -> int | None:
        return self._meta.get("s")

    @property
    def domain(self) -> tuple[int, int] | None:
        return self._meta.get("domain")

    @property
    def window(self) -> str | None:
        return self._meta.get("window")

    @property
    def mode(self) -> str | None:
        """For the geometric baseline: ``"clamp"`` or ``"fold"``."""
        return self._meta.get("mode")

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

    # -- distribution ------------------------------------------------------------
    def logpmf(self, y, x):
        """``log Q(y | x)`` by labels, broadcasting; ``-inf`` off the support or for an unknown ``y``.

        ``x`` must be an input value (``ValueError`` otherwise).  Read from the
        stored exact logarithms, never ``log(pmf)``.
        """
        rows = self._rows_of(x)
        cols = self._cols_of(y)
        cols, rows = broadcast(("y", cols), ("x", rows))
        pos, found = self._lookup(rows, cols)
        return np.where(found, self._logdata[pos], _NEG_INF)[()]

    def pmf(self, y, x):
        """``Q(y | x)`` by labels, broadcasting; 0 off the support or for an unknown ``y``."""
        rows = self._rows_of(x)
        cols = self._cols_of(y)
        cols, rows = broadcast(("y", cols), ("x", rows))
        pos, found = self._lookup(rows, cols)
        return np.where(found, self._matrix.data[pos], 0.0)[()]

    def row(self, x) -> tuple[np.ndarray, np.ndarray]:
        """``(labels, probabilities)`` of the support ``S(x)``, in column order."""
        r = int(self._rows_of(check_int(x, "x")))
        m = self._matrix
        sl = slice(m.indptr[r], m.indptr[r + 1])
        return self._outputs[m.indices[sl]], m.data[sl].copy()

    def support(self, x) -> np.ndarray:
        """The output labels of ``S(x)``."""
        return self.row(x)[0]

    # -- distortion ------------------------------------------------------------------
    def distortion(self, order=1) -> np.ndarray:
        """``E[|Y - x|^order | X = x]`` for every input, in the order of :attr:`inputs`.

        ``order = 1`` and ``2`` give the distortion moments ``R1`` and ``R2``
        per input (for extended windows every entry equals the mechanism's
        ``r1`` / ``r2`` of Propositions 1 and 3; clipped windows distort less
        near the edges but are biased there).
        """
        order = check_int(order, "order", minimum=1)
        m = self._matrix
        rows = _row_ids(m.indptr)
        dist = np.abs((self._outputs[m.indices] - self._inputs[rows]).astype(float)) ** order
        return np.add.reduceat(dist * m.data, m.indptr[:-1])

    def mean_output(self) -> np.ndarray:
        """``E[Y | X = x]`` for every input (equals ``x`` for extended windows, docs/paper.md, "Distortion and bias")."""
        return self._matrix @ self._outputs.astype(float)

    # -- accounting ------------------------------------------------------------------
    def defect(self, eps, x, x_prime) -> Defect:
        r"""Ordered defect ``Delta_eps(x, x')`` with its split (Theorems 2 and 8, Remark 2).

        ``support_leakage = Q(S(x) \ S(x') | x)`` and
        ``overlap = sum_{S(x) ∩ S(x')} [Q(y|x) - e^eps Q(y|x')]_+``;
        ``total = support_leakage + overlap`` (each capped at 1 against rounding).
        ``eps`` may be an array; the fields then have its shape.  Rounded to
        nearest, not a bound (module docstring).
        """
        e = check_eps_array(eps, "eps")
        i = int(self._rows_of(check_int(x, "x")))
        j = int(self._rows_of(check_int(x_prime, "x_prime"), "x_prime"))
        leak, ov = _pair_split(self, i, j, e.reshape(-1))
        leak = np.minimum(leak, 1.0)  # a sum of probabilities can round to 1.0000000000000002
        total = np.minimum(leak + ov, 1.0)
        shape = e.shape
        return Defect(total.reshape(shape)[()], leak.reshape(shape)[()], ov.reshape(shape)[()])

    def delta_star(self, eps, H=None):
        """``delta*(eps; H)``: the ``sup`` over ordered pairs ``x != x'`` with ``|x - x'| <= H`` (all pairs when ``None``)
        of ``Delta_eps(x, x')`` (Theorems 2 and 8).

        ``eps`` may be an array: the result is the privacy profile with its
        shape.  ``0.0`` when no pair is in range.  Rounded to nearest, so it
        may lie slightly below the exact value (measured within ``3e-16`` on
        600 random channels; the window channels inherit the kernels' accuracy,
        see :mod:`sparseldp.accounting`); :meth:`delta_star_upper` is the
        rigorous counterpart.  Cost ``O(P w)`` for ``P`` pairs in range and rows of width
        ``w`` (e.g. ``n H s``), with working memory ``O(n w)``; it stops early
        once the defect reaches 1.
        """
        return self.delta_with_argmax(eps, H, _split=False).delta

    # transitional spelling (removed once every caller uses delta_star)
    delta = delta_star

    def delta_star_upper(self, eps, H=None):
        """A rigorous upper bound on :meth:`delta_star`: never below the exact value, at most 1.

        0.0 only when no pair is in range.  Per pair, the computed defect is
        raised by a priori bounds on the rounding of the stored probabilities
        (the constructors' ``alpha``, see the module docstring) and of the sum
        (:func:`_pair_upper`); a pair whose log ratios are certainly ``<= eps``
        on the common support is bounded by its support leakage alone.  For the
        extended windows of :meth:`laplace` / :meth:`gaussian`, whose pairs are
        exactly the mechanism on Z, this is that mechanism's
        ``delta_star_upper`` on range ``min(H, b - a)``.  Measured at most
        ``3e-14`` above the exact value on 600 random channels; the excess
        grows with the log ratios (about ``1e-15`` per unit of ``eps`` or of the
        largest log ratio) and with the size of the log weights' common offset
        in :meth:`from_log_weights`.  About two to three times the cost of
        :meth:`delta_star`.
        """
        e = check_eps_array(eps, "eps")
        H = _check_H(H)
        z = self._z_kernel(H)
        if z is not None:
            kernel, Hz = z
            if Hz < 1:
                return np.zeros(e.shape)[()]
            return np.asarray(delta_profile(kernel, e, Hz, "up")[0], dtype=float)[()]
        best = _scan_upper(self, e.reshape(-1), H)
        return best.reshape(e.shape)[()]

    def delta_with_argmax(self, eps, H=None, *, _split=True) -> WorstPair:
        """:meth:`delta_star` together with a maximizing ordered pair and its split (a :class:`WorstPair`)."""
        e = check_eps_array(eps, "eps")
        H = _check_H(H)
        flat = e.reshape(-1)
        best, bi, bj = _scan(self, flat, H)
        shape = e.shape
        if bi is None:
            z = np.zeros(shape)[()]
            return WorstPair(z, None, None, z, z, e[()], H)
        order, xs = self._sorted_inputs()
        leak = np.zeros(flat.size)
        ov = np.zeros(flat.size)
        if _split:
            pairs = np.stack([bi, bj], axis=1)
            for p in np.unique(pairs, axis=0):
                sel = (bi == p[0]) & (bj == p[1])
                lk, o = _pair_split(self, int(order[p[0]]), int(order[p[1]]), flat[sel])
                leak[sel], ov[sel] = np.minimum(lk, 1.0), np.minimum(o, 1.0)
        return WorstPair(
            best.reshape(shape)[()],
            xs[bi].reshape(shape)[()],
            xs[bj].reshape(shape)[()],
            leak.reshape(shape)[()],
            ov.reshape(shape)[()],
            e[()],
            H,
        )

    def epsilon(self, delta, H=None, *, rtol: float = 1e-12) -> float:
        """Smallest ``eps >= 0`` (rounded up, relative ``rtol``) whose rigorous upper bound
        :meth:`delta_star_upper` ``(eps, H) <= delta``: a certificate, the exact defect there is
        at most ``delta``.

        ``delta >= 1`` always holds (returns 0.0).  ``delta(eps)`` is
        continuous and nonincreasing, and convex in ``u = e^eps`` (each term
        ``[p - u q]_+`` is), so the root is bracketed by tangent steps from
        below and chord steps from above (safeguarded by bisection); only pairs
        still above ``delta`` are re-evaluated.  The search evaluates a per-pair
        upper bound that is nonincreasing in ``eps``; the upper end of the final
        bracket is returned, and it has been checked.

        Raises :class:`sparseldp.InfeasibleError` when the support leakage of
        some pair in range exceeds ``delta`` (no ``eps`` can help), including
        ``delta = 0`` with any support mismatch, or is within rounding of
        ``delta`` (then no ``eps`` can be certified; the message says which).
        """
        delta = check_probability(delta, "delta")
        H = _check_H(H)
        rtol = check_positive(rtol, "rtol")
        return _epsilon(self, delta, H, rtol)

    def is_ldp(self, eps, delta, H=None) -> bool:
        """Whether the channel is certifiably ``(eps, delta)``-LDP on range ``H`` (Theorems 2 and 8).

        ``True`` iff :meth:`delta_star_upper` ``<= delta`` (never ``True`` when
        the exact defect exceeds ``delta``); ``delta >= 1`` always holds.
        """
        delta = check_probability(delta, "delta")
        check_nonnegative(eps, "eps")
        if delta >= 1.0:
            return True
        return bool(self.delta_star_upper(eps, H) <= delta)

    def pure_epsilon(self, H=None) -> float:
        """Smallest ``eps`` with pure ``eps``-LDP on range ``H`` (Theorems 1 and 7).

        ``inf`` when some pair in range has different supports (pure LDP forces
        input-*independent* supports, docs/paper.md, "Pure LDP needs a common support"); otherwise the largest
        ``log Q(y|x) - log Q(y|x')`` over pairs in range and common support
        points, from the exact stored logarithms.  ``0.0`` with no pair in range.
        """
        H = _check_H(H)
        return _pure_epsilon(self, H)

    def is_pure_ldp(self, eps, H=None, *, rtol: float = 1e-12) -> bool:
        """``pure_epsilon(H) <= eps (1 + rtol)``: the tolerance absorbs rounding of the log ratios."""
        eps = check_nonnegative(eps, "eps", allow_inf=True)
        return bool(self.pure_epsilon(H) <= eps * (1.0 + rtol))

    # -- internals ---------------------------------------------------------------------
    # -- sampling (sparseldp.sampling does the work; imported lazily, one-way) --
    def sample(self, x, *, rng=None):
        """Draw one report per input in ``x`` (integer labels from ``inputs``).

        Exact integer inverse-CDF sampling of each row quantized to multiples of
        2^-64 (see :mod:`sparseldp.sampling`).  ``rng=None`` uses the operating
        system's secure source; an int, ``SeedSequence`` or ``Generator`` gives
        reproducible simulation, not for production.
        """
        from .sampling import sample_channel

        return sample_channel(self, x, rng=rng)

    def sampling_pmf(self, x):
        """The exactly realized distribution of row ``x``: output labels and ``Fraction`` probabilities."""
        from .sampling import channel_sampling_pmf

        return channel_sampling_pmf(self, x)

    def to_channel(self, domain=None, window=None) -> "SparseChannel":
        """The channel on the inputs in ``domain = (lo, hi)`` (all of them when ``None``).

        The local-randomizer protocol's conversion: a channel is already one,
        so this restricts its rows (the outputs and the rows kept are
        unchanged, and so are their probabilities).  ``window`` must be
        ``None`` or this channel's own window: re-windowing a channel needs
        its kernel (use the mechanism's ``to_channel``).
        """
        if window is not None and check_window(window) != self.window:
            raise ValueError(f"window must be None or this channel's own window {self.window!r}; got {window!r} "
                             "(re-window through the mechanism on Z: mechanism.to_channel(domain, window))")
        if domain is None:
            return self
        lo, hi = check_domain(domain)
        keep = np.flatnonzero((self._inputs >= lo) & (self._inputs <= hi))
        if keep.size == 0:
            raise ValueError(f"domain ({lo}, {hi}) holds none of the channel's inputs")
        if keep.size == self._inputs.size:
            return self
        m = self._matrix
        starts, ends = m.indptr[keep], m.indptr[keep + 1]
        lens = ends - starts
        pos = _segment_positions(starts, lens)
        indptr = np.concatenate([[0], np.cumsum(lens)])
        meta = dict(self._meta)
        meta["domain"] = (int(self._inputs[keep].min()), int(self._inputs[keep].max()))
        alpha = meta.get("_alpha")
        if alpha is not None and np.ndim(alpha) == 1:  # per-row rounding bounds follow their rows
            meta["_alpha"] = np.asarray(alpha)[keep]
        return SparseChannel._from_log_parts(indptr, m.indices[pos], self._logdata[pos], (keep.size, m.shape[1]),
                                             self._inputs[keep], self._outputs, meta, normalized=True)

    def certify(self, eps, H=None):
        """Rigorous upper bound on ``delta`` of the realized (quantized) rows; see :func:`sparseldp.sampling.certify`."""
        from .sampling import certify_channel

        return certify_channel(self, eps, H)

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


def _rebuild(indptr, indices, logp, data, shape, inputs, outputs, meta):
    """Unpickling: restore a channel from its stored arrays (no re-normalization)."""
    self = object.__new__(SparseChannel)
    self._setup(
        np.array(indptr, dtype=np.int64), np.array(indices, dtype=np.int64), np.array(logp, dtype=float),
        tuple(shape), inputs, outputs, meta, data=np.array(data, dtype=float),
    )
    return self


# ---------------------------------------------------------------------------
# weights validation
# ---------------------------------------------------------------------------
def _check_rows_nonempty(indptr, name):
    empty = np.flatnonzero(np.diff(indptr) == 0)
    if empty.size:
        raise ValueError(
            f"every row of {name} must have a positive sum (a nonempty support); "
            f"row {int(empty[0])} is all zero"
        )


def _weights_to_csr(weights):
    if sp.issparse(weights):
        if weights.ndim != 2:
            raise ValueError(f"weights must be 2-D (inputs x outputs); got shape {weights.shape}")
        dt = weights.dtype
        if np.issubdtype(dt, np.complexfloating) or not (np.issubdtype(dt, np.number) or dt == np.bool_):
            raise TypeError(f"weights must hold real numbers; got dtype {dt}")
        coo = sp.coo_array(weights)
        vals = np.asarray(coo.data, dtype=float)
        rows = np.asarray(coo.row, dtype=np.int64)
        cols = np.asarray(coo.col, dtype=np.int64)
        shape = weights.shape
    else:
        if weights is None or isinstance(weights, (str, bytes)):
            raise TypeError(f"weights must be a 2-D array of real numbers; got {weights!r}")
        try:
            arr = np.asarray(weights)
        except (TypeError, ValueError):  # ragged nested lists
            raise TypeError(f"weights must be a 2-D array of real numbers (rows of equal length); "
                            f"got {weights!r}"[:300]) from None
        if arr.dtype == object:
            try:
                arr = arr.astype(float)
            except OverflowError:
                raise ValueError("weights must be finite and >= 0; got an integer too large for a double") from None
            except (TypeError, ValueError):
                raise TypeError("weights must be a 2-D array of real numbers; got non-numeric entries") from None
        if np.issubdtype(arr.dtype, np.complexfloating) or not (
            np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_
        ):
            raise TypeError(f"weights must be a 2-D array of real numbers; got dtype {arr.dtype}")
        if arr.ndim != 2:
            raise ValueError(f"weights must be 2-D (inputs x outputs); got shape {arr.shape}")
        arr = arr.astype(float, copy=False)
        rows, cols = np.nonzero(arr != 0)
        vals = arr[rows, cols]
        rows = rows.astype(np.int64)
        cols = cols.astype(np.int64)
        shape = arr.shape
        # NaN compares != 0 and is caught below with its position
    n, m = shape
    if n < 1 or m < 1:
        raise ValueError(f"weights must have at least one row and one column; got shape {shape}")
    bad = ~np.isfinite(vals) | (vals < 0)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"weights must be finite and >= 0; got {float(vals[k])!r} at (row {int(rows[k])}, column {int(cols[k])})"
        )
    keep = vals > 0
    rows, cols, vals = rows[keep], cols[keep], vals[keep]
    order = np.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    dup = 1
    if rows.size > 1:
        # duplicates (COO input) are summed, the scipy convention
        new = np.ones(rows.size, dtype=bool)
        new[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
        if not new.all():
            starts = np.flatnonzero(new)
            dup = int(np.diff(np.append(starts, rows.size)).max())
            vals = np.add.reduceat(vals, starts)
            rows, cols = rows[starts], cols[starts]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    _check_rows_nonempty(indptr, "weights")
    return indptr, cols, vals, shape, dup


# ---------------------------------------------------------------------------
# pair evaluation backends
# ---------------------------------------------------------------------------
def _linear_and_log(eps):
    """Split eps values into the linear path (u = e^eps) and the log path."""
    eps = np.asarray(eps, dtype=float)
    lin = eps <= _EPS_LINEAR_MAX
    return lin, np.exp(np.where(lin, eps, 0.0))


class _Band:
    """Rows held as an ``n x W`` band in sorted-input order: ``V[p, c] = Q(first_p + c | row_p)``."""

    def __init__(self, ch: SparseChannel, first_by_row, width):
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


def _log_path_sum(P, X, eps):
    """Terms ``P (1 - e^{eps - X})`` where the log ratio ``X > eps`` (``X = inf``: all of ``P``)."""
    with np.errstate(invalid="ignore", over="ignore"):
        term = P * -np.expm1(np.minimum(eps - X, 0.0))
    return np.where(X > eps, term, 0.0)


class _Flat:
    """General layout: the entries of row x, and row x' looked up at them by sorted keys."""

    def __init__(self, ch: SparseChannel):
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


# ---------------------------------------------------------------------------
# algorithms
# ---------------------------------------------------------------------------
def _pair_split(ch: SparseChannel, i: int, j: int, eps: np.ndarray):
    """(support leakage, overlap) of the ordered pair of rows (i, j), each computed on its own
    (never as a difference) so that tiny values keep full relative precision."""
    flat = ch._flat()
    pos_of = np.empty(ch.n_inputs, dtype=np.int64)
    pos_of[flat.order] = np.arange(ch.n_inputs)
    blk = _FlatBlock(flat, np.array([pos_of[i]]), np.array([pos_of[j]]))
    leak, _, _ = blk.structure()
    _, e, pos, found = blk._gather()
    data = ch._matrix.data
    P = data[e][found]
    Q = data[pos][found]
    X = blk._log_ratio()[found]
    ov = np.zeros(eps.shape)
    lin, u = _linear_and_log(eps)
    for k in range(eps.size):
        if lin[k]:
            ov[k] = np.maximum(P - u[k] * Q, 0.0).sum()
        else:
            ov[k] = _log_path_sum(P, X, eps[k]).sum()
    return np.full(eps.shape, float(leak[0])), ov


def _scan(ch: SparseChannel, eps: np.ndarray, H):
    backend = ch._backend()
    ne = eps.size
    best = np.full(ne, -1.0)
    bi = np.full(ne, -1, dtype=np.int64)
    bj = np.full(ne, -1, dtype=np.int64)
    ar = np.arange(ne)
    for I, J in ch._pair_shifts(H):
        for blk in backend.blocks(I, J):
            tot = blk.totals(eps)
            np.minimum(tot, 1.0, out=tot)
            a = tot.argmax(axis=1)
            mx = tot[ar, a]
            upd = mx > best
            if upd.any():
                best[upd] = mx[upd]
                bi[upd] = blk.I[a[upd]]
                bj[upd] = blk.J[a[upd]]
        if ne and (best >= 1.0).all():
            break
    if ne == 0:
        return best, bi, bj
    if bi[0] < 0:
        return best, None, None
    return best, bi, bj


def _pair_upper(rb, rows_i, rows_j, T, eps, parts, *, monotone=False):
    r"""Rigorous upper bounds on the exact defects of pairs ``(rows_i, rows_j)`` at ``eps``.

    ``T`` (shape ``(len(eps), r)``) are the computed sums of positive parts;
    ``parts = (leak, x_max, any_miss)`` from a block's ``structure()`` (the
    computed leakage, the largest computed log ratio ``X~`` on the common
    support, whether any output is missing); ``rb`` from
    ``SparseChannel._row_bounds``.  With ``r_y = alpha_x + beta |log Q~(y|x)|``
    the stored probabilities' relative errors (and the same bound, absolute,
    on their logs), ``w`` the row width, ``m``, ``E`` the row's mass and
    ``sum Q~ |log Q~|``, and ``L_x`` the row's largest ``|log Q~|``:

    * summation and per-term rounding: ``T (1 + 1.02 (w + 6) u)``;
    * linear path (``eps <= 700``): an exactly positive term differs from the
      computed one by at most ``r_y Q~(y|x) + (r'_y + 5u) e^eps Q~(y|x')`` where it
      can be positive, and there ``e^eps Q~(y|x') <= 1.003 Q~(y|x)`` and
      ``|log Q~(y|x')| <= |log Q~(y|x)| + c`` with ``c = min(max(x_max, 0),
      1.01 max(eps, 1) + 0.4)`` (``lambda |log lambda| <= 1/e`` for the second);
    * log path (``eps > 700``): the log ratio errs by ``zeta_y <= alpha_x + alpha_x'
      + beta (|LP| + |LQ|) + u |X~|`` and ``(1 - e^{-z})_+`` is 1-Lipschitz with
      slope ``e^{-z}``.

    Both give ``T (1 + 1.02 (w + 6) u) + 1.02 (2 alpha_x + alpha_x' + 8u + (beta + u) c
    + 0.01 beta) m + 3.1 beta E + w 2^-1073`` (the last for subnormal entries).
    Every exact log ratio is ``<= thr = x_max + 1.01 (u |x_max| + beta (L_x + L_x'))
    + alpha_x + alpha_x'``; for ``eps >= thr`` the pair has no overlap excess and
    its defect is its leakage, ``<= leak (1 + 1.02 (w + 2) u)(1 + 1.01 (alpha_x
    + beta L_x))`` (plus ``w 2^-1073`` if an output is missing).  ``monotone=True``
    uses ``c = max(x_max, 0)``, making the bound nonincreasing in ``eps``.
    Returns ``(bound, leakage bound, thr)``.
    """
    const = _pair_constants(rb, rows_i, rows_j, parts, monotone=monotone, eps=eps)
    return _pair_eval(T, eps, *const), const[2], const[3]


def _pair_constants(rb, rows_i, rows_j, parts, *, monotone, eps=None):
    """The eps-independent pieces of :func:`_pair_upper`: ``(gamma, const, leak bound, thr)``.

    With ``monotone=False`` ``const`` depends on ``eps`` (shape ``(len(eps), r)``).
    """
    alpha, mass, ent, nnz, lmax = rb
    leak, xmax, any_miss = parts
    a_i, a_j, m_i, e_i, w_i, l_i = alpha[rows_i], alpha[rows_j], mass[rows_i], ent[rows_i], nnz[rows_i], lmax[rows_i]
    with np.errstate(invalid="ignore", over="ignore"):
        c = np.maximum(xmax, 0.0)
        if not monotone:
            e = np.asarray(eps, dtype=float).reshape(-1, 1)
            c = np.minimum(c, 1.01 * np.maximum(e, 1.0) + 0.4)
        const = (1.02 * (2.0 * a_i + a_j + 8.0 * _U + (_BETA + _U) * c + 0.01 * _BETA) * m_i + 3.1 * _BETA * e_i
                 + w_i * _SUB)
        gamma = 1.0 + 1.02 * (w_i + 6.0) * _U
        lk = (np.minimum(leak, 1.0) * (1.0 + 1.02 * (w_i + 2.0) * _U) * (1.0 + 1.01 * (a_i + _BETA * l_i))
              + np.where(any_miss, w_i * _SUB, 0.0))
        lk = np.minimum(np.where(lk > 0, np.nextafter(lk, np.inf), lk), 1.0)  # an exact zero stays zero
        slack = 1.01 * (_U * np.abs(xmax) + _BETA * (l_i + lmax[rows_j])) + a_i + a_j
        thr = np.nextafter(np.nextafter(xmax + slack, np.inf) + 2.0 * _U * slack, np.inf)
        thr = np.where(np.isneginf(xmax), _NEG_INF, thr)
    return gamma, const, lk, thr


def _pair_eval(T, eps, gamma, const, lk, thr):
    """:func:`_pair_upper` from its constants: the leakage bound where ``eps >= thr``."""
    e = np.asarray(eps, dtype=float).reshape(-1, 1)
    with np.errstate(invalid="ignore", over="ignore"):
        gen = T * gamma + const
        out = np.where(thr <= e, lk, np.maximum(gen, lk))
        out = np.where(out > 0, np.nextafter(out, np.inf), out)
    return np.minimum(out, 1.0)


def _scan_upper(ch: SparseChannel, eps: np.ndarray, H):
    """``max`` over pairs in range of :func:`_pair_upper` (0.0 with no pair), stopping at 1."""
    backend = ch._backend()
    rb = ch._row_bounds()
    order, _ = ch._sorted_inputs()
    best = np.zeros(eps.size)
    for I, J in ch._pair_shifts(H):
        for blk in backend.blocks(I, J):
            T = blk.totals(eps)
            parts = blk.structure()
            up, _, _ = _pair_upper(rb, order[blk.I], order[blk.J], T, eps, (parts[0], parts[2], parts[1]))
            np.maximum(best, up.max(axis=1), out=best)
        if eps.size and (best >= 1.0).all():
            break
    return best


class _PairSet:
    """Pairs ``(I, J)`` (sorted positions) with the eps-independent constants of their monotone bound."""

    def __init__(self, ch, I, J, consts):
        self.ch, self.I, self.J, self.consts = ch, I, J, consts

    def upper(self, eps):
        """Monotone per-pair upper bounds at one ``eps``, aligned with ``(I, J)``."""
        backend = self.ch._backend()
        out = np.empty(self.I.size)
        e = np.array([eps], dtype=float)
        for blk in backend.blocks(self.I, self.J):
            pos = blk.pos
            out[pos] = _pair_eval(blk.totals(e), e, *(c[pos] for c in self.consts))[0]
        return out

    def subset(self, keep):
        return _PairSet(self.ch, self.I[keep], self.J[keep], tuple(c[keep] for c in self.consts))


def _epsilon(ch: SparseChannel, delta: float, H, rtol: float) -> float:
    if delta >= 1.0:
        return 0.0  # every defect is at most 1
    z = ch._z_kernel(H)
    if z is not None:
        kernel, Hz = z
        return 0.0 if Hz < 1 else epsilon_for_delta(kernel, delta, Hz, rtol=rtol)
    backend = ch._backend()
    rb = ch._row_bounds()
    order, xs = ch._sorted_inputs()
    zero = np.zeros(1)
    act_I, act_J, act_parts = [], [], []
    leak_star, leak_pair, miss_pair = -1.0, None, None
    lk_star = -1.0
    for I, J in ch._pair_shifts(H):
        for blk in backend.blocks(I, J):
            leak, any_miss, xmax = blk.structure()
            consts = _pair_constants(rb, order[blk.I], order[blk.J], (leak, xmax, any_miss), monotone=True)
            up0 = _pair_eval(blk.totals(zero), zero, *consts)
            lk_up = consts[2]
            k = int(np.argmax(lk_up))
            if lk_up[k] > lk_star:
                lk_star, leak_star, leak_pair = float(lk_up[k]), float(min(leak[k], 1.0)), (blk.I[k], blk.J[k])
            if miss_pair is None and any_miss.any():
                k = int(np.argmax(any_miss))
                miss_pair = (blk.I[k], blk.J[k])
            keep = up0[0] > delta
            if keep.any():
                act_I.append(blk.I[keep])
                act_J.append(blk.J[keep])
                act_parts.append(tuple(c[keep] for c in consts))
    if leak_pair is None:
        return 0.0  # no pair in range
    in_range = "over all pairs" if H is None else f"within H = {H}"
    if delta == 0.0 and miss_pair is not None:
        x, xp = int(xs[miss_pair[0]]), int(xs[miss_pair[1]])
        raise InfeasibleError(
            f"delta = 0 needs equal supports, but S({x}) is not contained in S({xp}) "
            f"(|x - x'| = {abs(x - xp)}, {in_range}): the support leakage is positive for every eps"
        )
    if lk_star > delta:
        x, xp = int(xs[leak_pair[0]]), int(xs[leak_pair[1]])
        if leak_star > delta:
            raise InfeasibleError(
                f"support leakage alone is {leak_star:.6g} > delta = {delta:g} for the pair "
                f"(x = {x}, x' = {xp}) {in_range}: no eps makes this channel (eps, delta)-LDP"
            )
        raise InfeasibleError(
            f"the support leakage {leak_star:.17g} of the pair (x = {x}, x' = {xp}) {in_range} is within "
            f"rounding of delta = {delta!r} (rigorous upper bound {lk_star:.17g}): no eps can be certified"
        )
    if not act_I:
        return 0.0
    pairs = _PairSet(ch, np.concatenate(act_I), np.concatenate(act_J),
                     tuple(np.concatenate([p[i] for p in act_parts]) for i in range(4)))
    # Upper end: every active pair's overlap is certainly empty there, so its bound is its leakage.
    thr = pairs.consts[3]
    hi = max(float(np.max(thr)), 0.0)
    f_hi = float(pairs.upper(hi).max())
    grow = 0
    while f_hi > delta:  # pragma: no cover - defensive: the bound at hi is the leakage
        hi = 2.0 * hi + 1e-9
        f_hi = float(pairs.upper(hi).max())
        grow += 1
        if grow > 60:
            raise InfeasibleError(f"delta = {delta:g} not reached for any eps (defect stays at {f_hi:.6g})")
    lo = 0.0
    vals_lo = pairs.upper(lo)
    keep = vals_lo > delta
    pairs, vals_lo = pairs.subset(keep), vals_lo[keep]
    a = int(np.argmax(vals_lo))
    f_lo = float(vals_lo[a])
    flat = ch._flat()

    def slope_at(eps_v, pi, pj):
        if eps_v > _EPS_LINEAR_MAX:
            return 0.0  # tangent steps are only taken in the linear range; bisection beyond
        blk = _FlatBlock(flat, np.array([pi]), np.array([pj]))
        return float(blk.slope(eps_v)[0])

    def step_lo(c, vals):
        nonlocal pairs, f_lo, g_lo, lo
        keep = vals > delta  # the bound is nonincreasing in eps: pairs at or below delta stay there
        pairs, vals = pairs.subset(keep), vals[keep]
        a = int(np.argmax(vals))
        lo, f_lo = c, float(vals[a])
        g_lo = slope_at(lo, pairs.I[a], pairs.J[a])

    g_lo = slope_at(lo, pairs.I[a], pairs.J[a])
    for _ in range(400):
        if hi - lo <= rtol * hi:
            break
        width = hi - lo
        cands = []
        if hi <= _EPS_LINEAR_MAX:
            u_lo, u_hi = math.exp(lo), math.exp(hi)
            if f_lo > f_hi:  # chord from above (convexity in u of the computed sums)
                uc = u_lo + (f_lo - delta) * (u_hi - u_lo) / (f_lo - f_hi)
                cands.append(math.log(uc) if uc > 0 else lo)
            if g_lo < 0:  # tangent from below
                un = u_lo + (f_lo - delta) / (-g_lo)
                cands.append(math.log(un) if un > 0 else lo)
        cands = [c for c in cands if lo < c < hi]
        if not cands:
            cands = [0.5 * (lo + hi)]
        for c in cands:
            if not lo < c < hi:
                continue
            vals = pairs.upper(c)
            fc = float(vals.max()) if vals.size else 0.0
            if fc <= delta:
                hi, f_hi = c, fc
            else:
                step_lo(c, vals)
        if hi - lo > 0.5 * width:  # safeguard: guarantee at least halving
            c = 0.5 * (lo + hi)
            vals = pairs.upper(c)
            fc = float(vals.max()) if vals.size else 0.0
            if fc <= delta:
                hi, f_hi = c, fc
            else:
                step_lo(c, vals)
    if hi > _EPS_LINEAR_MAX and float(_scan_upper(ch, np.array([hi]), H)[0]) > delta:  # pragma: no cover
        # the computed sums switch to log space at eps = 700, where monotonicity is not proven
        hi = max(float(np.max(thr)), _EPS_LINEAR_MAX)
    return float(hi)


def _pure_epsilon(ch: SparseChannel, H) -> float:
    m = ch._matrix
    n = m.shape[0]
    if n < 2:
        return 0.0
    order, xs = ch._sorted_inputs()
    nnz_row = np.diff(m.indptr)
    K = int(nnz_row[0])
    same = bool((nnz_row == K).all())
    if same:
        idx = m.indices.reshape(n, K)
        same = bool((idx == idx[0]).all())
    covers_all = H is None or H >= int(xs[-1]) - int(xs[0])  # Python ints: no int64 wrap-around
    if same:
        L = ch._logdata.reshape(n, K)
        if covers_all:
            return float((L.max(axis=0) - L.min(axis=0)).max())
        Ls = L[order]
        best = 0.0
        max_rows = max(1, _BLOCK_ELEMS // K)
        for k in range(1, n):
            sep = xs[k:] - xs[:-k]  # negative only on int64 wrap-around
            ok = np.flatnonzero((sep >= 0) & (sep <= H))
            if ok.size == 0:
                break
            for a in range(0, ok.size, max_rows):
                sel = ok[a : a + max_rows]
                best = max(best, float(np.abs(Ls[sel + k] - Ls[sel]).max()))
        return best
    if covers_all:
        return math.inf
    backend = ch._backend()
    best = 0.0
    found = False
    for I, J in ch._pair_shifts(H):
        for blk in backend.blocks(I, J):
            _, miss, common = blk.structure()
            if miss.any():
                return math.inf
            best = max(best, float(common.max()))
            found = True
    return best if found else 0.0
