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
   ``O(k H)``.  The searches evaluate exactly those pairs, each in closed form
   from prefix sums of ``w`` over that half-line (:class:`_ClippedBand`,
   rounded to nearest): ``O(k log t)`` per evaluation, not ``O(k t)``.

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

Layout: the public designers and :class:`Calibration` live here; the
clipped-window search in :mod:`._clipped`; the checks, moments and
certificate helpers shared with it in :mod:`._domain`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import _clipped
from ._common import Design, check_objective
from ._domain import _GRID, _certified, _check_prior, _check_target, _finish, _moments
from ._search import extreme_feasible
from ..errors import InfeasibleError
from ..core.families import Family, family_with_param, get_family
from ..channel import check_window
from .radius import design, smallest_support
from ..baselines import FAMILIES

__all__ = ["Calibration", "design_finite", "calibrate"]

# reached through this module by tests/test_finite_design.py
_ClippedBand = _clipped._ClippedBand
_first_possible_radius = _clipped._first_possible_radius


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
    ValueError
        Before any search, when the clipped search would evaluate channels of more
        than :data:`~sparseldp.channel.MAX_ENTRIES` entries (``k (2k - 1)`` at its
        largest support ``s = 2(b - a) + 1``: domains of more than 8,192 values),
        and when an extended channel would (``k s`` entries).
    """

    fam = get_family(family)
    eps, delta, H, domain = _check_target(eps, delta, H, domain, fam)
    window = check_window(window)
    objective = check_objective(objective)
    a, b = domain
    k = b - a + 1
    w = _check_prior(prior, k)
    given = fam.resolve_param(param, lam=lam, sigma=sigma)
    if window == "extended":
        return _design_extended(fam, given, eps, delta, H, domain, objective, w)
    return _clipped._design_clipped(fam, given, eps, delta, H, domain, objective, w)


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
