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
is a convex problem; the statistics it answers are the linear ones: ``mean``, ``cdf``, ``range``,
each frequency ``p``, and the quantiles by inverting the CDF's interval (Woodruff 1952), as the
bootstrap does.  The variance is not linear (its lower end is not a convex problem): ask the
bootstrap for it.

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
the simplex and the statistic is identified (the mean: 95.0-96.0 % in 200 repetitions per truth
under the Laplace setting of ``benchmarks/bench_coverage.py``, 93.5-95.0 % under its
Gaussian one, at the width of ``estimate_mean``'s), and more where positivity binds or the
reports cannot resolve the statistic (ranges, CDF values, quantiles and single frequencies:
95.5-100 % in every cell measured, real heaped columns included): there it is wide because the
data are.  ``bench_coverage.py auto-profile`` measures it; the README ("Estimating from
reports") has the table.  Under the Gaussian design of (1, 1e-6, 5) (sigma 21.1 on 0..99) and
10^5 reports, the range query ``P(30 <= X <= 50)`` of the smooth truth is pinned down only to
an interval about 0.9 wide: distributions that far apart explain the reports within ``kappa``
of the best, and the bootstrap's much narrower intervals there come from the estimate's
smoothness, not from the reports.  It is a one-at-a-time interval, not simultaneous over
statistics, and the chi-square calibration is not guaranteed where positivity binds (Batlle
et al. 2023 give counterexamples).

Cost: a tilted fit per ``beta``, two to twelve per end as measured (the first guess from the
statistic's naive standard error, then the secant); 0.01-0.3 s per statistic on 100 values,
about 10-20 s on 10^4 values under a window of 275 (the interior point's banded Cholesky; the
two ends run side by side there).  ``stat="p"`` asks for ``2 k`` ends (those whose lower end is
the MLE's zero are free): about 4 s on 100 values.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np
import scipy.sparse as sp

from .._frozen import ReadOnlyArrays, frozen_array
from .._validation import check_int, check_positive
from ._ipm import _band_width, _ipm, _ipm_affordable
from ._parallel import concurrently
from ._path import _SIDE_BY_SIDE_K
from .mle import _band_of, _mle
from .model import model_for
from .replicates import Bootstrap, _check_level
from .stats import (_check_point, _check_q, _check_quantile_method, _check_range, _edges, _reach_level, _scalar,
                    _stay_level)

__all__ = ["Profile", "profile"]

# A tilted fit within this many nats of the set's boundary ends the root search (U then exceeds
# the exact end by about (this + gap) se / 2: 0.5 % of the half width at the default).
_BOUNDARY_TOL = 0.02
# Tilted fits per end at most.
_MAX_SOLVES = 40
# The largest tilt: beta = 1 - this (h's top values then weigh 10^9 times the others).
_BETA_GAP = 1e-9
# Bisection steps inside a cell for interpolated quantiles (ends rounded outwards by 1/2^this of a cell).
_CELL_STEPS = 8


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
    _A: object = field(default=None, repr=False, compare=False)
    _AT: object = field(default=None, repr=False, compare=False)
    _c: np.ndarray = field(default=None, repr=False, compare=False)
    _dense: bool = field(default=True, repr=False, compare=False)
    _tol: float = field(default=0.01, repr=False, compare=False)
    _max_iter: int = field(default=50_000, repr=False, compare=False)
    _width: int = field(default=0, repr=False, compare=False)
    _band: object = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        for name in ("p", "values", "mle"):
            object.__setattr__(self, name, frozen_array(getattr(self, name)))

    def point(self, stat: str, **kw):
        """The statistic of the estimate (``stat`` and keywords as in :meth:`interval`)."""
        return Bootstrap(p=self.p, values=self.values, replicates=self.p[None, :], method=self.method).point(stat, **kw)

    # -- one end -------------------------------------------------------------------------
    def _loglik(self, AT, p) -> float:
        q = AT @ p
        if np.any(q <= 0):
            return -math.inf
        return float(self._c @ np.log(q))

    def _tilted(self, w, start):
        """The tilted fit of ``w`` from ``start`` (a distribution): ``(p, loglik, M_upper)``."""
        A, AT = self._A, self._AT
        if self._dense:
            B = A / w[:, None]
            BT = np.ascontiguousarray(B.T)
        else:
            B = sp.csr_array(sp.diags_array(1.0 / w) @ A)
            BT = sp.csr_array(B.T)
        s = w * start
        s = np.maximum(s / s.sum(), 0.0)
        s = (1.0 - 1e-9) * s / s.sum() + 1e-9 / s.size  # EM keeps exact zeros: leave every value reachable
        n = float(self.n)
        c = self._c
        pp = None
        if _ipm_affordable(s.size, B.shape[1], self._dense, self._width):
            # the interior point from the warm start, centred at the start's own certificate (_ipm._ipm)
            q0 = BT @ s
            gap0 = n * math.log(max(float(((B @ (c / q0)) / n).max()), 1e-300))
            band = None if self._band is None else _row_scaled_band(self._band, 1.0 / w)
            pp, _, conv, gap = _ipm(B, BT, c, n, self._tol, self._dense, band, p0=s, gap0=max(gap0, self._tol))
            if not conv:  # (a factorization failed on the way): once more from the uniform start
                pu, _, conv, gap_u = _ipm(B, BT, c, n, self._tol, self._dense, band)
                pp = pu if conv or gap_u < gap else pp
            if not conv:  # then EM and Newton (mle._mle) from the better point
                s, pp = pp, None
        if pp is None:
            pp, _, _, _, _ = _mle(B, BT, c, n, s.size, self._tol, self._max_iter, self._dense, p0=s)
        pp = np.maximum(pp, 0.0)
        pp /= pp.sum()
        q = BT @ pp
        if np.any(q <= 0):
            return None
        lb = float(self._c @ np.log(q))
        cert = n * math.log(max(float(((B @ (self._c / q)) / n).max()), 1e-300))  # exact certificate at pp
        p = pp / w
        p /= p.sum()
        return p, self._loglik(AT, p), lb + max(cert, 0.0)

    def _upper(self, h, L0, threshold=None, memo=None) -> float:
        """An outer bound of ``max h^T p`` over the set ``loglik >= L0`` (``h`` in ``[0, 1]``).

        With ``threshold`` only the side of it matters (the quantiles' bisection): the search stops at
        the first bound below it, or at the first point of the set at or above it (then the bound
        returned, at least that point's value, is at or above it too).  ``memo`` (a dict) carries the
        last tilt from one call to the next: the quantiles' probes of neighbouring CDF values start
        where the previous one ended instead of at the naive standard error's tilt."""
        if float(h.max()) <= 0.0:
            return 0.0
        if float(h.min()) >= 1.0:
            return 1.0
        n = float(self.n)
        theta0 = float(h @ self.mle)
        best = 1.0
        p_warm = self.mle

        def evaluate(beta, warm):
            nonlocal best, inner, decided
            out = self._tilted(1.0 - beta * h, warm)
            if out is None:
                return None
            p, ll, M = out
            best = min(best, -math.expm1((L0 - M) / n) / beta)
            if ll >= L0:  # a point of the set: the end is at least its value (which no rounding may undercut)
                inner = max(inner, float(h @ p))
            if threshold is not None and (max(best, inner) < threshold or inner >= threshold):
                decided = True
            return p, ll - L0

        decided = False
        inner = theta0  # the MLE is in the set

        # Near the MLE the set's frontier is quadratic: the drop d(beta) = loglik(MLE) - loglik(p_beta) grows
        # as (n beta se)^2 / 2, so log d is about linear in u = log beta (slope 2).  The search steps to
        # d = kappa along that line, its slope re-estimated from the last two fits (a secant on log d),
        # inside the bracket of fits on either side of the boundary once there is one (else bisection).
        kappa = self.loglik - L0
        var = max(theta0 * (1.0 - theta0), 1.0 / n)  # the naive standard error's beta: the first guess
        u_max = math.log1p(-_BETA_GAP)
        u = min(u_max, math.log(min(0.5, math.sqrt(2.0 * kappa / (n * var)))))
        if memo is not None and memo.get("u") is not None:
            u = min(u_max, memo["u"])
        lo = hi = prev = None  # u with r > 0 (inside the set), u with r < 0; the last (u, log d)
        for _ in range(_MAX_SOLVES):
            out = evaluate(math.exp(u), p_warm)
            if memo is not None:
                memo["u"] = u
            if out is None:
                break
            p, r = out
            if abs(r) <= _BOUNDARY_TOL or decided:
                break
            if r > 0:
                lo, p_warm = u, p
                if u >= u_max:  # h's top is reachable inside the set
                    break
            else:
                hi = u
            d = kappa - r
            slope = 2.0
            if prev is not None and d > 0 and u != prev[0]:
                est = (math.log(d) - prev[1]) / (u - prev[0])
                if 0.25 <= est <= 8.0:
                    slope = est
            step = math.log(kappa / d) / slope if d > 0 else math.log(4.0)
            step = max(-math.log(16.0), min(math.log(16.0), step))
            if d > 0:
                prev = (u, math.log(d))
            u_new = min(u_max, u + step)
            if lo is not None and hi is not None:
                if hi - lo < 1e-9:
                    break
                if not (lo < u_new < hi):
                    u_new = 0.5 * (lo + hi)
            u = u_new
        return min(max(best, inner), 1.0)

    def _ends(self, h, kappa):
        """``(lo, hi)`` of ``h^T p`` for any real ``h`` (affine rescaling to ``[0, 1]``)."""
        h = np.asarray(h, dtype=float)
        h0, h1 = float(h.min()), float(h.max())
        if h1 == h0:
            return h0, h0
        g = (h - h0) / (h1 - h0)
        L0 = self.loglik - kappa
        # the two ends are independent: side by side on large sparse channels (the banded Cholesky and the
        # products release the GIL; on small or dense ones threads only contend, as in _path)
        threads = 2 if (not self._dense and g.size >= _SIDE_BY_SIDE_K) else 1
        hi, top = concurrently(lambda: self._upper(g, L0), lambda: self._upper(1.0 - g, L0), threads=threads)
        lo = 1.0 - top
        return h0 + (h1 - h0) * max(lo, 0.0), h0 + (h1 - h0) * min(hi, 1.0)

    # -- statistics ----------------------------------------------------------------------
    def interval(self, stat: str, level: float = 0.95, *, kind: str | None = None, **kw):
        """The likelihood-ratio interval of a linear statistic at ``level`` (an outer bound: module docstring).

        Parameters
        ----------
        stat : {"mean", "quantile", "cdf", "range", "p"}
            With keywords as in :meth:`Bootstrap.interval` (``q=`` and ``method=``, ``x=``, ``a=, b=``).
            Quantiles invert the CDF's interval (ends found by bisection on the CDF bounds, which are
            monotone); ``"p"`` gives every frequency's (``2 k`` ends).  ``"var"`` is not linear: a
            ValueError (use :meth:`FrequencyEstimate.bootstrap`).
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
        if not isinstance(stat, str):
            raise TypeError(f"stat must be one of 'mean', 'quantile', 'cdf', 'range', 'p'; got {type(stat).__name__}")
        if stat == "var":
            raise ValueError("stat='var' has no profile-likelihood interval here (the variance is not linear in p); "
                             "use the bootstrap's (estimate.bootstrap(mechanism))")
        Bootstrap(p=self.p, values=self.values, replicates=self.p[None, :], method=self.method)._stat(stat, self.p, kw)
        z = NormalDist().inv_cdf(0.5 + 0.5 * level)
        kappa = 0.5 * z * z
        v = self.values.astype(float)
        if stat == "mean":
            return self._ends(v, kappa)
        if stat == "cdf":
            x = _check_point(kw["x"], "x")
            out = [self._ends((v <= xi).astype(float), kappa) for xi in np.ravel(x)]
            return self._shaped(out, np.shape(x))
        if stat == "range":
            a, b = _check_range(kw["a"], kw["b"])
            out = [self._ends(((v >= ai) & (v <= bi)).astype(float), kappa) for ai, bi in zip(np.ravel(a), np.ravel(b))]
            return self._shaped(out, np.shape(a))
        if stat == "p":
            k = v.size
            lo, hi = np.zeros(k), np.zeros(k)
            L0 = self.loglik - kappa
            for i in range(k):
                e = np.zeros(k)
                e[i] = 1.0
                hi[i] = self._upper(e, L0)
                lo[i] = 0.0 if self.mle[i] <= 0.0 else max(0.0, 1.0 - self._upper(1.0 - e, L0))
            return lo, hi
        q = _check_q(kw["q"])
        interp = _check_quantile_method(kw.get("method", "inverted_cdf")) == "interpolated"
        out = [self._quantile_ends(float(qi), kappa, interp) for qi in np.ravel(q)]
        return self._shaped(out, np.shape(q))

    @staticmethod
    def _shaped(out, shape):
        lo = np.array([a for a, _ in out], dtype=float).reshape(shape)
        hi = np.array([b for _, b in out], dtype=float).reshape(shape)
        return _scalar(lo), _scalar(hi)

    def _quantile_ends(self, q: float, kappa: float, interp: bool):
        """``{t : q in CI(F(t))}``: from the first ``t`` whose upper CDF end reaches ``q`` to the first whose
        lower end does (domain values), or (interpolated) to the last whose lower end stays at or below ``q``."""
        v = self.values
        k = v.size
        L0 = self.loglik - kappa
        reach = _reach_level(q)

        up_memo, down_memo = {}, {}  # one per end (they may run in two threads)

        def upper_cdf(i):  # outer upper end of F(v_i) (its side of the reach level)
            return self._upper((np.arange(k) <= i).astype(float), L0, reach, up_memo)

        def lower_cdf(i, level):  # outer lower end of F(v_i) (its side of level)
            return 1.0 - self._upper((np.arange(k) > i).astype(float), L0, 1.0 - level, down_memo)

        # the MLE's quantile: its CDF reaches q there and not below, so the ends lie on either side of it
        start = int(np.minimum(np.searchsorted(np.cumsum(self.mle), reach), k - 1))

        def first(pred):  # first index in 0..k-1 with pred true (pred monotone), k - 1 if none
            return _first_true(pred, start, k)

        e = _edges(v)
        stay = _stay_level(q)

        def h_at(i, u):  # the grouped-data CDF at fraction u of cell i: F(v_{i-1}) + u p_i
            h = (np.arange(k) < i).astype(float)
            h[i] = u
            return h

        def cell_point(i, pred, outward_low):
            lo, hi = 0.0, 1.0
            for _ in range(_CELL_STEPS):
                mid = 0.5 * (lo + hi)
                if pred(i, mid):
                    hi = mid
                else:
                    lo = mid
            return e[i] + (lo if outward_low else hi) * (e[i + 1] - e[i])

        def low_end():  # the first t whose upper CDF end reaches q: in cell i_lo (its right edge is v_{i_lo})
            i_lo = first(lambda i: upper_cdf(i) >= reach)
            if not interp:
                return float(v[i_lo])
            return cell_point(i_lo, lambda i, u: self._upper(h_at(i, u), L0, reach, up_memo) >= reach, True)

        def high_end():  # the first value whose lower CDF end reaches q; interpolated: the last t whose lower
            if not interp:  # end stays at or below q, in the cell j where it first exceeds q
                return float(v[first(lambda i: lower_cdf(i, reach) >= reach)])
            j = first(lambda i: lower_cdf(i, stay) > stay)
            if lower_cdf(j, stay) <= stay:
                return float(e[-1])
            return cell_point(j, lambda i, u: 1.0 - self._upper(1.0 - h_at(i, u), L0, 1.0 - stay, down_memo) > stay,
                              False)

        # the two ends are independent: side by side on large sparse channels (as in _ends)
        threads = 2 if (not self._dense and k >= _SIDE_BY_SIDE_K) else 1
        t_lo, t_hi = concurrently(low_end, high_end, threads=threads)
        return t_lo, t_hi


def profile(estimate, mechanism, *, tol: float = 0.01, max_iter: int = 50_000) -> Profile:
    """The profile likelihood of an estimate's report counts: likelihood-ratio intervals for its statistics.

    Parameters
    ----------
    estimate : FrequencyEstimate
        Any method; it must carry its report counts (``estimate.counts``, which
        :func:`~sparseldp.estimation.estimate_frequencies` keeps).  Its ``p`` gives the point values.
    mechanism : SparseLaplace, SparseGaussian or SparseChannel
        The mechanism the estimate was fitted with.
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
    if not all(hasattr(estimate, a) for a in ("p", "values", "domain", "n")):
        raise TypeError(f"estimate must be a FrequencyEstimate; got {type(estimate).__name__}")
    tol = check_positive(tol, "tol")
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    counts = getattr(estimate, "counts", None)
    if counts is None:
        raise ValueError("profile needs the estimate's report counts, and this estimate carries none "
                         "(estimate_frequencies keeps them)")
    model = model_for(estimate, mechanism)
    counts = np.asarray(counts, dtype=float)
    n = int(estimate.n)
    if counts.shape != (model.m,) or round(float(counts.sum())) != n:
        raise ValueError(f"estimate.counts must be the {n:,} reports' counts on the {model.m} outputs of the domain "
                         f"{estimate.domain} under this mechanism; got {counts.size} entries summing to "
                         f"{float(counts.sum()):g}: is it the mechanism the estimate was fitted with?")
    obs = np.flatnonzero(counts > 0)
    c = counts[obs]
    A, AT = model.columns(obs)
    FA, _ = model.fast_columns(obs, (A, AT))
    band = _band_of(FA) if FA is not A else None  # the FFT's banded Gram, for the interior point's steps
    mle_already = getattr(estimate, "method", None) == "em" or getattr(estimate, "regularization", None) == "em mle"
    if mle_already and float(getattr(estimate, "gap", math.inf)) <= tol:
        p = np.asarray(estimate.p, dtype=float)  # an MLE already, certified within tol
    else:
        from .frequencies import _fit  # here: frequencies imports this module

        with warnings.catch_warnings():  # an uncertified MLE only loosens the bounds (L0 uses its likelihood)
            warnings.simplefilter("ignore")
            p = np.asarray(_fit(model, counts, "em", tol, max_iter).p, dtype=float)
    q = AT @ p
    loglik = float(c @ np.log(q))
    gap = max(0.0, n * math.log(max(float(((A @ (c / q)) / n).max()), 1e-300)))
    return Profile(p=np.asarray(estimate.p, dtype=float), values=np.asarray(estimate.values), mle=p, loglik=loglik,
                   gap=gap, n=n, _A=A, _AT=AT, _c=c, _dense=bool(model.dense), _tol=tol, _max_iter=max_iter,
                   _width=0 if model.dense else _band_width(A), _band=band)


def _first_true(pred, start: int, k: int) -> int:
    """The first ``i`` in ``0..k-1`` with ``pred(i)`` for a monotone ``pred`` (False, then True), ``k - 1`` if
    none: galloping from ``start`` (steps 1, 2, 4, ... away from it), then bisection, so the calls grow with
    the log of the distance from ``start``, not of ``k``."""
    if pred(start):
        hi, lo, step = start, -1, 1
        while hi - step >= 0:
            j = hi - step
            if not pred(j):
                lo = j
                break
            hi, step = j, 2 * step
    else:
        lo, hi, step = start, k - 1, 1
        while lo + step < k - 1:
            j = lo + step
            if pred(j):
                hi = j
                break
            lo, step = j, 2 * step
    while hi - lo > 1:  # pred(lo) is False (or lo = -1), pred(hi) True (or hi = k - 1, by convention)
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _row_scaled_band(band, s):
    """``v -> diag(s) (A diag(v) A^T) diag(s)`` in the upper banded storage of ``band(v)`` (that of ``A``):
    the Gram of the row-scaled channel ``diag(s) A``."""

    def scaled(v):
        ab = band(v)
        rows, k = ab.shape
        i = np.arange(k)[None, :] - (rows - 1 - np.arange(rows))[:, None]  # ab[r, j] holds M[i, j]
        return ab * s[None, :] * s[np.maximum(i, 0)]

    return scaled
