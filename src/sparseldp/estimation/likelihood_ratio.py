r"""Profile-likelihood intervals: what the reports alone pin down, with no smoothness assumed.

The bootstrap's intervals (:mod:`sparseldp.estimation.intervals`) describe a regularized
estimate's variability around its own target; where the kernel is wide against the truth's
structure that target is biased, and nothing the bootstrap sees shows it (its docstring has the
coverage).  The intervals here take nothing for granted but the model: a value ``theta`` of a
linear statistic ``h^T p`` is in the interval when some distribution ``p`` on the domain with
``h^T p = theta`` explains the report counts ``c`` nearly as well as the maximum-likelihood
estimate,

.. math::

    \mathrm{CI}(h) = \{\, h^T p \;:\; p \in \Delta_k,\ \ell(p) \ge \ell^* - \kappa \,\},
    \qquad \ell(p) = \sum_y c_y \log (Q^T p)_y ,\quad \kappa = \tfrac12 \chi^2_{1,\,\mathrm{level}},

the likelihood-ratio interval of the statistic (the profile likelihood, Wilks 1938; for positive
inverse problems the one-at-a-time strict bounds of Stark 1992 and Stanley, Patil and Kuusela
2022).  ``kappa`` is 1.92 nats at level 0.95.  The set is convex (``ell`` is concave), so each end
of a linear statistic is a convex problem: ``mean``, ``cdf``, ``range``, each frequency ``p``; the
quantiles invert the CDF's interval (Woodruff 1952), as the bootstrap does.  The variance is not
linear, but it is the least of the linear statistics ``E_p (X - c)^2`` over ``c``: its upper end is
the least upper end of those (weak duality, tight by Sion's minimax theorem), and its lower end the
least lower end over ``c`` in the mean's interval, bounded between the points of a grid there by the
curvature of ``c -> E_p (X - c)^2`` (``_lr_search._Search.var_ends``).

How an end is computed, and which way it errs
---------------------------------------------
For ``h`` rescaled to ``[0, 1]`` and ``0 <= beta < 1``, with ``w = 1 - beta h``, the *tilted*
problem ``M(beta) = max_{p'} sum_y c_y log (B^T p')_y`` over the simplex, ``B = diag(1 / w) A``,
is an MLE on a row-scaled channel (``mle._mle`` solves it and its certificate bounds ``M``).  For
any ``p`` on the simplex, ``p' = w p / (w^T p)`` gives ``ell(p) - n log(1 - beta h^T p) <= M(beta)``,
so every ``p`` of the set above has

.. math::

    h^T p \;\le\; U(\beta) = \bigl(1 - e^{(L_0 - M(\beta)) / n}\bigr) / \beta ,
    \qquad L_0 = \ell(\hat p_{\mathrm{MLE}}) - \kappa \le \ell^* - \kappa ,

for *every* ``beta``: ``M(beta)`` is replaced by the tilted fit's log-likelihood plus its
certified gap, and ``L_0`` uses the MLE's attained likelihood, which is below the maximum, so the
set bounded is never smaller than the interval's.  :meth:`Profile.interval` returns the smallest
``U`` over the ``beta`` tried (a root search for the ``beta`` whose tilted fit sits on the set's
boundary, where ``U`` equals the statistic there up to the certified gaps): **an outer bound of
the exact likelihood-ratio interval**, wider by about ``(r + gap) se / 2`` with ``r`` the
boundary miss (at most :data:`_BOUNDARY_TOL` nats) and ``gap`` the tilted fit's certificate.  The
lower end is ``1 - U`` of ``1 - h``.

Coverage and width
------------------
The likelihood-ratio interval covers with probability about ``level`` where the truth is inside
the simplex and the statistic is identified (the mean: 95.0-96.5 % in 200 repetitions per truth
under the Laplace setting of ``benchmarks/bench_coverage.py``, 93.5-95.0 % under its
Gaussian one, at the width of ``estimate_mean``'s; the variance 91.0-96.5 %, below the band on
concentrated truths, where the MLE's tail-weighted statistics vary about 10 % more than the
likelihood's curvature says: the bootstrap's interval is the reference for it), and more where
positivity binds or the reports cannot resolve the statistic (ranges, CDF values, quantiles and single frequencies:
95.5-100 % in every cell measured, real heaped columns included): there it is wide because the
data are.  ``bench_coverage.py auto-profile`` measures it; the README ("Intervals", under
"Estimating from reports") has the table.  Under the Gaussian design of (1, 1e-6, 5) (sigma 21.1 on 0..99) and
10^5 reports, the range query ``P(30 <= X <= 50)`` of the smooth truth is pinned down only to
an interval about 0.9 wide: distributions that far apart explain the reports within ``kappa``
of the best, and the bootstrap's much narrower intervals there come from the estimate's
smoothness, not from the reports.  It is a one-at-a-time interval, not simultaneous over
statistics, and the chi-square calibration is not guaranteed where positivity binds (Batlle
et al. 2023 give counterexamples; randomized response on 100-400 values with a concentrated truth is one:
the mean's interval missed in 8 of 8 data sets).  :meth:`Profile.calibration` checks it by simulation for one
statistic (:mod:`._lr_calibration`): whether the reports disfavour the estimate's value, and whether report
sets drawn from the estimate sit further below their maximum than ``chi^2_1 / 2`` allows.

Cost: a tilted fit per ``beta``, two to twelve per end as measured (the first guess from the
statistic's naive standard error, then the secant); each probe of a quantile's search (does a CDF value's
outer end reach ``q``?) is first settled by one interior-point solve of the profile problem at ``q``
(``_lr_fits._Fits._profile_point``: the CDF value held at ``q``, its multiplier giving the tilt whose bound
decides), which leaves a tilted fit for few probes; 0.01-0.3 s per statistic on 100 values,
0.2-0.9 s on 1,000 under the Laplace window of 137, about 10-20 s on 10^4 values under a window
of 275 (the interior point's banded Cholesky, its Gram by FFT: ``model.gram_band``; the two ends
run side by side there).  Under Gaussian windows wide against the domain the interior point solves
its systems through the channel's low-rank factor (``_ipm._low_rank_of``): the default statistics
(mean, variance, three quantiles, a range) on 1,000 values took 7.1 s under the window of 349 and
5.0 s under that of 695 (10^5-10^6 reports), against 36 s and 124 s by the Cholesky and the
quantiles' former bisection.  ``stat="p"`` asks for ``2 k`` ends (those whose lower end is the MLE's
zero are free), each search starting at its neighbour's tilt: 2-3 s on 100 values, 3 minutes
on 1,000 under the window of 137.  :func:`modelled_seconds` predicts the cost of a set of statistics
before any fit (a model of the iterations, not a clock; ``sparseldp estimate`` prints the intervals
unasked where it is at most 10 s).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from .._frozen import ReadOnlyArrays, frozen_array
from .._validation import check_int, check_positive
from ._ipm import _band_width, _ipm, _ipm_affordable, _low_rank_of, _model_seconds
from ._lr_calibration import CalibratedInterval, Calibration
from ._lr_search import _Search, kappa_of
from .mle import _certificate
from .model import checked_counts, mechanism_of, model_for
from .replicates import _check_level
from .stats import _check_point, _check_q, _check_quantile_method, _check_range, _evaluate, _scalar

__all__ = ["CalibratedInterval", "Calibration", "Profile", "modelled_seconds", "profile"]


@dataclass(frozen=True, eq=False)
class Profile(ReadOnlyArrays):
    """The likelihood of the report counts around their MLE, and intervals from it.

    Attributes
    ----------
    p : ndarray (k,)
        The estimate the intervals are attached to (its point values are this ``p``'s).
    values : ndarray (k,)
        The domain values.
    mle : ndarray (k,)
        The maximum-likelihood estimate of the same counts.
    loglik : float
        Its log-likelihood (on the column-scaled outputs: only differences matter).
    gap : float
        Its certified gap to the maximum (nats).
    n : int
        Number of reports.
    """

    p: np.ndarray
    values: np.ndarray
    mle: np.ndarray
    loglik: float
    gap: float
    n: int
    method: str = field(default="profile")
    _search: _Search = field(default=None, repr=False, compare=False)  # the ends (_lr_search)
    _model: object = field(default=None, repr=False, compare=False)  # the channel (draws of calibration())
    # the reports' own deficits found by calibration(), by statistic and value: a second check of the same
    # statistic (the CLI's routine check, then its test of the estimate) does not search them again
    _deficits: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        for name in ("p", "values", "mle"):
            object.__setattr__(self, name, frozen_array(getattr(self, name)))

    def point(self, stat: str, **kw):
        """The statistic of the estimate (``stat`` and keywords as in :meth:`interval`)."""
        return _scalar(_evaluate(stat, self.p, self.values, kw))

    # -- statistics ----------------------------------------------------------------------
    def interval(self, stat: str, level: float = 0.95, *, kind: str | None = None, **kw):
        """The likelihood-ratio interval of a linear statistic at ``level`` (an outer bound: module docstring).

        Parameters
        ----------
        stat : {"mean", "var", "quantile", "cdf", "range", "p"}
            With keywords as in :meth:`Bootstrap.interval` (``q=`` and ``method=``, ``x=``, ``a=, b=``).
            Quantiles invert the CDF's interval (ends found by a safeguarded secant search on the CDF bounds, which are
            monotone); ``"p"`` gives every frequency's (``2 k`` ends); ``"var"`` is bounded through the
            linear statistics ``E_p (X - c)^2`` (module docstring), also an outer bound.
        level : float in (0, 1)
        kind : None or "profile"
            Accepted for the signature of :meth:`Bootstrap.interval`; there is one kind.

        Returns
        -------
        (lo, hi) : floats, or arrays of the statistic's shape.
        """
        level = _check_level(level)
        if kind is not None and not isinstance(kind, str):
            raise TypeError(f"kind must be None or 'profile' for a Profile; got {type(kind).__name__} {kind!r}")
        if kind is not None and kind != "profile":
            raise ValueError(f"kind must be None or 'profile' for a Profile; got {kind!r}")
        _evaluate(stat, self.p, self.values, kw)  # the checks of stat and its keywords
        with self._search.blas():  # small channels: BLAS in one thread (_parallel.small_blas)
            return self._ends(stat, kappa_of(level), kw)

    def _ends(self, stat: str, kappa: float, kw: dict):
        """:meth:`interval`'s ends, its arguments checked (``kappa``: the nats below the maximum)."""
        v = self.values.astype(float)
        if stat == "mean":
            return self._search.ends(v, kappa)
        if stat == "var":
            return self._search.var_ends(kappa)
        if stat == "cdf":
            x = _check_point(kw["x"], "x")
            out = [self._search.ends((v <= xi).astype(float), kappa) for xi in np.ravel(x)]
            return self._shaped(out, np.shape(x))
        if stat == "range":
            a, b = _check_range(kw["a"], kw["b"])
            out = [self._search.ends(((v >= ai) & (v <= bi)).astype(float), kappa) for ai, bi in zip(np.ravel(a), np.ravel(b))]
            return self._shaped(out, np.shape(a))
        if stat == "p":
            return self._search.each_value(kappa)
        q = _check_q(kw["q"])
        interp = _check_quantile_method(kw.get("method", "inverted_cdf")) == "interpolated"
        out = [self._search.quantile_ends(float(qi), kappa, interp) for qi in np.ravel(q)]
        return self._shaped(out, np.shape(q))

    def calibration(self, stat: str, level: float = 0.95, *, B: int | None = None, rng=None,
                    sequential: bool = False, **kw):
        """Whether the reports disfavour the estimate's value of a statistic, and whether the interval's
        chi-square calibration holds for these reports, checked by simulation (:mod:`._lr_calibration`).

        ``B`` report histograms are drawn from the estimate (``p``) through the channel; each draw's profile
        deficit at the estimate's value is set against the reports'.  Costs ``B`` MLE fits and profile
        searches; ``sequential`` stops at the first draw that reaches the reports' deficit (the same decision).

        Parameters
        ----------
        stat : {"mean", "var", "quantile", "cdf", "range"}
            With a single ``q=``, ``x=`` or ``a=, b=`` (as in :meth:`interval`).  The variance is checked
            through ``E (X - c)^2`` at the estimate's mean ``c``, a quantile through the CDF at the estimate's
            quantile (a domain value).
        level : float in (0, 1)
        B : int >= 1, optional
            Draws (default ``ceil(1 / (1 - level)) - 1``: 19 at 95 %, the fewest that can reject at ``level``).
        rng : None, int seed or numpy Generator
            Simulation only (on privatized counts): ``None`` is operating-system entropy.

        Returns
        -------
        Calibration
            ``.disfavoured``, ``.p_value``, ``.chi_square_fails``, ``.deficit``, ``.draws``.
        """
        from ._lr_calibration import _calibrate

        level = _check_level(level)
        if B is None:
            B = max(1, math.ceil(1.0 / (1.0 - level) - 1e-9) - 1)
        B = check_int(B, "B", minimum=1)
        if not isinstance(sequential, bool):
            raise TypeError(f"sequential must be a bool; got {type(sequential).__name__} {sequential!r}")
        if self._model is None:
            raise ValueError("calibration needs the channel the profile was computed on; use profile(...)")
        return _calibrate(self, stat, level, B, rng, sequential, kw)

    def calibrated_interval(self, stat: str, level: float = 0.95, *, B: int = 39, rng=None, max_rounds: int = 8,
                            **kw):
        """The likelihood-ratio interval of a statistic (not every value's) with its threshold calibrated by
        simulation at each end, where the chi-square one fails (:attr:`Calibration.chi_square_fails`): a
        parametric bootstrap test inversion (:mod:`._lr_calibration`).

        At each end ``t`` (from the chi-square one outwards), ``B`` report sets are drawn from the constrained MLE
        at ``t`` and the Monte Carlo critical value of their profile deficits at ``t`` replaces the threshold
        while it is larger (the end then moves out and the draws are repeated, at most ``max_rounds`` times per
        end).  Never narrower than :meth:`interval`.  Measured on randomized response (eps 3, 100 values, a
        geometric truth, 5,000 reports): the mean's covered in 20 of 20 repetitions where the chi-square
        interval's did in 0, at twice its width, 3.4 s each; where Wilks holds (the Laplace and Gaussian designs
        on 100 values) 1.04-1.09 times its width (``benchmarks/study_lr_calibration.py interval``).

        Parameters
        ----------
        stat : {"mean", "cdf", "range", "quantile", "var"}
            With ``x=``, ``a=, b=`` or ``q=`` (and ``method=``) (single numbers).  A quantile's end stands on the
            hypothesis that the CDF at it is ``q``: that is what is tested at each end.  The variance's ends are
            tested through ``E (X - c)^2`` at the estimate's mean ``c`` (a proxy: the two differ by the squared
            distance of the means).
        level : float in (0, 1)
        B : int >= 1
            Draws per round (the critical value is the ``ceil(level (B + 1))``-th smallest: 38th of 39 at 95 %).
        rng : None, int seed or numpy Generator
            Simulation only (on privatized counts): ``None`` is operating-system entropy.
        max_rounds : int >= 1
            Rounds of draws per end at most.

        Returns
        -------
        CalibratedInterval
            Unpacks as ``(low, high)``; ``kappa_low``, ``kappa_high``: the thresholds the ends sit at.
        """
        from ._lr_calibration import _calibrated_interval

        level = _check_level(level)
        B = check_int(B, "B", minimum=1)
        max_rounds = check_int(max_rounds, "max_rounds", minimum=1)
        if self._model is None:
            raise ValueError("calibrated_interval needs the channel the profile was computed on; use profile(...)")
        return _calibrated_interval(self, stat, level, B, rng, max_rounds, kw)

    @staticmethod
    def _shaped(out, shape):
        lo = np.array([a for a, _ in out], dtype=float).reshape(shape)
        hi = np.array([b for _, b in out], dtype=float).reshape(shape)
        return _scalar(lo), _scalar(hi)


