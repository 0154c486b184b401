r"""What a comparison measures, per mechanism (see :mod:`sparseldp.compare`).

Report values.  Every mechanism's report is read through its estimate of the
input: the label itself for mechanisms whose labels are values on the input
scale (randomized response, geometric, discrete Gaussian, the sparse windows,
Square Wave), and the papers' unbiased per-report estimate ``x^(y)``
(:func:`sparseldp.baselines.report_estimates`) for the Piecewise, Hybrid and
Duchi mechanisms, whose labels are cells or branches.  ``R1`` and ``R2`` are
``E|v(Y) - x|`` and ``E(v(Y) - x)^2`` for that value ``v``, averaged over the
input weights (exact, from the channel matrix).

The mean of the inputs is estimated as a deployment would: with the papers'
unbiased per-report estimator for Piecewise, Hybrid and Duchi; with the
report mean when the channel is unbiased (``E[Y | x] = x``, checked entry by
entry to ``1e-9`` of the output range: the extended windows); with the channel's
unbiased linear estimator where the channel identifies the mean linearly and its
RMSE is below half the domain's range (randomized response, Square Wave, clipped
Laplace windows, the geometric mechanisms); otherwise as ``sum_x x p^_x`` of the
maximum-likelihood (EM) estimate -- the rule of :func:`sparseldp.estimate_mean`
(which decides on the reports' own standard error).  For the first three (linear and unbiased) the
root-mean-square error is exact, no simulation needed: with input weights
``p`` and ``n`` reports, ``RMSE = sqrt(sum_x p_x Var[v(Y) | x] / n)`` (the
error against the mean of the ``n`` inputs themselves); for the EM estimate it is
measured over the trials.

Simulation.  The histogram of ``c_x`` independent reports from input ``x`` is
drawn as ``Multinomial(c_x, Q(. | x))`` (numpy, float probabilities): the
exact distribution of the report histogram, for any ``n`` at the same cost.
A simulation protects nothing, so the privacy sampler
(:mod:`sparseldp.sampling`) is not needed here.
"""

from __future__ import annotations

import math

import numpy as np

from ..baselines import UNBIASED_FAMILIES, report_estimates
from ..estimation import ReportCounts
from ..estimation._information import INVERSION_METHOD
from ..estimation.stats import distance, quantile

__all__ = ["report_values", "distortion", "unbiased_mean_estimator", "simulate_counts", "report_counts",
           "distribution_errors", "QUANTILES"]

#: Quantile levels whose mean absolute error is the "quantile error".
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
# A channel counts as unbiased when every |E[Y | x] - x| is below this share of the output range.
_UNBIASED_RTOL = 1e-9


def _sorted_rows(channel, domain):
    a, b = domain
    order = np.argsort(channel.inputs, kind="stable")
    if not np.array_equal(channel.inputs[order], np.arange(a, b + 1)):
        raise ValueError(f"channel inputs must be the domain {a}..{b}")
    return order


def report_values(channel) -> np.ndarray:
    """``v(y)`` per output label (column order): the papers' estimate, or the label itself (module docstring)."""
    if channel.family in UNBIASED_FAMILIES:
        return report_estimates(channel)
    return channel.outputs.astype(float)


def distortion(channel, weights, domain) -> tuple[float, float]:
    """``(R1, R2)``: ``sum_x w_x E[|v(Y) - x|^r | x]`` for ``r = 1, 2`` (exact, from the stored probabilities)."""
    order = _sorted_rows(channel, domain)
    m = channel.matrix
    v = report_values(channel)
    rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    d = np.abs(v[m.indices] - channel.inputs[rows].astype(float))
    r1 = np.add.reduceat(d * m.data, m.indptr[:-1])[order]
    r2 = np.add.reduceat(d * d * m.data, m.indptr[:-1])[order]
    return float(weights @ r1), float(weights @ r2)


