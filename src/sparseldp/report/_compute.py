r"""Every number of the privacy report, computed through the public API, each with its kind and method.

:func:`compute` gathers the sections of the page (:class:`ReportData`); :mod:`._html` draws them.
Each number is a :class:`Num` whose ``kind`` (exact, upper, lower, estimate) is explained in
:mod:`._common`.  The sections live in their own modules: :mod:`._guarantee` (the guarantee and
the sampler's certificate), :mod:`._composition` (``k`` reports of one person) and
:mod:`._utility` (distortion and estimation errors); the mechanism and provenance sections, which
only restate what is given, are here.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np

from ._common import MAX_CLIPPED_WORK, Num, clipped_work
from ._composition import (
    MAX_COMPOSE_POINTS,
    MAX_PLD_PAIRS,
    _composition_section,
    _distinct_pairs,
)
from ._guarantee import CERTIFY_BUDGET, STANDARD_DELTAS, _certificate_section, _guarantee_section
from ._utility import (
    DENSE_UTILITY_MAX,
    MAX_UTILITY_ENTRIES,
    _utility_section,
    check_utility_size,
)

__all__ = ["Num", "ReportData", "compute", "CERTIFY_BUDGET", "MAX_PLD_PAIRS", "DENSE_UTILITY_MAX",
           "MAX_UTILITY_ENTRIES", "MAX_COMPOSE_POINTS", "STANDARD_DELTAS",
           # defined in the section modules, imported from here by sparseldp.report
           "MAX_CLIPPED_WORK", "clipped_work", "check_utility_size",
           "_distinct_pairs"]  # private: tests/test_report.py imports it from here


@dataclass
class ReportData:
    """What the page shows, section by section (plain containers; :mod:`._html` lays them out)."""

    spec: object
    eps: float
    H: int
    delta_target: float | None
    reports: int
    n: int
    domain: tuple[int, int] | None
    x0: int
    mechanism: dict = field(default_factory=dict)
    guarantee: dict = field(default_factory=dict)
    certificate: dict = field(default_factory=dict)
    composition: dict = field(default_factory=dict)
    utility: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)


# -- the whole page ---------------------------------------------------------------------------------


def compute(spec, *, eps: float, H: int, delta_target, reports: int, n: int, domain, x0, source, generated,
            version: str) -> ReportData:
    """All sections for ``spec`` at the target ``(eps, H)``; ``domain`` is the data's domain for the utility."""
    lo_hi = spec.domain if spec.domain is not None else domain
    if x0 is None:
        x0 = 0 if lo_hi is None else lo_hi[0] + (lo_hi[1] - lo_hi[0]) // 2
    data = ReportData(spec=spec, eps=eps, H=H, delta_target=delta_target, reports=reports, n=n, domain=lo_hi,
                      x0=int(x0))
    data.mechanism = _mechanism_section(spec, lo_hi)
    data.guarantee = _guarantee_section(spec, eps, H, delta_target)
    data.certificate = _certificate_section(spec, eps, H)
    with np.errstate(over="ignore", under="ignore"):  # e^eps overflowing to inf inside dp-accounting is harmless
        upper = data.certificate.get("upper")  # the realized sampler's bound, when it was computed
        data.composition = _composition_section(spec, eps, H, delta_target, reports,
                                                data.guarantee["delta_star"].value,
                                                None if upper is None else upper.value)
    data.utility = _utility_section(spec, lo_hi, n, data.x0)
    data.provenance = _provenance(version, source, generated, data)
    return data


# -- mechanism ----------------------------------------------------------------------------------------


def _mechanism_section(spec, lo_hi) -> dict:
    m = spec.mechanism
    meta = dict(spec.meta or {})
    recorded = {key: Num(f"recorded.{key}", float(meta[key]), "recorded",
                         "as written in the spec file (checked against the recomputed values when it was loaded)")
                for key in ("eps", "delta", "H", "delta_star", "r1", "r2") if key in meta}
    return {"family": spec.family, "param_name": spec.param_name, "param": spec.param, "s": spec.s, "t": m.t,
            "domain": spec.domain, "window": spec.window if spec.domain is not None else None,
            "utility_domain": lo_hi, "recorded": recorded}


# -- provenance ---------------------------------------------------------------------------------------


def _dist_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _provenance(version: str, source, generated, data: ReportData) -> dict:
    if generated is None:
        generated = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    deps = {"Python": platform.python_version(), "numpy": np.__version__, "scipy": _dist_version("scipy")}
    if data.composition.get("route") == "dp-accounting":
        deps["dp-accounting"] = _dist_version("dp-accounting")
    return {"version": version, "source": source, "generated": generated, "deps": deps}
