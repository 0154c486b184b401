"""What runs on the Spark executors: the tasks of :func:`~sparseldp.spark.privatize` and
:func:`~sparseldp.spark.count_reports`, the UDF that carries the first, and the randomness of each
partition (package docstring, "What runs where" and "Randomness").

The task classes live at module level so that Spark pickles them by reference; the executors
import this module (and so the package) to unpickle them.
"""

from __future__ import annotations

import hashlib
import numbers

import numpy as np

from .._rng import SeededBitSource, SystemBitSource
from ..io.target import _sample, _validated
from ._errors import _PartitionBatch, _reraise

# Samplers already deserialized in this (reused) Python worker, by a digest of their pickle: a
# channel keeps its sampling tables on the object, so reusing it builds them once per worker
# rather than once per task.  A few mechanisms at most are in use at a time.
_WORKER_TARGETS: dict = {}
_WORKER_TARGETS_MAX = 8


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


class _ShuffleKeyTask:
    """Scalar-iterator UDF of the layout shuffle (:func:`~sparseldp.spark.privatize`'s ``shuffle``): one
    uniform 63-bit key per row from the partition's own stream (the OS secure source, or the seeded one
    under a tag of its own), so that where a report lands says nothing of its input."""

    def __init__(self, plan, arrow: bool):
        self.plan, self.arrow = plan, arrow

    def __call__(self, batches):
        import pyarrow as pa

        source = _partition_source(self.plan, _task_partition())
        for values in batches:
            keys = (source.words(len(values)) >> np.uint64(1)).astype(np.int64)
            if self.arrow:
                yield pa.array(keys, type=pa.int64())
            else:
                import pandas as pd

                yield pd.Series(keys, dtype="int64")


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

