"""Baselines as channels: one parameter table, one battery of checks.

Each pmf is compared with an independent construction: the noise distribution
on a wide window of Z (numpy), pushed through clamping or folding; accounting
against a dense brute force; pure epsilon against the known closed forms.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from sparseldp import SparseGaussian, SparseLaplace
from sparseldp.baselines import (
    FAMILIES,
    Family,
    discrete_gaussian,
    geometric,
    randomized_response,
    sparse_gaussian,
    sparse_laplace,
)
from sparseldp.channel import SparseChannel


# ---------------------------------------------------------------------------
# independent references
# ---------------------------------------------------------------------------
def push_noise(logw_of_z, zmax, domain, mapping):
    """Dense channel of y = mapping(x + Z), Z with log weights on |z| <= zmax."""
    a, b = domain
    k = b - a + 1
    z = np.arange(-zmax, zmax + 1)
    g = np.exp(logw_of_z(z) - np.max(logw_of_z(z)))
    g /= g.sum()
    P = np.zeros((k, k))
    for i, x in enumerate(range(a, b + 1)):
        np.add.at(P[i], mapping(x + z) - a, g)
    return P


def clamp(domain):
    return lambda v: np.clip(v, domain[0], domain[1])


def fold(domain):
    a, b = domain
    k = b - a + 1

    def f(v):
        u = np.mod(v - a, 2 * k)
        return np.where(u < k, a + u, a + 2 * k - 1 - u)

    return f


def reference(name, p, domain):
    a, b = domain
    k = b - a + 1
    if name == "rr":
        P = np.full((k, k), 1.0 / (math.exp(p) + k - 1))
        np.fill_diagonal(P, math.exp(p) / (math.exp(p) + k - 1))
        return P
    if name.startswith("geometric"):
        zmax = int(800 / p) + 3 * k  # omitted mass < e^-800
        mapping = clamp(domain) if name.endswith("clamp") else fold(domain)
        return push_noise(lambda z: -p * np.abs(z), zmax, domain, mapping)
    if name == "discrete-gaussian":
        zmax = int(45 * p) + 3 * k
        return push_noise(lambda z: -(z * z) / (2 * p * p), zmax, domain, clamp(domain))
    raise KeyError(name)


def brute_delta(P, x, eps, H):
    best = 0.0
    for i in range(len(x)):
        for j in range(len(x)):
            if i != j and (H is None or abs(x[i] - x[j]) <= H):
                best = max(best, float(np.maximum(P[i] - math.exp(eps) * P[j], 0).sum()))
    return best


def brute_pure(P, x, H):
    best = 0.0
    with np.errstate(divide="ignore"):
        L = np.log(P)
    for i in range(len(x)):
        for j in range(len(x)):
            if i != j and (H is None or abs(x[i] - x[j]) <= H):
                if not np.array_equal(P[i] > 0, P[j] > 0):
                    return math.inf
                s = P[i] > 0
                best = max(best, float((L[i][s] - L[j][s]).max()))
    return best


# ---------------------------------------------------------------------------
# the parameter table
# ---------------------------------------------------------------------------
TABLE = [
    ("rr", 0.0, (0, 4)),
    ("rr", 1.0, (0, 9)),
    ("rr", 3.5, (-3, 3)),
    ("rr", 2.0, (5, 5)),
    ("geometric-clamp", 0.05, (0, 12)),
    ("geometric-clamp", 0.8, (0, 12)),
    ("geometric-clamp", 4.0, (-2, 7)),
    ("geometric-clamp", 0.5, (3, 3)),
    ("geometric-fold", 0.05, (0, 12)),
    ("geometric-fold", 0.8, (0, 12)),
    ("geometric-fold", 4.0, (-2, 7)),
    ("geometric-fold", 0.5, (3, 4)),
    ("discrete-gaussian", 0.4, (0, 12)),
    ("discrete-gaussian", 2.0, (0, 12)),
    ("discrete-gaussian", 25.0, (-4, 8)),
    ("discrete-gaussian", 1.0, (2, 2)),
]


def build(name, p, domain):
    fam = FAMILIES[name]
    return fam.constructor(**{fam.param: p}, domain=domain)


@pytest.fixture(params=TABLE, ids=[f"{n}-{p}-{d[0]}:{d[1]}" for n, p, d in TABLE])
def row(request):
    name, p, domain = request.param
    return name, p, domain, build(name, p, domain)


class TestBattery:
    def test_is_a_channel_on_the_domain(self, row):
        name, p, (a, b), ch = row
        assert isinstance(ch, SparseChannel)
        np.testing.assert_array_equal(ch.inputs, np.arange(a, b + 1))
        np.testing.assert_array_equal(ch.outputs, np.arange(a, b + 1))
        P = ch.matrix.toarray()
        np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-14)
        assert ch.family == name and ch.parameter == (FAMILIES[name].param, p) and ch.domain == (a, b)

    def test_pmf_matches_independent_construction(self, row):
        name, p, domain, ch = row
        np.testing.assert_allclose(ch.matrix.toarray(), reference(name, p, domain), rtol=1e-11, atol=1e-16)

    @pytest.mark.parametrize("H", [None, 1, 3])
    def test_delta_matches_brute_force(self, row, H):
        name, p, domain, ch = row
        P = ch.matrix.toarray()
        x = ch.inputs.tolist()
        for eps in (0.0, 0.5, 2.0):
            assert ch.delta_star(eps, H) == pytest.approx(brute_delta(P, x, eps, H), abs=1e-14)

    @pytest.mark.parametrize("H", [None, 1, 3])
    def test_pure_epsilon(self, row, H):
        name, p, (a, b), ch = row
        pe = ch.pure_epsilon(H)
        assert math.isfinite(pe)  # full support
        assert pe == pytest.approx(brute_pure(ch.matrix.toarray(), ch.inputs.tolist(), H), rel=1e-10, abs=1e-12)
        span = min(H if H is not None else b - a, b - a)
        if name == "rr" and b > a:
            assert pe == pytest.approx(p, rel=1e-12, abs=1e-15)
            assert ch.is_pure_ldp(p, H)
        if name == "geometric-clamp":
            assert pe == pytest.approx(p * span, rel=1e-12, abs=1e-15)
        if name == "geometric-fold":
            assert pe <= p * span * (1 + 1e-12)  # post-processing of x + Z
        if b > a:
            assert ch.delta_star(pe * (1 + 1e-9), H) <= 1e-14


def test_rr_formula_and_bad_eps():
    ch = randomized_response(eps=math.log(3.0), domain=(0, 2))
    # e^eps = 3, k = 3: 3/5 on the diagonal, 1/5 elsewhere
    np.testing.assert_allclose(ch.matrix.toarray(), [[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.2, 0.2, 0.6]], rtol=1e-15)
    with pytest.raises(ValueError, match=r"eps must be a real number >= 0 and finite; got -1"):
        randomized_response(eps=-1, domain=(0, 2))


def test_geometric_clamp_closed_form_ends():
    lam, (a, b) = 0.7, (0, 9)
    ch = geometric(lam=lam, domain=(a, b), mode="clamp")
    q = math.exp(-lam)
    for x in range(a, b + 1):
        assert ch.logpmf(a, x) == pytest.approx(-lam * (x - a) - math.log1p(q), rel=1e-14)
        assert ch.logpmf(b, x) == pytest.approx(-lam * (b - x) - math.log1p(q), rel=1e-14)


def test_deep_tails_stay_exact_in_log_space():
    # probabilities far below 1e-308 keep their exact logarithms
    lam, (a, b) = 30.0, (0, 40)
    for mode in ("clamp", "fold"):
        ch = geometric(lam=lam, domain=(a, b), mode=mode)
        assert ch.logpmf(b, a) == pytest.approx(-lam * (b - a) + (math.log(-math.expm1(-lam)) - math.log1p(math.exp(-lam)) if mode == "fold" else -math.log1p(math.exp(-lam))), rel=1e-12)
        assert ch.pmf(b, a) == 0.0 and ch.matrix.nnz == 41 * 41
    sigma = 0.3
    ch = discrete_gaussian(sigma=sigma, domain=(a, b))
    c = 1 / (2 * sigma * sigma)
    # T(40) = g(40) (1 + e^{-81 c} + ...), N = 1 + 2 e^{-c} + ...
    z = np.arange(1, 60)
    log_n = math.log1p(2 * np.exp(-(z * z) * c).sum())
    want = -(40**2) * c + math.log1p(math.exp(-81 * c) + math.exp(-164 * c)) - log_n
    assert ch.logpmf(a, b) == pytest.approx(want, rel=1e-14)
    assert ch.pure_epsilon() == pytest.approx(brute_log_ratio(ch), rel=1e-12)


def brute_log_ratio(ch):
    L = ch.log_matrix.toarray()
    return float(max((L[i] - L[j]).max() for i in range(L.shape[0]) for j in range(L.shape[0])))


def test_discrete_gaussian_large_sigma_is_nearly_uniform_inside():
    ch = discrete_gaussian(sigma=1e4, domain=(0, 10))
    P = ch.matrix.toarray()
    # interior mass ~ 1/(sigma sqrt(2 pi)) per point, the rest piled at the ends
    assert P[5, 5] == pytest.approx(1 / (1e4 * math.sqrt(2 * math.pi)), rel=1e-6)
    assert P[0, 0] == pytest.approx(0.5, abs=1e-3)


def test_sparse_wrappers_are_the_window_channels():
    a = sparse_laplace(lam=0.5, s=7, domain=(0, 20))
    b = SparseChannel.laplace(lam=0.5, s=7, domain=(0, 20), window="clipped")
    assert a.window == "clipped" and (a.matrix != b.matrix).nnz == 0
    g = sparse_gaussian(sigma=1.5, s=9, domain=(0, 20), window="extended")
    assert g.delta_star(1.0, 3) == pytest.approx(float(SparseGaussian(sigma=1.5, s=9).delta_star(1.0, 3)), rel=1e-12)
    assert sparse_laplace(lam=0.5, s=7, domain=(0, 20)).pure_epsilon(1) == math.inf
    assert float(SparseLaplace(lam=0.5, s=7).delta_star(1.0, 3)) > 0


def test_registry():
    assert set(FAMILIES) == {"rr", "geometric-clamp", "geometric-fold", "discrete-gaussian", "sparse-laplace",
                             "sparse-gaussian", "square-wave", "piecewise", "hybrid", "duchi"}
    for name, fam in FAMILIES.items():
        assert isinstance(fam, Family)
        constructor, param, (lo, hi) = fam  # unpacks as a 3-tuple
        assert lo == 0.0 and hi == math.inf
        kw = {param: 1.0, "domain": (0, 10)}
        if fam.takes_s:
            kw["s"] = 5
        ch = constructor(**kw)
        assert ch.n_inputs == 11
        assert fam.more_private_when == ("larger" if param == "sigma" else "smaller")
    assert FAMILIES["sparse-laplace"].takes_s and not FAMILIES["rr"].takes_s


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda: geometric(lam=0.5, domain=(0, 5), mode="wrap"), ValueError, r"mode must be 'clamp' or 'fold'; got 'wrap'"),
        (lambda: geometric(lam=0.0, domain=(0, 5)), ValueError, r"lam must be a real number > 0 and finite; got 0.0"),
        (lambda: geometric(lam="1", domain=(0, 5)), TypeError, r"lam must be a real number"),
        (lambda: discrete_gaussian(sigma=-2, domain=(0, 5)), ValueError, r"sigma must be a real number > 0 and finite; got -2"),
        (lambda: discrete_gaussian(sigma=1.0, domain=(5, 0)), ValueError, r"domain must be a pair \(lo, hi\) of integers with lo <= hi; got \(5, 0\)"),
        (lambda: randomized_response(eps=1.0, domain=[0]), ValueError, r"domain must be a pair"),
        (lambda: sparse_laplace(lam=1.0, s=6, domain=(0, 5)), ValueError, r"s must be an odd integer >= 1; got 6"),
        (lambda: sparse_gaussian(sigma=1.0, s=5, domain=(0, 5), window="open"), ValueError, r"window must be 'extended' or 'clipped'; got 'open'"),
    ],
)
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---------------------------------------------------------------------------
# numeric mechanisms of the literature: Square Wave, Piecewise, Hybrid, Duchi
# ---------------------------------------------------------------------------
from scipy import stats  # noqa: E402

from sparseldp.baselines import (  # noqa: E402
    EPS_STAR,
    closed_form_variance,
    construction,
    duchi,
    estimator_variance,
    hybrid,
    hybrid_alpha,
    piecewise,
    report_estimates,
    square_wave,
    square_wave_band,
)


def sw_reference(eps, domain, band):
    """Dense Square Wave from the paper's densities: p on |y - x| <= band, p e^-eps elsewhere."""
    a, b = domain
    k = b - a + 1
    x = np.arange(a, b + 1)[:, None]
    y = np.arange(a - band, b + band + 1)[None, :]
    e = math.exp(eps)
    p = e / ((2 * band + 1) * e + k - 1)
    return np.where(np.abs(y - x) <= band, p, p / e)


