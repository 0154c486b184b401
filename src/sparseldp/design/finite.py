r"""Design and calibration on a finite domain, accounted exactly with Theorem 2.

On a finite domain ``a..b`` the s-sparse mechanisms are channels
(:class:`~sparseldp.SparseChannel`, docs/paper.md, "Output alphabet"):

* ``window="extended"``: outputs ``a - t .. b + t``; every row is the
  mechanism on Z, so the defect of a pair is ``delta_h`` of Theorem 3/9 with
  ``h = |x - x'|`` and the channel's ``delta`` equals ``delta_star`` on range
  ``min(H, b - a)``.  Design reduces exactly to :func:`sparseldp.design` with
  that range (proved equal, and re-certified with the channel).
* ``window="clipped"``: outputs stay in ``a..b`` and rows near the edges are
  renormalized, so the defect depends on the pair, not only on ``h``; only the
  general Theorem 2 (Theorem 8 for the Gaussian family) applies.  Every
  certificate here is the channel's (:meth:`SparseChannel.delta_star_upper`,
  over the ordered pairs ``|x - x'| <= H``), never the translation-invariant
  formula; the searches evaluate the same supremum through the reduction of
  fact 3 below.

Three facts make the clipped search finite, exact in ``s`` and fast:

1. For ``t >= b - a`` every clipped window is the whole domain, so larger
   ``s`` give the same channel: ``s`` ranges over ``1, 3, ..., 2(b - a) + 1``.
2. A pair ``x, x + h`` with ``x - t >= a`` and ``x + h + t <= b`` has both
   windows inside the domain, where the clipped rows *are* the Z rows; so when
   ``2t + H <= b - a`` the clipped ``delta >= delta_star`` on Z, and radii the
   Z formula proves infeasible are skipped without loss.
3. A clipped channel's rows form a family with monotone likelihood ratio in
   ``x``: for ``x < x'`` the ratio ``P(y|x) / P(y|x')`` is ``+inf`` left of
   ``x'``'s window, ``w(y - x) / w(y - x')`` times a constant on the common
   part (nonincreasing in ``y``: ``log w`` is concave) and ``0`` right of
   ``x``'s window.  So the set ``{P(.|x) > e^eps P(.|x')}`` is a half-line,
   ``Delta_eps(x, x') = max_c [F_x(c) - e^eps F_{x'}(c)]`` with ``F`` the rows'
   distribution functions, and since ``F_{x''} <= F_{x'}`` for ``x'' >= x'``
   (the likelihood-ratio order implies the stochastic one) the defect of
   ``(x, x + h)`` is nondecreasing in ``h`` (and likewise to the left).  The
   supremum over pairs ``|x - x'| <= H`` is therefore attained at
   ``x' = x +- min(H, distance to the domain's end)``: ``2 k`` pairs, not
   ``O(k H)``.  The searches evaluate exactly those pairs from a band of the
   rows' log-probabilities (:class:`_ClippedBand`, rounded to nearest).

Distortion.  ``R1``/``R2`` of a channel are averaged over an input
distribution (``prior``, uniform by default): ``sum_x prior(x) E[|Y - x|^r | x]``.
Each clipped row is a one-parameter exponential family in ``|y - x|``
(Laplace) or ``(y - x)^2`` (Gaussian) on a fixed window, so both moments are
nonincreasing in ``lam`` and nondecreasing in ``sigma`` (covariance of two
nondecreasing functions of ``|y - x|`` is nonnegative): for a fixed ``s`` the
best parameter is the largest feasible ``lam`` / smallest feasible ``sigma``.

Which way the answers err.  The ``delta_star`` of every returned design is
a rigorous *upper bound* on the exact defect
(:meth:`SparseChannel.delta_star_upper`), and ``<= delta``: every returned
channel is certified with that upper bound, so its exact defect never
exceeds ``delta``.  The smallest ``s`` for a given parameter is the smallest
certifiable one (every smaller radius is decided by the nearest value of
fact 3 when it is farther from ``delta`` than any rounding error, by the
channel's rigorous bounds otherwise).

The joint search.  Radii are skipped without evaluation when the edge pair
``(a, a + h)``, ``h = min(H, b - a)``, excludes them for every parameter
(:func:`_first_possible_radius`) and, when ``2t + H <= b - a``, when the O(1)
Z closed forms exclude them (fact 2; below the first Z-feasible radius).  The
radii scanned from there are every radius for 64 candidates, then geometric
steps (x1.15) up to ``b - a``, together with the fixed scan ``0..63``, x1.15;
a radius whose edge pair alone already exceeds ``delta`` for every
parameter is dropped after a one-dimensional minimization of that pair.  At
each radius the parameter is the crossing of ``delta_star = delta`` nearest
the good end found from the previous radius' parameter (or, when that one is
infeasible, from a log grid of 24 points over the parameter range), capped
by the Z crossing where fact 2 applies, to relative ``1e-14``.  Because the
defect is not proven unimodal in the parameter, a feasible island beyond an
infeasible gap could be missed, so the optimum is "over the search".  The
search aims below ``delta`` by the family's margin
(:attr:`DesignSearch.margin <sparseldp.core.families.DesignSearch>`) and by
``5e-14 / delta`` (the channel's rigorous bound sits a few ``1e-14`` above its
nearest value), so that the certificate holds at the first try.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_int, check_nonnegative, check_probability
from ._search import extreme_feasible, golden_min, largest_feasible, scan_radii, u_tolerance
from .radius import Design, _Joint, _slack, check_objective
from ..errors import InfeasibleError
from ..core.families import Family, family_with_param, get_family
from ..channel import check_domain, check_entries
from ..channel import check_window
from .radius import design, smallest_support
from ..baselines import FAMILIES

__all__ = ["Calibration", "design_finite", "calibrate"]

_GRID = 24
_DENSE_RADII = 64


@dataclass(frozen=True)
class Calibration:
    """A baseline channel (:data:`sparseldp.baselines.FAMILIES`) calibrated to ``(eps, delta)`` on range ``H``.

    What :func:`calibrate` returns for every baseline, the sparse ones
    included, so that :mod:`sparseldp.compare` reads all rows alike.  Most
    baselines have no mechanism on Z (randomized response, the clamped and
    folded geometric, the clamped discrete Gaussian), hence a type of its own;
    the sparse designs behind ``"sparse-laplace"`` / ``"sparse-gaussian"`` are
    :class:`~sparseldp.Design` results (:func:`design_finite`).

    Attributes
    ----------
    family : str
        The baseline name (``"rr"``, ``"geometric-clamp"``, ..., ``"sparse-laplace"``).
    parameter : (str, float)
        The calibrated parameter, as :attr:`SparseChannel.parameter` (``("eps", 1.3)``).
    s : int or None
        Support size for the sparse baselines, ``None`` for the full-support ones.
    channel : SparseChannel
    eps, delta, H, domain, window
        The target, the domain ``(a, b)`` and the sparse windows (``None`` for
        full-support baselines).
    delta_star : float
        ``channel.delta_star_upper(eps, H)``: a rigorous upper bound on the
        exact defect (Theorem 2), ``<= delta``.
    r1, r2 : float
        Distortion moments averaged over the prior (uniform by default).
    objective : {"r2", "r1"}
    note : str
        Which way the answer errs (rigorous certificate; optimality over the grid).
    """

    family: str
    parameter: tuple[str, float]
    s: int | None
    channel: object = field(repr=False, compare=False)
    eps: float
    delta: float
    H: int
    domain: tuple[int, int]
    window: str | None
    delta_star: float
    r1: float
    r2: float
    objective: str
    note: str = field(repr=False, default="")

    @property
    def params(self) -> dict:
        """The constructor's keyword arguments: ``{"lam": ..., "s": ...}``, ``{"eps": ...}``, ..."""
        name, value = self.parameter
        return {name: value} if self.s is None else {name: value, "s": self.s}

    def to_dict(self) -> dict:
        out = {"family": self.family, **self.params, "eps": self.eps, "delta": self.delta, "H": self.H,
               "domain": list(self.domain), "delta_star": self.delta_star, "r1": self.r1, "r2": self.r2,
               "objective": self.objective}
        if self.window is not None:
            out["window"] = self.window
        return out


