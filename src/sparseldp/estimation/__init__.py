r"""Frequencies and means of the true inputs, estimated from privatized reports.

Model
-----
Each of ``n`` people holds an integer ``x`` in the domain ``lo..hi`` (``k``
values) and reports ``Y ~ Q(. | x)``.  With ``p`` the unknown input
distribution on the domain, the reports are i.i.d. from the output
distribution ``q = Q^T p``, and the report histogram (counts ``c_y``) is a
sufficient statistic: everything here works on counts, obtained by one
``np.bincount`` pass over the reports (in chunks), never per report in Python.

``Q`` is the mechanism's channel restricted to the domain:

* for :class:`~sparseldp.SparseLaplace` / :class:`~sparseldp.SparseGaussian`
  (output alphabet Z, Definitions 6 and 8) the rows ``x = lo..hi`` with
  outputs ``lo - t .. hi + t`` (the extended window: every report the
  mechanism can produce from the domain);
* for a :class:`~sparseldp.SparseChannel` (extended or clipped windows,
  baselines, any weights) its rows ``lo..hi`` and the outputs they reach.

``Q`` is kept sparse (``scipy.sparse`` CSR, ``O(k s)`` entries for windows of
size ``s``); only channels that are dense anyway (randomized response, the
full-support baselines) are held as dense arrays.

Frequencies: maximum likelihood by EM
-------------------------------------
The log-likelihood ``l(p) = sum_y c_y log (Q^T p)_y`` is concave on the
simplex.  EM (the iterative Bayesian update) is

.. math::

    p_x \leftarrow p_x\, g_x(p), \qquad
    g_x(p) = \frac{1}{n}\sum_y c_y \frac{Q(y \mid x)}{(Q^T p)_y},

two sparse mat-vecs per step (``O(nnz)``), restricted to the observed outputs.
The steps are accelerated by SQUAREM (Varadhan and Roland, Scand. J. Stat. 35,
2008: squared extrapolation of two EM steps, step length ``-|r|/|v|``,
backtracked towards a plain double EM step to stay nonnegative, and rejected
if the likelihood does not increase), so the iteration stays monotone.

EM is slow when the channel is ill-conditioned (wide Gaussian kernels,
full-support baselines): even accelerated it can need 10^5 steps on a domain
of 12 values.  So after 600 EM evaluations the solver predicts the remaining
EM cost from the observed rate of the certificate below and, when a Newton
method is predicted cheaper, finishes with a primal log-barrier interior-point
Newton method (banded Cholesky or sparse LU for window channels; see ``_newton._newton``), then
resumes EM if needed.  Where the first EM iterate is sparse (at most a
quarter of the values carry mass, as the MLE of spiky data does), Newton runs
first on an active set of values only, grown by the values whose ``g_x``
exceeds 1 until the certificate holds on the whole domain (``mle._active_newton``;
the bootstrap's refits of such an MLE on large channels use it too).  The
bootstrap's MLE refits on large channels also use a primal-dual interior-point
method (Mehrotra's predictor-corrector on the Poisson form of the problem,
``_ipm._ipm``), which certifies in 3-22 iterations where the barrier Newton and
EM stall.  Every phase is judged by the same certificate, so the choice affects
speed only, never what "converged" means.

Convergence rule (a certificate, not a heuristic).  Because ``l`` is concave
and ``sum_x p_x g_x(p) = 1``, Jensen's inequality gives, for the maximizer
``p*``,

.. math::

    l(p^*) - l(p) = \sum_y c_y \log\frac{(Q^T p^*)_y}{(Q^T p)_y}
        \le n \log \sum_x p^*_x g_x(p) \le n \log \max_x g_x(p).

EM stops as soon as this bound, ``gap = n log max_x g_x``, is at most ``tol``
nats (default ``1e-2``: the returned estimate's log-likelihood is within
0.01 of the maximum, a difference no likelihood-ratio test can see), and
returns ``p * g(p)``, whose log-likelihood is at least ``l(p)`` (EM is
monotone), so the bound holds for it too.  ``max_iter`` caps the number of EM
map evaluations; if it is hit, :class:`ConvergenceWarning` is issued and the
result says ``converged=False`` with the gap reached.

A caution that the tests and the benchmark measure: when the kernel is wide
relative to the structure of ``p`` (deconvolution is ill-posed), the exact
MLE fits the noise and can be *less* accurate than an early iterate for
smooth ``p``; for spiky ``p`` it is the most accurate.  ``method="em"``
returns the MLE and says how close it is; it does not regularize:
``method="ems"`` (below) does.

Frequencies: EM with smoothing (EMS)
------------------------------------
``method="ems"``: the EMS algorithm of Silverman, Jones, Wilson and Nychka
("A smoothed EM approach to indirect estimation problems", J. R. Stat. Soc. B
52, 1990), applied to numerical LDP reports by Li, Wang, Lopuhaä-Zwakenberg,
Li and Škorić ("Estimating Numerical Distributions under Local Differential
Privacy", SIGMOD 2020).  Each step is an EM step followed by ``m`` passes
(``smooth=m``, default 1) of the binomial kernel ``(1, 2, 1)/4`` over
neighbouring values of the domain:

.. math::

    p \leftarrow T(p) = S^m \bigl(p \odot g(p)\bigr), \qquad
    (S v)_x = \tfrac14 v_{x-1} + \tfrac12 v_x + \tfrac14 v_{x+1},

where at the two ends of the domain the quarter that would fall outside is
kept on the end value (``(S v)_{lo} = \tfrac34 v_{lo} + \tfrac14 v_{lo+1}``,
Silverman et al.'s Section 3.2.2 convention).  ``S`` is then symmetric and
doubly stochastic, so ``T`` maps the simplex to itself and preserves mass
exactly; ``S^m`` is the binomial kernel ``C(2m, m + j) / 4^m``, ``|j| <= m``,
in the interior.  The smoothing is a prior belief that neighbouring values
have similar frequencies: it removes the high-frequency components that the
ill-posed deconvolution cannot identify (the MLE's spikes), at the price of
a bias of order ``m p''/4`` (half the kernel's variance times the second
difference of ``p``), so it is the right choice for smooth distributions
(ages, incomes, measurements) and the wrong one for spiky ones (a few
isolated atoms), where ``"em"`` wins.  EMS does not maximize a likelihood:
``loglik`` and ``gap`` of the result are the log-likelihood at the EMS
estimate and the certified bound on its distance to the maximum (the same
certificate as for EM), which measure how much likelihood the smoothing
gives up, not convergence.

Stopping rule for EMS.  ``T`` is a smooth map whose fixed point is the EMS
estimate; its iterates converge linearly, fast for narrow kernels and slowly
for wide ones (rates above 0.999 for wide Gaussian kernels, i.e. tens of
thousands of plain steps), so the iteration is accelerated by SQUAREM
(``_ems._ems_squarem``: two plain steps, the squared extrapolation, one
stabilizing step; 5-20x fewer map evaluations measured, same fixed point), and
where SQUAREM has not converged within 300 evaluations, by Anderson mixing
(``_ems._ems_anderson``; ``_ems._ems_fixed`` has the rule and the
measurements: on wide Gaussian kernels, 3-15x fewer evaluations again).  For
SQUAREM the distance to the fixed point is estimated from the observed rate: with
``d_k = ||p_{k} - p_{k-1}||_1 / 2`` the second plain step of a cycle (total
variation) and ``rho`` the largest ratio ``d_k / d_{k-1}`` of the two plain
steps over the last five cycles,

.. math::

    \mathrm{TV}(p_k, p^*) \lesssim d_k \, \frac{\rho}{1 - \rho},

the a-posteriori bound of a contraction with constant ``rho``.  EMS stops
when this estimate is at most ``tol`` (default ``1e-8`` in total variation,
six orders of magnitude below the statistical error at any realistic
``n``), or when a step changes nothing beyond rounding (``d_k <= 1e-14``).
Anderson mixing estimates it the same way from the residuals' ratios over
lags of ten evaluations.  It is an estimate, not a certificate: ``rho`` is
measured, not proven, and where EMS has a mode far slower than the steps
show it falls short: on randomized response over 400 values (a channel that
tells little per report) fits declared at ``1e-4`` lay up to ``2.5e-3`` from
a fixed point computed to ``1e-12``; since stalled columns go on by mixing
logarithms (``_ems._ems_anderson``), up to ``7e-4``; since they go to Newton's
method first on dense channels with a cheap Jacobian
(``_ems_newton._ems_newton``), up to ``2e-4``.

Frequencies: unbiased inversion
-------------------------------
``method="inversion"``: the least-squares solution of ``Q^T p = f``
(``f = c / n``, over every output the domain can produce), unbiased because
``E f = Q^T p``, solved from the normal equations ``Q Q^T p = Q f`` (a banded
``k x k`` sparse system, sparse LU; dense least squares for dense channels),
then the Euclidean projection onto the simplex (:func:`project_simplex`,
the ``O(k log k)`` sort algorithm of Held, Wolfe and Crowder 1974 / Duchi
et al. 2008).  The projection makes it biased but never farther from ``p``
in Euclidean norm.

Means
-----
See :func:`estimate_mean`: the plain mean of the reports when the channel is
unbiased (``E[Y | x] = x``, true on Z by symmetry, docs/paper.md, "Distortion and bias", and for
extended windows); the papers' unbiased per-report estimator for the
Piecewise, Hybrid and Duchi mechanisms (:func:`sparseldp.baselines.report_estimates`),
whose labels are not values; else the channel's inversion, the mean of ``g(Y)`` with
``E[g(Y) | x] = x`` on the whole domain (exactly unbiased), where its standard error is below half
the domain's range, and the mean of the EM estimate with a delta-method standard error from the
expected Fisher information where it is not.

Layout
------
One module per concern; imports point down this list (none of them imports
:mod:`sparseldp.io`, :mod:`sparseldp.spec` or the CLI):

* :mod:`~sparseldp.estimation.stats`: derived statistics and :func:`distance` (TV, W1, KS)
* :mod:`~sparseldp.estimation.intervals`: the parametric :func:`bootstrap` behind
  ``FrequencyEstimate.mean/var/quantile/cdf/range(ci=...)``; ``robust=True`` adds the MLE's
  bootstrap and takes the hull (intervals that do not assume smoothness)
* :mod:`~sparseldp.estimation.likelihood_ratio`: :func:`profile` and :class:`Profile`, likelihood-ratio
  intervals of the linear statistics and of the variance (the profile likelihood, outer bounds with
  certificates): what the reports alone pin down, with no smoothness assumed; ``modelled_seconds``,
  their cost predicted before any fit
* ``_lr_calibration``: :class:`Calibration`, ``Profile.calibration``'s check by simulation of whether the
  reports disfavour the estimate's value of a statistic and whether the intervals' chi-square calibration
  holds for these reports; :class:`CalibratedInterval`, ``Profile.calibrated_interval``'s test inversion
  where it does not
* ``_lr_search``: the ends of such intervals (the tilted MLEs, the search for the boundary, the variance
  through the linear ``E (X - c)^2``, every value's)
* ``_roots``: the one-dimensional searches they run (the boundary's tilt, the quantiles' first value)
* :mod:`~sparseldp.estimation.replicates`: :class:`Bootstrap`, the intervals (every kind, the
  quantiles' CDF inversion, the robust hull) from the replicate distributions
* :mod:`~sparseldp.estimation.auto`: ``method="auto"``, regularization chosen by held-out likelihood
* :mod:`~sparseldp.estimation.mean`: :func:`estimate_mean`, :class:`MeanEstimate`;
* ``_information``: the channel's unbiased linear estimator of the mean (the inversion ``estimate_mean``
  takes for biased channels) and the Fisher-information standard error (its EM path), one linear system;
* :mod:`~sparseldp.estimation.frequencies`: :func:`estimate_frequencies`,
  :class:`FrequencyEstimate`, :class:`ConvergenceWarning`, argument checks;
* :mod:`~sparseldp.estimation.refits`: the bootstrap's batched replicate refits;
* ``_mle_refits``: the MLE's batched refits (SQUAREM EM; active sets for a sparse MLE);
* :mod:`~sparseldp.estimation.mle`: the MLE's solver (EM, interior-point Newton, the active set);
* :mod:`~sparseldp.estimation.solvers`: the SQUAREM step, the EM runs, least squares and
  :func:`project_simplex`;
* ``_ems``: EMS smoothing, its map and its fixed point (SQUAREM, then Anderson mixing);
* ``_flow``: the EM flow (EM continued in continuous time) behind ``auto``'s members past the step cap;
* :mod:`~sparseldp.estimation.model`: the channel restricted to the domain;
* ``_lowrank``: the low-rank factor of a wide smooth window channel (the interior point's Newton systems);
* :mod:`~sparseldp.estimation.counts`: :class:`ReportCounts`, reports to counts.
"""

