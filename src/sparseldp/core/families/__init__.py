r"""The family registry: everything the package knows about a kernel family, in one place.

A *family* is a kernel shape ``w(d)`` with one positive parameter, turned into
s-sparse mechanisms on Z (Definitions 6 and 13) and into channels on a finite
domain.  Code outside this module and the argument parsers never compares
family names: it asks the registry.

=========  =========  ==================  ================================
name       parameter  more privacy when   mechanism on Z
=========  =========  ==================  ================================
laplace    ``lam``    ``lam`` smaller     :class:`~sparseldp.SparseLaplace`
gaussian   ``sigma``  ``sigma`` larger    :class:`~sparseldp.SparseGaussian`
=========  =========  ==================  ================================

The designers (:mod:`sparseldp.design`, :mod:`sparseldp.design.finite`) take
what they need to search a family's parameter from its :class:`DesignSearch`
(search ranges, the bound past which nothing is feasible, the radii where the
kernel's truncation is negligible, and O(1) closed forms of ``delta_h`` and of
the distortion moments for the searches) and the parameter itself through
:meth:`Family.resolve_param` (``param=`` or the family's own keyword).

>>> from sparseldp.core.families import get_family
>>> f = get_family("Laplace")
>>> f.param, f.make(0.5, 7)
('lam', SparseLaplace(lam=0.5, s=7))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..kernels import GAUSSIAN_MAX_S
from ..._validation import MAX_S, check_positive
from ..mechanisms import SparseGaussian, SparseLaplace
from ...channel import SparseChannel
from ._closed import gaussian_log_delta, gaussian_moments, lam_m_minus_eps, laplace_log_delta, laplace_moments

__all__ = ["Family", "DesignSearch", "FAMILIES", "get_family", "family_of", "family_names", "family_with_param"]


@dataclass(frozen=True)
class DesignSearch:
    """What the designers (:mod:`sparseldp.design`, :mod:`sparseldp.design.finite`) need to know
    about a family to search its parameter; every callable is plain arithmetic, no search state.

    The *good end* of a range is its less private end (less distortion).
    ``log_delta`` and ``moments`` are O(1) closed forms rounded to nearest,
    for the searches only: every design is certified with the accountant's
    rigorous upper bound (:meth:`SparseLaplace.delta_star_upper`) before it is
    returned.

    Attributes
    ----------
    bound : callable ``(eps, delta) -> value``
        A rigorous bound on every feasible parameter: beyond it (towards the
        good end) no support size meets ``delta`` at ``h = 1``.
    log_delta : callable ``(value, t, eps, h) -> float``
        ``log delta_h(eps)`` of the radius-``t`` mechanism (Theorems 3 and 9),
        O(1) (:mod:`sparseldp.core.families._closed`); ``t = math.inf`` gives
        the ``s -> infinity`` limit.
    moments : callable ``(value, t) -> (R1, R2)``
        The distortion moments (Propositions 1 and 3), O(1); ``t`` may be ``math.inf``.
    settle : callable ``(value, delta, H) -> float``
        A radius past which the kernel's truncation changes neither
        ``delta_H`` (relative ``e^-60``) nor the moments.
    far : callable ``(limit, eps, H, t) -> value``
        The private end of the range that holds the minimizer of ``delta_H`` in
        the parameter at radius ``t``, given the limit parameter ``limit``.
    corner : callable ``(eps, H) -> value or None``
        The parameter where the overlap of ``delta_H`` starts (Laplace:
        ``lam H = eps``, below it ``delta_H`` is pure leakage), a kink that
        the designers evaluate exactly; ``None`` when there is none.
    margin : float
        The relative distance below ``delta`` the designers aim at, so that the
        accountant's rigorous bound (a few ulps above the nearest value; for
        the Gaussian family up to about ``1e-10`` relative, from the enclosure
        of Proposition 2's threshold) certifies the design at the first try.
    log_w : callable ``(value, d) -> array``
        ``log w(d)`` for an integer array ``d`` (the finite-domain evaluator).
    finite_range : callable ``(k) -> (good, other)``
        The parameter range searched on a finite domain of ``k`` values; beyond
        its ends the channel no longer changes in double precision for
        distortion purposes.
    max_eps : float
        The largest ``eps`` the designers take (Gaussian: ``1e50``; beyond it
        ``sigma`` underflows and no design can be certified).  Default ``inf``.
    """

    bound: Callable[[float, float], float]
    log_delta: Callable[[float, float, float, int], float]
    moments: Callable[[float, float], tuple[float, float]]
    settle: Callable[[float, float, int], float]
    far: Callable[[float, float, int, int], float]
    corner: Callable[[float, int], float | None]
    margin: float
    log_w: Callable
    finite_range: Callable[[int], tuple[float, float]]
    max_eps: float = math.inf


@dataclass(frozen=True)
class Family:
    r"""One kernel family.

    Attributes
    ----------
    name : str
        Registry key, lower case (``"laplace"``).
    param : str
        Name of its parameter, as the paper writes it (``"lam"``, ``"sigma"``).
    meaning : str
        What the parameter is, in words (tables and help texts).
    mechanism : type
        The s-sparse mechanism on Z; ``mechanism(**{param: value}, s=s)``.
    private_when : {"smaller", "larger"}
        Which way of moving the parameter flattens the kernel (more privacy,
        more distortion): designers search in that direction.
    max_s : int
        Largest support size the family's exact accounting accepts.
    theorems : str
        Where its exact defect and distortion come from in the paper.
    symbol : str
        The parameter in LaTeX (``r"\lambda"``).
    mark : str
        The superscript the paper puts on the family's quantities (``""`` for
        Laplace, ``"G"`` for Gaussian: ``delta^{G,*}``, ``R_1^G``).
    sweep : str
        What a sweep of the parameter is called (``"concentration"``, ``"scale"``).
    search : DesignSearch
        The designers' search range, limits and infeasibility bound.
    """

    name: str
    param: str
    meaning: str
    mechanism: type
    private_when: str
    max_s: int
    theorems: str
    symbol: str
    mark: str
    sweep: str
    search: DesignSearch

    @property
    def title(self) -> str:
        """The family's name for titles (``"Laplace"``)."""
        return self.name.capitalize()

    def make(self, value, s: int):
        """The mechanism on Z with parameter ``value`` and support size ``s``."""
        return self.mechanism(**{self.param: value}, s=s)

    def channel(self, value, s: int, domain, window: str = "extended"):
        """The family's channel on a finite ``domain`` with ``extended`` or ``clipped`` windows."""

        # SparseChannel names its constructor after the family (SparseChannel.laplace, .gaussian)
        build = getattr(SparseChannel, self.name)
        return build(**{self.param: check_positive(value, self.param)}, s=s, domain=domain, window=window)

    @property
    def max_t(self) -> int:
        """Largest radius ``t`` (``s = 2t + 1 <= max_s``)."""
        return (self.max_s - 1) // 2

    def more_private(self, a: float, b: float) -> bool:
        """True when parameter value ``a`` is strictly more private than ``b``."""
        return a < b if self.private_when == "smaller" else a > b

    def resolve_param(self, param=None, **spellings) -> float | None:
        """The family's parameter from ``param=`` or its own keyword (``lam=``, ``sigma=``).

        ``spellings`` are the keyword arguments a designer accepts for the
        parameters of all families (``lam=..., sigma=...``); ``None`` means not
        given.  Giving another family's keyword, or ``param`` together with the
        family's keyword, is a ``ValueError`` naming the argument.  Returns the
        validated value (finite, > 0) or ``None`` when nothing was given.
        """
        given = {key: value for key, value in spellings.items() if value is not None}
        for key in given:
            if key != self.param:
                raise ValueError(f"{key} is not a parameter of the {self.name} family "
                                 f"(it takes {self.param}, also spelled param)")
        if param is not None and given:
            raise ValueError(f"the {self.name} parameter was given twice: param = {param!r} and "
                             f"{self.param} = {given[self.param]!r}; give one")
        value = param if param is not None else given.get(self.param)
        return None if value is None else check_positive(value, self.param)


