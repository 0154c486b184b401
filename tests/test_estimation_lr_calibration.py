"""The likelihood-ratio intervals' calibration checked by simulation (Profile.calibration, _lr_calibration):
the profile deficit's bracket holds the exact deficit (brute force on three values, hypothesis on random
channels), the check clears the estimate where Wilks holds, flags the calibration where the channel cannot
resolve small masses on many values (randomized response, a concentrated truth), confirms an estimate the
reports do rule out, and bad input gets a clear error.  Each seeded check can fail: the seeds are fixed, the
assertions are not tuned to them (the rules' false-alarm rates are in the module docstring)."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparseldp as sl
from sparseldp import SparseGaussian, SparseLaplace
from sparseldp.estimation import _model, estimate_frequencies
from sparseldp.estimation._lr_calibration import Calibration
from sparseldp.estimation.likelihood_ratio import _search_of
from sparseldp.sampling import sample

# (mechanism, true distribution on 0..2, n, the statistic h, values t0 to bracket)
DEFICIT_CASES = [
    (SparseLaplace(lam=0.4, s=9), [0.5, 0.3, 0.2], 200, [0.0, 1.0, 2.0], [0.2, 0.6, 1.0, 1.7]),
    (SparseLaplace(lam=1.5, s=5), [0.1, 0.0, 0.9], 500, [1.0, 1.0, 0.0], [0.02, 0.3, 0.8]),
    (SparseGaussian(sigma=2.0, s=11), [0.3, 0.4, 0.3], 300, [0.0, 1.0, 4.0], [0.5, 1.5, 3.0]),
    (SparseGaussian(sigma=0.8, s=5), [0.0, 1.0, 0.0], 100, [0.0, 1.0, 2.0], [0.9, 1.2, 1.9]),
]


def _counts(mech, p, n, seed, k=None):
    gen = np.random.default_rng(seed)
    k = len(p) if k is None else k
    x = gen.choice(len(p), size=n, p=np.asarray(p) / np.sum(p))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimate_frequencies(sample(mech, x, rng=gen), mech, domain=(0, k - 1), return_info=True)


def _exact_deficit(Q, c, h, t0, loglik_max):
    """Brute force on three values: the segment {p on the simplex, h^T p = t0} on a grid of 200,001 points."""
    free = next(j for j in (2, 0, 1) if len({h[i] for i in range(3) if i != j}) == 2)
    a, b = (i for i in range(3) if i != free)
    s = np.linspace(0.0, 1.0, 200_001)  # p_free = s; p_a + p_b = 1 - s, h_a p_a + h_b p_b = t0 - h_free s
    P = np.zeros((s.size, 3))
    P[:, free] = s
    P[:, a] = (t0 - h[free] * s - h[b] * (1 - s)) / (h[a] - h[b])
    P[:, b] = 1 - s - P[:, a]
    P = P[np.all(P >= -1e-15, axis=1)]
    P = np.maximum(P, 0.0)
    with np.errstate(divide="ignore"):
        ll = np.log(P @ Q) @ c
    return loglik_max - float(ll.max())


@pytest.mark.parametrize("mech, p, n, h, t0s", DEFICIT_CASES)
def test_the_deficit_bracket_holds_the_exact_profile_deficit(mech, p, n, h, t0s):
    est = _counts(mech, p, n, seed=7)
    model = _model(mech, est.domain)
    counts = np.asarray(est.counts, dtype=float)
    search = _search_of(model, counts, est.values, 1e-9, 10**6)  # the MLE within 1e-9 nats
    Q = model.unscaled()
    Q = (Q.toarray() if hasattr(Q, "toarray") else np.asarray(Q))[:, counts > 0]
    c = counts[counts > 0]
    top = float(np.log(search.mle @ Q) @ c)
    h = np.asarray(h, dtype=float)
    for t0 in t0s:
        lo, hi = search.deficit(h, t0)
        exact = _exact_deficit(Q, c, h, t0, top)
        # the grid's step moves the brute force's maximum down by at most its slope x 5e-6
        assert lo - 1e-6 <= exact + 1e-6 and exact <= hi + 1e-6 + 1e-3 * max(exact, 1.0), (t0, lo, exact, hi)
        assert hi - lo <= 0.05 + 1e-9


def test_the_deficit_is_zero_at_the_mles_value_and_infinite_outside_the_statistics_range():
    est = _counts(SparseLaplace(lam=0.4, s=9), [0.5, 0.3, 0.2], 200, seed=1)
    search = _search_of(_model(est.mechanism, est.domain), np.asarray(est.counts, float), est.values, 1e-9, 10**6)
    v = np.array([0.0, 1.0, 2.0])
    assert search.deficit(v, float(search.mle @ v)) == (0.0, 0.0)
    assert search.deficit(v, 2.5) == (math.inf, math.inf) and search.deficit(v, -0.1) == (math.inf, math.inf)
    assert search.deficit(np.ones(3), 1.0) == (0.0, 0.0)


@settings(max_examples=15, deadline=None)
@given(eps=st.floats(0.5, 3.0), w=st.lists(st.floats(0.05, 1.0), min_size=3, max_size=3),
       n=st.integers(30, 400), seed=st.integers(0, 10**6), frac=st.floats(0.02, 0.98))
def test_the_deficit_bracket_holds_on_random_randomized_response(eps, w, n, seed, frac):
    mech = sl.baselines.randomized_response(eps=eps, domain=(0, 2))
    gen = np.random.default_rng(seed)
    x = gen.choice(3, size=n, p=np.asarray(w) / np.sum(w))
    counts = np.bincount(sample(mech, x, rng=gen), minlength=3).astype(float)
    model = _model(mech, (0, 2))
    search = _search_of(model, counts, np.arange(3), 1e-9, 10**6)
    Q = np.asarray(model.unscaled())[:, counts > 0]
    c = counts[counts > 0]
    h = np.array([0.0, 1.0, 2.0])
    t0 = 2.0 * frac
    lo, hi = search.deficit(h, t0)
    exact = _exact_deficit(Q, c, h, t0, float(np.log(search.mle @ Q) @ c))
    assert lo <= hi + 1e-9
    assert lo - 1e-6 <= exact + 1e-6 and exact <= hi + 1e-6 + 1e-3 * max(exact, 1.0)


def _bimodal(design_family, n, seed):
    mech = sl.design(design_family, eps=1, delta=1e-6, H=5).mechanism
    gen = np.random.default_rng(seed)
    z = np.where(gen.random(n) < 0.5, gen.normal(30, 6, n), gen.normal(70, 8, n))
    x = np.clip(np.rint(z), 0, 99).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mech, estimate_frequencies(sample(mech, x, rng=gen), mech, domain=(0, 99), return_info=True)


@pytest.mark.parametrize("stat, kw", [("mean", {}), ("var", {}), ("cdf", {"x": 60}), ("range", {"a": 30, "b": 50}),
                                      ("quantile", {"q": 0.5})])
def test_where_wilks_holds_the_estimates_own_values_are_not_disfavoured_nor_the_calibration_flagged(stat, kw):
    mech, est = _bimodal("laplace", 100_000, seed=3)
    cal = est.profile(mech).calibration(stat, rng=11, **kw)
    assert isinstance(cal, Calibration) and cal.draws.size == cal.B == 19 and cal.statistic == stat
    assert not cal.disfavoured and not cal.chi_square_fails
    assert abs(cal.kappa - 1.920729) < 1e-5
    assert np.all(cal.draws_low <= cal.draws + 1e-12) and np.all(cal.draws_low >= 0.0)


def _rr_concentrated():
    """Randomized response at eps 3 on 0..99, 5,000 reports of a geometric truth (mean about 9): the true values
    and the profile of auto's estimate."""
    k, n = 100, 5000
    mech = sl.baselines.randomized_response(eps=3.0, domain=(0, k - 1))
    gen = np.random.default_rng(0)
    x = np.minimum(gen.geometric(0.1, n) - 1, k - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = estimate_frequencies(sample(mech, x, rng=gen), mech, domain=(0, k - 1), return_info=True)
    return x, est.profile(mech)


def test_randomized_response_on_a_concentrated_truth_flags_the_calibration_and_clears_the_estimate():
    # the MLE spreads small masses over the empty values; every distribution without them lies nats below
    x, prof = _rr_concentrated()
    lo, hi = prof.interval("mean")
    assert not lo <= x.mean() <= hi  # the chi-square interval misses the true mean (the failure checked for)
    cal = prof.calibration("mean", rng=5)
    assert cal.chi_square_fails and not cal.disfavoured
    assert cal.beyond >= 6  # far more than 1 in 20 draws beyond 1.92 nats
    seq = prof.calibration("mean", rng=5, sequential=True)
    assert seq.draws.size <= cal.draws.size and seq.disfavoured == cal.disfavoured
    if seq.draws.size < seq.B:  # stopped at the first draw as far from its maximum as the reports
        assert seq.draws[-1] >= seq.deficit and np.all(seq.draws[:-1] < seq.deficit)
        assert seq.p_value == pytest.approx(1.0 / seq.draws.size)


def _two_atoms_smoothed(seed, sample_seed):
    """The profile of EMS's estimate from 5,000 reports of two atoms (60% at 3, 40% at 7) under a narrow Laplace
    window: EMS smooths the atoms away."""
    gen = np.random.default_rng(seed)
    x = gen.choice([3, 7], size=5000, p=[0.6, 0.4])
    mech = SparseLaplace(lam=0.5, s=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = estimate_frequencies(sample(mech, x, rng=sample_seed), mech, domain=(0, 9), method="ems",
                                   return_info=True)
    return est.profile(mech)


def test_an_estimate_the_reports_rule_out_is_confirmed_by_every_draw():
    # EMS smooths two atoms away: P(X = 3) estimated far below what the reports allow
    prof = _two_atoms_smoothed(2, 3)
    full = prof.calibration("range", a=3, b=3, rng=1)
    seq = prof.calibration("range", a=3, b=3, rng=1, sequential=True)
    assert full.disfavoured and seq.disfavoured and full.exceedances == 0
    assert full.p_value == pytest.approx(1 / 20) and seq.draws.size == 19
    assert full.deficit > 50.0  # tens of nats, not chance
    strict = prof.calibration("range", a=3, b=3, level=0.99, rng=1)
    assert strict.B == 99 and strict.disfavoured


@pytest.mark.parametrize("call, exc, words", [
    (lambda p: p.calibration("mean", B=0), ValueError, ["B", "0"]),
    (lambda p: p.calibration("mean", B=2.5), TypeError, ["B"]),
    (lambda p: p.calibration("mean", sequential="yes"), TypeError, ["sequential", "yes"]),
    (lambda p: p.calibration("p"), ValueError, ["'p'", "one statistic"]),
    (lambda p: p.calibration("cdf", x=[1, 2]), ValueError, ["x", "single"]),
    (lambda p: p.calibration("median"), ValueError, ["stat", "median", "'range' for a calibration"]),
    (lambda p: p.calibration(3), TypeError, ["stat", "str", "3"]),
    (lambda p: p.calibration("mean", level=1.5), ValueError, ["level", "1.5"]),
    (lambda p: p.calibration("mean", rng="seed"), TypeError, ["rng"]),
    (lambda p: p.calibration("range", a=3), TypeError, ["range", "a", "b"]),
])
def test_bad_input_gets_a_clear_error(call, exc, words):
    est = _counts(SparseLaplace(lam=0.4, s=9), [0.5, 0.3, 0.2], 200, seed=1)
    prof = est.profile()
    with pytest.raises(exc) as info:
        call(prof)
    for word in words:
        assert word in str(info.value)


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 3000), prob=st.floats(1e-6, 0.5), frac=st.floats(0.0, 1.0))
def test_the_binomial_tail_matches_scipys(size, prob, frac):
    from scipy.stats import binom

    from sparseldp.estimation._lr_calibration import _binomial_tail

    j = int(round(frac * size))
    want = float(binom.sf(j - 1, size, prob))
    assert _binomial_tail(j, size, prob) == pytest.approx(want, rel=1e-9, abs=1e-300)