def pm_reference(eps, k, s, B):
    """Dense discrete PM: the band of input i is cells i s .. i s + B - 1."""
    m = (k - 1) * s + B
    e = math.exp(eps)
    P = e / (B * e + m - B)
    i = np.arange(k)[:, None]
    j = np.arange(m)[None, :]
    return np.where((j >= i * s) & (j < i * s + B), P, P / e)


def duchi_reference(eps, k):
    t = -1 + 2 * np.arange(k) / (k - 1)
    e = math.exp(eps)
    plus = 0.5 + t * (e - 1) / (2 * (e + 1))
    return np.stack([1 - plus, plus], axis=1)


NUMERIC = [
    ("square-wave", square_wave, 0.4, (0, 9)),
    ("square-wave", square_wave, 2.0, (-3, 8)),
    ("piecewise", piecewise, 0.7, (0, 9)),
    ("piecewise", piecewise, 3.0, (2, 13)),
    ("hybrid", hybrid, 0.4, (0, 9)),  # below eps*: Duchi's mechanism alone
    ("hybrid", hybrid, 1.5, (0, 11)),
    ("duchi", duchi, 0.5, (0, 9)),
    ("duchi", duchi, 2.5, (-4, 4)),
]


@pytest.fixture(params=NUMERIC, ids=[f"{n}-{e}-{d[0]}:{d[1]}" for n, _, e, d in NUMERIC])
def numeric(request):
    name, make, eps, domain = request.param
    return name, eps, domain, make(eps=eps, domain=domain)


