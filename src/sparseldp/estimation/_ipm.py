r"""The MLE by a primal-dual interior-point method (Mehrotra's predictor-corrector).

The maximum-likelihood problem over the values' masses ``p`` is, in the Poisson form of
Kiefer-Wolfowitz deconvolution (Koenker and Mizera 2014, who solve its dual with a commercial
interior-point code),

.. math::

    \min_{p \ge 0}\; f(p) = -\sum_y c_y \log (A^T p)_y + n \sum_x p_x ,

with ``A`` the column-scaled channel on the observed outputs (the scales only add a constant to
``f``).  At its minimum ``sum p = 1`` (scaling ``p`` by ``a`` changes ``f`` by ``-n log a + n (a - 1)
sum p``), so it is the MLE on the simplex, and its optimality conditions are exactly the
certificate's: ``g = A (c / q) / n <= 1``, with equality where ``p_x > 0``.

The method keeps ``p > 0`` and a dual slack ``z > 0`` (``z = grad f`` at the optimum) and
follows the central path ``p_x z_x = mu`` to ``mu -> 0``.  Each iteration solves
``(H + diag(z / p)) dp = -grad f + t / p`` twice with one factorization, for the affine
direction (``t = 0``) and for Mehrotra's corrector (``t = sigma mu - dp_aff dz_aff``,
``sigma = (mu_aff / mu)^3``), where ``H = A diag(c / q^2) A^T`` is the Hessian of ``f``: dense
Cholesky on dense channels, banded Cholesky on window channels (``H`` couples two values only
where their windows share an output).  Both ``p`` and ``z`` take 0.99 of the longest step that
keeps them positive.  Unlike the primal barrier (``_newton._newton``), whose decrement stops it
where a value with little mass and a large ``g`` moves the likelihood by hundredths of a nat,
the slack ``z`` carries each value's own optimality condition, so every iteration acts on all
of them.

On wide smooth kernels (Gaussian windows wide against the domain) the channel is numerically of low
rank (:mod:`sparseldp.estimation._lowrank`), and the systems are solved through its factor by
Woodbury's identity (:func:`_woodbury`) in ``O((k + m) r^2)`` instead of the Gram's Cholesky
(:func:`_low_rank_of` decides by the modelled cost of an iteration).  Measured (one BLAS thread,
10^6 reports of a bimodal truth, the MLE from the uniform start): the Gaussian design of
(1, 1e-6, 5) on 1,000 values (rank 117, window 349) 2.6 ms an iteration against 8.4 ms for the
banded Cholesky, that of (1, 1e-6, 10) on 1,000 values (rank 64, window 695) 1.7 ms against 37 ms
dense, on 3,000 values (rank 171) 17 ms against 75 ms; the same iteration counts and certificates.

It stops on the same certificate as the other solvers, ``n log max_x g_x <= tol`` at the
normalized iterate ``p / sum p``, computed with the products given (exact where the caller
passes the exact channel), so nothing is taken on trust.

Measured (one BLAS thread; MLE refits of bootstrap replicates, tol 0.5 nats, each from the
uniform start against ``mle._mle`` with 2,000 EM evaluations): 1,000 values, Laplace design
(2, 1e-8, 3) (window 59), a zero-inflated count, 10^7 reports: 17-21 iterations, 0.04-0.06 s,
all 8 certified, against 0.26-0.90 s and 3 of 8 left uncertified (gaps 1.4-184 nats); 10^5
reports: 13-16 iterations, 0.03-0.04 s against 0.01-0.04 s; the Gaussian design (1, 1e-6, 10)
(window 695, a dense channel), 10^4 and 10^6 reports of a smooth truth: 9-14 iterations,
0.34-0.67 s against 0.33-2.19 s (one of three left at 0.82 nats); a point mass under the Laplace
window 275, 10^6 reports: 14-17 iterations, 0.13-0.16 s with the banded Gram by FFT
(``_toeplitz._Conv.gram_band``; 0.8 s from sparse products) against 0.15-0.20 s.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ._newton import _band_gram, _dense_gram

# Iterations at most (it took 3-22 in the measurements here and in mle._mle).
_IPM_STEPS = 80
# Fraction of the longest step to the boundary of p > 0, z > 0.
_IPM_STEP = 0.99
# Callers try it only where one iteration costs at most this many flops (k^2 m dense, k s^2 for a window
# of s: 1.7e9 for 1,000 values under a Gaussian window of 695, 7.6e8 for 10^4 values under a window of
# 275, where an iteration takes about 0.05 / 0.1 s); beyond, one run could take minutes.
_IPM_FLOPS = 2e9


def _ipm_flops(k: int, m: int, dense: bool, width: int = 0) -> float:
    """The cost of one iteration on a ``k x m`` channel, in flops: ``k^2 m`` dense, ``k (width + 1)^2``
    for a sparse one whose Gram has ``width`` superdiagonals (:func:`_band_width`; the banded
    Cholesky)."""
    return float(k * k * m) if dense else float(k * (width + 1) ** 2)


# One iteration's time on the reference machine (2 cores, 2026-11-30; one BLAS thread), for the callers'
# budgets (``_mle_refits``): deterministic, so that a seed gives the same refits however loaded the machine.
# Measured per iteration on 10^6 reports of a bimodal truth (modelled): Laplace window 59 on 1,000 / 3,000
# values 2.2 / 5.9 ms (2.7 / 6.0), window 137 on 1,000 values 4.0 ms (5.4), window 275 on 1,000 / 3,000
# values 9.4 / 29 ms (11.7 / 33.1); Gaussian window 209 on 1,000 values 6.6 ms (8.5), window 695 on 3,000
# values 87 ms (126); dense, the Gaussian window 695 on 1,000 values 37 ms (56), on 300 values
# 2.3 ms (3.4).  Terms: factorization flops (:func:`_ipm_flops`) at _REF_RATE, the banded Gram's assembly
# from FFT products (_REF_BAND seconds per band entry, k (width + 1)) and a fixed cost per iteration.
_REF_RATE = 2e10
_REF_BAND = 25e-9
_REF_FIXED = 1e-3


def _ipm_seconds(k: int, m: int, dense: bool, width: int = 0) -> float:
    """One iteration's modelled time (seconds on the reference machine) on a ``k x m`` channel: dense
    (``dense``: a dense Gram) or banded with ``width`` superdiagonals."""
    band = 0.0 if dense else _REF_BAND * k * (width + 1)
    return _ipm_flops(k, m, dense, width) / _REF_RATE + band + _REF_FIXED


def _model_seconds(model, m: int) -> float:
    """One iteration's modelled time on a channel model (``estimation.model._Model``) with ``m`` observed
    outputs: through the low-rank factor where the interior point uses it (:func:`_uses_low_rank`, at the
    estimated rank), else :func:`_ipm_seconds` with a dense Gram where the model factors one
    (``model.dense_gram``) and banded with the window's width otherwise."""
    if _uses_low_rank(model, m):
        return _low_rank_seconds(model.k, m, model.rank_estimate(), _entries(model, m))
    return _cholesky_seconds(model, m)


