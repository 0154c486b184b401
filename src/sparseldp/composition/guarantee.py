r"""The guarantee of ``k`` reports of one person, as the CLI states it: basic composition beside the exact one.

One report is ``(eps, delta)``-LDP on range ``H`` with ``delta`` a rigorous
upper bound on ``delta*(eps; H)``.  ``k`` reports of one person (fresh noise
each; one value reported ``k`` times, or ``k`` values each moving by at most
``H``, :mod:`.exact`) are then

* by **basic composition**: ``(k eps, min(1, k delta))``-LDP, a rigorous
  upper bound (the hockey-stick divergence of a product is at most the sum of
  the divergences, with the ``eps`` adding up);
* by **exact composition** (:func:`~sparseldp.composition.compose`, the
  lattice route, for :class:`~sparseldp.SparseLaplace` and
  :class:`~sparseldp.SparseGaussian`): ``delta_k(k eps)``, the hockey-stick
  divergence of the ``k``-fold products at the worst separation
  ``min(H, 2t + 1)``, computed by convolving the privacy loss on its lattice
  (no discretization), in floating point.  It comes with a bound on its
  rounding error from the FFT error model of :mod:`._lattice` (standard, but
  evaluated in floating point and not outward rounded): ``delta_k + error``
  is an upper estimate that errs high, not a certificate.  Mathematically
  ``delta_k(k eps) <= k delta*(eps)``, so it never exceeds basic composition
  by more than its error bar.

The same composition answers the other question: the smallest ``eps`` at
which ``delta_k(eps) + error <= min(1, k delta)`` (basic composition's
``delta``, reached at an ``eps`` below ``k eps``).

The lattice route applies to the two families on Z and to extended-window
channels (whose rows are the mechanism on Z); elsewhere -- clipped windows,
general kernels, baselines, a composed lattice above ``max_points`` points --
only basic composition is stated, and :attr:`KReports.why_basic` says why.
For a mechanism spec (:mod:`sparseldp.spec`) :func:`spec_route` is that rule
(whether its reports are those of its mechanism on Z, why not, and the
largest separation that occurs on its domain), and :func:`spec_k_reports`
applies it: every command that states the guarantee of ``k`` reports of a
spec asks them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._validation import check_int, check_nonnegative, check_probability
from ..core.kernels import GaussianKernel, LaplaceKernel
from ..core.mechanisms import RadiusMechanism
from ..errors import InfeasibleError
from ._lattice import MAX_POINTS, LatticeTooLarge
from .exact import LatticeComposition, _lattice_composition

__all__ = ["KReports", "k_reports", "SpecRoute", "spec_route", "spec_k_reports"]

# Steps (each 4x the previous, from 1e-13 relative) to move eps_k past the error bar of delta_k.
_STEPS = 80


@dataclass(frozen=True)
class KReports:
    """``k`` reports of one person: basic composition and, where it applies, exact composition.

    Attributes
    ----------
    k, H : int
        Reports per person; the privacy range.
    eps, delta : float
        One report's ``eps`` and its ``delta`` (a rigorous upper bound on ``delta*``).
    basic_eps, basic_delta : float
        ``k eps`` and ``min(1, k delta)``: basic composition, a rigorous upper bound.
    route : str
        ``"lattice"`` (exact composition) or ``"basic"`` (basic composition only).
    why_basic : str or None
        Why only basic composition is stated (``route == "basic"``).
    h : int or None
        The separation composed (the worst one, ``min(H, 2t + 1)``).
    exact_delta, exact_delta_error : float or None
        ``delta_k(k eps)`` in floating point and the FFT error-model bound on its error.
    exact_eps : float or None
        The smallest ``eps`` (to about ``1e-12`` relative, from above) with
        ``delta_k(eps) + error <= basic_delta``; None when none was found
        (:attr:`exact_eps_note` says why).
    """

    k: int
    H: int
    eps: float
    delta: float
    basic_eps: float
    basic_delta: float
    route: str
    why_basic: str | None = None
    h: int | None = None
    exact_delta: float | None = None
    exact_delta_error: float | None = None
    exact_eps: float | None = None
    exact_eps_note: str | None = None

    @property
    def exact_delta_upper(self) -> float | None:
        """``min(1, delta_k + error)``: the upper estimate of the exact ``delta`` at ``k eps`` (not outward rounded)."""
        if self.exact_delta is None:
            return None
        return min(1.0, self.exact_delta + self.exact_delta_error)

    def to_dict(self) -> dict:
        """Plain JSON values; an ``eps`` that overflows (``k eps`` beyond every double) is ``None``."""
        k_eps = self.basic_eps if math.isfinite(self.basic_eps) else None
        out = {"k": self.k, "H": self.H,
               "basic": {"eps": k_eps, "delta": self.basic_delta, "kind": "upper bound"},
               "route": self.route}
        if self.route == "basic":
            out["exact"] = None
            out["why_basic"] = self.why_basic
            return out
        out["exact"] = {"h": self.h, "eps": k_eps, "delta": self.exact_delta,
                        "delta_error": self.exact_delta_error, "delta_plus_error": self.exact_delta_upper,
                        "eps_at_basic_delta": self.exact_eps, "eps_note": self.exact_eps_note,
                        "kind": "floating point with an FFT error-model bound (not outward rounded)"}
        return out


def _basic(k, H, eps, delta, why) -> KReports:
    return KReports(k=k, H=H, eps=eps, delta=delta, basic_eps=k * eps, basic_delta=min(1.0, k * delta),
                    route="basic", why_basic=why)


def k_reports(mechanism, k, *, eps: float, delta: float, H: int, max_points: int = MAX_POINTS,
              reason: str | None = None, with_eps: bool = True) -> KReports:
    """The guarantee of ``k`` reports of one person (module docstring).

    ``mechanism`` is the mechanism on Z, or ``None`` for basic composition
    only (``reason`` then says why, e.g. a clipped channel); ``eps >= 0`` one
    report's ``eps`` and ``delta`` in ``[0, 1]`` a rigorous upper bound on its
    ``delta*(eps; H)``; ``H`` the largest separation that occurs (on a domain
    ``lo..hi`` at most ``hi - lo``); ``k`` an integer ``>= 1``.  The lattice
    route is taken when the mechanism's kernel is Laplace or Gaussian and the
    composed lattice has at most ``max_points`` points (its cost: one FFT of
    that length per tilt).  ``with_eps=False`` skips the search for
    :attr:`KReports.exact_eps` (a few more tilts).
    """
    k = check_int(k, "k", minimum=1)
    H = check_int(H, "H", minimum=1)
    eps = check_nonnegative(eps, "eps")
    delta = check_probability(delta, "delta")
    max_points = check_int(max_points, "max_points", minimum=1, maximum=MAX_POINTS)
    if mechanism is None:
        return _basic(k, H, eps, delta, reason or "no mechanism on Z given")
    if not (isinstance(mechanism, RadiusMechanism) and isinstance(mechanism.kernel, (LaplaceKernel, GaussianKernel))):
        return _basic(k, H, eps, delta, "the privacy loss of this mechanism lies on no lattice (exact composition "
                                        "covers Sparse Laplace and Sparse Gaussian on Z or with extended windows)")
    if k == 1:
        return _basic(k, H, eps, delta, "one report: nothing to compose")
    h = min(H, 2 * mechanism.t + 1)
    try:  # compose()'s own construction: the same lattice, trimmed once, the same numbers
        comp = _lattice_composition(mechanism, k, h, H, max_points=max_points)
    except LatticeTooLarge as exc:
        return _basic(k, H, eps, delta, f"the composed privacy-loss lattice would have k (n - 1) + 1 = "
                                        f"{exc.npts:,} points (n = {exc.n} per report), more than the "
                                        f"{max_points:,} composed here")
    except ValueError as exc:  # coefficients beyond 2^53 or an overflowing loss: no exact lattice
        return _basic(k, H, eps, delta, str(exc))
    e_k = k * eps
    if not math.isfinite(e_k):  # beyond every finite loss: only the infinity mass is left
        e_k = comp.max_loss
    value, error = comp.delta_with_error(e_k)
    target = min(1.0, k * delta)
    exact_eps, note = _eps_with_error(comp, target) if with_eps else (None, "not computed")
    return KReports(k=k, H=H, eps=eps, delta=delta, basic_eps=k * eps, basic_delta=target, route="lattice", h=h,
                    exact_delta=float(value), exact_delta_error=float(error), exact_eps=exact_eps,
                    exact_eps_note=note)


@dataclass(frozen=True)
class SpecRoute:
    """How ``k`` reports of a spec's mechanism compose (:func:`spec_route`).

    Attributes
    ----------
    lattice : bool
        Whether every pair of inputs is a pair of the spec's mechanism on Z
        (on Z, or extended windows), whose reports :func:`k_reports`
        composes on its privacy-loss lattice.
    H : int
        The largest separation that occurs: ``H`` on Z, ``min(H, hi - lo)`` on
        a domain ``lo..hi`` (``0`` when the domain has one value).
    why_basic : str or None
        Why only basic composition applies (``lattice`` False).
    """

    lattice: bool
    H: int
    why_basic: str | None = None


def spec_route(spec, H: int) -> SpecRoute:
    """Whether ``k`` reports of ``spec`` compose exactly on its mechanism's lattice, and why not.

    ``spec`` is a :class:`sparseldp.spec.Spec` (read through its ``baseline``,
    ``family``, ``domain`` and ``window``), ``H >= 1`` the privacy range.  The
    lattice applies to Sparse Laplace / Gaussian on Z and with extended windows
    (every row is the mechanism on Z, so every pair at separation ``h`` is the
    mechanism's pair ``(0, h)``); not to a baseline channel, whose privacy loss
    lies on no lattice, nor to clipped windows, whose rows are renormalized at
    the domain's edges, nor to a domain of one value, which has no pair.
    """
    H = check_int(H, "H", minimum=1)
    if spec.domain is None:
        return SpecRoute(True, H)
    span = spec.domain[1] - spec.domain[0]
    H_eff = min(H, span)
    if spec.baseline:
        return SpecRoute(False, H_eff, f"a {spec.family} channel: its privacy loss lies on no lattice")
    if spec.window == "clipped":
        return SpecRoute(False, H_eff, "clipped windows: the rows are renormalized at the domain's edges, so the "
                                       "pairs share no loss lattice")
    if span < 1:
        return SpecRoute(False, H_eff, "the domain has one value: no pair to tell apart")
    return SpecRoute(True, H_eff)


def spec_k_reports(spec, k, *, eps: float, delta: float, H: int, max_points: int = MAX_POINTS,
                   with_eps: bool = True) -> KReports:
    """:func:`k_reports` for the mechanism of ``spec`` on the range ``H``, routed by :func:`spec_route`.

    On the lattice route the mechanism on Z is composed on the range that
    occurs (``min(H, hi - lo)`` on a domain); otherwise basic composition on
    ``H`` is stated, with the reason.  ``eps``, ``delta`` (a rigorous upper
    bound on one report's ``delta*(eps; H)``), ``max_points`` and ``with_eps``
    as for :func:`k_reports`.
    """
    route = spec_route(spec, H)
    if not route.lattice:
        return k_reports(None, k, eps=eps, delta=delta, H=H, max_points=max_points, reason=route.why_basic,
                         with_eps=with_eps)
    return k_reports(spec.mechanism, k, eps=eps, delta=delta, H=route.H, max_points=max_points, with_eps=with_eps)


def _eps_with_error(comp: LatticeComposition, target: float):
    """``(eps, None)``: the smallest ``eps`` (to about 1e-12) with ``delta_k(eps) + error <= target``; or
    ``(None, why)``."""
    if target >= 1.0:
        return 0.0, None
    try:
        e = float(comp.epsilon(target))
    except InfeasibleError as exc:
        return None, str(exc).split(":")[0] + ": no eps reaches it"
    step = 1e-13 * max(e, 1e-300)
    for _ in range(_STEPS):
        value, error = comp.delta_with_error(e)
        if value + error <= target:
            return e, None
        if e >= comp.max_loss:
            break
        e, step = min(comp.max_loss, e + step), 4.0 * step
    return None, (f"{target:.6g} is within the error bound of the infinity mass 1 - (1 - p_inf)^k = "
                  f"{comp.infinity_mass:.6g}, the delta no eps removes: delta_k + error stays above it")
