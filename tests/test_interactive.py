"""Interactive speed without a change of answer: the scalar fast path, the worst-separation lemma,
the segment root-find of ``epsilon``, the ``account`` caps and summary, and ``estimate_mean`` on Z.

Speed itself is measured in benchmarks/bench_interactive.py; here only what must hold:

* the scalar twins return *exactly* the array path's values (the same operations, and
  numpy's own elementary functions), on a grid with extreme ``lam`` / ``sigma`` / ``s``,
  ``eps`` 0 and large, ``h`` at the edges; and their upper bounds are never below the
  80-digit reference (tests/brute.py);
* ``delta_h`` is nondecreasing in ``h`` (exact values), so ``delta_star`` is the value at
  ``min(H, 2t + 1)``; the generic full scan agrees;
* ``epsilon`` (segment search) is a certificate, minimal to ``rtol``, and agrees with the
  bisection it replaced;
* ``account``: caps with one stderr line and exit 2, ``--summary`` at any ``H``;
* ``estimate_mean`` on Z: the channel path's answers, messages and floors, without the channel.
"""

from __future__ import annotations

import json
import math
import time

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import brute
from sparseldp import SparseGaussian, SparseLaplace
from sparseldp.cli import main
from sparseldp.core import accounting
from sparseldp.core.kernels import rounding
from sparseldp.estimation import ReportCounts, estimate_mean
from sparseldp.estimation import mean as mean_mod


def make(kind, param, s):
    return SparseLaplace(lam=param, s=s) if kind == "laplace" else SparseGaussian(sigma=param, s=s)


# ---------------------------------------------------------------------------
# scalar twins == array path
# ---------------------------------------------------------------------------
GRID = [
    ("laplace", 0.5, 21), ("laplace", 1e-4, 2001), ("laplace", 12.0, 9), ("laplace", 700.0, 7),
    ("laplace", 5e-324, 5), ("laplace", 1e-300, 41), ("laplace", 1.7e308, 3), ("laplace", 0.3, 1),
    ("laplace", 2.0**-30, (1 << 53) + 1),
    ("gaussian", 3.0, 21), ("gaussian", 987.654, 2001), ("gaussian", 0.3, 61), ("gaussian", 1e-200, 7),
    ("gaussian", 1e150, 9), ("gaussian", 1.0, 1), ("gaussian", 1e4, 4001),
]


def _eps_values(kind, param, t):
    h = max(1, min(t, 3))
    den = 2.0 * param * param
    loss = param * h if kind == "laplace" else (h * h / den if den > 0 else math.inf)
    vals = [0.0, 1e-300, 1.0, 40.0, 1e300]
    if math.isfinite(loss):
        vals += [loss, math.nextafter(loss, 0.0), math.nextafter(loss, math.inf)]
    return vals


def _h_values(t):
    return sorted({0, 1, 2, max(t - 1, 0), t, t + 1, max(2 * t - 1, 0), 2 * t, 2 * t + 1, 2 * t + 2, 2**62})


@pytest.mark.parametrize("kind, param, s", GRID, ids=lambda v: str(v)[:10])
def test_scalar_path_is_the_array_path(kind, param, s):
    m = make(kind, param, s)
    t = m.t
    hs = np.array(_h_values(t), dtype=np.int64)
    for eps in _eps_values(kind, param, t):
        arr = m.defect_h(eps, hs)
        up = m.delta_h_upper(np.float64(eps), hs)  # np.float64 with an array h: the array path
        for k, h in enumerate(hs.tolist()):
            d = m.defect_h(eps, h)
            assert type(d.total) is np.float64
            got = (float(d.total), float(d.support_leakage), float(d.overlap))
            want = (float(arr.total[k]), float(arr.support_leakage[k]), float(arr.overlap[k]))
            assert got == want, (kind, param, s, eps, h, got, want)
            assert float(m.delta_h(eps, h)) == want[0]
            assert float(m.delta_h_upper(eps, h)) == float(up[k])
        prof = m.delta_star(np.array([eps, eps]), 7)
        prof_up = m.delta_star_upper(np.array([eps, eps]), 7)
        for H in (1, 7, 2 * t + 1, 2**62):
            assert float(m.delta_star(eps, H)) == float(m.delta_star(np.array([eps]), H)[0])
            assert float(m.delta_star_upper(eps, H)) == float(m.delta_star_upper(np.array([eps]), H)[0])
        assert float(m.delta_star(eps, 7)) == float(prof[0])
        assert float(m.delta_star_upper(eps, 7)) == float(prof_up[1])