def reference_numeric(name, eps, domain, ch):
    a, b = domain
    k = b - a + 1
    if name == "square-wave":
        return sw_reference(eps, domain, square_wave_band(eps, k))
    B = ch._meta.get("B")
    pm = None if B is None else pm_reference(eps, k, 1, B)
    du = duchi_reference(eps, k)
    if name == "piecewise":
        return pm
    if name == "duchi" or hybrid_alpha(eps) == 0.0:
        return du
    al = hybrid_alpha(eps)
    return np.concatenate([(1 - al) * du[:, :1], al * pm, (1 - al) * du[:, 1:]], axis=1)


class TestNumeric:
    def test_pmf_matches_the_papers(self, numeric):
        name, eps, domain, ch = numeric
        assert ch.family == name and ch.parameter == ("eps", eps) and ch.domain == domain
        np.testing.assert_array_equal(ch.inputs, np.arange(domain[0], domain[1] + 1))
        np.testing.assert_allclose(ch.matrix.toarray(), reference_numeric(name, eps, domain, ch), rtol=1e-12)
        assert np.all(np.diff(ch.outputs) == 1) or name in ("duchi", "hybrid")

    @pytest.mark.parametrize("H", [None, 1, 3])
    def test_pure_eps_at_the_design_eps_by_the_accountant(self, numeric, H):
        name, eps, domain, ch = numeric
        assert float(ch.delta_star_upper(eps, H)) <= 1e-12  # rigorous: 0 up to rounding
        assert ch.pure_epsilon(H) <= eps * (1 + 1e-12)
        P, x = ch.matrix.toarray(), ch.inputs.tolist()
        assert ch.delta_star(0.8 * eps, H) == pytest.approx(brute_delta(P, x, 0.8 * eps, H), abs=1e-14)
        if H is None or name not in ("duchi", "hybrid") or (name == "hybrid" and hybrid_alpha(eps) > 0):
            # the worst pair is in range: any eps' < eps leaves a positive defect
            assert float(ch.delta_star(eps * (1 - 1e-6), H)) > 0
            assert ch.pure_epsilon(H) == pytest.approx(eps, rel=1e-12)

    def test_sampler_chi_square(self, numeric):
        """The project's sampler on every row at once; independent chi-squares add, FPR 1e-6."""
        name, eps, domain, ch = numeric
        xs = np.repeat(ch.inputs, 2000)
        y = ch.sample(xs, rng=7)
        total, df = 0.0, 0
        for x in ch.inputs:
            outs, probs = ch.sampling_pmf(int(x))
            probs = np.array([float(p) for p in probs])
            obs = np.array([np.count_nonzero(y[xs == x] == o) for o in outs], dtype=float)
            exp = 2000 * probs
            keep = exp >= 5  # cells below 5 expected are merged into one
            o2 = np.append(obs[keep], obs[~keep].sum())
            e2 = np.append(exp[keep], exp[~keep].sum())
            o2, e2 = o2[e2 > 0], e2[e2 > 0]
            total += float(((o2 - e2) ** 2 / e2).sum())
            df += o2.size - 1
        assert total < stats.chi2.isf(1e-6, df), (total, df)


