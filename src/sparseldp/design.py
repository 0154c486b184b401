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

import math
from dataclasses import dataclass

import numpy as np

from ._validation import check_int, check_nonnegative, check_positive, check_probability
from ._kernels import GAUSSIAN_MAX_S, dn, exp_dn, up
from .accounting import defect_bounds
from ._search import extreme_feasible, scan_radii
from .errors import InfeasibleError
from .mechanisms import SparseGaussian, SparseLaplace

__all__ = ["Design", "design", "smallest_support"]

_FAMILIES = ("laplace", "gaussian")
# Largest radius tried before giving up; the Gaussian kernel needs O(t) memory.
_T_CAP = {"laplace": 1 << 52, "gaussian": (GAUSSIAN_MAX_S - 1) // 2}  # s <= 2^53 + 1 (MAX_S); Gaussian: O(t) memory


@dataclass(frozen=True)
class Design:
    """A designed mechanism with its certificate.

    ``delta_star`` is a rigorous upper bound on the exact
    ``max_{1<=h<=H} delta_h(eps)`` of ``mechanism`` (its
    :meth:`~SparseLaplace.delta_star_upper`), and ``<= delta``; ``r1``, ``r2``
    its distortion moments.
    """

    family: str
    mechanism: SparseLaplace | SparseGaussian
    s: int
    param_name: str
    param: float
    eps: float
    delta: float
    H: int
    delta_star: float
    r1: float
    r2: float

    def to_dict(self) -> dict:
        return {
            "family": self.family,
            self.param_name: self.param,
            "s": self.s,
            "eps": self.eps,
            "delta": self.delta,
            "H": self.H,
            "delta_star": self.delta_star,
            "r1": self.r1,
            "r2": self.r2,
        }


def _check_family(family) -> str:
    if not isinstance(family, str):
        raise TypeError(f"family must be 'laplace' or 'gaussian'; got {type(family).__name__} {family!r}")
    if family.lower() not in _FAMILIES:
        raise ValueError(f"family must be 'laplace' or 'gaussian'; got {family!r}")
    return family.lower()


def _make(family: str, param: float, t: int):
    if family == "laplace":
        return SparseLaplace(lam=param, s=2 * t + 1)
    return SparseGaussian(sigma=param, s=2 * t + 1)


def _delta_star(family, param, t, eps, H, delta) -> float:
    """``delta_star`` of the radius-``t`` mechanism for the test ``<= delta``: the rigorous upper
    bound whenever it matters (:func:`sparseldp.accounting.certified_delta_star`)."""
    from .accounting import certified_delta_star

    return certified_delta_star(_make(family, param, t).kernel, eps, H, delta)


def _limit_lower_bound(family, param, t, eps, H) -> float:
    """Rigorous lower bound on ``max_h delta_h^inf`` (the s -> infinity limit), valid for all radii >= t.

    ``delta_h^inf >= O_t / (C_t + 2 T_t) = overlap_t / (1 + 2 T_t / C_t)`` (module
    docstring), evaluated with a lower bound on the normalized overlap, an
    upper bound on the tail ``T_t`` and a lower bound on ``C_t``.
    """
    kern = _make(family, param, t).kernel
    hs = np.arange(1, min(H, 2 * t) + 1)
    if hs.size == 0:
        return 0.0
    _, _, overlap = defect_bounds(kern, eps, hs, upper=False)
    c_dn = float(exp_dn(kern.log_normalizer_bound("dn")))
    if c_dn <= 0.0:
        return 0.0
    ratio = float(up(up(2.0 * kern.tail_bound()) / c_dn))
    return max(float(dn(float(overlap.max()) / up(1.0 + ratio))), 0.0)


def _params(family, lam, sigma):
    if family == "laplace":
        if sigma is not None:
            raise ValueError("sigma is a Gaussian parameter; the laplace family takes lam")
        return None if lam is None else check_positive(lam, "lam")
    if lam is not None:
        raise ValueError("lam is a Laplace parameter; the gaussian family takes sigma")
    return None if sigma is None else check_positive(sigma, "sigma")


def _smallest_radius(family, param, eps, H, delta) -> int:
    """Exact smallest radius t with delta_star <= delta (see the module lemma)."""
    if delta >= 1.0:
        return 0
    t_lo = (H + 1) // 2  # smallest t with 2t >= H (Theorem 4: below it delta_H = 1)
    if _delta_star(family, param, t_lo, eps, H, delta) <= delta:
        return t_lo
    hi = t_lo
    while True:
        lo, hi = hi, max(2 * hi, hi + 1)
        if hi > _T_CAP[family]:
            raise InfeasibleError(
                f"no support size up to s = {2 * lo + 1} meets delta = {delta:g} "
                f"(eps = {eps:g}, H = {H}, {_pname(family)} = {param:g}) and the limit s -> infinity "
                "could not be separated from delta in floating point"
            )
        if _delta_star(family, param, hi, eps, H, delta) <= delta:
            break
        bound = _limit_lower_bound(family, param, hi, eps, H)
        if bound > delta:
            raise InfeasibleError(
                f"no odd support size s meets delta = {delta:g} for the {family} family with "
                f"{_pname(family)} = {param:g}, eps = {eps:g}, H = {H}: delta_star is nonincreasing in s "
                f"and its limit as s -> infinity is at least {bound:.6g} > delta"
            )
    # invariant: t = lo infeasible, t = hi feasible; delta_star nonincreasing in t
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _delta_star(family, param, mid, eps, H, delta) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def _pname(family):
    return "lam" if family == "laplace" else "sigma"


def _validate_target(eps, delta, H, family):
    eps = check_nonnegative(eps, "eps")
    delta = check_probability(delta, "delta")
    H = check_int(H, "H", minimum=1)
    # Theorem 4: s >= H + 1 is necessary, and s is at most 2 _T_CAP + 1 here
    H = check_int(H, "H", minimum=1, maximum=2 * _T_CAP[family])
    return eps, delta, H


def smallest_support(family, *, eps, delta, H, lam=None, sigma=None) -> int:
    """The smallest odd ``s`` with ``delta_star_upper(eps, H) <= delta`` (a certified size).

    Not the sufficient size of Corollary 2 / Corollary 4 (see
    :mod:`sparseldp.bounds`), but the true minimum, found by exponential and
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
    family = _check_family(family)
    eps, delta, H = _validate_target(eps, delta, H, family)
    param = _params(family, lam, sigma)
    if param is None:
        raise ValueError(f"smallest_support for the {family} family needs {_pname(family)}")
    return 2 * _smallest_radius(family, param, eps, H, delta) + 1


def _finish(family, param, t, eps, delta, H) -> Design:
    mech = _make(family, param, t)
    ds = float(mech.delta_star_upper(eps, H))
    return Design(family, mech, mech.s, _pname(family), param, eps, delta, H, ds, mech.r1, mech.r2)


def design(family, *, eps, delta, H, objective="r2", lam=None, sigma=None) -> Design:
    """Jointly optimal ``(s, lam)`` or ``(s, sigma)`` minimizing ``R1`` or ``R2``
    subject to ``delta_star(eps, H) <= delta``.

    With ``lam`` (``sigma``) given, only ``s`` is chosen: the smallest feasible
    one, which is distortion-optimal for that parameter (Theorems 6 and 12).
    Otherwise the parameter is optimized too (see the module docstring for the
    search and its guarantees).  The returned :class:`Design` carries a
    rigorous upper bound on the ``delta_star`` reached (``<= delta``).
    """
    family = _check_family(family)
    eps, delta, H = _validate_target(eps, delta, H, family)
    if objective not in ("r1", "r2"):
        raise ValueError(f"objective must be 'r1' or 'r2'; got {objective!r}")
    param = _params(family, lam, sigma)
    if param is not None:
        t = _smallest_radius(family, param, eps, H, delta)
        return _finish(family, param, t, eps, delta, H)
    if delta >= 1.0:
        # every mechanism qualifies; the most concentrated one (s = 1) has zero distortion
        return _finish(family, 1.0, 0, eps, delta, H)
    return _joint(family, eps, delta, H, objective)


def _objective(family, param, t, objective) -> float:
    m = _make(family, param, t)
    return m.r1 if objective == "r1" else m.r2


def _laplace_lam_sup(eps, delta) -> float:
    """lam beyond which every s is infeasible.

    For h = 1 the overlap point k = 0 has loss lam, so
    ``delta_1 >= (1 - e^{eps - lam})_+ / C_t >= tanh(lam/2) (1 - e^{eps - lam})_+``
    (``C_t <= C_inf = coth(lam/2)``), increasing in lam; the root of
    ``tanh(lam/2)(1 - e^{eps-lam}) = delta`` bounds every feasible lam.
    """
    f = lambda lam: math.tanh(lam / 2) * max(0.0, -math.expm1(eps - lam)) - delta
    lo, hi = eps, eps + 1.0
    while f(hi) <= 0:
        hi = 2 * hi + 1
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) <= 0 else (lo, mid)
    return hi


def _gaussian_sigma_inf(eps, delta) -> float:
    """sigma below which every s is infeasible.

    For h = 1 the point k = 0 has loss 1/(2 sigma^2), so
    ``delta_1 >= (1 - e^{eps - 1/(2 sigma^2)})_+ / Gamma_inf`` with
    ``Gamma_inf <= 1 + 2 e^{-1/(2 sigma^2)} / (1 - e^{-1/sigma^2})``; this lower
    bound decreases in sigma and its crossing with delta bounds every feasible sigma.
    """

    def lb(sig):
        a = 1.0 / (2 * sig * sig)  # sig >= 1e-6 here: no underflow
        gam = 1.0 + 2.0 * math.exp(-a) / -math.expm1(-2 * a)
        # (1 - e^{eps - a})_+ without evaluating e^{eps - a} when it would overflow (eps >= a gives 0)
        return (-math.expm1(eps - a) if eps < a else 0.0) / gam

    lo, hi = 1e-6, 1.0
    while lb(hi) > delta:
        hi *= 2
    if lb(lo) <= delta:
        return lo
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if lb(mid) > delta else (lo, mid)
    return lo


def _extreme_param(family, t, eps, delta, H, lo, hi, *, ngrid=24, known_feasible=None):
    """Largest feasible lam (Laplace) or smallest feasible sigma (Gaussian) at radius t.

    ``delta_star`` is U-shaped in the kernel parameter (Tables III-IV), so the
    search (:func:`sparseldp._search.extreme_feasible`) scans a log grid from
    the good end (large lam, small sigma), refines around the grid minimum by
    golden section if needed, and bisects towards the good end.
    ``known_feasible`` (feasible at a smaller radius, hence here: feasible sets
    are nested in t by the module lemma) skips the grid.  Every returned
    parameter is verified feasible; None if nothing is found.
    """
    good, other = (hi, lo) if family == "laplace" else (lo, hi)
    found = extreme_feasible(lambda p: _delta_star(family, p, t, eps, H, delta), delta, float(good), float(other),
                             known=known_feasible, ngrid=ngrid, rtol=1e-11)
    return None if found is None else found[0]


def _limit_param(family, eps, delta, H, bound):
    """The extreme feasible parameter of the s -> infinity limit (up to float rounding).

    Laplace: evaluated at a radius so large that the omitted tail is below
    e^-700 of the mass.  Gaussian: the radius is grown to 40 sigma + H, past
    which every kernel value is exactly zero in double precision.
    """
    if family == "laplace":
        t = max(H, int(min(1e15, 700.0 / (bound * 1e-6))))
        return _extreme_param(family, t, eps, delta, H, bound * 1e-6, bound, ngrid=64)
    t = max(64, H)
    sig = None
    while sig is None and t <= _T_CAP["gaussian"] // 4:
        sig = _extreme_param(family, t, eps, delta, H, bound, 10.0 * (t + 1), ngrid=48)
        if sig is None:
            t *= 4
    while sig is not None and 40.0 * sig + H > t and t < _T_CAP["gaussian"] // 4:
        t = int(40.0 * sig) + H + 1
        sig = _extreme_param(family, t, eps, delta, H, bound, sig, ngrid=32, known_feasible=sig)
    return sig


def _joint(family, eps, delta, H, objective) -> Design:
    bound = _laplace_lam_sup(eps, delta) if family == "laplace" else _gaussian_sigma_inf(eps, delta)
    limit = _limit_param(family, eps, delta, H, bound)
    if limit is None:
        raise InfeasibleError(
            f"no {family} mechanism has delta_star <= {delta:g} at eps = {eps:g}, H = {H}, "
            "even in the limit s -> infinity (searched the whole parameter range)"
        )
    t0 = (H + 1) // 2
    # radii scanned: a dense run from the smallest, then geometric steps until the
    # kernel's tail is negligible (beyond it larger s only adds distortion)
    if family == "laplace":
        t_end = t0 + int(min(1e12, 40.0 / limit)) + 1
    else:
        t_end = t0 + int(40.0 * limit) + 1
    radii = scan_radii(t0, 96, t_end)
    best = None  # (value, param, t)
    known = None
    lo_p, hi_p = (limit * 1e-6, limit) if family == "laplace" else (limit, 10.0 * (t_end + 1) + limit)

    def consider(t, known):
        if family == "laplace":
            p = _extreme_param(family, t, eps, delta, H, (known or lo_p), hi_p, known_feasible=known)
        else:
            p = _extreme_param(family, t, eps, delta, H, lo_p, (known or hi_p), known_feasible=known)
        return p

    for t in radii:
        p = consider(t, known)
        if p is None:
            continue
        known = p
        val = _objective(family, p, t, objective)
        if best is None or val < best[0]:
            best = (val, p, t)
        # every larger radius has distortion >= R(limit, t') >= R(limit, t + 1)
        if _objective(family, limit, t + 1, objective) >= best[0]:
            break
    if best is None:
        raise InfeasibleError(
            f"no {family} mechanism found with delta_star <= {delta:g} at eps = {eps:g}, H = {H} "
            f"(searched radii up to {radii[-1]})"
        )
    # refine around the best radius found on the geometric part of the scan
    t_best = best[2]
    for t in range(max(t0, t_best - 8), t_best + 9):
        p = consider(t, None)
        if p is not None:
            val = _objective(family, p, t, objective)
            if val < best[0]:
                best = (val, p, t)
    _, p, t = best
    return _finish(family, p, t, eps, delta, H)
