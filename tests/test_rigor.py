"""Which way the numbers err: every certified answer against an 80-digit mpmath reference.

The reference (``brute.mp_defect`` and friends) builds both rows of the channel
exactly (every double converted exactly, the kernel evaluated at 80 digits),
decides the overlap excess by an exact comparison and sums the positive parts;
it shares no code with the library.  Checked here:

* ``*_upper`` is never below the exact value, and not far above it
  (``GAP_ABS + GAP_REL * exact``);
* the nearest values (``delta``, ``defect``, ``delta_star``) are within the
  documented bound ``NEAR_ABS`` of the exact value, on either side;
* every certificate (``epsilon``, ``is_ldp``, ``smallest_support``,
  ``design``, ``design_finite``, channel ``epsilon``) holds for the exact
  value;
* ``delta >= 1`` is always feasible (``epsilon`` returns 0.0).

The 80-digit reference itself rounds at about ``1e-80`` relative (visible when
the exact value is 1 and the bound is clamped to exactly 1.0): comparisons
allow ``MP_TOL`` relative.
"""

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import brute
from sparseldp import InfeasibleError, SparseChannel, SparseGaussian, SparseLaplace, design, smallest_support
from sparseldp import accounting
from sparseldp.design.finite import design_finite

#: Documented bound on |nearest value - exact| (delta, defect fields, delta_star): NEAR_ABS + GAP_EPS * eps.
NEAR_ABS = 4e-15
#: Allowed excess of an upper bound over the exact value: GAP_ABS + GAP_REL * exact + GAP_EPS * eps
#: (the last: the Gaussian overlap's e^eps factor is formed in log space, which costs about u eps).
GAP_ABS, GAP_REL, GAP_EPS = 1e-13, 1e-12, 2e-15
MP_TOL = mpmath.mpf(10) ** -60


def mpf(x):
    return mpmath.mpf(float(x))


def make(kind, param, s):
    return SparseLaplace(lam=param, s=s) if kind == "laplace" else SparseGaussian(sigma=param, s=s)


def assert_upper(upper, exact, *, eps=0.0, gap=True, what=""):
    u = mpf(upper)
    assert u >= exact * (1 - MP_TOL), f"{what}: upper bound {upper!r} below the exact {exact}"
    assert u <= 1, what
    if gap:
        allowed = GAP_ABS + GAP_REL * exact + GAP_EPS * eps
        assert u - exact <= allowed, f"{what}: upper {upper!r} far above exact {exact}"


def assert_near(value, exact, *, eps=0.0, what=""):
    assert abs(mpf(value) - exact) <= NEAR_ABS + GAP_EPS * eps, f"{what}: {value!r} vs exact {exact}"


# ---------------------------------------------------------------------------
# the assumption the directed rounding rests on
# ---------------------------------------------------------------------------
def test_elementary_functions_within_two_ulp():
    """_kernels widens exp/expm1/log/log1p by 2 ulp; they must be that accurate here."""
    rng = np.random.default_rng(7)
    cases = [
        (np.exp, mpmath.exp, rng.uniform(-745.0, 709.0, 200)),
        (np.expm1, mpmath.expm1, rng.uniform(-40.0, 5.0, 200) * rng.choice([1.0, 1e-6, 1e-14], 200)),
        (np.log, mpmath.log, np.exp(rng.uniform(-700.0, 700.0, 200))),
        (np.log1p, mpmath.log1p, np.exp(rng.uniform(-700.0, 3.0, 200))),
    ]
    with mpmath.workdps(40):
        for f, mf, xs in cases:
            got = f(xs)
            for x, r in zip(xs, got):
                ex = mf(mpf(x))
                if r == 0 or not math.isfinite(r):
                    continue
                assert abs(mpf(r) - ex) <= 2 * mpf(np.spacing(abs(r))), (f.__name__, x)


