"""Statistics of an estimated distribution (sparseldp.estimation.stats): distances,
point statistics on exact small examples, and the parametric bootstrap's intervals
(contain the estimate, reproducible for a seed, shrink with n).  Coverage is measured
by benchmarks/bench_coverage.py, not here."""

import dataclasses
import pickle
import re
import warnings

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sparseldp import SparseLaplace
from sparseldp.estimation import estimate_frequencies, estimate_frequencies_full
from sparseldp.estimation import intervals as boot
from sparseldp.estimation import stats
from sparseldp.sampling import sample

probs = arrays(float, st.integers(1, 12), elements=st.floats(0, 1)).filter(lambda a: a.sum() > 1e-3).map(
    lambda a: a / a.sum())


def _pair(draw_len=8):
    return st.tuples(
        arrays(float, draw_len, elements=st.floats(0, 1)).filter(lambda a: a.sum() > 1e-3).map(lambda a: a / a.sum()),
        arrays(float, draw_len, elements=st.floats(0, 1)).filter(lambda a: a.sum() > 1e-3).map(lambda a: a / a.sum()),
    )


# -- distances -----------------------------------------------------------------------

@given(probs)
def test_distance_to_itself_is_zero(p):
    for metric in ("tv", "w1", "ks"):
        assert stats.distance(p, p, metric) == pytest.approx(0.0, abs=1e-12)


@given(_pair())
def test_distance_symmetric_and_bounded(pq):
    p, q = pq
    tv, ks, w1 = (stats.distance(p, q, m) for m in ("tv", "ks", "w1"))
    for m in ("tv", "w1", "ks"):
        assert stats.distance(p, q, m) == pytest.approx(stats.distance(q, p, m), abs=1e-12)
    assert 0.0 <= ks <= tv + 1e-12 <= 1.0 + 1e-12  # |F_p - F_q| <= TV pointwise
    assert w1 <= 7 * tv + 1e-12  # W1 <= diameter * TV on 0..7
    assert ks <= w1 + 1e-12  # unit gaps: max <= sum


@pytest.mark.parametrize("shift", [0, 1, 5, 17])
def test_w1_of_shifted_point_masses_is_the_shift(shift):
    k = 20
    p, q = np.zeros(k), np.zeros(k)
    p[2], q[2 + shift] = 1.0, 1.0
    assert stats.distance(p, q, "w1") == pytest.approx(shift)
    assert stats.distance(p, q, "tv") == (1.0 if shift else 0.0)
    assert stats.distance(p, q, "ks") == (1.0 if shift else 0.0)
    # gaps scale W1 only
    v = 3 * np.arange(k) + 10
    assert stats.distance(p, q, "w1", values=v) == pytest.approx(3 * shift)


def test_distance_exact_values():
    p, q = np.array([0.5, 0.5, 0.0]), np.array([0.0, 0.5, 0.5])
    assert stats.distance(p, q) == pytest.approx(0.5)
    assert stats.distance(p, q, "ks") == pytest.approx(0.5)
    assert stats.distance(p, q, "w1") == pytest.approx(1.0)
    # unsigned and extreme int64 values: compared and differenced without wrapping around
    assert stats.distance(p, q, "w1", values=np.array([0, 1, 5], np.uint8)) == pytest.approx(0.5 * 1 + 0.5 * 4)
    assert stats.distance([0.5, 0.5], [1.0, 0.0], "w1", values=np.array([-2**63, 2**63 - 1])) == pytest.approx(
        0.5 * 2.0**64)


@pytest.mark.parametrize("args, kw, exc, text", [
    (([0.5, 0.5], [0.5, 0.5]), {"metric": "l2"}, ValueError, "metric must be 'tv', 'w1' or 'ks'; got 'l2'"),
    (([0.5, 0.5], [0.5, 0.5]), {"metric": 1}, TypeError, "metric must be"),
    (([0.5, 0.5], [1.0]), {}, ValueError, "same length"),
    (([0.5, 0.6], [0.5, 0.5]), {}, ValueError, "must sum to 1"),
    (([-0.5, 1.5], [0.5, 0.5]), {}, ValueError, ">= 0"),
    (("ab", [0.5, 0.5]), {}, TypeError, "p must be an array"),
    (([0.5, 0.5], [0.5, 0.5]), {"values": [1, 1]}, ValueError, "strictly increasing"),
    (([0.5, 0.5], [0.5, 0.5]), {"values": [1, 2, 3]}, ValueError, "length 2"),
    # np.diff wraps around on unsigned values: 5, 1, 0 are not increasing
    (([0.2, 0.3, 0.5], [0.5, 0.3, 0.2]), {"values": np.array([5, 1, 0], np.uint8)}, ValueError, "strictly increasing"),
    (([0.5, 0.5], [0.5, 0.5]), {"values": [True, False]}, TypeError, "values must be"),
    (([True, False], [0.5, 0.5]), {}, TypeError, "p must be an array of probabilities; got dtype bool"),
    ((["0.5", "0.5"], [0.5, 0.5]), {}, TypeError, "p must be an array of probabilities; got dtype <U3"),
])
def test_distance_bad_input(args, kw, exc, text):
    with pytest.raises(exc, match=text.replace("(", r"\(").replace(")", r"\)")):
        stats.distance(*args, **kw)


# -- point statistics --------------------------------------------------------------------

P4 = np.array([0.1, 0.4, 0.0, 0.5])  # on values 0..3


def test_point_statistics_exact():
    assert stats.mean(P4) == pytest.approx(0.4 + 1.5)
    assert stats.var(P4) == pytest.approx(0.4 + 4.5 - 1.9**2)
    assert stats.quantile(P4, 0.1) == 0  # cdf(0) = 0.1 reaches 0.1 exactly
    assert stats.quantile(P4, 0.5) == 1
    assert stats.quantile(P4, 0.50001) == 3  # 2 has no mass
    np.testing.assert_array_equal(stats.quantile(P4, [0.05, 0.3, 0.9]), [0, 1, 3])
    np.testing.assert_allclose(stats.cdf(P4, [-1, 0, 0.5, 1, 2, 3, 10]), [0, 0.1, 0.1, 0.5, 0.5, 1, 1])
    assert stats.range_prob(P4, 1, 2) == pytest.approx(0.4)
    assert stats.range_prob(P4, 0.5, 3) == pytest.approx(0.9)
    assert stats.range_prob(P4, 2, 2) == 0.0
    v = np.array([10, 20, 30, 40])
    assert stats.quantile(P4, 0.5, v) == 20
    assert stats.cdf(P4, 25, v) == pytest.approx(0.5)
    assert stats.mean(P4, v) == pytest.approx(29.0)


def test_points_beyond_the_doubles_are_infinite():
    assert stats.cdf(P4, 10**400) == 1.0 and stats.cdf(P4, -10**400) == 0.0


def test_a_tiny_q_is_reached_where_the_mass_is():
    # the cumsum slack is relative to q: an absolute 1e-12 let every value "reach" q < 1e-12
    p = np.array([0.0, 0.0, 1e-20, 0.0, 1.0 - 1e-20])
    assert stats.quantile(p, 1e-13) == 4
    assert stats.quantile(p, 1e-21) == 2
    assert 3.5 <= stats.quantile(p, 1e-13, method="interpolated") <= 4.5
    bs = boot.Bootstrap(p=p, values=np.arange(5), replicates=np.stack([p, p]), method="em")
    assert bs.interval("quantile", q=1e-13) == (4.0, 4.0)


@given(probs, st.floats(1e-300, 1 - 1e-6))
def test_quantile_inverts_cdf(p, q):
    x = stats.quantile(p, q)
    assert stats.cdf(p, x) >= q - 1e-9
    if x > 0:
        assert stats.cdf(p, x - 1) < q + 1e-9


def test_statistics_vectorize_over_rows():
    P = np.stack([P4, P4[::-1]])
    np.testing.assert_allclose(stats.mean(P), [1.9, 1.1])
    assert stats.quantile(P, [0.5, 0.9]).shape == (2, 2)
    assert stats.range_prob(P, 0, 1).shape == (2,)


@pytest.mark.parametrize("fn, args, exc, text", [
    (stats.quantile, (P4, 0.0), ValueError, r"q must lie in \(0, 1\); got 0.0"),
    (stats.quantile, (P4, 1.5), ValueError, r"q must lie in \(0, 1\); got 1.5"),
    (stats.quantile, (P4, "a"), TypeError, "q must be"),
    (stats.range_prob, (P4, 3, 1), ValueError, "a must be <= b; got a = 3.0 > b = 1.0"),
    (stats.cdf, (P4, float("nan")), ValueError, "x must not be nan"),
    (stats.cdf, (P4, [True]), TypeError, "x must be a real number or an array of them; got dtype bool"),
    (stats.cdf, (P4, ["3"]), TypeError, "x must be a real number or an array of them; got dtype <U1"),
    (stats.cdf, (P4, np.datetime64("2020-01-01")), TypeError, "got dtype datetime64"),
    (stats.cdf, (P4, [1, None]), TypeError, "x must be a real number or an array of them; got element NoneType"),
    (stats.quantile, (P4, ["0.5"]), TypeError, "q must be"),
    (stats.range_prob, (P4, [1, 2, 3], [4, 5]), ValueError,
     r"a and b must be scalars or arrays that broadcast together; got shapes \(3,\) and \(2,\)"),
])
def test_statistics_bad_input(fn, args, exc, text):
    with pytest.raises(exc, match=text):
        fn(*args)


# -- bootstrap ---------------------------------------------------------------------------

MECH = SparseLaplace(lam=0.5, s=21)
DOM = (0, 29)


def _estimate(n, method="ems", seed=0):
    gen = np.random.default_rng(seed)
    v = np.arange(30)
    p = np.exp(-0.5 * ((v - 12) / 5) ** 2)
    p /= p.sum()
    y = sample(MECH, gen.choice(30, size=n, p=p), rng=gen)
    return estimate_frequencies(y, MECH, domain=DOM, method=method, return_info=True)


@pytest.fixture(scope="module")
def est():
    return _estimate(20_000)


