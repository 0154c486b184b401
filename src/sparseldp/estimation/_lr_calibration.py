r"""Whether the likelihood-ratio intervals' chi-square calibration holds, checked by simulation.

:meth:`.likelihood_ratio.Profile.calibration` answers, for one statistic, the question behind every
likelihood-ratio interval: how far below their maximum do reports fall, at the true value of the statistic?
Wilks' theorem says ``chi^2_1 / 2`` (1.92 nats at 95 %).  That needs the truth inside the simplex and few
parameters against the information; it fails where the channel cannot tell small masses on many values
from none (randomized response on hundreds of values with a concentrated truth: the maximum puts a little
mass on every empty value, and tens of nats separate it from any distribution without that mass; the
README's coverage section and ``docs/estimation.md`` have the case).

The check is a parametric bootstrap of the profile deficit

.. math::

    \Lambda(t) = \ell(\hat p_{\mathrm{MLE}}) - \max \{\ell(p) : p \in \Delta_k,\ h^T p = t\}

at the estimate's own value ``t0 = h^T p_hat``: ``B`` report histograms are drawn from ``p_hat``'s output
distribution, and each draw's deficit at ``t0`` (its own MLE, its own profile) is set against the
reports' (:meth:`._lr_search._Search.deficit`: the reports' within 0.25 nats, each draw's until it settles the
comparisons below).  If no draw comes as far from its
maximum as the reports do, the reports disfavour ``t0`` (a Monte Carlo test: ``p = 1 / (B + 1)``, exact at
``B + 1 = 1 / alpha`` were ``p_hat`` the truth).  If draws routinely sit many nats below their maximum at
``t0``, far more than ``chi^2_1 / 2`` allows, the interval's calibration fails for these reports.

Where the check fails, :meth:`.likelihood_ratio.Profile.calibrated_interval` calibrates a linear statistic's
interval by a parametric bootstrap test inversion at each end (:func:`_calibrated_end`): the draws come from the
*constrained* MLE at the end, not from the estimate.  Drawing from the estimate and using the draws' quantile
as the threshold was measured and dropped: on randomized response at eps 3 over 400 values (a geometric truth
of mean 19, 2 x 10^4 reports, 39 draws from ``auto``'s estimate per data set) it covered the true mean in 5 of
8 data sets, against 0 of 8 for the chi-square threshold: the deficit's law depends on how much of the
distribution sits on the simplex's boundary, and a regularized ``p_hat`` (mean 21-44 there) has none of it.
The test inversion covered in 20 of 20 on 100 values (``benchmarks/study_lr_calibration.py interval``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from statistics import NormalDist

from .._frozen import ReadOnlyArrays, frozen_array
from .._rng import simulation_generator
from ._lr_search import kappa_of
from ._parallel import concurrently, draw_threads

# A draw whose deficit exceeds this many nats would happen once in 10^4 draws were Wilks' chi^2_1 / 2 the law
# (7.57 nats): one such draw says the calibration fails for these reports.
_WILKS_FAILS = 0.5 * NormalDist().inv_cdf(1.0 - 0.5e-4) ** 2  # chi^2_1's 1 - 1e-4 quantile, halved
# So does a count of draws beyond the interval's own threshold whose binomial tail (at 1 - level) is below this:
# with 19 draws at 95 %, 6 or more (2.4e-4).  Both rules together: a false alarm in about 0.2 % of checks of 19 draws
# where Wilks holds.
_TAIL = 1e-3
# A threshold (nats) that every distribution on the domain meets in practice: an infinite critical value's stand-in
# for the searches.
_ANY = 1e6
# The reports' own deficit is bracketed this finely (nats; its lower end is the threshold the draws are set
# against, so a coarser one only makes "disfavoured" harder to reach): each tilted fit of a dense 400-value
# channel costs about 0.1 s, and a bracket of 0.05 took about 14 of them on randomized response by the secant over
# tilted fits alone (the one solve of the profile problem that comes first now, _lr_fits._Fits.deficit, closed
# such brackets with no tilted fit in the cases measured).
_OBSERVED_TOL = 0.25
# A calibrated end moves out while its draws' critical value exceeds its threshold by this factor or more
# (_calibrated_end).
_MOVE_SLACK = 1.05


@dataclass(frozen=True, eq=False)
class Calibration(ReadOnlyArrays):
    """The reports' profile deficit at the estimate's value of a statistic, against draws from the estimate.

    Attributes
    ----------
    statistic : str
        What was checked (``"mean"``, ``"var"``, ``"cdf"``, ``"range"``, ``"quantile"``).
    value : float
        ``t0``: the checked linear statistic's value under the estimate (for the variance, ``E (X - mean)^2``
        at the estimate's mean; for a quantile, the CDF at the estimate's quantile, a domain value).
    deficit : float
        The reports' ``Lambda(t0)``, nats: a lower bound within 0.25 of the exact value.
    draws : ndarray
        Each draw's ``Lambda(t0)``, upper bounds (as many as ran: fewer than ``B`` when ``sequential`` stopped;
        ``inf`` where no fit reached ``t0``); a draw at least :attr:`deficit` is an exceedance.
    draws_low : ndarray
        Their lower bounds, which :attr:`chi_square_fails` reads (each bracket searched until it settles the
        comparisons with :attr:`deficit`, 1.92 and 7.57 nats, or is within 0.05).
    B : int
        Draws asked for.
    level : float
        The level of the interval in question.
    sequential : bool
        Whether the draws stopped at the first that reached ``deficit`` (Besag and Clifford 1991: the same
        decision as all ``B``, at a fraction of the cost where the estimate is not disfavoured).
    """

    statistic: str
    value: float
    deficit: float
    draws: np.ndarray
    draws_low: np.ndarray
    B: int
    level: float
    sequential: bool

    def __post_init__(self):
        for name in ("draws", "draws_low"):
            object.__setattr__(self, name, frozen_array(np.asarray(getattr(self, name), dtype=float)))

    @property
    def kappa(self) -> float:
        """The chi-square threshold the likelihood-ratio interval uses: ``chi^2_1(level) / 2`` nats."""
        return kappa_of(self.level)

    @property
    def exceedances(self) -> int:
        """Draws at least as far from their maximum at ``value`` as the reports are."""
        return int(np.count_nonzero(self.draws >= self.deficit))

    @property
    def p_value(self) -> float:
        """The Monte Carlo p-value of ``value``: ``(1 + exceedances) / (B + 1)`` over all ``B`` draws; after a
        sequential stop at draw ``l``, ``1 / l`` (Besag and Clifford 1991)."""
        if self.sequential and self.exceedances:
            return 1.0 / self.draws.size
        return (1.0 + self.exceedances) / (self.draws.size + 1.0)

    @property
    def disfavoured(self) -> bool:
        """Whether the reports disfavour ``value`` at ``level``: ``p_value <= 1 - level``, which needs
        ``B >= 1 / (1 - level) - 1`` draws (19 at 95 %)."""
        return self.p_value <= 1.0 - self.level + 1e-12

    @property
    def beyond(self) -> int:
        """Draws more than :attr:`kappa` below their maximum at ``value`` (Wilks: ``1 - level`` of them)."""
        return int(np.count_nonzero(self.draws_low > self.kappa))

    @property
    def chi_square_fails(self) -> bool:
        """Whether the draws contradict Wilks' ``chi^2_1 / 2``, so that the likelihood-ratio intervals are too
        narrow for these reports: some draw more than 7.57 nats below its maximum at ``value`` (a 1-in-10^4
        event per draw), or more draws beyond :attr:`kappa` than a binomial tail of 10^-3 allows (6 of 19 at
        95 %).  Where Wilks holds, a false alarm in about 0.2 % of checks of 19 draws."""
        tail = _binomial_tail(self.beyond, self.draws.size, 1.0 - self.level)
        return bool(np.any(self.draws_low > _WILKS_FAILS) or tail < _TAIL)


def _binomial_tail(j: int, size: int, prob: float) -> float:
    """``P(Binomial(size, prob) >= j)``: a direct sum of the terms, each in log space (``size`` is the draws)."""
    if j <= 0:
        return 1.0
    lp, lq = math.log(prob), math.log1p(-prob)
    return min(1.0, math.fsum(math.exp(math.lgamma(size + 1) - math.lgamma(i + 1) - math.lgamma(size - i + 1)
                                       + i * lp + (size - i) * lq) for i in range(j, size + 1)))


def _linear(stat: str, p: np.ndarray, values: np.ndarray, kw: dict):
    """``(h, t0)``: the linear statistic that stands for ``stat`` and its value under ``p``."""
    from .stats import _check_point, _check_q, _check_range, _evaluate, _quantile

    v = values.astype(float)
    if not isinstance(stat, str):
        raise TypeError(f"stat must be a str (one of 'mean', 'var', 'quantile', 'cdf', 'range'); got "
                        f"{type(stat).__name__} {stat!r}")
    if stat not in ("mean", "var", "quantile", "cdf", "range"):
        raise ValueError("stat must be one of 'mean', 'var', 'quantile', 'cdf', 'range' for a calibration (one "
                         f"statistic at a time); got {stat!r}")
    _evaluate(stat, p, values, kw)  # the checks of the keywords
    for name, value in kw.items():
        if name != "method" and np.ndim(value) != 0:
            raise ValueError(f"{name} must be a single number for a calibration (one statistic at a time); got "
                             f"an array of shape {np.shape(value)}")
    if stat == "mean":
        h = v
    elif stat == "var":
        h = (v - float(p @ v)) ** 2
    elif stat == "cdf":
        h = (v <= float(_check_point(kw["x"], "x"))).astype(float)
    elif stat == "range":
        a, b = _check_range(kw["a"], kw["b"])
        h = ((v >= float(a)) & (v <= float(b))).astype(float)
    else:  # the CDF at the estimate's quantile (a domain value)
        x = float(_quantile(p, v, np.asarray(_check_q(kw["q"]), dtype=float)))
        h = (v <= x).astype(float)
    return h, float(p @ h)


def _output_distribution(model, p) -> np.ndarray:
    """The reports' distribution (the model's outputs) when the true values follow ``p``."""
    q = np.maximum(np.asarray(model.unscaled().T @ p).ravel(), 0.0)
    return q / q.sum()


def _draw_deficits(profile, q, h, value: float, gen, B: int, memo: dict, stop=None, **kw) -> list:
    """``B`` report sets drawn from ``q`` (``profile.n`` reports each, in order from ``gen``): the brackets of
    their profile deficits at ``h^T p = value`` (``kw``: :meth:`._lr_fits._Fits.deficit`'s), each draw's own
    MLE fitted first.  The draws run two at a time where the cores allow (:func:`._parallel.draw_threads`),
    each search starting from its own copy of ``memo`` (the tilt the reports' search ended at), so the brackets
    are the same however they are scheduled.  ``stop(bracket)``: the brackets end at the first for which it is
    true (the sequential test)."""
    from .likelihood_ratio import _search_of

    search = profile._search
    draws = [gen.multinomial(profile.n, q).astype(float) for _ in range(B)]

    def one(counts):
        return lambda: _search_of(profile._model, counts, profile.values, search._tol, search._max_iter,
                                  direct=True).deficit(h, value, memo=dict(memo), **kw)

    threads = draw_threads(profile._model)
    out = []
    for start in range(0, B, threads):
        for bracket in concurrently(*(one(c) for c in draws[start:start + threads]), threads=threads):
            out.append(bracket)
            if stop is not None and stop(bracket):
                return out
    return out


def _calibrate(profile, stat: str, level: float, B: int, rng, sequential: bool, kw: dict) -> Calibration:
    """:meth:`.likelihood_ratio.Profile.calibration`, its arguments checked."""
    gen = simulation_generator(rng)
    h, t0 = _linear(stat, profile.p, profile.values, kw)
    search = profile._search
    known = profile._deficits.get((h.tobytes(), t0))  # found by an earlier check of the same statistic
    if known is None:
        memo = {}  # each search starts at the tilt where the last one ended (the draws' are near the reports')
        deficit = search.deficit(h, t0, tol=_OBSERVED_TOL, memo=memo)[0]
        profile._deficits[(h.tobytes(), t0)] = (deficit, dict(memo))
    else:
        deficit, memo = known[0], dict(known[1])
    q = _output_distribution(profile._model, profile.p)
    settle = (deficit, kappa_of(level), _WILKS_FAILS)  # exceedances, beyond, chi_square_fails
    with search.blas():  # settling each comparison; the sequential test stops at the first exceedance
        brackets = _draw_deficits(profile, q, h, t0, gen, B, memo, decide=settle,
                                  stop=(lambda b: max(b) >= deficit) if sequential else None)
    draws = [max(hi, lo) for lo, hi in brackets]
    lows = [lo for lo, _ in brackets]
    return Calibration(statistic=stat, value=t0, deficit=float(deficit), draws=np.array(draws, dtype=float),
                       draws_low=np.array(lows, dtype=float), B=B, level=level, sequential=sequential)


@dataclass(frozen=True, eq=False)
class CalibratedInterval:
    """A likelihood-ratio interval whose threshold is calibrated by simulation at each end
    (:meth:`.likelihood_ratio.Profile.calibrated_interval`); unpacks as ``(low, high)``.

    Attributes
    ----------
    low, high : float
        The ends.
    kappa_low, kappa_high : float
        The thresholds (nats below the maximum) they sit at: the chi-square one where the draws do not exceed
        it, more where they do.
    rounds : int
        Rounds of ``B`` draws run, both ends together.
    """

    low: float
    high: float
    kappa_low: float
    kappa_high: float
    rounds: int

    def __iter__(self):
        return iter((self.low, self.high))


def _critical(draws: np.ndarray, level: float) -> float:
    """The Monte Carlo critical value: the ``ceil(level (B + 1))``-th smallest of ``B`` draws (the largest when
    ``B`` is too small for that order)."""
    d = np.sort(draws)
    return float(d[min(d.size, math.ceil(level * (d.size + 1))) - 1])


def _calibrated_end(profile, end_at, level: float, B: int, gen, max_rounds: int):
    """One end: ``(t, kappa, rounds)``.  ``end_at(kappa)`` gives the interval's end at a threshold and the test
    point it stands on, ``(t, h, value)``: ``h^T p = value`` is the hypothesis whose likelihood ratio puts the end
    there (for a linear statistic ``h`` itself at ``t``; for a quantile's end ``t``, the CDF at ``t`` equal to
    ``q``).  From the chi-square end, draw ``B`` report sets from the constrained MLE at the test point (the point
    the profile reaches there) and take the critical value ``kappa'`` of their deficits at it; while that exceeds
    the threshold the end sits at (by 5 % or more), move the end out to ``end_at(kappa')`` and draw again.  Stops
    at the first end whose own draws do not exceed its threshold: its test rejects it at about ``level`` or
    accepts it barely, so it is at or beyond the end of the inverted test."""
    search = profile._search
    kappa0 = kappa_of(level)
    kappa, rounds = kappa0, 0
    t, h, value = end_at(kappa)
    for _ in range(max_rounds):
        memo = {}  # the draws' searches start at the tilt this one ends at (the reports' constrained MLE)
        _, _, p = search.deficit(h, value, point=True, memo=memo)
        if p is None:  # the end is the statistic's extreme: nothing further out
            break
        q = _output_distribution(profile._model, p)
        draws = np.array([hi for _, hi in _draw_deficits(profile, q, h, value, gen, B, memo)])
        rounds += 1
        crit = max(_critical(draws, level), kappa0)
        if crit <= _MOVE_SLACK * kappa:
            break
        kappa = crit
        # a draw whose deficit no fit could bracket counts as infinite: the end goes to the statistic's extreme
        t, h, value = end_at(min(kappa, _ANY))
        if not math.isfinite(kappa):
            break
    return t, kappa, rounds


def _calibrated_interval(profile, stat: str, level: float, B: int, rng, max_rounds: int, kw: dict):
    """:meth:`.likelihood_ratio.Profile.calibrated_interval`, its arguments checked."""
    from .stats import _check_quantile_method

    gen = simulation_generator(rng)
    search = profile._search
    h, _ = _linear(stat, profile.p, profile.values, kw)  # the checks of stat and its keywords
    if stat == "quantile":
        q = float(kw["q"])
        interp = _check_quantile_method(kw.get("method", "inverted_cdf")) == "interpolated"
    if stat in ("quantile", "var"):
        ends = {}  # the ends at each threshold (one search gives both)

        def both(kappa):
            if kappa not in ends:
                ends[kappa] = search.var_ends(kappa) if stat == "var" else search.quantile_ends(q, kappa, interp)
            return ends[kappa]
    if stat == "var":  # tested through E (X - c)^2 at the estimate's mean c (h from _linear), a proxy
        def end_at(upper):
            return lambda kappa: (t := both(kappa)[1 if upper else 0], h, t)
    elif stat == "quantile":
        v = profile.values.astype(float)

        def end_at(upper):  # the quantile's end, and the CDF there equal to q
            return lambda kappa: (t := both(kappa)[1 if upper else 0], (v <= t).astype(float), q)
    else:
        def end_at(upper):
            return lambda kappa: (t := search.side(h, search.loglik - kappa, upper), h, t)
    with search.blas():
        lo, k_lo, r_lo = _calibrated_end(profile, end_at(False), level, B, gen, max_rounds)
        hi, k_hi, r_hi = _calibrated_end(profile, end_at(True), level, B, gen, max_rounds)
    return CalibratedInterval(low=float(lo), high=float(hi), kappa_low=float(k_lo), kappa_high=float(k_hi),
                              rounds=r_lo + r_hi)
