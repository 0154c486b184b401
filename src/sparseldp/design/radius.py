r"""Designing a mechanism from a privacy target ``(eps, delta)`` on range ``H``.

Monotonicity in the support size (the lemma everything here rests on)
---------------------------------------------------------------------
For a symmetric kernel ``w(k) = w(|k|)`` nonincreasing in ``|k|`` (both
families), ``delta_h`` is nonincreasing in the radius ``t`` for every ``h`` and
``eps >= 0``; hence ``delta_star`` is nonincreasing in ``s``.

*Proof.*  For ``h > 2t`` the defect is 1, its maximum.  For ``1 <= h <= 2t``
write ``delta_h(t) = N_t / C_t`` with ``N_t`` the bracket of Theorems 3/9.  Going
from ``t`` to ``t+1``, ``C`` grows by ``2 w(t+1) > 0``; in ``N`` the point
``k = h-t-1`` moves from the leakage sum to the overlap, ``k = -t-1`` joins the
leakage sum and ``k = t+1`` joins the overlap with the term
``[w(t+1) - e^eps w(t+1-h)]_+ = 0`` (as ``|t+1-h| <= t+1``).  So

``N_{t+1} - N_t = w(t+1) - w(t-h+1) + [w(t-h+1) - e^eps w(t+1)]_+``,

which is ``-(e^eps - 1) w(t+1) <= 0`` when the positive part is active and
``w(t+1) - w(t-h+1) <= 0`` otherwise (``|t-h+1| <= t+1``).  ``N`` does not grow
while ``C`` grows, so ``delta_h(t+1) <= delta_h(t)``.  ∎

The same argument with ``t -> infinity`` shows ``delta_h(t)`` decreases to the
defect ``delta_h^inf`` of the full-support mechanism on Z, and
``delta_h^inf >= O_t / (C_t + 2 T_t)``, where ``O_t`` is the overlap sum at
radius ``t`` and ``T_t >= sum_{j > t} w(j)`` a tail bound.  That is how
:func:`smallest_support` *proves* infeasibility: once this lower bound exceeds
``delta`` for some ``h <= H``, no support size can work.

With monotonicity, the exact smallest feasible ``s`` is found by exponential
then binary search: O(log s) evaluations of ``delta_star``, each O(H).

Joint design
------------
For a fixed kernel parameter the distortion moments grow with ``s``
(Propositions 1 and 3), so the best ``s`` is the smallest feasible one
(Theorems 6 and 12).  For a fixed ``s``, ``R1``/``R2`` decrease in ``lam`` and
increase in ``sigma`` (one-parameter exponential families in ``|k|`` and
``k^2``), so the best parameter is the largest feasible ``lam`` (smallest
feasible ``sigma``).  :func:`design` scans ``s`` upward from the smallest size
that admits any feasible parameter, finds the extreme feasible parameter for
each ``s`` (log grid, then bisection on the crossing), and stops once a proven
lower bound on every larger ``s``'s distortion exceeds the best found.  The
returned certificate (``Design.delta_star``) is a rigorous *upper bound* on the
exact ``delta_star`` of the chosen design; the optimality is up to the
parameter grid (48 points per decade band) and the bisection tolerance,
because ``delta_star`` is not proven unimodal in the kernel parameter.

Which way the answers err
-------------------------
Every feasibility test compares the rigorous upper bound
(:meth:`SparseLaplace.delta_star_upper`) with ``delta``, so every returned
design certifiably meets the target.  Infeasibility proofs use rigorous
*lower* bounds (the limit bound below).  "Smallest ``s``" therefore means the
smallest ``s`` whose upper bound meets ``delta``: a size whose exact
``delta_star`` is within rounding (a few ``1e-16``) of ``delta`` may be passed
over because it cannot be certified.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._validation import check_int, check_nonnegative, check_probability
from ..core.kernels import dn, exp_dn, up
from ..core.accounting import defect_bounds
from ._search import extreme_feasible, scan_radii
from ..errors import InfeasibleError
from ..core.families import Family, family_of, get_family
from ..core.mechanisms import SparseGaussian, SparseLaplace
from ..core.accounting import certified_delta_star

__all__ = ["Design", "design", "smallest_support"]


@dataclass(frozen=True)
class Design:
    """A designed mechanism with its certificate, on Z or on a finite domain.

    :func:`design` and :func:`smallest_support` design on Z;
    :func:`sparseldp.design.finite.design_finite` returns the same type for a
    finite domain ``a..b``, with ``domain``, ``window`` and ``channel`` set.

    Attributes
    ----------
    family : str
        Registry name (:mod:`sparseldp.core.families`).
    mechanism : SparseLaplace or SparseGaussian
        The mechanism on Z with the designed parameter and ``s`` (on a finite
        domain: the Z mechanism whose rows the channel's windows are cut from).
    parameter : (str, float)
        The kernel parameter, ``("lam", value)`` / ``("sigma", value)``: the
        representation of :attr:`SparseLaplace.parameter` (``mechanism.parameter``).
    s : int
        Support size.
    eps, delta, H
        The target: ``(eps, delta)``-LDP on range ``H``.
    delta_star : float
        The certificate: a rigorous upper bound, ``<= delta``, on the exact
        ``max_{1<=h<=H} delta_h(eps)`` of ``mechanism``
        (:meth:`~SparseLaplace.delta_star_upper`); on a finite domain on the
        exact Theorem 2 defect of ``channel`` over pairs ``|x - x'| <= H``
        (:meth:`SparseChannel.delta_star_upper`).
    r1, r2 : float
        Distortion moments ``E|Y - x|``, ``E(Y - x)^2``; on a finite domain
        averaged over the prior (uniform by default).
    domain : (int, int) or None
        ``(a, b)`` on a finite domain, ``None`` on Z.
    window : {"clipped", "extended"} or None
        The channel's windows on a finite domain, ``None`` on Z.
    channel : SparseChannel or None
        The designed channel on a finite domain, ``None`` on Z.
    objective : {"r2", "r1"}
        What the joint design minimized (with a fixed parameter only ``s`` is
        chosen, and the smallest feasible ``s`` minimizes both).
    note : str
        Which way the answer errs, in words (finite-domain designs).
    """

    family: str
    mechanism: SparseLaplace | SparseGaussian
    parameter: tuple[str, float]
    s: int
    eps: float
    delta: float
    H: int
    delta_star: float
    r1: float
    r2: float
    domain: tuple[int, int] | None = None
    window: str | None = None
    channel: object = field(default=None, repr=False, compare=False)
    objective: str = "r2"
    note: str = field(default="", repr=False, compare=False)

    def __post_init__(self):
        fam = family_of(self.mechanism)
        if (self.family, tuple(self.parameter), self.s) != (fam.name, self.mechanism.parameter, self.mechanism.s):
            raise ValueError(
                f"family, parameter and s must be those of the mechanism ({fam.name!r}, "
                f"{self.mechanism.parameter!r}, {self.mechanism.s}); got ({self.family!r}, {self.parameter!r}, "
                f"{self.s})")
        on_domain = (self.domain is not None, self.window is not None, self.channel is not None)
        if len(set(on_domain)) != 1:
            raise ValueError("domain, window and channel must be all given (a finite domain) or all None (Z)")

    @property
    def param_name(self) -> str:
        """``parameter[0]`` (read-only alias)."""
        return self.parameter[0]

    @property
    def param(self) -> float:
        """``parameter[1]`` (read-only alias)."""
        return self.parameter[1]

    def to_dict(self) -> dict:
        """``{"family", "lam" | "sigma", "s", "eps", "delta", "H", "delta_star", "r1", "r2"}``, plus
        ``"domain"`` and ``"window"`` on a finite domain (the CLI's ``--json`` object)."""
        name, value = self.parameter
        out = {
            "family": self.family,
            name: value,
            "s": self.s,
            "eps": self.eps,
            "delta": self.delta,
            "H": self.H,
            "delta_star": self.delta_star,
            "r1": self.r1,
            "r2": self.r2,
        }
        if self.domain is not None:
            out.update({"domain": list(self.domain), "window": self.window})
        return out


def _delta_star(fam: Family, param, t, eps, H, delta) -> float:
    """``delta_star`` of the radius-``t`` mechanism for the test ``<= delta``: the rigorous upper
    bound whenever it matters (:func:`sparseldp.core.accounting.certified_delta_star`)."""

    return certified_delta_star(fam.make(param, 2 * t + 1).kernel, eps, H, delta)


def _limit_lower_bound(fam: Family, param, t, eps, H) -> float:
    """Rigorous lower bound on ``max_h delta_h^inf`` (the s -> infinity limit), valid for all radii >= t.

    ``delta_h^inf >= O_t / (C_t + 2 T_t) = overlap_t / (1 + 2 T_t / C_t)`` (module
    docstring), evaluated with a lower bound on the normalized overlap, an
    upper bound on the tail ``T_t`` and a lower bound on ``C_t``.
    """
    kern = fam.make(param, 2 * t + 1).kernel
    hs = np.arange(1, min(H, 2 * t) + 1)
    if hs.size == 0:
        return 0.0
    _, _, overlap = defect_bounds(kern, eps, hs, upper=False)
    c_dn = float(exp_dn(kern.log_normalizer_bound("dn")))
    if c_dn <= 0.0:
        return 0.0
    ratio = float(up(up(2.0 * kern.tail_bound()) / c_dn))
    return max(float(dn(float(overlap.max()) / up(1.0 + ratio))), 0.0)


def _smallest_radius(fam: Family, param, eps, H, delta) -> int:
    """Exact smallest radius t with delta_star <= delta (see the module lemma)."""
    if delta >= 1.0:
        return 0
    t_lo = (H + 1) // 2  # smallest t with 2t >= H (Theorem 4: below it delta_H = 1)
    if _delta_star(fam, param, t_lo, eps, H, delta) <= delta:
        return t_lo
    hi = t_lo
    while True:
        lo, hi = hi, max(2 * hi, hi + 1)
        if hi > fam.max_t:
            raise InfeasibleError(
                f"no support size up to s = {2 * lo + 1} meets delta = {delta:g} "
                f"(eps = {eps:g}, H = {H}, {fam.param} = {param:g}) and the limit s -> infinity "
                "could not be separated from delta in floating point"
            )
        if _delta_star(fam, param, hi, eps, H, delta) <= delta:
            break
        bound = _limit_lower_bound(fam, param, hi, eps, H)
        if bound > delta:
            raise InfeasibleError(
                f"no odd support size s meets delta = {delta:g} for the {fam.name} family with "
                f"{fam.param} = {param:g}, eps = {eps:g}, H = {H}: delta_star is nonincreasing in s "
                f"and its limit as s -> infinity is at least {bound:.6g} > delta"
            )
    # invariant: t = lo infeasible, t = hi feasible; delta_star nonincreasing in t
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _delta_star(fam, param, mid, eps, H, delta) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def _validate_target(eps, delta, H, fam: Family):
    eps = check_nonnegative(eps, "eps")
    delta = check_probability(delta, "delta")
    H = check_int(H, "H", minimum=1)
    # Theorem 4: s >= H + 1 is necessary, and s is at most 2 max_t + 1 here
    H = check_int(H, "H", minimum=1, maximum=2 * fam.max_t)
    return eps, delta, H


def smallest_support(family, *, eps, delta, H, param=None, lam=None, sigma=None) -> int:
    """The smallest odd ``s`` with ``delta_star_upper(eps, H) <= delta`` (a certified size).

    ``param`` is the family's kernel parameter (its name in the registry,
    :mod:`sparseldp.core.families`: ``lam`` for Laplace, ``sigma`` for Gaussian);
    ``lam=`` / ``sigma=`` are accepted spellings of it.  Another family's
    spelling, or ``param`` together with the spelling, is a ``ValueError``.

    Not the sufficient size of Corollary 2 / Corollary 4 (see
    :mod:`sparseldp.core.bounds`), but the true minimum, found by exponential and
    binary search on the radius; correct because ``delta_star`` is
    nonincreasing in ``s`` (module lemma).  Feasibility is tested with the
    rigorous upper bound, so the exact ``delta_star`` at the returned size is
    ``<= delta``; a smaller size whose exact value is within rounding of
    ``delta`` cannot be certified and is not returned.  Cost O(H log s) for
    the Laplace family and O((H + t) log s) for the Gaussian.

    Raises
    ------
    InfeasibleError
        When no ``s`` works, with the proof: the limit ``s -> infinity`` of
        ``delta_star`` is bounded below by a number exceeding ``delta``.
    """
    fam = get_family(family)
    eps, delta, H = _validate_target(eps, delta, H, fam)
    value = fam.resolve_param(param, lam=lam, sigma=sigma)
    if value is None:
        raise ValueError(f"smallest_support for the {fam.name} family needs {fam.param} (or param)")
    return 2 * _smallest_radius(fam, value, eps, H, delta) + 1


def _finish(fam: Family, param, t, eps, delta, H, objective) -> Design:
    mech = fam.make(param, 2 * t + 1)
    ds = float(mech.delta_star_upper(eps, H))
    return Design(fam.name, mech, mech.parameter, mech.s, eps, delta, H, ds, mech.r1, mech.r2,
                  objective=objective)


def check_objective(objective) -> str:
    """``"r1"`` or ``"r2"``; ``ValueError`` otherwise."""
    if objective not in ("r1", "r2"):
        raise ValueError(f"objective must be 'r1' or 'r2'; got {objective!r}")
    return objective


def design(family, *, eps, delta, H, param=None, objective="r2", lam=None, sigma=None) -> Design:
    """Jointly optimal ``(s, lam)`` or ``(s, sigma)`` minimizing ``R1`` or ``R2``
    subject to ``delta_star(eps, H) <= delta``.

    With the kernel parameter given (``param``, the registry's name for it:
    ``lam`` for Laplace, ``sigma`` for Gaussian; ``lam=`` / ``sigma=`` are
    accepted spellings), only ``s`` is chosen: the smallest feasible one,
    which is distortion-optimal for that parameter (Theorems 6 and 12).
    Otherwise the parameter is optimized too (see the module docstring for the
    search and its guarantees).  The returned :class:`Design` carries a
    rigorous upper bound on the ``delta_star`` reached (``<= delta``).
    """
    fam = get_family(family)
    eps, delta, H = _validate_target(eps, delta, H, fam)
    objective = check_objective(objective)
    value = fam.resolve_param(param, lam=lam, sigma=sigma)
    if value is not None:
        t = _smallest_radius(fam, value, eps, H, delta)
        return _finish(fam, value, t, eps, delta, H, objective)
    if delta >= 1.0:
        # every mechanism qualifies; the most concentrated one (s = 1) has zero distortion
        return _finish(fam, 1.0, 0, eps, delta, H, objective)
    return _joint(fam, eps, delta, H, objective)


def _objective(fam: Family, param, t, objective) -> float:
    m = fam.make(param, 2 * t + 1)
    return m.r1 if objective == "r1" else m.r2


def _extreme_param(fam: Family, t, eps, delta, H, good, other, *, ngrid=24, known=None):
    """The feasible parameter nearest the ``good`` (less private) end at radius t: the largest
    feasible lam (Laplace), the smallest feasible sigma (Gaussian).

    ``delta_star`` is U-shaped in the kernel parameter (Tables III-IV), so the
    search (:func:`sparseldp.design._search.extreme_feasible`) scans a log grid from
    the good end, refines around the grid minimum by golden section if needed,
    and bisects towards the good end.  ``known`` (feasible at a smaller radius,
    hence here: feasible sets are nested in t by the module lemma) skips the
    grid.  Every returned parameter is verified feasible; None if nothing is found.
    """
    found = extreme_feasible(lambda p: _delta_star(fam, p, t, eps, H, delta), delta, float(good), float(other),
                             known=known, ngrid=ngrid, rtol=1e-11)
    return None if found is None else found[0]


def _limit_param(fam: Family, eps, delta, H, bound):
    """The extreme feasible parameter of the s -> infinity limit (up to float rounding).

    The radii where the kernel's truncation is negligible are the family's
    (:attr:`DesignSearch.limit <sparseldp.core.families.DesignSearch>`): Laplace at
    one radius where the omitted tail is below e^-700 of the mass; Gaussian at
    radii grown to 40 sigma + H, past which every kernel value is exactly zero
    in double precision.
    """

    def extreme(t, good, other, *, ngrid, known=None):
        return _extreme_param(fam, t, eps, delta, H, good, other, ngrid=ngrid, known=known)

    return fam.search.limit(extreme, bound, H, fam.max_t)


def _joint(fam: Family, eps, delta, H, objective) -> Design:
    bound = fam.search.bound(eps, delta)
    limit = _limit_param(fam, eps, delta, H, bound)
    if limit is None:
        raise InfeasibleError(
            f"no {fam.name} mechanism has delta_star <= {delta:g} at eps = {eps:g}, H = {H}, "
            "even in the limit s -> infinity (searched the whole parameter range)"
        )
    t0 = (H + 1) // 2
    # radii scanned: a dense run from the smallest, then geometric steps until the
    # kernel's tail is negligible (beyond it larger s only adds distortion)
    t_end = t0 + int(fam.search.span(limit)) + 1
    radii = scan_radii(t0, 96, t_end)
    best = None  # (value, param, t)
    known = None
    far = fam.search.far(limit, t_end)  # the private end of the range; the limit is the good end

    def consider(t, known):
        return _extreme_param(fam, t, eps, delta, H, limit, (known or far), known=known)

    for t in radii:
        p = consider(t, known)
        if p is None:
            continue
        known = p
        val = _objective(fam, p, t, objective)
        if best is None or val < best[0]:
            best = (val, p, t)
        # every larger radius has distortion >= R(limit, t') >= R(limit, t + 1)
        if _objective(fam, limit, t + 1, objective) >= best[0]:
            break
    if best is None:
        raise InfeasibleError(
            f"no {fam.name} mechanism found with delta_star <= {delta:g} at eps = {eps:g}, H = {H} "
            f"(searched radii up to {radii[-1]})"
        )
    # refine around the best radius found on the geometric part of the scan
    t_best = best[2]
    for t in range(max(t0, t_best - 8), t_best + 9):
        p = consider(t, None)
        if p is not None:
            val = _objective(fam, p, t, objective)
            if val < best[0]:
                best = (val, p, t)
    _, p, t = best
    return _finish(fam, p, t, eps, delta, H, objective)
