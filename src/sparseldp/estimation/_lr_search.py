"""The search behind :mod:`~sparseldp.estimation.likelihood_ratio`: one end of a likelihood-ratio interval.

:class:`_Search` holds the report counts on the observed outputs, the channel's products and the MLE; its
:meth:`~_Search.upper` bounds ``max h^T p`` over ``{loglik >= L0}`` from outside by tilted MLEs on a row-scaled
channel, and :meth:`~_Search.ends` and :meth:`~_Search.quantile_ends` turn that into the two ends of a linear
statistic and of a quantile.  The bound, the search and what they cost are in the docstring of
:mod:`sparseldp.estimation.likelihood_ratio`.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from ._lr_fits import _BETA_GAP, _MAX_SOLVES, _Fits
from ._parallel import concurrently
from ._roots import _first_reaching, _Secant
from .stats import _edges, _reach_level, _stay_level

# A tilted fit within this many nats of the set's boundary ends the root search (U then exceeds
# the exact end by about (this + gap) se / 2: 0.5 % of the half width at the default).
_BOUNDARY_TOL = 0.02
# The variance's ends (_Search.var_ends): refined until their slack is at most this share of the half-width,
# with at most this many searches for the upper end and linear ends for the lower one.
_VAR_SLACK = 0.005
_VAR_ROUNDS = 4
_VAR_EVALS = 24
# Bisection steps inside a cell for interpolated quantiles (ends rounded outwards by 1/2^this of a cell).
_CELL_STEPS = 8
# The certified gap (nats) of the profile problem's solve that first tries to settle a thresholded end
# (_Search.upper): the quantiles' probes.
_PROFILE_TOL = 0.01


def kappa_of(level: float) -> float:
    """The likelihood-ratio interval's chi-square threshold at ``level``: ``chi^2_1(level) / 2`` nats."""
    return 0.5 * NormalDist().inv_cdf(0.5 + 0.5 * level) ** 2


