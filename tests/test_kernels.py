"""The declared kernel interface, the general kernel and its mechanism (SparseKernel).

* one parameter table: ``SparseKernel.from_function`` with the Laplace / Gaussian
  shape agrees with ``SparseLaplace`` / ``SparseGaussian``, and the generic
  accounting path agrees with the closed forms (Theorems 3 and 9);
* non-log-concave kernels (a staircase, zeros inside the window) against
  brute force and an 80-digit mpmath reference (tests/brute.py);
* the chi-square test of the sampler rejects a correct sampler with
  probability at most 1e-6 (critical value ``chi2.isf(1e-6, df)``, expected
  counts >= 5 after merging neighbouring bins; seeded, so deterministic).
"""

import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import brute
from sparseldp import SparseGaussian, SparseLaplace
from sparseldp import accounting as A
from sparseldp.core.kernels import GaussianKernel, GeneralKernel, Kernel, LaplaceKernel, LogConcaveKernel
from sparseldp.core.kernel_mechanism import SparseKernel

ALPHA = 1e-6  # false-positive rate of the chi-square test
EPS = [0.0, 0.3, 1.0, 3.0]

# (kind, parameter, s)
SHAPES = [
    ("laplace", 0.5, 1),
    ("laplace", 0.5, 7),
    ("laplace", 1.7, 13),
    ("laplace", 0.05, 41),
    ("gaussian", 2.0, 7),
    ("gaussian", 0.3, 11),
    ("gaussian", 5.0, 31),
]
STAIRCASE = [1.0, 1.0, 1.0, 0.2, 0.2, 0.05]
ZEROS = [1.0, 0.0, 0.5, 0.5, 0.0, 0.1]
HOLLOW = [1.0, 0.7, 0.0, 0.0, 0.3]  # log-concave on no interval: zeros between positive weights
IRREGULAR = [STAIRCASE, ZEROS, HOLLOW, [1.0], [0.3, 2.0, 0.0], [1e-300, 1e300, 5e-324]]


def family(kind, param, s):
    return SparseLaplace(lam=param, s=s) if kind == "laplace" else SparseGaussian(sigma=param, s=s)


def shaped(kind, param, s):
    if kind == "laplace":
        return SparseKernel.from_function(lambda d: np.exp(-param * d), s=s)
    return SparseKernel.from_function(lambda d: np.exp(-(d * d) / (2 * param * param)), s=s)


# ---------------------------------------------------------------------------
# the interface
# ---------------------------------------------------------------------------
def test_kernel_abc_cannot_be_instantiated():
    with pytest.raises(TypeError):
        Kernel()
    with pytest.raises(TypeError):
        LogConcaveKernel()


def test_subclass_missing_a_method_fails():
    class Partial(Kernel):
        t = 0

        def log_w(self, k):
            return np.zeros(np.shape(k))

        def log_normalizer_bound(self, mode):
            return 0.0

        def log_range(self, a, b, mode="near"):
            return 0.0

        def decimal_weights(self, ctx):
            return []

        def weights(self, mode="near"):
            return np.ones(1)

    with pytest.raises(TypeError, match="moment_sums"):
        Partial()


def test_families_declare_the_interface():
    for k in (LaplaceKernel(0.5, 3), GaussianKernel(1.0, 3), GeneralKernel(STAIRCASE)):
        assert isinstance(k, Kernel)
    assert LaplaceKernel.log_concave and GaussianKernel.log_concave
    assert not GeneralKernel(STAIRCASE).log_concave
    assert not GeneralKernel(ZEROS).log_concave and not GeneralKernel(HOLLOW).log_concave
    assert GeneralKernel([1.0, 0.5, 0.25, 0.0]).log_concave  # exactly geometric, then zero
    assert "last_excess_index" in vars(GaussianKernel)  # a method of the class, not patched on later


