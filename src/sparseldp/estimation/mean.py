"""The mean of the true values: :func:`estimate_mean` and :class:`MeanEstimate`.

The report mean when the channel is unbiased; the papers' unbiased estimator
for the Piecewise, Hybrid and Duchi mechanisms (:func:`_papers_estimator`);
otherwise the channel's unbiased linear estimator
(:func:`._information._inversion_weights`) where it has a standard error below
the range bound, else the mean of the EM estimate with a delta-method standard
error from the expected Fisher information (:func:`._information._fisher_stderr`),
bounded by the range of the domain.
For the Laplace and Gaussian mechanisms on Z the report mean is computed in
one O(n) pass over the reports, with no channel (:func:`_mean_on_z`).
"""

from __future__ import annotations

import math
import numbers
from statistics import NormalDist

import numpy as np

from .._validation import INT64_MAX, INT64_MIN, check_bool
from ..baselines import ESTIMATOR_SOURCE, UNBIASED_FAMILIES, estimator_variance, report_estimates
from ..channel import SparseChannel, check_domain
from ..core.kernels import GaussianKernel, LaplaceKernel
from ..core.mechanisms import RadiusMechanism
from .counts import _as_report_counts, _chunks
from ._information import INVERSION_METHOD, _fisher_stderr, _inversion_weights
from .frequencies import _check_tol, _fit
from .model import _Model, _model, channel_columns

# Rule of three: after n reports all equal to one value, 3/n is a 95% upper
# confidence bound on the share of the others (exactly, 1 - 0.05^(1/n) <= 3/n).
_RULE_OF_THREE = 3.0
# Report mean on Z: centered reports |y - center| up to this bound keep chunk sums of squares exact in
# int64 (2^40 per square, at most 2^22 reports per chunk); beyond it, float sums merged by chunk.
_EXACT_SPAN = 1 << 20


class MeanEstimate(float):
    """A mean estimate: a ``float`` carrying ``stderr``, ``ci`` and how it was made.

    Attributes
    ----------
    value : float
        The estimate (also the float value of the object itself).
    stderr : float
        Estimated standard error: finite, and positive unless the mean is
        known exactly (the domain has one value).
    ci : (float, float)
        Normal-approximation confidence interval ``value -+ z stderr`` at
        ``confidence``, clipped to the domain (the true mean lies in it);
        ``ci[0] <= ci[1]``.
    confidence : float
    method : str
        How the estimate and its standard error were made (see
        :func:`estimate_mean`): ``"report-mean"`` (unbiased channel),
        ``"unbiased (Wang et al. 2019)"`` / ``"unbiased (Duchi et al. 2013)"``
        (the papers' unbiased estimator of the Piecewise, Hybrid or Duchi
        mechanism),
        ``"em-fisher"`` (biased channel, delta method), ``"em-range-bound"``
        (biased channel whose Fisher information does not pin the mean down:
        the worst-case standard deviation ``(hi - lo)/2``) or
        ``"one-value-domain"`` (the mean is the domain's only value).
    n : int
        Number of reports.

    The constructor refuses a standard error that is not a finite number
    ``>= 0`` and an interval that is not finite and ordered (ValueError).
    """

    __slots__ = ("stderr", "ci", "confidence", "method", "n")

    def __new__(cls, value, *, stderr, ci, confidence, method, n):
        stderr, lo, hi = float(stderr), float(ci[0]), float(ci[1])
        if not (math.isfinite(stderr) and stderr >= 0.0):
            raise ValueError(f"stderr must be a finite number >= 0; got {stderr!r}")
        if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            raise ValueError(f"ci must be a finite interval (low, high) with low <= high; got {ci!r}")
        obj = super().__new__(cls, value)
        for name, val in (("stderr", float(stderr)), ("ci", (float(ci[0]), float(ci[1]))),
                          ("confidence", float(confidence)), ("method", str(method)), ("n", int(n))):
            object.__setattr__(obj, name, val)
        return obj

    def __setattr__(self, name, value):
        raise AttributeError(f"MeanEstimate is immutable; cannot set {name!r}")

    @property
    def value(self) -> float:
        return float(self)

    def __reduce__(self):
        return (_rebuild_mean, (float(self), self.stderr, self.ci, self.confidence, self.method, self.n))

    def __repr__(self) -> str:
        return (f"MeanEstimate(value={float(self)!r}, stderr={self.stderr!r}, ci={self.ci!r}, "
                f"confidence={self.confidence!r}, method={self.method!r}, n={self.n})")

    def to_dict(self) -> dict:
        return {"mean": float(self), "stderr": self.stderr, "ci_low": self.ci[0], "ci_high": self.ci[1],
                "confidence": self.confidence, "method": self.method, "n": self.n}


