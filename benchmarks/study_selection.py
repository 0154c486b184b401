"""Which rule should ``method="auto"`` use to pick a member of its path?  An offline study.

For every case of the estimator battery (``bench_estimators._cases``: 176
cases, the same seeded simulations) this script fits every member of auto's
path (``auto._PATH``) on the 5 training folds (as auto's selection does) and
on all the counts, and records the held-out log-likelihoods, the fold fits
and each member's TV and W1 error against the truth.  It then scores
selection rules by the battery's target: the chosen member is within
``1.15 x best + 0.002`` of the best of {MLE, EMS, discrepancy-stopped EM}
on both TV and W1, and by the mean errors.

Rules compared:

* ``oracle``: any member that meets the target (the path's limit);
* ``c SE``: the most regularized member whose held-out log-likelihood is
  within ``c`` standard errors of the best (``c = 0`` is the maximum; auto
  uses ``c = 1``, the one-standard-error rule);
* one SE without the MLE when the held-out log-likelihood falls from 4 to 8
  times the discrepancy stop by more than half a standard error
  (``auto._turned_down``; the MLE is then not fitted at all).  It applies in
  40 cases of this draw and 45 of the fresh one, and changes no choice in
  either;
* auto's rule (``auto._choose`` with the fold spreads): the same with a slack
  of one SE or one nat, whichever is more, and the MLE instead of that
  choice when the MLE is within that slack of the best too and its
  training-fold fits spread (``auto._fold_spread``) at most 1.25
  times the choice's; also with ratios 1, 1.1, 1.5 and 2;
* ``forward c``: from the most regularized member, move to a less
  regularized one only when it beats the current one by more than ``c`` SE;
* ``balancing kappa``: Lepski's balancing principle in the space of ``p``:
  the most regularized member ``j`` with ``TV(p_j, p_i) <= kappa (s_i + s_j)``
  for every less regularized ``i``, where ``s`` is the member's noise level
  estimated from its fold fits (mean pairwise TV / 0.79: two training sets
  of 4/5 share 3/5 of the reports); also restricted to the members within
  one SE (``1 SE + balancing``);
* ``quasi-optimality``: the member after which the path moves least in TV;
* ``risk``: an unbiased estimate of each member's error in the space of
  ``p`` (squared L2 of the probabilities, or of the CDF as a proxy for W1),
  its minimum or the most regularized member within one SE of it; also
  auto's choice overturned only when that estimate favours another member by
  more than 2 or 3 SE; and the same criterion computed with the truth
  (``fold fits nearest the truth``: what it could give if it were known);
* ``stacking``: the mixture of the members that maximizes the held-out
  likelihood (Yao, Vehtari, Simpson and Gelman 2018) instead of one member.

Since 2026-12-02 the records carry auto's atom-seeded stops (``("atoms", 0 / 1 / 2)``, ``estimation._atoms``:
their fold fits from the MLE's fold fits, their fits on all counts; a cached record from before gets them, or
their current version (:data:`ATOMS_VERSION`), on the next run), and ``auto._choose`` applies its own test (it replaces the choice made without it only where it
fits the held-out reports better).  The tables below are from runs before it; ``bench_estimators``' cases
with it are in docs/estimation.md ("The atom-seeded stop").

Run: ``python benchmarks/study_selection.py`` (about 25 minutes on a shared 2-core machine;
``STUDY_SELECTION_CACHE=path`` keeps the per-case fits in a pickle and
reuses them; ``STUDY_SEED_BASE=b`` seeds case ``i`` with ``b + i`` instead of
the battery's ``1000 + i``, a fresh draw of every case).  Result of the run on 2026-11-26 (176 cases):

=============================  =========  =======  =======
rule                           in target  mean TV  mean W1
=============================  =========  =======  =======
oracle                         174        0.132    0.62
0 SE (maximum)                 125        0.236    1.07
0.5 SE                         135        0.188    0.84
1 SE                           136        0.169    0.76
1 SE, MLE off once the path    136        0.169    0.76
turns down
the same, MLE if as stable     144        0.169    0.76
(ratio 1.25: auto)
1.5 SE                         131        0.174    0.82
2 SE                           126        0.187    0.89
forward 1                      137        0.169    0.77
balancing 1.5 (fold noise)     127        0.165    0.80
balancing 2                    118        0.161    0.83
1 SE + balancing 3             138        0.169    0.76
quasi-optimality within 1 SE   124        0.193    0.82
=============================  =========  =======  =======

The stability switch with ratios 1 / 1.1 / 1.5 / 2: 143 / 144 / 144 / 142.

Rerun on 2026-11-28 after the MLE gained its active-set Newton (``mle._active_newton``,
tried on sparse iterates): every row within 0.003 in mean TV of the table above, the same
counts in target (oracle 174, 0 SE 125, 1 SE 136, auto 144: mean TV 0.1694, W1 0.7649).

A fresh draw of every case (``STUDY_SEED_BASE=5000``, run on 2026-11-26)
ranks the rules the same way: oracle 175, 0 SE 122, 0.5 SE 136, 1 SE 135
(mean TV 0.184, W1 0.76), 1.5 SE 132, 2 SE 129, forward 1 135, balancing
1.5 117, 1 SE + balancing 3 135, quasi-optimality 120; auto 140 (TV 0.181,
W1 0.753; ratios 1-2: 138-140).  A second fresh draw (``STUDY_SEED_BASE=9000``,
untouched while the stability switch was chosen): oracle 175, 0 SE 130,
0.5 SE 140, 1 SE 143 (TV 0.1625, W1 0.686), 2 SE 131, balancing 1.5 124,
quasi-optimality 139; auto 146 (TV 0.1620, W1 0.682; ratios 1-2: 143-147).
A third fresh draw (``STUDY_SEED_BASE=13000``, also untouched): oracle 174,
0 SE 115, 0.5 SE 136, 1 SE 141 (TV 0.1613, W1 0.705), 2 SE 132, balancing
1.5 124, quasi-optimality 129; auto 146 (TV 0.1572, W1 0.696).  So the
one-SE rule's count is not a fit to one draw, nor are the others'
deficits, and the stability switch gained on all four (+8, +5, +3, +5).
A reverse switch, fixed before that last draw was made (a chosen MLE gives
way to the most regularized member within two SE whose fold spread is at
most a quarter of the MLE's), gained on the first three draws but lost on
the last (144 against 146, TV 0.1596 against 0.1572): not used.

2026-11-28: auto's path gained the EM continued past its 20,000-step cap
(``("flow", j)``, ``auto._em_flow``; module docstring of
:mod:`sparseldp.estimation.auto`), with the MLE taken against such a member
up to 6 times its fold spread (``auto._STABLE_RATIO_FLOW``, chosen on the
battery's draw and the 5000 and 9000 draws).  Auto with / without those
members (the row "the same, without the flow members"), cases in target, mean
TV, mean W1: battery's draw 144 / 144, 0.158 / 0.169, 0.714 / 0.765;
STUDY_SEED_BASE=5000: 142 / 140, 0.162 / 0.181, 0.664 / 0.751; 9000: 142 /
146, 0.159 / 0.162, 0.662 / 0.681; 13000 (untouched while the
ratio was chosen): 142 / 146, 0.161 / 0.157, 0.674 / 0.696.  The flow
members fix the MLE picks at 10^6-10^7 reports on smooth, bimodal and
spiky truths under wide Gaussian kernels (TV 0.30-0.89 -> 0.03-0.39) and
lose on point masses, where the flow gathers the atom too slowly (up to
six cases per draw, most from TV 0.01-0.15 to 0.65-0.80).

2026-11-28, later: the slack of auto's rule became one SE or one nat of
held-out log-likelihood, whichever is more (``auto._SLACK_NATS``; rows "the
same, slack 1 SE or t nats").  Neighbouring members predict the reports
alike, so the standard error of their difference can be a tenth of a nat
while the fits differ several-fold in TV.  Cases in target, mean TV, mean
W1, with the floor / without it (the row "ratio 1.25"): battery's draw 148 /
144, 0.153 / 0.158, 0.701 / 0.714; 5000: 145 / 142, 0.158 / 0.162, 0.654 /
0.664; 9000: 149 / 142, 0.146 / 0.159, 0.636 / 0.662; 13000: 149 / 142,
0.149 / 0.161, 0.655 / 0.674.  Floors of 0.25-3 nats all gained on each draw
(143-151 cases); 1 nat is the conventional threshold of weak evidence (a
likelihood ratio of e), taken as such, not tuned: 1.5 and 3 nats did as well
on these draws (worst draw 146 against 145).  With
the floor, the flow members gain on every draw (the row "without the flow
members" is the rule before both changes; auto with the floor and without
the flow members: 145 / 139 / 146 / 148).  The stability ratio was checked
again under the floor: 1, 1.1, 1.5 and 2 give 143-149 cases; 1.25 has the
most or ties for it on each draw.  A standard error from the five folds'
totals (``sqrt(K var_f D_f)``, which sees the training folds' variation)
instead of, or beside, the paired one, still with the one-nat floor, gave
146 / 146 / 147 / 147 and 148 / 147 / 147 / 149 cases with a higher mean W1
on every draw; alone, without the floor, 136-141: not used.

Members between the stop and the MLE were tried offline too (not kept):
EM accelerated by SQUAREM from the discrepancy stop, kept at the first
iterate whose training log-likelihood is within 64, 16, 4, 1 and 0.25 nats
of the MLE's.  Where the stop hits its 20,000-step cap they are far better
than every fixed method (smooth truth on 0..19, 10^7 reports, wide Gaussian:
TV 0.018 against 0.203 for the stop and 0.667 for the MLE), but the rule
seldom picks them there (the MLE stays more than one SE ahead), and on point
masses it picks them instead of the MLE: 133 of 176 in target with them on
the path (mean TV 0.172, W1 0.75) against 136 without.

Apart from the stability switch, no rule beats the one-standard-error rule
by more than the noise of one simulation per case, and every rule stays far
from the oracle: in the missed cases the member chosen and the members that
meet the target fit the held-out reports equally well (within one SE).  The
switch gains where the likelihood cannot tell and the fold fits can: a
less regularized member that moves no more between folds has no variance
to trade for its bias.  Auto's remaining misses (32, 36 and 30 on the three
draws) are mostly under the wide Gaussian kernels (18, 24 and 16 of them),
spread over every shape, where very different inputs give nearly the same
reports; in some the MLE wins the held-out likelihood by several SE and is
far worse in TV, which no likelihood rule can see.  The balancing rules, which
compare the estimates with their fold-to-fold variation, trade cases in
target for a lower mean TV (0.161-0.165) at a higher mean W1.

How little the reports say in those cases, measured independently of the
likelihood (2026-11-28, the battery's draw): the second moment of the input
has an unbiased estimate from the reports (``sum_y c_y f_y / n`` with ``Q f = x^2``
solved on the observed outputs, residual below 1e-9, the rows of ``Q`` taken
there and renormalized).  On the point masses missed under the
wide Gaussian kernels it is 75.1 +- 13.8 (k = 20, 10^4 reports, eps = 1;
truth 49), 65.2 +- 18.6 (k = 20, 10^5, eps = 2; truth 49) and 1377 +- 18.5
(k = 100, 10^5, eps = 2; truth 1369), while the stopped EM and the MLE, TV
0.81 / 0.44, 0.89 / 0.50 and 0.87 / 0.26 from the truth, have 53.2 / 53.6,
59.9 / 51.7 and 1367 / 1364: the two differ by less than one standard error
of what the reports can tell about them.  The MLE wins there because the
nonparametric MLE of a mixing distribution is discrete (Lindsay 1983), a
built-in preference for atoms that is right on a point mass and wrong on a
smooth truth, and no rule that reads the reports can check which holds.

A longer EMS path (2026-11-28, ``STUDY_EMS_WEIGHTS=7,9,11,13``: weights 2^-7
to 2^-13 after the stop members, each warm-started from the last; the
battery's draw).  In 101 of the 176 cases the stopped EM reaches its
20,000-step cap on the training folds, so its four members coincide and
nothing on the path lies between them and the MLE; the small weights fill
that gap (bimodal, k = 100, n = 10^7, Laplace eps = 2: TV 0.007 against 0.059
for the stopped EM and 0.240 for the MLE).  The oracle rises to 175 (mean TV
0.1326 against 0.1330), but the rules do not gain: auto's rule 144 (mean TV
0.1759, W1 0.7747, against 0.1694 and 0.7649 on the path above), 1 SE 136,
ratios 1 to 2: 143-145; ordered before the stop members 129; used only
where the stop is capped 143 (after the stop members) and 135 (before).  The new members win the held-out likelihood
on point masses where the MLE is right (k = 20, n = 10^5, Gaussian eps = 1:
TV 0.79 chosen against the MLE's 0.053) about as often as they help.  Not
adopted.

Rules that estimate the error of ``p`` itself (2026-11-28, the battery's draw;
"unbiased risk estimates" in the issue's words).  Each held-out fold's counts
``h_j``, inverted by generalized least squares (``u_j = B h_j / n_j`` with
``B Q^T = I``, weights ``1 / q`` from all the counts, eigenvalues of ``Q W Q^T``
below ``1e-12`` of the largest dropped), give an estimate of ``p`` that is
unbiased and independent of the training fit ``p_a^(-j)``, so ``sum_j
||p_a^(-j)||^2 - 2 <p_a^(-j), u_j>`` estimates member ``a``'s squared-L2 risk
(less ``||p||^2``) without bias, with an exact multinomial standard error;
the same with cumulative sums for the CDF.  Known exactly (the truth in place
of ``u_j``) the criterion would meet the target in 158 (probabilities) and 163
(CDF) of the 176 cases.  Estimated, it meets it in 72-96 (mean TV
0.26-0.32): the inversion multiplies the held-out fold's noise by the
channel's ill-conditioning, and the estimated differences, although
calibrated (against the exact ones: median ``|z|`` 0.91, 8-10% beyond 2),
are mostly noise.  As a veto on auto's choice (take the member of lowest
estimated CDF risk when it is lower by more than ``z`` SE): 143 at ``z = 2``
(mean TV 0.180), and at ``z = 3`` it never fires (144).  Stacking meets the
target in 27 cases (mean TV 0.251, W1 1.10): the held-out likelihood puts
the mixture's weight on the least regularized members, the maximum's
mistake (0 SE: 125) in mixture form.  Neither is adopted.
"""

