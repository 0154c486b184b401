"""Composition of k reports: the exact lattice route and the dp-accounting route, against brute force.

The oracle (``mp_composed``) is independent of the package: both rows of the
pair ``(0, h)`` are built from the kernel's definition in mpmath (40 digits),
outputs are grouped by an integer key of their likelihood ratio, the groups of
``k`` reports are enumerated by dict convolution carrying both probabilities
``P`` and ``Q`` (``Q`` from its own row, never from the loss), and
``delta = sum_groups [P - e^eps Q]_+``.  Grouping loses nothing exactly when
the key determines the ratio (else the oracle would come out lower), and the
float product-space enumeration below (``float_composed``, no grouping at all)
backs it on the smallest cases.
"""

import json
import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparseldp import InfeasibleError, SparseChannel, SparseGaussian, SparseLaplace, SparseKernel
from sparseldp.composition import LatticeComposition, PLDComposition, compose, log_pmf_pair, to_pld
from sparseldp.composition._lattice import KFold
from sparseldp.composition.exact import _lattice_loss

mp.mp.dps = 40


# -- the oracles ---------------------------------------------------------------------------------
def _mp_rows(mech, h):
    """``{y: (P(y), Q(y), key)}`` for the pair (0, h), from the kernel's definition in mpmath."""
    t = mech.t
    if isinstance(mech, SparseLaplace):
        lam = mp.mpf(mech.lam)
        w = lambda d: mp.exp(-lam * abs(d))  # noqa: E731
        key = lambda y: abs(y - h) - abs(y)  # noqa: E731  (loss / lam)
    else:
        c = 1 / (2 * mp.mpf(mech.sigma) ** 2)
        w = lambda d: mp.exp(-c * d * d)  # noqa: E731
        key = lambda y: (y - h) ** 2 - y**2  # noqa: E731  (loss * 2 sigma^2)
    C = mp.fsum(w(d) for d in range(-t, t + 1))
    rows = {}
    for y in range(-t, h + t + 1):
        P = w(y) / C if abs(y) <= t else mp.mpf(0)
        Q = w(y - h) / C if abs(y - h) <= t else mp.mpf(0)
        if P > 0:
            rows[y] = (P, Q, key(y) if Q > 0 else None)  # None: loss +inf
    return rows


def mp_composed(mech, h, ks):
    """``{k: [(P, Q), ...]}``: the groups of k reports, for each k in ``ks`` (sorted)."""
    one = {}
    for P, Q, key in _mp_rows(mech, h).values():
        p0, q0 = one.get(key, (mp.mpf(0), mp.mpf(0)))
        one[key] = (p0 + P, q0 + Q)
    out, cur, have = {}, {0: (mp.mpf(1), mp.mpf(1))}, 0
    for k in sorted(ks):
        while have < k:
            nxt = {}
            for k1, (p1, q1) in cur.items():
                for k2, (p2, q2) in one.items():
                    kk = None if k1 is None or k2 is None else k1 + k2
                    p0, q0 = nxt.get(kk, (mp.mpf(0), mp.mpf(0)))
                    nxt[kk] = (p0 + p1 * p2, q0 + q1 * q2)
            cur, have = nxt, have + 1
        out[k] = list(cur.values())
    return out


def mp_delta(groups, eps):
    e = mp.exp(mp.mpf(eps))
    return float(mp.fsum(max(P - e * Q, 0) for P, Q in groups))


def float_composed(P, Q, k, eps):
    """sum over (y_1..y_k) of [prod P(y_i) - e^eps prod Q(y_i)]_+ by enumerating the product space."""
    Pk, Qk = P, Q
    for _ in range(k - 1):
        Pk = np.multiply.outer(Pk, P).ravel()
        Qk = np.multiply.outer(Qk, Q).ravel()
    return float(np.maximum(Pk - math.exp(eps) * Qk, 0.0).sum())


def _rows(upper: dict, lower: dict):
    """Both rows on the union of their supports (plain probabilities, zeros off the support)."""
    ys = sorted(set(upper) | set(lower))
    P = np.array([math.exp(upper[y]) if y in upper else 0.0 for y in ys])
    Q = np.array([math.exp(lower[y]) if y in lower else 0.0 for y in ys])
    return P, Q