# -- the designers' family-specific facts -------------------------------------------


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


def _laplace_corner(eps: float, H: int) -> float | None:
    """The largest ``lam`` with ``lam H <= eps`` exactly: ``delta_H`` is pure leakage up to it, and its
    overlap grows with slope about ``H / 2`` beyond (``None`` for ``eps = 0``)."""
    if eps <= 0.0:
        return None
    lam = eps / H
    while lam_m_minus_eps(lam, H, eps) > 0.0:
        lam = math.nextafter(lam, 0.0)
    return lam


def _laplace_far(lam: float, eps: float, H: int, t: int) -> float:
    """Below this ``lam`` ``delta_H`` at radius ``t`` only grows (the search range's private end).

    For ``t >= H`` and ``lam H <= eps`` the defect is pure leakage, which
    decreases in ``lam`` (the leaked outputs are the far tail), so the minimum
    lies above ``min(lam_lim, eps / H)``.  For ``t < H`` the leaked outputs
    include the centre and the defect grows with ``lam``: the range reaches
    down to a kernel flat over the window.
    """
    if t >= H and eps > 0:
        return min(lam, eps / H) / 2.0
    return min(lam, 1.0 / (t + 1)) * 1e-6


def _laplace_settle(lam: float, delta: float, H: int) -> float:
    """A radius past which the truncation changes neither ``delta_H`` (relative ``e^-60``) nor ``R1``, ``R2``."""
    return H + (math.log(H / delta) + 80.0) / lam


