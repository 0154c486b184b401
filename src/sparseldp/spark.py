r"""Privatize and count on Apache Spark: :func:`privatize`, :func:`count_reports`, :func:`save_parquet`.

For data sets that outgrow one machine (a partitioned Parquet data set, or
any Spark ``DataFrame``), this module runs the same certified integer
sampler as the single-process file path (:func:`sparseldp.io.privatize_file`)
on Spark executors, and reduces a report column to the report histogram
(:class:`~sparseldp.estimation.ReportCounts`) that every estimator takes.
It needs the ``spark`` extra (``pip install 'sparseldp[spark]'``: pyspark
3.5 or 4.x with pandas and pyarrow, and Java 17 for Spark 4); nothing else in
the package imports it, so the core stays importable without pyspark.

What runs where
---------------
:func:`privatize` is one Arrow-backed scalar-iterator UDF (``arrow_udf`` on
pyspark >= 4.1, ``pandas_udf`` before): each executor task receives its
partition's values of the one column, in Arrow batches
(``spark.sql.execution.arrow.maxRecordsPerBatch`` rows, 10,000 by default;
measured no slower than 2^18 on ``local[2]``), checks them with the file path's rules
(:mod:`sparseldp.io`, "What counts as an integer") and the mechanism's
domain, and replaces them by reports ``Y ~ M(. | x)`` drawn by
:func:`sparseldp.sampling.sample` (or the channel's sampler for a spec with
a domain), one vectorized call per batch; no Python runs per row, and the
other columns never leave the JVM.  The UDF is marked nondeterministic, so
Spark's optimizer never evaluates it twice for one row.  Every
report has exactly the realized pmf ``c_k / 2^64`` that
:func:`sparseldp.sampling.certify` certifies (Definitions 6 and 13; the
module docstring of :mod:`sparseldp.sampling`), whichever engine drew it.

:func:`count_reports` is a Spark aggregation: an integer column is grouped
and counted in the JVM (a column of strings is first parsed by the file
path's vectorized parser in a ``mapInArrow`` stage), and only the distinct
values with their counts, at most the span of the reports, come back to the
driver.

Randomness
----------
``rng=None`` (the default): every task reads its executor's operating-system
CSPRNG (``os.urandom``), fresh for every batch, as the local path does.  An
``int`` seed or a ``numpy.random.SeedSequence`` is **reproducible simulation,
not for production** (anyone who knows the seed can recompute the noise): the
task of partition ``p`` draws from PCG64 seeded with
``SeedSequence(seed, spawn_key=(tag, p))`` (appended to the spawn key of a
given ``SeedSequence``), where ``tag`` is a 128-bit hash of the output
column's name.  Hence no two partitions, and no two output columns, share a
stream; within a partition one stream runs through all batches; and the
output is reproducible for a given seed *and a given partitioning* (the same
input read the same way; a ``repartition`` or a different
``maxRecordsPerBatch`` changes which row gets which noise, never the
distribution).  A re-executed task (a retry, a lost executor) draws the same
stream again, so a seeded output is deterministic.

Privacy of a lazy result
------------------------
The returned DataFrame is a plan, not data: with ``rng=None`` *every action
on it draws fresh noise*.  Two actions (``count()`` then ``write``, a
self-join, a cache that is evicted and recomputed) give two independent
reports per person, and publishing both composes the guarantee.  Write the
result once (:func:`save_parquet`) and use the written copy.

Bad values
----------
A column whose type cannot hold integers (float, decimal, boolean...) is
refused at once, before any job.  Nulls, strings that are not integers by the
file path's rule, values outside ``|x| < 10^18`` (so ``x +- t`` stays inside
int64) and values outside the mechanism's domain fail the job.  The
``ValueError`` names the column, the value and where it is: for
:func:`privatize`, the partition, the 1-based row within it and the input
file when Spark can tell (one input file, or a file scan, where a second
query on the error path finds the file that holds that row); for
:func:`count_reports`, the input file and the partition.  The error surfaces when the plan runs: in :func:`save_parquet`
and :func:`count_reports`, which raise it as that ``ValueError``; in a
Spark action of your own it arrives inside Spark's exception, whose message
contains the same text.  :func:`save_parquet` writes through Spark's output
committer into a hidden directory beside the target and renames it into
place only after the job succeeded, so a failed job leaves nothing at the
target.
"""