class TestUnbiasedEstimators:
    @pytest.mark.parametrize("make, eps", [(piecewise, 0.8), (piecewise, 4.0), (duchi, 1.0), (hybrid, 2.0),
                                           (hybrid, 0.3)])
    def test_unbiased_and_closed_form_variance(self, make, eps):
        ch = make(eps=eps, domain=(3, 17))
        est = report_estimates(ch)
        np.testing.assert_allclose(ch.matrix @ est, ch.inputs, rtol=0, atol=1e-10)
        np.testing.assert_allclose(estimator_variance(ch), closed_form_variance(ch), rtol=1e-12)

    @pytest.mark.parametrize("block", [1, 7, 64, 1 << 20])
    @pytest.mark.parametrize("make, eps", [(piecewise, 1.0), (duchi, 0.5), (hybrid, 3.0)])
    def test_estimator_variance_in_blocks_is_the_dense_sum(self, make, eps, block, monkeypatch):
        # the O(nnz) block sum equals the dense formula whatever the block size (one row or many per block)
        import sparseldp.baselines.numeric as numeric

        monkeypatch.setattr(numeric, "_VAR_BLOCK", block)
        ch = make(eps=eps, domain=(-4, 9))
        M, x, est = ch.matrix.toarray(), ch.inputs.astype(float), report_estimates(ch)
        dense = (M * (est[None, :] - x[:, None]) ** 2).sum(axis=1) - (M @ est - x) ** 2
        np.testing.assert_allclose(estimator_variance(ch), dense, rtol=1e-12, atol=1e-12)

    def test_piecewise_is_the_papers_mechanism_when_the_band_fits_the_cells(self):
        # z = e^{eps/2} = 2: band ratio (k - 1) s / B = 2 with k - 1 = 10, s = 3, B = 15
        eps, h = 2 * math.log(2), 5.0
        ch = piecewise(eps=eps, domain=(0, 10), resolution=3)
        assert ch.n_outputs == 45
        z = math.exp(eps / 2)
        C = (z + 1) / (z - 1)
        w = 2 * C / ch.n_outputs
        t = (ch.inputs - 5) / h
        paper = t**2 / (z - 1) + (z + 3) / (3 * (z - 1) ** 2)  # Wang et al., Var[t*] of PM
        np.testing.assert_allclose(estimator_variance(ch), h * h * (paper - w * w / 12), rtol=1e-12)
        # the Hybrid Mechanism's variance is the paper's worst case for every input, less alpha h^2 w^2 / 12
        hm = hybrid(eps=eps, domain=(0, 10), resolution=3)
        e = math.exp(eps)
        paper_hm = (z + 3) / (3 * z * (z - 1)) + (e + 1) ** 2 / (z * (e - 1) ** 2)
        np.testing.assert_allclose(estimator_variance(hm), h * h * (paper_hm - hybrid_alpha(eps) * w * w / 12),
                                   rtol=1e-12)

    def test_piecewise_tends_to_the_papers_variance(self):
        eps, h = 1.0, 5.0
        z = math.exp(eps / 2)
        t = np.linspace(-1, 1, 11)
        paper = h * h * (t**2 / (z - 1) + (z + 3) / (3 * (z - 1) ** 2))
        gaps = [np.abs(estimator_variance(piecewise(eps=eps, domain=(0, 10), resolution=s)) / paper - 1).max()
                for s in (5, 50, 500)]
        assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 1e-4

    def test_duchi_variance_is_the_papers(self):
        eps, h = 1.3, 6.0
        ch = duchi(eps=eps, domain=(-6, 6))
        C = (math.exp(eps) + 1) / (math.exp(eps) - 1)
        t = ch.inputs / h
        np.testing.assert_allclose(estimator_variance(ch), h * h * (C * C - t * t), rtol=1e-12)
        np.testing.assert_allclose(report_estimates(ch), [-h * C, h * C], rtol=1e-14)

    def test_hybrid_threshold(self):
        assert EPS_STAR == pytest.approx(0.6094, abs=1e-4)
        assert hybrid_alpha(EPS_STAR * 0.999) == 0.0
        assert hybrid_alpha(2.0) == pytest.approx(1 - math.exp(-1.0), rel=1e-15)
        assert hybrid(eps=0.5, domain=(0, 9)).n_outputs == 2

    def test_not_an_unbiased_family(self):
        with pytest.raises(ValueError, match="channel must be built by piecewise"):
            report_estimates(square_wave(eps=1.0, domain=(0, 9)))


