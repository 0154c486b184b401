"""One-dimensional searches shared by the designers (:mod:`design`, :mod:`finite_design`).

The defect is U-shaped in a kernel parameter (support leakage dominates at one
end, overlap loss at the other: Tables III-IV), observed but not proven
quasi-convex.  :func:`extreme_feasible` therefore scans a log grid from the
*good* end (large ``lam``, small ``sigma``: less distortion), falls back to a
golden-section search for the minimum between grid points when no grid point
is feasible, and finally bisects towards the good end.  Every parameter it
returns has been evaluated and found feasible; what is not guaranteed is that
no feasible island hides between grid points closer to the good end.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["extreme_feasible", "scan_radii"]

_INVPHI = (math.sqrt(5) - 1) / 2


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
