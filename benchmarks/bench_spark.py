"""Spark engine (sparseldp.spark) against the single-process path, privatize + count, on the same data.

The data is a directory of ``PARTS`` Parquet part files holding one int64
column ``x`` (ages 0..99), as a data lake would hold it.  Each engine runs in
a fresh child process:

* local: :func:`sparseldp.io.privatize_file` on each part in turn, then
  :func:`sparseldp.io.column_counts` of each privatized part (one process,
  one core);
* spark (``local[2]``): :func:`sparseldp.spark.privatize` +
  :func:`sparseldp.spark.save_parquet` of the directory, then
  :func:`sparseldp.spark.count_reports` of the written parts; the session's
  start is timed apart (a cluster pays it once per application).

Both draw from the OS secure source; batches are the local path's default
(2^18 rows), which is also the Arrow batch size Spark hands to one sampler
call here (``spark.sql.execution.arrow.maxRecordsPerBatch``; Spark's own
default, 10,000, measured no different).

Peak memory: a thread of this process reads ``/proc`` every 0.1 s for the
child's whole process tree and keeps each process's ``VmHWM`` (its own peak
resident set, exact for that process); the Spark tree is reported as the
driver (the Python process), the JVM (in ``local`` mode the JVM is both the
Spark driver and the executor) and the Python workers (their peak summed over
the processes alive at the same poll: a lower bound that misses spikes
shorter than 0.1 s).  Linux only; elsewhere the memory columns are empty.

Sizes: ``SPARSELDP_BENCH_SPARK_ROWS`` (default ``1e6,1e7``; ``1e8`` takes
several minutes on two cores).  Each size runs once (these are minutes-long
runs on a shared machine: the note says so); ratio = spark time / local time.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

PARTS = 8
BATCH = 1 << 18
MASTER = "local[2]"

_LOCAL = """
import json, sys, time
from pathlib import Path
import numpy as np
from sparseldp.io import column_counts, privatize_file
src, dst, spec = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
dst.mkdir()
parts = sorted(src.glob("*.parquet"))
t0 = time.perf_counter()
rows = 0
for p in parts:
    rows += privatize_file(p, dst / p.name, mechanism=spec, column="x").rows
t1 = time.perf_counter()
counts = None
for p in sorted(dst.glob("*.parquet")):
    off, c = column_counts(p, "x", bounds=(-20, 120))
    counts = c if counts is None else counts + c
t2 = time.perf_counter()
print(json.dumps({"rows": rows, "privatize_s": t1 - t0, "count_s": t2 - t1, "n": int(counts.sum())}))
"""

_SPARK = """
import json, os, sys, time
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
t0 = time.perf_counter()
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master(sys.argv[4]).appName("bench_spark")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", sys.argv[5]).getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.range(1).count()
from sparseldp.spark import count_reports, privatize, save_parquet
t1 = time.perf_counter()
df = spark.read.parquet(sys.argv[1])
rows = save_parquet(privatize(df, "x", sys.argv[3]), sys.argv[2])
t2 = time.perf_counter()
rc = count_reports(spark.read.parquet(sys.argv[2]), "x", bounds=(-20, 120))
t3 = time.perf_counter()
print(json.dumps({"rows": rows, "start_s": t1 - t0, "privatize_s": t2 - t1, "count_s": t3 - t2, "n": rc.n,
                  "partitions": df.rdd.getNumPartitions()}))
spark.stop()
"""


def _status_kb(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _tree(root: int) -> dict[int, str]:
    """pid -> kind ('driver', 'jvm', 'worker', 'other') of ``root`` and its descendants."""
    parent, cmd = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                st = fh.read()
            parent[int(d)] = int(st[st.rindex(")") + 2:].split()[1])
            with open(f"/proc/{d}/cmdline", "rb") as fh:
                cmd[int(d)] = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
    tree = {root}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    kinds = {}
    for pid in tree:
        c = cmd.get(pid, "")
        kinds[pid] = ("driver" if pid == root else "jvm" if "java" in c or "spark-class" in c
                      else "worker" if "pyspark.daemon" in c or "pyspark.worker" in c else "other")
    return kinds


class _Peaks(threading.Thread):
    """Polls the process tree of ``pid``: per-kind peak (VmHWM per process; workers summed per poll)."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.stop = pid, threading.Event()
        self.hwm: dict[int, tuple[str, int]] = {}
        self.workers_peak_kb = 0
        self.tree_peak_kb = 0

    def run(self):
        if not os.path.isdir("/proc"):
            return
        while not self.stop.is_set():
            kinds = _tree(self.pid)
            workers = total = 0
            for pid, kind in kinds.items():
                hwm, rss = _status_kb(pid, "VmHWM:"), _status_kb(pid, "VmRSS:")
                if hwm is not None:
                    self.hwm[pid] = (kind, max(hwm, self.hwm.get(pid, (kind, 0))[1]))
                total += rss or 0
                workers += (rss or 0) if kind == "worker" else 0
            self.workers_peak_kb = max(self.workers_peak_kb, workers)
            self.tree_peak_kb = max(self.tree_peak_kb, total)
            self.stop.wait(0.1)

    def peak_mb(self, kind: str) -> float | None:
        vals = [kb for k, kb in self.hwm.values() if k == kind]
        return max(vals) / 1024.0 if vals else None