# What the searches cost, as a multiple of one interior-point iteration's modelled time on the estimate's counts
# (_ipm._ipm_seconds, the reference machine): the mean's, variance's, three quantiles' and a range query's
# intervals (`sparseldp estimate`'s default statistics) took 136-990 of them in all under Laplace windows of
# 83-275 on 100-10^4 values, 387-2,270 under Gaussian windows of 209 and 349 on 100-1,000 values (10^5 reports
# of a bimodal truth, one BLAS thread, 2026-11-30; warm starts pay under Laplace kernels only:
# _lr_search._Search._tilted).  Per statistic, in the same runs, the variance took about three times the mean,
# a quantile four times, a range query about one and a half.  With the quantiles' secant search
# (_lr_search._first_reaching, later that day): 620-748 under the Laplace windows of 83 and 137 on 1,000-3,000
# values, 1,513-2,428 under Gaussian windows of 209-695 on 100-3,000 (the constants were kept: at most 1.5
# times what was measured, below 1 where the low-rank factor's fixed costs dominate).
_DEFAULT_ITERATIONS = {"laplace": 1000.0}
_OTHER_ITERATIONS = 2500.0
_STAT_WEIGHTS = {"mean": 1.0, "var": 3.0, "quantile": 4.0, "range": 1.5, "cdf": 1.5}
_DEFAULT_WEIGHT = 1.0 + 3.0 + 3 * 4.0 + 1.5
# Every value's interval ("p": 2 k searches, each warm-started where its neighbour's ended) costs the default
# statistics' time times (k / _EACH_VALUE_SCALE)^1.5.  Measured (2026-11-30, nineteenth session; 10^5 reports of a
# bimodal truth, one BLAS thread) against the default statistics' modelled time on 100 / 200 / 300 values: 1.4 /
# 4.5 / 8.4 times under the Laplace designs of (1, 1e-6, 5) and 1.1 / 4.3 / 9.0 under (1, 1e-6, 10); 1.0 / 3.0 / 6.6
# and 1.0 / 2.8 / 5.4 under the Gaussian ones (the model: 1.6 / 4.5 / 8.3).
_EACH_VALUE_SCALE = 73.0


