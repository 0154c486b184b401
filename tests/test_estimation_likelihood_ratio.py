"""Profile-likelihood intervals (sparseldp.estimation.likelihood_ratio): each end is an outer bound of the
exact likelihood-ratio interval and close to it (checked against a brute-force grid over the
simplex of three values), they hold the MLE's own value, nest with the level, and bad input
gets a clear error.  Coverage is measured by benchmarks/bench_coverage.py, not here."""

import dataclasses
import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sparseldp import SparseGaussian, SparseLaplace
from sparseldp.estimation import Profile, _model, estimate_frequencies, profile
from sparseldp.estimation.likelihood_ratio import modelled_seconds
from sparseldp.sampling import sample

# (mechanism, true distribution on 0..2, n): three values, a brute-force grid can enumerate the simplex
GRID_CASES = [
    (SparseLaplace(lam=0.4, s=9), [0.5, 0.3, 0.2], 200),
    (SparseLaplace(lam=1.5, s=5), [0.1, 0.0, 0.9], 500),
    (SparseGaussian(sigma=2.0, s=11), [0.3, 0.4, 0.3], 300),
    (SparseGaussian(sigma=0.8, s=5), [0.0, 1.0, 0.0], 100),
]
GRID = 600  # grid step 1/600 on the simplex of three values


def _fit(mech, p, n, seed, method="auto", k=None):
    gen = np.random.default_rng(seed)
    k = len(p) if k is None else k
    x = gen.choice(len(p), size=n, p=np.asarray(p) / np.sum(p))
    y = sample(mech, x, rng=gen)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimate_frequencies(y, mech, domain=(0, k - 1), method=method, return_info=True)


def _observed(mech, est):
    """The dense channel on the outputs the estimate's reports hit, and their counts."""
    model = _model(mech, est.domain)
    Q = model.unscaled()
    Q = Q.toarray() if hasattr(Q, "toarray") else np.asarray(Q)
    c = np.asarray(est.counts, dtype=float)
    return Q[:, c > 0], c[c > 0]


def _grid_truth(mech, est, h, kappa):
    """max and min of h^T p over the grid points whose log-likelihood is within kappa of the best
    (the best over the grid and the MLE): inner approximations of the exact ends.  ``h="var"``: of the
    variance instead."""
    Q, c = _observed(mech, est)
    i, j = np.meshgrid(np.arange(GRID + 1), np.arange(GRID + 1), indexing="ij")
    keep = i + j <= GRID
    P = np.stack([i[keep], j[keep], GRID - i[keep] - j[keep]], axis=1) / GRID
    with np.errstate(divide="ignore"):
        ll = np.log(P @ Q) @ c
    mle = np.full(3, 1 / 3)
    for _ in range(20_000):  # plain EM, independent of the package's solvers
        mle = mle * (Q @ (c / (mle @ Q))) / c.sum()
    best = max(float(ll.max()), float(np.log(mle @ Q) @ c))
    inside = ll >= best - kappa
    if not isinstance(h, str):
        t = P[inside] @ h
        return float(t.min()), float(t.max())
    # the variance on 0, 1, 2, whose slope on the grid is up to 4 per unit: each extreme polished on a grid
    # 100 times finer around the best coarse point (two coarse steps each way)
    v = np.arange(3.0)

    def var(X):
        return X @ v**2 - (X @ v) ** 2

    ends = []
    for pick in (np.argmin, np.argmax):
        x0 = P[inside][pick(var(P[inside]))]
        a, b = np.meshgrid(np.linspace(-2, 2, 401) / GRID, np.linspace(-2, 2, 401) / GRID, indexing="ij")
        X = np.stack([x0[0] + a.ravel(), x0[1] + b.ravel(), x0[2] - a.ravel() - b.ravel()], axis=1)
        X = X[np.all(X >= 0, axis=1)]
        with np.errstate(divide="ignore"):
            ok = np.log(X @ Q) @ c >= best - kappa
        t = np.r_[var(X[ok]), var(x0[None, :])]
        ends.append(float(t.min() if pick is np.argmin else t.max()))
    return ends[0], ends[1]


