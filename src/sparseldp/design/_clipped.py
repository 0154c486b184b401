"""The clipped-window search on a finite domain (:func:`~sparseldp.design.finite.design_finite`).

:func:`_design_clipped` with its pieces: :class:`_ClippedBand` (nearest-value
``delta_star`` and distortion of clipped channels in closed form from prefix
sums of the kernel), :func:`_first_possible_radius` (the edge pair's screen),
:func:`_joint_clipped` over the radii with :class:`_ZScreen` (the Z closed
forms, fact 2), the one-radius searches :func:`_min_over_range` and
:func:`_crossing`, and :func:`_certify_clipped`.  Facts 1-3 and the search
are stated in the module docstring of :mod:`sparseldp.design.finite`.
"""

from __future__ import annotations

import math

import numpy as np

from ._common import _slack
from ._domain import _GRID, _certified, _finish, _window_channel
from ._joint import _Joint
from ._search import golden_min, largest_feasible, scan_radii, u_tolerance
from ..errors import InfeasibleError
from ..channel import MAX_ENTRIES
from ..core.families import Family

_DENSE_RADII = 64
#: Rows whose closed-form overlap ``A - e^eps B`` is at most this share of ``A`` (a sum that cancels) are
#: summed term by term instead (:meth:`_ClippedBand._overlap_terms`).
_EXACT_BELOW = 1e-6
#: Entries (rows x window) of one block of the term-by-term sums: bounds their temporaries.
_BLOCK_ENTRIES = 1 << 20


