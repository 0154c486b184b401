r"""``method="auto"``: the amount of regularization chosen from the reports, by held-out likelihood.

Deconvolution is ill-posed: the MLE (``"em"``) fits the noise and comes out
spiky when the window is wide and ``n`` modest, while EMS (``"ems"``) blurs
real atoms.  No fixed choice is right, so :func:`_fit_auto` picks one from a
short regularization path by K-fold cross-validation of the likelihood.

Path (:data:`_PATH`, from most to least regularized, but for the classical stop of item 2):

1. EMS with the ``(w, 1 - 2w, w)`` smoothing kernel applied once per EM step,
   run to its fixed point, for ``w = 1/4`` (``"ems"``'s own ``(1, 2, 1)/4``),
   ``1/8`` and ``1/32``; each warm-started from the previous one;
2. EM from the uniform start stopped by the discrepancy principle (:func:`_em_members._stopped_cols`).
   The classical stop (``("classic", 1)``): the first step where the deviance
   ``D = 2 sum_y c_y log(c_y / (n q_y))`` of the fitted output distribution falls to the number
   of observed outputs, the battery's reference "discrepancy-stopped EM"; then the stop at the
   first step ``t >= 1`` where ``D`` falls to its expected value under the current fit,
   ``sum_y g(n q_y)`` over every output the domain can produce (``g``: the expected Poisson
   deviance, :func:`_em_members._expected_deviance`; about 1 where an output gets many reports,
   0 to 1.16 where it gets few), and the same EM kept at :data:`_path._STOP_MULTS` (2, 4, 8) times
   that many steps, less regularized members between the stop and the MLE (only where the MLE
   is on the path, item 3: they cost up to 8 times the stop); every step count at most
   :data:`_STOP_CAP`.  Early stopping is the classical regularization of EM (Richardson-Lucy);
   these rules set it from the counts.  With many reports per output the two targets agree
   (each output's deviance is about ``chi^2_1``); with few, the classical target lies below
   anything EM reaches and the classical stop only comes at the cap: 10^4 reports on 2 x 10^4
   values ran each of the five folds 20,000 steps (31-34 s for ``auto`` on uniform inputs; 0.7 s with the
   expected deviance as the target).  So the classical stop is on the path only where every
   fold reaches it within the run its own other members need (or the run goes to the cap anyway,
   item 2b, whose iterate then stands in for it, as the classical rule stops at its cap).  It
   comes first among the EM members, although it is usually the later stop: it is preferred
   where it is within the slack (on two draws of the battery: 151 / 145 cases in target, placed
   after the new stop 151 / 143, after its multiple 8 151 / 140);
2b. on dense channels whose Newton step is cheap (:data:`_FLOW_COST`: the battery's domains),
   the same EM run on to the cap (``("flow", 0)``, reported as ``"em flow=20000"``) and continued
   past it, at :data:`_STOP_CAP` x 2, 4, ..., 2^10 steps (members ``("flow", j)``, reported as
   ``"em flow=T"``).  ``("flow", 0)`` is plain EM, and the stability switch (below) treats it as a
   stop member (ratio :data:`_STABLE_RATIO`).  Plain EM steps there would cost seconds per 10^5 steps;
   the continuation integrates EM's time-continuous flow ``d log p / dt = g(p) - 1`` instead
   (``_flow._em_flow``: implicit Euler and Newton; 0.1-0.3 s on 20 values
   and 1-3 s on 100 for the five folds), which stays within a TV distance of 0.003 of the EM
   iterates at the same step counts (measured from 40,000 to 640,000 steps).
   These members remove the rule's worst failures at 10^6-10^7 reports, where
   the capped EM was too far from the MLE in held-out likelihood and the rule
   took the MLE's spikes (smooth truth on 20 values: TV 0.62-0.67 ->
   0.003-0.047; bimodal on 100 values: 0.74-0.88 -> 0.12-0.14; a spike over
   a smooth truth: 0.60-0.77 -> 0.29-0.39).  On point masses the flow
   gathers the atom too slowly, and the stability switch (below) takes the
   MLE instead of a flow member when its fold spread is at most
   :data:`_STABLE_RATIO_FLOW` (6) times the member's (measured: 0.35-5.8 on
   point masses, 6.8-85 where the MLE's spikes are noise).  On the fits of
   ``benchmarks/study_selection.py``, cases in target / mean TV / mean W1,
   with these members against without: the battery's draw 144 / 0.158 /
   0.714 against 144 / 0.169 / 0.765; fresh draws (seed bases 5000, 9000)
   142 / 0.162 / 0.664 against 140 / 0.181 / 0.751 and 142 / 0.159 / 0.662
   against 146 / 0.162 / 0.681 (the ratio 6 was chosen on these three); a
   fourth draw (13000) 142 / 0.161 / 0.674 against 146 / 0.157 / 0.696.  So
   mean W1 is lower on every draw and mean TV on three of four, but six
   fewer of 704 cases are in target: the point masses lost (up to six per
   draw, most from TV 0.01-0.15 to 0.65-0.80) outnumber the wide-kernel
   cases won (two to seven per draw).  Under the rule with the one-nat floor
   (below) the members gain on every draw: 148 / 145 / 149 / 149 cases in
   target against 145 / 139 / 146 / 148 without them, mean TV 0.153 / 0.158 /
   0.146 / 0.149 against 0.164 / 0.180 / 0.165 / 0.157, and mean W1 lower.
   Where the flow cannot be integrated in some fold (``_em_flow``'s
   ``failed``: 0-2 cases per draw) the members past the cap leave the path, and ``("flow", 0)``
   (plain EM at the cap, no flow substep in it) stays (until 2026-11-29 it left with them);
2c. elsewhere (the flow's Newton step above :data:`_em_members._FLOW_COST`: FFT, sparse and larger dense
   channels), where the MLE is on the path and every fold's EM at its largest multiple is the cap's
   iterate, the EM flow of ``log g`` by Runge-Kutta-Chebyshev steps (``solvers._em_chebyshev``) continues it
   to :data:`_STOP_CAP` x 2, 4, 8, 16 (members ``("time", j)``, reported as ``"em time=T"``;
   :func:`_em_members._time_fits`), with the flow members' stability ratio.  Without them nothing bridged
   the capped EM and the MLE there: on 1,000 values under a Gaussian window of 351 (zero-inflated counts,
   10^7 reports) the cap's held-out fit was 3.06 nats below the MLE's, outside the slack, and the rule took
   the MLE's spikes (TV 0.51; with the members ``em time=40000``, TV 0.028;
   ``benchmarks/study_large_domain.py``);
2d. where the MLE's fold fits have atoms on every fold (a value holding at least 5% of the mass and 70% of the
   mass within 3 values of it), EM from a start with those atoms at the MLE's masses and the
   rest uniform, stopped at the expected deviance (``("atoms", 0)``), at the classical target (``("atoms", 1)``)
   or, on the channels of item 2b, run to the cap (``("atoms", 2)``), reported as ``"em steps=t atoms=v:m,..."``
   (:mod:`._atoms`).  It replaces the choice made without it only where the rule with it picks it (it comes
   before the flow members; the stability switch's ratio for it is :data:`_atoms._ATOM_STABLE_RATIO`, 2.5) and
   its held-out log-likelihood is above that choice's (:func:`_choose`);
3. the MLE (EM to its certificate, as ``"em"``), except on sparse channels
   with more than :data:`_path._MLE_NNZ_MAX` stored entries (e.g. ``10^4`` values
   and a window of 275): there its five fold fits would take about a minute
   (one MLE on 10^8 reports: 11.7 s, 65 banded Newton steps), so the path
   ends at the discrepancy-stopped EM; ``"em"`` remains available explicitly.  The selection also leaves the
   MLE off when the EM path has turned down: the held-out log-likelihood falls from 4 to 8
   times the stop by more than :data:`_TURN_SE` standard errors (on the channels of item 2b its fold
   fits are still made, for item 2d's atoms only).  The MLE is
   the limit of that same EM run, and the held-out fit of EM from a flat start
   rises and then falls (the classical early-stopping curve); once it falls the
   MLE is not chosen, and its fold fits are often the slowest part of the path
   (ill-conditioned channels: Laplace, 1,000 values, a window of 275, 10^6
   reports: 121 s for the selection before, 0.18 s after).  Measured on the
   battery's fits (``benchmarks/study_selection.py``'s records, both draws:
   352 cases): the rule applies in 85 of them and changes no choice.

Folds.  Reports are i.i.d., so, given the count vector ``c`` (``n``
reports), a uniformly random split of the reports into ``K`` groups of
sizes ``n_1..n_K`` has counts given by sequential multivariate hypergeometric
draws (``c^(1) ~ MVHG(c, n_1)``, ``c^(2) ~ MVHG(c - c^(1), n_2)``, ...); each
group is an i.i.d. sample of its size from the same output distribution
``Q^T p``, and the groups are exchangeable.  The generator is seeded from a
hash of ``c`` (SHA-256 of the int64 counts), so the choice is a deterministic
function of the counts.  This randomness touches only already-privatized
counts: it is post-processing and has no bearing on privacy, which is why a
seeded (non-secure) generator is the right tool here.

Score and rule.  Every member is fit on the ``K - 1`` training folds of each
split and scored by the held-out log-likelihood ``sum_y c^(k)_y log (Q^T
p_fit)_y`` summed over the folds (``q`` floored at ``1e-300`` in
column-scaled units, so a member that gives an observed held-out output
probability 0 is heavily penalized, not ``-inf``).  The choice is the
*one-standard-error rule* (Breiman et al. 1984; Hastie, Tibshirani and
Friedman, *Elements of Statistical Learning*, sec. 7.10): the most
regularized member whose total is within one standard error of the best
total, the standard error of the difference taken over the held-out reports
(each contributes ``log q_a(y) - log q_best(y)`` under its fold's fits).
Held-out likelihood measures fit in the space of *reports*; when the kernel
is wide, very different input distributions fit the reports equally well
(differences of a nat or two out of ``10^5`` reports), and the rule then
prefers the smoother one.  The slack is at least :data:`_SLACK_NATS` (1) nat
in all: members next to each other on the path predict the reports alike, so
their difference has a standard error that can be a tenth of a nat (smooth
truth on 20 values, 10^4 reports, a Gaussian window of 751: the stopped EM
0.38 nats below the best with a standard error of 0.19, TV 0.12 against the
best's 0.67), and a likelihood ratio below ``e`` is no evidence worth acting
on (Jeffreys' scale; Kass and Raftery 1995).  This standard error also
leaves out the variation from the training folds, which no K-fold estimate
of it captures (Bengio and Grandvalet 2004).  On the fits of
``benchmarks/study_selection.py`` the floor took the cases in target from
144 / 142 / 142 / 142 to 148 / 145 / 149 / 149 on the four draws (the
battery's and seed bases 5000, 9000, 13000), mean TV from 0.158 / 0.162 /
0.159 / 0.161 to 0.153 / 0.158 / 0.146 / 0.149 and mean W1 lower on each;
floors of 0.25 to 3 nats gained on every draw too (143-151 cases; 1 nat
is the conventional threshold, not a tuned one), 5 nats gave 141-149 with
higher mean W1.

Stability switch.  Regularization trades bias for variance; where it buys no
variance it only adds bias.  So the MLE replaces the choice when the MLE is
itself within the slack (one standard error or one nat) of the best and its fits on the
training folds spread no more than :data:`_STABLE_RATIO` (1.25) times the
choice's (:func:`_fold_spread`: mean TV distance between the five fold fits,
training sets that share three fifths of the reports).  Point masses are the
typical case: the MLE finds the atom in every fold, the stopped EM leaks mass
to its neighbours (battery: TV 0.013 against 0.000 on a point mass at 10^7
reports).  On the battery's fits it took the one-SE rule from 136 to 144
cases in target (ratios 1 to 1.5: 142-144), and on three fresh draws of
every case from 135 to 140, 143 to 146 and 141 to 146 (the last two untouched
while the rule was chosen), with lower mean TV and W1 on each.  The MLE must
also be stable in absolute terms: where its own fold fits lie a TV distance of
:data:`_AMBIGUOUS_TV` (0.3) or more apart, the level from which the reports are
taken not to fix the shape (``selection_tv``), it does not replace the choice
however unstable the choice is.  That is where the switch took the MLE's noise
(a bimodal truth under the Gaussian kernel of (2, 1e-6, 20) at 10^5 reports:
the MLE's fold spread 0.77 against 0.135 for the EM flow member, within the
flow ratio, and TV 0.93 against 0.32); on that draw every firing that helped
had a spread of 0.22 or less.  On the study's fits of four draws (battery's, seed bases
5000, 9000, 13000; ``benchmarks/study_selection.py``): 150 -> 151, 146,
152 and 147 -> 148 cases in target; mean TV 0.1516 -> 0.1467, 0.1566,
0.1399 -> 0.1401 and 0.1471 -> 0.1465 (a cap of 0.2 lost on the last draw).

The chosen member is refit on all the counts (an EMS member to the folds'
stopping distance, at most ``1e-5`` in total variation: :func:`_ems_refit_tol`) and
returned with ``method="auto"`` and ``regularization`` naming it
(``"ems smooth=1"``, ``"ems weight=0.125"``, ``"em steps=t"`` for the
discrepancy stop or a multiple of it, ``"em flow=T"`` for the EM continued
past the cap to time ``T``, ``"em steps=t atoms=v:m,..."`` for the atom-seeded stop (the atoms those
of every fold's MLE, their masses the MLE's on all the counts rounded down to ``1e-3``), or ``"em mle"``).

Measured (``benchmarks/bench_estimators.py``, 176 cases: 8 shapes x n =
10^4..10^7 x both families x two targets): see the README's estimation
table.  The rule was chosen on that battery among held-out-likelihood rules
(maximum, one and half standard errors, longer paths); the multiples of the
stop were added when at 10^7 reports the rule jumped from the stopped EM to
a spiky MLE (TV 0.87 where the stopped EM had 0.005).  No rule tried met
"within 1.15x of the best fixed method in every case": in many of the
cases it misses, the fixed methods' errors differ by up to 10x while their
held-out likelihoods differ by less than one standard error, i.e. held-out
likelihood does not tell them apart.  No estimator can meet that target in
every case reliably: ``benchmarks/study_twins.py`` (a two-point bound) finds
33 cases of the battery where another truth gives reports within a total
variation of 0.5 and no estimate meets both targets (9 of auto's 26 misses
are among them; the other 17 are not proven unavoidable).
``benchmarks/study_selection.py`` compares rules on
the battery's fits: an oracle pick over this path meets that target in 174
of 176 cases, the one-standard-error rule in 136 (144 with the stability switch, 148 with
the one-nat floor as well, 150 with the stop of item 2 at the expected deviance, 151 with the
MLE's absolute cap on its fold spread); the maximum (125), half
(135) and two (126) standard errors, forward selection, and rules that look
at the estimates themselves rather than the likelihood -- Lepski's
balancing principle in TV with noise levels from the fold fits (127), the
same within the one-SE set (138), quasi-optimality (124) -- did no better
beyond the noise of one simulation per case, and each had a higher mean
TV or W1.

How decisive the choice was: the estimate's ``selection_tv`` (:func:`_selection_tv`) is the largest
total-variation distance from the choice to a member within the slack of the best (each as its mean
fold fit): at 0.3 or more the reports leave the shape open at the kernel's scale (on the battery's draw
73 of 176 cases, mean TV error 0.25 there against 0.08 below; docs/estimation.md).

Cost: the K folds run together (one mat-mat product per step for all
folds), so selection costs about ``K`` fits of each member, with the
per-step overhead of one.  EMS is accelerated by SQUAREM, then Anderson
mixing where SQUAREM is slow (``_ems._ems_fixed``), and for a kernel on Z with a long window the
products are FFT convolutions (:mod:`sparseldp.estimation._toeplitz`,
``O(k log k)`` instead of ``O(k s)``); the reported log-likelihood and gap
use the exact sparse channel.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np

from ._em_members import (_FLOW_DOUBLINGS, _Q_FLOOR, _STOP_CAP, _TIME_DOUBLINGS, _flow_fits, _rest_outputs,
                          _stop_steps, _stopped_cols, _time_fits)
from ._atoms import _ATOM_STABLE_RATIO, _fold_fits as _atom_fold_fits, _refit as _atom_refit
from ._path import _EMS_WEIGHTS, _STOP_MULTS, _ems_refit_tol, _mle_fits, _regularized_fits, _with_mle
from .model import _Model

# Number of folds.
_FOLDS = 5
# Slack, in standard errors of the held-out difference, granted to a more regularized member.
_SE_FACTOR = 1.0
# ... and at least this many nats of held-out log-likelihood in all (a likelihood ratio of e: evidence
# "not worth more than a bare mention", Jeffreys; Kass and Raftery 1995).  Members next to each other on
# the path predict the reports alike, so the standard error of their difference can be a tenth of a nat
# while the fits differ several-fold in TV (module docstring, "Score and rule").
_SLACK_NATS = 1.0
# The MLE replaces the choice when it is within the slack of the best too and its fold spread is at
# most this many times the choice's: regularization that buys no stability only adds bias (module docstring).
_STABLE_RATIO = 1.25
# The same switch when the choice is a member of the EM flow past the cap ("flow", j; "time", j): the MLE is that
# path's limit; where the truth has an atom the flow has not yet gathered it and the MLE's fold spread
# stays within 0.4-5.8 times the member's (measured), where the MLE's spikes are noise it is 6.8-85
# times.  Chosen on three draws of the battery (module docstring).
_STABLE_RATIO_FLOW = 6.0
# The MLE is left off the selection when the held-out log-likelihood falls from 4 to 8 times the
# discrepancy stop by more than this many standard errors (the EM path, whose limit it is, has turned down).
_TURN_SE = 0.5
# selection_tv (_selection_tv) from which the reports are taken not to fix the shape at the kernel's scale: the CLI
# says so and bootstrap() warns (intervals.ShapeWarning).  On the battery's draw 73 of 176 cases at or above it,
# mean TV error 0.25 there against 0.08 below; a fresh draw 61, 0.30 against 0.08 (docs/estimation.md).
_AMBIGUOUS_TV = 0.3
# The path, most regularized first (but for the classical stop, preferred to the expected-deviance stop
# where both are within the slack: module docstring, item 2): ("ems", weight), ("classic", 1), ("stop",
# multiple of the stop), ("flow", doublings beyond the cap; 0: EM at the cap), ("time", doublings beyond the
# cap: the flow of log g by Chebyshev steps where the flow's Newton steps do not pay), ("atoms", 0 / 1 / 2) (EM from
# the MLE's atoms on the folds, stopped at either target or run to the cap: _atoms; docstring, item 2d), ("mle", 0).
_PATH = (tuple(("ems", w) for w in _EMS_WEIGHTS) + (("classic", 1),)
         + tuple(("stop", f) for f in (1, *_STOP_MULTS)) + (("atoms", 0), ("atoms", 1), ("atoms", 2))
         + tuple(("flow", j) for j in range(_FLOW_DOUBLINGS + 1))
         + tuple(("time", j) for j in range(1, _TIME_DOUBLINGS + 1)) + (("mle", 0),))


def _seed(c_all: np.ndarray) -> int:
    digest = hashlib.sha256(np.ascontiguousarray(np.rint(c_all), dtype=np.int64).tobytes()).digest()
    return int.from_bytes(digest[:16], "little")


def _split(c: np.ndarray, folds: int) -> np.ndarray:
    """``(m, folds)`` int counts: a uniformly random split of the reports into equal-size groups."""
    ci = np.rint(c).astype(np.int64)
    n = int(ci.sum())
    gen = np.random.default_rng(_seed(ci))
    sizes = [n // folds + (1 if j < n % folds else 0) for j in range(folds)]
    out = np.zeros((ci.size, folds), np.int64)
    rest = ci.copy()
    for j, size in enumerate(sizes[:-1]):
        out[:, j] = gen.multivariate_hypergeometric(rest, size, method="marginals") if size else 0
        rest -= out[:, j]
    out[:, -1] = rest
    return out


def _logq(AT, P) -> np.ndarray:
    """``log q`` per output and fold (column-scaled: the shift is the same for every member)."""
    return np.log(np.maximum(AT @ P, _Q_FLOOR))


def _diff_se(scores: dict, a, b, H: np.ndarray) -> tuple[float, float]:
    """Held-out log-likelihood of member ``a`` minus that of ``b``, and its standard error over the
    held-out reports: each contributes ``log q_a(y) - log q_b(y)`` under its fold's fits, so
    ``se^2 = sum H D^2 - (sum H D)^2 / n``."""
    D = scores[a] - scores[b]
    diff = float((H * D).sum())
    return diff, math.sqrt(max(float((H * D * D).sum()) - diff * diff / float(H.sum()), 0.0))


def _turned_down(scores: dict, H: np.ndarray) -> bool:
    """Whether the held-out log-likelihood fell between the last two multiples of the stop (4 and 8)
    by more than :data:`_TURN_SE` standard errors."""
    diff, se = _diff_se(scores, ("stop", _STOP_MULTS[-1]), ("stop", _STOP_MULTS[-2]), H)
    return diff < -_TURN_SE * se


def _select(model: _Model, c_all: np.ndarray, max_iter: int, folds: int = _FOLDS, found: dict | None = None):
    """Held-out ``log q`` of every path member (outputs x folds), the held-out counts, selection evals,
    and each member's fold spread (:func:`_fold_spread`).

    The MLE is scored only where it is on the path and the EM path has not turned down (:func:`_turned_down`;
    module docstring), and fit there and where the path ran EM to the cap (item 2b) for the atom-seeded stops
    (:mod:`._atoms`; their positions go to ``found["atoms"]`` for the refit on all counts)."""
    obs = np.flatnonzero(c_all > 0)
    H = _split(c_all[obs], folds).astype(float)  # held-out fold counts, one column per fold
    C = H.sum(axis=1, keepdims=True) - H
    A, AT = model.fast_columns(obs)
    fits, evals = _regularized_fits(model, obs, C, max_iter, A, AT)
    scores = _scores(fits, AT, None)
    flow = ("flow", 0) in fits  # the path ran EM to the cap here (_em_members._with_flow's channels)
    down = _with_mle(model) and _turned_down(scores, H)
    if _with_mle(model) and (flow or not down):
        M, e, EAT = _mle_fits(model, obs, C, max_iter)
        if not down:
            scores.update(_scores({("mle", 0): M}, AT, EAT))
            fits[("mle", 0)] = M
        evals += e
        P, atoms = _atom_fold_fits(model, obs, A, AT, C, M, max_iter, flow)  # the MLE's atoms seed a stopped EM
        if found is not None:
            found["atoms"] = atoms
        if P is not None:
            for w, Pw in P.items():
                fits[("atoms", w)] = Pw
                scores[("atoms", w)] = _logq(AT, Pw)
    return scores, H, evals, {key: _fold_spread(P) for key, P in fits.items()}, _centres(fits)


def _centres(fits: dict) -> dict:
    """Each member's fold fits (columns, each renormalized) averaged: where the member sits."""
    return {key: (P / P.sum(axis=0, keepdims=True)).mean(axis=1) for key, P in fits.items()}


