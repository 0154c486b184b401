"""The local-randomizer protocol: what every mechanism of the package offers, with one meaning per name.

Radius mechanisms on Z (:class:`~sparseldp.SparseLaplace`,
:class:`~sparseldp.SparseGaussian`, the general-kernel mechanism) and finite
channels (:class:`~sparseldp.SparseChannel`, the baselines) both honour it, so
code that uses one uses all (sampling, estimation, composition, I/O, the CLI).

=====================================  ==================================================
``delta_star(eps, H)``                 ``max`` over input pairs at most ``H`` apart of the
                                       ordered defect, rounded to nearest
``delta_star_upper(eps, H)``           a rigorous upper bound on the same (certificates)
``epsilon(delta, H)``                  smallest certifiable ``eps`` for ``delta``
``is_ldp(eps, delta, H)``              ``delta_star_upper(eps, H) <= delta``
``defect(eps, x, x_prime)``            the ordered defect of one pair, with its split
                                       (support leakage + overlap, Remark 2)
``logpmf(y, x)``, ``pmf(y, x)``        the channel's probabilities
``support(x)``                         the outputs ``x`` can produce
``sample(x, *, rng=None)``             reports, secure randomness by default
``sampling_pmf(x)``                    the exactly realized distribution of ``x``'s report
``certify(eps, H)``                    rigorous bounds on the realized sampler's delta*
``to_channel(domain, window)``         the randomizer on a finite domain as a channel
``parameter``                          ``(name, value)`` of its kernel parameter, or ``None``
=====================================  ==================================================

Radius mechanisms add the per-separation quantities ``delta_h(eps, h)``,
``delta_h_upper(eps, h)`` and ``defect_h(eps, h)`` (Theorems 3 and 9).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["LocalRandomizer", "PROTOCOL_METHODS"]

#: The protocol's methods (``parameter`` is a property).
PROTOCOL_METHODS = ("delta_star", "delta_star_upper", "epsilon", "is_ldp", "defect", "logpmf", "pmf", "support",
                    "sample", "sampling_pmf", "certify", "to_channel")


@runtime_checkable
class LocalRandomizer(Protocol):
    """A local randomizer ``x -> Y``: see the module docstring for the meaning of each name."""

    def delta_star(self, eps, H): ...

    def delta_star_upper(self, eps, H): ...

    def epsilon(self, delta, H): ...

    def is_ldp(self, eps, delta, H): ...

    def defect(self, eps, x, x_prime): ...

    def logpmf(self, y, x): ...

    def pmf(self, y, x): ...

    def support(self, x): ...

    def sample(self, x, *, rng=None): ...

    def sampling_pmf(self, x): ...

    def certify(self, eps, H): ...

    def to_channel(self, domain, window): ...

    @property
    def parameter(self): ...
