"""The report histogram of a Spark column: :func:`count_reports`, aggregated in the JVM.

An integer column is grouped and counted by Spark (strings holding integers are first parsed on
the executors by :class:`~sparseldp.spark._tasks._ParseTask`); only the distinct values with
their counts come back to the driver.  A bad value is then located by a second query
(:func:`_locate`) that names its input file and partition.
"""

from __future__ import annotations

import numpy as np

from ..io.batch import _INT_LIMIT
from ..io.pipeline import _MAX_SPAN, _bounds_message, _check_bounds, _check_bounds_reason
from ._common import _check_df, _col, _find_field, _kind
from ._errors import _run
from ._tasks import _ParseTask


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
    # Here, not at the top: executors import this package to unpickle the privatize and parse
    # tasks, and should not pay for scipy.stats, which sparseldp.estimation loads.
    from ..estimation.counts import ReportCounts

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
    return ValueError(f"{where}: column {column!r}: a value {reason} (the value itself is not shown)")