@pytest.mark.parametrize("case", range(len(GRID_CASES)))
@pytest.mark.parametrize("level", [0.5, 0.95])
def test_ends_are_outer_bounds_close_to_the_exact_interval(case, level):
    mech, p, n = GRID_CASES[case]
    est = _fit(mech, p, n, seed=case)
    prof = est.profile(mech)
    z = 1.959963984540054 if level == 0.95 else 0.6744897501960817
    kappa = 0.5 * z * z
    v = np.arange(3.0)
    for stat, kw, h in [("mean", {}, v), ("cdf", {"x": 0}, (v <= 0) * 1.0), ("cdf", {"x": 1}, (v <= 1) * 1.0),
                        ("range", {"a": 1, "b": 2}, (v >= 1) * 1.0), ("range", {"a": 1, "b": 1}, (v == 1) * 1.0)]:
        lo, hi = prof.interval(stat, level, **kw)
        g_lo, g_hi = _grid_truth(mech, est, h, kappa)
        scale = float(h.max() - h.min())
        # outer: the grid's points (inside the exact set) are inside the interval
        assert lo <= g_lo + 1e-9 * scale and hi >= g_hi - 1e-9 * scale, (stat, kw, (lo, hi), (g_lo, g_hi))
        # and close: within the grid's resolution (points near the set's edge are missing) and the certificates
        assert g_lo - lo <= 0.005 * scale and hi - g_hi <= 0.005 * scale, (stat, kw, (lo, hi), (g_lo, g_hi))
    # the variance (not linear: a minimum of linear statistics, _Search.var_ends), on the scale of its range
    lo, hi = prof.interval("var", level)
    g_lo, g_hi = _grid_truth(mech, est, "var", kappa)
    assert lo <= g_lo + 1e-9 and hi >= g_hi - 1e-9, ("var", (lo, hi), (g_lo, g_hi))
    assert g_lo - lo <= 0.002 and hi - g_hi <= 0.002, ("var", (lo, hi), (g_lo, g_hi))  # measured: at most 7e-4


MECH = SparseLaplace(lam=0.3, s=21)
TRUTH = np.exp(-0.5 * ((np.arange(30) - 12) / 4.0) ** 2)


@pytest.fixture(scope="module")
def fitted():
    est = _fit(MECH, TRUTH, 20_000, seed=7)
    return est, est.profile(MECH)


def test_intervals_hold_the_mle_and_nest_with_the_level(fitted):
    est, prof = fitted
    assert isinstance(prof, Profile) and prof.gap <= 0.01
    v = est.values.astype(float)
    mle = prof.mle
    for stat, kw, t in [("mean", {}, float(mle @ v)), ("var", {}, float(mle @ v**2 - (mle @ v) ** 2)),
                        ("cdf", {"x": 10}, float(mle[v <= 10].sum())),
                        ("range", {"a": 8, "b": 15}, float(mle[(v >= 8) & (v <= 15)].sum()))]:
        outer = None
        for level in (0.5, 0.9, 0.99):
            lo, hi = prof.interval(stat, level, **kw)
            assert lo <= t + 1e-12 and t <= hi + 1e-12
            if outer is not None:
                assert lo <= outer[0] + 1e-6 and hi >= outer[1] - 1e-6
            outer = (lo, hi)


def test_statistic_methods_take_a_profile(fitted):
    est, prof = fitted
    value, (lo, hi) = est.range(8, 15, ci=prof)
    assert value == pytest.approx(est.range(8, 15)) and 0.0 <= lo <= hi <= 1.0
    value, (lo, hi) = est.mean(ci=prof, level=0.9)
    assert value == pytest.approx(est.mean()) and lo < hi
    # array arguments keep their shape
    lo, hi = prof.interval("cdf", x=np.array([[5, 10], [15, 20]]))
    assert lo.shape == hi.shape == (2, 2) and np.all(np.diff(hi.ravel()) >= -1e-9)


