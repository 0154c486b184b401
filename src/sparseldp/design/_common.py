"""What every designer shares: the result type, the target's checks and the search's limits.

:class:`Design` (the result on Z and on a finite domain) and its cap
:data:`MAX_H_DESIGN`; the checks of a target (:func:`_validate_target`,
:func:`check_objective`); the rounding slack beyond which a nearest value
decides feasibility (:func:`_slack`); the largest radius the closed forms are
asked about and the error raised when a target needs a support above a
family's cap (:func:`_cap_error`).  Used by :mod:`.radius`, :mod:`._joint`
and the finite-domain designers (:mod:`.finite`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._validation import check_design_delta, check_int, check_nonnegative
from ..errors import InfeasibleError
from ..core.accounting import _near_margin
from ..core.families import Family, family_of
from ..core.mechanisms import SparseGaussian, SparseLaplace

#: Largest privacy range ``H`` the designers accept (the CLI's ``--H`` has the same cap).
MAX_H_DESIGN = 10_000

# The largest radius the closed forms are asked about (offsets stay exact doubles).
_T_LIMIT = 1 << 52


@dataclass(frozen=True)
class Design:
    """A designed mechanism with its certificate, on Z or on a finite domain.

    :func:`~sparseldp.design.radius.design` and
    :func:`~sparseldp.design.radius.smallest_support` design on Z;
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
def check_design_eps(eps, fam: Family | None) -> float:
    """``eps >= 0``, and at most the family's ``search.max_eps`` (Gaussian: beyond ``1e50`` the
    designer's ``sigma`` underflows; it raised ZeroDivisionError, and an uncertifiable design from about
    ``eps = 1e100``; the Laplace designer works up to the largest doubles)."""
    eps = check_nonnegative(eps, "eps")
    if fam is not None and eps > fam.search.max_eps:
        raise ValueError(f"eps must be a real number in [0, {fam.search.max_eps:g}] for a {fam.name} design "
                         f"({fam.param} would underflow beyond); got {eps!r}")
    return eps


def _validate_target(eps, delta, H, fam: Family):
    eps = check_design_eps(eps, fam)
    delta = check_design_delta(delta, "delta")
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
    return _near_margin(delta, eps)


def _cap_error(fam: Family, t_needed, what: str) -> InfeasibleError:
    # t_needed past the cap comes from the nearest closed forms (not certified): "about"
    need = "an s above" if t_needed is None else f"about s = {2 * int(t_needed) + 1}, above"
    return InfeasibleError(
        f"{what} needs {need} the {fam.name} family's cap s <= {fam.max_s} (the largest support its exact "
        f"accounting accepts): no {fam.name} mechanism within the cap meets the target")
