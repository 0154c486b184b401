"""The EM members of ``method="auto"``'s path (:mod:`sparseldp.estimation.auto`): EM from the uniform
start stopped by the discrepancy principle (:func:`_stopped_cols`), kept at multiples of that stop, and
continued past the step cap by the EM flow (:func:`_flow_fits`, ``solvers._em_flow``).  The path, the
selection and the measurements are in :mod:`sparseldp.estimation.auto`.
"""

from __future__ import annotations

import numpy as np

from .model import _Model
from .solvers import _em_flow, _em_run

# Cap on the steps of the discrepancy-stopped EM members.
_STOP_CAP = 20_000
# The stopped EM's deviance is computed at every step for the first 2 x this many steps, then every this many
# steps (the deviance never rises under EM; a column found below is rerun from the previous check).
_DEV_EVERY = 16
# Floor on the (column-scaled) held-out output probability.
_Q_FLOOR = 1e-300
# Where every column's stopped EM reaches the cap, the EM flow (solvers._em_flow) continues it to
# _STOP_CAP x 2^j for j = 1.._FLOW_DOUBLINGS (members ("flow", j)), on dense channels whose Newton
# step per column (k^2 m' multiply-adds) costs at most _FLOW_COST.
_FLOW_DOUBLINGS = 10
_FLOW_COST = 2e7


def _stop_steps(t: int, f: int, cap: int) -> int:
    """EM steps of the member kept at ``f`` times a discrepancy stop at step ``t`` (``f = 1``: the stop)."""
    return t if f == 1 else min(f * max(t, 1), cap)