from __future__ import annotations

import os
import pickle
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# The battery's reference methods (bench_estimators.REFERENCE) as members of auto's path.
AS_MEMBER = {"ems": ("ems", 0.25), "stopped": ("stop", 1), "em": ("mle", 0)}
REF = tuple(AS_MEMBER.values())
# Seed of case i is SEED_BASE + i: 1000 is the battery's own draw; another base is a fresh draw of every case.
SEED_BASE = int(os.environ.get("STUDY_SEED_BASE", "1000"))
# STUDY_EMS_WEIGHTS=7,9,11,13 extends auto's path (a study of a longer one, not auto's own): EMS with the weights
# 2^-7, 2^-9, ... continues the EMS path (warm-started from the 1/32 member) and sits after the stop members.
EXTRA_EMS = tuple(2.0 ** -int(e) for e in os.environ.get("STUDY_EMS_WEIGHTS", "").split(",") if e.strip())


def _extend_path():
    from sparseldp.estimation import _path, auto

    if EXTRA_EMS and not set(EXTRA_EMS) <= set(_path._EMS_WEIGHTS):
        _path._EMS_WEIGHTS = _path._EMS_WEIGHTS + EXTRA_EMS
        auto._PATH = auto._PATH[:-1] + tuple(("ems", w) for w in EXTRA_EMS) + auto._PATH[-1:]  # before the MLE


