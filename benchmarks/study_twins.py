"""Can *any* estimator meet the battery's per-case target?  A two-point (Le Cam) study of its cases.

Issue 9 asks that ``auto`` be within ``1.15 x best + 0.002`` of the best of
{MLE, EMS, discrepancy-stopped EM} on TV and W1 in every case of the battery
(``bench_estimators``; ``study_selection`` scores rules against it).  This
study asks whether a rule that reads the reports can do that at all.

For a case with truth ``t`` (the histogram of the inputs, ``n`` reports, the
report law ``q = Q^T t``) it looks for a *twin*: another input distribution
``u`` whose report law ``r = Q^T u`` is nearly the same.  The ``n`` reports
of the case and ``n`` i.i.d. reports from ``r`` then have laws within total
variation ``tau <= sqrt(1 - BC^(2n))``, ``BC = sum_y sqrt(q_y r_y)`` (the
Bhattacharyya coefficient; Le Cam's inequality), so any estimator ``T`` (any
function of the reports) satisfies, for every set ``E`` of estimates,
``|P_t(T in E) - P_u(T in E)| <= tau``.  Write ``a_t`` and ``a_u`` for the
target's allowances in the two cases (``1.15 x`` the best fixed method's
error + 0.002, from one simulation of each).  When no distribution is within
``a_t`` of ``t`` and within ``a_u`` of ``u`` (in TV and W1 both: a linear
program; for instance when ``TV(t, u) > a_t^TV + a_u^TV``), the two target
regions are disjoint, ``P_t(T meets t's) <= P_u(T misses u's) + tau``, and
hence for every estimator

    P_t(meets the target at t) + P_u(meets the target at u) <= 1 + tau:

on one of the two its chance of meeting the target is at most ``(1 + tau) /
2``.  The twin need not be a case of the battery; the point is that the
battery's cases sit among truths the reports cannot tell apart, so meeting
the target in a case, where such a pair exists, is partly a matter of which
of the two the battery happened to contain.

Twins tried for each case (``u`` renormalized; report laws over all outputs):

* ``ems w on n q``: EMS with the weights of ``auto``'s path (1/4, 1/8, 1/32)
  run to its fixed point on the noise-free counts ``n q`` (a smoothed
  deconvolution of the exact report law: far from ``t`` where ``t`` has
  atoms, close in the law of the reports where the kernel is wide);
* ``em T on n q``: ``T`` plain EM steps from the uniform start on ``n q``
  (T = 10, 100, 1000, 10^4), an early-stopped, smooth approximation of ``t``;
* ``member ...``: the members of ``auto``'s path fitted on the case's own
  reports (the record's ``members``: what the estimators actually returned).

Each candidate is moved toward ``t`` along the segment (bisection) until its
``tau`` is at most ``TAU_MAX`` (0.5; ``STUDY_TWINS_TAU``).  The
``SIMULATE`` (3) candidates farthest beyond ``t``'s allowance are simulated
once at ``u`` (``n`` report counts drawn directly, seeded; the MLE, EMS and
the discrepancy-stopped EM fitted on them), and the two target regions are
intersected by a linear program (TV is half the L1 distance, W1 the L1
distance of the CDFs).  A case is *ambiguous* when some twin's region is
disjoint from the case's: then every estimator meets the target there or at
its twin with probability at most ``(1 + tau) / 2 <= 0.75`` on one of the two.

Caveats: the reports are taken as i.i.d. from ``q`` (the battery draws the
inputs i.i.d. from the population and measures errors against their
histogram ``t``); the allowances come from one simulation each, as the
battery's do; ``tau`` is an upper bound, which only makes the conclusion
conservative; a case with no conflicting twin in this family is not shown
to be attainable.

Run: ``STUDY_TWINS_RECORDS=path python benchmarks/study_twins.py`` with
``path`` the pickle that ``study_selection.py`` keeps
(``STUDY_SELECTION_CACHE``; the same ``STUDY_SEED_BASE``);
``STUDY_TWINS_CASES=i,j,...`` restricts it to some cases.  About 5 minutes
on one core.  Result of the runs on 2026-11-29:

* the battery's draw (seed base 1000): 34 ambiguous cases (7 with ``tau <=
  0.2``), ``auto`` in target in 26 of them; 8 of its 28 misses are among
  them (cases 56, 68, 84, 144, 148, 157, 172, 173), the other 20 have no
  conflicting twin in this family;
* a fresh draw (``STUDY_SEED_BASE=5000``): 25 ambiguous cases, ``auto`` in
  target in 17; 8 of its 31 misses are among them;
* the battery's draw again with ``auto``'s stop at the expected deviance (same day, the records
  rebuilt): 33 ambiguous cases (2 with ``tau <= 0.2``), ``auto`` in target in 24; 9 of its 26
  misses are among them (56, 68, 84, 144, 148, 155, 157, 172, 173).

So no estimator can meet the per-case target in every case reliably, while
most of ``auto``'s misses are not proven unavoidable (docs/estimation.md,
"Can any estimator meet the per-case target?").
"""