def _ipm_affordable(k: int, m: int, dense: bool, width: int = 0) -> bool:
    """Whether one iteration costs at most :data:`_IPM_FLOPS` (:func:`_ipm_flops`)."""
    return _ipm_flops(k, m, dense, width) <= _IPM_FLOPS


# The Newton systems go through the channel's low-rank factor (_lowrank, _woodbury) where one iteration is
# modelled at most this share of the Cholesky's (the factor itself costs a few iterations' worth, once per model).
_LOW_RANK_SHARE = 0.5
# Observed end outputs whose column scale f_j exceeds this stay exact beside the factor (which errs there by
# f_j times its rtol relative to the column).
_F_MAX = 1e3


def _low_rank_flops(k: int, m: int, r: int) -> float:
    """One iteration's flops through a factor of rank ``r``: the ``r x r`` Gram of the outputs (``m r^2``),
    of the values (``k r^2``), the capacitance's products and Cholesky (``3 r^3``)."""
    return float((k + m) * r * r + 3 * r ** 3)


def _entries_per_value(model) -> int:
    """A channel model's stored entries per value (the window's width on a window channel): the band width
    :func:`_ipm_seconds` and :func:`_ipm_affordable` price its banded Cholesky with."""
    return model.nnz // max(model.k, 1)


def _cholesky_seconds(model, m: int) -> float:
    """:func:`_ipm_seconds` by the Gram's Cholesky on a channel model: dense where the model factors a dense
    Gram (``model.dense_gram``), else banded with the window's width."""
    return _ipm_seconds(model.k, m, model.dense_gram(m), _entries_per_value(model))


