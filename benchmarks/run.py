"""Run every benchmarks/bench_*.py and print one table of medians and ratios.

Usage: python benchmarks/run.py [name-substring ...]
Each module exposes ``run() -> list[dict]`` with keys ``name``, ``median_s``
and optionally ``ratio`` and ``note``.  Timings are medians of repeated runs
measured in the same process, so ratios compare like with like on a noisy,
shared machine.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    wanted = argv[1:]
    rows = []
    for path in sorted(HERE.glob("bench_*.py")):
        if wanted and not any(w in path.stem for w in wanted):
            continue
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(HERE))
        spec.loader.exec_module(mod)
        t0 = time.perf_counter()
        print(f"== {path.stem}", flush=True)
        for row in mod.run():
            row = {"bench": path.stem, **row}
            rows.append(row)
            ratio = row.get("ratio")
            ratio_s = f"{ratio:10.1f}x" if isinstance(ratio, (int, float)) else " " * 11
            med = row.get("median_s")
            med_s = f"{med:10.4f} s" if isinstance(med, (int, float)) else " " * 12
            print(f"  {row['name']:<58} {med_s} {ratio_s}  {row.get('note', '')}", flush=True)
        print(f"   ({time.perf_counter() - t0:.1f} s)")
    out = HERE / "results.json"
    out.write_text(json.dumps(rows, indent=1, default=str))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