from __future__ import annotations

# Private names are re-exported for the code that imports them from here: _model
# (tests, benchmarks), _fisher_stderr and _smooth (tests), _rebuild_mean (pickles of
# MeanEstimate made before the split name sparseldp.estimation._rebuild_mean).
from .counts import ReportCounts
from .frequencies import METHODS, ConvergenceWarning, FrequencyEstimate, estimate_frequencies, \
    estimate_frequencies_full
from ._information import _fisher_stderr  # noqa: F401
from .mean import MeanEstimate, _rebuild_mean, estimate_mean  # noqa: F401
from .model import _model  # noqa: F401
from ._ems_map import _smooth  # noqa: F401
from .solvers import project_simplex  # noqa: F401
from .intervals import Bootstrap, ShapeWarning, bootstrap
from .likelihood_ratio import CalibratedInterval, Calibration, Profile, profile
from .stats import distance

__all__ = [
    "METHODS",
    "ConvergenceWarning",
    "ShapeWarning",
    "FrequencyEstimate",
    "MeanEstimate",
    "ReportCounts",
    "estimate_frequencies",
    "estimate_frequencies_full",
    "estimate_mean",
    "project_simplex",
    "Bootstrap",
    "bootstrap",
    "Profile",
    "profile",
    "Calibration",
    "CalibratedInterval",
    "distance",
]

