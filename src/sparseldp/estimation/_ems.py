"""EM with smoothing (EMS, Li et al., SIGMOD 2020) on count vectors: its fixed point.

* the map (one EMS step on a batch of columns) and the smoothing kernel are in
  :mod:`sparseldp.estimation._ems_map`, Newton's method in :mod:`sparseldp.estimation._ems_newton`;
* :func:`_ems_fixed`: the fixed point of a batch, SQUAREM (:func:`_ems_squarem`), Anderson mixing
  (:func:`_ems_anderson`) for the columns SQUAREM leaves, Newton's method (:func:`_ems_newton`) for those
  the mixing leaves on dense channels; :func:`_ems`: one column from the uniform start.

The products ``A``, ``AT`` are those of :mod:`sparseldp.estimation.solvers` (the column-scaled channel on
the observed outputs and its transpose).  The math and the stopping rule are in the
:mod:`sparseldp.estimation` docstring.
"""

from __future__ import annotations

import numpy as np

from ._ems_map import _EMS_FLOOR, _LOG_FLOOR, _ems_map
from ._ems_newton import _NEWTON_EVALS, _ems_newton, _newton_affordable
from .solvers import _squarem

# SQUAREM's (_ems_squarem) cycles over which the linear rate is measured, and its most halvings of a step
# length per cycle (an unsettled column falls back to p2).
_EMS_RATE_SPAN = 5
_EMS_HALVINGS = 40
# EMS's Anderson mixing (_ems_anderson): SQUAREM's evaluations before a column not yet converged moves to
# it, the pairs kept, the evaluations between the stopping rule's looks, the looks whose residual ratios it
# takes the largest of, the growth of a residual that forgets a column's history, the share of its plain
# step's value below which no entry of a mixture may fall, the restarts a stalled column gets before it goes
# back to SQUAREM, and the evaluations after which every column still mixing does.
_AA_AFTER = 300
_AA_DEPTH = 3
_AA_LAG = 10
_AA_CHECKS = 3
_AA_RESTART = 100.0
_AA_FLOOR = 0.1
_AA_RESTARTS = 1
_AA_BUDGET = 3_000
# _ems_fixed(verify=True): Newton's check of the converged columns where a Jacobian costs at most this (k^2 m')
_VERIFY_COST = 7e7


