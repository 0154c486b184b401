"""Coverage of nominal 95 % bootstrap intervals (sparseldp.estimation.intervals.bootstrap).

Setting: the Laplace mechanism designed by ``sparseldp.design("laplace", eps=1,
delta=1e-6, H=5)`` (SparseLaplace(lam=0.2, s=137): a window wider than the
domain), true values on 0..99, n = 10^5 reports, three population shapes:

* smooth: one discretized normal (mean 40, sd 12);
* bimodal: 0.6 N(25, 6) + 0.4 N(70, 8);
* spiky: atoms 0.3, 0.25, 0.2, 0.15 at 10, 35, 60, 85 over a 0.1 uniform floor.

Each repetition draws the true values from the population (seeded), privatizes
them, fits with ``method`` (``"auto"``, the default, ``"ems"`` and ``"em"``), bootstraps with B = 200
replicates (``"auto-robust"``: fits with ``"auto"`` and bootstraps with ``robust=True``, the hull of
auto's intervals and the MLE's; its rows add ``own span``, auto's own interval on the same
repetitions), and checks whether the interval contains the population value of:
the mean, the median and the 90th percentile (both as a domain value, the
default, and interpolated by the grouped-data rule), P(30 <= X <= 50), the
variance and the CDF at 60; and every frequency (row "each value": the
coverage averaged over the values, that of the worst value and where it is,
and how many values are covered in fewer than 90% of the repetitions).  The four
interval kinds are scored ("span" = the normal interval of the estimate stretched
to its bias-corrected value, the default; "hull" = the smallest interval holding
the last two; "basic" = reflected percentiles; "percentile"; for the quantiles,
both kinds, the points whose CDF interval of that kind contains ``q``).
Rows: ``coverage <method> <shape> <stat>`` with ``median_s`` the median time of
one bootstrap (B = 200) and the note ``span <cov> (w <width>) | hull ... | basic ... | pct ...``
(coverage in %, mean interval width).  Target: 93-97 %.

Repetitions: ``REPS[method]`` (200 for auto and EMS; 40 for auto-profile, 200 with ``SPARSELDP_BENCH_FULL=1``,
whose rows time the likelihood-ratio intervals alone; 8 for EM and auto-robust, 20 with
``SPARSELDP_BENCH_FULL=1``: an EM bootstrap costs a few seconds, 1.9-2.4 s at B = 200
after batching the refits).  A binomial 95 % band for the coverage
estimate of a correct 95 % interval over R repetitions is about ``+- 2 sqrt(0.95 * 0.05 / R)`` (+-3.1 points
at R = 200).  Run alone: ``python benchmarks/bench_coverage.py [auto|ems|em|auto-robust|auto-profile] [reps]``.
``auto-profile`` scores the profile-likelihood intervals (``est.profile(mechanism)``, kind ``profile``; every
value's only with ``SPARSELDP_COVERAGE_PROFILE_EACH=1``).
Set ``OPENBLAS_NUM_THREADS=1`` on a shared 2-core machine: the batched EMS refit
(200 x 100 by 100 x 236 products) was 30x slower with threaded BLAS under load.
``SPARSELDP_COVERAGE_FAMILY=gaussian`` runs the same with ``design("gaussian", eps=1,
delta=1e-6, H=5)`` (SparseGaussian(sigma=21.1, s=351): a kernel far wider than the
Laplace one), a second setting for the choice of the default interval.
``SPARSELDP_COVERAGE_FEWER=50,100`` also scores the span on the first 50 and the first 100 of each
bootstrap's B replicates (kinds ``span B=50``, ``span B=100``): what fewer replicates cost, on the same
repetitions and fits (the evidence for ``bootstrap``'s default B = 100).
``SPARSELDP_COVERAGE_SHAPES=real`` replaces the three shapes by three real columns
(``bench_real.columns()``, which needs the bench extra's statsmodels): doctor visits
(0..77, most at 0-2, a long tail), years of education (0..25, a spike at 12) and the
health index (4..100, heaped: every fourth value carries about 4%, its neighbours
0.1-2%), each on its own range; the range query
is then P(q25 <= X <= q75) and the CDF is taken at the median (the truth's values).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import warnings

import numpy as np

K = 100
N = 10**5
B = 200
# `make bench` runs EM with 8 repetitions (a rough check, +-15 points); SPARSELDP_BENCH_FULL=1 runs 20
REPS = {"auto": 200, "ems": 200, "em": 20 if os.environ.get("SPARSELDP_BENCH_FULL") else 8}
REPS["auto-robust"] = REPS["em"]  # the MLE's fit and bootstrap on top of auto's
# likelihood-ratio intervals (auto's fit, then the MLE and a few tilted fits per end; no bootstrap)
REPS["auto-profile"] = 200 if os.environ.get("SPARSELDP_BENCH_FULL") else 40
# auto-profile: also every value's interval (2 k ends, 2-3 s a repetition on 100 values)
PROFILE_EACH = bool(os.environ.get("SPARSELDP_COVERAGE_PROFILE_EACH"))
SYNTHETIC = ("smooth", "bimodal", "spiky")
# real columns (bench_real.columns(): the empirical distributions of survey columns), on their own ranges
REAL = ("doctor visits (RAND)", "education years (RAND)", "health index (RAND)")
SHAPES = REAL if os.environ.get("SPARSELDP_COVERAGE_SHAPES") == "real" else SYNTHETIC
KINDS = ("span", "hull", "basic", "percentile")
FAMILY = os.environ.get("SPARSELDP_COVERAGE_FAMILY", "laplace")
# SPARSELDP_COVERAGE_FEWER=50,100: also score the span on the first 50 and the first 100 of the B replicates
# (kinds "span B=50", ...): the same repetitions and fits, so the rows show what fewer replicates cost
FEWER = tuple(int(b) for b in os.environ.get("SPARSELDP_COVERAGE_FEWER", "").split(",") if b.strip())
STATS = (("mean", {}), ("median", {"q": 0.5}), ("p90", {"q": 0.9}), ("range30-50", {"a": 30, "b": 50}),
         ("median-interp", {"q": 0.5, "method": "interpolated"}),
         ("p90-interp", {"q": 0.9, "method": "interpolated"}), ("var", {}), ("cdf60", {"x": 60}))


def _stats(shape: str, p: np.ndarray) -> tuple:
    """The statistics scored: :data:`STATS` on the synthetic shapes; on a real column the range query
    is P(q25 <= X <= q75) and the CDF is taken at the median (values of the truth, 0-based)."""
    if shape in SYNTHETIC:
        return STATS
    from sparseldp.estimation import stats

    v = np.arange(p.size)
    a, b, x = (int(stats.quantile(p, q, v)) for q in (0.25, 0.75, 0.5))
    return tuple((f"range{a}-{b}", {"a": a, "b": b}) if name.startswith("range") else
                 (f"cdf{x}", {"x": x}) if name.startswith("cdf") else (name, kw) for name, kw in STATS)


def population(shape: str) -> np.ndarray:
    """The true distribution on ``0..k-1``: ``k = K`` for the synthetic shapes, a real column's range
    (shifted to start at 0: the mechanisms are shift-invariant) for the real ones."""
    if shape in REAL:
        import bench_real

        return bench_real.columns()[shape][1]
    v = np.arange(K, dtype=float)
    if shape == "smooth":
        p = np.exp(-0.5 * ((v - 40) / 12) ** 2)
    elif shape == "bimodal":
        p = 0.6 * np.exp(-0.5 * ((v - 25) / 6) ** 2) / 6 + 0.4 * np.exp(-0.5 * ((v - 70) / 8) ** 2) / 8
    else:
        p = np.full(K, 0.1 / K)
        p[[10, 35, 60, 85]] += [0.3, 0.25, 0.2, 0.15]
    return p / p.sum()


def _truth(p, stat_list=STATS):
    from sparseldp.estimation import stats

    v = np.arange(p.size)
    out = {}
    for name, kw in stat_list:
        stat = _stat_of(name)
        if stat == "quantile":
            out[name] = stats.quantile(p, kw["q"], v, method=kw.get("method", "inverted_cdf"))
        elif stat == "range":
            out[name] = stats.range_prob(p, kw["a"], kw["b"], v)
        elif stat == "cdf":
            out[name] = stats.cdf(p, kw["x"], v)
        else:
            out[name] = getattr(stats, stat)(p, v)
    return out


def _stat_of(name: str) -> str:
    """The Bootstrap.interval statistic a row name scores."""
    return name if name in ("mean", "var") else "cdf" if name.startswith("cdf") else \
        "range" if name.startswith("range") else "quantile"


def draws(method: str, shape: str, seed: int = 2026) -> np.random.Generator:
    """The generator of ``coverage``'s repetitions for ``method`` on ``shape`` (a study replays them with it)."""
    return np.random.default_rng([seed, SHAPES.index(shape), len(method)])


