r"""Baseline local randomizers as channels on a finite domain ``a..b``.

Every constructor returns a :class:`sparseldp.channel.SparseChannel` with inputs
``a..b``, so baselines and the paper's sparse mechanisms are accounted by the
same exact code (Theorems 2 and 8 for ``delta``, Theorems 1 and 7 for the pure
epsilon).  All pmfs are built in log space in closed form; nothing is
truncated except where a docstring says so and bounds the omitted mass.

* :mod:`~sparseldp.baselines.classic`: k-ary randomized response, the
  geometric mechanism (clamped or folded), the clamped discrete Gaussian, and
  the paper's sparse windows (clipped by default);
* :mod:`~sparseldp.baselines.numeric`: the numeric mechanisms of the LDP
  literature -- Square Wave (Li et al., SIGMOD 2020), the Piecewise and Hybrid
  Mechanisms (Wang et al., ICDE 2019) and Duchi et al.'s one-bit mechanism --
  with the papers' unbiased mean estimators where they have one.

The full-support baselines are dense channels (``k`` rows of ``k`` or a few
more outputs): memory is ``O(k^2)`` (about 24 bytes per entry), meant for
domains up to a few thousand values.  Being full-support, their pure epsilon
is finite (:meth:`SparseChannel.pure_epsilon`).

:data:`FAMILIES` maps a family name to ``(constructor, parameter name,
parameter range)`` for the finite-domain designer and ``sparseldp compare``.
"""

from __future__ import annotations

import inspect
import math
from typing import Callable, NamedTuple

from ..channel import SparseChannel
from .classic import discrete_gaussian, geometric, randomized_response, sparse_gaussian, sparse_laplace
from .numeric import (
    EPS_STAR,
    ESTIMATOR_SOURCE,
    UNBIASED_FAMILIES,
    closed_form_variance,
    duchi,
    estimator_variance,
    hybrid,
    hybrid_alpha,
    piecewise,
    report_estimates,
    square_wave,
    square_wave_band,
)

__all__ = [
    "randomized_response",
    "geometric",
    "discrete_gaussian",
    "sparse_laplace",
    "sparse_gaussian",
    "square_wave",
    "square_wave_band",
    "piecewise",
    "duchi",
    "hybrid",
    "hybrid_alpha",
    "EPS_STAR",
    "report_estimates",
    "estimator_variance",
    "closed_form_variance",
    "UNBIASED_FAMILIES",
    "ESTIMATOR_SOURCE",
    "Family",
    "FAMILIES",
    "SPEC_FAMILIES",
    "OPTIONS",
    "construction",
]


class Family(NamedTuple):
    """One registry entry: ``constructor(**{param: value}, domain=..., [s=...])``.

    ``param_range = (low, high)`` is the open interval of allowed values
    (``eps`` of randomized response and Square Wave may also be 0).  Unpacks as a 3-tuple.
    """

    constructor: Callable[..., SparseChannel]
    param: str
    param_range: tuple[float, float]

    @property
    def takes_s(self) -> bool:
        """Whether the constructor also needs the odd support size ``s``."""
        return "s" in inspect.signature(self.constructor).parameters

    @property
    def more_private_when(self) -> str:
        """``"smaller"`` or ``"larger"``: which way of the parameter adds privacy."""
        return "larger" if self.param == "sigma" else "smaller"


def _geometric_clamp(*, lam, domain) -> SparseChannel:
    """:func:`geometric` with ``mode="clamp"``."""
    return geometric(lam=lam, domain=domain, mode="clamp")


def _geometric_fold(*, lam, domain) -> SparseChannel:
    """:func:`geometric` with ``mode="fold"``."""
    return geometric(lam=lam, domain=domain, mode="fold")


_POS = (0.0, math.inf)

FAMILIES: dict[str, Family] = {
    "rr": Family(randomized_response, "eps", _POS),
    "geometric-clamp": Family(_geometric_clamp, "lam", _POS),
    "geometric-fold": Family(_geometric_fold, "lam", _POS),
    "discrete-gaussian": Family(discrete_gaussian, "sigma", _POS),
    "sparse-laplace": Family(sparse_laplace, "lam", _POS),
    "sparse-gaussian": Family(sparse_gaussian, "sigma", _POS),
    "square-wave": Family(square_wave, "eps", _POS),
    "piecewise": Family(piecewise, "eps", _POS),
    "hybrid": Family(hybrid, "eps", _POS),
    "duchi": Family(duchi, "eps", _POS),
}

#: Baseline families a mechanism spec can name (:mod:`sparseldp.spec`); the paper's sparse windows
#: ("sparse-laplace", "sparse-gaussian") are written as ordinary "laplace" / "gaussian" specs instead.
SPEC_FAMILIES = ("rr", "geometric-clamp", "geometric-fold", "discrete-gaussian", "square-wave", "piecewise",
                 "hybrid", "duchi")

#: Integer construction options beyond the parameter and the domain: ``(name, minimum)`` per family.
OPTIONS: dict[str, tuple[tuple[str, int], ...]] = {
    "square-wave": (("band", 0),),
    "piecewise": (("resolution", 1),),
    "hybrid": (("resolution", 1),),
}


def construction(channel) -> tuple[str, dict]:
    """``(family, kwargs)`` such that ``FAMILIES[family].constructor(**kwargs)`` rebuilds ``channel``.

    For channels built by the constructors of :data:`SPEC_FAMILIES` (the
    parameter, ``domain`` and the options of :data:`OPTIONS`, which the
    constructors record with the channel); ``ValueError`` for any other channel.
    """
    fam = getattr(channel, "family", None)
    if not isinstance(channel, SparseChannel) or fam not in SPEC_FAMILIES:
        raise ValueError(f"channel must be built by a baseline constructor ({', '.join(SPEC_FAMILIES)}); got "
                         f"family {fam!r}")
    name, value = channel.parameter
    meta = channel._meta  # the constructors record their options and domain with the channel
    built = meta.get("_built_domain", channel.domain)
    if tuple(built) != tuple(channel.domain):
        raise ValueError(f"channel must be a baseline as built; this {fam} channel on {built[0]}..{built[1]} was "
                         f"restricted to the inputs {channel.domain[0]}..{channel.domain[1]} (to_channel), which "
                         "no constructor rebuilds")
    kwargs = {name: value, "domain": channel.domain}
    for opt, _ in OPTIONS.get(fam, ()):
        kwargs[opt] = int(meta[opt])
    return fam, kwargs
