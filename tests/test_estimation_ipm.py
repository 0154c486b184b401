"""The primal-dual interior-point MLE (estimation._ipm) and its use in the MLE's bootstrap refits
(_mle_refits._ipm_direct, _ipm_finish).  Certificates are recomputed here from the returned point and
the exact channel on all k values; the maximum is the one of test_estimation_active's reference
solver (barrier Newton finished by EM to 1e-6 nats)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sparseldp.estimation import _ipm, _mle_refits, _parallel, mle
from test_estimation_active import (_RANDOM, CASES, N, TOL, _gap, _problem, _random_problem, _replicates,
                                    _short_of_max)


def _check(A, AT, c, n, k, dense, p, gap, conv, tol):
    assert conv and 0.0 <= gap <= tol
    assert p.min() >= 0.0 and abs(p.sum() - 1.0) < 1e-9
    assert _gap(A, AT, c, n, p) <= tol + 1e-9
    assert _short_of_max(A, AT, c, n, k, dense, p) <= tol + 1e-9


@settings(max_examples=60, deadline=None)
@given(**_RANDOM, sparse=st.booleans(), step=st.booleans(), warm=st.integers(0, 200))
def test_ipm_reaches_the_mle_certified_on_random_channels(k, m, atoms, seed, log_n, power, sparse, step, warm):
    # any channel (dense rows random^power, also given as a sparse matrix, which has no narrow band:
    # dense Cholesky), a truth of a few atoms: certified within tol of the maximum, with or without the
    # last EM step, from the uniform start (warm = 0) or warm-started at EM's iterate after `warm`
    # evaluations (as mle._mle does after 600)
    _, _, n, c, Ao, AoT = _random_problem(k, m, atoms, seed, log_n, power)
    A, AT = (sp.csr_array(Ao), sp.csr_array(AoT)) if sparse else (Ao, AoT)
    start = {}
    if warm:
        p0, _, _, gap0 = mle._em(Ao, AoT, c, float(n), np.full(k, 1.0 / k), 0.0, warm, None, False)
        start = {"p0": p0, "gap0": gap0}
    p, steps, conv, gap = _ipm._ipm(A, AT, c, float(n), TOL, not sparse, step=step, **start)
    _check(Ao, AoT, c, float(n), k, True, p, gap, conv, TOL)
    assert steps <= _ipm._IPM_STEPS


@pytest.mark.parametrize("case", sorted(CASES))
def test_ipm_reaches_the_mle_on_window_channels(case):
    # sparse window channels by banded Cholesky (the Gram from sparse products), a dense one by dense
    # Cholesky
    model, c, A, AT = _problem(case)
    p, _, conv, gap = _ipm._ipm(A, AT, c, float(N), TOL, model.dense, step=False)
    _check(A, AT, c, float(N), model.k, model.dense, p, gap, conv, TOL)


@pytest.mark.parametrize("case", ["laplace two atoms", "laplace atoms and bump"])
def test_sparse_band_is_the_gram_in_banded_storage(case):
    # entry (x, x + d) of A diag(w) A^T sits at ab[bw - d, x + d], nothing of the Gram lies outside the band
    model, c, A, AT = _problem(case)
    w = np.random.default_rng(3).random(A.shape[1]) + 0.1
    M = (A.toarray() * w[None, :]) @ A.toarray().T
    bw = _ipm._band_width(A)
    rows, cols = np.nonzero(M)
    assert np.max(np.abs(rows - cols)) == bw
    ab = _ipm._sparse_band(A, AT)(w)
    assert ab.shape == (bw + 1, model.k)
    for d in range(bw + 1):
        np.testing.assert_allclose(ab[bw - d, d:], np.diagonal(M, d), rtol=1e-12, atol=1e-15)


def test_band_width_sees_rows_out_of_order():
    # rows whose windows are not in the values' order have no band: the full width
    A = sp.csr_array(np.array([[0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0]]))
    assert _ipm._band_width(A) == 2
    assert _ipm._sparse_band(A, sp.csr_array(A.T)) is None


def test_ipm_gives_up_with_a_bounding_gap_at_its_iteration_cap():
    # no iteration allowed: not converged, the start's own certificate reported
    model, c, A, AT = _problem("laplace two atoms")
    p, steps, conv, gap = _ipm._ipm(A, AT, c, float(N), TOL, model.dense, step=False, max_steps=0)
    assert steps == 0 and not conv
    assert gap == pytest.approx(_gap(A, AT, c, float(N), np.full(model.k, 1.0 / model.k)), rel=1e-9)


@pytest.mark.parametrize("case", sorted(CASES))
def test_ipm_direct_refits_are_certified_or_declined(case, monkeypatch):
    # with time to spare every replicate is refit by the interior point and certified on all k values;
    # with none the probe declines (None) and the caller's solvers run
    model, p_hat, CT = _replicates(case, 6)
    got = _mle_refits._ipm_direct(model, CT, float(N), 0.5, limit=60.0)
    assert got is not None
    P, conv, gaps = got
    assert conv.all()
    for j in range(CT.shape[1]):
        nz = np.flatnonzero(CT[:, j] > 0)
        A, AT = model.columns(nz)
        assert _gap(A, AT, CT[nz, j], float(N), P[:, j]) <= 0.5 + 1e-9
    assert _mle_refits._ipm_direct(model, CT, float(N), 0.5, limit=0.0) is None


@settings(max_examples=200, deadline=None)
@given(k=st.integers(1, 20_000), m=st.integers(1, 40_000), width=st.integers(0, 2_000), dense=st.booleans(),
       dk=st.integers(1, 1_000), dm=st.integers(1, 1_000), dw=st.integers(1, 100))
def test_ipm_seconds_grow_with_the_channel(k, m, width, dense, dk, dm, dw):
    # the modelled cost of an iteration (the refits' budgets count it) is positive, at least the fixed cost,
    # and grows with the values; with the outputs where dense, with the band where banded
    f = _ipm._ipm_seconds
    base = f(k, m, dense, width)
    assert base >= _ipm._REF_FIXED > 0
    assert f(k + dk, m, dense, width) > base
    if dense:
        assert f(k, m + dm, True, width) > base and f(k, m, True, width + dw) == base
    else:
        assert f(k, m, False, width + dw) > base and f(k, m + dm, False, width) == base


@pytest.mark.parametrize("case", sorted(CASES))
def test_ipm_refits_do_not_read_the_clock(case, monkeypatch):
    # the probe's limit counts modelled iterations (_ipm._ipm_seconds), not seconds of a clock: the
    # same refits (or the same refusal) when every interior-point run is made 0.3 s slower, as on a
    # loaded machine (a deadline of 0.1 s on a clock failed every probe then)
    model, p_hat, CT = _replicates(case, 4)
    quick = _mle_refits._ipm_direct(model, CT, float(N), 0.5)
    real = _mle_refits._ipm

    def slow(*a, **kw):
        time.sleep(0.3)
        return real(*a, **kw)

    monkeypatch.setattr(_mle_refits, "_ipm", slow)
    loaded = _mle_refits._ipm_direct(model, CT, float(N), 0.5)
    assert (quick is None) == (loaded is None)
    if quick is not None:
        for a, b in zip(quick, loaded):
            np.testing.assert_array_equal(a, b)


def test_ipm_probe_limit_is_a_count_of_modelled_iterations():
    # the limit allows floor(limit / per-iteration cost) iterations: one short of a column's own count
    # leaves it uncertified at exactly that cost, its own count certifies it
    model, p_hat, CT = _replicates("laplace atoms and bump", 1)
    p, conv, gap, cost = _mle_refits._ipm_column(model, CT, float(N), 0, 0.5)
    assert conv and cost > 0
    nz = np.flatnonzero(CT[:, 0] > 0)
    per = _ipm._ipm_seconds(model.k, nz.size, model.dense and model.gram_band(nz) is None,
                            model.nnz // model.k)
    steps = round(cost / per)
    assert cost == pytest.approx(steps * per, rel=1e-12)
    p2, conv2, gap2, cost2 = _mle_refits._ipm_column(model, CT, float(N), 0, 0.5, limit=steps * per * (1 + 1e-9))
    assert conv2 and cost2 == cost
    np.testing.assert_array_equal(p2, p)
    p3, conv3, gap3, cost3 = _mle_refits._ipm_column(model, CT, float(N), 0, 0.5, limit=(steps - 0.5) * per)
    assert not conv3 and cost3 == pytest.approx((steps - 1) * per, rel=1e-12) and gap3 > 0.5


def test_per_column_budget_is_spent_by_modelled_cost():
    # columns are tried, block by block, until the summed modelled costs pass the budget, however long
    # each took on the clock
    cols = np.arange(2 * 64)
    blocks = _parallel.blocks_for(False, cols.size)
    per_block = cols.size // blocks

    def solve(j):
        if j % 7 == 0:
            time.sleep(0.01)
        return np.full(3, float(j)), True, 0.0, 1.0

    P, conv, gaps, tried = _mle_refits._per_column(3, cols, solve, budget=2.5)
    want = np.zeros(cols.size, bool)
    for b in range(blocks):
        want[b * per_block:b * per_block + 3] = True  # tried after 0, 1 and 2 spent; 3 passes 2.5
    np.testing.assert_array_equal(tried, want)
    np.testing.assert_array_equal(conv, want)
    np.testing.assert_array_equal(P[0, want], cols[want].astype(float))


def test_ipm_finish_certifies_what_is_left_and_keeps_the_rest(monkeypatch):
    model, p_hat, CT = _replicates("laplace atoms and bump", 6)
    B = CT.shape[1]
    P = np.repeat(np.full(model.k, 1.0 / model.k)[:, None], B, axis=1)
    conv = np.array([True, False, True, False, False, True])
    gaps = np.where(conv, 0.1, np.inf)
    kept = P[:, conv].copy()
    _mle_refits._ipm_finish(model, CT, float(N), P, conv, gaps, 0.5)
    assert conv.all() and np.all(gaps <= 0.5)
    np.testing.assert_array_equal(P[:, [0, 2, 5]], kept)
    for j in (1, 3, 4):
        nz = np.flatnonzero(CT[:, j] > 0)
        A, AT = model.columns(nz)
        assert _gap(A, AT, CT[nz, j], float(N), P[:, j]) <= 0.5 + 1e-9
    # out of budget: nothing is tried, nothing changes
    monkeypatch.setattr(_mle_refits, "_IPM_BUDGET", -1.0)
    conv2, gaps2 = np.zeros(B, bool), np.full(B, np.inf)
    P2 = np.zeros((model.k, B))
    _mle_refits._ipm_finish(model, CT, float(N), P2, conv2, gaps2, 0.5)
    assert not conv2.any() and np.all(np.isinf(gaps2)) and not P2.any()


def _converged_runs(monkeypatch, module, name) -> list:
    """``module.name`` (a solver returning ``(p, steps, converged, gap)``) wrapped to record whether
    each run converged, in the list returned."""
    runs, real = [], getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **kw: runs.append(real(*a, **kw)) or runs[-1])
    return runs


@pytest.mark.parametrize("case", sorted(CASES))
def test_mle_runs_the_interior_point_after_its_first_em_run(case, monkeypatch):
    # where the first EM run does not certify, mle._mle runs the interior point (once), which certifies:
    # the active set and the barrier Newton are not needed; off (unaffordable), the old solvers do it
    model, c, A, AT = _problem(case)
    runs = _converged_runs(monkeypatch, mle, "_ipm")
    monkeypatch.setattr(mle, "_active_newton", lambda *a, **kw: pytest.fail("the active set was tried"))
    monkeypatch.setattr(mle, "_newton", lambda *a, **kw: pytest.fail("the barrier Newton was tried"))
    monkeypatch.setattr(mle, "_EM_FIRST", 5)  # a first EM run that does not certify
    p, _, _, conv, gap = mle._mle(A, AT, c, float(N), model.k, TOL, 50_000, model.dense)
    assert [run[2] for run in runs] == [True] and conv and gap <= TOL
    monkeypatch.undo()
    assert _short_of_max(A, AT, c, float(N), model.k, model.dense, p) <= TOL + 1e-9
    monkeypatch.setattr(_ipm, "_IPM_FLOPS", -1.0)
    monkeypatch.setattr(mle, "_ipm", lambda *a, **kw: pytest.fail("the interior point was tried"))
    p, _, _, conv, gap = mle._mle(A, AT, c, float(N), model.k, TOL, 50_000, model.dense)
    assert conv and gap <= TOL


def test_robust_bootstrap_gives_the_same_replicates_under_load(monkeypatch):
    # end to end: a seed gives the same robust bootstrap (the MLE's refits by the interior point, 400 values
    # under the Laplace window of 59) when the first interior-point runs are made 0.3 s slower, as on a
    # loaded machine (the probe of 0.1 / 0.25 s read a clock before and then handed the refits to other solvers)
    from sparseldp import design
    from sparseldp.estimation import ReportCounts, _model, estimate_frequencies_full

    k = 400
    mech = design("laplace", eps=2, delta=1e-8, H=3).mechanism
    x = np.arange(k)
    p = np.exp(-0.5 * ((x - 120) / 25.0) ** 2) + 0.7 * np.exp(-0.5 * ((x - 290) / 30.0) ** 2)
    model = _model(mech, (0, k - 1))
    q = np.asarray(model.unscaled().T @ (p / p.sum())).ravel()
    counts = np.random.default_rng(3).multinomial(10**5, q / q.sum())
    est = estimate_frequencies_full(ReportCounts(int(model.outputs[0]), counts), mech, domain=(0, k - 1),
                                    method="auto")
    calls = []
    real = _mle_refits._ipm
    monkeypatch.setattr(_mle_refits, "_ipm", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    quick = est.bootstrap(mech, B=10, rng=1, robust=True)
    assert len(calls) >= 2  # the MLE's refits went through the interior point
    slow_calls = []

    def slow(*a, **kw):
        slow_calls.append(1)
        if len(slow_calls) <= 2:
            time.sleep(0.3)
        return real(*a, **kw)

    monkeypatch.setattr(_mle_refits, "_ipm", slow)
    loaded = est.bootstrap(mech, B=10, rng=1, robust=True)
    assert len(slow_calls) == len(calls)
    np.testing.assert_array_equal(loaded.replicates, quick.replicates)
    np.testing.assert_array_equal(loaded.reference.replicates, quick.reference.replicates)
    assert est.range(100, 150, ci=loaded) == est.range(100, 150, ci=quick)


def test_ipm_all_probe_limit_grows_with_the_em_budget(monkeypatch):
    # where the MLE is not sparse the probe may spend up to _IPM_VS_EM times the batched EM's modelled time for
    # its whole budget (at least _IPM_DIRECT_DENSE): more for a larger budget, by the FFT length on window channels
    model, p_hat, CT = _replicates("laplace atoms and bump", 2)
    seen = []
    monkeypatch.setattr(_mle_refits, "_ipm_direct", lambda *a, limit=None, **kw: seen.append(limit))
    for evals in (1, 2_000, 20_000):
        _mle_refits._ipm_all(model, CT, float(N), 0.5, evals)
    per = _mle_refits._em_eval_seconds(model)
    assert per > 0
    assert seen == [max(_mle_refits._IPM_DIRECT_DENSE, _mle_refits._IPM_VS_EM * e * per) for e in (1, 2_000, 20_000)]
    assert seen[0] == _mle_refits._IPM_DIRECT_DENSE < seen[2]
    from sparseldp import SparseLaplace
    from sparseldp.estimation import _model
    small, large = (_model(SparseLaplace(lam=0.2, s=101), (0, k - 1)) for k in (500, 5_000))
    assert small.log_window is not None and large.log_window is not None
    assert _mle_refits._em_eval_seconds(large) > 8 * _mle_refits._em_eval_seconds(small)


@pytest.mark.parametrize("spread", [False, True])
def test_active_refits_probe_limit_by_the_mle_s_effective_atoms(spread, monkeypatch):
    # the columns the batched active set leaves go to the interior point's probe with the EM-budget limit where
    # p_hat spreads over at least _IPM_SPREAD effective atoms (the one-by-one active set is slow there), else
    # with _IPM_DIRECT (one dominant atom: the active set is fast)
    from sparseldp import SparseLaplace
    from sparseldp.estimation import _model

    k = 100
    model = _model(SparseLaplace(lam=0.3, s=21), (0, k - 1))
    p_hat = np.zeros(k)
    if spread:
        p_hat[10:90:2] = 1.0  # 40 equal atoms
    else:
        p_hat[10:50] = 0.1 / 40
        p_hat[30] += 0.9  # one atom with 90 % of the mass, 39 small ones
    p_hat /= p_hat.sum()
    assert (_mle_refits._atoms(p_hat) >= _mle_refits._IPM_SPREAD) == spread
    assert _mle_refits._atoms(np.full(40, 1 / 40)) == pytest.approx(40.0)
    CT = np.ones((model.m, 3))
    seen = []
    monkeypatch.setattr(_mle_refits, "_active_batch",
                        lambda model, CT, n, p, tol: (np.zeros((k, 3)), np.zeros(3, bool), np.full(3, np.inf)))
    monkeypatch.setattr(_mle_refits, "_ipm_direct", lambda *a, limit=None, **kw: seen.append(limit))
    monkeypatch.setattr(_mle_refits, "_active_solo",
                        lambda model, CT, n, p, tol: (np.zeros((k, CT.shape[1])), np.ones(CT.shape[1], bool),
                                                      np.zeros(CT.shape[1])))
    monkeypatch.setattr(_mle_refits, "_em_eval_seconds", lambda model: 1e-3)  # an EM budget of 2 s a replicate
    _mle_refits._active_refits(model, CT, 1e4, p_hat, 0.5, 2_000)
    assert seen == [_mle_refits._IPM_VS_EM * 2.0 if spread else _mle_refits._IPM_DIRECT]
