"""Where the input comes from: formats, paths, standard input and FIFOs, argument checks.

Part of :mod:`sparseldp.io`, whose docstring states the rules (formats,
standard input and output).  Everything here is format-agnostic: it opens
one binary stream (:class:`_Source`) and checks the arguments the readers and
the writer share.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Rows per batch (samplers, bincount and Parquet row groups work on this many at a time).
DEFAULT_BATCH_SIZE = 1 << 18
#: The path that means standard input (as an input) or standard output (as an output).
STDIO = "-"

_EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet"}
_FORMATS = ("csv", "tsv", "parquet")
_STDIN_LABEL = "'-' (standard input)"


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
            "use .csv, .tsv, .parquet or .pq, or pass format= (the CLI's --format): csv, tsv or parquet"
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