def _simulate(i, mech, k, pop, n):
    """The battery's simulation of case ``i`` (``SEED_BASE = 1000``): the true histogram, the model, the
    report counts and the observed outputs."""
    from sparseldp.estimation import _model
    from sparseldp.sampling import sample

    gen = np.random.default_rng(SEED_BASE + i)
    counts = gen.multinomial(n, pop)
    y = sample(mech, np.repeat(np.arange(k), counts), rng=gen)
    model = _model(mech, (0, k - 1))
    c_all = model.counts_of(y, False)
    return counts / n, model, c_all, np.flatnonzero(c_all > 0)


def _case_record(i, mech, k, pop, n):
    from sparseldp.estimation._path import _path_fits
    from sparseldp.estimation.auto import _FOLDS, _scores, _split

    import bench_estimators as BE

    truth, model, c_all, obs = _simulate(i, mech, k, pop, n)
    Q = _channel(model, obs)
    H = _split(c_all[obs], _FOLDS).astype(float)
    # auto's own fits and held-out scores (estimation.auto._select), keeping the fold fits
    folds, _, AT, EAT = _path_fits(model, obs, H.sum(axis=1, keepdims=True) - H, 50_000)
    scores = _scores(folds, AT, EAT)
    folds = {key: P / P.sum(axis=0) for key, P in folds.items()}
    full, _, _, _ = _path_fits(model, obs, c_all[obs][:, None], 50_000)
    members = {key: P[:, 0] / P[:, 0].sum() for key, P in full.items()}
    members.update(_flow_members(model, obs, c_all, folds, members))
    errs = {key: BE._errors(p, truth) for key, p in members.items()}
    # the battery's reference stopped EM (its own target, no longer auto's ("stop", 1))
    ref = {"stopped": BE._errors(BE._stopped_em_counts(model, c_all), truth)}
    d = {"i": i, "truth": truth, "H": H, "Q": Q, "scores": scores, "folds": folds, "members": members,
         "errs": errs, "ref": ref}
    return _atom_member(model, obs, c_all, d)