# ---------------------------------------------------------------------------
# the Laplace and Gaussian shapes through the general kernel
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("row", SHAPES, ids=lambda r: f"{r[0]}-{r[1]}-{r[2]}")
def test_shaped_kernel_matches_the_family(row):
    kind, param, s = row
    m, ref = shaped(kind, param, s), family(kind, param, s)
    assert m.s == s and m.t == ref.t and m.family == "kernel"
    hs = np.arange(0, s + 2)
    e = np.array(EPS)[:, None]
    np.testing.assert_allclose(m.delta_h(e, hs[None, :]), ref.delta_h(e, hs[None, :]), rtol=0, atol=1e-13)
    d, dr = m.defect(e, 0, hs[None, :]), ref.defect(e, 0, hs[None, :])
    np.testing.assert_allclose(d.support_leakage, dr.support_leakage, rtol=0, atol=1e-13)
    np.testing.assert_allclose(d.overlap, dr.overlap, rtol=0, atol=1e-13)
    H = max(1, min(3, s))
    np.testing.assert_allclose(m.delta_star(EPS, H), ref.delta_star(EPS, H), rtol=0, atol=1e-13)
    exact = [float(brute.mp_delta_star(kind, param, s, eps, H)) for eps in EPS]
    assert np.all(m.delta_star_upper(EPS, H) >= exact)
    assert m.r1 == pytest.approx(ref.r1, rel=1e-13, abs=1e-13)
    assert m.r2 == pytest.approx(ref.r2, rel=1e-13, abs=1e-13)
    y = np.arange(-m.t - 2, m.t + 3)
    np.testing.assert_allclose(m.pmf(y, 1), ref.pmf(y, 1), rtol=1e-13, atol=1e-300)
    if s > 1:
        for delta in (0.5, 0.9):
            try:
                want = ref.epsilon(delta, H)
            except Exception as exc:  # noqa: BLE001 - both must refuse alike
                with pytest.raises(type(exc)):
                    m.epsilon(delta, H)
                continue
            assert m.epsilon(delta, H) == pytest.approx(want, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("row", SHAPES, ids=lambda r: f"{r[0]}-{r[1]}-{r[2]}")
def test_generic_path_cross_checks_the_closed_forms(row):
    kind, param, s = row
    k = family(kind, param, s).kernel
    hs = np.arange(0, s + 2)[None, :]
    e = np.array(EPS + [np.inf])[:, None]
    for mode_args in ({}, {"upper": True}, {"upper": False}):
        fn = A.defect_parts if not mode_args else A.defect_bounds
        closed = fn(k, e, hs, **mode_args)
        generic = fn(k, e, hs, method="generic", **mode_args)
        for a, b in zip(closed, generic):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-13)
    # the generic bounds bracket the exact value
    for eps in EPS:
        for h in range(0, s + 2):
            ex = float(brute.mp_defect(kind, param, s, eps, h)[0])
            up = float(A.defect_bounds(k, eps, h, method="generic")[0])
            dn = float(A.defect_bounds(k, eps, h, upper=False, method="generic")[0])
            assert dn <= ex <= up


# ---------------------------------------------------------------------------
# kernels that are not log-concave
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("weights", IRREGULAR, ids=str)
def test_irregular_kernels_against_brute_force(weights):
    m = SparseKernel(weights=weights)
    s = m.s
    H = s + 1
    for eps in EPS:
        for h in range(0, s + 2):
            d = m.defect(eps, 0, h)
            leak, ov = brute.weight_split(weights, eps, h)
            assert d.support_leakage == pytest.approx(leak, abs=1e-13)
            assert d.overlap == pytest.approx(ov, abs=1e-13)
            assert d.total == pytest.approx(d.support_leakage + d.overlap, abs=1e-15)
            ex = brute.mp_weight_defect(weights, eps, h)
            assert float(d.total) == pytest.approx(float(ex[0]), abs=1e-13)
            assert float(m.delta_h_upper(eps, h)) >= float(ex[0])
        exact_star = max(float(brute.mp_weight_defect(weights, eps, h)[0]) for h in range(1, H + 1))
        assert float(m.delta_star(eps, H)) == pytest.approx(exact_star, abs=1e-13)
        assert float(m.delta_star_upper(eps, H)) >= exact_star
        assert float(m.delta_star_upper(eps, H)) <= exact_star + 1e-13


def test_zeros_inside_the_window_never_vanish():
    m = SparseKernel(weights=ZEROS)
    # y = 1 has weight 0 under input 0 but not under input 2: the loss there is infinite
    base = float(A.delta_profile(m.kernel, np.inf, 2)[0])
    assert base > 0 and float(m.delta_star(1e6, 2)) == pytest.approx(base, abs=1e-15)
    with pytest.raises(Exception, match="no eps"):
        m.epsilon(base / 2, 2)
    eps = m.epsilon(min(1.0, base + 0.05), 2)
    assert float(m.delta_star_upper(eps, 2)) <= base + 0.05


def test_epsilon_certifies_for_a_staircase():
    m = SparseKernel(weights=STAIRCASE)
    for H, deltas in ((1, (0.1, 0.3)), (3, (0.3, 0.5)), (5, (0.5, 0.7))):
        for delta in deltas:
            eps = m.epsilon(delta, H)
            exact = max(float(brute.mp_weight_defect(STAIRCASE, eps, h)[0]) for h in range(1, H + 1))
            assert exact <= delta
            assert m.is_ldp(eps, delta, H)


