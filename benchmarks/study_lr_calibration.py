"""Study: does ``Profile.calibration`` tell where the likelihood-ratio intervals' chi-square calibration fails?

Why: the LR intervals (``est.profile``) take their threshold from Wilks' theorem, ``chi^2_1 / 2`` nats (1.92 at
95 %).  Where the channel cannot tell small masses on many values from none (randomized response over 100-400
values, a concentrated truth) the MLE spreads mass over the empty values and every distribution without it lies
many nats below: the mean's interval then misses the truth (docs/estimation.md, "Where that calibration fails").
``Profile.calibration("mean")`` draws 19 report sets from the estimate and measures each one's profile deficit
at the estimate's mean; ``chi_square_fails`` says the draws contradict ``chi^2_1 / 2`` (6 or more of 19 beyond
1.92 nats, or one beyond 7.57).  ``sparseldp estimate`` runs this check on the mean and warns where it fails.

Per setting and repetition: the true values drawn (seeded), privatized, fitted by ``auto``; the mean's 95 % LR
interval and whether it holds the sample's true mean; the check (19 draws, seeded).  Rows: the coverage of the
LR interval, how often the check flags, and the coverage among flagged and unflagged repetitions.  Wanted: few
flags where the intervals cover (the designs, the false-alarm rate) and flags where they do not (randomized
response on a concentrated truth).

Settings: the Laplace and Gaussian designs of ``bench_coverage.py`` (``design(family, eps=1, delta=1e-6, H=5)``,
10^5 reports on 0..99) with its smooth, bimodal and spiky truths; randomized response at eps 3 on 0..99
(5,000 reports) and on 0..399 (2 x 10^4 reports) with a geometric truth (p 0.1 and 0.05: mean about 9 and 19),
and on 0..99 with the smooth truth (interior: every value has mass).

Run: ``python benchmarks/study_lr_calibration.py [reps] [setting ...]`` (default 20 repetitions, every setting).

``python benchmarks/study_lr_calibration.py interval [reps] [setting ...]`` scores ``Profile.calibrated_interval``
instead (the mean's, 39 draws per round, seeded): its coverage of the sample's true mean beside the chi-square
interval's, their median widths, and its median time.

``python benchmarks/study_lr_calibration.py values [reps] [setting ...]`` scores each value's chi-square LR
interval (``prof.interval("p")``, not calibrated) against the sample's own frequencies: the coverage averaged
over the values, over the 15 smallest values (where a geometric truth has its mass) and at the worst value, and
how many values are covered in fewer than 90 % of the repetitions.

``python benchmarks/study_lr_calibration.py ends [reps] [setting ...]`` asks whether a two-sided test inversion
could *narrow* the local statistics' intervals where they over-cover (P(30 <= X <= 50) under the Gaussian design:
100 % at 22 times the bootstrap's width): per repetition, the profile deficit at the true value, and at each end of
the chi-square interval the Monte Carlo critical value (38th of 39) of draws from the constrained MLE there, the
draws ``Profile.calibrated_interval`` would take.  Critical values below 1.92 nats would let the ends move in.
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np

import bench_coverage as bc

SETTINGS = ("laplace-smooth", "laplace-bimodal", "laplace-spiky", "gaussian-smooth", "gaussian-bimodal",
            "gaussian-spiky", "rr100-geometric", "rr400-geometric", "rr100-smooth")


def _setting(name: str):
    """``(mechanism, k, n, draw(gen) -> true values)``."""
    import sparseldp as sl

    family, shape = name.split("-")
    if family in ("laplace", "gaussian"):
        mech = sl.design(family, eps=1, delta=1e-6, H=5).mechanism
        p = bc.population(shape)
        return mech, p.size, 100_000, lambda gen: gen.choice(p.size, size=100_000, p=p)
    k = int(family[2:])
    mech = sl.baselines.randomized_response(eps=3.0, domain=(0, k - 1))
    if shape == "smooth":
        p = bc.population("smooth")
        return mech, k, 5_000, lambda gen: gen.choice(p.size, size=5_000, p=p)
    n, g = (5_000, 0.1) if k == 100 else (20_000, 0.05)
    return mech, k, n, lambda gen: np.minimum(gen.geometric(g, n) - 1, k - 1)


def _profiles(name: str, reps: int):
    """``(rep, true values, profile of auto's estimate)`` for each repetition of a setting (seeded)."""
    from sparseldp.estimation import estimate_frequencies
    from sparseldp.sampling import sample

    mech, k, n, draw = _setting(name)
    gen = np.random.default_rng(2026)
    for rep in range(reps):
        x = draw(gen)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = estimate_frequencies(sample(mech, x, rng=gen), mech, domain=(0, k - 1), return_info=True)
        yield rep, x, est.profile(mech)


def run(name: str, reps: int) -> dict:
    covered, flagged, times = [], [], []
    for rep, x, prof in _profiles(name, reps):
        lo, hi = prof.interval("mean")
        t0 = time.perf_counter()
        cal = prof.calibration("mean", rng=rep)
        times.append(time.perf_counter() - t0)
        covered.append(lo <= x.mean() <= hi)
        flagged.append(cal.chi_square_fails)
    covered, flagged = np.array(covered), np.array(flagged)

    def share(mask):
        return f"{100 * covered[mask].mean():.0f}% of {mask.sum()}" if mask.any() else "-"

    row = {"setting": name, "reps": reps, "lr_coverage": f"{100 * covered.mean():.1f}%",
           "flagged": f"{flagged.sum()} of {reps}", "coverage_flagged": share(flagged),
           "coverage_unflagged": share(~flagged), "check_median_s": round(float(np.median(times)), 2)}
    print(row, flush=True)
    return row


def run_interval(name: str, reps: int) -> dict:
    import os

    from sparseldp.estimation import _lr_calibration

    if os.environ.get("STUDY_MOVE_SLACK"):  # the calibrated ends' slack (_lr_calibration._MOVE_SLACK), for a study
        _lr_calibration._MOVE_SLACK = float(os.environ["STUDY_MOVE_SLACK"])
    chi, cal, w_chi, w_cal, times = [], [], [], [], []
    for rep, x, prof in _profiles(name, reps):
        lo, hi = prof.interval("mean")
        t0 = time.perf_counter()
        c_lo, c_hi = prof.calibrated_interval("mean", rng=rep)
        times.append(time.perf_counter() - t0)
        chi.append(lo <= x.mean() <= hi)
        cal.append(c_lo <= x.mean() <= c_hi)
        w_chi.append(hi - lo)
        w_cal.append(c_hi - c_lo)
    row = {"setting": name, "reps": reps, "chi_square_covers": f"{100 * np.mean(chi):.0f}%",
           "calibrated_covers": f"{100 * np.mean(cal):.0f}%", "median_width_chi": round(float(np.median(w_chi)), 3),
           "median_width_calibrated": round(float(np.median(w_cal)), 3),
           "median_s": round(float(np.median(times)), 2)}
    print(row, flush=True)
    return row


def run_values(name: str, reps: int) -> dict:
    hits, times = [], []
    for rep, x, prof in _profiles(name, reps):
        t0 = time.perf_counter()
        lo, hi = prof.interval("p")
        times.append(time.perf_counter() - t0)
        share = np.bincount(x, minlength=lo.size) / x.size
        hits.append((lo <= share) & (share <= hi))
    cov = 100 * np.mean(hits, axis=0)
    row = {"setting": name, "reps": reps, "mean_over_values": f"{cov.mean():.1f}%",
           "first_15_values": f"{cov[:15].mean():.1f}% ({cov[:15].min():.0f}-{cov[:15].max():.0f}%)",
           "worst": f"{cov.min():.0f}% at {int(cov.argmin())}", "values_below_90": int((cov < 90).sum()),
           "median_s": round(float(np.median(times)), 2)}
    print(row, flush=True)
    return row


def run_ends(name: str, reps: int, a: int = 30, b: int = 50) -> dict:
    from sparseldp.estimation import _lr_calibration as LC

    at_truth, crits, times = [], [], []
    for rep, x, prof in _profiles(name, reps):
        t0 = time.perf_counter()
        search = prof._search
        h, _ = LC._linear("range", prof.p, prof.values, {"a": a, "b": b})
        at_truth.append(search.deficit(h, float(np.mean((x >= a) & (x <= b))))[1])
        gen = np.random.default_rng(rep)
        with search.blas():
            for end in prof.interval("range", a=a, b=b):
                memo = {}
                _, _, p = search.deficit(h, end, point=True, memo=memo)
                if p is None:  # the end is the statistic's extreme
                    continue
                q = LC._output_distribution(prof._model, p)
                draws = np.array([hi for _, hi in LC._draw_deficits(prof, q, h, end, gen, 39, memo)])
                crits.append(LC._critical(draws, 0.95))
        times.append(time.perf_counter() - t0)
    row = {"setting": name, "reps": reps, "statistic": f"P({a} <= X <= {b})",
           "deficit_at_truth_median": round(float(np.median(at_truth)), 3),
           "deficit_at_truth_max": round(float(np.max(at_truth)), 3),
           "critical_at_ends": f"{min(crits):.2f}-{max(crits):.2f} (median {np.median(crits):.2f}, {len(crits)} ends)",
           "ends_below_1.92": int(np.sum(np.array(crits) < 1.92)), "median_s": round(float(np.median(times)), 2)}
    print(row, flush=True)
    return row


def main(argv):
    mode = argv[0] if argv and argv[0] in ("interval", "values", "ends") else None
    argv = argv[1:] if mode else argv
    reps = int(argv[0]) if argv and argv[0].isdigit() else 20
    names = [a for a in argv if not a.isdigit()] or list(SETTINGS)
    for name in names:
        {"interval": run_interval, "values": run_values, "ends": run_ends, None: run}[mode](name, reps)


if __name__ == "__main__":
    main(sys.argv[1:])
