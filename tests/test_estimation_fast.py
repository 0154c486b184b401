"""The fast products and the accelerated EMS behind method="auto", "ems" and the bootstrap.

* FFT products (estimation._toeplitz) against the exact channel, for both
  families (sparse, and dense when the window is wider than the domain), one and
  several columns, every output or a random subset;
* channels that are not one shifted window (clipped windows) keep the sparse products;
* the fused EM run on FFT products (``_toeplitz._Conv.em_rows``) against the same steps over the
  products one at a time, and (hypothesis) against plain EM on the exact channel for any window;
* accelerated EMS (_ems._ems_fixed: SQUAREM, then Anderson mixing for the columns it leaves; each
  of the two alone too) lands on the plain iteration's fixed point, and Anderson mixing hands a column
  that stalls near entries close to 0 back to SQUAREM;
* on a large channel the MLE is left off auto's path (its fold fits are not affordable).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from scipy.special import gammaln
from hypothesis import strategies as st

from sparseldp import SparseGaussian, SparseLaplace
from sparseldp.estimation import _model, estimate_frequencies_full
from sparseldp.estimation import _em_members, _ems, _fft_em, _path, _toeplitz, auto, solvers
from sparseldp.estimation._ems_map import _ems_map

# (mechanism, domain size): windows long enough and channels large enough for the FFT path
CASES = [
    (SparseLaplace(lam=0.1, s=275), 1000),
    (SparseGaussian(sigma=12.0, s=301), 1500),
    (SparseGaussian(sigma=120.0, s=701), 600),  # a window wider than the domain: a dense channel
]


@given(st.integers(1, 60), st.integers(1, 40), st.data())
def test_fft_length_leaves_the_outputs_read_clean(k, s, data):
    """_fft_length: a circular convolution of that length equals the linear one on the outputs read
    (``a..b-1``), and the correlation back from inputs there equals the linear one on all k values."""
    m = k + s - 1
    a = data.draw(st.integers(0, m - 1))
    b = data.draw(st.integers(a + 1, m))
    L = _toeplitz._fft_length(k, s, np.arange(a, b))
    assert L >= k
    rng = np.random.default_rng(k * 1000 + s)
    x, w = rng.random(k), rng.random(s)
    Wf = np.fft.rfft(w, L)
    circ = np.fft.irfft(np.fft.rfft(x, L) * Wf, L)
    assert np.allclose(circ[a:b], np.convolve(x, w)[a:b], rtol=1e-12, atol=1e-12)
    r = np.zeros(m)
    r[a:b] = rng.random(b - a)
    back = np.fft.irfft(np.fft.rfft(r[:L], L) * np.conj(Wf), L)[:k]
    exact = np.array([r[i:i + s] @ w for i in range(k)])
    assert np.allclose(back, exact, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mech,k", CASES, ids=["laplace", "gaussian", "gaussian-dense"])
@pytest.mark.parametrize("subset", [False, True])
def test_fft_products_match_the_sparse_channel(mech, k, subset):
    model = _model(mech, (0, k - 1))
    assert model.log_window is not None and model.log_window.size == mech.s
    assert model.dense == (mech.s > k)
    rng = np.random.default_rng(7)
    obs = np.sort(rng.choice(model.m, model.m * 2 // 3, replace=False)) if subset else np.arange(model.m)
    A, AT = model.columns(obs)
    FA, FAT = model.fast_columns(obs)
    assert isinstance(FA, _toeplitz._ConvA)
    # end outputs with a moderate column scale go through the FFT (times the scale), the rest exactly
    f_mid = FA._c.f_mid
    assert f_mid is not None and f_mid.max() > 2.0 and f_mid.max() <= _toeplitz._EDGE_SCALE
    assert FA._c.i_edge.size > 0 or mech.s > k  # the wide Gaussian's ends all have scales below the bound
    P = rng.dirichlet(np.full(k, 0.3), size=3).T
    R = rng.random((obs.size, 3)) * 1e4
    for X, Y in ((AT @ P, FAT @ P), (A @ R, FA @ R)):
        scale = np.abs(X).max(axis=0)
        assert np.all(np.abs(X - Y) <= 1e-12 * scale)
    # one column, and no entry of S^T p below zero where the exact one is positive
    p = P[:, 0]
    q_exact, q_fast = AT @ p, FAT @ p
    assert q_fast.shape == q_exact.shape and np.all(q_fast > 0)
    assert np.allclose(FA @ R[:, 0], A @ R[:, 0], rtol=0, atol=1e-12 * np.abs(A @ R[:, 0]).max())


@pytest.mark.parametrize("mech,k", CASES, ids=["laplace", "gaussian", "gaussian-dense"])
@pytest.mark.parametrize("subset", [False, True])
def test_fused_em_steps_match_the_step_by_step_products(mech, k, subset):
    """_Conv.em_rows (the bootstrap's and the discrepancy stop's EM run) is the EM map over conv/corr."""
    model = _model(mech, (0, k - 1))
    rng = np.random.default_rng(11)
    obs = np.sort(rng.choice(model.m, model.m * 2 // 3, replace=False)) if subset else np.arange(model.m)
    FA, FAT = model.fast_columns(obs)
    b, steps = 3, 7
    C = rng.poisson(50.0, (b, obs.size)).astype(float)
    C[:, rng.choice(obs.size, obs.size // 10, replace=False)] = 0.0  # outputs without a count
    n = C.sum(axis=1)
    P0 = rng.dirichlet(np.full(k, 2.0), size=b)
    for inv_n in (None, 1.0 / n):
        P = P0.T.copy(order="F")
        for _ in range(steps):
            R = np.divide(C.T, FAT @ P, out=np.zeros_like(C.T), where=C.T > 0)
            P = P * (FA @ R)
            P = P / P.sum(axis=0) if inv_n is None else P * inv_n
        got = solvers._em_run(FA, FAT, P0, C, steps, inv_n)
        assert np.allclose(got, P.T, rtol=1e-9, atol=1e-15 * float(P.max()))
    # observe sees each iterate with its outputs, and stops the run
    seen = []

    def observe(t, P, Q):
        assert np.allclose(Q, (FAT @ np.ascontiguousarray(P.T)).T, rtol=1e-9, atol=0)
        seen.append(t)
        return t == 4

    stopped = solvers._em_run(FA, FAT, P0, C, steps, None, observe)
    assert seen == [0, 1, 2, 3, 4]
    assert np.allclose(stopped, solvers._em_run(FA, FAT, P0, C, 4), rtol=1e-12, atol=0)
    # an observe that names its next step is not called before it, and always sees the last one; fused and
    # step by step (exact products) alike, with the same iterates as the runs that see every step
    A, AT = model.columns(obs)
    for ops in ((FA, FAT), (A, AT)):
        seen.clear()

        def skipping(t, P, Q, ops=ops):
            assert np.allclose(Q, (ops[1] @ np.ascontiguousarray(P.T)).T, rtol=1e-9, atol=0)
            seen.append(t)
            return {0: 3, 3: False, 4: 6}.get(t, False)

        got = solvers._em_run(*ops, P0, C, steps, None, skipping)
        assert seen == [0, 3, 4, 6, 7]
        assert np.allclose(got, solvers._em_run(*ops, P0, C, steps), rtol=1e-9, atol=0)


@pytest.mark.parametrize("mech,k", CASES, ids=["laplace", "gaussian", "gaussian-dense"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_em_steps_skip_the_unobserved_end_columns_exactly(mech, k, dtype, monkeypatch):
    """Without observe, em_rows leaves out the exact end columns that no row observes (their ratio is 0):
    the same iterates, bit for bit, as the run that keeps them all (observe forces it; both runs
    renormalize every step here, as observe's always do)."""
    monkeypatch.setattr(_fft_em, "_RENORMALIZE", 1)  # em_rows' constant (moved from _toeplitz)
    model = _model(mech, (0, k - 1))
    FA, FAT = model.fast_columns(np.arange(model.m))
    conv = FA._c
    rng = np.random.default_rng(5)
    C = rng.poisson(30.0, (4, model.m)).astype(float)
    far = conv.i_edge[conv.i_edge.size // 4: -(conv.i_edge.size // 4) or None]
    C[:, conv.i_edge[: conv.i_edge.size // 3]] = 0.0  # the lower end unobserved by every row
    C[1:, far] = 0.0  # more end columns seen by the first row only
    P0 = rng.dirichlet(np.full(k, 2.0), size=4)
    skipped = FA.em_rows(P0, C, 9, None, None, dtype)
    kept = FA.em_rows(P0, C, 9, None, lambda t, P, Q: False, dtype)
    assert np.array_equal(skipped, kept)


@pytest.mark.parametrize("mech,k", CASES, ids=["laplace", "gaussian", "gaussian-dense"])
def test_single_precision_em_run_is_the_same_map_to_float32_roundoff(mech, k):
    """em_rows(dtype=float32), the bootstrap's long-window refit: the EM map of the double run, its
    iterates off by no more than single precision's roundoff relative to the largest probability
    (and off by more than double's: it did run in float32)."""
    model = _model(mech, (0, k - 1))
    rng = np.random.default_rng(5)
    obs = np.arange(model.m)
    FA, FAT = model.fast_columns(obs)
    P0 = rng.dirichlet(np.full(k, 2.0), size=4)
    C = rng.multinomial(10**6, (P0[0] @ model.unscaled()).ravel() / (P0[0] @ model.unscaled()).sum(),
                        size=4).astype(float)
    for steps in (1, 25):
        want = solvers._em_run(FA, FAT, P0, C, steps)
        got = solvers._em_run(FA, FAT, P0, C, steps, single=True)
        assert got.dtype == np.float64 and np.allclose(got.sum(axis=1), 1.0, rtol=1e-12)
        err = np.abs(got - want).max(axis=1) / want.max(axis=1)
        assert np.all(err < 2e-5) and np.all(err > 1e-12)
    with pytest.raises(ValueError, match="dtype must be float64 or float32; got float16"):
        FA._c.em_rows(P0, C, 1, dtype=np.float16)


def test_clipped_window_keeps_sparse_products():
    ch = SparseLaplace(lam=0.1, s=275).to_channel((0, 999), "clipped")
    model = _model(ch, (0, 999))
    assert model.log_window is None
    A, AT = model.fast_columns(np.arange(model.m))
    assert not isinstance(A, _toeplitz._ConvA) and not isinstance(AT, _toeplitz._ConvAT)


def test_small_channel_keeps_sparse_products():
    model = _model(SparseLaplace(lam=0.5, s=21), (0, 99))
    A, _ = model.fast_columns(np.arange(model.m))
    assert not isinstance(A, _toeplitz._ConvA)


@pytest.mark.parametrize("solver", ["_ems_fixed", "_ems_squarem", "_ems_anderson"])
@pytest.mark.parametrize("mech,k,n,weight", [
    (SparseGaussian(sigma=6.0, s=41), 60, 10**5, 0.25),
    (SparseGaussian(sigma=6.0, s=41), 60, 10**5, 0.03125),
    (SparseLaplace(lam=0.3, s=31), 80, 10**6, 0.125),
])
def test_accelerated_ems_reaches_the_plain_fixed_point(mech, k, n, weight, solver):
    model = _model(mech, (0, k - 1))
    rng = np.random.default_rng(3)
    x = np.arange(k)
    p = np.exp(-0.5 * ((x - 0.3 * k) / 5.0) ** 2) + 0.5 * np.exp(-0.5 * ((x - 0.7 * k) / 2.0) ** 2)
    p /= p.sum()
    q = np.maximum(np.asarray(model.unscaled().T @ p).ravel(), 0.0)
    c = rng.multinomial(n, q / q.sum()).astype(float)
    obs = np.flatnonzero(c > 0)
    A, AT = model.columns(obs)
    C = np.column_stack([c[obs], c[obs][::-1] * 0 + c[obs]])  # two identical columns: both must agree
    P0 = np.full((k, 2), 1.0 / k)
    P, evals, conv = getattr(_ems, solver)(A, AT, C, 1.0 / n, P0, 1, weight, 1e-7, 200_000)
    assert conv.all() and np.allclose(P.sum(axis=0), 1.0) and P.min() >= 0.0
    ref = P0[:, :1]
    for _ in range(200_000):
        nxt = _ems_map(A, AT, C[:, :1], 1.0 / n, ref, 1, weight)
        done = 0.5 * np.abs(nxt - ref).sum() < 1e-14
        ref = nxt
        if done:
            break
    assert 0.5 * np.abs(P[:, 0] - ref[:, 0]).sum() < 2e-6
    assert np.array_equal(P[:, 0], P[:, 1])


def _spike_fold():
    """A training fold (4/5 of 10^6 reports) of a spike over a bump under the Laplace design of
    (1, 1e-6, 5) on 100 values: EMS's fixed point at weight 1/32 has entries near 1e-5."""
    import sparseldp as sl

    k = 100
    model = _model(sl.design("laplace", eps=1, delta=1e-6, H=5).mechanism, (0, k - 1))
    x = np.arange(k, dtype=float)
    p = np.exp(-0.5 * ((x - 50) / 15) ** 2)
    p *= 0.7 / p.sum()
    p[20] += 0.3
    q = np.maximum(np.asarray(model.unscaled().T @ p).ravel(), 0.0)
    gen = np.random.default_rng(0)
    c = gen.multinomial(10**6, q / q.sum())
    train = c - gen.binomial(c, 0.2)
    obs = np.flatnonzero(train > 0)
    A, AT = model.columns(obs)
    return k, A, AT, train[obs][:, None].astype(float)


def test_anderson_mixing_hands_a_stalled_column_on(monkeypatch):
    """From the fixed point of a stronger smoothing, Anderson mixing alone overshoots the small entries
    below 0, presses them against its floor and stops gaining: it must hand the column on (on this dense,
    small channel to Newton's method; where that is not affordable, to the mixing of logarithms, which
    needs no floor, and from there at its budget to SQUAREM) and still land on the fixed point;
    _ems_fixed, SQUAREM first, settles it without the mixing."""
    k, A, AT, C = _spike_fold()
    inv_n = 1.0 / C.sum()
    P = np.full((k, 1), 1.0 / k)
    for w in (0.25, 0.125):
        P, _, conv = _ems._ems_anderson(A, AT, C, inv_n, P, 1, w, 1e-6, 50_000)
        assert conv.all()
    ref, _, conv = _ems._ems_squarem(A, AT, C, inv_n, np.full((k, 1), 1.0 / k), 1, 0.03125, 1e-11, 50_000)
    assert conv.all() and ref.min() < 2e-3 / k  # small entries (1e-5 here): the mixtures overshoot them
    calls = []
    squarem, anderson = _ems._ems_squarem, _ems._ems_anderson

    def counted_squarem(*args, **kw):
        calls.append(("squarem", args[2].shape[1]))
        return squarem(*args, **kw)

    def counted_anderson(*args, **kw):
        calls.append(("logs" if kw.get("log_space") else "plain", args[2].shape[1]))
        return anderson(*args, **kw)

    newton = _ems._ems_newton

    def counted_newton(*args, **kw):
        calls.append(("newton", args[2].shape[1]))
        return newton(*args, **kw)

    monkeypatch.setattr(_ems, "_ems_squarem", counted_squarem)
    monkeypatch.setattr(_ems, "_ems_anderson", counted_anderson)
    monkeypatch.setattr(_ems, "_ems_newton", counted_newton)
    assert _ems._newton_affordable(A)
    got, evals, conv = _ems._ems_anderson(A, AT, C, inv_n, P, 1, 0.03125, 1e-6, 50_000)
    assert calls == [("plain", 1), ("newton", 1)] and conv.all() and evals < 50_000
    assert 0.5 * np.abs(got - ref).sum() < 1e-5
    calls.clear()  # where Newton's Jacobian is not affordable: the mixing of logarithms
    monkeypatch.setattr(_ems, "_newton_affordable", lambda A: False)
    got, evals, conv = _ems._ems_anderson(A, AT, C, inv_n, P, 1, 0.03125, 1e-6, 50_000)
    assert calls == [("plain", 1), ("logs", 1)] and conv.all() and evals < 50_000
    assert 0.5 * np.abs(got - ref).sum() < 1e-5
    calls.clear()  # a budget the mixing of logs reaches: it hands the column to SQUAREM
    monkeypatch.setattr(_ems, "_AA_BUDGET", 30)
    got, evals, conv = _ems._ems_anderson(A, AT, C, inv_n, P, 1, 0.03125, 1e-6, 50_000)
    assert [c[0] for c in calls] == ["plain", "logs", "squarem"] and conv.all() and evals < 50_000
    assert 0.5 * np.abs(got - ref).sum() < 1e-5
    mixed = []
    monkeypatch.setattr(_ems, "_ems_anderson", lambda *a, **kw: mixed.append(1))
    got, evals, conv = _ems._ems_fixed(A, AT, C, inv_n, np.full((k, 1), 1.0 / k), 1, 0.03125, 1e-6, 50_000)
    assert conv.all() and evals <= _ems._AA_AFTER and not mixed
    assert 0.5 * np.abs(got - ref).sum() < 1e-5


def test_ems_on_randomized_response_lands_within_tol_of_its_fixed_point():
    """Randomized response at eps = 2 on 400 values (a channel that tells little per report): the plain
    mixing stalls; SQUAREM alone then took 9,672 evaluations and stopped 2.1e-3 (21 times tol) from the
    fixed point.  With the mixing of logarithms in between: within tol, in 2,601; with Newton's method in
    between (this dense channel's Jacobian is cheap), in 609.  The fixed point is computed independently,
    by Newton's method on ``F(p) = p`` (finite-difference Jacobian)."""
    import sparseldp as sl
    from sparseldp.sampling import sample

    k = 400
    m = sl.baselines.randomized_response(eps=2.0, domain=(0, k - 1))
    gen = np.random.default_rng(2)
    model = _model(m, (0, k - 1))
    c_all = model.counts_of(sample(m, np.minimum(gen.geometric(0.05, 10**4) - 1, k - 1), rng=gen), False)
    obs = np.flatnonzero(c_all > 0)
    A, AT = model.columns(obs)
    C = c_all[obs][:, None].astype(float)
    tol = 1e-4
    P, evals, conv = _ems._ems_fixed(A, AT, C, 1e-4, np.full((k, 1), 1.0 / k), 1, 0.25, tol, 50_000)
    assert conv.all() and evals < 1_000

    def F(X):
        return _ems_map(A, AT, np.repeat(C, X.shape[1], axis=1), 1e-4, X, 1, 0.25)

    ref, h = P.copy(), 1e-7
    for _ in range(4):
        J = (F(ref + h * np.eye(k)) - F(ref)) / h
        ref = ref + np.linalg.lstsq(np.eye(k) - J, F(ref) - ref, rcond=None)[0]
    assert 0.5 * np.abs(F(ref) - ref).sum() < 1e-14 and ref.min() > 0
    assert 0.5 * np.abs(P - ref).sum() <= tol
    # Newton's method in the logarithms (_ems_fixed's finish for columns left short) from SQUAREM's
    # first 300 evaluations: on the same fixed point, in a few dozen evaluations
    P300, _, conv = _ems._ems_squarem(A, AT, C, 1e-4, np.full((k, 1), 1.0 / k), 1, 0.25, tol, 300)
    assert not conv.any()
    Pn, evals, conv, dist = _ems._ems_newton(A, AT, C, np.array([1e-4]), P300, 1, 0.25, 1e-9, 200)
    assert conv.all() and evals <= 60 and dist[0, 0] <= 1e-9
    assert 0.5 * np.abs(Pn - ref).sum() < 1e-9


def test_ems_bootstrap_refits_on_randomized_response_reach_their_fixed_points():
    """Randomized response at eps = 3 on 400 values, 10^4 reports, auto's EMS member: at the default 2,000
    evaluations the mixing left most refits short, near the estimate, and the mean's interval too narrow
    (B = 50: [41.0, 54.8] with 38 short, [41.0, 65.5] with 34 once stalled columns went on by mixing
    logarithms, against [41.0, 69.3] with every refit run to its fixed point).  Newton's method (damped
    where its step fails) finishes them within the same budget: B = 20, all 20 converged against 4 and 9
    (17 with halved steps alone); B = 50, all 50, the interval [41.0, 69.3]."""
    import warnings

    import sparseldp as sl
    from sparseldp.sampling import sample

    gen = np.random.default_rng(1017)
    dom = (41, 440)
    m = sl.baselines.randomized_response(eps=3.0, domain=dom)
    x = 41 + np.minimum(gen.geometric(0.2, 10**4) - 1, 399)
    est = estimate_frequencies_full(sample(m, x, rng=gen), m, domain=dom)
    assert est.regularization.startswith("ems")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bs = est.bootstrap(m, B=20, rng=1)
    assert bs.converged >= 19  # all 20 here; one of slack for another BLAS's rounding


def test_large_channel_leaves_the_mle_off_the_path(monkeypatch):
    mech, k = CASES[0]
    model = _model(mech, (0, k - 1))
    rng = np.random.default_rng(5)
    q = np.maximum(np.asarray(model.unscaled().T @ np.full(k, 1.0 / k)).ravel(), 0.0)
    c = rng.multinomial(10**5, q / q.sum()).astype(float)
    monkeypatch.setattr(_path, "_MLE_NNZ_MAX", model.nnz - 1)
    assert not auto._with_mle(model)
    scores, _, _, _, _ = auto._select(model, c, 2_000)
    assert ("mle", 0) not in scores and ("stop", 1) in scores
    monkeypatch.setattr(_path, "_MLE_NNZ_MAX", model.nnz)
    assert auto._with_mle(model)



def test_stop_multiples_are_the_same_em_further_on():
    mech, k, n = SparseLaplace(lam=0.3, s=31), 60, 10**5
    model = _model(mech, (0, k - 1))
    rng = np.random.default_rng(2)
    x = np.arange(k)
    p = np.exp(-0.5 * ((x - 20) / 4.0) ** 2) + np.exp(-0.5 * ((x - 45) / 2.0) ** 2)
    q = np.maximum(np.asarray(model.unscaled().T @ (p / p.sum())).ravel(), 0.0)
    C = rng.multinomial(n, q / q.sum(), size=2).T.astype(float)
    A, AT = model.columns(np.arange(model.m))
    scale = np.exp(model.log_cs)
    Ps, steps = _em_members._stopped_cols(A, AT, C, scale, 5_000, (2, 4))
    assert set(Ps) == {1, 2, 4} and np.all(steps >= 1) and np.all(steps < 5_000)
    for j in range(2):
        P = np.full((k, 1), 1.0 / k)
        for t in range(1, 4 * int(steps[j]) + 1):
            P = _ems_map(A, AT, C[:, j:j + 1], 1.0 / n, P, 0, 0.25)  # one plain EM step
            for f in (1, 2, 4):
                if t == f * int(steps[j]):
                    assert np.allclose(Ps[f][:, j], P[:, 0] / P.sum(), rtol=1e-10, atol=1e-15)
    # the longer runs fit the counts at least as well (EM is monotone)
    ll = [float(C[:, 0] @ np.log(AT @ Ps[f][:, 0])) for f in (1, 2, 4)]
    assert ll[0] <= ll[1] <= ll[2]


def _first_stops(A, AT, C, scale, cap, Q_all, classic=False):
    """Reference for _em_members._stopped_cols: plain EM, the deviance and its expected value under the fit
    computed after every step (the latter over every output of the dense channel ``Q_all``, k x m, with
    _expected_deviance, itself checked against direct Poisson sums below); per column (the stop t, P there,
    P after min(2 max(t, 1), cap) steps)."""
    n = C.sum(axis=0)
    out = []
    for j in range(C.shape[1]):
        c = C[:, j]
        P = np.full((A.shape[0], 1), 1.0 / A.shape[0])
        stop = None
        for t in range(cap + 1):
            if stop is None and t >= 1:  # the stop is at least one step (the uniform start ignores the data)
                q = np.asarray(AT @ P)[:, 0] * scale
                with np.errstate(divide="ignore", invalid="ignore"):
                    dev = 2.0 * float(np.where(c > 0, c * np.log(c / (n[j] * q)), 0.0).sum())
                mu = n[j] * (Q_all.T @ (P[:, 0] / P.sum()))
                target = (c > 0).sum() if classic else _em_members._expected_deviance(mu).sum()
                if dev <= target or t == cap:
                    stop, at_stop = t, P[:, 0] / P.sum()
            if stop is not None and t == min(2 * max(stop, 1), cap):
                break
            P = _ems_map(A, AT, C[:, j:j + 1], 1.0 / n[j], P, 0, 0.25)
        out.append((stop, at_stop, P[:, 0] / P.sum()))
    return out


def _poisson_expected_deviance(mu: float) -> float:
    """E[2 (Y log(Y / mu) - (Y - mu))], Y ~ Poisson(mu), by direct summation of the pmf."""
    if mu <= 0:
        return 0.0
    y = np.arange(max(0, int(mu - 40 * np.sqrt(mu))), int(mu + 40 * np.sqrt(mu) + 60))
    pmf = np.exp(y * np.log(mu) - mu - gammaln(y + 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = np.where(y > 0, y * np.log(y / mu), 0.0) - (y - mu)  # each term small near the mode: no cancellation
    return float(2 * (pmf @ unit))


def test_expected_deviance_matches_direct_sums():
    # the table and asymptotic series of _em_members._expected_deviance against direct Poisson sums, over
    # 1e-14..1e6 (both sides of the table's ends)
    mu = np.concatenate([[0.0], np.geomspace(1e-14, 1e6, 400), [1.4, 63.99, 64.0, 64.01]])
    got = _em_members._expected_deviance(mu)
    want = np.array([_poisson_expected_deviance(v) for v in mu])
    assert got[0] == 0.0
    assert np.allclose(got[1:], want[1:], rtol=5e-6, atol=0)
    big = mu > 100
    assert np.all(np.abs(want[big] - 1) < 1 / (5 * mu[big]))  # about 1 + 1/(6 mu) for large mu


@pytest.mark.parametrize("fft", [False, True], ids=["plain", "fft"])
def test_stop_is_the_first_step_below_the_target(request, fft):
    # the deviance is computed only every _em_members._DEV_EVERY steps after the first 2 x that many; a column
    # found below is rerun from the previous check, so each stop is still the first step at or below
    # its target; counts of several sizes put the stops before, on and between the checks
    if fft:
        request.getfixturevalue("fft_on")
    mech, k = SparseLaplace(lam=0.1, s=61), 200  # a wide kernel and atoms: stops after hundreds of steps
    model = _model(mech, (0, k - 1))
    x = np.arange(k)
    p = np.exp(-0.5 * ((x - 80) / 20.0) ** 2) + 0.3 * np.exp(-0.5 * ((x - 160) / 4.0) ** 2)
    p[[40, 120]] += 0.3
    q = np.maximum(np.asarray(model.unscaled().T @ (p / p.sum())).ravel(), 0.0)
    rng = np.random.default_rng(11)
    C = np.column_stack([rng.multinomial(n, q / q.sum()) for n in (10**4, 10**5, 10**6, 10**7, 10**8)])
    C = C.astype(float)
    obs = np.flatnonzero(C.sum(axis=1) > 0)
    C = C[obs]
    A, AT = model.fast_columns(obs)
    assert isinstance(A, _toeplitz._ConvA) == fft
    EA, EAT = model.columns(obs)
    scale = np.exp(model.log_cs[obs])
    cap = 3_000
    Ps, steps = _em_members._stopped_cols(A, AT, C, scale, cap, (2,), _em_members._rest_outputs(model, obs),
                                          classic="until")
    ref = _first_stops(EA, EAT, C, scale, cap, model.unscaled())
    classic = _first_stops(EA, EAT, C, scale, cap, model.unscaled(), classic=True)
    # the classical stop (the deviance at the number of observed outputs), found in the same run
    assert [t for t, _, _ in classic] == list(Ps["classic_steps"])
    assert any(t != u for (t, _, _), (u, _, _) in zip(classic, ref))  # the two targets differ here
    for j, (t, P, _) in enumerate(classic):
        assert np.allclose(Ps["classic"][:, j], P, rtol=1e-7, atol=1e-12)
    # "within": only as far as the column's own run for the other members goes (-1 beyond it), the same
    # stops where found
    Pw, _ = _em_members._stopped_cols(A, AT, C, scale, cap, (2,), _em_members._rest_outputs(model, obs),
                                      classic="within")
    for j, (t, _, _) in enumerate(classic):
        end = min(2 * int(steps[j]), cap)
        assert Pw["classic_steps"][j] in (t, -1)  # found: the same stop
        if t <= end - _em_members._DEV_EVERY:  # a check after it within the run: found
            assert Pw["classic_steps"][j] == t
        elif t > end:
            assert Pw["classic_steps"][j] == -1
    assert sorted(set(Pw["classic_steps"])) != [-1] and -1 in Pw["classic_steps"]  # both kinds here
    assert [t for t, _, _ in ref] == list(steps)
    assert sum(2 * _em_members._DEV_EVERY < t < cap and t % _em_members._DEV_EVERY for t in steps) >= 3  # reruns needed
    for j, (t, P, P2) in enumerate(ref):
        assert np.allclose(Ps[1][:, j], P, rtol=1e-7, atol=1e-12)
        assert np.allclose(Ps[2][:, j], P2, rtol=1e-7, atol=1e-12)  # the multiple: the same EM at 2 t


@pytest.mark.parametrize("fft", [False, True], ids=["plain", "fft"])
def test_stopped_columns_run_as_if_alone(request, fft):
    """Columns whose members are all known leave the run (it goes on with the others): each column's
    stops, multiples and classical stop ("within") are those of the column run alone, bit for bit on FFT
    and sparse products.  Here one column stops within tens of steps and another runs to the cap."""
    if fft:
        request.getfixturevalue("fft_on")
    mech, k = SparseLaplace(lam=0.1, s=61), 200
    model = _model(mech, (0, k - 1))
    x = np.arange(k)
    smooth = np.exp(-0.5 * ((x - 100) / 30.0) ** 2)
    spiky = smooth.copy()
    spiky[[40, 41, 120, 160]] += 2.0
    rng = np.random.default_rng(8)
    cols = []
    for p, n in ((smooth, 10**3), (spiky, 10**7), (smooth, 10**5), (spiky, 10**4)):
        q = np.maximum(np.asarray(model.unscaled().T @ (p / p.sum())).ravel(), 0.0)
        cols.append(rng.multinomial(n, q / q.sum()))
    C = np.column_stack(cols).astype(float)
    obs = np.flatnonzero(C.sum(axis=1) > 0)
    C = C[obs]
    A, AT = model.fast_columns(obs)
    assert isinstance(A, _toeplitz._ConvA) == fft
    scale, rest, cap = np.exp(model.log_cs[obs]), _em_members._rest_outputs(model, obs), 1_500
    Ps, steps = _em_members._stopped_cols(A, AT, C, scale, cap, (2, 4), rest, classic="within")
    assert steps.min() < 100 and steps.max() == cap  # the columns leave the run at very different steps
    for j in range(C.shape[1]):
        Pj, sj = _em_members._stopped_cols(A, AT, C[:, [j]], scale, cap, (2, 4), rest, classic="within")
        assert sj[0] == steps[j] and Pj["classic_steps"][0] == Ps["classic_steps"][j]
        for key in (1, 2, 4, "classic"):
            np.testing.assert_array_equal(Ps[key][:, j], Pj[key][:, 0])


def test_large_channel_has_no_stop_multiples(monkeypatch):
    mech, k = CASES[0]
    model = _model(mech, (0, k - 1))
    rng = np.random.default_rng(6)
    q = np.maximum(np.asarray(model.unscaled().T @ np.full(k, 1.0 / k)).ravel(), 0.0)
    c = rng.multinomial(10**5, q / q.sum()).astype(float)
    monkeypatch.setattr(_path, "_MLE_NNZ_MAX", model.nnz - 1)
    scores, _, _, _, _ = auto._select(model, c, 2_000)
    assert [key for key in auto._PATH if key in scores] == [("ems", w) for w in auto._EMS_WEIGHTS] + [("stop", 1)]


# a small, well-conditioned channel, with the FFT products switched on for it (``fft_on``)
EM_CASE = (SparseLaplace(lam=0.3, s=31), 200)


@pytest.fixture
def fft_on(monkeypatch):
    monkeypatch.setattr(_toeplitz, "_MIN_NNZ_BATCH", 0)
    monkeypatch.setattr(_toeplitz, "_MIN_NNZ", 0)


def _fft_counts(n=10**5):
    mech, k = EM_CASE
    model = _model(mech, (0, k - 1))
    assert isinstance(model.fast_columns(np.arange(model.m))[0], _toeplitz._ConvA)
    x = np.arange(k)
    p = np.exp(-0.5 * ((x - 80) / 20.0) ** 2) + 0.3 * np.exp(-0.5 * ((x - 160) / 4.0) ** 2)
    q = np.maximum(np.asarray(model.unscaled().T @ (p / p.sum())).ravel(), 0.0)
    from sparseldp.estimation import ReportCounts

    return mech, k, model, ReportCounts(int(model.outputs[0]), np.random.default_rng(4).multinomial(n, q / q.sum()))


def _loglik_gap_holds(model, rc, est):
    """``max LL - LL(est.p) <= est.gap``: the maximum from the exact solver at a much tighter tol."""
    from sparseldp.estimation import estimate_frequencies_full

    mech, k = EM_CASE
    best = estimate_frequencies_full(rc, mech, domain=(0, k - 1), method="em", tol=1e-6)
    assert best.converged
    return best.loglik - est.loglik <= est.gap + 1e-6


def test_em_on_fft_products_reports_the_exact_certificate(fft_on):
    # method="em" runs its EM on FFT products where they apply; the gap it reports (and converged)
    # must still bound the distance to the maximum of the exact likelihood
    from sparseldp.estimation import estimate_frequencies_full

    mech, k, model, rc = _fft_counts()
    est = estimate_frequencies_full(rc, mech, domain=(0, k - 1), method="em", tol=1e-2)
    assert est.converged and est.gap <= 1e-2 and _loglik_gap_holds(model, rc, est)


def test_em_on_fft_products_computes_the_exact_certificate_once(monkeypatch, fft_on):
    # the exact certificate that decides convergence after the FFT run is the one reported
    from sparseldp.estimation import estimate_frequencies_full, frequencies

    real = frequencies._certificate
    gaps = []

    def counted(*args):
        gaps.append(real(*args))
        return gaps[-1]

    monkeypatch.setattr(frequencies, "_certificate", counted)
    mech, k, model, rc = _fft_counts()
    est = estimate_frequencies_full(rc, mech, domain=(0, k - 1), method="em", tol=1e-2)
    assert gaps == [est.gap]


def test_em_finishes_on_exact_products_when_the_fft_run_falls_short(monkeypatch, fft_on):
    # if the run on FFT products stops with an exact certificate above tol (rounding), EM and Newton
    # continue on the exact products from there
    from sparseldp.estimation import estimate_frequencies_full, frequencies

    real = frequencies._mle
    calls = []

    def short(*args, **kw):  # the FFT run stops after 50 evaluations, claiming convergence
        calls.append("fast" if len(args) > 8 and args[8] is not None else "exact")
        if calls[-1] == "fast":
            p, e, s, conv, gap = real(*args[:6], 50, *args[7:], **kw)
            return p, e, s, True, 0.0
        return real(*args, **kw)

    monkeypatch.setattr(frequencies, "_mle", short)
    mech, k, model, rc = _fft_counts()
    est = estimate_frequencies_full(rc, mech, domain=(0, k - 1), method="em", tol=1e-2)
    assert calls == ["fast", "exact"]
    assert est.converged and est.gap <= 1e-2 and _loglik_gap_holds(model, rc, est)


@pytest.mark.parametrize("mech,k", CASES[:2], ids=["laplace", "gaussian"])
def test_banded_gram_by_fft_matches_the_sparse_product(mech, k):
    # Newton's matrix S diag(w) S^T, superdiagonal by superdiagonal, against the exact sparse product
    import scipy.sparse as sp

    model = _model(mech, (0, k - 1))
    rng = np.random.default_rng(5)
    obs = np.sort(rng.choice(model.m, model.m * 2 // 3, replace=False))
    A, AT = model.columns(obs)
    FA, _ = model.fast_columns(obs, (A, AT))
    w = rng.random(obs.size) * 1e3
    ab = FA._c.gram_band(w)
    M = (A @ sp.diags_array(w) @ AT).toarray()
    s = mech.s
    assert ab.shape == (s, k)
    for d in range(s):
        np.testing.assert_allclose(ab[s - 1 - d, d:], np.diagonal(M, d), rtol=0, atol=1e-13 * np.abs(M).max())


@pytest.mark.parametrize("k", [500, 1000])
def test_model_gram_band_where_fft_products_do_not_pay(k):
    # model.gram_band: the FFT's banded Gram on a sparse window channel whose EM products stay sparse
    # (below _MIN_NNZ), with unobserved outputs; it matches the sparse product, and the band the
    # interior point would otherwise build (_ipm._sparse_band)
    import scipy.sparse as sp

    from sparseldp.estimation import _ipm

    mech = SparseLaplace(lam=0.2, s=137)
    model = _model(mech, (0, k - 1))
    assert not model.dense and model.nnz < _toeplitz._MIN_NNZ
    rng = np.random.default_rng(k)
    obs = np.sort(rng.choice(model.m, model.m * 3 // 4, replace=False))
    A, AT = model.columns(obs)
    assert model.fast_columns(obs, (A, AT))[0] is A  # no FFT products here
    w = rng.random(obs.size) * 1e3
    ab = model.gram_band(obs)(w)
    M = (A @ sp.diags_array(w) @ AT).toarray()
    s = mech.s
    assert ab.shape == (s, k)
    for d in range(s):
        np.testing.assert_allclose(ab[s - 1 - d, d:], np.diagonal(M, d), rtol=0, atol=1e-13 * np.abs(M).max())
    np.testing.assert_allclose(ab[-_ipm._band_width(A) - 1:], _ipm._sparse_band(A, AT)(w), rtol=0,
                               atol=1e-13 * np.abs(M).max())


def test_model_gram_band_on_a_dense_channel_where_the_band_pays():
    # a dense window channel whose band holds under half the matrix (the Gaussian window of 349 on 1,000
    # values): the FFT's band, the dense Gram's entries; where the window is over half the domain, none
    from sparseldp.estimation import model as model_mod

    mech = SparseGaussian(sigma=21.124, s=349)
    model = _model(mech, (0, 999))
    assert model.dense and model_mod._band_pays(model.k, mech.s, model.m)
    rng = np.random.default_rng(9)
    obs = np.sort(rng.choice(model.m, model.m * 3 // 4, replace=False))
    A, _ = model.columns(obs)
    w = rng.random(obs.size) * 1e3
    ab = model.gram_band(obs)(w)
    M = (A * w[None, :]) @ A.T
    s = mech.s
    for d in range(s):
        np.testing.assert_allclose(ab[s - 1 - d, d:], np.diagonal(M, d), rtol=0, atol=1e-13 * np.abs(M).max())
    assert np.abs(np.triu(M, s)).max() == 0.0  # nothing of the Gram beyond the band
    wide = _model(SparseGaussian(sigma=21.124, s=695), (0, 999))
    assert wide.dense and wide.gram_band(np.arange(wide.m)) is None


def test_model_gram_band_is_none_off_window_channels():
    # dense channels (dense Cholesky) and windows too short for the FFT have no FFT band
    assert _model(SparseLaplace(lam=0.2, s=137), (0, 99)).gram_band(np.arange(10)) is None  # dense
    short = _model(SparseLaplace(lam=1.0, s=11), (0, 4999))
    assert not short.dense and short.gram_band(np.arange(short.m)) is None


def test_newton_with_the_banded_gram_reaches_the_same_maximum(fft_on):
    # the banded Cholesky step (FFT Gram) and the sparse LU step both converge, to the same likelihood
    from sparseldp.estimation import mle

    mech, k, model, rc = _fft_counts()
    c_all = model.counts_of(rc, False)
    obs = np.flatnonzero(c_all > 0)
    A, AT = model.columns(obs)
    FA, _ = model.fast_columns(obs, (A, AT))
    c = c_all[obs].astype(float)
    n = float(c.sum())
    p0 = np.full(k, 1.0 / k)
    out = {}
    for label, band in (("lu", None), ("banded", FA._c.gram_band)):
        p, steps, conv, gap = mle._newton(A, AT, c, n, p0, 1e3, 1e-3, 400, False, band)
        assert conv and gap <= 1e-3, (label, steps, gap)
        out[label] = float(c @ np.log(AT @ (p / p.sum())))
    assert abs(out["lu"] - out["banded"]) <= 2e-3


def test_banded_solve_refuses_a_matrix_that_is_not_positive_definite():
    # Newton then falls back to the sparse LU: _banded_solve must say so (None), not return garbage
    from sparseldp.estimation._newton import _banded_solve

    k = 6
    rhs = np.ones((k, 2))
    good = lambda w: np.vstack([np.full(k, 0.1), np.full(k, 1.0)])  # noqa: E731  (upper band: 1 superdiagonal)
    sol = _banded_solve(good, None, np.zeros(k), rhs)
    M = np.diag(np.ones(k)) + np.diag(np.full(k - 1, 0.1), 1) + np.diag(np.full(k - 1, 0.1), -1)
    np.testing.assert_allclose(M @ sol, rhs, atol=1e-12)
    assert _banded_solve(good, None, np.full(k, -3.0), rhs) is None


def test_bootstrap_mle_refits_use_the_fft_products(monkeypatch, fft_on):
    # the MLE's bootstrap refits are simulation (no certificate of record): on a window channel they
    # run on the FFT products, and give intervals close to those of the exact products
    from sparseldp.estimation import estimate_frequencies_full, refits

    mech, k, model, rc = _fft_counts()
    est = estimate_frequencies_full(rc, mech, domain=(0, k - 1), method="em")
    seen = []
    refit = refits._refit_em

    def spy(A, *a, **kw):
        seen.append(type(A).__name__)
        return refit(A, *a, **kw)

    monkeypatch.setattr(refits, "_refit_em", spy)
    fast = est.mean(ci=est.bootstrap(mech, B=20, rng=3))[1]
    assert seen and set(seen) == {"_ConvA"}
    monkeypatch.setattr(model.__class__, "fast_columns", lambda self, idx, exact=None, **kw: self.columns(idx))
    exact = est.mean(ci=est.bootstrap(mech, B=20, rng=3))[1]
    assert seen[-1] != "_ConvA"
    width = exact[1] - exact[0]
    assert abs(fast[0] - exact[0]) < 1e-3 * width and abs(fast[1] - exact[1]) < 1e-3 * width


def test_small_channels_run_blas_in_one_thread(monkeypatch):
    # a threaded BLAS on a 100 x 236 product costs more than it gains (far more when another process
    # holds a core): the fits and the bootstrap of small channels limit it to one thread
    import threadpoolctl

    from sparseldp.estimation import _parallel, estimate_frequencies, frequencies, intervals

    def blas_threads():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    assert before  # numpy's BLAS is loaded
    with _parallel.small_blas(100, 236):
        assert blas_threads() == [1] * len(before)
    with _parallel.small_blas(1000, 1700):  # a large channel keeps its threads
        assert blas_threads() == before
    assert blas_threads() == before
    seen = []

    def recording(k, m):
        seen.append((k, m))
        return _parallel.small_blas(k, m)

    monkeypatch.setattr(frequencies, "small_blas", recording)
    monkeypatch.setattr(intervals, "small_blas", recording)
    mech, k = SparseLaplace(lam=0.3, s=31), 60
    rng = np.random.default_rng(3)
    from sparseldp.sampling import sample

    y = sample(mech, rng.integers(0, k, 5_000), rng=rng)
    est = estimate_frequencies(y, mech, domain=(0, k - 1), return_info=True)
    est.bootstrap(mech, B=4, rng=0)
    assert seen == [(k, k + 30), (k, k + 30)]


@given(lam=st.floats(0.05, 1.0), half=st.integers(12, 40), k=st.integers(30, 150), b=st.integers(1, 4),
       steps=st.integers(1, 6), subset=st.booleans(), seed=st.integers(0, 2**16))
def test_fused_em_run_is_the_em_map_on_the_exact_channel(lam, half, k, b, steps, subset, seed):
    """Identity: the fused FFT run (with its scaled ends and exact far ends) equals plain EM on the exact
    sparse channel, for any window, domain, batch, start and counts (FFT switched on at every size)."""
    saved = _toeplitz._MIN_NNZ_BATCH, _toeplitz._MIN_NNZ
    _toeplitz._MIN_NNZ_BATCH, _toeplitz._MIN_NNZ = 0, 0
    try:
        mech = SparseLaplace(lam=lam, s=2 * half + 1)
        model = _model(mech, (0, k - 1))
        rng = np.random.default_rng(seed)
        obs = np.sort(rng.choice(model.m, max(1, model.m * 3 // 4), replace=False)) if subset else np.arange(model.m)
        FA, FAT = model.fast_columns(obs)
        A, AT = model.columns(obs)
        assert isinstance(FA, _toeplitz._ConvA)
        C = rng.poisson(20.0, (b, obs.size)).astype(float)
        C[:, 0] += 1.0  # at least one count per row
        P0 = rng.dirichlet(np.full(k, 1.0), size=b)
        got = solvers._em_run(FA, FAT, P0, C, steps)
        want = solvers._em_run(A, AT, P0, C, steps)
        assert np.allclose(got, want, rtol=1e-8, atol=1e-12 * float(want.max()))
    finally:
        _toeplitz._MIN_NNZ_BATCH, _toeplitz._MIN_NNZ = saved


@pytest.mark.parametrize("diag_sign", [1.0, -1.0])
def test_dense_matrix_solve_solves_the_system(diag_sign):
    # the dense Newton system (A diag(w) A^T + diag(d)) x = rhs, formed as W W^T (W = A diag(sqrt w)),
    # also where the matrix is indefinite (a negative diagonal larger than the Gram's)
    from sparseldp.estimation._newton import _matrix_solve

    rng = np.random.default_rng(7)
    k, m = 40, 70
    A = rng.random((k, m)) ** 3
    w = rng.random(m) * 1e3 + 1.0
    d = diag_sign * (rng.random(k) + (0.0 if diag_sign > 0 else 10.0 * (A * A * w).sum(axis=1).max()))
    rhs = rng.random((k, 2))
    M = (A * w) @ A.T + np.diag(d)
    sol = _matrix_solve(A, A.T, w, d, rhs, True)
    np.testing.assert_allclose(M @ sol, rhs, rtol=0, atol=1e-9 * np.abs(M).max())


def test_the_stop_is_reached_with_fewer_reports_than_values():
    # 10^4 reports over 2 x 10^4 values: most outputs expect fewer than one report, where an output's expected
    # deviance is not 1; the former target (the number of observed outputs, about 0.4 per output here) lay
    # below anything EM reaches and every fold ran to the 20,000-step cap (28 s).  The expected deviance under
    # the fit, over every output (observed or not), is reached within a few steps.
    from sparseldp.sampling import sample

    mech, K = SparseLaplace(lam=0.5, s=7), 20_000
    x = np.random.default_rng(0).integers(0, K, 10_000)
    y = sample(mech, x, rng=1)
    model = _model(mech, (0, K - 1))
    c = model.counts_of(y, False)
    obs = np.flatnonzero(c > 0)
    rest = _em_members._rest_outputs(model, obs)
    assert rest is not None  # most outputs are unobserved
    A, AT = model.fast_columns(obs)
    scale = np.exp(model.log_cs[obs])
    _, steps = _em_members._stopped_cols(A, AT, c[obs][:, None], scale, 2_000, (), rest)
    assert steps[0] < 100
    # the former target: the deviance after those steps is far above the number of observed outputs
    P = _em_members._uniform_em(A, AT, c[obs][:, None], int(steps[0]))[:, 0]
    q = (AT @ P) * scale
    dev = 2.0 * float(c[obs] @ np.log(c[obs] / (c.sum() * q)))
    assert dev > 1.5 * obs.size


@given(rows=st.integers(1, 5), n=st.integers(2, 300), single=st.booleans(), seed=st.integers(0, 2**16))
def test_direct_transforms_are_scipy_fft_s(rows, n, single, seed):
    """_toeplitz's rfft / irfft (straight into scipy's pocketfft, checked at import) give scipy.fft's
    results bit for bit, in the same precision."""
    import scipy.fft as sfft

    X = np.random.default_rng(seed).random((rows, n)).astype(np.float32 if single else np.float64)
    F = _toeplitz._RFFT(X, 1)
    G = sfft.rfft(X, axis=-1)
    assert F.dtype == G.dtype and np.array_equal(F, G)
    Y, Z = _toeplitz._IRFFT(F, n, 1), sfft.irfft(G, n, axis=-1)
    assert Y.dtype == Z.dtype and np.array_equal(Y, Z)


def test_run_to_the_cap_follows_the_em_flow_once_every_member_is_known(monkeypatch):
    """``_stopped_cols(to_cap=True)``: once every column's stop and multiples are known, the rest of the run to
    the cap (which makes the cap's iterate, the flow members' start) follows the EM flow by
    Runge-Kutta-Chebyshev steps (``_em_members._CAP_TAIL_CHEBYSHEV``): the members are those of plain steps
    bit for bit, the cap's iterate within a thousandth of how far the plain steps carry it from the stop (in
    total variation; measured 1e-4), and a classical stop not reached by the cap is the cap's iterate as
    before.  Where a column's classical stop lies in that rest (column 1 alone: stop 14, multiples to 112,
    the classical stop at 399), the rest is run again in plain steps to it (every member bit for bit), and
    from there by the flow."""
    import sparseldp as sl

    m, k = sl.SparseGaussian(sigma=8.0, s=81), 40
    model = _model(m, (0, k - 1))
    gen = np.random.default_rng(5)
    x = np.arange(k)
    p = np.exp(-0.5 * ((x - 18) / 6.0) ** 2)
    q = np.maximum(np.asarray(model.unscaled().T @ (p / p.sum())).ravel(), 0.0)
    C = np.column_stack([gen.multinomial(n, q / q.sum()) for n in (10**3, 10**4, 10**5)]).astype(float)
    obs = np.flatnonzero(C.sum(axis=1) > 0)
    C = C[obs]
    A, AT = model.columns(obs)
    scale = np.exp(model.log_cs[obs])
    rest = _em_members._rest_outputs(model, obs)

    def both(counts, classic):
        runs = {}
        for flag in (True, False):
            monkeypatch.setattr(_em_members, "_CAP_TAIL_CHEBYSHEV", flag)
            runs[flag] = _em_members._stopped_cols(A, AT, counts, scale, 20_000, (2, 8), rest, True, classic)
        (flowed, st), (plain, st_plain) = runs[True], runs[False]
        assert np.array_equal(st, st_plain) and flowed.keys() == plain.keys()
        return flowed, plain, st

    for classic in (None, "within"):
        flowed, plain, st = both(C, classic)
        assert st.max() * 8 < 20_000
        for key in (1, 2, 8):
            assert np.array_equal(flowed[key], plain[key])
        moved = 0.5 * np.abs(plain["cap"] - plain[1]).sum(axis=0)
        gap = 0.5 * np.abs(flowed["cap"] - plain["cap"]).sum(axis=0)
        assert np.all(gap <= 1e-3 * moved) and gap.max() > 0  # the rest ran the flow
        if classic:
            steps = plain["classic_steps"]
            assert list(steps) == [20_000, 399, 20_000] and np.array_equal(flowed["classic_steps"], steps)
            assert np.array_equal(flowed["classic"][:, 1], plain["classic"][:, 1])  # found before the rest
            # not reached: the cap's iterate
            assert np.allclose(flowed["classic"][:, [0, 2]], flowed["cap"][:, [0, 2]], rtol=1e-12, atol=0)
    flowed, plain, st = both(C[:, [1]], "within")  # the classical stop (399) after the multiples (112)
    assert list(st) == [14] and list(plain["classic_steps"]) == [399]
    for key in plain:
        if key != "cap":
            assert np.array_equal(flowed[key], plain[key])
    moved = 0.5 * np.abs(plain["cap"] - plain["classic"]).sum()
    gap = 0.5 * np.abs(flowed["cap"] - plain["cap"]).sum()
    assert 0 < gap <= 1e-3 * moved  # from the classical stop on, the flow again


def test_ems_bootstrap_refits_land_on_their_fixed_points_where_the_estimate_has_no_mass():
    """k-RR at eps = 3 on 100 values, 10^4 reports of a geometric truth (most of the domain empty), auto's EMS
    member, B = 50: warm-started at 0.999 p_hat + 0.001 / k, 16 refits declared converged lay 1e-4 to 3e-2 in TV
    from their fixed points (the empty tail's entries driven towards 0, then regrowing too slowly for the
    stopping rule to see); from a tenth of the way to uniform (refits._EMS_WARM_MIX), none.  The fixed points
    are computed independently from the uniform start: Newton's method to 1e-12, then plain EMS steps."""
    import warnings

    import sparseldp as sl
    from sparseldp.estimation import refits
    from sparseldp.estimation._twolevel import dense_of
    from sparseldp.sampling import sample

    k = 100
    m = sl.baselines.randomized_response(eps=3.0, domain=(0, k - 1))
    gen = np.random.default_rng(11)
    w = 0.8 ** np.arange(k)
    est = estimate_frequencies_full(sample(m, gen.choice(k, 10**4, p=w / w.sum()), rng=gen), m, domain=(0, k - 1))
    assert est.regularization.startswith("ems")
    calls = []
    orig = refits._refit_ems

    def spy(A, AT, C, n, P0, passes, weight, tol, max_iter):
        out = orig(A, AT, C, n, P0, passes, weight, tol, max_iter)
        calls.append((A, AT, C.copy(), out[0].copy(), passes, weight, n))
        return out

    refits._refit_ems = spy
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.bootstrap(m, B=50, rng=1)
    finally:
        refits._refit_ems = orig
    A, AT, _, _, passes, weight, n = calls[0]
    A, AT = dense_of(A), dense_of(AT)  # the matrix itself (two-level products carry it)
    CT = np.ascontiguousarray(np.vstack([c[2] for c in calls]).T.astype(float))
    R = np.vstack([c[3] for c in calls]).T
    b = CT.shape[1]
    ref, *_ = _ems._ems_newton(A, AT, CT, np.full(b, 1.0 / n), np.full((k, b), 1.0 / k), passes, weight, 1e-12, 400)
    for _ in range(5_000):
        ref = _ems_map(A, AT, CT, 1.0 / n, ref, passes, weight)
    err = 0.5 * np.abs(R - ref).sum(axis=0)
    assert (err > 1e-4).sum() <= 1  # none here; one of slack for another BLAS's rounding
