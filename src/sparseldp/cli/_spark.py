r"""``--engine spark`` for ``sparseldp privatize`` and ``sparseldp estimate``.

``sparseldp privatize --engine spark [--master local[2]] IN -m mech.json -c age -o OUT`` reads
``IN`` (a Parquet file, a directory of Parquet parts, or a glob such as
``'data/part-*.parquet'``; a URI such as ``hdfs://nn/data`` or
``s3a://bucket/data`` where the cluster can read it) as a Spark DataFrame,
privatizes the named columns on the executors (:func:`sparseldp.spark.privatize`)
and writes ``OUT`` as a directory of Parquet parts through Spark's output
committer, into a hidden directory beside ``OUT`` that is renamed to ``OUT``
only after the job succeeded (:func:`sparseldp.spark.save_parquet`): on any
error ``OUT`` does not appear.  ``sparseldp estimate --engine spark`` counts
the report column with :func:`sparseldp.spark.count_reports` and estimates
from the counts exactly as the default engine does.

The default engine (``--engine local``) is the single-process streamed path
and needs no Spark.  Without pyspark installed, ``--engine spark`` is one
line on stderr saying what to install, exit status 2.

The Spark session: ``--master`` (default: Spark's own, ``local[*]`` unless
``spark-defaults.conf`` or ``spark-submit`` says otherwise); an active session
(a notebook, a test) is used as it is and left running.  With a local master
(or none), Python workers run this interpreter unless ``PYSPARK_PYTHON`` says
otherwise; on a cluster they run what ``PYSPARK_PYTHON`` or
``spark.pyspark.python`` names (an interpreter that has sparseldp).  A
``--batch-size`` other than the local engine's default sets Spark's
``spark.sql.execution.arrow.maxRecordsPerBatch`` (the rows per Arrow batch
handed to one sampler call); otherwise Spark's own default (10,000) stands:
the rows of a batch are buffered in the JVM, and larger batches measured no
faster on ``local[2]``.  The JVM's own output (start-up
banner, task-failure logs) goes to ``/dev/null`` so that the CLI contract
(one stderr line on an error) holds; ``SPARSELDP_DEBUG=1`` keeps it.
"""

from __future__ import annotations

import contextlib
import glob
import importlib
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ENGINES = ("local", "spark")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")
_ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"
_LOCAL_DEFAULT_BATCH = 1 << 18  # the default of privatize --batch-size (sparseldp.io.DEFAULT_BATCH_SIZE)


def check_engine(engine: str, master: str | None, *, input, output, format: str | None):
    """``None`` for the local engine, else a :class:`SparkJob` for ``input`` (checked, nothing run yet)."""
    if engine not in ENGINES:
        raise ValueError(f"--engine must be 'local' or 'spark'; got {engine!r}")
    if engine == "local":
        if master is not None:
            raise ValueError("--master applies to --engine spark only")
        return None
    try:
        for package in ("pyspark", "pyspark.sql", "pandas", "pyarrow"):
            importlib.import_module(package)
    except ImportError as exc:
        missing = (exc.name or "pyspark").split(".")[0]
        raise ValueError(f"--engine spark needs pyspark (with pandas and pyarrow), and {missing!r} is not installed; "
                         "install the Spark extra: pip install 'sparseldp[spark]'") from None
    if master is not None and not master.strip():
        raise ValueError("--master must be a Spark master URL such as local[2], yarn or spark://host:7077; got ''")
    src = _raw_path(input)
    if src == "-":
        raise ValueError("--engine spark reads Parquet from a path, a directory or a glob, not standard input ('-')")
    if format is not None and format.lower() != "parquet":
        raise ValueError(f"--engine spark reads Parquet only; got --format {format!r} (use the default --engine "
                         "local for CSV/TSV)")
    if format is None and Path(src.rstrip("/")).suffix.lower() in (".csv", ".tsv"):
        raise ValueError(f"--engine spark reads Parquet only (a file, a directory of parts or a glob); got "
                         f"{src!r} (use the default --engine local for CSV/TSV)")
    # Plain paths are checked here only for a local master: on a cluster they name the cluster's default
    # file system (HDFS...), which Spark checks when it reads and save_parquet when it writes.
    on_this_machine = master is None or master.strip().startswith("local")

    def is_local(p: str) -> bool:
        return p.startswith("file:") or (on_this_machine and not _URI.match(p))

    if is_local(src):
        local = re.sub(r"^file:(//)?", "", src)
        found = glob.glob(local) if glob.has_magic(local) else ([local] if os.path.exists(local) else [])
        if not found:
            raise ValueError(f"cannot read input {src!r}: no such file or directory"
                             + (" (the glob matches nothing)" if glob.has_magic(local) else ""))
    dst = None
    if output is not None:
        dst = _raw_path(output)
        if dst == "-":
            raise ValueError("--engine spark writes a directory of Parquet parts; -o - (standard output) is not "
                             "possible: give -o DIR")
        if Path(dst.rstrip("/")).suffix.lower() in (".csv", ".tsv"):
            raise ValueError(f"--engine spark writes a directory of Parquet parts; got -o {dst!r}")
        if is_local(dst):
            out = Path(re.sub(r"^file:(//)?", "", dst))
            if out.exists() or out.is_symlink():
                raise ValueError(f"cannot write output {dst!r}: it exists; --engine spark writes a new directory")
            parent = out.parent if str(out.parent) else Path(".")
            if not parent.is_dir():
                raise ValueError(f"cannot write output {dst!r}: directory {str(parent)!r} does not exist")
            if not glob.has_magic(src):
                inp = Path(re.sub(r"^file:(//)?", "", src)).resolve()
                if inp == out.resolve() or inp in out.resolve().parents:
                    raise ValueError(f"-o {dst!r} is inside the input {src!r}; write the output elsewhere")
    return SparkJob(src, dst, master)


