"""Building the stored form of a channel: CSR arrays, log normalization, rounding bounds.

Every constructor of :class:`sparseldp.channel.SparseChannel` ends in the same
stored form (CSR pattern = supports, probabilities and their logarithms) and
records a per-row rounding bound ``alpha_x`` (the package docstring, "Which way
the numbers err"); the derivations sit next to the code that rounds.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._validation import INT64_MAX, INT64_MIN
from .validation import check_entries

_NEG_INF = -np.inf
_U = 2.0**-53
# relative error of a stored probability: alpha_x + _BETA |log Q~(y|x)| (package docstring)
_BETA = 8.0 * _U


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


def _weights_parts(weights):
    """``SparseChannel(weights)``: ``(indptr, indices, logp, shape, meta, data)`` with the rounding bound."""
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
    return indptr, indices, logp, shape, meta, data


def _log_weights_to_csr(log_weights):
    """:meth:`SparseChannel.from_log_weights`: checked ``(indptr, cols, log weights, shape)``."""
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
    return indptr, cols, vals, (n, m)


def _radius_parts(kernel, family, param, s, a, b, window):
    """The window channel of a radius kernel on inputs ``a..b``, banded in ``O(n s)``: the arguments
    ``(indptr, indices, logp, shape, inputs, outputs, meta)`` of ``SparseChannel._from_log_parts``
    (rows already normalized)."""
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
    return indptr, indices, logp, (n, outputs.size), x, outputs, meta


def _restrict_parts(ch, keep):
    """The rows ``keep`` of ``ch`` (outputs and probabilities unchanged), as the arguments of
    ``SparseChannel._from_log_parts`` (rows already normalized)."""
    m = ch._matrix
    starts, ends = m.indptr[keep], m.indptr[keep + 1]
    lens = ends - starts
    pos = _segment_positions(starts, lens)
    indptr = np.concatenate([[0], np.cumsum(lens)])
    meta = dict(ch._meta)
    meta["domain"] = (int(ch._inputs[keep].min()), int(ch._inputs[keep].max()))
    alpha = meta.get("_alpha")
    if alpha is not None and np.ndim(alpha) == 1:  # per-row rounding bounds follow their rows
        meta["_alpha"] = np.asarray(alpha)[keep]
    return (indptr, m.indices[pos], ch._logdata[pos], (keep.size, m.shape[1]), ch._inputs[keep], ch._outputs,
            meta)