# One iteration through the factor on the reference machine: its flops at _REF_RATE_LOW, the gradient's two
# products with the channel at _REF_ENTRY seconds per stored entry (memory-bound) and a fixed cost.  Fitted on
# the Gaussian designs of (1, 1e-6, 5) and (1, 1e-6, 10), 100-3,000 values, one BLAS thread, the MLE from the
# uniform start (10^6 reports) and the likelihood-ratio searches (10^5): 0.41-17.2 ms measured, 0.46-18.3
# modelled, within 25 %; the Cholesky's on the same channels 2.0-75 ms.
_REF_RATE_LOW = 1.5e10
_REF_ENTRY = 6e-10
_REF_FIXED_LOW = 4e-4


def _low_rank_seconds(k: int, m: int, r: int, entries: float | None = None) -> float:
    """One iteration's modelled time through a factor of rank ``r`` (:func:`_low_rank_flops`) on a channel
    with ``entries`` stored entries on its ``m`` observed outputs (default ``k m``, dense)."""
    entries = float(k) * m if entries is None else float(entries)
    return _low_rank_flops(k, m, r) / _REF_RATE_LOW + _REF_ENTRY * entries + _REF_FIXED_LOW


def _entries(model, m: int) -> float:
    """The stored entries of ``model.columns`` on ``m`` of its outputs: ``k m`` dense, else the channel's
    entries in proportion."""
    return float(model.k) * m if model.dense else float(model.nnz) * m / max(model.m, 1)


def _low_rank_pays(model, m: int, r: int) -> bool:
    """Whether an iteration on ``m`` observed outputs of ``model`` through a factor of rank ``r`` is affordable
    (:data:`_IPM_FLOPS`) and modelled at most :data:`_LOW_RANK_SHARE` of the Cholesky's."""
    return (_low_rank_flops(model.k, m, r) <= _IPM_FLOPS
            and _low_rank_seconds(model.k, m, r, _entries(model, m)) <= _LOW_RANK_SHARE * _cholesky_seconds(model, m))


def _uses_low_rank(model, m: int) -> bool:
    """Whether the interior point on ``m`` observed outputs of ``model`` goes through the low-rank factor: a
    window channel where the factor pays (:func:`_low_rank_pays`) at its estimated rank (``model.rank_estimate``)."""
    r = model.rank_estimate()
    return r is not None and _low_rank_pays(model, m, r)


def _affordable(model, m: int) -> bool:
    """Whether an interior-point iteration on ``m`` observed outputs of ``model`` is affordable, through the
    low-rank factor (:func:`_uses_low_rank`) or the Cholesky (:func:`_ipm_affordable`)."""
    return _uses_low_rank(model, m) or _ipm_affordable(model.k, m, model.dense, _entries_per_value(model))


def _low_rank_of(model, obs):
    """The low-rank factor of ``A = model.columns(obs)`` for :func:`_ipm` (``low_rank=``), or ``None`` where it
    does not pay (:func:`_uses_low_rank`; also where the factor's rank turns out above the share's
    break-even, or more end columns than the rank are observed): ``(L, Vm, mid, edge)`` with
    ``A[:, mid] = L Vm^T`` and ``edge`` the positions in ``obs`` of the end outputs kept exact (column
    scale above :data:`_F_MAX`)."""
    obs = np.asarray(obs)
    m = obs.size
    if not _uses_low_rank(model, m):
        return None
    lo, hi = model.rank_estimate(), model.k  # the largest rank where the factor pays (it does at the estimate)
    while lo < hi:
        mid_r = (lo + hi + 1) // 2
        if _low_rank_pays(model, m, mid_r):
            lo = mid_r
        else:
            hi = mid_r - 1
    fac = model.low_rank(lo)
    if fac is None:
        return None
    L, V = fac
    f = model.window_scales()[1][obs]
    mid = np.flatnonzero(f <= _F_MAX)
    edge = np.flatnonzero(f > _F_MAX)
    if edge.size > L.shape[1]:
        return None
    return L, V[obs[mid]] * f[mid][:, None], mid, edge


def _row_spans(coo):
    """The first and last column of each row of a COO matrix (``max int64`` / ``-1`` for empty rows)."""
    lo = np.full(coo.shape[0], np.iinfo(np.int64).max)
    hi = np.full(coo.shape[0], -1)
    np.minimum.at(lo, coo.row, coo.col)
    np.maximum.at(hi, coo.row, coo.col)
    return lo, hi


