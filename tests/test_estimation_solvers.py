"""The SQUAREM step shared by EM and EMS (solvers._squarem), the bootstrap's batched plain-EM refit
(refits._refit_em_steps), and the variance floors of estimate_mean's unbiased cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sparseldp import SparseChannel
from sparseldp.baselines import duchi
from sparseldp.estimation import _model, estimate_mean
from sparseldp.estimation.refits import _refit_em_steps
from sparseldp.estimation.solvers import _squarem


def _cycle(star, e, rho):
    """``p, F(p), F(F(p))`` for the linear map ``F(x) = star + rho (x - star)`` from ``p = star + e``."""
    return star + e, star + rho * e, star + rho * rho * e


def _squarem_of(p, p1, p2, **kw):
    return _squarem(p, p1 - p, p2 - p1, p2, **kw)


# a linear map whose fixed point is a distribution (SQUAREM's exact case), one whose fixed point
# has a negative entry (the full step must be backtracked), and v = 0 exactly (no extrapolation)
LINEAR = _cycle(np.array([0.2, 0.3, 0.5]), np.array([0.1, -0.04, -0.06]), 0.99)
OUTSIDE = _cycle(np.array([-0.05, 0.55, 0.5]), np.array([0.3, -0.2, -0.1]), 0.9)
STRAIGHT = (np.array([0.25, 0.25, 0.5]), np.array([0.3125, 0.1875, 0.5]), np.array([0.375, 0.125, 0.5]))


def test_squarem_lands_on_the_fixed_point_of_a_linear_map():
    # r = (rho - 1) e, v = (rho - 1)^2 e: a = -1/(1 - rho) and p - 2 a r + a^2 v = star exactly (the
    # rounding of p, p1, p2 is amplified a^2 = 1e4 times)
    a, pe = _squarem_of(*LINEAR)
    assert a == pytest.approx(-100.0, rel=1e-9)
    np.testing.assert_allclose(pe, [0.2, 0.3, 0.5], rtol=0, atol=1e-12)


def test_squarem_backtracks_halfway_towards_minus_one():
    p, p1, p2 = OUTSIDE
    r, v = p1 - p, (p2 - p1) - (p1 - p)
    a, pe = _squarem_of(p, p1, p2)
    # a0 = -1/(1 - 0.9) = -10 lands on the fixed point (negative entry); (a0 - 1)/2 = -5.5 does not
    assert np.min(p + 20.0 * r + 100.0 * v) < 0
    assert a == pytest.approx(-5.5, rel=1e-12)
    want = p - 2.0 * a * r + a * a * v
    assert np.all(want >= 0)
    np.testing.assert_allclose(pe, want / want.sum(), rtol=1e-14)
    # at the cap the column keeps its step length and falls back to p2
    a0, pe0 = _squarem_of(p, p1, p2, max_halvings=0)
    assert a0 == pytest.approx(-10.0, rel=1e-12)
    np.testing.assert_array_equal(pe0, p2 / p2.sum())


def test_squarem_without_curvature_is_the_plain_step():
    a, _ = _squarem_of(*STRAIGHT)
    assert a == -1.0


def test_squarem_columns_are_independent_and_match_one_column():
    P, P1, P2 = (np.column_stack(x) for x in zip(LINEAR, OUTSIDE, STRAIGHT))
    a, Pe = _squarem(P, P1 - P, P2 - P1, P2, max_halvings=40)
    for j, case in enumerate((LINEAR, OUTSIDE, STRAIGHT)):
        aj, pej = _squarem_of(*case)
        assert a[j] == pytest.approx(aj, rel=1e-12)
        if aj < -1.0:
            np.testing.assert_allclose(Pe[:, j], pej, rtol=1e-12)


def _squarem_whole_columns(P, r, u, P2, max_halvings):
    """The halving loop over whole columns (the code before the risky-entry shortcut), as the reference."""
    v = u - r
    vv = (v * v).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a = np.minimum(np.where(vv > 0, -np.sqrt((r * r).sum(axis=0) / vv), -1.0), -1.0)
    a = np.where(np.isfinite(a), a, -1.0)
    live = a < -1.0
    halvings = 0
    while np.count_nonzero(live):
        Pe = P - 2.0 * a * r + a * a * v
        neg = (Pe < 0).any(axis=0) & live
        if np.count_nonzero(neg) and halvings != max_halvings:
            h = 0.5 * (a - 1.0)
            a = np.where(neg, np.where(h > -1.0 - 1e-3, -1.0, h), a)
            live = a < -1.0
            halvings += 1
            continue
        if np.count_nonzero(neg):
            Pe = np.where(neg, P2, Pe)
        Pe /= Pe.sum(axis=0)
        return a, Pe
    return a, P2


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("max_halvings", [40, 3, 0])
def test_squarem_columns_test_only_risky_entries_and_match_the_whole_column_loop(seed, max_halvings):
    """Columns of slowly contracting maps with entries near 0 (EMS on a wide kernel): the long step
    overshoots some of them below 0 and the step is halved up to the cap; the shortcut that tests
    only the entries that can turn negative gives the same step lengths and points bit for bit."""
    gen = np.random.default_rng(seed)
    k, b = 300, 7
    star = gen.dirichlet(np.full(k, 0.3), size=b).T  # many entries near 0
    e = gen.normal(size=(k, b)) * star.max(axis=0) * 0.2
    e -= e.mean(axis=0)
    rho = gen.uniform(0.9, 0.9995, size=b)
    bend = 1.0 + gen.normal(size=(k, b)) * 0.05  # not exactly linear: the quadratic has its own curvature
    P = np.abs(star + e)
    P /= P.sum(axis=0)
    P1 = np.maximum(star + rho * (P - star) * bend, 0.0)
    P1 /= P1.sum(axis=0)
    P2 = np.maximum(star + rho * (P1 - star) * bend, 0.0)
    P2 /= P2.sum(axis=0)
    P2[:, 0] = P1[:, 0]  # v = -r: a column without curvature
    r, u = P1 - P, P2 - P1
    a, Pe = _squarem(P, r, u, P2, max_halvings=max_halvings)
    a_ref, Pe_ref = _squarem_whole_columns(P, r, u, P2, max_halvings)
    np.testing.assert_array_equal(a, a_ref)
    ext = a < -1.0
    np.testing.assert_array_equal(Pe[:, ext], Pe_ref[:, ext])
    assert np.any((a < -1.0) & (a > -1e6)) or max_halvings == 0  # some columns extrapolate after halvings


def test_refit_em_steps_is_t_plain_em_steps():
    """The bootstrap's "em steps=t" refit against EM written out on the dense channel."""
    ch = SparseChannel.laplace(lam=0.7, s=5, domain=(0, 9), window="clipped")
    model = _model(ch, (0, 9))
    Q = model.unscaled()
    Q = Q.toarray() if hasattr(Q, "toarray") else np.asarray(Q)
    n = 500
    C = np.random.default_rng(3).multinomial(n, np.full(model.m, 1.0 / model.m), size=3).astype(float)
    P0 = np.random.default_rng(4).dirichlet(np.ones(model.k), size=3)
    pair = model.fast_columns(np.arange(model.m))
    np.testing.assert_array_equal(_refit_em_steps(*pair, C, P0, 0), P0)
    want = P0.copy()
    for _ in range(7):
        q = want @ Q
        want = want * ((C / q) @ Q.T) / n
    np.testing.assert_allclose(_refit_em_steps(*pair, C, P0, 7), want, rtol=1e-12)