# ---------------------------------------------------------------------------
# checks and helpers
# ---------------------------------------------------------------------------
def _check_target(eps, delta, H, domain):

    eps = check_nonnegative(eps, "eps")
    delta = check_probability(delta, "delta")
    H = check_int(H, "H", minimum=1)
    a, b = check_domain(domain)
    # every channel on the domain stores at least one entry per input: refuse before any O(k) work
    check_entries(b - a + 1, 1, f"domain ({a}, {b})")
    return eps, delta, H, (a, b)


def _check_prior(prior, k: int, name: str = "prior"):
    if prior is None:
        return np.full(k, 1.0 / k)
    allowed = (f"{name} must be an array of {k} nonnegative weights (one per domain value), finite, "
               "with a positive sum")
    if isinstance(prior, (str, bytes)) or isinstance(prior, (bool, np.bool_)):
        raise TypeError(f"{allowed}; got {prior!r}"[:200])
    try:
        raw = np.asarray(prior)
        if raw.dtype.kind not in "iuf" and not (raw.dtype == object and raw.size and all(
                isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) for v in raw.reshape(-1))):
            raise TypeError
        w = raw.astype(float)
    except (TypeError, ValueError):
        raise TypeError(f"{allowed}; got {prior!r}"[:200]) from None
    if w.shape != (k,):
        raise ValueError(f"{allowed}; got shape {w.shape}")
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{allowed}; got {float(w[i])!r} at index {i}")
    if w.sum() <= 0:
        raise ValueError(f"{allowed}; got weights summing to {float(w.sum())!r}")
    return w / w.sum()