def test_the_calibrated_interval_covers_where_the_chi_square_one_misses_and_is_never_narrower():
    x, prof = _rr_concentrated()
    lo, hi = prof.interval("mean")
    cal = prof.calibrated_interval("mean", rng=3)
    c_lo, c_hi = cal
    assert not lo <= x.mean() <= hi and c_lo <= x.mean() <= c_hi
    assert c_lo <= lo + 1e-9 and hi - 1e-9 <= c_hi
    assert cal.kappa_low > 1.920729 * 2 and cal.kappa_high >= 1.920729 - 1e-9 and cal.rounds >= 2


def test_the_calibrated_quantile_interval_covers_the_tails_quantile_where_the_chi_square_one_misses():
    from sparseldp.estimation import stats

    x, prof = _rr_concentrated()
    k = prof.values.size
    p90 = stats.quantile(np.bincount(x, minlength=k) / x.size, 0.9, np.arange(k))
    lo, hi = prof.interval("quantile", q=0.9)
    cal = prof.calibrated_interval("quantile", q=0.9, rng=2)
    assert not lo <= p90 <= hi and cal.low <= p90 <= cal.high
    assert cal.low <= lo and hi <= cal.high and cal.kappa_low > 2 * 1.920729
    interp = prof.calibrated_interval("quantile", q=0.9, method="interpolated", rng=2)
    assert interp.low <= p90 + 0.5 and interp.kappa_low > 1.920729