def _ems_squarem(A, AT, C, inv_n, P, passes, weight, tol, max_iter, with_dist=False):
    r"""EMS to its fixed point in every column of ``C`` from the columns of ``P``, accelerated by SQUAREM
    (Varadhan and Roland 2008, scheme S3, which they apply to EMS among other fixed-point maps): the first
    phase of :func:`_ems_fixed`, and where :func:`_ems_anderson` sends a column whose mixing stalls.
    From ``p``, ``p1 = F(p)``, ``p2 = F(p1)``, ``r = p1 - p``, ``v = p2 - p1 - r``, the extrapolation
    ``p - 2 a r + a^2 v`` with ``a = -|r|/|v|`` (at most -1; halved towards
    -1 while it has a negative entry; ``a = -1`` is ``p2``), then one
    stabilizing step of ``F``.  A column whose stabilized step is longer than
    the plain ``|p2 - p1|`` falls back to ``p2``.

    Stopping rule, per column: with ``d = TV(p1, p)`` and ``d' = TV(p2, p1)``
    the two plain steps of a cycle, ``d'/d`` their observed linear rate and
    ``rho`` the largest such rate over the last five cycles (early steps are
    fast and would make the estimate optimistic), the column stops at ``p2``
    once five cycles have run and ``d' rho / (1 - rho) <= tol`` (the estimated
    distance to the fixed point, as for plain EMS in the
    :mod:`sparseldp.estimation` docstring), or once ``d' <= 1e-14``; converged
    columns are frozen.  ``max_iter`` caps the evaluations of ``F``.
    Returns (P, evaluations, converged mask), and with ``with_dist`` a ``2 x b`` array: each column's
    last estimated distance ``d' rho / (1 - rho)`` (``inf`` before five cycles or at a rate of 1) and
    its last plain step ``d'``.
    """
    P = np.array(P, dtype=float)
    C = np.asarray(C, dtype=float)
    inv_n = np.broadcast_to(np.asarray(inv_n, dtype=float), (C.shape[1],))
    active = np.ones(C.shape[1], bool)
    rates = np.zeros((_EMS_RATE_SPAN, C.shape[1]))  # the last cycles' observed rates, per column
    dist = np.full((2, C.shape[1]), np.inf)  # estimated distance to the fixed point, last plain step
    evals = cycles = 0
    while evals + 2 <= max_iter and active.any():
        ia = np.flatnonzero(active)
        Ca, na, Pa = C[:, ia], inv_n[ia], P[:, ia]

        def F(X):
            return _ems_map(A, AT, Ca, na, X, passes, weight)

        P1 = F(Pa)
        P2 = F(P1)
        evals += 2
        r = P1 - Pa
        u = P2 - P1
        d = 0.5 * np.abs(r).sum(axis=0)
        d2 = 0.5 * np.abs(u).sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            rates[cycles % _EMS_RATE_SPAN, ia] = np.where(d > 0, d2 / d, 0.0)
            rho = rates[:, ia].max(axis=0)  # the slowest of the last cycles: the early steps are fast
            est = np.where((cycles >= _EMS_RATE_SPAN) & (rho < 1.0), d2 * rho / (1.0 - rho), np.inf)
            dist[0, ia] = np.where(d2 <= _EMS_FLOOR, 0.0, est)
            dist[1, ia] = d2
            done = (d2 <= _EMS_FLOOR) | (est <= tol)
        cycles += 1
        a, Pe = _squarem(Pa, r, u, P2, max_halvings=_EMS_HALVINGS)
        extra = (a < -1.0) & ~done
        if extra.any() and evals < max_iter:
            ie = np.flatnonzero(extra)
            Ps = _ems_map(A, AT, Ca[:, ie], na[ie], Pe[:, ie], passes, weight)
            evals += 1
            ok = 0.5 * np.abs(Ps - Pe[:, ie]).sum(axis=0) <= d2[ie]
            Pe[:, ie] = np.where(ok, Ps, P2[:, ie])
        new = np.where(extra, Pe, P2)
        P[:, ia] = new
        active[ia[done]] = False
    if active.any() and evals < max_iter:  # one budget step left: take it plainly
        ia = np.flatnonzero(active)
        P[:, ia] = _ems_map(A, AT, C[:, ia], inv_n[ia], P[:, ia], passes, weight)
        evals += 1
    return (P, evals, ~active, dist) if with_dist else (P, evals, ~active)


