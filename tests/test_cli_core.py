"""CLI commands ``account`` and ``design``: JSON schema and values, tables, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from sparseldp import SparseGaussian, SparseLaplace
from sparseldp.cli import main
from sparseldp.design import design, smallest_support
from sparseldp.design.finite import design_finite
from sparseldp.spec import load_spec

ACCOUNT_KEYS = {"laplace": ["family", "lam", "s", "eps", "H", "delta_star", "per_h", "r1", "r2", "guarantee"],
                "gaussian": ["family", "sigma", "s", "eps", "H", "delta_star", "per_h", "r1", "r2", "guarantee"]}
DESIGN_KEYS = {"laplace": ["family", "lam", "s", "eps", "delta", "H", "delta_star", "r1", "r2"],
               "gaussian": ["family", "sigma", "s", "eps", "delta", "H", "delta_star", "r1", "r2"]}


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(capsys, *argv):
    rc, out, err = run(capsys, *argv)
    assert rc == 0, err
    assert err == ""
    return json.loads(out)


# -- account ------------------------------------------------------------------------

ACCOUNT_CASES = [
    ("laplace", 0.5, 7, 1.0, 3),
    ("laplace", 0.8, 9, 0.5, 10),   # h beyond 2t = 8: disjoint windows
    ("gaussian", 2.0, 7, 1.0, 3),
    ("gaussian", 1.5, 21, 0.0, 5),  # eps = 0: total variation
]


def _mech(family, param, s):
    return SparseLaplace(lam=param, s=s) if family == "laplace" else SparseGaussian(sigma=param, s=s)


@pytest.mark.parametrize("family,param,s,eps,H", ACCOUNT_CASES)
def test_account_json_schema_and_values(capsys, family, param, s, eps, H):
    pname = "lam" if family == "laplace" else "sigma"
    data = run_json(capsys, "account", "--family", family, f"--{pname}", param, "--s", s, "--eps", eps,
                    "--H", H, "--json")
    assert list(data) == ACCOUNT_KEYS[family]
    m = _mech(family, param, s)
    assert data["family"] == family and data[pname] == param and data["s"] == s
    assert data["eps"] == eps and data["H"] == H
    assert [row["h"] for row in data["per_h"]] == list(range(1, H + 1))
    assert all(list(row) == ["h", "delta", "support_leakage", "overlap"] for row in data["per_h"])
    hs = np.arange(1, H + 1)
    d = m.defect_h(eps, hs)
    np.testing.assert_array_equal([r["delta"] for r in data["per_h"]], d.total)
    np.testing.assert_array_equal([r["support_leakage"] for r in data["per_h"]], d.support_leakage)
    np.testing.assert_array_equal([r["overlap"] for r in data["per_h"]], d.overlap)
    for r in data["per_h"]:
        assert r["support_leakage"] + r["overlap"] == pytest.approx(r["delta"], abs=1e-15)
        if r["h"] > s - 1:
            assert (r["delta"], r["support_leakage"], r["overlap"]) == (1.0, 1.0, 0.0)
    # the JSON states the rigorous upper bound; the rows are the round-to-nearest values
    assert data["delta_star"] == float(m.delta_star_upper(eps, H))
    assert data["delta_star"] >= max(r["delta"] for r in data["per_h"])
    assert data["delta_star"] == pytest.approx(max(r["delta"] for r in data["per_h"]), rel=1e-12, abs=1e-13)
    assert data["r1"] == m.r1 and data["r2"] == m.r2


def test_account_paper_value(capsys):
    """Table I, s = 7: delta* = 0.4686, R1 = 1.1851, R2 = 2.4071."""
    data = run_json(capsys, "account", "--family", "laplace", "--lam", 0.5, "--s", 7, "--eps", 1, "--H", 3, "--json")
    assert (round(data["delta_star"], 4), round(data["r1"], 4), round(data["r2"], 4)) == (0.4686, 1.1851, 2.4071)


def test_range_alias(capsys):
    base = ["account", "--family", "gaussian", "--sigma", 2, "--s", 9, "--eps", 1, "--json"]
    assert run_json(capsys, *base, "--H", 4) == run_json(capsys, *base, "--range", 4)
    dbase = ["design", "--family", "laplace", "--lam", 0.5, "--eps", 1, "--delta", 0.3, "--json"]
    assert run_json(capsys, *dbase, "--H", 3) == run_json(capsys, *dbase, "--range", 3)


def test_spec_alias_of_mechanism(capsys, tmp_path):
    """`design -o` writes a "mechanism spec": every command that reads one takes --spec as well as --mechanism."""
    spec = tmp_path / "spec.json"
    assert run(capsys, "design", "--family", "laplace", "--lam", 0.5, "--eps", 1, "--delta", 0.3, "--H", 3,
               "-o", spec)[0] == 0
    base = ["account", "--eps", 1, "--H", 3, "--json"]
    assert run_json(capsys, *base, "--spec", spec) == run_json(capsys, *base, "--mechanism", spec)
    src = tmp_path / "in.csv"
    src.write_text("v\n" + "\n".join(str(i % 7) for i in range(50)) + "\n")
    outs = []
    for flag in ("--spec", "--mechanism"):
        out = tmp_path / f"out{flag}.csv"
        assert run(capsys, "privatize", src, flag, spec, "-c", "v", "-o", out, "--seed", 3)[0] == 0
        outs.append(out.read_text())
    assert outs[0] == outs[1] and outs[0].startswith("v\n")


def test_account_table(capsys):
    rc, out, err = run(capsys, "account", "--family", "laplace", "--lam", 0.5, "--s", 7, "--eps", 1, "--H", 3)
    assert rc == 0 and err == ""
    assert "0.468622" in out and "0.352728" in out and "0.115894" in out  # h = 3: total, leakage, overlap
    assert "delta_star = 0.4686220522" in out and "h = 3" in out  # 0.46862205214..., rounded up
    assert "R1" in out and "1.185055853" in out and "2.407141651" in out


def test_account_large_H_table_is_summarized_but_json_is_complete(capsys):
    argv = ["account", "--family", "laplace", "--lam", 0.3, "--s", 101, "--eps", 1, "--H", 5000]
    rc, out, err = run(capsys, *argv)
    assert rc == 0
    data_rows = [line for line in out.splitlines() if line.startswith("│")]
    assert 10 <= len(data_rows) <= 25
    assert "of 5000 rows shown" in out
    h_max = int(np.argmax(SparseLaplace(lam=0.3, s=101).delta_h(1.0, np.arange(1, 5001)))) + 1
    assert any(line.split("│")[1].strip() == f"{h_max} *" for line in data_rows)
    assert any(line.split("│")[1].strip() == "5000" for line in data_rows)
    data = run_json(capsys, *argv, "--json")
    assert len(data["per_h"]) == 5000 and data["per_h"][-1]["h"] == 5000


def test_account_small_H_lists_every_row(capsys):
    rc, out, _ = run(capsys, "account", "--family", "gaussian", "--sigma", 3, "--s", 61, "--eps", 1, "--H", 40)
    assert rc == 0
    assert len([line for line in out.splitlines() if line.startswith("│")]) == 40


# -- design -------------------------------------------------------------------------

DESIGN_CASES = [
    ("laplace", {"lam": 0.5}, 1.0, 0.3, 3, "r2"),
    ("gaussian", {"sigma": 2.0}, 1.0, 0.35, 3, "r2"),
    ("laplace", {}, 1.0, 0.3, 3, "r2"),
    ("gaussian", {}, 1.0, 0.3, 2, "r1"),
]


@pytest.mark.parametrize("family,fixed,eps,delta,H,objective", DESIGN_CASES)
def test_design_json_matches_library(capsys, family, fixed, eps, delta, H, objective):
    extra = [a for k, v in fixed.items() for a in (f"--{k}", v)]
    data = run_json(capsys, "design", "--family", family, "--eps", eps, "--delta", delta, "--H", H,
                    "--objective", objective, *extra, "--json")
    assert list(data) == DESIGN_KEYS[family]
    expected = design(family, eps=eps, delta=delta, H=H, objective=objective, **fixed).to_dict()
    assert data == expected
    assert data["delta_star"] <= delta
    m = _mech(family, data["lam" if family == "laplace" else "sigma"], data["s"])
    assert data["delta_star"] == float(m.delta_star_upper(eps, H))
    if fixed:
        assert data["s"] == smallest_support(family, eps=eps, delta=delta, H=H, **fixed)


def test_design_table_and_spec_file(capsys, tmp_path):
    out = tmp_path / "mech.json"
    rc, text, err = run(capsys, "design", "--family", "laplace", "--lam", 0.5, "--eps", 1, "--delta", 0.3,
                        "--H", 3, "-o", out)
    assert rc == 0 and err == ""
    assert "13" in text and "0.2880451567" in text and str(out) in text
    spec = load_spec(out)
    assert spec.mechanism == SparseLaplace(lam=0.5, s=13)
    saved = json.loads(out.read_text())
    expected = design("laplace", eps=1, delta=0.3, H=3, lam=0.5).to_dict()
    assert {k: saved[k] for k in expected} == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mech.json"]  # no temporary left behind


def test_design_json_and_output_together(capsys, tmp_path):
    out = tmp_path / "g.json"
    data = run_json(capsys, "design", "--family", "gaussian", "--eps", 1, "--delta", 0.3, "--H", 2,
                    "--json", "-o", out)  # stdout is the JSON only
    spec = load_spec(out)
    assert (spec.family, spec.param, spec.s) == ("gaussian", data["sigma"], data["s"])
    assert spec.meta == {k: data[k] for k in ("eps", "delta", "H", "delta_star", "r1", "r2")}


# -- errors: one line on stderr, exit status 2, no output file ----------------------

BAD = [
    (["account", "--family", "laplace", "--s", 7, "--eps", 1, "--H", 3], "--lam"),
    (["account", "--family", "gaussian", "--s", 7, "--eps", 1, "--H", 3], "--sigma"),
    (["account", "--family", "cauchy", "--lam", 1, "--s", 7, "--eps", 1, "--H", 3], "family"),
    (["account", "--family", "laplace", "--lam", 1, "--s", 8, "--eps", 1, "--H", 3], "s must be an odd integer"),
    (["account", "--family", "laplace", "--lam", 1, "--s", 0, "--eps", 1, "--H", 3], "s must be an odd integer"),
    (["account", "--family", "laplace", "--lam", 1, "--s", 7, "--eps", "nan", "--H", 3], "eps"),
    (["account", "--family", "laplace", "--lam", 1, "--s", 7, "--eps", -1, "--H", 3], "eps"),
    (["account", "--family", "laplace", "--lam", "nan", "--s", 7, "--eps", 1, "--H", 3], "lam"),
    (["account", "--family", "laplace", "--lam", 1, "--s", 7, "--eps", 1, "--H", 0], "H must be"),
    (["account", "--family", "laplace", "--lam", 1, "--s", 7, "--eps", 1], "--H"),
    (["account", "--family", "laplace", "--lam", 1, "--s", 7.5, "--eps", 1, "--H", 3], "--s"),
    (["account", "--family", "laplace", "--lam", 1, "--s", 7, "--eps", "abc", "--H", 3], "--eps"),
    (["account", "--family", "laplace", "--lam", 1, "--sigma", 1, "--s", 7, "--eps", 1, "--H", 3], "--sigma"),
    (["account", "--family", "laplace", "--lam", 1, "--s", 7, "--eps", 1, "--H", 3, "--bogus"], "--bogus"),
    (["design", "--family", "laplace", "--eps", 1, "--delta", 1.5, "--H", 3], "delta"),
    (["design", "--family", "laplace", "--eps", 1, "--delta", 0.3, "--H", 3, "--objective", "r3"], "objective"),
    (["design", "--family", "gaussian", "--lam", 1, "--eps", 1, "--delta", 0.3, "--H", 3], "--lam"),
    (["design", "--family", "gaussian", "--sigma", 2, "--eps", 1, "--delta", 0.3, "--H", 3], "infinity"),
    (["design", "--family", "laplace", "--eps", "nan", "--delta", 0.3, "--H", 3], "eps"),
    (["design", "--eps", 1, "--delta", 0.3, "--H", 3], "--family"),
]


@pytest.mark.parametrize("argv,needle", BAD, ids=[" ".join(map(str, a[0][1:4])) + f" [{a[1]}]" for a in BAD])
def test_bad_input_one_line_exit_2(capsys, tmp_path, argv, needle):
    out_file = tmp_path / "mech.json"
    extra = ["-o", out_file] if argv[0] == "design" else []
    rc, out, err = run(capsys, *argv, *extra)
    assert rc == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert needle in lines[0]
    assert list(tmp_path.iterdir()) == []  # nothing written, no temporary left


def test_design_output_into_missing_directory(capsys, tmp_path):
    target = tmp_path / "missing" / "mech.json"
    rc, out, err = run(capsys, "design", "--family", "laplace", "--lam", 0.5, "--eps", 1, "--delta", 0.3,
                       "--H", 3, "-o", target)
    assert rc == 2 and len(err.splitlines()) == 1 and "does not exist" in err
    assert list(tmp_path.iterdir()) == []


def test_help_mentions_range_alias(capsys):
    rc, out, _ = run(capsys, "account", "--help")
    assert rc == 0 and "--range" in out and "--H" in out


def test_console_process_exit_status():
    """A real process: bad s gives exit 2 and one stderr line; good input gives JSON."""
    cmd = [sys.executable, "-m", "sparseldp.cli", "account", "--family", "laplace", "--lam", "0.5", "--eps", "1",
           "--H", "3", "--json", "--s"]
    bad = subprocess.run(cmd + ["4"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().count("\n") == 0 and "s must be an odd integer >= 1; got 4" in bad.stderr
    good = subprocess.run(cmd + ["7"], capture_output=True, text=True, timeout=60)
    assert good.returncode == 0 and json.loads(good.stdout)["s"] == 7


# -- design on a finite domain ---------------------------------------------------------

@pytest.mark.parametrize("family,window", [("laplace", "clipped"), ("gaussian", "extended")])
def test_design_on_domain_certified_by_channel(capsys, tmp_path, family, window):
    from sparseldp import SparseChannel

    out = tmp_path / "mech.json"
    got = run_json(capsys, "design", "--family", family, "--eps", 1, "--delta", 1e-3, "--H", 2,
                   "--domain", "0:20", "--window", window, "--json", "-o", out)
    assert got["domain"] == [0, 20] and got["window"] == window
    assert list(got) == DESIGN_KEYS[family] + ["domain", "window"]
    assert got == design_finite(family, eps=1, delta=1e-3, H=2, domain=(0, 20), window=window).to_dict()
    pname = "lam" if family == "laplace" else "sigma"
    build = SparseChannel.laplace if family == "laplace" else SparseChannel.gaussian
    ch = build(**{pname: got[pname]}, s=got["s"], domain=(0, 20), window=window)
    assert ch.delta_star(1.0, 2) == pytest.approx(got["delta_star"], rel=1e-12)
    assert got["delta_star"] <= 1e-3
    spec = load_spec(out)
    assert spec.domain == (0, 20) and spec.window == window


@pytest.mark.parametrize("bad", ["5:2", "0-20", "a:b"])
def test_design_bad_domain(capsys, tmp_path, bad):
    out = tmp_path / "m.json"
    rc, stdout, err = run(capsys, "design", "--family", "laplace", "--eps", 1, "--delta", 1e-3, "--H", 2,
                          "--domain", bad, "-o", out)
    assert rc == 2 and err.count("\n") == 1 and "--domain" in err and not out.exists()