# -- one table, one battery ---------------------------------------------------------------------
# (mechanism, h): s in {3, 5, 11}, both families, with and without large support leakage
CASES = [
    (SparseLaplace(lam=0.5, s=3), 1),
    (SparseLaplace(lam=0.5, s=5), 3),
    (SparseLaplace(lam=1.2, s=11), 2),
    (SparseLaplace(lam=0.3, s=11), 7),
    (SparseGaussian(sigma=0.9, s=3), 2),
    (SparseGaussian(sigma=1.5, s=5), 1),
    (SparseGaussian(sigma=1.5, s=11), 2),
    (SparseGaussian(sigma=4.0, s=11), 5),
]
KS = (1, 2, 3, 5)
EPS = (0.0, 0.3, 1.0, 2.5, 5.0, 12.0)
_ORACLE = {}


def oracle(mech, h):
    if (mech, h) not in _ORACLE:
        _ORACLE[mech, h] = mp_composed(mech, h, KS)
    return _ORACLE[mech, h]


@pytest.mark.parametrize("mech, h", CASES, ids=repr)
def test_exact_route_matches_brute_force(mech, h):
    groups = oracle(mech, h)
    for k in KS:
        c = compose(mech, k, h=h)
        assert isinstance(c, LatticeComposition) and c.exact
        got, err = c.delta(np.array(EPS)), c.delta_error(np.array(EPS))
        want = np.array([mp_delta(groups[k], e) for e in EPS])
        diff = np.abs(got - want)
        assert np.all(diff <= 1e-13 * want + 1e-300), (k, got, want)
        assert np.all(diff <= err + 4e-16 * want), (k, diff, err)  # the error bound holds


@pytest.mark.parametrize("mech, h", CASES[::2], ids=repr)
def test_dp_accounting_route_bounds_brute_force_and_exact_route(mech, h):
    groups = oracle(mech, h)
    pld = to_pld(mech, h, value_discretization_interval=1e-3)
    for k in (2, 5):
        dpa = np.asarray(pld.self_compose(k).get_delta_for_epsilon(list(EPS)))
        exact = compose(mech, k, h=h).delta(np.array(EPS))
        want = np.array([mp_delta(groups[k], e) for e in EPS])
        # pessimistic: never below the exact value; close (losses rounded up by <= k 1e-3)
        assert np.all(dpa >= want - 1e-12)
        assert np.all(dpa <= want + 2 * k * 1e-3 * np.exp(EPS) + 1e-12)
        # the exact route is never above dp-accounting's pessimistic answer beyond rounding
        assert np.all(exact <= dpa + 1e-12)


def test_float_product_space_agrees_on_small_cases():
    for mech, h in CASES[:2] + CASES[4:5]:
        P, Q = _rows(*log_pmf_pair(mech, h))
        for k in (1, 2, 3):
            c = compose(mech, k, h=h)
            for eps in (0.0, 0.5, 2.0):
                assert float(c.delta(eps)) == pytest.approx(float_composed(P, Q, k, eps), rel=1e-12, abs=1e-15)


def test_fft_route_keeps_small_deltas_accurate():
    # leakage ~ 1e-39, so the finite part decides delta down to 1e-30: the tilted FFT must keep it
    mech, h, k = SparseGaussian(sigma=1.5, s=41), 1, 5
    groups = mp_composed(mech, h, [k])[k]
    c = compose(mech, k, h=h)
    eps = np.linspace(0.0, 20.0, 21)
    want = np.array([mp_delta(groups, e) for e in eps])
    assert want.min() < 1e-30 and c.infinity_mass < 1e-37
    got, err = c.delta(eps), c.delta_error(eps)
    assert np.all(np.abs(got - want) <= 1e-12 * want)
    assert np.all(np.abs(got - want) <= err + 1e-15 * want)
    assert np.all(err <= 1e-9 * want)