@pytest.mark.parametrize("domain, t_end", [(None, 1.0), ((5, 15), 0.5)])
def test_papers_mean_floors_a_constant_sample_at_the_noise_variance(domain, t_end):
    """Duchi et al.'s estimate on equal reports: the sample variance is 0, so the variance is the floor
    ``min_x Var[x^ | x] = h^2 (C^2 - t^2)`` at the domain's ends (``C = coth(eps/2)``, ``h = 10``)."""
    eps, n = 1.0, 40
    est = estimate_mean(np.full(n, 20), duchi(eps=eps, domain=(0, 20)), domain=domain)
    assert est.method == "unbiased (Duchi et al. 2013)"
    C = 1.0 / math.tanh(eps / 2.0)
    assert est.stderr == pytest.approx(math.sqrt(100.0 * (C * C - t_end * t_end) / n), rel=1e-12)


def test_channel_report_mean_floors_a_constant_sample():
    """An unbiased channel (extended window) and equal reports: the sample variance is 0."""
    noiseless = SparseChannel.laplace(lam=1.0, s=1, domain=(0, 5), window="extended")
    est = estimate_mean(np.full(60, 3), noiseless)
    # no noise: the rule of three, r (1 - r) w^2 with r = 3/60 and w = 5 the span of the outputs
    assert est.method == "report-mean"
    assert est.stderr == pytest.approx(math.sqrt(0.05 * 0.95 * 25 / 60), rel=1e-12)
    # window of 3: with n = 5000 the rule of three (r w^2 < 0.03, w = 7) is below the noise
    # Var(Y | x) = 2 e^-1 / (1 + 2 e^-1) of every x, which is the floor
    noisy = SparseChannel.laplace(lam=1.0, s=3, domain=(0, 5), window="extended")
    est = estimate_mean(np.full(5000, 3), noisy)
    noise = 2 * math.exp(-1.0) / (1 + 2 * math.exp(-1.0))
    assert est.method == "report-mean"
    assert est.stderr == pytest.approx(math.sqrt(noise / 5000), rel=1e-12)


