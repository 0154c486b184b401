"""How a bad value's error travels from a Spark executor to the driver and is raised there.

On an executor, a :class:`_PartitionBatch` names the partition and the row of a bad value, and
:func:`_reraise` wraps the ``ValueError`` between markers that survive inside Spark's exception
text.  On the driver, :func:`_run` runs an action and turns such a failure back into one plain
``ValueError``, adding the input file that holds the row when Spark can tell (:func:`_input_file`).
"""

from __future__ import annotations

import json
import re

from ..io.parquet import _ParquetBatch

# A sparseldp error raised in an executor travels to the driver inside Spark's exception text;
# these markers delimit it so the driver can raise it again as a plain ValueError.
_MARK_OPEN = "<<sparseldp-error "
_MARK_CLOSE = " sparseldp-error>>"
_MARK_RE = re.compile(re.escape(_MARK_OPEN) + r"(\{.*?\})" + re.escape(_MARK_CLOSE), re.DOTALL)


class _PartitionBatch(_ParquetBatch):
    """An Arrow batch of one Spark partition; messages name the partition and the row within it."""

    def __init__(self, record_batch, position: int, name: str, first_row: int, partition: int):
        super().__init__(record_batch, (position,), (name,), first_row, None)
        self.partition = partition
        self.row = None  # the row the error message names (set when it is written)

    def where(self, i: int) -> str:
        self.row = self.first_row + i
        return f"partition {self.partition}, row {self.row} of the partition"


def _reraise(exc: ValueError, batch: _PartitionBatch):
    info = {"message": str(exc), "partition": batch.partition, "row": batch.row}
    return ValueError(f"{_MARK_OPEN}{json.dumps(info)}{_MARK_CLOSE}")


def _sparseldp_error(exc: BaseException) -> dict | None:
    """The sparseldp error carried inside a Spark exception's text, if any."""
    m = _MARK_RE.search(str(exc))
    if m is None:
        return None
    try:
        return json.loads(m.group(1))
    except ValueError:  # pragma: no cover - our own JSON, cut by Spark
        return None


def _input_file(df, partition: int, row: int | None) -> str | None:
    """The input file that holds 1-based ``row`` of ``partition`` in ``df``'s file scan, or ``None``.

    One input file: no job.  Several: a second query over the input that
    projects no data column (so a Parquet scan reads row counts, not values)
    lists the files of the partition with the index of their first row (Spark
    reads a partition's files one after the other); best effort, on the error
    path only.
    """
    try:
        files = df.inputFiles()
    except Exception:  # noqa: BLE001 - not a file-based plan
        return None
    if len(files) <= 1 or row is None:
        return files[0] if len(files) == 1 else None
    from pyspark.sql import functions as F

    try:
        rows = (df.select(F.input_file_name().alias("f"), F.monotonically_increasing_id().alias("i"))
                .where(F.spark_partition_id() == partition).groupBy("f")
                .agg(F.min("i").alias("first"), F.count(F.lit(1)).alias("n")).collect())
    except Exception:  # noqa: BLE001 - the diagnosis must never hide the error itself
        return None
    base = partition << 33  # monotonically_increasing_id: partition index in the upper bits
    for r in rows:
        if r["f"] and r["first"] - base < row <= r["first"] - base + r["n"]:
            return r["f"]
    return None


def _translate(exc: BaseException, source_df) -> ValueError | None:
    """A ValueError for a sparseldp failure inside a Spark job, with the input file when known."""
    info = _sparseldp_error(exc)
    if info is None:
        return None
    path = _input_file(source_df, int(info["partition"]), info.get("row")) if source_df is not None else None
    return ValueError(info["message"] + ("" if path is None else f" (input file {path!r})"))


def _run(action, source_df):
    """Run a Spark action; a sparseldp failure in a task becomes one plain ValueError."""
    try:
        return action()
    except Exception as exc:  # noqa: BLE001 - Spark wraps task failures in several exception types
        err = _translate(exc, source_df)
        if err is None:
            raise
        raise err from None