def _child(code: str, *args) -> tuple[dict, _Peaks]:
    proc = subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    peaks = _Peaks(proc.pid)
    peaks.start()
    out, err = proc.communicate()
    peaks.stop.set()
    peaks.join()
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed ({proc.returncode}): {err.decode()[-3000:]}")
    return json.loads(out.decode().strip().splitlines()[-1]), peaks


def _write_parts(root: Path, n: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(2026)
    per = -(-n // PARTS)
    for i in range(PARTS):
        rows = min(per, n - i * per)
        with pq.ParquetWriter(root / f"part-{i:05d}.parquet", pa.schema([("x", pa.int64())])) as w:
            for start in range(0, rows, 1 << 22):
                m = min(1 << 22, rows - start)
                w.write_batch(pa.record_batch([pa.array(rng.integers(0, 100, m))], names=["x"]))


def _sizes() -> list[int]:
    text = os.environ.get("SPARSELDP_BENCH_SPARK_ROWS", "1e6,1e7")
    return [int(float(v)) for v in text.split(",") if v.strip()]


def _mb(v) -> str:
    return "-" if v is None else f"{v:.0f} MB"


def run() -> list[dict]:
    try:
        importlib.import_module("pyspark")
    except ImportError:
        return [{"name": "spark engine", "median_s": None, "note": "skipped: pyspark not installed "
                 "(pip install 'sparseldp[spark]')"}]
    rows = []
    with tempfile.TemporaryDirectory(prefix="sparseldp-bench-spark-") as tmp:
        tmp = Path(tmp)
        spec = tmp / "mech.json"
        spec.write_text(json.dumps({"family": "laplace", "lam": 0.5, "s": 21}))
        for n in _sizes():
            src = tmp / f"in-{n}"
            src.mkdir()
            _write_parts(src, n)
            size = sum(p.stat().st_size for p in src.iterdir()) / 2**20
            loc, lp = _child(_LOCAL, src, tmp / f"local-{n}", spec)
            sp, sp_peaks = _child(_SPARK, src, tmp / f"spark-{n}", spec, MASTER, BATCH)
            assert loc["rows"] == loc["n"] == sp["rows"] == sp["n"] == n, (loc, sp)
            lt, st = loc["privatize_s"] + loc["count_s"], sp["privatize_s"] + sp["count_s"]
            rows.append({"name": f"local path, privatize + count {n:.0e} rows ({PARTS} parts, {size:.0f} MB)",
                         "median_s": lt,
                         "note": f"1 run; privatize {loc['privatize_s']:.2f} s + count {loc['count_s']:.2f} s; "
                                 f"{n / lt / 1e6:.2f} M rows/s; peak RSS {_mb(lp.peak_mb('driver'))}"})
            rows.append({"name": f"spark {MASTER}, privatize + count {n:.0e} rows", "median_s": st,
                         "ratio": st / lt,
                         "note": f"1 run; ratio = spark / local time; privatize {sp['privatize_s']:.2f} s + count "
                                 f"{sp['count_s']:.2f} s; {n / st / 1e6:.2f} M rows/s; session start "
                                 f"{sp['start_s']:.1f} s (not included); {sp['partitions']} partitions; peak RSS "
                                 f"driver {_mb(sp_peaks.peak_mb('driver'))}, JVM {_mb(sp_peaks.peak_mb('jvm'))}, "
                                 f"Python workers {sp_peaks.workers_peak_kb / 1024:.0f} MB together, whole tree "
                                 f"{sp_peaks.tree_peak_kb / 1024:.0f} MB"})
            for p in (src, tmp / f"local-{n}", tmp / f"spark-{n}"):
                subprocess.run(["rm", "-rf", str(p)], check=True)
    return rows


if __name__ == "__main__":
    t0 = time.perf_counter()
    for row in run():
        print(row, flush=True)
    print(f"({time.perf_counter() - t0:.0f} s)")