@pytest.mark.parametrize("mech", [SparseLaplace(lam=0.4, s=9), SparseGaussian(sigma=1.2, s=9)], ids=repr)
def test_range_is_the_largest_separation(mech):
    # delta_k is nondecreasing in h (the dominance proved in sparseldp.composition.exact): the range H
    # composes h = min(H, 2t + 1) only; brute force over every h confirms the maximum is there
    k = 3
    eps = (0.0, 0.5, 2.0, 6.0)
    per_h = np.array([[mp_delta(mp_composed(mech, h, [k])[k], e) for e in eps] for h in range(1, 2 * mech.t + 1)])
    assert np.all(np.diff(per_h, axis=0) >= -1e-15)
    for H in (1, 3, 2 * mech.t):
        c = compose(mech, k, H=H)
        assert c.h == H
        np.testing.assert_allclose(c.delta(np.array(eps)), per_h[:H].max(axis=0), rtol=1e-12, atol=1e-300)
    far = compose(mech, k, H=2 * mech.t + 1)
    assert far.h == 2 * mech.t + 1 and float(far.delta(50.0)) == 1.0


@pytest.mark.parametrize("mech", [SparseLaplace(lam=0.7, s=21), SparseGaussian(sigma=2.5, s=21),
                                  SparseLaplace(lam=3.0, s=201), SparseGaussian(sigma=0.4, s=101)], ids=repr)
def test_one_report_is_the_separation_defect(mech):
    for h in (1, 2, 5, 2 * mech.t):
        c = compose(mech, 1, h=h)
        losses = np.sort(_lattice_values(mech, h))
        mids = 0.5 * (losses[1:] + losses[:-1])
        eps = np.concatenate([[0.0, 0.1, 1.0, 3.0], mids[mids >= 0][:20]])
        if isinstance(mech, SparseLaplace):
            # on the lattice points themselves: lam m is exact, both sides decide L > eps exactly (for the
            # Gaussian family 1 / (2 sigma^2) is rounded, and a delta dominated by the term at L = eps is
            # then decided by that rounding: ill-conditioned, not compared)
            eps = np.concatenate([eps, losses[losses >= 0][:20]])
        np.testing.assert_allclose(c.delta(eps), mech.delta_h(eps, h), rtol=1e-13, atol=1e-300)
        assert c.infinity_mass == pytest.approx(float(mech.defect_h(0.0, h).support_leakage), rel=1e-13)


def _lattice_values(mech, h):
    loss = _lattice_loss(mech, h)
    i = np.flatnonzero(np.isfinite(loss.logp))
    return loss.unit * (loss.c0 + loss.step * i)


@pytest.mark.parametrize("mech", [SparseLaplace(lam=0.7, s=21), SparseGaussian(sigma=2.5, s=21)], ids=repr)
def test_lattice_is_the_protocols_loss(mech):
    # the closed-form lattice coordinates are the protocol's log M(y|0) - log M(y|h) on the overlap
    for h in (1, 4, 13):
        y = np.arange(h - mech.t, mech.t + 1)
        from_protocol = np.unique(np.round(mech.logpmf(y, 0) - mech.logpmf(y, h), 9))
        np.testing.assert_allclose(np.sort(_lattice_values(mech, h)), from_protocol, atol=1e-9)


def test_range_covers_k_different_values():
    # k = 2 columns moving by h1, h2 <= H (any signs) never beat both moving by H (module docstring)
    mech, H = SparseGaussian(sigma=1.0, s=7), 3
    eps = (0.0, 1.0, 3.0)
    worst = compose(mech, 2, H=H).delta(np.array(eps))
    for (x1, x1p), (x2, x2p) in [((0, 1), (0, 3)), ((2, 0), (0, 3)), ((0, 2), (1, 0)), ((0, 3), (3, 0))]:
        P1, Q1 = _rows(*log_pmf_pair(mech, x=x1, x_prime=x1p))
        P2, Q2 = _rows(*log_pmf_pair(mech, x=x2, x_prime=x2p))
        P, Q = np.multiply.outer(P1, P2).ravel(), np.multiply.outer(Q1, Q2).ravel()
        mixed = np.array([float(np.maximum(P - math.exp(e) * Q, 0.0).sum()) for e in eps])
        assert np.all(mixed <= worst + 1e-14)
        if abs(x1 - x1p) == H and abs(x2 - x2p) == H:
            np.testing.assert_allclose(mixed, worst, rtol=1e-12)