class _Search(_Fits):
    """The ends of likelihood-ratio intervals (:class:`._lr_fits._Fits`: the counts, the channel, the MLE and
    the fits): :meth:`upper` bounds ``max h^T p`` over ``{loglik >= L0}``, :meth:`ends`, :meth:`var_ends` and
    :meth:`quantile_ends` turn that into the two ends of a statistic."""

    def upper(self, h, L0, threshold=None, memo=None) -> float:
        """An outer bound of ``max h^T p`` over the set ``loglik >= L0`` (``h`` in ``[0, 1]``).

        With ``threshold`` only the side of it matters (the quantiles' bisection): the search stops at
        the first bound below it, or at the first point of the set at or above it (then the bound
        returned, at least that point's value, is at or above it too).  ``memo`` (a dict) carries the
        last tilt from one call to the next (key ``"u"``): the quantiles' probes of neighbouring CDF values
        start where the previous one ended instead of at the naive standard error's tilt; the search
        also leaves there the point of the set with the largest ``h^T p`` it found (key ``"point"``), and,
        with a ``threshold``, keeps those points (key ``"pool"``): a later probe that one of them already
        settles (a point of the set at or above its threshold) costs no fit, and gets the same answer."""
        if float(h.max()) <= 0.0:
            return 0.0
        if float(h.min()) >= 1.0:
            return 1.0
        n = float(self.n)
        theta0 = float(h @ self.mle)
        tally = _Tally(theta0, self.mle, threshold)  # the MLE is in the set
        pool = None if memo is None or threshold is None else memo.setdefault("pool", [])
        if pool:  # points of the set the earlier searches found: one may settle the threshold with no fit
            values = [float(h @ q) for q in pool]
            i = int(np.argmax(values))
            tally.add(1.0, values[i], pool[i])
            if tally.decided:
                return tally.value
        kappa = self.loglik - L0
        var = max(theta0 * (1.0 - theta0), 1.0 / n)  # the naive standard error's beta: the first guess
        u_max = math.log1p(-_BETA_GAP)
        u = min(u_max, math.log(min(0.5, math.sqrt(2.0 * kappa / (n * var)))))
        if memo is not None and memo.get("u") is not None:
            u = min(u_max, memo["u"])
        if threshold is not None and theta0 < threshold < 1.0:  # one solve of the profile problem at the threshold
            fast = self._profile_point(h, threshold, theta0, _PROFILE_TOL,
                                       None if memo is None else memo.setdefault("profile", {}))
            if fast is not None:
                _, ll, point, u_fast, M = fast
                if u_fast is not None:  # its tilt's bound is below the threshold exactly when the solve's is below L0
                    tally.add(_tilt_bound(M, L0, n, math.exp(u_fast)), threshold if ll >= L0 else None, point)
                    u = min(u_max, u_fast)
                elif ll >= L0:
                    tally.add(1.0, threshold, point)
                if memo is not None:
                    memo["u"] = u
        steps = _Secant(kappa, u_max)
        p_warm = self.mle
        starts = {}  # this search's interior-point starts (_tilted)
        for _ in range(_MAX_SOLVES if not tally.decided else 0):  # the solve may have settled it
            beta = math.exp(u)
            out = self._tilted(1.0 - beta * h, p_warm, starts)
            if memo is not None:
                memo["u"] = u
            if out is None:
                break
            p, ll, M = out
            tally.add(_tilt_bound(M, L0, n, beta), float(h @ p) if ll >= L0 else None, p)
            r = ll - L0
            if abs(r) <= _BOUNDARY_TOL or tally.decided:
                break
            if r > 0:
                p_warm = p
                if u >= u_max:  # h's top is reachable inside the set
                    break
            u = steps.next(u, self.loglik - ll)
            if u is None:
                break
        if memo is not None:
            memo["point"] = tally.point
            if pool is not None and tally.point is not self.mle and not any(q is tally.point for q in pool):
                pool.append(tally.point)
        return tally.value

    def side(self, h, L0, upper: bool, memo=None) -> float:
        """An outer bound of ``max`` (``upper``) or ``min h^T p`` over the set ``loglik >= L0``, any real ``h``
        (affine rescaling to ``[0, 1]``); ``memo`` as in :meth:`upper`."""
        h0, h1 = float(h.min()), float(h.max())
        if h1 == h0:
            return h0
        g = (h - h0) / (h1 - h0)
        if upper:
            return h0 + (h1 - h0) * min(self.upper(g, L0, memo=memo), 1.0)
        return h0 + (h1 - h0) * max(1.0 - self.upper(1.0 - g, L0, memo=memo), 0.0)

    def ends(self, h, kappa):
        """``(lo, hi)`` of ``h^T p`` for any real ``h``."""
        h = np.asarray(h, dtype=float)
        L0 = self.loglik - kappa
        lo, hi = concurrently(lambda: self.side(h, L0, False), lambda: self.side(h, L0, True),
                              threads=self._threads)
        return lo, hi

    def each_value(self, kappa):
        """``(lo, hi)``: every frequency's ends (arrays).  Each end's search starts at the tilt where its
        neighbour's ended; the lower ends where the MLE is 0 are 0.  The upper and the lower ends run side by
        side on large sparse channels (as the two ends of one statistic; on dense ones threads only contend:
        measured on 300 values under the Laplace window of 275, 24-31 s either way)."""
        k = self.mle.size
        L0 = self.loglik - kappa

        def ends(upper: bool):
            out, memo = np.zeros(k), {}
            for i in range(k):
                e = np.zeros(k)
                e[i] = 1.0
                if upper:
                    out[i] = self.upper(e, L0, memo=memo)
                elif self.mle[i] > 0.0:
                    out[i] = max(0.0, 1.0 - self.upper(1.0 - e, L0, memo=memo))
            return out

        lo, hi = concurrently(lambda: ends(False), lambda: ends(True), threads=self._threads)
        return lo, hi

    def var_ends(self, kappa):
        r"""``(lo, hi)``: outer bounds of the variance over the set, from linear ends alone.

        The variance is a minimum of linear statistics, ``var(p) = min_c E_p (X - c)^2`` (at ``c`` the mean
        of ``p``), and every ``p`` of the set has its mean in the mean's interval ``[m_lo, m_hi]``.

        Upper end: for every ``c``, ``max_p var(p) <= max_p E_p (X - c)^2``, the upper end ``u(c)`` of a
        linear statistic (weak duality; equality at the maximizer's mean, Sion's minimax theorem).  ``c``
        starts at the MLE's mean and moves to the mean of the point each search ends on, while that
        tightens the bound by more than :data:`_VAR_SLACK` of the upper half-width (at most
        :data:`_VAR_ROUNDS` searches).  Also ``var(p) <= (v_max - m)(m - v_min)`` (Bhatia and Davis 2000)
        at the worst ``m`` of the mean's interval: the bound where the set reaches the domain's ends.

        Lower end: between two points ``a < b`` of the mean's interval, ``delta = b - a``, a mean
        ``m = t a + (1 - t) b`` gives ``var(p) = t E_p(X - a)^2 + (1 - t) E_p(X - b)^2 - t (1 - t) delta^2``
        (a parabola of curvature one in ``c``), so ``var(p) >= min_t [t l(a) + (1 - t) l(b) - t (1 - t)
        delta^2]`` with ``l(c)`` the lower end of ``E_p (X - c)^2``: a lower bound on each cell of a grid of
        the interval.  The cell with the smallest bound is halved until that bound is within
        :data:`_VAR_SLACK` of the lower half-width of the smallest ``l`` found (branch and bound, at most
        :data:`_VAR_EVALS` ends).  Both ends are rigorous outer bounds, as the linear ones are."""
        v = self.values.astype(float)
        L0 = self.loglik - kappa
        m_lo, m_hi = self.ends(v, kappa)
        m_hat = float(self.mle @ v)
        var_hat = float(self.mle @ (v - m_hat) ** 2)
        v0, v1 = float(v.min()), float(v.max())

        def high():
            m = min(max(0.5 * (v0 + v1), m_lo), m_hi)  # the worst mean for (v1 - m)(m - v0) in the interval
            best, c, memo = (v1 - m) * (m - v0), m_hat, {}
            for _ in range(_VAR_ROUNDS):
                u = self.side((v - c) ** 2, L0, True, memo)
                gain = best - u
                best = min(best, u)
                point = memo.pop("point", None)  # the end's point (none where the statistic is constant)
                c_next = c if point is None else float(point @ v)  # its mean: near the maximizer's
                if c_next == c or gain <= _VAR_SLACK * (best - var_hat):
                    break
                c = c_next
            return best

        def low():
            memo, seen = {}, {}

            def l(c):
                if c not in seen:
                    seen[c] = self.side((v - c) ** 2, L0, False, memo)
                return seen[c]

            def cell(a, b):  # (its lower bound, a, b)
                la, lb, d2 = l(a), l(b), (b - a) ** 2
                t = 0.5 if d2 == 0.0 else min(1.0, max(0.0, 0.5 - (la - lb) / (2.0 * d2)))
                return t * la + (1.0 - t) * lb - t * (1.0 - t) * d2, a, b

            if m_hi <= m_lo:
                return max(l(m_lo), 0.0)
            mid = 0.5 * (m_lo + m_hi)
            cells = [cell(m_lo, mid), cell(mid, m_hi)]
            floor = 1e-12 * (v1 - v0) ** 2  # rounding, on the scale of the variance
            while len(seen) < _VAR_EVALS:
                i = min(range(len(cells)), key=lambda j: cells[j][0])
                bound, a, b = cells[i]
                top = min(seen.values())
                # settled within the slack (a bound below 0 is refined only down to 0: the end is clipped there)
                if top - max(bound, 0.0) <= max(_VAR_SLACK * (var_hat - top), floor):
                    break
                c = 0.5 * (a + b)
                if not a < c < b:
                    break
                cells[i:i + 1] = [cell(a, c), cell(c, b)]
            return max(min(cell_[0] for cell_ in cells), 0.0)

        lo, hi = concurrently(low, high, threads=self._threads)
        return lo, hi

    def quantile_ends(self, q: float, kappa: float, interp: bool):
        """``{t : q in CI(F(t))}``: from the first ``t`` whose upper CDF end reaches ``q`` to the first whose
        lower end does (domain values), or (interpolated) to the last whose lower end stays at or below ``q``."""
        v = self.values
        k = v.size
        L0 = self.loglik - kappa
        reach = _reach_level(q)

        up_memo, down_memo = {}, {}  # one per end (they may run in two threads)

        def upper_cdf(i):  # outer upper end of F(v_i) (its side of the reach level)
            return self.upper((np.arange(k) <= i).astype(float), L0, reach, up_memo)

        def lower_cdf(i, level):  # outer lower end of F(v_i) (its side of level)
            return 1.0 - self.upper((np.arange(k) > i).astype(float), L0, 1.0 - level, down_memo)

        # the MLE's quantile: its CDF reaches q there and not below, so the ends lie on either side of it
        start = int(np.minimum(np.searchsorted(np.cumsum(self.mle), reach), k - 1))

        def first(value, level, strict=False):  # first index in 0..k-1 whose value reaches level, k - 1 if none
            return _first_reaching(value, level, start, k, strict)

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
            i_lo = first(upper_cdf, reach)
            if not interp:
                return float(v[i_lo])
            return cell_point(i_lo, lambda i, u: self.upper(h_at(i, u), L0, reach, up_memo) >= reach, True)

        def high_end():  # the first value whose lower CDF end reaches q; interpolated: the last t whose lower
            if not interp:  # end stays at or below q, in the cell j where it first exceeds q
                return float(v[first(lambda i: lower_cdf(i, reach), reach)])
            j = first(lambda i: lower_cdf(i, stay), stay, strict=True)
            if lower_cdf(j, stay) <= stay:
                return float(e[-1])
            return cell_point(j, lambda i, u: 1.0 - self.upper(1.0 - h_at(i, u), L0, 1.0 - stay, down_memo) > stay,
                              False)

        t_lo, t_hi = concurrently(low_end, high_end, threads=self._threads)
        return t_lo, t_hi


