"""Study: widen the default (span) interval to the likelihood-ratio interval where the reports rule the estimate out.

Why: under a kernel far wider than the truth's structure, ``auto``'s bootstrap intervals of local
statistics (ranges, CDF values, quantiles) miss (README, "Intervals": 1-74 % on the Gaussian
setting of ``bench_coverage.py``), because the bootstrap sees only the estimate's own variability,
not its smoothing bias.  The likelihood-ratio interval (``est.profile``) assumes nothing and covers
there, but it is several to 27 times wider on smooth truths.  The data can tell one thing: whether
the estimate itself lies outside its own LR interval (the reports disfavour it at the level), which
``sparseldp estimate`` already warns about.  Rules scored here, per statistic and repetition:

* ``span``: the default interval alone;
* ``lr``: the likelihood-ratio interval alone;
* ``ruled``: the span, or the hull of the span and the LR interval where the estimate lies outside the
  LR interval;
* ``leaves``: the span, or that hull where the span is not inside the LR interval.

The repetitions are ``bench_coverage.coverage``'s own (the same generator, fits and bootstrap
replicates, B = 200), so the ``span`` rows reproduce its numbers; the LR intervals draw no random
numbers.  Each repetition is appended to ``OUT`` (JSON lines) as it ends, so a partial run is usable.

Run: ``SPARSELDP_COVERAGE_FAMILY=gaussian python benchmarks/study_ruled_out.py [reps] [shape ...]``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

import numpy as np

import bench_coverage as bc

OUT = os.environ.get("SPARSELDP_STUDY_OUT", f"study_ruled_out_{bc.FAMILY}.jsonl")


def run(shape: str, reps: int, out) -> None:
    import sparseldp as sl
    from sparseldp.estimation import estimate_frequencies
    from sparseldp.estimation.intervals import bootstrap

    from sparseldp.sampling import sample

    mech = sl.design(bc.FAMILY, eps=1, delta=1e-6, H=5).mechanism
    p = bc.population(shape)
    stat_list = bc._stats(shape, p)
    truth = bc._truth(p, stat_list)
    gen = bc.draws("auto", shape)
    for rep in range(reps):
        x = gen.choice(p.size, size=bc.N, p=p)
        y = sample(mech, x, rng=gen)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            est = estimate_frequencies(y, mech, domain=(0, p.size - 1), method="auto", return_info=True)
            bs = bootstrap(est, mech, B=bc.B, rng=gen)
            t1 = time.perf_counter()
            prof = est.profile(mech)
            value = bc._truth(est.p, stat_list)
            row = {"shape": shape, "rep": rep, "reg": est.regularization, "stats": {}}
            for name, kw in stat_list:
                stat = bc._stat_of(name)
                row["stats"][name] = {"truth": float(truth[name]), "value": float(value[name]),
                                      "span": [float(v) for v in bs.interval(stat, 0.95, kind="span", **kw)],
                                      "lr": [float(v) for v in prof.interval(stat, 0.95, **kw)]}
            row["t_bootstrap"], row["t_lr"] = t1 - t0, time.perf_counter() - t1
        out.write(json.dumps(row) + "\n")
        out.flush()


def score(path: str) -> None:
    """Coverage (%) and mean width of each rule, per shape and statistic, from the JSON lines at ``path``."""
    rows = [json.loads(line) for line in open(path)]
    for shape in dict.fromkeys(r["shape"] for r in rows):
        rs = [r for r in rows if r["shape"] == shape]
        print(f"{shape}: {len(rs)} repetitions")
        for name in rs[0]["stats"]:
            cells = {rule: [] for rule in ("span", "lr", "ruled", "leaves")}
            fired = {"ruled": 0, "leaves": 0}
            for r in rs:
                s = r["stats"][name]
                t, v, (a, b), (c, d) = s["truth"], s["value"], s["span"], s["lr"]
                slack = 1e-12 * max(1.0, abs(v))
                hull = (min(a, c), max(b, d))
                out_ruled = not (c - slack <= v <= d + slack)
                out_leaves = not (c - slack <= a and b <= d + slack)
                fired["ruled"] += out_ruled
                fired["leaves"] += out_leaves
                for rule, (lo, hi) in (("span", (a, b)), ("lr", (c, d)), ("ruled", hull if out_ruled else (a, b)),
                                       ("leaves", hull if out_leaves else (a, b))):
                    cells[rule].append((lo <= t <= hi, hi - lo))
            parts = []
            for rule, cs in cells.items():
                hits = np.mean([h for h, _ in cs]) * 100
                width = np.mean([w for _, w in cs])
                extra = f" fired {fired[rule]}" if rule in fired else ""
                parts.append(f"{rule} {hits:5.1f}% (w {width:.4g}{extra})")
            print(f"  {name:<14} " + " | ".join(parts))


if __name__ == "__main__":
    if sys.argv[1:2] == ["score"]:
        for path in sys.argv[2:]:
            score(path)
        sys.exit()
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    shapes = sys.argv[2:] or bc.SHAPES
    with open(OUT, "a") as out:
        for shape in shapes:
            run(shape, reps, out)
