"""Regression tests from the bad-input audit of every public entry point.

Project rule: bad input gets a ``TypeError``/``ValueError`` naming the
parameter, the allowed range and the value given; never ``nan``, never a
traceback from numpy/scipy internals, never a silent wrap-around or a
silently ignored setting; in the CLI one line on stderr starting with
``error:``, exit status 2 and no partial output file.

Three tables drive the checks:

* ``BAD``: a call, the exception type and a fragment of its message;
* ``GOOD``: extreme but valid inputs that used to crash (ZeroDivisionError,
  OverflowError, MemoryError) or return a wrong value, with the right answer;
* ``CLI_BAD``: an argv (``{d}`` is a scratch directory holding the files
  below) and a fragment of the one stderr line.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sparseldp
from sparseldp import InfeasibleError, SparseChannel, SparseGaussian, SparseLaplace
from sparseldp import bounds
from sparseldp.baselines import discrete_gaussian, randomized_response
from sparseldp.cli import main
from sparseldp.compare import compare
from sparseldp.composition import to_pld
from sparseldp.estimation import estimate_frequencies, estimate_mean
from sparseldp.design.finite import calibrate, design_finite
from sparseldp.io import column_counts
from sparseldp.spec import load_spec

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
M = SparseLaplace(lam=0.5, s=7)
W = [[2, 1, 0], [0, 1, 2]]
CH = SparseChannel(W)
Y = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, 10], dtype=np.int64)  # reports of M on the domain 0..9
DOM = (0, 9)
TARGET = dict(eps=1.0, delta=0.1, H=2)


def _spec_file(tmp_path: Path, content) -> Path:
    p = tmp_path / "spec.json"
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content if isinstance(content, str) else json.dumps(content))
    return p


LAP = {"family": "laplace", "lam": 0.5, "s": 7}

# (id, call taking the scratch directory, exception type, message fragment)
BAD = [
    # mechanisms on Z
    ("s beyond 2^53+1", lambda d: SparseLaplace(lam=0.5, s=2**70 + 1), ValueError,
     "s must be an odd integer in [1, 2^53 + 1"),
    ("gaussian s needs O(s) memory", lambda d: SparseGaussian(sigma=2.0, s=10**12 + 1), ValueError,
     "for the Gaussian family"),
    ("lam an int beyond the doubles", lambda d: SparseLaplace(lam=10**400, s=7), ValueError,
     "lam must be a real number > 0 and finite; got 1000"),
    ("eps list beyond the doubles", lambda d: M.delta_h([10**400], 1), ValueError,
     "eps must be a real number >= 0 and finite"),
    ("radius beyond the cap", lambda d: SparseLaplace.from_radius(lam=1.0, t=2**60), ValueError,
     "t must be an integer in [0, 4503599627370496]"),
    ("gaussian radius beyond the cap", lambda d: SparseGaussian.from_radius(sigma=1.0, t=2**30), ValueError,
     "t must be an integer in [0, 4194304]"),
    ("ragged y", lambda d: M.pmf([[1], [2, 3]]), TypeError, "y must be an integer or integer array (a rectangular"),
    ("y, x shapes", lambda d: M.pmf([1, 2, 3], [1, 2]), ValueError,
     "y and x must have broadcastable shapes (numpy rules); got y (3,), x (2,)"),
    ("eps, h shapes", lambda d: M.delta_h([1.0, 2.0, 3.0], [1, 2]), ValueError, "eps and h must have broadcastable"),
    ("eps as a string", lambda d: M.delta_h("1", 1), TypeError, "eps must be a real number or array"),
    ("eps None", lambda d: M.delta_h(None, 1), TypeError, "got NoneType None"),
    ("eps bool array", lambda d: M.delta_h(np.array([True]), 1), TypeError, "got dtype bool"),
    ("uint64 beyond int64", lambda d: M.pmf(np.array([2**63 + 5], dtype=np.uint64)), ValueError,
     "y must be integers in [-9223372036854775808, 9223372036854775807] (int64); got 9223372036854775813"),
    ("python int beyond int64", lambda d: M.pmf(2**70), ValueError, "y must be integers in"),
    ("support far out", lambda d: M.support(2**70), ValueError, "x must be an integer in [-9223372036854775805"),
    ("infeasible names the mechanism", lambda d: M.epsilon(0.0, 3), InfeasibleError,
     "no eps makes this mechanism (SparseLaplace(lam=0.5, s=7))"),
    # channels
    ("ragged weights", lambda d: SparseChannel([[1, 2], [1]]), TypeError, "(rows of equal length)"),
    ("weights beyond the doubles", lambda d: SparseChannel([[10**400, 1], [1, 1]]), ValueError,
     "weights must be finite and >= 0"),
    ("weights None", lambda d: SparseChannel(None), TypeError, "weights must be a 2-D array of real numbers; got None"),
    ("uint64 labels wrap", lambda d: SparseChannel(W, inputs=np.array([2**63 + 5, 1], dtype=np.uint64)),
     ValueError, "inputs must be integers in"),
    ("labels beyond int64", lambda d: SparseChannel(W, inputs=[2**70, 1]), ValueError, "inputs must be integers in"),
    ("domain a set", lambda d: SparseChannel.laplace(lam=1, s=3, domain={0, 5}), TypeError,
     "domain must be a pair (lo, hi) of integers with lo <= hi; got set"),
    ("domain a dict", lambda d: SparseChannel.laplace(lam=1, s=3, domain={"a": 1, "b": 2}), TypeError,
     "got dict"),
    ("domain beyond int64", lambda d: SparseChannel.laplace(lam=1, s=3, domain=(0, 2**70)), ValueError,
     "domain hi must be an integer in [-9223372036854775808, 9223372036854775807]"),
    ("huge domain", lambda d: SparseChannel.laplace(lam=1, s=3, domain=(0, 10**9)), ValueError,
     "the channel would store 1000000001 x 3 = 3000000003 entries, more than the 2^27"),
    ("huge s on a domain", lambda d: SparseChannel.laplace(lam=1, s=10**7 + 1, domain=(0, 10**4)), ValueError,
     "the channel would store"),
    ("extended outputs leave int64", lambda d: SparseChannel.laplace(lam=1, s=3, domain=(I64_MAX - 2, I64_MAX)),
     ValueError, "fit in int64"),
    ("channel y, x shapes", lambda d: CH.pmf([0, 1, 2], [0, 1]), ValueError, "y and x must have broadcastable"),
    # baselines
    ("dense baseline too big", lambda d: randomized_response(eps=1.0, domain=(0, 10**5)), ValueError,
     "randomized response is dense"),
    ("discrete gaussian sigma", lambda d: discrete_gaussian(sigma=1e8, domain=(0, 5)), ValueError,
     "sigma must be a real number in (0, 1e7]"),
    # bounds
    ("window overflows", lambda d: bounds.gaussian_window(eps=1, delta=0.1, sigma=1e200, H=2), ValueError,
     "sigma must be small enough"),
    ("ratio nan", lambda d: bounds.laplace_pure_sufficient(eps=1, lam=0.1, D=3, log_normalizer_ratio=math.nan),
     ValueError, "log_normalizer_ratio must be a real number and finite; got nan"),
    ("ratio string", lambda d: bounds.laplace_pure_sufficient(eps=1, lam=0.1, D=3, log_normalizer_ratio="0.1"),
     TypeError, "log_normalizer_ratio must be a real number"),
    ("theorem 11 with sigma^2 underflowing", lambda d: bounds.gaussian_clean_bound(eps=10, sigma=1e-300, s=21, H=1),
     ValueError, "Theorem 11 needs eps >= H(2t - H)/(2 sigma^2) = inf; got eps = 10"),
    ("loose not a bool", lambda d: bounds.laplace_clean_bound(eps=1, lam=0.1, s=21, H=2, loose="yes"), TypeError,
     "loose must be True or False; got str 'yes'"),
    # design
    ("H beyond any supported s", lambda d: sparseldp.smallest_support("laplace", eps=1, delta=0.1, H=2**60, lam=0.5),
     ValueError, "H must be an integer in [1, 9007199254740992]"),
    ("gaussian H beyond any supported s", lambda d: sparseldp.design("gaussian", eps=1, delta=0.1, H=2**30),
     ValueError, "H must be an integer in [1, 8388608]"),
    ("family a list", lambda d: design_finite(["laplace"], domain=DOM, **TARGET), TypeError,
     "family must be 'laplace' or 'gaussian'; got list"),
    ("prior negative", lambda d: design_finite("laplace", domain=DOM, prior=[-1] * 10, **TARGET), ValueError,
     "got -1.0 at index 0"),
    ("prior zero", lambda d: design_finite("laplace", domain=DOM, prior=[0] * 10, **TARGET), ValueError,
     "got weights summing to 0.0"),
    ("design on a huge domain", lambda d: design_finite("laplace", domain=(0, 10**9), **TARGET), ValueError,
     "the channel would store"),
    ("calibrate family a list", lambda d: calibrate(["rr"], domain=DOM, **TARGET), TypeError,
     "family_name must be one of"),
    ("calibrate window", lambda d: calibrate("geometric-clamp", domain=DOM, window="bogus", **TARGET), ValueError,
     "window must be 'extended' or 'clipped'; got 'bogus'"),
    # estimation
    ("no reports", lambda d: estimate_frequencies([], M, domain=DOM), ValueError,
     "reports must contain at least one report"),
    ("a set of reports", lambda d: estimate_frequencies({1, 2, 3}, M, domain=DOM), TypeError,
     "a set drops repeated reports"),
    ("counts not a bool", lambda d: estimate_frequencies(Y, M, domain=DOM, counts="yes"), TypeError,
     "counts must be True or False"),
    ("return_info not a bool", lambda d: estimate_frequencies(Y, M, domain=DOM, return_info="x"), TypeError,
     "return_info must be True or False"),
    ("ragged reports", lambda d: estimate_frequencies([[1, 2], [3]], M, domain=DOM), TypeError, "rectangular"),
    ("uint64 reports wrap", lambda d: estimate_frequencies(np.array([2**63 + 3], dtype=np.uint64), M, domain=DOM),
     ValueError, "reports must be integers in"),
    ("estimate on a huge domain", lambda d: estimate_frequencies(Y, M, domain=(0, 10**9)), ValueError,
     "the channel would store"),
    ("domain at int64 max", lambda d: estimate_frequencies(Y, M, domain=(I64_MAX - 5, I64_MAX)), ValueError,
     "domain must lie within [-2^53, 2^53] for estimation"),
    ("mean counts not a bool", lambda d: estimate_mean(Y, M, domain=DOM, counts=1), TypeError,
     "counts must be True or False"),
    # composition
    ("PLD of a huge window", lambda d: to_pld(SparseLaplace(lam=0.5, s=10**8 + 1), 1), ValueError,
     "s must be an odd integer <= 2^22 + 1 = 4194305 to build a PLD"),
    # io
    ("bounds too wide", lambda d: column_counts(d / "ok.csv", "x", bounds=(0, 10**12)), ValueError,
     "bounds must span at most 2^26"),
    # spec files
    ("spec typo key", lambda d: load_spec(_spec_file(d, {**LAP, "domain": [0, 9], "windw": "clipped"})),
     ValueError, "unknown key 'windw' in a laplace spec"),
    ("spec other family's key", lambda d: load_spec(_spec_file(d, {**LAP, "sigma": 1.0})), ValueError,
     "unknown key 'sigma'"),
    ("spec window without domain", lambda d: load_spec(_spec_file(d, {**LAP, "window": "clipped"})), ValueError,
     "window applies only with a domain"),
    ("spec eps negative", lambda d: load_spec(_spec_file(d, {**LAP, "eps": -1})), ValueError,
     "eps must be a real number >= 0 and finite; got -1"),
    ("spec delta 2", lambda d: load_spec(_spec_file(d, {**LAP, "delta": 2})), ValueError,
     "delta must be a real number in [0, 1]; got 2"),
    ("spec H float", lambda d: load_spec(_spec_file(d, {**LAP, "H": 2.5})), ValueError,
     "H must be an integer >= 1; got float 2.5"),
    ("spec domain beyond int64", lambda d: load_spec(_spec_file(d, {**LAP, "domain": [0, 2**70]})), ValueError,
     "domain hi must be an integer in"),
    ("spec extended beyond int64", lambda d: load_spec(_spec_file(d, {**LAP, "domain": [0, I64_MAX]})), ValueError,
     "fit in int64"),
    ("spec s beyond cap", lambda d: load_spec(_spec_file(d, {**LAP, "s": 2**70 + 1})), ValueError,
     "s must be an odd integer in [1, 2^53 + 1"),
    ("spec path None", lambda d: load_spec(None), TypeError, "path must be a path (str or os.PathLike)"),
    ("spec not UTF-8", lambda d: load_spec(_spec_file(d, b'{"family": "\xff\xfe"}')), ValueError,
     "is not valid JSON: it is not UTF-8 text"),
    # compare
    ("compare families a string", lambda d: compare(domain=DOM, families="rr", **TARGET), TypeError,
     "families must be an iterable of names"),
    ("compare n huge", lambda d: compare(domain=DOM, n=10**10, families=["rr"], **TARGET), ValueError,
     "n must be an integer in [1, 268435456]; got 10000000000"),
    ("compare population", lambda d: compare(domain=DOM, population=[1, -1] + [1] * 8, families=["rr"], **TARGET),
     ValueError, "population must be an array of 10 nonnegative weights"),
    ("compare rng", lambda d: compare(domain=DOM, rng="x", families=["rr"], **TARGET), TypeError, "got str 'x'"),
]


@pytest.fixture
def scratch(tmp_path):
    (tmp_path / "ok.csv").write_text("id,x\n1,3\n2,5\n")
    return tmp_path


@pytest.mark.parametrize("call, exc, fragment", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_raises_clearly(scratch, call, exc, fragment):
    with pytest.raises(exc) as info:
        call(scratch)
    assert type(info.value) in (exc, InfeasibleError)
    assert fragment in str(info.value)


def _gauss_point_mass_delta():
    return float(SparseGaussian(sigma=1e-300, s=7).delta_star(1.0, 3))


# (id, call, check of the result) for extreme but valid inputs that used to crash or be wrong
GOOD = [
    ("gaussian sigma underflows: a point mass, delta 1", _gauss_point_mass_delta, lambda r: r == 1.0),
    ("gaussian sigma tiny: no distortion", lambda: SparseGaussian(sigma=1e-300, s=7).r2, lambda r: r == 0.0),
    ("gaussian sigma tiny pmf", lambda: SparseGaussian(sigma=1e-300, s=7).pmf([0, 1]),
     lambda r: list(r) == [1.0, 0.0]),
    ("gaussian sigma huge, eps 0: no inf * 0", lambda: SparseGaussian(sigma=1e300, s=7).delta_star(0.0, 3),
     lambda r: abs(r - 3 / 7) < 1e-12),
    ("pmf far apart is 0, not an int64 wrap", lambda: M.pmf(I64_MAX, -I64_MAX), lambda r: r == 0.0),
    ("pmf at the int64 edge", lambda: M.pmf(I64_MAX, I64_MAX - 2), lambda r: abs(r - M.pmf(2, 0)) < 1e-15),
    ("empty list of inputs samples nothing", lambda: M.sample([], rng=0),
     lambda r: r.shape == (0,) and r.dtype == np.int64),
    ("empty list of outputs", lambda: M.pmf([]), lambda r: r.shape == (0,)),
    ("uniform limit at the largest s", lambda: SparseLaplace(lam=1e-300, s=2**53 + 1).delta_h(1.0, [1, 2, 3]),
     lambda r: np.allclose(r, np.array([1, 2, 3]) / (2**53 + 1), rtol=1e-12, atol=0)),
    ("distortion at the largest s (O(log t) moment sums)", lambda: SparseLaplace(lam=1e-300, s=2**53 + 1).r1,
     lambda r: abs(r / 2**51 - 1) < 1e-12),
    ("labels 2^64 apart are not neighbours", lambda: SparseChannel(W, inputs=[I64_MIN, I64_MAX]).delta_star(0.5, 1),
     lambda r: r == 0.0),
    ("channel certify with the default H (all pairs)", lambda: CH.certify(1.0).delta_star_upper,
     lambda r: r >= float(CH.delta_star(1.0)) - 1e-15),
    ("channel gaussian sigma tiny", lambda: SparseChannel.gaussian(sigma=1e-300, s=3, domain=(0, 5)).delta_star(1.0),
     lambda r: r == 1.0),
    ("discrete gaussian sigma tiny has no NaN", lambda: discrete_gaussian(sigma=1e-300, domain=(0, 5)).matrix.data,
     lambda r: not np.isnan(r).any()),
    ("kappa eps 0 sigma huge", lambda: bounds.kappa(1, eps=0.0, sigma=1e200), lambda r: r == 0.5),
    ("gaussian design eps 1000 (no math range error)",
     lambda: sparseldp.design("gaussian", eps=1000.0, delta=1e-3, H=3).delta_star, lambda r: r <= 1e-3),
    ("laplace design eps 1e300 (no lam overflow)",
     lambda: sparseldp.design("laplace", eps=1e300, delta=1e-3, H=3).delta_star, lambda r: r <= 1e-3),
]


@pytest.mark.parametrize("call, ok", [g[1:] for g in GOOD], ids=[g[0] for g in GOOD])
def test_extreme_valid_input_works(call, ok):
    assert ok(call())


def test_spec_with_byte_order_mark_loads(tmp_path):
    p = tmp_path / "bom.json"
    p.write_bytes(b"\xef\xbb\xbf" + json.dumps(LAP).encode())
    assert load_spec(p).mechanism == M


# ---------------------------------------------------------------------------
# CLI: one line on stderr, exit status 2, no file left behind
# ---------------------------------------------------------------------------
UNWRITABLE = "/proc"  # an existing directory in which no one can create files (not even root)
ACC = ["account", "--family", "laplace", "--lam", "0.5", "--eps", "1"]

CLI_BAD = [
    ("s beyond int64", ACC + ["--s", "99999999999999999999999", "--H", "3"], "s must be an odd integer in [1, 2^53"),
    ("H beyond int64", ACC + ["--s", "7", "--H", "99999999999999999999999"],
     "H must be an integer in [1, 1000000]"),
    ("gaussian s too big", ["account", "--family", "gaussian", "--sigma", "2", "--s", "1000000000001", "--eps", "1",
                            "--H", "3"], "for the Gaussian family"),
    ("design huge domain", ["design", "--family", "laplace", "--eps", "1", "--delta", "0.1", "--H", "3", "--domain",
                            "0:1000000000"], "the channel would store"),
    ("design unwritable", ["design", "--family", "laplace", "--eps", "1", "--delta", "0.1", "--H", "3", "--lam",
                           "0.05", "-o", UNWRITABLE + "/spec.json"], "cannot write"),
    ("privatize negative seed, no warning first",
     ["privatize", "-m", "{d}/spec.json", "-c", "x", "{d}/ok.csv", "-o", "{d}/out.csv", "--seed", "-1"],
     "--seed must be an integer >= 0; got -1"),
    ("privatize binary spec", ["privatize", "-m", "{d}/binary.json", "-c", "x", "{d}/ok.csv", "-o", "{d}/out.csv"],
     "is not UTF-8 text"),
    ("privatize spec typo", ["privatize", "-m", "{d}/typo.json", "-c", "x", "{d}/ok.csv", "-o", "{d}/out.csv"],
     "unknown key 'windw'"),
    ("privatize unwritable", ["privatize", "-m", "{d}/spec.json", "-c", "x", "{d}/ok.csv", "--allow-no-target",
                              "-o", UNWRITABLE + "/out.csv"], "cannot write output"),
    ("estimate huge domain", ["estimate", "-m", "{d}/spec.json", "-c", "y", "{d}/rep.csv", "-o", "{d}/est.csv",
                              "--domain", "0:1000000000"], "the channel would store"),
    ("estimate plot unwritable leaves no output either",
     ["estimate", "-m", "{d}/spec.json", "-c", "y", "{d}/rep.csv", "-o", "{d}/est.csv", "--domain", "0:9",
      "--plot", UNWRITABLE + "/p.png"], "cannot write"),
    ("estimate unwritable", ["estimate", "-m", "{d}/spec.json", "-c", "y", "{d}/rep.csv", "-o",
                             UNWRITABLE + "/est.csv", "--domain", "0:9"], "cannot write"),
    ("compare n huge", ["compare", "--eps", "1", "--delta", "0.1", "--H", "2", "--domain", "0:9", "--families", "rr",
                        "--n", "10000000000"], "n must be an integer in [1, 268435456]"),
]


@pytest.fixture
def cli_dir(tmp_path):
    (tmp_path / "ok.csv").write_text("id,x\n1,3\n2,5\n")
    (tmp_path / "rep.csv").write_text("y\n1\n2\n3\n4\n5\n")
    (tmp_path / "spec.json").write_text(json.dumps(LAP))
    (tmp_path / "typo.json").write_text(json.dumps({**LAP, "domain": [0, 9], "windw": "clipped"}))
    (tmp_path / "binary.json").write_bytes(bytes(range(256)))
    return tmp_path


@pytest.mark.parametrize("argv, fragment", [c[1:] for c in CLI_BAD], ids=[c[0] for c in CLI_BAD])
def test_cli_bad_input_one_line_exit_2_nothing_written(cli_dir, capsys, argv, fragment):
    before = sorted(os.listdir(cli_dir))
    rc = main([a.replace("{d}", str(cli_dir)) for a in argv])
    _, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert fragment in lines[0]
    assert sorted(os.listdir(cli_dir)) == before


def test_console_script_bad_input_no_traceback():
    """The real entry point (a fresh process): one line, status 2, no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "sparseldp.cli", *ACC, "--s", "99999999999999999999999", "--H", "3"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: s must be an odd integer in [1, 2^53")
    assert "Traceback" not in proc.stderr
