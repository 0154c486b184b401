"""The battery's question on a domain ten times larger: is ``auto`` as good on 1,000 values?

``bench_estimators``' battery (0..99 and 0..19) is where ``auto``'s rule was chosen; there every channel
is dense and its path has the EM flow past the cap.  On 1,000 values the channels are FFT or sparse
ones, the path has no flow members, and nothing of the rule was tuned there.  This study runs the
battery's eight shapes scaled to 0..999 (``bench_estimators._shapes(1000)``) through the same
mechanisms (``bench_estimators.TARGETS``' first target, both families) at n = 10^5, 10^6 and 10^7, one
seeded simulation per case (seeds of their own: 7000 + case), and reports TV and W1 of ``auto``, the
MLE, EMS and the discrepancy-stopped EM, with the battery's per-case target (``auto`` within 1.15x +
0.002 of the best of the three fixed methods on both).

Usage: ``python benchmarks/study_large_domain.py [out.json]`` (about 15-25 minutes on one core).
``STUDY_LARGE_K`` sets the domain size (default 1000), ``STUDY_LARGE_NS`` the report counts
(comma-separated exponents, default 5,6,7).
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_estimators as bx  # noqa: E402

K = int(os.environ.get("STUDY_LARGE_K", "1000"))
NS = tuple(10 ** int(e) for e in os.environ.get("STUDY_LARGE_NS", "5,6,7").split(","))


def cases():
    import sparseldp as sl

    eps, delta, H = bx.TARGETS[0]
    for fam in bx.FAMILIES:
        mech = sl.design(fam, eps=eps, delta=delta, H=H).mechanism
        for shape, pop in bx._shapes(K).items():
            for n in NS:
                yield f"{shape} k={K} n=1e{int(np.log10(n))} {fam} eps={eps:g} H={H}", mech, pop, n


def main(out=None):
    from sparseldp.sampling import sample

    rows = []
    for i, (name, mech, pop, n) in enumerate(cases()):
        gen = np.random.default_rng(7000 + i)
        counts = gen.multinomial(n, pop)
        truth = counts / n
        y = sample(mech, np.repeat(np.arange(K), counts), rng=gen)
        t0 = time.perf_counter()
        res, choice, secs = bx._fit_all(y, mech, (0, K - 1), truth)
        excess = bx._allowance(res)
        rows.append({"i": i, "name": name, "choice": choice, "res": res, "excess": excess, "seconds": secs})
        errs = "  ".join(f"{m} {res[m][0]:.3f}/{res[m][1]:.2f}" for m in bx.METHODS)
        print(f"[{i}] {name}: {errs}; auto chose {choice}, {excess:.2f} x allowance"
              f"{'  MISSES' if excess > 1 else ''} (auto {secs['auto']:.1f} s, all {time.perf_counter() - t0:.1f} s)",
              flush=True)
    within = sum(r["excess"] <= 1 for r in rows)
    print(f"auto within the target in {within} of {len(rows)} cases")
    for m in bx.METHODS:
        tv = np.mean([r["res"][m][0] for r in rows])
        w1 = np.mean([r["res"][m][1] for r in rows])
        print(f"mean {m}: TV {tv:.4f}  W1 {w1:.3f}")
    if out:
        with open(out, "w") as f:
            json.dump(rows, f)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