def _band_width(A) -> int:
    """Superdiagonals of ``A A^T`` for a sparse ``A`` whose rows reach contiguous runs of outputs
    (a window channel): rows ``x < x'`` couple when the first output of ``x'`` is at most the last
    of ``x``.  ``O(nnz)``."""
    coo = sp.coo_array(A)
    if coo.nnz == 0:
        return 0
    lo, hi = _row_spans(coo)
    rows = np.flatnonzero(hi >= 0)
    order = rows[np.argsort(lo[rows], kind="stable")]
    if not np.all(np.diff(order) > 0):  # the rows' windows are not in the values' order: no band
        return A.shape[0] - 1
    reach = np.searchsorted(lo[order], hi[order], side="right") - 1  # last row (in order) each one meets
    return int(max(0, (order[np.minimum(reach, order.size - 1)] - order).max()))


def _sparse_band(A, AT):
    """``w -> A diag(w) A^T`` in LAPACK's upper banded storage (``scipy.linalg.cholesky_banded``) for
    a sparse window channel ``A``; ``None`` when the band would hold more than a third of the matrix
    (dense Cholesky is as cheap then)."""
    k = A.shape[0]
    bw = _band_width(A)
    if 3 * (bw + 1) > k:
        return None
    A, AT = sp.csr_array(A), sp.csr_array(AT)

    def band(w):
        M = sp.coo_array(A @ AT.multiply(w[:, None]))
        up = M.row <= M.col
        ab = np.zeros((bw + 1, k))
        ab[bw + M.row[up] - M.col[up], M.col[up]] = M.data[up]
        return ab

    return band