def test_quantile_intervals_invert_the_cdf_and_hold_the_mle_quantile(fitted):
    est, prof = fitted
    v = est.values
    F = np.cumsum(prof.mle)
    for q in (0.1, 0.5, 0.9):
        lo, hi = prof.interval("quantile", q=q)
        x_mle = float(v[np.argmax(F >= q * (1 - 1e-9))])
        assert lo <= x_mle <= hi
        # the ends are where the CDF bounds cross q
        assert prof.interval("cdf", x=lo)[1] >= q * (1 - 1e-9)
        if lo > v[0]:
            assert prof.interval("cdf", x=lo - 1)[1] < q
        ilo, ihi = prof.interval("quantile", q=q, method="interpolated")
        assert lo - 0.5 <= ilo <= ihi <= hi + 0.5


def test_per_value_intervals_hold_the_mle(fitted):
    est, prof = fitted
    lo, hi = prof.interval("p")
    assert lo.shape == hi.shape == (est.values.size,)
    assert np.all(lo <= prof.mle + 1e-12) and np.all(prof.mle <= hi + 1e-12)
    assert np.all(lo[prof.mle == 0] == 0.0)


@settings(max_examples=15, deadline=None)
@given(a=st.integers(0, 29), width=st.integers(0, 29))
def test_range_interval_is_inside_zero_one_and_holds_the_mle(fitted, a, width):
    est, prof = fitted
    b = min(29, a + width)
    lo, hi = prof.interval("range", a=a, b=b)
    t = float(prof.mle[a:b + 1].sum())
    assert 0.0 <= lo <= t + 1e-12 and t <= hi + 1e-12 and hi <= 1.0


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), lo=st.integers(0, 29), width=st.integers(0, 10), toward_range=st.booleans())
def test_points_on_the_sets_boundary_lie_inside_every_interval(fitted, seed, lo, width, toward_range):
    # from the MLE towards another distribution (random, or the MLE's mass moved into the range) up to the
    # set's boundary: that point's statistics are inside the intervals, and the range's reaches near its end
    est, prof = fitted
    Q, c = _observed(MECH, est)
    kappa = 0.5 * 1.959963984540054 ** 2
    L0 = float(c @ np.log(prof.mle @ Q)) - kappa
    b = min(29, lo + width)
    gen = np.random.default_rng(seed)
    if toward_range:
        r = np.zeros_like(prof.mle)
        r[lo:b + 1] = prof.mle[lo:b + 1] + 1e-3
    else:
        r = gen.dirichlet(np.full(prof.mle.size, 0.5))
    r /= r.sum()
    t_in, t_out = 0.0, 1.0
    for _ in range(50):  # the last t in [0, 1] whose mixture stays in the set
        t = 0.5 * (t_in + t_out)
        if float(c @ np.log(((1 - t) * prof.mle + t * r) @ Q)) >= L0:
            t_in = t
        else:
            t_out = t
    p = (1 - t_in) * prof.mle + t_in * r
    v = est.values
    for stat, kw, t in [("range", {"a": lo, "b": b}, float(p[lo:b + 1].sum())), ("cdf", {"x": lo}, float(p[:lo + 1].sum())),
                        ("mean", {}, float(p @ v)), ("var", {}, float(p @ v**2 - (p @ v) ** 2))]:
        a, z = prof.interval(stat, **kw)
        assert a - 1e-9 <= t <= z + 1e-9, (stat, kw, t, (a, z))


@given(k=st.integers(1, 300), cut=st.integers(0, 310), start=st.integers(0, 299), strict=st.booleans(),
       shape=st.sampled_from(["random", "linear", "convex", "step"]), seed=st.integers(0, 2**32 - 1))
def test_secant_search_finds_the_first_value_reaching_the_level(k, cut, start, strict, shape, seed):
    # whatever the values say beyond their side of the level (random, smooth, a step), the search returns
    # the first index that reaches it, in a number of calls logarithmic in its distance from the start
    from sparseldp.estimation._roots import _first_reaching

    gen = np.random.default_rng(seed)
    level = 0.5
    noise = gen.random(400)
    calls = []

    def value(i):
        assert 0 <= i < k
        calls.append(i)
        if shape == "random":
            size = noise[i]
        elif shape == "linear":
            size = 0.01 * abs(i - cut + 0.5)
        elif shape == "convex":
            size = 1e-4 * (i - cut + 0.5) ** 2
        else:
            size = 0.3
        above = i >= cut
        return level + size if above else level - size - 1e-12  # "reaches" both ways (strict or not)

    s = min(start, k - 1)
    got = _first_reaching(value, level, s, k, strict=strict)
    want = min(cut, k - 1)
    assert got == want
    assert len(calls) <= 4 * (abs(want - s) + 1).bit_length() + 10