def _check_estimate(estimate) -> None:
    if not all(hasattr(estimate, a) for a in ("p", "values", "domain", "n")):
        raise TypeError(f"estimate must be a FrequencyEstimate; got {type(estimate).__name__}")


def _needs_counts(estimate, caller: str) -> None:
    if getattr(estimate, "counts", None) is None:
        raise ValueError(f"{caller} needs the estimate's report counts, and this estimate carries none "
                         "(estimate_frequencies keeps them)")


def modelled_seconds(estimate, mechanism=None, statistics=("mean", "var", "quantile", "quantile", "quantile",
                                                             "range")) -> float:
    """How long :func:`profile` and the likelihood-ratio intervals of ``statistics`` would take on ``estimate``'s
    report counts, modelled, without running a fit: seconds on the reference machine (2 cores, one BLAS
    thread), one interior-point iteration's cost on the channel (``_ipm._model_seconds``) times the
    iterations the searches took as measured (:data:`_DEFAULT_ITERATIONS`).  A count, not a clock: the same
    input gives the same number on any machine.  On the channels of ``benchmarks/bench_estimation.py``'s row
    (Laplace windows of 83 and 137 on 1,000-3,000 values, Gaussian windows of 349 and 695 on 300-2,000, the
    latter through the low-rank factor) it was 0.95-1.5 times what they took; before the quantiles' secant
    search and the factor (300 values and more) 0.99-2.4 times, and on smaller domains, where fixed costs
    dominate, up to 7 times.

    ``statistics``: one name per interval, each of ``"mean"``, ``"var"``, ``"quantile"``, ``"range"``,
    ``"cdf"``, or ``"p"`` for every value's (default: ``sparseldp estimate``'s mean, variance, three quantiles
    and a range query).  ``sparseldp estimate`` prints the intervals unasked where this is at most 10 s, and
    with ``--plot`` draws every value's where that is too."""
    allowed = ", ".join(map(repr, (*_STAT_WEIGHTS, "p")))
    if isinstance(statistics, str):
        statistics = (statistics,)
    if not isinstance(statistics, (list, tuple)) or not all(isinstance(name, str) for name in statistics):
        raise TypeError(f"statistics must be a name or a list of names of {allowed}; got {statistics!r}")
    if not statistics:
        raise ValueError(f"statistics must name at least one of {allowed}; got an empty list")
    for name in statistics:
        if name not in _STAT_WEIGHTS and name != "p":
            raise ValueError(f"statistics must name {allowed}; got {name!r}")
    _check_estimate(estimate)
    _needs_counts(estimate, "modelled_seconds")
    mech = mechanism_of(estimate, mechanism, "profile")
    model = model_for(estimate, mech)
    per = _model_seconds(model, int(np.count_nonzero(checked_counts(estimate, model))))
    each = _DEFAULT_WEIGHT * (estimate.p.size / _EACH_VALUE_SCALE) ** 1.5
    weight = sum(each if name == "p" else _STAT_WEIGHTS[name] for name in statistics)
    iterations = _DEFAULT_ITERATIONS.get(getattr(mech, "family", None), _OTHER_ITERATIONS)
    return per * iterations * weight / _DEFAULT_WEIGHT


