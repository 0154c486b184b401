r"""Privatize and count on Apache Spark: :func:`privatize`, :func:`count_reports`, :func:`save_parquet`.

For data sets that outgrow one machine (a partitioned Parquet data set, or
any Spark ``DataFrame``), this package runs the same certified integer
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

Where a report lands
--------------------
Where a report lands must not depend on its input: a data set partitioned,
bucketed or sorted by the target column would otherwise give each raw value
away by the file and position of its report.  :func:`privatize` therefore
draws, by default, one 63-bit key per row from the partition's stream (the
OS secure source, or the seed's own stream under a tag of its own), deals the
rows to the input's number of partitions by it and sorts each by it (one
shuffle, in the JVM; the key column is dropped).  ``shuffle=False`` keeps the
input's layout.

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
``ValueError`` names the column, what is wrong and where it is (never the value itself, a raw input
that would end up in logs): for
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

Layout
------
:func:`privatize` is here; :mod:`._count` holds :func:`count_reports`,
:mod:`._save` :func:`save_parquet`, :mod:`._tasks` what runs on the executors
(the tasks, the UDF, the randomness per partition), :mod:`._errors` how an
executor's error reaches the driver, and :mod:`._common` the pyspark and
column checks.  None imports pyspark at the top.
"""

from __future__ import annotations

import hashlib
import pickle

from .._validation import check_bool
from ..io.target import _resolve_mechanism
from ._common import INSTALL_HINT, _check_df, _col, _find_field, _kind
from ._count import count_reports
from ._save import save_parquet
# privatize looks _has_arrow_udf up here, where tests replace it to run the pandas_udf path
from ._tasks import _PrivatizeTask, _has_arrow_udf, _scalar_iter_udf, _seed_plan

__all__ = ["privatize", "count_reports", "save_parquet", "INSTALL_HINT"]


def privatize(df, column: str, mechanism, *, output_column: str | None = None, rng=None, shuffle: bool = True):
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
    shuffle : bool, keyword-only
        ``True`` (default): the rows are dealt to ``df``'s number of partitions
        and ordered within each by a key drawn per row from the same source
        (the OS secure source, or the seed's own stream), so that neither the
        output file a report lands in nor its position depends on the input's
        layout.  Without it a data set partitioned, bucketed or sorted by the
        target column gives each raw value away by where its report is
        (measured: ``age=30`` and ``age=40`` directories came out as two files
        holding exactly those rows).  ``False`` keeps the input's layout (no
        shuffle stage): only for an input whose layout does not depend on the
        target.

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
        outside the mechanism's domain, naming the column, the reason (not the value), the
        partition and row, and the input file when known.
    """
    df = _check_df(df)
    _, field = _find_field(df, column)
    kind = _kind(field)
    if output_column is not None and output_column != column:
        if not isinstance(output_column, str) or not output_column:
            raise TypeError(f"output_column must be None or a non-empty string; got {output_column!r}")
        if any(f.name.lower() == output_column.lower() for f in df.schema.fields):  # Spark's default: any case
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
    if check_bool(shuffle, "shuffle"):
        out = _shuffled(out, df, rng, output, arrow)
    # Kept so that save_parquet / count_reports can name the input file of a bad value: above the
    # Python stage, input_file_name() no longer sees the scan.
    out._sparseldp_source = df
    return out


# The name of the temporary shuffle key column (dropped before the result is returned).
_KEY = "__sparseldp_shuffle_key__"


def _shuffled(out, df, rng, output: str, arrow: bool):
    """``out`` dealt to ``df``'s number of partitions by a per-row random key and sorted by it within each
    (:class:`._tasks._ShuffleKeyTask`; the key's stream is tagged apart from the reports')."""
    from ._tasks import _ShuffleKeyTask

    plan = _seed_plan(rng, output + "\x00shuffle")
    key = _scalar_iter_udf(_ShuffleKeyTask(plan, arrow), arrow)(_col(output))
    parts = max(1, df.rdd.getNumPartitions())
    return out.withColumn(_KEY, key).repartition(parts, _col(_KEY)).sortWithinPartitions(_KEY).drop(_KEY)
