"""CSV and TSV: the vectorized parser, its batches, and the rewrite that replaces target fields.

Part of :mod:`sparseldp.io` (its docstring: "Formats", "Blank lines",
"Limits").  The name avoids shadowing the standard library's :mod:`csv`
(not used: the parser is numpy on byte blocks, with no field-size limit).
:func:`_iter_csv` cuts the input into :class:`_CsvBatch` es whose bytes tile
it; :func:`_privatize_csv` writes each batch back with its target fields
replaced by reports and every other byte untouched.

pyarrow (an optional dependency, the ``cli`` extra) is imported inside
:meth:`_CsvBatch.replaced` only, so that the core imports with numpy and
scipy alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .batch import _QUOTE, _Batch, _describe_bad, _fail_value, _find_column, _parse_ints, _preview
from .sources import _plural, _size_text, _Source
from .target import _sample, _Target, _validated

#: Longest CSV record accepted, in bytes (without its line break).  Bounds the
#: memory a single record can take (a few times this) and stops a stream with
#: no record end (``/dev/zero``, an unterminated quote) early.
MAX_RECORD_BYTES = 64 << 20
#: Longest CSV header line accepted, in bytes (without its line break).
MAX_HEADER_BYTES = 1 << 20
#: Bytes read from a CSV per block; a batch never spans more than one block
#: unless a single record is larger.
#: Measured on a 3,000,000-row CSV: 1 MiB is as fast as 8 MiB and needs ~45 MB of
#: working memory instead of ~150 MB (temporaries are ~40 bytes per input byte).
_BLOCK_BYTES = 1 << 20
#: Batches with at least this many bytes per target field (long records) are written
#: slice by slice (:meth:`_CsvBatch.write_replaced`) instead of spliced in memory:
#: the loop is short there, and a 64 MiB record then needs no rewritten copy.
_SPLICE_BYTES_PER_FIELD = 4096

_DELIMITER = {"csv": ord(","), "tsv": ord("\t")}
_LF, _CR = ord("\n"), ord("\r")
_BOM = b"\xef\xbb\xbf"
_NONE = np.empty(0, np.int64)


@dataclass
class _Tally:
    """What a pass reports besides its batches: blank lines skipped (CSV), every column of the file."""

    blank_lines: int = 0
    names: tuple[str, ...] = ()
    metadata_keys: tuple[str, ...] = ()  # Parquet: the schema-level metadata copied to the output
    order: object = None  # an order._OrderCheck fed the raw values of the privatized columns, or None


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


def _scan(buf: np.ndarray, delim: int) -> tuple[np.ndarray, np.ndarray, bool, np.ndarray]:
    """Structural separators of ``buf`` (which starts at a record boundary).

    Returns ``(seps, lf_at, open_quote, quotes)``: the sorted positions of separators
    and LFs outside quotes, the indices into ``seps`` of the LFs, whether
    ``buf`` ends inside a quoted field, and the positions of the quotes (for
    :func:`_check_quotes`).  Masks are built in place: about three
    bytes of temporaries per input byte plus 8 per separator.
    """
    is_sep = buf == delim
    is_sep |= buf == _LF
    inside = buf == _QUOTE
    open_quote = False
    quotes = _NONE
    if inside.any():
        quotes = np.flatnonzero(inside)
        np.logical_xor.accumulate(inside, out=inside)  # True after an odd number of quotes
        open_quote = bool(inside[-1])
        np.logical_not(inside, out=inside)
        is_sep &= inside
    del inside
    seps = np.flatnonzero(is_sep)
    del is_sep
    lf_at = np.flatnonzero(buf[seps] == _LF)
    return seps, lf_at, open_quote, quotes


def _check_quotes(label: str, chunk: np.ndarray, q: np.ndarray, delim: int, line: int) -> None:
    """Refuse a quote that does not enclose a whole field (RFC 4180).

    The structural scan (:func:`_scan`) counts quotes: a quote inside an
    unquoted field (``5 ft 10"``) would open a quoted section that runs on to
    the next quote, across separators and line breaks, merging rows, and a
    target value inside such a section would be copied through as text, not
    privatized.  So a quote that opens (an even number before it) must start
    a field (after a separator, a line break, or the closing quote of a
    ``""`` pair), and one that closes must end it (before a separator, a
    line break, CRLF, the end of the input, or the second quote of a pair).
    ``chunk`` starts at a record boundary and ends at one, ``q`` are the
    positions of its quotes (from :func:`_scan`); ``line`` is its first line.
    The message names the line, never the field's text.  Cost: a few passes
    over the quotes, none over the bytes."""
    if q.size == 0:
        return
    size = chunk.size
    opening, closing = q[0::2], q[1::2]
    before = chunk[np.maximum(opening - 1, 0)]
    ok_open = (opening == 0) | (before == delim) | (before == _LF)
    # the second quote of a "" pair: the quote before it (the previous closing one) is right before it
    ok_open[1:] |= closing[: opening.size - 1] == opening[1:] - 1
    nxt = closing + 1
    after = chunk[np.minimum(nxt, size - 1)]
    after2 = chunk[np.minimum(nxt + 1, size - 1)]
    ok_close = ((nxt >= size) | (after == delim) | (after == _LF) | (after == _QUOTE)
                | ((after == _CR) & ((nxt + 1 >= size) | (after2 == _LF))))
    bad = np.concatenate([opening[~ok_open], closing[~ok_close]])
    if bad.size:
        at = int(bad.min())
        raise ValueError(
            f"malformed CSV {label}: a stray quote on line {line + int(np.count_nonzero(chunk[:at] == _LF))} "
            "(a quote may only enclose a whole field, with \"\" for a quote inside it: RFC 4180); quote that "
            "field, or remove the quote")


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
        seps, lf_at, open_quote, quotes = _scan(buf, delim)
        if not eof and lf_at.size == 0:  # one record longer than the buffer: read on, scanning only new bytes
            ncols = None if header is None else len(header.names)
            buf, eof = _read_long_record(src, buf, open_quote, int(seps.size), delim,
                                         None if ncols is None else ncols - 1, header is None, line, row)
            seps, lf_at, open_quote, quotes = _scan(buf, delim)
        if eof and open_quote:
            _check_quotes(src.label, buf, quotes, delim, line)  # a stray quote is the likelier cause: name it
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
        _check_quotes(src.label, chunk, quotes[: np.searchsorted(quotes, cut)], delim, line)
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
                tally.names = header.names
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
    if any(b"\r" in part for part in raw.split(b'"')[0::2]):  # the parts outside quotes
        # records end with LF or CRLF: a file with CR-only line breaks (classic Mac OS) reads as one header
        # line holding every record, and its values would be copied through as column names
        raise ValueError(f"cannot read {label} as {fmt.upper()}: the header line contains a carriage return "
                         "outside quotes (CR-only line breaks?); records must end with LF or CRLF")
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


def _privatize_csv(src: _Source, fh, target: _Target, columns: tuple[str, ...], rng, batch_size: int, progress,
                   fmt: str, tally: _Tally) -> int:
    rows = 0
    for batch in _iter_csv(src, columns, batch_size, fmt, tally):
        if not batch.size:
            fh.write(memoryview(batch.data))
        else:
            x = _validated(batch, target)
            if tally.order is not None:
                tally.order.observe(x, batch.names)
            y = _sample(target, x, rng)
            if batch.data.size >= _SPLICE_BYTES_PER_FIELD * y.size:
                batch.write_replaced(fh, y)
            else:
                fh.write(batch.replaced(y))
        rows += batch.size
        if progress is not None:
            progress(rows, batch.done)
    return rows
