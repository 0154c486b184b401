"""What counts as an integer, parsed vectorized; the batch interface CSV and Parquet share.

Part of :mod:`sparseldp.io` (its docstring: "What counts as an integer").
A batch (:class:`_Batch`) is a run of rows whose target columns' raw fields
can be parsed into ``int64`` values, with error messages that name the row
(and, for CSV, the line) and the column of a bad value and what is wrong with
it, but never the value itself (it is raw sensitive data: :func:`_fail_value`).
"""

from __future__ import annotations

import numpy as np

#: Largest integer magnitude accepted (exclusive); keeps ``x +- t`` far from int64 overflow.
_INT_LIMIT = 10**18
_QUOTE = ord('"')


# ---------------------------------------------------------------------------
# Vectorized integer parsing
# ---------------------------------------------------------------------------


def _parse_ints(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parse the byte fields ``data[start[i]:end[i]]`` as integers, all at once.

    Returns ``(values, bad)``: ``int64`` values and a mask of fields that are
    not integers by the module's rule (sign, 1-19 digits, ``|x| < 10**18``,
    optional enclosing quotes).  Work is a fixed number of vectorized passes
    per digit position (at most 19), independent of the values.
    """
    n = start.size
    if n == 0:
        return np.empty(0, np.int64), np.zeros(0, bool)
    last = max(data.size - 1, 0)
    padded = data if data.size else np.zeros(1, np.uint8)
    length = end - start
    first = padded[np.minimum(start, last)]
    final = padded[np.clip(end - 1, 0, last)]
    quoted = (length >= 2) & (first == _QUOTE) & (final == _QUOTE)
    start = start + quoted
    end = end - quoted
    c0 = padded[np.minimum(start, last)]
    signed = (end > start) & ((c0 == ord("-")) | (c0 == ord("+")))
    negative = signed & (c0 == ord("-"))
    ds = start + signed
    nd = end - ds
    ok = (nd >= 1) & (nd <= 19)
    width = int(nd[ok].max()) if ok.any() else 0
    acc = np.zeros(n, np.uint64)
    ten = np.uint64(10)
    for j in range(width):
        active = j < nd
        digit = padded[np.minimum(ds + j, last)] - np.uint8(48)  # wraps for bytes below '0'
        ok &= ~active | (digit < 10)
        acc = np.where(active, acc * ten + digit.astype(np.uint64), acc)
    ok &= acc < np.uint64(_INT_LIMIT)
    values = acc.astype(np.int64)
    np.negative(values, out=values, where=negative)
    return values, ~ok


def _describe_bad(field: np.ndarray) -> str:
    """Why the bytes ``field`` are not an integer (vectorized: a field may be megabytes long)."""
    n = field.size
    if n == 0 or (n == 2 and field[0] == _QUOTE and field[1] == _QUOTE):
        return "is empty (a missing value)"
    body = field[1:-1] if n >= 2 and field[0] == _QUOTE and field[-1] == _QUOTE else field
    if body.size and body[0] in (ord("+"), ord("-")):
        body = body[1:]
    if body.size and bool(np.all((body >= ord("0")) & (body <= ord("9")))):
        return "is outside the supported integer range (|x| < 10**18)"
    return "is not an integer"


def _preview(field: np.ndarray, limit: int = 40) -> str:
    """The repr of the field's text, cut to ``limit`` characters; only its head is decoded."""
    head = bytes(field[: 4 * limit]).decode("utf-8", errors="backslashreplace")
    if field.size > 4 * limit or len(head) > limit:
        head = head[: limit - 3] + "..."
    return repr(head)


# ---------------------------------------------------------------------------
# Batches: one source of validated integer columns for CSV and Parquet
# ---------------------------------------------------------------------------


class _Batch:
    """A batch of rows: the target columns' raw fields plus what is needed to write them back.

    Values are *flat*, row-major: with ``k`` target columns (in file order,
    ``names``) value ``i`` is row ``i // k``, column ``names[i % k]``.
    """

    first_row: int  # 1-based data row number of the first row
    size: int  # rows
    done: float | None  # fraction of the input consumed after this batch (None: size unknown)
    names: tuple[str, ...]

    def values(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def where(self, i: int) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def field(self, i: int) -> np.ndarray:  # pragma: no cover - abstract
        """The raw bytes of flat value ``i`` (for messages)."""
        raise NotImplementedError


def _fail_value(batch: _Batch, i: int, reason: str) -> ValueError:
    """The error for flat value ``i`` of a target column: where it is and what is wrong, never the value.

    The values are the raw sensitive inputs (privatize's, or the reports estimate reads), and an
    error message ends up in logs and terminals: it names the row (and line), the column and the
    reason (``is not an integer``, ``is empty``, ``is outside the mechanism's domain [lo, hi]``, ...).
    """
    name = batch.names[i % len(batch.names)]
    return ValueError(f"{batch.where(i)}: column {name!r}: the value {reason} (the value itself is not shown)")


def _find_column(label: str, names, column: str) -> int:
    hits = [i for i, name in enumerate(names) if name == column]
    if not hits:
        shown = ", ".join(repr(n) for n in list(names)[:20]) + (", ..." if len(names) > 20 else "")
        raise ValueError(f"column {column!r} not found in {label}; its columns are {shown}")
    if len(hits) > 1:
        raise ValueError(f"column {column!r} appears {len(hits)} times in {label}; it must be unique")
    return hits[0]
