"""SparseChannel: one parameter table drives one battery of checks.

Every accounting number is compared against an independent dense brute force
(all ordered pairs, sum of positive parts), for both internal layouts (band
and flat); a few pairs are compared against dp-accounting.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import sparseldp.channel as channel_mod
import sparseldp.channel.store as channel_store  # _BAND_RATIO (backend choice) lives here
from sparseldp import InfeasibleError, SparseGaussian, SparseLaplace
from sparseldp.channel import SparseChannel, WorstPair

EPS = [0.0, 0.3, 1.0, 2.5]


# ---------------------------------------------------------------------------
# independent brute force (dense numpy, no code shared with the library)
# ---------------------------------------------------------------------------
def dense(ch):
    return ch.matrix.toarray()


def brute_pair(P, i, j, eps):
    return float(np.maximum(P[i] - math.exp(eps) * P[j], 0.0).sum())


def brute_split(P, i, j, eps):
    miss = (P[i] > 0) & (P[j] == 0)
    common = (P[i] > 0) & (P[j] > 0)
    leak = float(P[i][miss].sum())
    ov = float(np.maximum(P[i][common] - math.exp(eps) * P[j][common], 0.0).sum())
    return leak, ov


def pairs_in_range(x, H):
    n = len(x)
    return [(i, j) for i in range(n) for j in range(n) if i != j and (H is None or abs(x[i] - x[j]) <= H)]


def brute_delta(P, x, eps, H):
    vals = [brute_pair(P, i, j, eps) for i, j in pairs_in_range(x, H)]
    return max(vals) if vals else 0.0


def brute_pure(P, x, H):
    best = 0.0
    with np.errstate(divide="ignore"):
        L = np.log(P)
    for i, j in pairs_in_range(x, H):
        if not np.array_equal(P[i] > 0, P[j] > 0):
            return math.inf
        s = P[i] > 0
        best = max(best, float((L[i][s] - L[j][s]).max()))
    return best


# ---------------------------------------------------------------------------
# the parameter table
# ---------------------------------------------------------------------------
def _random_channel(seed, n, m, density, gaps=False):
    rng = np.random.default_rng(seed)
    W = rng.uniform(0.05, 5.0, size=(n, m)) * (rng.random((n, m)) < density)
    W[np.arange(n), rng.integers(0, m, n)] += 1.0
    inputs = np.sort(rng.choice(np.arange(-15, 30), size=n, replace=False)) if gaps else None
    return SparseChannel(W, inputs=inputs)


CASES = {
    "two-rows": lambda: SparseChannel([[2, 1, 0], [0, 1, 2]]),
    "dense-random": lambda: _random_channel(1, 6, 5, 1.0),
    "sparse-random": lambda: _random_channel(2, 7, 9, 0.4),
    "gapped-inputs": lambda: _random_channel(3, 6, 8, 0.5, gaps=True),
    "unsorted-inputs": lambda: SparseChannel(
        sp.csr_array(np.array([[1, 2, 0, 0], [0, 1, 1, 0], [0, 0, 3, 1], [1, 0, 0, 1.0]])),
        inputs=[5, 1, 3, 2],
        outputs=[10, -1, 7, 4],
    ),
    "common-support": lambda: SparseChannel(np.array([[1, 2, 3.0], [3, 2, 1], [1, 1, 1]]), inputs=[0, 1, 2]),
    "laplace-extended": lambda: SparseChannel.laplace(lam=0.5, s=7, domain=(0, 12)),
    "laplace-clipped": lambda: SparseChannel.laplace(lam=0.5, s=7, domain=(0, 12), window="clipped"),
    "gaussian-extended": lambda: SparseChannel.gaussian(sigma=1.5, s=5, domain=(-3, 6)),
    "gaussian-clipped": lambda: SparseChannel.gaussian(sigma=1.5, s=9, domain=(-3, 6), window="clipped"),
    "clipped-wide-window": lambda: SparseChannel.laplace(lam=0.3, s=21, domain=(0, 6), window="clipped"),
    "single-input": lambda: SparseChannel([[1.0, 3.0]], inputs=[4]),
}
H_VALUES = [None, 1, 2, 4]


@pytest.fixture(params=["auto", "band", "flat"])
def layout(request, monkeypatch):
    if request.param == "band":
        monkeypatch.setattr(channel_store, "_BAND_RATIO", 1e18)
    elif request.param == "flat":
        monkeypatch.setattr(channel_store, "_BAND_RATIO", 0.0)
    return request.param


@pytest.fixture(params=sorted(CASES))
def case(request, layout):
    return CASES[request.param]()


class TestBattery:
    def test_rows_are_distributions(self, case):
        P = dense(case)
        assert P.shape == (case.n_inputs, case.n_outputs)
        assert np.all(P >= 0)
        np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-14)
        # pattern of matrix == pattern of log_matrix, and logs agree
        L = case.log_matrix
        np.testing.assert_array_equal(L.indices, case.matrix.indices)
        np.testing.assert_allclose(np.exp(L.data), case.matrix.data, rtol=1e-14)

    def test_pmf_by_labels(self, case):
        P = dense(case)
        for r, x in enumerate(case.inputs):
            np.testing.assert_allclose(case.pmf(case.outputs, x), P[r], rtol=1e-15)
            lp = case.logpmf(case.outputs, x)
            np.testing.assert_allclose(np.exp(lp), P[r], rtol=1e-14)
            assert np.array_equal(lp > -np.inf, P[r] > 0)
            labels, probs = case.row(x)
            np.testing.assert_array_equal(np.sort(labels), np.sort(case.outputs[P[r] > 0]))
            assert probs.sum() == pytest.approx(1.0, abs=1e-14)
        # unknown output label: probability 0
        missing = int(case.outputs.max()) + 1
        assert case.pmf(missing, case.inputs[0]) == 0.0
        assert case.logpmf(missing, case.inputs[0]) == -np.inf
        # broadcasting
        out = case.pmf(case.outputs[:, None], case.inputs[None, :])
        assert out.shape == (case.n_outputs, case.n_inputs)
        np.testing.assert_allclose(out, P.T, rtol=1e-15)

    @pytest.mark.parametrize("H", H_VALUES)
    def test_delta_matches_brute_force(self, case, H):
        P = dense(case)
        x = case.inputs.tolist()
        prof = case.delta_star(EPS, H)
        assert prof.shape == (len(EPS),)
        for k, eps in enumerate(EPS):
            exact = brute_delta(P, x, eps, H)
            assert case.delta_star(eps, H) == pytest.approx(exact, abs=1e-14)
            assert prof[k] == pytest.approx(exact, abs=1e-14)

    @pytest.mark.parametrize("H", H_VALUES)
    def test_argmax_pair_attains_delta(self, case, H):
        res = case.delta_with_argmax(EPS, H)
        assert isinstance(res, WorstPair)
        if not pairs_in_range(case.inputs.tolist(), H):
            assert res.x is None and res.x_prime is None
            np.testing.assert_array_equal(res.delta, 0.0)
            return
        P = dense(case)
        row = {int(v): r for r, v in enumerate(case.inputs)}
        for k, eps in enumerate(EPS):
            x, xp = int(res.x[k]), int(res.x_prime[k])
            assert x != xp and (H is None or abs(x - xp) <= H)
            assert res.delta[k] == pytest.approx(brute_pair(P, row[x], row[xp], eps), abs=1e-14)
            assert res.support_leakage[k] + res.overlap[k] == pytest.approx(res.delta[k], abs=1e-14)

    def test_defect_split_matches_brute_force(self, case):
        P = dense(case)
        for i, j in pairs_in_range(case.inputs.tolist(), None):
            x, xp = int(case.inputs[i]), int(case.inputs[j])
            d = case.defect(EPS, x, xp)
            for k, eps in enumerate(EPS):
                leak, ov = brute_split(P, i, j, eps)
                assert d.support_leakage[k] == pytest.approx(leak, abs=1e-15)
                assert d.overlap[k] == pytest.approx(ov, abs=1e-14)
                assert d.total[k] == pytest.approx(leak + ov, abs=1e-14)
                assert d.total[k] == pytest.approx(d.support_leakage[k] + d.overlap[k], abs=1e-15)
        x0 = int(case.inputs[0])
        assert case.defect(1.0, x0, x0).total == 0.0

    def test_monotone_in_H_and_eps(self, case):
        grid = np.linspace(0, 4, 17)
        prev = None
        for H in [1, 2, 3, 5, 8, 100]:
            prof = case.delta_star(grid, H)
            assert np.all(np.diff(prof) <= 1e-15)  # nonincreasing in eps
            if prev is not None:
                assert np.all(prof >= prev - 1e-15)  # nondecreasing in H
            prev = prof
        np.testing.assert_allclose(case.delta_star(grid, None), case.delta_star(grid, 10**6), atol=1e-15)

    @pytest.mark.parametrize("H", H_VALUES)
    def test_pure_epsilon(self, case, H):
        P = dense(case)
        x = case.inputs.tolist()
        want = brute_pure(P, x, H)
        got = case.pure_epsilon(H)
        if math.isinf(want):
            assert got == math.inf
            assert not case.is_pure_ldp(1e300, H)
        else:
            assert got == pytest.approx(want, rel=1e-12, abs=1e-13)
            assert case.is_pure_ldp(case.pure_epsilon_upper(H), H)  # a certificate: at the upper bound
            assert case.is_pure_ldp(got, H, rtol=1e-12)  # the nearest value, with a tolerance opted into
            assert not case.is_pure_ldp(got * 0.999, H) or got == 0.0
            # pure eps-LDP means (eps, 0)-LDP
            assert case.delta_star(got * (1 + 1e-9) + 1e-12, H) <= 1e-12

    @pytest.mark.parametrize("H", H_VALUES)
    def test_epsilon_for_delta(self, case, H):
        P = dense(case)
        x = case.inputs.tolist()
        pairs = pairs_in_range(x, H)
        leak = max((brute_split(P, i, j, 0.0)[0] for i, j in pairs), default=0.0)
        for target in [0.05, 0.2, 0.5]:
            if leak > target:
                with pytest.raises(InfeasibleError, match="support leakage"):
                    case.epsilon(target, H)
                continue
            e = case.epsilon(target, H)
            assert e >= 0
            assert brute_delta(P, x, e, H) <= target + 1e-15
            if e > 0:
                assert brute_delta(P, x, e * (1 - 1e-8), H) > target - 1e-15

    def test_distortion_and_mean(self, case):
        P = dense(case)
        y = case.outputs.astype(float)
        for r, xv in enumerate(case.inputs):
            assert case.mean_output()[r] == pytest.approx(P[r] @ y, rel=1e-14, abs=1e-14)
            for order in (1, 2):
                want = P[r] @ np.abs(y - xv) ** order
                assert case.distortion(order)[r] == pytest.approx(want, rel=1e-13, abs=1e-14)

    def test_pickle_round_trip(self, case):
        import copy
        import pickle

        back = pickle.loads(pickle.dumps(case))
        assert (back.matrix != case.matrix).nnz == 0
        np.testing.assert_array_equal(back.log_matrix.data, case.log_matrix.data)
        np.testing.assert_array_equal(back.inputs, case.inputs)
        np.testing.assert_array_equal(back.outputs, case.outputs)
        assert (back.family, back.parameter, back.domain, back.window) == (case.family, case.parameter, case.domain, case.window)
        assert back.delta_star(1.0, 2) == case.delta_star(1.0, 2)
        assert copy.deepcopy(case).delta_star(0.5) == case.delta_star(0.5)

    def test_immutable(self, case):
        with pytest.raises(AttributeError, match="immutable"):
            case.foo = 1
        with pytest.raises(ValueError):
            case.matrix.data[0] = 0.5
        with pytest.raises(ValueError):
            case.inputs[0] = 99


# ---------------------------------------------------------------------------
# property-based: random channels, including differing supports
# ---------------------------------------------------------------------------
@st.composite
def channels(draw):
    n = draw(st.integers(2, 6))
    m = draw(st.integers(1, 7))
    cells = draw(
        st.lists(
            st.one_of(st.just(0.0), st.floats(1e-3, 10.0)),
            min_size=n * m,
            max_size=n * m,
        )
    )
    W = np.array(cells).reshape(n, m)
    for r in range(n):
        if W[r].sum() == 0:
            W[r, draw(st.integers(0, m - 1))] = 1.0
    inputs = draw(st.lists(st.integers(-12, 12), min_size=n, max_size=n, unique=True))
    return W, inputs


@settings(max_examples=80, deadline=None)
@given(
    channels(),
    st.floats(0.0, 3.0),
    st.one_of(st.none(), st.integers(1, 12)),
    st.sampled_from([0.0, 1e18]),
)
def test_delta_identity_random(chan, eps, H, ratio):
    W, inputs = chan
    old = channel_store._BAND_RATIO
    channel_store._BAND_RATIO = ratio
    try:
        ch = SparseChannel(W, inputs=inputs)
        P = W / W.sum(axis=1, keepdims=True)
        assert ch.delta_star(eps, H) == pytest.approx(brute_delta(P, inputs, eps, H), abs=1e-14)
        pe = ch.pure_epsilon(H)
        want = brute_pure(P, inputs, H)
        assert (pe == math.inf) == (want == math.inf)
        if want != math.inf:
            assert pe == pytest.approx(want, rel=1e-12, abs=1e-12)
        i, j = 0, 1
        d = ch.defect(eps, inputs[i], inputs[j])
        leak, ov = brute_split(P, i, j, eps)
        assert d.support_leakage == pytest.approx(leak, abs=1e-15)
        assert d.overlap == pytest.approx(ov, abs=1e-14)
    finally:
        channel_store._BAND_RATIO = old


@settings(max_examples=40, deadline=None)
@given(channels(), st.floats(0.01, 0.9), st.one_of(st.none(), st.integers(1, 12)))
def test_epsilon_random(chan, target, H):
    W, inputs = chan
    ch = SparseChannel(W, inputs=inputs)
    P = W / W.sum(axis=1, keepdims=True)
    pairs = pairs_in_range(inputs, H)
    leak = max((brute_split(P, i, j, 0.0)[0] for i, j in pairs), default=0.0)
    if leak > target:
        with pytest.raises(InfeasibleError):
            ch.epsilon(target, H)
        return
    e = ch.epsilon(target, H)
    assert brute_delta(P, inputs, e, H) <= target + 1e-15
    if e > 0:
        assert brute_delta(P, inputs, e * (1 - 1e-9), H) > target - 1e-15


# ---------------------------------------------------------------------------
# window channels against the mechanisms on Z (translation invariance)
# ---------------------------------------------------------------------------
MECHS = [
    ("laplace", 0.5, 7),
    ("laplace", 0.05, 21),
    ("laplace", 3.0, 5),
    ("gaussian", 1.5, 9),
    ("gaussian", 0.4, 7),
    ("gaussian", 6.0, 15),
]


def _pair(family, p, s, domain, window):
    if family == "laplace":
        return SparseLaplace(lam=p, s=s), SparseChannel.laplace(lam=p, s=s, domain=domain, window=window)
    return SparseGaussian(sigma=p, s=s), SparseChannel.gaussian(sigma=p, s=s, domain=domain, window=window)


@pytest.mark.parametrize("family,p,s", MECHS)
@pytest.mark.parametrize("domain", [(0, 30), (-5, -2), (7, 7)])
def test_extended_equals_translation_invariant(family, p, s, domain):
    mech, ch = _pair(family, p, s, domain, "extended")
    a, b = domain
    t = (s - 1) // 2
    assert ch.n_outputs == b - a + 1 + 2 * t
    np.testing.assert_array_equal(ch.outputs, np.arange(a - t, b + t + 1))
    np.testing.assert_allclose(ch.distortion(1), mech.r1, rtol=1e-12)
    np.testing.assert_allclose(ch.distortion(2), mech.r2, rtol=1e-12)
    np.testing.assert_allclose(ch.mean_output(), np.arange(a, b + 1), atol=1e-12)
    for x in (a, b):
        np.testing.assert_allclose(ch.logpmf(np.arange(x - t, x + t + 1), x), mech.logpmf(np.arange(x - t, x + t + 1), x), rtol=1e-13)
    eps = np.array([0.0, 0.5, 1.0, 3.0])
    for H in [1, 3, 8, 40, None]:
        hh = min(H or 10**9, b - a)
        got = ch.delta_star(eps, H)
        if hh == 0:
            np.testing.assert_array_equal(got, 0.0)
            continue
        np.testing.assert_allclose(got, mech.delta_star(eps, hh), rtol=1e-12, atol=1e-15)
    if b - a >= 3:
        target = float(mech.delta_star(1.0, 3)) * 1.05
        if target < 1:
            assert ch.epsilon(target, 3) == pytest.approx(mech.epsilon(target, 3), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("family,p,s", MECHS)
def test_clipped_differs_near_edges_and_matches_brute_force(family, p, s):
    mech, ch = _pair(family, p, s, (0, 25), "clipped")
    t = (s - 1) // 2
    P = dense(ch)
    row = {int(v): r for r, v in enumerate(ch.inputs)}
    diffs = []
    for h in range(1, min(2 * t, 25) + 1):
        for eps in (0.0, 1.0):
            edge = ch.defect(eps, 0, h)
            assert edge.total == pytest.approx(brute_pair(P, row[0], row[h], eps), abs=1e-14)
            diffs.append(abs(float(edge.total) - float(mech.delta_h(eps, h))))
            # far from the edges the clipped window is the full window
            mid = 12 - h // 2
            if mid - t >= 0 and mid + h + t <= 25:
                assert ch.defect(eps, mid, mid + h).total == pytest.approx(float(mech.delta_h(eps, h)), abs=1e-13)
    assert max(diffs) > 1e-3
    for H in [1, 3, None]:
        assert ch.delta_star(1.0, H) == pytest.approx(brute_delta(P, ch.inputs.tolist(), 1.0, H), abs=1e-14)
    # clipped rows are biased near the edges (NOTES item 9)
    assert ch.mean_output()[0] > 0.01


def test_large_domain_is_banded_and_matches_mechanism():
    mech = SparseLaplace(lam=0.1, s=101)
    ch = SparseChannel.laplace(lam=0.1, s=101, domain=(0, 2999))
    assert ch.matrix.nnz == 3000 * 101
    res = ch.delta_with_argmax([0.5, 1.0], 50)
    np.testing.assert_allclose(res.delta, mech.delta_star([0.5, 1.0], 50), rtol=1e-12)
    assert isinstance(ch._backend(), channel_mod._Band)
    cl = SparseChannel.gaussian(sigma=8.0, s=101, domain=(0, 2999), window="clipped")
    assert cl.delta_star(1.0, 50) >= SparseGaussian(sigma=8.0, s=101).delta_star(1.0, 50) - 1e-12
    # far pairs have disjoint windows: defect 1, found without visiting every pair
    assert ch.delta_star(1.0) == 1.0


# ---------------------------------------------------------------------------
# dp-accounting (an outside implementation)
# ---------------------------------------------------------------------------
def _log_pmf_dict(ch, x):
    labels, _ = ch.row(x)
    return {int(y): float(v) for y, v in zip(labels, ch.logpmf(labels, x))}


@pytest.mark.parametrize(
    "build",
    [
        lambda: SparseChannel.laplace(lam=0.5, s=7, domain=(0, 20), window="clipped"),
        lambda: SparseChannel.gaussian(sigma=2.0, s=11, domain=(0, 20), window="clipped"),
        lambda: _random_channel(5, 5, 8, 0.6),
    ],
)
def test_against_dp_accounting(build):
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    ch = build()
    xs = ch.inputs.tolist()
    for x, xp in [(xs[0], xs[2]), (xs[2], xs[0]), (xs[1], xs[4]), (xs[3], xs[4])]:
        # the PLD of (upper || lower) gives sum [upper - e^eps lower]_+ : upper = Q(.|x)
        dist = pld.from_two_probability_mass_functions(
            _log_pmf_dict(ch, xp), _log_pmf_dict(ch, x), value_discretization_interval=1e-5
        )
        for eps in (0.0, 0.5, 1.0):
            exact = float(ch.defect(eps, x, xp).total)
            got = dist.get_delta_for_epsilon(eps)
            assert got >= exact - 1e-12  # pessimistic
            assert got - exact <= 5e-5


# ---------------------------------------------------------------------------
# extreme values: log-space path
# ---------------------------------------------------------------------------
def test_huge_eps_uses_log_space():
    # built from explicit entries: a dense -> sparse conversion would drop the log weights 0.0
    L = sp.coo_array((np.array([0.0, -800.0, -800.0, 0.0]), (np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]))))
    ch = SparseChannel.from_log_weights(L)
    # Delta(eps) = p0 (1 - e^{eps - 800}) for eps < 800 (p0 = 1 in double)
    assert ch.delta_star(799.0) == pytest.approx(-math.expm1(-1.0), rel=1e-12)
    assert ch.delta_star(800.5) == 0.0
    assert ch.epsilon(0.5) == pytest.approx(800 + math.log(0.5), rel=1e-12)
    assert ch.pure_epsilon() == pytest.approx(800.0, rel=1e-14)
    assert ch.matrix.nnz == 4  # the underflowed probabilities stay in the support
    assert ch.pmf(1, 0) == 0.0 and ch.logpmf(1, 0) == pytest.approx(-800.0)


def test_underflowed_window_entries_stay_in_support():
    ch = SparseChannel.laplace(lam=100.0, s=21, domain=(0, 5), window="clipped")
    assert ch.matrix.nnz == sum(min(5, x + 10) - max(0, x - 10) + 1 for x in range(6))
    assert np.all(np.isfinite(ch.log_matrix.data))
    # all windows cover the domain: common supports, finite pure epsilon
    assert math.isfinite(ch.pure_epsilon())
    with pytest.raises(InfeasibleError, match="delta = 0"):
        SparseChannel.laplace(lam=100.0, s=3, domain=(0, 5)).epsilon(0.0, 1)


def test_epsilon_zero_and_trivial_cases():
    ch = SparseChannel(np.ones((3, 4)))
    assert ch.delta_star(0.0) == 0.0
    # certified: the rounding model cannot tell identical rows from rows within rounding of
    # each other, so the certified eps is a rounding-sized number, not exactly 0
    assert 0.0 <= ch.epsilon(0.0) <= 1e-13
    assert ch.epsilon(1.0) == 0.0
    assert ch.pure_epsilon() == 0.0
    single = SparseChannel([[1.0, 2.0]])
    assert single.epsilon(0.1) == 0.0
    assert single.delta_star([0.0, 1.0]).tolist() == [0.0, 0.0]
    gapped = SparseChannel(np.eye(3) + 0.1, inputs=[0, 10, 20])
    assert gapped.delta_star(0.0, 5) == 0.0
    assert gapped.pure_epsilon(5) == 0.0


def test_metadata():
    ch = SparseChannel.gaussian(sigma=2.0, s=9, domain=(3, 40), window="clipped")
    assert (ch.family, ch.parameter, ch.s, ch.domain, ch.window) == ("gaussian", ("sigma", 2.0), 9, (3, 40), "clipped")
    raw = SparseChannel([[1.0]])
    assert (raw.family, raw.parameter, raw.s, raw.domain, raw.window) == (None,) * 5
    assert "family='gaussian'" in repr(ch)


def test_sparse_input_is_not_densified(monkeypatch):
    n = 20000
    W = sp.diags([np.ones(n), np.ones(n - 1), np.ones(n - 1)], [0, 1, -1], format="csr")

    def refuse(*args, **kwargs):
        raise AssertionError("densified")

    monkeypatch.setattr(sp._base._spbase, "toarray", refuse)
    monkeypatch.setattr(sp._base._spbase, "todense", refuse)
    ch = SparseChannel(W)
    assert ch.matrix.nnz == W.nnz
    # interior rows are thirds; each neighbour leaks one third, the overlap cancels at eps = 0
    assert ch.delta_star(0.0, 1) == pytest.approx(1.0 / 3.0, abs=1e-15)
    assert ch.pure_epsilon(1) == math.inf


def test_coo_duplicates_are_summed():
    W = sp.coo_array((np.array([1.0, 1.0, 2.0]), (np.array([0, 0, 1]), np.array([0, 0, 1]))), shape=(2, 2))
    ch = SparseChannel(W)
    assert ch.matrix.toarray().tolist() == [[1.0, 0.0], [0.0, 1.0]]


# ---------------------------------------------------------------------------
# errors: name the parameter, the allowed range and the value given
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        (dict(weights=[[1, -1]]), ValueError, r"weights must be finite and >= 0; got -1.0 at \(row 0, column 1\)"),
        (dict(weights=[[1, float("nan")]]), ValueError, r"weights must be finite and >= 0; got nan"),
        (dict(weights=[[1, float("inf")]]), ValueError, r"weights must be finite and >= 0; got inf"),
        (dict(weights=[[1, 0], [0, 0]]), ValueError, r"positive sum.*row 1 is all zero"),
        (dict(weights=[1, 2, 3]), ValueError, r"weights must be 2-D.*got shape \(3,\)"),
        (dict(weights=np.zeros((0, 3))), ValueError, r"at least one row"),
        (dict(weights=[["a", "b"]]), TypeError, r"weights must be a 2-D array of real numbers"),
        (dict(weights=[[1j, 1]]), TypeError, r"real numbers"),
        (dict(weights="abc"), TypeError, r"weights must be"),
        (dict(weights=[[1, 1], [1, 1]], inputs=[0]), ValueError, r"inputs must have one value per row of weights \(2\); got 1"),
        (dict(weights=[[1, 1], [1, 1]], inputs=[3, 3]), ValueError, r"inputs must be distinct integers; 3 appears more than once"),
        (dict(weights=[[1, 1], [1, 1]], inputs=[0.0, 1.0]), TypeError, r"inputs must be an integer"),
        (dict(weights=[[1, 1], [1, 1]], inputs=[[0, 1]]), ValueError, r"inputs must be a 1-D array"),
        (dict(weights=[[1, 1], [1, 1]], outputs=[0, 1, 2]), ValueError, r"outputs must have one value per column of weights \(2\); got 3"),
        (dict(weights=[[1, 1], [1, 1]], outputs=[1, 1]), ValueError, r"outputs must be distinct"),
    ],
)
def test_constructor_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        SparseChannel(**kwargs)


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda: SparseChannel.laplace(lam=0.5, s=4, domain=(0, 9)), ValueError, r"s must be an odd integer >= 1; got 4"),
        (lambda: SparseChannel.laplace(lam=0.5, s=0, domain=(0, 9)), ValueError, r"s must be an odd integer >= 1; got 0"),
        (lambda: SparseChannel.laplace(lam=-1, s=3, domain=(0, 9)), ValueError, r"lam must be a real number > 0 and finite; got -1"),
        (lambda: SparseChannel.gaussian(sigma=float("nan"), s=3, domain=(0, 9)), ValueError, r"sigma must be"),
        (lambda: SparseChannel.laplace(lam=0.5, s=3, domain=(9, 0)), ValueError, r"domain must be a pair \(lo, hi\) of integers with lo <= hi; got \(9, 0\)"),
        (lambda: SparseChannel.laplace(lam=0.5, s=3, domain=(0, 1, 2)), ValueError, r"domain must be a pair"),
        (lambda: SparseChannel.laplace(lam=0.5, s=3, domain=5), TypeError, r"domain must be a pair"),
        (lambda: SparseChannel.laplace(lam=0.5, s=3, domain=(0.0, 9)), TypeError, r"domain lo must be an integer"),
        (lambda: SparseChannel.laplace(lam=0.5, s=3, domain=(0, 9), window="wide"), ValueError, r"window must be 'extended' or 'clipped'; got 'wide'"),
        (lambda: SparseChannel([[1.0, 1.0]]).delta_star(-1.0), ValueError, r"eps must be a real number >= 0"),
        (lambda: SparseChannel([[1.0, 1.0]]).delta_star(1.0, H=0), ValueError, r"H must be an integer >= 1; got 0"),
        (lambda: SparseChannel([[1.0, 1.0]]).delta_star(1.0, H=2.0), TypeError, r"H must be an integer"),
        (lambda: SparseChannel([[1.0, 1.0]]).epsilon(1.5), ValueError, r"delta must be a real number in \[0, 1\]; got 1.5"),
        (lambda: SparseChannel([[1.0, 1.0]]).pmf(0, 3), ValueError, r"x must be one of the channel's 1 input values \(between 0 and 0\); got 3"),
        (lambda: SparseChannel([[1.0, 1.0]]).pmf(0.5, 0), TypeError, r"y must be an integer"),
        (lambda: SparseChannel([[1.0], [1.0]]).defect(1.0, 0, 7), ValueError, r"x_prime must be one of"),
        (lambda: SparseChannel([[1.0]]).distortion(0), ValueError, r"order must be an integer >= 1; got 0"),
        (lambda: SparseChannel.from_log_weights(np.zeros((2, 2))), TypeError, r"log_weights must be a scipy.sparse matrix"),
        (lambda: SparseChannel.from_log_weights(sp.csr_array(np.array([[np.nan, 1.0]]))), ValueError, r"log_weights must be real numbers"),
    ],
)
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---------------------------------------------------------------------------
# the O(n K) bound for rows that share one support (delta_star_upper_fast)
# ---------------------------------------------------------------------------
def mp_delta(W, x, eps, H):
    """The exact delta*(eps; H) of the channel W normalized exactly (60 digits; every double converts exactly)."""
    import mpmath

    with mpmath.workdps(60):
        rows = [[mpmath.mpf(float(w)) for w in r] for r in W]
        P = [[w / mpmath.fsum(r) for w in r] for r in rows]
        u = mpmath.exp(mpmath.mpf(float(eps)))
        best = mpmath.mpf(0)
        for i, j in pairs_in_range(x, H):
            best = max(best, mpmath.fsum(max(p - u * q, 0) for p, q in zip(P[i], P[j])))
        return best


@st.composite
def full_support_channels(draw):
    n = draw(st.integers(2, 6))
    m = draw(st.integers(1, 6))
    W = np.array(draw(st.lists(st.floats(1e-3, 10.0), min_size=n * m, max_size=n * m))).reshape(n, m)
    if draw(st.booleans()):  # rows that are permutations of one row: exact ties in the log ratios
        W = np.array([np.roll(W[0], k) for k in range(n)])
    inputs = draw(st.lists(st.integers(-12, 12), min_size=n, max_size=n, unique=True))
    return W, inputs


@settings(max_examples=60, deadline=None)
@given(full_support_channels(), st.one_of(st.none(), st.integers(1, 12)),
       st.sampled_from([0.0, 0.3, 1.0, 1.0 + 1e-15, 1.5]))
def test_fast_bound_is_never_below_the_exact_defect(chan, H, scale):
    """At, below and above the pure epsilon, on any range: fast >= exact (60-digit), and delta_star_upper
    takes the fast bound only where it is no looser than the pair scan."""
    from sparseldp.channel.upper import _scan_upper

    W, inputs = chan
    ch = SparseChannel(W, inputs=inputs)
    eps = scale * ch.pure_epsilon(H)
    exact = mp_delta(W, inputs, eps, H)
    fast = float(ch.delta_star_upper_fast(eps, H))
    assert fast >= exact and fast >= float(ch.delta_star(eps, H))
    up = float(ch.delta_star_upper(eps, H))
    assert exact <= up <= float(_scan_upper(ch, np.array([eps]), H)[0])
    pe = ch.pure_epsilon_upper(H)
    assert pe >= ch.pure_epsilon(H)
    assert float(ch.delta_star_upper_fast(pe, H)) == 0.0 == float(ch.delta_star_upper(pe, H))
    assert mp_delta(W, inputs, pe, H) == 0


def test_fast_bound_is_tight_for_two_level_columns_and_trivial_otherwise():
    # randomized-response-like columns: one partner attains every column's largest ratio
    k = 40
    W = np.ones((k, k)) + (math.e - 1.0) * np.eye(k)
    ch = SparseChannel(W)
    for eps, H in [(0.5, None), (0.9, 3), (0.2, 1)]:
        fast = float(ch.delta_star_upper_fast(eps, H))
        assert float(ch.delta_star(eps, H)) <= fast <= float(ch.delta_star(eps, H)) * (1 + 1e-12) + 1e-15
    # a support mismatch: the fast bound does not apply (1.0, trivially true), the full path is used
    sparse_ch = SparseChannel([[2, 1, 0], [0, 1, 2]])
    assert float(sparse_ch.delta_star_upper_fast(0.5)) == 1.0
    assert sparse_ch.pure_epsilon_upper() == math.inf
    np.testing.assert_array_equal(ch.delta_star_upper_fast([0.0, 5.0], H=2).shape, (2,))
    assert float(SparseChannel([[1.0, 3.0]], inputs=[4]).delta_star_upper_fast(0.0)) == 0.0  # no pair in range
    with pytest.raises(ValueError, match="eps must be a real number >= 0"):
        ch.delta_star_upper_fast(-1.0)


@pytest.mark.parametrize("make", ["piecewise", "hybrid", "duchi", "randomized_response", "square_wave"])
@pytest.mark.parametrize("H", [1, 3, None])
def test_worst_pair_from_the_fast_bounds_peak_row(make, H, monkeypatch):
    # where the fast upper bound is tight, the worst pair comes from its peak row alone (no scan of all
    # pairs): it must still attain the brute-force maximum, and its split must add up
    from sparseldp import baselines
    from sparseldp.channel import scan

    monkeypatch.setattr(scan, "_PEAK_MIN_WORK", 0)  # the shortcut is for large scans; force it here
    ch = getattr(baselines, make)(eps=1.0, domain=(0, 11))
    P = dense(ch)
    row = {int(v): r for r, v in enumerate(ch.inputs)}
    used = 0
    for eps in (0.0, 0.3, 0.8, 1.0, 1.5):
        used += scan._peak_row_scan(ch, np.array([eps]), H) is not None
        res = ch.delta_with_argmax(eps, H)
        exact = brute_delta(P, ch.inputs.tolist(), eps, H)
        assert res.delta == pytest.approx(exact, abs=1e-14)
        x, xp = int(res.x), int(res.x_prime)
        assert x != xp and (H is None or abs(x - xp) <= H)
        assert brute_pair(P, row[x], row[xp], eps) == pytest.approx(exact, abs=1e-14)
        assert res.support_leakage + res.overlap == pytest.approx(res.delta, abs=1e-14)
    assert used >= 1  # the shortcut was taken at least once (eps at or above the pure epsilon: defect 0)


def test_is_pure_ldp_is_a_certificate():
    # the exact pure epsilon is 1 + 4e-13 > 1: not certified at eps = 1 (a 1e-12 tolerance passed it),
    # as is_ldp(1, 0) already said
    a = 1 + 4e-13
    ch = SparseChannel([[math.exp(a), 1], [1, math.exp(a)]])
    assert not ch.is_pure_ldp(1.0) and not ch.is_ldp(1.0, 0.0)
    assert ch.is_pure_ldp(ch.pure_epsilon_upper()) and ch.is_pure_ldp(1.0, rtol=1e-12)