@pytest.mark.parametrize("method", ["ems", "em", "inversion"])
def test_bootstrap_intervals_contain_the_estimate(method):
    e = _estimate(20_000, method)
    bs = boot.bootstrap(e, MECH, B=40 if method == "em" else 100, rng=1)
    assert bs.replicates.shape == (bs.B, 30)
    np.testing.assert_allclose(bs.replicates.sum(axis=1), 1.0)
    for stat, kw in [("mean", {}), ("var", {}), ("quantile", {"q": 0.5}), ("quantile", {"q": 0.9}),
                     ("cdf", {"x": 10}), ("range", {"a": 5, "b": 15})]:
        t = bs.point(stat, **kw)
        plo, phi = bs.interval(stat, kind="percentile", **kw)
        blo, bhi = bs.interval(stat, kind="basic", **kw)
        hlo, hhi = bs.interval(stat, kind="hull", **kw)
        slo, shi = bs.interval(stat, kind="span", **kw)
        # basic = percentile reflected about the estimate (before clipping to the statistic's range);
        # hull = the smallest interval holding both; span (the default) = from the estimate and its
        # bias-corrected value, z standard deviations of the replicates further out on each side
        if stat != "quantile":  # quantiles invert the CDF band instead
            assert blo == pytest.approx(max(2 * t - phi, 0.0)) and bhi == pytest.approx(2 * t - plo)
            assert hlo == pytest.approx(min(blo, plo)) and hhi == pytest.approx(max(bhi, phi))
            tb = bs.distribution(stat, **kw)
            c, se = 2 * t - tb.mean(), tb.std(ddof=1)
            z = scipy.stats.norm.ppf(0.975)
            assert slo == pytest.approx(max(min(t, c) - z * se, 0.0), rel=1e-12, abs=1e-15)
            assert shi == pytest.approx(max(t, c) + z * se, rel=1e-12, abs=1e-15)
            assert slo <= t <= shi  # the span always holds the estimate
        assert hlo <= min(blo, plo) + 1e-12 and max(bhi, phi) - 1e-12 <= hhi
        assert bs.interval(stat, **kw) == (slo, shi)
        if stat != "var":
            # EMS's smoothing bias on the variance is systematic (each refit smooths again), so
            # there the replicates sit to one side of the estimate; elsewhere they straddle it
            assert plo <= t <= phi, (stat, plo, t, phi)
            assert blo <= t <= bhi, (stat, blo, t, bhi)
    lo, hi = bs.interval("p")
    assert lo.shape == hi.shape == (30,)
    assert np.all((0 <= lo) & (lo <= hi) & (hi <= 1))
    if method == "ems":
        # not for the MLE: its frequencies at the boundary (p_j ~ 0) are pushed up by every refit
        assert np.all((lo <= e.p + 1e-12) & (e.p <= hi + 1e-12))


