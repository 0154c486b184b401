r"""A privacy report a reviewer can read: one self-contained HTML page per mechanism.

:func:`build_report` returns the page as a string (``sparseldp report`` writes
it).  It states, for a mechanism spec (or a mechanism on Z with its target):

1. the mechanism (family, parameter, ``s``, window, domain) and the target it
   was designed for, as recorded in the spec;
2. the guarantee: ``delta*(eps; H)`` (a rigorous upper bound), its privacy
   profile over ``eps`` (plot), the defect for each separation ``h = 1..H``
   split into support leakage and overlap (Remark 2; stacked bars), the
   smallest certified ``eps`` for the target ``delta`` and a few standard
   ones, and the pure-LDP status (Theorems 1 and 7);
3. the realized sampler's certificate (:func:`sparseldp.sampling.certify`);
4. composition: ``k`` reports of one person, exactly on the privacy-loss
   lattice for the two families (:func:`sparseldp.composition.compose`), or
   through dp-accounting's privacy loss distributions for clipped channels,
   beside basic composition (table and plot);
5. utility: ``R1``, ``R2`` (Propositions 1 and 3), the output distribution
   of one input (plot), and the expected error of mean and frequency
   estimates from ``n`` reports;
6. how each number was obtained and the software versions.

Every number on the page says whether it is exact (rounded to nearest), a
rigorous upper or lower bound, or an estimate (see
:mod:`sparseldp.report._common`), and carries ``data-key`` / ``data-value``
attributes with the full-precision value.  Plots are inline SVG drawn here
(:mod:`sparseldp.report._svg`): no script, no font or image files, and a
Content-Security-Policy that forbids any fetch, so the page opens offline in
any browser.
"""

from __future__ import annotations

import numbers

from .. import __version__
from .._validation import check_int, check_nonnegative, check_probability
from ..channel import check_domain
from ..core.mechanisms import RadiusMechanism
from ..spec import Spec, spec_from_mechanism
from ._compute import MAX_CLIPPED_WORK, MAX_COMPOSE_POINTS, ReportData, check_utility_size, clipped_work, compute
from ._html import render

__all__ = ["build_report", "report_data", "MAX_REPORTS", "MAX_N", "MAX_EPS"]

#: Largest number of reports of one person composed on the page.
MAX_REPORTS = 10_000
#: Largest number of reports ``n`` the utility section is evaluated for.
MAX_N = 10**15
#: Largest target eps (``e^100 > 10^43``: no privacy is left to report, and ``k eps`` must stay finite).
MAX_EPS = 100.0


def report_data(spec_or_mechanism, *, eps=None, H=None, delta=None, domain=None, reports: int = 10,
                n: int = 10_000, x=None, source: str | None = None, generated: str | None = None) -> ReportData:
    """The numbers and series of the page (what :func:`build_report` draws); arguments as there."""
    spec, eps, H, delta = _target(spec_or_mechanism, eps, H, delta)
    reports = check_int(reports, "reports", minimum=1, maximum=MAX_REPORTS)
    n = check_int(n, "n", minimum=1, maximum=MAX_N)
    if domain is not None:
        domain = check_domain(domain)
        if spec.domain is not None and tuple(domain) != tuple(spec.domain):
            raise ValueError(f"domain must match the spec's own domain {spec.domain[0]}:{spec.domain[1]} (the "
                             f"mechanism is defined there); got {domain[0]}:{domain[1]}")
    lo_hi = spec.domain if spec.domain is not None else domain
    check_utility_size(spec, lo_hi)
    work = clipped_work(spec, H)
    if work > MAX_CLIPPED_WORK:
        per_h = (spec.domain[1] - spec.domain[0] + 1) * spec.s
        what = (f"H must be at most {MAX_CLIPPED_WORK // per_h} for this clipped channel" if per_h <= MAX_CLIPPED_WORK
                else "the clipped channel is too large for a report")
        raise ValueError(f"{what}: its pairs in range times its window ({work:,}) exceed the report's limit of "
                         f"{MAX_CLIPPED_WORK:,} (got H = {H}, {per_h // spec.s:,} inputs, s = {spec.s})")
    points = reports * (spec.s - 1) + 1
    if spec.domain is None or spec.window == "extended":
        if points > MAX_COMPOSE_POINTS:
            raise ValueError(f"reports must be at most {max(1, (MAX_COMPOSE_POINTS - 1) // max(spec.s - 1, 1)):,} "
                             f"for s = {spec.s} (k reports compose on a lattice of k (s - 1) + 1 points, at most "
                             f"{MAX_COMPOSE_POINTS:,}); got {reports:,}")
    if x is not None:
        x = check_int(x, "x")
        if lo_hi is not None and not lo_hi[0] <= x <= lo_hi[1]:
            raise ValueError(f"x must be an input of the domain {lo_hi[0]}..{lo_hi[1]}; got {x}")
    return compute(spec, eps=eps, H=H, delta_target=delta, reports=reports, n=n, domain=lo_hi, x0=x,
                   source=source, generated=generated, version=__version__)