def test_square_wave_band():
    def b_direct(eps):
        e = math.exp(eps)
        return (eps * e - e + 1) / (2 * e * (e - 1 - eps))

    for eps in (0.3, 0.49, 0.5, 1.0, 2.0, 5.0):  # series below 1/2, closed form above
        assert square_wave_band(eps, 1000) == math.floor(b_direct(eps) * 1000)
    assert square_wave_band(1e-9, 11) == 5  # b -> 1/2
    assert square_wave_band(800.0, 10**6) == 0
    ch = square_wave(eps=1.0, domain=(0, 99), band=0)  # band 0: k-ary randomized response
    np.testing.assert_allclose(ch.matrix.toarray(), randomized_response(eps=1.0, domain=(0, 99)).matrix.toarray(),
                               rtol=1e-13)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: piecewise(eps=0.0, domain=(0, 5)), ValueError, r"eps must be a real number > 0 and finite; got 0.0"),
        (lambda: duchi(eps=-1, domain=(0, 5)), ValueError, r"eps must be a real number > 0"),
        (lambda: piecewise(eps=1.0, domain=(0, 5), resolution=0), ValueError, r"resolution must be an integer"),
        (lambda: square_wave(eps=1.0, domain=(0, 5), band=7), ValueError, r"band must be an integer in \[0, 6\]"),
        (lambda: square_wave(eps=1.0, domain=(0, 5), band=1.5), TypeError, r"band must be an integer"),
        (lambda: hybrid(eps=1.0, domain=(5, 0)), ValueError, r"domain must be a pair"),
    ],
)
def test_numeric_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---------------------------------------------------------------------------
# baseline specs (sparseldp.spec): written, loaded, checked
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("ch", [square_wave(eps=1.0, domain=(0, 20)), piecewise(eps=0.9, domain=(0, 20)),
                                hybrid(eps=2.0, domain=(0, 20)), duchi(eps=1.0, domain=(0, 20)),
                                randomized_response(eps=1.0, domain=(0, 20)),
                                geometric(lam=0.4, domain=(0, 20), mode="fold"),
                                discrete_gaussian(sigma=2.0, domain=(0, 20))],
                         ids=lambda ch: ch.family)
