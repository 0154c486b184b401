r"""Every family calibrated to one target: ``(eps, delta)``-LDP on range ``H`` over ``a..b``.

All families are channels on the same domain, certified by the same exact
accountant: a family's row is accepted only when
:meth:`SparseChannel.delta_star_upper` ``(eps, H)`` -- a rigorous upper bound
on the Theorem 2 defect -- is at most ``delta``.  "Best" is the least noisy
parameter that meets the target:

* ``sparse-laplace`` / ``sparse-gaussian``: the paper's designers.  With
  ``window="extended"`` (the default) :func:`sparseldp.design.design` on Z
  with range ``min(H, b - a)`` (an extended channel's pairs *are* the Z
  mechanism's, so this is exact), then the channel on the domain; with
  ``window="clipped"`` :func:`sparseldp.design.finite.design_finite`
  (Theorem 2 over the domain's pairs; much slower on large domains).
* every other family (k-RR, geometric, discrete Gaussian, Square Wave,
  Piecewise, Hybrid, Duchi): the largest ``eps``/``lam`` (smallest ``sigma``)
  of the family meeting the target.  The pure-epsilon families are thus run
  at an epsilon of their own ``>= eps`` when ``delta > 0`` or ``H < b - a``
  leaves room (their defect on range ``H`` at the target ``eps`` is then
  still ``<= delta``); ``pure_at_eps=True`` runs them at ``eps`` itself, as
  the papers do.

The search (cutting planes).  The parameter is searched on a log grid of 24
points and refined by bisection (relative ``1e-10``) against the defect of a
few probe pairs only (the ends and the middle of the domain at separations
``1`` and ``min(H, b - a)``, both orders): that maximum is a *lower* bound on
``delta_star``, so every parameter it rejects is infeasible.  The parameter
found is then certified with the full accountant; if the certificate fails,
the worst pair (:meth:`SparseChannel.delta_with_argmax`) joins the probes and
the search repeats.  So the result carries the same rigorous certificate as
:func:`sparseldp.design.finite.calibrate` (optimal over the grid, like it:
the defect is not proven monotone in the parameter) at the cost of one or two
full accountings instead of one per search step.

Results are cached per target (parameters only; channels are rebuilt, which
is deterministic and cheap next to the searches).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..baselines import FAMILIES
from ..channel import SparseChannel
from ..core.families import family_with_param, get_family
from ..design.finite import design_finite
from ..design.radius import design
from ..errors import InfeasibleError

__all__ = ["Calibrated", "calibrate_family", "SPARSE", "PURE", "MAX_SIM_ENTRIES", "TooLargeError"]

#: Compared names of the paper's sparse windows and their registered kernel families.
SPARSE = {"sparse-laplace": "laplace", "sparse-gaussian": "gaussian"}
#: Families parameterized by their own epsilon (pure eps-LDP by construction).
PURE = ("rr", "square-wave", "piecewise", "hybrid", "duchi")
#: Largest ``inputs x widest row`` of a channel that is built and simulated (about 130 MB per array).
MAX_SIM_ENTRIES = 1 << 24

_GRID = 24
_RTOL = 1e-10
_ROUNDS = 8
_CACHE: dict = {}
_CACHE_MAX = 512


class TooLargeError(ValueError):
    """The calibrated channel is too large to build and simulate (:data:`MAX_SIM_ENTRIES`)."""


@dataclass(frozen=True)
class Calibrated:
    """A family calibrated to the target: its parameters, channel and certificate.

    ``delta_star`` is :meth:`SparseChannel.delta_star_upper` ``(eps, H)`` of the
    channel: a rigorous upper bound on its exact defect, ``<= delta``.
    """

    family: str
    params: dict
    channel: SparseChannel = field(repr=False, compare=False)
    delta_star: float
    note: str = ""


def _entries_check(name: str, k: int, width: int) -> None:
    if k * width > MAX_SIM_ENTRIES:
        raise TooLargeError(f"{name}: the calibrated channel has {k} inputs x {width} outputs per row = "
                            f"{k * width:,} entries, more than the {MAX_SIM_ENTRIES:,} simulated here")


def _sparse(name, eps, delta, H, domain, window, objective, prior):
    fam = get_family(SPARSE[name])
    a, b = domain
    k = b - a + 1
    if window == "clipped":
        d = design_finite(fam, eps=eps, delta=delta, H=H, domain=domain, window="clipped", objective=objective,
                          prior=prior)
        return {fam.param: d.param, "s": d.s, "window": "clipped"}, d.note, d.delta_star
    Hd = min(H, b - a)
    if Hd == 0:  # one input value: nothing to protect, the identity window
        return {fam.param: 1.0, "s": 1, "window": "extended"}, "single-value domain", 0.0
    # the design on Z depends on the range, not on the domain: one design serves every domain wider than H
    zkey = ("design", fam.name, eps, delta, Hd, objective)
    if zkey not in _CACHE:
        d = design(fam, eps=eps, delta=delta, H=Hd, objective=objective)
        _remember(zkey, (d.param, d.s))
    param, s = _CACHE[zkey]
    _entries_check(name, k, s)
    # the extended channel's certificate is the Z mechanism's on range min(H, b - a)
    return ({fam.param: param, "s": s, "window": "extended"},
            "design() on range min(H, b - a): its extended channel's pairs are the Z mechanism's", None)


def _remember(key, value) -> None:
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = value


def build(name: str, params: dict, domain) -> SparseChannel:
    """The channel of family ``name`` with ``params`` (as :attr:`Calibrated.params`) on ``domain``."""
    if name in SPARSE:
        fam = get_family(SPARSE[name])
        return fam.channel(params[fam.param], params["s"], domain, params["window"])
    entry = FAMILIES[name]
    return entry.constructor(**{entry.param: params[entry.param]}, domain=domain)


def _probe_pairs(a: int, b: int, Hd: int) -> list[tuple[int, int]]:
    mid = a + (b - a - Hd) // 2
    pairs = set()
    for h in {1, Hd, max(1, Hd // 2)}:
        for x in (a, b - h, mid, a + (b - a - h) // 2):
            if a <= x and x + h <= b:
                pairs.add((x, x + h))
                pairs.add((x + h, x))
    return sorted(pairs)


def _probe_defect(ch: SparseChannel, eps: float, probes, a: int) -> float:
    """``max`` over the probe pairs of ``sum_y [Q(y|x) - e^eps Q(y|x')]_+`` (rounded to nearest): a lower
    bound on ``delta_star``.  The constructors' rows are the inputs ``a..b`` in order."""
    if eps > 700.0:
        return max(float(ch.defect(eps, x, xp).total) for x, xp in probes)
    idx = np.array(probes, dtype=np.int64) - a
    rows = np.unique(idx)
    dense = ch.matrix[rows].toarray()
    pos = np.searchsorted(rows, idx)
    return float(np.maximum(dense[pos[:, 0]] - math.exp(eps) * dense[pos[:, 1]], 0.0).sum(axis=1).max())


def _largest_feasible(delta_of, target: float, good: float, other: float):
    """The feasible point nearest ``good`` on a log grid from ``other`` to ``good``, refined by bisection."""
    grid = np.exp(np.linspace(math.log(other), math.log(good), _GRID))
    vals = [delta_of(float(p)) for p in grid]
    ok = [i for i, v in enumerate(vals) if v <= target]
    if not ok:
        return None
    i = ok[-1]
    if i == _GRID - 1:
        return float(grid[i])
    lo, hi = float(grid[i]), float(grid[i + 1])  # lo feasible, hi not
    while abs(hi - lo) > _RTOL * abs(lo):
        midp = math.sqrt(lo * hi)
        if delta_of(midp) <= target:
            lo = midp
        else:
            hi = midp
    return lo


def _search_range(pname: str, eps: float, k: int) -> tuple[float, float]:
    """``(good, other)``: the less private end first, as :func:`sparseldp.design.finite.calibrate` searches."""
    if pname == "eps":
        return eps + 60.0, max(eps * (1.0 - 1e-9), 1e-12)
    return family_with_param(pname).search.finite_range(k)


def _baseline(name, eps, delta, H, domain, pure_at_eps):
    entry = FAMILIES[name]
    pname = entry.param
    a, b = domain
    k = b - a + 1
    Hd = min(H, b - a)
    if pname == "eps" and name in ("piecewise", "hybrid", "duchi") and eps == 0.0:
        raise InfeasibleError(f"{name} needs eps > 0 (at eps = 0 its reports carry no information)")
    good, other = _search_range(pname, eps, k)
    if Hd == 0:  # one input value: no pair to protect, every parameter qualifies
        return {pname: eps if name in PURE else good}, "single-value domain", 0.0
    if name in PURE and pure_at_eps:
        # at eps itself; a hair below when rounding keeps the certificate above delta (delta = 0)
        for value in (eps, eps * (1.0 - 1e-9)):
            cert = float(entry.constructor(**{pname: value}, domain=domain).delta_star_upper(eps, H))
            if cert <= delta:
                return {pname: value}, "run at the target eps (pure eps-LDP)", cert
        raise InfeasibleError(f"{name} at eps = {eps:g} cannot be certified (eps, {delta:g})-LDP on range {H}")
    probes = _probe_pairs(a, b, Hd)
    target = delta
    for _ in range(_ROUNDS):
        def delta_of(p, probes=tuple(probes)):
            return _probe_defect(entry.constructor(**{pname: p}, domain=domain), eps, probes, a)

        p = _largest_feasible(delta_of, target, good, other)
        if p is None:
            raise InfeasibleError(f"no {name} channel on {a}..{b} meets (eps = {eps:g}, delta = {delta:g}) on "
                                  f"range H = {H} for {pname} on the search grid [{min(good, other):g}, "
                                  f"{max(good, other):g}]")
        ch = entry.constructor(**{pname: p}, domain=domain)
        cert = float(ch.delta_star_upper(eps, H))
        if cert <= delta:
            return {pname: p}, ("calibrated: largest feasible parameter over the search grid, certified by the "
                                "full accountant"), cert
        worst = ch.delta_with_argmax(eps, H)
        pair = (int(worst.x), int(worst.x_prime))
        if pair in probes:  # the rounded defect meets delta, its upper bound does not: aim lower
            target = 0.5 * target
        else:
            probes.append(pair)
    raise InfeasibleError(f"{name}: no certified parameter after {_ROUNDS} rounds of the search")


def calibrate_family(name: str, *, eps: float, delta: float, H: int, domain, window: str = "extended",
                     objective: str = "r2", prior=None, pure_at_eps: bool = False) -> Calibrated:
    """Family ``name`` of :data:`sparseldp.compare.COMPARE_FAMILIES` calibrated to the target (module docstring).

    Arguments are assumed validated by the caller (:func:`sparseldp.compare.compare`).
    Raises :class:`~sparseldp.InfeasibleError` when the family cannot meet the
    target, :class:`TooLargeError` when its channel is too large to simulate.
    """
    key = (name, eps, delta, H, domain, window if name in SPARSE else None, objective if name in SPARSE else None,
           None if prior is None or name not in SPARSE else np.asarray(prior, dtype=float).tobytes(),
           pure_at_eps if name in PURE else None)
    hit = _CACHE.get(key)
    if hit is None:
        if name in SPARSE:
            params, note, cert = _sparse(name, eps, delta, H, domain, window, objective, prior)
        else:
            params, note, cert = _baseline(name, eps, delta, H, domain, pure_at_eps)
        hit = (params, note, cert)
        _remember(key, hit)
    params, note, cert = hit
    ch = build(name, params, domain)  # deterministic: the very channel the certificate was computed for
    _entries_check(name, ch.n_inputs, int(np.diff(ch.matrix.indptr).max()))
    if cert is None:  # cheap: extended windows delegate to the Z mechanism
        cert = float(ch.delta_star_upper(eps, H))
        _CACHE[key] = (params, note, cert)
    return Calibrated(name, dict(params), ch, cert, note)
