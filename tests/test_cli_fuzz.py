"""Property-based test of the CLI contract: random argument vectors and hostile files.

Every command is driven with argument vectors drawn from per-command option
tables (valid values, hostile values, repeated options, stdin/stdout ``-``,
paths to corrupted CSV/Parquet/JSON files, devices and directories).  Each run
must keep the contract of :func:`sparseldp.cli.main`:

* exit status 0, or 2 with exactly one non-blank stderr line starting with
  ``error:`` (no traceback, no ``internal error``);
* after a failure the scratch directory is byte-for-byte what it was (no
  partial output, no temporary file); after a success no temporary file is
  left either;
* no run takes longer than :data:`BUDGET` seconds.

The example sequence is derandomized in CI (``tests/conftest.py``);
``HYPOTHESIS_PROFILE=explore`` searches afresh.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparseldp.cli import main

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

BUDGET = 30.0  # seconds per command run

NUM = ["1", "0", "-1", "0.5", "2", "1e-6", "1e308", "nan", "inf", "-inf", "", "abc", "1e-320", " 1", "0x10"]
INT = ["1", "2", "3", "7", "9", "0", "-1", "2.5", "", "x", "1000000000000", "9007199254740993", "100001", "21"]
SPEC = ["{d}/spec.json", "{d}/dom.json", "{d}/lie.json", "{d}/nested.json", "{d}/fuzz.json", "/dev/zero", "{d}",
        "{d}/nothere.json", "{d}/ok.csv", "{d}/notarget.json", "{d}/identity.json", "-"]
DATA = ["{d}/ok.csv", "{d}/rep.csv", "{d}/fuzz.csv", "{d}/data.parquet", "{d}/bad.parquet", "{d}/nothere.csv",
        "{d}", "/dev/zero", "{d}/spec.json", "{d}/fuzz.parquet", "{d}/blank.csv", "{d}/noext"]
OUT = ["{d}/out.csv", "{d}/out.parquet", "{d}/out.png", "{d}/out.json", "{d}/nodir/x.csv", "{d}", "{d}/ok.csv",
       "{d}/spec.json", "{d}/out.txt", "/proc/x.csv", "{d}/out.tsv", "{d}/out.pdf", ""]
COL = ["x", "y", "id", "", "nope", "x,y"]
FAMILY = ["laplace", "gaussian", "Laplace", "bogus", ""]
DOMAIN = ["0:9", "0:20", "-5:5", "9:0", "0:1000000000", "a:b", "0", "", "0:0", "3:3"]

FLAG = None
COMMANDS = {
    "account": {"--family": FAMILY, "--s": INT, "--eps": NUM, "--H": INT, "--lam": NUM, "--sigma": NUM,
                "--mechanism": SPEC, "--json": FLAG, "--range": INT},
    "design": {"--family": FAMILY, "--eps": NUM, "--delta": NUM + ["1e-3", "0.1"], "--H": INT, "--lam": NUM,
               "--sigma": NUM, "--objective": ["r1", "r2", "r3"], "--json": FLAG, "-o": OUT,
               "--domain": DOMAIN, "--window": ["clipped", "extended", "bogus"]},
    "privatize": {"-m": SPEC, "-c": COL, "--columns": ["x", "x,id", "x,x", ",", "id,nope"], "-o": OUT,
                  "--seed": INT, "--batch-size": INT, "--format": ["csv", "tsv", "parquet", "xls", ""],
                  "--json": FLAG},
    "estimate": {"-m": SPEC, "-c": COL, "-o": OUT, "--domain": DOMAIN, "--method": ["em", "ems", "inversion",
                                                                                    "mle"],
                 "--smooth": INT, "--plot": OUT, "--confidence": NUM, "--tol": NUM, "--max-iter": INT,
                 "--json": FLAG, "--format": ["csv", "tsv", "parquet", "xls"],
                 "--quantiles": ["0.5", "0.1,0.9", "2", "x", ""], "--range": DOMAIN,
                 "--bootstrap": ["0", "2", "20", "1", "-1", "100000"], "--truth": DATA,
                 "--truth-column": COL},
    "compare": {"--eps": NUM, "--delta": NUM + ["0.1"], "--H": INT, "--domain": DOMAIN,
                "--n": ["10", "1000", "0", "-5", "10000000000", "x"], "--seed": INT, "--plot": OUT,
                "--families": ["rr", "rr,geometric", "bogus", "", "rr,rr"], "--json": FLAG},
    "report": {"-m": SPEC, "-o": OUT, "--domain": DOMAIN, "--reports": ["1", "3", "0", "-2", "x", "100001"],
               "--n": ["10", "1000", "0", "-5", "x"], "--eps": NUM, "--H": INT},
}
# Options that make a command expensive in the fuzzer's random combinations are kept cheap:
# compare always simulates few people and only cheap families unless the fuzzer overrides them.
DEFAULTS = {"compare": ["--families", "rr", "--n", "200"]}

LAP_TARGET = {"family": "laplace", "lam": 0.5, "s": 7, "eps": 1.0, "H": 2,
              "delta_star": 0.5}  # a true claim (delta_star(1, 2) ~ 0.28)


def _write_fixtures(d: Path, fuzz_bytes: bytes) -> None:
    (d / "ok.csv").write_text("id,x\n1,3\n2,5\n3,-2\n")
    (d / "rep.csv").write_text("y\n1\n2\n3\n4\n5\n6\n0\n")
    (d / "blank.csv").write_text("x\n1\n\n2\n")
    (d / "noext").write_text("x\n1\n")
    (d / "spec.json").write_text(json.dumps(LAP_TARGET))
    (d / "notarget.json").write_text(json.dumps({"family": "laplace", "lam": 0.5, "s": 7}))
    (d / "dom.json").write_text(json.dumps({"family": "gaussian", "sigma": 1.5, "s": 5, "domain": [0, 9],
                                            "window": "clipped", "eps": 1.0, "H": 1}))
    (d / "lie.json").write_text(json.dumps({**LAP_TARGET, "delta_star": 1e-10}))
    (d / "identity.json").write_text(json.dumps({"family": "laplace", "lam": 1e308, "s": 7}))
    (d / "nested.json").write_text("[" * 100_000 + "]" * 100_000)
    (d / "fuzz.json").write_bytes(fuzz_bytes)
    (d / "fuzz.csv").write_bytes(fuzz_bytes)
    table = pa.table({"id": pa.array([1, 2, 3]), "x": pa.array([3, 4, 5]), "y": pa.array([1, 2, 9])})
    pq.write_table(table, d / "data.parquet")
    raw = (d / "data.parquet").read_bytes()
    (d / "bad.parquet").write_bytes(raw[: len(raw) // 2])
    flipped = bytearray(raw)
    if fuzz_bytes:
        for i, b in enumerate(fuzz_bytes[:16]):
            flipped[(b * 7919 + i * 104729) % len(flipped)] ^= 0xFF
    (d / "fuzz.parquet").write_bytes(bytes(flipped))


def _snapshot(d: Path) -> dict:
    out = {}
    for root, dirs, files in os.walk(d):
        for name in files + dirs:
            p = Path(root) / name
            out[str(p.relative_to(d))] = p.read_bytes() if p.is_file() else None
    return out


# A valid command line per command; the fuzzer mutates it (so that successes and
# failures both occur), or builds one from the option table alone.
BASE = {
    "account": ["account", "--family", "laplace", "--lam", "0.5", "--s", "7", "--eps", "1", "--H", "3"],
    "design": ["design", "--family", "laplace", "--eps", "1", "--delta", "1e-3", "--H", "2", "--lam", "0.5"],
    "privatize": ["privatize", "{d}/ok.csv", "-m", "{d}/spec.json", "-c", "x", "-o", "{d}/out.csv", "--seed", "3"],
    "estimate": ["estimate", "{d}/rep.csv", "-m", "{d}/spec.json", "-c", "y", "-o", "{d}/out.csv",
                 "--domain", "0:5"],
    "compare": ["compare", "--eps", "1", "--delta", "0.1", "--H", "2", "--domain", "0:9", "--families", "rr",
                "--n", "200", "--seed", "1"],
    "report": ["report", "-m", "{d}/spec.json", "-o", "{d}/report.html", "--reports", "3"],
}


def _option_at(argv, i, table):
    return argv[i] in table and table[argv[i]] is not FLAG and i + 1 < len(argv)


@st.composite
def argvs(draw):
    command = draw(st.sampled_from(sorted(COMMANDS)))
    table = COMMANDS[command]
    names = sorted(table)
    if draw(st.integers(0, 4)) == 0:  # from scratch: mostly incomplete or contradictory
        argv = [command] + DEFAULTS.get(command, [])
        for _ in range(draw(st.integers(0, 9))):
            opt = draw(st.sampled_from(names))
            argv += [opt] if table[opt] is FLAG else [opt, draw(st.sampled_from(table[opt]))]
        if command in ("privatize", "estimate") and draw(st.booleans()):
            argv.insert(draw(st.integers(1, len(argv))), draw(st.sampled_from(DATA)))
        return argv
    argv = list(BASE[command])
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["value", "value", "add", "drop", "input", "flag"]))
        value_at = [i + 1 for i in range(len(argv)) if _option_at(argv, i, table)]
        if kind == "value" and value_at:
            i = draw(st.sampled_from(value_at))
            argv[i] = draw(st.sampled_from(table[argv[i - 1]]))
        elif kind == "add":
            opt = draw(st.sampled_from(names))
            argv += [opt] if table[opt] is FLAG else [opt, draw(st.sampled_from(table[opt]))]
        elif kind == "drop" and value_at:
            i = draw(st.sampled_from(value_at))
            del argv[i - 1 : i + 1]
        elif kind == "input" and command in ("privatize", "estimate"):
            argv[1] = draw(st.sampled_from(DATA + ["-"]))
        elif kind == "flag":
            argv.append(draw(st.sampled_from(["--json", "--bogus", "-h", "extra", "--version"])))
    return argv


@settings(max_examples=int(os.environ.get("SPARSELDP_FUZZ_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(argv=argvs(), fuzz_bytes=st.binary(max_size=200))
def test_cli_contract_under_random_arguments(argv, fuzz_bytes, capsysbinary, monkeypatch):
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        _write_fixtures(d, fuzz_bytes)
        before = _snapshot(d)
        args = [a.replace("{d}", tmp) for a in argv]
        # stdin: a small CSV of reports (commands reading "-" get it; others ignore it)
        import io
        import sys

        fake_stdin = io.TextIOWrapper(io.BytesIO(b"x,y\n1,2\n3,4\n"), encoding="utf-8")
        monkeypatch.setattr(sys, "stdin", fake_stdin)
        capsysbinary.readouterr()
        t0 = time.perf_counter()
        rc = main(args)
        elapsed = time.perf_counter() - t0
        out, err = capsysbinary.readouterr()
        err = err.decode("utf-8", errors="replace")
        after = _snapshot(d)
    assert elapsed < BUDGET, (argv, elapsed)
    assert "Traceback" not in err and "internal error" not in err, (argv, err)
    assert rc in (0, 2), (argv, rc, err)
    leftovers = [name for name in after if ".sparseldp-" in name and name.endswith(".tmp")]
    assert not leftovers, (argv, leftovers)
    if rc == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err)
        assert after == before, (argv, sorted(set(after) ^ set(before)))
    else:
        # a success writes only the files named as outputs (never an input, never another fixture)
        outputs = {str(Path(args[i + 1]).resolve().relative_to(Path(tmp).resolve()))
                   for i, a in enumerate(args[:-1]) if a in ("-o", "--plot") and args[i + 1].startswith(tmp + "/")}
        changed = [k for k in before if after.get(k, b"<gone>") != before[k] and k not in outputs]
        assert not changed, (argv, changed)
