"""The numerical solvers behind the frequency estimates, on count vectors.

* :func:`_mle`: the maximum-likelihood estimate by SQUAREM-accelerated EM
  (:func:`_em`), finished by a log-barrier interior-point Newton method
  (:func:`_newton`) when that is predicted cheaper; both judged by the
  certified log-likelihood gap ``n log max_x g_x``.
* :func:`_ems`: EM with smoothing (EMS), :func:`_smooth` being the
  ``(1, 2, 1)/4`` kernel, accelerated as a batch of columns (:func:`_ems_fixed`).
* :func:`_squarem`: the SQUAREM extrapolation that :func:`_em` (one column) and
  :func:`_ems_fixed` (a batch) share.
* :func:`_least_squares` and :func:`project_simplex`: unbiased inversion.

The EM solvers take ``A``, the column-scaled channel restricted to the observed
outputs (``k`` rows; sparse CSR or dense), its transpose ``AT`` and the nonzero
counts ``c``.  The math, the stopping rules and the certificate are in the
:mod:`sparseldp.estimation` docstring.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.sparse as sp
import scipy.linalg as sla
import scipy.sparse.linalg as spla

from .._validation import check_int, one_of
from .model import _Model

#: The frequency estimators, ``estimate_frequencies(method=...)``; the bootstrap, the CLI and ``compare``
#: check against this (re-exported as ``sparseldp.estimation.METHODS``).
METHODS = ("auto", "em", "ems", "inversion")
_METHODS_TEXT = one_of(METHODS)  # for error messages

# EMS: steps over which the linear rate is measured, and the step size treated as rounding.
_EMS_RATE_SPAN = 5
_EMS_FLOOR = 1e-14
# EMS: most halvings of a SQUAREM step length per cycle (an unsettled column falls back to p2).
_EMS_HALVINGS = 40


def project_simplex(v) -> np.ndarray:
    r"""Euclidean projection of a real vector onto the probability simplex.

    ``argmin_{p >= 0, sum p = 1} ||p - v||_2 = (v - theta)_+`` with
    ``theta = (sum_{j <= rho} u_j - 1) / rho``, ``u`` = ``v`` sorted in
    decreasing order and ``rho`` the largest ``j`` with
    ``u_j > (sum_{i <= j} u_i - 1)/j`` (Held, Wolfe and Crowder 1974; Duchi,
    Shalev-Shwartz, Singer and Chandra 2008).  ``O(k log k)``.
    """
    v = np.asarray(v, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"v must be a nonempty 1-D array; got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("v must contain finite numbers only")
    u = np.sort(v)[::-1]
    css = np.cumsum(u)
    j = np.arange(1, v.size + 1)
    cond = u * j > css - 1.0
    rho = int(np.flatnonzero(cond)[-1]) + 1
    theta = (css[rho - 1] - 1.0) / rho
    p = np.maximum(v - theta, 0.0)
    s = p.sum()
    return p / s if s > 0 else np.full(v.size, 1.0 / v.size)


def _squarem(P, r, u, P2, max_halvings=None):
    r"""The SQUAREM extrapolation of one cycle (Varadhan and Roland 2008, scheme S3), column by column.

    From a point ``p`` and its two plain steps ``p1 = F(p)``, ``p2 = F(p1)``, given as
    ``r = p1 - p`` and ``u = p2 - p1`` (``v = u - r``): the step length
    ``a = min(-|r|/|v|, -1)`` (``-1`` when ``v = 0``) and the extrapolation
    ``p - 2 a r + a^2 v``; while that has a negative entry, ``a`` is moved
    halfway towards ``-1`` (``a <- (a - 1)/2``), and once it is within ``1e-3`` of
    ``-1`` it becomes ``-1``: no extrapolation (``a = -1`` gives ``p2``).
    A step length that overflows (``|v|^2`` subnormal beside a normal ``|r|^2``) is
    taken as ``-1``.  ``max_halvings`` caps the halvings (``None``: no cap, as for ``_em``); a column
    still negative at the cap keeps its ``a < -1`` and gets ``p2`` as its point
    (``_ems_fixed`` then tries its stabilizing step from there).

    ``P``, ``r``, ``u``, ``P2``: ``k x b`` arrays, one column per problem (``_ems_fixed``),
    or one column as 1-D arrays (``_em``).  A 1-D column is handled with Python floats
    (numpy's per-call cost on 0-d values made ``_em`` up to 20 % slower on small channels)
    and keeps ``_em``'s own rounding and test: BLAS dot products for the norms, and
    ``min >= 0`` (a nan entry counts as negative); columns use sums over axis 0 and ``< 0``.

    Returns ``(a, Pe)``: ``a <= -1`` per column, and where ``a < -1`` the column of ``Pe``
    is the extrapolated point, nonnegative and rescaled to sum 1.  Where ``a = -1`` the
    caller takes ``p2`` (those columns of ``Pe`` are not meant to be used).
    """
    v = u - r
    one = v.ndim == 1
    if one:
        vv = float(v @ v)
        a = min(-math.sqrt(float(r @ r) / vv), -1.0) if vv > 0.0 else -1.0
        if not math.isfinite(a):  # |r|^2 / |v|^2 overflowed: halving -inf would never reach -1
            a = -1.0
    else:
        vv = (v * v).sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            a = np.minimum(np.where(vv > 0, -np.sqrt((r * r).sum(axis=0) / vv), -1.0), -1.0)
        a = np.where(np.isfinite(a), a, -1.0)
    some = bool if one else np.count_nonzero  # does any column hold? (a Python bool for one column)
    live = a < -1.0
    halvings = 0
    while some(live):
        Pe = P - 2.0 * a * r + a * a * v
        neg = (not Pe.min() >= 0.0) if one else (Pe < 0).any(axis=0) & live
        if some(neg) and halvings != max_halvings:
            h = 0.5 * (a - 1.0)  # towards -1, and -1 itself once within 1e-3
            a = (-1.0 if h > -1.0 - 1e-3 else h) if one else np.where(neg, np.where(h > -1.0 - 1e-3, -1.0, h), a)
            live = a < -1.0
            halvings += 1
            continue
        if some(neg):  # at the cap: those columns fall back to p2
            Pe = np.where(neg, P2, Pe)
        Pe /= Pe.sum(axis=0)
        return a, Pe
    return a, P2


def _em(A, AT, c, n, p0, tol, max_iter, history=None, step=True):
    """SQUAREM-accelerated EM on observed columns; returns (p, evals, converged, gap).

    ``gap`` is the certificate of the point it was computed at, and with ``step``
    (the default) the returned point is one EM step beyond it (EM is monotone, so
    the certificate bounds the returned point's gap too); with ``step=False`` the
    certified point itself is returned, so that a caller can recompute its
    certificate (``_mle(fast=...)``).  ``history`` (a list), if given, receives
    ``(evals, gap)`` pairs, used to predict the remaining cost.
    """
    last = (lambda p, g: p * g) if step else (lambda p, g: p)
    inv_n = 1.0 / n

    def g_of(q):
        return (A @ (c / q)) * inv_n

    def loglik(q):
        with np.errstate(divide="ignore"):
            return float(c @ np.log(q)) if np.all(q > 0) else -math.inf

    def cert(g):
        return n * math.log(max(float(g.max()), 1e-300))

    p = p0
    q = AT @ p
    evals = 0
    while True:
        g = g_of(q)
        gap = cert(g)
        if history is not None:
            history.append((evals, gap))
        if gap <= tol:
            return last(p, g), evals, True, max(gap, 0.0)
        if evals >= max_iter:
            return last(p, g), evals, False, gap
        p1 = p * g
        evals += 1
        q1 = AT @ p1
        g1 = g_of(q1)
        gap1 = cert(g1)
        if gap1 <= tol:
            return last(p1, g1), evals, True, max(gap1, 0.0)
        p2 = p1 * g1
        evals += 1
        q2 = AT @ p2
        if evals >= max_iter:
            p, q = p2, q2
            continue
        a, pe = _squarem(p, p1 - p, p2 - p1, p2)
        if not a < -1.0:  # no extrapolation: the plain step
            p, q = p2, q2
            continue
        qe = AT @ pe
        if loglik(qe) >= loglik(q2):
            p, q = pe, qe
        else:
            p, q = p2, q2


def _banded_solve(band, w, diag, rhs):
    """Solve ``(Q diag(w) Q^T + diag(diag)) x = rhs`` by banded Cholesky, ``band(w)`` giving the first term
    in upper banded storage; ``None`` when the matrix is not numerically positive definite."""
    ab = band(w)
    ab[-1] += diag
    try:
        sol = sla.solveh_banded(ab, rhs, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    return sol if np.all(np.isfinite(sol)) else None


def _newton(A, AT, c, n, p_start, gap_start, tol, max_steps, dense, band=None, step=True):
    r"""Primal log-barrier interior-point Newton method for the same MLE.

    Maximizes ``F_mu(p) = sum_y c_y log (Q^T p)_y + mu sum_x log p_x`` on
    ``sum p = 1`` for ``mu`` decreasing tenfold, each by damped Newton steps on
    the KKT system ``[M 1; 1^T 0]`` with ``M = Q diag(c/q^2) Q^T + mu diag(1/p^2)``
    (banded for window channels: sparse LU in natural order).  At the barrier
    optimum ``g_x = (nu - mu/p_x)/n <= 1 + k mu / n``, so the certificate
    ``n log max g <= k mu``; the same certificate as EM is checked on the
    iterate, so nothing is taken on trust.  Returns (p, steps, converged, gap).

    ``band``: optional ``w -> Q diag(w) Q^T`` in upper banded storage
    (``_toeplitz._Conv.gram_band``, by FFT for a window channel); the system is
    then solved by banded Cholesky (``M`` is symmetric positive definite), with the
    sparse LU as the fallback should Cholesky fail.  Measured on a 1,000-value channel
    with a window of 275: 12 ms a step against 125 ms for the sparse product and LU.
    """
    k = A.shape[0]
    theta = 1e-3
    p = (1.0 - theta) * p_start + theta / k
    p /= p.sum()
    mu = max(gap_start, tol) / k
    ones = np.ones(k)
    best = None
    steps = 0

    def F(p, mu):
        q = AT @ p
        if np.any(q <= 0) or np.any(p <= 0):
            return -math.inf, q
        return float(c @ np.log(q)) + mu * float(np.log(p).sum()), q

    Fv, q = F(p, mu)
    while steps < max_steps:
        for _ in range(50):
            steps += 1
            w = c / (q * q)
            G = A @ (c / q) + mu / p
            sol = _banded_solve(band, w, mu / (p * p), np.column_stack([G, ones])) if band is not None else None
            if band is not None and sol is None:
                band = None  # not numerically positive definite: the sparse LU from here on
            if sol is not None:
                pass  # solved by banded Cholesky
            elif dense:
                M = (A * w[None, :]) @ A.T
                M[np.diag_indices(k)] += mu / (p * p)
                try:
                    sol = np.linalg.solve(M, np.column_stack([G, ones]))
                except np.linalg.LinAlgError:
                    break
            else:
                M = sp.csc_array(A @ sp.diags_array(w) @ AT + sp.diags_array(mu / (p * p)))
                try:
                    sol = spla.splu(M, permc_spec="NATURAL").solve(np.column_stack([G, ones]))
                except RuntimeError:
                    break
            a, b = sol[:, 0], sol[:, 1]
            d = a - (a.sum() / b.sum()) * b
            dec = float(G @ d)  # predicted increase x 2 of F_mu along the Newton step
            if not np.isfinite(dec) or dec <= 0.05 * tol or steps >= max_steps:
                break
            neg = d < 0
            alpha = min(1.0, 0.99 * float(np.min(-p[neg] / d[neg]))) if neg.any() else 1.0
            while alpha > 1e-12:
                pn = p + alpha * d
                Fn, qn = F(pn, mu)
                if Fn >= Fv + 0.1 * alpha * dec:
                    break
                alpha *= 0.5
            else:
                break  # no progress possible at this mu (numerical floor)
            p, q, Fv = pn, qn, Fn
        g = (A @ (c / q)) / n
        gap = n * math.log(max(float(g.max()), 1e-300))
        if best is None or gap < best[1]:
            best = (p * g if step else p, gap)
        if gap <= tol:
            return best[0], steps, True, max(gap, 0.0)
        if k * mu < 1e-3 * tol:
            break  # the barrier is negligible: further mu cannot help
        mu /= 10.0
        Fv, q = F(p, mu)
    return best[0], steps, False, best[1]


# EM evaluations before the solver considers switching to Newton.
_EM_FIRST = 600
# Smallest EM run between two predictions.
_EM_RUN = 5000
# Newton steps allowed in one finishing run.
_NEWTON_STEPS = 120
# Newton runs at most this many times in one fit (EM between them).
_NEWTON_TRIES = 3
# Predicted Newton steps (the typical count) used to compare costs with EM.
_NEWTON_TYPICAL = 60


def _newton_cost(A, dense: bool) -> float:
    """Cost of one Newton step in EM-flop units: factorizing the k x k (banded) system.

    Dense: ``k^3/3 + 2 k^2 m`` flops of matrix-matrix work, divided by
    ``min(10, max(1, k m / 20000))``: BLAS runs matrix-matrix products (level 3)
    that much faster per flop than EM's matrix-vector products once the matrices
    leave the cache, as measured here (Newton step time / EM evaluation time
    against the flop ratio: 1.3 at k m = 24,000, 4.1 at 85,000, 6-11 at
    100,000-210,000, 8.7-8.8 at 500,000-1,700,000).
    """
    k = A.shape[0]
    if dense:
        return (k**3 / 3.0 + 2.0 * k * k * A.shape[1]) / min(10.0, max(1.0, k * A.shape[1] / 20_000.0))
    coo = sp.coo_array(A)
    if coo.nnz == 0:
        return 0.0
    lo = np.full(A.shape[0], np.iinfo(np.int64).max)
    hi = np.full(A.shape[0], -1)
    np.minimum.at(lo, coo.row, coo.col)
    np.maximum.at(hi, coo.row, coo.col)
    # rows x and x' couple in M when their column spans overlap: bandwidth in rows
    order = np.argsort(lo, kind="stable")
    reach = np.searchsorted(lo[order], hi[order], side="right") - np.arange(k)
    bw = float(max(1, reach.max()))
    return k * bw * bw + 2.0 * coo.nnz * bw


def band_of(FA):
    """The banded Gram of FFT products (``_toeplitz._Conv.gram_band``), or ``None``."""
    return getattr(getattr(FA, "_c", None), "gram_band", None)


def _mle(A, AT, c, n, k, tol, max_iter, dense, fast=None, p0=None):
    """Maximum likelihood: SQUAREM EM, finished by Newton when that is predicted cheaper.

    After a first EM run, the remaining EM cost is predicted from the observed
    geometric rate of the certificate; EM continues (for twice the predicted
    count) while that is cheaper than a typical Newton finish, else Newton runs
    once.  A prediction is trusted once: when EM has run twice the predicted
    count without converging (SQUAREM's certificate can stall or rise on
    ill-conditioned channels), Newton runs next whatever the costs say.  A Newton
    run that does not converge (:data:`_NEWTON_STEPS`) is followed by an EM run as
    long as all evaluations so far (at least :data:`_EM_RUN`) and Newton again
    from the better point, at most :data:`_NEWTON_TRIES` times; then EM takes
    whatever budget is left.  Returns (p, em_evals, newton_steps, converged, gap).

    ``fast``: optional ``(A, AT)`` applied by FFT (``model.fast_columns``) for the
    EM runs; Newton always uses the exact ``A``.  The EM runs' certificates are then
    approximate (to about ``1e-12`` relative in ``g``): for fits that need no
    rigorous gap, such as the fold fits of ``method="auto"``'s selection, or for
    a caller that checks the returned point with the exact products
    (``frequencies._fit``); so with ``fast`` the point returned on convergence is
    the one the certificate was computed at (no last EM step).  ``p0``: the start
    (default uniform).
    """
    FA, FAT = (A, AT) if fast is None else fast
    step = fast is None
    p = np.full(k, 1.0 / k) if p0 is None else p0
    evals, steps, tries, predicted = 0, 0, 0, False
    nnz = A.size if dense else A.nnz
    newton_cost = None
    budget = min(max_iter, _EM_FIRST)
    while True:
        hist = []
        p, e, conv, gap = _em(FA, FAT, c, n, p, tol, budget, hist, step)
        evals += e
        if conv or evals >= max_iter:
            return p, evals, steps, conv, gap
        # predicted remaining EM evaluations from the second half of this run
        half = [gp for ev, gp in hist if ev >= e // 2 and gp > 0]
        rate = (gap / half[0]) ** (1.0 / max(1, e - e // 2)) if half and gap > 0 else 1.0
        em_left = math.log(tol / gap) / math.log(rate) if 0 < rate < 1 else math.inf
        if newton_cost is None:
            newton_cost = _NEWTON_TYPICAL * _newton_cost(A, dense)
        em_cheaper = em_left <= max_iter - evals and em_left * 4.0 * nnz <= newton_cost
        if tries < _NEWTON_TRIES and (predicted or not em_cheaper):
            tries += 1
            band = band_of(FA) if not dense else None
            p_n, s_n, conv_n, gap_n = _newton(A, AT, c, n, p, gap, tol, _NEWTON_STEPS, dense, band, step)
            steps += s_n
            if conv_n:
                return p_n, evals, steps, True, gap_n
            if gap_n < gap:
                p = p_n
            # EM from the better point, then Newton again (a failed Newton is often one whose start
            # was still far off); the last try leaves EM the whole budget
            predicted = tries < _NEWTON_TRIES
            budget = min(max_iter - evals, max(_EM_RUN, evals)) if predicted else max_iter - evals
        else:
            # long runs: SQUAREM's path is erratic, so short re-predicted runs would thrash
            predicted = math.isfinite(em_left)
            budget = min(max_iter - evals, max(int(2 * em_left) + 100, _EM_RUN)) if predicted else max_iter - evals


def _smooth(p: np.ndarray, passes: int, weight: float = 0.25, axis: int = -1) -> np.ndarray:
    """``S^passes p``: the ``(w, 1 - 2w, w)`` kernel (``w = weight``; the default ``1/4`` is EMS's
    ``(1, 2, 1)/4``), edge overflow kept on the end values.

    ``S`` is symmetric and doubly stochastic (:mod:`sparseldp.estimation` docstring), so the sum of
    ``p`` is preserved.  Works along ``axis`` (the last by default: a ``B x k`` array of bootstrap
    replicates is smoothed row by row); vectorized over the domain, the loop is over passes.
    """
    p = np.moveaxis(p, axis, -1)
    for _ in range(passes):
        out = (1.0 - 2.0 * weight) * p
        out[..., 1:] += weight * p[..., :-1]
        out[..., :-1] += weight * p[..., 1:]
        out[..., 0] += weight * p[..., 0]
        out[..., -1] += weight * p[..., -1]
        p = out
    return np.moveaxis(p, -1, axis)


def _check_smooth(smooth, method: str) -> int:
    """EMS smoothing passes: ``None`` -> 1; an integer >= 1, and only with ``method="ems"``."""
    if smooth is None:
        return 1
    if method != "ems":
        raise ValueError(f"smooth applies to method='ems' only; got smooth={smooth!r} with method={method!r}")
    return check_int(smooth, "smooth", minimum=1)


def _ems_map(A, AT, C, inv_n, P, passes, weight):
    """One EMS step in every column of ``P`` (``k x b``): ``S^passes (P * g(P))``, columns renormalized."""
    Q = AT @ P
    R = np.divide(C, Q, out=np.zeros_like(C), where=C > 0)
    Pn = _smooth(P * (A @ R) * inv_n, passes, weight, axis=0)
    Pn /= Pn.sum(axis=0, keepdims=True)  # exact in exact arithmetic: keeps rounding from drifting
    return Pn


def _ems_fixed(A, AT, C, inv_n, P, passes, weight, tol, max_iter):
    r"""EMS to its fixed point in every column of ``C`` (counts, ``m' x b``), from the columns of ``P``.

    The EMS map ``F`` is a contraction near its fixed point, often a slow one
    (rates above 0.999 for wide Gaussian kernels), so the iteration is
    accelerated by SQUAREM (Varadhan and Roland 2008, scheme S3, which they
    apply to EMS among other fixed-point maps): from ``p``, ``p1 = F(p)``,
    ``p2 = F(p1)``, ``r = p1 - p``, ``v = p2 - p1 - r``, the extrapolation
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
    Returns (P, evaluations, converged mask).
    """
    P = np.array(P, dtype=float)
    C = np.asarray(C, dtype=float)
    inv_n = np.broadcast_to(np.asarray(inv_n, dtype=float), (C.shape[1],))
    active = np.ones(C.shape[1], bool)
    rates = np.zeros((_EMS_RATE_SPAN, C.shape[1]))  # the last cycles' observed rates, per column
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
            done = (d2 <= _EMS_FLOOR) | ((cycles >= _EMS_RATE_SPAN) & (rho < 1.0) & (d2 * rho / (1.0 - rho) <= tol))
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
    return P, evals, ~active


def _ems(A, AT, c, n, k, tol, max_iter, passes, weight=0.25):
    """EM with smoothing: iterate ``p <- S^passes (p * g(p))`` from the uniform start
    (``S`` the ``(w, 1 - 2w, w)`` kernel of :func:`_smooth`, ``w = weight``), accelerated
    and stopped as in :func:`_ems_fixed` (estimated TV distance ``tol`` to the fixed point).
    Returns (p, evals, converged).
    """
    P, evals, conv = _ems_fixed(A, AT, np.asarray(c, dtype=float)[:, None], 1.0 / n, np.full((k, 1), 1.0 / k),
                                passes, weight, tol, max_iter)
    return P[:, 0], evals, bool(conv[0])


def _least_squares(model: _Model, f: np.ndarray) -> np.ndarray:
    """``argmin ||Q^T p - f||_2`` (normal equations, sparse LU; lsqr if singular)."""
    Q = model.unscaled()
    if model.dense:
        return np.linalg.lstsq(Q.T, f, rcond=None)[0]
    G = sp.csc_array(Q @ Q.T)
    rhs = Q @ f
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", spla.MatrixRankWarning)
            sol = spla.splu(G).solve(rhs)
        if np.all(np.isfinite(sol)):
            return sol
    except (RuntimeError, spla.MatrixRankWarning):
        pass
    return spla.lsqr(sp.csr_array(Q.T), f, atol=1e-14, btol=1e-14, iter_lim=50 * model.k)[0]