class _ClippedBand:
    """Nearest-value ``delta_star`` and distortion of clipped channels on ``a..b``, for the searches.

    For a parameter ``p`` and radius ``t`` (``t <= b - a``, fact 1) row ``x``
    is ``P(x + d | x) = w(d) / Z_x`` over its clipped window of offsets
    ``lo_x <= d <= hi_x`` (``-t <= d <= t``), with ``Z_x`` from one cumulative
    sum of ``w`` over ``|d|`` (every window contains ``d = 0``, so no
    difference of sums is formed); the moments are sums of ``w(d) |d|^r`` over
    the windows, the same way.  ``delta_star`` is the largest defect over the
    ``2 k`` pairs of fact 3 (the ``k`` to the right, ``x`` and ``x' = min(x +
    H, b)``: those to the left are their mirror images), each ``sum_y [P(y|x) -
    e^eps P(y|x')]_+``, in closed form from prefix sums of ``w``:

    * the outputs of ``x`` below the window of ``x'`` (its leakage): one sum;
    * on the outputs both reach, ``L(y) = log P(y|x) - log P(y|x')`` is
      nonincreasing in ``y`` because ``log w`` is concave (Laplace and Gaussian
      kernels; :meth:`evaluate` checks it), so the positive terms are those up
      to the last output with ``L > eps`` (found by bisection, all rows at
      once), and their sum is ``A - e^eps B`` with ``A``, ``B`` the two rows'
      sums there; where that difference cancels (at most :data:`_EXACT_BELOW`
      of ``A``: the rows near the threshold ``L = eps``) the terms are summed
      one by one in log space instead.

    Every sum is a difference of prefix sums of ``w`` accumulated from the
    window's far left end (``d = -t``), and the ranges summed start at the
    left of the outputs concerned, so a small sum is a difference of smaller
    prefixes (relative error about ``1e-16`` times ``1 / (1 - w(d+1)/w(d))``
    at its start), and ``A - e^eps B`` is taken only where it keeps a relative
    error of about ``1e-10`` at most.  ``O(k log t + t)`` per
    evaluation (``O(k t)`` before): ``design --domain 0:3000`` in seconds
    instead of minutes.  Rounded to nearest: never a certificate (the
    designers certify with the channel).
    """

    def __init__(self, fam: Family, domain, eps: float, H: int, prior):
        a, b = domain
        self.fam, self.eps, self.k, self.span = fam, eps, b - a + 1, b - a
        self.x = np.arange(self.k)
        # the partner of x at the largest separation in range to the right (fact 3); the pairs to the left
        # are their mirror images (the clipped channel is symmetric under y -> a + b - y, x -> a + b - x)
        self.partner = np.minimum(self.x + H, self.k - 1)
        self.prior = prior
        self._geo_t, self._geo = None, None

    def _geometry(self, t):
        """The offsets ``d``, the window ends ``lo``, ``hi`` of every row and ``|d|`` at radius ``t``.

        Only the last radius' arrays are kept: the searches go through the radii in turn (memory stays
        O(k + s), not the sum over every radius scanned).
        """
        if self._geo_t != t:
            d = np.arange(-t, t + 1)
            lo = np.maximum(-t, -self.x)  # window offsets of row x: lo_x <= d <= hi_x
            hi = np.minimum(t, self.k - 1 - self.x)
            self._geo = (d, lo, hi, np.abs(d).astype(float))
            self._geo_t = t
        return self._geo

    def evaluate(self, param, t):
        """``(log delta_star, R1, R2)`` of the clipped channel with ``param`` and radius ``t``."""
        t = min(t, self.span)
        d, lo, hi, absd = self._geometry(t)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            lw = np.asarray(self.fam.search.log_w(param, d), dtype=float)  # log w(0) = 0 is the largest
            w = np.exp(lw[t:])  # d = 0..t
            c0, c1, c2 = np.cumsum(w), np.cumsum(w * absd[t:]), np.cumsum(w * absd[t:] ** 2)
            z = c0[hi] + c0[-lo] - 1.0
            r1 = float(self.prior @ ((c1[hi] + c1[-lo]) / z))
            r2 = float(self.prior @ ((c2[hi] + c2[-lo]) / z))
            worst = self._worst_defect(lw, np.log(z), lo, hi, t)
        return (math.log(worst) if worst > 0 else -math.inf), r1, r2

    def _worst_defect(self, lw, logz, lo, hi, t):
        """The largest ordered defect ``sum_y [P(y|x) - e^eps P(y|x')]_+`` over the rows (class docstring)."""
        # log w concave on the lattice (second differences <= 0, up to rounding): L is then monotone
        inner = lw[np.isfinite(lw)]
        if inner.size > 2 and float(np.max(np.diff(inner, 2))) > 1e-9 * max(1.0, float(np.max(np.abs(inner)))):
            raise ValueError(f"the clipped search needs a log-concave kernel; family {self.fam.name!r} is not")
        x = self.x
        p = self.partner
        h = p - x
        cw = np.concatenate(([0.0], np.cumsum(np.exp(lw))))  # cw[j]: sum of w over offsets -t .. j - 1 - t
        last = 2 * t + 1

        def wsum(u, v):  # sum of w over offsets u..v of each row (0 where v < u)
            return np.where(v >= u, cw[np.clip(v + t + 1, 0, last)] - cw[np.clip(u + t, 0, last)], 0.0)

        lo_x, hi_x = lo, hi
        u1 = np.maximum(lo_x, lo[p] + h)  # the first offset (of row x) that row x' reaches too
        u2 = np.minimum(hi_x, hi[p] + h)  # the last; the window of x' never ends before that of x
        zx, zp = np.exp(logz), np.exp(logz[p])
        leak = wsum(lo_x, np.minimum(u1 - 1, hi_x)) / zx
        # L(u) - eps on the common offsets, nonincreasing in u: bisection for the last u with L(u) > eps
        shift = logz[p] - logz - self.eps
        a, b = u1 - 1, u2 + 1  # invariant: excess > 0 at a (or a = u1 - 1), <= 0 at b (or b = u2 + 1)
        while True:
            open_ = b - a > 1
            if not open_.any():
                break
            mid = np.where(open_, (a + b) // 2, u1)
            m = np.clip(mid, -t, t)
            excess = lw[m + t] - lw[np.clip(m - h, -t, t) + t] + shift
            up = open_ & (excess > 0)
            a = np.where(up, mid, a)
            b = np.where(open_ & ~up, mid, b)
        A = wsum(u1, a) / zx
        B = wsum(u1 - h, a - h) / zp
        over = np.maximum(A - math.exp(self.eps) * B, 0.0)
        near = np.flatnonzero((A > 0) & (over <= _EXACT_BELOW * A))  # near the threshold: the difference cancels
        if near.size:
            over[near] = self._overlap_terms(lw, logz, near, u1[near], a[near], h[near], shift[near], t)
        return float(np.max(leak + over))

    def _overlap_terms(self, lw, logz, rows, first, last, h, shift, t):
        """``sum_u P(x + u | x) (1 - e^{eps - L(u)})`` over ``first <= u <= last`` for the given rows, term by
        term with ``L`` in log space (full relative precision), a block of rows at a time."""
        d = np.arange(-t, t + 1)
        out = np.empty(rows.size)
        step = max(1, _BLOCK_ENTRIES // d.size)
        for r0 in range(0, rows.size, step):
            sl = slice(r0, r0 + step)
            inside = (d[None, :] >= first[sl, None]) & (d[None, :] <= last[sl, None])
            partner_lw = lw[np.clip(d[None, :] - h[sl, None], -t, t) + t]
            excess = lw[None, :] - partner_lw + shift[sl, None]  # L(u) - eps
            logp = lw[None, :] - logz[rows[sl], None]
            terms = np.where(inside & (excess > 0), np.exp(logp) * -np.expm1(-excess), 0.0)
            out[sl] = terms.sum(axis=1)
        return out

    def edge_log_defect(self, param, t):
        """``log`` of the larger ordered defect of the edge pair ``(a, a + h)``, ``h = min(H, b - a)``: a
        lower bound on :meth:`evaluate`'s ``delta_star`` at O(t) cost (a screen for radii)."""
        t = min(t, self.span)
        h = int(self.partner[0])
        y = np.arange(0, min(h + t, self.span) + 1)  # outputs of either row
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            lw0 = np.where(y <= t, np.asarray(self.fam.search.log_w(param, y), dtype=float), -np.inf)
            lwh = np.where(y >= h - t, np.asarray(self.fam.search.log_w(param, y - h), dtype=float), -np.inf)
            l0 = lw0 - np.log(np.exp(lw0).sum())  # both rows contain their own input: sums >= 1
            lh = lwh - np.log(np.exp(lwh).sum())
            worst = 0.0
            for lp, lq in ((l0, lh), (lh, l0)):
                excess = lp - lq - self.eps
                terms = np.where(excess > 0, np.exp(lp) * -np.expm1(-excess), 0.0)
                worst = max(worst, float(terms.sum()))
        return math.log(worst) if worst > 0 else -math.inf


def _check_search_size(domain) -> None:
    """Refuse, before any work, a clipped search whose channels would exceed :data:`MAX_ENTRIES`.

    The search (either the smallest ``s`` for a given parameter or the joint one) may go up to
    ``s = 2(b - a) + 1`` (fact 1), where it evaluates ``k`` rows of ``s`` offsets: ``k (2k - 1)``
    entries.  Beyond :data:`MAX_ENTRIES` (the cap of every channel, :func:`check_entries`) that is
    refused at once, as ``estimate`` and ``report`` refuse a large channel, instead of running out of
    memory minutes later.
    """
    a, b = domain
    k = b - a + 1
    s_max = 2 * (b - a) + 1
    if k * s_max > MAX_ENTRIES:
        largest = _largest_clipped_domain()
        raise ValueError(
            f"domain ({a}, {b}) is too large for a clipped design: its search evaluates supports up to "
            f"s = 2(b - a) + 1 = {s_max}, channels of {k} x {s_max} = {k * s_max} entries, more than the "
            f"2^27 = {MAX_ENTRIES} allowed; use a domain of at most {largest} values, or extended windows "
            "(window='extended', --window extended: the Z design on that domain)")


def _largest_clipped_domain() -> int:
    """The largest ``k`` with ``k (2k - 1) <= MAX_ENTRIES``."""
    k = math.isqrt(MAX_ENTRIES // 2) + 1
    while k * (2 * k - 1) > MAX_ENTRIES:
        k -= 1
    return k


def _design_clipped(fam: Family, given, eps, delta, H, domain, objective, w):
    a, b = domain
    span = b - a
    if delta < 1.0:  # (delta = 1 is met at s = 1 at once)
        _check_search_size(domain)
    pname = fam.param
    band = _ClippedBand(fam, domain, eps, H, w)
    slack = _slack(delta, eps)
    t_first = _first_possible_radius(min(H, span), delta + slack, span)
    if given is not None:
        for t in range(t_first, span + 1):
            if math.exp(band.evaluate(given, t)[0]) > delta + slack:
                continue
            ch = _window_channel(fam, given, t, domain, "clipped")
            if _certified(ch, eps, H, delta) <= delta:
                return _finish(fam, given, t, eps, delta, H, domain, "clipped", objective, w,
                               "smallest certifiable s: every smaller s checked with the nearest value, or the "
                               "rigorous bounds within rounding of delta")
        raise InfeasibleError(
            f"no s makes the clipped {fam.name} channel with {pname} = {given:g} on {a}..{b} "
            f"(eps = {eps:g}, delta = {delta:g})-LDP on range H = {H}: every s up to {2 * span + 1} was "
            "checked exactly, and larger s give the same channel (the window is the whole domain)"
        )
    if delta >= 1.0:  # every channel qualifies; s = 1 (the identity) has zero distortion
        return _finish(fam, fam.search.finite_range(span + 1)[0], 0, eps, delta, H, domain, "clipped", objective, w,
                       "delta = 1: every channel qualifies; s = 1 publishes the input")
    found = _joint_clipped(fam, band, eps, delta, H, span, t_first, objective)
    if found is not None:
        u, t, sign = found
        param = _certify_clipped(fam, band, u, t, sign, eps, delta, H, domain)
        return _finish(fam, param, t, eps, delta, H, domain, "clipped", objective, w,
                       "rigorous certificate; (s, param) optimal over the search (module docstring)")
    raise InfeasibleError(
        f"no clipped {fam.name} channel on {a}..{b} meets (eps = {eps:g}, delta = {delta:g}) on range "
        f"H = {H} anywhere in the search of s and {pname}"
    )


def _first_possible_radius(h: int, limit: float, span: int) -> int:
    """Smallest radius not excluded by the edge pair ``(a, a + h)``, ``h = min(H, b - a)``.

    Row ``a``'s window is ``a..a+t``; the outputs ``a..a+h-t-1`` lie outside
    the window of ``a + h``, and since ``w`` is nonincreasing in ``|d|`` their
    share of the row is at least their share of the count (Chebyshev's sum
    inequality): the defect is at least ``(h - t) / (t + 1)`` for every
    parameter.  Radii where that exceeds ``limit`` are skipped.
    """
    t = min(max(0, math.ceil((h - limit) / (1.0 + limit))), span)  # (h - t) / (t + 1) <= limit, solved for t
    while t > 0 and (h - t + 1) / t <= limit:  # the rounding of the division: settle on the exact test
        t -= 1
    while t < span and (h - t) / (t + 1) > limit:
        t += 1
    return t


def _joint_clipped(fam: Family, band, eps, delta, H, span, t_first, objective):
    """``(u, t, sign)`` of the best clipped design found over the radii (:mod:`.finite`), or None.

    Radii with ``2t + H <= b - a`` are screened with the Z closed forms
    (fact 2: there the clipped defect is at least the Z one), which also
    bound the parameter from above.
    """
    sign = 1.0 if fam.private_when == "smaller" else -1.0  # u = sign * log(param) grows towards less noise
    good, other = fam.search.finite_range(span + 1)
    u_good, u_other = sign * math.log(good), sign * math.log(other)
    # aim below delta by the family's margin and by the channel's rounding (its rigorous bound sits up to a
    # few 1e-14 above the nearest value), so that the certificate holds at the first try
    margin = min(max(fam.search.margin, 5e-14 / delta), 1e-3) if delta > 0 else 0.0
    target = math.log(delta) + math.log1p(-margin) if delta > 0 else -math.inf
    index = 1 if objective == "r1" else 2
    slack_abs = _slack(delta, eps)
    z = _ZScreen(fam, eps, delta, H) if 0 < delta < 1 else None
    t_start = t_first
    if z is not None:
        # radii with 2t + H <= b - a below the first Z-feasible one are infeasible here too (fact 2)
        tz = z.first_radius(span)
        t_start = max(t_start, tz if 2 * tz + H <= span else (span - H) // 2 + 1)
    t_start = min(t_start, span)
    # dense from the first radius that can be feasible, and the fixed scan (every radius up to 63, then x1.15)
    radii = sorted(set(scan_radii(t_start, _DENSE_RADII - 1, span))
                   | {t for t in scan_radii(0, _DENSE_RADII - 1, span) if t >= t_start})
    best = None  # (objective, u, t)
    u_known = None
    for t in radii:
        u_top = u_good
        if z is not None and 2 * t + H <= span:
            u_top = z.upper(t)
            if u_top is None:
                continue
            u_top = min(u_top, u_good)

        def f(u, t=t, edge=False):
            p = math.exp(sign * u)
            v = band.edge_log_defect(p, t) if edge else band.evaluate(p, t)[0]
            if target == -math.inf:  # delta = 0: feasible only without any defect
                return -1.0 if v == -math.inf else math.inf
            return v - target

        if target > -math.inf and (u_known is None or f(u_known) > 0.0):
            # the edge pair alone (a lower bound, O(t) per value) rules the radius out when its minimum over
            # the parameter exceeds delta beyond rounding
            _, f_edge = _min_over_range(lambda u: f(u, edge=True), u_top, u_other)
            if f_edge + target > math.log(delta + slack_abs):
                continue
        found = _crossing(f, u_top, u_other, u_known)
        if found is None:
            continue
        u_known = found
        val = band.evaluate(math.exp(sign * found), t)[index]
        if best is None or val < best[0]:
            best = (val, found, t)
    return None if best is None else (best[1], best[2], sign)


class _ZScreen:
    """The Z closed forms at radius ``t``: a proof of infeasibility and an upper end for ``u`` (fact 2)."""

    def __init__(self, fam: Family, eps, delta, H):
        self.joint = _Joint(fam, eps, delta, H, "r2")
        self.u_lim, self.u_beyond = self.joint._limit()
        self.limit = math.log(delta + _slack(delta, eps)) - self.joint.target

    def first_radius(self, span) -> int:
        """The smallest radius at which some parameter is feasible on Z (Lemma 1 of :mod:`.radius`), or
        ``span + 1`` when it lies beyond the family's cap (then no radius of the domain is)."""
        j = self.joint
        settle = j.S.settle(j.param(self.u_lim), j.delta, j.H)
        t0 = (j.H + 1) // 2
        try:
            return j._first_radius(t0, int(min(max(math.ceil(settle), t0), j.fam.max_t)), self.u_lim)[0]
        except InfeasibleError:  # needs a support above the cap: far beyond the domain's radii
            return span + 1

    def upper(self, t):
        """An infeasible ``u`` (for Z, hence for the clipped channel) above every feasible one at radius
        ``t``, or None when no parameter is feasible at ``t`` (beyond rounding)."""
        u, fu = self.joint._min_point(t, self.u_lim, stop=0.0)
        if fu > self.limit:
            return None
        if fu > 0.0:
            return self.u_beyond
        return self.joint._root(t, u, self.u_beyond)[1]


def _min_over_range(f, u_top, u_other):
    """``(u, f(u))`` near the minimum of ``f`` over ``[u_other, u_top]``: a log grid, then Brent's method
    between the grid minimum's neighbours (stopped at the first feasible point)."""
    grid = np.linspace(u_top, u_other, _GRID)
    vals = [f(float(u)) for u in grid]
    i = int(np.argmin(vals))
    if vals[i] <= 0.0:
        return float(grid[i]), vals[i]
    lo, hi = float(grid[min(i + 1, _GRID - 1)]), float(grid[max(i - 1, 0)])
    u, fu = golden_min(f, lo, hi, xtol=1e-9, stop=0.0)
    return (u, fu) if fu < vals[i] else (float(grid[i]), vals[i])


def _crossing(f, u_top, u_other, u_known):
    """The largest feasible ``u`` (``f(u) <= 0``) below ``u_top`` at one radius, or None.

    Starts from ``u_known`` (the previous radius' answer) when it is feasible,
    else from the feasible point of a log grid nearest ``u_top`` (Brent's
    minimization around the grid's minimum when none is), then solves up to
    the first infeasible point above it (:func:`sparseldp.design._search.largest_feasible`).
    """
    f_top = f(u_top)
    if f_top <= 0.0:
        return u_top
    start = None
    if u_known is not None and u_known < u_top:
        fk = f(u_known)
        if fk <= 0.0:
            start = (u_known, fk)
    if start is None:
        grid = np.linspace(u_top, u_other, _GRID)  # grid[0] is the top end
        vals = [f_top] + [f(float(u)) for u in grid[1:]]
        feas = [i for i, v in enumerate(vals) if v <= 0.0]
        if feas:
            start = (float(grid[feas[0]]), vals[feas[0]])
        else:
            i = int(np.argmin(vals))
            lo, hi = float(grid[min(i + 1, _GRID - 1)]), float(grid[max(i - 1, 0)])
            u, fu = golden_min(f, lo, hi, xtol=1e-9, stop=0.0)
            if fu > 0.0:
                return None
            start = (u, fu)
    u0, f0 = start
    if not math.isfinite(f_top):
        return u0 if f0 == -1.0 else largest_feasible(f, u0, u_top, f_ok=f0, f_bad=f_top)[0]
    return largest_feasible(f, u0, u_top, f_ok=f0, f_bad=f_top)[0]


def _certify_clipped(fam: Family, band, u, t, sign, eps, delta, H, domain):
    """The parameter at ``(u, t)`` once the channel's rigorous upper bound meets ``delta``.

    If rounding puts the bound above ``delta``, ``u`` moves towards the
    private end by the gap over the local slope of ``log delta_star``, with a
    growing safety factor (as :func:`sparseldp.design.radius.design` does).
    """
    factor = 1.5
    log_delta = math.log(delta) if delta > 0 else -math.inf
    for _ in range(12):
        param = math.exp(sign * u)
        ch = _window_channel(fam, param, t, domain, "clipped")
        ds = float(ch.delta_star_upper(eps, H))
        if ds <= delta:
            return param
        h = 1e-7 * max(1.0, abs(u))
        slope = (band.evaluate(param, t)[0] - band.evaluate(math.exp(sign * (u - h)), t)[0]) / h
        need = math.log(ds) - log_delta + 1e-12
        step = need / slope * factor if slope > 0.0 and math.isfinite(need / slope) else 0.0
        u -= max(step, 4.0 * u_tolerance(u))
        factor *= 4.0
    raise InfeasibleError(  # pragma: no cover - the search aims below delta
        f"the clipped {fam.name} design found at s = {2 * t + 1} could not be certified at delta = {delta:g}")