def _raw_path(path) -> str:
    """The path as typed: typer hands it over as a Path, which folds ``s3a://b/x`` into ``s3a:/b/x``."""
    text = str(path)
    if _URI.match(text):
        for token in sys.argv[1:]:
            if "://" in token and str(Path(token)) == text:
                return token
    return text


@dataclass(frozen=True)
class SparkResult:
    """What the privatize command prints, as :class:`sparseldp.io.PrivatizeResult` has it."""

    rows: int
    seconds: float
    output: str
    blank_lines: int = 0
    kept_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class SparkJob:
    input: str
    output: str | None
    master: str | None

    def privatize(self, spec, columns, seed, batch_size: int) -> SparkResult:
        """Privatize ``columns`` of the input with ``spec``; write the output directory all or nothing."""
        import numpy as np

        from ..spark import privatize, save_parquet

        t0 = time.perf_counter()
        with _session(self.master, None if batch_size == _LOCAL_DEFAULT_BATCH else batch_size) as spark:
            df = _read(spark, self.input)
            # one root for all columns; each column's stream is told apart by its name (sparseldp.spark)
            rng = None if seed is None else np.random.SeedSequence(seed)
            out = df
            for i, name in enumerate(columns):  # one layout shuffle, after the last column
                out = privatize(out, name, spec, rng=rng, shuffle=i == len(columns) - 1)
            out._sparseldp_source = df  # errors of any column name the input file
            rows = save_parquet(out, self.output)
            kept = tuple(c for c in df.columns if c not in columns)
        return SparkResult(rows=rows, seconds=time.perf_counter() - t0, output=self.output, kept_columns=kept)

    def column_counts(self, column: str, *, bounds, bounds_reason) -> tuple[int, object]:
        """``(offset, counts)`` of the report column, as :func:`sparseldp.io.column_counts` gives them."""
        from ..spark import count_reports

        with _session(self.master, None) as spark:
            rc = count_reports(_read(spark, self.input), column, bounds=bounds, bounds_reason=bounds_reason)
        return rc.offset, rc.counts


def _read(spark, path: str):
    try:
        return spark.read.parquet(path)
    except Exception as exc:  # noqa: BLE001 - AnalysisException, Py4JJavaError...: all say the input is unreadable
        text = _java_reason(exc) or " ".join(str(exc).split("\n")[0].split())
        raise ValueError(f"cannot read input {path!r} as Parquet: {text[:300]}") from None


def _java_reason(exc) -> str | None:
    """The innermost Java cause's message of a Py4JJavaError ("An error occurred while calling o29.parquet."
    says nothing), or ``None``."""
    java = getattr(exc, "java_exception", None)
    try:
        reason = None
        while java is not None:
            message = java.getMessage()
            if message:
                reason = " ".join(str(message).split("\n")[0].split())
            java = java.getCause()
        return reason
    except Exception:  # noqa: BLE001 - a broken gateway: fall back to the Python message
        return None


@contextlib.contextmanager
def _quiet_jvm():
    """The JVM launched inside this block writes its stdout and stderr to /dev/null (kept on SPARSELDP_DEBUG)."""
    if os.environ.get("SPARSELDP_DEBUG"):
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved + [null]:
            os.close(fd)


@contextlib.contextmanager
def _session(master: str | None, batch_size: int | None):
    """The active SparkSession (left running), or a new one stopped on exit."""
    if master is None or master.startswith("local"):
        # workers on this machine run this interpreter (which has sparseldp); a cluster's executors
        # have their own Python, named by PYSPARK_PYTHON or spark.pyspark.python
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    created = spark is None
    if created:
        builder = SparkSession.builder.appName("sparseldp").config("spark.ui.showConsoleProgress", "false")
        if master is not None:
            builder = builder.master(master)
        try:
            with _quiet_jvm():
                spark = builder.getOrCreate()
        except Exception as exc:  # noqa: BLE001 - no Java, a bad master URL...
            text = " ".join(str(exc).split())
            raise ValueError(f"cannot start Spark (--master {master or 'default'}): {text[:300]}") from None
        spark.sparkContext.setLogLevel("OFF" if not os.environ.get("SPARSELDP_DEBUG") else "WARN")
    old = spark.conf.get(_ARROW_BATCH, None)
    if batch_size is not None:
        spark.conf.set(_ARROW_BATCH, str(batch_size))
    try:
        yield spark
    finally:
        if batch_size is not None:
            if old is None:
                spark.conf.unset(_ARROW_BATCH)
            else:
                spark.conf.set(_ARROW_BATCH, old)
        if created:
            spark.stop()
