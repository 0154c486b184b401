r"""Streamed file I/O: privatize integer columns of a CSV or Parquet file, read report columns.

This is the data-pipeline face of the samplers (:mod:`sparseldp.sampling`);
estimation reads reports through :func:`iter_column` / :func:`column_counts`.
Every function streams its input in batches, so memory is bounded by the batch
and block sizes (and :data:`MAX_RECORD_BYTES` for one CSV record), never by the
file size.

Writing: :func:`privatize_file`
    Replaces every value of the named integer columns by a report
    ``Y ~ M(. | x)`` drawn from the mechanism, one independent draw per row
    and per column, and leaves everything else as it was: the header, the row
    order and, for CSV, the *bytes* of every other field (quoting, line
    endings, blank lines and a byte-order mark are copied through untouched;
    only the target fields' text is replaced by the decimal report).  For
    Parquet the other columns keep their Arrow values and types; the target
    columns become ``int64``.  A file output is written to a temporary file in
    the output's directory (``.<name>.sparseldp-<pid>-<random>.tmp``, see
    :mod:`sparseldp._files`) and moved into place with :func:`os.replace`
    only after the last row succeeded: on any error, including
    ``KeyboardInterrupt``, no output file is left behind.

Reading: :func:`iter_column`, :func:`column_counts`
    The same parser and validation, yielding ``int64`` batches, or one
    ``np.bincount`` per batch accumulated into ``(offset, counts)``.

Standard input and output
    ``"-"`` (:data:`STDIO`) as an input reads CSV or TSV from
    ``sys.stdin.buffer`` (``format`` defaults to ``"csv"``); as
    :func:`privatize_file`'s output it writes to ``sys.stdout.buffer``.
    Parquet needs a seekable file and is refused on either stream.  Written to
    standard output, rows go out batch by batch: on an error the rows written
    so far *are already out* and only the exception (the CLI's exit status)
    says the output is incomplete.  The input may also be a FIFO or a
    character device; it is read like standard input (progress fractions are
    then ``None``: the size is unknown).

Formats
    ``format`` is ``"csv"``, ``"tsv"`` or ``"parquet"``; ``None`` infers it
    from the extension (``.csv``, ``.tsv``, ``.parquet``, ``.pq``).  CSV is
    RFC 4180: ``,`` separates fields (tab for TSV), a field may be enclosed in
    ``"`` with ``""`` for a literal quote and may then contain separators and
    line breaks; records end with LF or CRLF; the first non-blank record is the
    header.  The parser is vectorized numpy on byte blocks: a line break or
    separator is structural iff an even number of quotes precedes it in the
    block (blocks always start at a record boundary, where the count is even).

Blank lines
    In a file of *one* column a blank line after the header is a record whose
    only field is empty: a missing value, refused like any empty field (row
    and line named).  In a file of several columns a blank line cannot be a
    record (it has one field, not several); it is copied through untouched and
    counted (:attr:`PrivatizeResult.blank_lines`), and :func:`iter_column` /
    :func:`column_counts` skip it.  Blank lines before the header are copied
    through and counted in both cases.

Limits
    One CSV record (a line, or several when a quoted field holds line breaks)
    may hold at most :data:`MAX_RECORD_BYTES` (64 MiB) and the header line at
    most :data:`MAX_HEADER_BYTES` (1 MiB); a longer one, including an
    unterminated quote or a stream with no line break at all (``/dev/zero``),
    is a ``ValueError`` naming its line, raised as soon as the limit is
    passed.  Working memory for a record at the limit is a small multiple of
    it: measured for a 60 MiB record, about 3x when reading and 3.6x when
    privatizing (the bytes and their masks; a batch of such long records is
    written slice by slice, never copied whole).

What counts as an integer
    Optional sign, then 1 to 19 ASCII digits, magnitude below ``10**18``,
    optionally inside quotes (``"12"``).  Rejected, with the row number and the
    value: empty fields and nulls, whitespace (``" 12"``), decimals including
    integral-looking ones (``"3.0"``, ``"1e3"``) and anything else.  Accepting
    ``3.0`` would silently round floats, and a float column usually means the
    value was rounded or imputed upstream; the mechanism's domain is integers,
    so the file must say so.  Parquet columns must be of an integer type or a
    string type holding such integers; float columns are rejected the same way.

Row numbers in messages are 1-based data rows (the first record after the
header is row 1); CSV messages also give the 1-based line of the file where
the record starts.  With several columns, the first bad value in file order
(row, then column position) is reported.

Randomness: ``rng=None`` (the default) draws from the operating system's
secure source (:class:`sparseldp._rng.SystemBitSource`).  An ``int``,
``SeedSequence``, ``BitGenerator`` or ``Generator`` is normalized once, with
:func:`sparseldp._rng.as_bit_source`, into one stream shared by all batches and
columns: reproducible simulation for a fixed input, seed, column list and
``batch_size``, **not for production** (anyone with the seed can recompute the
noise and undo the privatization).
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._files import check_output_path, open_temp
from ._rng import as_bit_source
from ._validation import check_int

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "MAX_RECORD_BYTES",
    "MAX_HEADER_BYTES",
    "STDIO",
    "PrivatizeResult",
    "privatize_file",
    "iter_column",
    "column_counts",
    "detect_format",
]

#: Rows per batch (samplers, bincount and Parquet row groups work on this many at a time).
DEFAULT_BATCH_SIZE = 1 << 18
#: Longest CSV record accepted, in bytes (without its line break).  Bounds the
#: memory a single record can take (a few times this) and stops a stream with
#: no record end (``/dev/zero``, an unterminated quote) early.
MAX_RECORD_BYTES = 64 << 20
#: Longest CSV header line accepted, in bytes (without its line break).
MAX_HEADER_BYTES = 1 << 20
#: The path that means standard input (as an input) or standard output (as an output).
STDIO = "-"
#: Bytes read from a CSV per block; a batch never spans more than one block
#: unless a single record is larger.
#: Measured on a 3,000,000-row CSV: 1 MiB is as fast as 8 MiB and needs ~45 MB of
#: working memory instead of ~150 MB (temporaries are ~40 bytes per input byte).
_BLOCK_BYTES = 1 << 20
#: Batches with at least this many bytes per target field (long records) are written
#: slice by slice (:meth:`_CsvBatch.write_replaced`) instead of spliced in memory:
#: the loop is short there, and a 64 MiB record then needs no rewritten copy.
_SPLICE_BYTES_PER_FIELD = 4096
#: Largest integer magnitude accepted (exclusive); keeps ``x +- t`` far from int64 overflow.
_INT_LIMIT = 10**18
#: Widest span of values :func:`column_counts` accepts without ``bounds``.
_MAX_SPAN = 10**7
#: Widest ``bounds`` accepted (the histogram holds one int64 per value: 512 MiB).
_MAX_BOUNDS_SPAN = 1 << 26

_EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet"}
_FORMATS = ("csv", "tsv", "parquet")
_DELIMITER = {"csv": ord(","), "tsv": ord("\t")}
_QUOTE, _LF, _CR = ord('"'), ord("\n"), ord("\r")
_BOM = b"\xef\xbb\xbf"
_STDIN_LABEL = "'-' (standard input)"

ProgressCallback = Callable[[int, float | None], None]


def _plural(n: int, word: str) -> str:
    """``1 row``, ``2 rows``, ``1,000 rows``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _size_text(n: int) -> str:
    """A byte limit as people write it: ``64 MiB``, ``1 MiB``, else ``100 bytes``."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return _plural(n, "byte")


# ---------------------------------------------------------------------------
# Formats, paths, arguments
# ---------------------------------------------------------------------------


def detect_format(path, format: str | None = None) -> str:
    """``"csv"``, ``"tsv"`` or ``"parquet"``: ``format`` if given, else from the extension.

    ``"-"`` (standard input) without ``format`` is CSV.
    """
    if format is not None:
        if not isinstance(format, str) or format.lower() not in _FORMATS:
            raise ValueError(f"format must be one of {_FORMATS} or None; got {format!r}")
        return format.lower()
    if _is_stdio(path):
        return "csv"
    suffix = Path(path).suffix.lower()
    if suffix not in _EXTENSIONS:
        raise ValueError(
            f"cannot tell the format of {str(path)!r} from its extension {suffix or '(none)'!r}; "
            f"use .csv, .tsv, .parquet or .pq, or pass format= (one of {_FORMATS})"
        )
    return _EXTENSIONS[suffix]


def _is_stdio(value) -> bool:
    # Path("-") too: a CLI may hand its arguments over as Paths.  A file named "-" is "./-".
    return isinstance(value, (str, os.PathLike)) and os.fspath(value) == STDIO


def _check_path(value, name: str) -> Path:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike) or '-'; got {type(value).__name__} {value!r}")
    return Path(value)


def _check_column(column, name: str = "column") -> str:
    if not isinstance(column, str) or not column:
        raise TypeError(f"{name} must be a non-empty string (a column name); got {column!r}")
    return column


def _check_columns(column, columns) -> tuple[str, ...]:
    """The names to privatize, from ``columns`` (str or sequence) or its one-name alias ``column``."""
    if column is not None and columns is not None:
        raise TypeError("give columns= (one name or a list of names) or column= (one name), not both")
    if columns is None:
        if column is None:
            raise TypeError("privatize_file() needs columns= (a column name or a list of column names)")
        return (_check_column(column),)
    if isinstance(columns, str):
        return (_check_column(columns, "columns"),)
    if not isinstance(columns, Sequence) or isinstance(columns, (bytes, bytearray)):
        raise TypeError(f"columns must be a column name or a sequence of column names; "
                        f"got {type(columns).__name__} {columns!r}")
    names = tuple(_check_column(c, "each of columns") for c in columns)
    if not names:
        raise ValueError("columns must name at least one column; got an empty sequence")
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"column {name!r} is listed more than once in columns; list each column once")
        seen.add(name)
    return names


def _check_bounds_reason(reason) -> str | None:
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"bounds_reason must be None or a string; got {type(reason).__name__} {reason!r}")
    return reason or None


# ---------------------------------------------------------------------------
# Sources: one binary stream for files, FIFOs, devices and standard input
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Source:
    """An open input: a binary file object and what messages call it."""

    fh: object  # binary file object with .read(n)
    path: Path | None  # None for standard input
    label: str  # "'people.csv'" or "'-' (standard input)"
    size: int | None  # bytes, when known (regular files)

    @property
    def seekable(self) -> bool:
        return self.size is not None

    def require_seekable(self) -> None:
        """Parquet keeps its schema at the end of the file: it cannot be streamed from a pipe."""
        if self.path is None:
            raise ValueError("Parquet cannot be read from standard input (it needs a seekable file); "
                             "pass a file path")
        if not self.seekable:
            raise ValueError(f"Parquet cannot be read from {self.label}: it is not a regular file (Parquet "
                             "needs a seekable file); pass a file path")

    def read(self, n: int) -> bytes:
        try:
            return self.fh.read(n)
        except OSError as exc:
            raise ValueError(f"cannot read input {self.label}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def _open_input(value) -> Iterator[_Source]:
    """Open ``value`` (a path or ``"-"``) for reading; files opened here are closed on exit."""
    if _is_stdio(value):
        fh = getattr(sys.stdin, "buffer", None)
        if fh is None:
            raise ValueError("cannot read input '-': standard input is not available")
        yield _Source(fh, None, _STDIN_LABEL, None)
        return
    path = _check_path(value, "input")
    try:
        # Opened once and read from this handle: a FIFO opened twice would lose its writer.
        fh = open(path, "rb")
    except OSError as exc:
        raise ValueError(f"cannot read input {str(path)!r}: {exc.strerror or exc}") from None
    with fh:
        mode = os.fstat(fh.fileno()).st_mode
        if stat.S_ISDIR(mode):  # pragma: no cover - open() already refuses directories on Linux
            raise ValueError(f"cannot read input {str(path)!r}: it is a directory")
        size = os.fstat(fh.fileno()).st_size if stat.S_ISREG(mode) else None
        yield _Source(fh, path, repr(str(path)), size)


@dataclass(frozen=True)
class _Target:
    """What to sample from and which inputs it accepts."""

    sampler: object
    lo: int | None = None  # inclusive bounds when the allowed inputs are a range
    hi: int | None = None
    inputs: np.ndarray | None = None  # sorted allowed inputs when not a range
    description: str = ""

    def check(self, x: np.ndarray) -> np.ndarray | None:
        """Boolean mask of rows whose value the mechanism does not accept (None if all fine)."""
        if self.inputs is not None:
            bad = ~np.isin(x, self.inputs)
        elif self.lo is not None:
            bad = (x < self.lo) | (x > self.hi)
        else:
            return None
        return bad if bad.any() else None


def _resolve_mechanism(mechanism) -> _Target:
    from .spec import Spec, load_spec

    if isinstance(mechanism, (str, os.PathLike)):
        mechanism = load_spec(mechanism)
    if isinstance(mechanism, Spec):
        sampler = mechanism.sampler_target()
        if mechanism.domain is not None:
            lo, hi = mechanism.domain
            return _Target(sampler, lo=lo, hi=hi, description=f"the mechanism's domain [{lo}, {hi}]")
        return _Target(sampler)
    from .channel import SparseChannel

    if not (callable(getattr(mechanism, "sample", None)) or isinstance(mechanism, SparseChannel)):
        raise TypeError(
            "mechanism must be a Spec, a path to a mechanism spec (JSON) or a mechanism with "
            f".sample(x, rng=...); got {type(mechanism).__name__}"
        )
    inputs = getattr(mechanism, "inputs", None)
    if inputs is None:
        return _Target(mechanism)
    inputs = np.unique(np.asarray(inputs, dtype=np.int64))
    lo, hi = int(inputs[0]), int(inputs[-1])
    if inputs.size == hi - lo + 1:
        return _Target(mechanism, lo=lo, hi=hi, description=f"the mechanism's domain [{lo}, {hi}]")
    return _Target(mechanism, inputs=inputs, description="the mechanism's input values")


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
    name = batch.names[i % len(batch.names)]
    return ValueError(f"{batch.where(i)}: column {name!r} value {_preview(batch.field(i))} {reason}")


# -- CSV ---------------------------------------------------------------------


@dataclass
class _Tally:
    """Counts a CSV pass reports besides its batches."""

    blank_lines: int = 0


class _CsvBatch(_Batch):
    """Bytes ``data`` covering whole records; target fields at ``data[start[i]:end[i]]`` (flat)."""

    def __init__(self, chunk, b0, b1, rec_start, start, end, first_row, chunk_line, done, names):
        self.chunk = chunk  # the block the batch was cut from (line numbers are counted in it)
        self.b0 = b0
        self.data = chunk[b0:b1]
        self.rec_start = rec_start
        self.start = start
        self.end = end
        self.first_row = first_row
        self.chunk_line = chunk_line
        self.size = int(rec_start.size)
        self.done = done
        self.names = names

    def values(self) -> np.ndarray:
        k = len(self.names)
        if k == 1:
            values, bad = _parse_ints(self.data, self.start, self.end)
        else:  # column by column: each pays for its own widest value only
            values = np.empty(self.start.size, np.int64)
            bad = np.empty(self.start.size, bool)
            for j in range(k):
                values[j::k], bad[j::k] = _parse_ints(self.data, self.start[j::k], self.end[j::k])
        if bad.any():
            i = int(np.argmax(bad))
            raise _fail_value(self, i, _describe_bad(self.field(i)))
        return values

    def line(self, i: int) -> int:
        # Only for error messages: counting line breaks costs a pass over the block.
        r = i // len(self.names)
        return self.chunk_line + int(np.count_nonzero(self.chunk[: self.b0 + self.rec_start[r]] == _LF))

    def where(self, i: int) -> str:
        return f"row {self.first_row + i // len(self.names)} (line {self.line(i)})"

    def field(self, i: int) -> np.ndarray:
        return self.data[self.start[i] : self.end[i]]

    def replaced(self, reports: np.ndarray):
        """The batch's bytes with each target field replaced by the decimal text of ``reports`` (flat).

        The fields' byte ranges are increasing (records in order, columns in
        file order within a record), so the batch is, without copying, an
        Arrow binary array of alternating pieces ``gap, field, gap, field, ...,
        gap``; one ``replace_with_mask`` swaps every field for its report's
        text, and the result's data buffer is the new bytes (one pass in C++,
        no per-row Python; measured 2.6 ms per 1 MiB block against 5.1 ms for
        a numpy mask-and-insert splice).
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        n = self.start.size
        if n == 0:
            return memoryview(self.data)
        large = self.data.size >= 1 << 31
        typ, off = (pa.large_binary(), np.int64) if large else (pa.binary(), np.int32)
        offsets = np.empty(2 * n + 2, off)
        offsets[0] = 0
        offsets[1:-1:2] = self.start
        offsets[2:-1:2] = self.end
        offsets[-1] = self.data.size
        pieces = pa.Array.from_buffers(typ, 2 * n + 1, [None, pa.py_buffer(offsets), pa.py_buffer(self.data)])
        is_field = np.zeros(2 * n + 1, bool)
        is_field[1::2] = True
        text = pc.cast(pc.cast(pa.array(reports, type=pa.int64()), pa.string()), typ)
        out = pc.replace_with_mask(pieces, pa.array(is_field), text)
        _, offsets_buf, data_buf = out.buffers()
        bounds = np.frombuffer(offsets_buf, dtype=off, count=2 * n + 2, offset=offsets.itemsize * out.offset)
        return memoryview(data_buf)[int(bounds[0]) : int(bounds[-1])]

    def write_replaced(self, fh, reports: np.ndarray) -> None:
        """Write what :meth:`replaced` returns, slice by slice, without building it.

        For batches of few, long records (see :data:`_SPLICE_BYTES_PER_FIELD`):
        :meth:`replaced` holds a rewritten copy of the batch, this holds none,
        and its loop runs once per field, at most
        ``data.size / _SPLICE_BYTES_PER_FIELD`` times.
        """
        data = memoryview(self.data)
        pos = 0
        for s, e, y in zip(self.start.tolist(), self.end.tolist(), reports.tolist()):
            fh.write(data[pos:s])
            fh.write(b"%d" % y)
            pos = e
        fh.write(data[pos:])


