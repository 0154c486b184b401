r"""Designing a mechanism from a privacy target ``(eps, delta)`` on range ``H``.

Two monotonicity lemmas
-----------------------
Both families have a symmetric kernel ``w(k) = w(|k|)`` that is log-concave and
nonincreasing in ``|k|`` on its window.

*Lemma 1 (support size).*  ``delta_h`` is nonincreasing in the radius ``t`` for
every ``h`` and ``eps >= 0``; hence ``delta_star`` is nonincreasing in ``s``.

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
radius ``t`` and ``T_t >= sum_{j > t} w(j)`` a tail bound: that is how
:func:`smallest_support` *proves* infeasibility for a given parameter.

*Lemma 2 (separation).*  ``delta_h`` is nondecreasing in ``h``; hence
``delta_star(eps; H) = delta_H(eps)``.

*Proof.*  Let ``P_h`` be the output law for input ``h`` (``P_0`` shifted by
``h``) and ``F`` the distribution function of ``P_0``.  On the common support
the ratio ``P_0(y)/P_h(y) = w(y)/w(y-h)`` is nonincreasing in ``y`` (log-concavity);
left of ``S(h)`` it is ``+inf`` and right of ``S(0)`` it is ``0``.  So the set
``{P_0 > e^eps P_h}`` is a half-line ``{y <= c}`` and
``delta_h = max_c [F(c) - e^eps F(c - h)]``.  For ``h' > h``,
``F(c - h') <= F(c - h)`` for every ``c``, hence
``delta_{h'} >= max_c [F(c) - e^eps F(c - h')] >= delta_h``.  ∎

The searches therefore evaluate the single separation ``h = H`` with the
registry's O(1) closed forms (:class:`~sparseldp.core.families.DesignSearch`);
the certificate of every returned design is the accountant's rigorous bound
over all ``h <= H`` (:meth:`SparseLaplace.delta_star_upper`).

Smallest support
----------------
With Lemma 1 the exact smallest feasible ``s`` for a given parameter is found
by exponential then binary search on the radius: O(log s) evaluations of the
O(1) closed form, then one certificate.

Joint design
------------
For a fixed kernel parameter the distortion moments grow with ``s``
(Propositions 1 and 3), so the best ``s`` is the smallest feasible one
(Theorems 6 and 12).  For a fixed ``s``, ``R1``/``R2`` decrease in ``lam`` and
increase in ``sigma`` (one-parameter exponential families in ``|k|`` and
``k^2``), so the best parameter at radius ``t`` is the feasible one nearest the
less private end, ``p*(t)``, and the design problem is
``min_t Psi(t)``, ``Psi(t) = R(p*(t), t)``.  Write ``u`` for the goodness
coordinate (``log lam``, ``-log sigma``).  :func:`design`

1. finds ``u_lim``, the largest feasible ``u`` of the ``s -> infinity`` limit
   (the closed form at ``t = inf``).  By Lemma 1 ``delta_H(u, t) >= delta_H^inf(u)``,
   so every feasible ``u`` at every radius is ``<= u_lim``;
2. finds ``t_first``, the smallest radius with a feasible parameter (Lemma 1:
   the feasible sets grow with ``t``, so this is a monotone search on ``t``,
   regula falsi on the integers; at each radius the minimum of ``delta_H``
   over ``u`` by Brent's method, plus the family's corner
   :attr:`DesignSearch.corner`, the Laplace kink at ``lam H = eps``);
3. minimizes ``Psi`` over ``t_first <= t <= t_top``, ``t_top = min(t_settle,
   max_t)``, by branch and bound: ``p*(t)`` is nondecreasing in ``t`` (nested
   feasible sets), so on radii between two evaluated ones ``t_a < t < t_b``,
   ``Psi(t) >= R(p*(t_b), t_a + 1)``; intervals whose bound is not below the
   best value found (relative ``1e-12``) are dropped, the others split.  Past
   ``t_settle`` (:attr:`DesignSearch.settle`) the truncation changes neither
   ``delta_H`` (relative ``e^-60``) nor ``R``, so ``p*(t)`` is ``p_lim`` to
   rounding and no larger radius does better; ``max_t`` is the family's cap;
4. among the radii evaluated within relative ``1e-11`` of the best value,
   takes the smallest (past the radius where ``p*(t)`` reaches ``p_lim`` to
   double precision ``Psi`` is flat: a smaller ``s`` at equal distortion);
5. certifies the best ``(s, p)`` with the accountant's rigorous upper bound,
   moving ``p`` towards the private end by the gap over the local slope if
   rounding requires.

``p*(t)`` is the crossing of ``delta_H = delta`` found inside the bracket from
``p*(t_a)`` (feasible at ``t`` by Lemma 1) to ``p*(t_b)`` (infeasible beyond),
to relative ``1e-14``.  What is observed (Tables III-IV, and over the test
grids) but not proven is that ``delta_H`` is quasi-convex in the parameter at
fixed ``t`` (so that this crossing is the extreme feasible parameter and
Brent's method finds the minimum); the result is optimal over ``s <= max_s``
up to the tolerances above under that observation.  The search aims at
``delta (1 - margin)`` (:attr:`DesignSearch.margin`: ``1e-12`` for Laplace,
``1e-10`` for Gaussian) so that the certificate holds at the first try; the
distortion given away is of that relative order.

Which way the answers err
-------------------------
Every returned design is certified with the rigorous upper bound
(:meth:`SparseLaplace.delta_star_upper`), so it certifiably meets the target.
Infeasibility proofs for a given parameter use rigorous *lower* bounds (the
limit bound above).  "Smallest ``s``" means the smallest ``s`` whose upper
bound meets ``delta``: the closed form decides every radius whose value is
farther from ``delta`` than any rounding error (``1e-12 + 1e-14 eps + 1e-9 delta``),
the accountant's rigorous bounds the others.

Caps
----
``H`` is at most :data:`MAX_H_DESIGN`; ``s`` at most the family's ``max_s``
(:data:`~sparseldp.core.kernels.GAUSSIAN_MAX_S` for the Gaussian family, whose
exact accounting needs O(s) memory).  A target that needs a larger ``s`` is
refused with the size it would need.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_int, check_nonnegative, check_probability
from ..core.kernels import dn, exp_dn, up
from ..core.accounting import certified_delta_star, defect_bounds
from ._search import first_feasible, golden_min, largest_feasible, u_tolerance
from ..errors import InfeasibleError
from ..core.families import Family, family_of, get_family
from ..core.mechanisms import SparseGaussian, SparseLaplace

__all__ = ["Design", "design", "smallest_support", "MAX_H_DESIGN"]

#: Largest privacy range ``H`` the designers accept (the CLI's ``--H`` has the same cap).
MAX_H_DESIGN = 10_000

# Branch and bound over the radius: intervals whose lower bound is within this relative
# distance of the best value are dropped.
_RTOL = 1e-12
# The largest radius the closed forms are asked about (offsets stay exact doubles).
_T_LIMIT = 1 << 52
# Among radii whose distortion is within this relative distance of the best, the smallest is chosen.
_TIE = 1e-11
# Golden-section width (in u = +-log param) when minimizing delta_H over the parameter.
_GOLDEN_XTOL = 1e-9


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


# ---------------------------------------------------------------------------
# target checks and shared pieces
# ---------------------------------------------------------------------------
def _validate_target(eps, delta, H, fam: Family):
    eps = check_nonnegative(eps, "eps")
    delta = check_probability(delta, "delta")
    H = check_int(H, "H", minimum=1)
    if H > 2 * fam.max_t:  # Theorem 4: s >= H + 1 is necessary
        raise ValueError(
            f"H must be an integer in [1, {2 * fam.max_t}] (Theorem 4: s >= H + 1, and the {fam.name} family's "
            f"s is at most {fam.max_s}), and the designers take H <= {MAX_H_DESIGN} (MAX_H_DESIGN); got {H}")
    if H > MAX_H_DESIGN:
        raise ValueError(
            f"H must be an integer in [1, {MAX_H_DESIGN}] (the designers' cap MAX_H_DESIGN: a design "
            f"needs s > H and O(H) work per certificate); got {H}")
    return eps, delta, H


def check_objective(objective) -> str:
    """``"r1"`` or ``"r2"``; ``ValueError`` otherwise."""
    if objective not in ("r1", "r2"):
        raise ValueError(f"objective must be 'r1' or 'r2'; got {objective!r}")
    return objective


def _slack(delta: float, eps: float) -> float:
    """Farther than this from ``delta``, a nearest value decides feasibility: above every rounding error of
    the closed forms and of the accountant (:func:`sparseldp.core.accounting.certified_delta_star`)."""
    return 1e-12 + 1e-14 * eps + 1e-9 * delta


def _certified(fam: Family, param, t, eps, H, delta) -> float:
    """``<= delta`` only if the accountant's rigorous upper bound is (the nearest value first)."""
    return certified_delta_star(fam.make(param, 2 * t + 1).kernel, eps, H, delta)


