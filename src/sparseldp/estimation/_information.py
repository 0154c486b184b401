"""The information a channel carries about a linear statistic of the input distribution: the delta method's
standard error (:func:`_fisher_stderr`) and the channel's unbiased linear estimator (:func:`_inversion_weights`),
which share one linear system (:func:`_system`).  :mod:`.mean` reads both."""

from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .model import _Model

# Fisher information: an output whose probability under the estimate is below this
# share of the largest output probability is counted as if it had this probability.
_FISHER_Q_FLOOR = 1e-9
# The ridge values are tried when the plain solve leaves an unexplained part of the
# mean functional larger than this share of its range.
_FISHER_RESIDUAL = 1e-9
# Ridge values mu (relative to the unit diagonal of the Jacobi-scaled information).
_FISHER_RIDGE = (0.0, 1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2)
# Inputs and outputs are sorted, so window channels give a banded information
# matrix, factorized fastest (no fill beyond the band) in its natural order.
_PERMC = "NATURAL"
# The channel inversion (_inversion_weights) is refused where its residual E[g(Y) | x] - u(x) exceeds this share
# of u's range: the channel does not identify the statistic linearly to working precision.
_INVERSION_RESIDUAL = 1e-9
# The method label of a mean by the channel's inversion (estimate_mean; compare mirrors it).
INVERSION_METHOD = "unbiased (channel inversion)"


def _system(model: _Model, log_q: np.ndarray, u: np.ndarray):
    """``(B, Bs, solve, failures, log q̃)``: with ``q̃ = max(q, f max q)`` (``q = exp(log_q)``, the
    output probabilities of a reference input distribution; ``f`` = :data:`_FISHER_Q_FLOOR`) and ``B = Q
    diag(q̃)^{-1/2}`` (``I = B B^T``), the Jacobi-scaled ``Bs = diag(1/d) B`` (unit diagonal of ``Bs Bs^T``),
    ``us = u / d``, and ``solve(mu)``: ``(Bs Bs^T + mu I)^{-1} us`` by sparse LU (banded for window channels) or
    a dense solve (a ridge by one symmetric eigendecomposition for all ``mu``); ``failures``: what it raises
    when the system is singular."""
    S = model.S
    top = float(np.max(log_q, initial=-math.inf))
    log_qt = np.maximum(log_q, top + math.log(_FISHER_Q_FLOOR))
    sw = np.exp(model.log_cs - 0.5 * log_qt)
    if model.dense:
        B = S * sw[None, :]
        d = np.sqrt(np.einsum("ij,ij->i", B, B))
    else:
        B = sp.csr_array(S @ sp.diags_array(sw))
        d = np.sqrt(np.asarray((B * B).sum(axis=1)).ravel())
    d = np.where(np.isfinite(d) & (d > 0.0), d, 1.0)  # a row with no information stays as it is
    Bs = B / d[:, None] if model.dense else sp.csr_array(sp.diags_array(1.0 / d) @ B)
    us = u / d
    G = Bs @ Bs.T  # I with unit diagonal
    if model.dense:
        eig = []  # computed once, only if a ridge is needed

        def solve(mu):
            if mu == 0.0:
                return np.linalg.solve(G, us)
            if not eig:
                ev, V = np.linalg.eigh(G)
                eig.extend((np.maximum(ev, 0.0), V, V.T @ us))
            ev, V, coef = eig
            return V @ (coef / (ev + mu))

        failures = (np.linalg.LinAlgError,)
    else:
        G = sp.csc_array(G)
        eye = sp.identity(G.shape[0], format="csc")

        def solve(mu):
            with warnings.catch_warnings():
                warnings.simplefilter("error", spla.MatrixRankWarning)
                return spla.splu(sp.csc_array(G + mu * eye) if mu else G, permc_spec=_PERMC).solve(us)

        failures = (RuntimeError, spla.MatrixRankWarning)
    return B, Bs, solve, failures, log_qt