def profile(estimate, mechanism=None, *, tol: float = 0.01, max_iter: int = 50_000) -> Profile:
    """The profile likelihood of an estimate's report counts: likelihood-ratio intervals for its statistics.

    Parameters
    ----------
    estimate : FrequencyEstimate
        Any method; it must carry its report counts (``estimate.counts``, which
        :func:`~sparseldp.estimation.estimate_frequencies` keeps).  Its ``p`` gives the point values.
    mechanism : SparseLaplace, SparseGaussian or SparseChannel, optional
        The mechanism the estimate was fitted with (default: ``estimate.mechanism``, which
        :func:`~sparseldp.estimation.estimate_frequencies` records; another channel is a ValueError).
    tol : float > 0
        Certified gap (nats) of the MLE and of every tilted fit (module docstring: it widens an end by
        about ``tol se / 2``).
    max_iter : int >= 1
        Cap on each fit's EM evaluations.

    Returns
    -------
    Profile
        Use as ``est.range(a, b, ci=prof)`` or ``prof.interval("cdf", x=60)``.
    """
    _check_estimate(estimate)
    tol = check_positive(tol, "tol")
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    _needs_counts(estimate, "profile")
    model = model_for(estimate, mechanism_of(estimate, mechanism, "profile"))
    counts = checked_counts(estimate, model)
    n = int(estimate.n)
    mle_already = getattr(estimate, "method", None) == "em" or getattr(estimate, "regularization", None) == "em mle"
    mle = None
    if mle_already and float(getattr(estimate, "gap", math.inf)) <= tol:
        mle = np.asarray(estimate.p, dtype=float)  # an MLE already, certified within tol
    values = np.asarray(estimate.values)
    search = _search_of(model, counts, values, tol, max_iter, mle)
    return Profile(p=np.asarray(estimate.p, dtype=float), values=values, mle=search.mle, loglik=search.loglik,
                   gap=_certificate(search._A, search._c, search._AT @ search.mle, n), n=n, _search=search,
                   _model=model)


