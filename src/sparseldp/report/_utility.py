r"""The utility section of the privacy report: distortion, one input's output distribution, and errors.

``R1``, ``R2`` (Propositions 1 and 3, or the channel's rows averaged over the domain), the
output distribution of one input (thinned for the plot), the standard error of the mean,
and the expected errors of frequency estimates from ``n`` reports (:func:`_frequency_errors`:
exact dense linear algebra up to :data:`DENSE_UTILITY_MAX` values, Hutchinson's trace
estimate above).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..channel import check_domain
from ._common import Num, _is_clipped

__all__ = ["DENSE_UTILITY_MAX", "MAX_UTILITY_ENTRIES", "HUTCHINSON_PROBES", "utility_channel",
           "check_utility_size"]

#: Domains up to this many values get the utility formulas by dense linear algebra (exact traces).
DENSE_UTILITY_MAX = 1000
#: Largest channel (inputs x window) the utility section builds.
MAX_UTILITY_ENTRIES = 20_000_000
#: Probes of the stochastic trace estimate used above :data:`DENSE_UTILITY_MAX` values.
HUTCHINSON_PROBES = 200
_PMF_POINTS = 400


def utility_channel(spec, lo_hi):
    """The channel the data sees on ``lo_hi``: the spec's own, or the mechanism's extended windows there."""
    if spec.domain is not None:
        return spec.channel()
    return spec.mechanism.to_channel(lo_hi, "extended")


def check_utility_size(spec, lo_hi) -> None:
    """``ValueError`` naming the domain when its channel would exceed :data:`MAX_UTILITY_ENTRIES`."""
    if lo_hi is None:
        return
    lo, hi = check_domain(lo_hi)
    k = hi - lo + 1
    if k * spec.s > MAX_UTILITY_ENTRIES:
        raise ValueError(f"domain {lo}:{hi} has {k:,} values; with s = {spec.s} its channel would hold "
                         f"{k * spec.s:,} entries, more than the report's limit of {MAX_UTILITY_ENTRIES:,} "
                         "(use a smaller domain)")


def _utility_section(spec, lo_hi, n: int, x0: int) -> dict:
    m = spec.mechanism
    out = {"n": n, "x0": x0}
    if spec.domain is None:
        out["r1"] = Num("utility.r1", float(m.r1), "exact", "R1 = 2 sum_j j w(j) / C_t (Propositions 1 and 3)")
        out["r2"] = Num("utility.r2", float(m.r2), "exact", "R2 = 2 sum_j j^2 w(j) / C_t (Propositions 1 and 3)")
        labels = m.support(x0)
        probs = np.asarray(m.pmf(labels, x0), dtype=float)
    else:
        ch = spec.channel()
        how = "E|Y - x|^k per input (the channel's rows), averaged uniformly over the domain"
        out["r1"] = Num("utility.r1", float(np.mean(ch.distortion(1))), "exact", how)
        out["r2"] = Num("utility.r2", float(np.mean(ch.distortion(2))), "exact", how)
        labels, probs = ch.row(x0)
    out["pmf"], out["pmf_note"] = _pmf_for_plot(np.asarray(labels, dtype=np.int64), np.asarray(probs, dtype=float))
    if not _is_clipped(spec):
        # unbiased reports (E[Y | x] = x, docs/paper.md "Distortion and bias"): Var(mean) = (Var_p(x) + R2) / n
        out["mean_se_noise"] = Num("utility.mean_se_noise", math.sqrt(float(m.r2) / n), "exact",
                                   "the report mean is unbiased; the noise adds R2 / n to its variance, so this is "
                                   "sqrt(R2 / n) (whatever the inputs)")
        if lo_hi is not None:
            k = lo_hi[1] - lo_hi[0] + 1
            var_u = (k * k - 1) / 12.0
            out["mean_se_uniform"] = Num("utility.mean_se_uniform", math.sqrt((var_u + float(m.r2)) / n), "exact",
                                         "sqrt((Var(x) + R2) / n) with Var(x) = (k^2 - 1) / 12 for inputs uniform "
                                         "on the k values of the domain")
    if lo_hi is not None:
        out.update(_frequency_errors(spec, lo_hi, n))
    return out


def _factor(M):
    """Sparse LU of the symmetric positive semidefinite ``M``, or ``None`` when ``M`` is singular to working
    precision (1-norm condition number above 1e12, estimated with the factors: Higham and Tisseur's
    block 1-norm estimator)."""
    try:
        lu = spla.splu(M)
    except RuntimeError:  # exactly singular
        return None
    inv = spla.LinearOperator(M.shape, matvec=lu.solve, rmatvec=lu.solve, dtype=float)
    cond = float(spla.onenormest(inv)) * float(abs(M).sum(axis=0).max())
    return lu if np.isfinite(cond) and cond <= 1e12 else None


def _pmf_for_plot(labels, probs):
    """At most ``_PMF_POINTS`` points to draw: the outputs with at least 1e-4 of the largest probability,
    averaged over bins of neighbouring outputs when there are still too many (the caption says so)."""
    if labels.size <= _PMF_POINTS:
        return (labels, probs), None
    keep = np.flatnonzero(probs >= 1e-4 * probs.max())
    labels, probs = labels[keep[0]:keep[-1] + 1], probs[keep[0]:keep[-1] + 1]
    note = "outputs with probability below 10^-4 of the largest are not drawn"
    if labels.size > _PMF_POINTS:
        w = -(-labels.size // _PMF_POINTS)
        m = labels.size // w * w
        labels = labels[:m].reshape(-1, w).mean(axis=1)
        probs = probs[:m].reshape(-1, w).mean(axis=1)
        note += f"; each point is the average probability of {w} neighbouring outputs"
    return (labels, probs), note


def _restricted(ch, lo_hi):
    """``Q`` (k x m, sparse) on the inputs ``lo..hi`` and the outputs they reach, and the input values."""
    lo, hi = lo_hi
    inputs = np.asarray(ch.inputs, dtype=np.int64)
    order = np.argsort(inputs, kind="stable")
    want = np.arange(lo, hi + 1, dtype=np.int64)
    rows = order[np.searchsorted(inputs[order], want)]
    Q = sp.csr_array(ch.matrix)[rows]
    keep = np.flatnonzero(np.asarray(abs(Q).sum(axis=0)).ravel() > 0)
    return sp.csr_array(Q[:, keep]), want


def _frequency_errors(spec, lo_hi, n: int) -> dict:
    r"""Expected errors of frequency (and, clipped, mean) estimates from ``n`` reports, inputs uniform.

    With ``f = c / n`` the report frequencies, ``E f = q = Q^T p`` and
    ``Cov f = (diag q - q q^T) / n``.  The least-squares inversion ``A f`` with
    ``A = (Q^T)^+`` (``estimate_frequencies(method="inversion")`` before its
    projection onto the simplex) is unbiased when ``Q^T`` has full column
    rank (``A q = p``), and

    .. math::  E\|A f - p\|^2 = (\sum_y q_y \|A e_y\|^2 - \|p\|^2) / n

    exactly, with ``\|A e_y\|^2 = \sum_j U_{yj}^2 / s_j^2`` from the SVD
    ``Q^T = U S V^T``; the projection onto the simplex (which contains ``p``)
    can only shorten the error, so this bounds the projected estimator from
    above.  The maximum-likelihood (EM) estimate has asymptotic covariance
    ``(I^{-1} - p p^T) / n`` with ``I = Q diag(1/q) Q^T`` (``I p = 1``: the
    constrained information), so ``E\|p̂ - p\|^2 \approx (tr I^{-1} - \|p\|^2) / n``
    and its mean ``u^T p̂`` (``u = x - mean``) has variance ``u^T I^{-1} u / n``:
    asymptotic estimates.  ``I`` is taken apart by ``eigh``; eigenvalues below
    ``1e-12`` of the largest are null to working precision, and then the
    frequencies (and a mean with a part along them) are not identified: no
    number is given.  Up to :data:`DENSE_UTILITY_MAX` values the algebra is
    dense and the traces exact; above, sparse LU and Hutchinson's trace
    estimate (Rademacher probes).
    """
    ch = utility_channel(spec, lo_hi)
    Q, xs = _restricted(ch, lo_hi)
    k = Q.shape[0]
    p = np.full(k, 1.0 / k)
    q = Q.T @ p
    pp = float(p @ p)
    out = {"k": k}
    u = xs.astype(float) - float(p @ xs)
    if k == 1:
        out["freq_note"] = "a one-value domain: the frequency is 1, exactly, with no error"
        return out
    tr_inv = tr_fisher = uIu = None
    if k <= DENSE_UTILITY_MAX:
        Qd = Q.toarray()
        lam, V = np.linalg.eigh((Qd / q) @ Qd.T)
        null = lam <= 1e-12 * lam[-1]
        c = V.T @ u
        if not null.any():
            U, sv, _ = np.linalg.svd(Qd.T, full_matrices=False)
            tr_inv = float(np.sum(q * np.sum((U / sv) ** 2, axis=1)))
            tr_fisher = float(np.sum(1.0 / lam))
        if np.sum(c[null] ** 2) <= 1e-12 * float(u @ u):  # the mean lies (to working precision) off the null space
            uIu = float(np.sum(c[~null] ** 2 / lam[~null]))
        kind, how_tr = "exact", "dense linear algebra"
    else:
        G = sp.csc_array(Q @ Q.T)
        I = sp.csc_array((Q / q) @ Q.T)
        lu_g, lu_i = _factor(G), _factor(I)
        if lu_i is not None:
            rng = np.random.default_rng(20240601)  # a simulation seed (not privacy): the same page for the same input
            Z = rng.choice(np.array([-1.0, 1.0]), size=(k, HUTCHINSON_PROBES))
            if lu_g is not None:
                V = Q.T @ lu_g.solve(Z)
                t_inv = np.sum(q[:, None] * V * V, axis=0)
                tr_inv = float(t_inv.mean())
            t_fis = np.sum(Z * lu_i.solve(Z), axis=0)
            tr_fisher = float(t_fis.mean())
            uIu = float(u @ lu_i.solve(u))
        kind, how_tr = "estimate", f"Hutchinson's trace estimate ({HUTCHINSON_PROBES} Rademacher probes)"
    if tr_inv is None or tr_fisher is None or not (math.isfinite(tr_inv) and math.isfinite(tr_fisher)):
        out["freq_note"] = ("the channel does not identify the frequencies to working precision (its Fisher "
                            "information is singular): no unbiased estimator has a finite error, and EM's error "
                            "depends on how it is regularized (method='ems' smooths)")
    else:
        mse_inv = max(tr_inv - pp, 0.0) / n
        mse_mle = max(tr_fisher - pp, 0.0) / n
        how_inv = (f"least-squares inversion (method='inversion') before its projection onto the simplex: "
                   f"(sum_y q_y |A e_y|^2 - |p|^2) / n, A = (Q^T)^+, inputs uniform ({how_tr}); the projected "
                   "estimate's error is at most this")
        how_mle = (f"maximum likelihood (EM), asymptotic: (tr I^-1 - |p|^2) / n with I = Q diag(1/q) Q^T, inputs "
                   f"uniform ({how_tr})")
        out["freq_mse_inversion"] = Num("utility.freq_mse_inversion", mse_inv, kind, how_inv)
        out["freq_rmse_inversion"] = Num("utility.freq_rmse_inversion", math.sqrt(mse_inv / k), kind,
                                         "sqrt of the above / k: root mean square error per value")
        out["freq_mse_mle"] = Num("utility.freq_mse_mle", mse_mle, "estimate", how_mle)
        out["freq_rmse_mle"] = Num("utility.freq_rmse_mle", math.sqrt(mse_mle / k), "estimate",
                                   "sqrt of the above / k: root mean square error per value")
    if _is_clipped(spec):
        if uIu is None or not math.isfinite(uIu):
            out["mean_note"] = ("the channel does not identify the mean to working precision; estimate_mean then "
                                "gives a ridge-regularized or range-bound standard error")
        else:
            out["mean_se_mle"] = Num("utility.mean_se_mle", math.sqrt(max(uIu, 0.0) / n), "estimate",
                                     "clipped windows bias the report mean, so estimate_mean inverts the channel (or, "
                                     "where that is no use, takes the EM estimate's mean); "
                                     "the standard error sqrt(u^T I^-1 u / n), u = x - mean, inputs uniform "
                                     "(the inversion's, which is the EM estimate's asymptotic one)")
    return out
