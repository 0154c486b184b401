"""The joint search over the radius and the kernel parameter on Z (:func:`~sparseldp.design.radius.design`).

:class:`_Joint` runs, for one target, the five steps of the module docstring
of :mod:`sparseldp.design.radius` ("Joint design"): the limit ``s -> infinity``,
the first feasible radius, the branch and bound over the radii, the smallest
tied radius and the certificate.  The finite-domain designers reuse its
pieces to screen radii with the Z closed forms (:mod:`._clipped`).
"""

from __future__ import annotations

import heapq
import math

from ._common import _T_LIMIT, Design, _cap_error
from ._search import first_feasible, golden_min, largest_feasible, u_tolerance
from ..errors import InfeasibleError
from ..core.families import Family

# Branch and bound over the radius: intervals whose lower bound is within this relative
# distance of the best value are dropped.
_RTOL = 1e-12
# Among radii whose distortion is within this relative distance of the best, the smallest is chosen.
_TIE = 1e-11
# Golden-section width (in u = +-log param) when minimizing delta_H over the parameter.
_GOLDEN_XTOL = 1e-9


class _Joint:
    """The joint search of :mod:`sparseldp.design.radius` ("Joint design"), for one target."""

    def __init__(self, fam: Family, eps, delta, H, objective):
        self.fam, self.eps, self.delta, self.H = fam, eps, delta, H
        self.objective = objective
        self.S = fam.search
        self.sign = 1.0 if fam.private_when == "smaller" else -1.0  # u = sign * log(param)
        self.target = math.log(delta) + math.log1p(-self.S.margin)
        self.index = 0 if objective == "r1" else 1
        corner = self.S.corner(eps, H)
        self.u_corner = None if corner is None else self.sign * math.log(corner)

    # -- coordinates ------------------------------------------------------------
    def param(self, u: float) -> float:
        return math.exp(self.sign * u)

    def f(self, u: float, t) -> float:
        """``log delta_H - log target``: ``<= 0`` exactly where ``(u, t)`` is feasible (for the search)."""
        return self.S.log_delta(self.param(u), t, self.eps, self.H) - self.target

    def value(self, u: float, t) -> float:
        return self.S.moments(self.param(u), t)[self.index]

    # -- the search -------------------------------------------------------------
    def run(self) -> Design:
        fam, H = self.fam, self.H
        u_lim, u_beyond = self._limit()
        t0 = (H + 1) // 2
        settle = self.S.settle(self.param(u_lim), self.delta, H)
        t_top = int(min(max(math.ceil(settle), t0), fam.max_t))
        t_first, u_feas = self._first_radius(t0, t_top, u_lim)
        u_first = self._root(t_first, u_feas, u_beyond)[0]
        u_best, t_best = self._best_radius(t_first, u_first, t_top, u_beyond)
        return self._certify(u_best, t_best)

    def _limit(self):
        """``(u_lim, u_beyond)``: the largest feasible ``u`` of the ``s -> infinity`` limit and an infeasible
        ``u`` just above it (every feasible ``u`` at every radius is ``<= u_lim``, Lemma 1)."""
        f = lambda u: self.f(u, math.inf)  # noqa: E731
        u_bad = self.sign * math.log(self.S.bound(self.eps, self.delta))
        fb = f(u_bad)
        step = 1.0
        while not fb > 0.0:  # the bound is rigorous; its closed form may sit a rounding error below the target
            u_bad += step
            step *= 2.0
            fb = f(u_bad)
        u_ok, step = u_bad - 1.0, 1.0
        fo = f(u_ok)
        while fo > 0.0:
            step *= 2.0
            if step > 1e4:
                raise InfeasibleError(  # pragma: no cover - every delta > 0 is reached in the limit
                    f"no {self.fam.name} mechanism found with delta_star <= {self.delta:g} at eps = {self.eps:g}, "
                    f"H = {self.H}, even in the limit s -> infinity")
            u_ok, u_bad, fb = u_ok - step, u_ok, fo
            fo = f(u_ok)
        u, _, beyond = largest_feasible(f, u_ok, u_bad, f_ok=fo, f_bad=fb)
        return u, beyond

    def _min_point(self, t, u_lim, stop=0.0):
        """``(u, f(u, t))`` minimizing ``delta_H`` at radius ``t``, or the first feasible point met.

        Brent's method on ``[far, u_lim]`` (:attr:`DesignSearch.far`), plus the
        family's corner (:attr:`DesignSearch.corner`), where the Laplace
        ``delta_H`` has a kink too sharp for the minimizer's resolution.
        """
        f = lambda u: self.f(u, t)  # noqa: E731
        best = (u_lim, f(u_lim))
        if self.u_corner is not None and self.u_corner < u_lim:
            best = min(best, (self.u_corner, f(self.u_corner)), key=lambda p: p[1])
        if best[1] <= stop:
            return best
        u_far = self.sign * math.log(self.S.far(self.param(u_lim), self.eps, self.H, t))
        found = golden_min(f, u_far, u_lim, xtol=_GOLDEN_XTOL, stop=stop)
        return min(best, found, key=lambda p: p[1])

    def _first_radius(self, t0, t_top, u_lim):
        """Smallest radius ``t >= t0`` with a feasible parameter, and one such parameter (Lemma 1: the
        feasible sets grow with ``t``, so ``min_u delta_H`` is nonincreasing in ``t``)."""
        hint = None

        def g(t, full=False):
            nonlocal hint
            if hint is not None and not full:
                fh = self.f(hint, t)
                if fh <= 0.0:
                    return fh, hint
            u, fu = self._min_point(t, u_lim, stop=-math.inf if full else 0.0)
            if fu <= 0.0:
                hint = u
            return fu, u

        v_lo, u = g(t0)
        if v_lo <= 0.0:
            return t0, u
        lo, hi = t0, t_top
        v_hi, u_hi = g(hi, full=True)  # the true minimum: a good first interpolation step
        while v_hi > 0.0:
            if hi >= _T_LIMIT:  # pragma: no cover - every delta > 0 is reached at some finite radius
                raise _cap_error(self.fam, None, f"delta = {self.delta:g} at eps = {self.eps:g}, H = {self.H}")
            lo, v_lo = hi, v_hi
            hi = min(2 * hi, _T_LIMIT)  # the closed forms go past the family's cap, to name the size needed
            v_hi, u_hi = g(hi)
        t, u = first_feasible(g, lo, hi, g_lo=v_lo, g_hi=v_hi, info_hi=u_hi)
        if t > self.fam.max_t:
            raise _cap_error(self.fam, t, f"delta = {self.delta:g} at eps = {self.eps:g}, H = {self.H}")
        return t, u

    def _root(self, t, u_ok, u_bad):
        """``(u*(t), u_next)``: the largest feasible ``u`` at radius ``t`` in ``[u_ok, u_bad]``."""
        f = lambda u: self.f(u, t)  # noqa: E731
        fo = f(u_ok)
        step = u_tolerance(u_ok)
        while fo > 0.0:
            # u_ok is feasible at a smaller radius, hence here (Lemma 1); the closed forms may disagree by a
            # rounding error right at the crossing: step back until they agree
            if step > 1e-6:  # pragma: no cover - far beyond any rounding error
                raise RuntimeError("internal error: a parameter feasible at a smaller radius is infeasible")
            u_ok -= step
            step *= 4.0
            fo = f(u_ok)
        fb = f(u_bad)
        if fb <= 0.0:
            return u_bad, u_bad + u_tolerance(u_bad)
        u, _, nxt = largest_feasible(f, u_ok, u_bad, f_ok=fo, f_bad=fb)
        return u, nxt

    def _best_radius(self, t_first, u_first, t_top, u_beyond):
        """Branch and bound over ``t_first <= t <= t_top`` (:mod:`sparseldp.design.radius`, step 3)."""
        known = {t_first: self._root_info(t_first, u_first, u_beyond)}  # t -> (value, u, u_next)
        if t_top > t_first:
            known[t_top] = self._root_info(t_top, u_first, u_beyond)
        best_t = min(known, key=lambda t: (known[t][0], t))
        best = known[best_t][0]
        heap = []

        def push(ta, tb):
            if tb - ta > 1:
                lb = self.value(known[tb][2], ta + 1)  # p*(t) <= p*(tb) < p(u_next(tb)); R grows with t
                if lb < best * (1.0 - _RTOL):
                    heapq.heappush(heap, (lb, ta, tb))

        if t_top > t_first:
            push(t_first, t_top)
        while heap:
            lb, ta, tb = heapq.heappop(heap)
            if lb >= best * (1.0 - _RTOL):
                continue
            mid = (ta + tb) // 2 if tb < 4 * ta + 8 else int(math.sqrt(ta * tb))
            mid = min(max(mid, ta + 1), tb - 1)
            known[mid] = self._root_info(mid, known[ta][1], known[tb][2])
            v = known[mid][0]
            if v < best or (v == best and mid < best_t):
                best, best_t = v, mid
            push(ta, mid)
            push(mid, tb)
        return self._smallest_tied(known, best)

    def _smallest_tied(self, known, best):
        """``(u, t)`` at the smallest radius whose distortion is within :data:`_TIE` of ``best``.

        Past the radius where ``p*(t)`` reaches ``p_lim`` to double precision,
        ``Psi`` is flat: a smaller ``s`` is preferred at equal distortion.  A
        bisection between the last evaluated radius above the tolerance and the
        first within it (exact when ``Psi`` is monotone there, as on that
        plateau; otherwise a radius within the tolerance all the same).
        """
        limit = best * (1.0 + _TIE)
        t_hi = min(t for t, (v, _, _) in known.items() if v <= limit)
        below = [t for t in known if t < t_hi]
        if below:
            t_lo = max(below)
            while t_hi - t_lo > 1:
                mid = (t_lo + t_hi) // 2
                known[mid] = self._root_info(mid, known[t_lo][1], known[t_hi][2])
                if known[mid][0] <= limit:
                    t_hi = mid
                else:
                    t_lo = mid
        return known[t_hi][1], t_hi

    def _root_info(self, t, u_ok, u_bad):
        u, nxt = self._root(t, u_ok, u_bad)
        return self.value(u, t), u, nxt

    def _certify(self, u, t) -> Design:
        """The design at ``(u, t)``, certified with the accountant's rigorous upper bound.

        If the bound exceeds ``delta`` (it sits a few ulps, deep in the
        Gaussian tails up to ``1e-7`` relative, above the nearest value), ``u``
        moves towards the private end by the gap divided by the local slope of
        ``log delta_H``, with a growing safety factor.
        """
        fam = self.fam
        log_delta = math.log(self.delta)
        factor = 1.5
        for _ in range(12):
            p = self.param(u)
            mech = fam.make(p, 2 * t + 1)
            ds = float(mech.delta_star_upper(self.eps, self.H))
            if ds <= self.delta:
                return Design(fam.name, mech, mech.parameter, mech.s, self.eps, self.delta, self.H, ds,
                              mech.r1, mech.r2, objective=self.objective)
            h = 1e-7 * max(1.0, abs(u))
            slope = (self.f(u, t) - self.f(u - h, t)) / h
            need = math.log(ds) - log_delta + 1e-12
            step = need / slope * factor if slope > 0.0 and math.isfinite(slope) else 0.0
            u -= max(step, 4.0 * u_tolerance(u))
            factor *= 4.0
        raise RuntimeError(  # pragma: no cover - the search aims below delta
            f"internal error: the design {fam.param} = {self.param(u):g}, s = {2 * t + 1} could not be certified")