def test_infinity_mass_and_largest_loss():
    mech, h, k = SparseLaplace(lam=0.5, s=5), 3, 4
    leak = float(mech.defect_h(0.0, h).support_leakage)
    c = compose(mech, k, h=h)
    assert c.infinity_mass == pytest.approx(1 - (1 - leak) ** k, rel=1e-14)
    # the overlap is y = 1, 2 with losses lam (|y - 3| - |y|) = lam, -lam
    assert c.max_loss == pytest.approx(k * mech.lam, rel=1e-15)
    assert float(c.delta(c.max_loss)) == c.infinity_mass  # nothing finite is left
    assert float(c.delta(c.max_loss * (1 - 1e-9))) > c.infinity_mass
    with pytest.raises(InfeasibleError, match="below the infinity mass"):
        c.epsilon(0.5 * c.infinity_mass)
    assert c.epsilon(c.infinity_mass) == c.max_loss


@pytest.mark.parametrize("mech, h, k", [(SparseLaplace(lam=0.2, s=61), 4, 40),
                                        (SparseGaussian(sigma=3.0, s=61), 2, 25)], ids=repr)
def test_epsilon_inverts_delta(mech, h, k):
    c = compose(mech, k, h=h)
    for delta in (0.3, 1e-3, 1e-6, 1e-9, 1e-12):
        if delta < c.infinity_mass:
            continue
        e = c.epsilon(delta)
        assert float(c.delta(e)) <= delta
        assert float(c.delta(e * (1 - 1e-9))) > delta  # the smallest such eps, to 1e-9
    assert c.epsilon(1.0) == 0.0
    assert c.epsilon(float(c.delta(0.0))) == 0.0


def test_disjoint_windows_give_delta_one():
    for mech in (SparseLaplace(lam=0.5, s=1), SparseGaussian(sigma=1.0, s=5)):
        c = compose(mech, 3, h=2 * mech.t + 1)
        assert c.infinity_mass == 1.0 and float(c.delta(100.0)) == 1.0
        assert c.epsilon(1.0) == 0.0
        with pytest.raises(InfeasibleError):
            c.epsilon(0.99)


@settings(max_examples=12, deadline=None)
@given(fam=st.sampled_from(["laplace", "gaussian"]), param=st.floats(0.2, 3.0), t=st.integers(1, 12),
       h=st.integers(1, 6), k=st.integers(1, 8), eps=st.lists(st.floats(0.0, 10.0), min_size=2, max_size=6))
def test_monotone_in_eps_and_k(fam, param, t, h, k, eps):
    mech = SparseLaplace(lam=param, s=2 * t + 1) if fam == "laplace" else SparseGaussian(sigma=param, s=2 * t + 1)
    e = np.sort(np.array(eps))
    d_k = compose(mech, k, H=h).delta(e)
    d_k1 = compose(mech, k + 1, H=h).delta(e)
    slack = 1e-12 * np.maximum(d_k, 1e-300)
    assert np.all(np.diff(d_k) <= slack[1:])  # nonincreasing in eps
    assert np.all(d_k1 >= d_k - slack)  # a further report never helps (post-processing: drop it)
    assert np.all((d_k >= 0) & (d_k <= 1))


# -- the fallback route ---------------------------------------------------------------------------
def test_kernel_and_channel_fall_back_to_dp_accounting():
    kern = SparseKernel(weights=(1.0, 0.9, 0.2, 0.15))  # not log-concave: no lattice, no dominance
    c = compose(kern, 2, H=3)
    assert isinstance(c, PLDComposition) and not c.exact and c.route == "dp-accounting"
    eps = np.array([0.0, 0.5, 2.0])
    for h in (1, 2, 3):
        P, Q = _rows(*log_pmf_pair(kern, h))
        want = np.array([float_composed(P, Q, 2, e) for e in eps])
        assert np.all(c.delta(eps) >= want - 1e-12)
    ch = SparseChannel.laplace(lam=0.5, s=7, domain=(0, 9), window="clipped")
    cc = compose(ch, 2, x=0, x_prime=2)
    up, lo = log_pmf_pair(ch, x=0, x_prime=2)
    P, Q = _rows(up, lo)
    for e in (0.5, 1.5):
        exact = max(float_composed(P, Q, 2, e), float_composed(Q, P, 2, e))
        assert exact - 1e-12 <= float(cc.delta(e)) <= exact + 4e-4 * math.exp(e) + 1e-12
    assert float(cc.delta(cc.epsilon(0.5))) <= 0.5 + 1e-12
    with pytest.raises(InfeasibleError):  # row 2 reaches outputs 4, 5 that row 0 cannot: infinity mass
        cc.epsilon(1e-3)