@given(a=st.floats(0.3, 6.0), log_c=st.floats(-20.0, 20.0), log_kappa=st.floats(-8.0, 3.0),
       u0=st.floats(-25.0, -0.5), slope=st.sampled_from([1.0, 2.0]), flat=st.floats(-30.0, -1.0))
def test_tilt_secant_reaches_its_target_inside_its_bracket(a, log_c, log_kappa, u0, slope, flat):
    # d(u) = c e^(a u) up to a flat floor below u = flat (positivity binding): the steps keep every bracket they
    # found and end, within 40 steps, with d within 1e-6 of kappa (relative), or with a bracket narrower than its width around it
    from sparseldp.estimation._roots import _Secant

    kappa, u_max = math.exp(log_kappa), math.log1p(-1e-9)
    root = (log_kappa - log_c) / a
    assume(flat < root < u_max - 1e-3)

    def d(u):
        return math.exp(log_c + a * max(u, flat))

    steps = _Secant(kappa, u_max, slope=slope, slope_max=4.0 * slope, width=1e-12)
    u = min(u0, u_max)
    for _ in range(40):  # the searches' budget (_lr_fits._MAX_SOLVES)
        du = d(u)
        if abs(math.log(du / kappa)) < 1e-6:
            return
        nxt = steps.next(u, du)
        for end, inside in ((steps.lo, True), (steps.hi, False)):
            if end is not None:
                assert (d(end) < kappa) == inside
        if nxt is None:
            assert steps.lo is not None and steps.hi is not None and steps.lo <= root <= steps.hi + 1e-9
            return
        u = nxt
    raise AssertionError("no convergence in 40 steps")


def test_secant_search_takes_fewer_calls_on_smooth_values():
    # CDF-like bounds that change smoothly: the secant steps land near the crossing (6 calls; galloping by
    # doubling and bisection, before 2026-11-30's fourteenth session, took 10 here)
    from sparseldp.estimation._roots import _first_reaching

    calls = []

    def value(i):
        calls.append(i)
        return 0.1 + 0.004 * (i - 180) + 2e-5 * (i - 180) ** 2

    assert _first_reaching(value, 0.1, 198, 1000) == 180
    assert len(calls) <= 7, calls


def test_a_wide_kernel_gives_a_wide_interval():
    # the reports of a Gaussian kernel of sigma 8 on 12 values cannot tell where inside the domain the mass sits
    mech = SparseGaussian(sigma=8.0, s=41)
    est = _fit(mech, np.ones(12), 2_000, seed=3)
    narrow = _fit(SparseLaplace(lam=2.0, s=5), np.ones(12), 2_000, seed=3)
    wide = est.profile(mech).interval("range", a=3, b=5)
    sharp = narrow.profile(SparseLaplace(lam=2.0, s=5)).interval("range", a=3, b=5)
    assert wide[1] - wide[0] > 3 * (sharp[1] - sharp[0])