# The version of the atom-seeded members in a record (_atom_member): 2 since 2026-12-02's second change (the run
# to the cap, ("atoms", 2), on cheap dense channels, and the members kept past the turn there).
ATOMS_VERSION = 2


def _atom_member(model, obs, c_all, d):
    """The record ``d`` with auto's atom-seeded stops (``("atoms", 0 / 1 / 2)``, ``estimation._atoms``) where
    the MLE's fold fits have common atoms: their fold fits and held-out scores, and their fits on all the
    counts (the common atoms, the masses of the MLE on all counts), as auto computes them; ``"flow"``: whether
    the channel is one where auto keeps them past the turn (``_em_members._with_flow``)."""
    import bench_estimators as BE
    from sparseldp.estimation.auto import _logq
    from sparseldp.estimation._atoms import _fold_fits, _refit
    from sparseldp.estimation._em_members import _STOP_CAP, _with_flow

    flow = _with_flow(model, obs, _STOP_CAP)
    keep = dict(d)
    for part in ("folds", "scores", "members", "errs"):  # an older version's members go
        keep[part] = {key: v for key, v in d[part].items() if key[0] != "atoms"}
    out = {**keep, "atoms_checked": ATOMS_VERSION, "flow": flow}
    if ("mle", 0) not in d["folds"]:
        return out
    A, AT = model.fast_columns(obs)
    C = d["H"].sum(axis=1, keepdims=True) - d["H"]
    fits, idx = _fold_fits(model, obs, A, AT, C, d["folds"][("mle", 0)], 50_000, flow)
    for w, P in (fits or {}).items():  # the stop at the expected deviance (0), the classical one (1), the cap (2)
        p = _refit(model, c_all, idx, d["members"][("mle", 0)], 50_000, w)[4]
        key = ("atoms", w)
        out = {**out, "folds": {**out["folds"], key: P / P.sum(axis=0)}, "scores": {**out["scores"], key: _logq(AT, P)},
               "members": {**out["members"], key: p}, "errs": {**out["errs"], key: BE._errors(p, d["truth"])}}
    return out