def test_baseline_spec_round_trip(tmp_path, ch):
    import json

    from sparseldp.spec import load_spec, save_spec, spec_from_channel

    eps = 2.0 if ch.family in ("hybrid", "geometric-fold", "discrete-gaussian") else 1.0
    H = 3
    upper = float(ch.delta_star_upper(eps, H))
    spec = spec_from_channel(ch, eps=eps, delta=max(upper, 1e-12), H=H, delta_star=upper,
                             r1=float(np.mean(ch.distortion(1))), r2=float(np.mean(ch.distortion(2))))
    path = tmp_path / "spec.json"
    save_spec(spec, path)
    doc = json.loads(path.read_text())
    assert doc["family"] == ch.family and doc["domain"] == [0, 20] and "s" not in doc and "window" not in doc
    assert doc[{"lam": "lam", "sigma": "sigma"}.get(ch.parameter[0], "mechanism_eps")] == ch.parameter[1]
    loaded = load_spec(path)
    assert loaded.baseline and (loaded.channel().matrix != ch.matrix).nnz == 0
    assert loaded.sampler_target() is loaded.channel() and loaded.guarantee.delta == upper
    with pytest.raises(ValueError, match="has no mechanism on Z"):
        loaded.mechanism
    doc["window"] = "clipped"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="unknown key 'window' in a"):
        load_spec(path)