def test_bad_input(fitted):
    est, prof = fitted
    with pytest.raises(TypeError, match="takes keyword arguments"):
        prof.interval("var", x=3)
    with pytest.raises(ValueError, match="kind must be None or 'profile'"):
        prof.interval("mean", kind="span")
    with pytest.raises(TypeError, match="kind must be None or 'profile'"):
        prof.interval("mean", kind=3)
    with pytest.raises(ValueError, match="level"):
        prof.interval("mean", 1.5)
    with pytest.raises(TypeError, match="stat must be"):
        prof.interval(3)
    with pytest.raises(ValueError, match="stat must be"):
        prof.interval("median")
    with pytest.raises(TypeError, match="takes keyword arguments"):
        prof.interval("cdf")
    with pytest.raises(ValueError, match="a must be <= b"):
        prof.interval("range", a=5, b=2)
    with pytest.raises(TypeError, match="estimate must be a FrequencyEstimate"):
        profile(np.ones(3) / 3, MECH)
    with pytest.raises(ValueError, match="tol"):
        est.profile(MECH, tol=-1)
    with pytest.raises(ValueError, match="counts"):  # another mechanism's outputs, the estimate not recording its own
        dataclasses.replace(est, mechanism=None).profile(SparseLaplace(lam=0.3, s=7))
    with pytest.raises(ValueError, match=r"mechanism must be the one the estimate was fitted with"):
        est.profile(SparseLaplace(lam=0.3, s=7))
    with pytest.raises(ValueError, match=r"mechanism must be the one the estimate was fitted with"):
        est.profile(SparseLaplace(lam=0.4, s=21))  # the same outputs, other weights
    with pytest.raises(TypeError, match=r"profile needs mechanism="):
        dataclasses.replace(est, mechanism=None).profile()
    assert est.profile().interval("mean") == prof.interval("mean")  # the recorded mechanism by default
    other = _fit(MECH, TRUTH, 5_000, seed=8)
    with pytest.raises(ValueError, match="ci must be a Bootstrap of this estimate|this estimate"):
        other.mean(ci=prof)
    assert math.isfinite(prof.loglik)


def test_variance_on_one_and_two_values_follows_from_the_mean():
    # one value: no spread at all; two values: var = m (1 - m) is monotone on either side of 1/2, so its
    # ends are those of m (1 - m) over the mean's interval
    mech = SparseLaplace(lam=0.5, s=7)
    one = _fit(mech, [1.0], 500, seed=1)
    assert one.profile(mech).interval("var") == (0.0, 0.0)
    two = _fit(mech, [0.6, 0.4], 500, seed=2)
    prof = two.profile(mech)
    m_lo, m_hi = prof.interval("mean")
    lo, hi = prof.interval("var")
    f = [m * (1 - m) for m in (m_lo, m_hi, min(max(0.5, m_lo), m_hi))]
    assert lo <= min(f[:2]) + 1e-9 and hi >= max(f) - 1e-9
    assert min(f[:2]) - lo <= 0.002 and hi - max(f) <= 0.002


def test_modelled_seconds_grow_with_the_statistics_and_the_domain(fitted):
    # one interior-point iteration's modelled cost times the searches' measured iterations: no fit runs, the
    # same number every call, more for more statistics (a quantile over a mean), a larger domain and a wider
    # window; more under a Gaussian kernel than a Laplace one of the same window (warm starts pay only there)
    est, _ = fitted
    base = modelled_seconds(est, MECH)
    assert base > 0 and modelled_seconds(est) == base == modelled_seconds(est, MECH)
    one = modelled_seconds(est, MECH, ["mean"])
    assert one < modelled_seconds(est, MECH, ["quantile"]) < modelled_seconds(est, MECH, ["quantile", "quantile"])
    assert modelled_seconds(est, MECH, "mean") == one
    assert modelled_seconds(est, MECH, ["mean", "var", "quantile", "quantile", "quantile", "range"]) == base
    big = _fit(MECH, TRUTH, 20_000, seed=7, method="em", k=300)
    assert modelled_seconds(big, MECH) > base
    wide = SparseLaplace(lam=0.3, s=61)
    assert modelled_seconds(_fit(wide, TRUTH, 20_000, seed=7, method="em", k=300), wide) > modelled_seconds(big, MECH)
    gauss = SparseGaussian(sigma=6.0, s=61)
    assert (modelled_seconds(_fit(gauss, TRUTH, 20_000, seed=7, method="em", k=300), gauss)
            > modelled_seconds(_fit(wide, TRUTH, 20_000, seed=7, method="em", k=300), wide))
    # every value's interval ("p": 2 k warm-started searches) outgrows the default statistics with the domain
    assert modelled_seconds(big, MECH, "p") / modelled_seconds(big, MECH) > modelled_seconds(est, MECH, "p") / base