def _gaussian_settle(sigma: float, delta: float, H: int) -> float:
    """A radius past which the truncation changes neither ``delta_H`` (relative ``e^-60``) nor ``R1``, ``R2``."""
    return H + sigma * math.sqrt(2.0 * (math.log(H / delta) + 80.0))


# lam = 60: off-centre mass e^-60; lam = 1e-4 and sigma = 10 (k + 1) are flat over any k-value domain
_LAPLACE_SEARCH = DesignSearch(
    bound=_laplace_lam_sup,
    log_delta=laplace_log_delta,
    moments=laplace_moments,
    settle=_laplace_settle,
    far=_laplace_far,
    corner=_laplace_corner,
    margin=1e-12,
    log_w=lambda lam, d: -lam * np.abs(d),
    finite_range=lambda k: (60.0, 1e-4),
)
_GAUSSIAN_SEARCH = DesignSearch(
    bound=_gaussian_sigma_inf,
    log_delta=gaussian_log_delta,
    moments=gaussian_moments,
    settle=_gaussian_settle,
    far=lambda sigma, eps, H, t: 10.0 * (t + 1) + sigma,
    corner=lambda eps, H: None,
    margin=1e-10,
    log_w=lambda sigma, d: -(np.asarray(d, dtype=float) ** 2) / (2.0 * sigma * sigma),
    finite_range=lambda k: (0.05, 10.0 * (k + 1)),
    max_eps=1e50,
)

FAMILIES: dict[str, Family] = {
    "laplace": Family("laplace", "lam", "inverse temperature", SparseLaplace, "smaller", MAX_S,
                      "Theorem 3, Proposition 1", r"\lambda", "", "concentration", _LAPLACE_SEARCH),
    "gaussian": Family("gaussian", "sigma", "scale", SparseGaussian, "larger", GAUSSIAN_MAX_S,
                       "Theorem 9, Proposition 3", r"\sigma", "G", "scale", _GAUSSIAN_SEARCH),
}


def family_names() -> tuple[str, ...]:
    """The registered names, in registry order."""
    return tuple(FAMILIES)


def get_family(name) -> Family:
    """The family called ``name`` (case and surrounding space ignored); ``ValueError`` otherwise."""
    if isinstance(name, Family):
        return name
    if not isinstance(name, str):
        raise TypeError(f"family must be {_choices()}; got {type(name).__name__} {name!r}")
    key = name.strip().lower()
    if key not in FAMILIES:
        raise ValueError(f"family must be {_choices()}; got {name!r}")
    return FAMILIES[key]


def family_of(mechanism) -> Family:
    """The family of a mechanism on Z (by its class); ``TypeError`` for anything else."""
    for fam in FAMILIES.values():
        if type(mechanism) is fam.mechanism:
            return fam
    raise TypeError(f"not a mechanism of a registered family ({_names()}): {type(mechanism).__name__}")


def family_with_param(name: str) -> Family:
    """The family whose parameter is called ``name`` (``"lam"`` -> Laplace); ``KeyError`` otherwise.

    For constructions outside the registry that share a registered kernel
    (the geometric and discrete-Gaussian baselines) and hence its search range.
    """
    for fam in FAMILIES.values():
        if fam.param == name:
            return fam
    raise KeyError(f"no registered family has the parameter {name!r}")


def _choices() -> str:
    """``'laplace' or 'gaussian'``; ``one of 'a', 'b' or 'c'`` beyond two."""
    return _names() if len(FAMILIES) <= 2 else "one of " + _names()


def _names() -> str:
    names = [repr(n) for n in FAMILIES]
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
