r"""Bootstrap intervals for the statistics of an estimated distribution.

Intervals: parametric bootstrap
-------------------------------
The reports are i.i.d. from ``q = Q^T p``, and the estimators are functions of
the report histogram ``c ~ Multinomial(n, q)``.  :func:`bootstrap` draws ``B``
replicate histograms ``c* ~ Multinomial(n, Q^T p_hat)`` (the fitted output
distribution), refits each with the estimator that produced ``p_hat``,
warm-started from ``p_hat``, and keeps the ``B`` replicate distributions.
:meth:`Bootstrap.interval` turns them into intervals for any statistic:

* ``kind="span"`` (the default): ``[min(t_hat, t_hat - b) - z se,
  max(t_hat, t_hat - b) + z se]``, with ``b = mean(t*) - t_hat`` the bootstrap
  estimate of the bias, ``se`` the replicates' standard deviation and ``z``
  the normal quantile of the level: the normal interval of the estimate
  stretched to reach its bias-corrected value.  The bootstrap's ``se`` and
  ``b`` are accurate here on average (``bench_coverage``: within about 10 % of
  the spread and the bias of the estimates over the repetitions, 25 % for
  the spiky truth's quantiles; e.g. the smooth truth's variance: bias 1.05
  against a mean ``b`` of 1.03), but ``b`` varies
  from one data set to the next, and ``t_hat - b`` spreads 10-40 % more
  than ``t_hat`` for range queries, the CDF and quantiles, so the corrected
  interval alone undercovers (82-93 % on range queries) and the plain
  one misses the bias (76.5-83.5 % on the smooth variance); the span holds
  both centres.  It always contains the estimate.  Coverage (auto; smooth,
  bimodal and spiky truths; mean, a range query, variance, CDF at 60,
  interpolated median and p90; three simulations of 200 repetitions, B =
  200): 13 of 54 cells outside 93-97 %, ten of them above (among them the
  smooth variance at 99 %, the spiky truth's interpolated quantiles at 97.5-98 %) and
  three at 92.5 %; per frequency 93.5-97.0 % on average over the values.
  Under a far wider kernel (the Gaussian design, sigma 21.1) it covers the
  smooth truth (93.0-98.5 %, rerun 2026-11-29) but not truths with structure
  the kernel blurs: bimodal 68.5-74 % for range queries, the CDF, interpolated
  quantiles and single frequencies, spiky 1-38 %; only the mean and the
  variance cover there (94.5-96.5 %).  ``robust=True`` (below) restores the
  bimodal truth's coverage and part of the spiky truth's (docs/estimation.md,
  "Default intervals in detail");
* ``kind="hull"``: the smallest interval containing both of the two below
  (the default before the span).  It reaches ``t_hat + b`` as well, half of
  its extra width on the side away from the correction, and over-covers:
  24 of the 54 cells above 97 % (spiky range queries 98-99.5 %), per
  frequency 97.7-99.6 %, at 1.05-1.3 times the span's width;
* ``kind="basic"``: ``[2 t_hat - t*_{(1+L)/2}, 2 t_hat - t*_{(1-L)/2}]``,
  the reflected percentiles.  It corrects, to first order, the bias of the
  estimator as seen in the bootstrap world: EMS smooths ``p`` (so it flattens
  peaks and widens the distribution) and each replicate is smoothed once
  more, so the replicate-minus-estimate shift estimates the
  estimate-minus-truth shift;
* ``kind="percentile"``: ``[t*_{(1-L)/2}, t*_{(1+L)/2}]``, the
  plain percentiles (no bias correction; the MLE has many frequencies at 0,
  where the replicate distribution is one-sided and reflecting it fails);

where ``t*_{a}`` is the ``a``-quantile of the replicate statistics.

Quantiles are the exception: their intervals invert the CDF's (Woodruff
1952), ``{t : q in CI(F(t))}`` with ``CI`` of the chosen kind.  The CDF is
linear in ``p``, and its bootstrap spread is accurate where the replicate
quantiles' is not: inside an atom a quantile moves by ``dF / p_x``, and the
span of the replicate quantiles over-covered the spiky truth's interpolated
median and p90 (99-99.5 % in all six cells) where the inverted interval gives
96.5-98 % at 0.90-0.92 times the width (the smooth and bimodal truths'
twelve cells moved by at most 1 point, up or down).  A quantile as a domain value gets
the set of values whose CDF interval contains ``q``; the grouped-data
(``"interpolated"``) quantile the points of the piecewise-linear CDF whose
interval does (:meth:`Bootstrap._interp_inverted`).  Which
covers better is measured, not assumed: ``benchmarks/bench_coverage.py``
simulates 200 repetitions per setting and reports the coverage of nominal
95 % intervals (see that module's docstring for the table).

What the intervals cover: the estimate's variability around its own
regularized target.  The refits use the member ``auto`` chose (its choice is
held fixed), and the bias correction sees only what regularizing the
estimate once more does.  Where the truth has structure finer than the
reports resolve, the bias at a point exceeds the interval: on a real health
index heaped on every fourth value (``bench_coverage`` with
``SPARSELDP_COVERAGE_SHAPES=real``) the mean's interval covers 95.0 % and the
variance's 90.5 %, but a range query 9.5 %, the CDF at the median 19.0 % and
single frequencies 34.9 % on average; the MLE's (``method="em"``) cover
88-98 % on the same statistics of the three real columns, up to 4.6 times
wider, and EMS's cover 0-13.5 % on the health index's range, CDF and p90.
In the extreme, auto's ``"em steps=0"`` (EM's uniform start, kept where it
already fits the counts) is returned by every refit, and every interval has
zero width: :func:`bootstrap` warns (``RuntimeWarning``) whenever its refits
are all the same distribution (and it has no robust reference, below).

``robust=True`` (:func:`bootstrap`) takes no smoothness for granted: it adds
the MLE's bootstrap (the MLE fit on the same report counts) and every
interval becomes the hull of the estimate's and the MLE's.  Measured against
auto's own on the same repetitions (docs/estimation.md, "Real columns and robust intervals"): on
the health index 92.5-96.5 % for ranges, the CDF, quantiles and frequencies
(auto's 13-69 %), on doctor visits 91.5-98 % (77.5-94.5 %); on smooth truths
it over-covers (98-100 %) at 3.6-6.4 times auto's width (18-30 times for
single frequencies), and where auto chose the MLE it costs nothing.

Neither statement says what the reports *alone* pin down.
:func:`~sparseldp.estimation.likelihood_ratio.profile` (``est.profile(mechanism)``, CLI
``--profile``) does, for the linear statistics (mean, CDF, ranges, frequencies, quantiles by
inversion): the likelihood-ratio interval, the values under which the reports are within
``chi^2_1(level) / 2`` nats of their maximum likelihood, each end an outer bound with
certificates.  It assumes no smoothness and needs no bootstrap; under the Laplace setting
above it is about as wide as the robust hull and covers 95-100 %, and under the wide Gaussian
kernel it covers where the hull does not, at the width the reports allow (README, "Intervals",
has the table).

The bootstrap is simulation on already-privatized counts: it has no privacy
role, and ``rng`` may be a seed for reproducible intervals.  With
``rng=None`` a fresh ``np.random.default_rng()`` (operating-system entropy) is
used.

Replicate refits are warm-started and use a looser tolerance than a
first fit (``_REFIT_TOL``); the returned replicate distributions say how far
the estimator moves on resampled data, for which the last digits of a
converged fit do not matter.  Where the products are sparse or FFT (not dense
BLAS) the replicates are refit in blocks of columns run in threads
(:mod:`sparseldp.estimation._parallel`); the blocks depend on ``B`` and the
channel alone, so a seed gives the same replicates on any number of CPUs.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .._rng import simulation_generator
from .._validation import check_bool, check_int, check_positive
from ._parallel import small_blas
from .model import checked_counts, mechanism_of, model_for
from .likelihood_ratio import Profile
from .refits import _REFIT_TOL, _refit_plan, _refit_replicates, _refit_atoms
from .auto import _AMBIGUOUS_TV
from .replicates import Bootstrap, _check_level

__all__ = ["Bootstrap", "ShapeWarning", "bootstrap", "statistic"]

# Replicates whose every frequency spreads by at most this much (relative to the largest) are "all the same"
# (bootstrap warns: its intervals have zero width).
_NO_SPREAD = 1e-12
# The bootstrap's spread of the mean below this share of the report mean's standard error is flagged: the
# estimate's own regularization (or an estimate on the simplex's boundary) then sets the width, not the data.
_NARROW_MEAN = 0.1
# B is refused where the replicate histograms and their refits (B x (outputs + values) float64) would pass this:
# asked for more, the draw itself fails with numpy's MemoryError (B = 10^9 on 10^4 values asked for 75 TiB).
_MAX_REPLICATE_BYTES = 4 * 2**30


class ShapeWarning(RuntimeWarning):
    """The estimate's ``selection_tv`` is at least 0.3: members of ``auto``'s path that held-out likelihood does
    not tell apart lie that far apart, so the bootstrap's intervals of local statistics describe the chosen
    member's shape, not the truth's, and may miss (:func:`bootstrap`)."""


def statistic(estimate, stat: str, *, ci=None, level: float = 0.95, kind: str | None = None, **kw):
    """A statistic of ``estimate.p`` on ``estimate.values``, with an interval if ``ci`` is given.

    The body of the ``FrequencyEstimate`` methods ``mean``, ``var``, ``quantile``,
    ``cdf``, ``range``: ``stat`` and keywords as in :meth:`Bootstrap.interval`.
    ``ci=None`` returns the point value; ``ci`` a :class:`Bootstrap` or a
    :class:`~sparseldp.estimation.likelihood_ratio.Profile` of this estimate returns ``(value, (lo, hi))``.
    """
    _check_level(level)  # checked with or without ci, as every argument is
    if ci is None:
        p = np.asarray(estimate.p, dtype=float)
        return Bootstrap(p=p, values=np.asarray(estimate.values), replicates=p[None, :],
                         method=str(estimate.method)).point(stat, **kw)
    if not isinstance(ci, (Bootstrap, Profile)):
        raise TypeError(f"ci must be None, a Bootstrap (from bootstrap(estimate, mechanism)) or a Profile "
                        f"(from profile(estimate, mechanism)); got {type(ci).__name__}")
    if ci.p.shape != np.shape(estimate.p) or not np.array_equal(ci.p, estimate.p):
        raise ValueError("ci must be a Bootstrap of this estimate (its p differs)")
    if not np.array_equal(ci.values, estimate.values):
        raise ValueError(f"ci must be a Bootstrap of this estimate (its values run from {int(ci.values[0])} to "
                         f"{int(ci.values[-1])}, the estimate's domain is {tuple(estimate.domain)})")
    return ci.point(stat, **kw), ci.interval(stat, level, kind=kind, **kw)


def bootstrap(estimate, mechanism=None, *, B: int = 100, rng=None, smooth: int | None = None,
              tol: float | None = None, max_iter: int = 2_000, precision: str = "single",
              robust: bool = False, relaxed: bool = True) -> Bootstrap:
    r"""Parametric bootstrap of a :class:`~sparseldp.estimation.FrequencyEstimate`.

    Draws ``B`` histograms ``c* ~ Multinomial(n, Q^T p_hat)`` over the outputs
    the domain can produce (``Q`` the mechanism's channel restricted to
    ``estimate.domain``, as in :func:`~sparseldp.estimation.estimate_frequencies`),
    and refits each with ``estimate.method``:

    * ``"ems"``: all ``B`` replicates at once (``B x k`` matrix products),
      warm-started at ``p_hat``, stopped at an estimated TV distance ``tol``
      (default ``1e-5``) to the fixed point; replicates left short at ``max_iter`` get a
      second run from where they stopped (all on small channels, else when they are at most
      5 % of ``B``: ``refits._finish_pays``).  Those still short are reported with their
      estimated distance to the fixed point, their last step and the replicates' median TV
      distance from the estimate.  Measured (1,000 values, the Gaussian design of (1, 1e-6, 10),
      10^4 reports, ``auto``'s ``"ems weight=0.03125"``), with SQUAREM alone: 161 of 200 refits
      short at 2,000 evaluations, last steps of 6e-7 against a spread of 0.27; run on to
      convergence (20,000 evaluations, B = 100: 142.6 s against 22.3 s) the interval ends moved by
      at most 1.5 % of their width for the mean, variance, a CDF value and a range query, and 4.2 %
      per value.  With Anderson mixing after SQUAREM's first 300 evaluations
      (``_ems._ems_fixed``), B = 100: every refit converged, against 17, in 7.9-9.1 s against
      14.0 s in the same session; the ends of the mean's and variance's intervals moved by under 1e-5
      of their width, the CDF value's by 1e-3 and the range query's by 0.9 %.  Where EMS contracts
      slowly that does not hold: randomized response at eps = 3 on 400 values, 10^4 reports of a
      geometric truth, ``"ems weight=0.125"``, B = 50: 34 refits short at the default 2,000
      evaluations with last steps of 1e-6, the replicates' means a median 51.4 where run to
      convergence (20,000) they are 59.4, and the mean's interval [41.0, 65.5] against [41.0, 69.3]
      ([41.0, 54.8] before stalled columns went on by mixing logarithms).  On dense channels the
      mixing's last evaluations now go to Newton's method (``_ems_newton._ems_newton``): all 50 converge
      within the default, [41.0, 69.3].  Refits it cannot finish stay short, and the warning says so;
    * ``"em"``: SQUAREM EM on all ``B`` replicates at once (:func:`_refit_em`; FFT products
      where they apply), warm-started at
      ``0.95 p_hat + 0.05 / k`` (EM cannot revive values with mass 0), stopped at
      a certified gap of ``tol`` nats (default 0.5; a first fit uses 0.01).  On small
      channels (about 200 values or fewer) EM runs 100 evaluations and Newton
      (``_newton._newton``) certifies the replicates it left above ``tol``, column by
      column: EM's tail is slow where the MLE has zeros, Newton's steps are cheap there.  On
      larger channels where ``p_hat`` is sparse, the refits start from ``p_hat`` on active sets
      of values grown from its support: all replicates in one batched EM where ``p_hat`` has mass
      on many values and EM converges on the sets (``_mle_refits._active_batch``), and for the
      others the primal-dual interior-point MLE (``_ipm._ipm``, from the uniform start) where it
      certifies the first two within 0.1 s each (modelled: iterations times a cost per iteration,
      not a clock, so a seed gives the same replicates under any load; where ``p_hat`` spreads over
      at least 18 effective atoms, within twice the batched EM's modelled budget: B = 20 on 2,000
      values under the Gaussian window of 349, 8-10 s against 52-63 s), else the active-set Newton
      (``mle._active_newton``) one replicate at a time.  On larger channels where ``p_hat`` is
      not sparse, the interior point refits every replicate where it certifies the first two
      within 0.25 s each, or twice the batched EM's modelled time for its whole budget where that is
      longer (``_mle_refits._ipm_all``: on 2,000 values under the Laplace window of 275, B = 20, 5-7 s
      against 16-17.5 s by EM), else the batched EM does.  The interior
      point then takes the replicates still above ``tol`` (``_mle_refits._ipm_finish``, for at most
      30 modelled seconds).  Measured (1,000 values, Laplace design (2, 1e-8, 3), B = 200): a zero-inflated count,
      10^7 reports, 8.5 s with every refit certified, against 114.8 s with 84 left at gaps of up
      to 10^4 nats before; a spike over a smooth part, 10^6 reports, 30.9 s all certified, against
      22.4 s with 95 left at up to 222 nats.  Replicates still
      above ``tol`` after that are refit one by one by the first fit's solver
      (``refits._mle_finish``: from the uniform start, then from the better point while a run at
      least halves the gap, at most ``refits._FINISH_RUNS`` runs): all of them on small channels, on larger ones when
      they are at most 5 % of ``B`` (a few stragglers far from ``p_hat``; a larger share is reported
      as is);
    * ``"inversion"``: least squares and simplex projection (no iteration).

    Parameters
    ----------
    estimate : FrequencyEstimate
        Uses ``p``, ``domain``, ``method``, ``n`` (and ``regularization`` for
        ``method="auto"``: the chosen member is refitted, see ``refits._refit_plan``).  The
        report counts are not needed: the parametric bootstrap resamples from the fit.
    mechanism : SparseLaplace, SparseGaussian or SparseChannel, optional
        The mechanism that produced the reports.  Default: the one the estimate was fitted with
        (``estimate.mechanism``); another with a different channel on the domain is a ValueError.
    B : int >= 2
        Number of replicates, at most as many as keep the replicate histograms and their
        refits (``B x (outputs + values)`` doubles) under 4 GiB: 26,480 on 10^4 values under a
        window of 275.  The default interval (``kind="span"``) uses the replicates' mean and
        standard deviation, whose Monte Carlo error shrinks as ``B^-1/2``: at ``B = 100`` the
        standard deviation errs by about 7 % (5 % at 200), which costs a normal interval's coverage
        about 0.2 points (0.1 at 200).  Measured (``bench_coverage``, auto, the Laplace setting, 200
        repetitions, the span on the first 50 / 100 / all 200 replicates of the same bootstraps):
        over the 27 cells (eight statistics and the per-value average, three truths) coverage moved
        from ``B = 200`` to ``B = 100`` by -1.0 to +0.5 points (mean -0.2) and the mean widths by under
        1 % (but for the bimodal median as a domain value, 0.090 -> 0.105: its interval is a set of
        whole values); at ``B = 50`` by -1.5 to +1.0 points.  So the default is 100, half the refits of 200.
        The percentile kinds (``"basic"``, ``"percentile"``, and ``"hull"``, which holds both) read
        the 2.5 % and 97.5 % order statistics, which need more: ``B = 200`` or more for them.
    rng : None, int seed or numpy Generator
        Resampling randomness.  Simulation on already-privatized counts, with no
        privacy role: a seed makes the intervals reproducible.  ``None`` uses a
        fresh ``np.random.default_rng()``.
    smooth : int >= 1, optional
        EMS smoothing passes used for the estimate (default 1; the estimate does
        not record it).  A ValueError with another method.
    tol, max_iter
        Replicate stopping rule (see above) and cap on map evaluations (EM or EMS; the Newton
        finish of small channels has its own cap of ``mle._NEWTON_STEPS`` steps per replicate, and
        each of a straggler's solo runs another ``max_iter`` evaluations).
    precision : {"single", "double"}
        Arithmetic of the refits that are pure number crunching: ``auto``'s ``"em steps=t"``
        member on FFT products (``_fft_em.em_rows``: windows of 24 or more on channels of
        20,000 stored entries or more, where a single fit needs 200,000: the refits run on blocks of
        rows, which share the FFT's per-call cost) or dense ones, and the plain EM steps of its
        ``"em flow=T"`` member (dense).
        ``"single"`` (the default) runs their FFTs or matrix products and iterates in float32,
        1.6x faster; every other refit (the flow itself included), and every estimate, is in
        double whatever this says.  Dense: 100 values under the Gaussian design of (eps, delta,
        H) = (1, 1e-6, 10) (window 695), 10^6 reports, B = 200: ``"em steps=20000"`` 12.9 s against
        17.9 s in double, ``"em flow=20000"`` 9.3 s against 14.9 s; interval ends of the mean,
        variance, CDF and a range query moved by at most 3.3e-4 of their width, per-value ends by a
        median 1.3e-4-2.2e-4 and at most 2.4e-3 (57.8 s and 27.4 s in double before the blocks of
        ``_parallel.dense_step_blocks``).  A
        replicate is a Monte Carlo draw: with ``B = 200`` its 2.5 % and 97.5 % order statistics
        move by about a tenth of the replicate spread from draw to draw, and single precision moves
        them by far less.  Measured (10^4 values, a window of 275, ``em steps=1435``, 10^8 reports,
        the same 50 replicate histograms both ways): the mean, variance and CDF replicates differ by at
        most 0.4-0.6 % of their spread; per-value interval ends, on values above 1e-5 of the largest
        probability, by a median 3e-5 and at most 6e-4 of the interval's width, and on every value by
        at most 3e-7 in absolute probability (the FFT's roundoff relative to the largest entry).
        ``"double"`` reproduces the double-precision replicates.  The result's ``precision`` says
        which was used.
    relaxed : bool
        ``True`` (the default): ``auto``'s ``"em steps=t"`` refits with ``t >= 300``
        (``refits._RELAXED_MIN_STEPS``), and the plain steps of its ``"em flow=T"`` refits before the
        flow, integrate the EM flow ``d log p / dt = log g(p)`` (of which a plain step is the Euler step
        of length 1) to time ``t`` instead: 30 plain steps, then Runge-Kutta-Chebyshev steps of a tenth
        of the time reached (``solvers._em_chebyshev``; about 380 evaluations of ``g`` for ``t = 1379``,
        1,450 for 20,000).  Its refit of the estimate's own counts (``estimate.counts``), in double
        precision, must lie within 0.1 bootstrap standard deviations of the estimate (the member's plain
        steps, in double) on every value and CDF value (those whose deviation is at least 1e-3 of the
        largest) and on the mean; where it does not, about ``4 t / 7`` over-relaxed steps ``p <- p
        g(p)^(7/4)`` (each worth 7/4 of a plain step, ``solvers._em_run``) are checked the same way, and
        where neither passes, or without the counts, every replicate is refit with plain steps.
        Measured against plain steps on the same replicate histograms (B = 100): 10^4 values, a window
        of 275, ``em steps=1379``, 10^8 reports: 5.1-6.0 s against 9.2-10.4 s over-relaxed and 14.5 s
        plain, the interval ends of the mean, variance, CDF and a range query within 8e-4 of their width,
        per-value ends within 2 %; on 100 values (Laplace windows of 59 and 275, Gaussian window of 695),
        ``em steps=20000``: 0.5-0.8 s against 4.5-6.7 s plain.  ``False`` refits plain steps.  The result's
        ``relaxed`` and ``refit_steps`` say which ran.
    robust : bool
        ``False`` (the default): the intervals of the estimate's own bootstrap, which cover its
        regularized target (module docstring, "What the intervals cover").  ``True``, for a
        regularized estimate (``"ems"``, ``"inversion"``, or ``"auto"`` that chose a member other than
        the MLE): also fit the MLE (``method="em"``) on the estimate's report counts
        (``estimate.counts``), bootstrap it with the same ``B``, ``rng`` stream, ``max_iter`` and
        ``precision`` (its refits at their default ``tol``), and make every interval the hull of the
        two (:attr:`Bootstrap.reference`).  The point values stay the estimate's.  The MLE has no
        regularization bias to hide, so the hull holds where the truth is rougher than the estimate
        (heaped, rounded or spiky values), at the MLE's width, several times ``auto``'s on smooth
        data (module docstring; docs/estimation.md, "Real columns and robust intervals", has the table).  It costs
        the MLE's fit and bootstrap on top: 2-3 s on 100 values; on 10^4 values and 10^8 reports,
        minutes (275 s on one thread, against 0.5 s without).  For an MLE it changes nothing.

    Returns
    -------
    Bootstrap
    """
    # duck-typed: frequencies.py imports this module (FrequencyEstimate's methods call it)
    if not all(hasattr(estimate, a) for a in ("p", "values", "domain", "method", "n")):
        raise TypeError(f"estimate must be a FrequencyEstimate; got {type(estimate).__name__}")
    method, smooth, steps, weight = _refit_plan(estimate, smooth)
    robust = check_bool(robust, "robust")
    relaxed = check_bool(relaxed, "relaxed")
    B = check_int(B, "B", minimum=2)
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    if tol is None:
        tol = _REFIT_TOL.get(method, 0.0) if method not in ("em-steps", "em-flow", "em-time") else 0.0
    else:
        tol = check_positive(tol, "tol")
    if not isinstance(precision, str):
        raise TypeError(f"precision must be 'single' or 'double'; got {type(precision).__name__}")
    if precision not in ("single", "double"):
        raise ValueError(f"precision must be 'single' or 'double'; got {precision!r}")
    mechanism = mechanism_of(estimate, mechanism, "bootstrap")
    gen = simulation_generator(rng)
    model = model_for(estimate, mechanism)  # the fit's own, where the estimate kept it
    p_hat = np.asarray(estimate.p, dtype=float)
    if p_hat.shape != (model.k,):
        raise ValueError(f"estimate.p must have {model.k} entries for the domain {estimate.domain}; "
                         f"got {p_hat.shape}")
    most = max(2, _MAX_REPLICATE_BYTES // (8 * (model.m + model.k)))
    if B > most:
        raise ValueError(f"B must be an integer in [2, {most:,}] for this channel (B replicate histograms on "
                         f"{model.m:,} outputs and their refits on {model.k:,} values stay under 4 GiB); got {B:,}")
    n = int(estimate.n)
    counts = getattr(estimate, "counts", None)
    robust_mle = robust and method != "em"  # the MLE's fit and bootstrap are added (an MLE's own are enough)
    if robust_mle and counts is None:  # the MLE needs the report counts (checked before any work)
        raise ValueError("robust=True refits the MLE on the estimate's report counts, and this estimate "
                         "carries none (estimate_frequencies(..., return_info=True) keeps them)")
    if counts is not None:  # the estimate's own reports: they must be this mechanism's outputs on the domain
        counts = checked_counts(estimate, model)
    values = np.asarray(estimate.values)
    q_unscaled = np.asarray(model.unscaled().T @ p_hat).ravel()
    q_hat = np.maximum(q_unscaled, 0.0)
    q_hat /= q_hat.sum()
    C = gen.multinomial(n, q_hat, size=B).astype(float)
    with small_blas(model.k, model.m):
        P, conv, gaps, single, scheme = _refit_replicates(
            model, C, n, p_hat, method, smooth, weight, steps, tol, max_iter, single=precision == "single",
            counts=counts, values=values.astype(float), relaxed=relaxed, atoms=_refit_atoms(estimate, model.k))
    flow, is_mle = method == "em-flow", method == "em"
    if method in ("em-steps", "em-flow", "em-time"):
        method = "em"
    n_conv = int(conv.sum())
    if n_conv < B and flow:
        warnings.warn(f"{B - n_conv} of {B} bootstrap refits of the EM flow (to time {steps}) stopped early: "
                      "a Newton substep did not converge; those replicates stay at their last point",
                      RuntimeWarning, stacklevel=2)
    elif n_conv < B:
        how = ""
        if gaps is not None and method == "ems":  # say how far, against how far the replicates move
            dist, step = gaps[0, ~conv], gaps[1, ~conv]
            spread = float(np.median(0.5 * np.abs(P - p_hat).sum(axis=1)))
            far = (f"estimated TV distance to their fixed points: median {np.median(dist):.3g}, largest "
                   f"{dist.max():.3g}" if np.all(np.isfinite(dist)) else
                   "no estimate of their distance to their fixed points, as too few steps ran since the "
                   "solver's last switch or the last ones did not contract")
            how = (f" ({far}; their last steps moved them a median TV distance of {np.median(step):.3g}, and "
                   f"the replicates lie a median TV distance of {spread:.3g} from the estimate). Where EMS "
                   "contracts slowly a small step is no small distance, and replicates cut short stay near the "
                   "estimate, so the intervals come out too narrow: raise max_iter until they stop moving")
        elif gaps is not None:  # say how far: a certified gap of a few nats on n reports moves little
            left = gaps[~conv]
            how = (f" (certified log-likelihood gaps of those: median {np.median(left):.3g}, largest "
                   f"{left.max():.3g} nats, on {n:,} reports)")
        warnings.warn(f"{B - n_conv} of {B} bootstrap refits stopped at max_iter = {max_iter} before "
                      f"tol = {tol:g}{how}", RuntimeWarning, stacklevel=2)
    reference = None
    if robust_mle:
        from .frequencies import _DEFAULT_MAX_ITER, _DEFAULT_TOL, _fit  # here: frequencies imports this module

        with warnings.catch_warnings(record=True) as caught:  # said again below, as the robust part's
            warnings.simplefilter("always")
            with small_blas(model.k, model.m):  # estimate_frequencies(method="em") on the same counts
                mle = _fit(model, counts, "em", _DEFAULT_TOL["em"], _DEFAULT_MAX_ITER)
            reference = bootstrap(mle, mechanism, B=B, rng=gen, max_iter=max_iter, precision=precision)
        for w in caught:
            warnings.warn(f"robust=True, the MLE's fit or bootstrap: {w.message}", w.category, stacklevel=2)
    # (a domain of one value has nothing to spread: its zero width is exact, not a warning)
    if reference is None and model.k > 1 and float(np.ptp(P, axis=0).max()) <= _NO_SPREAD * float(np.max(P)):
        label = estimate.regularization or estimate.method
        why = (": EM's uniform start, which fits every replicate's counts as well" if label == "em steps=0"
               else "")
        # e.g. auto's "em steps=0": the uniform start already fits the counts, and fits every replicate
        advice = ("" if is_mle else " (where the estimate is regularized, it describes the regularized estimate, "
                  "not the truth); for intervals with sampling spread and without regularization bias, bootstrap "
                  "with robust=True (the CLI's --robust), which adds the MLE's")
        warnings.warn(f"the {B} bootstrap refits ({label}) are all the same distribution{why}; every interval "
                      f"has zero width and says nothing of the sampling error{advice}", RuntimeWarning, stacklevel=2)
    elif reference is None and model.k > 1 and counts is not None:
        _warn_if_narrower_than_the_reports(P, values, model, counts, n,
                                           estimate.regularization or estimate.method, is_mle)
    tv = getattr(estimate, "selection_tv", None)
    if reference is None and tv is not None and tv >= _AMBIGUOUS_TV:
        warnings.warn(ShapeWarning(
            f"auto's choice ({estimate.regularization}) lies up to TV {tv:.2g} from members held-out likelihood does "
            "not tell apart from it (selection_tv): the reports do not fix the shape at the kernel's scale, and the "
            "intervals of local statistics (frequencies, ranges, CDF values, quantiles) describe the chosen shape, "
            "not the truth's, and may miss; for those use estimate.profile(mechanism) or robust=True (the mean's "
            "and the variance's intervals are not affected)"), stacklevel=2)
    P.setflags(write=False)
    return Bootstrap(p=np.asarray(estimate.p), values=values, replicates=P, method=method, converged=n_conv,
                     precision="single" if single else "double", robust=robust, reference=reference,
                     relaxed=scheme not in ("", "plain"), refit_steps=scheme)


def _warn_if_narrower_than_the_reports(P, values, model, counts, n: int, label: str, is_mle: bool) -> None:
    """Warn when the replicates' means spread less than :data:`_NARROW_MEAN` times the report mean's standard
    error (``sd(Y) / sqrt(n)``, from the estimate's report counts).

    The report mean estimates ``E[X]`` with that standard error wherever the kernel is centred
    (``E[Y | x] = x``), and no estimate of the mean can be ten times as precise from the same reports
    unless something other than the data pins it: a regularized estimate that ignores what the reports
    say (EMS under a kernel much wider than the domain returns about the uniform distribution whatever
    the data) or an estimate on the boundary of the simplex (a point mass), whose parametric replicates
    cannot move off it.  Intervals of such a bootstrap under-cover (measured: mean intervals 0.0007 wide
    missing the truth by 0.4, 11 of 40 covering, where ``estimate_mean`` covered 39 of 40).

    The domain also pins the mean: no distribution on ``lo..hi`` puts it more than ``(hi - lo) / 2`` from
    the middle, so no replicates spread it by more.  Where that half-width is below the report mean's
    standard error (a window much wider than the domain, few reports) it is the reference instead: a
    bootstrap spreading the mean of 5 values by 1 is not narrow, though the reports' error is 50.
    """
    from .mean import _moments  # here: mean imports frequencies, which imports this module
    from .stats import _mean

    if n < 2:
        return
    _, var_reports = _moments(counts, (model.outputs - model.outputs[0]).astype(float), float(n))
    se = math.sqrt(max(var_reports, 0.0) / n)
    half = 0.5 * float(values[-1] - values[0])  # the largest standard deviation of any mean on the domain
    sd_boot = float(np.std(_mean(P, values)))
    if se > 0 and sd_boot < _NARROW_MEAN * min(se, half):
        where = ("" if is_mle else " (the estimate's regularization sets their width, not the data)")
        ref = (f"the report mean's standard error {se:.3g}" if se <= half else
               f"the domain's half-width {half:.3g} (the report mean's standard error is {se:.3g})")
        warnings.warn(f"the bootstrap's replicates ({label}) spread their mean by {sd_boot:.3g}, under a tenth of "
                      f"{ref}: its intervals are narrower than the reports "
                      f"support and may miss{where}; for the mean use estimate_mean (the CLI prints it), for "
                      "the other statistics bootstrap with robust=True (the CLI's --robust)",
                      RuntimeWarning, stacklevel=3)