from __future__ import annotations

import math
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TAU_MAX = float(os.environ.get("STUDY_TWINS_TAU", "0.5"))
EM_STEPS = (10, 100, 1000, 10_000)
# Twins simulated per case (those farthest beyond the case's allowance).
SIMULATE = 3


def _law(model, p):
    """The report law ``Q^T p`` over all the model's outputs (sums to 1)."""
    q = np.maximum(np.asarray(model.unscaled().T @ p).ravel(), 0.0)
    return q / q.sum()


def _tau(q, r, n):
    """Le Cam's bound on the TV distance between ``n`` i.i.d. reports from ``q`` and from ``r``."""
    bc = float(np.sqrt(q * r).sum())
    log_bc2n = 2.0 * n * math.log(min(bc, 1.0)) if bc > 0 else -math.inf
    return math.sqrt(max(0.0, -math.expm1(log_bc2n)))


def _toward(model, q, n, t, u):
    """The point ``t + theta (u - t)`` with the largest ``theta`` in [0, 1] whose ``tau`` is at most
    :data:`TAU_MAX` (bisection: the Hellinger distance from ``q`` grows along the segment)."""
    if _tau(q, _law(model, u), n) <= TAU_MAX:
        return u
    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if _tau(q, _law(model, t + mid * (u - t)), n) <= TAU_MAX:
            lo = mid
        else:
            hi = mid
    return t + lo * (u - t)


def _noise_free_twins(model, q, n):
    """Twins fitted to the exact report law: EMS fixed points and early-stopped EM on ``n q``."""
    from sparseldp.estimation.frequencies import _fit
    from sparseldp.estimation.solvers import _em_run

    c_all = n * q
    twins = {}
    for w in (0.25, 0.125, 0.03125):
        twins[f"ems {w:g} on n q"] = _fit(model, c_all, "ems", 1e-8, 50_000, 1, w).p
    obs = np.flatnonzero(c_all > 0)
    A, AT = model.fast_columns(obs)
    P = np.full((1, model.k), 1.0 / model.k)
    done = 0
    for T in EM_STEPS:
        P = _em_run(A, AT, P, c_all[obs][None, :], T - done)
        done = T
        twins[f"em {T} on n q"] = P[0] / P[0].sum()
    return twins


def _fixed_errors(model, mech, k, u, n, seed):
    """One simulation at truth ``u``: errors (TV, W1) of the MLE, EMS and the stopped EM, by name."""
    from bench_estimators import _errors, _stopped_em_counts
    from sparseldp.estimation import ReportCounts, estimate_frequencies_full

    counts = np.random.default_rng(seed).multinomial(n, _law(model, u))
    rc = ReportCounts(int(model.outputs[0]), counts)
    res = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for m in ("em", "ems"):
            res[m] = _errors(estimate_frequencies_full(rc, mech, domain=(0, k - 1), method=m).p, u)
    res["stopped"] = _errors(_stopped_em_counts(model, counts.astype(float)), u)
    return res


def _common_estimate(t, a_t, u, a_u) -> bool:
    """Whether some distribution meets both targets: TV and W1 within ``a_t`` of ``t`` and within ``a_u``
    of ``u`` (a linear program; TV is half the L1 distance, W1 the L1 distance of the CDFs)."""
    from scipy.optimize import linprog
    from scipy.sparse import bmat, eye, csr_array, tril

    k = t.size
    I = eye(k, format="csr")
    L = tril(np.ones((k, k)), format="csr")  # cumulative sums
    Z = csr_array((k, k))
    # variables: x, then the absolute deviations a (x - t), b (x - u), e (CDF - t's), f (CDF - u's)
    blocks, rhs = [], []
    for j, (M, ref) in enumerate(((I, t), (I, u), (L, L @ t), (L, L @ u))):
        row = [M] + [Z] * 4
        row[1 + j] = -I
        blocks.append(row)
        rhs.append(ref)  # M x - dev <= ref
        row = [-M] + [Z] * 4
        row[1 + j] = -I
        blocks.append(row)
        rhs.append(-ref)  # -(M x) - dev <= -ref
    ones = np.ones((1, k))
    budget = [2 * a_t[0], 2 * a_u[0], a_t[1], a_u[1]]
    for j, limit in enumerate(budget):
        row = [csr_array((1, k))] * 5
        row[1 + j] = csr_array(ones)
        blocks.append(row)
        rhs.append(np.array([limit]))
    A_ub = bmat(blocks, format="csr")
    b_ub = np.concatenate(rhs)
    A_eq = csr_array(np.concatenate([ones, np.zeros((1, 4 * k))], axis=1))
    res = linprog(np.zeros(5 * k), A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[1.0], bounds=(0, None),
                  method="highs")
    return res.status == 0