def _cap_error(fam: Family, t_needed, what: str) -> InfeasibleError:
    need = "an s above" if t_needed is None else f"s = {2 * int(t_needed) + 1}, above"
    return InfeasibleError(
        f"{what} needs {need} the {fam.name} family's cap s <= {fam.max_s} (the largest support its exact "
        f"accounting accepts): no {fam.name} mechanism within the cap meets the target")


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


# ---------------------------------------------------------------------------
# smallest support for a given parameter
# ---------------------------------------------------------------------------
def _smallest_radius(fam: Family, param, eps, H, delta) -> int:
    """Exact smallest radius ``t`` whose certificate meets ``delta`` (Lemma 1), at most ``fam.max_t``."""
    if delta >= 1.0:
        return 0
    S = fam.search
    slack = _slack(delta, eps)
    what = f"delta = {delta:g} with {fam.param} = {param:g} (eps = {eps:g}, H = {H})"

    def feasible(t):
        v = math.exp(S.log_delta(param, t, eps, H))
        if v > delta + slack:
            return False
        if v < delta - slack or t > fam.max_t:  # past the cap only the size needed is wanted
            return True
        return _certified(fam, param, t, eps, H, delta) <= delta

    if math.exp(S.log_delta(param, math.inf, eps, H)) > delta + slack:
        _prove_limit_infeasible(fam, param, eps, H, delta)
    lo = hi = (H + 1) // 2  # smallest t with 2t >= H (Theorem 4: below it delta_H = 1)
    if not feasible(hi):
        while True:  # exponential search (the closed form goes past the cap, to name the size needed)
            lo, hi = hi, min(2 * hi + 1, _T_LIMIT)
            if feasible(hi):
                break
            if hi >= _T_LIMIT:  # pragma: no cover - the limit test above settles every such case
                raise InfeasibleError(f"{what}: no support size up to s = {2 * hi + 1} meets the target, and "
                                      "the limit s -> infinity could not be separated from delta in floating point")
        while hi - lo > 1:  # lo infeasible, hi feasible
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    if hi > fam.max_t:
        raise _cap_error(fam, hi, what)

    def certified(t):
        return _certified(fam, param, t, eps, H, delta) <= delta

    if certified(hi):
        return hi
    # feasible only within rounding (the rigorous bound sits above the nearest value, deep in the Gaussian
    # tails by up to ~1e-8 relative): the smallest certifiable radius above, by galloping and bisection
    lo, step = hi, 1
    while True:
        hi = min(lo + step, fam.max_t)
        if certified(hi):
            break
        if hi >= fam.max_t:
            raise _cap_error(fam, None, what)
        lo, step = hi, 2 * step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if certified(mid) else (mid, hi)
    return hi