def test_the_calibrated_variance_interval_covers_where_the_chi_square_one_misses():
    x, prof = _rr_concentrated()
    lo, hi = prof.interval("var")
    cal = prof.calibrated_interval("var", rng=4)
    assert not lo <= x.var() <= hi and cal.low <= x.var() <= cal.high
    assert cal.low <= lo and hi <= cal.high


def test_where_wilks_holds_the_calibrated_interval_stays_near_the_chi_square_one():
    mech, est = _bimodal("laplace", 100_000, seed=3)
    prof = est.profile(mech)
    for stat, kw in (("mean", {}), ("range", {"a": 30, "b": 50}), ("var", {}), ("quantile", {"q": 0.5})):
        lo, hi = prof.interval(stat, **kw)
        cal = prof.calibrated_interval(stat, rng=5, **kw)
        assert cal.low <= lo + 1e-9 and hi - 1e-9 <= cal.high
        if stat == "quantile":  # domain values: in the trough between the modes one value moves the CDF little
            assert cal.low >= lo - 2 and cal.high <= hi + 2
            continue
        assert cal.high - cal.low <= 1.6 * (hi - lo)  # thresholds of a few nats at most: not much wider
        assert max(cal.kappa_low, cal.kappa_high) < 5.0


@pytest.mark.parametrize("call, exc, words", [
    (lambda p: p.calibrated_interval("p"), ValueError, ["'p'", "one statistic"]),
    (lambda p: p.calibrated_interval("quantile", q=[0.5, 0.9]), ValueError, ["q", "single"]),
    (lambda p: p.calibrated_interval("quantile", q=1.5), ValueError, ["q", "1.5"]),
    (lambda p: p.calibrated_interval("mean", B=0), ValueError, ["B", "0"]),
    (lambda p: p.calibrated_interval("mean", max_rounds=0), ValueError, ["max_rounds", "0"]),
    (lambda p: p.calibrated_interval("mean", level=0.0), ValueError, ["level"]),
    (lambda p: p.calibrated_interval("cdf", x=[1, 2]), ValueError, ["x", "single"]),
])
def test_calibrated_interval_bad_input_gets_a_clear_error(call, exc, words):
    est = _counts(SparseLaplace(lam=0.4, s=9), [0.5, 0.3, 0.2], 200, seed=1)
    with pytest.raises(exc) as info:
        call(est.profile())
    for word in words:
        assert word in str(info.value)


