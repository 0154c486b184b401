"""Baselines as channels: one parameter table, one battery of checks.

Each pmf is compared with an independent construction: the noise distribution
on a wide window of Z (numpy), pushed through clamping or folding; accounting
against a dense brute force; pure epsilon against the known closed forms.
"""

from __future__ import annotations

import math

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
    assert set(FAMILIES) == {"rr", "geometric-clamp", "geometric-fold", "discrete-gaussian", "sparse-laplace", "sparse-gaussian"}
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
