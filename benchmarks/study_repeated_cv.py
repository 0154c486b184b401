"""Study: does ``method="auto"`` choose better with its held-out scores averaged over two splits of the reports?

Why: ``auto`` scores its path on one 5-fold split of the counts (hypergeometric thinning seeded from the counts).
Which member it takes depends on that split as well as on the reports; repeated cross-validation (the scores of
several random splits averaged) lowers that part of the choice's variance, at the price of the fold fits of
each further split.  Whether that helps the battery's per-case target is an empirical question.

Per case of the battery (``bench_estimators._cases()``, ``STUDY_SEED_BASE`` as in ``study_selection.py``, 1000
the battery's own draw): ``auto`` as it is (split A), ``auto`` on another split alone (B: the split's seed plus
one), and ``auto`` on both (the held-out scores of A and B side by side, each held-out count halved, so the
totals are the two splits' mean and the standard errors those of one split; fold spreads and centres averaged;
the MLE kept only where both splits fit it), with ``em``, ``ems`` and the discrepancy-stopped EM for the
target (``bench_estimators._allowance``).  Each variant is ``estimate_frequencies_full(method="auto")`` with
``auto._select`` replaced, so the refit on all counts is the production one.

Run: ``python benchmarks/study_repeated_cv.py [part parts]`` (cases ``i`` with ``i % parts == part``; prints one
line per case and a summary; ``STUDY_SEED_BASE=b`` for a fresh draw).
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

import numpy as np

import bench_estimators as BE

SEED_BASE = int(os.environ.get("STUDY_SEED_BASE", "1000"))


def _variants():
    """``{name: replacement of auto._select}``: the split as it is (A), the other alone (B), both (AB)."""
    from sparseldp.estimation import auto

    select, seed = auto._select, auto._seed

    def with_seed(shift):
        def run(model, c_all, max_iter, folds=auto._FOLDS):
            auto._seed = lambda c: seed(c) + shift
            try:
                return select(model, c_all, max_iter, folds)
            finally:
                auto._seed = seed
        return run

    def both(model, c_all, max_iter, folds=auto._FOLDS):
        a = select(model, c_all, max_iter, folds)
        b = with_seed(1)(model, c_all, max_iter, folds)
        keys = [key for key in a[0] if key in b[0]]
        scores = {key: np.hstack([a[0][key], b[0][key]]) for key in keys}
        H = 0.5 * np.hstack([a[1], b[1]])
        spreads = {key: 0.5 * (a[3][key] + b[3][key]) for key in keys}
        centres = {key: 0.5 * (a[4][key] + b[4][key]) for key in keys}
        return scores, H, a[2] + b[2], spreads, centres

    return {"A": select, "B": with_seed(1), "AB": both}


def _case(i, name, mech, k, pop, n):
    from sparseldp.estimation import ConvergenceWarning, auto, estimate_frequencies_full
    from sparseldp.sampling import sample

    gen = np.random.default_rng(SEED_BASE + i)
    counts = gen.multinomial(n, pop)
    y = sample(mech, np.repeat(np.arange(k), counts), rng=gen)
    truth = counts / n
    res, choice, secs = {}, {}, {}
    original = auto._select
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        for m in ("em", "ems"):
            res[m] = BE._errors(estimate_frequencies_full(y, mech, domain=(0, k - 1), method=m).p, truth)
        res["stopped"] = BE._errors(BE._stopped_em(y, mech, (0, k - 1)), truth)
        for v, sel in _variants().items():
            auto._select = sel
            try:
                t0 = time.perf_counter()
                est = estimate_frequencies_full(y, mech, domain=(0, k - 1), method="auto")
                secs[v] = time.perf_counter() - t0
            finally:
                auto._select = original
            res[v] = BE._errors(est.p, truth)
            choice[v] = est.regularization
    ratio = {v: BE._allowance({**{m: res[m] for m in BE.REFERENCE}, "auto": res[v]}) for v in _variants()}
    return {"i": i, "name": name, "errors": res, "choice": choice, "ratio": ratio, "seconds": secs}


def main(argv):
    part, parts = (int(argv[0]), int(argv[1])) if len(argv) >= 2 else (0, 1)
    rows = []
    for i, (name, mech, k, pop, n) in enumerate(BE._cases()):
        if i % parts != part:
            continue
        row = _case(i, name, mech, k, pop, n)
        rows.append(row)
        print(json.dumps(row), flush=True)
    for v in ("A", "B", "AB"):
        ok = sum(r["ratio"][v] <= 1.0 for r in rows)
        tv = np.mean([r["errors"][v][0] for r in rows])
        w1 = np.mean([r["errors"][v][1] for r in rows])
        s = np.median([r["seconds"][v] for r in rows])
        print(f"# {v}: {ok} of {len(rows)} in target, mean TV {tv:.4f}, mean W1 {w1:.3f}, median {s:.2f} s",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