def coverage(method: str, shape: str, reps: int, seed: int = 2026):
    """Per statistic: hits and widths for both kinds, and bootstrap times."""
    import sparseldp as sl
    from sparseldp.estimation import estimate_frequencies
    from sparseldp.estimation.intervals import bootstrap
    from sparseldp.sampling import sample

    mech = sl.design(FAMILY, eps=1, delta=1e-6, H=5).mechanism
    p = population(shape)
    stat_list = _stats(shape, p)
    truth = _truth(p, stat_list)
    gen = draws(method, shape, seed)
    robust = method.endswith("-robust")
    profiled = method.endswith("-profile")
    kinds = ("profile",) if profiled else KINDS + (("own",) if robust else ()) + tuple(
        f"span B={b}" for b in FEWER if b < B)
    res = {name: {kind: [] for kind in kinds} for name, _ in (*stat_list, ("each value", {}))}
    times = []
    for _ in range(reps):
        x = gen.choice(p.size, size=N, p=p)
        y = sample(mech, x, rng=gen)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = estimate_frequencies(y, mech, domain=(0, p.size - 1),
                                       method=method.removesuffix("-robust").removesuffix("-profile"),
                                       return_info=True)
            t0 = time.perf_counter()
            if profiled:
                _score_profile(est.profile(mech), stat_list, truth, p, res)
            else:
                bs = bootstrap(est, mech, B=B, rng=gen, robust=robust)
            times.append(time.perf_counter() - t0)  # the intervals' own time: the bootstrap, or the profile's
        if not profiled:
            _score_bootstrap(bs, kinds, stat_list, truth, p, res)
    return res, times


