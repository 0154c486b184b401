"""The streamed file pipeline: sparseldp.io and ``sparseldp privatize``.

Files are small (hundreds of rows); block and batch boundaries are exercised by
shrinking the read block to a few bytes and the batch to a few rows.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparseldp import io as sio
from sparseldp.cli import main as cli_main
from sparseldp.demo_data import AGE_MAX, age_pmf, synthetic_ages, write_demo_csv
from sparseldp.spec import load_spec

LAM, S = 0.4, 7
T = (S - 1) // 2


# -- helpers ------------------------------------------------------------------


@pytest.fixture
def spec_path(tmp_path) -> Path:
    p = tmp_path / "mech.json"
    p.write_text(json.dumps({"family": "laplace", "lam": LAM, "s": S}))
    return p


@pytest.fixture
def domain_spec_path(tmp_path) -> Path:
    p = tmp_path / "mech_dom.json"
    p.write_text(json.dumps({"family": "laplace", "lam": LAM, "s": S, "domain": [0, 99], "window": "extended"}))
    return p


# A CSV template with every awkward feature: BOM, CRLF, quoted separators,
# an escaped quote, a line break inside a quoted field, a blank line, a quoted
# integer, no final line break.  ``{}`` marks the age field.
TEMPLATE = (
    "\ufeffid,age,city,note\r\n"
    '1,{},"Saint-Denis, La Réunion",plain\r\n'
    '2,{},Lyon,"he said ""hi"""\r\n'
    "\r\n"
    '3,{},"New\nYork",\r\n'
    "4,{},,x\r\n"
    "5,{},Brest,last"
)
TEMPLATE_AGES = ["30", '"41"', "-5", "0", "99"]


def _ages_of(path: Path, column: str = "age", delimiter: str = ",") -> list[int]:
    with open(path, newline="", encoding="utf-8-sig") as fh:
        return [int(r[column]) for r in csv.DictReader(fh, delimiter=delimiter)]


def _write_people(path: Path, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ages = rng.integers(0, 100, size=n)
    cities = np.array(["Lyon", "Nantes", "Saint-Denis, La Réunion", 'the "Big" one', "Brest"])[
        rng.integers(0, 5, size=n)]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["id", "age", "city"])
        w.writerows(zip(range(1, n + 1), ages.tolist(), cities.tolist()))
    return ages


