"""The one-dimensional searches behind the likelihood-ratio intervals (:mod:`._lr_search`): the tilt whose
tilted fit sits on the likelihood set's boundary (:class:`_Secant`) and the first domain value whose CDF bound
reaches a level (:func:`_first_reaching`, the quantiles' ends).  They know nothing of channels or fits: each
sees only the numbers the caller's fits return.
"""

from __future__ import annotations

import math


class _Secant:
    """The next tilt of a search for the tilt whose fit puts a positive quantity ``d`` at a target ``kappa``.

    Two searches use it.  The boundary search (:meth:`._lr_search._Search.upper`): near the MLE the set's
    frontier is quadratic, the drop ``d(beta) = loglik(MLE) - loglik(p_beta)`` grows as ``(n beta se)^2 / 2``,
    so ``log d`` is about linear in ``u = log beta`` (slope 2); ``kappa`` is the set's depth.  The profile
    deficit's (:meth:`._lr_fits._Fits.deficit`): ``d`` is the tilted fit's shift ``h^T p_beta - h^T MLE``,
    about linear in ``beta`` (slope 1), ``kappa`` the shift to the value tested.  Each step goes to ``d = kappa``
    along that line, its slope re-estimated from the last two fits (a secant on ``log d``, kept in
    ``[1/4, slope_max]``: a flat ``d``, where positivity binds and the tilted fits sit on the same face of the
    simplex and barely move, takes the longest step, not the guess's short one), inside the bracket of fits on
    either side of the target once there is one (else bisection)."""

    def __init__(self, kappa: float, u_max: float, slope: float = 2.0, slope_max: float = 8.0,
                 width: float = 1e-9):
        self.kappa, self.u_max = kappa, u_max
        self.slope, self.slope_max, self.width = slope, slope_max, width
        self.lo = self.hi = self.prev = None  # u with d < kappa, u with d >= kappa; the last (u, log d)

    def next(self, u: float, d: float):
        """The next ``u`` after a fit at ``u`` that put the quantity at ``d``; ``None``: stop (the bracket is
        narrower than ``width``, or the step would not move)."""
        if d < self.kappa:
            self.lo = u
        else:
            self.hi = u
        slope = self.slope
        if self.prev is not None and d > 0 and u != self.prev[0]:
            slope = min(self.slope_max, max(0.25, (math.log(d) - self.prev[1]) / (u - self.prev[0])))
        step = math.log(self.kappa / d) / slope if d > 0 else math.log(4.0)
        step = max(-math.log(16.0), min(math.log(16.0), step))
        if d > 0:
            self.prev = (u, math.log(d))
        u_new = min(self.u_max, u + step)
        if self.lo is not None and self.hi is not None:
            if self.hi - self.lo < self.width:
                return None
            if not (self.lo < u_new < self.hi):
                u_new = 0.5 * (self.lo + self.hi)
        return None if u_new == u else u_new


def _first_reaching(value, level: float, start: int, k: int, strict: bool = False) -> int:
    """The first ``i`` in ``0..k-1`` whose ``value(i)`` reaches ``level`` (``>= level``, or ``> level`` with
    ``strict``), for ``value`` nondecreasing in ``i`` as far as reaching goes; ``k - 1`` if none.

    A safeguarded secant search: the values steer it (the quantiles' CDF bounds change smoothly from one
    domain value to the next), the safeguards keep its calls logarithmic in the distance from ``start``
    whatever the values say.  From ``start`` it gallops towards the crossing with steps extrapolated from
    the last two values, each at least ``sqrt(2)`` times the one before (at least 1, at most 8 times it);
    once the crossing is bracketed it interpolates between the bracket's ends, and bisects after an
    interpolation that did not halve the bracket.  Only the side of ``level`` each value is on decides
    the answer; the values themselves only choose where to look next, so bounds that are not exact
    (the thresholded searches of :meth:`._lr_search._Search.upper`) serve as well.

    Measured (the 0.1 quantile's ends under the Gaussian window of 349 on 1,000 values, 10^6 reports of a
    bimodal truth): 7 and 7 probes where galloping by doubling and bisection took 10 and 8."""

    def reaches(v: float) -> bool:
        return v > level if strict else v >= level

    known = {}

    def probe(i: int) -> bool:
        known[i] = float(value(i))
        return reaches(known[i])

    lo, hi = -1, k - 1  # reaches(lo) false (or lo = -1), reaches(hi) true (or hi = k - 1, unprobed)
    down = probe(start)
    if down:
        hi = start
    else:
        lo = start
    step, least, trail = 1.0, 1.0, [start]
    while True:  # gallop away from start until the crossing is bracketed
        here = hi if down else lo
        edge = 0 if down else k - 1
        if here == edge:
            break
        guess = None
        if len(trail) >= 2:
            a, b = trail[-2], trail[-1]
            slope = (known[a] - known[b]) / (a - b)
            if slope > 0.0:
                guess = abs(level - known[b]) / slope
        want = least if guess is None else min(max(guess, least), 8.0 * step)
        j = here - math.ceil(want) if down else here + math.ceil(want)
        if down:
            j = max(j, 0)
        elif j >= k - 1:  # k - 1 is the answer by convention when nothing reaches: not probed
            break
        step = abs(j - here)
        least = max(1.0, math.sqrt(2.0) * least)
        trail.append(j)
        if probe(j) == down:  # still on start's side
            if down:
                hi = j
            else:
                lo = j
            continue
        if down:
            lo = j
        else:
            hi = j
        break
    halved = True
    while hi - lo > 1:  # reaches(lo) false (or lo = -1), reaches(hi) true (or hi = k - 1)
        mid = (lo + hi) // 2
        j = mid
        if halved and lo in known and hi in known and known[hi] > known[lo]:
            t = (level - known[lo]) / (known[hi] - known[lo])
            j = min(max(lo + math.ceil(t * (hi - lo)), lo + 1), hi - 1)
        width = hi - lo
        if probe(j):
            hi = j
        else:
            lo = j
        halved = 2 * (hi - lo) <= width
    return hi
