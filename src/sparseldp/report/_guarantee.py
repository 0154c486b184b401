"""The guarantee and certificate sections of the privacy report.

The guarantee: ``delta*(eps; H)`` (a rigorous upper bound), the worst pair's split into
support leakage and overlap (Remark 2), the privacy profile over ``eps``, the defect per
separation, the smallest certified ``eps`` for a few deltas and the pure-LDP status
(Theorems 1 and 7).  The certificate: :func:`sparseldp.sampling.certify` of the realized
sampler, when it fits :data:`CERTIFY_BUDGET`.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InfeasibleError
from ..sampling import certify
from ._common import Num, _is_clipped, _range_on_domain, _scans

__all__ = ["CERTIFY_BUDGET", "STANDARD_DELTAS"]

#: Work (pairs x window entries) up to which the realized sampler is certified (as ``privatize`` does).
CERTIFY_BUDGET = 20_000_000
#: The deltas at which the smallest eps is listed, besides the spec's target delta.
STANDARD_DELTAS = (1e-2, 1e-4, 1e-6, 1e-9)
_MAX_BARS = 60
_PROFILE_POINTS = 121


def _guarantee_section(spec, eps: float, H: int, delta_target) -> dict:
    target = spec.sampler_target()
    clipped = _is_clipped(spec)
    H_eff = _range_on_domain(spec, H)
    out = {"H_eff": H_eff, "clipped": clipped}
    upper = float(np.minimum(target.delta_star_upper(eps, H), 1.0))
    out["delta_star"] = Num("guarantee.delta_star", upper, "upper",
                            "delta_star_upper(eps, H): the maximum over separations 1..H of the defect (Theorems "
                            "2/3 and 8/9), outward rounded")
    m = spec.mechanism
    # the worst pair and its split (Remark 2)
    if clipped:
        wp = target.delta_with_argmax(eps, H)
        out["worst"] = None if wp.x is None else (int(wp.x), int(wp.x_prime))
        leak, ov = float(wp.support_leakage), float(wp.overlap)
    elif H_eff >= 1:
        h = min(H_eff, 2 * m.t + 1)
        d = m.defect_h(eps, h)
        out["worst"] = (0, h)
        leak, ov = float(d.support_leakage), float(d.overlap)
    else:
        out["worst"], leak, ov = None, 0.0, 0.0
    how = "defect of the worst pair split as in Remark 2, rounded to nearest"
    out["support_leakage"] = Num("guarantee.support_leakage", leak, "exact", how)
    out["overlap"] = Num("guarantee.overlap", ov, "exact", how)
    out["vacuous"] = upper >= 1.0
    out["profile"] = _profile(spec, target, eps, H, H_eff)
    out["per_h"] = _per_h(spec, target, eps, H_eff)
    # a clipped channel's epsilon() scans every pair a dozen times: the standard deltas only when cheap
    out["eps_for_delta"] = _eps_for_delta(target, H, delta_target, _scans(spec, H, 4, 0) >= 4)
    out["pure"] = _pure(spec, target, H)
    return out


def _profile(spec, target, eps: float, H: int, H_eff: int) -> dict:
    """``delta_star_upper(e, H)`` on a grid of ``e`` around the target, and the floor no ``e`` goes below."""
    e_max = max(3.0 * eps, 1.0)
    points = _scans(spec, H, _PROFILE_POINTS, 21)
    grid = np.union1d(np.linspace(0.0, e_max, points), [eps])  # the target itself is on the curve
    values = np.minimum(np.asarray(target.delta_star_upper(grid, H), dtype=float), 1.0)
    floor = None
    if not _is_clipped(spec) and H_eff >= 1:
        h = min(H_eff, 2 * spec.mechanism.t + 1)
        floor = float(spec.mechanism.defect_h(0.0, h).support_leakage)
    return {"eps": grid, "delta": values, "floor": floor}


def _per_h(spec, target, eps: float, H_eff: int) -> dict:
    """The defect for ranges ``h = 1..H`` split into support leakage and overlap (at most ``_MAX_BARS`` shown)."""
    m = spec.mechanism
    clipped = _is_clipped(spec)
    top = H_eff if clipped else min(H_eff, 2 * m.t)
    if top < 1:
        return {"h": np.zeros(0, dtype=np.int64), "total": np.zeros(0), "leak": np.zeros(0), "overlap": np.zeros(0),
                "all_shown": True, "beyond": H_eff > 2 * m.t, "clipped": clipped}
    bars = _scans(spec, H_eff, _MAX_BARS, 5) if clipped else _MAX_BARS
    if top <= bars:
        hs = np.arange(1, top + 1, dtype=np.int64)
    else:
        hs = np.unique(np.linspace(1, top, bars).round().astype(np.int64))
    if clipped:
        rows = [target.delta_with_argmax(eps, int(h)) for h in hs]
        total = np.array([float(r.delta) for r in rows])
        leak = np.array([float(r.support_leakage) for r in rows])
        ov = np.array([float(r.overlap) for r in rows])
        pairs = [None if r.x is None else (int(r.x), int(r.x_prime)) for r in rows]
    else:
        d = m.defect_h(eps, hs)
        total, leak, ov = (np.atleast_1d(np.asarray(v, dtype=float)) for v in (d.total, d.support_leakage, d.overlap))
        pairs = [(0, int(h)) for h in hs]
    return {"h": hs, "total": total, "leak": leak, "overlap": ov, "pairs": pairs, "all_shown": hs.size == top,
            "beyond": (not clipped) and H_eff > 2 * m.t, "clipped": clipped}


def _eps_for_delta(target, H: int, delta_target, standard: bool = True) -> list:
    """``(delta, Num or None, why)``: the smallest certified eps for the target delta and a few standard ones."""
    deltas = [] if delta_target is None else [float(delta_target)]
    if standard or not deltas:
        deltas += [d for d in STANDARD_DELTAS if all(not math.isclose(d, e, rel_tol=1e-9) for e in deltas)]
    out = []
    for d in deltas:
        try:
            e = float(target.epsilon(d, H))
        except InfeasibleError as exc:
            out.append((d, None, str(exc)))
            continue
        out.append((d, Num(f"guarantee.eps_for_delta[{d!r}]", e, "upper",
                           "epsilon(delta, H): the smallest eps whose rigorous delta_star_upper is <= delta, "
                           "rounded up (relative 1e-12); the true smallest eps is at most this"), None))
    return out


def _pure(spec, target, H: int) -> dict:
    """Pure LDP (Theorems 1 and 7): only with one common support on every pair in range."""
    if spec.domain is None:
        value = math.inf
        why = ("the window S(x) = {x - t, ..., x + t} moves with x, so S(0) and S(1) differ: by Theorem 1 "
               "(Laplace) / Theorem 7 (Gaussian) no eps gives pure eps-LDP")
    else:
        value = float(target.pure_epsilon(H))
        why = ("some pair in range has different supports: by Theorem 1 / Theorem 7 no eps gives pure eps-LDP"
               if math.isinf(value) else
               "every pair in range shares one support; this is the largest log-ratio on it (Theorems 1 and 7)")
    return {"pure_epsilon": Num("guarantee.pure_epsilon", value, "exact",
                                "from the supports and the exact stored log-probabilities (Theorems 1 and 7)"),
            "why": why}


# -- certificate ----------------------------------------------------------------------------------------


def _certify_cost(spec, H: int) -> int:
    target = spec.sampler_target()
    if spec.domain is None:
        return min(H, 2 * target.t + 1) * target.s
    k = spec.domain[1] - spec.domain[0] + 1
    return k * min(H, k) * spec.s


def _certificate_section(spec, eps: float, H: int) -> dict:
    cost = _certify_cost(spec, H)
    if cost > CERTIFY_BUDGET:
        return {"skipped": (f"not computed: certifying costs about {cost:,} operations, over the budget of "
                            f"{CERTIFY_BUDGET:,} (sparseldp privatize then states the mechanism's bound instead)")}
    cert = certify(spec.sampler_target(), eps, H)
    return {
        "cert": cert,
        "upper": Num("certificate.upper", float(cert.delta_star_upper), "upper",
                     "sparseldp.sampling.certify: exact integer counts of the sampler's 2^-64 grid, outward "
                     "rounded"),
        "lower": Num("certificate.lower", float(cert.delta_star_lower), "lower",
                     "the same computation rounded the other way, at the worst pair"),
        "ideal": None if cert.delta_star_ideal is None else Num(
            "certificate.ideal", float(cert.delta_star_ideal), "exact",
            "delta_star of the ideal (unquantized) mechanism, rounded to nearest"),
        "max_pmf_error": Num("certificate.max_pmf_error", float(cert.max_pmf_error), "exact",
                             "largest |realized - ideal| probability"),
    }