def test_a_second_check_of_the_same_statistic_reuses_the_reports_deficit(monkeypatch):
    # the CLI checks the mean (7 draws), then tests it (sequential draws): the reports' own deficit is searched once
    from sparseldp.estimation._lr_calibration import _OBSERVED_TOL

    prof = _two_atoms_smoothed(4, 5)
    observed = []
    search = prof._search
    deficit = search.deficit
    monkeypatch.setattr(search, "deficit", lambda *a, **kw: observed.append(kw.get("tol")) or deficit(*a, **kw))
    first = prof.calibration("range", a=3, b=3, B=3, rng=1)
    second = prof.calibration("range", a=3, b=3, B=3, rng=2, sequential=True)
    other = prof.calibration("range", a=3, b=4, B=2, rng=1)
    assert observed.count(_OBSERVED_TOL) == 2  # the first statistic's once, the other one's once
    assert second.deficit == first.deficit and other.value != first.value


@pytest.mark.parametrize("mech, p, n, h, t0s", DEFICIT_CASES)
def test_the_interior_point_solves_the_profile_problem_itself(mech, p, n, h, t0s):
    # _ipm(profile=(g, t)): max loglik on g^T p = t in one solve; its point is feasible, within its gap of the
    # brute-force profile, and its multiplier's tilt is the one whose tilted MLE sits at t
    from sparseldp.estimation._ipm import _ipm

    est = _counts(mech, p, n, seed=7)
    model = _model(mech, est.domain)
    counts = np.asarray(est.counts, dtype=float)
    search = _search_of(model, counts, est.values, 1e-9, 10**6)
    Q = model.unscaled()
    Q = (Q.toarray() if hasattr(Q, "toarray") else np.asarray(Q))[:, counts > 0]
    c = counts[counts > 0]
    top = float(np.log(search.mle @ Q) @ c)
    h = np.asarray(h, dtype=float)
    g = (h - h.min()) / (h.max() - h.min())
    for t0 in t0s:
        t = (t0 - h.min()) / (h.max() - h.min())
        th0 = float(g @ search.mle)
        gg, tt = (g, t) if t > th0 else (1.0 - g, 1.0 - t)
        if abs(tt - (float(gg @ search.mle))) < 1e-6:
            continue
        info = {}
        q, _, conv, gap = _ipm(search._A, search._AT, search._c, float(search.n), 0.01, search._dense, search._band,
                               low_rank=search._low_rank, profile=(gg, tt, info))
        assert conv and gap <= 0.01
        assert q.sum() == pytest.approx(1.0) and float(gg @ q) == pytest.approx(tt, abs=1e-6)  # residual in the gap
        profile = top - _exact_deficit(Q, c, h, t0, top)
        ll = float(np.log(q @ Q) @ c)
        assert profile - gap - 1e-6 <= ll <= profile + 1e-6 + 1e-3 * max(top - profile, 1.0), (t0, ll, profile)
        beta = info["beta"]
        assert 0.0 < beta < 1.0
        fit = search._tilted(1.0 - beta * gg, search.mle, {})
        assert float(gg @ fit[0]) == pytest.approx(tt, abs=0.02)


