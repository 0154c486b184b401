r"""Every number of the privacy report, computed through the public API, each with its kind and method.

A :class:`Num` is a value with a ``kind`` that says how far it can be trusted:

``exact``     the closed form evaluated in floating point and rounded to nearest (Theorems 2/3/8/9,
              Propositions 1 and 3): not a bound, off by a few units in the last place at most;
``upper``     a rigorous upper bound (outward rounding, or a pessimistic discretization): never
              below the true value;
``lower``     a rigorous lower bound;
``estimate``  neither: an asymptotic formula, a stochastic estimate or a computation whose error
              model is not outward rounded (the ``how`` text says which and how large).

:func:`compute` gathers the sections of the page (:class:`ReportData`); :mod:`._html` draws them.
"""

from __future__ import annotations

import math
import platform
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..channel import check_domain
from ..composition import PLDComposition, compose, to_pld
from ..errors import InfeasibleError
from ..sampling import certify

__all__ = ["Num", "ReportData", "compute", "CERTIFY_BUDGET", "MAX_PLD_PAIRS", "DENSE_UTILITY_MAX",
           "MAX_UTILITY_ENTRIES", "MAX_COMPOSE_POINTS", "STANDARD_DELTAS"]

#: Work (pairs x window entries) up to which the realized sampler is certified (as ``privatize`` does).
CERTIFY_BUDGET = 20_000_000
#: Distinct input pairs of a clipped channel composed through dp-accounting; beyond, basic composition only.
MAX_PLD_PAIRS = 24
#: Most reports composed through dp-accounting (its k-fold PLD grows with k); beyond, basic composition only.
MAX_PLD_REPORTS = 50
#: dp-accounting's loss grid for the clipped-channel route (losses rounded up: deltas stay upper bounds).
PLD_VDI = 1e-3
#: Domains up to this many values get the utility formulas by dense linear algebra (exact traces).
DENSE_UTILITY_MAX = 1000
#: Largest channel (inputs x window) the utility section builds.
MAX_UTILITY_ENTRIES = 20_000_000
#: Largest lattice of ``k`` composed reports (``k (s - 1) + 1`` points per FFT).
MAX_COMPOSE_POINTS = 20_000_000
#: Probes of the stochastic trace estimate used above :data:`DENSE_UTILITY_MAX` values.
HUTCHINSON_PROBES = 200
#: The deltas at which the smallest eps is listed, besides the spec's target delta.
STANDARD_DELTAS = (1e-2, 1e-4, 1e-6, 1e-9)
#: Largest clipped channel reported: pairs in range x window entries (one scan of every pair costs this).
MAX_CLIPPED_WORK = 20_000_000
#: Scans of every pair a clipped channel's report may spend on its profile and per-separation bars.
_SCAN_BUDGET = 100_000_000
_MAX_BARS = 60
_PROFILE_POINTS = 121
_PMF_POINTS = 400


@dataclass(frozen=True)
class Num:
    """One number of the page: ``key`` (stable, for machines), ``value``, ``kind`` and ``how`` (for people)."""

    key: str
    value: float
    kind: str
    how: str

    def __post_init__(self):
        if self.kind not in ("exact", "upper", "lower", "estimate", "recorded"):
            raise ValueError(f"kind must be exact, upper, lower, estimate or recorded; got {self.kind!r}")


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
        data.composition = _composition_section(spec, eps, H, delta_target, reports,
                                                data.guarantee["delta_star"].value)
    data.utility = _utility_section(spec, lo_hi, n, data.x0)
    data.provenance = _provenance(version, source, generated, data)
    return data


def _is_clipped(spec) -> bool:
    return spec.domain is not None and spec.window == "clipped"


def clipped_work(spec, H: int) -> int:
    """Pairs in range times window entries: the cost of one scan of a clipped channel's pairs (0 on Z)."""
    if not _is_clipped(spec):
        return 0
    k = spec.domain[1] - spec.domain[0] + 1
    return k * max(1, min(H, k - 1)) * spec.s


