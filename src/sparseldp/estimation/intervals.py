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
  Under a far wider kernel (the Gaussian design, sigma 21.1, smooth truth)
  it undercovers a range query (91.0 %), where the hull gives 93.0 %;
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
auto's own on the same repetitions (README, "Estimating from reports"): on
the health index 92.5-96.5 % for ranges, the CDF, quantiles and frequencies
(auto's 13-69 %), on doctor visits 91.5-98 % (77.5-94.5 %); on smooth truths
it over-covers (98-100 %) at 3.6-6.4 times auto's width (18-30 times for
single frequencies), and where auto chose the MLE it costs nothing.

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

import dataclasses
import warnings
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from .._rng import simulation_generator
from .._validation import check_bool, check_int, check_positive, check_probability
from ._parallel import small_blas
from .model import _model
from .refits import _REFIT_TOL, _refit_plan, _refit_replicates
from .stats import (_CDF_SLACK, _STATS, _cdf, _check_point, _check_q, _check_quantile_method, _check_range, _cum,
                    _edges, _mean, _quantile, _quantile_interp, _range, _reaching, _scalar, _var)

__all__ = ["Bootstrap", "bootstrap", "statistic"]

_KINDS = ("span", "hull", "basic", "percentile")
# Grid points per cell where an interpolated quantile's interval crosses (Bootstrap._interp_inverted):
# its ends are rounded outwards by at most 1/256 of a cell.
_CELL_GRID = 257
# Replicates whose every frequency spreads by at most this much (relative to the largest) are "all the same"
# (bootstrap warns: its intervals have zero width).
_NO_SPREAD = 1e-12
_KINDS_TEXT = ", ".join(map(repr, _KINDS[:-1])) + f" or {_KINDS[-1]!r}"