def _rebuild_mean(value, stderr, ci, confidence, method, n):
    return MeanEstimate(value, stderr=stderr, ci=ci, confidence=confidence, method=method, n=n)


def _check_confidence(confidence) -> float:
    if isinstance(confidence, (bool, np.bool_)) or not isinstance(confidence, numbers.Real):
        raise TypeError(f"confidence must be a real number in (0, 1); got {type(confidence).__name__} {confidence!r}")
    c = float(confidence)
    if not (0.0 < c < 1.0):
        raise ValueError(f"confidence must be a real number in (0, 1); got {confidence!r}")
    return c


def estimate_mean(reports, mechanism, *, domain=None, confidence=0.95, counts=False, tol=1e-2,
                  max_iter=50_000) -> MeanEstimate:
    r"""Estimate the mean of the true values from reports, with a standard error and CI.

    The case is decided exactly from the channel restricted to the domain by
    its bias ``b(x) = E[Y | x] - x`` (computed entry by entry):

    * **unbiased channel** (``max |b| <= 1e-9 max |y - x|``): mechanisms on Z
      (symmetric, docs/paper.md, "Distortion and bias"), extended windows.  The estimate is the
      report mean ``(1/n) sum_i Y_i``, exactly unbiased; the standard error is
      ``sqrt(v / n)`` with ``v`` the sample variance (``ddof=1``), which
      estimates ``Var(Y) = Var_p(x) + E_p Var(Y | x)`` (``= Var_p(x) + R2`` on
      Z).  For :class:`~sparseldp.SparseLaplace` and
      :class:`~sparseldp.SparseGaussian` on Z no channel is built: ``b = 0``
      by symmetry, every value ``lo - t .. hi + t`` is a possible report, and
      one O(n) pass over the reports checks them and sums them (exactly, in
      integers, when the centered reports stay within ``2^20``: the mean is
      then the correctly rounded ``sum / n`` and the variance the correctly
      rounded ``(n S2 - S1^2) / (n (n - 1))``).  Two floors guard degenerate samples.
      ``v >= min_x Var(Y | x)`` (``= R2`` on Z): the noise alone, a lower
      bound on ``Var(Y)`` whatever ``p``.  And when
      all ``n`` reports are equal (``v = 0``), ``v = r (1 - r) w^2`` with
      ``r = min(3/n, 1/2)`` and ``w`` the span of the outputs: by the rule of
      three, ``r`` bounds the share of other reports at 95%, and
      ``r (1 - r) w^2`` is the largest variance such a share can carry (a
      noiseless channel and a constant sample would otherwise give an
      interval of width 0).  ``method="report-mean"``.
    * **the Piecewise, Hybrid and Duchi mechanisms** (channels of
      :func:`sparseldp.baselines.piecewise`, ``hybrid``, ``duchi``): their
      report labels are cells or branches, not values, and the papers give an
      unbiased per-report estimate ``x^(y)`` (Wang et al., ICDE 2019; Duchi,
      Jordan and Wainwright, FOCS 2013; :func:`sparseldp.baselines.report_estimates`,
      ``E[x^(Y) | x] = x`` for every input).  The estimate is their mean
      ``(1/n) sum_i x^(Y_i)``, exactly unbiased (not clipped to the domain).
      Its variance is ``(1/n^2) sum_i Var[x^ | x_i]``; the standard error is
      ``sqrt(v / n)`` with ``v`` the sample variance (``ddof=1``) of the
      per-report estimates, which is unbiased for ``Var[x^(Y)]`` when the
      inputs are a sample from a population and errs on the large side for
      fixed inputs (it adds their own spread); and ``v >= min_x Var[x^ | x]``
      over the domain (:func:`sparseldp.baselines.estimator_variance`), the
      noise alone, a lower bound whatever the inputs (it also guards a sample
      of equal reports).  No fitted distribution enters, so the interval does
      not depend on the frequency estimator.  ``method`` names the paper:
      ``"unbiased (Wang et al. 2019)"`` (Piecewise, Hybrid) or
      ``"unbiased (Duchi et al. 2013)"``.
    * **biased channel** (clipped windows, clamped or folded baselines,
      randomized response, Square Wave): the report mean is pulled towards the
      middle.  The estimate inverts the channel: ``(1/n) sum_i g(Y_i)`` with
      ``E[g(Y) | x] = x`` for every ``x`` of the domain (to ``1e-9`` of its
      range), the least-variance such ``g`` under uniform inputs
      (:func:`._information._inversion_weights`); it depends on the channel
      alone, so it is exactly unbiased whatever the data (not clipped to the
      domain).  The standard error is ``sqrt(v / n)`` with ``v`` the sample
      variance of ``g(Y)`` (``ddof=1``), floored at ``min_x Var[g(Y) | x]``,
      as the papers' estimator's.  ``method="unbiased (channel inversion)"``.
      Taken where that standard error is below ``(hi - lo) / 2``; else (the
      channel cannot be inverted, or only with a useless variance: clipped
      windows of wide Gaussian kernels, the clamped discrete Gaussian) the
      EM path below.  Why not the MLE's mean everywhere: on concentrated data
      the MLE spreads mass over values the channel cannot tell apart from
      empty ones, and its mean is biased by several standard errors
      (randomized response at eps 3 on 0..99, a geometric truth of mean 9,
      5,000 reports: bias 6.4 against a standard error of 2.7, 10 of 40
      intervals covering; the inversion's 37 of 40).  The price, on a weak
      square channel (its inversion unique) against an interior truth:
      randomized response at eps 1 on 0..99, a bimodal truth, 2 x 10^4
      reports, RMSE 12.5 against the MLE mean's 4.6; a Hausman test of the
      MLE mean against the inversion was tried and cannot tell the two cases
      apart (the MLE's Fisher standard error equals the inversion's on a
      square channel: 12.1 there, where the MLE's actual spread is 4.6).
    * **biased channel, no useful inversion**: the estimate is
      the mean ``sum_x x p̂_x`` of the EM estimate :func:`estimate_frequencies`
      (same ``tol``, ``max_iter``).  Its standard error is the delta method with
      the expected Fisher information at ``p̂``: with
      ``I = Q diag(1/q̃) Q^T`` (per report) and ``u = x - mean``,
      ``se^2 = u^T I^{-1} u / n`` (the constrained information
      ``I^{-1} - p p^T`` applied to the mean functional; ``I`` is a banded
      sparse ``k x k`` system, sparse LU).  This is the asymptotic standard
      error of the MLE when it is interior; when ``p̂`` sits on the boundary
      of the simplex (zeros) the constraint only removes variance, so the
      figure errs on the large (conservative) side.  ``method="em-fisher"``.

      Two safeguards make it always finite.  (1) ``q̃ = max(q̂, f max q̂)``
      with ``q̂ = Q^T p̂`` and ``f = 1e-9``: outputs that the estimate makes
      (nearly) impossible, such as those of the empty end of a domain wider
      than the data, would otherwise put ``1/q̂`` of 1e160, or ``1/0``, into
      ``I`` (this made the standard error ``nan``, or silently 250 times too
      small).  Raising ``q`` removes information (``I`` decreases in every
      ``q_y``), so the floor can only enlarge the figure; in our
      measurements it moves it by less than 1e-5 relative.  (2) When ``I``
      is singular or nearly so (wide Gaussian windows, randomized response
      with tiny ``eps``: the channel barely identifies the mean), the
      standard error is the smallest over a few ridge solutions of
      ``sqrt(E g(Y)^2 / n) + (max r - min r)``, where ``E[g(Y) | x] + r(x) = u(x)``:
      the part of the mean that a function of the reports estimates plus a
      worst-case bound on the part it does not (see ``_fisher_stderr``).
      Still ``"em-fisher"``.  If that exceeds ``(hi - lo) / 2`` -- the
      largest standard deviation of any estimate confined to ``[lo, hi]``
      (Popoviciu's inequality), a bound that needs no asymptotics -- that is
      returned instead, with ``method="em-range-bound"``, and the interval
      is the whole domain (for a confidence of 68% or more).
    * **one-value domain** (``lo == hi``): the mean is ``lo``, exactly;
      standard error 0, interval ``(lo, lo)``.  ``method="one-value-domain"``.

    The confidence interval is ``value -+ z_{(1+confidence)/2} stderr``
    (normal approximation), clipped to ``[lo, hi]``; should it miss the
    domain altogether (a report mean far outside it) it shrinks to the
    nearest end.  The standard error is always finite and ``>= 0``.

    Parameters are those of :func:`estimate_frequencies`; at least two reports
    are needed.  Returns a :class:`MeanEstimate`, a ``float`` subclass.
    """
    confidence = _check_confidence(confidence)
    tol, max_iter = _check_tol(tol, max_iter)
    counts = check_bool(counts, "counts")
    if _on_z(mechanism) and domain is not None:
        got = _mean_on_z(reports, mechanism, domain, confidence, counts)
        if got is not None:
            return got
    model = _model(mechanism, domain)
    c_all = model.counts_of(reports, counts)
    n_f = float(c_all.sum())
    n = int(round(n_f))
    if n < 2:
        _too_few(n)
    lo, hi = model.lo, model.hi
    if model.k == 1:
        return MeanEstimate(lo, stderr=0.0, ci=(lo, lo), confidence=confidence, method="one-value-domain", n=n)
    # centering keeps sums exact for large values (int64 differences are exact in float64 below 2^53)
    center = lo + (hi - lo) // 2
    paper = _papers_estimator(mechanism, model)
    if paper is not None:  # the paper's unbiased estimate x^(y) of each report
        x_hat, floor, method = paper
        m1, var = _moments(c_all, x_hat - center, n_f)
    else:
        bias, scale = model.bias()
        if not float(np.abs(bias).max(initial=0.0)) <= 1e-9 * max(scale, 1.0):  # a biased channel
            return _em_mean(model, c_all, n_f, center, tol, max_iter, confidence, n)
        # unbiased channel: the report itself
        m1, var = _moments(c_all, (model.outputs - center).astype(float), n_f)
        var = _rule_of_three(var, n_f, float(model.outputs[-1] - model.outputs[0]))
        floor, method = model.min_noise_variance(bias), "report-mean"
    return _with_ci(center + m1, math.sqrt(max(var, floor) / n_f), lo, hi, confidence, method, n)