from __future__ import annotations

import hashlib
import json
import numbers
import os
import pickle
import re
import secrets

import numpy as np

from ._rng import SeededBitSource, SystemBitSource
from .io.batch import _INT_LIMIT
from .io.parquet import _ParquetBatch
from .io.pipeline import _MAX_SPAN, _bounds_message, _check_bounds, _check_bounds_reason
from .io.target import _resolve_mechanism, _sample, _validated

__all__ = ["privatize", "count_reports", "save_parquet", "INSTALL_HINT"]

#: What to install when pyspark is missing.
INSTALL_HINT = "pip install 'sparseldp[spark]'"

# A sparseldp error raised in an executor travels to the driver inside Spark's exception text;
# these markers delimit it so the driver can raise it again as a plain ValueError.
_MARK_OPEN = "<<sparseldp-error "
_MARK_CLOSE = " sparseldp-error>>"
_MARK_RE = re.compile(re.escape(_MARK_OPEN) + r"(\{.*?\})" + re.escape(_MARK_CLOSE), re.DOTALL)

# Samplers already deserialized in this (reused) Python worker, by a digest of their pickle: a
# channel keeps its sampling tables on the object, so reusing it builds them once per worker
# rather than once per task.  A few mechanisms at most are in use at a time.
_WORKER_TARGETS: dict = {}
_WORKER_TARGETS_MAX = 8


def _require_pyspark():
    try:
        from pyspark.sql import DataFrame
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"sparseldp.spark needs pyspark (with pandas and pyarrow), which is not installed; "
            f"install the extra: {INSTALL_HINT}", name="pyspark") from exc
    return DataFrame


def _check_df(df):
    DataFrame = _require_pyspark()
    if not isinstance(df, DataFrame):
        raise TypeError(f"df must be a pyspark.sql.DataFrame; got {type(df).__name__}")
    return df


def _find_field(df, column, name: str = "column"):
    """The schema field named ``column`` (exact, unique), or ValueError naming the columns there are."""
    if not isinstance(column, str) or not column:
        raise TypeError(f"{name} must be a non-empty string (a column name); got {column!r}")
    fields = df.schema.fields
    hits = [i for i, f in enumerate(fields) if f.name == column]
    if not hits:
        names = [f.name for f in fields]
        shown = ", ".join(repr(n) for n in names[:20]) + (", ..." if len(names) > 20 else "")
        raise ValueError(f"column {column!r} not found in the DataFrame; its columns are {shown}")
    if len(hits) > 1:
        raise ValueError(f"column {column!r} appears {len(hits)} times in the DataFrame; it must be unique")
    return hits[0], fields[hits[0]]