def test_bootstrap_deterministic_for_a_seed(est):
    a = boot.bootstrap(est, MECH, B=50, rng=7)
    b = boot.bootstrap(est, MECH, B=50, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(a.replicates, b.replicates)
    assert a.interval("quantile", q=0.5) == b.interval("quantile", q=0.5)
    c = boot.bootstrap(est, MECH, B=50, rng=8)
    assert not np.array_equal(a.replicates, c.replicates)


def test_bootstrap_reuses_the_fit_s_model_and_gets_the_same_replicates():
    """An estimate fit on a channel keeps its model for the bootstrap (a cache: the same replicates without
    it, dropped by pickling, used only for that very channel); one fit on a mechanism on Z keeps none."""
    import pickle

    from sparseldp.estimation import model as model_mod

    ch = MECH.to_channel(DOM)
    gen = np.random.default_rng(0)
    y = sample(MECH, gen.integers(0, 30, 5_000), rng=gen)
    est = estimate_frequencies(y, ch, domain=DOM, method="ems", return_info=True)
    kept = est._channel_model[1]
    assert model_mod.model_for(est, ch) is kept
    assert model_mod.model_for(est, MECH.to_channel(DOM)) is not kept  # an equal channel, another object
    bare = pickle.loads(pickle.dumps(est))
    assert bare == est and not hasattr(bare, "_channel_model")
    a = boot.bootstrap(est, ch, B=30, rng=4)
    b = boot.bootstrap(bare, ch, B=30, rng=4)
    np.testing.assert_array_equal(a.replicates, b.replicates)
    assert not hasattr(estimate_frequencies(y, MECH, domain=DOM, return_info=True), "_channel_model")


def test_bootstrap_intervals_shrink_with_n():
    widths = []
    for n in (5_000, 80_000):
        bs = boot.bootstrap(_estimate(n), MECH, B=100, rng=3)
        lo, hi = bs.interval("mean")
        rlo, rhi = bs.interval("range", a=5, b=15)
        widths.append((hi - lo, rhi - rlo))
    # standard errors scale as n^-1/2: 16x the reports, about 4x narrower
    assert widths[1][0] < widths[0][0] / 2
    assert widths[1][1] < widths[0][1] / 2


def test_bootstrap_bad_input(est):
    with pytest.raises(TypeError, match="estimate must be a FrequencyEstimate"):
        boot.bootstrap(est.p, MECH)
    with pytest.raises(ValueError, match="B must be"):
        boot.bootstrap(est, MECH, B=1)
    # more replicates than memory holds: a clear error before any draw (numpy's MemoryError before), naming the bound
    too_many = r"B must be an integer in \[2, [0-9,]+\] for this channel .*; got 1,000,000,000"
    with pytest.raises(ValueError, match=too_many):
        boot.bootstrap(est, MECH, B=10**9)
    with pytest.raises(TypeError, match="rng must be"):
        boot.bootstrap(est, MECH, rng="seed")
    with pytest.raises(ValueError, match="precision must be 'single' or 'double'; got 'float'"):
        boot.bootstrap(est, MECH, precision="float")
    with pytest.raises(TypeError, match="precision must be 'single' or 'double'; got int"):
        boot.bootstrap(est, MECH, precision=32)
    bs = boot.bootstrap(est, MECH, B=20, rng=0)
    with pytest.raises(ValueError, match="stat must be one of"):
        bs.interval("median")
    with pytest.raises(TypeError, match="takes keyword arguments"):
        bs.interval("quantile")
    with pytest.raises(ValueError, match="kind must be 'span', 'hull', 'basic' or 'percentile'; got 'bca'"):
        bs.interval("mean", kind="bca")
    for level in (1.0, 0.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match=r"level must be a real number in \(0, 1\); got "):
            bs.interval("mean", level=level)
    with pytest.raises(TypeError, match=r"level must be a real number in \(0, 1\); got str"):
        bs.interval("mean", level="0.9")


def test_statistic_with_and_without_ci(est):
    bs = boot.bootstrap(est, MECH, B=30, rng=2)
    assert boot.statistic(est, "mean") == pytest.approx(stats.mean(est.p, est.values))
    assert boot.statistic(est, "quantile", q=0.5) == stats.quantile(est.p, 0.5, est.values)
    t, (lo, hi) = boot.statistic(est, "range", ci=bs, a=5, b=15)
    assert t == pytest.approx(stats.range_prob(est.p, 5, 15, est.values))
    assert (lo, hi) == bs.interval("range", a=5, b=15)
    with pytest.raises(TypeError, match="ci must be None, a Bootstrap"):
        boot.statistic(est, "mean", ci=True)
    with pytest.raises(ValueError, match="ci must be a Bootstrap of this estimate"):
        boot.statistic(_estimate(5_000), "mean", ci=bs)


def test_ci_of_an_estimate_on_another_domain_is_refused():
    from sparseldp.estimation import FrequencyEstimate

    a = FrequencyEstimate(np.full(30, 1 / 30), (0, 29), "em", 100, 0, True, 0.0, 0.0)
    b = FrequencyEstimate(np.full(30, 1 / 30), (10, 39), "em", 100, 0, True, 0.0, 0.0)
    bs = b.bootstrap(MECH, B=5, rng=0)
    with pytest.raises(ValueError, match=r"ci must be a Bootstrap of this estimate \(its values run from 10 to 39, "
                                         r"the estimate's domain is \(0, 29\)\)"):
        a.mean(ci=bs)


@pytest.mark.parametrize("level", [5, float("nan"), 1.0, 1 - 1e-16, 0.0])
def test_level_is_checked_with_and_without_ci(est, level):
    bs = boot.bootstrap(est, MECH, B=5, rng=0)
    for ci in (None, bs):
        with pytest.raises(ValueError, match=r"level must be a real number in \(0, 1"):
            est.mean(ci=ci, level=level)
    assert est.mean(ci=bs, level=1 - 2.0**-52)[1][0] <= est.mean()  # the largest level allowed works


def test_results_compare_by_value_and_stay_read_only_through_pickle(est):
    import copy
    import pickle

    bs = boot.bootstrap(est, MECH, B=5, rng=0)
    for obj in (est, bs):
        back = pickle.loads(pickle.dumps(obj))
        assert back == obj and copy.deepcopy(obj) == obj and back is not obj
        assert not any(a.flags.writeable for a in vars(back).values() if isinstance(a, np.ndarray))
        with pytest.raises(TypeError, match="unhashable"):
            hash(obj)
    assert est != _estimate(5_000)
    assert bs != boot.bootstrap(est, MECH, B=5, rng=1)
    assert not bs.values.flags.writeable


@pytest.mark.parametrize("field, value, exc, text", [
    ("p", np.array([0.5, 0.2]), ValueError, "p must sum to 1"),
    ("p", np.zeros(2), ValueError, "p must sum to 1"),
    ("p", np.array([0.5, 0.25, 0.25]), ValueError, r"p must be a 1-D array with one frequency per value of the "
                                                   r"domain \(2\); got shape \(3,\)"),
    ("n", 0, ValueError, r"n must be an integer >= 1; got 0"),
    ("domain", (0, 2**60), ValueError, r"domain must lie within \[-2\^53, 2\^53\]"),
    ("method", "mle", ValueError, "method must be"),
])
def test_a_hand_built_estimate_is_checked(field, value, exc, text):
    from sparseldp.estimation import FrequencyEstimate

    kw = dict(p=np.array([0.5, 0.5]), domain=(0, 1), method="em", n=10, iterations=0, converged=True, loglik=0.0,
              gap=0.0)
    with pytest.raises(exc, match=text):
        FrequencyEstimate(**{**kw, field: value})
    user_p = np.array([0.25, 0.75])
    e = FrequencyEstimate(**{**kw, "p": user_p})
    assert user_p.flags.writeable and not e.p.flags.writeable  # the caller's array keeps its flags


def test_estimation_refuses_a_domain_beyond_the_exact_doubles():
    m = SparseLaplace(lam=0.5, s=7)
    with pytest.raises(ValueError, match=r"domain must lie within \[-2\^53, 2\^53\] for estimation"):
        estimate_frequencies(np.full(30, 2**60, dtype=np.int64), m, domain=(2**60, 2**60 + 5))


def test_a_one_value_domain_bootstraps_without_a_zero_spread_warning():
    m = SparseLaplace(lam=0.5, s=7)
    e = estimate_frequencies(m.sample(np.full(100, 5), rng=0), m, domain=(5, 5), return_info=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert e.bootstrap(m, B=5, rng=0).interval("mean") == (5.0, 5.0)


def test_quantile_interval_inverts_the_cdf_band():
    v = np.arange(4)
    other = np.array([0.0, 0.6, 0.0, 0.4])  # median 1, like P4; cdf(0) 0 vs 0.1
    reps = np.stack([P4] * 10 + [other] * 10)
    bs = boot.Bootstrap(p=P4, values=v, replicates=reps, method="em")
    # percentile CDF band: [0, 0.1] at 0, [0.5, 0.6] at 1, [0.5, 0.6] at 2, 1 at 3
    assert bs.interval("quantile", q=0.5, kind="percentile") == (1.0, 1.0)
    assert bs.interval("quantile", q=0.55, kind="percentile") == (1.0, 3.0)
    assert bs.interval("quantile", q=0.05, kind="percentile") == (0.0, 1.0)
    # the hull holds the percentile and the basic (reflected) intervals
    for q in (0.05, 0.5, 0.55):
        lo, hi = bs.interval("quantile", q=q, kind="hull")
        for kind in ("percentile", "basic"):
            klo, khi = bs.interval("quantile", q=q, kind=kind)
            assert lo <= klo and khi <= hi
    # the default span, on the CDF: F_hat = (0.1, 0.5, 0.5, 1), replicate mean (0.05, 0.55, 0.55, 1), so the
    # corrected values are (0.15, 0.45, 0.45, 1) and sd = 0.05 sqrt(20/19) = 0.0513 (0 at 3): the band is
    # [0, 0.2505] at 0, [0.3495, 0.6005] at 1 and 2, {1} at 3
    assert bs.interval("quantile", q=0.24) == (0.0, 1.0)  # 0's upper end 0.2505 reaches 0.24 ...
    assert bs.interval("quantile", q=0.26) == (1.0, 1.0)  # ... but not 0.26
    assert bs.interval("quantile", q=0.5) == (1.0, 3.0)  # the lower ends at 1 and 2 stay below 0.5


@pytest.mark.parametrize("reg", ["em steps=6", "em steps=0", "ems weight=0.125", "ems smooth=1", "em mle"])
def test_bootstrap_refits_the_auto_member(reg):
    """An 'auto' estimate is bootstrapped by refitting the member it chose (as recorded)."""
    import dataclasses

    import sparseldp as sl
    from sparseldp.estimation import estimate_frequencies_full

    m = sl.SparseLaplace(lam=0.5, s=7)
    x = np.random.default_rng(1).integers(0, 30, 20_000)
    est = estimate_frequencies_full(m.sample(x, rng=1), m, domain=(0, 29), method="auto")
    est = dataclasses.replace(est, regularization=reg)
    if reg == "em steps=0":  # no step: every replicate stays at the uniform start (and bootstrap says so)
        with pytest.warns(RuntimeWarning, match="are all the same distribution"):
            b = est.bootstrap(m, rng=0, B=50)
        assert b.replicates.shape == (50, 30) and b.converged == 50
        np.testing.assert_allclose(b.replicates, 1.0 / 30)
        return
    b = est.bootstrap(m, rng=0, B=50)
    assert b.replicates.shape == (50, 30) and b.converged == 50
    value, (lo, hi) = est.mean(ci=b)
    assert lo <= value <= hi and hi - lo < 1.0


@pytest.mark.parametrize("reg", ["em steps=3000", "em flow=3000"])
def test_dense_em_step_refits_single_precision_and_blocks(reg):
    """On a dense channel the plain EM steps of ``"em steps=t"`` and ``"em flow=T"`` refits run in two
    blocks (``_parallel.dense_step_blocks``), on the outputs some replicate has, in float32 by default:
    in double they are the plain EM steps on all outputs in one batch (to rounding), and in single
    their statistics stay within 0.5 % of the replicate spread."""
    import dataclasses

    import sparseldp as sl
    from sparseldp.estimation import _model, _parallel, estimate_frequencies_full
    from sparseldp.estimation._em_members import _uniform_em

    m, k = sl.SparseGaussian(sigma=8.0, s=81), 40
    model = _model(m, (0, k - 1))
    assert model.dense and _parallel.dense_step_blocks(model.k, model.m, 40) == 2
    x = np.random.default_rng(4).normal(18, 6, 20_000).round().clip(0, k - 1).astype(int)
    est = estimate_frequencies_full(m.sample(x, rng=1), m, domain=(0, k - 1), method="auto")
    est = dataclasses.replace(est, regularization=reg)
    # plain steps (relaxed=False): the over-relaxed ones are test_relaxed_em_step_refits_agree_with_plain_steps's
    runs = {pr: est.bootstrap(m, B=40, rng=2, precision=pr, relaxed=False) for pr in ("single", "double")}
    assert runs["single"].precision == "single" and runs["double"].precision == "double"
    one, two = runs["single"].replicates, runs["double"].replicates
    assert one.dtype == np.float64 and np.allclose(one.sum(axis=1), 1.0, rtol=1e-12)
    assert not np.array_equal(one, two)
    # the same replicate histograms, refit directly: every output, one batch, double
    q = np.maximum(np.asarray(model.unscaled().T @ est.p).ravel(), 0.0)
    C = np.random.default_rng(2).multinomial(est.n, q / q.sum(), size=40).astype(float)
    A, AT = model.columns(np.arange(model.m))
    ref = _uniform_em(A, AT, C.T, 3000).T
    ref /= ref.sum(axis=1, keepdims=True)
    assert np.abs(two - ref).max() <= 1e-9
    v = np.arange(k)
    for f in (lambda P: P @ v, lambda P: P @ v**2 - (P @ v) ** 2, lambda P: P[:, :18].sum(axis=1)):
        assert np.abs(f(one) - f(two)).max() < 0.005 * f(two).std()


def test_em_step_refits_take_fft_products_on_mid_size_sparse_channels():
    """A window on Z with 20,000-200,000 stored entries: a single fit keeps the sparse products, the
    bootstrap's "em steps=t" refits (blocks of at least 16 rows) take the FFT ones
    (``_toeplitz._MIN_NNZ_BATCH``): in double they are the sparse refits to rounding, in single (the
    default) their statistics stay within 0.5 % of the replicate spread."""
    import dataclasses

    import sparseldp as sl
    from sparseldp.estimation import _model, _toeplitz, estimate_frequencies_full
    from sparseldp.estimation._em_members import _uniform_em

    m, k = sl.SparseLaplace(lam=0.3, s=41), 600
    model = _model(m, (0, k - 1))
    assert _toeplitz._MIN_NNZ_BATCH <= model.nnz < _toeplitz._MIN_NNZ and not model.dense
    everything = np.arange(model.m)
    assert not isinstance(model.fast_columns(everything)[0], _toeplitz._ConvA)
    assert isinstance(model.fast_columns(everything, batch=20)[0], _toeplitz._ConvA)
    x = np.random.default_rng(5).normal(250, 60, 40_000).round().clip(0, k - 1).astype(int)
    est = estimate_frequencies_full(m.sample(x, rng=1), m, domain=(0, k - 1), method="auto")
    est = dataclasses.replace(est, regularization="em steps=200")
    runs = {pr: est.bootstrap(m, B=40, rng=2, precision=pr) for pr in ("single", "double")}
    assert runs["single"].precision == "single" and runs["double"].precision == "double"
    one, two = runs["single"].replicates, runs["double"].replicates
    q = np.maximum(np.asarray(model.unscaled().T @ est.p).ravel(), 0.0)
    C = np.random.default_rng(2).multinomial(est.n, q / q.sum(), size=40).astype(float)
    A, AT = model.columns(everything)  # the sparse products, one batch, double
    ref = _uniform_em(A, AT, C.T, 200).T
    ref /= ref.sum(axis=1, keepdims=True)
    assert np.abs(two - ref).max() <= 1e-9 and not np.array_equal(two, ref)  # FFT: equal to rounding
    v = np.arange(k)
    for f in (lambda P: P @ v, lambda P: P @ v**2 - (P @ v) ** 2, lambda P: P[:, :250].sum(axis=1)):
        assert np.abs(f(one) - f(two)).max() < 0.005 * f(two).std()


def test_single_precision_refits_stay_far_below_the_replicate_spread():
    """``precision="single"`` (the default) runs the long-window "em steps=t" refits' FFT products in
    float32: the same replicate histograms refitted both ways give statistics within 0.5 % of the
    replicate spread (Monte Carlo moves 95 % interval ends by about a tenth of it at B = 200),
    per-value interval ends within 1 % of their width where there is mass (measured: 2e-5, 7e-5); every other
    refit, and every channel without FFT products, stays in double."""
    import dataclasses

    import sparseldp as sl
    from sparseldp.estimation import estimate_frequencies_full

    m, k = sl.SparseLaplace(lam=0.1, s=275), 1500
    x = np.concatenate([np.random.default_rng(3).normal(500, 120, 30_000).round().clip(0, k - 1),
                        np.full(6_000, 1100)]).astype(int)
    with warnings.catch_warnings():  # 30 steps: a fit to resample from, not a converged one
        warnings.simplefilter("ignore", RuntimeWarning)
        est = estimate_frequencies_full(m.sample(x, rng=1), m, domain=(0, k - 1), method="em", max_iter=30)
    est = dataclasses.replace(est, method="auto", regularization="em steps=300")
    runs = {pr: est.bootstrap(m, B=40, rng=2, precision=pr) for pr in ("single", "double")}
    assert runs["single"].precision == "single" and runs["double"].precision == "double"
    one, two = runs["single"].replicates, runs["double"].replicates
    assert one.dtype == np.float64 and np.allclose(one.sum(axis=1), 1.0, rtol=1e-12)
    assert not np.array_equal(one, two)  # it did run in single precision
    v = np.arange(k)
    for f in (lambda P: P @ v, lambda P: P @ v**2 - (P @ v) ** 2, lambda P: P[:, :701].sum(axis=1),
              lambda P: P[:, 1090:1111].sum(axis=1)):
        assert np.abs(f(one) - f(two)).max() < 0.005 * f(two).std()
    lo1, hi1 = np.quantile(one, [0.025, 0.975], axis=0)
    lo2, hi2 = np.quantile(two, [0.025, 0.975], axis=0)
    mass = est.p > 1e-3 * est.p.max()
    err = np.maximum(np.abs(lo1 - lo2), np.abs(hi1 - hi2))[mass]
    assert np.all(err <= 0.01 * (hi2 - lo2)[mass])
    # the MLE's refits, and a short window's (no FFT products), are double whatever precision says
    with warnings.catch_warnings():  # 5 evaluations: only the precision is looked at
        warnings.simplefilter("ignore", RuntimeWarning)
        assert dataclasses.replace(est, method="em").bootstrap(m, B=4, rng=2, max_iter=5).precision == "double"
    small = sl.SparseLaplace(lam=0.5, s=7)
    e = estimate_frequencies_full(small.sample(np.arange(30).repeat(20), rng=1), small, domain=(0, 29),
                                  method="auto")
    e = dataclasses.replace(e, regularization="em steps=20")
    assert e.bootstrap(small, B=4, rng=0).precision == "double"


def _stopped_em_estimate(m, k, x, t, flow=False):
    """An ``auto`` estimate whose member is ``"em steps=t"`` (``t`` plain EM steps from the uniform start on
    the reports' counts, double, sparse or dense products) or with ``flow`` ``"em flow=t"``, whatever
    ``auto`` itself would choose."""
    from sparseldp.estimation import _model, estimate_frequencies_full
    from sparseldp.estimation._em_members import _flow_fits, _uniform_em
    from sparseldp.estimation.model import checked_counts

    est = estimate_frequencies_full(m.sample(x, rng=1), m, domain=(0, k - 1), method="auto")
    model = _model(m, (0, k - 1))
    c = np.asarray(checked_counts(est, model), dtype=float)
    A, AT = model.columns(np.arange(model.m))
    if flow:
        obs = np.flatnonzero(c > 0)
        A, AT = model.columns(obs)
        P, failed = _flow_fits(A, AT, c[obs][:, None], t)
        assert not failed[0]
        p = P[:, 0]
    else:
        p = _uniform_em(A, AT, c[:, None], t)[:, 0]
    return dataclasses.replace(est, p=p / p.sum(), regularization=f"em {'flow' if flow else 'steps'}={t}"), model


@pytest.mark.filterwarnings("ignore::sparseldp.estimation.ShapeWarning")  # a wide kernel, on purpose
@pytest.mark.parametrize("case", ["fft", "dense", "flow"])
def test_relaxed_em_step_refits_agree_with_plain_steps(case, monkeypatch):
    """``relaxed=True`` (the default) refits ``"em steps=t"`` (``t >= 300``) along the EM flow by
    Runge-Kutta-Chebyshev steps, or else with about ``4 t / 7`` over-relaxed steps, each checked on the
    estimate's own counts: the mean's, variance's, a range's and the CDF's replicates stay within 2 % of their
    spread of the plain steps' on the same histograms, per-value 95 % ends within 2 % of their width where
    there is mass; where the Chebyshev check fails the over-relaxed steps run, and where that fails too (its
    tolerance set to 0 here), every replicate is refit with plain steps, bit for bit those of
    ``relaxed=False``; below 300 steps, plain steps.  ``"em flow=T"``: the cap's plain steps before the
    flow the same way."""
    from sparseldp.estimation import refits

    rng = np.random.default_rng(3)
    if case == "fft":  # a window of 275 on 1,500 values: FFT products in blocks
        m, k, t = SparseLaplace(lam=0.1, s=275), 1500, 900
        x = np.concatenate([rng.normal(500, 120, 30_000).round().clip(0, k - 1), np.full(6_000, 1100)])
    else:  # a dense channel: two blocks of matrix products ("flow": the cap's 20,000 steps, then the flow)
        import sparseldp as sl

        m, k, t = sl.SparseGaussian(sigma=8.0, s=81), 40, 1200 if case == "dense" else 40_000
        x = rng.normal(18, 6, 20_000).round().clip(0, k - 1)
    est, model = _stopped_em_estimate(m, k, x.astype(int), t, flow=case == "flow")
    assert model.dense == (case != "fft")
    plain = est.bootstrap(m, B=40, rng=2, relaxed=False)
    assert not plain.relaxed and plain.refit_steps == "plain"
    two = plain.replicates
    v = np.arange(k)
    cut = int(np.searchsorted(np.cumsum(est.p), 0.5))
    lo2, hi2 = np.quantile(two, [0.025, 0.975], axis=0)
    mass = est.p > 1e-3 * est.p.max()
    agrees = refits._relaxed_agrees
    calls = []

    def not_the_first(*args):  # the first scheme tried (Chebyshev) fails its check, the next is judged
        calls.append(1)
        return len(calls) > 1 and agrees(*args)

    fast = est.bootstrap(m, B=40, rng=2)
    monkeypatch.setattr(refits, "_relaxed_agrees", not_the_first)
    second = est.bootstrap(m, B=40, rng=2)
    monkeypatch.undo()
    assert (fast.refit_steps, second.refit_steps) == ("chebyshev", "over-relaxed") and fast.relaxed and second.relaxed
    for one in (fast.replicates, second.replicates):
        assert not np.array_equal(one, two) and np.allclose(one.sum(axis=1), 1.0, rtol=1e-12)
        for f in (lambda P: P @ v, lambda P: P @ v**2 - (P @ v) ** 2, lambda P: P[:, :cut].sum(axis=1),
                  lambda P: P[:, cut // 2:cut + cut // 2].sum(axis=1)):
            assert np.abs(f(one) - f(two)).max() < 0.02 * f(two).std()
        lo1, hi1 = np.quantile(one, [0.025, 0.975], axis=0)
        assert np.all(np.maximum(np.abs(lo1 - lo2), np.abs(hi1 - hi2))[mass] <= 0.02 * (hi2 - lo2)[mass])
    monkeypatch.setattr(refits, "_RELAXED_TOL", 0.0)  # both checks fail: plain steps for every replicate
    back = est.bootstrap(m, B=40, rng=2)
    assert not back.relaxed and back.refit_steps == "plain" and np.array_equal(back.replicates, two)
    monkeypatch.undo()
    short, _ = _stopped_em_estimate(m, k, x.astype(int), 200)
    assert short.bootstrap(m, B=20, rng=2).refit_steps == "plain"


@given(s=st.integers(2, 60), frac=st.floats(0.0, 1.0))
@settings(max_examples=60, deadline=None)
def test_rkc_steps_are_stable_on_their_interval_and_second_order(s, frac):
    """The Runge-Kutta-Chebyshev coefficients (``solvers._rkc_coefficients``): on ``y' = lam y`` one step of
    length ``h`` multiplies ``y`` by ``R(h lam)``, a polynomial with ``|R(z)| <= 1`` on ``[-beta, 0]``
    (damped: below 1 inside), and ``R(z) = 1 + z + z^2 / 2 + O(z^3)`` (second order)."""
    from sparseldp.estimation.solvers import _rkc_coefficients

    mu_t, mu, nu, gam, beta = _rkc_coefficients(s)

    def R(z):  # the stages on y' = y with h = z, from y0 = 1
        y0, y2, y1 = 1.0, 1.0, 1.0 + mu_t[1] * z
        for j in range(2, s + 1):
            y2, y1 = y1, (1 - mu[j] - nu[j]) * y0 + mu[j] * y1 + nu[j] * y2 + mu_t[j] * z * y1 + gam[j] * z * y0
        return y1

    assert abs(R(-frac * beta)) <= 1.0 + 1e-9
    z = -1e-3
    assert abs(R(z) - np.exp(z)) <= 2e-9
    assert abs(R(-2 * beta)) > 1.0  # beyond the interval it grows: beta is the interval, not a loose bound


@given(h=st.one_of(st.floats(1e-6, 1e6), st.sampled_from([0.0, 1.0, 1.2, 2.0]),
                   st.integers(2, 200).map(lambda s: 0.6 * (2 / 3) * (s * s - 1) * (1 - 4 / 195))))
@settings(max_examples=200, deadline=None)
def test_rkc_stage_count_is_the_fewest_that_holds_the_step(h):
    """``solvers._rkc_stages(h)``, the closed form, is the fewest stages ``s >= 2`` whose stability interval
    (with the margin) holds ``h``, the count a search upwards from 2 finds; steps exactly on an interval's end
    included."""
    from sparseldp.estimation.solvers import _CHEB_MARGIN, _rkc_beta, _rkc_stages

    s = _rkc_stages(h)
    assert s >= 2 and _CHEB_MARGIN * _rkc_beta(s) >= h
    assert s == 2 or _CHEB_MARGIN * _rkc_beta(s - 1) < h


@given(b=st.integers(1, 3), seed=st.integers(0, 2**16), single=st.booleans())
@settings(max_examples=15, deadline=None)
def test_em_factor_rows_by_fft_dense_and_by_hand_agree(b, seed, single):
    """The EM factor ``g(p) = A (c / (n A^T p))`` on rows (``solvers._g_rows``, which the Chebyshev refits
    evaluate): through the fused FFT products (``_toeplitz._Conv.g_rows``), sparse products and written out
    by hand, in double (1e-9 of the largest) and single precision (1e-3); and ``g(loglik=True)``'s log-likelihood change between two
    points, the likelihood guard's quantity, within 1e-9 / 1e-5 nats per report of the true change.  The rows are spread out: in single
    precision the FFT's outputs below 1e-7 of a row's largest are floored (``_toeplitz._REL_FLOOR_SINGLE``),
    which moves the factor of a value whose every output is that small (a Dirichlet(1) row's end value of
    1e-7: 23 %), as in the bootstrap's single-precision steps."""
    from sparseldp.estimation.solvers import _g_rows

    k, (F, FT), (A, AT), gen, C = _fft_and_sparse_columns(b, seed)
    P0 = gen.dirichlet(np.full(k, 20.0), size=b)
    dtype = np.float32 if single else np.float64

    def by_hand(P):
        return np.asarray(A @ (C / np.asarray(AT @ P.T).T).T).T / C.sum(axis=1, keepdims=True)

    def loglik(P):  # per report, column-scaled q (the same shift for every P)
        return (C * np.log(np.asarray(AT @ P.T).T)).sum(axis=1) / C.sum(axis=1)

    P1 = gen.dirichlet(np.full(k, 20.0), size=b)
    tol = (1e-3 if single else 1e-9) * max(by_hand(P0).max(), by_hand(P1).max())
    ll_tol = 1e-5 if single else 1e-9  # the guard's thresholds (solvers._CHEB_LL_TOL) sit at or above these
    for cols in ((F, FT), (A, AT), (A.toarray(), AT.toarray())):
        p, g = _g_rows(*cols, P0, C, dtype)
        assert np.abs(g() - by_hand(P0)).max() <= tol
        l0 = g(loglik=True)[1]
        p[...] = P1  # the buffer is the point: new rows, new factors
        assert np.abs(g() - by_hand(P1)).max() <= tol
        # g(loglik=True): the log-likelihood per report up to a constant per row (the fused steps leave out the
        # column scales): its change between two points is the true one
        assert np.abs((g(loglik=True)[1] - l0) - (loglik(P1) - loglik(P0))).max() <= ll_tol


def test_chebyshev_flow_follows_plain_em_steps():
    """``solvers._em_chebyshev``: up to its plain warm-up (30 steps) it is those plain steps, bit for bit; for
    2,000 steps' time on a dense channel it lands within 2 % of the plain run's total-variation distance from
    the uniform start (the flow and the steps agree where the steps are many), in under a fourth of the plain
    steps' evaluations (the schedule: 432)."""
    import sparseldp as sl
    from sparseldp.estimation import _model
    from sparseldp.estimation.solvers import _chebyshev_schedule, _em_chebyshev, _em_run

    m, k = sl.SparseGaussian(sigma=8.0, s=81), 40
    model = _model(m, (0, k - 1))
    A, AT = model.columns(np.arange(model.m))
    gen = np.random.default_rng(5)
    x = gen.normal(18, 6, 20_000).round().clip(0, k - 1).astype(int)
    q = np.asarray(model.unscaled().T @ np.bincount(x, minlength=k) / x.size).ravel()
    C = gen.multinomial(20_000, q / q.sum(), size=2).astype(float)
    P0 = np.full((2, k), 1.0 / k)
    assert np.array_equal(_em_chebyshev(A, AT, P0, C, 25), _em_run(A, AT, P0, C, 25))
    plain, cheb = _em_run(A, AT, P0, C, 2_000), _em_chebyshev(A, AT, P0, C, 2_000)
    moved = 0.5 * np.abs(plain - P0).sum(axis=1)
    assert np.all(0.5 * np.abs(cheb - plain).sum(axis=1) <= 0.02 * moved)
    assert sum(s for _, s in _chebyshev_schedule(30, 2_000)) < 2_000 / 4


def _fft_and_sparse_columns(b, seed):
    """A Laplace window of 41 on 600 values: ``(k, fused FFT columns, sparse columns, generator, b rows of
    counts on every output)``."""
    from sparseldp.estimation import _model, _toeplitz

    m, k = SparseLaplace(lam=0.2, s=41), 600
    model = _model(m, (0, k - 1))
    everything = np.arange(model.m)
    F, FT = model.fast_columns(everything, batch=20)
    assert isinstance(F, _toeplitz._ConvA)
    A, AT = model.columns(everything)
    gen = np.random.default_rng(seed)
    C = gen.multinomial(5_000, gen.dirichlet(np.ones(model.m)), size=b).astype(float)
    return k, (F, FT), (A, AT), gen, C


@given(t=st.integers(1, 40), b=st.integers(1, 3), relax=st.integers(1, 3), seed=st.integers(0, 2**16))
@settings(max_examples=20, deadline=None)
def test_relaxed_steps_fused_fft_equal_the_plain_products(t, b, relax, seed):
    """Over-relaxed EM steps ``p <- p g^h``, ``h = 2 - 2^-relax`` (renormalized), through the fused FFT steps
    equal the same steps through sparse products, in double, and the map written out by hand."""
    from sparseldp.estimation.solvers import _em_run

    k, (F, FT), (A, AT), gen, C = _fft_and_sparse_columns(b, seed)
    P0 = gen.dirichlet(np.ones(k), size=b)
    fused = _em_run(F, FT, P0, C, t, relax=relax)
    sparse = _em_run(A, AT, P0, C, t, relax=relax)
    assert np.abs(fused - sparse).max() <= 1e-9 * sparse.max()
    P = P0.copy()  # by hand: g = A (c / (A^T p)) / n, p <- p g^h / sum
    for _ in range(t):
        g = np.asarray(A @ (C / np.asarray(AT @ P.T).T).T).T / C.sum(axis=1, keepdims=True)
        P = P * g ** (2.0 - 2.0**-relax)
        P /= P.sum(axis=1, keepdims=True)
    assert np.abs(sparse - P).max() <= 1e-9 * P.max()
    with pytest.raises(ValueError, match="inv_n must be None"):
        _em_run(A, AT, P0, C, t, inv_n=1.0 / C.sum(axis=1), relax=relax)


@pytest.mark.parametrize("reg", ["ems weight=0.5", "ems weight=x", "em steps=-1", "em smooth", None])
def test_bootstrap_rejects_an_unknown_auto_member(reg):
    import dataclasses

    import sparseldp as sl
    from sparseldp.estimation import estimate_frequencies_full

    m = sl.SparseLaplace(lam=0.5, s=7)
    est = estimate_frequencies_full(m.sample(np.arange(30).repeat(10), rng=1), m, domain=(0, 29), method="auto")
    with pytest.raises(ValueError, match="regularization"):
        dataclasses.replace(est, regularization=reg).bootstrap(m, B=5, rng=0)


@pytest.mark.parametrize("method", ["mle", "EM", None])
def test_an_estimate_with_an_unknown_method_is_refused(method):
    # refused where the estimate is built (it used to get as far as bootstrap)
    import dataclasses

    import sparseldp as sl
    from sparseldp.estimation import estimate_frequencies_full

    m = sl.SparseLaplace(lam=0.5, s=7)
    est = estimate_frequencies_full(m.sample(np.arange(30).repeat(10), rng=1), m, domain=(0, 29), method="em")
    with pytest.raises(TypeError if method is None else ValueError,
                       match="method must be 'auto', 'em', 'ems' or 'inversion'; got"):
        dataclasses.replace(est, method=method)


# -- interpolated (grouped-data) quantiles ------------------------------------------------

def test_interpolated_quantile_exact_values():
    p = np.array([0.1, 0.4, 0.0, 0.5])
    got = stats.quantile(p, [0.05, 0.1, 0.3, 0.5, 0.75], method="interpolated")
    # cells [-0.5, 0.5], [0.5, 1.5], [1.5, 2.5] (empty), [2.5, 3.5]; linear within each
    np.testing.assert_allclose(got, [0.0, 0.5, 1.0, 1.5, 3.0])
    assert stats.quantile(p, 0.5, [10, 20, 30, 40], method="interpolated") == pytest.approx(25.0)
    assert stats.quantile(np.ones(1), 0.25, [7], method="interpolated") == pytest.approx(6.75)
    # uniform on 0..k-1 is the continuous uniform on [-1/2, k - 1/2]
    k = 10
    np.testing.assert_allclose(stats.quantile(np.full(k, 1 / k), [0.1, 0.37, 0.9], method="interpolated"),
                               [-0.5 + 1.0, -0.5 + 3.7, -0.5 + 9.0])


@given(probs, st.floats(1e-6, 1 - 1e-6), st.floats(1e-6, 1 - 1e-6))
def test_interpolated_quantile_is_in_the_cell_and_monotone(p, q1, q2):
    x = stats.quantile(p, q1)
    xi = stats.quantile(p, q1, method="interpolated")
    assert x - 0.5 - 1e-9 <= xi <= x + 0.5 + 1e-9  # within the inverted-CDF quantile's cell
    lo, hi = sorted((q1, q2))
    assert stats.quantile(p, lo, method="interpolated") <= stats.quantile(p, hi, method="interpolated") + 1e-9


def test_interpolated_quantile_bad_method():
    with pytest.raises(ValueError, match="method must be 'inverted_cdf' or 'interpolated'; got 'linear'"):
        stats.quantile(P4, 0.5, method="linear")
    with pytest.raises(TypeError, match="method must be"):
        stats.quantile(P4, 0.5, method=1)


def _interp_cdf(P, v, t):
    """The grouped-data CDF of each row of ``P`` at the points ``t`` (brute force, for the tests)."""
    e = stats._edges(v)
    x = np.clip(np.searchsorted(e, t, side="right") - 1, 0, v.size - 1)
    F = np.concatenate([np.zeros(P.shape[:-1] + (1,)), np.cumsum(P, axis=-1) / P.sum(axis=-1, keepdims=True)],
                       axis=-1)
    u = np.clip((t - e[x]) / (e[x + 1] - e[x]), 0.0, 1.0)
    return F[..., x] + u * (F[..., x + 1] - F[..., x])


@pytest.mark.parametrize("kind", ["span", "hull", "basic", "percentile"])
@pytest.mark.parametrize("q", [0.1, 0.5, 0.9])
def test_interpolated_quantile_interval_inverts_the_cdf_interval(est, kind, q):
    # Woodruff's interval: from the first t whose CDF interval reaches q to the last whose interval
    # starts at or below q, checked on a grid of 2,000 points a cell (the method rounds outwards by
    # at most 1/256 of a cell)
    bs = boot.bootstrap(est, MECH, B=60, rng=4)
    v = est.values.astype(float)
    e = stats._edges(v)
    t = np.linspace(e[0], e[-1], 2000 * v.size + 1)
    flo, fhi = bs._ends(_interp_cdf(est.p, v, t), _interp_cdf(bs.replicates, v, t), 0.025, kind)
    want_lo, want_hi = t[np.flatnonzero(fhi >= q)[0]], t[np.flatnonzero(flo <= q)[-1]]
    lo, hi = bs.interval("quantile", q=q, method="interpolated", kind=kind)
    step = 1 / 256 + 1 / 2000
    assert want_lo - step - 1e-9 <= lo <= want_lo + 1e-9
    assert want_hi - 1e-9 <= hi <= want_hi + step + 1e-9
    assert e[0] <= lo <= hi <= e[-1]
    if kind in ("span", "hull"):  # intervals that contain the estimate
        assert lo <= bs.point("quantile", q=q, method="interpolated") <= hi
    # vector q: the same intervals elementwise
    los, his = bs.interval("quantile", q=[q, 0.3], method="interpolated", kind=kind)
    assert (los[0], his[0]) == (lo, hi)


def test_interpolated_quantile_interval_without_spread_is_the_estimate(est):
    # replicates equal to the estimate: the span is the point, up to the outward rounding
    bs = boot.Bootstrap(est.p, est.values, np.tile(est.p, (5, 1)), "em")
    for q in (0.05, 0.5, 0.97):
        t = bs.point("quantile", q=q, method="interpolated")
        lo, hi = bs.interval("quantile", q=q, method="interpolated")
        assert t - 1 / 256 - 1e-9 <= lo <= t <= hi <= t + 1 / 256 + 1e-9


def test_interpolated_quantile_interval_is_narrower_than_the_value_set(est):
    bs = boot.bootstrap(est, MECH, B=60, rng=4)
    lo, hi = est.quantile(0.5, ci=bs, method="interpolated")[1]
    vlo, vhi = bs.interval("quantile", q=0.5)
    assert hi - lo <= vhi - vlo + 1.0 and est.values[0] - 0.5 <= lo <= hi <= est.values[-1] + 0.5
    # and the replicate quantiles are still there for whoever wants their spread
    tb = bs.distribution("quantile", q=0.5, method="interpolated")
    assert tb.shape == (60,) and np.all((tb >= est.values[0] - 0.5) & (tb <= est.values[-1] + 0.5))


def test_bootstrap_warns_when_the_refits_do_not_vary():
    # a flat truth: EM's uniform start fits the counts already, but auto's stop is at least one step (the
    # uniform start does not depend on the data); an "em steps=0" estimate (made by hand here) has refits
    # that are all the same distribution and intervals of zero width: say so
    import dataclasses

    y = sample(MECH, np.arange(30).repeat(200), rng=1)
    fit = estimate_frequencies(y, MECH, domain=DOM, return_info=True)
    assert fit.regularization != "em steps=0"
    est = dataclasses.replace(fit, p=np.full(fit.p.size, 1.0 / fit.p.size), regularization="em steps=0")
    with pytest.warns(RuntimeWarning, match=r"the 40 bootstrap refits \(em steps=0\) are all the same"):
        bs = est.bootstrap(MECH, B=40, rng=0)
    lo, hi = est.cdf(14, ci=bs)[1]
    assert lo == hi
    # robust intervals add the MLE's bootstrap, which varies: no warning, and a real interval
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rob = est.bootstrap(MECH, B=40, rng=0, robust=True)
    lo, hi = est.cdf(14, ci=rob)[1]
    assert hi - lo > 0.01
    # any other estimator whose refits all coincide is named, without the uniform start's explanation
    ems = estimate_frequencies(y, MECH, domain=DOM, method="ems", return_info=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(boot, "_refit_replicates", lambda model, C, *a, **k: (
            np.tile(ems.p, (C.shape[0], 1)), np.ones(C.shape[0], bool), None, False, False))
        with pytest.warns(RuntimeWarning, match=r"refits \(ems\) are all the same distribution; every interval"):
            ems.bootstrap(MECH, B=5, rng=0)
    # an MLE's refits that coincide: the warning does not send it to robust=True (a no-op for the MLE)
    mle = estimate_frequencies(y, MECH, domain=DOM, method="em", return_info=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(boot, "_refit_replicates", lambda model, C, *a, **k: (
            np.tile(mle.p, (C.shape[0], 1)), np.ones(C.shape[0], bool), None, False, False))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mle.bootstrap(MECH, B=5, rng=0, robust=True)
    (w,) = [w for w in caught if "all the same distribution" in str(w.message)]
    assert str(w.message).endswith("says nothing of the sampling error") and "robust" not in str(w.message)
    # refits that vary: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        estimate_frequencies(y, MECH, domain=DOM, method="ems", return_info=True).bootstrap(MECH, B=10, rng=0)


def test_unconverged_mle_refits_warn_with_their_certified_gaps(monkeypatch):
    # the method forwards the refits' stopping rule; a cap too small to converge says how far they are
    # (with the Newton finish of small channels and the interior point off: they would certify them)
    from sparseldp.estimation import _ipm, refits

    monkeypatch.setattr(refits, "_REFIT_NEWTON_COST", 0.0)
    monkeypatch.setattr(_ipm, "_IPM_FLOPS", -1.0)
    e = _estimate(20_000, "em")
    with pytest.warns(RuntimeWarning, match=r"12 of 12 bootstrap refits stopped at max_iter = 2 before tol = 0\.5 "
                                            r"\(certified log-likelihood gaps of those: median [0-9.e+]+, largest "
                                            r"[0-9.e+]+ nats, on 20,000 reports\)"):
        bs = e.bootstrap(MECH, B=12, rng=0, max_iter=2)
    assert bs.converged == 0
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert e.bootstrap(MECH, B=12, rng=0, tol=5.0).converged == 12


def test_small_channel_mle_refits_are_finished_by_newton(monkeypatch):
    # on a small channel EM runs a short while (refits._REFIT_EM_FIRST evaluations) and Newton
    # certifies the refits it left above tol, to the same replicates as EM alone run to convergence
    # (both within tol = 0.5 nats of each replicate's maximum)
    import warnings

    from sparseldp.estimation import refits

    real, calls = refits._newton, []

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(refits, "_newton", counted)
    e = _estimate(20_000, "em")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        bs = e.bootstrap(MECH, B=12, rng=0)
    used = len(calls)
    assert bs.converged == 12 and used >= 1
    monkeypatch.setattr(refits, "_REFIT_NEWTON_COST", 0.0)
    em_only = e.bootstrap(MECH, B=12, rng=0, max_iter=100_000)
    assert em_only.converged == 12 and len(calls) == used  # no Newton when it is off
    means, em_means = bs.distribution("mean"), em_only.distribution("mean")
    assert np.abs(means - em_means).max() <= 0.05 * means.std()


@pytest.mark.parametrize("stragglers", [1, 2, 3])
def test_a_few_refits_left_by_the_batch_are_finished_by_the_first_fits_solver(monkeypatch, stragglers):
    # the batched EM refit is made to leave its first `stragglers` columns at the uniform point,
    # uncertified (a replicate far from p_hat); with the interior point off, at most 5 % of B = 40
    # (two) are finished one by one by mle._mle and match the undisturbed replicates, more are left
    # and reported
    import warnings

    from sparseldp.estimation import _ipm, _parallel, refits

    monkeypatch.setattr(refits, "_REFIT_NEWTON_COST", 0.0)  # EM alone: no Newton finish of small channels
    monkeypatch.setattr(_ipm, "_IPM_FLOPS", -1.0)  # no interior point (in the refits or in mle._mle)
    e = _estimate(20_000, "em")
    clean = e.bootstrap(MECH, B=40, rng=0)
    real = refits._refit_em

    def straggling(A, AT, C, n, P0, tol, max_iter):
        P, conv, gaps = real(A, AT, C, n, P0, tol, max_iter)
        P[:, :stragglers] = 1.0 / P.shape[0]
        conv[:stragglers], gaps[:stragglers] = False, 1e6
        return P, conv, gaps

    monkeypatch.setattr(refits, "_refit_em", straggling)
    monkeypatch.setattr(_parallel, "_MIN_COLUMNS", 10**9)  # one batch: the first columns are the replicates'
    if stragglers <= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            bs = e.bootstrap(MECH, B=40, rng=0)
        assert bs.converged == 40
        means, clean_means = bs.distribution("mean"), clean.distribution("mean")
        assert np.abs(means - clean_means).max() <= 0.05 * clean_means.std()
    else:
        with pytest.warns(RuntimeWarning, match=r"3 of 40 bootstrap refits stopped at max_iter"):
            bs = e.bootstrap(MECH, B=40, rng=0)
        assert bs.converged == 37


def test_refits_left_by_the_batch_are_finished_by_the_interior_point(monkeypatch):
    # the same stragglers, 5 of 40 (more than mle._mle finishes): the interior point (_ipm_finish)
    # certifies all of them, close to the undisturbed replicates
    import warnings

    from sparseldp.estimation import _mle_refits, _parallel, refits

    monkeypatch.setattr(refits, "_REFIT_NEWTON_COST", 0.0)
    monkeypatch.setattr(_mle_refits, "_IPM_DIRECT_DENSE", -1.0)  # the batched EM first, not the interior point
    monkeypatch.setattr(_mle_refits, "_IPM_VS_EM", 0.0)
    e = _estimate(20_000, "em")
    clean = e.bootstrap(MECH, B=40, rng=0)
    real = refits._refit_em
    finished = []

    def straggling(A, AT, C, n, P0, tol, max_iter):
        P, conv, gaps = real(A, AT, C, n, P0, tol, max_iter)
        P[:, :5] = 1.0 / P.shape[0]
        conv[:5], gaps[:5] = False, 1e6
        return P, conv, gaps

    real_finish = _mle_refits._ipm_finish

    def spy(model, CT, n, P, conv, gaps, tol):
        finished.append(int((~conv).sum()))
        return real_finish(model, CT, n, P, conv, gaps, tol)

    monkeypatch.setattr(refits, "_refit_em", straggling)
    monkeypatch.setattr(refits, "_ipm_finish", spy)
    monkeypatch.setattr(_parallel, "_MIN_COLUMNS", 10**9)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        bs = e.bootstrap(MECH, B=40, rng=0)
    assert finished == [5] and bs.converged == 40
    means, clean_means = bs.distribution("mean"), clean.distribution("mean")
    assert np.abs(means - clean_means).max() <= 0.05 * clean_means.std()


@pytest.mark.parametrize("runs, want_runs, certified", [
    ([3.45, 0.513, 0.05], 3, True),  # the warm run halved the gap: a third run certifies it
    ([3.45, 2.0, 0.05], 2, False),  # the warm run did not halve it: no third
    ([3.45, 1.5, 0.7, 0.34, 0.05], 4, False),  # each halves it, but at most _FINISH_RUNS runs
])
def test_straggler_runs_go_on_while_they_halve_the_gap(monkeypatch, runs, want_runs, certified):
    """``refits._mle_finish``: from the uniform start, then from the better point while a run at least
    halves the certified gap, at most ``_FINISH_RUNS`` runs (the solver's gaps are scripted)."""
    from sparseldp.estimation import _model, refits

    assert refits._FINISH_RUNS == 4
    model = _model(MECH, (0, 19))
    CT = np.ones((model.m, 1))
    P, conv, gaps = np.full((model.k, 1), 1.0 / model.k), np.zeros(1, bool), np.array([50.0])
    calls = []

    def scripted(A, AT, c, n, k, tol, max_iter, dense, fast, p0=None, band=None):
        gap = runs[len(calls)]
        calls.append(p0 is None)
        return np.full(k, 1.0 / k), max_iter, 0, gap <= tol, gap

    monkeypatch.setattr(refits, "_mle", scripted)
    refits._mle_finish(model, CT, 1000.0, P, conv, gaps, 0.1, 100)
    assert len(calls) == want_runs and calls[0] and not any(calls[1:])  # uniform first, then warm
    assert bool(conv[0]) == certified and gaps[0] == min(runs[:want_runs])


@pytest.mark.parametrize("estimated", [False, True])
def test_unconverged_ems_refits_warn_how_far_they_are(monkeypatch, estimated):
    # EMS refits cut short say how far they are (the estimated distance once enough steps have run;
    # forced here by a wrapped refit, as this small channel converges within them), how far their last
    # steps moved them, and how far the replicates lie from the estimate
    from sparseldp.estimation import refits

    e = _estimate(20_000, "ems")
    if estimated:
        real = refits._refit_ems

        def short(*args):
            P, evals, conv, dist = real(*args)
            conv[:] = False
            dist[0], dist[1] = 2e-4, 3e-6
            return P, evals, conv, dist

        monkeypatch.setattr(refits, "_refit_ems", short)
    with pytest.warns(RuntimeWarning) as rec:
        bs = e.bootstrap(MECH, B=10, rng=0, max_iter=60 if estimated else 4)
    text = " ".join(str(w.message) for w in rec)
    assert bs.converged == 0
    assert re.search(r"10 of 10 bootstrap refits stopped at max_iter = \d+ before tol = 1e-05 \(", text)
    far = (r"estimated TV distance to their fixed points: median 0\.0002, largest 0\.0002; their last steps moved "
           r"them a median TV distance of 3e-06" if estimated else
           r"no estimate of their distance to their fixed points, as too few steps ran since the solver's last "
           r"switch or the last ones did not contract; their last steps moved them a median TV distance of [0-9.e+-]+")
    assert re.search(far, text)
    spread = np.median(0.5 * np.abs(bs.replicates - e.p).sum(axis=1))
    assert f", and the replicates lie a median TV distance of {spread:.3g} from the estimate)" in text
    assert "a small step is no small distance" in text and "raise max_iter until they stop moving" in text


def test_ems_refits_on_the_outputs_some_replicate_has_are_the_same():
    # EMS refits run on the outputs some replicate observes (the others add nothing to a step): on FFT
    # products the replicates are those of the refit over every output, bit for bit
    import sparseldp as sl
    from sparseldp.estimation import _model, refits

    mech, k = sl.SparseGaussian(sigma=12.0, s=301), 1500
    model = _model(mech, (0, k - 1))
    x = np.arange(k)
    p_hat = np.exp(-0.5 * ((x - 700) / 150.0) ** 2)
    p_hat /= p_hat.sum()
    q = np.maximum(np.asarray(model.unscaled().T @ p_hat).ravel(), 0.0)
    C = np.random.default_rng(3).multinomial(2_000, q / q.sum(), size=6).astype(float)
    assert (C.sum(axis=0) == 0).sum() > 200  # many outputs no replicate has
    P, conv, _, _, _ = refits._refit_replicates(model, C, 2_000, p_hat, "ems", 1, 0.125, None, 1e-5, 400)
    A, AT = model.fast_columns(np.arange(model.m))
    P0 = (1.0 - refits._EMS_WARM_MIX) * np.broadcast_to(p_hat, (6, k)) + refits._EMS_WARM_MIX / k
    ref, _, ref_conv, _ = refits._refit_ems(A, AT, C, 2_000.0, P0, 1, 0.125, 1e-5, 400)
    assert np.array_equal(P, ref) and np.array_equal(conv, ref_conv)


def test_an_ems_refit_left_short_gets_a_second_run(monkeypatch):
    # the batched EMS refit is made to leave its first column at the warm start, unconverged; a second
    # run of its own (another max_iter evaluations from there) reaches the undisturbed replicate
    import warnings

    from sparseldp.estimation import _parallel, refits

    e = _estimate(20_000, "ems")
    clean = e.bootstrap(MECH, B=40, rng=0)
    real, calls = refits._refit_ems, []

    def short(A, AT, C, n, P0, *args):
        P, evals, conv, dist = real(A, AT, C, n, P0, *args)
        if not calls:
            P[0], conv[0] = P0[0], False
        calls.append(C.shape[0])
        return P, evals, conv, dist

    monkeypatch.setattr(refits, "_refit_ems", short)
    monkeypatch.setattr(_parallel, "_MIN_COLUMNS", 10**9)  # one batch
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        bs = e.bootstrap(MECH, B=40, rng=0)
    assert calls == [40, 1] and bs.converged == 40
    assert np.abs(bs.replicates - clean.replicates).max() <= 1e-4


# -- bootstrap refits in threads ------------------------------------------------------------

@pytest.mark.parametrize("case", ["em mle", "em steps=40", "ems weight=0.125", "em", "ems", "fft em steps=30",
                                  "fft ems smooth=1", "dense-fft ems smooth=1"])
def test_bootstrap_in_threads_equals_one_batch(monkeypatch, case):
    # the blocks depend on B and the channel alone, so the replicates of a seed are the same on any
    # number of CPUs (one thread running the blocks in turn, or three threads)
    import dataclasses

    import sparseldp as sl
    from sparseldp.estimation import _model, _parallel, estimate_frequencies_full

    from sparseldp.estimation._toeplitz import _ConvA

    kind, _, reg = case.partition(" ") if "fft" in case.split(" ")[0] else ("sparse", "", case)
    k, m = {"sparse": (300, sl.SparseLaplace(lam=0.5, s=9)), "fft": (4000, sl.SparseLaplace(lam=0.05, s=61)),
            "dense-fft": (600, sl.SparseGaussian(sigma=120.0, s=701))}[kind]
    model = _model(m, (0, k - 1))
    assert model.dense == (kind == "dense-fft")
    assert isinstance(model.fast_columns(np.arange(model.m))[0], _ConvA) == (kind != "sparse")
    x = np.random.default_rng(3).integers(0, k, 20_000)
    with warnings.catch_warnings():  # 300 steps: a fit to resample from, not a converged one
        warnings.simplefilter("ignore", RuntimeWarning)
        est = estimate_frequencies_full(m.sample(x, rng=1), m, domain=(0, k - 1),
                                        method="em" if reg == "em" else "ems", max_iter=300)
    if reg not in ("em", "ems"):
        est = dataclasses.replace(est, method="auto", regularization=reg)
    reps = {}
    for cpus in (1, 3):
        monkeypatch.setattr(_parallel, "_cpus", lambda cpus=cpus: cpus)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            b = est.bootstrap(m, B=32, rng=5, max_iter=300)
        reps[cpus] = (b.replicates, b.converged)
    np.testing.assert_array_equal(reps[1][0], reps[3][0])
    assert reps[1][1] == reps[3][1]
    # and the blocks agree with one batch of all 32 columns: to rounding where the refit is a fixed
    # number of steps or EMS; the MLE refits stop anywhere within their tolerance, so there the
    # replicates' means agree to a small share of their spread
    monkeypatch.setattr(_parallel, "_MIN_COLUMNS", 10**9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        one = est.bootstrap(m, B=32, rng=5, max_iter=300).replicates
    if reg in ("em", "em mle"):
        means = [R @ np.arange(k) for R in (one, reps[1][0])]
        assert np.abs(means[0] - means[1]).max() < 0.05 * means[0].std()
    else:
        np.testing.assert_allclose(reps[1][0], one, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("cpus", [1, 2, 3])
def test_parallel_blocks_cover_the_columns_in_order(monkeypatch, cpus):
    from sparseldp.estimation import _parallel
    from sparseldp.estimation._parallel import blocks_for, map_blocks

    monkeypatch.setattr(_parallel, "_cpus", lambda: cpus)
    for columns, blocks in [(1, 1), (24, 3), (200, 8), (17, 2)]:
        got = map_blocks(lambda r: list(range(columns))[r], columns, blocks)
        assert len(got) == blocks and sum(got, []) == list(range(columns))
    assert [blocks_for(False, b) for b in (1, 15, 16, 32, 48, 50, 64, 100, 128, 200, 10_000)] == \
        [1, 1, 1, 2, 2, 2, 4, 4, 8, 8, 8]
    assert blocks_for(True, 10_000) == 1


@given(st.lists(probs, min_size=2, max_size=12), probs, st.floats(0.5, 0.99), st.floats(0.5, 0.99))
def test_span_holds_the_estimate_and_its_correction_and_grows_with_the_level(reps, p, l1, l2):
    # any replicates: the span reaches from min(t, 2 t - mean t*) to max(...), z sd further out, for every
    # statistic that is not clipped there; a higher level never gives a narrower interval
    reps = [r for r in reps if r.size == p.size]
    if len(reps) < 2:
        return
    bs = boot.Bootstrap(p=p, values=np.arange(p.size), replicates=np.stack(reps), method="em")
    for stat, kw in [("mean", {}), ("cdf", {"x": p.size // 2}), ("range", {"a": 0, "b": p.size // 2})]:
        t = bs.point(stat, **kw)
        c = 2 * t - bs.distribution(stat, **kw).mean()
        lo, hi = bs.interval(stat, min(l1, l2), **kw)
        assert lo <= min(t, c) + 1e-12 or lo == 0.0
        assert hi >= max(t, c) - 1e-12 or hi == (1.0 if stat != "mean" else p.size - 1)
        assert lo <= t + 1e-12 and t - 1e-12 <= hi
        lo2, hi2 = bs.interval(stat, max(l1, l2), **kw)
        assert lo2 <= lo + 1e-12 and hi - 1e-12 <= hi2


# -- robust intervals: the hull with the MLE's bootstrap ----------------------------------

_ROBUST_STATS = [("mean", {}), ("var", {}), ("cdf", {"x": 14}), ("range", {"a": 5, "b": 15}),
                 ("quantile", {"q": [0.1, 0.5, 0.9]}), ("quantile", {"q": 0.5, "method": "interpolated"}),
                 ("p", {})]


@pytest.mark.parametrize("method", ["ems", "auto", "inversion"])
def test_robust_intervals_are_the_hull_with_the_mle(method):
    e = _estimate(20_000, method)
    plain = e.bootstrap(MECH, B=30, rng=4)
    rob = e.bootstrap(MECH, B=30, rng=4, robust=True)
    assert rob.robust and not plain.robust and plain.reference is None
    # the estimate's own replicates are drawn first: the same as without robust
    np.testing.assert_array_equal(rob.replicates, plain.replicates)
    ref = rob.reference
    assert ref.method == "em" and ref.reference is None and ref.B == 30
    # the reference is centred on the MLE of the same counts
    np.testing.assert_allclose(ref.p, _estimate(20_000, "em").p, atol=2e-3)
    for stat, kw in _ROBUST_STATS:
        lo, hi = rob.interval(stat, **kw)
        olo, ohi = plain.interval(stat, **kw)
        rlo, rhi = ref.interval(stat, **kw)
        np.testing.assert_array_equal(lo, np.minimum(olo, rlo))
        np.testing.assert_array_equal(hi, np.maximum(ohi, rhi))
        assert rob.point(stat, **kw) == pytest.approx(plain.point(stat, **kw))  # the estimate's own value


def test_robust_is_a_no_op_for_the_mle():
    e = _estimate(20_000, "em")
    a, b = e.bootstrap(MECH, B=20, rng=5), e.bootstrap(MECH, B=20, rng=5, robust=True)
    assert b.robust and b.reference is None
    np.testing.assert_array_equal(a.replicates, b.replicates)
    assert a.interval("range", a=5, b=15) == b.interval("range", a=5, b=15)


def test_estimate_keeps_its_counts_read_only_and_out_of_repr_and_equality(est):
    import dataclasses

    from sparseldp.estimation.model import _model

    model = _model(MECH, DOM)
    assert est.counts.shape == (model.m,) and est.counts.sum() == est.n
    assert not est.counts.flags.writeable
    assert "counts" not in repr(est)
    assert dataclasses.replace(est, counts=None) == est


def test_robust_covers_a_step_that_the_regularized_interval_misses():
    # a step truth (0.004 per value below 50, 0.016 above) under a window far wider than the domain: auto
    # smooths the step, and its CDF interval at the step misses the true 0.2; the MLE's (in the hull) holds it
    import sparseldp as sl

    m = sl.design("laplace", eps=1, delta=1e-6, H=5).mechanism
    g = np.random.default_rng(1)
    x = g.choice(100, size=10**5, p=np.r_[np.full(50, 0.004), np.full(50, 0.016)])
    est = estimate_frequencies(sample(m, x, rng=g), m, domain=(0, 99), return_info=True)
    assert est.regularization != "em mle"
    lo, hi = est.cdf(49, ci=est.bootstrap(m, rng=3))[1]
    assert not lo <= 0.2 <= hi
    lo, hi = est.cdf(49, ci=est.bootstrap(m, rng=3, robust=True))[1]
    assert lo <= 0.2 <= hi


def test_robust_bad_input(est):
    import dataclasses

    with pytest.raises(TypeError, match="robust must be"):
        est.bootstrap(MECH, robust="yes")
    with pytest.raises(ValueError, match="robust=True refits the MLE on the estimate's report counts, and this "
                                         "estimate carries none"):
        dataclasses.replace(est, counts=None).bootstrap(MECH, robust=True)
    with pytest.raises(ValueError, match="estimate.counts must be the 20,000 reports' counts on the"):
        dataclasses.replace(est, counts=est.counts[:-1]).bootstrap(MECH, robust=True)
    with pytest.raises(ValueError, match=r"on the 50 outputs of the domain \(0, 29\) under this mechanism "
                                         r"\(finite, >= 0\); got 50 entries summing to 40000"):
        dataclasses.replace(est, counts=2 * est.counts).bootstrap(MECH, robust=True)
    with pytest.raises(ValueError, match="got 50 entries summing to nan"):
        dataclasses.replace(est, counts=np.full(50, np.nan)).bootstrap(MECH, robust=True)
    negative = est.counts.copy()  # the same total, one count below 0
    moved = negative[0] + 1.0
    negative[0] -= moved
    negative[1] += moved
    with pytest.raises(ValueError, match="must be the 20,000 reports' counts"):
        dataclasses.replace(est, counts=negative).bootstrap(MECH, robust=True)
    # without robust the counts are not needed
    dataclasses.replace(est, counts=None).bootstrap(MECH, B=5, rng=0)


def test_robust_names_the_mle_part_in_its_warnings():
    # the MLE's refits capped far below convergence: the warning says it comes from the robust part
    import re

    from sparseldp.estimation import _ipm

    e = _estimate(20_000, "ems")
    with warnings.catch_warnings(record=True) as caught, pytest.MonkeyPatch.context() as mp:
        mp.setattr(_ipm, "_IPM_FLOPS", -1.0)  # the interior point would certify the MLE's refits
        warnings.simplefilter("always")
        e.bootstrap(MECH, B=20, rng=0, max_iter=1, robust=True)
    texts = [str(w.message) for w in caught]
    # the estimate's own EMS refits (capped too) and the MLE's, told apart
    assert any(t.startswith("20 of 20 bootstrap refits stopped at max_iter = 1") for t in texts)
    assert any(re.match(r"robust=True, the MLE's fit or bootstrap: \d+ of 20 bootstrap refits stopped at "
                        r"max_iter = 1", t) for t in texts), texts


_fixed = arrays(float, 6, elements=st.floats(0, 1)).filter(lambda a: a.sum() > 1e-3).map(lambda a: a / a.sum())


@given(_fixed, st.lists(_fixed, min_size=2, max_size=8), _fixed, st.lists(_fixed, min_size=2, max_size=8),
       st.sampled_from(["span", "hull", "basic", "percentile"]), st.floats(0.5, 0.99))
def test_an_interval_with_a_reference_is_the_hull_of_both(p, reps, p_ref, reps_ref, kind, level):
    # any two bootstraps on one domain: with a reference, every statistic's interval (of every kind and
    # level) holds its own and the reference's and is the smallest interval that does
    v = np.arange(6)
    ref = boot.Bootstrap(p=p_ref, values=v, replicates=np.stack(reps_ref), method="em")
    own = boot.Bootstrap(p=p, values=v, replicates=np.stack(reps), method="ems")
    both = boot.Bootstrap(p=p, values=v, replicates=np.stack(reps), method="ems", robust=True, reference=ref)
    for stat, kw in [("mean", {}), ("var", {}), ("cdf", {"x": 2}), ("range", {"a": 1, "b": 3}), ("p", {}),
                     ("quantile", {"q": 0.5}), ("quantile", {"q": 0.3, "method": "interpolated"})]:
        lo, hi = both.interval(stat, level, kind=kind, **kw)
        (olo, ohi), (rlo, rhi) = own.interval(stat, level, kind=kind, **kw), ref.interval(stat, level, kind=kind, **kw)
        np.testing.assert_array_equal(lo, np.minimum(olo, rlo))
        np.testing.assert_array_equal(hi, np.maximum(ohi, rhi))
        assert np.all(np.asarray(lo) <= np.asarray(hi)), (stat, kw, lo, hi, olo, ohi, rlo, rhi)
        np.testing.assert_array_equal(both.point(stat, **kw), own.point(stat, **kw))


def test_variance_interval_clips_both_ends():
    # a point mass (variance 0) whose replicates are all flat (variance 35/12): the reflected interval lies
    # below 0 at both ends; clipped, it is [0, 0], never an upper end below the lower one
    p = np.r_[1.0, np.zeros(5)]
    bs = boot.Bootstrap(p=p, values=np.arange(6), replicates=np.full((2, 6), 1 / 6), method="em")
    assert bs.interval("var", kind="basic") == (0.0, 0.0)
    assert bs.interval("var", kind="span") == (0.0, 0.0)  # from 0 down to the corrected -35/12, no spread
    assert bs.interval("var", kind="percentile") == pytest.approx((35 / 12, 35 / 12))


def test_bootstrap_refuses_a_mechanism_the_estimate_was_not_fitted_with():
    """The estimate's report counts must be the mechanism's outputs on the domain: a bootstrap under another
    kernel would give intervals built on the wrong noise, silently."""
    import sparseldp as sl
    from sparseldp.sampling import sample

    m = sl.SparseLaplace(lam=0.5, s=7)
    y = sample(m, np.random.default_rng(0).integers(0, 10, 5000), rng=1)
    est = estimate_frequencies_full(y, m, domain=(0, 9))
    assert est.mechanism is m
    # the estimate records its mechanism: another kernel, or the same support with other weights (which
    # the counts alone cannot reveal), is refused by name
    for other in (sl.SparseGaussian(sigma=6.0, s=41), sl.SparseLaplace(lam=0.6, s=7)):
        with pytest.raises(ValueError, match=r"mechanism must be the one the estimate was fitted with "
                                             r"\(SparseLaplace\(lam=0.5, s=7\)\).*got Sparse"):
            est.bootstrap(other, B=10, rng=0)
    # an estimate without the record (built by hand, with counts): the counts' check still catches another
    # support; without the mechanism at all, the call says what to pass
    bare = dataclasses.replace(est, mechanism=None)
    with pytest.raises(ValueError, match=r"estimate.counts must be .* is it the mechanism the estimate was fitted"):
        bare.bootstrap(sl.SparseGaussian(sigma=6.0, s=41), B=10, rng=0)
    with pytest.raises(TypeError, match=r"bootstrap needs mechanism=.*built by hand"):
        bare.bootstrap(B=10, rng=0)
    # the recorded one by default; an equal value, or the same channel as a SparseChannel, is the same
    ref = est.bootstrap(m, B=10, rng=0).interval("mean")
    assert est.bootstrap(B=10, rng=0).interval("mean") == ref
    assert est.bootstrap(sl.SparseLaplace(lam=0.5, s=7), B=10, rng=0).interval("mean") == ref
    assert est.bootstrap(m.to_channel((0, 9), "extended"), B=10, rng=0).interval("mean") == pytest.approx(ref)
    assert pickle.loads(pickle.dumps(est)).bootstrap(B=10, rng=0).interval("mean") == ref


@pytest.mark.parametrize("lo", [-2**53, 2**53 - 9, -(2**40) + 3])
def test_mean_and_variance_keep_their_precision_far_from_zero(lo):
    """The same p on values 0..9 and on lo..lo+9: the same variance, the mean shifted by lo (to the double
    spacing there), not the float rounding of each value (var 14.4 against 8.3 at -2^53 before)."""
    from sparseldp.estimation import stats

    p = np.random.default_rng(0).dirichlet(np.ones(10))
    near, far = np.arange(10), lo + np.arange(10, dtype=np.int64)
    assert stats.var(p, far) == pytest.approx(stats.var(p, near), rel=1e-12)
    spacing = float(np.spacing(float(abs(lo)) + 10))
    assert abs(stats.mean(p, far) - (lo + stats.mean(p, near))) <= spacing


def test_bootstrap_warns_when_its_mean_spread_is_far_below_the_reports():
    """A kernel far wider than the domain: auto's EMS returns about the uniform distribution whatever the
    data, and its replicates barely move (mean intervals 0.0007 wide, the truth 0.4 away): said, with the
    report mean's standard error; an ordinary estimate says nothing."""
    import warnings

    import sparseldp as sl
    from sparseldp.sampling import sample

    m = sl.SparseGaussian(sigma=20.0, s=201)
    y = sample(m, np.random.default_rng(300).choice(2, 5000, p=[0.9, 0.1]), rng=0)
    est = estimate_frequencies_full(y, m, domain=(0, 1))
    with pytest.warns(RuntimeWarning, match=r"under a tenth of the report mean's standard error .* estimate_mean"):
        est.bootstrap(m, B=50, rng=0)
    m2 = sl.design("laplace", eps=1, delta=1e-6, H=5).mechanism
    y2 = sample(m2, np.random.default_rng(1).integers(0, 100, 20_000), rng=1)
    est2 = estimate_frequencies_full(y2, m2, domain=(0, 99))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est2.bootstrap(m2, B=50, rng=0)


def test_bootstrap_mean_spread_is_judged_against_the_domain_when_the_reports_are_wider():
    """A window of 383 on 5 values: the report mean's standard error (10.3 from these 5 reports) is far
    above anything a mean on 0..4 can spread (at most 2), so the MLE's replicates spreading it by 0.73
    are not flagged (they were, against a tenth of 10.3); EMS's replicates from 50 reports, which barely
    move whatever the data, are still flagged, against the domain's half-width."""
    import warnings

    import sparseldp as sl
    from sparseldp.sampling import sample

    m = sl.SparseLaplace(lam=0.07, s=383)
    y = sample(m, np.random.default_rng(2).integers(0, 5, 5), rng=2)
    assert np.std(y) / np.sqrt(5) > 10
    est = estimate_frequencies_full(y, m, domain=(0, 4))
    assert est.regularization == "em mle"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = est.bootstrap(m, B=50, rng=0)
    assert 0.2 < float(np.std(b.replicates @ np.arange(5))) < 1
    y = sample(m, np.random.default_rng(1).integers(0, 5, 50), rng=1)
    est = estimate_frequencies_full(y, m, domain=(0, 4))
    with pytest.warns(RuntimeWarning, match=r"under a tenth of the domain's half-width 2 \(the report mean's"):
        est.bootstrap(m, B=50, rng=0)


@pytest.mark.parametrize("max_iter", [1, 5])
def test_em_convergence_warning_quotes_the_gap_of_the_point_returned(max_iter):
    import sparseldp as sl
    from sparseldp.estimation import ConvergenceWarning
    from sparseldp.sampling import sample

    md = sl.design("laplace", eps=1, delta=1e-6, H=5).mechanism
    p = np.zeros(100)
    p[[10, 50, 51, 90]] = [0.4, 0.3, 0.2, 0.1]
    y = sample(md, np.random.default_rng(0).choice(100, 100_000, p=p), rng=1)
    with pytest.warns(ConvergenceWarning) as caught:
        est = estimate_frequencies_full(y, md, domain=(0, 99), method="em", max_iter=max_iter)
    assert f"gap of {est.gap:.4g} nats" in str(caught[0].message)


@pytest.mark.parametrize("case", ["dense", "fft"])
def test_em_iterates_stay_at_or_above_their_floor(case):
    """Values EM drives towards 0 (a point mass) stop at ``_toeplitz.ITERATE_FLOOR`` instead of bringing
    subnormal numbers into the products, whose arithmetic is many times slower (solvers._em_run): in
    single and double precision, dense and fused FFT steps, plain and relaxed, the iterates reach that
    floor and go no lower, and the largest value stays the point."""
    import sparseldp as sl
    from sparseldp.estimation import _model, _toeplitz
    from sparseldp.estimation.solvers import _em_run

    if case == "dense":
        m, k, x0 = sl.SparseGaussian(sigma=8.0, s=81), 40, 20
    else:
        m, k, x0 = SparseLaplace(lam=0.2, s=41), 600, 300
    model = _model(m, (0, k - 1))
    everything = np.arange(model.m)
    A, AT = model.columns(everything) if case == "dense" else model.fast_columns(everything, batch=20)
    assert model.dense if case == "dense" else isinstance(A, _toeplitz._ConvA)
    p = np.zeros(k)
    p[x0] = 1.0
    q = np.maximum(np.asarray(model.unscaled().T @ p).ravel(), 0.0)
    C = np.random.default_rng(0).multinomial(10**5, q / q.sum(), size=2).astype(float)
    for single, steps in ((True, 3000), (False, 30_000)):
        floor = _toeplitz.ITERATE_FLOOR[np.dtype(np.float32 if single else np.float64)]
        for relax in (0, 2):
            P = _em_run(A, AT, np.full((2, k), 1.0 / k), C, steps, single=single, relax=relax)
            assert P.min() >= 0.5 * floor and P.min() <= 2 * floor  # at the floor, not below it
            assert np.all(P.argmax(axis=1) == x0)