# -- the dp-accounting export (to_pld) --------------------------------------------------------------
@pytest.mark.parametrize("mech, h", CASES[1::2], ids=repr)
def test_single_report_pld_matches_theorem(mech, h):
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


def test_log_pmf_pair_is_exact_in_log_space():
    mech = SparseLaplace(lam=900.0, s=5)  # pmf underflows at |k| = 2, logpmf does not
    up, lo = log_pmf_pair(mech, 1)
    assert all(math.isfinite(v) for v in up.values())
    assert up[2] == pytest.approx(-1800.0 - float(mech.kernel.log_normalizer))


def test_lattice_composition_survives_underflowing_masses():
    mech, h, k = SparseLaplace(lam=900.0, s=5), 1, 3  # masses e^-900 and e^-1800: log space throughout
    groups = mp_composed(mech, h, [k])[k]
    c = compose(mech, k, h=h)
    for eps in (0.0, 100.0, 899.0, 2699.0, 2699.99):
        assert float(c.delta(eps)) == pytest.approx(mp_delta(groups, eps), rel=1e-13, abs=1e-300)


# -- bad input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        ((SparseLaplace(lam=1.0, s=3),), {}, ValueError, "h .* is required"),
        ((SparseLaplace(lam=1.0, s=3), 0), {}, ValueError, "h must be an integer >= 1"),
        ((SparseLaplace(lam=1.0, s=3), 1), dict(x=0, x_prime=1), ValueError,
         "give either the separation h or the inputs"),
        ((SparseChannel([[1, 1], [1, 2]]), 1), {}, ValueError, "give x and x_prime instead of h"),
        ((SparseChannel([[1, 1], [1, 2]]),), dict(x=0), ValueError, "x and x_prime .* are required"),
        (("laplace", 1), {}, TypeError, "mechanism must be"),
        ((SparseGaussian(sigma=0.8, s=5), 5), {}, ValueError, "disjoint supports"),
        ((SparseLaplace(lam=1.0, s=3), 1), dict(value_discretization_interval=0.0), ValueError,
         "value_discretization_interval must be"),
    ],
)
def test_to_pld_bad_inputs(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        to_pld(*args, **kwargs)


M = SparseLaplace(lam=1.0, s=5)


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        ((M, 0), dict(h=1), ValueError, r"k must be an integer >= 1; got 0"),
        ((M, 2.0), dict(h=1), TypeError, r"k must be an integer >= 1; got float"),
        ((M, 2), {}, ValueError, "give exactly one of h .* and H"),
        ((M, 2), dict(h=1, H=2), ValueError, "give exactly one of h .* and H"),
        ((M, 2), dict(H=0), ValueError, r"H must be an integer >= 1; got 0"),
        ((M, 2), dict(h=1, x=0, x_prime=1), ValueError, "not x and x_prime"),
        ((SparseChannel([[1, 1], [1, 2]]), 2), dict(h=1), ValueError, "give x and x_prime instead"),
        ((SparseChannel([[1, 1], [1, 2]]), 2), dict(x=0), ValueError, "x and x_prime .* are required"),
        (("laplace", 2), dict(h=1), TypeError, "mechanism must be a local randomizer"),
        ((SparseGaussian(sigma=50.0, s=4001), 5000), dict(h=1), ValueError, r"at most 2\^23"),
    ],
)
def test_compose_bad_inputs(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        compose(*args, **kwargs)


def test_composition_bad_eps_and_delta():
    c = compose(M, 2, h=1)
    with pytest.raises(ValueError, match="eps must be a real number"):
        c.delta(-0.1)
    with pytest.raises(TypeError, match="eps must be"):
        c.delta("1")
    with pytest.raises(ValueError, match="delta must be"):
        c.epsilon(1.5)


def test_kfold_cache_is_bounded():
    c = compose(SparseGaussian(sigma=2.0, s=41), 20, h=1)
    c.delta(np.linspace(0, 30, 40))
    kf = c._kfold
    assert isinstance(kf, KFold) and 1 <= len(kf._cache) <= 4


# -- the guarantee of k reports as the CLI states it (k_reports, account --reports, privatize) ------------
from sparseldp.cli import main  # noqa: E402
from sparseldp.composition import KReports, k_reports  # noqa: E402


def _cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("mech, H", [(SparseLaplace(lam=0.5, s=5), 3), (SparseGaussian(sigma=1.5, s=5), 2),
                                     (SparseLaplace(lam=1.2, s=11), 2)], ids=repr)
def test_k_reports_against_brute_force_and_basic_composition(mech, H):
    eps = 0.4
    delta = float(mech.delta_star_upper(eps, H))
    groups = mp_composed(mech, min(H, 2 * mech.t + 1), [2, 3])
    for k in (2, 3):
        r = k_reports(mech, k, eps=eps, delta=delta, H=H)
        assert isinstance(r, KReports) and r.route == "lattice" and r.h == min(H, 2 * mech.t + 1)
        exact = mp_delta(groups[k], k * eps)
        assert abs(r.exact_delta - exact) <= r.exact_delta_error + 4e-16 * exact  # within its error bound
        assert r.exact_delta_upper >= exact * (1 - 1e-15)
        # basic composition is an upper bound on the exact value, and is what it says
        assert (r.basic_eps, r.basic_delta) == (k * eps, min(1.0, k * delta))
        assert r.basic_delta >= exact
        # the eps at basic composition's delta: reached (brute force), and not much earlier
        assert r.exact_eps is not None and r.exact_eps <= k * eps
        assert mp_delta(groups[k], r.exact_eps) <= r.basic_delta
        if r.exact_eps > 0:
            assert mp_delta(groups[k], r.exact_eps * (1 - 1e-9)) > r.basic_delta - 1e-15


def test_k_reports_falls_back_to_basic_composition_and_says_why():
    m = SparseGaussian(sigma=30.0, s=2001)
    delta = float(m.delta_star_upper(1.0, 10))
    big = k_reports(m, 2000, eps=1.0, delta=delta, H=10, max_points=1 << 16)
    assert big.route == "basic" and "lattice would have" in big.why_basic and big.exact_delta is None
    assert big.basic_delta == 2000 * delta < 1 and big.basic_eps == 2000.0
    kern = SparseKernel([1.0, 0.5, 0.5])
    assert k_reports(kern, 3, eps=1.0, delta=0.5, H=2).route == "basic"
    assert k_reports(None, 3, eps=1.0, delta=0.5, H=2, reason="clipped").why_basic == "clipped"
    assert k_reports(m, 1, eps=1.0, delta=delta, H=10).route == "basic"  # one report: nothing to compose
    with pytest.raises(ValueError, match=r"k must be an integer >= 1; got 0"):
        k_reports(m, 0, eps=1.0, delta=delta, H=10)
    with pytest.raises(TypeError, match="k must be an integer"):
        k_reports(m, 2.5, eps=1.0, delta=delta, H=10)
    assert big.to_dict()["exact"] is None and big.to_dict()["route"] == "basic"


def test_account_reports_states_exact_and_basic_composition(capsys):
    base = ["account", "--family", "gaussian", "--sigma", "1.5", "--s", "5", "--eps", "0.4", "--H", "2"]
    rc, out, err = _cli(capsys, *base, "--reports", "3", "--summary", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    r = doc["reports"]
    m = SparseGaussian(sigma=1.5, s=5)
    want = k_reports(m, 3, eps=0.4, delta=doc["delta_star"], H=2)
    assert r["route"] == "lattice" and r["k"] == 3
    assert r["basic"] == {"eps": 3 * 0.4, "delta": min(1.0, 3 * doc["delta_star"]), "kind": "upper bound"}
    assert r["exact"]["delta"] == want.exact_delta and r["exact"]["delta_error"] == want.exact_delta_error
    exact = mp_delta(mp_composed(m, 2, [3])[3], 3 * 0.4)
    assert r["exact"]["delta_plus_error"] >= exact * (1 - 1e-15) and r["basic"]["delta"] >= exact
    # the rows view and the table carry it too; without --reports nothing changes
    rc, out, _ = _cli(capsys, *base, "--reports", "3", "--json")
    assert rc == 0 and json.loads(out)["reports"]["exact"]["delta"] == want.exact_delta
    rc, out, _ = _cli(capsys, *base, "--reports", "3")
    assert rc == 0 and "basic composition: (eps = 1.2" in out and "exact composition (lattice route" in out
    assert "not outward rounded" in out
    rc, out, _ = _cli(capsys, *base, "--summary", "--json")
    assert rc == 0 and "reports" not in json.loads(out)


@pytest.mark.parametrize("bad", ["0", "-2", "1.5", "x"])
def test_account_bad_reports_is_one_error_line(capsys, bad):
    rc, out, err = _cli(capsys, "account", "--family", "laplace", "--lam", "0.5", "--s", "7", "--eps", "1",
                        "--H", "3", "--reports", bad)
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and out == "" and len(lines) == 1 and lines[0].startswith("error: ") and "--reports" in lines[0]


def test_account_reports_on_a_clipped_spec_is_basic_composition(tmp_path, capsys):
    spec = tmp_path / "clip.json"
    spec.write_text(json.dumps({"family": "laplace", "lam": 0.5, "s": 7, "eps": 1.0, "H": 3, "domain": [0, 20],
                                "window": "clipped"}))
    rc, out, err = _cli(capsys, "account", "-m", spec, "--reports", "4", "--json")
    assert rc == 0, err
    r = json.loads(out)["reports"]
    assert r["route"] == "basic" and r["exact"] is None and "clipped" in r["why_basic"]
    assert r["basic"]["delta"] == min(1.0, 4 * json.loads(out)["delta_star"])
    ext = tmp_path / "ext.json"
    ext.write_text(json.dumps({"family": "laplace", "lam": 0.5, "s": 7, "eps": 1.0, "H": 3, "domain": [0, 20]}))
    rc, out, err = _cli(capsys, "account", "-m", ext, "--reports", "4", "--json")
    assert rc == 0, err
    assert json.loads(out)["reports"]["route"] == "lattice"


def test_privatize_summary_states_the_exact_composition(tmp_path, capsys):
    (tmp_path / "mech.json").write_text(json.dumps({"family": "laplace", "lam": 0.5, "s": 7, "eps": 1.0, "H": 3}))
    (tmp_path / "ab.csv").write_text("a,b\n" + "".join(f"{i % 10},{i % 7}\n" for i in range(50)))
    rc, out, err = _cli(capsys, "privatize", tmp_path / "ab.csv", "-m", tmp_path / "mech.json", "--columns", "a,b",
                        "-o", tmp_path / "o.csv", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    ex, basic = doc["guarantee_per_person_exact"], doc["guarantee_per_person"]
    exact = mp_delta(mp_composed(SparseLaplace(lam=0.5, s=7), 3, [2])[2], 2.0)
    assert ex["eps"] == basic["eps"] == 2.0
    assert abs(ex["delta"] - exact) <= ex["delta_error"] + 4e-16 * exact and ex["delta"] <= basic["delta"]
    rc, _, err = _cli(capsys, "privatize", tmp_path / "ab.csv", "-m", tmp_path / "mech.json", "-c", "a", "-c", "b",
                      "-o", tmp_path / "o2.csv")
    assert rc == 0 and "(basic composition, an upper bound)" in err and "exact composition of the mechanism" in err
    rc, _, err = _cli(capsys, "privatize", tmp_path / "ab.csv", "-m", tmp_path / "mech.json", "-c", "a",
                      "-o", tmp_path / "o3.csv")
    assert rc == 0 and "composition" not in err  # one column: one report