def unbiased_mean_estimator(channel, domain):
    """``(values per output, variance per input in domain order, method)`` of the channel's linear
    unbiased mean estimator (module docstring), or ``None`` when the mean comes from the estimate."""
    order = _sorted_rows(channel, domain)
    m = channel.matrix
    if channel.family in UNBIASED_FAMILIES:
        v, method = report_estimates(channel), "unbiased (paper)"
    else:
        y = channel.outputs.astype(float)
        bias = (m @ y)[order] - channel.inputs[order].astype(float)
        span = max(float(y.max() - y.min()), 1.0)
        if np.abs(bias).max() > _UNBIASED_RTOL * span:
            v, method = _inversion_values(channel, domain), INVERSION_METHOD
            if v is None:
                return None
        else:
            v, method = y, "report mean"
    rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    dev = v[m.indices] - channel.inputs[rows].astype(float)
    second = np.add.reduceat(dev * dev * m.data, m.indptr[:-1])
    bias = np.add.reduceat(dev * m.data, m.indptr[:-1])
    var = np.maximum(second - bias * bias, 0.0)[order]
    return v, var, method


def _inversion_values(channel, domain):
    """The channel's unbiased linear estimate per output label (column order), as :func:`sparseldp.estimate_mean`
    takes it for a biased channel (``estimation._information._inversion_weights``), or ``None``."""
    from ..estimation._information import _inversion_weights
    from ..estimation.model import _model, channel_columns

    a, b = domain
    model = _model(channel, domain)
    center = a + (b - a) // 2
    g = _inversion_weights(model, (np.arange(a, b + 1) - center).astype(float))
    if g is None:
        return None
    v = np.full(len(channel.outputs), float(center))  # a label no input in the domain reaches is never reported
    v[channel_columns(channel, model)] = g + center
    return v


def simulate_counts(channel, input_counts: np.ndarray, gen: np.random.Generator, domain) -> np.ndarray:
    """Report counts over ``channel.outputs`` (column order) for ``input_counts[j]`` people at ``a + j``."""
    order = _sorted_rows(channel, domain)
    m = channel.matrix
    nnz = np.diff(m.indptr)
    W = int(nnz.max())
    k = m.shape[0]
    # each row right-aligned in a k x W table: numpy's multinomial gives the last cell the remainder
    # 1 - sum(others), so the last cell must be a real output of the row (the zero padding comes first)
    pos = np.arange(m.nnz) - np.repeat(m.indptr[:-1], nnz) + np.repeat(W - nnz, nnz)
    rows = np.repeat(np.arange(k), nnz)
    P = np.zeros((k, W))
    C = np.zeros((k, W), dtype=np.int64)
    P[rows, pos] = m.data
    C[rows, pos] = m.indices
    n_row = np.zeros(k, dtype=np.int64)
    n_row[order] = input_counts
    P /= P.sum(axis=1, keepdims=True)
    draws = gen.multinomial(n_row, P)
    return np.bincount(C.ravel(), weights=draws.ravel(), minlength=m.shape[1]).astype(np.int64)


def report_counts(channel, counts: np.ndarray) -> ReportCounts:
    """The report histogram as a :class:`~sparseldp.estimation.ReportCounts` over the label range."""
    y = channel.outputs
    lo, hi = int(y.min()), int(y.max())
    dense = np.zeros(hi - lo + 1, dtype=np.int64)
    np.add.at(dense, y - lo, counts)
    return ReportCounts(lo, dense)


def distribution_errors(p_hat: np.ndarray, truth: np.ndarray, values: np.ndarray) -> dict:
    """TV, W1 (in domain units) and the mean absolute error over :data:`QUANTILES` (domain units)."""
    q = np.asarray(QUANTILES)
    return {"tv": float(distance(p_hat, truth, "tv", values=values)),
            "w1": float(distance(p_hat, truth, "w1", values=values)),
            "quantile": float(np.mean(np.abs(np.asarray(quantile(p_hat, q, values), dtype=float)
                                             - np.asarray(quantile(truth, q, values), dtype=float))))}


def exact_rmse(var: np.ndarray, weights: np.ndarray, n: int) -> float:
    """``sqrt(sum_x w_x Var_x / n)``: the RMSE of a linear unbiased mean estimate from ``n`` reports."""
    return math.sqrt(max(float(weights @ var), 0.0) / n)
