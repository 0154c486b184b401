"""Active-set Newton for sparse maximum-likelihood estimates (mle._active_newton), its use in the
solver (mle._mle tries it once on a sparse iterate) and in the bootstrap's refits
(_mle_refits._active_refits).  The certificate n log max_x g_x <= tol is recomputed here on all k values,
from the returned point and the exact channel, never taken from the solver."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparseldp as sl
from sparseldp.estimation import _ipm, _mle_refits, _model, estimate_frequencies_full, mle, refits

N = 10**5
TOL = 1e-2

# (mechanism, domain size, truth): sparse truths on a sparse (window) channel and on a dense one
# (a Gaussian window wider than the domain), and a truth with three atoms and a thin bump
CASES = {
    "laplace two atoms": (sl.SparseLaplace(lam=0.3, s=41), 200, {40: 0.6, 150: 0.4}),
    "laplace atoms and bump": (sl.SparseLaplace(lam=0.2, s=61), 240, {20: 0.3, 100: 0.2, 200: 0.3,
                                                                       "bump": (60, 3.0, 0.2)}),
    "gaussian dense two atoms": (sl.SparseGaussian(sigma=25.0, s=301), 150, {30: 0.5, 110: 0.5}),
}


def _truth(k, spec):
    p = np.zeros(k)
    for where, mass in spec.items():
        if where == "bump":
            mid, width, w = mass
            b = np.exp(-0.5 * ((np.arange(k) - mid) / width) ** 2)
            p += w * b / b.sum()
        else:
            p[where] += mass
    return p / p.sum()


def _problem(case, seed=0):
    mech, k, spec = CASES[case]
    model = _model(mech, (0, k - 1))
    q = np.maximum(np.asarray(model.unscaled().T @ _truth(k, spec)).ravel(), 0.0)
    c = np.random.default_rng(seed).multinomial(N, q / q.sum()).astype(float)
    obs = np.flatnonzero(c > 0)
    A, AT = model.columns(obs)
    return model, c[obs], A, AT


def _gap(A, AT, c, n, p):
    """n log max_x g_x on all k values, from the exact observed columns: the certificate of ``p``."""
    g = (A @ (c / (AT @ p))) / n
    return n * math.log(float(np.max(g)))


def _loglik(AT, c, p):
    return float(c @ np.log(AT @ p))


def _short_of_max(A, AT, c, n, k, dense, p):
    """How far ``p``'s log-likelihood is below the maximum: against interior-point Newton on all ``k``
    values (no active set) at tol 1e-6, finished by EM where Newton's decrement stops it short (a value
    with little mass: k = 6, m = 8, three atoms, 10^4 reports left it at 1.6e-6), within 1e-6 nats of
    the maximum by its own certificate."""
    p0 = np.full(k, 1.0 / k)
    ref, _, conv, gap = mle._newton(A, AT, c, n, p0, _gap(A, AT, c, n, p0), 1e-6, 600, dense, None, False)
    if not conv:
        ref, _, conv, gap = mle._em(A, AT, c, n, ref, 1e-6, 200_000, None, False)
    assert conv and _gap(A, AT, c, n, ref) <= 1e-6 + 1e-12
    return _loglik(AT, c, ref) + 1e-6 - _loglik(AT, c, p)


@pytest.mark.parametrize("case", sorted(CASES))
def test_active_newton_reaches_the_mle_certified_on_all_values(case):
    model, c, A, AT = _problem(case)
    k = model.k
    # from the first EM run, as the solver calls it
    p_em, _, _, _ = mle._em(A, AT, c, float(N), np.full(k, 1.0 / k), TOL, 600)
    p, steps, conv, gap = mle._active_newton(A, AT, c, float(N), p_em, TOL, mle._NEWTON_STEPS, model.dense,
                                             step=False)
    assert conv and 0.0 <= gap <= TOL
    assert p.min() >= 0.0 and abs(p.sum() - 1.0) < 1e-9
    assert _gap(A, AT, c, float(N), p) <= TOL + 1e-9  # the certified point itself, on all k values
    assert -1e-9 <= _short_of_max(A, AT, c, float(N), k, model.dense, p) <= TOL
    # the returned point is one EM step beyond it by default: no further from the maximum
    p1, _, conv1, gap1 = mle._active_newton(A, AT, c, float(N), p_em, TOL, mle._NEWTON_STEPS, model.dense)
    assert conv1 and gap1 == gap and _loglik(AT, c, p1) >= _loglik(AT, c, p) - 1e-6


@pytest.mark.parametrize("case", sorted(CASES))
def test_active_set_grows_from_a_start_that_misses_the_truth(case):
    # a start with all its mass on one value that is no atom of the truth: outputs it cannot reach
    # must be covered (_covering) and the values that raise the likelihood must join the set
    model, c, A, AT = _problem(case, seed=1)
    k = model.k
    p0 = np.zeros(k)
    p0[k // 2 + 3] = 1.0
    S0 = np.flatnonzero(p0 > 0)
    reach = np.asarray(A[S0].sum(axis=0)).ravel()
    covered = mle._covering(A, p0, S0, model.dense)
    if (reach <= 0).any():  # the window channels: one value does not reach every observed output
        assert covered.size > 1
        assert (np.asarray(A[covered].sum(axis=0)).ravel() > 0).all()
    p, _, conv, gap = mle._active_newton(A, AT, c, float(N), p0, TOL, mle._NEWTON_STEPS, model.dense, step=False)
    assert conv and _gap(A, AT, c, float(N), p) <= TOL + 1e-9
    assert _short_of_max(A, AT, c, float(N), k, model.dense, p) <= TOL


def test_covering_reaches_every_output_with_the_heaviest_reaching_value():
    A = np.array([[1.0, 0.5, 0.0, 0.0],
                  [0.0, 0.5, 0.2, 0.0],
                  [0.0, 0.0, 0.8, 1.0]])
    p = np.array([0.7, 0.0, 0.3])
    # S = {0}: outputs 2 and 3 are lost; value 2 carries the most p_x A[x, y] on both
    assert list(mle._covering(A, p, np.array([0]), True)) == [0, 2]
    # no value of p reaches output 2 or 3 except ones with p = 0: any reaching value is taken
    assert set(mle._covering(A, np.array([1.0, 0.0, 0.0]), np.array([0]), True)) >= {0}
    cov = mle._covering(A, np.array([1.0, 0.0, 0.0]), np.array([0]), True)
    assert (A[cov].sum(axis=0) > 0).all()


def test_active_newton_reports_failure_with_a_bounding_gap(monkeypatch):
    # one round of one Newton step cannot converge: it says so, and its gap still bounds the distance
    model, c, A, AT = _problem("laplace two atoms")
    k = model.k
    monkeypatch.setattr(mle, "_ACTIVE_ROUNDS", 1)
    monkeypatch.setattr(mle, "_ACTIVE_EM", 0)
    monkeypatch.setattr(mle, "_ACTIVE_EM_FINISH", 0)
    p0 = np.full(k, 1.0 / k)
    p0[:k // 2] = 0.0
    p0 /= p0.sum()
    p, _, conv, gap = mle._active_newton(A, AT, c, float(N), p0, TOL, 1, model.dense, step=False)
    assert not conv and gap > TOL
    assert abs(_gap(A, AT, c, float(N), p) - gap) <= 1e-6 * max(1.0, gap)
    p_ref, _, _, _, _ = mle._mle(A, AT, c, float(N), k, TOL, 50_000, model.dense)
    assert _loglik(AT, c, p_ref) - _loglik(AT, c, p) <= gap + TOL


def _spy(monkeypatch, max_steps=None):
    """Record whether each _active_newton run converged; ``max_steps`` overrides its inner bound."""
    calls = []
    real = mle._active_newton

    def spy(A, AT, c, n, p_start, tol, steps, *rest, **kw):
        out = real(A, AT, c, n, p_start, tol, steps if max_steps is None else max_steps, *rest, **kw)
        calls.append(out[2])
        return out

    monkeypatch.setattr(mle, "_active_newton", spy)
    return calls


def test_mle_tries_the_active_set_on_sparse_iterates_only(monkeypatch):
    # (with the interior point off: where it is affordable it runs first and certifies these)
    monkeypatch.setattr(_ipm, "_IPM_FLOPS", -1.0)
    calls = _spy(monkeypatch)
    model, c, A, AT = _problem("laplace two atoms")
    p, _, _, conv, gap = mle._mle(A, AT, c, float(N), model.k, TOL, 50_000, model.dense)
    assert calls == [True] and conv and gap <= TOL
    assert _short_of_max(A, AT, c, float(N), model.k, model.dense, p) <= TOL
    # a smooth truth: the EM iterate carries mass on most values, the active set is not tried
    calls.clear()
    mech = sl.SparseLaplace(lam=0.3, s=41)
    model = _model(mech, (0, 199))
    x = np.arange(200)
    smooth = np.exp(-0.5 * ((x - 90) / 40.0) ** 2)
    q = np.maximum(np.asarray(model.unscaled().T @ (smooth / smooth.sum())).ravel(), 0.0)
    cs = np.random.default_rng(0).multinomial(N, q / q.sum()).astype(float)
    obs = np.flatnonzero(cs > 0)
    A2, AT2 = model.columns(obs)
    p, _, _, conv, _ = mle._mle(A2, AT2, cs[obs], float(N), 200, TOL, 50_000, model.dense)
    assert calls == [] and conv


def test_mle_falls_back_when_the_active_set_fails(monkeypatch):
    # one round of one inner Newton step (and no EM finish) fails: the full solver goes on as before
    # (the interior point off)
    monkeypatch.setattr(_ipm, "_IPM_FLOPS", -1.0)
    calls = _spy(monkeypatch, max_steps=1)
    monkeypatch.setattr(mle, "_ACTIVE_ROUNDS", 1)
    monkeypatch.setattr(mle, "_ACTIVE_EM", 0)
    monkeypatch.setattr(mle, "_ACTIVE_EM_FINISH", 0)
    model, c, A, AT = _problem("laplace two atoms")
    p, _, _, conv, gap = mle._mle(A, AT, c, float(N), model.k, TOL, 50_000, model.dense)
    assert calls == [False] and conv and gap <= TOL
    assert _short_of_max(A, AT, c, float(N), model.k, model.dense, p) <= TOL


def test_active_refits_are_certified_and_agree_with_dense_newton_refits(monkeypatch):
    # on a small channel the MLE's refits are EM + dense Newton; with the dense bound set to 0 the
    # same replicates go to the active set: every one certified, the same bootstrap distribution
    model_mech, k, spec = CASES["laplace two atoms"]
    model = _model(model_mech, (0, k - 1))
    q = np.maximum(np.asarray(model.unscaled().T @ _truth(k, spec)).ravel(), 0.0)
    from sparseldp.estimation import ReportCounts

    rc = ReportCounts(int(model.outputs[0]), np.random.default_rng(4).multinomial(N, q / q.sum()))
    est = estimate_frequencies_full(rc, model_mech, domain=(0, k - 1), method="em")
    assert refits._active_pays(model, est.p) is False  # small: the dense route
    dense = est.bootstrap(model_mech, B=16, rng=0)
    used = []
    real = refits._active_refits

    def spy(*a, **kw):
        out = real(*a, **kw)
        used.append(out[1])
        return out

    monkeypatch.setattr(refits, "_active_refits", spy)
    monkeypatch.setattr(refits, "_REFIT_NEWTON_COST", 0.0)
    assert refits._active_pays(model, est.p)
    active = est.bootstrap(model_mech, B=16, rng=0)
    assert len(used) == 1 and used[0].all()  # every replicate certified by the active set itself
    assert dense.converged == 16 and active.converged == 16
    for stat in ("mean", "var"):
        a, d = active.distribution(stat), dense.distribution(stat)
        assert np.abs(a - d).max() <= 0.05 * d.std() + 1e-9, stat


def test_active_set_does_not_cycle_on_replicates_of_a_spiky_mle():
    # replicates of a two-atom MLE on 1,000 values (Laplace window 275): the MLE has dozens of small
    # atoms, and a value that leaves the set can become a violator again; before values left at most
    # once, these replicates cycled between two sets for all 20 rounds (gaps of 10^3-10^4 nats)
    k = 1000
    mech = sl.design("laplace", eps=1, delta=1e-6, H=10).mechanism
    model = _model(mech, (0, k - 1))
    atoms = np.zeros(k)
    atoms[370], atoms[700] = 0.6, 0.4
    q = np.maximum(np.asarray(model.unscaled().T @ atoms).ravel(), 0.0)
    from sparseldp.estimation import ReportCounts

    rc = ReportCounts(int(model.outputs[0]), np.random.default_rng(1).multinomial(10**6, q / q.sum()))
    p_hat = estimate_frequencies_full(rc, mech, domain=(0, k - 1), method="em").p
    qh = np.maximum(np.asarray(model.unscaled().T @ p_hat).ravel(), 0.0)
    C = np.random.default_rng(0).multinomial(10**6, qh / qh.sum(), size=13).astype(float)
    for j in (10, 12):
        nz = np.flatnonzero(C[j] > 0)
        A, AT = model.columns(nz)
        p, _, conv, gap = mle._active_newton(A, AT, C[j, nz], 1e6, p_hat, 0.5, mle._NEWTON_STEPS, model.dense,
                                             step=False)
        assert conv and _gap(A, AT, C[j, nz], 1e6, p) <= 0.5 + 1e-9, (j, gap)


# the parameters of _random_problem, for hypothesis
_RANDOM = dict(k=st.integers(6, 40), m=st.integers(8, 60), atoms=st.integers(1, 3), seed=st.integers(0, 2**32 - 1),
               log_n=st.floats(2.0, 6.0), power=st.floats(0.5, 4.0))


def _random_problem(k, m, atoms, seed, log_n, power):
    """A random dense channel (``k x m``, rows random^power), a truth of a few atoms and ``10^log_n``
    reports of it: ``(rng, A, n, c, Ao, AoT)`` with ``c`` and ``Ao`` on the observed outputs."""
    rng = np.random.default_rng(seed)
    A = rng.random((k, m)) ** power
    p_true = np.zeros(k)
    p_true[rng.choice(k, atoms, replace=False)] = rng.dirichlet(np.ones(atoms))
    q = A.T @ p_true
    n = int(10**log_n)
    c_all = rng.multinomial(n, q / q.sum()).astype(float)
    obs = np.flatnonzero(c_all > 0)
    Ao = np.ascontiguousarray(A[:, obs])
    return rng, A, n, c_all[obs], Ao, np.ascontiguousarray(Ao.T)


@settings(max_examples=40, deadline=None)
@given(**_RANDOM)
def test_active_newton_matches_the_full_solver_on_random_channels(k, m, atoms, seed, log_n, power):
    # any channel (dense, rows random^power) and a truth of a few atoms: the active set converges, its
    # certified point is within tol of the maximum found by the full solver, certificate on all k
    _, _, n, c, Ao, AoT = _random_problem(k, m, atoms, seed, log_n, power)
    p_em, _, _, _ = mle._em(Ao, AoT, c, float(n), np.full(k, 1.0 / k), TOL, 600)
    p, _, conv, gap = mle._active_newton(Ao, AoT, c, float(n), p_em, TOL, mle._NEWTON_STEPS, True, step=False)
    assert conv and 0.0 <= gap <= TOL
    assert _gap(Ao, AoT, c, float(n), p) <= TOL + 1e-9
    assert _short_of_max(Ao, AoT, c, float(n), k, True, p) <= TOL + 1e-9


def test_covering_is_the_same_on_sparse_and_dense_channels():
    import scipy.sparse as sp

    rng = np.random.default_rng(11)
    for trial in range(20):
        A = rng.random((30, 45)) * (rng.random((30, 45)) < 0.15)
        A[rng.integers(30, size=45), np.arange(45)] += 0.5  # every output reachable
        p = np.zeros(30)
        p[rng.choice(30, 4, replace=False)] = rng.random(4) if trial % 2 else 0.0
        S = np.flatnonzero(p > 0) if trial % 2 else np.array([3])
        dense = mle._covering(A, p, S, True)
        sparse = mle._covering(sp.csr_array(A), p, S, False)
        assert list(dense) == list(sparse)
        assert (A[dense].sum(axis=0) > 0).all()


def test_active_sparse_needs_few_values_and_little_mass_outside():
    k = 1000
    atoms = np.zeros(k)
    atoms[[370, 700]] = [0.6, 0.4]
    assert mle._active_sparse(atoms)
    assert mle._active_sparse(atoms + 1e-4 / k)  # 1e-4 of the mass spread thinly: still sparse
    assert not mle._active_sparse(atoms + 0.02 / k)  # a 2 % floor: the MLE is spread, not sparse
    assert not mle._active_sparse(np.full(k, 1.0 / k))
    wide = np.zeros(k)
    wide[:300] = 1.0  # 30 % of the values carry mass
    assert not mle._active_sparse(wide)


def test_active_set_gives_up_after_sets_it_cannot_solve(monkeypatch):
    # every inner run unsolved (Newton stopped after one step, no EM finish): the active set stops
    # after _ACTIVE_STALLS rounds instead of growing for _ACTIVE_ROUNDS, and _mle finishes without it
    model, c, A, AT = _problem("laplace atoms and bump")
    k = model.k
    monkeypatch.setattr(mle, "_ACTIVE_EM", 0)
    monkeypatch.setattr(mle, "_ACTIVE_EM_FINISH", 0)
    rounds = []
    real = mle._newton

    def one_step(A_, AT_, c_, n_, p_, gap_, tol_, steps_, dense_, band_=None, step_=True):
        if A_.shape[0] < k:  # an active set's run
            rounds.append(A_.shape[0])
            steps_ = 1
        return real(A_, AT_, c_, n_, p_, gap_, tol_, steps_, dense_, band_, step_)

    monkeypatch.setattr(mle, "_newton", one_step)
    p0 = np.full(k, 1.0 / k)
    p0[k // 2:] = 0.0
    p0 /= p0.sum()
    p, _, conv, gap = mle._active_newton(A, AT, c, float(N), p0, TOL, mle._NEWTON_STEPS, model.dense)
    assert not conv and len(rounds) == mle._ACTIVE_STALLS
    rounds.clear()
    monkeypatch.setattr(mle, "_ACTIVE_MASS", 1.0)  # let _mle try it on any iterate with few values
    p, _, _, conv, gap = mle._mle(A, AT, c, float(N), k, TOL, 50_000, model.dense)
    assert conv and gap <= TOL and len(rounds) <= mle._ACTIVE_STALLS


def _replicates(case, B, seed=0):
    """The MLE of ``case`` and ``B`` replicate histograms drawn from its fitted outputs (outputs x B)."""
    mech, k, spec = CASES[case]
    model = _model(mech, (0, k - 1))
    q = np.maximum(np.asarray(model.unscaled().T @ _truth(k, spec)).ravel(), 0.0)
    from sparseldp.estimation import ReportCounts

    rc = ReportCounts(int(model.outputs[0]), np.random.default_rng(seed).multinomial(N, q / q.sum()))
    p_hat = estimate_frequencies_full(rc, mech, domain=(0, k - 1), method="em").p
    qh = np.maximum(np.asarray(model.unscaled().T @ p_hat).ravel(), 0.0)
    CT = np.random.default_rng(seed + 1).multinomial(N, qh / qh.sum(), size=B).T.astype(float)
    return model, p_hat, CT


def test_active_batch_certifies_on_all_values_and_agrees_with_one_by_one():
    # every column the batch reports certified has n log max_x g_x <= tol on all k values (recomputed
    # here from the exact channel), its reported gap is that certificate, and it is the same MLE as
    # the one-by-one active-set Newton finds: log-likelihoods within tol of each other
    model, p_hat, CT = _replicates("laplace two atoms", 12)
    tol = 0.5
    P, conv, gaps = _mle_refits._active_batch(model, CT, float(N), p_hat, tol)
    Ps, convs, _ = _mle_refits._active_solo(model, CT, float(N), p_hat, tol)
    assert conv.sum() >= 10 and convs.all()
    for j in np.flatnonzero(conv):
        nz = np.flatnonzero(CT[:, j] > 0)
        A, AT = model.columns(nz)
        c = CT[nz, j]
        assert abs(P[:, j].sum() - 1.0) < 1e-9 and P[:, j].min() >= 0.0
        gap = _gap(A, AT, c, float(N), P[:, j])
        assert gap <= tol + 1e-9 and abs(gap - gaps[j]) <= 1e-6 * max(1.0, abs(gap)), (j, gap, gaps[j])
        assert abs(_loglik(AT, c, P[:, j]) - _loglik(AT, c, Ps[:, j])) <= tol + 1e-9


@pytest.mark.parametrize("case", ["gaussian dense two atoms", "laplace atoms and bump"])
def test_active_batch_gives_up_after_its_probe_where_em_is_slow(case, monkeypatch):
    # on these sets EM converges in few columns within the probe's evaluations (the barrier Newton's
    # case): the batch stops after that one round and every column goes to the one-by-one solver,
    # which certifies them all
    model, p_hat, CT = _replicates(case, 12)
    monkeypatch.setattr(_mle_refits, "_BATCH_SUPPORT", 1)  # a few atoms: the batch is not tried by default
    runs = []
    real = _mle_refits._refit_em

    def spy(*a, **kw):
        runs.append(a[6])
        return real(*a, **kw)

    monkeypatch.setattr(_mle_refits, "_refit_em", spy)
    P, conv, gaps = _mle_refits._active_refits(model, CT, float(N), p_hat, 0.5)
    assert runs == [_mle_refits._BATCH_PROBE]  # the probe only
    assert conv.all() and np.all(gaps <= 0.5)


@pytest.mark.parametrize("ipm_fast", [False, True])
def test_active_batch_leaves_the_rest_to_the_one_by_one_solver(ipm_fast, monkeypatch):
    # two rounds certify few columns; _active_refits hands every other one to the interior point where
    # it certifies the first within _IPM_DIRECT seconds, else to _active_solo, so all come back
    # certified, and the batch's certified columns are kept as the batch left them
    model, p_hat, CT = _replicates("laplace two atoms", 10)
    monkeypatch.setattr(_mle_refits, "_ACTIVE_ROUNDS", 2)
    monkeypatch.setattr(_mle_refits, "_BATCH_SUPPORT", 1)
    monkeypatch.setattr(_mle_refits, "_IPM_DIRECT", 60.0 if ipm_fast else 0.0)
    P1, conv1, _ = _mle_refits._active_batch(model, CT, float(N), p_hat, 0.5)
    assert conv1.any() and not conv1.all()
    solo = []
    real = _mle_refits._active_solo

    def spy(model_, CT_, *a):
        solo.append(CT_.shape[1])
        return real(model_, CT_, *a)

    monkeypatch.setattr(_mle_refits, "_active_solo", spy)
    P, conv, gaps = _mle_refits._active_refits(model, CT, float(N), p_hat, 0.5)
    assert solo == ([] if ipm_fast else [int((~conv1).sum())])
    assert conv.all() and np.all(gaps <= 0.5)
    assert np.array_equal(P[:, conv1], P1[:, conv1])


@pytest.mark.parametrize("case", sorted(CASES))
def test_active_refits_go_one_by_one_on_a_few_atoms(case, monkeypatch):
    # p_hat carries mass on fewer than _BATCH_SUPPORT values: no batch and no interior point, every
    # column by the one-by-one Newton, all certified
    model, p_hat, CT = _replicates(case, 6)
    assert np.count_nonzero(p_hat > mle._ACTIVE_REL * p_hat.max()) < _mle_refits._BATCH_SUPPORT
    monkeypatch.setattr(_mle_refits, "_active_batch", lambda *a: pytest.fail("the batch was tried"))
    monkeypatch.setattr(_mle_refits, "_ipm_direct", lambda *a, **kw: pytest.fail("the interior point was tried"))
    P, conv, gaps = _mle_refits._active_refits(model, CT, float(N), p_hat, 0.5)
    assert conv.all() and np.all(gaps <= 0.5)


def test_refit_em_member_mask_keeps_zeros_and_certifies_on_the_members():
    # with a mask, values outside a column's set start and stay at exactly 0 and its certificate is
    # taken over its own values: column 0's set has the values 140 and 160 but not the atom at 150, so
    # it converges to the set's optimum, whose g at 150 is far above 1 (the certificate on all values
    # fails); column 1 has every value
    model, c, A, _ = _problem("laplace two atoms")
    k = model.k
    A = A.toarray()
    AT = np.ascontiguousarray(A.T)
    member = np.zeros((k, 2), bool)
    member[30:51, 0] = True
    member[[140, 160], 0] = True
    member[:, 1] = True
    P0 = np.where(member, 1.0, 0.0)
    P0 /= P0.sum(axis=0)
    C = np.repeat(c[:, None], 2, axis=1)
    P, conv, gaps = _mle_refits._refit_em(A, AT, C, float(N), P0, 0.5, 20_000, member)
    assert conv.all() and np.all(gaps <= 0.5)
    assert np.all(P[~member] == 0.0)
    g = (A @ (C / (AT @ P))) / N
    assert np.all(N * np.log(np.where(member, g, 0.0).max(axis=0)) <= 0.5 + 1e-9)
    assert N * math.log(g[:, 0].max()) > 100.0  # the set misses the atom: only the mask makes it certified


class _DenseModel:
    """The three things :func:`_mle_refits._active_batch` reads of a model, for a random dense channel."""

    dense = True

    def __init__(self, A):
        self.A = A
        self.k = A.shape[0]

    def columns(self, idx):
        Ai = np.ascontiguousarray(self.A[:, idx])
        return Ai, np.ascontiguousarray(Ai.T)


@settings(max_examples=30, deadline=None)
@given(**_RANDOM)
def test_active_batch_certificates_hold_on_random_channels(k, m, atoms, seed, log_n, power):
    # any channel and replicates of a sparse MLE: every column the batch reports certified is a
    # distribution whose certificate, recomputed on all k values from the channel, is at most tol
    rng, A, n, c, Ao, AoT = _random_problem(k, m, atoms, seed, log_n, power)
    p_hat, _, _, _ = mle._em(Ao, AoT, c, float(n), np.full(k, 1.0 / k), TOL, 2000)
    qh = A.T @ p_hat
    CT = rng.multinomial(n, qh / qh.sum(), size=6).T.astype(float)
    tol = 0.5
    P, conv, gaps = _mle_refits._active_batch(_DenseModel(A), CT, float(n), p_hat, tol)
    for j in np.flatnonzero(conv):
        nz = np.flatnonzero(CT[:, j] > 0)
        Aj, AjT = np.ascontiguousarray(A[:, nz]), np.ascontiguousarray(A[:, nz].T)
        assert P[:, j].min() >= 0.0 and abs(P[:, j].sum() - 1.0) < 1e-9
        assert _gap(Aj, AjT, CT[nz, j], float(n), P[:, j]) <= tol + 1e-9
        assert 0.0 <= gaps[j] <= tol
