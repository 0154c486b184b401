"""Estimation speed and accuracy: 10^8 reports over a domain of 10^4 values.

Setting: SparseLaplace(lam=0.5, s=101) on Z, true values on 0..9999 drawn from
sparseldp.compare.default_population (seeded simulation), 10^8 reports.  The
reports are generated in 10 chunks of 10^7 (800 MB of int64 in all, kept in
memory as a list of chunks; generation is not timed).

Rows (medians of repeated runs in this process):
* count: one chunked np.bincount pass over the 10^8 reports (ReportCounts.from_reports).
* EM: estimate_frequencies_full(method="em") on the counts (channel build + certified MLE, tol 1e-2 nats).
* end-to-end = count + EM.
* auto (the default) on the same counts, and end-to-end with intervals: count + auto + a parametric
  bootstrap of B = 50 and B = 200 replicates (one run each); the same for a harder truth (a wide
  bump, a narrow one and a 10 % atom), whose counts are drawn directly from Q^T p.
* window 275: the harder truth under design("laplace", eps=1, delta=1e-6, H=10): auto, the
  bootstrap B = 50 as one batch vs in blocks over threads (same seed, same run), B = 200 with its
  refits in single precision (the default) vs double (same seed, same run); then the likelihood-ratio
  intervals (``est.profile``) of the mean, a range query and the CDF at the atom, one run.
* 1,000 values at (eps, delta, H) = (1, 1e-6, 10): auto and its bootstrap (B = 200) for Laplace
  (window 275) and Gaussian (window 695 as designed on 2026-11-29, 701 in earlier runs: a dense channel), on
  two bumps and on two atoms.
* banded Gram by FFT: 1,000 values under the Laplace design (1, 1e-6, 5) (window 137, a sparse channel whose
  EM products stay sparse), 10^5 reports: the MLE and the LR intervals of the CLI's default statistics with the
  interior point's Gram by FFT against sparse products, same counts, same run.
* fewer reports than values: auto on 2 x 10^4 and 10^5 values, 10^4 reports (SparseLaplace s=7).
* small dense channel: 100 values under the Gaussian design at (1, 1e-6, 10) (window 695), 10^6
  reports of the battery's smooth and spiky truths: auto, then its bootstrap (B = 200; the EM to its
  20,000-step cap on each replicate) in single precision (the default) and double, one run each.
* sparse MLE: method="em" on 10^4 values, window 275, 10^7 reports of two atoms (the active-set
  Newton; its bootstrap B = 20) and of the same atoms over a 2 % floor (not sparse: the full solver).
* EM step, sparse vs dense: one EM step with the banded CSR channel vs a plain dense
  k x m numpy matrix (k = 10^4, m = 10^4 + 100: 808 MB) on the same counts; the ratio is
  dense / sparse.  "dense EM, same steps" extrapolates the dense step to the number of EM
  steps our solver used (a plain dense EM would need at least that many).
* accuracy: TV error (to the true histogram) of the default estimate vs EM run much
  further (tol = 1e-12 per report, i.e. 1e-4 nats here; cap 100,000 steps), same counts;
  plus a small well-conditioned case (k = 100) over 5 seeds where full convergence is cheap.
* EMS (EM with smoothing, method="ems") on the same 10^8-report counts: time and TV error,
  ratio = TV(EMS) / TV(EM).
* wide window (the demo's setting): ages 0..99, SparseLaplace(lam=0.2, s=137) (window wider
  than the domain), 10^5 reports of compare.default_population, 5 seeds: median TV of EM
  (the MLE), EMS and inversion; ratio = TV(EM) / TV(EMS).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from _timing import median_time

K = 10_000
N = 10**8
CHUNK = 10**7


def _setup():
    from sparseldp import SparseLaplace
    from sparseldp.compare import default_population
    from sparseldp.sampling import sample

    mech = SparseLaplace(lam=0.5, s=101)
    pop = default_population((0, K - 1))
    gen = np.random.default_rng(2026)
    counts = gen.multinomial(N, pop)
    truth = counts / N
    x_all = np.repeat(np.arange(K, dtype=np.int64), counts)
    gen.shuffle(x_all)
    chunks = [sample(mech, x_all[i:i + CHUNK], rng=gen) for i in range(0, N, CHUNK)]
    del x_all
    return mech, truth, chunks


def run() -> list[dict]:
    from sparseldp.estimation import ConvergenceWarning, ReportCounts, _model, estimate_frequencies_full

    rows = []
    mech, truth, chunks = _setup()
    rc = None

    def count():
        nonlocal rc
        rc = ReportCounts.from_reports(chunks)

    t_count = median_time(count, repeat=3, warmup=0)
    assert rc.n == N
    del chunks
    rows.append({"name": "count 1e8 reports (chunked bincount)", "median_s": t_count,
                 "note": "10 chunks of 1e7 int64 in memory (800 MB); one pass"})

    est = None

    def em():
        nonlocal est
        est = estimate_frequencies_full(rc, mech, domain=(0, K - 1), method="em")

    t_em = median_time(em, repeat=3, warmup=0)
    tv_default = 0.5 * float(np.abs(est.p - truth).sum())
    rows.append({"name": "EM on counts (k=1e4, s=101), default tol", "median_s": t_em,
                 "note": f"{est.iterations} EM + {est.newton_steps} Newton steps, converged={est.converged}, "
                         f"gap {est.gap:.3g} nats"})
    rows.append({"name": "end-to-end: count + EM", "median_s": t_count + t_em, "note": "sum of the two medians"})

    # the default: auto (path selection on 5 folds, FFT products), then bootstrap intervals
    auto = None

    def run_auto():
        nonlocal auto
        auto = estimate_frequencies_full(rc, mech, domain=(0, K - 1), method="auto")

    t_auto = median_time(run_auto, repeat=3, warmup=0)
    tv_auto = 0.5 * float(np.abs(auto.p - truth).sum())
    rows.append({"name": "auto on counts (k=1e4, s=101)", "median_s": t_auto,
                 "note": f"chose {auto.regularization}; TV {tv_auto:.4f}"})
    for B in (50, 200):
        t0 = time.perf_counter()
        bs = auto.bootstrap(mech, B=B, rng=0)
        t_bs = time.perf_counter() - t0
        lo, hi = auto.mean(ci=bs)[1]
        rows.append({"name": f"end-to-end with intervals: count + auto + bootstrap B={B}",
                     "median_s": t_count + t_auto + t_bs,
                     "note": f"bootstrap {t_bs:.1f} s (one run); mean 95% interval width {hi - lo:.3g}"})

    # robust=True adds the MLE's fit and bootstrap (B = 20 here: its refits dominate, 2,000 EM steps each)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # capped MLE refits: reported in the note
        bs = auto.bootstrap(mech, B=20, rng=0, robust=True)
    t_rb = time.perf_counter() - t0
    ref = bs.reference
    lo, hi = auto.range(2000, 4000, ci=bs)[1]
    plo, phi = auto.range(2000, 4000, ci=auto.bootstrap(mech, B=20, rng=0))[1]
    rows.append({"name": "robust intervals: auto's bootstrap + the MLE's fit and bootstrap, B=20",
                 "median_s": t_rb,
                 "note": f"one run; {0 if ref is None else ref.converged} of 20 MLE refits certified; "
                         f"P(2000..4000) interval width {hi - lo:.3g} vs {phi - plo:.3g} without robust"})
    rows += _hard_population(mech, rc.n)
    rows += _long_window(rc.n, t_count)
    rows += _mid_domain()
    rows += _gram_band_rows()
    rows += _lr_modelled_rows()
    rows += _low_rank_rows()
    rows += _wide_kernel_few_reports()
    rows += _mid_sparse_refits()
    rows += _batched_mle_refits()
    rows += _ipm_refits()
    rows += _ipm_all_rows()
    rows += _sparse_mle()
    rows += _few_reports()
    rows += _small_dense()

    # one EM step, sparse (ours) vs plain dense, on the same counts
    model = _model(mech, (0, K - 1))
    c_all = model.counts_of(rc, False)
    obs = np.flatnonzero(c_all > 0)
    A, AT = model.columns(obs)
    c = c_all[obs]
    p = np.array(est.p)
    p = 0.5 * p + 0.5 / K

    def sparse_step():
        q = AT @ p
        return p * (A @ (c / q)) / N

    Qd = model.unscaled().toarray()  # dense k x m (all outputs), 808 MB
    cd = c_all

    def dense_step():
        q = Qd.T @ p
        r = np.divide(cd, q, out=np.zeros_like(cd), where=cd > 0)
        return p * (Qd @ r) / N

    np.testing.assert_allclose(sparse_step(), dense_step(), rtol=1e-9, atol=1e-18)
    t_sparse = median_time(sparse_step, repeat=15, warmup=2)
    t_dense = median_time(dense_step, repeat=5, warmup=1)
    del Qd
    rows.append({"name": "EM step, banded CSR (ours)", "median_s": t_sparse, "note": f"nnz = {A.nnz:,}"})
    rows.append({"name": "EM step, plain dense k x m", "median_s": t_dense, "ratio": t_dense / t_sparse,
                 "note": "ratio = dense / sparse, same counts, same run"})
    steps = est.iterations
    rows.append({"name": "dense EM, same number of steps (extrapolated)", "median_s": t_count + steps * t_dense,
                 "ratio": (t_count + steps * t_dense) / (t_count + t_em),
                 "note": f"count + {steps} dense steps; ratio vs our end-to-end"})

    # accuracy: default tol vs (much) further converged, same counts
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        far = estimate_frequencies_full(rc, mech, domain=(0, K - 1), method="em", tol=1e-12 * N,
                                        max_iter=100_000)
    t_far = time.perf_counter() - t0
    tv_far = 0.5 * float(np.abs(far.p - truth).sum())
    rows.append({"name": "accuracy k=1e4: TV default / TV converged", "median_s": t_far,
                 "ratio": tv_default / tv_far,
                 "note": f"TV {tv_default:.4f} (gap {est.gap:.2g}) vs {tv_far:.4f} (gap {far.gap:.2g}, "
                         f"{far.iterations} steps, converged={far.converged}); TV between them "
                         f"{0.5 * float(np.abs(est.p - far.p).sum()):.2e}; time = the converged run"})
    rows.append(_small_accuracy())

    ems = None

    def run_ems():
        nonlocal ems
        ems = estimate_frequencies_full(rc, mech, domain=(0, K - 1), method="ems")

    t_ems = median_time(run_ems, repeat=3, warmup=0)
    tv_ems = 0.5 * float(np.abs(ems.p - truth).sum())
    rows.append({"name": "EMS on counts (k=1e4, s=101): TV EMS / TV EM", "median_s": t_ems,
                 "ratio": tv_ems / tv_default,
                 "note": f"TV {tv_ems:.4f} (EMS, {ems.iterations} steps, converged={ems.converged}) vs "
                         f"{tv_default:.4f} (EM); time = EMS incl. channel build"})
    rows.append(_wide_window_accuracy())
    return rows


def _direct_counts(model, p, n: int, seed: int):
    """Report counts drawn directly from the output distribution ``Q^T p`` (no per-report sampling)."""
    from sparseldp.estimation import ReportCounts

    q = np.maximum(np.asarray(model.unscaled().T @ p).ravel(), 0.0)
    return ReportCounts(int(model.outputs[0]), np.random.default_rng(seed).multinomial(n, q / q.sum()))


def _hard_population(mech, n) -> list[dict]:
    """A harder truth on the same domain: a wide bump, a narrow one and one atom holding 10 %.

    The output counts are drawn directly (Multinomial(n, Q^T p), the law of the report
    histogram), so no reports are generated; auto + bootstrap B = 200, one run each.
    """
    p, est, t_fit = _hard_fit(mech, n)
    t0 = time.perf_counter()
    bs = est.bootstrap(mech, B=200, rng=0)
    t_bs = time.perf_counter() - t0
    tv = 0.5 * float(np.abs(est.p - p).sum())
    lo, hi = est.mean(ci=bs)[1]
    return [{"name": "hard population: auto on counts (one run)", "median_s": t_fit,
             "note": f"chose {est.regularization}; TV {tv:.4f}"},
            {"name": "hard population: bootstrap B=200 (one run)", "median_s": t_bs,
             "note": f"mean 95% interval width {hi - lo:.3g}; fit + intervals {t_fit + t_bs:.1f} s"}]


def _hard_fit(mech, n):
    """The harder truth ``p``, its ``auto`` estimate from ``n`` reports' counts (drawn directly, seeded)
    and the fit's time."""
    from sparseldp.estimation import _model, estimate_frequencies_full

    x = np.arange(K, dtype=float)
    p = np.exp(-0.5 * ((x - 0.35 * K) / (0.08 * K)) ** 2) + 0.4 * np.exp(-0.5 * ((x - 0.75 * K) / (0.01 * K)) ** 2)
    p = 0.9 * p / p.sum()
    p[K // 5] += 0.1
    model = _model(mech, (0, K - 1))
    rc = _direct_counts(model, p, n, seed=7)
    t0 = time.perf_counter()
    est = estimate_frequencies_full(rc, mech, domain=(0, K - 1), method="auto")
    return p, est, time.perf_counter() - t0


def _long_window(n, t_count) -> list[dict]:
    """The hard truth under ``design("laplace", eps=1, delta=1e-6, H=10)`` (a window of 275): auto, then
    the bootstrap at its default B (the issue's end-to-end target: counting, whose median ``t_count``
    was measured on the 10^8 reports above, + fit + intervals under 15 s), and with plain instead of
    the default refits along the EM flow (Runge-Kutta-Chebyshev steps, else over-relaxed ones;
    ``relaxed=False``, the same histograms); B = 50 as one batch of refits
    and in blocks over threads (estimation._parallel, the default), same seed, same run; and B = 200 in
    blocks, single against double precision.  Counts drawn directly, one run each."""
    import inspect

    import sparseldp as sl
    from sparseldp.estimation import _parallel, bootstrap

    mech = sl.design("laplace", eps=1, delta=1e-6, H=10).mechanism
    p, est, t_fit = _hard_fit(mech, n)
    tv = 0.5 * float(np.abs(est.p - p).sum())
    rows = [{"name": f"window {mech.s}: auto on counts (one run)", "median_s": t_fit,
             "note": f"chose {est.regularization}; TV {tv:.4f}"}]
    t0 = time.perf_counter()
    bs = est.bootstrap(mech, rng=0)
    t_default = time.perf_counter() - t0
    lo, hi = est.mean(ci=bs)[1]
    B = inspect.signature(bootstrap).parameters["B"].default
    rows.append({"name": f"window {mech.s}: count 1e8 + auto + bootstrap at the default B = {B} (target < 15 s)",
                 "median_s": t_count + t_fit + t_default,
                 "note": f"count {t_count:.2f} s (median above) + fit {t_fit:.2f} s + bootstrap {t_default:.2f} s "
                         f"(one run each); mean 95% interval width {hi - lo:.3g}"})
    # the default refits follow the EM flow (bootstrap's relaxed): against plain steps, the same histograms
    t0 = time.perf_counter()
    plain = est.bootstrap(mech, rng=0, relaxed=False)
    t_plain = time.perf_counter() - t0
    moved = 0.0
    for stat, kw in (("mean", {}), ("var", {}), ("range", {"a": 3000, "b": 4000}), ("cdf", {"x": K // 5})):
        (lo, hi), (plo, phi) = (getattr(est, stat)(ci=b, **kw)[1] for b in (bs, plain))
        moved = max(moved, abs(lo - plo) / (phi - plo), abs(hi - phi) / (phi - plo))
    rows.append({"name": f"window {mech.s}: bootstrap B = {B}, the default refits (Chebyshev or over-relaxed) vs plain steps",
                 "median_s": t_default, "ratio": t_plain / t_default,
                 "note": f"refit_steps={bs.refit_steps}; plain {t_plain:.1f} s; the mean's, variance's, a range's and a CDF "
                         f"value's interval ends moved {moved:.1e} of their width (one run each)"})
    times, widths = {}, {}
    for label, min_columns in (("one batch", 10**9), ("blocks in threads", _parallel._MIN_COLUMNS)):
        before = _parallel._MIN_COLUMNS
        _parallel._MIN_COLUMNS = min_columns
        try:
            t0 = time.perf_counter()
            bs = est.bootstrap(mech, B=50, rng=0)
            times[label] = time.perf_counter() - t0
        finally:
            _parallel._MIN_COLUMNS = before
        lo, hi = est.mean(ci=bs)[1]
        widths[label] = hi - lo
    rows.append({"name": f"window {mech.s}: bootstrap B=50, blocks in threads vs one batch",
                 "median_s": times["blocks in threads"], "ratio": times["one batch"] / times["blocks in threads"],
                 "note": f"one batch {times['one batch']:.1f} s; mean 95% interval width "
                         f"{widths['blocks in threads']:.4g} vs {widths['one batch']:.4g}"})
    runs = {}
    for precision in ("single", "double"):
        t0 = time.perf_counter()
        bs = est.bootstrap(mech, B=200, rng=0, precision=precision)
        runs[precision] = (time.perf_counter() - t0, est.mean(ci=bs)[1])
    (t_bs, ends), (t_double, ends_double) = runs["single"], runs["double"]
    moved = max(abs(a - b) for a, b in zip(ends, ends_double)) / (ends_double[1] - ends_double[0])
    rows.append({"name": f"window {mech.s}: bootstrap B=200, single vs double precision", "median_s": t_bs,
                 "ratio": t_double / t_bs,
                 "note": f"double {t_double:.1f} s; mean interval ends moved {moved:.1e} of its width; "
                         f"fit + intervals {t_fit + t_bs:.1f} s"})
    # likelihood-ratio intervals (est.profile): the MLE, then the mean's, a range query's and a CDF value's ends
    t0 = time.perf_counter()
    prof = est.profile(mech)
    t_mle = time.perf_counter() - t0
    ends = {}
    for stat, kw in (("mean", {}), ("range", {"a": 3000, "b": 4000}), ("cdf", {"x": K // 5})):
        t0 = time.perf_counter()
        ends[stat] = (prof.interval(stat, **kw), time.perf_counter() - t0)
    rows.append({"name": f"window {mech.s}: likelihood-ratio intervals (MLE + mean + range + CDF)",
                 "median_s": t_mle + sum(t for _, t in ends.values()),
                 "note": f"MLE {t_mle:.1f} s; " + "; ".join(
                     f"{stat} [{lo:.6g}, {hi:.6g}] {t:.1f} s" for stat, ((lo, hi), t) in ends.items())
                 + f"; auto's CDF at {K // 5}: {est.cdf(K // 5):.4g} (one run each)"})
    return rows


def _small_dense() -> list[dict]:
    """``auto`` and its bootstrap on a small dense channel: 100 values, ``design("gaussian", eps=1,
    delta=1e-6, H=10)`` (window 695, wider than the domain), 10^6 reports (counts drawn directly) of
    the battery's smooth and spiky truths; B = 200 in single (the default) and double precision, one
    run each, and the largest move of the mean's interval ends between the two."""
    import sparseldp as sl
    from bench_estimators import _shapes
    from sparseldp.estimation import _model, estimate_frequencies_full

    k = 100
    mech = sl.design("gaussian", eps=1, delta=1e-6, H=10).mechanism
    model = _model(mech, (0, k - 1))
    rows = []
    for shape in ("smooth", "spike"):
        p = _shapes(k)[shape]
        rc = _direct_counts(model, p, 10**6, seed=40)
        t0 = time.perf_counter()
        est = estimate_frequencies_full(rc, mech, domain=(0, k - 1), method="auto")
        t_fit = time.perf_counter() - t0
        times, ends = {}, {}
        for precision in ("single", "double"):
            t0 = time.perf_counter()
            bs = est.bootstrap(mech, B=200, rng=40, precision=precision)
            times[precision] = time.perf_counter() - t0
            ends[precision] = est.mean(ci=bs)[1]
        width = ends["double"][1] - ends["double"][0]
        moved = max(abs(a - b) for a, b in zip(ends["single"], ends["double"])) / width
        rows.append({"name": f"100 values, Gaussian window {mech.s} (dense), {shape}, 1e6 reports: auto + "
                             "bootstrap B=200 (single precision)", "median_s": t_fit + times["single"],
                     "ratio": (t_fit + times["double"]) / (t_fit + times["single"]),
                     "note": f"chose {est.regularization}; fit {t_fit:.1f} s, bootstrap {times['single']:.1f} s "
                             f"(double {times['double']:.1f} s); mean interval ends moved {moved:.1e} of its width"})
    return rows


def _mid_domain() -> list[dict]:
    """``auto`` on 1,000 values with designs at (eps, delta, H) = (1, 1e-6, 10): Laplace (window 275,
    a sparse channel) and Gaussian (window 695, wider than the domain: a dense one), on two bumps and
    on two atoms, 10^6 reports (counts drawn directly), one run each; then the bootstrap B = 200."""
    import sparseldp as sl
    from sparseldp.estimation import _model, estimate_frequencies_full

    k = 1000
    x = np.arange(k, dtype=float)
    bumps = np.exp(-0.5 * ((x - 0.4 * k) / (0.1 * k)) ** 2) + 0.5 * np.exp(-0.5 * ((x - 0.8 * k) / (0.03 * k)) ** 2)
    atoms = np.zeros(k)
    atoms[370], atoms[700] = 0.6, 0.4
    rows = []
    for fam in ("laplace", "gaussian"):
        mech = sl.design(fam, eps=1, delta=1e-6, H=10).mechanism
        model = _model(mech, (0, k - 1))
        for shape, p in (("two bumps", bumps / bumps.sum()), ("two atoms", atoms)):
            rc = _direct_counts(model, p, 10**6, seed=1)
            t0 = time.perf_counter()
            est = estimate_frequencies_full(rc, mech, domain=(0, k - 1), method="auto")
            t_fit = time.perf_counter() - t0
            t0 = time.perf_counter()
            est.bootstrap(mech, B=200, rng=0)
            t_bs = time.perf_counter() - t0
            tv = 0.5 * float(np.abs(est.p - p).sum())
            rows.append({"name": f"auto, 1,000 values, {fam} window {mech.s} ({'dense' if model.dense else 'sparse'}), "
                                 f"{shape}, 1e6 reports", "median_s": t_fit,
                         "note": f"chose {est.regularization}; TV {tv:.3f}; bootstrap B=200 {t_bs:.1f} s (one run)"})
    return rows


def _gram_band_rows() -> list[dict]:
    """The interior point's banded Gram by FFT (``model.gram_band``) against sparse products (the band
    ``_ipm._sparse_band`` builds when none is given: the code before 2026-11-30), same counts, same run:
    1,000 values under the Laplace design (1, 1e-6, 5) (window 137: a sparse channel whose EM products
    stay sparse), 10^5 reports of two bumps and a 10 % atom (counts drawn directly): the MLE, then the
    likelihood-ratio intervals of ``sparseldp estimate``'s default statistics (mean, variance, three
    quantiles, a range query).  One run each."""
    import sparseldp as sl
    from sparseldp.estimation import _model, estimate_frequencies_full
    from sparseldp.estimation import model as model_mod

    k = 1000
    x = np.arange(k, dtype=float)
    p = np.exp(-0.5 * ((x - 250) / 60) ** 2) + 0.6 * np.exp(-0.5 * ((x - 700) / 80) ** 2)
    p = 0.9 * p / p.sum()
    p[500] += 0.1
    mech = sl.design("laplace", eps=1, delta=1e-6, H=5).mechanism
    rc = _direct_counts(_model(mech, (0, k - 1)), p, 10**5, seed=3)
    stats = (("mean", {}), ("var", {}), ("quantile", {"q": 0.1}), ("quantile", {"q": 0.5}), ("quantile", {"q": 0.9}),
             ("range", {"a": 300, "b": 500}))
    times, ends = {}, {}
    for label in ("sparse products", "FFT"):
        before = model_mod._Model.gram_band
        if label == "sparse products":
            model_mod._Model.gram_band = lambda self, idx, fast=None: None
        try:
            t0 = time.perf_counter()
            est = estimate_frequencies_full(rc, mech, domain=(0, k - 1), method="em")
            t_em = time.perf_counter() - t0
            t0 = time.perf_counter()
            prof = est.profile(mech)
            ends[label] = [prof.interval(stat, 0.95, **kw) for stat, kw in stats]
            times[label] = (t_em, time.perf_counter() - t0)
        finally:
            model_mod._Model.gram_band = before
    moved = max(abs(a - b) / max(hi - lo, 1e-300) for (lo, hi), pair in zip(ends["FFT"], ends["sparse products"])
                for a, b in zip((lo, hi), pair))
    (em_f, lr_f), (em_s, lr_s) = times["FFT"], times["sparse products"]
    return [{"name": "banded Gram by FFT, 1,000 values, window 137: MLE (em)", "median_s": em_f,
             "ratio": em_s / em_f, "note": f"{em_s:.2f} s with the Gram from sparse products (ratio = that / FFT)"},
            {"name": "banded Gram by FFT, 1,000 values, window 137: LR intervals of the default statistics",
             "median_s": lr_f, "ratio": lr_s / lr_f,
             "note": f"{lr_s:.1f} s from sparse products; the ends moved by at most {moved:.1e} of their width"}]


def _lr_modelled_rows() -> list[dict]:
    """``likelihood_ratio.modelled_seconds`` (what ``sparseldp estimate``'s ``--profile`` default reads: on
    where it is at most 10 s) against the time the LR intervals of the CLI's default statistics (mean,
    variance, three quantiles, a range query) take, same run: 10^5 reports of a bimodal truth (sampled,
    seeded) under the Laplace designs of (1, 1e-6, 5) on 1,000 values and of (1, 1e-6, 3) on 3,000, the
    Gaussian one of (1, 1e-6, 5) on 300 and 1,000 and that of (1, 1e-6, 10) on 2,000 (the last three through
    the channel's low-rank factor, ``_ipm._low_rank_of``).  ratio = measured / modelled (2026-11-30, the reference machine:
    0.6-0.9 quiet, 0.97-1.0 with the test suite on the other core; above 1 the model is optimistic for the
    machine it runs on).  One run each."""
    import sparseldp as sl
    from sparseldp.estimation import ReportCounts, estimate_frequencies_full
    from sparseldp.estimation.likelihood_ratio import modelled_seconds
    from sparseldp.sampling import sample

    rows = []
    for fam, H, k in (("laplace", 5, 1000), ("laplace", 3, 3000), ("gaussian", 5, 300), ("gaussian", 5, 1000),
                      ("gaussian", 10, 2000)):
        mech = sl.design(fam, eps=1, delta=1e-6, H=H).mechanism
        gen = np.random.default_rng(1)
        v = np.arange(k)
        p = 0.6 * np.exp(-0.5 * ((v - 0.25 * k) / (0.06 * k)) ** 2) / 0.06 \
            + 0.4 * np.exp(-0.5 * ((v - 0.7 * k) / (0.08 * k)) ** 2) / 0.08
        x = gen.choice(k, size=10**5, p=p / p.sum())
        est = estimate_frequencies_full(ReportCounts.from_reports(sample(mech, x, rng=gen)), mech,
                                        domain=(0, k - 1))
        modelled = modelled_seconds(est, mech)
        prof = est.profile(mech)
        t0 = time.perf_counter()
        for stat, kw in (("mean", {}), ("var", {}), ("quantile", {"q": 0.1}), ("quantile", {"q": 0.5}),
                         ("quantile", {"q": 0.9}), ("range", {"a": int(0.3 * k), "b": int(0.5 * k)})):
            prof.interval(stat, 0.95, **kw)
        took = time.perf_counter() - t0
        rows.append({"name": f"LR default statistics, {fam} window {mech.s}, {k:,} values: measured vs modelled",
                     "median_s": took, "ratio": took / modelled,
                     "note": f"modelled {modelled:.1f} s (the CLI prints them unasked at <= 10 s modelled)"})
    return rows


def _low_rank_rows() -> list[dict]:
    """The interior point's Newton systems through the channel's low-rank factor (``_ipm._low_rank_of``,
    Woodbury) against the Gram's Cholesky, same run, the MLE from the uniform start on 10^6 reports of a
    bimodal truth (counts drawn directly, seeded): the Gaussian designs of (1, 1e-6, 5) on 1,000 values and of
    (1, 1e-6, 10) on 1,000 and 3,000.  median_s: one run through the factor (median of 3); ratio: the
    Cholesky's time over it.  The factor itself (once per model) is in the note."""
    import sparseldp as sl
    from sparseldp.estimation import _ipm, _model

    rows = []
    for H, k in ((5, 1000), (10, 1000), (10, 3000)):
        mech = sl.design("gaussian", eps=1, delta=1e-6, H=H).mechanism
        model = _model(mech, (0, k - 1))
        v = np.arange(k)
        p = 0.6 * np.exp(-0.5 * ((v - 0.25 * k) / (0.06 * k)) ** 2) / 0.06 \
            + 0.4 * np.exp(-0.5 * ((v - 0.7 * k) / (0.08 * k)) ** 2) / 0.08
        rc = _direct_counts(model, p / p.sum(), 10**6, seed=H + k)
        c_all = rc.counts.astype(float)  # on the model's outputs (drawn there)
        obs = np.flatnonzero(c_all > 0)
        A, AT = model.columns(obs)
        band = model.gram_band(obs)
        t0 = time.perf_counter()
        low = _ipm._low_rank_of(model, obs)
        t_factor = time.perf_counter() - t0
        if low is None:
            continue
        runs = {}
        for label, kw in (("factor", {"low_rank": low}), ("cholesky", {})):
            out = []
            runs[label] = median_time(lambda: out.append(_ipm._ipm(A, AT, c_all[obs], 10**6, 0.01, model.dense, band, **kw)),
                                      repeat=3, warmup=0)
            runs[label + " steps"] = out[-1][1]
        rows.append({"name": f"IPM MLE through the low-rank factor vs Cholesky: Gaussian window {mech.s}, {k:,} values",
                     "median_s": runs["factor"], "ratio": runs["cholesky"] / runs["factor"],
                     "note": f"rank {low[0].shape[1]}, factor {t_factor:.2f} s once; {runs['factor steps']} vs "
                             f"{runs['cholesky steps']} iterations; Cholesky {runs['cholesky']:.2f} s"})
    return rows


def _wide_kernel_few_reports() -> list[dict]:
    """``auto`` where the kernel is wider than half the domain and the reports few: 1,000 values,
    ``design("gaussian", eps=1, delta=1e-6, H=10)`` (window 695), 10^4 reports (counts drawn directly,
    the audit's seeds 96-100) of five of the battery's shapes; one run each.  The slowest default
    fits measured (README "Limits")."""
    import sparseldp as sl
    from bench_estimators import _shapes
    from sparseldp.estimation import _model, estimate_frequencies_full

    k = 1000
    mech = sl.design("gaussian", eps=1, delta=1e-6, H=10).mechanism
    model = _model(mech, (0, k - 1))
    rows = []
    for seed, shape in enumerate(("smooth", "bimodal", "spike", "zero-inflated", "heavy-tail"), start=96):
        p = _shapes(k)[shape]
        rc = _direct_counts(model, p, 10**4, seed=seed)
        t0 = time.perf_counter()
        est = estimate_frequencies_full(rc, mech, domain=(0, k - 1), method="auto")
        t_fit = time.perf_counter() - t0
        tv = 0.5 * float(np.abs(est.p - p).sum())
        rows.append({"name": f"auto, 1,000 values, Gaussian window {mech.s}, {shape}, 1e4 reports", "median_s": t_fit,
                     "note": f"chose {est.regularization}; TV {tv:.3f} (one run)"})
    return rows


def _mid_sparse_refits() -> list[dict]:
    """The bootstrap (B = 200) of ``auto``'s ``"em steps=t"`` on a mid-size sparse channel: 1,000 values,
    ``design("laplace", eps=2, delta=1e-8, H=3)`` (window 59, 59,000 stored entries), 10^6 reports of a
    point mass: the refits on FFT products (from ``_toeplitz._MIN_NNZ_BATCH`` entries, the default)
    against sparse products (the threshold raised to a single fit's), same seed, one run each."""
    import sparseldp as sl
    from bench_estimators import _shapes
    from sparseldp.estimation import _model, _toeplitz, estimate_frequencies_full

    k = 1000
    mech = sl.design("laplace", eps=2, delta=1e-8, H=3).mechanism
    model = _model(mech, (0, k - 1))
    p = _shapes(k)["point"]
    est = estimate_frequencies_full(_direct_counts(model, p, 10**6, seed=94), mech, domain=(0, k - 1), method="auto")
    times, ends = {}, {}
    for label, threshold in (("fft", _toeplitz._MIN_NNZ_BATCH), ("sparse", _toeplitz._MIN_NNZ)):
        before = _toeplitz._MIN_NNZ_BATCH
        _toeplitz._MIN_NNZ_BATCH = threshold
        try:
            t0 = time.perf_counter()
            bs = est.bootstrap(mech, B=200, rng=94)
            times[label] = time.perf_counter() - t0
        finally:
            _toeplitz._MIN_NNZ_BATCH = before
        ends[label] = est.mean(ci=bs)[1]
    width = ends["sparse"][1] - ends["sparse"][0]
    moved = max(abs(a - b) for a, b in zip(ends["fft"], ends["sparse"])) / width
    return [{"name": f"bootstrap B=200 of {est.regularization}, 1,000 values, Laplace window {mech.s} "
                     f"({model.nnz:,} entries): FFT vs sparse refits", "median_s": times["fft"],
             "ratio": times["sparse"] / times["fft"],
             "note": f"sparse {times['sparse']:.1f} s; mean interval ends moved {moved:.1e} of its width (one run)"}]


def _batched_mle_refits() -> list[dict]:
    """The MLE's bootstrap (B = 200) where ``p_hat`` is sparse on a large channel: 1,000 values,
    ``design("laplace", eps=2, delta=1e-8, H=3)`` (window 59), 10^6 reports of a zero-inflated count
    (``auto`` chooses the MLE).  The refits in one batch first (``_mle_refits._active_batch``, the default)
    against every replicate by the one-by-one active-set Newton (``_mle_refits._active_solo``), same seed,
    one run each."""
    import sparseldp as sl
    from bench_estimators import _shapes
    from sparseldp.estimation import _mle_refits, _model, estimate_frequencies_full

    k = 1000
    mech = sl.design("laplace", eps=2, delta=1e-8, H=3).mechanism
    model = _model(mech, (0, k - 1))
    est = estimate_frequencies_full(_direct_counts(model, _shapes(k)["zero-inflated"], 10**6, seed=91), mech,
                                    domain=(0, k - 1), method="auto")
    times, ends, certified = {}, {}, {}
    real = _mle_refits._active_batch

    def none_certified(model_, CT, n, p_hat, tol):
        B = CT.shape[1]
        return np.zeros((model_.k, B)), np.zeros(B, bool), np.full(B, np.inf)

    for label, batch in (("batch", real), ("one by one", none_certified)):
        _mle_refits._active_batch = batch
        try:
            t0 = time.perf_counter()
            bs = est.bootstrap(mech, B=200, rng=91)
            times[label] = time.perf_counter() - t0
        finally:
            _mle_refits._active_batch = real
        ends[label], certified[label] = est.mean(ci=bs)[1], bs.converged
    width = ends["one by one"][1] - ends["one by one"][0]
    moved = max(abs(a - b) for a, b in zip(ends["batch"], ends["one by one"])) / width
    return [{"name": f"MLE bootstrap B=200 ({est.regularization}), 1,000 values, Laplace window {mech.s}: "
                     "batched vs one-by-one active-set refits", "median_s": times["batch"],
             "ratio": times["one by one"] / times["batch"],
             "note": f"one by one {times['one by one']:.1f} s; certified {certified['batch']} / "
                     f"{certified['one by one']} of 200; mean interval ends moved {moved:.1e} of its width (one run)"}]


def _timed_bootstrap(est, mech, B: int, seed: int, settings: dict) -> tuple[float, int]:
    """``est.bootstrap(mech, B=B, rng=seed)`` with the module constants of ``_mle_refits`` in ``settings``
    set for the run (and restored): its time and how many refits were certified."""
    from sparseldp.estimation import _mle_refits

    saved = {name: getattr(_mle_refits, name) for name in settings}
    for name, value in settings.items():
        setattr(_mle_refits, name, value)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            t0 = time.perf_counter()
            bs = est.bootstrap(mech, B=B, rng=seed)
            return time.perf_counter() - t0, int(np.sum(bs.converged))
    finally:
        for name, value in saved.items():
            setattr(_mle_refits, name, value)


def _ipm_refits() -> list[dict]:
    """The MLE's bootstrap (B = 50) where the batched active-set EM's probe fails and the older solvers
    stall: 1,000 values, ``design("laplace", eps=2, delta=1e-8, H=3)``, 10^7 reports of a zero-inflated
    count.  With the interior point (``_mle_refits._ipm_direct`` / ``_ipm_finish``, the default) against
    without it (its probe limits and budget set to 0: the one-by-one active-set Newton, then EM), same
    seed, one run each, with the refits certified."""
    import sparseldp as sl
    from bench_estimators import _shapes
    from sparseldp.estimation import _model, estimate_frequencies_full

    k = 1000
    mech = sl.design("laplace", eps=2, delta=1e-8, H=3).mechanism
    model = _model(mech, (0, k - 1))
    est = estimate_frequencies_full(_direct_counts(model, _shapes(k)["zero-inflated"], 10**7, seed=91), mech,
                                    domain=(0, k - 1), method="em")
    off = dict.fromkeys(("_IPM_DIRECT", "_IPM_DIRECT_DENSE", "_IPM_BUDGET", "_IPM_VS_EM"), -1.0)
    times, certified = {}, {}
    for label, settings in (("interior point", {}), ("without", off)):
        times[label], certified[label] = _timed_bootstrap(est, mech, 50, 91, settings)
    return [{"name": "MLE bootstrap B=50, 1,000 values, Laplace window 59, 10^7 reports: interior-point refits",
             "median_s": times["interior point"], "ratio": times["without"] / times["interior point"],
             "note": f"without {times['without']:.1f} s; certified {certified['interior point']} / "
                     f"{certified['without']} of 50 (one run)"}]


def _ipm_all_rows() -> list[dict]:
    """The MLE's bootstrap (B = 20) where the MLE is not sparse: 2,000 values under ``design("laplace", eps=1,
    delta=1e-6, H=10)`` (window 275), 10^6 reports of a smooth truth.  The interior point's probe limit at
    twice the batched EM's modelled budget (``_mle_refits._ipm_limit``, the default: every replicate by the
    interior point) against 0.25 s (``_IPM_VS_EM`` = 0: the batched EM, then the interior point for what it
    leaves), same seed, same run, one run each."""
    import sparseldp as sl
    from bench_estimators import _shapes
    from sparseldp.estimation import _model, estimate_frequencies_full

    k = 2000
    mech = sl.design("laplace", eps=1, delta=1e-6, H=10).mechanism
    model = _model(mech, (0, k - 1))
    est = estimate_frequencies_full(_direct_counts(model, _shapes(k)["smooth"], 10**6, seed=2), mech,
                                    domain=(0, k - 1), method="em")
    times, certified = {}, {}
    for label, settings in (("by budget", {}), ("0.25 s", {"_IPM_VS_EM": 0.0})):
        times[label], certified[label] = _timed_bootstrap(est, mech, 20, 0, settings)
    return [{"name": "MLE bootstrap B=20, 2,000 values, Laplace window 275, smooth, 10^6 reports: interior point "
                     "for every replicate", "median_s": times["by budget"],
             "ratio": times["0.25 s"] / times["by budget"],
             "note": f"probe limit 0.25 s (batched EM first) {times['0.25 s']:.1f} s; certified "
                     f"{certified['by budget']} / {certified['0.25 s']} of 20 (one run)"}]


def _sparse_mle() -> list[dict]:
    """The MLE (``method="em"``) on 10^4 values, design(eps=1, delta=1e-6, H=10) (Laplace, window 275),
    10^7 reports: two atoms (the active-set Newton's case; then the bootstrap B = 20, its refits too)
    and the same atoms over a 2 % floor (not sparse: the full solver; unguarded, the active set spent
    148 s here).  One run each."""
    import warnings

    import sparseldp as sl
    from sparseldp.estimation import _model, estimate_frequencies_full, refits

    k = 10_000
    mech = sl.design("laplace", eps=1, delta=1e-6, H=10).mechanism
    model = _model(mech, (0, k - 1))
    rows = []
    for label, floor in (("two atoms", 0.0), ("two atoms over a 2% floor", 0.02)):
        p = np.full(k, floor / k)
        p[3000] += 0.6 * (1 - floor)
        p[7000] += 0.4 * (1 - floor)
        rc = _direct_counts(model, p, 10**7, seed=1)
        t0 = time.perf_counter()
        est = estimate_frequencies_full(rc, mech, domain=(0, k - 1), method="em")
        t_fit = time.perf_counter() - t0
        note = f"converged={est.converged}, gap {est.gap:.2g} nats; sparse MLE: {refits._active_pays(model, est.p)}"
        if floor == 0.0:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                bs = est.bootstrap(mech, B=20, rng=0)
            note += f"; bootstrap B=20 {time.perf_counter() - t0:.1f} s, {bs.converged} of 20 refits certified"
        rows.append({"name": f"MLE, 10^4 values, window {mech.s}, {label}, 1e7 reports", "median_s": t_fit,
                     "note": note})
    return rows


def _few_reports() -> list[dict]:
    """``auto`` with fewer reports than values: SparseLaplace(lam=0.5, s=7) on 2 x 10^4 and 10^5 values,
    10^4 reports of a broad bump, one run each.  Most outputs expect under one report there, and the
    classical discrepancy target (the number of observed outputs) lies below anything EM reaches: each
    fold ran to the 20,000-step cap (33.5 s and 96 s for ``auto`` before 2026-11-29); the stop at the
    deviance expected under the fit comes within a few steps.  TV against the bump itself."""
    from sparseldp import SparseLaplace
    from sparseldp.estimation import estimate_frequencies_full
    from sparseldp.sampling import sample

    mech = SparseLaplace(lam=0.5, s=7)
    rows = []
    for k in (20_000, 100_000):
        x = np.arange(k, dtype=float)
        p = np.exp(-0.5 * ((x - 0.5 * k) / (0.15 * k)) ** 2)
        p /= p.sum()
        gen = np.random.default_rng(3)
        y = sample(mech, gen.choice(k, 10_000, p=p), rng=gen)
        t0 = time.perf_counter()
        est = estimate_frequencies_full(y, mech, domain=(0, k - 1), method="auto")
        t_fit = time.perf_counter() - t0
        tv = 0.5 * float(np.abs(est.p - p).sum())
        rows.append({"name": f"auto, {k:,} values, 1e4 reports (Laplace s=7)", "median_s": t_fit,
                     "note": f"chose {est.regularization}; TV {tv:.3f} to the bump (one run)"})
    return rows


def _wide_window_accuracy() -> dict:
    """The demo's setting, 5 seeds: the MLE overfits, EMS does not."""
    from sparseldp import SparseLaplace
    from sparseldp.compare import default_population
    from sparseldp.estimation import estimate_frequencies_full
    from sparseldp.sampling import sample

    mech = SparseLaplace(lam=0.2, s=137)
    pop = default_population((0, 99))
    tv = {"em": [], "ems": [], "inversion": []}
    t_ems = []
    for seed in range(5):
        gen = np.random.default_rng(100 + seed)
        counts = gen.multinomial(10**5, pop)
        y = sample(mech, np.repeat(np.arange(100), counts), rng=gen)
        truth = counts / 10**5
        for method in tv:
            t0 = time.perf_counter()
            est = estimate_frequencies_full(y, mech, domain=(0, 99), method=method)
            if method == "ems":
                t_ems.append(time.perf_counter() - t0)
            tv[method].append(0.5 * float(np.abs(est.p - truth).sum()))
    med = {m: float(np.median(v)) for m, v in tv.items()}
    return {"name": "wide window k=100 s=137 n=1e5 (5 seeds): TV EM / TV EMS",
            "median_s": float(np.median(t_ems)), "ratio": med["em"] / med["ems"],
            "note": f"median TV: EM {med['em']:.4f}, EMS {med['ems']:.4f}, inversion {med['inversion']:.4f}; "
                    f"time = one EMS fit from reports"}


def _small_accuracy() -> dict:
    """k = 100, s = 21, n = 10^6, five seeds: TV(default) vs TV(EM to 1e-12 per report)."""
    from sparseldp import SparseLaplace
    from sparseldp.compare import default_population
    from sparseldp.estimation import estimate_frequencies_full
    from sparseldp.sampling import sample

    mech = SparseLaplace(lam=0.5, s=21)
    pop = default_population((0, 99))
    ratios, diffs = [], []
    t0 = time.perf_counter()
    for seed in range(5):
        gen = np.random.default_rng(seed)
        counts = gen.multinomial(10**6, pop)
        x = np.repeat(np.arange(100), counts)
        y = sample(mech, x, rng=gen)
        truth = counts / 10**6
        a = estimate_frequencies_full(y, mech, domain=(0, 99), method="em")
        b = estimate_frequencies_full(y, mech, domain=(0, 99), method="em", tol=1e-12 * 10**6, max_iter=10**6)
        ta = 0.5 * float(np.abs(a.p - truth).sum())
        tb = 0.5 * float(np.abs(b.p - truth).sum())
        ratios.append(ta / tb)
        diffs.append(0.5 * float(np.abs(a.p - b.p).sum()))
    return {"name": "accuracy k=100 (5 seeds): TV default / TV converged", "median_s": time.perf_counter() - t0,
            "ratio": float(np.median(ratios)),
            "note": f"ratios {min(ratios):.4f}..{max(ratios):.4f}; max TV(default, converged) {max(diffs):.1e}"}


if __name__ == "__main__":
    for row in run():
        print(row)
