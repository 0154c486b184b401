"""The numerical solvers behind the frequency estimates, on count vectors.

* the maximum-likelihood estimate (EM and Newton) is in :mod:`sparseldp.estimation.mle`;
* EM with smoothing (EMS) and its fixed point are in :mod:`sparseldp.estimation._ems`;
* :func:`_em_run`: plain EM steps on a batch of columns (``auto``'s stopped EM and its refits);
* :func:`_squarem`: the SQUAREM extrapolation that ``mle._em`` (one column), ``_ems._ems_squarem``
  and the MLE's batched refits (``_mle_refits``) share.
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
import scipy.sparse.linalg as spla

from .._validation import one_of
from ._fft_em import ITERATE_FLOOR, _next_look
from .model import _Model

#: The frequency estimators, ``estimate_frequencies(method=...)``; the bootstrap, the CLI and ``compare``
#: check against this (re-exported as ``sparseldp.estimation.METHODS``).
METHODS = ("auto", "em", "ems", "inversion")
_METHODS_TEXT = one_of(METHODS)  # for error messages
#: ``_em_time``'s ``relax`` for the EM flow by Runge-Kutta-Chebyshev steps (:func:`_em_chebyshev`).
CHEBYSHEV = "chebyshev"

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
    still negative at the cap keeps its ``a < -1`` and gets ``p2`` as its point.

    ``P``, ``r``, ``u``, ``P2``: ``k x b`` arrays, one column per problem (``_ems._ems_squarem``, ``_mle_refits``),
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
    live = a < -1.0
    if not one:
        return _squarem_columns(P, r, v, P2, a, live, max_halvings) if live.any() else (a, P2)
    halvings = 0
    while live:
        Pe = P - 2.0 * a * r + a * a * v
        neg = not Pe.min() >= 0.0
        if neg and halvings != max_halvings:
            h = 0.5 * (a - 1.0)  # towards -1, and -1 itself once within 1e-3
            a = -1.0 if h > -1.0 - 1e-3 else h
            live = a < -1.0
            halvings += 1
            continue
        if neg:  # at the cap: the column falls back to p2
            Pe = P2.copy()
        Pe /= Pe.sum(axis=0)
        return a, Pe
    return a, P2


def _squarem_columns(P, r, v, P2, a, live, max_halvings):
    """:func:`_squarem` on ``k x b`` columns (``v = u - r``, ``a`` the first step lengths, ``live = a < -1``).

    The halvings test only the entries that can turn negative: the extrapolation of an entry is the
    quadratic ``f(a) = p - 2 a r + a^2 v`` on ``[a_0, -1]`` (every step length the halvings try lies
    there, ``f(-1) = p2 >= 0``), and an entry whose least value there exceeds a rounding margin stays
    nonnegative at each of them.  The rest (the entries near 0 that the extrapolation overshoots,
    usually a few per column) are evaluated by the same expression as the whole column would be, so
    the step lengths, and the points, are those of the plain loop over whole columns bit for bit (tested);
    the loop's cost was up to 40 passes over ``k x b`` per cycle (8.7 s of a 53 s ``auto`` fit on 1,000
    values under a Gaussian window of 695).
    """
    b = P.shape[1]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lo = np.where(live, a, -1.0)  # the interval's far end per column
        least = np.minimum(P - 2.0 * lo * r + lo * lo * v, P2)  # the interval's ends
        vertex = np.divide(r, v, out=np.full_like(r, np.inf), where=v > 0)  # convex entries: the minimum at r/v
        inside = (vertex >= lo) & (vertex <= -1.0)
        least = np.where(inside, np.minimum(least, P - r * vertex), least)
        margin = 1e-9 * (np.abs(P) + 2.0 * np.abs(lo) * np.abs(r) + lo * lo * np.abs(v))
        risky = ~(least > margin) & live  # nan compares false: such entries are tested too
    rows, cols = np.nonzero(risky)
    Pr, rr, vr = P[rows, cols], r[rows, cols], v[rows, cols]
    halvings = 0
    while np.count_nonzero(live):
        ac = a[cols]
        Pe_r = Pr - 2.0 * ac * rr + ac * ac * vr  # the whole column's expression, on its risky entries
        neg = np.zeros(b, bool)
        neg[cols[Pe_r < 0]] = True
        neg &= live
        if neg.any() and halvings != max_halvings:
            h = 0.5 * (a - 1.0)  # towards -1, and -1 itself once within 1e-3
            a = np.where(neg, np.where(h > -1.0 - 1e-3, -1.0, h), a)
            live = a < -1.0
            halvings += 1
            continue
        Pe = P - 2.0 * a * r + a * a * v
        if neg.any():  # at the cap: those columns fall back to p2
            Pe = np.where(neg, P2, Pe)
        Pe /= Pe.sum(axis=0)
        return a, Pe
    return a, P2


def _em_run(A, AT, P, C, steps, inv_n=None, observe=None, single=False, relax=0):
    """Up to ``steps`` plain EM steps ``p <- p * g(p)`` on every row of ``P`` (``b x k``), counts ``C``
    (``b x m'``, rows); the rows reached.

    ``inv_n`` (``b``) is each row's ``1 / n``; ``None`` renormalizes every step to sum 1 instead (the
    same in exact arithmetic).  ``observe(t, P, Q)`` (rows, and their outputs ``Q = A^T P`` as rows)
    is called before the first step and after the last, and after each step until it says otherwise:
    it returns true to stop the run, false to be called after the next step, or an integer step
    ``t' > t`` to be called next after ``t'`` steps (``_fft_em._next_look``; the last step is always
    seen).  FFT
    products run the steps fused (``_fft_em.em_rows``), in single precision if ``single``;
    other products step by step here, dense ones in single precision if ``single`` (sparse ones
    always in double).

    ``relax`` (an integer ``r >= 0``): over-relaxed steps ``p <- p * g(p)^h``, ``h = 2 - 2^-r`` (by ``r``
    square roots of ``g``; renormalized, so ``inv_n`` must be ``None``), each worth ``h`` plain steps;
    0: plain steps.  In ``theta = log p`` a plain step is ``theta <- theta + log g``, the explicit Euler
    step of length 1 of the flow ``d theta / dt = log g(p)`` (to first order in ``g - 1`` the EM flow
    ``g - 1`` of :mod:`sparseldp.estimation._flow`), and a relaxed one is the step of length ``h < 2``.
    Near a fixed point a direction the plain step shrinks by ``1 - mu``
    (``0 <= mu <= 1``) shrinks by ``1 - h mu``, whose size stays below 1 but for ``mu = 0``: the fast
    directions still die out, and in the slow ones ``t / h`` relaxed steps agree with ``t`` plain
    steps to ``t (h - 1) mu^2 / 2`` in the exponent, which is small wherever ``(1 - mu)^t`` is not.
    For the bootstrap's ``"em steps=t"`` refits (``refits._refit_em_steps``), which check the
    agreement on the estimate's own counts.

    Iterates are kept at or above ``_fft_em.ITERATE_FLOOR`` (1e-200 in double, 1e-30 in float32): a
    value EM drives towards 0 would otherwise bring subnormal numbers into the products, whose arithmetic
    is many times slower on x86 (measured: the bootstrap's refits of a point-mass truth, 100 values
    under the Laplace window of 275, ``em steps=20000``, B = 20, 5.2-5.3 s against 15.7-26.4 s; ``auto``
    on 1,000 values of a zero-inflated truth under that window, 10^6 reports, 16.3 -> 7.2 s profiled);
    no probability above that floor moves, and none below it changes any product.
    """
    relax = int(relax)
    if relax and inv_n is not None:
        raise ValueError("relaxed steps renormalize every step: inv_n must be None")
    fused = getattr(A, "em_rows", None)
    if fused is not None:
        return fused(P, C, steps, inv_n, observe, np.float32 if single else np.float64, relax)
    dtype = np.float64
    if single and isinstance(A, np.ndarray):  # dense products in float32 (sgemm); the rows come back in double
        dtype = np.float32
        A, AT = A.astype(dtype), AT.astype(dtype)
    # column layout as views of the rows (Fortran order): products on contiguous transposes
    P = np.array(P, dtype=dtype).T
    CT = np.asarray(C, dtype=dtype).T
    tiny = np.dtype(dtype).type(ITERATE_FLOOR[np.dtype(dtype)])
    has = CT > 0
    look = 0  # the next step observe sees
    for t in range(steps + 1):
        if t == steps and observe is None:
            break
        Q = AT @ P
        if observe is not None and (t >= look or t == steps):
            look = _next_look(observe(t, P.T, Q.T), t)
            if look is None or t == steps:
                break
        if dtype is np.float32:  # an iterate that underflows must not make an observed output impossible
            np.maximum(Q, np.finfo(np.float32).tiny, out=Q)
        R = np.divide(CT, Q, out=np.zeros_like(Q), where=has)
        G = A @ R
        P = P * G
        if relax:
            np.maximum(G, 0.0, out=G)
        for _ in range(relax):
            P *= np.sqrt(G, out=G)
        P *= inv_n if inv_n is not None else 1.0 / P.sum(axis=0, keepdims=True)
        np.maximum(P, tiny, out=P)  # no subnormal terms (docstring)
    if dtype is np.float32:
        P = P.astype(np.float64)
        P /= P.sum(axis=0, keepdims=True)
    return np.ascontiguousarray(P.T)


def _em_time(A, AT, P, C, steps, single=False, relax=0):
    """The rows ``P`` (``b x k``) moved by ``steps`` plain EM steps' worth (counts ``C``, rows): ``steps`` plain
    steps, or for ``relax = r > 0`` ``2^r floor(steps / (2^(r+1) - 1))`` over-relaxed steps of
    :func:`_em_run`, each worth ``2 - 2^-r`` plain ones, then the remaining ``steps mod (2^(r+1) - 1)``
    plain ones (renormalized every step either way); for ``relax = "chebyshev"`` the EM flow to time ``steps``
    (:func:`_em_chebyshev`)."""
    if relax == CHEBYSHEV:
        return _em_chebyshev(A, AT, P, C, steps, single)
    if not relax:
        return _em_run(A, AT, P, C, steps, single=single)
    period = (1 << (relax + 1)) - 1  # 2^r relaxed steps make 2^(r+1) - 1 plain ones
    P = _em_run(A, AT, P, C, (1 << relax) * (steps // period), single=single, relax=relax)
    return _em_run(A, AT, P, C, steps % period, single=single) if steps % period else P


# The Chebyshev refits (_em_chebyshev): plain EM steps first (the log-flow's Euler steps of length 1, which are
# what the estimate is), then second-order Runge-Kutta-Chebyshev steps of length h = _CHEB_GROWTH * t (t the time
# reached), each with the fewest stages s whose stability interval, _CHEB_MARGIN * beta(s), holds h; the log of
# the EM factor floored at _CHEB_G_FLOOR (a value whose factor is that small is leaving the support at more
# than a nat a unit of time; below, log g's Jacobian grows as 1 / g and would make the flow stiff).
_CHEB_WARM = 30
_CHEB_GROWTH = 0.1
_CHEB_MARGIN = 0.6
_CHEB_G_FLOOR = 0.2
_CHEB_DAMPING = 2.0 / 13.0  # Verwer, Hundsdorfer and Sommeijer's damping: beta(s) ~ 0.65 s^2
# The flow raises the log-likelihood (d L / dt = sum_i p_i (g_i - 1) log g_i >= 0): a step that lowers it by more
# than this many nats per report is redone for those rows in two halves, each again guarded, down to
# 2^-_CHEB_HALVINGS of the step.  Measured (300 values under a Gaussian window of 349, 10^7 reports of
# zero-inflated counts, flowing from 20,000 to 80,000): unguarded, one row in 20 overshot an atom (from 0.4
# to 0.98 at 0, the mean from 14.4 to 0.38); more stages or a higher floor under g did not help.
# In single precision the per-report log-likelihood is summed from float32 terms: 1e-5 (its rounding is ~1e-6).
_CHEB_LL_TOL = {np.dtype(np.float64): 1e-9, np.dtype(np.float32): 1e-5}
_CHEB_HALVINGS = 12


def _rkc_coefficients(s: int):
    """``(mu_t, mu, nu, gamma_t, beta)`` of the damped second-order Runge-Kutta-Chebyshev method with ``s >= 2``
    stages (Sommeijer, Shampine and Verwer 1998, RKC; damping ``eps = 2/13``, ``w0 = 1 + eps / s^2``): stage
    ``j >= 2`` is ``Y_j = (1 - mu_j - nu_j) Y_0 + mu_j Y_{j-1} + nu_j Y_{j-2} + mu_t_j h F(Y_{j-1}) + gamma_t_j h
    F(Y_0)``, ``Y_1 = Y_0 + mu_t_1 h F(Y_0)``, and ``beta`` the length of the real stability interval,
    ``(2/3)(s^2 - 1)(1 - 2 eps / 15)``."""
    eps = _CHEB_DAMPING
    w0 = 1.0 + eps / s ** 2
    T, dT, ddT = np.zeros(s + 1), np.zeros(s + 1), np.zeros(s + 1)
    T[0], T[1], dT[1] = 1.0, w0, 1.0
    for j in range(2, s + 1):  # Chebyshev polynomials and their first two derivatives at w0
        T[j] = 2 * w0 * T[j - 1] - T[j - 2]
        dT[j] = 2 * T[j - 1] + 2 * w0 * dT[j - 1] - dT[j - 2]
        ddT[j] = 4 * dT[j - 1] + 2 * w0 * ddT[j - 1] - ddT[j - 2]
    w1 = dT[s] / ddT[s]
    b = np.zeros(s + 1)
    b[2:] = ddT[2:] / dT[2:] ** 2
    b[0] = b[1] = b[2]
    mu_t, mu, nu, gam = np.zeros(s + 1), np.zeros(s + 1), np.zeros(s + 1), np.zeros(s + 1)
    mu_t[1] = b[1] * w1
    for j in range(2, s + 1):
        mu[j] = 2 * w0 * b[j] / b[j - 1]
        nu[j] = -b[j] / b[j - 2]
        mu_t[j] = 2 * w1 * b[j] / b[j - 1]
        gam[j] = -(1 - b[j - 1] * T[j - 1]) * mu_t[j]
    return mu_t, mu, nu, gam, _rkc_beta(s)


def _chebyshev_schedule(t0: float, T: float) -> list[tuple[float, int]]:
    """The steps ``(h, s)`` from time ``t0`` to ``T`` (:data:`_CHEB_GROWTH`, :data:`_CHEB_MARGIN`): ``h = 0.1 t``,
    the last stretched to ``T`` where what remains is under 0.3 of a step."""
    out, t = [], float(t0)
    while t < T:
        h = min(_CHEB_GROWTH * t, T - t)
        if T - t - h < 0.3 * h:
            h = T - t
        out.append((h, _rkc_stages(h)))
        t += h
    return out


def _rkc_stages(h: float) -> int:
    """The fewest stages ``s >= 2`` with ``_CHEB_MARGIN * beta(s) >= h``: ``beta`` is ``c (s^2 - 1)``, so
    ``s = ceil(sqrt(1 + h / (_CHEB_MARGIN c)))``, then moved by one where rounding put it off."""
    c = _CHEB_MARGIN * _rkc_beta(2) / 3.0  # _CHEB_MARGIN times beta's coefficient of s^2 - 1
    s = max(2, math.ceil(math.sqrt(1.0 + h / c)))
    if s > 2 and _CHEB_MARGIN * _rkc_beta(s - 1) >= h:
        s -= 1
    elif _CHEB_MARGIN * _rkc_beta(s) < h:
        s += 1
    return s


def _rkc_beta(s: int) -> float:
    """The length of the damped RKC method's real stability interval with ``s`` stages."""
    return (2.0 / 3.0) * (s * s - 1) * (1 - 2 * _CHEB_DAMPING / 15)


