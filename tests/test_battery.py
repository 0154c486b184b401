"""One battery of checks for every randomizer of the shared table (tests/params.py).

Everything here goes through the local-randomizer protocol only
(:mod:`sparseldp.core.protocol`), against a naive oracle built from the
randomizer's own ``pmf``: dense rows over the outputs, the hockey-stick
divergence summed directly over every ordered pair at most ``H`` apart.

* the pmf: rows sum to 1, ``logpmf`` agrees with ``pmf``, ``support`` is
  where the pmf is positive;
* accounting: ``delta_star`` equals the oracle, ``delta_star_upper`` is never
  below it, ``defect`` splits into leakage + overlap, ``epsilon`` certifies;
* sampling: a chi-square test of ``sample`` against ``sampling_pmf`` with a
  stated false-positive rate of 1e-6 per case (expected counts >= 5 after
  merging tails), and ``sampling_pmf`` within 1e-15 of ``pmf``.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from params import EPS, H_VALUES, RANDOMIZERS
from sparseldp.core.protocol import LocalRandomizer

ALPHA = 1e-6  # false-positive rate of each chi-square test
N_SAMPLES = 20_000

IDS = [r[0] for r in RANDOMIZERS]
CASES = [(r[1](), r[2]) for r in RANDOMIZERS]


def _dense(r, domain):
    """``(inputs, outputs, P)``: the rows of ``r`` for the inputs of ``domain`` over every output they reach."""
    xs = np.arange(domain[0], domain[1] + 1)
    ys = np.unique(np.concatenate([np.asarray(r.support(int(x))) for x in xs]))
    P = np.array([np.asarray(r.pmf(ys, int(x)), dtype=float) for x in xs])
    return xs, ys, P


def _oracle_delta_star(xs, P, eps, H):
    best = 0.0
    for i in range(len(xs)):
        for j in range(len(xs)):
            if i != j and abs(int(xs[i]) - int(xs[j])) <= H:
                best = max(best, float(np.maximum(P[i] - np.exp(eps) * P[j], 0.0).sum()))
    return best


def _oracle_leakage(xs, P, H):
    """``max`` over pairs of the support leakage: the defect's limit as eps -> infinity."""
    return max((float(P[i][P[j] == 0].sum()) for i in range(len(xs)) for j in range(len(xs))
                if i != j and abs(int(xs[i]) - int(xs[j])) <= H), default=0.0)


def _is_z(r):
    return hasattr(r, "delta_h")  # radius mechanisms on Z: pairs beyond the window's reach are all alike


@pytest.mark.parametrize("r, domain", CASES, ids=IDS)
def test_pmf(r, domain):
    assert isinstance(r, LocalRandomizer)
    xs, ys, P = _dense(r, domain)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-13)
    for i, x in enumerate(xs):
        lp = np.asarray(r.logpmf(ys, int(x)), dtype=float)
        pos = P[i] > 0
        np.testing.assert_allclose(np.exp(lp[pos]), P[i][pos], rtol=1e-12)
        assert np.all(np.isneginf(lp[~pos]))
        np.testing.assert_array_equal(np.sort(np.asarray(r.support(int(x)))), ys[pos])


@pytest.mark.parametrize("r, domain", CASES, ids=IDS)
def test_accounting_against_the_oracle(r, domain):
    xs, ys, P = _dense(r, domain)
    for H in H_VALUES:
        if _is_z(r) and H > domain[1] - domain[0]:
            continue
        for eps in EPS:
            exact = _oracle_delta_star(xs, P, eps, H)
            assert float(r.delta_star(eps, H)) == pytest.approx(exact, abs=1e-13)
            assert float(r.delta_star_upper(eps, H)) >= exact - 1e-15
            assert float(r.delta_star_upper(eps, H)) <= min(1.0, exact + 1e-12)
        for target in (0.05, 0.3):
            try:
                e = r.epsilon(target, H)
            except Exception as exc:  # InfeasibleError: the leakage alone exceeds the target
                assert _oracle_leakage(xs, P, H) > target - 1e-12, exc
                continue
            assert _oracle_delta_star(xs, P, e, H) <= target + 1e-15
            assert r.is_ldp(e, target, H)


