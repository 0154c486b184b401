"""The public entry points: :func:`privatize_file`, :func:`iter_column`, :func:`column_counts`.

Part of :mod:`sparseldp.io`, whose docstring states what they do; this
module checks the arguments, opens the input, picks the format's reader or
writer and, for :func:`privatize_file`, the output path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._files import check_output_path
from .._rng import as_bit_source
from .._validation import check_bool, check_int
from .batch import _Batch, _fail_value
from .csvio import _iter_csv, _privatize_csv, _Tally
from .order import _OrderCheck, check_order
from .output import _check_output, _stdout_for, _write_atomically, _write_stdout
from .parquet import _iter_parquet, _open_parquet, _privatize_parquet
from .sources import (
    DEFAULT_BATCH_SIZE,
    STDIO,
    _check_column,
    _check_columns,
    _check_path,
    _is_stdio,
    _open_input,
    detect_format,
)
from .target import _resolve_mechanism

#: Widest span of values :func:`column_counts` accepts without ``bounds``.
_MAX_SPAN = 10**7
#: Widest ``bounds`` accepted (the histogram holds one int64 per value: 512 MiB).
_MAX_BOUNDS_SPAN = 1 << 26

ProgressCallback = Callable[[int, float | None], None]


# ---------------------------------------------------------------------------
# Reading: iter_column, column_counts
# ---------------------------------------------------------------------------


def _check_bounds_reason(reason) -> str | None:
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"bounds_reason must be None or a string; got {type(reason).__name__} {reason!r}")
    return reason or None


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
                              f"would make the column span more than {_MAX_SPAN} integers; pass bounds=(lo, hi) "
                              "to say which values are valid")
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
    ``kept_columns``: the file's other columns, in file order, copied unchanged
    (not privatized: whatever they hold is published as it is).  ``kept_metadata``:
    the keys of a Parquet file's schema-level metadata and, as ``"column 'id': key"``,
    of the kept columns' own field metadata, copied too (the privatized columns'
    own metadata is not; io docstring).
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
    kept_columns: tuple[str, ...] = ()
    kept_metadata: tuple[str, ...] = ()


def privatize_file(input, output, *, mechanism, columns: str | Sequence[str] | None = None,
                   column: str | None = None, rng=None, batch_size: int = DEFAULT_BATCH_SIZE,
                   progress: ProgressCallback | None = None, format: str | None = None,
                   keep_order: bool = False) -> PrivatizeResult:
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
        removed first.  An existing directory, device, FIFO or socket is
        refused before anything is read; a symbolic link is followed and its
        final target replaced (the link stays).  ``"-"`` writes CSV/TSV to
        standard output: the rows are held in an anonymous temporary file in
        the system's temporary directory and copied to standard output only
        after the whole input succeeded, so on an error nothing is written
        there (the temporary file is removed in every case).
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
    keep_order : bool
        The row order is kept in any case.  ``False`` (default): refuse
        (``ValueError``, no output) a file ordered by a privatized column, whose
        row order would reveal the raw values to anyone averaging neighbouring
        reports (lag-1 autocorrelation of the raw values at least
        :data:`sparseldp.io.order.ORDER_R`, :mod:`sparseldp.io.order`).
        ``True``: accept it (the order is public anyway).

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
        ``input``, an ``output`` that is a directory, device, FIFO or socket,
        or an unwritable output.
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
    if not out_stdio:
        check_output_path(output_path, "output")  # a directory, device, FIFO or socket: before opening the input
    keep_order = check_bool(keep_order, "keep_order")
    tally = _Tally(order=None if keep_order else _OrderCheck())
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
                rows = _privatize_parquet(src, fh, target, names, rng, batch_size, progress, tally)
            else:
                rows = _privatize_csv(src, fh, target, names, rng, batch_size, progress, fmt, tally)
            if tally.order is not None:
                check_order(tally.order)  # raised here, the output is not put in place
            return rows

        if out_stdio:  # buffered in a temporary file, copied out only after the last row succeeded
            rows = _write_stdout(_stdout_for(src), write)
        else:
            rows = _write_atomically(output_path, _check_output(src, output_path, fmt), write)
    return PrivatizeResult(rows=rows, seconds=time.perf_counter() - t0, input=input_path, output=output_path,
                           column=names[0], format=fmt, seeded=seeded, columns=names,
                           blank_lines=tally.blank_lines,
                           kept_columns=tuple(c for c in tally.names if c not in names),
                           kept_metadata=tally.metadata_keys)