def _score_profile(prof, stat_list, truth, p, res):
    """The likelihood-ratio intervals (no bootstrap) of each statistic, and with ``PROFILE_EACH`` every value's."""
    for name, kw in stat_list:
        lo, hi = prof.interval(_stat_of(name), 0.95, **kw)
        res[name]["profile"].append((lo <= truth[name] <= hi, hi - lo))
    if PROFILE_EACH:
        lo, hi = prof.interval("p", 0.95)
        res["each value"]["profile"].append(((lo <= p) & (p <= hi), hi - lo))


def _score_bootstrap(bs, kinds, stat_list, truth, p, res):
    """The bootstrap's intervals of each kind: its own kinds, ``own`` (a robust bootstrap without its
    reference) and ``span B=b`` (the span on the first ``b`` replicates)."""
    own = dataclasses.replace(bs, reference=None)
    fewer = {f"span B={b}": dataclasses.replace(
        bs, replicates=bs.replicates[:b],
        reference=None if bs.reference is None else dataclasses.replace(bs.reference,
                                                                        replicates=bs.reference.replicates[:b]))
        for b in FEWER if b < B}

    def which(kind):
        return (own, "span") if kind == "own" else (fewer[kind], "span") if kind in fewer else (bs, kind)

    for name, kw in stat_list:
        for kind in kinds:
            b, k = which(kind)
            lo, hi = b.interval(_stat_of(name), 0.95, kind=k, **kw)
            res[name][kind].append((lo <= truth[name] <= hi, hi - lo))
    for kind in kinds:  # every frequency: which values are covered (scored over values below)
        b, k = which(kind)
        lo, hi = b.interval("p", 0.95, kind=k)
        res["each value"][kind].append(((lo <= p) & (p <= hi), hi - lo))


def _rows(method, shape, reps):
    res, times = coverage(method, shape, reps)
    rows = []
    for name in res:  # the statistics in the order scored, then "each value"
        parts = []
        for kind in res[name]:
            tag = "pct" if kind == "percentile" else "own span" if kind == "own" else kind
            if not res[name][kind]:  # the profile's per-value intervals only on request
                continue
            hits = np.array([h for h, _ in res[name][kind]], dtype=float)
            widths = np.array([w for _, w in res[name][kind]])
            worst = ""
            if hits.ndim == 2:  # per value: the worst one (where) and how many fall below 90%
                per = hits.mean(axis=0)
                worst = (f", worst value {100 * per.min():.1f}% at x = {int(per.argmin())}, "
                         f"{int((per < 0.9).sum())} below 90%")
            parts.append(f"{tag} {100 * hits.mean():5.1f}% (w {widths.mean():.4g}{worst})")
        label = "" if FAMILY == "laplace" else f" {FAMILY}"
        if parts:
            rows.append({"name": f"coverage{label} {method} {shape} {name}", "median_s": float(np.median(times)),
                         "note": " | ".join(parts) + f"  [R={reps}" + ("]" if method.endswith("-profile") else
                                                                       f", B={B}]")})
    return rows


def run(methods=("auto", "ems", "em", "auto-robust", "auto-profile"), reps=None) -> list[dict]:
    rows = []
    for method in methods:
        for shape in SHAPES:
            rows += _rows(method, shape, REPS[method] if reps is None else reps)
    return rows


if __name__ == "__main__":
    ms = tuple(a for a in sys.argv[1:] if not a.isdigit()) or ("auto", "ems", "em", "auto-robust", "auto-profile")
    r = next((int(a) for a in sys.argv[1:] if a.isdigit()), None)
    for m in ms:
        for shape in SHAPES:
            for row in _rows(m, shape, REPS[m] if r is None else r):
                print(f"{row['name']:<34} {row['median_s']:8.3f} s  {row['note']}", flush=True)