def test_scalar_path_validates_like_the_array_path():
    m = SparseLaplace(lam=0.5, s=7)
    for bad, exc, text in [
        ((-1.0, 1), ValueError, "eps must be a real number >= 0 and finite"),
        ((math.nan, 1), ValueError, "eps must be"),
        ((math.inf, 1), ValueError, "eps must be"),
        ((True, 1), TypeError, "eps must be"),
        ((1.0, -1), ValueError, "h must be an integer >= 0; got -1"),
        ((1.0, 2.0), TypeError, "h must be"),
        ((1.0, 2**70), ValueError, "int64"),
    ]:
        with pytest.raises(exc, match=text):
            m.delta_h(*bad)
        with pytest.raises(exc, match=text):
            m.delta_h_upper(*bad)
    with pytest.raises(ValueError, match="H must be an integer >= 1; got 0"):
        m.delta_star(1.0, 0)
    with pytest.raises(ValueError, match="delta must be a real number in"):
        m.epsilon(1.5, 3)
    # numpy scalars and Python ints take the fast path with the same answer
    assert m.delta_h(np.float64(1.0), np.int64(3)) == m.delta_h(1, 3) == m.delta_h(np.array(1.0), 3)


def test_elementary_twins_are_numpys_and_quiet():
    rng = np.random.default_rng(3)
    xs = np.concatenate([rng.uniform(-700, 700, 400), rng.uniform(-3, 3, 400) * 10.0 ** rng.integers(-300, 0, 400)])
    for twin, f, dom in [(rounding._ex, np.exp, xs[xs < 708]), (rounding._exm1, np.expm1, xs[xs < 708]),
                         (rounding._lg, np.log, np.abs(xs[xs != 0])), (rounding._lg1p, np.log1p, np.abs(xs))]:
        assert [twin(float(x)) for x in dom] == f(dom).tolist(), f.__name__
    edges = [0.0, -0.0, 5e-324, -5e-324, 1e-310, 2.0**-1020, -1.0, 709.5, 710.0, 1e300, -1e300, -708.5,
             -746.0, math.inf, -math.inf, math.nan]
    with np.errstate(all="raise"):  # a user's np.seterr never fires
        for twin in (rounding._ex, rounding._exm1, rounding._lg, rounding._lg1p):
            for x in edges:
                twin(x)
    assert rounding._ex(710.0) == math.inf and rounding._lg(0.0) == -math.inf and math.isnan(rounding._lg(-1.0))


def test_elementary_functions_of_the_c_library_within_two_ulp():
    """np.logaddexp's twin (the nearest logaddexp) calls the C library's exp and log1p: 2 ulp, like numpy's."""
    rng = np.random.default_rng(4)
    with mpmath.workdps(40):
        for f, mf, xs in [(math.exp, mpmath.exp, rng.uniform(-745.0, 709.0, 300)),
                          (math.log1p, mpmath.log1p, np.exp(rng.uniform(-700.0, 3.0, 300)))]:
            for x in xs.tolist():
                r = f(x)
                if r == 0 or not math.isfinite(r):
                    continue
                assert abs(mpmath.mpf(r) - mf(mpmath.mpf(x))) <= 2 * mpmath.mpf(math.ulp(r))


@settings(max_examples=12)
@given(st.sampled_from(["laplace", "gaussian"]), st.floats(-2.5, 2.0), st.integers(1, 40),
       st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.booleans())