@pytest.mark.parametrize("r, domain", CASES, ids=IDS)
def test_pair_defect_splits(r, domain):
    xs, ys, P = _dense(r, domain)
    for i, j in ((0, 1), (1, 0), (0, len(xs) - 1)):
        for eps in EPS:
            d = r.defect(eps, int(xs[i]), int(xs[j]))
            oracle = float(np.maximum(P[i] - np.exp(eps) * P[j], 0.0).sum())
            assert float(d.total) == pytest.approx(oracle, abs=1e-13)
            assert float(d.support_leakage) + float(d.overlap) == pytest.approx(float(d.total), abs=1e-15)
            leak = float(P[i][(P[i] > 0) & (P[j] == 0)].sum())
            assert float(d.support_leakage) == pytest.approx(leak, abs=1e-13)


@pytest.mark.parametrize("r, domain", CASES, ids=IDS)
def test_sampler_chi_square(r, domain):
    x = (domain[0] + domain[1]) // 2
    outs, probs = r.sampling_pmf(x)
    outs = np.asarray(outs, dtype=np.int64)
    probs = np.array([float(p) for p in probs])
    assert sum(r.sampling_pmf(x)[1]) == 1
    np.testing.assert_allclose(probs, np.asarray(r.pmf(outs, x), dtype=float), atol=1e-15)
    y = np.asarray(r.sample(np.full(N_SAMPLES, x), rng=2026))
    assert np.isin(y, outs).all()
    observed = np.array([np.count_nonzero(y == o) for o in outs], dtype=float)
    expected = N_SAMPLES * probs
    order = np.argsort(expected)  # merge the smallest cells until each holds >= 5 expected
    obs, exp, acc_o, acc_e = [], [], 0.0, 0.0
    for k in order:
        acc_o += observed[k]
        acc_e += expected[k]
        if acc_e >= 5.0:
            obs.append(acc_o)
            exp.append(acc_e)
            acc_o = acc_e = 0.0
    if acc_e > 0 and exp:
        obs[-1] += acc_o
        exp[-1] += acc_e
    df = len(exp) - 1
    if df < 1:
        return
    stat = float(((np.array(obs) - np.array(exp)) ** 2 / np.array(exp)).sum())
    assert stat < stats.chi2.isf(ALPHA, df), (stat, df)


@pytest.mark.parametrize("r, domain", CASES, ids=IDS)
def test_composition_through_the_pld(r, domain):
    """One report's PLD (dp-accounting, pessimistic) bounds the exact defect of the pair from above, closely."""
    pld_mod = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")  # noqa: F841
    from sparseldp.composition import to_pld

    xs, ys, P = _dense(r, domain)
    i, j = 0, 1
    if not ((P[i] > 0) & (P[j] > 0)).any():
        return  # disjoint rows: delta = 1, nothing to compose (to_pld refuses, tested in test_composition)
    pld = to_pld(r, x=int(xs[i]), x_prime=int(xs[j]))
    for eps in (0.5, 1.5):
        exact = max(float(np.maximum(P[i] - np.exp(eps) * P[j], 0.0).sum()),
                    float(np.maximum(P[j] - np.exp(eps) * P[i], 0.0).sum()))
        got = float(pld.get_delta_for_epsilon(eps))
        assert exact - 1e-12 <= got <= exact + 2e-3


@pytest.mark.parametrize("r, domain", CASES, ids=IDS)
def test_estimation_recovers_the_input_distribution(r, domain):
    """From the exact expected report counts of a known input distribution, the estimate is close to it."""
    from sparseldp import estimate_frequencies, estimate_mean

    xs, ys, P = _dense(r, domain)
    p = np.linspace(1.0, 2.0, len(xs))
    p /= p.sum()
    n = 10**7  # counts are the expected ones, rounded to integers (error <= 0.5 per output)
    counts = {int(y): int(round(c)) for y, c in zip(ys, n * (p @ P)) if round(c) > 0}
    est = estimate_frequencies(counts, r, domain=domain, counts=True, method="inversion")
    assert np.abs(np.asarray(est) - p).sum() / 2 < 0.02
    mean = estimate_mean(counts, r, domain=domain, counts=True)
    assert abs(float(mean) - float(p @ xs)) < 0.05 * (domain[1] - domain[0] + 1)