def _scans(spec, H: int, most: int, least: int) -> int:
    """How many scans of every pair the budget allows, between ``least`` and ``most``."""
    work = clipped_work(spec, H)
    return most if work == 0 else int(min(most, max(least, _SCAN_BUDGET // work)))


def _range_on_domain(spec, H: int) -> int:
    """The largest separation that occurs: ``H`` on Z, ``min(H, hi - lo)`` on a domain."""
    if spec.domain is None:
        return H
    return min(H, spec.domain[1] - spec.domain[0])


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


# -- guarantee ------------------------------------------------------------------------------------------


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


# -- composition --------------------------------------------------------------------------------------


def composition_ks(K: int) -> list[int]:
    """The numbers of reports listed: 1, 2, 3, 5, 10, 20, 50, ... up to ``K``, and ``K``."""
    ks, base = [], 1
    while base <= K:
        for m in (1, 2, 3, 5) if base == 1 else (1, 2, 5):
            if m * base <= K:
                ks.append(m * base)
        base *= 10
    if ks[-1] != K:
        ks.append(K)
    return sorted(set(ks))


def _distinct_pairs(spec, H: int) -> list[tuple[int, int]]:
    """One representative per class of input pairs ``x < x' <= x + H`` with the same two rows (bit for bit)
    up to a shift of the outputs or the reflection ``y -> -y`` (such pairs have one privacy loss distribution).

    Rows whose window ``x - t .. x + t`` lies inside the domain are the mechanism on Z shifted, so the
    pairs of two such rows form one class per separation; only pairs that touch an edge are compared
    row by row (``O((t + H) H)`` of them).
    """
    ch = spec.channel()
    lo, hi = spec.domain
    t = spec.mechanism.t
    cache = {}

    def row(x):
        if x not in cache:
            lab, p = ch.row(x)
            cache[x] = (np.asarray(lab, dtype=np.int64), np.asarray(p, dtype=float))
        return cache[x]

    def sig(a, b, ref):
        (la, pa), (lb, pb) = row(a), row(b)
        if not ref:
            return (la - a).tobytes() + b"|" + pa.tobytes() + b"|" + (lb - a).tobytes() + b"|" + pb.tobytes()
        # reflect y -> -y: the pair becomes (-b, -a), rows relative to -b
        return ((b - lb)[::-1].tobytes() + b"|" + pb[::-1].tobytes() + b"|" + (b - la)[::-1].tobytes() + b"|"
                + pa[::-1].tobytes())

    seen, out = set(), []
    interior = set()
    edge_a = set(range(lo, min(hi, lo + t + H) + 1)) | set(range(max(lo, hi - t - H), hi + 1))
    for a in sorted(edge_a):  # holds lo + t, whose pairs represent the interior separations
        for b in range(a + 1, min(hi, a + H) + 1):
            if a - t >= lo and b + t <= hi:  # both windows inside: one class per separation
                if b - a in interior:
                    continue
                interior.add(b - a)
            key = min(sig(a, b, False), sig(a, b, True))
            if key not in seen:
                seen.add(key)
                out.append((a, b))
                if len(out) > MAX_PLD_PAIRS:  # the caller then falls back to basic composition
                    return out
    return out


class _CappedEps:
    """A composition asked for ``delta`` at ``min(eps, 700)``: dp-accounting forms ``e^eps`` (``inf`` beyond 709,
    then ``inf * 0 = nan``), and ``delta`` is nonincreasing in ``eps``, so an upper bound stays one."""

    CAP = 700.0

    def __init__(self, comp):
        self._comp = comp

    def delta(self, eps):
        return self._comp.delta(np.minimum(np.asarray(eps, dtype=float), self.CAP))

    def epsilon(self, delta) -> float:
        return self._comp.epsilon(delta)


class _NoPairs:
    """Composition when no two inputs are within ``H`` of each other: nothing to tell apart, delta = 0."""

    exact = True
    route = "none"

    def __init__(self, k):
        self.k = k

    def delta(self, eps):
        return np.zeros(np.shape(eps))[()]

    def epsilon(self, delta) -> float:
        return 0.0


def _composition_section(spec, eps: float, H: int, delta_target, K: int, delta_star: float) -> dict:
    ks = composition_ks(K)
    H_eff = _range_on_domain(spec, H)
    m = spec.mechanism
    out = {"ks": ks, "K": K}
    if H_eff < 1:
        comps = {k: _NoPairs(k) for k in ks}
        out.update(route="none", kind="exact", how="no two inputs of the domain are within H of each other")
    elif not _is_clipped(spec):
        comps = {k: compose(m, k, H=H_eff) for k in ks}
        out.update(route="lattice", kind="estimate",
                   how=("exact composition on the privacy-loss lattice (sparseldp.composition.compose: the k-fold "
                        "loss distribution by FFT; the worst separation min(H, 2t + 1) is the worst case for every "
                        "k); computed in floating point, with an FFT error-model bound (not outward rounded) "
                        "shown beside each delta" + ("" if spec.domain is None else
                                                     "; the extended-window channel's rows are the mechanism on Z "
                                                     f"and its pairs are at most {H_eff} apart")))
    else:
        ch = spec.channel()
        pairs = [] if K > MAX_PLD_REPORTS else _distinct_pairs(spec, H)
        if K > MAX_PLD_REPORTS:
            comps = None
            out.update(route="basic", kind="upper",
                       how=(f"basic composition only: {K} reports of a clipped channel are more than the "
                            f"{MAX_PLD_REPORTS} composed through dp-accounting here"))
        elif len(pairs) > MAX_PLD_PAIRS:
            comps = None
            out.update(route="basic", kind="upper",
                       how=(f"basic composition only: the clipped channel has more than {MAX_PLD_PAIRS} distinct "
                            "input pairs in range, the most composed through dp-accounting here"))
        else:
            ks = sorted({1, K} | ({ks[len(ks) // 2]} if len(ks) > 2 else set()))
            out["ks"] = ks
            with np.errstate(over="ignore", under="ignore"):  # dp-accounting's exp(eps) at large eps is inf: fine
                plds = [to_pld(ch, x=a, x_prime=b, value_discretization_interval=PLD_VDI) for a, b in pairs]
                comps = {k: _CappedEps(PLDComposition(ch, k, [(None, p if k == 1 else p.self_compose(k))
                                                               for p in plds])) for k in ks}
            out.update(route="dp-accounting", kind="upper", pairs=len(pairs),
                       how=(f"dp-accounting privacy loss distributions of the {len(pairs)} distinct input pairs "
                            "in range (pairs with the same rows up to a shift or a reflection share one), "
                            f"pessimistic (losses rounded up to multiples of {PLD_VDI:g}), each composed k times, "
                            "maximum over pairs: upper bounds up to dp-accounting's tail truncation (1e-15)"))
    rows = []
    for k in out["ks"]:
        row = {"k": k}
        row["basic_delta"] = Num(f"composition[{k}].basic_delta", min(1.0, k * delta_star), "upper",
                                 "basic composition: min(1, k delta_star_upper)")
        if comps is not None:
            c = comps[k]
            if hasattr(c, "delta_error"):
                row["delta_error"] = float(c.delta_error(k * eps))
            if hasattr(c, "infinity_mass"):
                row["inf_mass"] = Num(f"composition[{k}].infinity_mass", float(c.infinity_mass), out["kind"],
                                      "1 - (1 - p_inf)^k: the delta no eps removes (p_inf: one report's support "
                                      "leakage at the worst separation)")
            row["eps_at_kdelta"] = _eps_or_reason(c, min(1.0, k * delta_star), f"composition[{k}].eps_kdelta",
                                                  out["kind"])
            if delta_target is not None:
                row["eps_at_target"] = _eps_or_reason(c, float(delta_target), f"composition[{k}].eps_target",
                                                      out["kind"])
        rows.append(row)
    out["rows"] = rows
    if comps is None:
        out["plot"] = None
        return out
    points = 161 if out["route"] == "lattice" else 41  # dp-accounting answers each eps in a Python loop
    out["plot"], at_keps = _composition_plot(comps, rows, eps, delta_star, points)
    for row in rows:
        k = row["k"]
        # the lattice is cheap per call: ask it directly, as a user of compose() would
        value = at_keps[k] if k in at_keps and out["route"] != "lattice" else float(comps[k].delta(k * eps))
        row["delta_at_keps"] = Num(f"composition[{k}].delta", value, out["kind"], out["how"])
    return out


def _eps_or_reason(c, delta: float, key: str, kind: str):
    try:
        e = float(c.epsilon(delta))
    except InfeasibleError as exc:
        return (None, str(exc).split(":")[0] + ": no eps reaches it")
    how = ("smallest eps with delta_k(eps) <= the delta of its column, from the same composition "
           "(lattice: Newton on the composed profile, to about 1e-13 relative, not certified; "
           "dp-accounting: its pessimistic epsilon)")
    return (Num(key, e, kind, how), None)


def _composition_plot(comps, rows, eps: float, delta_star: float, points: int):
    """The profiles of 1, K and a middle number of reports on one eps grid; also ``delta_k(k eps)`` of those
    ``k`` (evaluated with the grid: dp-accounting's cost is per call, not per eps)."""
    ks = [r["k"] for r in rows]
    shown = sorted({ks[0], ks[-1]} | ({ks[len(ks) // 2]} if len(ks) > 2 else set()))
    K = ks[-1]
    reach = []
    for r in rows:
        if r["k"] in shown:
            num, _ = r["eps_at_kdelta"]
            reach.append(K * eps if num is None else num.value)
    far = max(reach + [eps])
    e_max = max(1.0, 1.05 * (K * eps if K * eps <= 4.0 * far else 3.0 * far))
    grid = np.linspace(0.0, e_max, points)
    curves, at_keps = [], {}
    for k in shown:
        at = np.searchsorted(grid, k * eps)  # dp-accounting wants the eps sorted
        values = np.asarray(comps[k].delta(np.insert(grid, at, k * eps)), dtype=float)
        at_keps[k] = float(values[at])
        curves.append((k, np.minimum(np.delete(values, at), 1.0)))
    basic = [(k, k * eps, min(1.0, k * delta_star)) for k in shown if k * eps <= e_max]
    return {"eps": grid, "curves": curves, "basic": basic}, at_keps


# -- utility ------------------------------------------------------------------------------------------


def utility_channel(spec, lo_hi):
    """The channel the data sees on ``lo_hi``: the spec's own, or the mechanism's extended windows there."""
    if spec.domain is not None:
        return spec.channel()
    return spec.mechanism.to_channel(lo_hi, "extended")


def check_utility_size(spec, lo_hi) -> None:
    """``ValueError`` naming the domain when its channel would exceed :data:`MAX_UTILITY_ENTRIES`."""
    if lo_hi is None:
        return
    lo, hi = check_domain(lo_hi)
    k = hi - lo + 1
    if k * spec.s > MAX_UTILITY_ENTRIES:
        raise ValueError(f"domain {lo}:{hi} has {k:,} values; with s = {spec.s} its channel would hold "
                         f"{k * spec.s:,} entries, more than the report's limit of {MAX_UTILITY_ENTRIES:,} "
                         "(use a smaller domain)")


def _utility_section(spec, lo_hi, n: int, x0: int) -> dict:
    m = spec.mechanism
    out = {"n": n, "x0": x0}
    if spec.domain is None:
        out["r1"] = Num("utility.r1", float(m.r1), "exact", "R1 = 2 sum_j j w(j) / C_t (Propositions 1 and 3)")
        out["r2"] = Num("utility.r2", float(m.r2), "exact", "R2 = 2 sum_j j^2 w(j) / C_t (Propositions 1 and 3)")
        labels = m.support(x0)
        probs = np.asarray(m.pmf(labels, x0), dtype=float)
    else:
        ch = spec.channel()
        how = "E|Y - x|^k per input (the channel's rows), averaged uniformly over the domain"
        out["r1"] = Num("utility.r1", float(np.mean(ch.distortion(1))), "exact", how)
        out["r2"] = Num("utility.r2", float(np.mean(ch.distortion(2))), "exact", how)
        labels, probs = ch.row(x0)
    out["pmf"], out["pmf_note"] = _pmf_for_plot(np.asarray(labels, dtype=np.int64), np.asarray(probs, dtype=float))
    if not _is_clipped(spec):
        # unbiased reports (E[Y | x] = x, docs/paper.md "Distortion and bias"): Var(mean) = (Var_p(x) + R2) / n
        out["mean_se_noise"] = Num("utility.mean_se_noise", math.sqrt(float(m.r2) / n), "exact",
                                   "the report mean is unbiased; the noise adds R2 / n to its variance, so this is "
                                   "sqrt(R2 / n) (whatever the inputs)")
        if lo_hi is not None:
            k = lo_hi[1] - lo_hi[0] + 1
            var_u = (k * k - 1) / 12.0
            out["mean_se_uniform"] = Num("utility.mean_se_uniform", math.sqrt((var_u + float(m.r2)) / n), "exact",
                                         "sqrt((Var(x) + R2) / n) with Var(x) = (k^2 - 1) / 12 for inputs uniform "
                                         "on the k values of the domain")
    if lo_hi is not None:
        out.update(_frequency_errors(spec, lo_hi, n))
    return out


def _factor(M):
    """Sparse LU of the symmetric positive semidefinite ``M``, or ``None`` when ``M`` is singular to working
    precision (1-norm condition number above 1e12, estimated with the factors: Higham and Tisseur's
    block 1-norm estimator)."""
    try:
        lu = spla.splu(M)
    except RuntimeError:  # exactly singular
        return None
    inv = spla.LinearOperator(M.shape, matvec=lu.solve, rmatvec=lu.solve, dtype=float)
    cond = float(spla.onenormest(inv)) * float(abs(M).sum(axis=0).max())
    return lu if np.isfinite(cond) and cond <= 1e12 else None


def _pmf_for_plot(labels, probs):
    """At most ``_PMF_POINTS`` points to draw: the outputs with at least 1e-4 of the largest probability,
    averaged over bins of neighbouring outputs when there are still too many (the caption says so)."""
    if labels.size <= _PMF_POINTS:
        return (labels, probs), None
    keep = np.flatnonzero(probs >= 1e-4 * probs.max())
    labels, probs = labels[keep[0]:keep[-1] + 1], probs[keep[0]:keep[-1] + 1]
    note = "outputs with probability below 10^-4 of the largest are not drawn"
    if labels.size > _PMF_POINTS:
        w = -(-labels.size // _PMF_POINTS)
        m = labels.size // w * w
        labels = labels[:m].reshape(-1, w).mean(axis=1)
        probs = probs[:m].reshape(-1, w).mean(axis=1)
        note += f"; each point is the average probability of {w} neighbouring outputs"
    return (labels, probs), note


def _restricted(ch, lo_hi):
    """``Q`` (k x m, sparse) on the inputs ``lo..hi`` and the outputs they reach, and the input values."""
    lo, hi = lo_hi
    inputs = np.asarray(ch.inputs, dtype=np.int64)
    order = np.argsort(inputs, kind="stable")
    want = np.arange(lo, hi + 1, dtype=np.int64)
    rows = order[np.searchsorted(inputs[order], want)]
    Q = sp.csr_array(ch.matrix)[rows]
    keep = np.flatnonzero(np.asarray(abs(Q).sum(axis=0)).ravel() > 0)
    return sp.csr_array(Q[:, keep]), want


def _frequency_errors(spec, lo_hi, n: int) -> dict:
    r"""Expected errors of frequency (and, clipped, mean) estimates from ``n`` reports, inputs uniform.

    With ``f = c / n`` the report frequencies, ``E f = q = Q^T p`` and
    ``Cov f = (diag q - q q^T) / n``.  The least-squares inversion ``A f`` with
    ``A = (Q^T)^+`` (``estimate_frequencies(method="inversion")`` before its
    projection onto the simplex) is unbiased when ``Q^T`` has full column
    rank (``A q = p``), and

    .. math::  E\|A f - p\|^2 = (\sum_y q_y \|A e_y\|^2 - \|p\|^2) / n

    exactly, with ``\|A e_y\|^2 = \sum_j U_{yj}^2 / s_j^2`` from the SVD
    ``Q^T = U S V^T``; the projection onto the simplex (which contains ``p``)
    can only shorten the error, so this bounds the projected estimator from
    above.  The maximum-likelihood (EM) estimate has asymptotic covariance
    ``(I^{-1} - p p^T) / n`` with ``I = Q diag(1/q) Q^T`` (``I p = 1``: the
    constrained information), so ``E\|p̂ - p\|^2 \approx (tr I^{-1} - \|p\|^2) / n``
    and its mean ``u^T p̂`` (``u = x - mean``) has variance ``u^T I^{-1} u / n``:
    asymptotic estimates.  ``I`` is taken apart by ``eigh``; eigenvalues below
    ``1e-12`` of the largest are null to working precision, and then the
    frequencies (and a mean with a part along them) are not identified: no
    number is given.  Up to :data:`DENSE_UTILITY_MAX` values the algebra is
    dense and the traces exact; above, sparse LU and Hutchinson's trace
    estimate (Rademacher probes).
    """
    ch = utility_channel(spec, lo_hi)
    Q, xs = _restricted(ch, lo_hi)
    k = Q.shape[0]
    p = np.full(k, 1.0 / k)
    q = Q.T @ p
    pp = float(p @ p)
    out = {"k": k}
    u = xs.astype(float) - float(p @ xs)
    if k == 1:
        out["freq_note"] = "a one-value domain: the frequency is 1, exactly, with no error"
        return out
    tr_inv = tr_fisher = uIu = None
    if k <= DENSE_UTILITY_MAX:
        Qd = Q.toarray()
        lam, V = np.linalg.eigh((Qd / q) @ Qd.T)
        null = lam <= 1e-12 * lam[-1]
        c = V.T @ u
        if not null.any():
            U, sv, _ = np.linalg.svd(Qd.T, full_matrices=False)
            tr_inv = float(np.sum(q * np.sum((U / sv) ** 2, axis=1)))
            tr_fisher = float(np.sum(1.0 / lam))
        if np.sum(c[null] ** 2) <= 1e-12 * float(u @ u):  # the mean lies (to working precision) off the null space
            uIu = float(np.sum(c[~null] ** 2 / lam[~null]))
        kind, how_tr = "exact", "dense linear algebra"
    else:
        G = sp.csc_array(Q @ Q.T)
        I = sp.csc_array((Q / q) @ Q.T)
        lu_g, lu_i = _factor(G), _factor(I)
        if lu_i is not None:
            rng = np.random.default_rng(20240601)  # a simulation seed (not privacy): the same page for the same input
            Z = rng.choice(np.array([-1.0, 1.0]), size=(k, HUTCHINSON_PROBES))
            if lu_g is not None:
                V = Q.T @ lu_g.solve(Z)
                t_inv = np.sum(q[:, None] * V * V, axis=0)
                tr_inv = float(t_inv.mean())
            t_fis = np.sum(Z * lu_i.solve(Z), axis=0)
            tr_fisher = float(t_fis.mean())
            uIu = float(u @ lu_i.solve(u))
        kind, how_tr = "estimate", f"Hutchinson's trace estimate ({HUTCHINSON_PROBES} Rademacher probes)"
    if tr_inv is None or tr_fisher is None or not (math.isfinite(tr_inv) and math.isfinite(tr_fisher)):
        out["freq_note"] = ("the channel does not identify the frequencies to working precision (its Fisher "
                            "information is singular): no unbiased estimator has a finite error, and EM's error "
                            "depends on how it is regularized (method='ems' smooths)")
    else:
        mse_inv = max(tr_inv - pp, 0.0) / n
        mse_mle = max(tr_fisher - pp, 0.0) / n
        how_inv = (f"least-squares inversion (method='inversion') before its projection onto the simplex: "
                   f"(sum_y q_y |A e_y|^2 - |p|^2) / n, A = (Q^T)^+, inputs uniform ({how_tr}); the projected "
                   "estimate's error is at most this")
        how_mle = (f"maximum likelihood (EM), asymptotic: (tr I^-1 - |p|^2) / n with I = Q diag(1/q) Q^T, inputs "
                   f"uniform ({how_tr})")
        out["freq_mse_inversion"] = Num("utility.freq_mse_inversion", mse_inv, kind, how_inv)
        out["freq_rmse_inversion"] = Num("utility.freq_rmse_inversion", math.sqrt(mse_inv / k), kind,
                                         "sqrt of the above / k: root mean square error per value")
        out["freq_mse_mle"] = Num("utility.freq_mse_mle", mse_mle, "estimate", how_mle)
        out["freq_rmse_mle"] = Num("utility.freq_rmse_mle", math.sqrt(mse_mle / k), "estimate",
                                   "sqrt of the above / k: root mean square error per value")
    if _is_clipped(spec):
        if uIu is None or not math.isfinite(uIu):
            out["mean_note"] = ("the channel does not identify the mean to working precision; estimate_mean then "
                                "gives a ridge-regularized or range-bound standard error")
        else:
            out["mean_se_mle"] = Num("utility.mean_se_mle", math.sqrt(max(uIu, 0.0) / n), "estimate",
                                     "clipped windows bias the report mean, so estimate_mean uses the EM estimate; "
                                     "its asymptotic standard error sqrt(u^T I^-1 u / n), u = x - mean, inputs "
                                     "uniform")
    return out


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