def test_modelled_seconds_bad_input(fitted):
    est, _ = fitted
    with pytest.raises(ValueError,
                       match=r"statistics must name 'mean', 'var', 'quantile', 'range', 'cdf', 'p'; got 'median'"):
        modelled_seconds(est, MECH, ["mean", "median"])
    for bad in (3, None, {"mean": 1}, [1], ["mean", None]):
        with pytest.raises(TypeError, match=r"statistics must be a name or a list of names of 'mean', .*; got "):
            modelled_seconds(est, MECH, bad)
    with pytest.raises(ValueError, match="statistics must name at least one of 'mean'.*; got an empty list"):
        modelled_seconds(est, MECH, [])
    with pytest.raises(TypeError, match="estimate must be a FrequencyEstimate"):
        modelled_seconds(np.ones(3) / 3, MECH)
    with pytest.raises(ValueError, match="report counts"):
        modelled_seconds(dataclasses.replace(est, counts=None), MECH)
    with pytest.raises(ValueError, match=r"mechanism must be the one the estimate was fitted with"):
        modelled_seconds(est, SparseLaplace(lam=0.3, s=7))


@settings(max_examples=40, deadline=None)
@given(names=st.lists(st.sampled_from(["mean", "var", "quantile", "range", "cdf", "p"]), min_size=1, max_size=8),
       more=st.lists(st.sampled_from(["mean", "var", "quantile", "range", "cdf", "p"]), min_size=1, max_size=4))
def test_modelled_seconds_add_over_statistics(fitted, names, more):
    # the cost of a set of statistics is the sum of their costs, in any order
    est, _ = fitted
    one = {name: modelled_seconds(est, MECH, [name]) for name in set(names + more)}
    total = modelled_seconds(est, MECH, names)
    assert total == pytest.approx(sum(one[name] for name in names), rel=1e-12)
    assert modelled_seconds(est, MECH, names[::-1]) == pytest.approx(total, rel=1e-12)
    assert modelled_seconds(est, MECH, names + more) > total


@pytest.mark.parametrize("case", range(len(GRID_CASES)))
def test_a_thresholded_end_settled_by_the_profile_solve_is_on_the_right_side(case, monkeypatch):
    # the quantiles' probes ask whether a statistic's outer upper end reaches a threshold: one solve of the
    # profile problem at the threshold settles it (no tilted fit) on either side of the exact end
    from sparseldp.estimation import _lr_fits

    mech, p, n = GRID_CASES[case]
    est = _fit(mech, p, n, seed=case)
    prof = est.profile(mech)
    search = prof._search
    kappa = 0.5 * 1.959963984540054 ** 2
    L0 = search.loglik - kappa
    fits = []
    tilted = _lr_fits._Fits._tilted
    monkeypatch.setattr(_lr_fits._Fits, "_tilted", lambda *a, **kw: fits.append(1) or tilted(*a, **kw))
    v = np.arange(3.0)
    for h in ((v <= 0) * 1.0, (v <= 1) * 1.0, (v == 1) * 1.0):
        _, g_hi = _grid_truth(mech, est, h, kappa)
        theta0 = float(h @ search.mle)
        for t, reaches in ((g_hi - 0.01, True), (g_hi + 0.01, False)):
            if not theta0 < t < 1.0:
                continue
            assert (search.upper(h, L0, threshold=t, memo={}) >= t) == reaches, (h, t, g_hi)
    assert len(fits) <= 2


def test_quantile_intervals_are_the_same_with_and_without_the_profile_solve(fitted, monkeypatch):
    from sparseldp.estimation import _lr_fits

    est, prof = fitted
    with_solve = [prof.interval("quantile", q=q, method=m) for q in (0.1, 0.5, 0.9)
                  for m in ("inverted_cdf", "interpolated")]
    monkeypatch.setattr(_lr_fits._Fits, "_profile_point", lambda *a, **kw: None)
    secant = [est.profile(MECH).interval("quantile", q=q, method=m) for q in (0.1, 0.5, 0.9)
              for m in ("inverted_cdf", "interpolated")]
    for (a, b), (c, d) in zip(with_solve, secant):  # interpolated ends: within one bisection step of a cell
        assert abs(a - c) <= 1 / 128 and abs(b - d) <= 1 / 128
    assert [w for i, w in enumerate(with_solve) if i % 2 == 0] == [s for i, s in enumerate(secant) if i % 2 == 0]