def _moments(channel, prior) -> tuple[float, float]:
    order = np.argsort(np.asarray(channel.inputs), kind="stable")
    r1 = channel.distortion(1)[order]
    r2 = channel.distortion(2)[order]
    return float(prior @ r1), float(prior @ r2)


def _window_channel(fam: Family, param, t, domain, window):
    return fam.channel(param, 2 * t + 1, domain, window)


def _certified(channel, eps, H, delta) -> float:
    """For searches: ``<= delta`` only if ``channel.delta_star_upper(eps, H)`` is.

    The nearest ``delta`` is tried first and returned when it exceeds the target
    by more than any rounding error (as :func:`sparseldp.core.accounting.certified_delta_star`).
    """
    near = float(channel.delta_star(eps, H))
    if near > delta + 1e-12 + 1e-14 * eps + 1e-9 * delta:
        return near
    return float(channel.delta_star_upper(eps, H))


def _extreme(delta_of, target, good, other, *, known=None):
    """See :func:`sparseldp.design._search.extreme_feasible` (log grid, golden section, bisection)."""
    return extreme_feasible(delta_of, target, good, other, known=known, ngrid=_GRID)


# ---------------------------------------------------------------------------
# design of the sparse windows
# ---------------------------------------------------------------------------
def design_finite(family, *, eps, delta, H, domain, window="clipped", objective="r2", param=None, lam=None,
                  sigma=None, prior=None) -> Design:
    r"""Smallest ``s`` (and best ``lam``/``sigma`` when not given) on a finite domain.

    Parameters
    ----------
    family : {"laplace", "gaussian"}
    eps, delta, H
        The target: ``sup_{|x - x'| <= H} Delta_eps(x, x') <= delta`` over the
        domain (Theorem 2; Theorem 8 for the Gaussian family).
    domain : (a, b)
    window : {"clipped", "extended"}
    objective : {"r2", "r1"}
        What the joint design minimizes (averaged over ``prior``).
    param : float, optional
        Fix the kernel parameter (the registry's name for it,
        :mod:`sparseldp.core.families`: ``lam`` for Laplace, ``sigma`` for
        Gaussian): then only ``s`` is chosen, the smallest feasible one (exact).
    lam, sigma : float, optional
        Accepted spellings of ``param``; another family's spelling, or both
        ``param`` and the spelling, is a ``ValueError``.
    prior : array of ``b - a + 1`` weights, optional
        Input distribution for the distortion averages (uniform by default).

    Returns
    -------
    Design
        The type :func:`sparseldp.design` returns, with ``domain``, ``window``
        and ``channel`` set; ``r1``, ``r2`` averaged over ``prior``; the
        certificate ``delta_star`` a rigorous upper bound on the channel's
        exact defect (see the module docstring for which way the optimality errs).

    Raises
    ------
    InfeasibleError
        When no ``s`` works for the given parameter (clipped: every radius up to
        ``b - a`` checked; extended: the proof of :func:`sparseldp.smallest_support`),
        or no ``(s, param)`` on the search grid works.
    """

    fam = get_family(family)
    eps, delta, H, domain = _check_target(eps, delta, H, domain)
    window = check_window(window)
    objective = check_objective(objective)
    a, b = domain
    k = b - a + 1
    w = _check_prior(prior, k)
    given = fam.resolve_param(param, lam=lam, sigma=sigma)
    if window == "extended":
        return _design_extended(fam, given, eps, delta, H, domain, objective, w)
    return _design_clipped(fam, given, eps, delta, H, domain, objective, w)


def _finish(fam: Family, param, t, eps, delta, H, domain, window, objective, w, note) -> Design:
    ch = _window_channel(fam, param, t, domain, window)
    certified = float(ch.delta_star_upper(eps, H))
    r1, r2 = _moments(ch, w)
    mech = fam.make(param, 2 * t + 1)
    return Design(fam.name, mech, mech.parameter, mech.s, eps, delta, H, certified, r1, r2, domain, window, ch,
                  objective, note)


