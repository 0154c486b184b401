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

Layout: the proofs above, :func:`smallest_support` and :func:`design` live
here; the joint search in :mod:`._joint`; the result type :class:`Design`,
the target's checks and :data:`MAX_H_DESIGN` in :mod:`._common`.
"""

from __future__ import annotations

import math

import numpy as np

from ..core.kernels import dn, exp_dn, up
from ..core.accounting import certified_delta_star, defect_bounds
from ._common import _T_LIMIT, MAX_H_DESIGN, Design, _cap_error, _slack, _validate_target, check_objective
from ._joint import _Joint
from ..errors import InfeasibleError
from ..core.families import Family, get_family

__all__ = ["Design", "design", "smallest_support", "MAX_H_DESIGN"]


# ---------------------------------------------------------------------------
# the certificate and the proof of infeasibility
# ---------------------------------------------------------------------------
def _certified(fam: Family, param, t, eps, H, delta) -> float:
    """``<= delta`` only if the accountant's rigorous upper bound is (the nearest value first)."""
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


# ---------------------------------------------------------------------------
# smallest support for a given parameter
# ---------------------------------------------------------------------------
def _smallest_radius(fam: Family, param, eps, H, delta) -> int:
    """Exact smallest radius ``t`` whose certificate meets ``delta`` (Lemma 1), at most ``fam.max_t``."""
    if delta >= 1.0:
        return 0
    S = fam.search
    slack = _slack(delta, eps)
    what = f"delta = {delta!r} with {fam.param} = {param:g} (eps = {eps:g}, H = {H})"

    def feasible(t):
        v = math.exp(S.log_delta(param, t, eps, H))
        if t > fam.max_t:  # past the cap only the size needed is wanted, for the message: the nearest value
            return v <= delta  # (the absolute slack below exceeds a tiny delta: it named sizes far too small)
        if v > delta + slack:
            return False
        if v < delta - slack:
            return True
        return _certified(fam, param, t, eps, H, delta) <= delta

    if math.exp(S.log_delta(param, math.inf, eps, H)) > delta:  # raises only with a rigorous proof
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
            f"no odd support size s meets delta = {delta!r} for the {fam.name} family with "
            f"{fam.param} = {param:g}, eps = {eps:g}, H = {H}: delta_star is nonincreasing in s "
            f"and its limit as s -> infinity is at least {bound!r} > delta")  # repr: exact, not rounded up


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
    d = _Joint(fam, eps, delta, H, objective).run()
    # the joint search resolves the distortion to a relative 1e-11 and can stop at a support a few steps
    # above the smallest certified one for its parameter (an independent probe: Gaussian, eps 0.1,
    # delta 1e-6, H 5: s = 2897 where 2861 is certified, R up to 2.6e-10 lower); at a fixed parameter the
    # distortion grows with s, so the smallest certified support is taken where it is no worse
    t = _smallest_radius(fam, d.parameter[1], eps, H, delta)
    if 2 * t + 1 < d.s:
        smaller = _finish(fam, d.parameter[1], t, eps, delta, H, objective)
        if getattr(smaller, objective) <= getattr(d, objective):
            return smaller
    return d