@pytest.mark.parametrize("doc, needle", [
    ({"family": "square-wave", "mechanism_eps": 1.0}, "needs 'domain'"),
    ({"family": "duchi", "domain": [0, 9]}, "needs 'mechanism_eps'"),
    ({"family": "duchi", "mechanism_eps": 0, "domain": [0, 9]}, "mechanism_eps must be a real number > 0"),
    ({"family": "piecewise", "mechanism_eps": 1.0, "domain": [0, 9], "resolution": 0}, "resolution must be"),
    ({"family": "rr", "mechanism_eps": 1.0, "domain": [0, 9], "eps": 0.5, "H": 1, "delta": 1e-6},
     "recorded target delta = 1e-06 does not hold"),
    ({"family": "rr", "mechanism_eps": 60.0, "domain": [0, 9]}, "reports every input unchanged"),
    ({"family": "cauchy", "lam": 1.0, "s": 3}, "or a baseline: rr, geometric-clamp"),
])
def test_baseline_spec_refused(tmp_path, doc, needle):
    import json

    from sparseldp.spec import load_spec

    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        load_spec(path)


# ---------------------------------------------------------------------------
# the O(n K) certificate of full-support channels, on every baseline family
# ---------------------------------------------------------------------------
def mp_numeric(name, eps, domain, ch):
    """The numeric mechanisms from the papers' formulas in 60-digit arithmetic (exact for rr, Square Wave
    and Piecewise: their constructions are these formulas; Duchi and Hybrid: within a few ulp)."""
    import mpmath

    a, b = domain
    k = b - a + 1
    e = mpmath.exp(mpmath.mpf(eps))
    if name == "rr":
        return [[e / (e + k - 1) if i == j else 1 / (e + k - 1) for j in range(k)] for i in range(k)]
    if name == "square-wave":
        band = ch._meta["band"]
        p = e / ((2 * band + 1) * e + k - 1)
        return [[p if abs(j - band - i) <= band else p / e for j in range(k + 2 * band)] for i in range(k)]
    du = []
    for i in range(k):
        plus = mpmath.mpf(1) / 2 + (-1 + mpmath.mpf(2 * i) / (k - 1)) * (e - 1) / (2 * (e + 1))
        du.append([1 - plus, plus])
    B = ch._meta.get("B")
    pm = None
    if B is not None:
        m = (k - 1) + B
        P = e / (B * e + m - B)
        pm = [[P if i <= j < i + B else P / e for j in range(m)] for i in range(k)]
    if name == "piecewise":
        return pm
    if name == "duchi" or pm is None:
        return du
    al = 1 - mpmath.exp(-mpmath.mpf(eps) / 2)
    return [[(1 - al) * du[i][0]] + [al * v for v in pm[i]] + [(1 - al) * du[i][1]] for i in range(k)]


def mp_pair_defects(P, eps_list):
    """``{(i, j): [Delta_eps(i, j) for eps in eps_list]}`` over all ordered pairs, 60 digits."""
    import mpmath

    us = [mpmath.exp(mpmath.mpf(float(e))) for e in eps_list]
    return {(i, j): [mpmath.fsum(max(p - u * q, 0) for p, q in zip(P[i], P[j])) for u in us]
            for i in range(len(P)) for j in range(len(P)) if i != j}


FAST = [("rr", 1.0), ("square-wave", 1.0), ("piecewise", 0.8), ("hybrid", 1.5), ("hybrid", 0.4),
        ("duchi", 1.2), ("geometric-clamp", 0.3), ("geometric-fold", 0.3), ("discrete-gaussian", 2.0)]


