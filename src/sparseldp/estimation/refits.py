"""Refitting the bootstrap's replicate histograms, all at once (:func:`_refit_replicates`).

Each estimator has a batched refit that iterates every replicate (a column) on
its own: :func:`_refit_ems` (accelerated EMS), :func:`_refit_em_steps` (a fixed
number of plain EM steps, ``auto``'s ``"em steps=t"`` member), ``_em_members._flow_fits`` (its
``"em flow=T"`` member) and
:func:`_refit_em` (SQUAREM EM to a certified gap, the MLE's refit, finished by
Newton column by column on small channels: :func:`_newton_finish`; on large
channels where the MLE is sparse, active sets grown from the MLE's support, in
:mod:`sparseldp.estimation._mle_refits` with :func:`_refit_em`); inversion is
least squares per replicate.  The columns are cut into blocks run in threads
where the products are sparse or FFT (:mod:`sparseldp.estimation._parallel`).
A refit is simulation: its products may be the FFT ones and its certificate
needs no rigor.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_int
from ._parallel import blocks_for, dense_step_blocks, map_blocks
from ._atoms import _masses, _parse_atoms, _start
from ._em_members import _STOP_CAP, _flow_fits, _time_legs, _time_path
from ._mle_refits import _active_refits, _ipm_all, _ipm_finish, _refit_em
from ._newton import _newton
from .mle import _NEWTON_STEPS, _active_sparse, _dense_newton_cost, _mle
from ._ems import _ems_fixed
from ._ems_map import _check_smooth
from .solvers import CHEBYSHEV, METHODS, _METHODS_TEXT, _em_time, _least_squares, project_simplex

# Replicate refits: EM stops at a certified gap of this many nats (a first fit uses 1e-2), EMS at
# this estimated TV distance to its fixed point (a first fit uses 1e-8).  Both are far below the
# bootstrap spread they feed (statistical TV error ~1e-2 at n = 10^5).  EMS at 1e-5 against 1e-6
# (the same 200 replicate histograms): 1,000 values under the Gaussian window 701, 10^6 reports,
# 16.2 s against 20.2 s, interval ends moved by at most 0.14 % of the interval's width per value
# (median 0.02 %), 0.04 % for a range query and the CDF; 100 values (Laplace window 137, smooth
# and bimodal truths), at most 0.5 % per value.  The ends' Monte Carlo error at B = 200 is about a
# tenth of the replicate spread.  (1e-4 halved the time there but moved per-value ends by up to 4 %.)
_REFIT_TOL = {"em": 0.5, "ems": 1e-5}
# Replicate MLE refits on channels whose dense Newton step costs at most this (mle._dense_newton_cost,
# in flops: about 200 values) run EM for at most _REFIT_EM_FIRST evaluations, and Newton (dense, sparse
# channels converted) finishes the columns left above tol.  Measured (four atoms over a floor, a window
# of 137, B = 200, one BLAS thread): 60 / 100 / 150 / 200 values, 0.60 / 1.35 / 2.62 / 4.83 s with every
# refit certified against 1.08 / 2.10 / 3.14 / 4.71 s with 28 / 75 / 80 / 105 refits short of tol at
# 2,000 EM evaluations; a sparse channel (window 31, three atoms) of 100 / 200 values, 1.35 / 4.63 s
# against 2.93 / 4.13 s.  Beyond the bound it loses: 300 values (window 201) 11.3 s against 6.9 s;
# sparse Newton (sparse LU per step) on 300 and 1,000 values was twice as slow as EM alone.
_REFIT_NEWTON_COST = 1e7
_REFIT_EM_FIRST = 100
# EM cannot revive a value that has mass exactly 0 (multiplicative update), and the MLE has many;
# replicate fits start from (1 - w) p_hat + w / k so that every value can move.
_EM_WARM_MIX = 0.05
# EMS refits start at (1 - w) p_hat + w / k.  From w = 0.001 (until 2026-11-30), refits on channels that tell
# little per report stopped, declared converged, up to 0.19 in TV from their fixed points: where p_hat has
# almost no mass (the empty tail of a concentrated truth) a replicate's counts ask for some, the iteration
# first drives those entries towards 0 and then regrows them by a factor barely above 1 per step, which the
# stopping rules' distance estimates do not see.  Measured (benchmarks/study_ems_warm.py: B = 50, 22 cases of
# k-RR, Hybrid and Piecewise on 100-400 values and the Gaussian and Laplace designs on 100, three seeds; refits
# more than 1e-4 from fixed points computed from the uniform start): 59 at w = 0.001, 6 at 0.1 (4 with
# _ems_fixed's Newton check, which the refits take), and the 400-value channels' refits a median 3.77 ->
# 1.41 s; under the Gaussian and Laplace designs none at either.
_EMS_WARM_MIX = 0.1
# Refits left above tol by the batched solvers are finished one by one by the first fit's solver, on a
# large channel when they are at most this share of the batch (refits._mle_finish).
_FINISH_SHARE = 0.05
# ... in at most this many runs of max_iter evaluations each: from the uniform start, then from the better
# point while a run at least halves the certified gap (1,000 values, Laplace design (2, 1e-8, 3), 10^6
# reports of a zero-inflated count, B = 200: one straggler at 3.45 nats from the uniform start, 0.513
# after a run from there, certified by the third; two runs had left it reported; 47.4 s against 47.8 s).
_FINISH_RUNS = 4
# The "em steps=t" refits with t at least this (and the cap's plain steps of "em flow=T") follow the EM flow by
# Runge-Kutta-Chebyshev steps (solvers._em_chebyshev; about 380 evaluations for t = 1,379, 1,450 for 20,000), or
# else over-relaxed steps (solvers._em_time, about 4t/7 of them): each accepted
# where the estimate's own counts, refit so in double, land within _RELAXED_TOL bootstrap standard deviations of
# the estimate on every value and CDF value whose deviation is at least _RELAXED_SD_FLOOR of the largest, and on
# the mean (_relaxed_agrees); where neither is, every replicate is refit with plain steps.
_RELAXED_MIN_STEPS = 300
_RELAX = 2  # over-relaxed steps p <- p g^(2 - 2^-_RELAX) (solvers._em_run)
# Bootstrap.refit_steps of each scheme (solvers._em_time's relax) that _checked_relaxed tries
_SCHEME_NAMES = {CHEBYSHEV: "chebyshev", _RELAX: "over-relaxed"}
_RELAXED_TOL = 0.1
_RELAXED_SD_FLOOR = 1e-3


def _refit_ems(A, AT, C, n, P0, passes, weight, tol, max_iter):
    """EMS on ``B`` histograms at once (rows of ``C``), warm-started at the rows of ``P0``.

    ``A``, ``AT``: the column-scaled channel on all outputs and its transpose
    (sparse, dense, or applied by FFT, :mod:`sparseldp.estimation._toeplitz`).
    ``_ems._ems_fixed``: accelerated, the same stopping rule (``tol``) as
    ``method="ems"``; converged replicates are frozen.  Returns (P, evals,
    converged mask, ``2 x B``: the estimated TV distance of each to its fixed point and its last
    plain step), ``P`` with one row per replicate.
    """
    P, evals, conv, dist = _ems_fixed(A, AT, np.ascontiguousarray(C.T), 1.0 / n, np.ascontiguousarray(P0.T),
                                      passes, weight, tol, max_iter, with_dist=True, verify=True)
    return np.ascontiguousarray(P.T), evals, conv, dist


def _refit_em_steps(A, AT, C, P0, steps, single=False, relax=0):
    """Exactly ``steps`` plain EM steps on ``B`` histograms at once (rows of ``C``), from the rows of ``P0``.

    The ``"em steps=t"`` member of ``method="auto"``: the EM map ``p <- p * g(p)``
    (``solvers._em_run``, renormalized each step; FFT or dense products in single precision if
    ``single``), with no stopping rule (reaching ``t`` is the rule, not a failure).  ``A``,
    ``AT`` as in :func:`_refit_ems`.  ``relax > 0``: the same time ``t`` of the EM flow in over-relaxed
    steps (``solvers._em_time``), about ``t / h`` of them, ``h = 2 - 2^-relax``.  Returns ``P``, one row
    per replicate.
    """
    return _em_time(A, AT, P0, C, steps, single, relax)


def _relaxed_agrees(P: np.ndarray, relaxed_row: np.ndarray, p_hat: np.ndarray, values: np.ndarray) -> bool:
    """Whether the relaxed refit of the estimate's own counts (``relaxed_row``, in double precision) lies
    within :data:`_RELAXED_TOL` bootstrap standard deviations (over the replicates ``P``, ``B x k``) of
    the estimate ``p_hat`` (the member's plain steps, in double): on every value and every CDF value
    whose standard deviation is at least :data:`_RELAXED_SD_FLOOR` of the largest (below, rounding is
    the spread), and on the mean."""
    d = relaxed_row - p_hat
    for diff, reps in ((d, P), (np.cumsum(d), np.cumsum(P, axis=1))):
        sd = reps.std(axis=0, ddof=1)
        keep = sd >= _RELAXED_SD_FLOOR * sd.max()
        if not np.all(np.abs(diff[keep]) <= _RELAXED_TOL * sd[keep]):
            return False
    sd_mean = float((P @ values).std(ddof=1))
    return abs(float(values @ d)) <= _RELAXED_TOL * sd_mean


def _checked_relaxed(fit_rows, C, own, p_hat, values, schemes=(CHEBYSHEV, _RELAX)):
    """``(P, ok, scheme)``: ``fit_rows(rows of counts, relax, single) -> (P, ok mask)`` on the replicate
    histograms ``C`` by the first of ``schemes`` (``solvers._em_time``'s ``relax``: the EM flow by
    Runge-Kutta-Chebyshev steps, then over-relaxed steps, :data:`_RELAX`) whose refit of the estimate's own
    counts ``own`` (given), in double precision, agrees with the estimate ``p_hat`` (:func:`_relaxed_agrees`,
    against that scheme's replicates); else with plain steps.  ``scheme`` is ``"chebyshev"``,
    ``"over-relaxed"`` or ``"plain"``.  In double, as the estimate is, so that the check measures the
    scheme and not single precision's rounding, which the bootstrap's ``precision`` answers for (on 100
    values under a Gaussian window of 261, ``em steps=7088``, 10^7 reports, the over-relaxation moved the
    worst value by 0.003 standard deviations in double, single precision's rounding by 0.11-0.12)."""
    if own is not None:
        for scheme in schemes:
            P, ok = fit_rows(C, scheme, None)  # ok: the flow's substeps converged (they are reported either way)
            row, ok_r = fit_rows(own[None, :], scheme, False)
            if ok_r[0] and _relaxed_agrees(P, row[0], p_hat, values):
                return P, ok, _SCHEME_NAMES[scheme]
    P, ok = fit_rows(C, 0, None)
    return P, ok, "plain"


def _refit_plan(estimate, smooth):
    """``(method, smooth passes, EM steps or None)`` to refit replicates with.

    ``method="auto"`` refits the member of the regularization path it chose
    (``estimate.regularization``), so the intervals leave out the variability of
    the choice itself (re-running the selection per replicate would cost a full
    path fit each).  ``"em steps=t"`` refits t plain EM steps from the uniform
    start, as the member was fit (``"em steps=t atoms=v:m,..."``: from each replicate's MLE's masses at
    those atoms, :func:`_refit_atoms`); ``"em flow=T"`` the cap's EM steps and the EM flow to
    time ``T`` (``_em_members._flow_fits``); ``"em time=T"`` the cap's EM steps and the flow of ``log g``
    by Chebyshev steps to ``T`` (``_em_members._time_fits``).
    """
    method = getattr(estimate, "method", None)
    if method == "auto":
        reg = getattr(estimate, "regularization", None) or ""
        if smooth is not None:
            raise ValueError(f"smooth must not be given for method='auto' (the estimate records {reg!r})")
        try:
            if reg.startswith("ems smooth="):
                return "ems", check_int(int(reg.split("=", 1)[1]), "smooth", minimum=1), None, 0.25
            if reg.startswith("ems weight="):
                w = float(reg.split("=", 1)[1])
                if not 0.0 < w <= 0.25:
                    raise ValueError
                return "ems", 1, None, w
            for form, plan, name, least in (("em steps=", "em-steps", "steps", 0), ("em flow=", "em-flow", "time", 1),
                                            ("em time=", "em-time", "time", 1)):
                if reg.startswith(form):
                    count = reg[len(form):]
                    if plan == "em-steps" and " atoms=" in count:  # the atom-seeded stop (_atoms): its start
                        count, atoms = count.split(" atoms=", 1)  # is each replicate's (_refit_atoms)
                        _parse_atoms(atoms, int(estimate.domain[0]), len(estimate.p))
                    return plan, 0, check_int(int(count), name, minimum=least), 0.25
        except ValueError:
            pass
        if reg == "em mle":
            return "em", 1, None, 0.25
        raise ValueError(f"bootstrap supports method='auto' estimates whose regularization is 'ems smooth=m', "
                         f"'ems weight=w' (0 < w <= 0.25), 'em steps=t' (with ' atoms=v:m,...', the start's atoms "
                         f"on the domain, total mass at most 1), 'em flow=T', 'em time=T' or 'em mle'; got {reg!r}")
    if method not in METHODS:
        raise ValueError(f"estimate.method must be {_METHODS_TEXT}; got {method!r}")
    return method, _check_smooth(smooth, method), None, 0.25


def _refit_atoms(estimate, k: int):
    """The atoms' positions of the ``"em steps=t atoms=v:m,..."`` member (:mod:`._atoms`), or ``None``.

    Its refits hold the atoms' positions and the step count fixed (as the member's choice is not refit) and
    take each replicate's start from that replicate's own MLE (its masses at the atoms, rounded down as
    :func:`._atoms._masses` does): the masses are fitted from the reports, so their variability is the
    data's.  With the recorded start held fixed instead, the intervals of the spiky truth of
    ``bench_coverage.py`` (four atoms over a uniform floor, the Laplace design of (1, 1e-6, 5), 10^5
    reports) covered the CDF at 60 in 86.5% of 200 repetitions and single frequencies in 83% on average."""
    reg = getattr(estimate, "regularization", None) or ""
    if getattr(estimate, "method", None) != "auto" or not reg.startswith("em steps=") or " atoms=" not in reg:
        return None
    return _parse_atoms(reg.split(" atoms=", 1)[1], int(estimate.domain[0]), k)[0]


def _refit_replicates(model, C, n, p_hat, method, smooth, weight, steps, tol, max_iter, single=False,
                      counts=None, values=None, relaxed=True, atoms=None):
    """Refit every row of ``C`` (``B`` replicate histograms on all outputs) with the plan's estimator.

    ``method`` is :func:`_refit_plan`'s: ``"em-steps"`` (``steps`` plain EM steps from the
    uniform start, or with ``atoms`` (:func:`_refit_atoms`) from each row's own MLE's atoms; on FFT
    products in single precision if ``single``), ``"ems"`` (``smooth`` passes
    of weight ``weight``, warm-started at ``p_hat``), ``"em"`` (warm-started at ``(1 - w) p_hat + w / k``)
    or ``"inversion"``.  Returns ``(P, converged mask, gaps or None, single, scheme)``, ``P`` with one
    replicate per row, ``gaps`` the MLE refits' certified log-likelihood gaps (nats) or the EMS refits'
    estimated TV distances to their fixed points and last steps (``2 x B``), ``single`` whether
    single precision was used and ``scheme`` how the plain EM steps of ``"em steps=t"`` and
    ``"em flow=T"`` refits ran: ``"chebyshev"`` (the EM flow by Runge-Kutta-Chebyshev steps),
    ``"over-relaxed"`` or ``"plain"`` (:func:`_checked_relaxed`; the first two where ``relaxed`` allows, the
    steps are at least :data:`_RELAXED_MIN_STEPS` and the estimate's own ``counts`` (on all outputs;
    ``values``, the domain's) are given to check them); ``""`` for the other methods.
    """
    B, k = C.shape[0], model.k
    if method == "inversion":
        P = np.vstack([project_simplex(_least_squares(model, C[b] / n)) for b in range(B)])
        return P, np.ones(B, bool), None, False, ""
    # auto's plain EM steps ("em steps=t", and the cap's steps before "em flow=T") may run over-relaxed, with
    # the estimate's own counts refit alongside as a check (_checked_relaxed)
    plain_steps = steps if method == "em-steps" else min(steps or 0, _STOP_CAP)
    own = None
    if (relaxed and counts is not None and method in ("em-steps", "em-flow", "em-time")
            and plain_steps >= _RELAXED_MIN_STEPS):
        own = np.asarray(counts, dtype=float)
    # the outputs some replicate (or the check's counts) has: the others add nothing to an EM or EMS step
    used = np.flatnonzero(C.sum(axis=0) + (0.0 if own is None else own) > 0)
    if method == "em-flow":
        # auto's "em flow=T" member: the cap's plain EM steps from the uniform start, then the EM flow to
        # T (its Newton steps per replicate)
        EA, EAT = model.columns(used)
        single = single and model.dense  # the plain EM steps in float32 (dense products); the flow in double

        def flow_rows(Cr, relax, in_single):  # in_single None: the bootstrap's precision
            rows, sp = Cr.shape[0], single if in_single is None else in_single
            parts = map_blocks(lambda r: _flow_fits(EA, EAT, np.ascontiguousarray(Cr[r][:, used].T), steps, sp,
                                                    relax), rows,
                               dense_step_blocks(model.k, used.size, rows) if model.dense else 1)
            P, failed = np.hstack([part[0] for part in parts]), np.concatenate([part[1] for part in parts])
            return P.T, ~failed

        P, ok, scheme = _checked_relaxed(flow_rows, C, own, p_hat, values)
        return P, ok, None, single, scheme
    # FFT products where they apply; every refit is column by column, so blocks run in threads
    # unless the products are dense matrix products (BLAS is already parallel).  EMS on the used
    # outputs; the MLE's refits index outputs by position, and the fused FFT steps skip the
    # unobserved ones themselves (_fft_em.em_rows), so both take every output
    # two-level products (randomized response, the Piecewise family: _twolevel) for EMS only; the MLE's and the
    # plain steps' blocks and precision below take a dense channel's products as matrices
    A, AT = model.fast_columns(used if method == "ems" else np.arange(model.m), two_level=method == "ems")
    dense = isinstance(A, np.ndarray)
    blocks = blocks_for(dense, B)
    if method in ("em-steps", "em-time"):
        # the same t plain EM steps from the uniform start as the chosen member: the batched map
        # with no smoothing, run exactly t times (reaching t is the rule, not a failure)
        starts = None
        if atoms is not None:  # the atom-seeded stop: each row starts from its own MLE's masses at the atoms
            every = C if own is None else np.vstack([C, own[None, :]])
            M = _refit_replicates(model, every, n, p_hat, "em", 1, 0.25, None, _REFIT_TOL["em"], max_iter)[0]
            starts = np.vstack([_start(k, atoms, _masses(row, atoms)) for row in M])
        if not dense and not hasattr(A, "em_rows"):  # sparse: the FFT may pay on a batch of rows
            A, AT = model.fast_columns(np.arange(model.m), (A, AT), batch=B // blocks, two_level=False)
        single = single and (hasattr(A, "em_rows") or dense)  # FFT or dense products (sparse: double)
        if dense:  # on the used outputs: 468 of 794 on 100 values under a Gaussian window of 695 with
            # 10^6 reports, 1.6x faster
            A, AT = model.columns(used)

        def step_rows(Cr, relax, in_single):  # in_single None: the bootstrap's precision
            rows, sp = Cr.shape[0], single if in_single is None else in_single
            Cs = np.ascontiguousarray(Cr[:, used]) if dense else Cr
            if starts is None:
                P0 = np.full((rows, k), 1.0 / k)
            else:  # the B replicates, or the estimate's own counts (_checked_relaxed's check; B >= 2)
                P0 = starts[:B] if rows == B else starts[B:]
            parts = dense_step_blocks(model.k, used.size, rows) if dense else blocks_for(False, rows)

            def refit(r):
                P = _refit_em_steps(A, AT, Cs[r], P0[r], plain_steps, sp, relax)
                if steps > plain_steps:  # "em time=T": the EM flow of log g on from the cap, as auto's fit
                    P = _time_path(A, AT, np.asarray(P, dtype=float), np.ascontiguousarray(Cs[r], dtype=float),
                                   _STOP_CAP, _time_legs(steps))[-1]
                return P

            return (np.vstack(map_blocks(refit, rows, parts)),
                    np.ones(rows, bool))

        P, ok, scheme = _checked_relaxed(step_rows, C, own, p_hat, values)
        return P, ok, None, single, scheme
    if method == "ems":
        C = np.ascontiguousarray(C[:, used])
        # warm-started a tenth of the way to uniform (_EMS_WARM_MIX): not at the estimate itself
        P0 = (1.0 - _EMS_WARM_MIX) * np.broadcast_to(p_hat, (B, k)) + _EMS_WARM_MIX / k
        parts = map_blocks(lambda r: _refit_ems(A, AT, C[r], float(n), P0[r], smooth, weight, tol, max_iter),
                           B, blocks)
        P, conv = np.vstack([part[0] for part in parts]), np.concatenate([part[2] for part in parts])
        dist = np.hstack([part[3] for part in parts])
        left = np.flatnonzero(~conv)
        if _finish_pays(model, left.size, B):  # stragglers: another max_iter evaluations from where they are
            P[left], _, conv[left], dist[:, left] = _refit_ems(A, AT, C[left], float(n), P[left], smooth, weight,
                                                               tol, max_iter)
        return P, conv, dist, False, ""
    start = (1.0 - _EM_WARM_MIX) * p_hat + _EM_WARM_MIX / k
    CT = np.ascontiguousarray(C.T)

    def em(cols, P0, evals):
        parts = map_blocks(lambda r: _refit_em(A, AT, np.ascontiguousarray(CT[:, cols[r]]), float(n),
                                               P0[:, r], tol, evals), cols.size, blocks_for(dense, cols.size))
        return (np.hstack([part[0] for part in parts]), np.concatenate([part[1] for part in parts]),
                np.concatenate([part[2] for part in parts]))

    if _active_pays(model, p_hat):
        # a sparse MLE on a large channel: batched EM on each replicate's active set, then the interior-point
        # MLE where it is fast, else Newton on each replicate's active set, from p_hat itself (the set grows
        # where the replicate needs values p_hat has not); EM from the mixed start for what is left
        P, conv, gaps = _active_refits(model, CT, float(n), p_hat, tol, max_iter)
        _ipm_finish(model, CT, float(n), P, conv, gaps, tol)
        left = np.flatnonzero(~conv)
        if left.size:
            P[:, left], conv[left], gaps[left] = em(left, np.repeat(start[:, None], left.size, axis=1), max_iter)
    else:
        exact = _dense_exact(model)
        budget = min(max_iter, _REFIT_EM_FIRST) if exact is not None else max_iter
        direct = None if exact is not None else _ipm_all(model, CT, float(n), tol, budget)
        if direct is not None:  # a large channel where the interior point is fast: every replicate by it
            P, conv, gaps = direct
        else:
            P, conv, gaps = em(np.arange(B), np.repeat(start[:, None], B, axis=1), budget)
        if exact is not None:
            # small channels: EM's slow tail (sublinear where the MLE has zeros) left to Newton per column
            _newton_finish(exact, CT, float(n), P, conv, gaps, tol)
            left = np.flatnonzero(~conv)
            if left.size and max_iter > budget:  # Newton failed: EM gets the rest of the budget from there
                P0 = np.maximum(P[:, left], 0.0) + 1e-12
                P[:, left], conv[left], gaps[left] = em(left, P0 / P0.sum(axis=0), max_iter - budget)
        _ipm_finish(model, CT, float(n), P, conv, gaps, tol)
    _mle_finish(model, CT, float(n), P, conv, gaps, tol, max_iter)
    P = np.maximum(P, 0.0).T
    return P / P.sum(axis=1, keepdims=True), conv, gaps, False, ""


def _finish_pays(model, left: int, B: int) -> bool:
    """Whether ``left`` refits of ``B`` that stopped short of ``tol`` get a second run of their own
    (:func:`_mle_finish`; EMS's: another ``max_iter`` evaluations from where they stopped): on small
    channels (a dense Newton step of at most :data:`_REFIT_NEWTON_COST` flops, about 200 values)
    always, else when they are at most :data:`_FINISH_SHARE` of the batch (at least one)."""
    if left == 0:
        return False
    return _dense_newton_cost(model.k, model.m) <= _REFIT_NEWTON_COST or left <= max(1, int(_FINISH_SHARE * B))


def _mle_finish(model, CT, n, P, conv, gaps, tol, max_iter):
    """The first fit's own solver (``mle._mle``: EM, Newton, the active set) on the columns the batched
    refits left above ``tol``, from the uniform start as a first fit and, if that falls short, from the
    better point so far (again while each such run at least halves the gap, at most
    :data:`_FINISH_RUNS` runs in all), each with another ``max_iter`` evaluations; ``P``, ``conv``,
    ``gaps`` updated in place where it certifies a smaller gap.  All of them on small channels (a
    dense Newton step of at most :data:`_REFIT_NEWTON_COST` flops, about 200 values), else only when
    they are few (at most :data:`_FINISH_SHARE` of the batch, at least one).

    The batched refits are built for the common replicate, near the MLE ``p_hat`` they start from;
    a few replicates are not.  Measured (B = 200, one run each): 1,000 values, 10^6 reports of two
    atoms, the Gaussian design of (eps, delta, H) = (1, 1e-6, 10) (a dense channel), seeds 0, 1, 2:
    1, 3 and 2 refits were left at the 2,000-evaluation cap with certified gaps of 11-94 nats; each
    is certified here from the uniform start, at 0.7-4 s more per bootstrap of 15-16 s (from the
    refit's point: 3-7 s, and one of the six left short).  100 values, 10^6 reports of a smooth
    truth with a 30 % spike, Laplace design (2, 1e-8, 3) (window 59): 13 refits left after the
    Newton finish (gaps 0.9-4.6 nats), all certified here, 4.9 s against 3.9 s.  Where many are
    left on a large channel, its MLE is slow for every replicate, and finishing them would
    multiply the bootstrap's cost: a smooth truth on 10^4 values, 10^8 reports (``robust=True``'s
    MLE refits, B = 20), left 12 of 20 at gaps of 1.8-6.4 nats, and this solver needed about 2 s
    for each (1,300-1,800 EM evaluations from the refit's point; from the uniform start 2,000 did
    not suffice).  Those stay as they are and :func:`~sparseldp.estimation.intervals.bootstrap`
    reports them.
    """
    left = np.flatnonzero(~conv)
    if not _finish_pays(model, left.size, conv.size):
        return
    for j in left:
        nz = np.flatnonzero(CT[:, j] > 0)
        A, AT = model.columns(nz)
        FA = model.fast_columns(nz, (A, AT))
        fast = None if FA[0] is A else FA
        band = model.gram_band(nz, FA)
        for run in range(_FINISH_RUNS):  # as a first fit, then from the better point so far
            p0 = None
            if run:
                p0 = np.maximum(P[:, j], 0.0)
                p0 = (1.0 - 1e-9) * p0 / p0.sum() + 1e-9 / model.k  # EM keeps exact zeros
            before = gaps[j]
            p, _, _, ok, gap = _mle(A, AT, CT[nz, j], n, model.k, tol, max_iter, model.dense, fast, p0=p0,
                                    band=band)
            if gap < gaps[j]:
                p = np.maximum(p, 0.0)
                P[:, j], conv[j], gaps[j] = p / p.sum(), ok, gap
            if ok or (run >= 1 and not gap <= 0.5 * before):  # certified, or a warm run that did not halve it
                break


def _dense_exact(model):
    """The exact products on all outputs as dense arrays when a dense Newton step costs at most
    :data:`_REFIT_NEWTON_COST` (``mle._dense_newton_cost``), else ``None``."""
    if _dense_newton_cost(model.k, model.m) > _REFIT_NEWTON_COST:
        return None
    A, AT = model.columns(np.arange(model.m))
    return (A, AT) if model.dense else (A.toarray(), AT.toarray())


def _active_pays(model, p_hat) -> bool:
    """Whether the MLE's refits go to the active-set Newton (``mle._active_newton``): beyond the dense
    Newton bound of :func:`_dense_exact`, where ``p_hat`` is sparse (``mle._active_sparse``)."""
    if _dense_newton_cost(model.k, model.m) <= _REFIT_NEWTON_COST:
        return False
    return _active_sparse(p_hat)


def _newton_finish(exact, CT, n, P, conv, gaps, tol):
    """Newton (``_newton._newton`` on the dense exact products) from every column of ``P`` that EM left
    above ``tol``; ``P``, ``conv``, ``gaps`` updated in place where Newton certified a smaller gap."""
    A, AT = exact
    for j in np.flatnonzero(~conv):
        nz = np.flatnonzero(CT[:, j] > 0)
        p0 = np.maximum(P[:, j], 0.0)
        p, _, ok, gap = _newton(A[:, nz], AT[nz], CT[nz, j], n, p0 / p0.sum(), gaps[j], tol, _NEWTON_STEPS, True)
        if gap < gaps[j]:
            P[:, j], conv[j], gaps[j] = p, ok, gap