def _prove_limit_infeasible(fam: Family, param, eps, H, delta) -> None:
    """Raise with a rigorous proof when the ``s -> infinity`` limit exceeds ``delta`` (else return)."""
    S = fam.search
    t = int(min(max(S.settle(param, delta, H), H), fam.max_t))
    bound = _limit_lower_bound(fam, param, t, eps, H)
    if bound > delta:
        raise InfeasibleError(
            f"no odd support size s meets delta = {delta:g} for the {fam.name} family with "
            f"{fam.param} = {param:g}, eps = {eps:g}, H = {H}: delta_star is nonincreasing in s "
            f"and its limit as s -> infinity is at least {bound:.6g} > delta")


def smallest_support(family, *, eps, delta, H, param=None, lam=None, sigma=None) -> int:
    """The smallest odd ``s`` with ``delta_star_upper(eps, H) <= delta`` (a certified size).

    ``param`` is the family's kernel parameter (its name in the registry,
    :mod:`sparseldp.core.families`: ``lam`` for Laplace, ``sigma`` for Gaussian);
    ``lam=`` / ``sigma=`` are accepted spellings of it.  Another family's
    spelling, or ``param`` together with the spelling, is a ``ValueError``.

    Not the sufficient size of Corollary 2 / Corollary 4 (see
    :mod:`sparseldp.core.bounds`), but the true minimum, found by exponential and
    binary search on the radius with the O(1) closed form of ``delta_H``
    (Lemmas 1 and 2 of the module docstring), then certified: the exact
    ``delta_star`` at the returned size is ``<= delta``; a smaller size whose
    exact value is within rounding of ``delta`` cannot be certified and is
    not returned.  ``H`` is at most :data:`MAX_H_DESIGN`.

    Raises
    ------
    InfeasibleError
        When no ``s`` works, with the proof: the limit ``s -> infinity`` of
        ``delta_star`` is bounded below by a number exceeding ``delta``; or
        when the smallest ``s`` exceeds the family's cap (``Family.max_s``).
    """
    fam = get_family(family)
    eps, delta, H = _validate_target(eps, delta, H, fam)
    value = fam.resolve_param(param, lam=lam, sigma=sigma)
    if value is None:
        raise ValueError(f"smallest_support for the {fam.name} family needs {fam.param} (or param)")
    return 2 * _smallest_radius(fam, value, eps, H, delta) + 1


