"""Finite-domain design and calibration under the exact general accountant (Theorem 2)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparseldp import InfeasibleError, SparseChannel, smallest_support
from sparseldp.baselines import FAMILIES
from sparseldp import Design
from sparseldp.core.families import get_family
from sparseldp.design.finite import Calibration, _ClippedBand, _first_possible_radius, calibrate, design_finite


def brute_delta(Q, inputs, eps, H):
    """Independent dense evaluation of sup_{0 < |x - x'| <= H} sum_y [Q(y|x) - e^eps Q(y|x')]_+."""
    best = 0.0
    for i in range(Q.shape[0]):
        for j in range(Q.shape[0]):
            if i != j and abs(inputs[i] - inputs[j]) <= H:
                best = max(best, float(np.maximum(Q[i] - math.exp(eps) * Q[j], 0.0).sum()))
    return best


def dense_clipped(kind, param, s, a, b):
    t = (s - 1) // 2
    x = np.arange(a, b + 1)[:, None]
    y = np.arange(a, b + 1)[None, :]
    d = np.abs(y - x).astype(float)
    w = np.exp(-param * d) if kind == "laplace" else np.exp(-(d**2) / (2 * param**2))
    w = np.where(d <= t, w, 0.0)
    return w / w.sum(axis=1, keepdims=True)


# (family, eps, delta, H, domain, parameter)
GIVEN = [
    ("laplace", 1.0, 1e-3, 3, (0, 29), 0.2),
    ("laplace", 0.5, 0.05, 2, (-5, 10), 0.2),
    ("gaussian", 1.0, 1e-2, 2, (0, 24), 4.0),
    ("gaussian", 2.0, 1e-4, 1, (3, 20), 2.0),
]


@pytest.mark.parametrize("family, eps, delta, H, domain, param", GIVEN)
def test_clipped_smallest_s_is_exact(family, eps, delta, H, domain, param):
    pname = "lam" if family == "laplace" else "sigma"
    d = design_finite(family, eps=eps, delta=delta, H=H, domain=domain, window="clipped", **{pname: param})
    assert isinstance(d, Design) and d.window == "clipped" and d.parameter == (pname, param)
    s = d.s
    inputs = np.arange(domain[0], domain[1] + 1)
    # certificate is the independent dense value, and meets the target
    Q = dense_clipped(family, param, s, *domain)
    assert d.delta_star == pytest.approx(brute_delta(Q, inputs, eps, H), abs=1e-12)
    assert d.delta_star <= delta
    # every smaller s fails (independently evaluated)
    for smaller in range(1, s, 2):
        assert brute_delta(dense_clipped(family, param, smaller, *domain), inputs, eps, H) > delta
    # distortion averages are those of the dense channel under the uniform prior
    D = np.abs(inputs[None, :] - inputs[:, None])
    assert d.r1 == pytest.approx(float((Q * D).sum(axis=1).mean()), rel=1e-10)
    assert d.r2 == pytest.approx(float((Q * D**2).sum(axis=1).mean()), rel=1e-10)


@pytest.mark.parametrize("family, eps, delta, H, domain, param", GIVEN)
def test_extended_matches_z_design(family, eps, delta, H, domain, param):
    pname = "lam" if family == "laplace" else "sigma"
    d = design_finite(family, eps=eps, delta=delta, H=H, domain=domain, window="extended", **{pname: param})
    Hd = min(H, domain[1] - domain[0])
    assert d.s == smallest_support(family, eps=eps, delta=delta, H=Hd, **{pname: param})
    assert d.delta_star <= delta
    # the certificate is the rigorous upper bound, a rounding error above the nearest value
    assert d.delta_star == float(d.channel.delta_star_upper(eps, H))
    assert d.delta_star == pytest.approx(float(d.channel.delta_star(eps, H)), rel=1e-12, abs=1e-15)
    assert d.delta_star >= float(d.channel.delta_star(eps, H))


def test_extended_range_capped_by_domain():
    # H far beyond the domain width: only separations up to b - a exist
    d = design_finite("laplace", eps=1.0, delta=1e-3, H=50, domain=(0, 4), window="extended", lam=0.2)
    assert d.s == smallest_support("laplace", eps=1.0, delta=1e-3, H=4, lam=0.2)


def test_clipped_joint_design_is_feasible_and_locally_optimal():
    d = design_finite("laplace", eps=1.0, delta=1e-2, H=2, domain=(0, 19), window="clipped")
    (_, lam), s = d.parameter, d.s
    inputs = np.arange(20)
    assert brute_delta(dense_clipped("laplace", lam, s, 0, 19), inputs, 1.0, 2) <= 1e-2
    # a slightly larger lam at the same s violates the target (bisection boundary)
    assert brute_delta(dense_clipped("laplace", lam * 1.001, s, 0, 19), inputs, 1.0, 2) > 1e-2
    # no feasible (s, lam) on an independent grid has a smaller average R2
    D2 = (inputs[None, :] - inputs[:, None]) ** 2
    for t in range(0, 20):
        for lam_g in np.geomspace(0.01, 5.0, 30):
            Q = dense_clipped("laplace", lam_g, 2 * t + 1, 0, 19)
            if brute_delta(Q, inputs, 1.0, 2) <= 1e-2:
                assert float((Q * D2).sum(axis=1).mean()) >= d.r2 - 1e-9
    assert d.objective == "r2" and d.r2 > 0


@pytest.mark.parametrize("k, eps, delta, H", [(10, 1.0, 1e-3, 1), (50, 0.5, 1e-2, 3), (7, 2.0, 0.1, 6), (30, 1.0, 0.0, 2)])
def test_rr_calibration_matches_closed_form(k, eps, delta, H):
    d = calibrate("rr", eps=eps, delta=delta, H=H, domain=(0, k - 1))
    # defect (e^eps' - e^eps)_+ / (e^eps' + k - 1) = delta  <=>  e^eps' = (e^eps + delta (k - 1)) / (1 - delta)
    closed = math.log((math.exp(eps) + delta * (k - 1)) / (1 - delta))
    assert d.params["eps"] == pytest.approx(closed, rel=1e-9)
    assert d.params["eps"] <= closed * (1 + 1e-15)  # errs on the safe side
    assert d.delta_star <= delta


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_calibrates_under_the_same_accountant(name):
    eps, delta, H, domain = 1.0, 1e-2, 2, (0, 15)
    d = calibrate(name, eps=eps, delta=delta, H=H, domain=domain)
    assert d.family == name and d.delta_star <= delta
    ch = d.channel
    inputs = np.asarray(ch.inputs)
    assert d.delta_star == pytest.approx(brute_delta(ch.matrix.toarray(), inputs, eps, H), abs=1e-12)
    # the parameter is at the boundary: a little less noise breaks the target
    entry = FAMILIES[name]
    pname = entry.param
    p = d.params[pname]
    nudged = p * (1.001 if entry.more_private_when == "smaller" else 1 / 1.001)
    kwargs = {pname: nudged, "domain": domain}
    if entry.takes_s:
        kwargs["s"] = d.params["s"]
    worse = entry.constructor(**kwargs)
    assert float(worse.delta_star(eps, H)) > delta
    assert isinstance(d, Calibration) and d.parameter == (pname, p)
    assert set(d.to_dict()) >= {"family", pname, "delta_star", "r1", "r2", "domain"}


def test_sparse_calibration_equals_design_finite():
    a = calibrate("sparse-gaussian", eps=1.0, delta=1e-2, H=2, domain=(0, 15))
    b = design_finite("gaussian", eps=1.0, delta=1e-2, H=2, domain=(0, 15))
    assert a.params == {"sigma": b.param, "s": b.s} and a.delta_star == b.delta_star
    assert a.parameter == b.parameter == b.mechanism.parameter


def test_prior_weights_the_distortion():
    prior = np.zeros(16)
    prior[0] = 1.0  # all mass at the edge: clipped rows there are one-sided
    d = calibrate("geometric-clamp", eps=1.0, delta=1e-2, H=2, domain=(0, 15), prior=prior)
    assert d.r1 == pytest.approx(float(d.channel.distortion(1)[0]), rel=1e-12)


@given(st.floats(0.05, 3.0), st.floats(0.05, 3.0), st.integers(0, 6), st.integers(0, 8))
def test_clipped_distortion_monotone_in_lam_and_t(l1, l2, t, x):
    """The facts the joint search relies on: R1, R2 nonincreasing in lam, nondecreasing in t."""
    lo, hi = min(l1, l2), max(l1, l2)
    dom = (0, 8)

    def rows(lam, t):
        ch = SparseChannel.laplace(lam=lam, s=2 * t + 1, domain=dom, window="clipped")
        return ch.distortion(1)[x], ch.distortion(2)[x]

    a1, a2 = rows(lo, t)
    b1, b2 = rows(hi, t)
    assert b1 <= a1 + 1e-12 and b2 <= a2 + 1e-12
    c1, c2 = rows(lo, t + 1)
    assert c1 >= a1 - 1e-12 and c2 >= a2 - 1e-12


def test_infeasible_given_parameter():
    # delta = 0 needs equal supports (whole-domain windows) and a small enough log ratio
    with pytest.raises(InfeasibleError, match="every s up to 11 was checked exactly"):
        design_finite("laplace", eps=0.1, delta=0.0, H=1, domain=(0, 5), lam=5.0)
    # with delta = 0 a feasible design has the whole domain as its window
    d = design_finite("laplace", eps=0.5, delta=0.0, H=1, domain=(0, 5), lam=0.05)
    assert d.s == 11 and d.delta_star == 0.0


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(family="cauchy"), ValueError, "family must be 'laplace' or 'gaussian'"),
        (dict(window="wrapped"), ValueError, "window must be 'extended' or 'clipped'"),
        (dict(objective="r3"), ValueError, "objective must be 'r1' or 'r2'"),
        (dict(sigma=1.0), ValueError, "sigma is not a parameter of the laplace family"),
        (dict(lam=-1.0), ValueError, "lam must be a real number > 0"),
        (dict(prior=[1.0, 2.0]), ValueError, "prior must be an array of 10 nonnegative weights"),
        (dict(delta=1.5), ValueError, r"delta must be a real number in \[0, 1\]"),
        (dict(H=0), ValueError, "H must be an integer >= 1"),
        (dict(domain=(3, 1)), ValueError, "domain must be a pair"),
    ],
)
def test_bad_inputs(kwargs, exc, match):
    args = dict(family="laplace", eps=1.0, delta=1e-2, H=2, domain=(0, 9))
    args.update(kwargs)
    family = args.pop("family")
    with pytest.raises(exc, match=match):
        design_finite(family, **args)


def test_calibrate_bad_family():
    with pytest.raises(ValueError, match="family_name must be one of"):
        calibrate("laplace", eps=1.0, delta=0.1, H=1, domain=(0, 3))


# -- the clipped search's evaluator and screens (module docstring, facts 1-3) ----------------

@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(["laplace", "gaussian"]), k=st.integers(2, 22), H=st.integers(1, 25),
       eps=st.floats(0.0, 3.0), param=st.floats(0.05, 6.0), t=st.integers(0, 24))
def test_clipped_evaluator_is_the_exact_defect(kind, k, H, eps, param, t):
    """Fact 3: the 2k extreme pairs give sup over all pairs |x - x'| <= H (dense brute force over every pair)."""
    band = _ClippedBand(get_family(kind), (0, k - 1), eps, H, np.full(k, 1.0 / k))
    log_d, r1, r2 = band.evaluate(param, t)
    Q = dense_clipped(kind, param, 2 * t + 1, 0, k - 1)
    inputs = np.arange(k)
    ref = brute_delta(Q, inputs, eps, H)
    assert math.exp(log_d) == pytest.approx(ref, rel=1e-9, abs=1e-15)
    assert math.exp(band.edge_log_defect(param, t)) <= ref * (1 + 1e-12) + 1e-15  # a lower bound
    D = np.abs(inputs[None, :] - inputs[:, None])
    assert (r1, r2) == pytest.approx(((Q * D).sum(axis=1).mean(), (Q * D**2).sum(axis=1).mean()), rel=1e-10)