def test_an_overflowing_step_length_takes_the_plain_step():
    """|r|^2 / |v|^2 overflows to inf: the extrapolation is skipped (a = -1), never an endless halving."""
    from sparseldp.estimation.solvers import _squarem

    p = np.array([0.4, 0.4, 0.2])
    r = np.array([1e-3, -1e-3, 0.0])
    u = r + np.array([0.0, 0.0, 1e-161])  # v = (0, 0, 1e-161) exactly: |v|^2 ~ 1e-322 (subnormal), |r|^2 = 2e-6
    p2 = p + r + u
    a, _ = _squarem(p, r, u, p2)
    assert a == -1.0
    A, _ = _squarem(p[:, None], r[:, None], u[:, None], p2[:, None])
    assert A[0] == -1.0


def test_batched_em_refit_reaches_each_columns_certificate():
    """refits._refit_em: every column stops with n log max g <= tol, at the log-likelihood of _em's fit."""
    from sparseldp.estimation.refits import _refit_em
    from sparseldp.estimation.mle import _em

    rng = np.random.default_rng(3)
    k, m, n, B = 12, 20, 5_000.0, 6
    A = rng.random((k, m)) ** 3  # a dense channel (column-scaled layout: k x m)
    AT = A.T.copy()
    p_true = rng.dirichlet(np.full(k, 0.5))
    q = AT @ p_true
    C = rng.multinomial(int(n), q / q.sum(), size=B).T.astype(float)
    P0 = np.full((k, B), 1.0 / k)
    P, conv, gaps = _refit_em(A, AT, C, n, P0, 0.05, 20_000)
    assert conv.all()
    for b in range(B):
        c = C[:, b]
        g = (A @ np.divide(c, AT @ P[:, b], out=np.zeros(m), where=c > 0)) / n
        assert n * np.log(g.max()) <= 0.05 + 1e-9
        obs = c > 0
        p1, _, ok, _ = _em(A[:, obs], AT[obs], c[obs], n, np.full(k, 1.0 / k), 0.05, 20_000)
        ll = lambda p: float(c[obs] @ np.log(AT[obs] @ p))  # noqa: E731
        assert ok and abs(ll(P[:, b]) - ll(p1)) <= 0.1  # both within 0.05 nats of the maximum
        assert 0.0 <= gaps[b] <= 0.05
    # stopped early: the returned gaps still bound each column's distance to the maximum
    P4, conv4, gaps4 = _refit_em(A, AT, C, n, P0, 0.05, 4)
    assert not conv4.any() and (gaps4 > 0.05).all()
    for b in range(B):
        c = C[:, b]
        obs = c > 0
        ll = lambda p: float(c[obs] @ np.log(AT[obs] @ p))  # noqa: E731
        assert ll(P[:, b]) - ll(P4[:, b]) <= gaps4[b] + 1e-9