def _kind(field) -> str:
    """``"int"`` or ``"str"``; ValueError for a column type that cannot hold integers by the file rules."""
    from pyspark.sql import types as T

    dt = field.dataType
    if isinstance(dt, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return "int"
    if isinstance(dt, T.StringType):
        return "str"
    raise ValueError(f"column {field.name!r} has type {dt.simpleString()}; privatize and count need an integer "
                     "column (or strings holding integers): floats and decimals are not rounded")


def _col(name: str):
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


# ---------------------------------------------------------------------------
# Randomness per partition
# ---------------------------------------------------------------------------


def _seed_plan(rng, output: str):
    """``None`` (secure source) or ``(entropy, spawn_key, pool_size)`` of the output column's root."""
    if rng is None:
        return None
    if isinstance(rng, (bool, np.bool_)):
        raise TypeError(f"rng must be None (each executor's OS secure source), an int seed >= 0 or a numpy "
                        f"SeedSequence; got bool {rng!r}")
    if isinstance(rng, numbers.Integral):
        if int(rng) < 0:
            raise ValueError(f"rng seed must be an integer >= 0; got {int(rng)}")
        seq = np.random.SeedSequence(int(rng))
    elif isinstance(rng, np.random.SeedSequence):
        seq = rng
    else:
        raise TypeError("rng must be None (each executor's OS secure source), an int seed >= 0 or a numpy "
                        f"SeedSequence; got {type(rng).__name__} (a Generator or BitSource is one stream, "
                        "which cannot be split across partitions)")
    tag = int.from_bytes(hashlib.sha256(output.encode("utf-8")).digest()[:16], "little")
    return (seq.entropy, tuple(seq.spawn_key) + (tag,), seq.pool_size)


def _partition_source(plan, partition: int):
    if plan is None:
        return SystemBitSource()
    entropy, key, pool = plan
    seq = np.random.SeedSequence(entropy, spawn_key=key + (partition,), pool_size=pool)
    return SeededBitSource(np.random.Generator(np.random.PCG64(seq)))


# ---------------------------------------------------------------------------
# Executor side
# ---------------------------------------------------------------------------


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


def _task_partition() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


class _PrivatizeTask:
    """The scalar-iterator UDF of :func:`privatize` (a module-level class: pickled by reference).

    Called once per task with the iterator of the partition's batches of the
    one input column: ``pyarrow`` arrays (pyspark >= 4.1, ``arrow_udf``) or
    pandas Series (``pandas_udf``, Arrow-backed), and yields the reports in
    the same form.  One bit source serves the whole partition.
    """

    def __init__(self, target, digest: str, name: str, kind: str, plan, arrow: bool):
        self.target, self.digest, self.name, self.kind, self.plan, self.arrow = target, digest, name, kind, plan, arrow

    def __call__(self, batches):
        import pyarrow as pa

        if self.digest not in _WORKER_TARGETS and len(_WORKER_TARGETS) >= _WORKER_TARGETS_MAX:
            _WORKER_TARGETS.clear()
        target = _WORKER_TARGETS.setdefault(self.digest, self.target)
        partition = _task_partition()
        source = _partition_source(self.plan, partition)  # one stream for all batches of the partition
        arrow_type = pa.int64() if self.kind == "int" else pa.large_string()
        row = 1
        for values in batches:
            if not self.arrow:  # pandas turns an integer column with nulls into floats: back to int64 + nulls
                values = pa.Array.from_pandas(values, type=arrow_type)
            elif isinstance(values, pa.ChunkedArray):  # pragma: no cover - Spark sends plain arrays
                values = values.combine_chunks()
            batch = _PartitionBatch(pa.RecordBatch.from_arrays([values], names=[self.name]), 0, self.name, row,
                                    partition)
            try:
                x = _validated(batch, target) if len(values) else np.zeros(0, np.int64)
            except ValueError as exc:
                raise _reraise(exc, batch) from None
            y = _sample(target, x, source) if x.size else x
            row += len(values)
            if self.arrow:
                yield pa.array(y, type=pa.int64())
            else:
                import pandas as pd

                yield pd.Series(y, dtype="int64")


def _scalar_iter_udf(task, arrow: bool):
    """The UDF object: ``arrow_udf`` (pyspark >= 4.1) or ``pandas_udf``, scalar iterator, nondeterministic.

    Nondeterministic: the optimizer then never evaluates it twice for one row
    (two evaluations would be two reports of one value).
    """
    import warnings

    with warnings.catch_warnings():  # "prefer type hints": the callable is an object, its type is explicit
        warnings.simplefilter("ignore", UserWarning)
        if arrow:
            from pyspark.sql.pandas.functions import ArrowUDFType, arrow_udf

            udf = arrow_udf(task, "long", ArrowUDFType.SCALAR_ITER)
        else:
            from pyspark.sql.pandas.functions import PandasUDFType, pandas_udf

            udf = pandas_udf(task, "long", PandasUDFType.SCALAR_ITER)
    return udf.asNondeterministic()


def _has_arrow_udf() -> bool:
    """pyspark >= 4.1: UDFs on ``pyarrow`` arrays, without pandas in between."""
    import pyspark.sql.pandas.functions as functions

    return hasattr(functions, "arrow_udf") and hasattr(functions, "ArrowUDFType")


class _ParseTask:
    """``mapInArrow`` function that parses a string column into validated int64 (the file path's rules)."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, batches):
        import pyarrow as pa

        partition = _task_partition()
        row = 1
        for rb in batches:
            batch = _PartitionBatch(rb, 0, self.name, row, partition)
            try:
                x = batch.values() if rb.num_rows else np.zeros(0, np.int64)
            except ValueError as exc:
                raise _reraise(exc, batch) from None
            row += rb.num_rows
            yield pa.RecordBatch.from_arrays([pa.array(x, type=pa.int64())], names=["x"])


# ---------------------------------------------------------------------------
# Driver side: errors
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------


def privatize(df, column: str, mechanism, *, output_column: str | None = None, rng=None):
    r"""Replace an integer column of a Spark DataFrame by reports ``Y ~ M(. | x)``; lazily.

    Each row's value ``x`` becomes one report of the mechanism, an independent
    draw per row, drawn on the executors by the certified integer sampler of
    the file path (realized pmf ``c_k / 2^64``, Definitions 6 and 13; see
    :mod:`sparseldp.sampling`), one vectorized call per Arrow batch.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
    column : str
        The column to privatize: integers (byte, short, int or long) or strings
        holding integers by the file path's rule (:mod:`sparseldp.io`).
    mechanism : Spec, path to a spec (JSON), or a mechanism object
        As :func:`sparseldp.io.privatize_file`: a spec samples from
        ``Spec.sampler_target()`` and checks values against ``Spec.domain``;
        an object with ``.sample(x, rng=...)`` is used as is (its ``.inputs``
        are the allowed values).  It is pickled to the executors, which must
        have sparseldp installed.
    output_column : str or None, keyword-only
        ``None`` (default): the reports replace ``column`` in place (as
        ``long``; the schema and column order are otherwise unchanged).  A new
        name appends the reports as a ``long`` column and keeps ``column``.
    rng : None, int or numpy.random.SeedSequence, keyword-only
        ``None`` (default): each executor's OS secure source.  A seed: the
        partition ``p`` stream is ``SeedSequence(seed, spawn_key=(tag, p))``
        with ``tag`` a hash of the output column's name, so no stream is used
        twice, and the output is reproducible **for a given partitioning**
        only (module docstring).  Simulation only, **not for production**.

    Returns
    -------
    pyspark.sql.DataFrame
        A lazy plan: with ``rng=None`` each action draws fresh noise, and two
        published evaluations are two reports per person (module docstring).
        Write it once, e.g. with :func:`save_parquet`.

    Raises
    ------
    TypeError, ValueError
        At once: a bad argument, a missing or repeated column, a column type
        that cannot hold integers, an existing ``output_column``.  When the
        plan runs: a null, a non-integer, a value with ``|x| >= 10^18`` or
        outside the mechanism's domain, naming the column, the value, the
        partition and row, and the input file when known.
    """
    df = _check_df(df)
    _, field = _find_field(df, column)
    kind = _kind(field)
    if output_column is not None and output_column != column:
        if not isinstance(output_column, str) or not output_column:
            raise TypeError(f"output_column must be None or a non-empty string; got {output_column!r}")
        if any(f.name == output_column for f in df.schema.fields):
            raise ValueError(f"output_column {output_column!r} already exists in the DataFrame; pick a new name, "
                             f"or None to replace {column!r} in place")
        output = output_column
    else:
        output = column
    target = _resolve_mechanism(mechanism)
    plan = _seed_plan(rng, output)
    digest = hashlib.sha256(pickle.dumps(target, protocol=5)).hexdigest()
    arrow = _has_arrow_udf()
    task = _PrivatizeTask(target, digest, column, kind, plan, arrow)
    # Only this column crosses to Python and back; the other columns stay in the JVM.
    out = df.withColumn(output, _scalar_iter_udf(task, arrow)(_col(column)))
    # Kept so that save_parquet / count_reports can name the input file of a bad value: above the
    # Python stage, input_file_name() no longer sees the scan.
    out._sparseldp_source = df
    return out


def count_reports(df, column: str, *, bounds=None, bounds_reason: str | None = None):
    """The report histogram of a column, aggregated by Spark: a :class:`~sparseldp.estimation.ReportCounts`.

    ``counts[j]`` is the number of rows whose value is ``offset + j``, exactly
    as :func:`sparseldp.io.column_counts` computes it for a file, so
    :func:`~sparseldp.estimate_frequencies` and :func:`~sparseldp.estimate_mean`
    take the result unchanged.  The column is grouped and counted on the
    executors (strings holding integers are parsed there first, by the file
    path's rule); only the distinct values and their counts reach the driver.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
    column : str
        An integer column, or strings holding integers.
    bounds : (lo, hi) or None, keyword-only
        With bounds, ``offset = lo`` and ``len(counts) = hi - lo + 1``, and a
        value outside is an error; without, the histogram runs from the
        smallest to the largest value, which may span at most ``10**7``
        integers.
    bounds_reason : str or None, keyword-only
        Why the range is what it is, added to the error (as for
        :func:`sparseldp.io.column_counts`).

    Raises
    ------
    ValueError
        A null, a non-integer, ``|x| >= 10^18``, a value outside ``bounds``
        or a span over ``10**7``: naming the column, the value, the input
        file and the partition where Spark can tell.
    """
    # Here, not at the top: executors import this module to unpickle the privatize and parse
    # tasks, and should not pay for scipy.stats, which sparseldp.estimation loads.
    from .estimation.counts import ReportCounts

    df = _check_df(df)
    _, field = _find_field(df, column)
    kind = _kind(field)
    bounds = _check_bounds(bounds)
    bounds_reason = _check_bounds_reason(bounds_reason)
    source = getattr(df, "_sparseldp_source", None)
    from pyspark.sql import functions as F

    if kind == "str":
        values = df.select(_col(column)).mapInArrow(_ParseTask(column), "x long")
    else:
        values = df.select(_col(column).cast("long").alias("x"))
    limit = _MAX_SPAN if bounds is None else bounds[1] - bounds[0] + 1
    grouped = values.groupBy("x").agg(F.count(F.lit(1)).alias("n")).limit(limit + 2)
    keys, ns, has_null = _collect_counts(grouped, source if source is not None else df)

    if has_null:
        raise _locate(df, column, _col(column).isNull(), "is null (a missing value)")
    big = (keys >= _INT_LIMIT) | (keys <= -_INT_LIMIT)
    if big.any():
        raise _locate(df, column, (_col(column) >= _INT_LIMIT) | (_col(column) <= -_INT_LIMIT),
                      "is outside the supported integer range (|x| < 10**18)")
    if bounds is not None:
        lo, hi = bounds
        outside = (keys < lo) | (keys > hi)
        if outside.any() or keys.size > limit:
            raise _locate(df, column, (_col(column) < lo) | (_col(column) > hi),
                          _bounds_message(bounds, bounds_reason))
        counts = np.zeros(hi - lo + 1, np.int64)
        np.add.at(counts, keys - lo, ns)
        return ReportCounts(lo, counts)
    if keys.size == 0:
        return ReportCounts(0, np.zeros(0, np.int64))
    lo, hi = int(keys.min()), int(keys.max())
    if keys.size > limit or hi - lo + 1 > _MAX_SPAN:
        raise ValueError(f"column {column!r} spans more than {_MAX_SPAN} integers (from {lo} to at least {hi}); "
                         "pass bounds=(lo, hi) to say which values are valid")
    counts = np.zeros(hi - lo + 1, np.int64)
    np.add.at(counts, keys - lo, ns)
    return ReportCounts(lo, counts)


def _collect_counts(grouped, source_df):
    """``(keys, counts, has_null)`` of a ``x, n`` aggregate, collected as Arrow when pyspark can."""
    def collect():
        if hasattr(grouped, "toArrow"):  # pyspark >= 4.0
            table = grouped.toArrow()
            return table.column("x").to_pylist(), table.column("n").to_pylist()
        rows = grouped.collect()
        return [r["x"] for r in rows], [r["n"] for r in rows]

    xs, ns = _run(collect, source_df)
    has_null = any(v is None for v in xs)
    pairs = [(x, n) for x, n in zip(xs, ns) if x is not None]
    keys = np.array([p[0] for p in pairs], dtype=np.int64)
    counts = np.array([p[1] for p in pairs], dtype=np.int64)
    return keys, counts, has_null


def _locate(df, column: str, condition, reason: str) -> ValueError:
    """The error for the first row matching ``condition``, naming its value, input file and partition."""
    from pyspark.sql import functions as F

    source = getattr(df, "_sparseldp_source", None)
    if source is not None:  # the values are produced by privatize: no file to point at beyond its input
        return ValueError(f"column {column!r}: a report {reason}")
    rows = _run(lambda: df.where(condition).select(
        _col(column).alias("v"), F.input_file_name().alias("f"), F.spark_partition_id().alias("p")).limit(1)
        .collect(), None)
    if not rows:  # pragma: no cover - the aggregate saw it; a nondeterministic input may not show it again
        return ValueError(f"column {column!r}: a value {reason}")
    v, f, p = rows[0]["v"], rows[0]["f"], rows[0]["p"]
    where = f"input file {f!r}, partition {p}" if f else f"partition {p}"
    if v is None:
        return ValueError(f"{where}: column {column!r} {reason}")
    return ValueError(f"{where}: column {column!r} value {str(v)!r} {reason}")


def save_parquet(df, path, *, compression: str = "snappy") -> int:
    """Write ``df`` as a directory of Parquet parts, all or nothing; return the number of rows written.

    The job writes through Spark's output committer into a hidden directory
    beside ``path`` (``.<name>.sparseldp-<pid>-<random>.tmp``, which Spark
    readers skip), and that directory is renamed to ``path`` only after the
    job has succeeded.  On any failure, an interruption included, the hidden
    directory is removed and nothing appears at ``path``.  ``path`` must not
    exist; it is resolved as Spark resolves it (a path without a scheme is on
    the cluster's default file system).  On the local file system the rename
    is :func:`os.rename` (atomic); elsewhere Hadoop's ``FileSystem.rename``,
    which is atomic on HDFS but a copy on object stores (``s3a://``).  A
    sparseldp failure inside the job (a bad value met by :func:`privatize`)
    is raised as one ``ValueError`` naming the value, its partition and row,
    and the input file when known.
    """
    df = _check_df(df)
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a path or URI (str or os.PathLike); got {type(path).__name__} {path!r}")
    path = os.fspath(path)
    source = getattr(df, "_sparseldp_source", None)
    spark = df.sparkSession
    hpath = spark.sparkContext._jvm.org.apache.hadoop.fs.Path
    try:
        fs = hpath(path).getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        dst = fs.makeQualified(hpath(path))
        local = fs.getScheme() == "file"
        exists = fs.exists(dst)
        parent = dst.getParent()
        parent_missing = local and parent is not None and not fs.isDirectory(parent)
    except Exception as exc:  # noqa: BLE001 - py4j carries Hadoop's IOException, IllegalArgumentException...
        raise ValueError(f"cannot write output {path!r}: {' '.join(str(exc).split())[:300]}") from None
    if exists:
        raise ValueError(f"cannot write output {path!r}: it exists; write a new directory")
    if parent_missing:
        raise ValueError(f"cannot write output {path!r}: directory {parent.toUri().getPath()!r} does not exist")
    tmp = hpath(parent, f".{dst.getName()}.sparseldp-{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        _run(lambda: df.write.option("compression", compression).parquet(tmp.toString()), source)
        if local:
            try:
                os.rename(tmp.toUri().getPath(), dst.toUri().getPath())
            except OSError as exc:
                raise ValueError(f"cannot write output {path!r}: {exc.strerror or exc}") from None
        elif fs.exists(dst) or not fs.rename(tmp, dst):
            raise ValueError(f"cannot write output {path!r}: renaming the finished job's directory failed "
                             "(did something else create it meanwhile?)")
    finally:
        if fs.exists(tmp):
            fs.delete(tmp, True)
    return int(spark.read.parquet(dst.toString()).count())  # from the parts' footers: no data is read