def _g_rows(A, AT, P, C, dtype):
    """``(p, g)`` as ``_fft_em.g_rows``: ``p`` a ``b x k`` buffer of ``dtype`` (holding ``P``), ``g()`` the
    EM factors of its rows (``b x k``), counts ``C`` (rows) normalized by each row's total; FFT products where
    ``A`` has them, else sparse or dense products in column layout.  ``g(loglik=True)``: ``(factors, each row's
    log-likelihood per report at p)``, the latter up to a constant per row, from the same products."""
    fused = getattr(A, "g_rows", None)
    if fused is not None:
        return fused(P, C, dtype)
    if isinstance(A, np.ndarray):
        A, AT = A.astype(dtype, copy=False), AT.astype(dtype, copy=False)
    else:
        dtype = np.dtype(np.float64)  # sparse products in double
    C = np.asarray(C, dtype=float)
    CT = np.ascontiguousarray((C / np.maximum(C.sum(axis=1, keepdims=True), 1e-300)).T.astype(dtype))
    has = CT > 0
    p = np.array(P, dtype=dtype)
    floor = np.finfo(dtype).tiny

    def g(loglik=False):
        Q = AT @ p.T
        np.maximum(Q, floor, out=Q)
        # each row's sum_y c_y log q_y / n (column-scaled q: a constant shift per row)
        ll = (CT * np.log(Q)).sum(axis=0, dtype=np.float64) if loglik else None
        R = np.divide(CT, Q, out=np.zeros_like(Q), where=has)
        G = (A @ R).T
        return (G, ll) if loglik else G

    return p, g


