"""The MLE's replicate refits in batches (for :mod:`sparseldp.estimation.refits`).

:func:`_refit_em` runs SQUAREM EM on every replicate at once to a certified gap.  On large channels
where the MLE is sparse, :func:`_active_refits` runs the active-set idea of ``mle._active_newton`` on
every replicate at once (:func:`_active_batch`: batched EM on each replicate's own set of values)
where that pays, and for the rest the interior point (``_ipm._ipm``, :func:`_ipm_direct`) where it
is fast, else ``mle._active_newton`` replicate by replicate (:func:`_active_solo`).  The interior
point also refits every replicate of a large channel where the MLE is not sparse when it is fast
(:func:`_ipm_all`), and finishes what any solver leaves (:func:`_ipm_finish`).  A refit is
simulation: its products may be the FFT ones and its certificate needs no rigor.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from ._ipm import _IPM_STEPS, _REF_RATE, _affordable, _ipm, _low_rank_of, _model_seconds
from ._parallel import blocks_for, map_blocks, one_blas_thread
from ._toeplitz import _fft_length
from .mle import (_ACTIVE_ADD, _ACTIVE_DENSE, _ACTIVE_DROP, _ACTIVE_EM_FINISH, _ACTIVE_NEW, _ACTIVE_REL,
                  _ACTIVE_ROUNDS, _ACTIVE_SHARE, _ACTIVE_SLACK, _NEWTON_STEPS, _active_newton, _covering)
from .solvers import _squarem

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


def _active_refits(model, CT, n, p_hat, tol, evals: int = 2_000):
    """The MLE's refits on a large channel where ``p_hat`` is sparse (``refits._active_pays``): every column of
    ``CT`` (replicate counts on all outputs) first in one batch (:func:`_active_batch`) where ``p_hat``
    carries mass on at least :data:`_BATCH_SUPPORT` values (else every column one by one by
    ``mle._active_newton``, :func:`_active_solo`), then the columns left uncertified by the interior
    point where it certifies the first two within :data:`_IPM_DIRECT` modelled seconds each, or where
    ``p_hat`` spreads over at least :data:`_IPM_SPREAD` effective atoms within :func:`_ipm_limit` of the
    batched EM's budget of ``evals`` evaluations (:func:`_ipm_direct`), else one by one.  Returns
    ``(P, converged, gaps)``."""
    if np.count_nonzero(p_hat > _ACTIVE_REL * p_hat.max()) < _BATCH_SUPPORT:
        # a few atoms: the one-by-one active set is fast (point masses: 0.06-0.2 s a replicate, where the
        # interior point's probe passed at 0.1 s and then took 1-1.5 s longer over B = 200)
        return _active_solo(model, CT, n, p_hat, tol)
    P, conv, gaps = _active_batch(model, CT, n, p_hat, tol)
    left = np.flatnonzero(~conv)
    if left.size:
        limit = _ipm_limit(model, _IPM_DIRECT, evals) if _atoms(p_hat) >= _IPM_SPREAD else _IPM_DIRECT
        fast = _ipm_direct(model, CT, n, tol, left, limit=limit)
        if fast is None:
            fast = _active_solo(model, np.ascontiguousarray(CT[:, left]), n, p_hat, tol)
        P[:, left], conv[left], gaps[left] = fast
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
        MS = member[S]
        PS = P[S]
        PS = np.where(MS, np.maximum(PS, _ACTIVE_REL * PS.max(axis=0)), 0.0)
        PS /= PS.sum(axis=0)
        Ca = np.ascontiguousarray(C[:, act])
        with one_blas_thread():
            if first:  # the probe: does EM converge on these sets, in a few columns and evaluations?
                few = slice(0, min(act.size, _BATCH_PROBE_COLUMNS))
                _, inner, _ = _refit_em(AS, AST, np.ascontiguousarray(Ca[:, few]), n, PS[:, few], 0.5 * tol,
                                        _BATCH_PROBE, MS[:, few])
                if inner.mean() < _BATCH_INNER:
                    break  # not EM's sets: the one-by-one Newton takes every column
            PS, inner, _ = _refit_em(AS, AST, Ca, n, PS, 0.5 * tol, _ACTIVE_EM_FINISH, MS)
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


def _per_column(k: int, cols: np.ndarray, solve, budget: float = math.inf):
    """``solve(j) -> (p on all k values, converged, gap, cost)`` for each column ``j`` of ``cols``, in blocks
    over threads (one BLAS thread each: the per-column systems are small), in order, until the cost a
    block has spent (the sum of ``cost``, modelled seconds) passes ``budget``: deterministic, so the columns
    tried do not depend on the machine's load.  Returns ``(P (k x len(cols)), converged, gaps, tried)``;
    the columns not tried have ``tried`` False and ``gaps`` inf."""

    def run(r):
        out = np.zeros((k, r.stop - r.start))
        conv, gaps, tried = np.zeros(out.shape[1], bool), np.full(out.shape[1], np.inf), np.zeros(out.shape[1], bool)
        spent = 0.0
        with one_blas_thread():
            for i, j in enumerate(cols[r]):
                if spent > budget:
                    break
                out[:, i], conv[i], gaps[i], cost = solve(j)
                spent += cost
                tried[i] = True
        return out, conv, gaps, tried

    parts = map_blocks(run, cols.size, blocks_for(False, cols.size))
    return tuple(np.concatenate([part[i] for part in parts], axis=1 if i == 0 else 0) for i in range(4))


def _active_solo(model, CT, n, p_hat, tol):
    """``mle._active_newton`` on every column of ``CT`` (replicate counts on all outputs) from ``p_hat``,
    with the exact products on the column's observed outputs, column by column (:func:`_per_column`).
    Returns ``(P, converged, gaps)``."""

    def solve(j):
        nz = np.flatnonzero(CT[:, j] > 0)
        A, AT = model.columns(nz)
        p, _, ok, gap = _active_newton(A, AT, CT[nz, j], n, p_hat, tol, _NEWTON_STEPS, model.dense)
        return p, ok, gap, 0.0  # no budget here

    return _per_column(model.k, np.arange(CT.shape[1]), solve)[:3]


# The interior-point MLE (_ipm._ipm) refits every replicate the batched active-set EM leaves where it
# certified the first _IPM_PROBE of them within _IPM_DIRECT seconds each (1,000 values, Laplace design
# (2, 1e-8, 3), zero-inflated: 0.03-0.06 s at 10^5-10^7 reports, where the one-by-one active set took
# 0.3-0.6 s at 10^7 and left half uncertified; on a point mass it takes 0.1-0.2 s and the active set
# 0.06-0.2 s), and every replicate where the MLE is not sparse and the channel is large when it does so
# within _IPM_DIRECT_DENSE (a spike over a smooth part under the same design, 10^6 reports: 0.16-0.22 s,
# where 2,000 batched EM evaluations left 95 of 200 uncertified), or _IPM_VS_EM times the EM's budget
# (below) where that is longer; elsewhere it finishes the replicates
# the other solvers left above tol, as long as the time it has taken on them stays within _IPM_BUDGET
# seconds (a dense channel of 1,000 values: about 0.5 s each).
# These seconds are modelled (_ipm._ipm_seconds: iterations times a cost per iteration on the reference
# machine), not read off a clock: a clock made the same seed give different replicates under load.
# All of it only on channels where one of its iterations costs at most _ipm._IPM_FLOPS (_ipm._affordable:
# through the low-rank factor or the Cholesky).
_IPM_PROBE = 2
_IPM_DIRECT = 0.1
_IPM_DIRECT_DENSE = 0.25
_IPM_BUDGET = 30.0
# Where the MLE is not sparse, the probe's limit grows to _IPM_VS_EM times the modelled time of the batched
# EM's whole budget on one replicate (_em_eval_seconds per evaluation) where that is larger (_ipm_limit): EM
# there spends its budget and still leaves replicates above tol (the MLE converges sublinearly), which the
# interior point then finishes anyway.  Measured (MLE bootstrap, B = 20, 10^6 reports, 2026-11-30; two runs
# each): 2,000 values under the Laplace window of 275, 16-17.5 s -> 5.0-6.8 s on a smooth, a spiky and a
# heavy-tailed truth, all certified either way; 10^4 values under the same window, the harder truth of
# bench_estimation, 10^8 reports, robust B = 20: 80-90 s with 6 of 20 MLE refits left uncertified -> 53-54 s,
# all certified (20-21 iterations, about 2 s each), where the limit of 0.25 s allowed two iterations;
# unchanged on 5,000 values under the window of 83 (3.2-4.4 s) and under the Gaussian window of 695 on
# 1,000 values (21-26 s; the probe still fails there).
_IPM_VS_EM = 2.0
# The same limit for the columns the batched active set leaves (a sparse MLE), against the one-by-one
# active set, where the MLE spreads over at least _IPM_SPREAD effective atoms (_atoms: the exponential of
# its entropy); below, the probe keeps _IPM_DIRECT.  The one-by-one active set is fast where one atom
# dominates (the set hardly moves from replicate to replicate) and slow where many small atoms shift.
# Measured (MLE bootstrap, B = 20, 10^6 reports, two runs each, _IPM_DIRECT against the EM-budget limit;
# effective atoms in brackets): Gaussian windows, 349 on 2,000 values, smooth (45) 52-63 -> 8-10 s, bimodal
# (51) 52-58 -> 8.7-10 s, heavy tail (20) 48-54 -> 10-11 s; 209 on 1,000 values, bimodal (45) 22-27 ->
# 2.3-2.5 s, smooth (40) 11-12 -> 2.0-2.1 s; a zero-inflated count under the Laplace window of 83 on 5,000
# values (27) 7-10 -> 5-6 s.  Where they stay with _IPM_DIRECT: zero-inflated counts under the Laplace
# window of 275 on 2,000 values (13), 1.0 s against 5.8-7.0 s with the longer limit, and under the Gaussian
# window of 349 on 1,000 values (5.7), 0.7-1.0 against 3.7-4.1 s; neutral either way: the Laplace window of
# 137 on 1,000 values (16), a spike under the Gaussian window of 695 (15), a zero-inflated count under 209
# on 2,000 values (5.5).  (The support above 1e-4 of the largest mass did not separate them: 42-124 values.)
_IPM_SPREAD = 18.0
# The batched EM's time per evaluation and column (reference machine, one BLAS / FFT thread; _refit_em's
# SQUAREM cycle, 16 columns, 200 evaluations): by FFT products about _EM_FFT_SECONDS x L log2 L for the
# FFT length L (measured 108-121 us on 1,000 values under Laplace windows of 83 and 137, 185 us on 2,000
# under 275, 384 us on 5,000 under 83, 1,172 us on 10^4 under 275, 193-206 us under Gaussian windows of 695
# and 349 on 1,000 and 2,000 values; modelled 94-537 us, within 40 %); otherwise by its products' entries.
_EM_FFT_SECONDS = 8.6e-9


def _ipm_column(model, CT, n, j, tol, limit=math.inf):
    """``_ipm._ipm`` on column ``j`` of ``CT`` with the exact products on its observed outputs (the
    banded Gram by FFT where the channel has FFT products).  Returns ``(p on all k values, converged,
    gap, cost)``, ``gap`` the certificate of ``p`` itself (no last EM step: the certificate of a point one
    step beyond can be larger, although its log-likelihood gap is not), ``cost`` its iterations' modelled
    time (``_ipm._model_seconds``).  Gives up after the iterations whose modelled time fits in ``limit``
    (seconds on the reference machine; a count of iterations, not a clock, so a seed gives the same
    refits whatever the load)."""
    nz = np.flatnonzero(CT[:, j] > 0)
    A, AT = model.columns(nz)
    low_rank = _low_rank_of(model, nz)
    band = None if low_rank is not None else model.gram_band(nz)  # the Gram's band only where it is factored
    per = _model_seconds(model, nz.size)
    steps = _IPM_STEPS if limit >= _IPM_STEPS * per else int(max(limit, 0.0) // per)
    p, done, ok, gap = _ipm(A, AT, CT[nz, j], n, tol, model.dense, band, max_steps=steps, step=False,
                            low_rank=low_rank)
    return p, ok, gap, done * per


def _ipm_refits(model, CT, n, cols, tol, budget=math.inf):
    """``_ipm`` on the columns ``cols`` of ``CT`` (:func:`_per_column`: in blocks over threads, until the
    modelled time spent passes ``budget`` seconds per block).  Returns ``(P (k x len(cols)), converged,
    gaps, tried)``."""
    return _per_column(model.k, np.asarray(cols), lambda j: _ipm_column(model, CT, n, j, tol), budget)


def _ipm_direct(model, CT, n, tol, cols=None, limit=None):
    """The columns ``cols`` of ``CT`` (default all) by ``_ipm`` where it certifies each of the first
    :data:`_IPM_PROBE` within ``limit`` modelled seconds (default :data:`_IPM_DIRECT`; the probe stops at
    the first that does not); else ``None`` (the caller's solvers run).  Returns ``(P (k x len(cols)),
    converged, gaps)``."""
    limit = _IPM_DIRECT if limit is None else limit
    if not _affordable(model, model.m):
        return None
    cols = np.arange(CT.shape[1]) if cols is None else np.asarray(cols)
    P = np.zeros((model.k, cols.size))
    conv, gaps = np.zeros(cols.size, bool), np.full(cols.size, np.inf)
    few = min(cols.size, _IPM_PROBE)
    with one_blas_thread():
        for i in range(few):
            P[:, i], conv[i], gaps[i], _ = _ipm_column(model, CT, n, cols[i], tol, limit)
            if not conv[i]:
                return None
    if cols.size > few:
        P[:, few:], conv[few:], gaps[few:], _ = _ipm_refits(model, CT, n, cols[few:], tol)
    return P, conv, gaps


def _em_eval_seconds(model) -> float:
    """The batched EM's modelled time (seconds, reference machine) per evaluation and column on ``model``'s
    outputs: :data:`_EM_FFT_SECONDS` ``L log2 L`` on a shifted-window channel (FFT products of length ``L``,
    ``_toeplitz._fft_length`` for all outputs), else two products over the stored entries (``k m`` dense) at
    ``_ipm._REF_RATE`` flops per second and a fixed 20 us."""
    if model.log_window is not None:
        L = _fft_length(model.k, model.log_window.size, np.arange(model.m))  # every output through the FFT
        return _EM_FFT_SECONDS * L * math.log2(L)
    entries = model.k * model.m if model.dense else model.nnz
    return 4.0 * entries / _REF_RATE + 2e-5


def _atoms(p) -> float:
    """The effective number of atoms of ``p``: the exponential of its entropy (nats)."""
    q = np.asarray(p, dtype=float)
    q = q[q > 0] / q.sum()
    return float(np.exp(-(q * np.log(q)).sum()))


def _ipm_limit(model, least: float, evals: int) -> float:
    """The interior point's probe limit (modelled seconds a replicate): ``least``, or :data:`_IPM_VS_EM` times
    the batched EM's modelled time for ``evals`` evaluations of one column where that is larger."""
    return max(least, _IPM_VS_EM * evals * _em_eval_seconds(model))


def _ipm_all(model, CT, n, tol, evals: int = 2_000):
    """Every column of ``CT`` by ``_ipm`` where the MLE is not sparse on a large channel:
    :func:`_ipm_direct` with the limit :func:`_ipm_limit` (at least :data:`_IPM_DIRECT_DENSE`)."""
    return _ipm_direct(model, CT, n, tol, limit=_ipm_limit(model, _IPM_DIRECT_DENSE, evals))


def _ipm_finish(model, CT, n, P, conv, gaps, tol):
    """``_ipm`` on the columns left above ``tol``, within :data:`_IPM_BUDGET` modelled seconds; ``P``, ``conv``,
    ``gaps`` updated in place where it certifies a smaller gap."""
    left = np.flatnonzero(~conv)
    if not left.size or not _affordable(model, model.m):
        return
    Pl, cl, gl, tried = _ipm_refits(model, CT, n, left, tol, _IPM_BUDGET)
    better = tried & (gl < gaps[left])
    j = left[better]
    P[:, j], conv[j], gaps[j] = Pl[:, better], cl[better], gl[better]