def _flow_members(model, obs, c_all, folds, members):
    """The ``("flow", j)`` members on all the counts where the folds have them and the full counts did
    not reach the cap (auto refits a chosen flow member from the cap anyway: ``_em_members._flow_fits``);
    one EM run to the cap and one flow through every time (``_em_members._flow_path``)."""
    from sparseldp.estimation._em_members import _STOP_CAP, _flow_path, _flow_times, _uniform_em

    keys = [key for key in folds if key[0] == "flow" and key not in members]
    if not keys:
        return {}
    A, AT = model.columns(obs)
    c = c_all[obs][:, None]
    flow, _ = _flow_path(A, AT, c, _flow_times(_STOP_CAP))
    flow = [_uniform_em(A, AT, c, _STOP_CAP)] + list(flow)  # ("flow", 0): EM at the cap
    return {key: flow[key[1]][:, 0] / flow[key[1]][:, 0].sum() for key in keys}


def _channel(model, obs):
    """``Q(y | x)`` (unscaled) on the domain's values x the observed outputs ``obs``, dense."""
    S = model.S if model.dense else model.S.toarray()
    return S[:, obs] * np.exp(model.log_cs[obs])[None, :]


def _with_channel(i, mech, k, pop, n, d):
    """A cached record from before records kept ``Q``: the same simulation again, for its observed outputs."""
    _, model, c_all, obs = _simulate(i, mech, k, pop, n)
    assert np.array_equal(d["H"].sum(axis=1), c_all[obs]), f"case {i}: the cache is of another simulation"
    return {**d, "Q": _channel(model, obs)}


def records():
    import bench_estimators as BE

    cache = os.environ.get("STUDY_SELECTION_CACHE")
    done = pickle.load(open(cache, "rb")) if cache and os.path.exists(cache) else {}
    out = []
    for i, (name, mech, k, pop, n) in enumerate(BE._cases()):
        if i not in done:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                done[i] = {**_case_record(i, mech, k, pop, n), "name": name}
            if cache:
                pickle.dump(done, open(cache, "wb"))
            print(f"  [{i}] {name}", file=sys.stderr, flush=True)
        elif "Q" not in done[i]:
            done[i] = _with_channel(i, mech, k, pop, n, done[i])
            if cache:
                pickle.dump(done, open(cache, "wb"))
        elif done[i].get("atoms_checked") != ATOMS_VERSION:  # from before the atom-seeded stops or this version
            _, model, c_all, obs = _simulate(i, mech, k, pop, n)
            done[i] = _atom_member(model, obs, c_all, done[i])
            if cache:
                pickle.dump(done, open(cache, "wb"))
        elif not set(done[i]["folds"]) <= set(done[i]["members"]):  # a fold-only flow member (older cache)
            import bench_estimators as BE

            truth, model, c_all, obs = _simulate(i, mech, k, pop, n)
            d = done[i]
            extra = _flow_members(model, obs, c_all, d["folds"], d["members"])
            done[i] = {**d, "members": {**d["members"], **extra},
                       "errs": {**d["errs"], **{key: BE._errors(p, truth) for key, p in extra.items()}}}
            if cache:
                pickle.dump(done, open(cache, "wb"))
        out.append(done[i])
    return out


