"""The CLI contract, one regression test per finding of the new-user audit.

No silent privacy loss (every named column privatized, a spec's recorded
guarantee checked and stated), no silent overwrite of the command's own
inputs and outputs, no hang (size limits checked before the work), a clear
word for every mistake (one stderr line, exit status 2), and clean
interruption (no temporary file left behind, exit status 130/143).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import sparseldp as sl
from sparseldp import SparseLaplace
from sparseldp.estimation import estimate_frequencies
from sparseldp.sampling import sample
from sparseldp.cli import estimate as estimate_cli
from cli_helpers import one_error, run

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

SPEC = {"family": "laplace", "lam": 0.5, "s": 7, "eps": 1.0, "H": 3,
        "delta_star": float(SparseLaplace(lam=0.5, s=7).delta_star(1.0, 3))}


@pytest.fixture
def d(tmp_path):
    (tmp_path / "mech.json").write_text(json.dumps(SPEC))
    # values in a random row order: a file ordered by a privatized column is refused (sparseldp.io.order)
    a, b = np.random.default_rng(7).permutation(np.arange(200) % 10), np.random.default_rng(8).permutation(np.arange(200) % 7)
    (tmp_path / "ab.csv").write_text("id,a,b\n" + "".join(f"{i},{a[i]},{50 + b[i]}\n" for i in range(200)))
    return tmp_path


# -- 1. several columns ---------------------------------------------------------------


@pytest.mark.parametrize("how", [["-c", "a", "-c", "b"], ["--columns", "a,b"], ["-c", "a", "--columns", "b"]])
def test_every_named_column_is_privatized(d, capsys, how):
    rc, _, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", *how, "-o", d / "o.csv",
                     "--seed", "1")
    assert rc == 0, err
    src = np.genfromtxt(d / "ab.csv", delimiter=",", names=True, dtype=np.int64)
    out = np.genfromtxt(d / "o.csv", delimiter=",", names=True, dtype=np.int64)
    assert np.array_equal(out["id"], src["id"])
    for col in ("a", "b"):
        diff = out[col] - src[col]
        assert np.all(np.abs(diff) <= 3)  # inside the window
        assert np.count_nonzero(diff) > 100  # privatized, not copied (P(Y = x) = 0.25 here)
    assert "2 reports of one person together: (eps = 2" in err
    assert "basic composition" in err
    assert "copied unchanged, not privatized: column 'id'" in err  # the raw column is named, not hidden


def test_multi_column_json_states_per_person_guarantee(d, capsys):
    rc, out, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "--columns", "a,b", "-o",
                       d / "o.csv", "--json")
    assert rc == 0, err
    summary = json.loads(out)
    assert summary["columns"] == ["a", "b"] and summary["kept_columns"] == ["id"]
    g, gp = summary["guarantee"], summary["guarantee_per_person"]
    assert g["eps"] == 1.0 and g["H"] == 3 and g["source"] == "sampler"
    assert gp["eps"] == 2.0 and gp["reports"] == 2 and gp["delta"] == pytest.approx(min(1, 2 * g["delta"]))
    # the realized sampler's certificate bounds the ideal mechanism's delta_star from above (to rounding)
    assert g["delta"] >= SPEC["delta_star"] * (1 - 1e-9)


@pytest.mark.parametrize("cols, fragment", [
    (["-c", "a", "-c", "a"], "column 'a' is named more than once"),
    (["--columns", "a,,b"], "--columns must be comma-separated column names"),
    ([], "name the column(s) to privatize"),
    (["-c", "a", "-c", "nope"], "column 'nope' not found"),
])
def test_column_mistakes(d, capsys, cols, fragment):
    assert fragment in one_error(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", *cols, "-o", d / "o.csv")
    assert not (d / "o.csv").exists()


@pytest.mark.parametrize("argv", [
    ["account", "--family", "laplace", "--lam", "0.5", "--s", "7", "--eps", "1", "--eps", "2", "--H", "3"],
    ["account", "--family", "laplace", "--lam", "0.5", "--s", "7", "--eps", "1", "--H", "3", "--range", "4"],
    ["design", "--family", "laplace", "--eps", "1", "--delta", "0.1", "--H", "2", "--lam", "0.5", "-o", "x.json",
     "--output", "y.json"],
])
def test_a_repeated_single_value_option_is_an_error(capsys, argv):
    assert "is given more than once" in one_error(capsys, *argv)


@pytest.mark.parametrize("argv, fragment", [
    (["design", "--family", "laplace", "--eps", "1_0", "--delta", "1e-6", "--H", "5"],
     "--eps must be a real number (target eps >= 0); got '1_0'"),  # Python's float() reads ten
    (["design", "--family", "laplace", "--eps=abc", "--delta", "1e-6", "--H", "5"],
     "--eps must be a real number (target eps >= 0); got 'abc'"),
    (["design", "--family", "laplace", "--eps", "1", "--delta", " 1e-6", "--H", "5"],
     "--delta must be a real number (target delta in [0, 1]); got ' 1e-6'"),
    (["design", "--family", "laplace", "--eps", "1", "--delta", "1e-6", "--range", "5.0"],
     "--range must be an integer (privacy range"),
    (["account", "--family", "laplace", "--lam", "0.5", "--s", "7", "--eps", "1", "--H", "1_000"],
     "--H must be an integer"),
])
def test_numbers_are_read_strictly(capsys, argv, fragment):
    err = one_error(capsys, *argv)
    assert fragment in err


@pytest.mark.parametrize("value", ["1", "-1", "+2.5", ".5", "1.", "1e-6", "1E+3", "inf", "-Infinity", "nan"])
def test_plain_decimal_reals_pass_the_syntax_check(value):
    from sparseldp.cli._common import _REAL

    assert _REAL.fullmatch(value)


# -- 2. a spec's claims are checked; the guarantee is stated --------------------------


@pytest.mark.parametrize("spec, fragment", [
    ({**SPEC, "delta_star": 1e-10}, "recorded certificate delta_star = 1e-10 does not hold"),
    ({**SPEC, "delta": 1e-10}, "recorded target delta = 1e-10 does not hold"),
    ({"family": "laplace", "lam": 1e308, "s": 7}, "reports every input unchanged"),
    ({"family": "laplace", "lam": 0.5, "s": 1}, "reports every input unchanged"),
    ({"family": "laplace", "lam": 0.5, "s": 7, "delta_star": 0.5}, "means nothing without the 'eps' and 'H'"),
    ({"family": "laplace", "lam": 0.5, "s": 7, "eps": 1.0}, "it has 'eps' but no 'H'"),
    ({**SPEC, "r2": 0.01}, "records r2 = 0.01"),
])
@pytest.mark.parametrize("command", ["privatize", "estimate", "account"])
def test_a_spec_whose_claims_do_not_hold_is_refused(d, capsys, spec, fragment, command):
    (d / "bad.json").write_text(json.dumps(spec))
    argv = {
        "privatize": ["privatize", d / "ab.csv", "-m", d / "bad.json", "-c", "a", "-o", d / "o.csv"],
        "estimate": ["estimate", d / "ab.csv", "-m", d / "bad.json", "-c", "a", "-o", d / "o.csv", "--domain", "0:9"],
        "account": ["account", "--mechanism", d / "bad.json", "--eps", "1", "--H", "3"],
    }[command]
    assert fragment in one_error(capsys, *argv)
    assert not (d / "o.csv").exists()


def test_privatize_and_estimate_state_the_guarantee(d, capsys):
    rc, _, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "-c", "a", "-o", d / "o.csv")
    assert rc == 0, err
    assert "guarantee per column: (eps = 1, delta <= 0.4687" in err and "H = 3" in err  # 0.46862..., rounded up
    rc, out, err = run(capsys, "estimate", d / "o.csv", "-m", d / "mech.json", "-c", "a", "-o", d / "e.csv",
                       "--domain", "0:9", "--json")
    assert rc == 0, err
    g = json.loads(out)["guarantee"]
    assert (g["eps"], g["H"]) == (1.0, 3) and g["delta"] == pytest.approx(SPEC["delta_star"], rel=1e-9)
    assert g["delta"] >= SPEC["delta_star"] * (1 - 1e-12)


def test_a_vacuous_guarantee_is_refused(d, capsys):
    # H = 10 > 2t = 6: disjoint windows, delta_star = 1 exactly
    (d / "vac.json").write_text(json.dumps({"family": "laplace", "lam": 0.5, "s": 7, "eps": 1.0, "H": 10}))
    assert "protects nothing" in one_error(capsys, "privatize", d / "ab.csv", "-m", d / "vac.json", "-c", "a",
                                           "-o", d / "o.csv")


def test_a_weak_guarantee_warns(d, capsys):
    # lam = 30, s = 3: nearly every report is the input itself (delta just below 1): used, but said so
    (d / "weak.json").write_text(json.dumps({"family": "laplace", "lam": 30, "s": 3, "eps": 1.0, "H": 1}))
    rc, _, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "weak.json", "-c", "a", "-o", d / "o.csv")
    assert rc == 0 and "is a weak guarantee: a report may give its input away" in err
    (d / "strong.json").write_text(json.dumps({"family": "laplace", "lam": 0.2, "s": 137, "eps": 1.0, "H": 5}))
    rc, _, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "strong.json", "-c", "a", "-o", d / "o2.csv")
    assert rc == 0 and "weak guarantee" not in err


def test_a_spec_without_target_is_refused_unless_allowed(d, capsys):
    # lam = 30, s = 3 keeps the input with probability 1 - 2e-13: not "unchanged" in double precision, and
    # without a target nothing says so; privatize refuses to publish with it unless told to
    (d / "nt.json").write_text(json.dumps({"family": "laplace", "lam": 30.0, "s": 3}))
    assert "records no target (eps, H)" in one_error(capsys, "privatize", d / "ab.csv", "-m", d / "nt.json",
                                                     "-c", "a", "-o", d / "o.csv")
    assert not (d / "o.csv").exists()
    rc, _, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "nt.json", "-c", "a", "-o", d / "o.csv",
                     "--allow-no-target")
    assert rc == 0 and "records no target (eps, H)" in err and (d / "o.csv").exists()


def test_a_weak_eps_and_a_target_the_sampler_misses_warn(d, capsys):
    (d / "e40.json").write_text(json.dumps({"family": "laplace", "lam": 30.0, "s": 3, "eps": 40, "H": 1}))
    rc, _, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "e40.json", "-c", "a", "-o", d / "o.csv")
    assert rc == 0 and "eps = 40 is a weak guarantee" in err
    rc, _, err = run(capsys, "design", "--family", "laplace", "--eps", "1", "--delta", "1e-19", "--H", "3",
                     "-o", d / "tiny.json")
    assert rc == 0 and "privatize's sampler draws this mechanism with delta <=" in err  # said at design too
    rc, _, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "tiny.json", "-c", "a", "-o", d / "o2.csv")
    assert rc == 0 and "above the spec's target delta = 1e-19" in err
    rc, _, err = run(capsys, "design", "--family", "laplace", "--eps", "1", "--delta", "1e-6", "--H", "3",
                     "-o", d / "ok.json")
    assert rc == 0 and "warning" not in err
    rc, _, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "ok.json", "-c", "a", "-o", d / "o3.csv")
    assert rc == 0 and "warning" not in err  # an ordinary design: no warning


# -- 3. no overwrite of the command's own inputs and outputs --------------------------


@pytest.mark.parametrize("argv, fragment", [
    (["privatize", "{d}/ab.csv", "-m", "{d}/mech.json", "-c", "a", "-o", "{d}/mech.json"],
     "is the file read by --mechanism"),
    (["privatize", "{d}/ab.csv", "-m", "{d}/mech.json", "-c", "a", "-o", "{d}/link.json"],
     "is the file read by --mechanism"),
    (["privatize", "{d}/ab.csv", "-m", "{d}/mech.json", "-c", "a", "-o", "{d}/ab.csv"], "is the file read by the input"),
    (["estimate", "{d}/ab.csv", "-m", "{d}/mech.json", "-c", "a", "-o", "{d}/mech.json", "--domain", "0:9"],
     "is the file read by --mechanism"),
    (["estimate", "{d}/ab.csv", "-m", "{d}/mech.json", "-c", "a", "-o", "{d}/same.png", "--plot", "{d}/same.png",
      "--domain", "0:9"], "-o and --plot name the same file"),
])
def test_inputs_and_outputs_are_never_overwritten(d, capsys, argv, fragment):
    os.symlink(d / "mech.json", d / "link.json")
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
    assert fragment in one_error(capsys, *[str(a).replace("{d}", str(d)) for a in argv])
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()} == before


# -- 4. limits instead of hangs and floods --------------------------------------------


@pytest.mark.parametrize("argv, fragment", [
    (["design", "--family", "laplace", "--eps", "1", "--delta", "1e-6", "--H", "1000000000000"],
     "H must be an integer in [1, 10000]"),
    (["account", "--family", "laplace", "--lam", "0.5", "--s", "7", "--eps", "1", "--H", "100000000", "--json"],
     "H must be an integer in [1, 1000000]"),
    (["account", "--family", "laplace", "--lam", "0.5", "--s", "9007199254740993", "--eps", "1", "--H",
      "1000000000000"], "H must be an integer in [1, 1000000]"),
    (["estimate", "{d}/ab.csv", "-m", "{d}/mech.json", "-c", "a", "-o", "{d}/e.csv", "--domain", "0:9",
      "--max-iter", "100000000000"], "--max-iter must be an integer in [1, 10000000]"),
    (["privatize", "{d}/ab.csv", "-m", "{d}/mech.json", "-c", "a", "-o", "{d}/o.csv", "--batch-size",
      "1000000000"], "--batch-size must be an integer in [1, 16777216]"),
])
def test_limits_are_checked_before_the_work(d, capsys, argv, fragment):
    t0 = time.perf_counter()
    assert fragment in one_error(capsys, *[str(a).replace("{d}", str(d)) for a in argv])
    assert time.perf_counter() - t0 < 5.0


def test_design_checks_the_output_directory_first(d, capsys):
    t0 = time.perf_counter()
    line = one_error(capsys, "design", "--family", "gaussian", "--eps", "1", "--delta", "1e-9", "--H", "50", "-o",
                     d / "nodir" / "x.json")
    assert "does not exist" in line and time.perf_counter() - t0 < 1.0


# -- 5. edges said in words ---------------------------------------------------------------


def test_design_pure_ldp_on_z_cites_theorem_1(capsys):
    t0 = time.perf_counter()
    line = one_error(capsys, "design", "--family", "laplace", "--eps", "1", "--delta", "0", "--H", "2")
    assert "Theorem 1" in line and "--domain" in line and time.perf_counter() - t0 < 1.0


def test_design_delta_one_warns(capsys, tmp_path):
    rc, out, err = run(capsys, "design", "--family", "laplace", "--eps", "1", "--delta", "1", "--H", "2", "--json")
    assert rc == 0 and "warning: delta = 1 certifies nothing" in err
    # with -o: one error line (it printed the warning, then the spec check's error), no file
    line = one_error(capsys, "design", "--family", "laplace", "--eps", "1", "--delta", "1", "--H", "2",
                     "-o", tmp_path / "d.json")
    assert "delta = 1 certifies nothing" in line and "no spec is written" in line
    assert not (tmp_path / "d.json").exists()


@pytest.mark.parametrize("window, fragment", [("clipped", "applies only with --domain"),
                                              ("bogus", "--window must be 'clipped' or 'extended'")])
def test_design_window_needs_a_domain(capsys, window, fragment):
    assert fragment in one_error(capsys, "design", "--family", "laplace", "--eps", "1", "--delta", "0.1", "--H", "2",
                                 "--window", window)


# -- 6. formats and streams -----------------------------------------------------------------


def _reports(d: Path) -> Path:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 10, 3000)
    y = SparseLaplace(lam=0.5, s=7).sample(x, rng=1)
    (d / "rep.csv").write_text("y\n" + "\n".join(map(str, y)) + "\n")
    return d / "rep.csv"


@pytest.mark.parametrize("name, kind", [("e.csv", "csv"), ("e.tsv", "tsv"), ("e.parquet", "parquet"),
                                        ("e.pq", "parquet")])
def test_estimate_writes_the_format_its_extension_says(d, capsys, name, kind):
    rep = _reports(d)
    rc, _, err = run(capsys, "estimate", rep, "-m", d / "mech.json", "-c", "y", "-o", d / name, "--domain", "0:9")
    assert rc == 0, err
    if kind == "parquet":
        t = pq.read_table(d / name)
        assert t.column_names == ["value", "frequency", "ci_low", "ci_high"] and t.num_rows == 10
        assert abs(sum(t.column("frequency").to_pylist()) - 1) < 1e-9
        lo, f, hi = (np.array(t.column(c).to_pylist()) for c in ("ci_low", "frequency", "ci_high"))
        assert np.all(lo <= hi)
    else:
        sep = "," if kind == "csv" else "\t"
        assert (d / name).read_text().splitlines()[0] == sep.join(["value", "frequency", "ci_low", "ci_high"])


def test_estimate_refuses_an_unknown_output_extension(d, capsys):
    rep = _reports(d)
    assert "-o must end in .csv, .tsv, .parquet" in one_error(
        capsys, "estimate", rep, "-m", d / "mech.json", "-c", "y", "-o", d / "e.txt", "--domain", "0:9")


def _cli(*args, stdin=None, cwd=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "sparseldp", *map(str, args)], input=stdin, capture_output=True,
                          timeout=timeout, cwd=cwd)


def test_stdin_and_stdout(d):
    data = (d / "ab.csv").read_bytes()
    proc = _cli("privatize", "-", "-m", d / "mech.json", "-c", "a", "-o", "-", "--seed", "2", stdin=data, cwd=d)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode().splitlines()
    assert lines[0] == "id,a,b" and len(lines) == 201
    assert not (d / "-").exists()
    proc2 = _cli("estimate", "-", "-m", d / "mech.json", "-c", "a", "-o", "-", "--domain", "0:9", stdin=proc.stdout,
                 cwd=d)
    assert proc2.returncode == 0, proc2.stderr
    table = proc2.stdout.decode().splitlines()
    assert table[0] == "value,frequency,ci_low,ci_high" and len(table) == 11
    assert b"mean =" in proc2.stderr  # the summary goes to stderr when stdout carries the table
    assert not (d / "-").exists()


# -- 7. interrupted runs ------------------------------------------------------------------------


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_leaves_no_temporary_file(d, sig, status):
    proc = subprocess.Popen([sys.executable, "-m", "sparseldp", "privatize", "-", "-m", str(d / "mech.json"), "-c",
                             "a", "-o", str(d / "o.csv")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=d)
    proc.stdin.write(b"a\n1\n2\n3\n")
    proc.stdin.flush()
    deadline = time.time() + 60
    while time.time() < deadline and not any(".sparseldp-" in p.name for p in d.iterdir()):
        time.sleep(0.05)  # the run has started once its temporary output exists
    assert any(".sparseldp-" in p.name for p in d.iterdir())
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: interrupted by"), err
    assert sorted(p.name for p in d.iterdir()) == ["ab.csv", "mech.json"]


def test_a_stale_temporary_file_is_cleaned(d, capsys):
    stale = d / ".o.csv.sparseldp-999999999-0123abcd.tmp"
    stale.write_text("partial")
    live = d / f".o.csv.sparseldp-{os.getpid()}-0123abcd.tmp"  # a run in progress: left alone
    live.write_text("partial")
    rc, _, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "-c", "a", "-o", d / "o.csv")
    assert rc == 0, err
    assert not stale.exists() and live.exists() and (d / "o.csv").exists()


# -- 8. what a user expects of a command-line tool ----------------------------------------------


def test_version_help_and_module_entry(capsys):
    import sparseldp

    rc, out, _ = run(capsys, "--version")
    assert rc == 0 and out.strip() == f"sparseldp {sparseldp.__version__}"
    rc, out, _ = run(capsys, "-h")
    assert rc == 0 and "privatize" in out
    rc, out, _ = run(capsys, "account", "-h")
    assert rc == 0 and "--mechanism" in out
    rc, out, _ = run(capsys)
    assert rc == 0 and "Usage" in out  # bare `sparseldp` shows the help
    proc = _cli("--version")
    assert proc.returncode == 0 and proc.stdout.decode().startswith("sparseldp ")


def test_without_the_cli_extra_one_line_names_it():
    code = ("import sys; sys.modules['typer'] = None; sys.argv = ['sparseldp', '--help']; "
            "from sparseldp._entry import main; main()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "pip install 'sparseldp[cli]'" in proc.stderr


def test_license_file_matches_the_declared_license():
    root = Path(__file__).resolve().parents[1]
    text = (root / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0" in text
    assert 'license = "Apache-2.0"' in (root / "pyproject.toml").read_text()


def test_a_blank_line_in_a_single_column_csv_is_a_missing_value(d, capsys):
    (d / "one.csv").write_text("a\n1\n\n2\n")
    line = one_error(capsys, "privatize", d / "one.csv", "-m", d / "mech.json", "-c", "a", "-o", d / "o.csv")
    assert "line 3" in line and "missing value" in line


def test_one_report_says_why_there_is_no_mean(d, capsys):
    (d / "r1.csv").write_text("y\n4\n")
    rc, out, err = run(capsys, "estimate", d / "r1.csv", "-m", d / "mech.json", "-c", "y", "-o", d / "e.csv",
                       "--domain", "0:9", "--json")
    assert rc == 0, err
    assert json.loads(out)["mean"] is None and "mean is not estimated from a single report" in err


def test_one_row_is_singular(d, capsys):
    (d / "one.csv").write_text("a\n4\n")
    rc, _, err = run(capsys, "privatize", d / "one.csv", "-m", d / "mech.json", "-c", "a", "-o", d / "o.csv")
    assert rc == 0 and "privatized 1 row of column 'a'" in err


def test_out_of_range_report_explains_the_range(d, capsys):
    (d / "r.csv").write_text("y\n1\n74\n")
    line = one_error(capsys, "estimate", d / "r.csv", "-m", d / "mech.json", "-c", "y", "-o", d / "e.csv",
                     "--domain", "-70:70")
    assert "[-73, 73]" in line and "radius t = 3" in line


# -- 9. hostile files and one line per refusal ----------------------------------------------------


@pytest.mark.parametrize("argv, fragment", [
    (["privatize", "{d}/ab.csv", "-m", "{d}/nested.json", "-c", "a", "-o", "{d}/o.csv"], "nested too deeply"),
    (["estimate", "{d}/ab.csv", "-m", "{d}/nested.json", "-c", "a", "-o", "{d}/o.csv", "--domain", "0:9"],
     "nested too deeply"),
    (["privatize", "{d}/ab.csv", "-m", "/dev/zero", "-c", "a", "-o", "{d}/o.csv"], "not a regular file"),
    (["privatize", "{d}/ab.csv", "-m", "{d}", "-c", "a", "-o", "{d}/o.csv"], "it is a directory"),
    (["privatize", "{d}/ab.csv", "-m", "{d}/mech.json", "-c", "a", "-o", "{d}/o.csv", "--seed", "1", "--columns",
      "nope"], "column 'nope' not found"),
    (["privatize", "{d}/ab.csv", "-m", "{d}/mech.json", "-c", "a", "-o", "{d}", "--seed", "1"], "it is a directory"),
    (["privatize", "{d}/nothere.csv", "-m", "{d}/mech.json", "-c", "a", "-o", "{d}/o.csv", "--seed", "1"],
     "cannot read input"),
    (["privatize", "{d}/ab.csv", "-m", "{d}/mech.json", "-c", "", "-o", "{d}/o.csv", "--seed", "1"],
     "non-empty column name"),
    (["privatize", "{d}/ab.csv", "-m", "{d}/mech.json", "-c", "a", "-o", "{d}/o.parquet", "--seed", "1"],
     "looks like parquet but the input is csv"),
])
def test_hostile_input_one_line(d, capsys, argv, fragment):
    (d / "nested.json").write_text("[" * 100_000 + "]" * 100_000)
    before = sorted(p.name for p in d.iterdir())
    assert fragment in one_error(capsys, *[str(a).replace("{d}", str(d)) for a in argv])
    assert sorted(p.name for p in d.iterdir()) == before


def test_dev_zero_as_csv_stops_at_the_record_limit(d, capsys):
    t0 = time.perf_counter()
    line = one_error(capsys, "privatize", "/dev/zero", "--format", "csv", "-m", d / "mech.json", "-c", "a", "-o",
                     d / "o.csv")
    assert "longer than" in line and time.perf_counter() - t0 < 30


# -- 12. no NaN error bar ---------------------------------------------------------------------------


def test_clipped_estimate_with_empty_tail_has_a_finite_error_bar(tmp_path, capsys):
    spec = {"family": "laplace", "lam": 0.5, "s": 7, "domain": [0, 120], "window": "clipped"}
    (tmp_path / "m.json").write_text(json.dumps(spec))
    ages = np.random.default_rng(3).integers(0, 100, 20_000)
    (tmp_path / "ages.csv").write_text("age\n" + "\n".join(map(str, ages)) + "\n")
    rc, _, err = run(capsys, "privatize", tmp_path / "ages.csv", "-m", tmp_path / "m.json", "-c", "age", "-o",
                     tmp_path / "p.csv", "--seed", "9", "--allow-no-target")
    assert rc == 0, err
    rc, out, err = run(capsys, "estimate", tmp_path / "p.csv", "-m", tmp_path / "m.json", "-c", "age", "-o",
                       tmp_path / "est.csv", "--json")
    assert rc == 0, err
    mean = json.loads(out)["mean"]
    assert np.isfinite(mean["stderr"]) and mean["stderr"] > 0
    assert mean["ci_low"] < 49.5 < mean["ci_high"]


def test_estimate_warns_when_its_intervals_have_zero_width(tmp_path, capsys, monkeypatch):
    # a flat column: EM's uniform start fits it already, but auto's stop is at least one step, so the refits
    # vary and the intervals have width; where every bootstrap refit is the same distribution (forced here)
    # each interval is a point, and the CLI says so on stderr (and still writes its output)
    from sparseldp.estimation import intervals

    (tmp_path / "m.json").write_text(json.dumps({"family": "laplace", "lam": 0.5, "s": 21}))
    (tmp_path / "x.csv").write_text("x\n" + "\n".join(map(str, np.arange(30).repeat(200))) + "\n")
    rc, _, err = run(capsys, "privatize", tmp_path / "x.csv", "-m", tmp_path / "m.json", "-c", "x", "-o",
                     tmp_path / "y.csv", "--seed", "1", "--keep-order", "--allow-no-target")  # sorted on purpose: the same draw as before
    assert rc == 0, err
    argv = ("estimate", tmp_path / "y.csv", "-m", tmp_path / "m.json", "-c", "x", "-o", tmp_path / "e.csv",
            "--domain", "0:29", "--json")
    rc, out, err = run(capsys, *argv)
    assert rc == 0, err
    assert "are all the same distribution" not in err
    row = {r["statistic"]: r for r in json.loads(out)["statistics"]}["mean"]
    assert row["ci_high"] - row["ci_low"] > 1e-3
    real = intervals._refit_replicates

    def same(model, C, *a, **k):
        P, ok, info, single, relaxed = real(model, C, *a, **k)
        return np.tile(P[0], (P.shape[0], 1)), ok, info, single, relaxed

    monkeypatch.setattr(intervals, "_refit_replicates", same)
    rc, out, err = run(capsys, *argv)
    assert rc == 0, err
    assert "warning: the 100 bootstrap refits (em steps=" in err and "are all the same distribution" in err
    assert (tmp_path / "e.csv").exists()


def test_estimate_reports_derived_statistics_with_intervals(d, capsys):
    rep = _reports(d)
    rc, out, err = run(capsys, "estimate", rep, "-m", d / "mech.json", "-c", "y", "-o", d / "e.csv", "--domain",
                       "0:9", "--method", "ems", "--quantiles", "0.25,0.5", "--range", "2:6", "--json")
    assert rc == 0, err
    rows = {r["statistic"]: r for r in json.loads(out)["statistics"]}
    assert set(rows) == {"mean", "variance", "quantile 0.25", "quantile 0.5", "P(2 <= X <= 6)"}
    for r in rows.values():
        assert r["ci_low"] <= r["value"] + 1e-12 and r["value"] <= r["ci_high"] + 1e-12 or r["statistic"] == "variance"
    assert 0.0 < rows["P(2 <= X <= 6)"]["value"] < 1.0
    rc, out, err = run(capsys, "estimate", rep, "-m", d / "mech.json", "-c", "y", "-o", d / "e2.csv", "--domain",
                       "0:9", "--bootstrap", "0", "--json")
    assert rc == 0 and all(r["ci_low"] is None for r in json.loads(out)["statistics"])
    assert (d / "e2.csv").read_text().splitlines()[0] == "value,frequency"
    rc, out, err = run(capsys, "estimate", rep, "-m", d / "mech.json", "-c", "y", "-o", d / "e3.csv", "--domain",
                       "0:9", "--method", "ems", "--quantiles", "0.5", "--quantile-method", "interpolated", "--json")
    assert rc == 0, err
    irow = {r["statistic"]: r for r in json.loads(out)["statistics"]}["quantile 0.5 (interpolated)"]
    # the grouped-data median lies in the cell of the value median, with an interval around it
    assert abs(irow["value"] - rows["quantile 0.5"]["value"]) <= 0.5
    assert irow["ci_low"] <= irow["value"] <= irow["ci_high"]


def test_estimate_robust_intervals_hold_the_plain_ones(d, capsys):
    rep = _reports(d)
    base = ["estimate", rep, "-m", d / "mech.json", "-c", "y", "--domain", "0:9", "--method", "ems", "--range", "2:6"]
    rc, out, err = run(capsys, *base, "-o", d / "e.csv", "--json")
    assert rc == 0, err
    plain = json.loads(out)
    rc, out, err = run(capsys, *base, "-o", d / "r.csv", "--json", "--robust")
    assert rc == 0, err
    rob = json.loads(out)
    assert rob["robust"] is True and plain["robust"] is False
    for a, b in zip(plain["statistics"], rob["statistics"]):  # the same estimate, wider (or equal) intervals
        assert a["statistic"] == b["statistic"] and a["value"] == b["value"]
        assert b["ci_low"] <= a["ci_low"] + 1e-12 and a["ci_high"] <= b["ci_high"] + 1e-12
    assert any(b["ci_high"] - b["ci_low"] > a["ci_high"] - a["ci_low"] + 1e-9
               for a, b in zip(plain["statistics"], rob["statistics"]))
    lo = lambda f: np.array([float(line.split(",")[2]) for line in f.read_text().splitlines()[1:]])  # noqa: E731
    assert np.all(lo(d / "r.csv") <= lo(d / "e.csv") + 1e-12)
    # on the terminal: the table says so; without --robust, a line says what the intervals assume
    rc, out, err = run(capsys, *base, "-o", d / "r2.csv", "--robust")
    assert rc == 0 and "robust intervals: the hull of the estimate's (ems) and the MLE's" in out
    assert "add --robust" not in out
    rc, out, err = run(capsys, *base, "-o", d / "e2.csv")
    assert rc == 0 and "assuming the distribution is as smooth; for heaped or rounded values add --robust" in out


def test_estimate_profile_adds_likelihood_ratio_intervals(d, capsys, monkeypatch):
    rep = _reports(d)
    base = ["estimate", rep, "-m", d / "mech.json", "-c", "y", "--domain", "0:9", "--range", "2:6",
            "--quantiles", "0.5"]
    rc, out, err = run(capsys, *base, "-o", d / "e.csv", "--json", "--profile", "--bootstrap", "0")
    assert rc == 0, err
    summary = json.loads(out)
    assert summary["profile"] is True
    rows = {r["statistic"]: r for r in summary["statistics"]}
    for name in ("mean", "variance", "quantile 0.5", "P(2 <= X <= 6)"):
        r = rows[name]
        assert r["lr_low"] < r["lr_high"] and r["ci_low"] is None  # --bootstrap 0: no bootstrap intervals
    assert 0.0 <= rows["P(2 <= X <= 6)"]["lr_low"] and rows["P(2 <= X <= 6)"]["lr_high"] <= 1.0
    assert 0 <= rows["mean"]["lr_low"] and rows["mean"]["lr_high"] <= 9
    assert 0 <= rows["variance"]["lr_low"] <= rows["variance"]["value"] <= rows["variance"]["lr_high"] <= 4.5**2
    rc, out, err = run(capsys, *base, "-o", d / "e2.csv", "--profile", "--bootstrap", "20")
    assert rc == 0 and "LR high" in out and "likelihood-ratio intervals (profile likelihood" in out
    # on by default where it is modelled to be cheap (likelihood_ratio.modelled_seconds at most
    # _AUTO_PROFILE_SECONDS), --no-profile turns it off; the summary records the modelled time
    rc, out, err = run(capsys, *base, "-o", d / "e3.csv", "--json", "--bootstrap", "20")
    summary = json.loads(out)
    assert rc == 0 and summary["profile"] is True and "lr_low" in summary["statistics"][0]
    assert 0.0 < summary["profile_modelled_seconds"] <= estimate_cli._AUTO_PROFILE_SECONDS
    rc, out, err = run(capsys, *base, "-o", d / "e3.csv", "--json", "--no-profile")
    assert rc == 0 and "lr_low" not in json.loads(out)["statistics"][0]
    assert json.loads(out)["profile"] is False and "ruled_out" not in json.loads(out)
    assert "profile_modelled_seconds" not in json.loads(out)  # asked: nothing modelled
    rc, out, err = run(capsys, *base, "-o", d / "e4.csv", "--bootstrap", "20")
    assert rc == 0 and "LR high" in out and "modelled at" not in out  # (a spinner's label, not printed)
    # by cost, not by the domain's size: 201 values under this narrow window are cheap (the rule before,
    # at most 200 values, left them off)
    wide = ["estimate", rep, "-m", d / "mech.json", "-c", "y", "--domain", "0:200", "--quantiles", "0.5"]
    rc, out, err = run(capsys, *wide, "-o", d / "e5.csv", "--json", "--bootstrap", "20")
    summary = json.loads(out)
    assert rc == 0 and summary["profile"] is True and "lr_low" in summary["statistics"][0]
    # off by default where modelled above the budget; the summary says how to ask, and what it would cost
    monkeypatch.setattr(estimate_cli, "_AUTO_PROFILE_SECONDS", 0.5 * summary["profile_modelled_seconds"])
    rc, out, err = run(capsys, *wide, "-o", d / "e5.csv", "--json", "--bootstrap", "20")
    assert rc == 0 and json.loads(out)["profile"] is False and "lr_low" not in json.loads(out)["statistics"][0]
    assert json.loads(out)["profile_modelled_seconds"] == summary["profile_modelled_seconds"]
    rc, out, err = run(capsys, *wide, "-o", d / "e6.csv", "--bootstrap", "20")
    assert rc == 0 and "LR high" not in out and "--profile for what the reports alone pin down" in out
    assert f"(modelled at {summary['profile_modelled_seconds']:.0f} s here)" in out
    # --profile-values needs the statistics' intervals: with --no-profile it is refused, nothing written
    err = one_error(capsys, *base, "-o", d / "e7.csv", "--no-profile", "--profile-values")
    assert "--profile-values" in err and "--no-profile" in err and not (d / "e7.csv").exists()
    # EMS smooths two atoms away: the reports rule out its P(X = 3), and the CLI says so
    x = np.random.default_rng(2).choice([3, 7], size=5000, p=[0.6, 0.4])
    y = SparseLaplace(lam=0.5, s=7).sample(x, rng=3)
    (d / "atoms.csv").write_text("y\n" + "\n".join(map(str, y)) + "\n")
    rc, out, err = run(capsys, "estimate", d / "atoms.csv", "-m", d / "mech.json", "-c", "y", "--domain", "0:9",
                       "--method", "ems", "--range", "3:3", "--bootstrap", "0", "--profile", "-o", d / "a.csv",
                       "--json")
    assert rc == 0, err
    summary = json.loads(out)
    row = {r["statistic"]: r for r in summary["statistics"]}["P(3 <= X <= 3)"]
    assert row["value"] < row["lr_low"] <= 0.6 <= row["lr_high"]
    assert "P(3 <= X <= 3)" in summary["ruled_out"]
    assert "the reports disfavour the estimate at the 95% level" in err and "P(3 <= X <= 3) 0.1" in err
    # confirmed by simulation: none of 19 report sets drawn from the estimate came as far from its maximum
    assert row["lr_check"]["checked"] and row["lr_check"]["disfavoured"] and row["lr_check"]["test_draws"] == 19
    assert "none of 19 simulations from the estimate came as far" in err and "Monte Carlo p = 0.05" in err
    assert "too narrow" not in err


def test_estimate_checks_the_mean_by_simulation_and_stays_quiet_where_wilks_holds(d, capsys):
    rc, out, err = run(capsys, "estimate", _reports(d), "-m", d / "mech.json", "-c", "y", "--domain", "0:9",
                       "--bootstrap", "0", "--profile", "-o", d / "w.csv", "--json")
    assert rc == 0, err
    check = json.loads(out)["statistics"][0]["lr_check"]
    assert check["checked"] and check["draws"] == 7 and check["chi_square_fails"] is False
    assert check["seconds_per_draw"] > 0 and "too narrow" not in err
    assert "lr_calibrated" not in json.loads(out)["statistics"][0]


def test_estimate_says_when_the_likelihood_ratio_intervals_are_too_narrow_for_the_reports(d, capsys, monkeypatch):
    # randomized response on 100 values, a concentrated truth: the MLE spreads small masses over the empty
    # values, the chi-square intervals miss the true mean, and simulation from the estimate shows why
    from sparseldp.spec import save_spec, spec_from_channel

    mech = sl.baselines.randomized_response(eps=3.0, domain=(0, 99))
    save_spec(spec_from_channel(mech), d / "rr.json")
    gen = np.random.default_rng(0)
    x = np.minimum(gen.geometric(0.1, 5000) - 1, 99)
    (d / "rr.csv").write_text("y\n" + "\n".join(map(str, sample(mech, x, rng=gen))) + "\n")
    # unasked, the calibration runs within a budget of modelled seconds (set here so that every statistic fits)
    monkeypatch.setattr(estimate_cli, "_AUTO_CALIBRATE_SECONDS", 1e9)
    rc, out, err = run(capsys, "estimate", d / "rr.csv", "-m", d / "rr.json", "-c", "y", "--bootstrap", "0",
                       "--profile", "-o", d / "rr_est.csv", "--json")
    assert rc == 0, err
    summary = json.loads(out)
    mean = summary["statistics"][0]
    assert mean["statistic"] == "mean"
    # the chi-square interval missed the true mean (the profile's own, below); the CLI's is calibrated instead
    y = np.loadtxt(d / "rr.csv", skiprows=1, dtype=np.int64)
    chi_lo, chi_hi = estimate_frequencies(y, mech, domain=(0, 99), return_info=True).profile(mech).interval("mean")
    assert not chi_lo <= x.mean() <= chi_hi and mean["lr_low"] <= chi_lo and chi_hi <= mean["lr_high"]
    assert mean["lr_calibrated"]["calibrated"] and mean["lr_calibrated"]["kappa_low"] > 1.93
    assert mean["lr_low"] <= x.mean() <= mean["lr_high"]
    assert "calibrated by simulation instead" in err
    assert all(r["lr_calibrated"]["calibrated"] for r in summary["statistics"])  # mean, variance, quantiles
    variance = summary["statistics"][1]
    assert variance["statistic"] == "variance" and variance["lr_low"] <= x.var() <= variance["lr_high"]
    check = mean["lr_check"]
    # the routine check: 7 draws, 4 or more beyond 1.92 nats flags it (a binomial tail of 1.9e-4 under Wilks)
    assert check["checked"] and check["chi_square_fails"] and check["draws"] == 7 and check["beyond_kappa"] >= 4
    assert summary["ruled_out"] == [] and check["disfavoured"] in (None, False)
    assert "the likelihood-ratio intervals are too narrow for these reports" in err
    assert "reports disfavour" not in err
    # the mean line inverts the channel: unbiased, its interval holds the true mean (the MLE's mean missed here)
    assert summary["mean"]["method"] == "unbiased (channel inversion)"
    assert summary["mean"]["ci_low"] <= x.mean() <= summary["mean"]["ci_high"]
    rc, out, err = run(capsys, "estimate", d / "rr.csv", "-m", d / "rr.json", "-c", "y", "--bootstrap", "0",
                       "--no-profile", "-o", d / "rr_est2.csv")
    assert rc == 0 and "where g inverts the channel" in out and "papers' unbiased" not in out
    # the plot's per-value outline is not calibrated: its legend says the chi-square threshold is too narrow here
    import sparseldp.figures as figures

    labels = []
    render = figures.render_estimate
    monkeypatch.setattr(figures, "render_estimate", lambda *a, **kw: labels.append(kw.get("lr_label")) or render(*a, **kw))
    rc, out, err = run(capsys, "estimate", d / "rr.csv", "-m", d / "rr.json", "-c", "y", "--bootstrap", "0",
                       "--no-calibrate", "-o", d / "rr_est8.csv", "--plot", d / "rr.png")
    assert rc == 0 and (d / "rr.png").exists() and labels and "too narrow for these reports" in labels[-1]
    # the budget is modelled, not clocked: one and a half statistics' worth calibrates the mean alone, every run
    unit = mean["lr_calibrated"]["modelled_seconds"]
    assert unit > 0 and all(r["lr_calibrated"]["modelled_seconds"] == unit for r in summary["statistics"])
    monkeypatch.setattr(estimate_cli, "_AUTO_CALIBRATE_SECONDS", 1.5 * unit)
    for _ in range(2):
        rc, out, err = run(capsys, "estimate", d / "rr.csv", "-m", d / "rr.json", "-c", "y", "--bootstrap", "0",
                           "-o", d / "rr_est7.csv", "--json")
        rows = json.loads(out)["statistics"]
        assert rc == 0 and [r["lr_calibrated"]["calibrated"] for r in rows] == [True] + [False] * (len(rows) - 1)
    # a budget no statistic fits: none calibrated, and the warning says how to ask; --calibrate ignores it
    monkeypatch.setattr(estimate_cli, "_AUTO_CALIBRATE_SECONDS", 0.0)
    rc, out, err = run(capsys, "estimate", d / "rr.csv", "-m", d / "rr.json", "-c", "y", "--bootstrap", "0",
                       "-o", d / "rr_est5.csv", "--json")
    rows = json.loads(out)["statistics"]
    assert rc == 0 and all(r["lr_calibrated"]["calibrated"] is False for r in rows) and "--calibrate or" in err
    rc, out, err = run(capsys, "estimate", d / "rr.csv", "-m", d / "rr.json", "-c", "y", "--bootstrap", "0",
                       "--calibrate", "-o", d / "rr_est6.csv", "--json")
    assert rc == 0 and all(r["lr_calibrated"]["calibrated"] for r in json.loads(out)["statistics"])
    # --no-calibrate: the chi-square intervals, and the warning says how to ask
    rc, out, err = run(capsys, "estimate", d / "rr.csv", "-m", d / "rr.json", "-c", "y", "--bootstrap", "0",
                       "--no-calibrate", "-o", d / "rr_est3.csv", "--json")
    assert rc == 0 and "too narrow" in err and "--calibrate" in err
    rows = json.loads(out)["statistics"]
    assert rows[0]["lr_low"] == pytest.approx(chi_lo) and not any(r.get("lr_calibrated", {}).get("calibrated")
                                                                    for r in rows)
    # refused before any work: --calibrate needs the intervals --no-profile turns off
    err = one_error(capsys, "estimate", d / "rr.csv", "-m", d / "rr.json", "-c", "y", "--no-profile", "--calibrate",
                    "-o", d / "rr_est4.csv")
    assert "--calibrate" in err and "--no-profile" in err and not (d / "rr_est4.csv").exists()


def test_estimate_profile_values_writes_each_values_interval_and_draws_it(d, capsys):
    rep = _reports(d)
    base = ["estimate", rep, "-m", d / "mech.json", "-c", "y", "--domain", "0:9", "--bootstrap", "20"]
    rc, out, err = run(capsys, *base, "-o", d / "v.parquet", "--profile-values", "--json", "--plot", d / "v.png")
    assert rc == 0, err
    summary = json.loads(out)
    assert summary["profile"] is True and summary["profile_values"] is True  # implies --profile
    assert "lr_low" in summary["statistics"][0]
    import pyarrow.parquet as pq

    table = pq.read_table(d / "v.parquet").to_pydict()
    assert list(table) == ["value", "frequency", "ci_low", "ci_high", "lr_low", "lr_high"]
    lo, hi, f = np.array(table["lr_low"]), np.array(table["lr_high"]), np.array(table["frequency"])
    assert np.all((0.0 <= lo) & (lo <= hi) & (hi <= 1.0)) and np.all(hi > 0)
    assert (d / "v.png").read_bytes().startswith(b"\x89PNG")
    # the interval of each value is the profile's
    from sparseldp.estimation import estimate_frequencies
    from sparseldp.spec import load_spec

    mech = load_spec(d / "mech.json").sampler_target()  # what the CLI estimates with
    y = np.loadtxt(rep, skiprows=1, dtype=np.int64)
    est = estimate_frequencies(y, mech, domain=(0, 9), return_info=True)
    want = est.profile(mech).interval("p")
    np.testing.assert_allclose(lo, want[0], atol=1e-12)
    np.testing.assert_allclose(hi, want[1], atol=1e-12)
    np.testing.assert_allclose(f, est.p, atol=1e-12)
    # without the flag: no such columns
    rc, out, err = run(capsys, *base, "-o", d / "w.csv", "--profile")
    assert rc == 0 and (d / "w.csv").read_text().splitlines()[0] == "value,frequency,ci_low,ci_high"


def test_estimate_plot_draws_each_values_interval_unasked_where_modelled_cheap(d, capsys, monkeypatch):
    # under a wide kernel the bootstrap band shows the estimate's spread, not what the reports pin down: --plot
    # draws each value's likelihood-ratio interval beside it where that is modelled cheap (10 values here), and
    # writes no such columns unless --profile-values asks; --no-profile turns it off
    import sparseldp.figures as figures

    drawn = []
    render = figures.render_estimate
    labels = []
    monkeypatch.setattr(figures, "render_estimate", lambda *a, **kw: drawn.append(kw.get("lr"))
                        or labels.append(kw.get("lr_label")) or render(*a, **kw))
    rep = _reports(d)
    base = ["estimate", rep, "-m", d / "mech.json", "-c", "y", "--domain", "0:9", "--bootstrap", "20"]
    rc, out, err = run(capsys, *base, "-o", d / "u.csv", "--json", "--plot", d / "u.png")
    assert rc == 0, err
    summary = json.loads(out)
    assert summary["profile"] is True and summary["profile_values"] is False
    assert summary["plot_profile_values"] is True and 0 < summary["profile_values_modelled_seconds"] <= 10
    assert summary["method"] == "auto" and 0.0 <= summary["selection_tv"] <= 1.0  # auto's members' spread
    assert (d / "u.csv").read_text().splitlines()[0] == "value,frequency,ci_low,ci_high"
    from sparseldp.estimation import estimate_frequencies
    from sparseldp.spec import load_spec

    mech = load_spec(d / "mech.json").sampler_target()
    est = estimate_frequencies(np.loadtxt(rep, skiprows=1, dtype=np.int64), mech, domain=(0, 9), return_info=True)
    want = est.profile(mech).interval("p")
    np.testing.assert_allclose(drawn[-1][0], want[0], atol=1e-12)
    np.testing.assert_allclose(drawn[-1][1], want[1], atol=1e-12)
    assert labels[-1] == "95% likelihood-ratio interval per value"  # the check passes here: no "too narrow"
    rc, out, err = run(capsys, *base, "-o", d / "u2.csv", "--json", "--plot", d / "u2.png", "--no-profile")
    assert rc == 0, err
    summary = json.loads(out)
    assert summary["plot_profile_values"] is False and summary["profile_values_modelled_seconds"] is None
    assert drawn[-1] is None and len(drawn) == 2


def test_estimate_says_which_mean_is_which_and_calls_only_regularized_estimates_so(d, capsys):
    rep = _reports(d)
    base = ["estimate", rep, "-m", d / "mech.json", "-c", "y", "--domain", "0:9", "--bootstrap", "20"]
    rc, out, err = run(capsys, *base, "--method", "inversion", "-o", d / "i.csv")
    assert rc == 0, err
    # two estimators of the mean, each named: the mean line's and the table's
    assert "the 'mean' of the derived statistics below is the distribution estimate's (inversion)" in out
    assert "regularized" not in out  # inversion is unbiased least squares, not a regularized estimate
    rc, out, err = run(capsys, *base, "--method", "em", "-o", d / "m.csv")
    assert rc == 0 and "add --robust" not in out


def test_estimate_refuses_two_inputs_from_standard_input(d, capsys):
    rep = _reports(d)
    msg = one_error(capsys, "estimate", "-", "-m", d / "mech.json", "-c", "y", "-o", d / "e.csv", "--domain", "0:9",
                    "--plot", d / "p.png", "--truth", "-")
    assert "the input and --truth both read standard input ('-'); give all but one as a file" in msg
    assert not (d / "e.csv").exists() and not (d / "p.png").exists()
    del rep


@pytest.mark.parametrize("argv, fragment", [
    (["--robust", "--bootstrap", "0"], "--robust widens the bootstrap intervals, and --bootstrap 0 turns them off"),
    (["--quantiles", "0.5,2"], "--quantiles must be comma-separated numbers in (0, 1)"),
    (["--quantiles", "0.5,,0.9"], "--quantiles must be comma-separated numbers in (0, 1)"),
    (["--quantiles", "0.5,"], "--quantiles must be comma-separated numbers in (0, 1)"),
    (["--quantile-method", "linear"], "--quantile-method must be 'inverted_cdf' or 'interpolated'; got 'linear'"),
    (["--range", "5:1"], "--range must be lo:hi"),
    (["--bootstrap", "1"], "--bootstrap must be 0"),
    (["--confidence", "1.5"], "--confidence must be a number in (0, 1); got 1.5"),
    (["--confidence", "nan"], "--confidence must be a number in (0, 1); got nan"),
])
def test_estimate_statistic_options_are_checked(d, capsys, argv, fragment):
    rep = _reports(d)
    assert fragment in one_error(capsys, "estimate", rep, "-m", d / "mech.json", "-c", "y", "-o", d / "e.csv",
                                 "--domain", "0:9", *argv)
    assert not (d / "e.csv").exists()


def test_estimate_plot_with_truth_and_intervals(d, capsys):
    rep = _reports(d)
    (d / "truth.csv").write_text("y\n" + "\n".join(str(v) for v in range(10)) + "\n")
    rc, _, err = run(capsys, "estimate", rep, "-m", d / "mech.json", "-c", "y", "-o", d / "e.csv", "--domain",
                     "0:9", "--plot", d / "e.png", "--truth", d / "truth.csv")
    assert rc == 0, err
    assert (d / "e.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv, fragment", [
    (["--truth", "{d}/truth.csv"], "give --plot FILE"),
    (["--plot", "{d}/e.png", "--truth-column", "y"], "--truth-column needs --truth FILE"),
    (["--plot", "{d}/e.png", "--truth", "{d}/truth.csv", "--truth-column", "nope"], "column 'nope' not found"),
])
def test_estimate_truth_options_are_checked(d, capsys, argv, fragment):
    rep = _reports(d)
    (d / "truth.csv").write_text("y\n1\n2\n")
    args = [a.replace("{d}", str(d)) for a in argv]
    assert fragment in one_error(capsys, "estimate", rep, "-m", d / "mech.json", "-c", "y", "-o", d / "e.csv",
                                 "--domain", "0:9", *args)
    assert not (d / "e.csv").exists() and not (d / "e.png").exists()


@pytest.mark.parametrize("tty", [True, False])
def test_estimate_shows_its_stages_on_a_terminal_only(d, capsys, monkeypatch, tty):
    # on a terminal: what a long run is doing (erased when done); piped: nothing but the summary
    rc, _, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "-c", "a", "-o", d / "p.csv",
                     "--seed", "2")
    assert rc == 0, err
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)
    rc, out, err = run(capsys, "estimate", d / "p.csv", "-m", d / "mech.json", "-c", "a", "--domain", "0:9",
                       "-o", d / "e.csv", "--bootstrap", "20")
    assert rc == 0, err
    said = " ".join((out + err).split())  # rich wraps long lines
    assert "auto: chose " in said and "nats of the maximum (a certified bound" in said
    assert "the members held-out likelihood does not tell apart lie within TV " in said
    stages = ("reading the reports in column 'a'", "fitting (auto): 10 values, 200 reports", "bootstrap: 20 refits")
    assert all((s in err) == tty for s in stages), err


@pytest.mark.parametrize("tty", [True, False])
def test_privatize_shows_a_progress_bar_on_a_terminal_only(d, capsys, monkeypatch, tty):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)
    rc, out, err = run(capsys, "privatize", d / "ab.csv", "-m", d / "mech.json", "-c", "a", "-o", d / "p.csv",
                       "--seed", "2")
    assert rc == 0, err
    assert ("privatizing" in err) == tty, err
    assert (d / "p.csv").exists()


def test_a_signal_that_surfaces_as_a_library_error_still_ends_as_interrupted(monkeypatch, capsys):
    # under --engine spark a SIGTERM raised inside py4j's socket read came back as py4j's own error,
    # reported as an internal error (exit 70); the run is interrupted (143)
    import signal

    import sparseldp.cli as cli

    def app(**kw):
        cli._SIGNALLED.append(signal.SIGTERM)
        raise RuntimeError("SparkSession does not exist in the JVM")

    monkeypatch.setattr(cli, "app", app)
    assert cli.main(["privatize"]) == 143
    err = capsys.readouterr().err
    assert err == "error: interrupted by SIGTERM; no output file was written\n"

    def app_full(**kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cli, "app", app_full)
    assert cli.main(["report"]) == 2  # and the message says what, not an empty ': '
    assert capsys.readouterr().err == "error: no space left on device (writing the output)\n"
