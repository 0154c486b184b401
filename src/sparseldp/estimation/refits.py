"""Refitting the bootstrap's replicate histograms, all at once (:func:`_refit_replicates`).

Each estimator has a batched refit that iterates every replicate (a column) on
its own: :func:`_refit_ems` (accelerated EMS), :func:`_refit_em_steps` (a fixed
number of plain EM steps, ``auto``'s ``"em steps=t"`` member), ``_em_members._flow_fits`` (its
``"em flow=T"`` member) and
:func:`_refit_em` (SQUAREM EM to a certified gap, the MLE's refit, finished by
Newton column by column on small channels: :func:`_newton_finish`; on large
channels where the MLE is sparse, active sets grown from the MLE's support, batched EM on them for
all replicates at once and ``mle._active_newton`` for the replicates that batch leaves:
:func:`_active_refits`); inversion is
least squares per replicate.  The columns are cut into blocks run in threads
where the products are sparse or FFT (:mod:`sparseldp.estimation._parallel`).
A refit is simulation: its products may be the FFT ones and its certificate
needs no rigor.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._validation import check_int
from ._parallel import blocks_for, dense_step_blocks, map_blocks, one_blas_thread
from ._em_members import _flow_fits
from .mle import (_ACTIVE_ADD, _ACTIVE_DENSE, _ACTIVE_DROP, _ACTIVE_EM_FINISH, _ACTIVE_NEW, _ACTIVE_REL,
                  _ACTIVE_ROUNDS, _ACTIVE_SHARE, _ACTIVE_SLACK, _NEWTON_STEPS, _active_newton, _active_sparse,
                  _covering, _dense_newton_cost, _mle, _newton)
from .solvers import (METHODS, _METHODS_TEXT, _check_smooth, _em_run, _ems_fixed, _least_squares, _squarem,
                      project_simplex)

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
# Refits left above tol by the batched solvers are finished one by one by the first fit's solver, on a
# large channel when they are at most this share of the batch (refits._mle_finish).
_FINISH_SHARE = 0.05
# ... in at most this many runs of max_iter evaluations each: from the uniform start, then from the better
# point while a run at least halves the certified gap (1,000 values, Laplace design (2, 1e-8, 3), 10^6
# reports of a zero-inflated count, B = 200: one straggler at 3.45 nats from the uniform start, 0.513
# after a run from there, certified by the third; two runs had left it reported; 47.4 s against 47.8 s).
_FINISH_RUNS = 4
# The batched active-set refits (_active_batch) start with a probe: EM on the first sets of this many
# columns for this many evaluations; the batch goes on only where EM converged on at least this share of
# them (and, in each round, of the columns left).  Measured at B = 200: where the batch pays (1,000 values,
# Laplace design (2, 1e-8, 3), zero-inflated, 10^6 reports) 189 of 200 columns converge within 300
# evaluations; where Newton is needed (two atoms under the Laplace window 275) 3 of 200.
_BATCH_PROBE = 300
_BATCH_PROBE_COLUMNS = 16
_BATCH_INNER = 0.5
# ... and is tried only where p_hat carries mass (mle._ACTIVE_REL of its largest) on at least this many
# values.  On a few atoms the one-by-one Newton is fast and the batch's sets grow by up to mle._ACTIVE_ADD
# values a column and round: a point mass on 1,000 values (Gaussian design (2, 1e-8, 3), 10^6 reports;
# 2 values carry mass) took 7.3 s in the batch and what it left against 3.6 s one by one; two atoms
# under the Laplace window 275 (8 values) fail the probe.  Where it pays, 65 values carry mass (above).
_BATCH_SUPPORT = 32



def _refit_ems(A, AT, C, n, P0, passes, weight, tol, max_iter):
    """EMS on ``B`` histograms at once (rows of ``C``), warm-started at the rows of ``P0``.

    ``A``, ``AT``: the column-scaled channel on all outputs and its transpose
    (sparse, dense, or applied by FFT, :mod:`sparseldp.estimation._toeplitz`).
    ``solvers._ems_fixed``: accelerated, the same stopping rule (``tol``) as
    ``method="ems"``; converged replicates are frozen.  Returns (P, evals,
    converged mask, ``2 x B``: the estimated TV distance of each to its fixed point and its last
    plain step), ``P`` with one row per replicate.
    """
    P, evals, conv, dist = _ems_fixed(A, AT, np.ascontiguousarray(C.T), 1.0 / n, np.ascontiguousarray(P0.T),
                                      passes, weight, tol, max_iter, with_dist=True)
    return np.ascontiguousarray(P.T), evals, conv, dist


def _refit_em_steps(A, AT, C, n, P0, steps, single=False):
    """Exactly ``steps`` plain EM steps on ``B`` histograms at once (rows of ``C``), from the rows of ``P0``.

    The ``"em steps=t"`` member of ``method="auto"``: the EM map ``p <- p * g(p)``
    (``solvers._em_run``, renormalized each step; FFT or dense products in single precision if
    ``single``), with no stopping rule (reaching ``t`` is the rule, not a failure).  ``A``,
    ``AT`` as in :func:`_refit_ems`.  Returns ``P``, one row per replicate.
    """
    return _em_run(A, AT, P0, C, steps, single=single)


def _refit_em(A, AT, C, n, P0, tol, max_iter, member=None):
    """SQUAREM EM on ``B`` histograms at once (columns of ``C``, outputs x B), from the columns of ``P0``.

    Every column runs ``mle._em``'s cycle (the certificate ``n log max g``,
    two EM steps, the SQUAREM extrapolation kept where it does not lower the
    log-likelihood), as one matrix product per step for the batch; a column
    leaves the batch once its certificate is at most ``tol``, or at
    ``max_iter`` evaluations.  Measured against the per-replicate loop it
    replaces (k = 100, B = 200, same replicate counts): 3.3-3.5x faster, the
    same intervals to about 1e-5 of their width.  Returns (P, converged mask, certified gap of each
    column's returned point in nats).

    ``mle._em`` is the same cycle on one column, kept apart on purpose: it works on 1-D
    arrays with Python-float scalars (numpy's per-call cost on 0-d values made it up to
    20% slower on small channels, ``solvers._squarem``), records the ``(evals, gap)``
    history that ``mle._mle`` uses to predict EM's remaining cost, and can return the
    certified point itself (``step=False``); a batch of one through this function would
    give up all three.

    ``member`` (``k x B`` bool, optional): each column's own values (:func:`_active_batch`); the
    others must be 0 in ``P0`` (EM keeps them there) and the certificate takes its maximum over the
    column's own values only.
    """
    inv_n = 1.0 / n
    B = C.shape[1]
    out = np.empty((A.shape[0], B))
    conv = np.zeros(B, bool)
    gaps = np.zeros(B)
    act = np.arange(B)
    P = np.array(P0, dtype=float)
    Q = AT @ P
    Cm = C > 0

    def g_of(Q, Ca, Ma):
        return (A @ np.divide(Ca, Q, out=np.zeros_like(Ca), where=Ma)) * inv_n

    def cert(G, M):
        return n * np.log(np.maximum((G if M is None else np.where(M, G, 0.0)).max(axis=0), 1e-300))

    def loglik(Q, Ca, Ma):  # -inf where an observed output has q <= 0, as mle._em
        with np.errstate(divide="ignore", invalid="ignore"):
            L = np.where(Ma, Ca * np.log(np.where(Ma, Q, 1.0)), 0.0).sum(axis=0)
        return np.where(((Q <= 0) & Ma).any(axis=0), -np.inf, L)

    evals = 0
    Mb = member
    while act.size:
        Ca, Ma = C[:, act], Cm[:, act]
        G = g_of(Q, Ca, Ma)
        gap = cert(G, Mb)
        fin = (gap <= tol) | (evals >= max_iter)
        if fin.any():
            out[:, act[fin]] = P[:, fin] * G[:, fin]
            conv[act[fin]] = gap[fin] <= tol
            gaps[act[fin]] = gap[fin]  # certifies P; P * G (one more EM step) only raises the likelihood
            keep = ~fin
            act, P, Q, G, Ca, Ma = act[keep], P[:, keep], Q[:, keep], G[:, keep], Ca[:, keep], Ma[:, keep]
            Mb = None if Mb is None else Mb[:, keep]
            if not act.size:
                break
        P1 = P * G
        evals += 1
        G1 = g_of(AT @ P1, Ca, Ma)
        gap1 = cert(G1, Mb)
        fin = gap1 <= tol
        if fin.any():
            out[:, act[fin]] = P1[:, fin] * G1[:, fin]
            conv[act[fin]] = True
            gaps[act[fin]] = gap1[fin]
            keep = ~fin
            act, P, P1, G1, Ca, Ma = act[keep], P[:, keep], P1[:, keep], G1[:, keep], Ca[:, keep], Ma[:, keep]
            Mb = None if Mb is None else Mb[:, keep]
            if not act.size:
                break
        P2 = P1 * G1
        evals += 1
        Q2 = AT @ P2
        if evals >= max_iter:
            P, Q = P2, Q2
            continue
        a, Pe = _squarem(P, P1 - P, P2 - P1, P2)
        ext = a < -1.0
        if ext.any():
            Qe = AT @ Pe
            take = ext & (loglik(Qe, Ca, Ma) >= loglik(Q2, Ca, Ma))
            P = np.where(take, Pe, P2)
            Q = np.where(take, Qe, Q2)
        else:
            P, Q = P2, Q2
    return out, conv, gaps


def _refit_plan(estimate, smooth):
    """``(method, smooth passes, EM steps or None)`` to refit replicates with.

    ``method="auto"`` refits the member of the regularization path it chose
    (``estimate.regularization``), so the intervals leave out the variability of
    the choice itself (re-running the selection per replicate would cost a full
    path fit each).  ``"em steps=t"`` refits t plain EM steps from the uniform
    start, as the member was fit; ``"em flow=T"`` the cap's EM steps and the EM flow to
    time ``T`` (``_em_members._flow_fits``).
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
            if reg.startswith("em steps="):
                return "em-steps", 0, check_int(int(reg.split("=", 1)[1]), "steps", minimum=0), 0.25
            if reg.startswith("em flow="):
                return "em-flow", 0, check_int(int(reg.split("=", 1)[1]), "time", minimum=1), 0.25
        except ValueError:
            pass
        if reg == "em mle":
            return "em", 1, None, 0.25
        raise ValueError(f"bootstrap supports method='auto' estimates whose regularization is 'ems smooth=m', "
                         f"'ems weight=w' (0 < w <= 0.25), 'em steps=t', 'em flow=T' or 'em mle'; "
                         f"got {reg!r}")
    if method not in METHODS:
        raise ValueError(f"estimate.method must be {_METHODS_TEXT}; got {method!r}")
    return method, _check_smooth(smooth, method), None, 0.25


def _refit_replicates(model, C, n, p_hat, method, smooth, weight, steps, tol, max_iter, single=False):
    """Refit every row of ``C`` (``B`` replicate histograms on all outputs) with the plan's estimator.

    ``method`` is :func:`_refit_plan`'s: ``"em-steps"`` (``steps`` plain EM steps from the
    uniform start; on FFT products in single precision if ``single``), ``"ems"`` (``smooth`` passes
    of weight ``weight``, warm-started at ``p_hat``), ``"em"`` (warm-started at ``(1 - w) p_hat + w / k``)
    or ``"inversion"``.  Returns ``(P, converged mask, gaps or None, single)``, ``P`` with one replicate
    per row, ``gaps`` the MLE refits' certified log-likelihood gaps (nats) or the EMS refits'
    estimated TV distances to their fixed points and last steps (``2 x B``), and ``single`` whether
    single precision was used.
    """
    B, k = C.shape[0], model.k
    if method == "inversion":
        P = np.vstack([project_simplex(_least_squares(model, C[b] / n)) for b in range(B)])
        return P, np.ones(B, bool), None, False
    # the outputs some replicate has: the others add nothing to an EM or EMS step
    used = np.flatnonzero(C.sum(axis=0) > 0)
    if method == "em-flow":
        # auto's "em flow=T" member: the cap's plain EM steps from the uniform start, then the EM flow to
        # T (its Newton steps per replicate)
        EA, EAT = model.columns(used)
        single = single and model.dense  # the plain EM steps in float32 (dense products); the flow in double
        parts = map_blocks(lambda r: _flow_fits(EA, EAT, np.ascontiguousarray(C[r][:, used].T), steps, single), B,
                           dense_step_blocks(model.k, used.size, B) if model.dense else 1)
        P, failed = np.hstack([part[0] for part in parts]), np.concatenate([part[1] for part in parts])
        return P.T, ~failed, None, single
    # FFT products where they apply; every refit is column by column, so blocks run in threads
    # unless the products are dense matrix products (BLAS is already parallel).  EMS on the used
    # outputs; the MLE's refits index outputs by position, and the fused FFT steps skip the
    # unobserved ones themselves (_toeplitz._Conv.em_rows), so both take every output
    A, AT = model.fast_columns(used if method == "ems" else np.arange(model.m))
    dense = isinstance(A, np.ndarray)
    blocks = blocks_for(dense, B)
    if method == "em-steps":
        # the same t plain EM steps from the uniform start as the chosen member: the batched map
        # with no smoothing, run exactly t times (reaching t is the rule, not a failure)
        P0 = np.full((B, k), 1.0 / k)
        if not dense and not hasattr(A, "em_rows"):  # sparse: the FFT may pay on a batch of rows
            A, AT = model.fast_columns(np.arange(model.m), (A, AT), batch=B // blocks)
        single = single and (hasattr(A, "em_rows") or dense)  # FFT or dense products (sparse: double)
        Cs = C
        if dense:  # on the used outputs: 468 of 794 on 100 values under a Gaussian window of 695 with
            # 10^6 reports, 1.6x faster
            A, AT = model.columns(used)
            Cs = np.ascontiguousarray(C[:, used])
            blocks = dense_step_blocks(model.k, used.size, B)
        P = np.vstack(map_blocks(lambda r: _refit_em_steps(A, AT, Cs[r], float(n), P0[r], steps, single),
                                 B, blocks))
        return P, np.ones(B, bool), None, single
    if method == "ems":
        C = np.ascontiguousarray(C[:, used])
        # a warm start with exact zeros would keep them (multiplicative update); EMS's own fits have none
        P0 = 0.999 * np.broadcast_to(p_hat, (B, k)) + 0.001 / k
        parts = map_blocks(lambda r: _refit_ems(A, AT, C[r], float(n), P0[r], smooth, weight, tol, max_iter),
                           B, blocks)
        P, conv = np.vstack([part[0] for part in parts]), np.concatenate([part[2] for part in parts])
        dist = np.hstack([part[3] for part in parts])
        left = np.flatnonzero(~conv)
        if _finish_pays(model, left.size, B):  # stragglers: another max_iter evaluations from where they are
            P[left], _, conv[left], dist[:, left] = _refit_ems(A, AT, C[left], float(n), P[left], smooth, weight,
                                                               tol, max_iter)
        return P, conv, dist, False
    start = (1.0 - _EM_WARM_MIX) * p_hat + _EM_WARM_MIX / k
    CT = np.ascontiguousarray(C.T)

    def em(cols, P0, evals):
        parts = map_blocks(lambda r: _refit_em(A, AT, np.ascontiguousarray(CT[:, cols[r]]), float(n),
                                               P0[:, r], tol, evals), cols.size, blocks_for(dense, cols.size))
        return (np.hstack([part[0] for part in parts]), np.concatenate([part[1] for part in parts]),
                np.concatenate([part[2] for part in parts]))

    if _active_pays(model, p_hat):
        # a sparse MLE on a large channel: Newton on each replicate's active set, from p_hat itself (the
        # set grows where the replicate needs values p_hat has not); EM from the mixed start for the rest
        P, conv, gaps = _active_refits(model, CT, float(n), p_hat, tol)
        left = np.flatnonzero(~conv)
        if left.size:
            P[:, left], conv[left], gaps[left] = em(left, np.repeat(start[:, None], left.size, axis=1), max_iter)
    else:
        exact = _dense_exact(model)
        budget = min(max_iter, _REFIT_EM_FIRST) if exact is not None else max_iter
        P, conv, gaps = em(np.arange(B), np.repeat(start[:, None], B, axis=1), budget)
        if exact is not None:
            # small channels: EM's slow tail (sublinear where the MLE has zeros) left to Newton per column
            _newton_finish(exact, CT, float(n), P, conv, gaps, tol)
            left = np.flatnonzero(~conv)
            if left.size and max_iter > budget:  # Newton failed: EM gets the rest of the budget from there
                P0 = np.maximum(P[:, left], 0.0) + 1e-12
                P[:, left], conv[left], gaps[left] = em(left, P0 / P0.sum(axis=0), max_iter - budget)
    _mle_finish(model, CT, float(n), P, conv, gaps, tol, max_iter)
    P = np.maximum(P, 0.0).T
    return P / P.sum(axis=1, keepdims=True), conv, gaps, False


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
        for run in range(_FINISH_RUNS):  # as a first fit, then from the better point so far
            p0 = None
            if run:
                p0 = np.maximum(P[:, j], 0.0)
                p0 = (1.0 - 1e-9) * p0 / p0.sum() + 1e-9 / model.k  # EM keeps exact zeros
            before = gaps[j]
            p, _, _, ok, gap = _mle(A, AT, CT[nz, j], n, model.k, tol, max_iter, model.dense, fast, p0=p0)
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


def _active_refits(model, CT, n, p_hat, tol):
    """The MLE's refits on a large channel where ``p_hat`` is sparse (:func:`_active_pays`): every column of
    ``CT`` (replicate counts on all outputs) first in one batch (:func:`_active_batch`) where ``p_hat``
    carries mass on at least :data:`_BATCH_SUPPORT` values, then the columns left uncertified by
    ``mle._active_newton`` one by one (:func:`_active_solo`).  Returns ``(P, converged, gaps)``."""
    B = CT.shape[1]
    if np.count_nonzero(p_hat > _ACTIVE_REL * p_hat.max()) >= _BATCH_SUPPORT:
        P, conv, gaps = _active_batch(model, CT, n, p_hat, tol)
    else:
        P, conv, gaps = np.zeros((model.k, B)), np.zeros(B, bool), np.full(B, np.inf)
    left = np.flatnonzero(~conv)
    if left.size:
        P[:, left], conv[left], gaps[left] = _active_solo(model, np.ascontiguousarray(CT[:, left]), n, p_hat, tol)
    return P, conv, gaps


def _active_batch(model, CT, n, p_hat, tol):
    r"""The active-set idea of ``mle._active_newton`` on all replicates at once, with batched EM as the
    inner solver.  Returns ``(P, converged, gaps)``; the columns left uncertified carry the point and
    the gap of their last round (:func:`_active_refits` gives them to the one-by-one solver).

    Each column ``j`` has its own set of values ``S_j``; its other values are held at exactly 0 (EM's
    multiplicative update keeps them there).  Every set starts as the values carrying mass in
    ``p_hat`` (above ``mle._ACTIVE_REL`` of its largest) plus one value reaching each output some
    replicate observed (``mle._covering``).  A round runs SQUAREM EM (:func:`_refit_em`, one matrix
    product per step for the whole batch, on the rows of the union of the sets) from each column's
    point floored at ``_ACTIVE_REL`` of its largest mass on ``S_j``, until its certificate over
    ``S_j`` is at most ``tol / 2`` or for ``mle._ACTIVE_EM_FINISH`` evaluations.  Then each column's
    certificate ``n log max_x g_x`` is computed on all ``k`` values (exact products), and the columns
    at ``tol`` or below leave, certified.  In the others, as in ``_active_newton``: the values with
    less than ``mle._ACTIVE_DROP`` of the largest mass and ``g_x < 1 - mle._ACTIVE_SLACK`` leave
    ``S_j``, each at most once (not in a column where that would leave an observed output out of
    reach), and the values outside ``S_j`` with ``g_x > 1`` that are local maxima of ``g`` (at most
    ``mle._ACTIVE_ADD``, the largest first) join it with ``mle._ACTIVE_NEW`` of the largest mass.  At
    most ``mle._ACTIVE_ROUNDS`` rounds.  The batch stops early, leaving the rest to the one-by-one
    solver, when EM converged on fewer than :data:`_BATCH_INNER` of the columns' own sets in a round,
    when a round certified no column and added no value, or when the union of the sets passes
    ``mle._ACTIVE_SHARE`` of the values.  Before the first round a probe runs EM on the first
    :data:`_BATCH_PROBE_COLUMNS` columns for :data:`_BATCH_PROBE` evaluations and the batch goes on only
    if it converged on at least :data:`_BATCH_INNER` of them.

    EM, not Newton, is the inner solver where it converges: there the barrier Newton of the one-by-one
    solver stopped (its decrement below ``0.05 tol``) with ``n log max g`` still between 0.3 and 90
    nats in 96 of 99 runs (a value with little mass and a high ``g`` moves the likelihood little, so
    the decrement cannot see it), and the EM finish after each Newton run did the certifying anyway.
    Where EM is slow on the sets (a few atoms under a wide kernel: neighbouring values nearly
    collinear), the probe fails and Newton does the work.
    Measured (1,000 values, Laplace design (2, 1e-8, 3), 10^6 reports of a zero-inflated count, 65
    values carry mass; the MLE's bootstrap, B = 200, one BLAS thread): 198 of 200 replicates
    certified here, 2 by the one-by-one solver; the whole bootstrap 10.3-11.5 s against 43.7 s.  The
    intervals of the mean, variance and a range query moved by at most 3e-6 of their width.
    Running blocks of columns in threads was slower (two blocks 15.5 s, eight 39.3 s): the rounds'
    small products leave little time outside the interpreter.
    """
    k, B = model.k, CT.shape[1]
    obs = np.flatnonzero(CT.sum(axis=1) > 0)
    A, _ = model.columns(obs)
    C = np.ascontiguousarray(CT[obs], dtype=float)
    out, conv, gaps = np.zeros((k, B)), np.zeros(B, bool), np.full(B, np.inf)
    act = np.arange(B)
    P = np.repeat(p_hat[:, None], B, axis=1)
    S = _covering(A, p_hat, np.flatnonzero(p_hat > _ACTIVE_REL * p_hat.max()), model.dense)
    member = np.zeros((k, B), bool)  # each column's own set (within S); its other values stay at exactly 0
    member[S] = True
    left = np.zeros((k, B), bool)  # values that left a column's set
    for rnd in range(_ACTIVE_ROUNDS):
        first = rnd == 0
        AS = A[S]
        if model.dense or S.size * obs.size <= _ACTIVE_DENSE:
            AS = np.asarray(AS) if model.dense else AS.toarray()
            AST = np.ascontiguousarray(AS.T)
        else:
            AS = sp.csr_array(AS)
            AST = sp.csr_array(AS.T)
        PS = P[S]
        PS = np.where(member[S], np.maximum(PS, _ACTIVE_REL * PS.max(axis=0)), 0.0)
        PS /= PS.sum(axis=0)
        Ca = np.ascontiguousarray(C[:, act])
        with one_blas_thread():
            if first:  # the probe: does EM converge on these sets, in a few columns and evaluations?
                few = slice(0, min(act.size, _BATCH_PROBE_COLUMNS))
                _, inner, _ = _refit_em(AS, AST, np.ascontiguousarray(Ca[:, few]), n, PS[:, few], 0.5 * tol,
                                        _BATCH_PROBE, member[S][:, few])
                if inner.mean() < _BATCH_INNER:
                    break  # not EM's sets: the one-by-one Newton takes every column
            PS, inner, _ = _refit_em(AS, AST, Ca, n, PS, 0.5 * tol, _ACTIVE_EM_FINISH, member[S])
        full = np.zeros((k, act.size))
        full[S] = PS
        G = (A @ np.divide(Ca, AST @ PS, out=np.zeros_like(Ca), where=Ca > 0)) / n
        gap = n * np.log(np.maximum(G.max(axis=0), 1e-300))
        done = gap <= tol
        out[:, act] = full
        gaps[act] = np.maximum(gap, 0.0)
        conv[act[done]] = True
        # columns whose EM stopped short of their set's optimum go on from where they are, while most converge
        rest = ~done
        if not rest.any() or inner.mean() < _BATCH_INNER:
            break  # all certified, or EM is not the solver for these sets (the one-by-one Newton is)
        act, P, G = act[rest], full[:, rest], G[:, rest]
        member, left = member[:, rest], left[:, rest]
        top = P.max(axis=0)
        # values without mass whose g is clearly below 1 leave their column's set, each at most once
        # (no cycling), unless that leaves an output the column observed out of its reach
        drop = member & ~left & (P <= _ACTIVE_DROP * top) & (G <= 1.0 - _ACTIVE_SLACK)
        if drop.any():
            kept = (member & ~drop)[S].astype(float)
            lost = ((AST @ kept) <= 0) & (Ca[:, rest] > 0)
            drop[:, lost.any(axis=0)] = False
            member &= ~drop
            left |= drop
            P[drop] = 0.0
        # the local maxima of g above 1 outside a column's set join it (one per direction of ascent)
        up = ~member & (G > 1.0)
        peak = np.ones(G.shape, bool)
        peak[1:] &= G[1:] >= G[:-1]
        peak[:-1] &= G[:-1] >= G[1:]
        grew = False
        for j in np.flatnonzero(up.any(axis=0)):
            cand = np.flatnonzero(up[:, j] & peak[:, j])
            if cand.size == 0:
                cand = np.flatnonzero(up[:, j])
            add = cand[np.argsort(-G[cand, j], kind="stable")[:_ACTIVE_ADD]]
            P[add, j] = _ACTIVE_NEW * top[j]
            member[add, j] = True
            grew = True
        if not grew and not done.any():
            break  # stalled: the one-by-one solver takes the rest
        S = np.flatnonzero(member.any(axis=1))
        if S.size > _ACTIVE_SHARE * k:
            break  # the sets have grown past a sparse problem
        P /= P.sum(axis=0)
    return out, conv, gaps


def _active_solo(model, CT, n, p_hat, tol):
    """``mle._active_newton`` on every column of ``CT`` (replicate counts on all outputs) from ``p_hat``,
    with the exact products on the column's observed outputs; columns in blocks over threads, each with
    one BLAS thread (the active sets' matrices are small).  Returns ``(P, converged, gaps)``."""
    k, B = model.k, CT.shape[1]

    def run(r):
        out = np.empty((k, r.stop - r.start))
        conv, gaps = np.zeros(out.shape[1], bool), np.empty(out.shape[1])
        with one_blas_thread():
            for i, j in enumerate(range(r.start, r.stop)):
                nz = np.flatnonzero(CT[:, j] > 0)
                A, AT = model.columns(nz)
                out[:, i], _, conv[i], gaps[i] = _active_newton(A, AT, CT[nz, j], n, p_hat, tol, _NEWTON_STEPS,
                                                                model.dense)
        return out, conv, gaps

    parts = map_blocks(run, B, blocks_for(False, B))
    return (np.hstack([part[0] for part in parts]), np.concatenate([part[1] for part in parts]),
            np.concatenate([part[2] for part in parts]))


def _newton_finish(exact, CT, n, P, conv, gaps, tol):
    """Newton (``mle._newton`` on the dense exact products) from every column of ``P`` that EM left
    above ``tol``; ``P``, ``conv``, ``gaps`` updated in place where Newton certified a smaller gap."""
    A, AT = exact
    for j in np.flatnonzero(~conv):
        nz = np.flatnonzero(CT[:, j] > 0)
        p0 = np.maximum(P[:, j], 0.0)
        p, _, ok, gap = _newton(A[:, nz], AT[nz], CT[nz, j], n, p0 / p0.sum(), gaps[j], tol, _NEWTON_STEPS, True)
        if gap < gaps[j]:
            P[:, j], conv[j], gaps[j] = p, ok, gap