# -- rules ---------------------------------------------------------------------------

def _keys(d):
    from sparseldp.estimation.auto import _PATH

    return [key for key in _PATH if key in d["scores"]]


def _diff_se(d, a, b):
    from sparseldp.estimation.auto import _diff_se

    return _diff_se(d["scores"], a, b, d["H"])


def _best(d):
    H = d["H"]
    return max(_keys(d), key=lambda key: float((H * d["scores"][key]).sum()))


def within_se(d, c):
    best = _best(d)
    return [key for key in _keys(d) if _diff_se(d, key, best)[0] >= -c * _diff_se(d, key, best)[1]]


def rule_se(d, c):
    return within_se(d, c)[0]


def rule_forward(d, c):
    keys = _keys(d)
    cur = keys[0]
    for key in keys[1:]:
        diff, se = _diff_se(d, key, cur)
        if diff > c * se:
            cur = key
    return cur


def _tv(a, b):
    return 0.5 * float(np.abs(a - b).sum())


def _noise(d, key):
    from sparseldp.estimation.auto import _fold_spread

    return _fold_spread(d["folds"][key]) / 0.79


def rule_balancing(d, kappa, keys=None):
    keys = keys or _keys(d)
    M = d["members"]
    s = {key: _noise(d, key) for key in keys}
    for j, kj in enumerate(keys):
        if all(_tv(M[kj], M[ki]) <= kappa * (s[ki] + s[kj]) for ki in keys[j + 1:]):
            return kj
    return keys[-1]


def rule_quasi(d, keys=None):
    keys = keys or _keys(d)
    if len(keys) == 1:
        return keys[0]
    M = d["members"]
    return keys[int(np.argmin([_tv(M[a], M[b]) for a, b in zip(keys, keys[1:])]))]


def errors(d, pick):
    """(TV, W1) of a rule's pick: a member's key, or an estimate of its own (a vector)."""
    if isinstance(pick, tuple):
        return d["errs"][pick]
    from bench_estimators import _errors

    return _errors(pick, d["truth"])


def meets(d, pick):
    """Whether ``pick`` meets the battery's per-case target (``bench_estimators._allowance``)."""
    from bench_estimators import _allowance

    res = {m: d["errs"][key] for m, key in AS_MEMBER.items() if key in d["errs"]}
    res.update(d.get("ref", {}))  # records from before auto's stop moved to the expected deviance: the member
    return _allowance({**res, "auto": errors(d, pick)}) <= 1.0


def _on_path(d):
    """The record as auto's selection sees it: the MLE left off once the EM path turns down (and with it the
    atom-seeded members, but on the channels where auto fits the MLE's folds for them anyway)."""
    from sparseldp.estimation.auto import _turned_down

    if ("mle", 0) in d["scores"] and _turned_down(d["scores"], d["H"]):
        drop = {("mle", 0)} | ({key for key in d["scores"] if key[0] == "atoms"} if not d.get("flow") else set())
        d = {**d, "scores": {key: v for key, v in d["scores"].items() if key not in drop}}
    return d


def _without_flow(d):
    """The record without auto's ``("flow", j)`` members (the path before they were added)."""
    return {**d, "scores": {key: v for key, v in d["scores"].items() if key[0] != "flow"},
            "folds": {key: v for key, v in d["folds"].items() if key[0] != "flow"}}


def rule_one_se(d):
    """One SE, with the MLE left off once the EM path turns down (auto._turned_down): auto before the
    stability switch."""
    return rule_se(_on_path(d), 1)