# ---------------------------------------------------------------------------
# radius mechanisms: one table, one battery
# ---------------------------------------------------------------------------
_LAM_EX = 6.253194436589393  # the issue's mechanism
TABLE = [
    # (kind, param, s, eps values, separations)
    ("laplace", 0.5, 7, [0.0, 1.0, 0.5 * 3], [0, 1, 2, 3, 6, 7]),
    ("laplace", 1e-4, 2001, [0.0, 0.05, 1e-4 * 700], [1, 500, 700, 1000, 2000]),
    ("laplace", _LAM_EX, 901, [_LAM_EX * 389, math.nextafter(_LAM_EX * 389, 0), math.nextafter(_LAM_EX * 389, 9e9),
                               _LAM_EX * 387], [387, 388, 389, 390, 900]),
    ("laplace", 0.3, 2001, [0.3 * 17, math.nextafter(0.3 * 17, 0), 0.3 * 1001], [17, 19, 1001, 1003]),
    ("laplace", 12.0, 9, [0.0, 24.0, 47.9], [1, 2, 4, 8]),
    ("gaussian", 154.0, 2001, [0.0, 1e-3, 0.02], [1, 3, 40, 500, 1000, 1999]),
    ("gaussian", 987.654, 2001, [0.0, 1e-4, 1e-3], [1, 2, 800, 2000]),
    ("gaussian", 1e4, 2001, [0.0, 1e-6, 1e-5], [1, 7, 1500]),
    ("gaussian", 1.0, 41, [0.0, 0.5, 4.0, 1.5 * 3], [1, 2, 3, 4, 20, 40]),  # eps = an exact loss value
    ("gaussian", 2.0, 401, [0.0, 1.0, 10.0], [1, 5, 80, 200, 399]),  # tail beyond 37 sigma
    ("gaussian", 0.3, 61, [0.0, 2.0, 30.0], [1, 2, 3, 30, 60]),
    ("gaussian", 1.0, 121, [100.0], [20, 40, 60]),  # large eps
]


@pytest.mark.parametrize("kind, param, s, epss, hs", TABLE, ids=lambda v: str(v)[:12])
def test_defect_bounds_against_exact(kind, param, s, epss, hs):
    m = make(kind, param, s)
    hs = np.array([h for h in hs if h >= 0])
    for eps in epss:
        near = m.defect_h(eps, hs)
        up_t, up_l, up_o = accounting.defect_bounds(m.kernel, eps, hs)
        lo_t, lo_l, lo_o = accounting.defect_bounds(m.kernel, eps, hs, upper=False)
        np.testing.assert_array_equal(m.delta_h_upper(eps, hs), up_t)
        for k, h in enumerate(hs):
            ex_t, ex_l, ex_o = brute.mp_defect(kind, param, s, eps, h)
            what = f"{kind} {param} s={s} eps={eps!r} h={h}"
            assert_upper(up_t[k], ex_t, eps=eps, what=what)
            assert_upper(up_l[k], ex_l, eps=eps, what=what + " leak")
            assert_upper(up_o[k], ex_o, eps=eps, what=what + " overlap")
            for lo, ex in ((lo_t[k], ex_t), (lo_l[k], ex_l), (lo_o[k], ex_o)):
                assert mpf(lo) <= ex * (1 + MP_TOL), what + " lower"
            assert_near(near.total[k], ex_t, eps=eps, what=what)
            assert_near(near.support_leakage[k], ex_l, eps=eps, what=what + " leak")
            assert_near(near.overlap[k], ex_o, eps=eps, what=what + " overlap")


@pytest.mark.parametrize("kind, param, s, epss, hs", TABLE[::2], ids=lambda v: str(v)[:12])
def test_delta_star_upper_against_exact(kind, param, s, epss, hs):
    m = make(kind, param, s)
    t = m.t
    for H in sorted({1, 3, min(t, 25 if s <= 1001 else 3)} - {0}):
        prof = m.delta_star_upper(np.array(epss), H)
        for k, eps in enumerate(epss):
            ex = brute.mp_delta_star(kind, param, s, eps, H)
            assert prof[k] == m.delta_star_upper(eps, H)
            assert_upper(prof[k], ex, eps=eps, what=f"{kind} {param} s={s} eps={eps} H={H}")
            assert_near(m.delta_star(eps, H), ex, eps=eps)
    # disjoint windows: exactly 1; h = 0: exactly 0
    assert m.delta_star_upper(epss[0], 2 * t + 1) == 1.0
    assert m.delta_h_upper(epss[-1], 2 * t + 1) == 1.0
    assert m.delta_h_upper(epss[-1], 0) == 0.0


@settings(max_examples=25)
@given(st.sampled_from(["laplace", "gaussian"]), st.floats(-3.0, 2.5), st.integers(0, 150),
       st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.booleans())