def _em_mean(model: _Model, c_all: np.ndarray, n_f: float, center: int, tol, max_iter, confidence: float,
             n: int) -> MeanEstimate:
    """The biased-channel case of :func:`estimate_mean`: the channel's unbiased linear estimator where the
    channel identifies the mean linearly and its standard error is below the range bound; else the mean of
    the EM estimate, delta-method standard error (:func:`_fisher_stderr`) or, if larger, the range bound
    ``(hi - lo)/2``."""
    lo, hi = model.lo, model.hi
    x = (np.arange(lo, hi + 1, dtype=np.int64) - center).astype(float)
    se_range = 0.5 * float(hi - lo)
    g = _inversion_weights(model, x)
    if g is not None:
        m1, var = _moments(c_all, g, n_f)
        floor = float(np.min(np.asarray(model.unscaled() @ (g * g)).ravel() - x * x))  # min_x Var[g(Y) | x]
        se = math.sqrt(max(var, floor, 0.0) / n_f)
        if se < se_range:
            return _with_ci(center + m1, se, lo, hi, confidence, INVERSION_METHOD, n)
    est = _fit(model, c_all, "em", tol, max_iter)
    m1 = float(est.p @ x)
    se = _fisher_stderr(model, est.p, x - m1, n_f)
    method = "em-fisher"
    if not se <= se_range:
        se, method = se_range, "em-range-bound"
    return _with_ci(center + m1, se, lo, hi, confidence, method, n)