def _design_extended(fam: Family, given, eps, delta, H, domain, objective, w):

    a, b = domain
    Hd = min(H, b - a)
    if Hd == 0:  # a single input: no pair to protect
        param = given if given is not None else fam.search.finite_range(b - a + 1)[0]
        return _finish(fam, param, 0, eps, delta, H, domain, "extended", objective, w,
                       "single-value domain: no pair to protect")
    if given is not None:
        s = smallest_support(fam, eps=eps, delta=delta, H=Hd, param=given)
        param, t = given, (s - 1) // 2
        note = "s exact (extended windows are the Z mechanism on range min(H, b - a))"
    else:
        d = design(fam, eps=eps, delta=delta, H=Hd, objective=objective)
        param, t = d.param, (d.s - 1) // 2
        note = "design() on range min(H, b - a): rigorous certificate, optimality over its search grid"
    res = _finish(fam, param, t, eps, delta, H, domain, "extended", objective, w, note)
    # the extended channel's upper bound is the Z mechanism's on range min(H, b - a), the
    # very number the Z design certified (SparseChannel.delta_star_upper delegates)
    if res.delta_star > delta:  # pragma: no cover - the two are the same computation
        raise RuntimeError("internal error: the extended channel does not reproduce the Z certificate")
    return res


class _ClippedBand:
    """Nearest-value ``delta_star`` and distortion of clipped channels on ``a..b``, for the searches.

    For a parameter ``p`` and radius ``t`` (``t <= b - a``, fact 1) the rows
    are kept as a band over the offsets ``d = y - x``, ``-t <= d <= t``:
    ``log P(x + d | x) = log w(d) - log Z_x`` on the clipped window, with
    ``Z_x`` from one cumulative sum of ``w`` (every window contains ``d = 0``,
    so no difference of sums is formed).  ``delta_star`` is the largest defect
    over the ``2 k`` pairs of fact 3 (the ``k`` to the right: those to the left
    are their mirror images), each the sum of
    ``P(y|x) (1 - e^{eps - L(y)})_+`` with the log ratio ``L`` formed in log
    space (full relative precision for tiny defects); the moments are sums of
    ``w(d) |d|^r`` over the windows.  Everything that depends on ``t`` only
    (windows, the partner's columns) is kept per radius.  Rounded to nearest:
    never a certificate (the designers certify with the channel).
    """

    def __init__(self, fam: Family, domain, eps: float, H: int, prior):
        a, b = domain
        self.fam, self.eps, self.k, self.span = fam, eps, b - a + 1, b - a
        self.x = np.arange(self.k)
        # the partner of x at the largest separation in range to the right (fact 3); the pairs to the left
        # are their mirror images (the clipped channel is symmetric under y -> a + b - y, x -> a + b - x)
        self.partner = np.minimum(self.x + H, self.k - 1)
        self.prior = prior
        self._geo = {}

    def _geometry(self, t):
        got = self._geo.get(t)
        if got is None:
            d = np.arange(-t, t + 1)
            lo = np.maximum(-t, -self.x)  # window offsets of row x: lo_x <= d <= hi_x
            hi = np.minimum(t, self.k - 1 - self.x)
            inside = (d[None, :] >= lo[:, None]) & (d[None, :] <= hi[:, None])
            partner = self.partner
            dq = d[None, :] - (partner - self.x)[:, None]  # the same output's offset in the partner's row
            in_q = (dq >= lo[partner][:, None]) & (dq <= hi[partner][:, None])
            pair = (partner, np.clip(dq + t, 0, 2 * t), inside & in_q, inside & ~in_q)
            got = (d, lo, hi, inside, pair, np.abs(d).astype(float))
            self._geo[t] = got
        return got

    def evaluate(self, param, t):
        """``(log delta_star, R1, R2)`` of the clipped channel with ``param`` and radius ``t``."""
        t = min(t, self.span)
        d, lo, hi, inside, (partner, cols, both, leak), absd = self._geometry(t)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            lw = np.asarray(self.fam.search.log_w(param, d), dtype=float)  # log w(0) = 0 is the largest
            w = np.exp(lw[t:])  # d = 0..t
            c0, c1, c2 = np.cumsum(w), np.cumsum(w * absd[t:]), np.cumsum(w * absd[t:] ** 2)
            z = c0[hi] + c0[-lo] - 1.0
            r1 = float(self.prior @ ((c1[hi] + c1[-lo]) / z))
            r2 = float(self.prior @ ((c2[hi] + c2[-lo]) / z))
            logz = np.log(z)
            logp = lw[None, :] - logz[:, None]
            p = np.where(inside, np.exp(logp), 0.0)
            excess = logp - (lw[cols] - logz[partner][:, None]) - self.eps  # L(y) - eps
            terms = np.where(both & (excess > 0), p * -np.expm1(-excess), 0.0)
            terms = np.where(leak, p, terms)  # outputs the partner cannot produce
            worst = float(terms.sum(axis=1).max())
        return (math.log(worst) if worst > 0 else -math.inf), r1, r2

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