def _selection_tv(choice, scores: dict, H: np.ndarray, centres: dict) -> float:
    """The largest total-variation distance from ``choice`` to a member within the rule's slack of the best
    (:func:`_within`), each taken as its mean fold fit (:func:`_centres`): how far apart estimates lie that
    held-out likelihood does not tell apart."""
    return min(1.0, max(0.5 * float(np.abs(centres[key] - centres[choice]).sum()) for key in _within(scores, H)))


def _fold_spread(P: np.ndarray) -> float:
    """Mean total-variation distance between the fits of one member on the training folds (columns of
    ``P``, each renormalized): how much the member moves when a fifth of the reports is swapped."""
    P = P / P.sum(axis=0, keepdims=True)
    b = P.shape[1]
    return float(np.mean([0.5 * np.abs(P[:, i] - P[:, j]).sum() for i in range(b) for j in range(i + 1, b)]))


def _scores(fits: dict, AT, EAT) -> dict:
    """``log q`` of every fit (:func:`_path._path_fits`'s output), the MLE's with the exact products."""
    scores = {key: _logq(AT, P) for key, P in fits.items() if key != ("mle", 0)}
    if EAT is not None:  # column by column: a matrix-vector product per fold, as each MLE was scored alone
        M = fits[("mle", 0)]
        scores[("mle", 0)] = np.column_stack([_logq(EAT, M[:, [j]])[:, 0] for j in range(M.shape[1])])
    return scores