def _search_of(model, counts, values, tol: float, max_iter: int, mle=None, direct: bool = False) -> _Search:
    """The profile search of the report ``counts`` (all outputs) on ``model``, its MLE fitted unless given: with
    ``direct``, by the interior point from the uniform start where an iteration is affordable (``mle._mle`` runs
    EM first, which certifies the easy cases, and costs most where it does not: the calibration's draws), by
    ``mle._mle`` where that does not converge or is not affordable."""
    obs = np.flatnonzero(counts > 0)
    c = counts[obs]
    A, AT = model.columns(obs)
    low_rank = _low_rank_of(model, obs)  # wide smooth kernels: the interior point's systems through a factor
    # else the banded Gram by FFT (window channels), for the interior point's steps
    band = None if low_rank is not None else model.gram_band(obs)
    width = 0 if model.dense else _band_width(A)
    affordable = low_rank is not None or _ipm_affordable(model.k, obs.size, bool(model.dense), width)
    if mle is None and direct and affordable:
        p, _, conv, _ = _ipm(A, AT, c, float(counts.sum()), tol, bool(model.dense), band, low_rank=low_rank)
        mle = p if conv else None
    if mle is None:
        from .frequencies import _fit  # here: frequencies imports this module

        with warnings.catch_warnings():  # an uncertified MLE only loosens the bounds (L0 uses its likelihood)
            warnings.simplefilter("ignore")
            mle = np.asarray(_fit(model, counts, "em", tol, max_iter).p, dtype=float)
    return _Search(A, AT, c, int(round(float(counts.sum()))), values, mle, bool(model.dense), tol, max_iter, width,
                   band, low_rank)