def _em_chebyshev(A, AT, P, C, steps, single=False, start=0):
    r"""The rows ``P`` (``b x k``) moved along the EM flow for time ``steps`` (counts ``C``, rows): an approximation
    to ``steps`` plain EM steps that takes far fewer products where ``steps`` is long.

    A plain step ``p <- p g(p)`` is, in ``theta = log p``, ``theta <- theta + log g``: the explicit Euler step
    of length 1 of the EM flow ``d theta / dt = log g`` (renormalized; ``g`` sums to 1 against ``p``).  Where
    the steps are many, ``t`` of them follow that flow to time ``t`` closely (measured: 10^4 values under the
    Laplace window of 275, ``em steps=1379``, 10^8 reports: the flow integrated finely from the 5th step lies
    within 0.05 bootstrap standard deviations of the plain steps on every value; the flow of ``g - 1``, to
    which it is equal to first order, 0.36).  The flow is stiff (its fast directions decay at rate up to
    about 1), which explicit steps of length above 2 cannot follow; Runge-Kutta-Chebyshev steps
    (:func:`_rkc_coefficients`) of ``s`` stages are stable up to about ``0.65 s^2``, so time ``T`` costs
    ``O(sqrt(T))`` evaluations of ``g`` per unit of step growth instead of ``T``.  Here: :data:`_CHEB_WARM` plain
    steps, then steps of a tenth of the time reached (:func:`_chebyshev_schedule`): 20,000 plain steps'
    worth in about 1,450 evaluations, 1,379 in about 380.  ``log g`` is floored at ``log 0.2``
    (:data:`_CHEB_G_FLOOR`) and ``theta`` at ``log ITERATE_FLOOR``.  The flow never lowers the log-likelihood;
    a step that does on some rows (an entry far below its share rising through a long step overshoots) is
    redone on those rows in guarded halves (:data:`_CHEB_LL_TOL`).  For the bootstrap's ``"em steps=t"``
    refits, which check the agreement on the estimate's own counts (``refits._checked_relaxed``).
    ``start``: the rows ``P`` are already ``start`` plain steps from the uniform start (the plain warm-up
    is what remains of its 30 steps; ``_em_members._stopped_cols``'s run to the cap).
    """
    P = np.asarray(P, dtype=float)
    warm = max(min(int(steps), _CHEB_WARM) - int(start), 0)
    if warm:
        P = _em_run(A, AT, P, C, warm, single=single)
    if steps <= start + warm:
        return P
    dtype = np.dtype(np.float32 if single else np.float64)
    C = np.asarray(C, dtype=float)
    coefficients = {}

    def field(P_rows, C_rows):
        # F(Y) = log g at the rows exp(Y), normalized, g floored at _CHEB_G_FLOOR; F(Y, True) = (F(Y), each
        # row's log-likelihood per report up to a constant per row) from the same products
        p, g = _g_rows(A, AT, P_rows, C_rows, dtype)
        dt = p.dtype
        tiny = dt.type(ITERATE_FLOOR[dt])

        def F(Y, loglik=False):
            np.subtract(Y, Y.max(axis=1, keepdims=True), out=p)
            np.exp(p, out=p)
            np.maximum(p, tiny, out=p)
            np.multiply(p, 1.0 / p.sum(axis=1, keepdims=True), out=p)
            G, ll = g(loglik=True) if loglik else (g(), None)
            np.maximum(G, _CHEB_G_FLOOR, out=G)
            np.log(G, out=G)  # a fresh array: g() returns one per call
            return (G, ll) if loglik else G

        return F, dt

    def rkc(F, dt, Y, h, s, F0):  # one damped RKC step of length h, s stages (F0 = F(Y)); renormalized, floored
        if s not in coefficients:
            coefficients[s] = _rkc_coefficients(s)
        mu_t, mu, nu, gam, _ = coefficients[s]
        Y2, Y1 = Y, Y + dt.type(mu_t[1] * h) * F0
        for j in range(2, s + 1):
            Yj = F(Y1)
            Yj *= dt.type(mu_t[j] * h)
            Yj += dt.type(1 - mu[j] - nu[j]) * Y
            Yj += dt.type(mu[j]) * Y1
            Yj += dt.type(nu[j]) * Y2
            Yj += dt.type(gam[j] * h) * F0
            Y2, Y1 = Y1, Yj
        Y = Y1 - Y1.max(axis=1, keepdims=True)
        np.maximum(Y, dt.type(math.log(ITERATE_FLOOR[dt])), out=Y)
        return Y

    def halves(F, dt, Y, F0, L, h, depth):  # two guarded steps of h / 2 for the rows of Y
        for _ in range(2):
            Yt = rkc(F, dt, Y, h / 2, _rkc_stages(h / 2), F0)
            Ft, Lt = F(Yt, True)
            if depth < _CHEB_HALVINGS and np.any(Lt < L - tol):
                Yt, Ft, Lt = halves(F, dt, Y, F0, L, h / 2, depth + 1)
            Y, F0, L = Yt, Ft, Lt
        return Y, F0, L

    F, dtype = field(P, C)
    tol = _CHEB_LL_TOL[dtype]
    Y = np.log(np.maximum(P, ITERATE_FLOOR[np.dtype(np.float64)])).astype(dtype)
    F0, L = F(Y, True)
    for h, s in _chebyshev_schedule(start + warm, float(steps)):
        # each step's first stage is the last step's check: F and the likelihood from the same products
        Yn = rkc(F, dtype, Y, h, s, F0)
        Fn, Ln = F(Yn, True)
        bad = np.flatnonzero(Ln < L - tol)
        if bad.size:  # the flow never lowers the likelihood: those rows again, in halves (stiff transients)
            Fb, _ = field(np.exp(Y[bad].astype(np.float64)), C[bad])
            Yn[bad], Fn[bad], Ln[bad] = halves(Fb, dtype, Y[bad], F0[bad], L[bad], h, 1)
        Y, F0, L = Yn, Fn, Ln
    out = np.exp(Y.astype(np.float64))
    out /= out.sum(axis=1, keepdims=True)
    return out


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