def _tilt_bound(M: float, L0: float, n: float, beta: float) -> float:
    """The outer bound on ``h^T p`` (``h`` in ``[0, 1]``) over the set ``loglik(p) >= L0`` that a tilt ``beta``
    gives: ``(1 - exp((L0 - M) / n)) / beta``, ``M`` the tilted problem's certified maximum (module docstring of
    :mod:`.likelihood_ratio`)."""
    return -math.expm1((L0 - M) / n) / beta


class _Tally:
    """What the tilted fits of one end have shown: the tightest outer bound ``best``, the largest value
    ``inner`` of a point of the set (and that ``point``), and with a ``threshold`` whether its side is settled."""

    def __init__(self, inner: float, point, threshold):
        self.best, self.inner, self.point, self.threshold = 1.0, inner, point, threshold
        self.decided = False

    def add(self, bound: float, inner, point):
        """A fit's bound, and its value if the fit is a point of the set (``None`` if not)."""
        self.best = min(self.best, bound)
        if inner is not None and inner > self.inner:  # the end is at least its value (which no rounding may undercut)
            self.inner, self.point = inner, point
        t = self.threshold
        if t is not None and (max(self.best, self.inner) < t or self.inner >= t):
            self.decided = True

    @property
    def value(self) -> float:
        return min(max(self.best, self.inner), 1.0)
