"""What a spec claims, and the check of its claims on loading: :class:`Guarantee` and :func:`_verify`.

Part of :mod:`sparseldp.spec` (its docstring: "A spec carries what it claims, and loading checks the
claims"), which parses and writes spec files and calls :func:`_verify` on every :class:`~sparseldp.spec.Spec`
it builds.  This module recomputes the recorded certificate (``delta_star``, ``delta`` at the
recorded ``eps`` and ``H``, as a rigorous upper bound) and distortion (``r1``, ``r2``) from the
mechanism itself, refuses a claim that does not hold, and returns the :class:`Guarantee` that does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._format import format_upper

#: Relative slack allowed between a recorded delta claim and the recomputed upper bound
#: (floating-point paths may differ in the last bits between versions and machines).
CLAIM_RTOL = 1e-9
#: Relative slack for recorded distortion moments r1, r2.
_MOMENT_RTOL = 1e-6


@dataclass(frozen=True)
class Guarantee:
    """What a mechanism certifies: ``(eps, delta)``-LDP for inputs at most ``H`` apart.

    ``delta`` is a rigorous upper bound on ``delta_star(eps, H)`` (never below
    the exact value).  ``source`` says of what: ``"mechanism"`` (the ideal
    mechanism of the spec, recomputed) or ``"sampler"`` (the distribution the
    sampler actually draws, :func:`sparseldp.sampling.certify`).  ``reports``
    is the number of reports of one person it covers (``k`` columns composed).
    """

    eps: float
    delta: float
    H: int
    source: str = "mechanism"
    reports: int = 1

    def composed(self, k: int) -> "Guarantee":
        """``k`` reports of one person: ``(k eps, min(1, k delta))`` by basic composition (an upper bound)."""
        if k == 1:
            return self
        return Guarantee(self.eps * k, min(1.0, self.delta * k), self.H, self.source, self.reports * k)

    @property
    def vacuous(self) -> bool:
        """True when ``delta >= 1``: no privacy at all at this ``(eps, H)``."""
        return self.delta >= 1.0

    def describe(self) -> str:
        """One phrase, e.g. ``(eps = 1, delta <= 9.1e-07)-LDP for inputs up to H = 5 apart``.

        ``delta`` is printed rounded up to 4 significant digits (:func:`format_upper`): still an upper bound.
        """
        return (f"(eps = {self.eps:.6g}, delta <= {format_upper(self.delta)})-LDP for inputs up to H = {self.H} "
                "apart")

    def to_dict(self) -> dict:
        return {"eps": self.eps, "delta": self.delta, "H": self.H, "source": self.source, "reports": self.reports}



def _reports_input_unchanged(spec, target) -> bool:
    """True when every report equals its input with probability 1 in double precision."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        return _unchanged(spec, target)


def _unchanged(spec, target) -> bool:
    if spec.domain is None:
        return spec.s == 1 or float(target.pmf(0, 0)) == 1.0
    inputs = np.asarray(target.inputs)
    if inputs.size < 2:  # one input value: there is no neighbouring pair to protect
        return False
    return bool(np.all(np.asarray(target.pmf(inputs, inputs), dtype=float) == 1.0))


def _verify(spec) -> Guarantee | None:
    """Recompute what the spec claims; ``ValueError`` when a claim does not hold (module docstring)."""
    meta = spec.meta or {}
    target = spec.sampler_target()
    if spec.baseline:
        what = f"{spec.family}, {spec.param_key} = {spec.param!r} on the domain {spec.domain[0]}..{spec.domain[1]}"
    else:
        where = "" if spec.domain is None else f" on the domain {spec.domain[0]}..{spec.domain[1]} ({spec.window})"
        what = f"{spec.param_name} = {spec.param!r}, s = {spec.s}{where}"
    if _reports_input_unchanged(spec, target):
        raise ValueError(f"the mechanism ({what}) reports every input unchanged (probability 1 in double "
                         "precision): it gives no privacy")
    if ("eps" in meta) != ("H" in meta):
        have, miss = ("eps", "H") if "eps" in meta else ("H", "eps")
        raise ValueError(f"a spec records its target as 'eps' and 'H' together; it has '{have}' but no '{miss}'")
    claims = [k for k in ("delta", "delta_star") if k in meta]
    if claims and "eps" not in meta:
        raise ValueError(f"'{claims[0]}' means nothing without the 'eps' and 'H' it holds at; the spec has neither")
    for key in ("r1", "r2"):
        if key in meta:
            order = 1 if key == "r1" else 2
            actual = (float(np.mean(target.distortion(order))) if spec.domain is not None
                      else float(getattr(target, key)))
            if not math.isclose(meta[key], actual, rel_tol=_MOMENT_RTOL, abs_tol=1e-12):
                raise ValueError(f"the spec records {key} = {meta[key]!r} but the mechanism ({what}) has "
                                 f"{key} = {actual!r}")
    if "eps" not in meta:
        return None
    eps, H = float(meta["eps"]), int(meta["H"])
    upper = None
    claimed = [float(meta[key]) for key in ("delta_star", "delta") if key in meta]
    if claimed and spec.domain is not None:
        # O(n K) for channels whose rows share one support: when it already proves every claim, the
        # scan over all pairs is not needed (the guarantee is then this bound, rigorous but possibly
        # looser than delta_star_upper's)
        fast = float(target.delta_star_upper_fast(eps, H))
        if fast <= min(claimed) * (1.0 + CLAIM_RTOL):
            upper = min(fast, 1.0)
    if upper is None:
        # rigorous (the protocol's upper bound); a channel's delta_star_upper starts from the fast bound,
        # which the channel keeps once computed: when the check above ran, it is not computed again
        upper = min(float(target.delta_star_upper(eps, H)), 1.0)
    for key in ("delta_star", "delta"):
        if key in meta and upper > float(meta[key]) * (1.0 + CLAIM_RTOL):
            label = "certificate delta_star" if key == "delta_star" else "target delta"
            raise ValueError(
                f"the spec's recorded {label} = {float(meta[key]):.6g} does not hold: the mechanism ({what}) "
                f"has delta_star(eps = {eps:g}, H = {H}) = {format_upper(upper, 6)} (recomputed, a rigorous upper "
                "bound, rounded up)"
                + (_rounding_hint(spec, target, eps, H, upper) if float(meta[key]) == 0.0 else ""))
    return Guarantee(eps=eps, delta=upper, H=H, source="mechanism")


def _rounding_hint(spec, target, eps: float, H: int, upper: float) -> str:
    """Why ``delta = 0`` fails for a channel that is pure ``eps``-LDP up to rounding, and what holds instead."""
    if spec.domain is None:
        return ""
    pure = float(target.pure_epsilon(H))
    if not pure <= eps * (1.0 + 1e-9):
        return ""  # not a matter of rounding: the channel's own pure epsilon is larger
    certified = float(target.pure_epsilon_upper(H))
    return (f". Its pure epsilon is {eps:g} up to rounding (computed from its stored logarithms: {pure!r}), but "
            f"the rounding of its probabilities can put the exact value above {eps:g}, and the certificate "
            f"cannot exclude it: record a delta of at least {format_upper(upper, 3)}, or eps = {certified!r} (its "
            "certified pure epsilon) with delta = 0")