def _moments(c: np.ndarray, d: np.ndarray, n_f: float) -> tuple[float, float]:
    """Mean and sample variance (``ddof=1``) of the values ``d`` taken ``c`` times each (``n_f = sum c``)."""
    m1 = float(c @ d) / n_f
    return m1, float(c @ (d - m1) ** 2) / (n_f - 1.0)


def _rule_of_three(var: float, n_f: float, span: float) -> float:
    """``var``, or when it is 0 (every report is the same value) ``r (1 - r) span^2``, ``r = min(3/n, 1/2)``:
    the largest variance that a share ``r`` of other reports (the rule of three's 95% bound) can carry
    (:func:`estimate_mean`)."""
    if var <= 0.0:
        r = min(_RULE_OF_THREE / n_f, 0.5)
        var = r * (1.0 - r) * span * span
    return var


def _with_ci(value: float, se: float, lo: int, hi: int, confidence: float, method: str, n: int) -> MeanEstimate:
    """The :class:`MeanEstimate` with the interval ``value -+ z se``, ``z = z_{(1+confidence)/2}``, clipped
    to ``[lo, hi]`` (shrunk to the nearest end should it miss the domain)."""
    z = NormalDist().inv_cdf(0.5 + 0.5 * confidence)  # (scipy.stats costs half a second to import)
    lo_ci = min(max(lo, value - z * se), hi)
    hi_ci = max(min(hi, value + z * se), lo)
    return MeanEstimate(value, stderr=se, ci=(lo_ci, hi_ci), confidence=confidence, method=method, n=n)


