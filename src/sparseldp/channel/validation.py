"""Argument checks shared by the channel constructors and the modules above them.

``check_domain``, ``check_window`` and ``check_entries`` are also used by
:mod:`sparseldp.baselines`, :mod:`sparseldp.design.finite`, :mod:`sparseldp.spec`
and the CLI; ``_labels`` validates the input / output labels of a channel.
"""

from __future__ import annotations

import numpy as np

from .._validation import INT64_MAX, INT64_MIN, check_int, check_int_array

#: Largest number of stored entries (inputs x row length) of a channel built from a domain.
MAX_ENTRIES = 1 << 27

_WINDOWS = ("extended", "clipped")


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
