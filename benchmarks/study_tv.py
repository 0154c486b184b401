"""Would total-variation-penalized members help ``method="auto"``?  An offline study (not adopted).

auto's path smooths (EMS) or stops early (EM); both blur jumps and atoms, and
the battery's misses are mostly atoms and steps.  The classical estimator that
keeps jumps while it flattens noise is the TV-penalized likelihood (the fused
lasso of density deconvolution):

    maximize  (1/n) sum_y c_y log q_y - alpha sum_i |p_{i+1} - p_i|   over the simplex,  q = Q^T p,

with ``alpha = a / sqrt(n)`` (``n`` the reports fit; the noise of the per-report
log-likelihood's gradient shrinks as ``1 / sqrt(n)``) for ``a`` in
:data:`WEIGHTS`, each warm-started from the previous one.  It is solved here by
a barrier Newton method (:func:`tv_mle`): the TV term smoothed as
``sqrt(t^2 + e^2) - e``, a log barrier ``mu sum log p`` for positivity, Newton
steps with the constraint ``sum p = 1`` and a backtracking line search, ``mu``
and ``e`` lowered by 10 from stage to stage.  The same problem solved by EM-TV
(Sawatzky et al. 2008: an EM step, then a weighted TV denoising) gave the same
fits where EM-TV converged (a step truth on 100 values, 10^5 reports: TV
errors 0.019 / 0.024 / 0.051 / 0.131 / 0.313 by both), but EM-TV is as slow
as EM: 550-9,800 iterations per penalty on two Laplace cases, beyond 10^4 for
most penalties under a wide Gaussian kernel, and SQUAREM (with the penalized
likelihood as its safeguard) converged less often, not more.

For every case of the selection study's records (``study_selection.records``,
the battery's 176 simulations, or a fresh draw with ``STUDY_SEED_BASE``) the
members are fit on the five training folds and on all the counts, scored by
the held-out log-likelihood in the units of the study's other members, and
auto's rule (``study_selection.rule_auto``) is rerun with the TV members placed
at several points of the path.

Result (2026-11-28; the battery's draw and the fresh draws 5000, 9000 and
13000, 176 cases each; cases in target / mean TV / mean W1):

==========================  ==================  ==================  ==================  ==================
path                        draw 1000           draw 5000           draw 9000           draw 13000
==========================  ==================  ==================  ==================  ==================
auto (no TV members)        148 / .1527 / .701  145 / .1576 / .654  149 / .1455 / .636  149 / .1486 / .655
EMS, TV, stop, flow, MLE    127 / .1688 / .760  122 / .1754 / .737  140 / .1541 / .666  130 / .1645 / .700
EMS, stop, TV, flow, MLE    148 / .1498 / .680  144 / .1601 / .636  153 / .1467 / .614  145 / .1499 / .645
EMS, stop, flow, TV, MLE    147 / .1495 / .686  144 / .1581 / .631  152 / .1497 / .667  145 / .1489 / .643
==========================  ==================  ==================  ==================  ==================

The TV members are excellent on piecewise-constant truths: a step on 100
values at 10^7 reports (Laplace, eps = 2, H = 20), TV 0.002 against the best
fixed method's 0.026 (EMS) and auto's 0.081; zero-inflated counts at 10^5
reports, 0.082 against 0.106 (the stopped EM).  But they also hold the best
held-out likelihood where their error is worse: smooth truths under the wide
Gaussian kernels, TV 0.16-0.19 where the stopped EM has 0.004 at 10^7
reports (the penalty's staircase); and by moving the best they push EMS
members out of the slack.  Placed before the stop members (as more
regularized than a stop), the rule loses 9-23 cases; placed right after them,
it changes the cases in target by 0 / -1 / +4 / -4, lowers mean W1 by
1.5-3.5% on each draw and raises mean TV on three of the four (by up to 1.6%;
-1.9% on the battery's draw).  EM-TV stopped at 2,000 iterations per penalty (members that then
depend on the cap), after the stop members: 149 / 144 cases, mean TV 0.149 /
0.156, W1 0.685 / 0.649 (draws 1000 and 5000).  Not adopted: 1.5-3.5% in
mean W1 and no case gained over four draws, against fits that cost a
median 8 s per case here (1-34 s; five penalties, five folds and all the
counts, Newton steps in eight barrier stages) beside auto's median of 1.95 s
for its whole selection, and a bootstrap that would need Newton refits per
replicate.  Nor is this solver trustworthy enough to ship: warm-started penalties
run through two or four barrier stages instead of eight (up to 3.1x fewer Newton
steps) move some members by up to 2x in TV error (a step truth, 10^5 reports,
a = 1/8: 0.131 -> 0.072), so its stages stop short of the penalized optimum in
places; a production solver needs a certificate of its own (the optimality
conditions checked on the result, as the MLE's gap is).

Run: ``STUDY_SELECTION_CACHE=path OPENBLAS_NUM_THREADS=1 python
benchmarks/study_tv.py`` (the study's records, computed first if the cache is
empty; the TV fits take about 30 minutes per draw on a shared 2-core machine;
``STUDY_TV_CACHE=path`` keeps them).  Some members stop at a stage's Newton cap
(60 steps), where BLAS's summation order moves them: the table was computed
with one BLAS thread.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections import Counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import study_selection as S  # noqa: E402

# Penalties a in alpha = a / sqrt(n), most penalty first.
WEIGHTS = (8.0, 2.0, 0.5, 0.125, 0.03125)
# Barrier stages: mu = MU0 / k x 10^-j, and the TV smoothing e = max(mu, E_FINAL).
MU0, STAGES, E_FINAL = 1e-3, 8, 1e-8
# Newton steps per stage at most, and the Newton decrement (half its square) at which a stage ends.
NEWTON_MAX, DECREMENT = 60, 1e-11


def tv_mle(Q, c, alpha, p0=None):
    """The TV-penalized MLE on the channel ``Q`` (values x observed outputs, dense) from the counts ``c``;
    returns ``(p, Newton steps)``.  Module docstring: barrier Newton on the smoothed penalty."""
    k = Q.shape[0]
    w = c / c.sum()
    has = w > 0
    Qh, wh = Q[:, has], w[has]
    p = np.full(k, 1.0 / k) if p0 is None else np.maximum(p0, 1e-12) / np.maximum(p0, 1e-12).sum()
    steps = 0
    diag, up = np.arange(k), np.arange(k - 1)
    for j in range(STAGES):
        mu = MU0 / k * 10.0 ** -j
        e = max(mu, E_FINAL)

        def phi(x):
            q = Qh.T @ x
            if np.any(q <= 0) or np.any(x <= 0):
                return np.inf
            t = np.diff(x)
            return -(wh @ np.log(q)) + alpha * (np.sqrt(t * t + e * e) - e).sum() - mu * np.log(x).sum()

        f = phi(p)
        for _ in range(NEWTON_MAX):
            q = Qh.T @ p
            t = np.diff(p)
            s = np.sqrt(t * t + e * e)
            h1, h2 = t / s, e * e / s ** 3
            g = -(Qh @ (wh / q))
            g[:-1] -= alpha * h1
            g[1:] += alpha * h1
            g -= mu / p
            B = Qh * (np.sqrt(wh) / q)[None, :]
            Hs = B @ B.T
            dg = np.zeros(k)
            dg[:-1] += h2
            dg[1:] += h2
            Hs[diag, diag] += alpha * dg + mu / p ** 2
            Hs[up, up + 1] += -alpha * h2
            Hs[up + 1, up] += -alpha * h2
            try:
                L = np.linalg.cholesky(Hs)

                def solve(r):
                    return np.linalg.solve(L.T, np.linalg.solve(L, r))
            except np.linalg.LinAlgError:
                def solve(r):
                    return np.linalg.lstsq(Hs, r, rcond=None)[0]
            Hg, H1 = solve(g), solve(np.ones(k))
            dp = -(Hg - Hg.sum() / H1.sum() * H1)  # keeps sum p = 1
            dec = -float(g @ dp)
            steps += 1
            if dec / 2 <= DECREMENT:
                break
            neg = dp < 0
            step = min(1.0, 0.99 * float(np.min(-p[neg] / dp[neg]))) if neg.any() else 1.0
            while True:
                fn = phi(p + step * dp)
                if fn <= f - 0.25 * step * dec or step < 1e-12:
                    break
                step *= 0.5
            if step < 1e-12:
                break
            p, f = p + step * dp, fn
    return p / p.sum(), steps


def tv_path(Q, c):
    """Every member ``("tv", a)`` on the counts ``c``, warm-started down :data:`WEIGHTS`."""
    n = c.sum()
    p, out = None, {}
    for a in WEIGHTS:
        p, _ = tv_mle(Q, c, a / np.sqrt(n), p0=p)
        out[("tv", a)] = p
    return out


def tv_record(d):
    """The TV members of one study record: fold fits, held-out scores (in the units of the record's
    scores: the column scaling recovered from its EMS member) and errors of the fits on all counts."""
    import bench_estimators as BE

    Q, H = d["Q"], d["H"]
    C = H.sum(axis=1, keepdims=True) - H
    folds = {("tv", a): np.empty((Q.shape[0], C.shape[1])) for a in WEIGHTS}
    for j in range(C.shape[1]):
        for key, p in tv_path(Q, C[:, j]).items():
            folds[key][:, j] = p
    ref = ("ems", 0.25)
    shift = np.log(np.maximum(Q.T @ d["folds"][ref], 1e-300)) - d["scores"][ref]
    scores = {key: np.log(np.maximum(Q.T @ P, 1e-300)) - shift for key, P in folds.items()}
    full = tv_path(Q, H.sum(axis=1))
    return {"folds": folds, "scores": scores, "errs": {key: BE._errors(p, d["truth"]) for key, p in full.items()}}


def with_tv(d, t):
    """The study record ``d`` with the TV members ``t`` (:func:`tv_record`) added."""
    return {**d, "scores": {**d["scores"], **t["scores"]}, "folds": {**d["folds"], **t["folds"]},
            "errs": {**d["errs"], **t["errs"]}}


def main():
    from sparseldp.estimation import auto

    cache = os.environ.get("STUDY_TV_CACHE")
    done = pickle.load(open(cache, "rb")) if cache and os.path.exists(cache) else {}
    recs = S.records()
    for d in recs:
        if d["i"] not in done:
            done[d["i"]] = tv_record(d)
            if cache:
                pickle.dump(done, open(cache, "wb"))
            print(f"  [{d['i']}] {d['name']}", file=sys.stderr, flush=True)
    path = auto._PATH
    part = {kind: tuple(key for key in path if key[0] == kind) for kind in ("ems", "stop", "flow", "mle")}
    tv = tuple(("tv", a) for a in WEIGHTS)
    orders = {
        "auto (no TV members)": path,
        "EMS, TV, stop, flow, MLE": part["ems"] + tv + part["stop"] + part["flow"] + part["mle"],
        "EMS, stop, TV, flow, MLE": part["ems"] + part["stop"] + tv + part["flow"] + part["mle"],
        "EMS, stop, flow, TV, MLE": part["ems"] + part["stop"] + part["flow"] + tv + part["mle"],
    }
    print(f"{'path':30s} in target  mean TV  mean W1   choices")
    try:
        for name, order in orders.items():
            auto._PATH = order
            errs, hits, kinds = [], 0, Counter()
            for d in recs:
                dd = with_tv(d, done[d["i"]])
                pick = S.rule_auto(dd)
                errs.append(S.errors(dd, pick))
                hits += S.meets(dd, pick)
                kinds[pick[0]] += 1
            e = np.array(errs)
            print(f"{name:30s} {hits:9d}  {e[:, 0].mean():.4f}   {e[:, 1].mean():.4f}   {dict(kinds)}")
    finally:
        auto._PATH = path


if __name__ == "__main__":
    main()
