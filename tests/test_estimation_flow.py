"""The EM flow that continues auto's stopped EM past its cap (_flow._em_flow, auto's ("flow", j) members).

The flow ``d theta / dt = g(p) - 1`` (``theta = log p``) is the continuous-time
limit of EM; its implicit-Euler integration is checked against plain EM steps on
one parameter table of dense channels, for mass and monotone likelihood with
hypothesis, and end to end: auto's choice on a wide Gaussian channel at 10^7
reports, and the bootstrap's refit of that member.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparseldp import SparseGaussian, SparseLaplace
from sparseldp.estimation import ReportCounts, _model, estimate_frequencies_full
from sparseldp.estimation import _em_members
from sparseldp.estimation._em_members import _STOP_CAP
from sparseldp.estimation.intervals import _refit_plan, bootstrap
from sparseldp.estimation._flow import _em_flow, _flow_jacobian
from sparseldp.estimation.solvers import _em_run


def _bump(k, mu, sd):
    x = np.arange(k)
    w = np.exp(-0.5 * ((x - mu) / sd) ** 2)
    return w / w.sum()


def _counts(mech, pop, n, seed):
    """The model on 0..k-1 and multinomial counts of n reports on its outputs (all outputs)."""
    model = _model(mech, (0, pop.size - 1))
    q = np.maximum(np.asarray(model.unscaled().T @ pop).ravel(), 0.0)
    return model, np.random.default_rng(seed).multinomial(n, q / q.sum()).astype(float)


def _rc(model, c):
    return ReportCounts(int(model.outputs[0]), c.astype(np.int64))


def _dense(model, c):
    obs = np.flatnonzero(c > 0)
    A, AT = model.columns(obs)
    A, AT = (X if isinstance(X, np.ndarray) else X.toarray() for X in (A, AT))
    return A, AT, c[obs]


def _em(A, AT, C, steps):
    k = A.shape[0]
    return _em_run(A, AT, np.full((C.shape[1], k), 1.0 / k), C.T, steps, 1.0 / C.sum(axis=0)).T


def _tv(p, q):
    return 0.5 * float(np.abs(np.asarray(p) - np.asarray(q)).sum())


# (mechanism, truth, reports): wide windows over small domains, where EM is slow and auto's stopped
# EM reaches its cap; a two-bump truth and a spike over a smooth floor
TABLE = [
    (SparseGaussian(sigma=44.6, s=751), _bump(20, 8, 3), 10**7),
    (SparseGaussian(sigma=21.1, s=351), 0.5 * _bump(60, 20, 4) + 0.5 * _bump(60, 40, 6), 10**6),
    (SparseLaplace(lam=0.2, s=137), 0.7 * _bump(40, 20, 6) + 0.3 * np.eye(40)[8], 10**5),
]


@pytest.mark.parametrize("mech, pop, n", TABLE)
def test_flow_follows_em_steps(mech, pop, n):
    # EM for t0 steps, then EM to 2 t0 and 4 t0 against the flow from the same point: measured TV
    # distance 3e-4 to 2.5e-3 on such channels (implicit Euler's error; the Euler step of EM itself
    # differs from the flow by O(1/t) in the slow directions)
    model, c = _counts(mech, pop, n, 1)
    A, AT, cc = _dense(model, c)
    C = cc[:, None]
    t0 = 2000
    P0 = _em(A, AT, C, t0)
    flow, failed = _em_flow(A, AT, C, P0, t0, [2 * t0, 4 * t0])
    assert not failed.any()
    for P, t in zip(flow, (2 * t0, 4 * t0)):
        em = _em(A, AT, C, t)
        assert _tv(P[:, 0], em[:, 0] / em[:, 0].sum()) <= 5e-3
        assert _tv(P[:, 0], P0[:, 0] / P0[:, 0].sum()) > 1e-3  # the comparison is not vacuous: it moved


def test_flow_converges_at_its_fixed_point_under_long_substeps():
    """Two values, EM already at the MLE after 89 steps, substeps of 10^6-10^7: the residual's rounding
    (``h`` times that of ``g``) lies along the shift of every ``log p`` alike, which moves nothing;
    Newton's convergence is measured on ``p`` itself, and the flow does not fail there (it did, found
    by hypothesis)."""
    gen = np.random.default_rng(12265)
    k, t0 = 2, 89
    A = gen.uniform(0.05, 1.0, (k, k + 4))
    C = gen.integers(0, 50, (k + 4, 2)).astype(float)
    C[0] += 1.0
    P0 = _em(A, A.T, C, t0)
    P0 /= P0.sum(axis=0)
    out, failed = _em_flow(A, A.T, C, P0, t0, [t0 * 4.0 ** j for j in range(1, 11)])
    assert not failed.any()
    assert _tv(out[-1][:, 0], out[-2][:, 0]) < 1e-9  # at the fixed point


@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 8), t0=st.integers(1, 200))
@settings(max_examples=40, deadline=None)
def test_flow_keeps_mass_and_never_lowers_the_likelihood(seed, k, t0):
    gen = np.random.default_rng(seed)
    m = k + 4
    A = gen.uniform(0.05, 1.0, (k, m))  # a dense channel (rows need not sum to 1: column-scaled)
    C = gen.integers(0, 50, (m, 2)).astype(float)
    C[0] += 1.0  # every column has reports
    P0 = _em(A, A.T, C, t0)
    P0 /= P0.sum(axis=0)
    times = [t0 * 4.0 ** j for j in range(1, 11)]  # substeps up to ~10^5 x t0: values decay by millions in log p
    out, failed = _em_flow(A, A.T, C, P0, t0, times)
    assert not failed.any()

    def loglik(P):
        with np.errstate(divide="ignore"):
            return (C * np.log(A.T @ P)).sum(axis=0)

    last = loglik(P0)
    for P in out:
        assert np.all(P >= 0.0)
        np.testing.assert_allclose(P.sum(axis=0), 1.0, rtol=0, atol=1e-12)
        now = loglik(P)
        assert np.all(now >= last - 1e-7 * np.abs(last))
        last = now


def test_auto_continues_a_capped_em_and_beats_the_mle():
    # a smooth truth on 20 values under a Gaussian window of 751 (sigma 44.6), 10^7 reports: every
    # fold's stopped EM is still above its discrepancy target at the cap, the selection continues it by
    # the flow and picks a member past the cap; the MLE (the one-SE choice without the flow members)
    # is spiky
    mech, pop, n = TABLE[0]
    model, c = _counts(mech, pop, n, 2)
    est = estimate_frequencies_full(_rc(model, c), mech, domain=(0, 19), method="auto", counts=True)
    mle = estimate_frequencies_full(_rc(model, c), mech, domain=(0, 19), method="em", counts=True)
    assert est.regularization.startswith("em flow=")
    time = int(est.regularization.split("=")[1])
    assert time in _em_members._flow_times(_em_members._STOP_CAP)
    assert _tv(est.p, pop) < 0.25 * _tv(mle.p, pop)


@pytest.mark.filterwarnings("ignore::sparseldp.estimation.ShapeWarning")  # a wide kernel, on purpose
def test_flow_member_refit_reproduces_the_estimate_and_bootstraps():
    mech, pop, n = TABLE[0]
    model, c = _counts(mech, pop, n, 2)
    est = estimate_frequencies_full(_rc(model, c), mech, domain=(0, 19), method="auto", counts=True)
    plan = _refit_plan(est, None)
    assert plan[0] == "em-flow" and plan[2] == int(est.regularization.split("=")[1])
    A, AT, cc = _dense(model, c)
    P, failed = _em_members._flow_fits(A, AT, cc[:, None], plan[2])
    assert not failed[0]
    np.testing.assert_allclose(P[:, 0], est.p, rtol=0, atol=1e-9)
    bs = bootstrap(est, mech, B=8, rng=3)
    assert bs.method == "em" and bs.replicates.shape == (8, 20)
    np.testing.assert_allclose(bs.replicates.sum(axis=1), 1.0, atol=1e-12)
    assert all(_tv(r, est.p) < 0.2 for r in bs.replicates)  # each replicate refit lands near the estimate


@pytest.mark.parametrize("reg", ["em flow=0", "em flow=x", "em flow=-5", "em time=0", "em time=2.5", "em time="])
def test_refit_plan_rejects_a_bad_flow_time(reg):
    import dataclasses

    mech, pop, _ = TABLE[2]
    model, c = _counts(mech, pop, 10**4, 1)
    est = estimate_frequencies_full(_rc(model, c), mech, domain=(0, 39), method="auto", counts=True)
    with pytest.raises(ValueError, match="'em flow=T', 'em time=T'"):
        _refit_plan(dataclasses.replace(est, regularization=reg), None)



def _failing_flow(monkeypatch, which):
    """Make ``_flow_fits``'s flow report the columns ``which(b)`` failed (the selection's own flow runs
    are untouched: auto imports ``_em_flow`` from solvers itself)."""
    from sparseldp.estimation import _em_members

    real = _em_members._em_flow

    def flow(A, AT, C, P0, t0, times):
        out, failed = real(A, AT, C, P0, t0, times)
        return out, failed | which(C.shape[1])

    monkeypatch.setattr(_em_members, "_em_flow", flow)


def test_auto_chooses_again_when_the_flow_fails_on_all_the_counts(monkeypatch):
    mech, pop, n = TABLE[0]
    model, c = _counts(mech, pop, n, 2)
    _failing_flow(monkeypatch, lambda b: np.ones(b, bool))
    est = estimate_frequencies_full(_rc(model, c), mech, domain=(0, 19), method="auto", counts=True)
    # without the failure this is a flow member past the cap (test_auto_continues_a_capped_em_and_beats_the_mle);
    # plain EM at the cap ("em flow=20000", no flow substep) may stay
    assert est.regularization.startswith("em ")
    assert est.regularization in ("em mle", f"em flow={_STOP_CAP}") or est.regularization.startswith("em steps=")


def test_a_fold_whose_flow_fails_keeps_plain_em_at_the_cap_on_the_path(monkeypatch):
    from sparseldp.estimation import _path, auto

    mech, pop, n = TABLE[0]
    model, c = _counts(mech, pop, n, 2)
    real = _path._em_flow

    def flow(A, AT, C, P0, t0, times):  # the last fold's flow fails
        out, failed = real(A, AT, C, P0, t0, times)
        return out, failed | (np.arange(C.shape[1]) == C.shape[1] - 1)

    monkeypatch.setattr(_path, "_em_flow", flow)
    scores, _, _, _, _ = auto._select(model, c.astype(float), 50_000)
    assert ("flow", 0) in scores and not any(key[0] == "flow" and key[1] > 0 for key in scores)


@pytest.mark.filterwarnings("ignore::sparseldp.estimation.ShapeWarning")  # a wide kernel, on purpose
def test_bootstrap_counts_and_warns_of_failed_flow_refits(monkeypatch):
    mech, pop, n = TABLE[0]
    model, c = _counts(mech, pop, n, 2)
    est = estimate_frequencies_full(_rc(model, c), mech, domain=(0, 19), method="auto", counts=True)
    assert est.regularization.startswith("em flow=")
    _failing_flow(monkeypatch, lambda b: np.arange(b) < 2)
    with pytest.warns(RuntimeWarning, match="2 of 8 bootstrap refits of the EM flow"):
        bs = bootstrap(est, mech, B=8, rng=3)
    assert bs.converged == 6


def test_flow_loglik_takes_0_log_0_as_0():
    # a training fold that did not observe an output may fit it with probability 0: that column's
    # log-likelihood is finite (it was nan, and the flow counted as failed on that fold)
    from sparseldp.estimation._flow import _flow_loglik

    AT = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    P = np.array([[1.0, 0.5], [0.0, 0.5]])
    W = np.array([[3.0, 1.0], [0.0, 1.0], [2.0, 2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _flow_loglik(AT, P, W)
    np.testing.assert_allclose(got, [2 * np.log(0.5), 2 * np.log(0.5) + 2 * np.log(0.5)])
    assert _flow_loglik(AT, P, W + np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]]))[0] == -np.inf


@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 12), extra=st.integers(0, 20), b=st.integers(1, 5),
       far=st.booleans())
@settings(max_examples=60, deadline=None)
def test_flow_jacobian_is_the_derivative_of_g(seed, k, extra, b, far):
    # J[x, z] = d g_x / d theta_z through p = softmax(theta): against the direct sum
    # G_x p_z - sum_y A_xy A_zy w_y p_z / q_y^2 and against central differences; `far` puts mass on values
    # 1e-150 of the others (q^2 underflows on outputs only they reach: the Jacobian is formed through
    # sqrt(w) / q), unobserved outputs (w = 0) included
    gen = np.random.default_rng(seed)
    m = k + extra + 1
    A = gen.uniform(0.05, 1.0, (k, m))
    W = gen.integers(0, 5, (m, b)).astype(float)
    W[0] += 1.0
    W /= W.sum(axis=0)
    theta = gen.normal(size=(k, b))
    if far and k > 1:
        theta[0] -= 345.0  # p_0 about 1e-150 of the rest
    P = np.exp(theta - theta.max(axis=0))
    P /= P.sum(axis=0)
    Q = A.T @ P
    G = A @ np.divide(W, Q, out=np.zeros_like(W), where=W > 0)
    J = _flow_jacobian(A, P, W, G, Q)
    assert J.shape == (b, k, k) and np.isfinite(J).all()
    for j in range(b):
        v = np.divide(W[:, j], Q[:, j] ** 2, out=np.zeros(m), where=W[:, j] > 0)
        first, second = G[:, j][:, None] * P[:, j][None, :], (A * v) @ A.T * P[:, j][None, :]
        # (the two terms cancel where a column is at a fixed point: the tolerance is on their size)
        np.testing.assert_allclose(J[j], first - second, rtol=1e-10, atol=1e-12 * (np.abs(first) + np.abs(second)).max())
        if far:
            continue
        eps = 1e-6
        for z in range(k):
            def g_at(t):
                p = np.exp(t - t.max())
                p /= p.sum()
                return A @ (W[:, j] / (A.T @ p))
            d = np.zeros(k)
            d[z] = eps
            fd = (g_at(theta[:, j] + d) - g_at(theta[:, j] - d)) / (2 * eps)
            np.testing.assert_allclose(J[j][:, z], fd, rtol=1e-5, atol=1e-7)


# auto's ("time", j) members: where the flow's Newton steps do not pay (k^2 m' above _FLOW_COST) but the MLE
# is on the path, the EM flow of log g by Chebyshev steps continues the capped EM (_em_members._time_fits)

def test_time_member_follows_plain_em_steps_past_the_cap():
    """``_time_fits``: up to the cap it is plain EM steps from the uniform start; at twice the cap's time it lies
    within 3 % of the plain run's total-variation movement from the cap (the flow of log g, which plain steps
    follow where they are many)."""
    mech, pop, n = TABLE[1]
    model, c = _counts(mech, pop, n, 4)
    A, AT, cc = _dense(model, c)
    C = np.column_stack([cc, np.roll(cc, 1)])
    np.testing.assert_allclose(_em_members._time_fits(A, AT, C, 500), _em(A, AT, C, 500) / _em(A, AT, C, 500).sum(
        axis=0), rtol=0, atol=1e-12)
    at_cap, plain = _em(A, AT, C, _STOP_CAP), _em(A, AT, C, 2 * _STOP_CAP)
    flowed = _em_members._time_fits(A, AT, C, 2 * _STOP_CAP)
    for j in range(2):
        moved = _tv(plain[:, j] / plain[:, j].sum(), at_cap[:, j] / at_cap[:, j].sum())
        assert moved > 1e-4  # the comparison below is not against standing still
        assert _tv(flowed[:, j], plain[:, j] / plain[:, j].sum()) <= 0.03 * moved


def test_auto_bridges_cap_and_mle_by_time_members_where_the_flow_does_not_pay():
    """300 values under a Gaussian window of 351 (dense, but the flow's Newton step costs more than
    ``_FLOW_COST``): zero-inflated counts at 10^7 reports.  Every fold's EM reaches its cap 3.3 nats of
    held-out likelihood below the MLE (more than the slack), and before the ("time", j) members auto took
    the MLE, whose spikes are a TV error of 0.51 (the stopped EM's 0.20).  With them it takes one (measured:
    ``em time=160000``, TV 0.115); the estimate is ``_time_fits`` on all counts, and the bootstrap refits the
    member (its own counts' refit checked against the estimate)."""
    from scipy.stats import poisson

    k = 300
    mech = SparseGaussian(sigma=21.1, s=351)
    pois = poisson.pmf(np.arange(k), 0.08 * k)  # the battery's zero-inflated shape (bench_estimators._shapes)
    pop = 0.6 * pois / pois.sum()
    pop[0] += 0.4
    model, c = _counts(mech, pop, 10**7, 3)
    assert model.k ** 2 * np.count_nonzero(c) > _em_members._FLOW_COST
    est = estimate_frequencies_full(_rc(model, c), mech, domain=(0, k - 1), method="auto", counts=True)
    mle = estimate_frequencies_full(_rc(model, c), mech, domain=(0, k - 1), method="em")
    assert est.regularization.startswith("em time=")
    time = int(est.regularization.split("=")[1])
    assert time in _em_members._time_times(_STOP_CAP)
    assert _tv(est.p, pop) < 0.5 * _tv(mle.p, pop)
    obs = np.flatnonzero(c > 0)
    A, AT = model.fast_columns(obs)
    np.testing.assert_allclose(_em_members._time_fits(A, AT, c[obs][:, None], time)[:, 0], est.p, rtol=0,
                               atol=1e-9)
    plan = _refit_plan(est, None)
    assert plan[0] == "em-time" and plan[2] == time
    bs = bootstrap(est, mech, B=8, rng=3)
    assert bs.method == "em" and bs.replicates.shape == (8, k) and bs.refit_steps
    np.testing.assert_allclose(bs.replicates.sum(axis=1), 1.0, atol=1e-6)
    assert all(_tv(r, est.p) < 0.2 for r in bs.replicates)


def test_chebyshev_flow_guard_keeps_an_overshooting_row_on_the_flow(monkeypatch):
    """``solvers._em_chebyshev``'s guard: the flow never lowers the log-likelihood, so a step that does is
    redone for that row in guarded halves.  ``tests/data/overshoot_counts.npy`` is a bootstrap replicate's
    counts (10^7 reports on the 648 outputs of 300 values under a Gaussian window of 349; zero-inflated
    counts, ``auto`` chose ``em time=80000``) on which the unguarded steps from the cap to 80,000 overshot the
    atom at 0 (mean 118 where the data's is 14.4; the CLI's bootstrap interval of the mean came out 130 times
    the likelihood-ratio one).  Guarded, the row lands within 0.01 of 80,000 plain EM steps' mean and within
    0.002 of their mass at 0."""
    from pathlib import Path

    from sparseldp.estimation import solvers

    c = np.load(Path(__file__).resolve().parent / "data" / "overshoot_counts.npy").astype(float)
    model = _model(SparseGaussian(sigma=21.124087259846675, s=349), (0, 299))
    assert c.size == model.m and c.sum() == 10**7
    used = np.flatnonzero(c > 0)
    A, AT = model.columns(used)
    cu = c[used][None, :]
    at_cap = _em(A, AT, cu.T, _STOP_CAP).T
    x = np.arange(300)

    def flowed():
        return _em_members._time_path(A, AT, at_cap.copy(), cu, _STOP_CAP, [2 * _STOP_CAP, 4 * _STOP_CAP])[-1][0]

    monkeypatch.setattr(solvers, "_CHEB_LL_TOL", {np.dtype(np.float64): np.inf, np.dtype(np.float32): np.inf})
    assert abs(flowed() @ x - 14.4) > 1.0
    monkeypatch.undo()
    p = flowed()
    plain = _em_run(A, AT, at_cap, cu, 3 * _STOP_CAP, 1.0 / cu.sum(axis=1))[0]
    plain = plain / plain.sum()
    assert abs(p @ x - plain @ x) < 0.01 and abs(p[0] - plain[0]) < 0.002


def test_time_member_bootstraps_on_fft_products():
    """An ``"em time=T"`` estimate on a channel whose products are FFT convolutions (1,000 values under a
    Laplace window of 275): the bootstrap refits the cap's steps and the flow on rows of FFT products, and its
    own counts' refit (the check) lands on the estimate."""
    import dataclasses

    mech = SparseLaplace(lam=0.3, s=275)
    k = 1000
    model, c = _counts(mech, 0.6 * _bump(k, 300, 40) + 0.4 * np.eye(k)[650], 10**6, 5)
    obs = np.flatnonzero(c > 0)
    A, AT = model.fast_columns(obs)
    assert hasattr(A, "g_rows")  # the fused FFT products
    est = estimate_frequencies_full(_rc(model, c), mech, domain=(0, k - 1), method="ems", counts=True)
    p = _em_members._time_fits(A, AT, c[obs][:, None], 2 * _STOP_CAP)[:, 0]
    est = dataclasses.replace(est, p=p, method="auto", regularization=f"em time={2 * _STOP_CAP}")
    bs = bootstrap(est, mech, B=6, rng=1, precision="double")
    assert bs.refit_steps in ("chebyshev", "over-relaxed")  # the check on the own counts passed
    assert all(_tv(r, p) < 0.2 for r in bs.replicates)  # measured 0.10-0.11: noise at 40,000 steps' time
    x = np.arange(k)
    assert abs(bs.replicates.mean(axis=0) @ x - p @ x) < 5 * (bs.replicates @ x).std() + 1e-9