def test_scalar_upper_bounds_against_exact(kind, logp, t, hfrac, efrac, at_loss):
    param = 10.0**logp
    m = make(kind, param, 2 * t + 1)
    h = max(1, int(round(hfrac * 2 * t)))
    if at_loss:  # eps at (the rounding of) an overlap loss: ties
        k = int(round(efrac * (h // 2)))
        eps = max(float(param * (h - 2 * k) if kind == "laplace" else h * (h - 2 * k) / (2 * param * param)), 0.0)
    else:
        eps = 8.0 * efrac
    ex_t, ex_l, ex_o = brute.mp_defect(kind, param, 2 * t + 1, eps, h)
    tol = mpmath.mpf(10) ** -60
    assert mpmath.mpf(float(m.delta_h_upper(eps, h))) >= ex_t * (1 - tol)
    up_t, up_l, up_o = accounting.defect_scalar(m.kernel, eps, h, "up")
    lo_t, lo_l, lo_o = accounting.defect_scalar(m.kernel, eps, h, "dn")
    for up, lo, ex in ((up_t, lo_t, ex_t), (up_l, lo_l, ex_l), (up_o, lo_o, ex_o)):
        assert mpmath.mpf(lo) <= ex * (1 + tol) and mpmath.mpf(up) >= ex * (1 - tol)
        assert mpmath.mpf(up) - ex <= 1e-13 + 1e-12 * ex + 2e-15 * eps


# ---------------------------------------------------------------------------
# the worst separation: delta_h nondecreasing in h
# ---------------------------------------------------------------------------
@settings(max_examples=10)
@given(st.sampled_from(["laplace", "gaussian"]), st.floats(-2.0, 1.5), st.integers(0, 12), st.floats(0.0, 6.0))
def test_delta_h_is_nondecreasing_in_h_exactly(kind, logp, t, eps):
    param = 10.0**logp
    s = 2 * t + 1
    vals = [brute.mp_defect(kind, param, s, eps, h)[0] for h in range(0, 2 * t + 2)]
    with mpmath.workdps(90):  # the values are 80-digit numbers: compare at that precision
        for a, b in zip(vals, vals[1:]):
            assert b - a >= -(mpmath.mpf(10) ** -60) * a
    # and the mechanism's delta_star is the value at min(H, 2t + 1), within rounding of the full maximum
    m = make(kind, param, s)
    for H in (1, 2, t + 1, 2 * t + 3):
        full = float(np.max(accounting.defect_parts(m.kernel, eps, np.arange(1, min(H, 2 * t + 1) + 1))[0]))
        assert abs(float(m.delta_star(eps, H)) - full) <= 4e-15
        generic, arg = accounting.delta_profile(m.kernel, eps, H, method="generic")
        assert abs(float(m.delta_star(eps, H)) - float(generic)) <= 1e-13


def test_delta_star_at_a_huge_range_is_immediate():
    m = SparseLaplace(lam=4.9e-7, s=60000001)
    t0 = time.perf_counter()
    got = float(m.delta_star_upper(1.0, 2 * 10**6))
    assert time.perf_counter() - t0 < 0.05
    assert got == float(m.delta_h_upper(1.0, 2 * 10**6))
    assert 3e-7 < got < 4e-7
    big = SparseLaplace(lam=1e-6, s=(1 << 53) + 1)
    assert float(big.delta_star(1.0, 10**12)) == float(big.delta_h(1.0, 10**12))
    assert accounting.delta_profile(big.kernel, 1.0, 10**15)[1] == 10**15


# ---------------------------------------------------------------------------
# epsilon: segment search
# ---------------------------------------------------------------------------
def _bisection_epsilon(kernel, delta, H, monkeypatch):
    with monkeypatch.context() as mp:
        mp.setattr(accounting, "_epsilon_segments", lambda *a, **k: None)
        return accounting.epsilon_for_delta(kernel, delta, H)


EPS_CASES = [
    ("laplace", 0.5, 21, 3, 2e-2), ("laplace", 0.05, 2001, 10, 1e-6), ("laplace", 3.0, 41, 10, 1e-12),
    ("laplace", 0.005, 2001, 100, 1e-2), ("laplace", 6.253194436589393, 901, 389, 4.337965087927348e-82),
    ("gaussian", 3.0, 21, 3, 1e-2), ("gaussian", 30.0, 2001, 10, 1e-9), ("gaussian", 0.5, 41, 10, 1e-6),
    ("gaussian", 300.0, 2001, 100, 0.3), ("gaussian", 1.0, 41, 3, 1e-60),
    ("laplace", 0.3, 2001, 50, 1e-15), ("gaussian", 20.0, 2001, 5, 1e-20), ("laplace", 0.5, 7, 6, 0.99),
]


@pytest.mark.parametrize("kind, param, s, H, delta", EPS_CASES, ids=lambda v: str(v)[:10])
def test_epsilon_segments_certificate_minimal_and_as_before(kind, param, s, H, delta, monkeypatch):
    m = make(kind, param, s)
    e = m.epsilon(delta, H)
    assert m.delta_star_upper(e, H) <= delta
    # the segment search answered (no fallback to bisection)
    assert accounting._epsilon_segments(m.kernel, delta, min(H, m.s), 1e-12) == e
    old = _bisection_epsilon(m.kernel, delta, H, monkeypatch)
    assert abs(e - old) <= 2e-12 * max(e, old)
    if e > 0:  # no certifiable eps noticeably below
        assert m.delta_star_upper(e * (1 - 2e-12), H) > delta or m.delta_star(e * (1 - 2e-12), H) > delta
    if s <= 41:
        assert brute.mp_delta_star(kind, param, s, e, H) <= delta


@settings(max_examples=15)
@given(st.sampled_from(["laplace", "gaussian"]), st.floats(-2.0, 1.5), st.integers(1, 60),
       st.integers(1, 130), st.floats(-14.0, -0.1))
def test_epsilon_segments_random(kind, logp, t, H, logdelta):
    m = make(kind, 10.0**logp, 2 * t + 1)
    delta = 10.0**logdelta
    try:
        e = m.epsilon(delta, H)
    except Exception as exc:  # infeasible: the leakage (exact) is above delta or within rounding of it
        assert type(exc).__name__ == "InfeasibleError"
        assert float(accounting.defect_bounds(m.kernel, np.inf, min(H, 2 * t + 1))[0]) > delta
        return
    assert m.delta_star_upper(e, H) <= delta
    if e > 0:
        assert m.delta_star(e * (1 - 1e-9) - 1e-15, H) > delta - 1e-12


@pytest.mark.parametrize("kind, param, s, H, delta", EPS_CASES[:10], ids=lambda v: str(v)[:10])
def test_epsilon_table_and_newton_routes_agree(kind, param, s, H, delta, monkeypatch):
    """The table search (bisection over the breakpoints) and the Newton search over segments find the same
    certified eps, to rtol; the table is what a separation with few segments uses."""
    m = make(kind, param, s)
    h = min(H, 2 * m.t + 1)
    e_table = m.epsilon(delta, H)
    assert m.kernel._cache["epsilon_setup"][h][3] is not None  # the table route answered
    fresh = make(kind, param, s)
    with monkeypatch.context() as mp:
        mp.setattr(accounting, "_TABLE_MAX", -1)  # no table: the Newton search
        e_newton = fresh.epsilon(delta, H)
    assert fresh.kernel._cache["epsilon_setup"][h][3] is None
    assert abs(e_table - e_newton) <= 2e-12 * max(e_table, e_newton)
    for e in (e_table, e_newton):
        assert m.delta_star_upper(e, H) <= delta


@pytest.mark.parametrize("kind, param, s", [("laplace", 0.05, 2001), ("gaussian", 30.0, 2001), ("gaussian", 0.7, 41),
                                            ("laplace", 1.3, 41)], ids=str)
def test_scalar_memo_hits_are_the_misses_and_the_array_path(kind, param, s, monkeypatch):
    """The eps-free pieces kept per separation and per K change no bit: a second call (memo hit) returns the
    first (miss), both the array path's value; the memo stays within its bounds."""
    rng = np.random.default_rng(11)
    m = make(kind, param, s)
    h = np.array([1, 3, m.t, 2 * m.t], dtype=np.int64)
    loss_top = float(param * s) if kind == "laplace" else float(s * s / (2 * param * param))
    eps = np.concatenate([rng.uniform(0, min(loss_top, 30.0), 40), [0.0]])
    for mode, fn in (("near", m.delta_h), ("up", m.delta_h_upper)):
        want = fn(eps[:, None], h[None, :])  # the array path
        first = [[float(fn(float(e), int(hh))) for hh in h] for e in eps]
        again = [[float(fn(float(e), int(hh))) for hh in h] for e in eps]
        assert first == again == want.tolist(), mode
    mod = "sparseldp.core.kernels." + kind
    with monkeypatch.context() as mp:
        mp.setattr(mod + ".MEMO_INDICES", 4)
        mp.setattr("sparseldp.core.kernels.base.MEMO_SEPARATIONS", 3)
        k = make(kind, param, s).kernel
        for hh in range(1, 12):
            for e in eps[:12]:
                accounting.defect_scalar(k, float(e), hh, "up")
        assert 1 <= len(k._smemo["up"]) <= 3 and len(k._sleak["up"]) <= 3
        assert all(len(entry[-1]) <= 4 for entry in k._smemo["up"].values())


# ---------------------------------------------------------------------------
# account: caps and --summary
# ---------------------------------------------------------------------------
def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_error(capsys, *argv):
    rc, out, err = run(capsys, *argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: ") and out == "", (rc, out, err)
    return lines[0]


ACC = ["account", "--family", "laplace", "--lam", "0.5", "--eps", "1"]


@pytest.mark.parametrize("argv, fragment", [
    (ACC + ["--s", "7", "--H", "100000000", "--json"], "use --summary"),
    (ACC + ["--s", "9007199254740993", "--H", "1000000000000"], "H must be an integer in [1, 1000000]"),
    (ACC + ["--s", "7", "--H", str(2**63), "--summary"], "H must be an integer in [1, 9223372036854775807]"),
    (ACC + ["--s", "7", "--H", "0", "--summary", "--json"], "H must be an integer in [1, 9223372036854775807]"),
    (["account", "--family", "gaussian", "--sigma", "2", "--s", str((1 << 23) + 3), "--eps", "1", "--H", "3",
      "--summary"], "for the Gaussian family"),
])
def test_account_caps_are_one_line_errors(capsys, argv, fragment):
    t0 = time.perf_counter()
    assert fragment in one_error(capsys, *argv)
    assert time.perf_counter() - t0 < 2.0


def test_account_summary_at_any_range(capsys, tmp_path):
    t0 = time.perf_counter()
    rc, out, err = run(capsys, *ACC, "--s", "9007199254740993", "--H", "1000000000000", "--summary", "--json")
    assert rc == 0 and err == "" and time.perf_counter() - t0 < 2.0
    data = json.loads(out)
    assert list(data) == ["family", "lam", "s", "eps", "H", "delta_star", "worst_h", "support_leakage",
                          "overlap", "r1", "r2", "guarantee"]
    m = SparseLaplace(lam=0.5, s=9007199254740993)
    assert data["worst_h"] == 10**12 and data["delta_star"] == float(m.delta_star_upper(1.0, 10**12))
    # the summary and the full table state the same delta_star and worst h
    rc, out, _ = run(capsys, *ACC, "--s", "21", "--H", "30", "--json")
    full = json.loads(out)
    rc, out, _ = run(capsys, *ACC, "--s", "21", "--H", "30", "--summary", "--json")
    summ = json.loads(out)
    assert summ["delta_star"] == full["delta_star"] and summ["worst_h"] == 21
    assert max(row["delta"] for row in full["per_h"]) == full["per_h"][20]["delta"]
    assert summ["support_leakage"] == full["per_h"][20]["support_leakage"] == 1.0
    rc, out, _ = run(capsys, *ACC, "--s", "21", "--H", "5", "--summary")
    assert rc == 0 and "attained at h = 5" in out and "│" not in out
    spec = tmp_path / "m.json"
    spec.write_text(json.dumps({"family": "gaussian", "sigma": 2.0, "s": 9}))
    rc, out, err = run(capsys, "account", "--mechanism", spec, "--eps", "1", "--H", str(10**15), "--summary",
                       "--json")
    assert rc == 0 and json.loads(out)["worst_h"] == 9


# ---------------------------------------------------------------------------
# estimate_mean on Z: no channel, same answers
# ---------------------------------------------------------------------------
def _channel_path(monkeypatch, *args, **kwargs):
    with monkeypatch.context() as mp:
        mp.setattr(mean_mod, "_on_z", lambda mechanism: False)
        return estimate_mean(*args, **kwargs)


def _same(a, b, rel=1e-12):
    assert a.method == b.method and a.n == b.n and a.confidence == b.confidence
    for x, y in ((float(a), float(b)), (a.stderr, b.stderr), (a.ci[0], b.ci[0]), (a.ci[1], b.ci[1])):
        assert x == pytest.approx(y, rel=rel, abs=1e-12)


MEAN_CASES = [
    (SparseLaplace(lam=0.5, s=11), (0, 99), 3000),
    (SparseGaussian(sigma=4.0, s=41), (-50, 50), 2000),
    (SparseLaplace(lam=1.0, s=1), (0, 5), 500),  # no noise
    (SparseLaplace(lam=800.0, s=9), (10**12, 10**12 + 7), 300),  # probabilities that underflow, huge values
    (SparseGaussian(sigma=1e-3, s=5), (0, 3), 400),
]


@pytest.mark.parametrize("mech, domain, n", MEAN_CASES, ids=lambda v: repr(v)[:30])
def test_mean_on_z_is_the_channel_answer(mech, domain, n, monkeypatch):
    gen = np.random.default_rng(n)
    y = mech.sample(gen.integers(domain[0], domain[1] + 1, n), rng=gen)
    fast = estimate_mean(y, mech, domain=domain)
    _same(fast, _channel_path(monkeypatch, y, mech, domain=domain))
    assert float(fast) == pytest.approx(float(np.mean(y - domain[0])) + domain[0], rel=1e-15)
    # the same reports as chunks, as a histogram, and as counts=True
    _same(estimate_mean(iter([y[: n // 3], y[n // 3:]]), mech, domain=domain), fast, rel=1e-15)
    rc = ReportCounts.from_reports(y)
    _same(estimate_mean(rc, mech, domain=domain), fast)
    _same(estimate_mean((rc.offset, rc.counts), mech, domain=domain, counts=True), fast)
    # degenerate samples: the floors
    const = np.full(50, domain[0])
    _same(estimate_mean(const, mech, domain=domain), _channel_path(monkeypatch, const, mech, domain=domain))


def test_mean_on_z_refuses_what_the_channel_refuses(monkeypatch):
    m = SparseLaplace(lam=0.5, s=5)
    bad_cases = [([0, 1, 2, 13, 14, -3], {}), (iter([np.array([1, 2]), np.array([20, 21, 22])]), {}),
                 ({-9: 2, 3: 5}, {"counts": True}), ([4], {}), ([1.5, 2], {})]
    for reports, kw in bad_cases:
        msgs = []
        parts = None if isinstance(reports, (list, dict)) else list(reports)
        for path in ("fast", "channel"):
            r = reports if parts is None else iter(parts)
            with pytest.raises((ValueError, TypeError)) as info:
                if path == "fast":
                    estimate_mean(r, m, domain=(0, 10), **kw)
                else:
                    _channel_path(monkeypatch, r, m, domain=(0, 10), **kw)
            msgs.append((type(info.value), str(info.value)))
        assert msgs[0] == msgs[1]
    with pytest.raises(ValueError, match="domain is required"):
        estimate_mean([1, 2], m)


def test_mean_on_z_wide_windows_without_a_channel():
    # t = 10^7 (beyond the exact integer sums): a 10 x 20,000,001 channel would be refused, the
    # report mean needs none.  Any value within the windows is a possible report.
    m = SparseLaplace(lam=1e-6, s=20_000_001)
    gen = np.random.default_rng(5)
    y = gen.integers(-m.t, 9 + m.t + 1, 4000)
    est = estimate_mean(y, m, domain=(0, 9))
    d = (y - 4).astype(float)
    assert est.method == "report-mean" and float(est) == pytest.approx(4 + d.mean(), rel=1e-13, abs=1e-9)
    assert est.stderr == pytest.approx(math.sqrt(max(d.var(ddof=1), m.r2) / y.size), rel=1e-12)
    assert est.ci == (0.0, 9.0) or 0.0 <= est.ci[0] <= est.ci[1] <= 9.0