def test_defect_bounds_random(kind, logp, t, hfrac, efrac, at_loss):
    param = 10.0**logp
    s = 2 * t + 1
    m = make(kind, param, s)
    h = int(round(hfrac * (2 * t + 1)))
    if at_loss and h >= 1:  # eps equal to (the rounding of) an overlap loss: ties and near ties
        k = int(round(efrac * max(0, h // 2)))
        eps = param * (h - 2 * k) if kind == "laplace" else h * (h - 2 * k) / (2 * param * param)
        eps = max(float(eps), 0.0)
    else:
        eps = 10.0 * efrac
    ex_t, ex_l, ex_o = brute.mp_defect(kind, param, s, eps, h)
    up_t, up_l, up_o = accounting.defect_bounds(m.kernel, eps, h)
    assert_upper(up_t, ex_t, eps=eps)
    assert_upper(up_l, ex_l, eps=eps)
    assert_upper(up_o, ex_o, eps=eps)
    assert_near(m.delta_h(eps, h), ex_t, eps=eps)


# ---------------------------------------------------------------------------
# certified answers
# ---------------------------------------------------------------------------
def test_issue_epsilon_example_is_a_certificate():
    m = SparseLaplace(6.253194436589393, 901)
    delta = 4.337965087927348e-82
    e = m.epsilon(delta, 389)
    assert brute.mp_delta_star("laplace", m.lam, 901, e, 389) <= delta
    # feasible, and tight: the overlap of h = 389 vanishes exactly at eps = lam * 389
    boundary = mpf(m.lam) * 389
    assert mpf(e) >= boundary
    assert mpf(e) <= boundary * (1 + mpmath.mpf("2e-12"))
    assert m.is_ldp(e, delta, 389)
    assert not m.is_ldp(float(np.nextafter(float(boundary), 0)), delta, 389)


@settings(max_examples=25)
@given(st.sampled_from(["laplace", "gaussian"]), st.floats(-2.0, 1.5), st.integers(1, 60),
       st.integers(1, 6), st.floats(-12.0, -0.1))
def test_epsilon_is_a_certificate(kind, logp, t, H, logdelta):
    param = 10.0**logp
    s = 2 * t + 1
    m = make(kind, param, s)
    delta = 10.0**logdelta
    try:
        e = m.epsilon(delta, H)
    except InfeasibleError:
        # the support leakage is above delta, or within rounding of it
        leak = brute.mp_delta_star(kind, param, s, 1e300, H)
        assert leak > delta * (1 - 1e-12) - 1e-15
        return
    assert brute.mp_delta_star(kind, param, s, e, H) <= delta
    assert m.delta_star_upper(e, H) <= delta
    if e > 0:  # and (nearly) the smallest such eps
        assert brute.mp_delta_star(kind, param, s, e * (1 - 1e-9), H) > delta * (1 - 1e-9) - 1e-14


def test_delta_at_least_one_always_feasible():
    for m in (SparseLaplace(lam=0.5, s=1), SparseGaussian(sigma=3.0, s=5), SparseLaplace(lam=2.0, s=9)):
        assert m.epsilon(1.0, 50) == 0.0
        assert m.is_ldp(0.0, 1.0, 50)


def test_is_ldp_compares_the_upper_bound():
    m = SparseGaussian(sigma=987.654, s=2001)
    eps, H = 1e-3, 5
    ex = brute.mp_delta_star("gaussian", m.sigma, m.s, eps, H)
    up = m.delta_star_upper(eps, H)
    assert m.is_ldp(eps, up, H)
    below = float(mpmath.nstr(ex * (1 - mpmath.mpf("1e-14")), 25))  # a delta just below the exact value
    assert not m.is_ldp(eps, below, H)
    assert m.delta_star(eps, H) == pytest.approx(float(ex), abs=NEAR_ABS)


@pytest.mark.parametrize("family, pname, param, eps, delta, H", [
    ("laplace", "lam", 0.3, 1.0, 1e-6, 3),
    ("gaussian", "sigma", 154.0, 0.05, 1e-3, 2),
])
def test_smallest_support_and_design_certificates(family, pname, param, eps, delta, H):
    s = smallest_support(family, eps=eps, delta=delta, H=H, **{pname: param})
    m = make(family, param, s)
    assert m.delta_star_upper(eps, H) <= delta
    assert brute.mp_delta_star(family, param, s, eps, H) <= delta
    if s > H + 2:  # the next smaller size cannot be certified
        assert make(family, param, s - 2).delta_star_upper(eps, H) > delta
    d = design(family, eps=eps, delta=delta, H=H, **{pname: param})
    assert d.s == s
    assert d.delta_star == m.delta_star_upper(eps, H)
    assert brute.mp_delta_star(family, param, s, eps, H) <= mpf(d.delta_star)


def test_joint_design_certificate():
    d = design("laplace", eps=1.0, delta=1e-4, H=2)
    ex = brute.mp_delta_star("laplace", d.param, d.s, 1.0, 2)
    assert ex <= mpf(d.delta_star) <= 1e-4
    assert mpf(d.delta_star) - ex <= GAP_ABS


# ---------------------------------------------------------------------------
# channels
# ---------------------------------------------------------------------------
# With the old accountant, epsilon(1.0) raised: a support-leakage sum rounded to 1.0000000000000002.
ISSUE_CHANNEL = np.array([
    [0.0, 0.0, 1.1742198970773057],
    [0.0, 0.0, 1.557016062050024],
    [1.1453215225511435, 0.13109718294916395, 0.0],
    [0.06170858607394125, 1.5046378446850814, 0.0],
    [0.9677343990221023, 0.0, 0.0],
])


def test_channel_delta_one_is_always_feasible():
    ch = SparseChannel(ISSUE_CHANNEL)
    assert ch.epsilon(1.0) == 0.0
    assert ch.is_ldp(0.0, 1.0)
    for x in range(5):
        for xp in range(5):
            d = ch.defect(0.0, x, xp)
            assert 0.0 <= d.support_leakage <= 1.0 and 0.0 <= d.total <= 1.0
    assert ch.delta_star_upper(0.0) == 1.0  # disjoint supports: exactly 1


def _mp_rows_from_logw(logw):
    with mpmath.workdps(80):
        rows = []
        for r in logw:
            vals = [mpmath.exp(mpf(v)) if v > -np.inf else mpmath.mpf(0) for v in r]
            z = mpmath.fsum(vals)
            rows.append([v / z for v in vals])
    return rows


@st.composite
def weight_matrices(draw):
    n = draw(st.integers(2, 5))
    m = draw(st.integers(1, 6))
    W = np.array(draw(st.lists(st.lists(st.one_of(st.just(0.0), st.floats(1e-3, 10.0)), min_size=m, max_size=m),
                               min_size=n, max_size=n)))
    for r in range(n):
        if W[r].sum() == 0:
            W[r, draw(st.integers(0, m - 1))] = 1.0
    inputs = sorted(draw(st.sets(st.integers(-20, 20), min_size=n, max_size=n)))
    return W, inputs


@settings(max_examples=40)
@given(weight_matrices(), st.floats(0.0, 3.0), st.one_of(st.none(), st.integers(1, 6)), st.floats(0.01, 0.9))
def test_channel_bounds_and_epsilon_random(chan, eps, H, target):
    W, inputs = chan
    ch = SparseChannel(W, inputs=inputs)
    rows = brute.mp_channel_rows(W)
    ex = brute.mp_channel_delta(rows, inputs, eps, H)
    assert_upper(ch.delta_star_upper(eps, H), ex, eps=eps)
    assert_near(ch.delta_star(eps, H), ex, eps=eps)
    assert ch.epsilon(1.0, H) == 0.0
    try:
        e = ch.epsilon(target, H)
    except InfeasibleError:
        assert brute.mp_channel_delta(rows, inputs, 1e300, H) > target * (1 - 1e-12) - 1e-15
        return
    assert brute.mp_channel_delta(rows, inputs, e, H) <= target
    assert ch.is_ldp(e, target, H)


@pytest.mark.parametrize("family, param, s, domain, eps, H", [
    ("laplace", 0.7, 9, (0, 11), 1.0, 2),
    ("laplace", 0.05, 41, (3, 20), 0.2, 3),
    ("gaussian", 1.3, 11, (0, 9), 0.5, 2),
    ("gaussian", 40.0, 21, (-5, 5), 0.01, 1),
])
def test_window_channels_against_exact(family, param, s, domain, eps, H):
    t = (s - 1) // 2
    a, b = domain
    build = SparseChannel.laplace if family == "laplace" else SparseChannel.gaussian
    pname = "lam" if family == "laplace" else "sigma"
    xs = np.arange(a, b + 1)
    # clipped: exact rows on the clipped windows, from the exact kernel
    ch = build(**{pname: param}, s=s, domain=domain, window="clipped")
    d = np.abs(xs[None, :] - xs[:, None]).astype(float)
    rows = _mp_rows_from_logw_exact(family, param, d, t)
    ex = brute.mp_channel_delta(rows, xs, eps, H)
    assert_upper(ch.delta_star_upper(eps, H), ex)
    assert_near(ch.delta_star(eps, H), ex)
    e = ch.epsilon(0.5 * float(ex) + 1e-3, H) if ex > 2e-3 else None
    if e is not None:
        assert brute.mp_channel_delta(rows, xs, e, H) <= 0.5 * float(ex) + 1e-3
    # extended: exactly the Z mechanism on range min(H, b - a)
    che = build(**{pname: param}, s=s, domain=domain, window="extended")
    m = make(family, param, s)
    assert che.delta_star_upper(eps, H) == m.delta_star_upper(eps, min(H, b - a))
    assert che.delta_star_upper(eps, None) == m.delta_star_upper(eps, b - a)


def _mp_rows_from_logw_exact(family, param, d, t):
    """Exact clipped-window rows: w = e^{-lam d} or e^{-d^2/(2 sigma^2)} at 80 digits, normalized."""
    with mpmath.workdps(80):
        p = mpf(param)
        rows = []
        for r in d:
            vals = [(mpmath.exp(-p * int(v)) if family == "laplace" else mpmath.exp(-mpmath.mpf(int(v) ** 2) / (2 * p * p)))
                    if v <= t else mpmath.mpf(0) for v in r]
            z = mpmath.fsum(vals)
            rows.append([v / z for v in vals])
    return rows


def test_log_weights_with_a_huge_offset_still_bounded():
    # the log normalization subtracts an offset near 1e6: its rounding (~1e-10) must be in the bound
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    L = -1e6 + rng.uniform(-5.0, 0.0, (4, 5))
    ch = SparseChannel.from_log_weights(sp.coo_array(L))
    rows = _mp_rows_from_logw(L)
    for eps in (0.0, 0.5, 2.0):
        ex = brute.mp_channel_delta(rows, range(4), eps)
        assert_upper(ch.delta_star_upper(eps), ex, gap=False)
        assert mpf(ch.delta_star_upper(eps)) - ex <= 1e-8


def test_design_finite_certificate_clipped():
    f = design_finite("laplace", eps=1.0, delta=1e-2, H=2, domain=(0, 12), window="clipped", lam=0.3)
    t = (f.s - 1) // 2
    xs = np.arange(0, 13)
    rows = _mp_rows_from_logw_exact("laplace", 0.3, np.abs(xs[None, :] - xs[:, None]).astype(float), t)
    ex = brute.mp_channel_delta(rows, xs, 1.0, 2)
    assert ex <= mpf(f.delta_star) <= 1e-2
    assert f.delta_star == f.channel.delta_star_upper(1.0, 2)


# ---------------------------------------------------------------------------
# the closed-form upper bounds of sparseldp.core.bounds
# ---------------------------------------------------------------------------
def test_clean_bounds_are_upper_bounds_at_the_rounding_edge():
    from sparseldp import bounds

    # lam H above eps within the tolerated 1e-12: a tiny overlap excess exists (the old bound missed it)
    lam, H, s = 1.0, 3, 101
    eps = lam * H * (1 - 5e-13)
    assert mpf(bounds.laplace_clean_bound(eps=eps, lam=lam, s=s, H=H)) >= brute.mp_delta_star("laplace", lam, s, eps, H)
    for eps in (lam * H, 4.0):
        b = bounds.laplace_clean_bound(eps=eps, lam=lam, s=s, H=H)
        assert_upper(b, brute.mp_delta_star("laplace", lam, s, eps, H), gap=False)
    # Theorem 11 at eps equal to the (rounded) condition H (2t - H) / (2 sigma^2)
    sigma, s, H = 2.0, 41, 3
    t = (s - 1) // 2
    for eps in (H * (2 * t - H) / (2 * sigma * sigma), 20.0):
        b = bounds.gaussian_clean_bound(eps=eps, sigma=sigma, s=s, H=H)
        assert_upper(b, brute.mp_delta_star("gaussian", sigma, s, eps, H), gap=False)