@pytest.mark.parametrize("name, p", FAST, ids=[f"{n}-{p}" for n, p in FAST])
def test_fast_certificate_is_never_below_the_exact_defect(name, p):
    """Below, at and above the design eps, on several ranges: fast >= exact, and delta_star_upper (which
    takes the fast bound where it is no looser than the pair scan) too."""
    import mpmath

    domain = (0, 9)
    ch = build(name, p, domain)
    numeric = FAMILIES[name].param == "eps"
    eps_list = [0.5 * p, p * (1 - 1e-9), p, 1.3 * p] if numeric else [0.5, 1.0, 2.0]
    with mpmath.workdps(60):
        if numeric:
            P = mp_numeric(name, p, domain, ch)
            np.testing.assert_allclose(ch.matrix.toarray(), np.array(P, dtype=float), rtol=1e-12)
            D = mp_pair_defects(P, eps_list)
        else:  # float reference (push_noise): the bound's slack (~1e-14) dwarfs its rounding
            D = mp_pair_defects(reference(name, p, domain).tolist(), eps_list)
        for H in (None, 1, 3):
            fast = ch.delta_star_upper_fast(eps_list, H)
            up = ch.delta_star_upper(eps_list, H)
            for k_, eps in enumerate(eps_list):
                exact = max(d[k_] for (i, j), d in D.items() if H is None or abs(i - j) <= H)
                assert fast[k_] >= exact and up[k_] >= exact, (H, eps, fast[k_], up[k_], exact)
            if name in ("rr", "square-wave", "piecewise"):
                # the constructor proves the exact pure epsilon: certified 0 at the design eps
                assert fast[2] == 0.0 == up[2] and ch.pure_epsilon_upper(H) == p
                if H is None:
                    assert fast[1] > 0.0  # a hair below it the defect is positive, and so is the bound


def test_restricted_channel_keeps_its_estimates_and_has_no_spec():
    ch = hybrid(eps=1.5, domain=(0, 20))
    part = ch.to_channel((5, 12))
    np.testing.assert_array_equal(report_estimates(part), report_estimates(ch))
    np.testing.assert_allclose(part.matrix @ report_estimates(part), part.inputs, atol=1e-10)
    with pytest.raises(ValueError, match="restricted to the inputs 5..12"):
        construction(part)


def test_spec_at_the_design_eps_pure_or_refused_with_what_holds(tmp_path):
    from sparseldp.spec import spec_from_channel

    # Piecewise, Square Wave, rr: exactly pure at their own eps, so delta = 0 is certified
    for ch in (piecewise(eps=1.0, domain=(0, 30)), square_wave(eps=1.0, domain=(0, 30)),
               randomized_response(eps=1.0, domain=(0, 30))):
        assert spec_from_channel(ch, eps=1.0, H=30, delta=0.0).guarantee.delta == 0.0
    # Hybrid: pure 1-LDP only up to the rounding of its log weights; the refusal says what holds instead
    ch = hybrid(eps=1.0, domain=(0, 30))
    with pytest.raises(ValueError) as info:
        spec_from_channel(ch, eps=1.0, H=30, delta=0.0)
    msg = str(info.value)
    assert "does not hold" in msg and "up to rounding" in msg
    delta = float(re.search(r"record a delta of at least ([0-9.e+-]+)", msg).group(1))
    eps = float(re.search(r"or eps = ([0-9.]+) \(its certified pure epsilon\)", msg).group(1))
    assert 0 < delta < 1e-12 and 1.0 < eps < 1.0 + 1e-11
    assert spec_from_channel(ch, eps=1.0, H=30, delta=delta).guarantee.delta <= delta
    assert spec_from_channel(ch, eps=eps, H=30, delta=0.0).guarantee.delta == 0.0


def test_spec_claims_checked_by_the_fast_certificate(tmp_path):
    from sparseldp.spec import load_spec, save_spec, spec_from_channel

    ch = piecewise(eps=1.0, domain=(0, 40))
    exact = float(ch.delta_star(0.9))
    spec = spec_from_channel(ch, eps=0.9, H=40, delta=exact * 1.001)
    assert exact <= spec.guarantee.delta <= exact * 1.001
    path = tmp_path / "pm.json"
    save_spec(spec, path)
    assert load_spec(path).guarantee == spec.guarantee
    for claim in ({"delta": exact * 0.99}, {"delta": 1e-3, "delta_star": exact * 0.99}):
        with pytest.raises(ValueError, match="does not hold"):
            spec_from_channel(ch, eps=0.9, H=40, **claim)