def rule_auto(d, ratio=None, nats=None, diff_se=None):
    """auto's rule (auto._choose with the fold spreads): one SE or ``nats`` (default auto._SLACK_NATS),
    whichever is more, the MLE left off once the EM path turns down, and the MLE instead of that choice
    when it is within the same slack too and its fold spread is at most ``ratio`` (default
    auto._STABLE_RATIO) times the choice's; ``diff_se`` another standard error (auto._choose)."""
    from sparseldp.estimation import auto

    d = _on_path(d)
    spreads = {key: auto._fold_spread(P) for key, P in d["folds"].items() if key in d["scores"]}
    return auto._choose(d["scores"], d["H"], spreads=spreads, stable_ratio=ratio,
                        nats=auto._SLACK_NATS if nats is None else nats, diff_se=diff_se)


def _without_mle_cap(rule, d):
    """``rule(d)`` with the stability switch's absolute cap on the MLE's fold spread (``auto._AMBIGUOUS_TV``,
    2026-12-01) lifted: auto's rule before it."""
    from sparseldp.estimation import auto

    cap = auto._AMBIGUOUS_TV
    auto._AMBIGUOUS_TV = float("inf")
    try:
        return rule(d)
    finally:
        auto._AMBIGUOUS_TV = cap


def rule_auto_fold_se(d, larger):
    """auto's rule with the cross-validation standard error across the folds (Hastie, Tibshirani and
    Friedman, sec. 7.10): ``sqrt(K)`` times the standard deviation of the K per-fold differences, which
    sees the training folds' variation that the per-report one leaves out; with ``larger``, the larger
    of the two."""
    import math

    from sparseldp.estimation import auto

    def diff_se(scores, a, b, H):
        diff, se = auto._diff_se(scores, a, b, H)
        dk = (H * (scores[a] - scores[b])).sum(axis=0)
        fold = math.sqrt(dk.size) * float(np.std(dk, ddof=1))
        return diff, max(se, fold) if larger else fold

    return rule_auto(d, diff_se=diff_se)


def _unbiased_targets(d, cutoff=1e-12):
    """Per held-out fold, the unbiased (generalized least squares) inversion of its counts, and the map
    ``B`` (values x observed outputs) with ``B Q^T = I``: ``u_j = B h_j / n_j``, ``E u_j = p``.

    Weights ``1 / q`` from all the counts; eigenvalues of ``Q W Q^T`` below ``cutoff`` times the
    largest are dropped (the wide kernels are numerically singular there)."""
    H, Q = d["H"], d["Q"]
    q = H.sum(axis=1) / H.sum()
    QW = Q / q[None, :]
    lam, V = np.linalg.eigh(QW @ Q.T)
    keep = lam > cutoff * lam.max()
    B = (V[:, keep] / lam[keep]) @ (V[:, keep].T @ QW)
    return B @ (H / H.sum(axis=0)), B, q


def _transform(cdf):
    """The map the risk is measured after: cumulative sums down the columns (CDFs), or the identity."""
    return (lambda X: np.cumsum(X, axis=0)) if cdf else (lambda X: X)


def _risk_estimates(d, keys, cdf):
    """Unbiased estimates of ``sum_j E ||T p_a^(-j) - T p||^2 - ||T p||^2`` for each member ``a`` (``T``: the
    identity, or the cumulative sum with ``cdf``; ``p_a^(-j)`` its fit on the training folds of fold ``j``),
    by the held-out fold's unbiased inversion (independent of the training fit), and a function giving
    the standard error of the difference of two members' estimates (exact multinomial variance)."""
    U, B, q = _unbiased_targets(d)
    T = _transform(cdf)
    TU = T(U)
    R = {key: float(((T(d["folds"][key]) ** 2).sum() - 2 * (T(d["folds"][key]) * TU).sum())) for key in keys}

    def se(a, b):
        D = T(d["folds"][a] - d["folds"][b])
        V = B.T @ (np.cumsum(D[::-1], axis=0)[::-1] if cdf else D)  # T^T D, through B^T
        n_j = d["H"].sum(axis=0)
        return float(np.sqrt((4 * ((q[:, None] * V * V).sum(axis=0) - (q @ V) ** 2) / n_j).sum()))

    return R, se


def rule_risk(d, cdf, c):
    """The most regularized member whose estimated risk (:func:`_risk_estimates`) is within ``c`` standard
    errors of the lowest."""
    d = _on_path(d)
    keys = _keys(d)
    R, se = _risk_estimates(d, keys, cdf)
    low = min(keys, key=R.get)
    return next(key for key in keys if R[key] - R[low] <= c * se(key, low))


