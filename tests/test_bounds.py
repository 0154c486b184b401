"""Each identity of the paper holds and each bound bounds (hypothesis)."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sparseldp import SparseGaussian, SparseLaplace, bounds, smallest_support


@given(H=st.integers(1, 40), t=st.integers(0, 40), eps=st.floats(0, 5), lam=st.floats(0.01, 5))
def test_theorem4_feasibility_threshold(H, t, eps, lam):
    s = 2 * t + 1
    m = SparseLaplace(lam=lam, s=s)
    if bounds.is_trivially_infeasible(s=s, H=H):
        assert m.delta_star(eps, H) == 1.0
    assert bounds.minimum_support(H) >= H + 1 and bounds.minimum_support(H) % 2 == 1
    if s >= bounds.minimum_support(H):
        # the windows of 0 and H intersect: the point H - t has positive mass under both
        assert np.isfinite(m.logpmf(H - m.t, 0)) and np.isfinite(m.logpmf(H - m.t, H))
        assert m.delta_h(eps, H) < 1.0 or lam * m.t > 30


@given(H=st.integers(1, 12), extra=st.integers(0, 30), lam_frac=st.floats(0.05, 1.0), eps=st.floats(0.05, 4))
def test_theorem5_identity_and_bound(H, extra, lam_frac, eps):
    lam = lam_frac * eps / H
    s = 2 * H + 1 + 2 * extra
    m = SparseLaplace(lam=lam, s=s)
    hs = np.arange(0, H + 1)
    np.testing.assert_allclose(bounds.laplace_clean_delta(eps=eps, lam=lam, s=s, h=hs, H=H), m.delta_h(eps, hs), atol=1e-14)
    # the overlap vanishes under the theorem's condition
    assert np.all(m.defect_h(eps, hs).overlap <= 1e-15)  # zero, up to the rounding of lam = eps/H
    ds = float(m.delta_star(eps, H))
    tight = bounds.laplace_clean_bound(eps=eps, lam=lam, s=s, H=H)
    loose = bounds.laplace_clean_bound(eps=eps, lam=lam, s=s, H=H, loose=True)
    assert ds <= tight * (1 + 1e-12) <= loose * (1 + 1e-12)


@given(H=st.integers(1, 20), eps=st.floats(0.05, 10), delta=st.floats(1e-300, 0.5))
def test_corollary2_is_sufficient_and_not_below_exact(H, eps, delta):
    # down to delta = 1e-300: below 1e-16 a default lam = eps / H that rounds up (lam H > eps by 1e-17 eps)
    # left an overlap excess no support removes, and the s returned was not sufficient
    s = bounds.laplace_sufficient_support(eps=eps, delta=delta, H=H)
    lam = bounds._largest_lam(eps, H)
    assert Fraction(lam) * H <= Fraction(eps) and lam >= eps / H * (1 - 1e-15)
    assert SparseLaplace(lam=lam, s=s).delta_star(eps, H) <= delta
    assert smallest_support("laplace", eps=eps, delta=delta, H=H, lam=lam) <= s


def test_corollary2_at_a_rounded_up_lam():
    s = bounds.laplace_sufficient_support(eps=1.0, delta=1e-18, H=10)  # 1.0 / 10 rounds up
    assert SparseLaplace(lam=bounds._largest_lam(1.0, 10), s=s).delta_star(1.0, 10) <= 1e-18
    with pytest.raises(ValueError, match=r"Corollary 2 needs lam \* H <= eps exactly; got lam = 0.1, "):
        bounds.laplace_sufficient_support(eps=1.0, delta=1e-6, H=10, lam=0.1)
    assert bounds.laplace_sufficient_support(eps=1, delta=1e-320, H=2) > 0  # H / delta overflowed


@given(H=st.integers(1, 8), t_extra=st.integers(0, 20), sigma=st.floats(0.5, 20), eps_extra=st.floats(0, 2))
def test_theorem7_identity_and_bound(H, t_extra, sigma, eps_extra):
    t = H + t_extra
    s = 2 * t + 1
    eps = H * (2 * t - H) / (2 * sigma**2) + eps_extra
    m = SparseGaussian(sigma=sigma, s=s)
    hs = np.arange(0, H + 1)
    np.testing.assert_allclose(bounds.gaussian_clean_delta(eps=eps, sigma=sigma, s=s, h=hs, H=H), m.delta_h(eps, hs), atol=1e-14)
    ds = float(m.delta_star(eps, H))
    assert ds <= bounds.gaussian_clean_bound(eps=eps, sigma=sigma, s=s, H=H) * (1 + 1e-12)
    assert bounds.gaussian_clean_bound(eps=eps, sigma=sigma, s=s, H=H) <= bounds.gaussian_clean_bound(
        eps=eps, sigma=sigma, s=s, H=H, loose=True) * (1 + 1e-12)


@given(H=st.integers(1, 6), sigma=st.floats(1, 40), eps=st.floats(0.1, 3), delta=st.floats(1e-9, 0.3))
def test_corollary4_window_is_sufficient(H, sigma, eps, delta):
    w = bounds.gaussian_window(eps=eps, delta=delta, sigma=sigma, H=H)
    assume(w is not None)
    lo, hi = w
    for s in {lo, (lo + hi) // 2 | 1, hi}:
        assert SparseGaussian(sigma=sigma, s=s).delta_star(eps, H) <= delta * (1 + 1e-12)


@given(h=st.integers(1, 30), t=st.integers(1, 30), sigma=st.floats(0.2, 10), eps=st.floats(0, 3))
def test_proposition4_kappa_threshold(h, t, sigma, eps):
    assume(h <= 2 * t)
    kap = bounds.kappa(h, eps=eps, sigma=sigma)
    k = np.arange(h - t, t + 1)
    term = np.exp(-(k**2) / (2 * sigma**2)) - math.exp(eps) * np.exp(-((k - h) ** 2) / (2 * sigma**2))
    assert np.all(term[k >= kap] <= 1e-15)


@given(lam=st.floats(0.01, 3), D=st.integers(0, 20), eps=st.floats(0, 10))
def test_corollary1_pure_ldp_sufficient(lam, D, eps):
    # common support S = {0..D} for inputs 0..D: rows exp(-lam|x-y|) normalized
    x = np.arange(D + 1)
    w = np.exp(-lam * np.abs(x[:, None] - x[None, :]))
    P = w / w.sum(1, keepdims=True)
    worst = float(np.max(np.log(P[:, None, :]) - np.log(P[None, :, :])))
    logz = np.log(w.sum(1))
    ratio = float(np.max(logz[None, :] - logz[:, None]))
    if bounds.laplace_pure_sufficient(eps=eps, lam=lam, D=D, log_normalizer_ratio=ratio):
        assert worst <= eps + 1e-12
    assert worst <= lam * D + ratio + 1e-12


def test_bounds_refuse_when_hypotheses_fail():
    with pytest.raises(ValueError, match="lam \\* H <= eps"):
        bounds.laplace_clean_bound(eps=1, lam=1, s=11, H=3)
    with pytest.raises(ValueError, match="s >= 2H \\+ 1"):
        bounds.laplace_clean_bound(eps=1, lam=0.1, s=5, H=3)
    with pytest.raises(ValueError, match="Theorem 11"):
        bounds.gaussian_clean_bound(eps=0.01, sigma=1, s=21, H=3)
    with pytest.raises(ValueError, match="delta"):
        bounds.laplace_sufficient_support(eps=1, delta=0, H=3)


def test_gaussian_window_is_rounded_inwards_and_takes_a_tiny_delta():
    # the upper end s <= H + 1 + 2 sigma^2 eps / H, checked exactly: a 1e-12 slack outwards admitted
    # s just above it; here 2 sigma^2 eps / H is 18 up to rounding
    for sigma in (math.sqrt(18.0), 3.0 * math.sqrt(2.0), 4.242640687119286):
        lo, hi = bounds.gaussian_window(eps=10.0, delta=1e-3, sigma=sigma, H=2)
        assert Fraction(hi - 3) * 2 <= 2 * Fraction(sigma) ** 2 * 10 and lo <= hi
    m = bounds.gaussian_window(eps=1.0, delta=1e-320, H=2, sigma=30.0)  # H / delta overflowed (blamed sigma)
    assert m is None or m[0] <= m[1]