def _fisher_stderr(model: _Model, p: np.ndarray, u: np.ndarray, n: float) -> float:
    r"""Delta-method standard error of ``u^T p̂``: ``min_h sqrt(|h|^2 / n) + (max r - min r)``; ``inf`` if none.

    With ``q̃ = max(Q^T p, f max Q^T p)`` (``f`` = :data:`_FISHER_Q_FLOOR`)
    and ``B = Q diag(q̃)^{-1/2}`` (``k x m``, so ``I = B B^T``), any ``h``
    splits ``u = B h + r``.  The first part is ``Q g`` for the output
    function ``g = h / sqrt(q̃)``, whose report average estimates it with
    variance at most ``E_q̃ g^2 / n = |h|^2 / n``; the rest moves the mean of
    any two distributions on the domain apart by at most ``max r - min r``.
    For ``h = B^T I^{-1} u`` (``r = 0``), ``|h|^2 = u^T I^{-1} u``: the usual
    delta method.  When ``I`` is singular or nearly so, that ``h`` is huge or
    not computable; the ridge solutions ``h_mu = B^T (I + mu D)^{-1} u``
    (``D = diag I``) trade a small unexplained ``r`` for a much smaller
    ``|h|``, and the smallest bound over ``mu`` in :data:`_FISHER_RIDGE` is
    returned.  If ``u`` is outside the range of ``B`` (the channel does not
    identify the mean) the unexplained range stays and bounds the error of
    the unidentified part.  Since that range is added to the standard error,
    a ``z``-interval stays valid for ``z >= 1`` (confidence >= 68%).

    Computation.  From the column-scaled ``S`` (``Q = S diag(cs)``), so that
    no probability underflows: ``B = S diag(exp(log cs - log q̃ / 2))``,
    bounded by ``(f max q)^{-1/2}`` thanks to the floor.  ``I`` is Jacobi
    scaled (unit diagonal) and solved by sparse LU (banded for window
    channels) or, for dense channels, a dense solve and, if a ridge is
    needed, one symmetric eigendecomposition for all ``mu``.
    The residual ``r`` is recomputed from each ``h``, so a poor solve can
    only make the figure larger, never wrong.
    """
    with np.errstate(divide="ignore"):
        log_q = model.log_cs + np.log(model.S.T @ p)
    if not math.isfinite(float(np.max(log_q, initial=-math.inf))):
        return math.inf
    B, Bs, solve, failures, _ = _system(model, log_q, u)
    span = float(u.max() - u.min())
    best = math.inf
    with np.errstate(all="ignore"):
        for mu in _FISHER_RIDGE:
            try:
                lam = solve(mu)
            except failures:
                continue
            h = Bs.T @ lam
            if not np.all(np.isfinite(h)):
                continue
            r = u - B @ h
            unexplained = float(r.max() - r.min())
            se = math.sqrt(float(h @ h) / n) + unexplained
            if math.isfinite(se) and se < best:
                best = se
            if mu == 0.0 and unexplained <= _FISHER_RESIDUAL * span:
                break  # the exact delta method: I is well conditioned
    return best


def _inversion_weights(model: _Model, u: np.ndarray):
    r"""The channel's unbiased linear estimator of ``u^T p``: ``g`` per output (the model's outputs) with
    ``E[g(Y) | x] = sum_y Q(y | x) g_y = u(x)`` for every input of the domain, or ``None`` where the channel
    does not identify ``u`` linearly to working precision (residual above :data:`_INVERSION_RESIDUAL` of its
    range, or a singular system).

    Of all such ``g`` it is the one of least variance when the inputs are uniform: with ``q`` the output
    distribution of uniform inputs, ``g = diag(q̃)^{-1} Q^T (Q diag(q̃)^{-1} Q^T)^{-1} u`` (weighted least norm;
    the same system as :func:`_fisher_stderr` at the uniform distribution, whose delta-method standard error is
    then exactly ``g``'s).  It depends on the channel alone, so ``(1/n) sum_i g(Y_i)`` is exactly unbiased for
    the mean of ``u`` over the ``n`` inputs, whatever they are; its standard error is the reports' own sample
    standard deviation of ``g(Y)`` over ``sqrt n``."""
    k = model.k
    with np.errstate(divide="ignore"):
        log_q = model.log_cs + np.log(model.S.T @ np.full(k, 1.0 / k))
    if not math.isfinite(float(np.max(log_q, initial=-math.inf))):
        return None
    B, Bs, solve, failures, log_qt = _system(model, log_q, u)
    with np.errstate(all="ignore"):
        try:
            h = Bs.T @ solve(0.0)
        except failures:
            return None
        if not np.all(np.isfinite(h)):
            return None
        r = u - B @ h
    if not float(np.abs(r).max(initial=0.0)) <= _INVERSION_RESIDUAL * max(float(u.max() - u.min()), 1.0):
        return None
    return h * np.exp(-0.5 * log_qt)  # Q g = S diag(cs) g = S diag(sw) h = B h