def _scan(buf: np.ndarray, delim: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """Structural separators of ``buf`` (which starts at a record boundary).

    Returns ``(seps, lf_at, open_quote)``: the sorted positions of separators
    and LFs outside quotes, the indices into ``seps`` of the LFs, and whether
    ``buf`` ends inside a quoted field.  Masks are built in place: about three
    bytes of temporaries per input byte plus 8 per separator.
    """
    is_sep = buf == delim
    is_sep |= buf == _LF
    inside = buf == _QUOTE
    open_quote = False
    if inside.any():
        np.logical_xor.accumulate(inside, out=inside)  # True after an odd number of quotes
        open_quote = bool(inside[-1])
        np.logical_not(inside, out=inside)
        is_sep &= inside
    del inside
    seps = np.flatnonzero(is_sep)
    del is_sep
    lf_at = np.flatnonzero(buf[seps] == _LF)
    return seps, lf_at, open_quote


def _too_long(label: str, line: int, header: bool, length: int, complete: bool) -> ValueError:
    if header:
        what, limit, name = f"the header line (line {line})", MAX_HEADER_BYTES, "MAX_HEADER_BYTES"
    else:
        what, limit, name = f"the record starting on line {line}", MAX_RECORD_BYTES, "MAX_RECORD_BYTES"
    size = (f"it is {_plural(length, 'byte')} long" if complete else
            f"{_plural(length, 'byte')} read without reaching its end (an unterminated quote, or not CSV?)")
    return ValueError(f"malformed CSV {label}: {what} is longer than {_size_text(limit)} "
                      f"({name} = {limit:,} bytes); {size}")


def _read_long_record(src: _Source, buf: np.ndarray, open_quote: bool, n_delims: int, delim: int,
                      max_delims: int | None, header: bool, line: int, row: int) -> tuple[np.ndarray, bool]:
    """Read on until the record that fills ``buf`` ends; return ``(bytes, eof)``.

    ``buf`` starts at a record boundary and holds no structural LF and
    ``n_delims`` structural separators.  Only the new blocks are scanned (the
    quote parity is carried over), so the cost is linear, and the record is
    refused as soon as it passes its limit (or, once the header is known, as
    soon as it has more fields than the header): neither an endless stream nor
    an unterminated quote grows memory beyond the limit.
    """
    limit = MAX_HEADER_BYTES if header else MAX_RECORD_BYTES
    parts = [buf]
    total = buf.size
    while True:
        if total > limit + 1:  # + 1: the record may still end in CR LF
            raise _too_long(src.label, line, header, total, complete=False)
        if max_delims is not None and n_delims > max_delims:
            raise ValueError(f"malformed CSV {src.label}: row {row} (line {line}) has more than "
                             f"{_plural(max_delims + 1, 'field')}, the header has {max_delims + 1} "
                             "(check the quoting)")
        block = src.read(_BLOCK_BYTES)
        if not block:
            return np.concatenate(parts), True
        b = np.frombuffer(block, np.uint8)
        outside = b == _QUOTE
        if outside.any() or open_quote:
            np.logical_xor.accumulate(outside, out=outside)
            if not open_quote:
                np.logical_not(outside, out=outside)
            open_quote = not bool(outside[-1])
        else:
            outside = np.ones(b.size, bool)
        lf = (b == _LF) & outside
        parts.append(b)
        if lf.any():
            return np.concatenate(parts), False
        if max_delims is not None:
            n_delims += int(np.count_nonzero((b == delim) & outside))
        total += b.size


@dataclass(frozen=True)
class _CsvHeader:
    names: tuple[str, ...]  # every column of the file
    index: tuple[int, ...]  # positions of the target columns, increasing
    targets: tuple[str, ...]  # their names, in that order


def _iter_csv(src: _Source, columns: tuple[str, ...], batch_size: int, fmt: str,
              tally: _Tally | None = None) -> Iterator[_CsvBatch]:
    """Stream ``src`` as :class:`_CsvBatch` es whose ``data`` tile the whole input.

    Per block, one pass finds the *structural* separators (field separators and
    LFs preceded by an even number of quotes; the parity is a running XOR, one
    byte per input byte).  In that sorted sequence record ``r`` is the run
    between two LFs, so its field count is a difference of LF indices and its
    ``k``-th field lies between separators ``prev_lf + k`` and ``prev_lf + k + 1``:
    no search, no per-row Python.  Several target columns are interleaved per
    record (flat, row-major), in file order.
    """
    delim = _DELIMITER[fmt]
    tally = _Tally() if tally is None else tally
    header: _CsvHeader | None = None
    row = 1  # data row number of the next record
    line = 1  # file line on which the next block starts
    consumed = 0
    carry = np.empty(0, np.uint8)
    while True:
        block = src.read(_BLOCK_BYTES)
        eof = not block
        if carry.size:
            buf = np.concatenate([carry, np.frombuffer(block, np.uint8)])
        else:
            buf = np.frombuffer(block, np.uint8)
        if buf.size == 0:
            break
        seps, lf_at, open_quote = _scan(buf, delim)
        if not eof and lf_at.size == 0:  # one record longer than the buffer: read on, scanning only new bytes
            ncols = None if header is None else len(header.names)
            buf, eof = _read_long_record(src, buf, open_quote, int(seps.size), delim,
                                         None if ncols is None else ncols - 1, header is None, line, row)
            seps, lf_at, open_quote = _scan(buf, delim)
        if eof and open_quote:
            rs = int(seps[lf_at[-1]]) + 1 if lf_at.size else 0
            raise ValueError(f"malformed CSV {src.label}: unterminated quoted field in the record "
                             f"starting on line {line + int(np.count_nonzero(buf[:rs] == _LF))}")
        if eof:
            cut = buf.size
            if not (lf_at.size and seps[lf_at[-1]] == buf.size - 1):  # last record has no LF
                seps = np.append(seps, buf.size)
                lf_at = np.append(lf_at, seps.size - 1)
        else:
            cut = int(seps[lf_at[-1]]) + 1
            seps = seps[: lf_at[-1] + 1]
        chunk = buf[:cut]
        carry = buf[cut:].copy()
        del buf
        prev = np.empty(lf_at.size, np.int64)  # index in seps of the previous terminator (-1: none)
        prev[0] = -1
        prev[1:] = lf_at[:-1]
        n_delims = lf_at - prev - 1
        rec_start = np.where(prev >= 0, seps[np.maximum(prev, 0)] + 1, 0)
        term = seps[lf_at]
        content_end = term - ((term > rec_start) & (chunk[np.clip(term - 1, 0, cut - 1)] == _CR))
        blank = (n_delims == 0) & (content_end == rec_start)

        def line_of(i: int) -> int:
            return line + int(np.count_nonzero(chunk[: rec_start[i]] == _LF))

        skip = 0  # leading records that are not data: blank lines before the header, the header
        if header is None:
            h = int(np.argmax(~blank)) if not blank.all() else blank.size
            tally.blank_lines += h
            if h < blank.size:
                if content_end[h] - rec_start[h] > MAX_HEADER_BYTES:
                    raise _too_long(src.label, line_of(h), True, int(content_end[h] - rec_start[h]), True)
                delims = seps[prev[h] + 1 : lf_at[h]]
                header = _parse_header(src.label, chunk, int(rec_start[h]), delims, int(content_end[h]),
                                       columns, fmt)
                skip = h + 1
            else:
                skip = h
        if skip:
            prev, n_delims, rec_start, content_end, blank = (
                a[skip:] for a in (prev, n_delims, rec_start, content_end, blank))
        if header is None:  # only blank lines so far: bytes to copy through, no rows
            none = np.empty(0, np.int64)
            done = None if src.size is None else min((consumed + cut) / max(src.size, 1), 1.0)
            yield _CsvBatch(chunk, 0, cut, none, none, none, row, line, done, columns)
            line += int(np.count_nonzero(chunk == _LF))
            consumed += cut
            continue
        ncols = len(header.names)
        if ncols > 1 and blank.any():  # not records: one field where the header has several
            tally.blank_lines += int(np.count_nonzero(blank))
            keep = ~blank
            prev, n_delims, rec_start, content_end = (a[keep] for a in (prev, n_delims, rec_start, content_end))
        length = content_end - rec_start
        if length.size and int(length.max()) > MAX_RECORD_BYTES:
            i = int(np.argmax(length > MAX_RECORD_BYTES))
            raise _too_long(src.label, line_of(i), False, int(length[i]), True)
        wrong = n_delims != ncols - 1
        if wrong.any():
            i = int(np.argmax(wrong))
            found = int(n_delims[i]) + 1
            raise ValueError(
                f"malformed CSV {src.label}: row {row + i} (line {line_of(i)}) has {_plural(found, 'field')}, "
                f"the header has {ncols} (check the quoting)"
            )
        nrec = rec_start.size
        k = len(header.index)

        def field(c: int) -> tuple[np.ndarray, np.ndarray]:
            start = rec_start if c == 0 else seps[prev + c] + 1
            end = content_end if c == ncols - 1 else seps[prev + (c + 1)]
            return start, end

        if k == 1:
            f_start, f_end = field(header.index[0])
        else:  # interleave per record: byte ranges stay increasing
            f_start = np.empty((nrec, k), np.int64)
            f_end = np.empty((nrec, k), np.int64)
            for j, c in enumerate(header.index):
                f_start[:, j], f_end[:, j] = field(c)
            f_start, f_end = f_start.ravel(), f_end.ravel()
        # Batches of at most batch_size rows whose byte ranges tile the chunk.
        cuts = list(range(batch_size, nrec, batch_size))
        byte_cuts = [0] + [int(rec_start[c]) for c in cuts] + [cut]
        row_cuts = [0] + cuts + [nrec]
        for j in range(len(byte_cuts) - 1):
            b0, b1 = byte_cuts[j], byte_cuts[j + 1]
            r0, r1 = row_cuts[j], row_cuts[j + 1]
            done = None if src.size is None else min((consumed + b1) / max(src.size, 1), 1.0)
            yield _CsvBatch(chunk, b0, b1, rec_start[r0:r1] - b0, f_start[r0 * k : r1 * k] - b0,
                            f_end[r0 * k : r1 * k] - b0, row + r0, line, done, header.targets)
        row += nrec
        line += int(np.count_nonzero(chunk == _LF))
        consumed += cut
        if eof:
            break
    if header is None:
        raise ValueError(f"CSV input {src.label} is empty: it has no header line")


def _header_name(raw: bytes) -> str | None:
    """One header field: unquoted text as is, or ``"..."`` with ``""`` for a quote; ``None`` if malformed."""
    if raw.startswith(b'"'):
        inner = raw[1:-1]
        if len(raw) < 2 or not raw.endswith(b'"') or b'"' in inner.replace(b'""', b""):
            return None
        raw = inner.replace(b'""', b'"')
    return raw.decode("utf-8")


def _parse_header(label: str, chunk: np.ndarray, start: int, delims: np.ndarray, end: int,
                  columns: tuple[str, ...], fmt: str) -> _CsvHeader:
    """The header's names from its structural separators (no ``csv`` module: no field-size limit)."""
    raw = bytes(chunk[start:end])
    if b"\x00" in raw:
        raise ValueError(f"cannot read {label} as {fmt.upper()}: malformed header line (it contains NUL bytes)")
    bounds = [start, *(int(d) for d in delims), end]
    names = []
    try:
        for j in range(len(bounds) - 1):
            field = raw[bounds[j] + (j > 0) - start : bounds[j + 1] - start]
            if j == 0 and field.startswith(_BOM):
                field = field[len(_BOM):]
            name = _header_name(field)
            if name is None:
                raise ValueError(f"cannot read {label} as {fmt.upper()}: malformed header line (field "
                                 f"{j + 1}, {_preview(np.frombuffer(field, np.uint8))}, has stray quotes)")
            names.append(name)
    except UnicodeDecodeError:
        raise ValueError(f"cannot read {label} as {fmt.upper()}: the header line is not UTF-8 text") from None
    index = [_find_column(label, names, c) for c in columns]
    order = sorted(range(len(columns)), key=index.__getitem__)
    return _CsvHeader(tuple(names), tuple(index[j] for j in order), tuple(columns[j] for j in order))


def _find_column(label: str, names, column: str) -> int:
    hits = [i for i, name in enumerate(names) if name == column]
    if not hits:
        shown = ", ".join(repr(n) for n in list(names)[:20]) + (", ..." if len(names) > 20 else "")
        raise ValueError(f"column {column!r} not found in {label}; its columns are {shown}")
    if len(hits) > 1:
        raise ValueError(f"column {column!r} appears {len(hits)} times in {label}; it must be unique")
    return hits[0]


# -- Parquet -----------------------------------------------------------------


class _ParquetBatch(_Batch):
    def __init__(self, record_batch, positions: tuple[int, ...], names: tuple[str, ...], first_row: int,
                 done: float | None):
        self.record_batch = record_batch
        self.positions = positions  # the target columns' positions in record_batch, increasing
        self.names = names
        self.first_row = first_row
        self.size = record_batch.num_rows
        self.done = done

    def where(self, i: int) -> str:
        return f"row {self.first_row + i // len(self.names)}"

    def field(self, i: int) -> np.ndarray:
        k = len(self.names)
        value = self.record_batch.column(self.positions[i % k])[i // k].as_py()
        text = "" if value is None else (value if isinstance(value, str) else repr(value))
        return np.frombuffer(text.encode("utf-8", errors="backslashreplace"), np.uint8)

    def values(self) -> np.ndarray:
        k = len(self.names)
        columns, failures = [], []
        for j in range(k):
            x, failure = self._column_values(j)
            columns.append(x)
            if failure is not None:
                failures.append((failure[0] * k + j, failure[1]))
        if failures:  # the first bad value in file order, as for CSV
            i, reason = min(failures)
            if reason is None:
                name = self.names[i % k]
                raise ValueError(f"{self.where(i)}: column {name!r} is null (a missing value)")
            raise _fail_value(self, i, reason)
        return columns[0] if k == 1 else np.column_stack(columns).ravel()

    def _column_values(self, j: int) -> tuple[np.ndarray | None, tuple[int, str | None] | None]:
        """Column ``j`` as int64, or its first bad row and why (reason ``None``: a null)."""
        import pyarrow as pa

        col = self.record_batch.column(self.positions[j])
        if isinstance(col, pa.ChunkedArray):  # pragma: no cover - record batches hold arrays
            col = col.combine_chunks()
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        t = col.type
        if pa.types.is_floating(t) or pa.types.is_decimal(t):
            i = int(np.argmax(np.asarray(col.is_valid()))) if col.null_count < len(col) else 0
            return None, (i, f"is not an integer (the column has type {t}; integer or string columns only)")
        if col.null_count:
            return None, (int(np.argmax(np.asarray(col.is_null()))), None)
        if pa.types.is_integer(t):
            x = col.to_numpy(zero_copy_only=False)
            if x.dtype.itemsize == 8:
                too_big = (x >= _INT_LIMIT) | (x <= -_INT_LIMIT)
                if too_big.any():
                    return None, (int(np.argmax(too_big)), "is outside the supported integer range (|x| < 10**18)")
            return x.astype(np.int64, copy=False), None
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
                or pa.types.is_large_binary(t):
            _, offsets_buf, data_buf = col.buffers()
            off_type = np.int64 if (pa.types.is_large_string(t) or pa.types.is_large_binary(t)) else np.int32
            width = np.dtype(off_type).itemsize
            offsets = np.frombuffer(offsets_buf, dtype=off_type, count=len(col) + 1,
                                    offset=width * col.offset).astype(np.int64)
            data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
            values, bad = _parse_ints(data, offsets[:-1], offsets[1:])
            if bad.any():
                i = int(np.argmax(bad))
                return None, (i, _describe_bad(data[offsets[i] : offsets[i + 1]]))
            return values, None
        raise ValueError(f"column {self.names[j]!r} has type {t}; privatize and estimate need an integer "
                         "column (or strings holding integers)")


def _open_parquet(src: _Source):
    import pyarrow as pa
    import pyarrow.parquet as pq

    src.require_seekable()
    try:
        return pq.ParquetFile(src.path)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"cannot read {src.label} as Parquet: {_arrow_message(exc)}") from None


def _arrow_message(exc) -> str:
    return " ".join(str(getattr(exc, "strerror", None) or exc).split())


def _parquet_targets(pf, label: str, columns: tuple[str, ...]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The target columns' schema positions (increasing) and their names in that order."""
    names = pf.schema_arrow.names
    index = [_find_column(label, names, c) for c in columns]
    order = sorted(range(len(columns)), key=index.__getitem__)
    return tuple(index[j] for j in order), tuple(columns[j] for j in order)


def _iter_parquet(pf, label: str, columns: tuple[str, ...], batch_size: int,
                  project: bool) -> Iterator[_ParquetBatch]:
    """Batches of the file; ``project``: read only the target columns (reading), else all (writing)."""
    import pyarrow as pa

    index, names = _parquet_targets(pf, label, columns)
    read = list(names) if project else None
    positions = tuple(range(len(names))) if project else index
    total = pf.metadata.num_rows
    row = 1
    try:
        for rb in pf.iter_batches(batch_size=batch_size, columns=read, use_threads=True):
            done = min((row - 1 + rb.num_rows) / total, 1.0) if total else 1.0
            yield _ParquetBatch(rb, positions, names, row, done)
            row += rb.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"cannot read {label} as Parquet: {_arrow_message(exc)}") from None


# ---------------------------------------------------------------------------
# Reading: iter_column, column_counts
# ---------------------------------------------------------------------------


def _check_bounds(bounds) -> tuple[int, int] | None:
    if bounds is None:
        return None
    if not (isinstance(bounds, (tuple, list)) and len(bounds) == 2):
        raise TypeError(f"bounds must be None or a pair (lo, hi) of integers with lo <= hi; got {bounds!r}")
    lo = check_int(bounds[0], "bounds lo")
    hi = check_int(bounds[1], "bounds hi", minimum=lo)
    if hi - lo + 1 > _MAX_BOUNDS_SPAN:
        raise ValueError(f"bounds must span at most 2^26 = {_MAX_BOUNDS_SPAN} integers (one count each); "
                         f"got ({lo}, {hi}), {hi - lo + 1} integers")
    return lo, hi


def _batches(path, column, *, batch_size, format) -> Iterator[_Batch]:
    if not _is_stdio(path):
        _check_path(path, "path")
    column = _check_column(column)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    with _open_input(path) as src:
        fmt = detect_format(path, format)
        if fmt == "parquet":
            pf = _open_parquet(src)
            yield from _iter_parquet(pf, src.label, (column,), batch_size, project=True)
        else:
            yield from _iter_csv(src, (column,), batch_size, fmt)


def _bounds_message(bounds: tuple[int, int], reason: str | None) -> str:
    text = f"is outside the allowed range [{bounds[0]}, {bounds[1]}]"
    return text if reason is None else f"{text} ({reason})"


def iter_column(path, column: str, *, batch_size: int = DEFAULT_BATCH_SIZE, format: str | None = None,
                bounds=None, bounds_reason: str | None = None) -> Iterator[np.ndarray]:
    """Stream the integer column ``column`` of a CSV or Parquet file as ``int64`` batches.

    Parameters
    ----------
    path : str or os.PathLike, or ``"-"``
        The file, or ``"-"`` for CSV/TSV on standard input (a FIFO or device
        path works too).  Its format comes from ``format`` or the extension
        (module docstring); ``"-"`` defaults to CSV.
    column : str
        Column name (exact match; it must occur once in the header).
    batch_size : int, >= 1
        Rows per yielded array (the last may be shorter).
    format : {"csv", "tsv", "parquet"} or None
    bounds : (lo, hi) or None
        If given, a value outside ``lo..hi`` is an error naming its row.
    bounds_reason : str or None
        Why the range is what it is, appended in parentheses to that error:
        ``value '74' is outside the allowed range [-73, 73] (the domain -70..70
        widened by the mechanism's radius t = 3: every report it can produce)``.

    Yields
    ------
    numpy.ndarray of int64
        Consecutive batches in row order.  In a CSV of several columns blank
        lines are not rows and are skipped; in a CSV of one column a blank line
        is an empty value, an error (module docstring).

    Raises
    ------
    ValueError
        A field that is not an integer (see the module docstring), a value
        outside ``bounds``, a missing column, an unreadable or malformed file,
        a record over :data:`MAX_RECORD_BYTES`; value errors name the 1-based
        data row and the value.
    """
    bounds = _check_bounds(bounds)
    bounds_reason = _check_bounds_reason(bounds_reason)
    for batch in _batches(path, column, batch_size=batch_size, format=format):
        x = batch.values()
        if bounds is not None and x.size:
            bad = (x < bounds[0]) | (x > bounds[1])
            if bad.any():
                raise _fail_value(batch, int(np.argmax(bad)), _bounds_message(bounds, bounds_reason))
        yield x


def column_counts(path, column: str, *, bounds=None, batch_size: int = DEFAULT_BATCH_SIZE,
                  format: str | None = None, bounds_reason: str | None = None) -> tuple[int, np.ndarray]:
    """Histogram of an integer column in one streamed pass: ``(offset, counts)``.

    ``counts[j]`` is the number of rows whose value is ``offset + j``.  With
    ``bounds = (lo, hi)`` the result has ``offset = lo`` and length
    ``hi - lo + 1`` and a value outside is an error naming its row (and
    ``bounds_reason``, see :func:`iter_column`); without, ``offset`` is the
    smallest value seen and the array ends at the largest (values spanning more
    than ``10**7`` integers are refused: pass ``bounds``).  An empty column
    gives ``(lo, zeros)`` with bounds, ``(0, empty)`` without.  ``path`` may be
    ``"-"`` (CSV on standard input); blank lines are treated as by
    :func:`iter_column`.

    Each batch costs one ``np.bincount``; nothing is done per row in Python,
    so ``10**8`` reports take one pass over the file.
    """
    bounds = _check_bounds(bounds)
    bounds_reason = _check_bounds_reason(bounds_reason)
    if bounds is not None:
        offset = bounds[0]
        counts = np.zeros(bounds[1] - bounds[0] + 1, np.int64)
        for x in iter_column(path, column, batch_size=batch_size, format=format, bounds=bounds,
                             bounds_reason=bounds_reason):
            if x.size:
                counts += np.bincount(x - offset, minlength=counts.size)
        return offset, counts
    offset: int | None = None
    counts = np.zeros(0, np.int64)
    for batch in _batches(path, column, batch_size=batch_size, format=format):
        x = batch.values()
        if x.size == 0:
            continue
        lo, hi = int(x.min()), int(x.max())
        if offset is None:
            offset = lo
        new_lo, new_hi = min(offset, lo), max(offset + counts.size - 1, hi)
        if new_hi - new_lo + 1 > _MAX_SPAN:
            i = int(np.argmax((x == lo) if lo < offset else (x == hi)))
            raise _fail_value(batch, i,
                              f"makes the column span [{new_lo}, {new_hi}], more than {_MAX_SPAN} integers; "
                              "pass bounds=(lo, hi) to say which values are valid")
        if new_lo < offset or new_hi >= offset + counts.size:
            grown = np.zeros(new_hi - new_lo + 1, np.int64)
            grown[offset - new_lo : offset - new_lo + counts.size] = counts
            counts, offset = grown, new_lo
        counts += np.bincount(x - offset, minlength=counts.size)
    return (0 if offset is None else offset), counts


# ---------------------------------------------------------------------------
# Writing: privatize_file
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PrivatizeResult:
    """What :func:`privatize_file` did.

    ``rows`` data rows were privatized (each in every one of ``columns``, in
    the order given; ``column`` is ``columns[0]``) in ``seconds``.  ``input``
    and ``output`` are Paths, or ``"-"`` for standard input / output.
    ``blank_lines`` counts the blank lines copied through: those before the
    header and, in a CSV of several columns, any (not rows; always 0 for
    Parquet).  ``seeded``: a seed was given (simulation, not for production).
    """

    rows: int
    seconds: float
    input: Path | str
    output: Path | str
    column: str
    format: str
    seeded: bool
    columns: tuple[str, ...]
    blank_lines: int


def _check_output(src: _Source, output: Path, fmt: str) -> None:
    check_output_path(output, "output")
    same = False
    if src.path is not None:
        same = os.path.abspath(output) == os.path.abspath(src.path) or \
            os.path.realpath(output) == os.path.realpath(src.path)
        if not same and output.exists():
            try:
                same = os.path.samefile(output, src.path)
            except OSError:  # pragma: no cover
                pass
    if same:
        raise ValueError(f"output {str(output)!r} is the input file; write the privatized copy elsewhere")
    out_ext = _EXTENSIONS.get(output.suffix.lower())
    if out_ext is not None and out_ext != fmt:
        raise ValueError(f"output {str(output)!r} looks like {out_ext} but the input is {fmt}; "
                         "privatize keeps the input's format (no conversion)")


def _stdout_for(src: _Source):
    """``sys.stdout.buffer``, refusing the case where it is the input file itself (``>> input.csv``)."""
    out = getattr(sys.stdout, "buffer", None)
    if out is None:
        raise ValueError("cannot write output '-': standard output is not available")
    if src.path is not None:
        try:
            same = os.path.samestat(os.fstat(out.fileno()), os.fstat(src.fh.fileno()))
        except (OSError, AttributeError, ValueError):  # no file descriptor (a test's BytesIO)
            same = False
        if same:
            raise ValueError(f"standard output is the input file {str(src.path)!r}; "
                             "write the privatized copy elsewhere")
    return out


def _sample(target: _Target, x: np.ndarray, rng) -> np.ndarray:
    method = getattr(target.sampler, "sample", None)
    if method is None:  # a library object without the method: the sampling module knows how
        from .sampling import sample

        y = np.asarray(sample(target.sampler, x, rng=rng))
    else:
        y = np.asarray(method(x, rng=rng))
    if y.shape != x.shape or not np.issubdtype(y.dtype, np.integer):
        raise TypeError(f"mechanism.sample returned {y.dtype} of shape {y.shape}; expected integers of "
                        f"shape {x.shape}")
    return y.astype(np.int64, copy=False)


def _validated(batch: _Batch, target: _Target) -> np.ndarray:
    x = batch.values()
    bad = target.check(x) if x.size else None
    if bad is not None:
        raise _fail_value(batch, int(np.argmax(bad)), f"is outside {target.description}")
    return x


def privatize_file(input, output, *, mechanism, columns: str | Sequence[str] | None = None,
                   column: str | None = None, rng=None, batch_size: int = DEFAULT_BATCH_SIZE,
                   progress: ProgressCallback | None = None, format: str | None = None) -> PrivatizeResult:
    r"""Privatize integer columns of a CSV or Parquet file, streaming, into a new file.

    Each row's value ``x`` in each of ``columns`` is replaced by one report
    ``Y ~ M(. | x)`` of the mechanism (for the sparse families
    ``|Y - x| <= t``, Definitions 6 and 13), an independent draw per row and
    per column; every other column, the header and the row order are kept (for
    CSV byte for byte, module docstring).  Each column gets the mechanism's
    guarantee; the reports of one person in ``k`` columns together are
    protected as ``k`` compositions of it.

    Parameters
    ----------
    input : str or os.PathLike, or ``"-"``
        The source; ``"-"`` reads CSV/TSV from standard input (a FIFO or a
        device path is read the same way).  Parquet needs a regular file.
    output : str or os.PathLike, or ``"-"``
        The destination, distinct from ``input``.  A file is created
        atomically (a temporary file ``.<name>.sparseldp-<pid>-<random>.tmp``
        in its directory, fsynced, then :func:`os.replace`; mode ``0o666``
        less the umask) and never exists partially: on any error, including
        ``KeyboardInterrupt``, nothing is left behind and a pre-existing
        ``output`` is untouched; stale temporary files of killed runs are
        removed first.  ``"-"`` writes CSV/TSV to standard output batch by
        batch: there is no temporary file, and on an error the rows written so
        far are already out (the raised exception, the CLI's exit status, says
        the output is incomplete).
    mechanism : Spec, path to a spec (JSON), or a mechanism object
        A :class:`sparseldp.spec.Spec` samples from ``Spec.sampler_target()``
        and checks inputs against ``Spec.domain`` (``None``: any integer);
        an object with ``.sample(x, rng=...)`` is used as is, and its
        ``.inputs`` (finite-domain channels) are the allowed values.
    columns : str or sequence of str
        The column(s) to privatize, each named once; all are privatized in one
        pass.
    column : str
        Alias of ``columns`` for one column; give exactly one of the two.
    rng : None, int, SeedSequence, BitGenerator, Generator or BitSource
        ``None`` (default): the operating system's secure source.  Anything
        else is reproducible simulation for a fixed input, seed, column list
        and ``batch_size``; **not for production**.
    batch_size : int, >= 1
        Rows sampled (and, for Parquet, written as a row group) at a time.
        Memory is ``O(batch_size)``; for CSV a batch is also cut at the end of
        a 1 MiB read block, so memory is bounded for any ``batch_size``.
    progress : callable(rows_done, fraction_done) or None
        Called after every batch; ``fraction_done`` is the share of the input
        consumed (bytes for CSV, rows for Parquet), ``None`` when the input's
        size is unknown (standard input, a FIFO).  An exception it raises
        aborts the run like any other (no output file).
    format : {"csv", "tsv", "parquet"} or None
        Input format; ``None`` infers it from the extension (``"-"``: CSV).
        The output has the same format.

    Returns
    -------
    PrivatizeResult

    Raises
    ------
    ValueError
        A value that is not an integer or is outside the mechanism's domain
        (naming the 1-based data row, the column and the value), a missing or
        repeated column, an unreadable or malformed input, a CSV record over
        :data:`MAX_RECORD_BYTES` or a header over :data:`MAX_HEADER_BYTES`,
        Parquet on standard input or output, a bad spec, ``output`` equal to
        ``input``, or an unwritable output.
    TypeError
        Arguments of the wrong type, or both or neither of ``columns`` and
        ``column``.
    """
    t0 = time.perf_counter()
    names = _check_columns(column, columns)
    in_stdio, out_stdio = _is_stdio(input), _is_stdio(output)
    input_path = STDIO if in_stdio else _check_path(input, "input")
    output_path = STDIO if out_stdio else _check_path(output, "output")
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be None or a callable(rows_done, fraction_done); got {progress!r}")
    tally = _Tally()
    with _open_input(input) as src:
        fmt = detect_format(input, format)
        if fmt == "parquet":
            src.require_seekable()
            if out_stdio:
                raise ValueError("Parquet cannot be written to standard output (a reader needs the whole, "
                                 "seekable file); pass -o FILE")
        # Normalized once so that a seed gives one continuous stream across batches
        # (re-seeding every batch would repeat the same noise).
        rng = as_bit_source(rng)
        seeded = not rng.secure
        target = _resolve_mechanism(mechanism)

        def write(fh) -> int:
            if fmt == "parquet":
                return _privatize_parquet(src, fh, target, names, rng, batch_size, progress)
            return _privatize_csv(src, fh, target, names, rng, batch_size, progress, fmt, tally)

        if out_stdio:  # no temporary file: on an error the rows written so far are out
            out = _stdout_for(src)
            try:
                rows = write(out)
                out.flush()
            except OSError as exc:
                raise ValueError(f"cannot write output '-' (standard output): {exc.strerror or exc}") from None
            finally:
                with contextlib.suppress(OSError, ValueError):  # a closed or broken pipe: already reported
                    out.flush()
        else:
            _check_output(src, output_path, fmt)
            rows = _write_atomically(output_path, write)
    return PrivatizeResult(rows=rows, seconds=time.perf_counter() - t0, input=input_path, output=output_path,
                           column=names[0], format=fmt, seeded=seeded, columns=names,
                           blank_lines=tally.blank_lines)


def _write_atomically(path: Path, write: Callable) -> int:
    """``write(fh)`` into a temporary file beside ``path``, fsync, rename; the temporary never survives."""
    try:
        fd, tmp = open_temp(path)  # mode 0o666 less the umask; stale temporaries of dead runs removed
    except ValueError as exc:  # "cannot write 'x': ..." -> the wording of every other output error here
        raise ValueError(str(exc).replace("cannot write ", "cannot write output ", 1)) from None
    try:
        try:
            fh = os.fdopen(fd, "wb")
        except BaseException:  # pragma: no cover - fdopen of a fresh fd fails only on memory errors
            os.close(fd)
            raise
        with fh:
            result = write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise ValueError(f"cannot write output {str(path)!r}: {exc.strerror or exc}") from None
    finally:  # every exit, KeyboardInterrupt and SystemExit included
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return result


def _privatize_csv(src: _Source, fh, target: _Target, columns: tuple[str, ...], rng, batch_size: int, progress,
                   fmt: str, tally: _Tally) -> int:
    rows = 0
    for batch in _iter_csv(src, columns, batch_size, fmt, tally):
        if not batch.size:
            fh.write(memoryview(batch.data))
        else:
            y = _sample(target, _validated(batch, target), rng)
            if batch.data.size >= _SPLICE_BYTES_PER_FIELD * y.size:
                batch.write_replaced(fh, y)
            else:
                fh.write(batch.replaced(y))
        rows += batch.size
        if progress is not None:
            progress(rows, batch.done)
    return rows


def _privatize_parquet(src: _Source, fh, target: _Target, columns: tuple[str, ...], rng, batch_size: int,
                       progress) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = _open_parquet(src)
    index, _ = _parquet_targets(pf, src.label, columns)
    out_schema = pf.schema_arrow
    for i in index:
        old = out_schema.field(i)
        out_schema = out_schema.set(i, pa.field(old.name, pa.int64(), nullable=old.nullable, metadata=old.metadata))
    compression = "snappy"
    if pf.metadata.num_row_groups and pf.metadata.num_columns:
        compression = pf.metadata.row_group(0).column(0).compression.lower()
        if compression == "uncompressed":
            compression = "none"
    k = len(index)
    rows = 0
    writer = pq.ParquetWriter(fh, out_schema, compression=compression)
    try:
        for batch in _iter_parquet(pf, src.label, columns, batch_size, project=False):
            if batch.size:
                x = _validated(batch, target)
                y = _sample(target, x, rng).reshape(batch.size, k)
                rb = batch.record_batch
                for j, i in enumerate(index):
                    rb = rb.set_column(i, out_schema.field(i), pa.array(np.ascontiguousarray(y[:, j]),
                                                                        type=pa.int64()))
                writer.write_batch(rb)
            rows += batch.size
            if progress is not None:
                progress(rows, batch.done)
    finally:
        writer.close()
    return rows