def _stopped_cols(A, AT, C, scale, cap, mults=()):
    """EM from the uniform start in every column, each stopped by the discrepancy principle.

    Column ``j`` stops at the first step ``t_j`` where ``2 sum_y C_yj log(C_yj / (n_j q_yj)) <=``
    (number of ``y`` with ``C_yj > 0``), ``q`` unscaled (``scale`` undoes the column scaling);
    for each ``f`` in ``mults`` the same EM is also kept at step ``f max(t_j, 1)``.  Every step
    count is capped at ``cap``.  Returns ({1: P at the stop, f: P at f times it, ...}, t per column).

    The deviance is ``-2`` times the log-likelihood plus a constant, and EM never lowers the
    likelihood, so it never rises from step to step.  It is therefore computed (a logarithm per
    column and output) at every step only for the first ``2 J`` steps (``J`` =
    :data:`_DEV_EVERY`), then every ``J`` steps and at the cap; a column found below its target
    at a check is rerun from the previous check, one step at a time, to its first step below
    (:func:`_first_below`).  The stops are those of a check at every step (up to rounding in the
    rerun's products).  The multiples ``f t_j >= 2 t_j`` lie beyond the check that found ``t_j``.
    """
    k = A.shape[0]
    b = C.shape[1]
    CR = np.ascontiguousarray(np.asarray(C, dtype=float).T)  # rows: one per column of C
    n = CR.sum(axis=1)
    target = (CR > 0).sum(axis=1).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        logc = np.where(CR > 0, np.log(CR / n[:, None]), 0.0)

    def deviance(rows, Q):
        with np.errstate(divide="ignore"):
            return 2.0 * (CR[rows] * (logc[rows] - np.log(np.maximum(Q * scale, _Q_FLOOR)))).sum(axis=1)

    out = {f: np.full((b, k), 1.0 / k) for f in (1, *mults)}
    steps = np.full(b, cap)
    at = {f: np.full(b, -1) for f in mults}  # the step at which multiple f is taken (-1: not yet known)
    taken = {f: np.zeros(b, bool) for f in mults}
    done = np.zeros(b, bool)
    check_t, check_P = 0, None  # the last check: its step and the rows then
    wait = 0  # nothing to do before this step: the next check or multiple

    def observe(t, P, Q):  # rows: P after t steps, Q = A^T P
        nonlocal wait, check_t, check_P
        if t < wait:
            return False
        if not done.all() and (t < 2 * _DEV_EVERY or t % _DEV_EVERY == 0 or t == cap):
            rows = np.flatnonzero(~done)
            now = rows[deviance(rows, Q[rows]) <= target[rows]]
            if now.size and t > check_t + 1:  # below somewhere after the last check: find where
                first, Pf = _first_below(A, AT, check_P[now], CR[now], 1.0 / n[now], check_t, t,
                                         lambda r, Qr: deviance(now[r], Qr) <= target[now[r]])
                out[1][now], steps[now] = Pf, first
            elif now.size:
                out[1][now], steps[now] = P[now], t
            done[now] = True
            for f in mults:
                at[f][now] = [_stop_steps(int(s), f, cap) for s in steps[now]]
            check_t, check_P = t, P.copy()
        for f in mults:
            hit = (at[f] == t) & ~taken[f]
            out[f][hit] = P[hit]
            taken[f] |= hit
        finished = done.all() and all(v.all() for v in taken.values())
        if not finished:
            nxt = [] if done.all() else [t + 1 if t + 1 < 2 * _DEV_EVERY
                                         else min(cap, (t // _DEV_EVERY + 1) * _DEV_EVERY)]
            pending = (at[f][(at[f] > t) & ~taken[f]] for f in mults)
            nxt += [int(v.min()) for v in pending if v.size]
            wait = min(nxt)
        return finished

    P = _em_run(A, AT, np.full((b, k), 1.0 / k), CR, cap, 1.0 / n, observe)
    for f, X in out.items():
        left = ~done if f == 1 else ~taken[f]
        X[left] = P[left]
        X /= X.sum(axis=1, keepdims=True)
    return {f: X.T for f, X in out.items()}, steps


def _first_below(A, AT, P0, CR, inv_n, t0: int, t1: int, below):
    """Rerun EM on the rows ``P0`` (after ``t0`` steps) to the first step ``<= t1`` at which ``below(rows,
    Q)`` holds for each row (at ``t1`` if it never does first: rounding); ``(steps, rows there)``."""
    first = np.full(P0.shape[0], t1)
    Pf = np.array(P0)
    found = np.zeros(P0.shape[0], bool)

    def observe(t, P, Q):
        if t == 0:
            return False  # the previous check's step: above the target there
        rows = np.flatnonzero(~found)
        hit = rows[below(rows, Q[rows])]
        first[hit], Pf[hit] = t0 + t, P[hit]
        found[hit] = True
        return bool(found.all())

    P = _em_run(A, AT, P0, CR, t1 - t0, inv_n, observe)
    Pf[~found] = P[~found]
    return first, Pf


def _with_flow(model: _Model, obs: np.ndarray, cap: int) -> bool:
    """Whether the EM flow extends the path past the cap: dense channels with a cheap Newton step, and
    the cap not lowered by ``max_iter``."""
    return model.dense and cap == _STOP_CAP and model.k ** 2 * obs.size <= _FLOW_COST


def _flow_times(cap: int) -> list[int]:
    return [cap * 2 ** j for j in range(1, _FLOW_DOUBLINGS + 1)]


def _flow_fits(A, AT, C, time: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``"em flow=T"`` member on each column of the counts ``C`` (outputs x b; ``A`` dense, on those
    outputs): :data:`_STOP_CAP` plain EM steps from the uniform start, then the EM flow
    (``solvers._em_flow``) to time ``T``, through the path's times below ``T`` (the same substeps as in
    the selection).  ``(P, failed)``: ``P`` is ``k x b``; ``failed[j]`` when a substep of column ``j``
    did not converge (that column stays at its last point, not at time ``T``)."""
    C = np.asarray(C, dtype=float)
    if time <= _STOP_CAP:  # plain EM steps all the way
        P = _uniform_em(A, AT, C, time)
        return P / P.sum(axis=0), np.zeros(C.shape[1], bool)
    out, failed = _flow_path(A, AT, C, [t for t in _flow_times(_STOP_CAP) if t < time] + [time])
    return out[-1], failed


def _uniform_em(A, AT, C, steps):
    """``steps`` plain EM steps from the uniform start on each column of ``C``: ``k x b``."""
    k = A.shape[0]
    return _em_run(A, AT, np.full((C.shape[1], k), 1.0 / k), C.T, steps, 1.0 / C.sum(axis=0)).T


def _flow_path(A, AT, C, times):
    """:data:`_STOP_CAP` plain EM steps from the uniform start on each column of the counts ``C``
    (outputs x b), then the EM flow (``solvers._em_flow``) through ``times`` (each above the cap):
    ``(one k x b array per time, failed mask)``.  ``A`` is made dense if it is not: ``auto`` chooses a flow
    member only on dense channels, but ``bootstrap`` accepts any estimate whose regularization reads
    ``"em flow=T"``, a hand-made one on a sparse channel included."""
    if not isinstance(A, np.ndarray):
        A, AT = A.toarray(), AT.toarray()
    C = np.asarray(C, dtype=float)
    return _em_flow(A, AT, C, _uniform_em(A, AT, C, _STOP_CAP), _STOP_CAP, times)