def _allow(res):
    best_tv = min(v[0] for v in res.values())
    best_w1 = min(v[1] for v in res.values())
    return 1.15 * best_tv + 0.002, 1.15 * best_w1 + 0.002


def analyse(d, case):
    """The twins of one record ``d`` (``study_selection.records()``) of battery case ``case`` =
    ``(name, mech, k, pop, n)``: a list of dicts, and whether the case is ambiguous."""
    from bench_estimators import _errors
    from sparseldp.estimation import _model

    _, mech, k, _, n = case
    t = d["truth"]
    model = _model(mech, (0, k - 1))
    q = _law(model, t)
    a_t = _allow({**{m: d["errs"][key] for m, key in (("em", ("mle", 0)), ("ems", ("ems", 0.25)),
                                                      ("stopped", ("stop", 1))) if key in d["errs"]},
                  **d.get("ref", {})})  # newer records: the reference stopped EM itself
    cands = _noise_free_twins(model, q, n)
    cands.update({f"member {key[0]} {key[1]:g}": p for key, p in d["members"].items()})
    out = []
    for name, u in cands.items():
        u = np.maximum(u, 0.0)
        u = _toward(model, q, n, t, u / u.sum())
        tau = _tau(q, _law(model, u), n)
        dist = _errors(u, t)
        out.append({"twin": name, "u": u, "tau": tau, "tv": dist[0], "w1": dist[1],
                    "margin": max(dist[0] / a_t[0], dist[1] / a_t[1])})
    # no estimate can meet both targets when the twin is farther than the two allowances together; the
    # allowances at a twin need a simulation: the SIMULATE twins farthest beyond this case's allowance
    ranked = sorted((r for r in out if r["margin"] > 1.0), key=lambda r: -r["margin"])
    for j, row in enumerate(ranked[:SIMULATE]):
        a_u = _allow(_fixed_errors(model, mech, k, row["u"], n, seed=7919 * d["i"] + j))
        row["a_u"] = a_u
        row["conflict"] = not _common_estimate(t, a_t, row["u"], a_u)
    return out, a_t


def main():
    sys.path.insert(0, HERE)
    import bench_estimators as BE
    import study_selection as S

    cache = os.environ.get("STUDY_TWINS_RECORDS")  # a copy of study_selection's cache: its cases only
    if cache:
        import pickle

        done = pickle.load(open(cache, "rb"))
        recs = [done[i] for i in sorted(done)]
    else:
        recs = S.records()
    cases = list(BE._cases())
    only = os.environ.get("STUDY_TWINS_CASES")
    wanted = None if not only else {int(v) for v in only.split(",")}
    amb = {True: [0, 0], False: [0, 0]}  # ambiguous? -> [auto in target, cases]
    for d in recs:
        i = d["i"]
        if wanted is not None and i not in wanted:
            continue
        hit = S.meets(d, S.rule_auto(d))
        rows, a_t = analyse(d, cases[i])
        conflicts = [r for r in rows if r.get("conflict")]
        best = min(conflicts, key=lambda r: r["tau"]) if conflicts else None
        amb[best is not None][0] += hit
        amb[best is not None][1] += 1
        tag = "in target" if hit else "MISSED   "
        if best is None:
            print(f"[{i:3d}] {tag} {d['name']:<44} no conflicting twin with tau <= {TAU_MAX}", flush=True)
        else:
            print(f"[{i:3d}] {tag} {d['name']:<44} twin '{best['twin']}': tau {best['tau']:.3f}, "
                  f"TV {best['tv']:.3f} W1 {best['w1']:.3f}; allowances here {a_t[0]:.3f}/{a_t[1]:.3f}, "
                  f"there {best['a_u'][0]:.3f}/{best['a_u'][1]:.3f}", flush=True)
    print(f"ambiguous cases (a conflicting twin with tau <= {TAU_MAX}): {amb[True][1]}, auto in target in "
          f"{amb[True][0]}; the others: {amb[False][1]}, auto in target in {amb[False][0]}")


if __name__ == "__main__":
    main()
