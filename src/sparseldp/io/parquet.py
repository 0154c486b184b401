"""Parquet: batches of a file's row groups, reading integer columns and writing a privatized copy.

Part of :mod:`sparseldp.io`.  Parquet keeps its schema at the end of the
file, so it is read from a seekable file only (never standard input or
output).  pyarrow is an optional dependency (the ``cli`` extra): it is
imported inside the functions that need it, so that the core imports with
numpy and scipy alone.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .batch import _INT_LIMIT, _Batch, _describe_bad, _fail_value, _find_column, _parse_ints
from .sources import _Source
from .target import _sample, _Target, _validated


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


# The key under which Spark keeps its own copy of a Parquet file's schema (with each field's metadata).
_SPARK_ROW = b"org.apache.spark.sql.parquet.row.metadata"


def _without_target_metadata(schema, targets: set):
    """``schema`` with the pandas (and Spark) metadata of the privatized columns ``targets`` reset.

    The schema-level metadata is copied (it describes the table), except that pandas' entry of a
    privatized column (``b"pandas"``: ``columns[j]["metadata"]``, e.g. a categorical's number of
    categories, a statistic of the raw values) is set to null and its types to the output's
    ``int64``; likewise Spark's field entry (``b"org.apache.spark.sql.parquet.row.metadata"``:
    ``fields[j]["metadata"]`` emptied, its type ``long``).  Metadata in neither layout is copied as it is.
    """
    import json

    meta = schema.metadata
    if not meta:
        return schema
    new = dict(meta)
    try:
        if b"pandas" in meta:
            pandas = json.loads(meta[b"pandas"])
            for entry in pandas["columns"]:
                if entry.get("field_name", entry.get("name")) in targets:
                    entry["metadata"] = None
                    if entry.get("pandas_type") != "int64":  # e.g. a categorical or string column, now int64
                        entry["pandas_type"], entry["numpy_type"] = "int64", "int64"
            new[b"pandas"] = json.dumps(pandas).encode("utf-8")
    except (ValueError, TypeError, KeyError, AttributeError):
        pass  # not the pandas layout: left as it is
    try:  # Spark's copy of the schema, with each field's own metadata
        if _SPARK_ROW in meta:
            row = json.loads(meta[_SPARK_ROW])
            for entry in row["fields"]:
                if entry.get("name") in targets:
                    entry["metadata"], entry["type"] = {}, "long"
            new[_SPARK_ROW] = json.dumps(row).encode("utf-8")
    except (ValueError, TypeError, KeyError, AttributeError):
        pass
    return schema if new == dict(meta) else schema.with_metadata(new)


def _privatize_parquet(src: _Source, fh, target: _Target, columns: tuple[str, ...], rng, batch_size: int,
                       progress, tally=None) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = _open_parquet(src)
    index, _ = _parquet_targets(pf, src.label, columns)
    out_schema = pf.schema_arrow
    if tally is not None:
        tally.names = tuple(out_schema.names)
        keys = [k.decode("utf-8", "replace") for k in (out_schema.metadata or {})]
        # the kept columns' own field metadata is copied too: named as "column 'id': key"
        target_set = set(index)
        for i, f in enumerate(out_schema):
            if i not in target_set and f.metadata:
                keys += [f"column {f.name!r}: {k.decode('utf-8', 'replace')}" for k in f.metadata]
        tally.metadata_keys = tuple(keys)
    for i in index:
        old = out_schema.field(i)
        # the field's own metadata describes the raw column (it may even hold its values): not copied
        out_schema = out_schema.set(i, pa.field(old.name, pa.int64(), nullable=old.nullable))
    out_schema = _without_target_metadata(out_schema, {out_schema.field(i).name for i in index})
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
                if tally is not None and tally.order is not None:
                    tally.order.observe(x, batch.names)
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