@dataclass(frozen=True)
class Bootstrap:
    """Replicate distributions of a parametric bootstrap, and intervals from them.

    Attributes
    ----------
    p : ndarray (k,)
        The estimate the bootstrap is centred on (``FrequencyEstimate.p``).
    values : ndarray (k,)
        The domain values ``lo..hi``.
    replicates : ndarray (B, k)
        Refitted distributions, one per replicate histogram (read-only).
    method : str
        The estimator refitted ("em", "ems" or "inversion"; for an ``"auto"``
        estimate, the member it chose).
    converged : int
        How many replicate refits met their (looser) tolerance; for auto's
        ``"em flow=T"`` member, how many were integrated to time ``T``.
    precision : str
        "single" where the refits ran their FFT products in single precision
        (``bootstrap``'s ``precision``), else "double".
    robust : bool
        Whether the intervals are robust to regularization bias (``bootstrap(..., robust=True)``).
    reference : Bootstrap or None
        With ``robust`` and a regularized estimate: the MLE's own bootstrap (its ``p`` the MLE of
        the same report counts).  Every interval is then the hull of this bootstrap's and the
        reference's, of the same kind.  ``None`` otherwise (an MLE's bootstrap is its own reference).
    """

    p: np.ndarray
    values: np.ndarray
    replicates: np.ndarray
    method: str
    converged: int = field(default=0)
    precision: str = field(default="double")
    robust: bool = field(default=False)
    reference: Bootstrap | None = field(default=None, repr=False, compare=False)

    @property
    def B(self) -> int:
        return int(self.replicates.shape[0])

    def _stat(self, stat: str, P: np.ndarray, kw: dict):
        if not isinstance(stat, str):
            raise TypeError(f"stat must be one of {', '.join(map(repr, _STATS))}; got {type(stat).__name__}")
        if stat not in _STATS:
            raise ValueError(f"stat must be one of {', '.join(map(repr, _STATS))}; got {stat!r}")
        need = {"mean": (), "var": (), "p": (), "quantile": ("q",), "cdf": ("x",), "range": ("a", "b")}[stat]
        optional = ("method",) if stat == "quantile" else ()
        if not set(need) <= set(kw) <= set(need) | set(optional):
            raise TypeError(f"stat={stat!r} takes keyword arguments {need + optional or 'none'}; "
                            f"got {tuple(kw) or 'none'}")
        v = self.values
        if stat == "mean":
            return _mean(P, v)
        if stat == "var":
            return _var(P, v)
        if stat == "p":
            return P
        if stat == "quantile":
            if _check_quantile_method(kw.get("method", "inverted_cdf")) == "interpolated":
                return _quantile_interp(P, v, _check_q(kw["q"]))
            return _quantile(P, v, _check_q(kw["q"]))
        if stat == "cdf":
            return _cdf(P, v, _check_point(kw["x"], "x"))
        a, b = _check_range(kw["a"], kw["b"])
        return _range(P, v, a, b)

    def point(self, stat: str, **kw):
        """The statistic of the estimate itself (``stat`` and keywords as in :meth:`interval`)."""
        return _scalar(self._stat(stat, self.p, kw))

    def distribution(self, stat: str, **kw) -> np.ndarray:
        """The statistic on each replicate: shape ``(B,) + shape of the statistic``."""
        return self._stat(stat, self.replicates, kw)

    @staticmethod
    def _ends(t, tb, alpha, kind):
        if kind == "span":
            z = NormalDist().inv_cdf(1.0 - alpha)
            b = tb.mean(axis=0) - t
            se = tb.std(axis=0, ddof=1) if tb.shape[0] > 1 else np.zeros_like(b)
            return np.minimum(t, t - b) - z * se, np.maximum(t, t - b) + z * se
        # "lower"/"higher": order statistics, no interpolation (conservative by at most one
        # replicate; below the Monte Carlo error of B = 200)
        lo_q = np.quantile(tb, alpha, axis=0, method="lower")
        hi_q = np.quantile(tb, 1.0 - alpha, axis=0, method="higher")
        if kind == "percentile":
            return lo_q, hi_q
        if kind == "basic":
            return 2.0 * t - hi_q, 2.0 * t - lo_q
        return np.minimum(lo_q, 2.0 * t - hi_q), np.maximum(hi_q, 2.0 * t - lo_q)  # "hull" of the two

    def _cdf_ends(self, alpha: float, kind: str):
        """The CDF at the ``k + 1`` cell edges (0 first) for the estimate and each replicate, and its
        interval of ``kind`` there: ``(F, Fb, lo, hi)``, unclipped."""
        F = np.concatenate([[0.0], _cum(self.p)])
        Fb = np.concatenate([np.zeros((self.B, 1)), _cum(self.replicates)], axis=1)
        return (F, Fb) + tuple(self._ends(F, Fb, alpha, kind))

    def _interp_inverted(self, qf: np.ndarray, alpha: float, kind: str):
        r"""Interpolated-quantile intervals by inverting the band of the interpolated CDF.

        In the cell ``[e_x, e_{x+1}]`` of value ``x`` the grouped-data CDF is
        ``F(t) = F(x - 1) + u p_x`` with ``u = (t - e_x) / (e_{x+1} - e_x)``, linear in
        ``(F(x - 1), p_x)``, so its interval (of ``kind``) at any ``t`` comes from the
        replicates' ``F*(x - 1) + u p*_x``.  The interval for the ``q``-quantile is
        ``[first t with hi(t) >= q, last t with lo(t) <= q]`` (Woodruff 1952): it
        misses the true quantile ``t*`` (``F(t*) = q``) only where the CDF's
        interval at ``t*`` misses ``F(t*)``, so it covers as the CDF's does.  The
        crossing cell is found on the cell edges (the CDF's interval at each value)
        and the crossing inside it on a grid of :data:`_CELL_GRID` points, rounded
        outwards (wider by at most one grid step).
        """
        e = _edges(self.values)
        k = self.values.size
        F, Fb, flo, fhi = self._cdf_ends(alpha, kind)
        u = np.linspace(0.0, 1.0, _CELL_GRID)
        lo_out, hi_out = np.empty(qf.size), np.empty(qf.size)

        def band(x):  # the interval of F(t) on the grid of cell x (between edges x and x + 1)
            t = F[x] + u * (F[x + 1] - F[x])
            tb = Fb[:, x, None] + u * (Fb[:, x + 1] - Fb[:, x])[:, None]
            return self._ends(t, tb, alpha, kind)

        for i, q in enumerate(qf):
            reach = np.flatnonzero(fhi >= q - _CDF_SLACK)
            j = int(reach[0]) if reach.size else k
            if j == 0:
                lo_out[i] = e[0]
            else:  # hi crosses q in cell j - 1 (its last grid point is edge j, at q or above)
                _, h = band(j - 1)
                first = int(np.argmax(h >= q - _CDF_SLACK))
                lo_out[i] = e[j - 1] + u[max(first - 1, 0)] * (e[j] - e[j - 1])
            below = np.flatnonzero(flo <= q + _CDF_SLACK)
            j = int(below[-1]) if below.size else 0
            if j >= k:
                hi_out[i] = e[k]
            else:  # lo crosses q in cell j (its first grid point is edge j, at q or below)
                lw, _ = band(j)
                at_or_below = np.flatnonzero(lw <= q + _CDF_SLACK)
                last = int(at_or_below[-1]) if at_or_below.size else 0  # (empty only by rounding at edge j)
                hi_out[i] = e[j] + u[min(last + 1, u.size - 1)] * (e[j + 1] - e[j])
        return lo_out, hi_out

    def interval(self, stat: str, level: float = 0.95, *, kind: str | None = None, **kw):
        """Two-sided interval at ``level`` for a statistic of the input distribution.

        Parameters
        ----------
        stat : {"mean", "var", "quantile", "cdf", "range", "p"}
            With keywords ``q=`` (quantile), ``x=`` (cdf), ``a=, b=`` (range).
            ``"p"`` gives an interval for every frequency.  Quantiles take
            ``method=`` as :func:`~sparseldp.estimation.stats.quantile`: for the
            default ``"inverted_cdf"`` the interval is the values whose CDF
            interval (of this ``kind``) contains ``q``, a set of domain values,
            never a reflected order statistic, and conservative (it covers with
            probability at least ``level``, more where the CDF jumps over
            ``q``); for ``"interpolated"`` it is the points of the grouped-data
            CDF (piecewise linear) whose interval of this ``kind`` contains ``q``
            (Woodruff 1952; its ends rounded outwards by at most 1/256 of a cell).
        level : float in (0, 1)
        kind : {"span", "hull", "basic", "percentile"}, optional
            See the module docstring.  Default ``"span"``: from the estimate to its
            bias-corrected value, ``z`` replicate standard deviations further out on
            each side.  ``bench_coverage``, auto, smooth, bimodal and spiky
            truths, three simulations: 92.5-97.5 % for the mean, range queries and
            the CDF, except one cell of the mean at 98.5 % (the hull's too);
            ``"basic"`` alone gave 77.5-93.5 % for range queries and
            ``"percentile"`` alone 49-99.5 %.

        Returns
        -------
        (lo, hi) : floats, or arrays of the statistic's shape.  Clipped to the
        statistic's range (``[0, 1]`` for probabilities, ``[lo, hi]`` of the
        domain for the mean and quantiles, ``>= 0`` for the variance).  With a
        ``reference`` (``robust``): the hull of this interval and the reference's.
        """
        level = check_probability(level, "level", open_upper=True, open_lower=True)
        if kind is None:
            kind = "span"
        if not isinstance(kind, str):
            raise TypeError(f"kind must be {_KINDS_TEXT}; got {type(kind).__name__} {kind!r}")
        if kind not in _KINDS:
            raise ValueError(f"kind must be {_KINDS_TEXT}; got {kind!r}")
        lo, hi = self._interval(stat, level, kind, kw)
        if self.reference is None:
            return lo, hi
        rlo, rhi = self.reference._interval(stat, level, kind, kw)
        return _scalar(np.minimum(lo, rlo)), _scalar(np.maximum(hi, rhi))

    def _interval(self, stat: str, level: float, kind: str, kw: dict):
        """:meth:`interval` of this bootstrap's own replicates (checked ``level`` and ``kind``)."""
        t = np.asarray(self._stat(stat, self.p, kw), dtype=float)
        alpha = 0.5 * (1.0 - level)
        if stat == "quantile" and kw.get("method", "inverted_cdf") == "inverted_cdf":
            # Inverted CDF band: {x : q in CI(F(x))}.  lo = first value whose upper CDF end
            # reaches q, hi = first whose lower end does.  It misses the true quantile x* only
            # if F(x*) is above its interval or F(x* - 1) below its own (one tail each), where
            # reflecting the replicate quantiles of a discrete statistic undercovers (74-78 %
            # for p90 in bench_coverage against 95-100 % for this inversion).
            q = np.ravel(_check_q(kw["q"]))
            _, _, flo, fhi = self._cdf_ends(alpha, kind)  # at the values: the edges after the first
            flo, fhi = np.clip(flo[1:], 0.0, 1.0), np.clip(fhi[1:], 0.0, 1.0)
            shape = np.shape(kw["q"])
            lo = self.values[_reaching(fhi, q)].reshape(shape).astype(float)
            hi = self.values[_reaching(flo, q)].reshape(shape).astype(float)
            return _scalar(lo), _scalar(hi)
        if stat == "quantile":  # interpolated: the interpolated CDF's interval, inverted
            shape = np.shape(kw["q"])
            lo, hi = self._interp_inverted(np.ravel(_check_q(kw["q"])), alpha, kind)
            return _scalar(lo.reshape(shape)), _scalar(hi.reshape(shape))
        lo, hi = self._ends(t, np.asarray(self._stat(stat, self.replicates, kw), dtype=float), alpha, kind)
        if stat in ("cdf", "range", "p"):
            lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
        elif stat == "mean":
            v0, v1 = float(self.values[0]), float(self.values[-1])
            lo, hi = np.clip(lo, v0, v1), np.clip(hi, v0, v1)
        else:  # the variance: both ends (a reflected end can fall below 0 with the other)
            lo, hi = np.maximum(lo, 0.0), np.maximum(hi, 0.0)
        return _scalar(lo), _scalar(hi)


