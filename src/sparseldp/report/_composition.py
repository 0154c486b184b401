"""The composition section of the privacy report: ``k`` reports of one person.

Mechanisms on Z and extended windows compose exactly on the privacy-loss lattice
(:func:`sparseldp.composition.compose`); a clipped channel composes through
dp-accounting's privacy loss distributions of its distinct input pairs
(:func:`_distinct_pairs`), or by basic composition alone beyond
:data:`MAX_PLD_REPORTS` reports or :data:`MAX_PLD_PAIRS` pairs.
"""

from __future__ import annotations

import numpy as np

from ..composition import PLDComposition, compose, spec_route
from ..composition.pld import _pld_or_none
from ..errors import InfeasibleError
from ._common import Num

__all__ = ["MAX_PLD_PAIRS", "MAX_PLD_REPORTS", "PLD_VDI", "MAX_COMPOSE_POINTS", "composition_ks"]

#: Distinct input pairs of a clipped channel composed through dp-accounting; beyond, basic composition only.
MAX_PLD_PAIRS = 24
#: Most reports composed through dp-accounting (its k-fold PLD grows with k); beyond, basic composition only.
MAX_PLD_REPORTS = 50
#: dp-accounting's loss grid for the clipped-channel route (losses rounded up: deltas stay upper bounds).
PLD_VDI = 1e-3
#: Largest lattice of ``k`` composed reports (``k (s - 1) + 1`` points per FFT).
MAX_COMPOSE_POINTS = 20_000_000


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


def _composition_section(spec, eps: float, H: int, delta_target, K: int, delta_star: float,
                         sampler_delta: float | None = None) -> dict:
    ks = composition_ks(K)
    m = spec.mechanism  # the report covers the two families (a baseline spec has no mechanism on Z)
    route = spec_route(spec, H)  # the rule account --reports and privatize follow
    H_eff = route.H
    out = {"ks": ks, "K": K}
    if H_eff < 1:
        comps = {k: _NoPairs(k) for k in ks}
        out.update(route="none", kind="exact", how="no two inputs of the domain are within H of each other")
    elif route.lattice:
        comps = {k: compose(m, k, H=H_eff) for k in ks}
        out.update(route="lattice", kind="estimate",
                   how=("exact composition on the privacy-loss lattice (sparseldp.composition.compose: the k-fold "
                        "loss distribution by FFT; the worst separation min(H, 2t + 1) is the worst case for every "
                        "k); computed in floating point, with an FFT error-model bound (not outward rounded) "
                        "shown beside each delta" + ("" if spec.domain is None else
                                                     "; the extended-window channel's rows are the mechanism on Z "
                                                     f"and its pairs are at most {H_eff} apart")))
    else:  # clipped windows: no shared lattice, but few distinct pairs
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
                # None for disjoint rows (delta = 1; the page says so rather than failing)
                plds = [_pld_or_none(ch, x=a, x_prime=b, value_discretization_interval=PLD_VDI) for a, b in pairs]
                comps = {k: _CappedEps(PLDComposition(ch, k, [(None, p if k == 1 or p is None else p.self_compose(k))
                                                               for p in plds])) for k in ks}
            out.update(route="dp-accounting", kind="upper", pairs=len(pairs),
                       how=(f"dp-accounting privacy loss distributions of the {len(pairs)} distinct input pairs "
                            "in range (pairs with the same rows up to a shift or a reflection share one), "
                            f"pessimistic (losses rounded up to multiples of {PLD_VDI:g}), each composed k times, "
                            "maximum over pairs: upper bounds up to dp-accounting's tail truncation (1e-15)"))
    rows = []
    for k in out["ks"]:
        row = {"k": k}
        # basic composition bounds what is actually drawn: the larger of the mechanism's bound and the
        # realized sampler's certificate (a few 1e-16 above it), when that was computed
        if sampler_delta is None:
            row["basic_delta"] = Num(f"composition[{k}].basic_delta", min(1.0, k * delta_star), "upper",
                                     "basic composition: min(1, k delta_star_upper)")
        else:
            row["basic_delta"] = Num(f"composition[{k}].basic_delta", min(1.0, k * max(delta_star, sampler_delta)),
                                     "upper", "basic composition: min(1, k delta), delta the larger of "
                                     "delta_star_upper and the realized sampler's certificate")
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