# ---------------------------------------------------------------------------
# the mechanism value
# ---------------------------------------------------------------------------
def test_mechanism_value_and_validation():
    m = SparseKernel(weights=np.array(STAIRCASE))
    assert m.weights == tuple(STAIRCASE) and isinstance(m.weights, tuple)
    assert m.s == 11 and m.parameter == ("weights", tuple(STAIRCASE))
    assert hash(m) == hash(SparseKernel(weights=STAIRCASE)) and m == SparseKernel(weights=STAIRCASE)
    assert m.to_dict() == {"family": "kernel", "weights": tuple(STAIRCASE), "s": 11}
    assert np.array_equal(m.support(4), np.arange(-1, 10))
    assert math.isclose(float(m.pmf(np.arange(-5, 6)).sum()), 1.0, rel_tol=1e-14)
    assert SparseKernel.from_function(lambda d: math.exp(-d), s=5).weights == tuple(math.exp(-k) for k in range(3))
    with pytest.raises(ValueError, match=r"weights\[0\] = w\(0\) must be a real number > 0"):
        SparseKernel(weights=[0.0, 1.0])
    with pytest.raises(ValueError, match=r"weights\[1\] = -0.5"):
        SparseKernel(weights=[1.0, -0.5])
    with pytest.raises(ValueError, match=r"weights\[2\] = inf"):
        SparseKernel(weights=[1.0, 0.5, math.inf])
    with pytest.raises(ValueError, match="shape"):
        SparseKernel(weights=[[1.0]])
    with pytest.raises(ValueError, match="shape"):
        SparseKernel(weights=[])
    with pytest.raises(TypeError, match="weights must be"):
        SparseKernel(weights="1,2")
    with pytest.raises(TypeError, match="weights must be"):
        SparseKernel(weights=[True, False])
    with pytest.raises(ValueError, match="s must be an odd integer >= 1; got 4"):
        SparseKernel.from_function(lambda d: 1.0 + 0 * d, s=4)
    with pytest.raises(TypeError, match="w must be a callable"):
        SparseKernel.from_function([1.0], s=3)


def test_sampler_chi_square():
    m = SparseKernel(weights=STAIRCASE + [0.0, 0.01])
    n = 200_000
    x = np.random.default_rng(7).integers(-50, 50, n)
    y = m.sample(x, rng=2024)
    off = y - x
    assert off.min() >= -m.t and off.max() <= m.t
    probs = np.array([float(p) for p in m.sampling_pmf(0)[1]])
    np.testing.assert_allclose(probs, m.pmf(np.arange(-m.t, m.t + 1)), atol=1e-15)
    observed = np.bincount(off + m.t, minlength=m.s)
    expected = n * probs
    groups, cur, acc = [], [], 0.0
    for k, e in enumerate(expected):  # merge neighbouring bins until each expects >= 5
        cur.append(k)
        acc += e
        if acc >= 5.0:
            groups.append(cur)
            cur, acc = [], 0.0
    if cur:
        groups[-1].extend(cur)
    o = np.array([observed[g].sum() for g in groups], dtype=float)
    e = np.array([expected[g].sum() for g in groups])
    stat = float(((o - e) ** 2 / e).sum())
    assert stat < stats.chi2.isf(ALPHA, len(groups) - 1), stat
    cert = m.certify(1.0, 3)
    assert cert.delta_star_upper >= float(m.delta_star(1.0, 3)) - 1e-12


# ---------------------------------------------------------------------------
# properties (Remark 2's identity, the range of the defect, the bracket)
# ---------------------------------------------------------------------------
weights_st = st.lists(
    st.one_of(st.just(0.0), st.floats(1e-6, 10.0)), min_size=0, max_size=7
).flatmap(lambda rest: st.floats(1e-3, 10.0).map(lambda w0: [w0] + rest))


@given(weights=weights_st, eps=st.floats(0.0, 20.0), h=st.integers(0, 17))
def test_split_identity_and_range(weights, eps, h):
    m = SparseKernel(weights=weights)
    d = m.defect(eps, 0, h)
    assert 0.0 <= d.total <= 1.0 and d.support_leakage >= 0 and d.overlap >= 0
    assert d.total == pytest.approx(d.support_leakage + d.overlap, abs=1e-15)
    up = float(m.delta_h_upper(eps, h))
    dn = float(A.defect_bounds(m.kernel, eps, h, upper=False)[0])
    ex = float(brute.mp_weight_defect(weights, eps, h)[0])
    assert dn <= ex <= up <= 1.0
    assert up - ex <= 1e-13


