"""One-dimensional searches shared by the designers (:mod:`.radius`, :mod:`.finite`).

Every routine works in a *goodness coordinate* ``u`` that grows towards the
less private, less distorting end of a kernel parameter (``u = log lam`` for
Laplace, ``u = -log sigma`` for Gaussian: the designers build it from the
registry's :attr:`Family.private_when <sparseldp.core.families.Family>`), on a
function ``f(u)`` that is ``<= 0`` exactly where ``u`` is feasible.

* :func:`largest_feasible` - the crossing of ``f`` inside a bracket with a
  feasible and an infeasible end (bisection safeguarded regula falsi, the
  Illinois variant): it converges superlinearly on a smooth ``f`` and never
  leaves the bracket.  Which crossing it finds when ``f`` crosses zero more
  than once inside the bracket is not specified; the designers hand it
  brackets inside which the crossing is unique (module docstrings of
  :mod:`.radius` and :mod:`.finite` say why).
* :func:`golden_min` - the minimum of a unimodal ``f`` on an interval (Brent's
  method), stopped early at the first point with ``f <= stop``.
* :func:`first_feasible` - the smallest feasible integer of a monotone
  predicate with values (regula falsi on the integers).
* :func:`extreme_feasible` - the feasible point nearest one end of a range
  found from a log grid (golden section around the grid minimum when no
  grid point is feasible, then bisection): for functions without a known
  feasible point or bracket (the baselines of :func:`.finite.calibrate`).
* :func:`scan_radii` - radii for a scan: dense first, then geometric.

Every ``u`` they return has been evaluated; ``largest_feasible`` returns a
point with ``f(u) <= 0``.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["largest_feasible", "golden_min", "first_feasible", "extreme_feasible", "scan_radii", "u_tolerance"]

_INVPHI = (math.sqrt(5.0) - 1.0) / 2.0


def u_tolerance(u: float) -> float:
    """Bracket width at which :func:`largest_feasible` stops: ``1e-14`` relative to the parameter,
    never below four ulp of ``u``."""
    return max(1e-14, 4.0 * math.ulp(u))


def largest_feasible(f, u_ok: float, u_bad: float, *, f_ok=None, f_bad=None, xtol=None):
    """The crossing of ``f`` in ``[u_ok, u_bad]``: ``(u, f(u), u_next)`` with ``f(u) <= 0 < f(u_next)``.

    ``f(u_ok) <= 0 < f(u_bad)`` is required (``u_ok < u_bad``; the known values
    may be passed as ``f_ok`` / ``f_bad``).  ``f`` may return ``-inf`` (the
    step is then a bisection).  Stops when ``u_next - u <= xtol`` (default
    :func:`u_tolerance`).  Illinois regula falsi: the end that stays put twice
    has its value halved, so both ends converge; every third step without a
    halving of the bracket is a bisection.
    """
    a, b = float(u_ok), float(u_bad)
    fa = f(a) if f_ok is None else f_ok
    fb = f(b) if f_bad is None else f_bad
    if not (fa <= 0.0 < fb):
        raise ValueError(f"largest_feasible needs f(u_ok) <= 0 < f(u_bad); got {fa!r}, {fb!r}")
    side = 0
    width = b - a
    slow = 0
    while True:
        tol = xtol if xtol is not None else u_tolerance(max(abs(a), abs(b)))
        if b - a <= tol:
            return a, fa, b
        if slow >= 2 or not (math.isfinite(fa) and math.isfinite(fb)):
            x = 0.5 * (a + b)
            slow = 0
        else:
            x = b - fb * (b - a) / (fb - fa)
            lo, hi = a + 0.01 * tol, b - 0.01 * tol
            if not lo < x < hi:
                x = 0.5 * (a + b)
        if not a < x < b:  # a and b adjacent doubles
            return a, fa, b
        fx = f(x)
        if fx <= 0.0:
            a, fa = x, fx
            if side == -1:
                fb *= 0.5
            side = -1
        else:
            b, fb = x, fx
            if side == 1:
                fa *= 0.5
            side = 1
        if b - a > 0.5 * width:
            slow += 1
        else:
            slow = 0
            width = b - a


def golden_min(f, a: float, b: float, *, xtol: float, stop: float = -math.inf):
    """Minimize ``f`` on ``[a, b]`` (Brent: golden section with parabolic steps): ``(u, f(u))`` at the best
    point evaluated.

    Returns at once when a point with ``f <= stop`` is met; otherwise when the
    bracket around the best point is narrower than about ``2 xtol``.  For a
    unimodal ``f`` the best point is within that width of the minimizer;
    parabolic steps make a smooth minimum converge in a few evaluations,
    golden-section steps keep kinks and plateaus safe.
    """
    c = 1.0 - _INVPHI
    x = w = v = a + c * (b - a)
    fx = fw = fv = f(x)
    if fx <= stop:
        return x, fx
    d = e = 0.0
    while True:
        m = 0.5 * (a + b)
        tol1 = xtol
        tol2 = 2.0 * tol1
        if abs(x - m) <= tol2 - 0.5 * (b - a):
            return x, fx
        parabolic = False
        if abs(e) > tol1:
            r = (x - w) * (fx - fv)
            q = (x - v) * (fx - fw)
            p = (x - v) * q - (x - w) * r
            q = 2.0 * (q - r)
            if q > 0.0:
                p = -p
            q = abs(q)
            if abs(p) < abs(0.5 * q * e) and q * (a - x) < p < q * (b - x):
                e, d = d, p / q
                u = x + d
                if u - a < tol2 or b - u < tol2:
                    d = tol1 if x < m else -tol1
                parabolic = True
        if not parabolic:
            e = (a - x) if x >= m else (b - x)
            d = c * e
        u = x + (d if abs(d) >= tol1 else (tol1 if d > 0 else -tol1))
        fu = f(u)
        if fu <= stop:
            return u, fu
        if fu <= fx:
            if u >= x:
                a = x
            else:
                b = x
            v, fv, w, fw, x, fx = w, fw, x, fx, u, fu
        else:
            if u < x:
                a = u
            else:
                b = u
            if fu <= fw or w == x:
                v, fv, w, fw = w, fw, u, fu
            elif fu <= fv or v == x or v == w:
                v, fv = u, fu


def first_feasible(g, lo: int, hi: int, *, g_lo: float, g_hi: float, info_hi=None):
    """Smallest integer ``t`` in ``(lo, hi]`` with ``g(t) <= 0``, for ``g`` nonincreasing in ``t``.

    ``g(lo) > 0 >= g(hi)`` (their values ``g_lo``, ``g_hi``).  ``g`` returns
    ``(value, info)``; the result is ``(t, info(t))`` (``info_hi`` belongs to
    the initial ``hi``).  Regula falsi on the integers, Illinois variant (the
    value of an end kept twice is halved), with a bisection after two steps
    in a row that each leave more than half of the bracket: at most about
    three times the steps of a bisection, usually far fewer (``log delta`` is
    nearly linear or quadratic in the radius).
    """
    side = 0
    poor = 0
    while hi - lo > 1:
        width = hi - lo
        if poor < 2 and math.isfinite(g_lo) and math.isfinite(g_hi) and g_lo > g_hi:
            t = int(round(lo + g_lo * (hi - lo) / (g_lo - g_hi)))
            t = min(max(t, lo + 1), hi - 1)
        else:
            t = lo + width // 2
        val, info = g(t)
        if val <= 0.0:
            hi, g_hi, info_hi = t, val, info
            if side == -1:
                g_lo *= 0.5
            side = -1
        else:
            lo, g_lo = t, val
            if side == 1:
                g_hi *= 0.5
            side = 1
        poor = poor + 1 if hi - lo > width // 2 else 0  # two poor steps in a row: then a bisection
    return hi, info_hi


def _golden_until(f, a: float, b: float, target: float, *, max_iter: int = 80, xtol: float = 1e-12):
    """Golden-section minimization of ``f`` on ``[a, b]``, stopped at the first value ``<= target``."""
    c, d = b - _INVPHI * (b - a), a + _INVPHI * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(max_iter):
        if min(fc, fd) <= target:
            return c if fc <= fd else d
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - _INVPHI * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + _INVPHI * (b - a)
            fd = f(d)
        if abs(b - a) < xtol:
            break
    return None


def extreme_feasible(delta_of, target: float, good: float, other: float, *, known=None,
                     ngrid: int = 24, rtol: float = 1e-10):
    """The parameter nearest the ``good`` end with ``delta_of(param) <= target``.

    ``good`` and ``other`` are the ends of a positive range (either order).
    With ``known`` (a parameter already known to be feasible) the grid is
    skipped and the bisection starts from it.  Returns ``(param, delta)`` or
    ``None`` when neither the grid nor the golden-section refinement around its
    minimum finds a feasible point.
    """
    d_good = delta_of(good)
    if d_good <= target:
        return good, d_good
    if known is not None and delta_of(known) <= target:
        start = float(known)
    else:
        grid = np.geomspace(good, other, ngrid)  # grid[0] is the good end
        vals = np.array([delta_of(float(g)) for g in grid])
        feas = np.flatnonzero(vals <= target)
        if feas.size:
            start = float(grid[feas[0]])
        else:
            i = int(np.argmin(vals))
            u = _golden_until(lambda v: delta_of(math.exp(v)), math.log(grid[max(i - 1, 0)]),
                              math.log(grid[min(i + 1, ngrid - 1)]), target)
            if u is None:
                return None
            start = math.exp(u)
    lo, hi = start, float(good)  # lo feasible, hi infeasible
    for _ in range(100):
        mid = math.sqrt(lo) * math.sqrt(hi)  # lo * hi may overflow (lam near 1e300)
        if delta_of(mid) <= target:
            lo = mid
        else:
            hi = mid
        if abs(hi - lo) <= rtol * max(lo, hi):
            break
    return lo, delta_of(lo)


def scan_radii(first: int, dense: int, end: int) -> list[int]:
    """Radii to scan: every one in ``first..min(end, first + dense)``, then steps x1.15 (+1) up to ``end``.

    The list is strictly increasing and ends at ``end`` (when ``end >= first``).
    """
    radii = list(range(first, min(end, first + dense) + 1))
    r = float(radii[-1])
    while r < end:
        r = r * 1.15 + 1
        radii.append(int(min(r, end)))
    return radii