def _choose(scores: dict, H: np.ndarray, se_factor: float = _SE_FACTOR, spreads: dict | None = None,
            stable_ratio: float | None = None, nats: float = _SLACK_NATS, diff_se=None):
    """The most regularized member (in :data:`_PATH` order) within ``max(se_factor * se, nats)`` of the best
    held-out log-likelihood; the MLE instead when it is within that too and no less stable (``spreads``,
    module docstring).

    ``se_factor = nats = 0`` is the plain maximum of the held-out log-likelihood.  The
    standard error of member ``a``'s difference to the best is computed over
    the held-out reports: each contributes ``log q_a(y) - log q_best(y)`` under
    its fold's fits, so ``se^2 = sum H D^2 - (sum H D)^2 / n``.  With ``spreads``
    (:func:`_fold_spread` of each member), the MLE replaces that member when it
    is itself within ``se_factor`` standard errors of the best and its spread is
    at most ``stable_ratio`` (default :data:`_STABLE_RATIO`; :data:`_STABLE_RATIO_FLOW` when that member is
    a flow member past the cap) times the member's, and below :data:`_AMBIGUOUS_TV`.  ``diff_se``: the ``(difference, standard error)``
    function (default :func:`_diff_se`; ``benchmarks/study_selection.py`` compares others).  The atom-seeded
    stops (``("atoms", w)``, :mod:`._atoms`) replace the choice made without them only where the rule with them
    picks one of them and its held-out log-likelihood is above that choice's: their start comes from the MLE,
    and they have to earn their place (otherwise the choice stands as if they were not on the path).
    """
    if any(key[0] == "atoms" for key in scores):  # the atom-seeded stop must fit the held-out reports better
        base = _choose({key: v for key, v in scores.items() if key[0] != "atoms"}, H, se_factor, spreads,
                       stable_ratio, nats, diff_se)
        full = _choose_among(scores, H, se_factor, spreads, stable_ratio, nats, diff_se)
        if full[0] == "atoms" and float((H * scores[full]).sum()) > float((H * scores[base]).sum()):
            return full
        return base
    return _choose_among(scores, H, se_factor, spreads, stable_ratio, nats, diff_se)


