"""Low-rank factors of wide smooth channels (estimation._lowrank) and the interior point's Newton systems
through them (_ipm._woodbury, _ipm._low_rank_of): the factor against the SVD, the solve against a dense
one, and the MLE, its refits and the likelihood-ratio intervals with the factor against without it."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import sparseldp as sl
from sparseldp import SparseGaussian, SparseLaplace
from sparseldp.estimation import _ipm, _lowrank, _model, estimate_frequencies_full, mle
from sparseldp.estimation.counts import ReportCounts


def _section(w_rel, k):
    s = w_rel.size
    idx = (np.arange(k)[:, None] + np.arange(s)[None, :]).ravel()
    return sp.csr_array((np.tile(w_rel, k), idx, np.arange(k + 1) * s), shape=(k, k + s - 1))


def _gaussian_window(sigma, t):
    d = np.arange(-t, t + 1)
    return np.exp(-0.5 * (d / sigma) ** 2)


@settings(max_examples=25, deadline=None)
@given(sigma=st.floats(3.0, 40.0), k=st.integers(20, 400), reach=st.floats(3.0, 9.0), dense=st.booleans())
def test_factor_reproduces_the_window_section(sigma, k, reach, dense):
    # a Gaussian window of scale sigma cut at reach sigma: T = L V^T to the factor's tolerance of ||T||_2,
    # V orthonormal, and the rank at most the SVD's at a ten times looser tolerance
    w = _gaussian_window(sigma, int(reach * sigma))
    T = _section(w, k)
    Td = T.toarray()
    out = _lowrank.factor(Td if dense else T, _lowrank.rank_estimate(w, k), max_rank=k)
    assert out is not None
    L, V = out
    sv = np.linalg.svd(Td, compute_uv=False)
    assert np.linalg.norm(Td - L @ V.T, 2) <= 100 * _lowrank._RTOL * sv[0]
    assert np.allclose(V.T @ V, np.eye(V.shape[1]), atol=1e-10)
    assert int(np.count_nonzero(sv > 0.1 * _lowrank._RTOL * sv[0])) >= L.shape[1]


@settings(max_examples=30, deadline=None)
@given(k=st.integers(1, 200), s=st.integers(1, 60), cols=st.integers(1, 5), seed=st.integers(0, 2**32 - 1))
def test_section_products_are_the_matrix_products(k, s, cols, seed):
    # the FFT operator the model factors (T X, T^T Y, on vectors and columns) against the stored section
    gen = np.random.default_rng(seed)
    w = gen.random(s)
    T = _section(w, k).toarray()
    op = _lowrank.Section(w, k)
    X, Y = gen.standard_normal((k + s - 1, cols)), gen.standard_normal((k, cols))
    assert op.shape == T.shape and op.T.shape == T.T.shape
    scale = np.abs(w).sum() * (1 + np.abs(X).max() + np.abs(Y).max())
    assert np.abs(op @ X - T @ X).max() <= 1e-12 * scale
    assert np.abs(op.T @ Y - T.T @ Y).max() <= 1e-12 * scale
    assert np.abs(op @ X[:, 0] - T @ X[:, 0]).max() <= 1e-12 * scale


def test_factor_declines_a_laplace_window_and_is_the_same_each_time():
    # a Laplace window has no low rank: above the cap, no factor; a Gaussian one gives the same factor twice
    # (a fixed seed: the factor is a function of the channel)
    lap = np.exp(-0.5 * np.abs(np.arange(-60, 61)))
    assert _lowrank.factor(_section(lap, 400), _lowrank.rank_estimate(lap, 400), max_rank=100) is None
    w = _gaussian_window(12.0, 80)
    a = _lowrank.factor(_section(w, 300), 40, max_rank=300)
    b = _lowrank.factor(_section(w, 300), 40, max_rank=300)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@pytest.mark.parametrize("sigma, k", [(5.0, 200), (12.0, 300), (25.0, 500), (40.0, 1000)])
def test_rank_estimate_is_at_least_the_rank(sigma, k):
    # Szegő's count with the ends' allowance is a bound from above on these windows (it decides whether the
    # factor is tried; the factor then finds the rank itself)
    w = _gaussian_window(sigma, int(8 * sigma))
    sv = np.linalg.svd(_section(w, k).toarray(), compute_uv=False)
    assert _lowrank.rank_estimate(w, k) >= int(np.count_nonzero(sv > _lowrank._RTOL * sv[0]))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), edges=st.integers(0, 5), spread=st.floats(0.0, 12.0))
def test_woodbury_solves_the_newton_system(seed, edges, spread):
    # (A diag(w) A^T + diag(d)) x = b through A[:, mid] = L Vm^T and exact end columns, against a dense
    # solve, with w and d spread over up to 12 orders of magnitude (as near the interior point's end)
    gen = np.random.default_rng(seed)
    k, m, r = 60, 90, 12
    L = gen.standard_normal((k, r))
    Vm = gen.standard_normal((m - edges, r))
    Ae = np.abs(gen.standard_normal((k, edges)))
    A = np.hstack([L @ Vm.T, Ae])
    w = 10.0 ** gen.uniform(-spread / 2, spread / 2, m)
    d = 10.0 ** gen.uniform(-spread / 2, spread / 2, k)
    b = gen.standard_normal(k)
    low = (L, Vm, np.arange(m - edges), np.arange(m - edges, m), Ae)
    x = _ipm._woodbury(low, w, d)(b)
    M = (A * w) @ A.T + np.diag(d)
    assert np.linalg.norm(M @ x - b) <= 1e-8 * (np.linalg.norm(M, 2) * np.linalg.norm(x) + np.linalg.norm(b))


def test_woodbury_on_outputs_fewer_than_the_rank():
    # few observed outputs: Vm^T diag(w) Vm is singular, its Cholesky fails, and the eigenvalues take over
    gen = np.random.default_rng(1)
    k, r = 40, 10
    L, Vm = gen.standard_normal((k, r)), gen.standard_normal((4, r))
    w, d, b = gen.random(4) + 0.5, gen.random(k) + 0.1, gen.standard_normal(k)
    x = _ipm._woodbury((L, Vm, np.arange(4), np.arange(0), np.zeros((k, 0))), w, d)(b)
    A = L @ Vm.T
    assert np.allclose(((A * w) @ A.T + np.diag(d)) @ x, b, atol=1e-9)


def _counts(mech, k, n, seed, shape="bimodal"):
    model = _model(mech, (0, k - 1))
    v = np.arange(k)
    if shape == "bimodal":
        p = 0.6 * np.exp(-0.5 * ((v - 0.25 * k) / (0.06 * k)) ** 2) + 0.4 * np.exp(-0.5 * ((v - 0.7 * k) / (0.08 * k)) ** 2)
    else:  # two atoms on a smooth floor
        p = np.full(k, 0.2 / k)
        p[k // 3] += 0.5
        p[(2 * k) // 3] += 0.3
    p /= p.sum()
    q = np.asarray(p @ model.unscaled()).ravel()
    c = np.random.default_rng(seed).multinomial(n, q / q.sum()).astype(float)
    return model, c


_WIDE = [("gaussian (1, 1e-6, 5), 300 values", 5, 300), ("gaussian (1, 1e-6, 10), 400 values", 10, 400)]


@pytest.mark.parametrize("label, H, k", _WIDE)
@pytest.mark.parametrize("shape", ["bimodal", "atoms"])
def test_ipm_through_the_factor_is_the_ipm(label, H, k, shape):
    # the same iterations (to one) and both certified within tol, at likelihoods within tol of each other
    mech = sl.design("gaussian", eps=1, delta=1e-6, H=H).mechanism
    model, c_all = _counts(mech, k, 10**6, seed=H + k)
    obs = np.flatnonzero(c_all > 0)
    assert _ipm._uses_low_rank(model, obs.size)
    A, AT = model.columns(obs)
    c = c_all[obs]
    low = _ipm._low_rank_of(model, obs)
    assert low is not None and low[0].shape[1] < k // 2
    band = model.gram_band(obs)
    p0, s0, ok0, gap0 = _ipm._ipm(A, AT, c, 10**6, 0.01, model.dense, band)
    p1, s1, ok1, gap1 = _ipm._ipm(A, AT, c, 10**6, 0.01, model.dense, band, low_rank=low)
    assert ok0 and ok1 and abs(s0 - s1) <= 1
    ll = [float(c @ np.log(AT @ p)) for p in (p0, p1)]
    assert abs(ll[0] - ll[1]) <= 0.01
    assert mle._certificate(A, c, AT @ p1, 10**6) <= 0.01 + 1e-9  # the exact certificate at the point returned


def test_low_rank_is_used_where_it_pays_only():
    # wide Gaussian kernels on a hundred to thousands of values; not Laplace, not a small channel, and not
    # where the rank grows past the band (the Gaussian window of 349 on 3,000 values)
    def uses(fam, H, k):
        model = _model(sl.design(fam, eps=1, delta=1e-6, H=H).mechanism, (0, k - 1))
        return _ipm._uses_low_rank(model, model.m)

    assert uses("gaussian", 5, 100) and uses("gaussian", 5, 1000) and uses("gaussian", 10, 1000) and uses("gaussian", 10, 3000)
    assert not uses("laplace", 10, 1000) and not uses("gaussian", 5, 20) and not uses("gaussian", 5, 3000)
    model = _model(SparseLaplace(lam=0.5, s=41), (0, 299))
    assert _ipm._low_rank_of(model, np.arange(model.m)) is None


def test_factor_is_computed_once_per_model(monkeypatch):
    mech = sl.design("gaussian", eps=1, delta=1e-6, H=5).mechanism
    model, c_all = _counts(mech, 300, 10**5, seed=3)
    calls = []
    real = _lowrank.factor
    monkeypatch.setattr(_lowrank, "factor", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    obs = np.flatnonzero(c_all > 0)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:  # the bootstrap's blocks ask from two threads at once
        a, b = pool.map(lambda idx: _ipm._low_rank_of(model, idx), [obs, obs[5:-5]])
    assert len(calls) == 1 and a[0] is b[0]


@pytest.mark.parametrize("label, H, k", _WIDE[:1])
def test_likelihood_ratio_intervals_through_the_factor(label, H, k):
    # the same searches with and without the factor: the intervals agree to 1e-4 of their width (both are
    # outer bounds from exact certificates; only the tilted fits' iterates differ, by the factor's rtol)
    mech = sl.design("gaussian", eps=1, delta=1e-6, H=H).mechanism
    model, c_all = _counts(mech, k, 10**5, seed=11)
    est = estimate_frequencies_full(ReportCounts(int(model.outputs[0]), c_all.astype(np.int64)), mech,
                                    domain=(0, k - 1), method="em")
    prof = est.profile(mech)
    assert prof._search._low_rank is not None
    with_factor = [prof.interval("mean"), prof.interval("quantile", q=0.5), prof.interval("range", a=50, b=120)]
    object.__setattr__(prof._search, "_low_rank", None)
    without = [prof.interval("mean"), prof.interval("quantile", q=0.5), prof.interval("range", a=50, b=120)]
    for (a0, b0), (a1, b1) in zip(with_factor, without):
        width = max(b1 - a1, 1e-12)
        assert abs(a0 - a1) <= 1e-4 * width + 1e-12 and abs(b0 - b1) <= 1e-4 * width + 1e-12


def test_mle_through_the_factor_is_the_mle(monkeypatch):
    # method="em" on a wide Gaussian kernel: the interior point's finish through the factor, certified within
    # tol, at a log-likelihood within tol of the same fit without the factor
    from sparseldp.estimation import frequencies

    mech = SparseGaussian(sigma=15.0, s=241)  # cut at 8 sigma (at 5.3, the cut's kink of 1e-6 is not low rank)
    model, c_all = _counts(mech, 500, 10**6, seed=5, shape="atoms")
    counts = ReportCounts(int(model.outputs[0]), c_all.astype(np.int64))
    solves = []
    real = _ipm._woodbury
    monkeypatch.setattr(_ipm, "_woodbury", lambda *a: solves.append(1) or real(*a))
    est = estimate_frequencies_full(counts, mech, domain=(0, 499), method="em")
    assert solves and est.converged and est.gap <= 0.01
    monkeypatch.setattr(frequencies, "_low_rank_of", lambda model, obs: None)
    solves.clear()
    ref = estimate_frequencies_full(counts, mech, domain=(0, 499), method="em")
    assert not solves and ref.converged
    assert abs(est.loglik - ref.loglik) <= 0.01


def test_the_estimation_package_imports_without_scipy_signal_or_stats():
    # `sparseldp estimate` pays for every import at start-up: scipy.signal (which pulls in scipy.stats)
    # took about a second when _lowrank's products went through its fftconvolve
    import subprocess
    import sys

    code = ("import sys, sparseldp.estimation; "
            "print(sorted(m for m in ('scipy.signal', 'scipy.stats', 'matplotlib') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
