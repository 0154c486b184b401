"""Run every benchmarks/bench_*.py and print one table of medians and ratios.

Usage: python benchmarks/run.py [name-substring ...]
(with names, results.json keeps the rows of the benchmarks that did not run)
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
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    wanted = argv[1:]
    rows, failed = [], []
    for path in sorted(HERE.glob("bench_*.py")):
        if wanted and not any(w in path.stem for w in wanted):
            continue
        t0 = time.perf_counter()
        print(f"== {path.stem}", flush=True)
        try:  # a module that fails is reported and the others still run
            spec = importlib.util.spec_from_file_location(path.stem, path)
            mod = importlib.util.module_from_spec(spec)
            sys.path.insert(0, str(HERE))
            spec.loader.exec_module(mod)
            for row in mod.run():
                row = {"bench": path.stem, **row}
                rows.append(row)
                ratio = row.get("ratio")
                ratio_s = f"{ratio:10.1f}x" if isinstance(ratio, (int, float)) else " " * 11
                med = row.get("median_s")
                med_s = f"{med:10.4f} s" if isinstance(med, (int, float)) else " " * 12
                print(f"  {row['name']:<58} {med_s} {ratio_s}  {row.get('note', '')}", flush=True)
        except Exception:  # noqa: BLE001 -- any failure of a benchmark is reported, not fatal to the others
            traceback.print_exc()
            failed.append(path.stem)
            rows.append({"bench": path.stem, "name": "FAILED", "note": traceback.format_exc(limit=3)})
        print(f"   ({time.perf_counter() - t0:.1f} s)", flush=True)
    out = HERE / "results.json"
    ran = {row["bench"] for row in rows}
    if wanted and out.exists():  # a subset ran: keep the other benchmarks' rows from the last run
        try:
            kept = [row for row in json.loads(out.read_text()) if row.get("bench") not in ran]
        except (ValueError, TypeError, AttributeError):
            kept = []
        rows = kept + rows
    out.write_text(json.dumps(rows, indent=1, default=str))
    print(f"wrote {out}")
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