def _design_clipped(fam: Family, given, eps, delta, H, domain, objective, w):
    a, b = domain
    span = b - a
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
    """``(u, t, sign)`` of the best clipped design found over the radii (module docstring), or None.

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


# ---------------------------------------------------------------------------
# calibration of every baseline family
# ---------------------------------------------------------------------------
def _baseline_range(pname: str, eps: float, k: int) -> tuple[float, float]:
    """``(good, other)``: the search range of a full-support baseline's parameter on ``k`` values.

    The geometric and discrete-Gaussian baselines share their kernel with a
    registered family (the one with the same parameter name, ``lam`` /
    ``sigma``) and search its finite-domain range; randomized response
    searches its ``eps``.
    """
    if pname == "eps":
        # eps' = eps is exactly (eps, 0)-LDP, but a log ratio equal to eps cannot be told from one a
        # rounding error above it: the private end lies a little below, where the certificate holds
        return eps + 60.0, max(eps - max(1e-9 * eps, 1e-12), 1e-12)
    return family_with_param(pname).search.finite_range(k)


def calibrate(family_name, *, eps, delta, H, domain, objective="r2", prior=None,
              window="clipped") -> Calibration:
    r"""Best parameters of a :data:`sparseldp.baselines.FAMILIES` member for a target.

    Every family is a channel on ``domain`` and is accounted by the same code
    (:meth:`SparseChannel.delta_star_upper`, a rigorous upper bound on the
    Theorem 2 defect); "best" is the least noisy parameter meeting ``delta``:

    * ``"rr"``: the largest ``eps`` of randomized response (its defect at the
      target eps is ``(e^{eps'} - e^{eps})_+ / (e^{eps'} + k - 1)``, increasing in
      ``eps'``);
    * ``"geometric-clamp"``, ``"geometric-fold"``: the largest ``lam``;
    * ``"discrete-gaussian"``: the smallest ``sigma``;
    * ``"sparse-laplace"``, ``"sparse-gaussian"``: :func:`design_finite` with
      ``window`` (clipped by default), jointly over ``s`` and the parameter.

    The parameter search is the log grid + bisection of the module docstring
    (rigorous certificate ``delta_star``; optimal over the grid).  Distortions are averaged over
    ``prior`` (uniform by default).  Returns a :class:`Calibration` for every
    family (the sparse ones too), so that all rows read alike.
    """

    if not isinstance(family_name, str):
        raise TypeError(f"family_name must be one of {sorted(FAMILIES)}; got {type(family_name).__name__} "
                        f"{family_name!r}")
    if family_name not in FAMILIES:
        raise ValueError(f"family_name must be one of {sorted(FAMILIES)}; got {family_name!r}")
    eps, delta, H, domain = _check_target(eps, delta, H, domain)
    objective = check_objective(objective)
    window = check_window(window)
    entry = FAMILIES[family_name]
    pname = entry.param
    if entry.takes_s:
        # the paper's sparse windows: the registered family with this parameter, designed jointly
        d = design_finite(family_with_param(pname), eps=eps, delta=delta, H=H, domain=domain, window=window,
                          objective=objective, prior=prior)
        return Calibration(family_name, d.parameter, d.s, d.channel, eps, delta, H, domain, d.window, d.delta_star,
                           d.r1, d.r2, objective, d.note)
    a, b = domain
    k = b - a + 1
    w = _check_prior(prior, k)
    good, other = _baseline_range(pname, eps, k)

    def build(p):
        return entry.constructor(**{pname: p}, domain=domain)

    found = _extreme(lambda p: _certified(build(p), eps, H, delta), delta, good, other)
    if found is None:
        raise InfeasibleError(
            f"no {family_name} channel on {a}..{b} meets (eps = {eps:g}, delta = {delta:g}) on range H = {H} "
            f"for {pname} on the search grid [{min(good, other):g}, {max(good, other):g}]"
        )
    param, _ = found
    ch = build(param)
    certified = float(ch.delta_star_upper(eps, H))
    r1, r2 = _moments(ch, w)
    return Calibration(family_name, (pname, param), None, ch, eps, delta, H, domain, None, certified, r1, r2,
                       objective, "rigorous certificate; parameter optimal over the search grid (log grid + bisection)")
