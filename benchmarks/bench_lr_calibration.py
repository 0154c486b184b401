"""What the likelihood-ratio intervals' checks by simulation cost (``Profile.calibration``,
``Profile.calibrated_interval``), beside the intervals themselves, and what ``estimate_mean`` costs since it
inverts biased channels.

Rows (medians of 3 in the same process, one BLAS thread; seeded data from
``study_lr_calibration._setting``: randomized response at eps 3 on 0..99 with a geometric truth, 5,000
reports, where the chi-square threshold fails; the Laplace design of (1, 1e-6, 5) on 0..99 with the bimodal
truth, 10^5 reports, where it holds):

* the mean's chi-square LR interval (ratio 1: the reference of the rows below it);
* ``calibration("mean", B=7)``, ``sparseldp estimate``'s routine check, and ``B=19`` (the fewest draws that
  can reject at 95 %), as ratios to the interval;
* ``calibrated_interval("mean")`` (39 draws per round), as a ratio to the interval;
* one profile deficit of the mean, 2 standard errors out (``_Fits.deficit``, to 0.05 nats): by one solve of the
  profile problem first (now), against the secant over tilted fits alone (``_profile_point`` off; ratio:
  secant over now), on the two settings above and on randomized response at eps 3 over 0..399 (2 x 10^4
  reports of a geometric truth);
* ``estimate_mean`` on randomized response at eps 1 on 0..99 (2 x 10^4 reports of a bimodal truth): the
  channel inversion, with the former EM-and-Fisher path (``_fit`` + ``_fisher_stderr``) timed beside it
  (ratio: former over now).
"""

from __future__ import annotations

import warnings

import numpy as np

from _timing import median_time


def _profile(name: str):
    import study_lr_calibration as st

    return next(iter(st._profiles(name, 1)))[2]


def run() -> list[dict]:
    from sparseldp.estimation._parallel import small_blas

    rows = []
    for name in ("rr100-geometric", "laplace-bimodal"):
        prof = _profile(name)
        with small_blas(1, 1):
            base = median_time(lambda: prof.interval("mean"), repeat=3)
            rows.append({"name": f"{name}: the mean's chi-square LR interval", "median_s": base, "ratio": 1.0})
            for B in (7, 19):
                t = median_time(lambda: prof.calibration("mean", B=B, rng=0), repeat=3, warmup=0)
                rows.append({"name": f"{name}: calibration('mean', B={B})", "median_s": t, "ratio": t / base,
                             "note": "ratio: to the interval"})
            t = median_time(lambda: prof.calibrated_interval("mean", rng=0), repeat=3, warmup=0)
            rows.append({"name": f"{name}: calibrated_interval('mean')", "median_s": t, "ratio": t / base,
                         "note": "ratio: to the interval"})
    rows += _deficit_rows()
    rows += _mean_rows()
    return rows


def _deficit_rows() -> list[dict]:
    from sparseldp.estimation import _lr_fits
    from sparseldp.estimation._parallel import small_blas

    rows = []
    for name in ("rr100-geometric", "rr400-geometric", "laplace-bimodal"):
        search = _profile(name)._search
        v = search.values.astype(float)
        m1 = float(search.mle @ v)
        t0 = m1 + 2.0 * float(np.sqrt(max(float(search.mle @ v ** 2) - m1 * m1, 1e-12) / search.n))
        with small_blas(1, 1):
            now = median_time(lambda: search.deficit(v, t0), repeat=3)
            solve = _lr_fits._Fits._profile_point
            _lr_fits._Fits._profile_point = lambda *a, **kw: None
            try:
                secant = median_time(lambda: search.deficit(v, t0), repeat=3)
            finally:
                _lr_fits._Fits._profile_point = solve
        rows.append({"name": f"{name}: the mean's profile deficit", "median_s": now, "ratio": secant / now,
                     "note": f"ratio: the secant over tilted fits alone, {secant:.3f} s, over now"})
    return rows


def _mean_rows() -> list[dict]:
    import sparseldp as sl
    from sparseldp.estimation import ReportCounts, estimate_mean
    from sparseldp.estimation._information import _fisher_stderr
    from sparseldp.estimation.frequencies import _fit
    from sparseldp.estimation.model import _model
    from sparseldp.sampling import sample

    mech = sl.baselines.randomized_response(eps=1.0, domain=(0, 99))
    gen = np.random.default_rng(0)
    n = 20_000
    x = np.clip(np.rint(np.where(gen.random(n) < 0.5, gen.normal(30, 6, n), gen.normal(70, 8, n))), 0, 99)
    y = sample(mech, x.astype(int), rng=gen)
    model = _model(mech, (0, 99))
    counts = model.counts_of(y, False)
    v = np.arange(100, dtype=float)

    def former():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = np.asarray(_fit(model, counts, "em", 1e-2, 50_000).p)
        return _fisher_stderr(model, p, v - float(p @ v), float(n))

    rc = ReportCounts(int(model.outputs[0]), counts.astype(np.int64))
    now = median_time(lambda: estimate_mean(rc, mech, domain=(0, 99)), repeat=3)
    before = median_time(former, repeat=3)
    return [{"name": "estimate_mean, rr eps=1 on 0..99: channel inversion", "median_s": now,
             "ratio": before / now, "note": f"ratio: the former EM + Fisher path, {before:.3f} s, over now"}]