# ---------------------------------------------------------------------------
# joint design
# ---------------------------------------------------------------------------
def _finish(fam: Family, param, t, eps, delta, H, objective) -> Design:
    mech = fam.make(param, 2 * t + 1)
    ds = float(mech.delta_star_upper(eps, H))
    return Design(fam.name, mech, mech.parameter, mech.s, eps, delta, H, ds, mech.r1, mech.r2,
                  objective=objective)


def design(family, *, eps, delta, H, param=None, objective="r2", lam=None, sigma=None) -> Design:
    """Jointly optimal ``(s, lam)`` or ``(s, sigma)`` minimizing ``R1`` or ``R2``
    subject to ``delta_star(eps, H) <= delta``.

    With the kernel parameter given (``param``, the registry's name for it:
    ``lam`` for Laplace, ``sigma`` for Gaussian; ``lam=`` / ``sigma=`` are
    accepted spellings), only ``s`` is chosen: the smallest feasible one,
    which is distortion-optimal for that parameter (Theorems 6 and 12).
    Otherwise the parameter is optimized too (see the module docstring for the
    search and its guarantees), over ``s`` up to the family's cap.  The
    returned :class:`Design` carries a rigorous upper bound on the
    ``delta_star`` reached (``<= delta``).  ``H`` is at most :data:`MAX_H_DESIGN`.
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
    if delta <= 0.0:
        raise InfeasibleError(
            f"delta = 0 (pure LDP) is impossible for a sparse {fam.name} mechanism on Z: by Theorem 1 pure "
            "LDP forces every support to be the same set, and a window that moves with the input is not")
    return _Joint(fam, eps, delta, H, objective).run()


class _Joint:
    """The joint search of the module docstring, for one target."""

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
        """Branch and bound over ``t_first <= t <= t_top`` (module docstring, step 3)."""
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