def _papers_estimator(mechanism, model: _Model):
    """``(x^ per output of the model, min_x Var[x^ | x] over the domain, method)`` for a Piecewise, Hybrid
    or Duchi channel (:func:`estimate_mean`); ``None`` for any other mechanism."""
    if not isinstance(mechanism, SparseChannel) or mechanism.family not in UNBIASED_FAMILIES:
        return None
    est = report_estimates(mechanism)  # per column of the channel
    cols = channel_columns(mechanism, model)
    inputs = np.asarray(mechanism.inputs)
    rows = (inputs >= model.lo) & (inputs <= model.hi)
    # from the channel matrix, O(nnz): the O(k) closed_form_variance is no substitute, its Duchi term
    # h^2 (C^2 - t^2) cancels at the ends (relative error ~ cosh(eps/2)^2 2^-53: 1e-4 at eps = 30)
    floor = max(float(estimator_variance(mechanism)[rows].min()), 0.0)
    return est[cols], floor, f"unbiased ({ESTIMATOR_SOURCE[mechanism.family]})"


def _on_z(mechanism) -> bool:
    """A Laplace or Gaussian mechanism on Z whose every window offset has a finite log weight.

    Then the extended channel is unbiased (symmetric kernel) and its outputs
    from the domain ``lo..hi`` are exactly ``lo - t .. hi + t``.  (A Gaussian
    with ``sigma^2`` below the doubles is a point mass and takes the channel
    path, like kernels with zero weights.)
    """
    if not isinstance(mechanism, RadiusMechanism):
        return False
    k = mechanism.kernel
    return isinstance(k, LaplaceKernel) or (isinstance(k, GaussianKernel) and math.isfinite(k._c))


