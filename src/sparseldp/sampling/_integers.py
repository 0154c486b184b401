"""Integer primitives both samplers share: input coercion and branch-free search.

:func:`_as_int_input` turns the user's ``x`` into an integer ndarray (or
raises ``TypeError`` / ``ValueError`` naming what was given);
:func:`_branchless_count_le` counts thresholds ``<= key`` in sorted segments
with a fixed number of vectorized steps, so that the work done does not
depend on the keys (see "Timing" in :mod:`sparseldp.sampling`).
"""

from __future__ import annotations

import numbers

import numpy as np

from .._validation import check_int_array

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
# Draws per chunk: small enough for the working buffers to stay in cache.
_CHUNK = 1 << 16


def _as_int_input(x, name: str = "x") -> np.ndarray:
    """Integer scalar/array -> integer ndarray (int64, or the original narrower dtype)."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer or integer array; got bool {x!r}")
    arr = np.asarray(x)
    if arr.dtype == np.uint64:
        if arr.size and int(arr.max()) > _INT64_MAX:
            raise ValueError(f"{name} must be integers in [{_INT64_MIN}, {_INT64_MAX}]; got {int(arr.max())}")
        return arr.astype(np.int64)
    if np.issubdtype(arr.dtype, np.integer):
        return arr
    if arr.dtype == object:
        # e.g. Python ints beyond int64, or a list mixing ints with other things
        flat = arr.reshape(-1)
        for v in flat:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
                raise TypeError(f"{name} must be an integer or integer array; got element {type(v).__name__} {v!r}")
        for v in flat:
            if not _INT64_MIN <= int(v) <= _INT64_MAX:
                raise ValueError(f"{name} must be integers in [{_INT64_MIN}, {_INT64_MAX}]; got {int(v)}")
        return np.array([int(v) for v in flat], dtype=np.int64).reshape(arr.shape)
    return check_int_array(x, name)  # the original, so that [] counts as an empty integer array


def _branchless_count_le(table, start, length, keys, steps):
    """``#{j < length : table[start + j] <= key}`` per key, for sorted segments.

    Fixed ``steps >= ceil(log2(max length))`` iterations of the same vectorized
    operations for every key: no branch depends on the keys.
    """
    base = start.copy()
    n = length.copy()
    for _ in range(steps):
        half = n >> 1
        mid = base + half
        base = np.where(table[mid] <= keys, mid, base)
        n -= half
    return base - start + (table[base] <= keys)