def build_report(spec_or_mechanism, *, eps=None, H=None, delta=None, domain=None, reports: int = 10,
                 n: int = 10_000, x=None, source: str | None = None, generated: str | None = None) -> str:
    """The privacy report of a mechanism as one self-contained HTML page (a string).

    Parameters
    ----------
    spec_or_mechanism : Spec or SparseLaplace or SparseGaussian
        A loaded spec (:func:`sparseldp.spec.load_spec`, its claims already
        checked) or a mechanism on Z.
    eps, H : target
        Default: the spec's recorded target.  Required for a mechanism, or
        for a spec that records none.
    delta : float in [0, 1], optional
        The target delta (default: the spec's recorded ``delta`` when the
        target is the recorded one).
    domain : (lo, hi), optional
        The data's domain, for the utility section (frequencies need one).
        A spec with its own domain uses it; a different one is an error.
    reports : int in [1, MAX_REPORTS]
        ``k``, the number of reports of one person composed.
    n : int >= 1
        Number of people, for the expected estimation errors.
    x : int, optional
        The input whose output distribution is drawn (default 0 on Z, else
        the middle of the domain).
    source, generated : str, optional
        Where the spec came from (e.g. its path and hash) and a timestamp
        (default: now, UTC); both only printed.
    """
    return render(report_data(spec_or_mechanism, eps=eps, H=H, delta=delta, domain=domain, reports=reports, n=n,
                              x=x, source=source, generated=generated))


def _target(obj, eps, H, delta):
    """``(spec, eps, H, delta)`` from a spec or a mechanism and the optional target arguments."""
    if isinstance(obj, Spec):
        spec = obj
        if spec.baseline:
            raise ValueError(f"the privacy report covers the sparse mechanisms (a laplace or gaussian spec); got a "
                             f"baseline spec ({spec.family!r}): `sparseldp account` states its guarantee")
    elif isinstance(obj, RadiusMechanism):
        spec = spec_from_mechanism(obj)
    else:
        raise TypeError(f"spec_or_mechanism must be a Spec (sparseldp.spec.load_spec) or a SparseLaplace / "
                        f"SparseGaussian; got {type(obj).__name__}")
    g = spec.guarantee
    recorded = g is not None and eps is None and H is None
    if eps is None:
        if g is None:
            raise ValueError("eps is required: the spec records no target (give eps and H)")
        eps = g.eps
    if H is None:
        if g is None:
            raise ValueError("H is required: the spec records no target (give eps and H)")
        H = g.H
    eps = check_nonnegative(eps, "eps")
    if eps > MAX_EPS:
        raise ValueError(f"eps must be a real number in [0, {MAX_EPS:g}] for a report (e^eps > 10^43 beyond: "
                         f"nothing is private); got {eps!r}")
    H = check_int(H, "H", minimum=1, maximum=10_000)
    if delta is not None:
        delta = check_probability(delta, "delta")
    elif recorded and "delta" in (spec.meta or {}):
        delta = float(spec.meta["delta"])
    if isinstance(eps, numbers.Integral):
        eps = float(eps)
    return spec, float(eps), int(H), delta