def _ipm(A, AT, c, n, tol, dense, band=None, max_steps=_IPM_STEPS, step=True, p0=None, gap0=None, low_rank=None,
         profile=None):
    """The MLE of the nonzero counts ``c`` (on the outputs that are ``A``'s columns) by the
    primal-dual interior-point method of the module docstring, from the uniform start or ``p0``.

    ``A`` (``k x m'``, dense or sparse) and ``AT`` as for ``mle._em``; ``band``: optional
    ``w -> A diag(w) A^T`` in upper banded storage (``_toeplitz._Conv.gram_band`` for FFT channels),
    else :func:`_sparse_band` for sparse channels (dense Cholesky where that has no narrow band).
    ``p0``: a warm start (``mle._mle`` passes EM's iterate and its certificate ``gap0``): ``p0``
    mixed with 1e-3 of the uniform distribution, and ``z = mu / p`` with ``mu = max(gap0, tol) / k``,
    the barrier weight at which a point that far from the optimum is central.  Measured from EM's
    iterate after 600 evaluations: 3-13 iterations where the uniform start took 9-22 (one case 19
    against 16), every one certified.
    ``low_rank``: :func:`_low_rank_of`'s factor of ``A`` (its ``L`` scaled by the rows as ``A`` is): the
    Newton systems are then solved by Woodbury's identity (:func:`_woodbury`), not by a Cholesky
    factorization of the Gram.
    Returns ``(p, steps, converged, gap)`` as ``_newton._newton``: ``gap`` the certificate
    ``n log max_x g_x`` (nats) of the normalized iterate, and ``p`` that iterate, or one EM step
    beyond it with ``step`` (EM raises the likelihood, so the certificate still bounds its gap).
    Gives up (not converged, the best iterate so far) after ``max_steps`` iterations or when a
    factorization fails.

    ``profile = (g, t)`` (``g`` in ``[0, 1]`` per value, ``0 < t < 1``; a dict ``info`` may follow) solves
    the *profile* problem instead: the same minimum under ``v^T p = 0``, ``v = g - t`` (homogeneous, so the
    scaling argument above still puts the minimum on the simplex: ``max {loglik(p) : g^T p = t}``).  Its
    multiplier ``nu`` enters each Newton system as a bordered row, ``(H + D) dp + v dnu = -grad - nu v +
    t'/p``, ``v^T dp = -v^T p``, solved by the same factorization and one more solve (``(H + D)^{-1} v``).
    With ``a = -nu / n`` the tilt ``beta = a / (1 + a t)`` is the one whose tilted MLE (``likelihood_ratio``:
    ``w = 1 - beta g``) is ``w p / w^T p`` at the optimum; ``gap`` is then that point's certificate in the
    tilted problem plus ``n |log((1 - beta t) / w^T p)|`` (the constraint's residual), so ``gap <= tol`` puts
    the profile within about ``tol`` of the point's likelihood.  Returns the normalized iterate (no EM step)
    and leaves ``beta``, the multiplier and the iterations in ``info`` (keys ``"beta"``, ``"nu"``, ``"steps"``);
    a multiplier already in ``info["nu"]`` starts the solve (with ``p0``: a warm start).
    """
    k = A.shape[0]
    if low_rank is not None:
        L, Vm, mid, edge = low_rank
        Ae = A[:, edge] if isinstance(A, np.ndarray) else sp.csc_array(A)[:, edge].toarray()
        low_rank = (L, Vm, mid, edge, np.asarray(Ae, dtype=float))
    elif not dense and band is None:
        band = _sparse_band(A, AT)
    Ad = A if isinstance(A, np.ndarray) else None  # the dense Gram's A (a sparse one densified once, if needed)
    v = nu = gt = None
    if profile is not None:  # max loglik on g^T p = t: the constraint v^T p = 0 and its multiplier nu
        gt, t_prof = np.asarray(profile[0], dtype=float), float(profile[1])
        v, step = gt - t_prof, False
        nu = float(profile[2].get("nu", 0.0)) if len(profile) > 2 else 0.0  # a warm start's multiplier
    if p0 is None:
        p = np.full(k, 1.0 / k)
        z = np.full(k, float(n))  # p z = n / k on the central path's start
    else:  # a warm start: p0 pulled into the interior, centred at the barrier weight of its gap
        p = (1.0 - 1e-3) * np.asarray(p0, dtype=float) / float(np.sum(p0)) + 1e-3 / k
        z = max(float(gap0), tol) / k / p
    best = None
    steps = 0
    while True:
        q = AT @ p
        if np.any(q <= 0):
            break
        r = c / q
        g = (A @ r) / n
        total = float(p.sum())
        if v is None:
            gap = n * math.log(max(float(g.max()) * total, 1e-300))  # g of p / total is total * g
        else:
            beta, gap = _profile_gap(g * total, p / total, gt, t_prof, nu, n)
        if best is None or gap < best[3]:
            best = (p, g, total, gap) if v is None else (p, g, total, gap, beta, nu)
        if gap <= tol or steps >= max_steps:
            break
        steps += 1
        grad = n * (1.0 - g)
        d = z / p
        w = r / q
        try:
            if low_rank is not None:
                solve = _woodbury(low_rank, w, d)
            elif band is not None:
                factor = sla.cholesky_banded(_band_gram(band, w, d), check_finite=False)

                def solve(b):
                    return sla.cho_solve_banded((factor, False), b, check_finite=False)
            else:
                Ad = A.toarray() if Ad is None else Ad
                factor = sla.cho_factor(_dense_gram(Ad, w, d), check_finite=False)

                def solve(b):
                    return sla.cho_solve(factor, b, check_finite=False)
            if v is not None:  # the bordered system: the constraint's row by its Schur complement
                solve = _bordered(solve, v, p)
                dp_a, dnu_a = solve(-grad - nu * v)
            else:
                dp_a = solve(-grad)
        except (np.linalg.LinAlgError, ValueError):
            break
        dz_a = -z - d * dp_a
        a_aff = min(_longest(p, dp_a), _longest(z, dz_a))
        mu = float(p @ z) / k
        mu_aff = float((p + a_aff * dp_a) @ (z + a_aff * dz_a)) / k
        t = min(1.0, (max(mu_aff, 0.0) / mu) ** 3) * mu - dp_a * dz_a
        if v is not None:
            dp, dnu = solve(-grad - nu * v + t / p)
        else:
            dp = solve(-grad + t / p)
        dz = t / p - z - d * dp
        if not (np.all(np.isfinite(dp)) and np.all(np.isfinite(dz))):
            break
        p = p + _IPM_STEP * _longest(p, dp) * dp
        a_dual = _IPM_STEP * _longest(z, dz)
        z = z + a_dual * dz
        if v is not None:
            nu += a_dual * dnu
    if v is not None:
        p, g, total, gap, beta, nu = best
        if len(profile) > 2:
            profile[2]["beta"], profile[2]["nu"], profile[2]["steps"] = beta, nu, steps
        return p / total, steps, gap <= tol, max(gap, 0.0)
    p, g, total, gap = best
    out = p / total
    if step:
        out = out * (g * total)
        out /= out.sum()
    return out, steps, gap <= tol, max(gap, 0.0) if gap <= tol else gap