def test_a_deficit_the_profile_solve_settles_takes_no_tilted_fit(monkeypatch):
    # the secant over tilted fits runs only where the one solve of the profile problem leaves the bracket open
    x, prof = _rr_concentrated()
    search = prof._search
    fits = []
    tilted = search._tilted
    monkeypatch.setattr(search, "_tilted", lambda *a, **kw: fits.append(1) or tilted(*a, **kw))
    v = prof.values.astype(float)
    for dt in (0.5, 2.0, -1.0):
        lo, hi = search.deficit(v, float(prof.mle @ v) + dt, tol=0.05)
        assert 0.0 < lo <= hi <= lo + 0.05
    assert fits == []


@pytest.mark.parametrize("which", ["rr", "laplace"])
def test_the_draws_mle_by_the_interior_point_alone_is_the_mle(which, monkeypatch):
    # calibration's draws fit their MLE by the interior point from the uniform start (direct=True), not EM first:
    # the same maximum within the certificate's tolerance, the same deficit within the brackets
    from sparseldp.estimation import mle as mle_module

    if which == "rr":
        x, prof = _rr_concentrated()
    else:
        mech, est = _bimodal("laplace", 20_000, seed=5)
        prof = est.profile(mech)
    gen = np.random.default_rng(3)
    from sparseldp.estimation._lr_calibration import _output_distribution

    counts = gen.multinomial(prof.n, _output_distribution(prof._model, prof.p)).astype(float)
    tol = prof._search._tol
    ems = []
    em = mle_module._em
    monkeypatch.setattr(mle_module, "_em", lambda *a, **kw: ems.append(1) or em(*a, **kw))
    direct = _search_of(prof._model, counts, prof.values, tol, 10**5, direct=True)
    assert ems == []  # no EM run
    monkeypatch.setattr(mle_module, "_em", em)
    first = _search_of(prof._model, counts, prof.values, tol, 10**5)
    assert abs(direct.loglik - first.loglik) <= tol + 1e-9
    v = prof.values.astype(float)
    t0 = float(direct.mle @ v) + 0.5 * float(np.sqrt(max(float(direct.mle @ v ** 2) - float(direct.mle @ v) ** 2, 1.0)))
    lo_d, hi_d = direct.deficit(v, t0)
    lo_f, hi_f = first.deficit(v, t0)
    assert lo_d <= hi_f + tol + 1e-6 and lo_f <= hi_d + tol + 1e-6