@pytest.mark.parametrize("kind, param", [("laplace", 0.07), ("laplace", 1.3), ("gaussian", 4.0), ("gaussian", 30.0)])
@pytest.mark.parametrize("H", [1, 10, 60])
def test_clipped_evaluator_closed_form_matches_every_pair(kind, param, H):
    """The closed form over prefix sums (and its term-by-term fallback) against the defect of every pair
    with separation at most H on a 300-value domain, at radii with and without interior rows."""
    k, eps = 300, 1.0
    band = _ClippedBand(get_family(kind), (0, k - 1), eps, H, np.full(k, 1.0 / k))
    for t in (0, 1, 5, 40, 119, 150, 299, 400):
        Q = dense_clipped(kind, param, 2 * min(t, k - 1) + 1, 0, k - 1)
        ref = max(float(np.maximum(Q[a] - math.exp(eps) * Q[b], 0.0).sum(axis=1).max())
                  for h in range(1, H + 1) for a, b in ((slice(0, k - h), slice(h, k)), (slice(h, k), slice(0, k - h))))
        got = band.evaluate(param, t)[0]
        assert math.exp(got) == pytest.approx(ref, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("h, delta, span", [(5, 0.3, 10), (9, 1e-3, 9), (3, 0.2, 14)])
def test_radii_below_the_edge_bound_are_infeasible(h, delta, span):
    t1 = _first_possible_radius(h, delta, span)
    assert t1 >= 1
    inputs = np.arange(span + 1)
    for t in range(t1):
        for kind, params in (("laplace", np.geomspace(1e-3, 10, 12)), ("gaussian", np.geomspace(0.1, 100, 12))):
            for p in params:
                assert brute_delta(dense_clipped(kind, p, 2 * t + 1, 0, span), inputs, 0.0, h) > delta


def test_clipped_design_over_the_whole_width():
    """H = b - a (every pair protected), small delta: the case of the speed target on a smaller domain."""
    d = design_finite("laplace", eps=1.0, delta=1e-6, H=39, domain=(0, 39), window="clipped")
    (_, lam), s = d.parameter, d.s
    inputs = np.arange(40)
    exact = brute_delta(dense_clipped("laplace", lam, s, 0, 39), inputs, 1.0, 39)
    assert exact <= 1e-6 and d.delta_star == pytest.approx(exact, rel=1e-9)
    assert brute_delta(dense_clipped("laplace", lam * 1.001, s, 0, 39), inputs, 1.0, 39) > 1e-6
    D2 = (inputs[None, :] - inputs[:, None]) ** 2
    for t in range(max(0, (s - 1) // 2 - 2), 40):
        for g in (0.9, 0.97, 1.0, 1.03):
            Q = dense_clipped("laplace", lam * g, 2 * t + 1, 0, 39)
            if brute_delta(Q, inputs, 1.0, 39) <= 1e-6:
                assert float((Q * D2).sum(axis=1).mean()) >= d.r2 * (1 - 1e-9)