def _bordered(solve, v, p):
    """``b -> (dp, dnu)`` solving ``K dp + v dnu = b``, ``v^T dp = -v^T p`` with ``solve`` applying ``K^{-1}``
    (:func:`_ipm`'s profile problem): ``dnu = (v^T K^{-1} b + v^T p) / (v^T K^{-1} v)``."""
    Kv = solve(v)
    vKv = float(v @ Kv)
    if not vKv > 0.0:
        raise np.linalg.LinAlgError("the constraint's Schur complement is not positive")
    rest = float(v @ p)

    def bordered(b):
        x = solve(b)
        dnu = (float(v @ x) + rest) / vKv
        return x - dnu * Kv, dnu

    return bordered


def _profile_gap(G, p, g, t, nu, n):
    """``(beta, gap)`` of :func:`_ipm`'s profile problem at the normalized iterate ``p`` (``G``: its ``A (c / q)
    / n``): the tilt its multiplier ``nu`` gives (``a = -nu / n``, ``beta = a / (1 + a t)``, kept below 1), and
    the certificate of ``w p / w^T p`` in the problem tilted by ``w = 1 - beta g`` (``n log max_x (w^T p) G_x /
    w_x``) plus the constraint's residual ``n |log((1 - beta t) / w^T p)|``."""
    a = -nu / n
    beta = a / (1.0 + a * t) if 1.0 + a * t > 0.0 else 1.0
    beta = min(beta, 1.0 - 1e-9)
    w = 1.0 - beta * g
    W = float(w @ p)
    if not (W > 0.0 and 1.0 - beta * t > 0.0):
        return beta, math.inf
    cert = n * math.log(max(W * float(np.max(G / w)), 1e-300))
    return beta, cert + n * abs(math.log((1.0 - beta * t) / W))


def _woodbury(low_rank, w, d):
    r"""``b -> (A diag(w) A^T + diag(d))^{-1} b`` through the low-rank factor of ``A`` (:func:`_low_rank_of`).

    With ``A[:, mid] = L Vm^T`` and the end columns ``E = A[:, edge]`` exact, the Gram is ``Z B^T B Z^T``
    for ``Z = [L, E]`` and ``B = diag(R, diag(sqrt w_edge))``, ``R^T R = Vm^T diag(w_mid) Vm`` (Cholesky;
    eigenvalues where that fails: ``Vm`` need not have full rank on few observed outputs).  Woodbury's
    identity with ``Y = Z B^T``:

    .. math::

        (D + Y Y^T)^{-1} b = D^{-1} b - D^{-1} Y C^{-1} Y^T D^{-1} b, \qquad C = I + B (Z^T D^{-1} Z) B^T,

    ``C``'s eigenvalues at least 1.  ``O((k + m) r^2)`` flops for a factor of rank ``r``."""
    L, Vm, mid, edge, Ae = low_rank
    Vw = Vm * np.sqrt(w[mid])[:, None]
    G = Vw.T @ Vw
    try:
        R = sla.cholesky(G, lower=False, check_finite=False)
    except np.linalg.LinAlgError:
        lam, E = np.linalg.eigh(G)
        R = np.sqrt(np.maximum(lam, 0.0))[:, None] * E.T
    r = R.shape[0]
    if edge.size:
        Z = np.hstack([L, Ae])
        Bd = np.zeros((Z.shape[1], Z.shape[1]))
        Bd[:r, :r] = R
        Bd[np.arange(r, Z.shape[1]), np.arange(r, Z.shape[1])] = np.sqrt(w[edge])
    else:
        Z, Bd = L, R
    inv_d = 1.0 / d
    Zd = Z * np.sqrt(inv_d)[:, None]
    C = Bd @ (Zd.T @ Zd) @ Bd.T
    C[np.diag_indices_from(C)] += 1.0
    cf = sla.cho_factor(C, check_finite=False)

    def solve(b):
        bd = inv_d * b
        return bd - inv_d * (Z @ (Bd.T @ sla.cho_solve(cf, Bd @ (Z.T @ bd), check_finite=False)))

    return solve


def _longest(x, dx) -> float:
    """The longest step ``a <= 1`` with ``x + a dx >= 0``."""
    neg = dx < 0
    return min(1.0, float(np.min(-x[neg] / dx[neg]))) if neg.any() else 1.0
