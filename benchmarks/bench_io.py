"""File pipeline (issue 3): privatize a 3,000,000-row CSV, streamed, in a child process.

Each run is a fresh Python process, so its peak resident set size is the whole
cost of the run: interpreter, numpy, pyarrow and the working buffers.  The
peak is the child's own ``VmHWM`` (``/proc/self/status``, Linux), read at its
end; ``ru_maxrss`` of a child is not used because Linux carries the parent's
high-water mark over the fork into it (the parent here holds the generated
data), which would overstate the child.  Elsewhere ``ru_maxrss`` from
``os.wait4`` is the fallback.  Target: well under 600 MB.  The
baseline row is the same child doing only the imports, so the difference is
the streaming working set.  Also timed: reading the privatized column back
with ``column_counts`` (the estimation path) and the same data as Parquet.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

N_ROWS = 3_000_000
RSS_LIMIT_MB = 600
REPEAT = 3

_IMPORTS = "import json, time, sparseldp.io, sparseldp.spec, sparseldp.sampling, pyarrow, pyarrow.parquet\n"
_PEAK = """
def _peak_mb():
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None
"""
_IMPORTS += _PEAK

_PRIVATIZE = _IMPORTS + """
import sys
t = time.perf_counter()
r = sparseldp.io.privatize_file(sys.argv[1], sys.argv[2], mechanism=sys.argv[3], column="age",
                                rng=None if sys.argv[4] == "secure" else int(sys.argv[4]))
print(json.dumps({"rows": r.rows, "seconds": time.perf_counter() - t, "peak_mb": _peak_mb()}))
"""

_COUNTS = _IMPORTS + """
import sys
t = time.perf_counter()
offset, counts = sparseldp.io.column_counts(sys.argv[1], "age")
print(json.dumps({"rows": int(counts.sum()), "seconds": time.perf_counter() - t, "peak_mb": _peak_mb()}))
"""


def _child(code: str, *args: str) -> tuple[dict, float]:
    """Run ``code`` in a fresh interpreter; return its JSON output and its peak RSS in MB."""
    proc = subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed ({proc.returncode}): {err.decode()[-2000:]}")
    res = json.loads(out.decode())
    peak = res.get("peak_mb")
    return res, (peak if peak is not None else usage.ru_maxrss / 1024.0)


def _median_run(code: str, *args: str) -> tuple[float, float, int]:
    times, peaks, rows = [], [], 0
    for _ in range(REPEAT):
        res, peak = _child(code, *args)
        times.append(res["seconds"])
        peaks.append(peak)
        rows = res["rows"]
    return float(np.median(times)), max(peaks), rows


def run() -> list[dict]:
    from sparseldp.demo_data import write_demo_csv

    rows = []
    with tempfile.TemporaryDirectory(prefix="sparseldp-bench-io-") as tmp:
        tmp = Path(tmp)
        src = tmp / "people.csv"
        write_demo_csv(src, N_ROWS, rng=2026)
        size_mb = src.stat().st_size / 2**20
        spec = tmp / "mech.json"
        spec.write_text(json.dumps({"family": "laplace", "lam": 0.5, "s": 21}))

        _, base_peak = _child(_IMPORTS + "print(json.dumps({'peak_mb': _peak_mb()}))")
        rows.append({"name": "child baseline: interpreter + imports", "median_s": None,
                     "note": f"peak RSS {base_peak:.0f} MB"})

        out = tmp / "private.csv"
        for label, rng in (("secure OS source", "secure"), ("seeded", "1")):
            med, peak, n = _median_run(_PRIVATIZE, src, out, spec, rng)
            assert n == N_ROWS, n
            rows.append({
                "name": f"privatize CSV {N_ROWS:,} rows ({size_mb:.0f} MB), {label}",
                "median_s": med,
                "ratio": peak / RSS_LIMIT_MB,
                "note": f"peak RSS {peak:.0f} MB (ratio = share of the {RSS_LIMIT_MB} MB limit; "
                        f"{peak - base_peak:.0f} MB above baseline); {n / med / 1e6:.2f} M rows/s",
            })

        med, peak, n = _median_run(_COUNTS, out)
        assert n == N_ROWS, n
        rows.append({"name": f"column_counts CSV {N_ROWS:,} rows (estimation read path)", "median_s": med,
                     "note": f"peak RSS {peak:.0f} MB; {n / med / 1e6:.2f} M rows/s"})

        import pyarrow.csv as pacsv
        import pyarrow.parquet as pq

        psrc, pout = tmp / "people.parquet", tmp / "private.parquet"
        pq.write_table(pacsv.read_csv(src), psrc)
        med, peak, n = _median_run(_PRIVATIZE, psrc, pout, spec, "secure")
        assert n == N_ROWS, n
        rows.append({"name": f"privatize Parquet {N_ROWS:,} rows, secure OS source", "median_s": med,
                     "ratio": peak / RSS_LIMIT_MB,
                     "note": f"peak RSS {peak:.0f} MB; {n / med / 1e6:.2f} M rows/s"})
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