def test_draws_two_at_a_time_give_the_same_answers_as_one_at_a_time(monkeypatch):
    # the draws run side by side on mid-size dense channels; each search starts from its own copy of the tilt
    # memo, so the brackets (and the sequential test's stop) do not depend on the scheduling
    from sparseldp.estimation import _lr_calibration

    x, prof = _rr_concentrated()
    results = []
    for threads in (1, 2):
        monkeypatch.setattr(_lr_calibration, "draw_threads", lambda model, t=threads: t)
        full = prof.calibration("mean", B=5, rng=3)  # the reports' deficit: searched once, then kept
        seq = prof.calibration("range", a=0, b=4, B=6, rng=4, sequential=True)
        cal = prof.calibrated_interval("mean", B=9, rng=5, max_rounds=2)
        results.append((full.draws.tolist(), full.draws_low.tolist(), seq.draws.tolist(), (cal.low, cal.high)))
    assert results[0] == results[1]


def test_the_profile_solves_point_sits_at_t_whatever_the_statistics_top():
    # g need not reach 1 (an interpolated quantile's cell at the domain's end: g = [u, 0, ..., 0]): the solve's
    # point is mixed towards g's top value so that g^T point = t exactly, and t at or beyond the top is left to the
    # secant (None)
    est = _counts(SparseLaplace(lam=0.3, s=21), np.exp(-0.5 * ((np.arange(30) - 12) / 4.0) ** 2), 20_000, seed=1)
    search = est.profile(est.mechanism)._search
    g = np.zeros(30)
    g[12], g[13] = 0.5, 0.25
    th0 = float(g @ search.mle)
    for t in (th0 + 0.01, th0 + 0.05, 0.49):
        upper, lower, point, _, _ = search._profile_point(g, t, th0, 0.01)
        assert float(g @ point) == pytest.approx(t, abs=1e-12) and point.min() >= 0 and point.sum() == pytest.approx(1)
        assert lower <= upper + 1e-9
    assert search._profile_point(g, 0.5, th0, 0.01) is None and search._profile_point(g, 0.6, th0, 0.01) is None
