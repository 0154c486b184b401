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
    """:func:`_ipm_seconds` on a channel model (``estimation.model._Model``) with ``m`` observed outputs: a
    dense Gram where the model factors one (``model.dense_gram``), else banded with the window's width."""
    return _ipm_seconds(model.k, m, model.dense_gram(m), model.nnz // max(model.k, 1))


def _ipm_affordable(k: int, m: int, dense: bool, width: int = 0) -> bool:
    """Whether one iteration costs at most :data:`_IPM_FLOPS` (:func:`_ipm_flops`)."""
    return _ipm_flops(k, m, dense, width) <= _IPM_FLOPS


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


def _ipm(A, AT, c, n, tol, dense, band=None, max_steps=_IPM_STEPS, step=True, p0=None, gap0=None):
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
    Returns ``(p, steps, converged, gap)`` as ``_newton._newton``: ``gap`` the certificate
    ``n log max_x g_x`` (nats) of the normalized iterate, and ``p`` that iterate, or one EM step
    beyond it with ``step`` (EM raises the likelihood, so the certificate still bounds its gap).
    Gives up (not converged, the best iterate so far) after ``max_steps`` iterations or when a
    factorization fails.
    """
    k = A.shape[0]
    if not dense and band is None:
        band = _sparse_band(A, AT)
    Ad = A if isinstance(A, np.ndarray) else None  # the dense Gram's A (a sparse one densified once, if needed)
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
        gap = n * math.log(max(float(g.max()) * total, 1e-300))  # g of p / total is total * g
        if best is None or gap < best[3]:
            best = (p, g, total, gap)
        if gap <= tol or steps >= max_steps:
            break
        steps += 1
        grad = n * (1.0 - g)
        d = z / p
        w = r / q
        try:
            if band is not None:
                factor = sla.cholesky_banded(_band_gram(band, w, d), check_finite=False)

                def solve(b):
                    return sla.cho_solve_banded((factor, False), b, check_finite=False)
            else:
                Ad = A.toarray() if Ad is None else Ad
                factor = sla.cho_factor(_dense_gram(Ad, w, d), check_finite=False)

                def solve(b):
                    return sla.cho_solve(factor, b, check_finite=False)
            dp_a = solve(-grad)
        except (np.linalg.LinAlgError, ValueError):
            break
        dz_a = -z - d * dp_a
        a_aff = min(_longest(p, dp_a), _longest(z, dz_a))
        mu = float(p @ z) / k
        mu_aff = float((p + a_aff * dp_a) @ (z + a_aff * dz_a)) / k
        t = min(1.0, (max(mu_aff, 0.0) / mu) ** 3) * mu - dp_a * dz_a
        dp = solve(-grad + t / p)
        dz = t / p - z - d * dp
        if not (np.all(np.isfinite(dp)) and np.all(np.isfinite(dz))):
            break
        p = p + _IPM_STEP * _longest(p, dp) * dp
        z = z + _IPM_STEP * _longest(z, dz) * dz
    p, g, total, gap = best
    out = p / total
    if step:
        out = out * (g * total)
        out /= out.sum()
    return out, steps, gap <= tol, max(gap, 0.0) if gap <= tol else gap


def _longest(x, dx) -> float:
    """The longest step ``a <= 1`` with ``x + a dx >= 0``."""
    neg = dx < 0
    return min(1.0, float(np.min(-x[neg] / dx[neg]))) if neg.any() else 1.0