def _mean_on_z(reports, mechanism, domain, confidence: float, counts: bool):
    """The report mean of :func:`estimate_mean` for a mechanism on Z: O(n), no channel.

    Returns None when the windows leave int64 (then the channel path decides,
    as before).  Same checks, messages and floors as the channel path; see
    :func:`estimate_mean` for the exact integer sums.
    """
    lo, hi = check_domain(domain)
    t = mechanism.t
    y0, y1 = lo - t, hi + t
    center = lo + (hi - lo) // 2
    span_d = max(center - y0, y1 - center)  # largest |y - center| of a possible report
    if y0 < INT64_MIN or y1 > INT64_MAX or span_d > 1 << 62:
        return None
    label = repr(mechanism)

    def impossible(value, count):
        return ValueError(
            f"reports must be values that {label} can produce from inputs in the domain {lo}..{hi} "
            f"(outputs {y0}..{y1}); got {value} ({count} such report{'s' if count != 1 else ''} in all)"
        )

    rc = _as_report_counts(reports, counts)
    if rc is not None:
        # a histogram: weighted sums over its values (float, as the channel path's counts)
        nz = rc.counts > 0
        v, c = rc.values[nz], rc.counts[nz].astype(float)
        miss = (v < y0) | (v > y1)
        if miss.any():
            raise impossible(int(v[miss][0]), int(rc.counts[nz][miss].sum()))
        n_f = float(c.sum())
        if n_f < 2:
            return _too_few(int(round(n_f)))
        m1, var = _moments(c, (v - center).astype(float), n_f)
    else:
        exact = span_d <= _EXACT_SPAN
        n, s1, s2, mean, m2 = 0, 0, 0, 0.0, 0.0
        chunks = _chunks(reports)
        for chunk in chunks:
            if chunk.size == 0:
                continue
            if int(chunk.min()) < y0 or int(chunk.max()) > y1:
                bad = (chunk < y0) | (chunk > y1)
                total = int(bad.sum()) + sum(int(((rest < y0) | (rest > y1)).sum()) for rest in chunks)
                raise impossible(int(chunk[int(np.argmax(bad))]), total)
            d = chunk - center
            if exact:  # |d| <= 2^20: chunk sums of d and d^2 are exact in int64
                s1 += int(d.sum())
                s2 += int(np.dot(d, d))
            else:  # per-chunk mean and sum of squares, merged (Chan, Golub and LeVeque)
                df = d.astype(float)
                mc = float(df.mean())
                m2c = float(np.dot(df - mc, df - mc))
                tot = n + df.size
                dm = mc - mean
                mean += dm * df.size / tot
                m2 += m2c + dm * dm * n * df.size / tot
            n += int(chunk.size)
        if n < 2:
            return _too_few(n)
        n_f = float(n)
        if exact:
            m1 = s1 / n  # both Python ints: correctly rounded
            var = (n * s2 - s1 * s1) / (n * (n - 1))
        else:
            m1, var = mean, m2 / (n_f - 1.0)
    n = int(round(n_f))
    if lo == hi:
        return MeanEstimate(lo, stderr=0.0, ci=(lo, lo), confidence=confidence, method="one-value-domain", n=n)
    var = max(_rule_of_three(var, n_f, float(y1 - y0)), mechanism.r2)  # Var(Y | x) = R2 for every x on Z
    return _with_ci(center + m1, math.sqrt(var / n_f), lo, hi, confidence, "report-mean", n)


def _too_few(n: int):
    raise ValueError(f"reports must contain at least 2 reports to estimate a mean with a standard error; got {n}")
