"""The EM members of ``method="auto"``'s path (:mod:`sparseldp.estimation.auto`): EM from the uniform
start stopped by the discrepancy principle (:func:`_stopped_cols`: at the expected deviance under the
fit, :func:`_expected_deviance`, and at the classical target), kept at multiples of that stop, and run
to the step cap and past it by the EM flow (:func:`_flow_fits`, ``_flow._em_flow``).  The path, the
selection and the measurements are in :mod:`sparseldp.estimation.auto`.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.special import gammaln, xlogy

from .model import _Model
from ._flow import _em_flow
from .solvers import _em_chebyshev, _em_run, _em_time

# Cap on the steps of the discrepancy-stopped EM members.
_STOP_CAP = 20_000
# With to_cap, once every column's members are known but the classical stop, the rest of the run to the cap (which
# makes the cap's iterate, the start of the flow members) follows the EM flow by Runge-Kutta-Chebyshev steps
# (solvers._em_chebyshev); where a column's classical stop turns out to lie in that rest (its deviance at the cap
# at or below its target), the rest is run again in plain steps with the checks until every classical stop is
# found, and from there by the flow.
_CAP_TAIL_CHEBYSHEV = True
# The stopped EM's deviance is computed at every step for the first 2 x this many steps, then every this many
# steps (the deviance never rises under EM; a column found below is rerun from the previous check).
_DEV_EVERY = 16
# Floor on the (column-scaled) held-out output probability.
_Q_FLOOR = 1e-300
# Where every column's stopped EM reaches the cap, the EM flow (_flow._em_flow) continues it to
# _STOP_CAP x 2^j for j = 1.._FLOW_DOUBLINGS (members ("flow", j)), on dense channels whose Newton
# step per column (k^2 m' multiply-adds) costs at most _FLOW_COST.
_FLOW_DOUBLINGS = 10
_FLOW_COST = 2e7
# Where the flow's Newton steps do not pay (FFT, sparse and large dense channels) but the MLE is on the path and
# every column's largest multiple of the stop is the cap's iterate, the EM flow of log g by Runge-Kutta-Chebyshev
# steps (solvers._em_chebyshev) continues it to _STOP_CAP x 2^j for j = 1.._TIME_DOUBLINGS (members ("time", j),
# reported as "em time=T"): the bridge from the cap to the MLE that the flow members are on dense channels.
# 4 doublings (to 320,000 steps' time) cost 4,304 evaluations of the EM factor, a fifth of the plain run to the cap
# (6 would cost 10,031); the battery's flow members chosen were at most 160,000 (2026-11-30).
_TIME_DOUBLINGS = 4


# The expected Poisson deviance g(mu) (:func:`_expected_deviance`) is tabulated for
# mu in [_G_LO, _G_HI] on _G_POINTS points equally spaced in log mu (linear interpolation: relative error
# below 2e-6), and taken from its asymptotic series above _G_HI (error below 1e-7 there).
_G_LO, _G_HI, _G_POINTS = 1e-12, 64.0, 8193


@functools.cache
def _deviance_table() -> tuple[np.ndarray, np.ndarray]:
    L = np.linspace(np.log(_G_LO), np.log(_G_HI), _G_POINTS)
    mu = np.exp(L)
    y = np.arange(0.0, _G_HI + 15.0 * np.sqrt(_G_HI) + 40.0)[:, None]  # P(Y > y_max) < 1e-40 at mu = 64
    pmf = np.exp(y * L[None, :] - mu[None, :] - gammaln(y + 1.0))
    return L, 2.0 * ((pmf * xlogy(y, y)).sum(axis=0) - mu * L)


def _expected_deviance(mu: np.ndarray) -> np.ndarray:
    r"""``g(mu) = E[2 (Y log(Y / mu) - (Y - mu))]`` for ``Y ~ Poisson(mu)``, elementwise (``g(0) = 0``).

    ``g = 2 (E[Y log Y] - mu log mu)``: about ``-2 mu log mu`` as ``mu -> 0``, a maximum of
    about 1.15 near ``mu = 1.4``, and ``1 + 1/(6 mu) + 1/(6 mu^2) + 19/(60 mu^3) + ...`` for large
    ``mu`` (McCullagh and Nelder, *Generalized Linear Models*, 2nd ed., sec. 6.2).  The
    multinomial deviance of counts ``c`` against ``n q`` (``sum q = 1``) equals the Poisson deviance
    summed over every output, so its expectation at counts drawn from ``q`` is ``sum_y g(n q_y)``
    (up to the multinomial constraint's one degree of freedom).
    """
    mu = np.asarray(mu, dtype=float)
    L, G = _deviance_table()
    out = np.empty_like(mu)
    big = mu > _G_HI
    small = mu < _G_LO
    mid = ~(big | small)
    out[mid] = np.interp(np.log(mu[mid]), L, G)
    r = 1.0 / mu[big]
    out[big] = 1.0 + r * (1.0 / 6.0 + r * (1.0 / 6.0 + r * (19.0 / 60.0)))
    with np.errstate(divide="ignore", invalid="ignore"):
        out[small] = np.where(mu[small] > 0, -2.0 * mu[small] * np.log(mu[small]), 0.0)
    return out


def _stop_steps(t: int, f: int, cap: int) -> int:
    """EM steps of the member kept at ``f`` times a discrepancy stop at step ``t`` (``f = 1``: the stop)."""
    return t if f == 1 else min(f * max(t, 1), cap)


def _stopped_cols(A, AT, C, scale, cap, mults=(), rest=None, to_cap=False, classic=None, start=None):
    """EM from the uniform start in every column, each stopped by the discrepancy principle.

    Column ``j`` (``n_j`` reports) stops at the first step ``t_j >= 1`` where its deviance
    ``D = 2 sum_y C_yj log(C_yj / (n_j q_yj))`` falls to its expected value under the current
    fit, ``T = sum_y g(n_j q_yj)`` over every output the domain can produce (``g``:
    :func:`_expected_deviance`); ``q`` unscaled (``scale`` undoes the column scaling of ``A``), and
    ``rest(P)`` gives the unscaled ``q`` of the rows ``P`` on the outputs outside ``A``'s columns
    (``None``: there are none).  For each ``f`` in ``mults`` the same EM is also kept at step
    ``f max(t_j, 1)``.  Every step count is capped at ``cap``.  Returns ``(fits, t per column)``,
    ``fits = {1: P at the stop, f: P at f times it, ...}`` (``k x b`` each).  With ``to_cap`` the run
    goes on to the cap in every column and ``fits["cap"]`` is P after ``cap`` steps.  With
    ``classic`` the same run also finds the classical stop, the first step where ``D`` falls to the
    number of outputs with ``C_yj > 0``: ``fits["classic"]`` is P there and ``fits["classic_steps"]``
    its steps per column (``classic="within"``: within the run the column's other members need, ``-1``
    where not reached; ``"until"``: the run goes on until it is reached; where the run reaches the cap
    without it (``"until"``, or ``to_cap``) the cap's iterate and step count stand in for it, as the
    classical rule stops at its cap).  ``start`` (``b x k`` rows, each a distribution): the columns' starts
    instead of the uniform one (the atom-seeded stop, :mod:`._atoms`).

    Each column's results are those of the column run alone: without ``to_cap``, a column whose members
    are all known leaves the run, which goes on with the others (bit for bit on FFT and sparse
    products: the rows of a product do not depend on one another).  Where one fold stops within tens of
    steps and another never reaches its target (1,000 values under a Gaussian window of 695, 10^4
    reports: stops 2, 2, 2, 20,000, 20,000), the run to the cap steps two rows, not five.

    With many reports per output ``T`` is about the number of outputs, the classical target (each
    output's deviance is about ``chi^2_1``).  Where outputs get few reports (fewer reports than
    values, or a domain far wider than the data) an output's expected deviance is not 1 but between 0
    and 1.16, and the classical target can lie below anything EM reaches: 10^4 reports on 2 x 10^4
    values ran every column to the cap (20,000 steps).

    ``D`` is ``-2`` times the log-likelihood plus a constant, and EM never lowers the likelihood, so
    ``D`` never rises from step to step; ``T`` moves slowly with the fit.  The stop is at least one step:
    the uniform start can already meet ``T`` (a flat truth), but it does not depend on the counts, and its
    bootstrap would say nothing (every replicate the same); one EM step is the data's smoothest fit.  Both are
    computed (a logarithm per column and output, and ``rest``'s product) at every step only for the first ``2 J``
    steps (``J`` = :data:`_DEV_EVERY`), then every ``J`` steps and at the cap; a column found below
    its target at a check is rerun from the previous check, one step at a time, to its first step
    below (:func:`_first_below`).  The stops are those of a check at every step (up to rounding in
    the rerun's products) unless ``D - T`` dips below 0 and back between two checks.  The multiples
    ``f t_j >= 2 t_j`` lie beyond the check that found ``t_j``.
    """
    k = A.shape[0]
    b = C.shape[1]
    CR = np.ascontiguousarray(np.asarray(C, dtype=float).T)  # rows: one per column of C
    n = CR.sum(axis=1)
    nobs = (CR > 0).sum(axis=1).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        logc = np.where(CR > 0, np.log(CR / n[:, None]), 0.0)

    def deviance(rows, Q):
        with np.errstate(divide="ignore"):
            return 2.0 * (CR[rows] * (logc[rows] - np.log(np.maximum(Q * scale, _Q_FLOOR)))).sum(axis=1)

    def expected(rows, P, Q):  # rows of CR; P, Q: those rows' iterates and column-scaled outputs
        nr = n[rows][:, None]
        target = _expected_deviance(nr * (Q * scale)).sum(axis=1)
        if rest is not None:
            target += _expected_deviance(nr * rest(P)).sum(axis=1)
        return target

    # the rules' targets: the expected deviance (key 1, with the multiples) and, if asked, the classical one
    rules = {1: expected, **({"classic": lambda rows, P, Q: nobs[rows]} if classic else {})}
    P0 = np.full((b, k), 1.0 / k) if start is None else np.array(start, dtype=float).reshape(b, k)
    out = {f: P0.copy() for f in (*rules, *mults)}
    steps = {key: np.full(b, cap if key == 1 else -1) for key in rules}
    done = {key: np.zeros(b, bool) for key in rules}
    at = {f: np.full(b, -1) for f in mults}  # the step at which multiple f is taken (-1: not yet known)
    taken = {f: np.zeros(b, bool) for f in mults}
    check_t = 0  # the last check's step (check_P below: the rows then)
    wait = 0  # nothing to do before this step: the next check or multiple

    def checking() -> bool:  # whether a rule still needs the checks
        return any(not v.all() for v in done.values())

    live = np.arange(b)  # the rows the run still steps (positions in C's columns)
    where = np.arange(b)  # row -> its position among the live rows
    t0 = 0  # the steps before the current run (a run restarts on fewer rows)
    check_P = P0.copy()

    def needed() -> np.ndarray:  # the rows whose members are not all known ("classic within" waits for none)
        need = ~done[1]
        for f in mults:
            need |= ~taken[f]
        if classic == "until":
            need |= ~done["classic"]
        return np.flatnonzero(need)

    def observe(tl, Pl, Ql):  # the live rows: Pl after t0 + tl steps, Ql = A^T Pl
        nonlocal wait, check_t, stop_t, tail_t
        t = t0 + tl
        if t < wait:
            return wait - t0
        if checking() and t >= 1 and (t < 2 * _DEV_EVERY or t % _DEV_EVERY == 0 or t == cap):
            pending = np.flatnonzero(~np.logical_and.reduce(list(done.values())) & (where >= 0))
            dev = np.empty(b)
            dev[pending] = deviance(pending, Ql[where[pending]])  # once per check, whichever rules are pending
            for key, target in rules.items():
                rows = np.flatnonzero(~done[key] & (where >= 0))
                if not rows.size:
                    continue
                at_rows = where[rows]
                now = rows[dev[rows] <= target(rows, Pl[at_rows], Ql[at_rows])]
                if now.size and t > check_t + 1:  # below somewhere after the last check: find where
                    first, Pf = _first_below(
                        A, AT, check_P[now], CR[now], 1.0 / n[now], check_t, t,
                        lambda r, Pr, Qr, now=now, target=target: deviance(now[r], Qr) <= target(now[r], Pr, Qr))
                    out[key][now], steps[key][now] = Pf, first
                elif now.size:
                    out[key][now], steps[key][now] = Pl[where[now]], t
                done[key][now] = True
                if key == 1:
                    for f in mults:
                        at[f][now] = [_stop_steps(int(s), f, cap) for s in steps[1][now]]
            check_t = t
            check_P[live] = Pl
        for f in mults:
            hit = (at[f] == t) & ~taken[f] & (where >= 0)
            out[f][hit] = Pl[where[hit]]
            taken[f] |= hit
        finished = (done[1].all() and all(v.all() for v in taken.values()) and not to_cap
                    and (classic != "until" or done["classic"].all()))
        if not finished:
            pending = (at[f][(at[f] > t) & ~taken[f]] for f in mults)
            nxt = [int(v.min()) for v in pending if v.size]
            # the next check: while a stop is pending ("within": only as far as the run goes anyway)
            if (not done[1].all() or (classic == "until" and not done["classic"].all())
                    or (checking() and (nxt or to_cap))):
                nxt.append(t + 1 if t + 1 < 2 * _DEV_EVERY else min(cap, (t // _DEV_EVERY + 1) * _DEV_EVERY))
            wait = min(nxt) if nxt else cap  # to_cap: nothing to observe before the end
            if (to_cap and t < cap and classic != "until" and done[1].all()
                    and all(v.all() for v in taken.values()) and _CAP_TAIL_CHEBYSHEV
                    and (tail_ok or not checking())):
                # every member known but the classical stop: the rest of the run makes the cap's iterate (the
                # flow's start), and the classical stop where it lies in the rest (checked after it)
                stop_t = tail_t = t
                return True
            if not to_cap and needed().size < live.size:
                stop_t = t
                return True  # rows whose members are all known: the run goes on without them
        if finished:
            stop_t = t
            return True
        return wait - t0  # the next step anything is due (the run's own count): nothing to see before

    P = P0.copy()
    tail_t = None  # the step from which the run to the cap follows the EM flow (_CAP_TAIL_CHEBYSHEV)
    tail_ok = _CAP_TAIL_CHEBYSHEV
    while True:
        stop_t = cap  # the run's last step (observe sets it where it stops the run)
        P[live] = _em_run(A, AT, P[live], CR[live], cap - t0, 1.0 / n[live], observe)
        t0 = stop_t
        if tail_t is not None:
            flowed = _em_chebyshev(A, AT, P / P.sum(axis=1, keepdims=True), CR, cap, start=tail_t)
            rows = np.flatnonzero(~done["classic"]) if classic else np.zeros(0, int)
            if rows.size:  # is the classical stop still out of reach at the cap? (D never rises along EM)
                Q = np.asarray(AT @ np.ascontiguousarray(flowed[rows].T)).T
                if np.any(deviance(rows, Q) <= nobs[rows]):  # it lies in the rest: plain steps from tail_t to
                    tail_t, tail_ok = None, False  # where the checks find it, then the flow again
                    continue
            P = flowed
            break
        need = needed()
        if to_cap or need.size == live.size or need.size == 0 or t0 >= cap:
            break
        live = need
        where = np.full(b, -1)
        where[live] = np.arange(live.size)
    for f, X in out.items():
        if f == "classic":
            if classic == "until" or to_cap:  # the run went to the cap: where not reached there, the cap's iterate
                X[~done[f]], steps[f][~done[f]] = P[~done[f]], cap
            continue  # "within" short of the cap: columns that did not reach it keep steps -1 (the caller decides)
        left = ~done[1] if f == 1 else ~taken[f]
        X[left] = P[left]
    res = {f: (X / X.sum(axis=1, keepdims=True)).T for f, X in out.items()}
    if to_cap:
        res["cap"] = (P / P.sum(axis=1, keepdims=True)).T
    if classic:
        res["classic_steps"] = steps["classic"]
    return res, steps[1]


def _rest_outputs(model: _Model, obs: np.ndarray):
    """``rest`` for :func:`_stopped_cols`: the unscaled output probabilities ``q`` of rows ``P`` (``b x k``)
    on the outputs the domain can produce outside ``obs`` (``b x (m - len(obs))``), by
    ``model.fast_columns``; ``None`` when ``obs`` has every output."""
    others = np.setdiff1d(np.arange(model.m), obs, assume_unique=True)
    if others.size == 0:
        return None
    _, RT = model.fast_columns(others)
    scale = np.exp(model.log_cs[others])
    return lambda P: np.asarray(RT @ np.ascontiguousarray(P.T)).T * scale


def _first_below(A, AT, P0, CR, inv_n, t0: int, t1: int, below):
    """Rerun EM on the rows ``P0`` (after ``t0`` steps) to the first step ``<= t1`` at which ``below(rows,
    P, Q)`` holds for each row (at ``t1`` if it never does first: rounding); ``(steps, rows there)``."""
    first = np.full(P0.shape[0], t1)
    Pf = np.array(P0)
    found = np.zeros(P0.shape[0], bool)

    def observe(t, P, Q):
        if t == 0:
            return False  # the previous check's step: above the target there
        rows = np.flatnonzero(~found)
        hit = rows[below(rows, P[rows], Q[rows])]
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
    """The times of the members ``("flow", 1..)``: ``cap x 2^j`` (``("flow", 0)`` is EM at the cap itself)."""
    return [cap * 2 ** j for j in range(1, _FLOW_DOUBLINGS + 1)]


def _flow_fits(A, AT, C, time: int, single: bool = False, relax: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The ``"em flow=T"`` member on each column of the counts ``C`` (outputs x b; ``A`` dense, on those
    outputs): :data:`_STOP_CAP` plain EM steps from the uniform start, then the EM flow
    (``_flow._em_flow``) to time ``T``, through the path's times below ``T`` (the same substeps as in
    the selection).  ``(P, failed)``: ``P`` is ``k x b``; ``failed[j]`` when a substep of column ``j``
    did not converge (that column stays at its last point, not at time ``T``).  ``single``: the plain EM
    steps in single precision (the bootstrap's refits, ``solvers._em_run``); the flow is in double.
    ``relax``: the plain steps' time in over-relaxed steps (``solvers._em_time``; the bootstrap's refits)."""
    C = np.asarray(C, dtype=float)
    if time <= _STOP_CAP:  # plain EM steps all the way
        P = _uniform_em(A, AT, C, time, single, relax)
        return P / P.sum(axis=0), np.zeros(C.shape[1], bool)
    out, failed = _flow_path(A, AT, C, [t for t in _flow_times(_STOP_CAP) if t < time] + [time], single, relax)
    return out[-1], failed


def _time_times(cap: int) -> list[int]:
    """The times of the members ``("time", 1..)``: ``cap x 2^j``."""
    return [cap * 2 ** j for j in range(1, _TIME_DOUBLINGS + 1)]


def _time_legs(time: int) -> list[int]:
    """The times the ``"em time=T"`` member's flow passes through past the cap: the path's below ``T``, then
    ``T`` (so that its fit on all counts and its refits land where the selection's members did)."""
    return [t for t in _time_times(_STOP_CAP) if t < time] + [time]


def _time_path(A, AT, P, C, t0: int, times) -> list[np.ndarray]:
    """The rows ``P`` (``b x k``, ``t0`` plain EM steps from the uniform start on the rows of counts ``C``)
    carried along the EM flow of ``log g`` (``solvers._em_chebyshev``) through ``times`` (each above ``t0``,
    increasing): one ``b x k`` array per time, each leg starting where the last ended."""
    out = []
    for T in times:
        P = _em_chebyshev(A, AT, P / P.sum(axis=1, keepdims=True), C, T, start=t0)
        out.append(P)
        t0 = T
    return out


def _time_fits(A, AT, C, time: int) -> np.ndarray:
    """The ``"em time=T"`` member on each column of the counts ``C`` (outputs x b; any products):
    ``min(T, _STOP_CAP)`` plain EM steps from the uniform start, then the EM flow of ``log g`` to time ``T``
    through the path's times below ``T`` (:func:`_time_path`, as in the selection).  ``k x b``, each column
    normalized.  (The bootstrap's refits run the same path on rows: ``refits._refit_replicates``.)"""
    C = np.asarray(C, dtype=float)
    P = _uniform_em(A, AT, C, min(time, _STOP_CAP))
    if time > _STOP_CAP:
        P = _time_path(A, AT, np.ascontiguousarray(P.T, dtype=float), np.ascontiguousarray(C.T), _STOP_CAP,
                       _time_legs(time))[-1].T
    return P / P.sum(axis=0)


def _uniform_em(A, AT, C, steps, single=False, relax=0):
    """``steps`` plain EM steps from the uniform start on each column of ``C``: ``k x b`` (``relax``: their
    time in over-relaxed steps, ``solvers._em_time``)."""
    k = A.shape[0]
    P0 = np.full((C.shape[1], k), 1.0 / k)
    if relax:
        return _em_time(A, AT, P0, C.T, steps, single, relax).T
    return _em_run(A, AT, P0, C.T, steps, 1.0 / C.sum(axis=0), single=single).T


def _flow_path(A, AT, C, times, single=False, relax=0):
    """:data:`_STOP_CAP` plain EM steps from the uniform start on each column of the counts ``C``
    (outputs x b), then the EM flow (``_flow._em_flow``) through ``times`` (each above the cap):
    ``(one k x b array per time, failed mask)``.  ``A`` is made dense if it is not: ``auto`` chooses a flow
    member only on dense channels, but ``bootstrap`` accepts any estimate whose regularization reads
    ``"em flow=T"``, a hand-made one on a sparse channel included."""
    if not isinstance(A, np.ndarray):
        A, AT = A.toarray(), AT.toarray()
    C = np.asarray(C, dtype=float)
    return _em_flow(A, AT, C, _uniform_em(A, AT, C, _STOP_CAP, single, relax), _STOP_CAP, times)