@pytest.mark.parametrize("kern", [LaplaceKernel(0.5, 6), LaplaceKernel(1e-3, 40), GaussianKernel(1.5, 6),
                                  GaussianKernel(7.0, 25)], ids=repr)
def test_segments_are_the_runs_of_the_overlap_loss(kern):
    """``segments(h)`` lists, for eps falling from the largest loss to 0, the last index K of each excess set
    [h - t, K] (the runs of equal positive loss L_h(k) = log w(k) - log w(k - h)), with L_h(K)."""
    t = kern.t
    for h in range(1, 2 * t + 1):
        K, L = kern.segments(h)
        assert K.size == kern.segment_count(h)
        k = np.arange(h - t, t + 1)
        loss = kern.log_w(k) - kern.log_w(k - h)
        positive = loss > 1e-12 * np.max(np.abs(loss))
        # the runs of equal positive loss (exactly equal for the Laplace plateau k <= 0), their last index
        ends = [int(k[i]) for i in range(k.size) if positive[i] and (i + 1 == k.size or loss[i + 1] < loss[i] - 1e-12)]
        assert K.tolist() == ends, h
        np.testing.assert_allclose(L, [kern.loss_s(h, int(j)) for j in K], rtol=1e-13)
        assert np.all(np.diff(L) < 0)
        for j in range(K.size):  # inside each segment the excess set ends at K_j
            lo = L[j + 1] if j + 1 < K.size else 0.0
            assert kern.last_excess_s(0.5 * (lo + L[j]), h) == K[j]


# ---------------------------------------------------------------------------
# caches: made by the constructor only; equality, hashing and pickling unaffected
# ---------------------------------------------------------------------------
def test_caches_are_made_by_the_constructor_only():
    for k in (LaplaceKernel(0.5, 10), GaussianKernel(2.0, 10), GeneralKernel(STAIRCASE)):
        assert k._cache == {}
        if isinstance(k, LogConcaveKernel):
            assert k._smemo == k._sleak == {"near": {}, "up": {}, "dn": {}}
        names = set(vars(k))
        for mode in ("near", "up", "dn"):
            k.log_normalizer_bound(mode)
            k.log_range(np.array([-3, 0]), np.array([2, 10]), mode)
            if isinstance(k, LogConcaveKernel):
                k.leak_s(3, mode)
                k.overlap_s(0.5, 3, mode)
        # computing fills the caches the constructor made; it adds no attribute
        assert set(vars(k)) == names
        assert {"logc_near", "logc_up", "logc_dn"} <= set(k._cache)
        if isinstance(k, LogConcaveKernel):
            assert all(3 in k._smemo[mode] and 3 in k._sleak[mode] for mode in ("near", "up", "dn"))


@pytest.mark.parametrize("make", [lambda: SparseLaplace(lam=0.5, s=21), lambda: SparseGaussian(sigma=2.0, s=21),
                                  lambda: SparseKernel(weights=STAIRCASE)])
def test_cached_calls_leave_equality_hashing_and_pickling_unchanged(make):
    m, fresh = make(), make()
    assert m == fresh and hash(m) == hash(fresh)
    calls = [lambda x: x.delta_h(1.0, 3), lambda x: x.delta_h_upper(1.0, 3), lambda x: x.delta_star_upper(0.5, 5),
             lambda x: x.epsilon(0.3, 2), lambda x: x.delta_star_upper(np.array([0.2, 1.0]), 4)]
    values = [np.asarray(f(m)) for f in calls]  # fills the kernel's caches
    assert m == fresh and hash(m) == hash(fresh) and repr(m) == repr(fresh)
    k = m.kernel
    assert k == k and k != fresh.kernel  # a kernel equals itself only, cached or not
    m2 = pickle.loads(pickle.dumps(m))
    k2 = pickle.loads(pickle.dumps(k))
    assert m2 == m and hash(m2) == hash(m)
    assert set(k2._cache) == set(k._cache)  # what was computed travels with the kernel
    for f, v in zip(calls, values):  # the same values, bit for bit, warm (unpickled) and cold
        assert np.array_equal(np.asarray(f(m2)), v) and np.array_equal(np.asarray(f(make())), v)
    for mode in ("near", "up", "dn"):
        assert k2.log_normalizer_bound(mode) == k.log_normalizer_bound(mode)
