"""The family registry: everything the package knows about a kernel family, in one place.

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

>>> from sparseldp.families import get_family
>>> f = get_family("Laplace")
>>> f.param, f.make(0.5, 7)
('lam', SparseLaplace(lam=0.5, s=7))
"""

from __future__ import annotations

from dataclasses import dataclass

from ._kernels import GAUSSIAN_MAX_S
from ._validation import MAX_S, check_positive
from .mechanisms import SparseGaussian, SparseLaplace

__all__ = ["Family", "FAMILIES", "get_family", "family_of", "family_names"]


@dataclass(frozen=True)
class Family:
    """One kernel family.

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

    @property
    def title(self) -> str:
        """The family's name for titles (``"Laplace"``)."""
        return self.name.capitalize()

    def make(self, value, s: int):
        """The mechanism on Z with parameter ``value`` and support size ``s``."""
        return self.mechanism(**{self.param: value}, s=s)

    def channel(self, value, s: int, domain, window: str = "extended"):
        """The family's channel on a finite ``domain`` with ``extended`` or ``clipped`` windows."""
        from .channel import SparseChannel

        # SparseChannel names its constructor after the family (SparseChannel.laplace, .gaussian)
        build = getattr(SparseChannel, self.name)
        return build(**{self.param: check_positive(value, self.param)}, s=s, domain=domain, window=window)

    def more_private(self, a: float, b: float) -> bool:
        """True when parameter value ``a`` is strictly more private than ``b``."""
        return a < b if self.private_when == "smaller" else a > b


FAMILIES: dict[str, Family] = {
    "laplace": Family("laplace", "lam", "inverse temperature", SparseLaplace, "smaller", MAX_S,
                      "Theorem 3, Proposition 1", r"\lambda", "", "concentration"),
    "gaussian": Family("gaussian", "sigma", "scale", SparseGaussian, "larger", GAUSSIAN_MAX_S,
                       "Theorem 9, Proposition 3", r"\sigma", "G", "scale"),
}


def family_names() -> tuple[str, ...]:
    """The registered names, in registry order."""
    return tuple(FAMILIES)


def get_family(name) -> Family:
    """The family called ``name`` (case and surrounding space ignored); ``ValueError`` otherwise."""
    if isinstance(name, Family):
        return name
    if not isinstance(name, str):
        raise TypeError(f"family must be one of {_names()}; got {type(name).__name__} {name!r}")
    key = name.strip().lower()
    if key not in FAMILIES:
        raise ValueError(f"family must be one of {_names()}; got {name!r}")
    return FAMILIES[key]


def family_of(mechanism) -> Family:
    """The family of a mechanism on Z (by its class); ``TypeError`` for anything else."""
    for fam in FAMILIES.values():
        if type(mechanism) is fam.mechanism:
            return fam
    raise TypeError(f"not a mechanism of a registered family ({_names()}): {type(mechanism).__name__}")


def _names() -> str:
    names = [repr(n) for n in FAMILIES]
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
