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
    Parquet needs a seekable file and is refused on either stream.  Output
    for standard output is held in an anonymous temporary file in the
    system's temporary directory (:func:`tempfile.gettempdir`, so ``TMPDIR``
    needs room for the privatized copy) and copied to standard output only
    after the whole input succeeded: on an error, ``KeyboardInterrupt``
    included, nothing is written to standard output and the temporary file
    is removed.  The input may also be a FIFO or a character device; it is
    read like standard input (progress fractions are then ``None``: the size
    is unknown).  As an *output*, a FIFO, a device, a socket or a directory
    is refused before any work (the atomic rename would replace it by a
    regular file; use ``"-"`` for standard output), and a symbolic link is
    followed: its final target is the file replaced, and the link stays.

Formats
    ``format`` is ``"csv"``, ``"tsv"`` or ``"parquet"``; ``None`` infers it
    from the extension (``.csv``, ``.tsv``, ``.parquet``, ``.pq``).  CSV is
    RFC 4180: ``,`` separates fields (tab for TSV), a field may be enclosed in
    ``"`` with ``""`` for a literal quote and may then contain separators and
    line breaks; records end with LF or CRLF; the first non-blank record is the
    header.  The parser is vectorized numpy on byte blocks: a line break or
    separator is structural iff an even number of quotes precedes it in the
    block (blocks always start at a record boundary, where the count is even).
    Quoting is strict: a quote that does not enclose a whole field (``5 ft
    10"`` unquoted, text after a closing quote) is refused with its line
    number, since counting it would merge rows and carry a target value
    through as text; so is a header line with a bare CR (CR-only line
    breaks).  Everything Python's :mod:`csv` module writes is accepted.

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
(row, then column position) is reported.  A message names the row, the line,
the column and what is wrong, never the value itself: it is a raw input, and
messages end up in logs and terminals.

Randomness: ``rng=None`` (the default) draws from the operating system's
secure source (:class:`sparseldp._rng.SystemBitSource`).  An ``int``,
``SeedSequence``, ``BitGenerator`` or ``Generator`` is normalized once, with
:func:`sparseldp._rng.as_bit_source`, into one stream shared by all batches and
columns: reproducible simulation for a fixed input, seed, column list and
``batch_size``, **not for production** (anyone with the seed can recompute the
noise and undo the privatization).

Row order: kept, so the other columns stay aligned; a file ordered (sorted or
grouped) by a privatized column is refused unless ``keep_order=True``, since
averaging neighbouring reports would recover the raw values
(:mod:`sparseldp.io.order`).

Layout (imports inside the package point down this list)
    ``sources``: formats, paths, standard input and FIFOs, argument checks;
    ``batch``: what counts as an integer (vectorized), the batch interface;
    ``target``: the mechanism, what it samples and which inputs it accepts;
    ``csvio`` and ``parquet``: the two formats, read and rewritten;
    ``output``: the privatized copy, an atomic file (:mod:`sparseldp._files`)
    or standard output;
    ``order``: the check that refuses a file ordered by a privatized column
    (its row order would give the raw values away);
    ``pipeline``: the public functions.
    pyarrow (the ``cli`` extra) is imported inside functions only, so that
    this package, like the core, imports with numpy and scipy alone.
"""

from __future__ import annotations


# The public names, plus the private ones tests/test_io.py reads from sparseldp.io.
from . import csvio
from .batch import _parse_ints  # noqa: F401
from .csvio import _BLOCK_BYTES, _SPLICE_BYTES_PER_FIELD, MAX_HEADER_BYTES, MAX_RECORD_BYTES  # noqa: F401 (read-only re-exports: tests patch them in csvio)
from .pipeline import PrivatizeResult, ProgressCallback, column_counts, iter_column, privatize_file  # noqa: F401
from .sources import DEFAULT_BATCH_SIZE, STDIO, _plural, _size_text, detect_format  # noqa: F401

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

