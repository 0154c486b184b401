"""Composition export: dp-accounting PLDs of one report vs exact k-fold products."""

import math

import numpy as np
import pytest

pytest.importorskip("dp_accounting")

from sparseldp import SparseChannel, SparseGaussian, SparseLaplace  # noqa: E402
from sparseldp.composition import log_pmf_pair, to_pld  # noqa: E402


def _rows(upper: dict, lower: dict):
    """Both rows on the union of their supports (plain probabilities, zeros off the support)."""
    ys = sorted(set(upper) | set(lower))
    P = np.array([math.exp(upper[y]) if y in upper else 0.0 for y in ys])
    Q = np.array([math.exp(lower[y]) if y in lower else 0.0 for y in ys])
    return P, Q


def exact_composed_delta(P, Q, k, eps):
    """sum over (y_1..y_k) of [prod P(y_i) - e^eps prod Q(y_i)]_+ by enumerating the product."""
    Pk, Qk = P, Q
    for _ in range(k - 1):
        Pk = np.multiply.outer(Pk, P).ravel()
        Qk = np.multiply.outer(Qk, Q).ravel()
    return float(np.maximum(Pk - math.exp(eps) * Qk, 0.0).sum())


# (mechanism, h) -- small windows so that the k = 3 product has at most (s + h)^3 outcomes
Z_CASES = [
    (SparseLaplace(lam=0.5, s=5), 1),
    (SparseLaplace(lam=0.5, s=5), 3),   # support leakage (infinity mass) is large here
    (SparseLaplace(lam=1.2, s=7), 2),
    (SparseGaussian(sigma=1.5, s=7), 2),
]


@pytest.mark.parametrize("mech, h", Z_CASES)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_composed_pld_bounds_exact_product_delta(mech, h, k):
    pld = to_pld(mech, h, value_discretization_interval=1e-4)
    composed = pld.self_compose(k) if k > 1 else pld
    P, Q = _rows(*log_pmf_pair(mech, h))
    for eps in (0.0, 0.5, 1.0, 2.0, 4.0):
        exact = exact_composed_delta(P, Q, k, eps)
        got = float(composed.get_delta_for_epsilon(eps))
        # pessimistic direction: never below the exact value (beyond float rounding) ...
        assert got >= exact - 1e-12
        # ... and close: rounding losses up by <= k * 1e-4 changes delta by at most
        # about (e^{k 1e-4} - 1) e^eps <= 2 k e^eps 1e-4 (plus the truncation 1e-15)
        assert got <= exact + 2 * k * 1e-4 * math.exp(eps) + 1e-12


@pytest.mark.parametrize("mech, h", Z_CASES)
def test_single_report_matches_theorem(mech, h):
    pld = to_pld(mech, h, value_discretization_interval=1e-6)
    for eps in (0.0, 0.7, 1.5):
        exact = float(mech.delta_h(eps, h))
        got = float(pld.get_delta_for_epsilon(eps))
        assert exact - 1e-12 <= got <= exact + 2e-6 * math.exp(eps) + 1e-12


def test_infinity_mass_is_the_support_leakage():
    mech = SparseLaplace(lam=0.5, s=5)
    pld = to_pld(mech, 3)
    leak = float(mech.defect_h(0.0, 3).support_leakage)
    # as eps -> infinity only the outputs impossible under x' remain
    assert float(pld.get_delta_for_epsilon(200.0)) == pytest.approx(leak, rel=1e-12)


def test_channel_pair_covers_both_orders():
    ch = SparseChannel.laplace(lam=0.5, s=7, domain=(0, 9), window="clipped")
    pld = to_pld(ch, x=0, x_prime=2)
    for eps in (0.0, 0.5, 1.0):
        d_fwd = float(ch.defect(eps, 0, 2).total)
        d_bwd = float(ch.defect(eps, 2, 0).total)
        got = float(pld.get_delta_for_epsilon(eps))
        assert max(d_fwd, d_bwd) - 1e-12 <= got <= max(d_fwd, d_bwd) + 3e-4 * math.exp(eps)
    # composition of the pair, both orders, against the exact product
    up, lo = log_pmf_pair(ch, x=0, x_prime=2)
    P, Q = _rows(up, lo)
    composed = pld.self_compose(2)
    for eps in (0.5, 1.5):
        exact = max(exact_composed_delta(P, Q, 2, eps), exact_composed_delta(Q, P, 2, eps))
        got = float(composed.get_delta_for_epsilon(eps))
        assert exact - 1e-12 <= got <= exact + 4e-4 * math.exp(eps) + 1e-12


def test_log_pmf_pair_is_exact_in_log_space():
    mech = SparseLaplace(lam=900.0, s=5)  # pmf underflows at |k| = 2, logpmf does not
    up, lo = log_pmf_pair(mech, 1)
    assert all(math.isfinite(v) for v in up.values())
    assert up[2] == pytest.approx(-1800.0 - float(mech.kernel.log_normalizer))


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        ((SparseLaplace(lam=1.0, s=3),), {}, ValueError, "h .* is required"),
        ((SparseLaplace(lam=1.0, s=3), 0), {}, ValueError, "h must be an integer >= 1"),
        ((SparseLaplace(lam=1.0, s=3), 1), dict(x=0, x_prime=1), ValueError, "give either the separation h or the inputs"),
        ((SparseChannel([[1, 1], [1, 2]]), 1), {}, ValueError, "give x and x_prime instead of h"),
        ((SparseChannel([[1, 1], [1, 2]]),), dict(x=0), ValueError, "x and x_prime .* are required"),
        (("laplace", 1), {}, TypeError, "mechanism must be"),
        ((SparseGaussian(sigma=0.8, s=5), 5), {}, ValueError, "disjoint supports"),
        ((SparseLaplace(lam=1.0, s=3), 1), dict(value_discretization_interval=0.0), ValueError,
         "value_discretization_interval must be"),
    ],
)
def test_bad_inputs(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        to_pld(*args, **kwargs)