def _listing(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


# -- CSV round trips ------------------------------------------------------------


@pytest.mark.parametrize("block", [None, 5, 64])
@pytest.mark.parametrize("batch_size", [1, 2, sio.DEFAULT_BATCH_SIZE])
def test_csv_round_trip_is_byte_exact_outside_the_column(tmp_path, spec_path, monkeypatch, block, batch_size):
    if block is not None:  # records then straddle read blocks
        monkeypatch.setattr(sio, "_BLOCK_BYTES", block)
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_bytes(TEMPLATE.format(*TEMPLATE_AGES).encode())
    result = sio.privatize_file(src, dst, mechanism=spec_path, column="age", batch_size=batch_size, rng=7)
    assert result.rows == 5 and result.seeded
    y = _ages_of(dst)
    x = [30, 41, -5, 0, 99]
    assert all(abs(a - b) <= T for a, b in zip(x, y))
    # Everything but the age fields is the input's bytes, in order.
    assert dst.read_bytes() == TEMPLATE.format(*map(str, y)).encode()


def test_csv_other_columns_header_and_order_kept(tmp_path, spec_path):
    src, dst = tmp_path / "people.csv", tmp_path / "private.csv"
    x = _write_people(src, 300)
    sio.privatize_file(src, dst, mechanism=spec_path, column="age", batch_size=64)
    with open(src, newline="") as a, open(dst, newline="") as b:
        rows_in, rows_out = list(csv.reader(a)), list(csv.reader(b))
    assert rows_out[0] == rows_in[0] == ["id", "age", "city"]
    assert len(rows_out) == len(rows_in)
    assert [(r[0], r[2]) for r in rows_out] == [(r[0], r[2]) for r in rows_in]
    y = np.array([int(r[1]) for r in rows_out[1:]])
    assert np.all(np.abs(y - x) <= T)
    assert np.any(y != x)  # P(no change in 300 rows) = (1/C_t)^300, about 1e-140
    assert set(np.unique(y - x)) <= set(range(-T, T + 1))


def test_tsv_by_extension(tmp_path, spec_path):
    src, dst = tmp_path / "in.tsv", tmp_path / "out.tsv"
    src.write_text("a\tage\n" + "".join(f"x,{i}\t{i}\n" for i in range(20)))
    sio.privatize_file(src, dst, mechanism=spec_path, column="age", rng=1)
    out = dst.read_text().splitlines()
    assert out[0] == "a\tage"
    assert [line.split("\t")[0] for line in out[1:]] == [f"x,{i}" for i in range(20)]
    assert all(abs(int(line.split("\t")[1]) - i) <= T for i, line in enumerate(out[1:]))


def test_header_only_and_blank_lines(tmp_path, spec_path):
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_bytes(b"\n\nid,age\n\n")
    assert sio.privatize_file(src, dst, mechanism=spec_path, column="age").rows == 0
    assert dst.read_bytes() == src.read_bytes()


# -- Parquet ------------------------------------------------------------------------


def _people_table(n: int, age_type=pa.int32()) -> pa.Table:
    rng = np.random.default_rng(3)
    ages = rng.integers(0, 100, size=n)
    age = pa.array(ages, type=age_type) if not pa.types.is_string(age_type) else pa.array([str(a) for a in ages])
    return pa.table({
        "id": pa.array(np.arange(n)),
        "age": age,
        "city": pa.array([None if i % 7 == 0 else f"c{i % 5}" for i in range(n)]),
        "score": pa.array(rng.random(n)),
    })


@pytest.mark.parametrize("age_type", [pa.int32(), pa.int64(), pa.uint8(), pa.string()])
def test_parquet_round_trip(tmp_path, spec_path, age_type):
    table = _people_table(250, age_type)
    src, dst = tmp_path / "in.parquet", tmp_path / "out.pq"
    pq.write_table(table, src)
    result = sio.privatize_file(src, dst, mechanism=spec_path, column="age", batch_size=64)
    assert result.rows == 250 and result.format == "parquet" and not result.seeded
    out = pq.read_table(dst)
    assert out.column_names == table.column_names
    for name in ("id", "city", "score"):
        assert out.column(name).equals(table.column(name))
        assert out.schema.field(name) == table.schema.field(name)
    assert out.schema.field("age").type == pa.int64()
    x = np.array([int(v) for v in table.column("age").to_pylist()])
    y = out.column("age").to_numpy()
    assert np.all(np.abs(y - x) <= T) and np.any(y != x)


def test_parquet_null_and_float_and_bad_string(tmp_path, spec_path):
    out = tmp_path / "out.parquet"
    cases = [
        (pa.array([1, None, 3]), r"row 2: column 'age' is null"),
        (pa.array([1.0, 2.5, 3.0]), r"row 1: column 'age' value '1\.0' is not an integer \(the column has type double"),
        (pa.array(["1", "2", "x7"]), r"row 3: column 'age' value 'x7' is not an integer"),
    ]
    for col, message in cases:
        src = tmp_path / "in.parquet"
        pq.write_table(pa.table({"id": [1, 2, 3], "age": col}), src)
        with pytest.raises(ValueError, match=message):
            sio.privatize_file(src, out, mechanism=spec_path, column="age", batch_size=2)
        assert not out.exists()


# -- randomness ---------------------------------------------------------------------


def test_seeded_runs_reproduce_and_secure_runs_differ(tmp_path, spec_path):
    src = tmp_path / "people.csv"
    _write_people(src, 200)
    outs = {}
    for name, rng in [("a", 42), ("b", 42), ("c", 43), ("d", None), ("e", None)]:
        outs[name] = tmp_path / f"{name}.csv"
        sio.privatize_file(src, outs[name], mechanism=spec_path, column="age", rng=rng, batch_size=50)
    data = {k: v.read_bytes() for k, v in outs.items()}
    assert data["a"] == data["b"]
    # Each comparison fails only if 200 independent reports all coincide, probability < 0.3^200.
    assert data["a"] != data["c"]
    assert data["d"] != data["e"]


def test_seed_is_not_restarted_per_batch(tmp_path, spec_path):
    # 100 rows of the same value in batches of 10: a per-batch re-seed would repeat the noise.
    src, dst = tmp_path / "same.csv", tmp_path / "out.csv"
    src.write_text("age\n" + "50\n" * 100)
    sio.privatize_file(src, dst, mechanism=spec_path, column="age", rng=5, batch_size=10)
    y = np.array(_ages_of(dst)).reshape(10, 10)
    assert not all(np.array_equal(y[0], y[i]) for i in range(1, 10))


# -- validation: bad values -----------------------------------------------------------


@pytest.mark.parametrize("bad, reason", [
    ("12.5", "is not an integer"),
    ("abc", "is not an integer"),
    ("3.0", "is not an integer"),
    ("1e3", "is not an integer"),
    (" 7", "is not an integer"),
    ("--1", "is not an integer"),
    ("", r"is empty \(a missing value\)"),
    ("12345678901234567890", "is outside the supported integer range"),
])
def test_non_integer_value_names_row_and_value_and_leaves_no_file(tmp_path, spec_path, bad, reason):
    src = tmp_path / "in.csv"
    src.write_text(f"id,age\n1,10\n2,20\n3,{bad}\n4,40\n")
    before = _listing(tmp_path)
    out = tmp_path / "out.csv"
    with pytest.raises(ValueError, match=rf"row 3 \(line 4\): column 'age' value {re.escape(repr(bad))} {reason}"):
        sio.privatize_file(src, out, mechanism=spec_path, column="age", batch_size=2)
    assert _listing(tmp_path) == before  # no output, no temporary file


def test_bad_value_after_many_good_batches_and_preexisting_output_untouched(tmp_path, spec_path, monkeypatch):
    monkeypatch.setattr(sio, "_BLOCK_BYTES", 50)
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("age\n" + "".join(f"{i}\n" for i in range(150)) + "oops\n")
    out.write_text("keep me\n")
    with pytest.raises(ValueError, match=r"row 151 \(line 152\): column 'age' value 'oops'"):
        sio.privatize_file(src, out, mechanism=spec_path, column="age", batch_size=7)
    assert out.read_text() == "keep me\n"
    assert _listing(tmp_path) == {"in.csv", "out.csv", "mech.json"}


def test_line_number_counts_quoted_line_breaks(tmp_path, spec_path):
    src = tmp_path / "in.csv"
    src.write_text('note,age\n"two\nlines",1\n\nx,2.0\n')
    with pytest.raises(ValueError, match=r"row 2 \(line 5\): column 'age' value '2\.0'"):
        sio.privatize_file(src, tmp_path / "out.csv", mechanism=spec_path, column="age")


def test_out_of_domain_value(tmp_path, domain_spec_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("id,age\n1,10\n2,150\n3,-1\n")
    with pytest.raises(ValueError, match=r"row 2 \(line 3\): column 'age' value '150' is outside the "
                                         r"mechanism's domain \[0, 99\]"):
        sio.privatize_file(src, out, mechanism=domain_spec_path, column="age")
    assert not out.exists()
    src.write_text("id,age\n1,0\n2,99\n3,50\n")
    sio.privatize_file(src, out, mechanism=load_spec(domain_spec_path), column="age", rng=1)
    assert all(-T <= v <= 99 + T for v in _ages_of(out))


# -- validation: files, columns, specs ------------------------------------------------------


def test_file_level_errors(tmp_path, spec_path):
    good = tmp_path / "in.csv"
    good.write_text("id,age\n1,2\n")
    out = tmp_path / "out.csv"
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"this is not parquet")
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("id,age\n1,2\n3\n")
    unterminated = tmp_path / "open.csv"
    unterminated.write_text('id,age\n1,2\n"3,4\n')
    xlsx = tmp_path / "in.xlsx"
    xlsx.write_bytes(b"PK")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    even_s = tmp_path / "even.json"
    even_s.write_text(json.dumps({"family": "laplace", "lam": 1.0, "s": 4}))
    cases = [
        (dict(input=good, column="nope"), r"column 'nope' not found in .*its columns are 'id', 'age'"),
        (dict(input=tmp_path / "missing.csv"), r"cannot read input .*missing\.csv.*No such file"),
        (dict(input=tmp_path), r"cannot read input"),
        (dict(input=garbage, output=tmp_path / "o.parquet"), r"cannot read .*garbage\.parquet.* as Parquet"),
        (dict(input=ragged), r"malformed CSV .*row 2 \(line 3\) has 1 field, the header has 2"),
        (dict(input=unterminated), r"unterminated quoted field in the record starting on line 3"),
        (dict(input=empty), r"is empty: it has no header line"),
        (dict(mechanism=bad_json), r"mechanism spec .*bad\.json.* is not valid JSON"),
        (dict(mechanism=even_s), r"bad mechanism spec .*s must be an odd integer >= 1; got 4"),
        (dict(mechanism=tmp_path / "nospec.json"), r"cannot read mechanism spec"),
        (dict(output=good), r"is the input file"),
        (dict(output=tmp_path / "no" / "dir.csv"), r"directory .* does not exist"),
        (dict(output=tmp_path / "out.parquet"), r"looks like parquet but the input is csv"),
        (dict(input=xlsx), r"cannot tell the format of .*in\.xlsx.* from its extension '\.xlsx'"),
        (dict(batch_size=0), r"batch_size must be an integer >= 1; got 0"),
    ]
    for overrides, message in cases:
        kwargs = dict(input=good, output=out, mechanism=spec_path, column="age") | overrides
        before = _listing(tmp_path)
        with pytest.raises(ValueError, match=message):
            sio.privatize_file(kwargs.pop("input"), kwargs.pop("output"), **kwargs)
        assert _listing(tmp_path) == before, overrides
    for bad_rng in ("seed", 1.5, True):
        with pytest.raises(TypeError, match="rng must be"):
            sio.privatize_file(good, out, mechanism=spec_path, column="age", rng=bad_rng)
    with pytest.raises(TypeError, match="mechanism must be"):
        sio.privatize_file(good, out, mechanism=42, column="age")


# -- reading: iter_column, column_counts ---------------------------------------------------


def test_iter_column_and_counts_csv_and_parquet(tmp_path, monkeypatch):
    monkeypatch.setattr(sio, "_BLOCK_BYTES", 100)
    values = np.random.default_rng(9).integers(-20, 30, size=500)
    csv_path, pq_path = tmp_path / "r.csv", tmp_path / "r.parquet"
    csv_path.write_text("y,z\n" + "".join(f"{v},q\n" for v in values))
    pq.write_table(pa.table({"z": ["q"] * 500, "y": values}), pq_path)
    expected = np.bincount(values - values.min())
    for path in (csv_path, pq_path):
        batches = list(sio.iter_column(path, "y", batch_size=64))
        assert all(b.dtype == np.int64 for b in batches)
        assert np.array_equal(np.concatenate(batches), values)
        offset, counts = sio.column_counts(path, "y", batch_size=64)
        assert offset == values.min() and np.array_equal(counts, expected)
        offset, counts = sio.column_counts(path, "y", bounds=(-30, 40))
        assert offset == -30 and counts.size == 71 and counts.sum() == 500
        assert np.array_equal(counts[values.min() + 30 : values.max() + 31], expected)
        with pytest.raises(ValueError, match=r"row \d+.*column 'y' value '-?\d+' is outside the allowed range \[0, 10\]"):
            sio.column_counts(path, "y", bounds=(0, 10))


def test_column_counts_edge_cases(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text("y\n")
    assert sio.column_counts(p, "y")[0] == 0 and sio.column_counts(p, "y")[1].size == 0
    assert np.array_equal(sio.column_counts(p, "y", bounds=(2, 4))[1], [0, 0, 0])
    p.write_text("y\n0\n20000000\n")
    with pytest.raises(ValueError, match=r"row 2 \(line 3\).*more than 10000000 integers; pass bounds"):
        sio.column_counts(p, "y")
    p.write_text("y\n1\nx\n")
    with pytest.raises(ValueError, match=r"row 2 \(line 3\): column 'y' value 'x' is not an integer"):
        list(sio.iter_column(p, "y"))


# -- the vectorized integer parser against a scalar reference -------------------------------


def _reference_int(text: str):
    body = text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text
    if re.fullmatch(r"[+-]?[0-9]{1,19}", body) and abs(int(body)) < 10**18:
        return int(body)
    return None


_field = st.one_of(
    st.integers(-(10**19), 10**19).map(str),
    st.integers(-999, 999).map(lambda v: f'"{v}"'),
    st.text(alphabet='0123456789+-." e', max_size=8),
)


@given(st.lists(_field, max_size=30))
def test_parse_ints_matches_reference(fields):
    raw = [f.encode() for f in fields]
    data = np.frombuffer(b"".join(raw), np.uint8)
    ends = np.cumsum([len(r) for r in raw], dtype=np.int64)
    starts = ends - np.array([len(r) for r in raw], dtype=np.int64)
    values, bad = sio._parse_ints(data, starts, ends)
    expected = [_reference_int(f) for f in fields]
    assert bad.tolist() == [e is None for e in expected]
    assert [int(v) for v, e in zip(values, expected) if e is not None] == [e for e in expected if e is not None]


# -- CLI -------------------------------------------------------------------------------------


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    return lines[0]


def test_cli_errors_exit_2_with_one_line_and_no_output(tmp_path, spec_path, domain_spec_path, capsys):
    src = tmp_path / "in.csv"
    src.write_text("id,age\n1,10\n2,12.5\n")
    dom = tmp_path / "dom.csv"
    dom.write_text("id,age\n1,10\n2,100\n")
    bad_spec = tmp_path / "bad.json"
    bad_spec.write_text('{"family": "laplace", "lam": -1, "s": 3}')
    out = tmp_path / "out.csv"
    base = ["privatize", "--mechanism", str(spec_path), "--column", "age"]
    cases = [
        (base + [str(src), "-o", str(out)], r"row 2 \(line 3\): column 'age' value '12\.5' is not an integer"),
        (["privatize", "--mechanism", str(domain_spec_path), "--column", "age", str(dom), "-o", str(out)],
         r"row 2 \(line 3\): column 'age' value '100' is outside the mechanism's domain \[0, 99\]"),
        (["privatize", "--mechanism", str(spec_path), "--column", "nope", str(src), "-o", str(out)],
         r"column 'nope' not found"),
        (base + [str(tmp_path / "missing.csv"), "-o", str(out)], r"cannot read input"),
        (["privatize", "--mechanism", str(bad_spec), "--column", "age", str(src), "-o", str(out)],
         r"bad mechanism spec .*lam must be a real number > 0"),
        (base + [str(src)], r"-o"),  # missing option: usage error, still one line
        (base + [str(src), "-o", str(out), "--batch-size", "0"], r"batch_size must be an integer >= 1"),
    ]
    for argv, message in cases:
        assert cli_main(argv) == 2, argv
        assert re.search(message, _one_error_line(capsys)), argv
        assert not out.exists()


def test_cli_success_summary_and_seed_warning(tmp_path, spec_path, capsys):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    _write_people(src, 50)
    argv = ["privatize", "--mechanism", str(spec_path), "--column", "age", str(src), "-o", str(out)]
    assert cli_main(argv + ["--seed", "3"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "not" in err[0] and "seed" in err[0] and "simulation" in err[0]
    assert re.match(r"privatized 50 rows of column 'age' -> .*out\.csv in \d", err[1])
    first = out.read_bytes()
    assert cli_main(argv + ["--seed", "3"]) == 0
    assert out.read_bytes() == first
    capsys.readouterr()
    assert cli_main(argv) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "warning" not in err[0]


def test_cli_quiet_when_piped(tmp_path, spec_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    _write_people(src, 50)
    proc = subprocess.run(
        [sys.executable, "-m", "sparseldp.cli", "privatize", "--mechanism", str(spec_path), "--column", "age",
         str(src), "-o", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("privatized 50 rows")
    assert "\x1b" not in proc.stderr and "\r" not in proc.stderr  # no bar, no terminal control


def test_progress_callback(tmp_path, spec_path):
    src = tmp_path / "in.csv"
    _write_people(src, 100)
    calls = []
    sio.privatize_file(src, tmp_path / "o.csv", mechanism=spec_path, column="age", batch_size=30,
                       progress=lambda rows, frac: calls.append((rows, frac)))
    assert [r for r, _ in calls] == [30, 60, 90, 100]
    assert calls[-1][1] == 1.0 and all(0 < f <= 1 for _, f in calls)


# -- demo data ---------------------------------------------------------------------------------


def test_demo_data(tmp_path):
    p = age_pmf()
    assert p.shape == (AGE_MAX + 1,) and abs(p.sum() - 1) < 1e-12 and np.all(p > 0)
    a = synthetic_ages(20_000, rng=1)
    assert a.dtype == np.int64 and a.min() >= 0 and a.max() <= AGE_MAX
    assert np.array_equal(a, synthetic_ages(20_000, rng=1))
    # Mean within 5 standard errors of the pmf's mean (false-positive rate < 1e-6).
    ages = np.arange(AGE_MAX + 1)
    mu, sd = (p * ages).sum(), np.sqrt((p * ages**2).sum() - (p * ages).sum() ** 2)
    assert abs(a.mean() - mu) < 5 * sd / np.sqrt(a.size)
    path = tmp_path / "demo.csv"
    write_demo_csv(path, 1234, rng=2)
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["id", "age", "city"] and len(rows) == 1235
    assert [int(r[0]) for r in rows[1:]] == list(range(1, 1235))
    assert all(0 <= int(r[1]) <= AGE_MAX for r in rows[1:])
    assert np.array_equal(np.concatenate(list(sio.iter_column(path, "age"))), [int(r[1]) for r in rows[1:]])