def _choose_among(scores, H, se_factor, spreads, stable_ratio, nats, diff_se):
    """:func:`_choose` among the members of ``scores`` (the rule without the atoms member's own test)."""
    within = _within(scores, H, se_factor, nats, diff_se)
    choice = within[0]  # best itself is within (difference 0)
    mle = ("mle", 0)
    ratio = _STABLE_RATIO if stable_ratio is None else stable_ratio
    if choice[0] == "time" or (choice[0] == "flow" and choice[1] > 0):  # ("flow", 0): plain EM at the cap
        ratio = _STABLE_RATIO_FLOW
    elif choice[0] == "atoms":
        ratio = _ATOM_STABLE_RATIO
    if (spreads is not None and mle in within and choice != mle and spreads[mle] <= ratio * spreads[choice]
            and spreads[mle] < _AMBIGUOUS_TV):
        return mle
    return choice


def _within(scores: dict, H: np.ndarray, se_factor: float = _SE_FACTOR, nats: float = _SLACK_NATS,
            diff_se=None) -> list:
    """The members (in :data:`_PATH` order) whose held-out log-likelihood is within ``max(se_factor * se,
    nats)`` of the best's (:func:`_choose`)."""
    keys = [key for key in _PATH if key in scores]
    total = {key: float((H * scores[key]).sum()) for key in keys}
    best = max(keys, key=lambda key: (total[key], -keys.index(key)))
    within = []
    for key in keys:
        diff, se = (diff_se or _diff_se)(scores, key, best, H)
        if diff >= -max(se_factor * se, nats):
            within.append(key)
    return within


