"""Writing a Spark result all or nothing: :func:`save_parquet`.

The job writes into a hidden directory beside the target, which is renamed into place only after
the job succeeded (package docstring, "Bad values").
"""

from __future__ import annotations

import os
import secrets
import shutil

from .._files import clean_stale
from ._common import _check_df
from ._errors import _run


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
    if local:  # a run killed outright (SIGKILL) left its hidden directory: removed when its process is gone
        clean_stale(dst.toUri().getPath())
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
        try:
            if fs.exists(tmp):
                fs.delete(tmp, True)
        except Exception:  # noqa: BLE001 - the JVM is gone (a signal broke the gateway): remove it from here
            if local:
                shutil.rmtree(tmp.toUri().getPath(), ignore_errors=True)
            else:  # pragma: no cover - a remote file system needs the JVM
                raise
    return int(spark.read.parquet(dst.toString()).count())  # from the parts' footers: no data is read