def rule_auto_risk(d, z):
    """auto's pick, replaced by the member of lowest estimated risk in CDF (:func:`_risk_estimates`) when
    that is lower by more than ``z`` standard errors."""
    a = rule_auto(d)
    d = _on_path(d)
    keys = _keys(d)
    R, se = _risk_estimates(d, keys, True)
    better = [key for key in keys if R[key] < R[a] - z * se(a, key)]
    return min(better, key=R.get) if better else a


def rule_fold_risk_oracle(d, cdf):
    """The member whose training-fold fits are closest to the truth (in squared L2, or in the CDF's): the
    criterion of the two rules above, known exactly."""
    T = _transform(cdf)
    t = T(d["truth"][:, None])
    return min(_keys(_on_path(d)), key=lambda key: float(((T(d["folds"][key]) - t) ** 2).sum()))


def rule_stacking(d, steps=500):
    """Stacking (Yao et al. 2018): the mixture of the members (their fits on all the counts) whose output
    distribution maximizes the held-out log-likelihood; weights by the EM fixed point for mixture weights."""
    d = _on_path(d)
    keys = _keys(d)
    L = np.stack([d["scores"][key] for key in keys])  # member x output x fold, log q (common column scaling)
    Qm = np.exp(L - L.max(axis=0, keepdims=True))
    H = d["H"]
    w = np.full(len(keys), 1.0 / len(keys))
    for _ in range(steps):
        w = w * (Qm * (H / np.maximum(np.tensordot(w, Qm, axes=1), 1e-300))).sum(axis=(1, 2)) / H.sum()
        w /= w.sum()
    return sum(wj * d["members"][key] for wj, key in zip(w, keys))


RULES = {
    "oracle": lambda d: next((key for key in _keys(d) if meets(d, key)), _keys(d)[0]),
    "1 SE, MLE off once the path turns down": rule_one_se,
    **{f"the same, MLE if as stable (ratio {r:g})": (lambda d, r=r: rule_auto(d, r, 0.0)) for r in (1, 1.1, 1.5, 2, 1.25)},
    "the same, without the flow members (before 2026-11-28)": lambda d: rule_auto(_without_flow(d), nats=0.0),
    **{f"the same, slack 1 SE or {t:g} nats": (lambda d, t=t: rule_auto(d, nats=t)) for t in (0.25, 0.5, 1.5, 2, 3, 5)},
    "the same, slack 1 SE or 1 nat (before 2026-12-01)": lambda d: _without_mle_cap(rule_auto, d),
    "the same, and no MLE whose fold spread is 0.3 or more: auto": rule_auto,
    "auto with the folds' CV standard error": lambda d: rule_auto_fold_se(d, False),
    "auto with the larger of the two standard errors": lambda d: rule_auto_fold_se(d, True),
    **{f"{c:g} SE": (lambda d, c=c: rule_se(d, c)) for c in (0, 0.5, 1, 1.5, 2)},
    **{f"forward {c:g}": (lambda d, c=c: rule_forward(d, c)) for c in (0.5, 1, 2)},
    **{f"balancing {kp:g}": (lambda d, kp=kp: rule_balancing(d, kp)) for kp in (1, 1.5, 2, 3)},
    **{f"1 SE + balancing {kp:g}": (lambda d, kp=kp: rule_balancing(d, kp, within_se(d, 1))) for kp in (2, 3)},
    "quasi-optimality within 1 SE": lambda d: rule_quasi(d, within_se(d, 1)),
    **{f"risk {'CDF' if cdf else 'pmf'}, {c:g} SE": (lambda d, cdf=cdf, c=c: rule_risk(d, cdf, c))
       for cdf in (False, True) for c in (0, 1)},
    **{f"auto, or the lowest CDF risk by {z:g} SE": (lambda d, z=z: rule_auto_risk(d, z)) for z in (2, 3)},
    **{f"fold fits nearest the truth ({'CDF' if cdf else 'pmf'})": (lambda d, cdf=cdf: rule_fold_risk_oracle(d, cdf))
       for cdf in (False, True)},
    "stacking": rule_stacking,
}


def main():
    sys.path.insert(0, HERE)
    _extend_path()
    recs = records()
    print(f"{'rule':<54} {'in target':>9} {'mean TV':>8} {'mean W1':>8}   ({len(recs)} cases)")
    for name, rule in RULES.items():
        picks = [rule(d) for d in recs]
        hit = sum(meets(d, pick) for d, pick in zip(recs, picks))
        tv, w1 = np.mean([errors(d, pick) for d, pick in zip(recs, picks)], axis=0)
        print(f"{name:<54} {hit:>9} {tv:8.4f} {w1:8.4f}")


if __name__ == "__main__":
    main()