def _describe(choice, steps: int = 0, atoms: str = "") -> str:
    kind, w = choice
    if kind == "atoms":
        return f"em steps={steps} atoms={atoms}"
    if kind == "ems":
        return "ems smooth=1" if w == 0.25 else f"ems weight={w:g}"
    if kind == "flow":
        return f"em flow={steps}"
    if kind == "time":
        return f"em time={steps}"
    return "em mle" if kind == "mle" else f"em steps={steps}"  # "classic" and "stop": plain EM steps


def _fit_auto(model: _Model, c_all: np.ndarray, max_iter: int, fit, result):
    """Select on folds, refit on all counts.  ``fit`` is frequencies._fit, ``result`` its result builder."""
    scores = None
    if float(c_all.sum()) < 2 * _FOLDS:
        choice = ("mle", 0)  # too few reports to hold any out
        sel_evals = 0
    else:
        found: dict = {}
        scores, H, sel_evals, spreads, centres = _select(model, c_all, max_iter, found=found)
        choice = _choose(scores, H, spreads=spreads)

    def chosen(est, steps=0, atoms=""):  # the refit, labelled with its member and how far the indistinct members lie
        tv = None if scores is None else _selection_tv(choice, scores, H, centres)
        return dataclasses.replace(est, method="auto", regularization=_describe(choice, steps, atoms), selection_tv=tv)
    if choice[0] == "flow":
        obs = np.flatnonzero(c_all > 0)
        A, AT = model.columns(obs)
        c = c_all[obs]
        steps = _STOP_CAP * 2 ** choice[1]  # ("flow", 0): EM at the cap
        P, failed = _flow_fits(A, AT, c[:, None], steps)
        if not failed[0]:
            return chosen(result(model, obs, A, AT, c, P[:, 0], "em", _STOP_CAP, True, math.inf, 0), steps), sel_evals
        # the flow's Newton substeps failed on all the counts (they converged on every fold): choose again
        # without the flow members past the cap (("flow", 0), plain EM at the cap, cannot fail)
        flow = [key for key in scores if key[0] == "flow" and key[1] > 0]
        scores = {key: v for key, v in scores.items() if key not in flow}
        spreads = {key: v for key, v in spreads.items() if key not in flow}
        choice = _choose(scores, H, spreads=spreads)
    kind, w = choice
    steps = 0
    if kind == "time":  # EM to the cap, then the EM flow of log g by Chebyshev steps, as on the folds
        obs = np.flatnonzero(c_all > 0)
        A, AT = model.columns(obs)
        FA, FAT = model.fast_columns(obs, (A, AT))
        c = c_all[obs]
        steps = _STOP_CAP * 2 ** w
        p = _time_fits(FA, FAT, c[:, None].astype(float), steps)[:, 0]
        return chosen(result(model, obs, A, AT, c, p, "em", steps, True, math.inf, 0), steps), sel_evals
    if kind == "atoms":  # the atoms of every fold's MLE, with the masses of the MLE on all counts
        mle = fit(model, c_all, "em", 1e-2, max_iter).p
        obs, A, AT, c, p, steps, text = _atom_refit(model, c_all, found["atoms"], mle, max_iter, w)
        return chosen(result(model, obs, A, AT, c, p, "em", steps, True, math.inf, 0), steps, text), sel_evals
    if kind == "ems":
        est = fit(model, c_all, "ems", _ems_refit_tol(c_all.sum()), max_iter, 1, w)
    elif kind == "mle":
        est = fit(model, c_all, "em", 1e-2, max_iter)
    else:
        obs = np.flatnonzero(c_all > 0)
        A, AT = model.columns(obs)  # the reported log-likelihood and gap: exact products
        FA, FAT = model.fast_columns(obs, (A, AT))
        c = c_all[obs]
        cap = min(_STOP_CAP, max_iter)
        rest = _rest_outputs(model, obs)
        if kind == "classic":
            Ps, _ = _stopped_cols(FA, FAT, c[:, None].astype(float), np.exp(model.log_cs[obs]), cap, (), rest,
                                  classic="until")
            steps, p = int(Ps["classic_steps"][0]), Ps["classic"][:, 0]
        else:
            Ps, st = _stopped_cols(FA, FAT, c[:, None].astype(float), np.exp(model.log_cs[obs]), cap,
                                   (w,) if w > 1 else (), rest)
            steps = _stop_steps(int(st[0]), w, cap)
            p = Ps[w][:, 0]
        est = result(model, obs, A, AT, c, p, "em", steps, True, math.inf, 0)
    return chosen(est, steps), sel_evals