def statistic(estimate, stat: str, *, ci=None, level: float = 0.95, kind: str | None = None, **kw):
    """A statistic of ``estimate.p`` on ``estimate.values``, with an interval if ``ci`` is given.

    The body of the ``FrequencyEstimate`` methods ``mean``, ``var``, ``quantile``,
    ``cdf``, ``range``: ``stat`` and keywords as in :meth:`Bootstrap.interval`.
    ``ci=None`` returns the point value; ``ci`` a :class:`Bootstrap` of this
    estimate returns ``(value, (lo, hi))``.
    """
    if ci is None:
        p = np.asarray(estimate.p, dtype=float)
        return Bootstrap(p=p, values=np.asarray(estimate.values), replicates=p[None, :],
                         method=str(estimate.method)).point(stat, **kw)
    if not isinstance(ci, Bootstrap):
        raise TypeError(f"ci must be None or a Bootstrap (from bootstrap(estimate, mechanism)); "
                        f"got {type(ci).__name__}")
    if ci.p.shape != np.shape(estimate.p) or not np.array_equal(ci.p, estimate.p):
        raise ValueError("ci must be a Bootstrap of this estimate (its p differs)")
    return ci.point(stat, **kw), ci.interval(stat, level, kind=kind, **kw)


def bootstrap(estimate, mechanism, *, B: int = 200, rng=None, smooth: int | None = None,
              tol: float | None = None, max_iter: int = 2_000, precision: str = "single",
              robust: bool = False) -> Bootstrap:
    r"""Parametric bootstrap of a :class:`~sparseldp.estimation.FrequencyEstimate`.

    Draws ``B`` histograms ``c* ~ Multinomial(n, Q^T p_hat)`` over the outputs
    the domain can produce (``Q`` the mechanism's channel restricted to
    ``estimate.domain``, as in :func:`~sparseldp.estimation.estimate_frequencies`),
    and refits each with ``estimate.method``:

    * ``"ems"``: all ``B`` replicates at once (``B x k`` matrix products),
      warm-started at ``p_hat``, stopped at an estimated TV distance ``tol``
      (default ``1e-5``) to the fixed point;
    * ``"em"``: SQUAREM EM on all ``B`` replicates at once (:func:`_refit_em`; FFT products
      where they apply), warm-started at
      ``0.95 p_hat + 0.05 / k`` (EM cannot revive values with mass 0), stopped at
      a certified gap of ``tol`` nats (default 0.5; a first fit uses 0.01).  On small
      channels (about 200 values or fewer) EM runs 100 evaluations and Newton
      (``mle._newton``) certifies the replicates it left above ``tol``, column by
      column: EM's tail is slow where the MLE has zeros, Newton's steps are cheap there;
    * ``"inversion"``: least squares and simplex projection (no iteration).

    Parameters
    ----------
    estimate : FrequencyEstimate
        Uses ``p``, ``domain``, ``method``, ``n`` (and ``regularization`` for
        ``method="auto"``: the chosen member is refitted, see ``refits._refit_plan``).  The
        report counts are not needed: the parametric bootstrap resamples from the fit.
    mechanism : SparseLaplace, SparseGaussian or SparseChannel
        The mechanism that produced the reports (the one passed to the estimator).
    B : int >= 2
        Number of replicates (200 gives 95 % intervals whose ends are the 5th and
        195th order statistics).
    rng : None, int seed or numpy Generator
        Resampling randomness.  Simulation on already-privatized counts, with no
        privacy role: a seed makes the intervals reproducible.  ``None`` uses a
        fresh ``np.random.default_rng()``.
    smooth : int >= 1, optional
        EMS smoothing passes used for the estimate (default 1; the estimate does
        not record it).  A ValueError with another method.
    tol, max_iter
        Replicate stopping rule (see above) and cap on map evaluations (EM or EMS; the Newton
        finish of small channels has its own cap of ``mle._NEWTON_STEPS`` steps per replicate).
    precision : {"single", "double"}
        Arithmetic of the one refit that is pure number crunching on long windows: ``auto``'s
        ``"em steps=t"`` member on FFT products (``_toeplitz._Conv.em_rows``: windows of 24 or
        more on large channels).  ``"single"`` (the default) runs its FFTs and iterates in float32,
        1.6x faster; every other refit, and every estimate, is in double whatever this says.  A
        replicate is a Monte Carlo draw: with ``B = 200`` its 2.5 % and 97.5 % order statistics
        move by about a tenth of the replicate spread from draw to draw, and single precision moves
        them by far less.  Measured (10^4 values, a window of 275, ``em steps=1435``, 10^8 reports,
        the same 50 replicate histograms both ways): the mean, variance and CDF replicates differ by at
        most 0.4-0.6 % of their spread; per-value interval ends, on values above 1e-5 of the largest
        probability, by a median 3e-5 and at most 6e-4 of the interval's width, and on every value by
        at most 3e-7 in absolute probability (the FFT's roundoff relative to the largest entry).
        ``"double"`` reproduces the double-precision replicates.  The result's ``precision`` says
        which was used.
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
        data (module docstring; the README, "Estimating from reports", has the table).  It costs
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
    B = check_int(B, "B", minimum=2)
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    if tol is None:
        tol = _REFIT_TOL.get(method, 0.0) if method not in ("em-steps", "em-flow") else 0.0
    else:
        tol = check_positive(tol, "tol")
    if not isinstance(precision, str):
        raise TypeError(f"precision must be 'single' or 'double'; got {type(precision).__name__}")
    if precision not in ("single", "double"):
        raise ValueError(f"precision must be 'single' or 'double'; got {precision!r}")
    gen = simulation_generator(rng)
    model = _model(mechanism, estimate.domain)
    p_hat = np.asarray(estimate.p, dtype=float)
    if p_hat.shape != (model.k,):
        raise ValueError(f"estimate.p must have {model.k} entries for the domain {estimate.domain}; "
                         f"got {p_hat.shape}")
    n = int(estimate.n)
    counts = None
    if robust and method != "em":  # the MLE needs the report counts (checked before any work)
        counts = getattr(estimate, "counts", None)
        if counts is None:
            raise ValueError("robust=True refits the MLE on the estimate's report counts, and this estimate "
                             "carries none (estimate_frequencies(..., return_info=True) keeps them)")
        counts = np.asarray(counts, dtype=float)
        if counts.shape != (model.m,) or round(float(counts.sum())) != n:
            size = counts.shape[0] if counts.ndim else 0
            raise ValueError(f"estimate.counts must be the {n:,} reports' counts on the {model.m} outputs of the "
                             f"domain {estimate.domain} under this mechanism; got {size} entries summing to "
                             f"{float(counts.sum()):g}")
    q_unscaled = np.asarray(model.unscaled().T @ p_hat).ravel()
    q_hat = np.maximum(q_unscaled, 0.0)
    q_hat /= q_hat.sum()
    C = gen.multinomial(n, q_hat, size=B).astype(float)
    with small_blas(model.k, model.m):
        P, conv, gaps, single = _refit_replicates(model, C, n, p_hat, method, smooth, weight, steps, tol,
                                                  max_iter, single=precision == "single")
    flow, is_mle = method == "em-flow", method == "em"
    if method in ("em-steps", "em-flow"):
        method = "em"
    n_conv = int(conv.sum())
    if n_conv < B and flow:
        warnings.warn(f"{B - n_conv} of {B} bootstrap refits of the EM flow (to time {steps}) stopped early: "
                      "a Newton substep did not converge; those replicates stay at their last point",
                      RuntimeWarning, stacklevel=2)
    elif n_conv < B:
        how = ""
        if gaps is not None:  # say how far: a certified gap of a few nats on n reports moves little
            left = gaps[~conv]
            how = (f" (certified log-likelihood gaps of those: median {np.median(left):.3g}, largest "
                   f"{left.max():.3g} nats, on {n:,} reports)")
        warnings.warn(f"{B - n_conv} of {B} bootstrap refits stopped at max_iter = {max_iter} before "
                      f"tol = {tol:g}{how}", RuntimeWarning, stacklevel=2)
    reference = None
    if counts is not None:
        from .frequencies import _fit  # here: frequencies imports this module

        with warnings.catch_warnings(record=True) as caught:  # said again below, as the robust part's
            warnings.simplefilter("always")
            with small_blas(model.k, model.m):
                mle = _fit(model, counts, "em", 1e-2, 50_000)
            reference = bootstrap(dataclasses.replace(mle, counts=None), mechanism, B=B, rng=gen,
                                  max_iter=max_iter, precision=precision)
        for w in caught:
            warnings.warn(f"robust=True, the MLE's fit or bootstrap: {w.message}", w.category, stacklevel=2)
    if reference is None and float(np.ptp(P, axis=0).max()) <= _NO_SPREAD * float(np.max(P)):
        label = estimate.regularization or estimate.method
        why = (": EM's uniform start, which fits every replicate's counts as well" if label == "em steps=0"
               else "")
        # e.g. auto's "em steps=0": the uniform start already fits the counts, and fits every replicate
        advice = ("" if is_mle else " (where the estimate is regularized, it describes the regularized estimate, "
                  "not the truth); for intervals with sampling spread and without regularization bias, bootstrap "
                  "with robust=True (the CLI's --robust), which adds the MLE's")
        warnings.warn(f"the {B} bootstrap refits ({label}) are all the same distribution{why}; every interval "
                      f"has zero width and says nothing of the sampling error{advice}", RuntimeWarning, stacklevel=2)
    P.setflags(write=False)
    values = np.asarray(estimate.values)
    return Bootstrap(p=np.asarray(estimate.p), values=values, replicates=P, method=method, converged=n_conv,
                     precision="single" if single else "double", robust=robust, reference=reference)