def _ems_fixed(A, AT, C, inv_n, P, passes, weight, tol, max_iter, with_dist=False, verify=False):
    r"""EMS to its fixed point in every column of ``C`` (counts, ``m' x b``), from the columns of ``P``.

    The EMS map ``F`` is a contraction near its fixed point, often a slow one (rates above 0.999 for
    wide Gaussian kernels: plain iteration needs tens of thousands of steps).  Two accelerations, each
    best where the other is weak:

    * SQUAREM (:func:`_ems_squarem`) runs first, for at most ``_AA_AFTER = 300`` evaluations of ``F``.
      It settles the fits that converge fast, among them those whose fixed point has small entries,
      where Anderson mixing stalls;
    * the columns still unconverged then go on under Anderson mixing (:func:`_ems_anderson`), which
      cancels a slow contraction's residual within the span of its last few steps, and which hands a
      column that stalls on (to Newton's method where it is affordable, below, then to the mixing of
      logarithms, then SQUAREM);
    * on a dense channel whose Jacobian is cheap (``k^2 m' <= 2e8``), the last :data:`_NEWTON_EVALS`
      evaluations (at most a tenth of ``max_iter``) are kept for Newton's method (:func:`_ems_newton`)
      on the columns still short.

    Both stop a column at an estimated total-variation distance ``tol`` to the fixed point (or a plain
    step under ``1e-14``); ``max_iter`` caps the evaluations of ``F`` of both phases together.

    With ``verify`` (the bootstrap's refits), Newton's method also takes the columns the mixing declared
    converged where a Jacobian costs at most :data:`_VERIFY_COST` (``k^2 m'``: randomized response on 400
    values), and keeps its point where it converges (an undamped step within ``tol``): the mixing's distance
    estimate is measured, not proven, and on channels that tell little per report it can be far off.
    Measured (``benchmarks/study_ems_warm.py``): k-RR at eps = 2 on 400 values, 10^4 reports of a geometric
    truth, B = 50 refits from ``0.9 p_hat + 0.1 / k``: one refit declared converged lay 0.095 in TV from its
    fixed point, and 1.8e-9 after the check, which took 200 evaluations there (40 left it where it was), 1 s
    more for the 50 on one core.  On the Piecewise and Hybrid Mechanisms over 400 values (``k^2 m' = 1e8``)
    it cost 2.5 s more per 50 and moved no refit of the study's by more than 1e-4, so it stops below them.
    A column Newton does not converge keeps the mixing's point and verdict.

    Against SQUAREM alone (the README's timing table has more): 1,000 values, Gaussian window 695, 10^4
    reports, the weakest smoothing's fold fits took 581-998 evaluations against 644-12,113 over five
    shapes, and 100 of 100 bootstrap refits of one converged within 2,000 against 17; the battery made
    the same 176 choices.  Anderson mixing alone stalled near small entries (study_ems_anderson.py).

    Returns (P, evaluations, converged mask), and with ``with_dist`` a ``2 x b`` array: each column's
    last estimated distance to its fixed point (``inf`` where the solver had no estimate) and its last
    plain step ``|F(x) - x|``.
    """
    kept = min(_NEWTON_EVALS, max_iter // 10) if _newton_affordable(A) else 0
    first = min(max_iter - kept, _AA_AFTER)
    P, e, conv, dist = _ems_squarem(A, AT, C, inv_n, P, passes, weight, tol, first, with_dist=True)
    inv_b = np.broadcast_to(np.asarray(inv_n, dtype=float), (conv.size,))
    C = np.asarray(C, dtype=float)
    if not conv.all() and e < max_iter - kept:
        cols = np.flatnonzero(~conv)
        Pl, e2, cl, dl = _ems_anderson(A, AT, C[:, cols], inv_b[cols], P[:, cols], passes, weight, tol,
                                       max_iter - kept - e, with_dist=True)
        P[:, cols], conv[cols], dist[:, cols] = Pl, cl, dl
        e += e2
    if kept and not conv.all():  # the columns left short: Newton's method on their fixed points
        cols = np.flatnonzero(~conv)
        conv[cols], e3 = _newton_into(A, AT, C, inv_b, P, dist, cols, passes, weight, tol, kept)
        e += e3
    if verify and kept and _newton_affordable(A, _VERIFY_COST) and conv.any():
        # the columns declared converged: Newton's point where it converges
        _, e4 = _newton_into(A, AT, C, inv_b, P, dist, np.flatnonzero(conv), passes, weight, tol, kept)
        e += e4
    return (P, e, conv, dist) if with_dist else (P, e, conv)


def _newton_into(A, AT, C, inv_n, P, dist, cols, passes, weight, tol, max_evals):
    """Newton's method (:func:`_ems_newton`) on the columns ``cols`` of ``P`` (counts ``C``, ``1 / n``
    ``inv_n``): the columns it converges are written into ``P`` and ``dist`` in place, the others left as
    they were.  Returns (the converged mask over ``cols``, the evaluations)."""
    Pn, e, cn, dn = _ems_newton(A, AT, C[:, cols], inv_n[cols], P[:, cols], passes, weight, tol, max_evals)
    P[:, cols[cn]], dist[:, cols[cn]] = Pn[:, cn], dn[:, cn]
    return cn, e


def _ems_anderson(A, AT, C, inv_n, P, passes, weight, tol, max_iter, with_dist=False, log_space=False):
    r"""EMS to its fixed point in every column of ``C`` by Anderson mixing: :func:`_ems_fixed`'s second
    phase, for the columns SQUAREM leaves.

    Anderson mixing (Anderson 1965; type II, as analysed by Walker and Ni 2011): from the last
    ``m = _AA_DEPTH = 3`` pairs ``(x_i, F(x_i))``, with residuals ``f_i = F(x_i) - x_i``, the next
    point is ``F(x) - dG gamma``, ``gamma`` the least-squares coefficients of the latest residual on
    the residuals' differences ``dF`` (``dG`` the differences of the ``F(x_i)``): the secant step
    that cancels the residual within the span of the history, one map evaluation per step.  Solved
    column by column through a batched SVD (singular values below ``1e-10`` of the largest dropped).
    Each entry of a mixture is kept at or above a tenth of its plain step's value (an overshoot below
    0 would leave the simplex; clipping at 0 instead stalled the mixing) and the column renormalized.
    A column whose residual grows past 100 times its smallest so far forgets its history (the next
    step is plain).

    Safeguards: a column whose residual has not shrunk over three looks in a row (below) forgets its
    history once; when it stalls again, or when the mixing has taken ``_AA_BUDGET = 3,000``
    evaluations, it leaves the mixing, and once the others are done goes on from where it left, with
    the rest of its ``max_iter``: on a dense channel whose Jacobian is cheap
    (:func:`~sparseldp.estimation._ems_newton._newton_affordable`) first to Newton's method, for at most
    :data:`_NEWTON_EVALS` evaluations (randomized response on 400 values: 609 evaluations in all against
    2,601 without it), and what that leaves to the same mixing of the logarithms (``log_space=True``: the
    coordinates are ``log F(x)`` and ``log F(x) - log x``, the mixture ``exp`` of theirs, renormalized,
    positive without a floor; it leaves at its budget only, as its residual is not monotone early),
    and from there to :func:`_ems_squarem` (whose convergence then is the column's).  Run inside the
    loop, that run held up the other columns and spent their budget: a bootstrap's block of 25 refits
    ended with none converged because one had been handed back (1,000 values under the wide Gaussian
    kernel; 100 of 100 converged once the hand-back waited).  Near a fixed point with small entries
    (1e-5 where the mean is 1e-2: a spike under the Laplace design of (1, 1e-6, 5) on 100 values) the
    mixtures overshoot them below 0, the floor holds them, and the residual stops shrinking near 1e-6:
    this is what the hand-back is for (``tests/test_estimation_fast.py`` reproduces it).

    Where the plain mixing stalls on randomized response over 400 values (five folds, weight 1/4),
    SQUAREM alone took 8,364 evaluations and stopped up to 1.8e-3 from the fixed point at ``tol =
    1e-4``; the mixing of logs in between 2,601, within 7e-5 (docs/estimation.md).  From the start it
    took 1.5-4 times the evaluations on the battery's channels, so it is the fallback only.

    Stopping rule, per column: every ``L = 10`` evaluations the point ``F(x)``
    is compared with the one ``L`` evaluations before: with ``disp`` their TV
    distance and ``theta`` the largest ratio of the residuals' TV norms over
    the last three such lags (residual and distance to the fixed point shrink
    together), the estimated distance to the fixed point is ``disp theta / (1 -
    theta)``; the column stops at ``F(x)`` once that is at most ``tol``, or once
    its plain step ``|F(x) - x|`` is at most ``1e-14`` (rounding).  Converged
    columns are frozen; ``max_iter`` caps the evaluations of ``F``.

    Against SQUAREM on five folds (1,000 values, Gaussian window 695, weights 1/4, 1/8, 1/32, ``tol``
    1e-4): 175 / 246 / 1,354 evaluations against 866 / 4,040 / 12,710, and closer to the fixed point.

    Returns (P, evaluations, converged mask), and with ``with_dist`` a ``2 x b`` array: each column's
    last estimated distance (``inf`` before three lags or at a ratio of 1 or more) and its last plain
    step ``|F(x) - x|``.
    """
    P = np.array(P, dtype=float)
    C = np.asarray(C, dtype=float)
    b = C.shape[1]
    inv_n = np.broadcast_to(np.asarray(inv_n, dtype=float), (b,))
    dist = np.full((2, b), np.inf)  # estimated distance to the fixed point, last plain step
    active = np.ones(b, bool)
    if max_iter < 1:
        return (P, 0, ~active, dist) if with_dist else (P, 0, ~active)
    ia = np.arange(b)
    Ca, na = C, inv_n

    def F(X):
        return _ems_map(A, AT, Ca, na, X, passes, weight)

    def mixing(X, G):  # the coordinates the mixing works in: F(x) and its residual, plain or of logs
        if not log_space:
            return G, G - X
        LG = np.log(np.maximum(G, _LOG_FLOOR))
        return LG, LG - np.log(np.maximum(X, _LOG_FLOOR))

    X = P.copy()
    G = F(X)
    evals = 1
    res = 0.5 * np.abs(G - X).sum(axis=0)
    Gm, R = mixing(X, G)
    m = _AA_DEPTH
    dG = np.zeros((m, P.shape[0], b))  # ring of the last m differences of F(x_i) ...
    dR = np.zeros_like(dG)  # ... and of the residuals, per column
    filled = 0
    best = res.copy()
    snap, snap_res = G.copy(), res.copy()
    thetas = np.full((_AA_CHECKS, b), np.inf)
    checks = 0
    stalled = np.zeros(b, bool)
    restarts = np.zeros(b, int)
    unconverged = np.zeros(b, bool)  # columns SQUAREM took over and left short
    handed = np.full(b, -1)  # the evaluation at which a column went back to SQUAREM (-1: it did not)
    P[:] = G
    dist[1] = res
    done = res <= _EMS_FLOOR
    while True:
        if done.any():  # freeze the finished columns, keep the rest's state
            active[ia[done]] = False
            keep = ~done
            stalled, restarts = stalled[keep], restarts[keep]
            ia, Ca, na = ia[keep], Ca[:, keep], na[keep]
            G, Gm, R, res, best = G[:, keep], Gm[:, keep], R[:, keep], res[keep], best[keep]
            dG, dR = dG[:, :, keep], dR[:, :, keep]
            snap, snap_res, thetas = snap[:, keep], snap_res[keep], thetas[:, keep]
        if not ia.size or evals >= max_iter:
            break
        Xn = G
        if filled:
            M = dR[:filled].transpose(2, 1, 0)  # columns x k x depth
            U, sv, Vt = np.linalg.svd(M, full_matrices=False)
            cut = sv > 1e-10 * sv[:, :1]
            coef = np.einsum("bkj,kb->bj", U, R)
            coef = np.divide(coef, sv, out=np.zeros_like(coef), where=cut)
            gamma = np.einsum("bji,bj->bi", Vt, coef)
            mix = Gm - np.einsum("ikb,bi->kb", dG[:filled], gamma)
            if log_space:  # the mixture of logs: positive whatever its size, no floor needed
                Xn = np.exp(mix - mix.max(axis=0))
            else:
                # the mixture, each entry kept at or above a tenth of its plain step's value: an overshoot
                # below 0 would leave the simplex, and clipping at 0 instead stalled more (a spike under
                # weight 1/32: residuals stuck near 1e-6 for 50,000 evaluations; study_ems_anderson.py)
                Xn = np.maximum(mix, _AA_FLOOR * G)
            tot = Xn.sum(axis=0)
            bad = ~np.isfinite(tot)
            Xn /= np.where(bad, 1.0, tot)
            if bad.any():
                Xn[:, bad] = G[:, bad]
        Gn = F(Xn)
        evals += 1
        res_n = 0.5 * np.abs(Gn - Xn).sum(axis=0)
        Gmn, Rn = mixing(Xn, Gn)
        slot = (evals - 2) % m
        dG[slot], dR[slot] = Gmn - Gm, Rn - R
        filled = min(filled + 1, m)
        G, Gm, R, res = Gn, Gmn, Rn, res_n
        blown = res > _AA_RESTART * best
        if blown.any():  # a diverging mixture: forget that column's history (the next step is plain)
            dG[:, :, blown] = 0.0
            dR[:, :, blown] = 0.0
        np.minimum(best, res, out=best)
        P[:, ia] = G
        dist[1, ia] = res
        done = res <= _EMS_FLOOR
        if (evals - 1) % _AA_LAG == 0:
            disp = 0.5 * np.abs(G - snap).sum(axis=0)
            with np.errstate(divide="ignore", invalid="ignore"):
                thetas[checks % _AA_CHECKS] = np.where(snap_res > 0, res / snap_res, np.inf)
            checks += 1
            if not log_space:  # the mixing of logs is not monotone early: it leaves at its budget only
                stalled |= (thetas >= 1.0).all(axis=0)  # no progress over the last looks
            if checks >= _AA_CHECKS:
                theta = thetas.max(axis=0)
                with np.errstate(divide="ignore", invalid="ignore"):
                    est = np.where(theta < 1.0, disp * theta / (1.0 - theta), np.inf)
                dist[0, ia] = np.where(done, 0.0, est)
                done |= est <= tol
            snap, snap_res = G.copy(), res.copy()
            if evals >= _AA_BUDGET:
                stalled[:] = True
            stalled &= ~done
            again = stalled & (restarts < _AA_RESTARTS) & (evals < _AA_BUDGET)
            if again.any():
                # no progress over the last looks: forget the history (the next step is plain), keep mixing
                dG[:, :, again] = 0.0
                dR[:, :, again] = 0.0
                thetas[:, again] = np.nan
                restarts[again] += 1
                stalled &= ~again
            if stalled.any():  # leave the mixing: to SQUAREM after the loop, with the rest of their budget
                handed[ia[stalled]] = evals
                done |= stalled
                stalled[:] = False
    # the columns handed back, in groups by when they left (each with its own rest of max_iter): after the
    # loop, not inside it, so that one column's SQUAREM run neither holds up nor spends the others' budget
    # plain mixing hands them to the mixing of logs first (where the plain one stalls on small entries, that
    # one holds them without a floor), the mixing of logs to SQUAREM
    total = evals
    newton = not log_space and _newton_affordable(A)
    for at in np.unique(handed[handed >= 0]):
        cols = np.flatnonzero(handed == at)
        at = int(at)
        if newton:  # Newton's method first where it is cheap: it lands in steps where the mixing of logs
            # takes thousands of evaluations (randomized response; docs/estimation.md)
            cn, e = _newton_into(A, AT, C, inv_n, P, dist, cols, passes, weight, tol,
                                 min(_NEWTON_EVALS, max_iter - at))
            total = max(total, at + e)
            cols, at = cols[~cn], at + e
            if not cols.size or at >= max_iter:
                unconverged[cols] = True
                continue
        args = (A, AT, C[:, cols], inv_n[cols], P[:, cols], passes, weight, tol, max_iter - at)
        Ps, e, conv_s, dist_s = (_ems_squarem(*args, with_dist=True) if log_space else
                                 _ems_anderson(*args, with_dist=True, log_space=True))
        P[:, cols], dist[:, cols] = Ps, dist_s
        unconverged[cols[~conv_s]] = True
        total = max(total, at + e)
    evals = total
    conv = ~active & ~unconverged
    return (P, evals, conv, dist) if with_dist else (P, evals, conv)


def _ems(A, AT, c, n, k, tol, max_iter, passes, weight=0.25):
    """EM with smoothing: iterate ``p <- S^passes (p * g(p))`` from the uniform start
    (``S`` the ``(w, 1 - 2w, w)`` kernel of :func:`_smooth`, ``w = weight``), accelerated
    and stopped as in :func:`_ems_fixed` (estimated TV distance ``tol`` to the fixed point).
    Returns (p, evals, converged).
    """
    P, evals, conv = _ems_fixed(A, AT, np.asarray(c, dtype=float)[:, None], 1.0 / n, np.full((k, 1), 1.0 / k),
                                passes, weight, tol, max_iter)
    return P[:, 0], evals, bool(conv[0])
