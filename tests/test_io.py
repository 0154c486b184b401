"""The streamed file pipeline: sparseldp.io and ``sparseldp privatize``.

Files are small (hundreds of rows); block and batch boundaries are exercised by
shrinking the read block to a few bytes and the batch to a few rows.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import threading
import time
from io import BytesIO
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
        monkeypatch.setattr(sio.csvio, "_BLOCK_BYTES", block)
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
        (pa.array([1.0, 2.5, 3.0]), r"row 1: column 'age': the value is not an integer \(the column has type double"),
        (pa.array(["1", "2", "x7"]), r"row 3: column 'age': the value is not an integer"),
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
def test_non_integer_value_names_row_not_value_and_leaves_no_file(tmp_path, spec_path, bad, reason):
    src = tmp_path / "in.csv"
    src.write_text(f"id,age\n1,10\n2,20\n3,{bad}\n4,40\n")
    before = _listing(tmp_path)
    out = tmp_path / "out.csv"
    with pytest.raises(ValueError, match=rf"row 3 \(line 4\): column 'age': the value {reason}") as info:
        sio.privatize_file(src, out, mechanism=spec_path, column="age", batch_size=2)
    assert not bad.strip() or bad.strip() not in str(info.value)  # the raw value is not echoed
    assert _listing(tmp_path) == before  # no output, no temporary file


def test_bad_value_after_many_good_batches_and_preexisting_output_untouched(tmp_path, spec_path, monkeypatch):
    monkeypatch.setattr(sio.csvio, "_BLOCK_BYTES", 50)
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("age\n" + "".join(f"{i}\n" for i in range(150)) + "oops\n")
    out.write_text("keep me\n")
    with pytest.raises(ValueError, match=r"row 151 \(line 152\): column 'age': the value is not an integer"):
        sio.privatize_file(src, out, mechanism=spec_path, column="age", batch_size=7)
    assert out.read_text() == "keep me\n"
    assert _listing(tmp_path) == {"in.csv", "out.csv", "mech.json"}


def test_line_number_counts_quoted_line_breaks(tmp_path, spec_path):
    src = tmp_path / "in.csv"
    src.write_text('note,age\n"two\nlines",1\n\nx,2.0\n')
    with pytest.raises(ValueError, match=r"row 2 \(line 5\): column 'age': the value is not an integer"):
        sio.privatize_file(src, tmp_path / "out.csv", mechanism=spec_path, column="age")


def test_out_of_domain_value(tmp_path, domain_spec_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("id,age\n1,10\n2,150\n3,-1\n")
    with pytest.raises(ValueError, match=r"row 2 \(line 3\): column 'age': the value is outside the "
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
    monkeypatch.setattr(sio.csvio, "_BLOCK_BYTES", 100)
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
        with pytest.raises(ValueError, match=r"row \d+.*column 'y': the value is outside the allowed range \[0, 10\]"):
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
    with pytest.raises(ValueError, match=r"row 2 \(line 3\): column 'y': the value is not an integer"):
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


# -- several columns in one pass ---------------------------------------------------------------

# Two integer columns, deliberately named in the opposite order of the file, plus every awkward
# CSV feature of TEMPLATE (BOM, CRLF, quoted separators, a line break inside quotes, a blank line).
TWO_TEMPLATE = (
    "\ufeffid,b,city,a\r\n"
    '1,{},"Saint-Denis, La Réunion",{}\r\n'
    '2,{},"he said ""hi""",{}\r\n'
    "\r\n"
    '3,{},"New\nYork",{}\r\n'
    "4,{},,{}"
)
TWO_B = ['"7"', "-3", "0", "50"]
TWO_A = ["10", "11", '"12"', "-13"]


def _two_columns(path: Path) -> tuple[list[int], list[int]]:
    with open(path, newline="", encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    return [int(r["b"]) for r in rows], [int(r["a"]) for r in rows]


@pytest.mark.parametrize("block", [None, 7])
@pytest.mark.parametrize("batch_size", [1, 3, sio.DEFAULT_BATCH_SIZE])
def test_several_columns_byte_exact_elsewhere(tmp_path, spec_path, monkeypatch, block, batch_size):
    if block is not None:
        monkeypatch.setattr(sio.csvio, "_BLOCK_BYTES", block)
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_bytes(TWO_TEMPLATE.format(*[v for pair in zip(TWO_B, TWO_A) for v in pair]).encode())
    result = sio.privatize_file(src, dst, mechanism=spec_path, columns=["a", "b"], batch_size=batch_size, rng=3)
    assert result.rows == 4 and result.columns == ("a", "b") and result.column == "a"
    assert result.blank_lines == 1
    assert result.kept_columns == ("id", "city")  # BOM stripped, file order
    yb, ya = _two_columns(dst)
    assert all(abs(y - x) <= T for y, x in zip(yb, [7, -3, 0, 50]))
    assert all(abs(y - x) <= T for y, x in zip(ya, [10, 11, 12, -13]))
    expected = TWO_TEMPLATE.format(*[str(v) for pair in zip(yb, ya) for v in pair])
    assert dst.read_bytes() == expected.encode()


def test_several_columns_draw_independently_and_reproducibly(tmp_path, spec_path):
    src = tmp_path / "in.csv"
    src.write_text("x,y,z\n" + "40,40,40\n" * 300)
    outs = []
    for name in ("o1.csv", "o2.csv"):
        sio.privatize_file(src, tmp_path / name, mechanism=spec_path, columns=("x", "z"), rng=11, batch_size=64)
        outs.append((tmp_path / name).read_bytes())
    assert outs[0] == outs[1]
    rows = [line.split(",") for line in outs[0].decode().splitlines()[1:]]
    x, y, z = (np.array([int(r[j]) for r in rows]) for j in range(3))
    assert np.all(y == 40) and np.all(np.abs(x - 40) <= T) and np.all(np.abs(z - 40) <= T)
    # Independent draws differ somewhere: P(300 equal pairs) <= 0.3^300 for these parameters.
    assert np.any(x != z)


def test_one_column_alias_and_columns_agree(tmp_path, spec_path):
    src = tmp_path / "in.csv"
    _write_people(src, 120)
    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    sio.privatize_file(src, a, mechanism=spec_path, column="age", rng=5)
    sio.privatize_file(src, b, mechanism=spec_path, columns="age", rng=5)
    sio.privatize_file(src, c, mechanism=spec_path, columns=["age"], rng=5)
    assert a.read_bytes() == b.read_bytes() == c.read_bytes()


def test_column_arguments(tmp_path, spec_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("id,age,h\n1,2,3\n")
    kw = dict(mechanism=spec_path)
    with pytest.raises(TypeError, match="not both"):
        sio.privatize_file(src, out, column="age", columns=["h"], **kw)
    with pytest.raises(TypeError, match="needs columns="):
        sio.privatize_file(src, out, **kw)
    with pytest.raises(ValueError, match="column 'h' is listed more than once in columns"):
        sio.privatize_file(src, out, columns=["h", "age", "h"], **kw)
    with pytest.raises(ValueError, match="at least one column"):
        sio.privatize_file(src, out, columns=[], **kw)
    with pytest.raises(TypeError, match="columns must be a column name or a sequence"):
        sio.privatize_file(src, out, columns={"age"}, **kw)
    with pytest.raises(TypeError, match="each of columns must be a non-empty string"):
        sio.privatize_file(src, out, columns=["age", 3], **kw)
    with pytest.raises(ValueError, match=r"column 'nope' not found in .*its columns are 'id', 'age', 'h'"):
        sio.privatize_file(src, out, columns=["age", "nope"], **kw)
    assert _listing(tmp_path) == {"in.csv", "mech.json"}


@pytest.mark.parametrize("text, message", [
    ("a,b\n1,2\n3,x\n", r"row 2 \(line 3\): column 'b': the value is not an integer"),
    ("a,b\n1,2\n3,4\ny,5\n", r"row 3 \(line 4\): column 'a': the value is not an integer"),
    ("a,b\n1,2\n3,\nz,5\n", r"row 2 \(line 3\): column 'b': the value is empty"),  # the first in file order
    ("a,b\n1,2\n3,4,\n", r"row 2 \(line 3\) has 3 fields, the header has 2"),
])
def test_several_columns_errors_name_column_and_row(tmp_path, spec_path, text, message):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text(text)
    with pytest.raises(ValueError, match=message):
        sio.privatize_file(src, out, mechanism=spec_path, columns=["b", "a"], batch_size=2)
    assert not out.exists()


def test_several_columns_parquet(tmp_path, spec_path):
    n = 200
    rng = np.random.default_rng(4)
    table = pa.table({"id": pa.array(np.arange(n)), "b": pa.array(rng.integers(0, 50, n), type=pa.int16()),
                      "s": pa.array([f"v{i}" for i in range(n)]),
                      "a": pa.array([str(v) for v in rng.integers(-9, 9, n)])})
    src, dst = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(table, src)
    result = sio.privatize_file(src, dst, mechanism=spec_path, columns=["a", "b"], batch_size=64, rng=2)
    assert result.rows == n and result.columns == ("a", "b") and result.blank_lines == 0
    assert result.kept_columns == ("id", "s")  # the other columns, in file order
    out = pq.read_table(dst)
    assert out.column_names == table.column_names
    assert out.column("id").equals(table.column("id")) and out.column("s").equals(table.column("s"))
    for name in ("a", "b"):
        assert out.schema.field(name).type == pa.int64()
        x = np.array([int(v) for v in table.column(name).to_pylist()])
        y = out.column(name).to_numpy()
        assert np.all(np.abs(y - x) <= T) and np.any(y != x)
    bad = table.set_column(1, "b", pa.array([None if i == 150 else 1 for i in range(n)], type=pa.int16()))
    bad = bad.set_column(3, "a", pa.array(["1" if i != 170 else "1.5" for i in range(n)]))
    pq.write_table(bad, src)
    with pytest.raises(ValueError, match=r"row 151: column 'b' is null"):
        sio.privatize_file(src, dst, mechanism=spec_path, columns=["a", "b"], batch_size=64)


@pytest.mark.parametrize("splice", [0, 1 << 40])
def test_long_records_written_in_slices_are_identical(tmp_path, spec_path, monkeypatch, splice):
    # Slice-by-slice writing (long records) and the vectorized splice give the same bytes.
    src = tmp_path / "in.csv"
    src.write_bytes(TWO_TEMPLATE.format(*[v for pair in zip(TWO_B, TWO_A) for v in pair]).encode())
    reference = tmp_path / "ref.csv"
    sio.privatize_file(src, reference, mechanism=spec_path, columns=["b", "a"], rng=9)
    monkeypatch.setattr(sio.csvio, "_SPLICE_BYTES_PER_FIELD", splice)
    out = tmp_path / "out.csv"
    sio.privatize_file(src, out, mechanism=spec_path, columns=["b", "a"], rng=9)
    assert out.read_bytes() == reference.read_bytes()


# -- standard input and output ------------------------------------------------------------------


class _Std:
    """A stand-in for sys.stdin / sys.stdout: ``.buffer`` is a BytesIO."""

    def __init__(self, data: bytes = b""):
        self.buffer = BytesIO(data)


def test_stdin_to_stdout(spec_path, monkeypatch):
    text = TWO_TEMPLATE.format(*[v for pair in zip(TWO_B, TWO_A) for v in pair]).encode()
    stdin, stdout = _Std(text), _Std()
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", stdout)
    calls = []
    result = sio.privatize_file("-", "-", mechanism=spec_path, columns=["a", "b"], rng=4, batch_size=2,
                                progress=lambda rows, frac: calls.append((rows, frac)))
    assert result.input == "-" and result.output == "-" and result.rows == 4 and result.format == "csv"
    assert [r for r, _ in calls] == [2, 3, 4] and all(f is None for _, f in calls)  # size unknown
    out = stdout.buffer.getvalue()
    lines = out.decode("utf-8-sig").split("\r\n")
    assert lines[0] == "id,b,city,a" and len(out) > 0.9 * len(text)


def test_stdout_error_midway_writes_nothing(spec_path, monkeypatch, tmp_path):
    # rows to standard output are held back until the whole input succeeded (io docstring)
    src = tmp_path / "in.csv"
    src.write_text("id,age\n1,10\n2,20\n3,oops\n4,40\n")
    stdout = _Std()
    monkeypatch.setattr(sys, "stdout", stdout)
    with pytest.raises(ValueError, match=r"row 3 \(line 4\): column 'age': the value is not an integer"):
        sio.privatize_file(src, "-", mechanism=spec_path, column="age", batch_size=1)
    assert stdout.buffer.getvalue() == b""


def test_stdin_readers_and_refusals(tmp_path, spec_path, monkeypatch):
    monkeypatch.setattr(sys, "stdin", _Std(b"y\tz\n3\tq\n-1\tq\n3\tq\n"))
    assert sio.column_counts("-", "y", format="tsv") == (-1, pytest.approx([1, 0, 0, 0, 2]))
    monkeypatch.setattr(sys, "stdin", _Std(b"y,z\n3,q\n"))
    assert [b.tolist() for b in sio.iter_column(Path("-"), "y")] == [[3]]  # "-" as a Path too, csv by default
    with pytest.raises(ValueError, match=r"^Parquet cannot be read from standard input \(it needs a seekable "
                                         r"file\); pass a file path$"):
        list(sio.iter_column("-", "y", format="parquet"))
    with pytest.raises(ValueError, match="Parquet cannot be read from standard input"):
        sio.privatize_file("-", tmp_path / "o.parquet", mechanism=spec_path, column="y", format="parquet")
    pq.write_table(pa.table({"y": [1, 2]}), tmp_path / "in.parquet")
    with pytest.raises(ValueError, match=r"Parquet cannot be written to standard output .*pass -o FILE"):
        sio.privatize_file(tmp_path / "in.parquet", "-", mechanism=spec_path, column="y")
    assert _listing(tmp_path) == {"in.parquet", "mech.json"}


def test_stdout_that_is_the_input_file_is_refused(tmp_path, spec_path, monkeypatch):
    # `privatize in.csv -o - >> in.csv` would read its own output forever.
    src = tmp_path / "in.csv"
    src.write_text("age\n1\n")
    with open(src, "ab") as fh:
        stdout = _Std()
        stdout.buffer = fh
        monkeypatch.setattr(sys, "stdout", stdout)
        with pytest.raises(ValueError, match="standard output is the input file"):
            sio.privatize_file(src, "-", mechanism=spec_path, column="age")
    assert src.read_text() == "age\n1\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_input_is_read_like_stdin(tmp_path, spec_path):
    fifo = tmp_path / "in.csv"
    os.mkfifo(fifo)
    ages = np.random.default_rng(5).permutation(np.arange(500) % 50)  # a random row order (sparseldp.io.order)

    def feed():
        with open(fifo, "wb") as fh:
            fh.write(b"id,age\n" + b"".join(b"%d,%d\n" % (i, v) for i, v in enumerate(ages)))

    writer = threading.Thread(target=feed)
    writer.start()
    fractions = []
    result = sio.privatize_file(fifo, tmp_path / "out.csv", mechanism=spec_path, column="age", batch_size=200,
                                progress=lambda rows, frac: fractions.append(frac))
    writer.join(timeout=10)
    assert result.rows == 500 and fractions and all(f is None for f in fractions)
    assert len(_ages_of(tmp_path / "out.csv")) == 500


def test_directory_input_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"cannot read input .*: Is a directory"):
        list(sio.iter_column(tmp_path, "x", format="csv"))


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_dev_zero_stops_at_the_header_limit_fast():
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"malformed CSV '/dev/zero': the header line \(line 1\) is longer "
                                         r"than 1 MiB \(MAX_HEADER_BYTES = 1,048,576 bytes\)"):
        sio.column_counts("/dev/zero", "x", format="csv")
    assert time.perf_counter() - t0 < 2.0


# -- blank lines ---------------------------------------------------------------------------------


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_blank_line_in_a_single_column_csv_is_a_missing_value(tmp_path, spec_path, eol):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text(eol.join(["", "age", "1", "", "2", ""]), newline="")  # a blank line before the header is fine
    message = r"row 2 \(line 4\): column 'age': the value is empty \(a missing value\)"
    with pytest.raises(ValueError, match=message):
        sio.privatize_file(src, out, mechanism=spec_path, column="age")
    assert not out.exists()
    with pytest.raises(ValueError, match=message):
        sio.column_counts(src, "age")
    src.write_text(eol.join(["", "age", "1", "2", ""]), newline="")
    result = sio.privatize_file(src, out, mechanism=spec_path, column="age")
    assert result.rows == 2 and result.blank_lines == 1


def test_blank_lines_in_a_multi_column_csv_are_copied_and_counted(tmp_path, spec_path, monkeypatch):
    monkeypatch.setattr(sio.csvio, "_BLOCK_BYTES", 6)
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_bytes(b"\n\r\nid,age\n\n1,5\r\n\r\n\n2,6\n\n")
    result = sio.privatize_file(src, out, mechanism=spec_path, column="age", rng=1, batch_size=1)
    assert result.rows == 2 and result.blank_lines == 6
    y = [int(re.search(rb"\n%d,(-?\d+)\r?\n" % i, out.read_bytes()).group(1)) for i in (1, 2)]
    assert abs(y[0] - 5) <= T and abs(y[1] - 6) <= T
    assert out.read_bytes() == b"\n\r\nid,age\n\n1,%d\r\n\r\n\n2,%d\n\n" % tuple(y)
    assert np.concatenate(list(sio.iter_column(src, "age"))).tolist() == [5, 6]
    assert sio.column_counts(src, "age") == (5, pytest.approx([1, 1]))


def test_header_only_and_blank_lines_counted(tmp_path, spec_path):
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_bytes(b"\n\nid,age\n\n")
    result = sio.privatize_file(src, dst, mechanism=spec_path, column="age")
    assert result.rows == 0 and result.blank_lines == 3
    assert dst.read_bytes() == src.read_bytes()


# -- limits -------------------------------------------------------------------------------------


@pytest.mark.parametrize("block", [1 << 20, 16])  # the record inside one block, or read on block by block
def test_record_longer_than_the_limit(tmp_path, spec_path, monkeypatch, block):
    monkeypatch.setattr(sio.csvio, "_BLOCK_BYTES", block)
    monkeypatch.setattr(sio.csvio, "MAX_RECORD_BYTES", 100)
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_text("id,note\n1,short\n2," + "x" * 98 + "\n3," + "y" * 150 + "\n")  # 100 bytes: fine
    with pytest.raises(ValueError, match=r"malformed CSV .*in\.csv': the record starting on line 4 is longer "
                                         r"than 100 bytes \(MAX_RECORD_BYTES = 100 bytes\)"):
        sio.privatize_file(src, out, mechanism=spec_path, column="id", batch_size=1)
    assert _listing(tmp_path) == {"in.csv", "mech.json"}


class _Endless:
    """A stream that never ends and has no line break after its first line: counts what was read."""

    def __init__(self, head: bytes, fill: bytes):
        self.head, self.fill, self.read_bytes = head, fill, 0

    def read(self, n):
        data, self.head = (self.head + self.fill * n)[:n], b""
        self.read_bytes += len(data)
        return data


@pytest.mark.parametrize("fill", [b"7", b'"', b"x"])  # digits, an unterminated quote, anything
def test_endless_record_stops_at_the_limit(spec_path, monkeypatch, fill):
    monkeypatch.setattr(sio.csvio, "MAX_RECORD_BYTES", 3 << 20)
    stream = _Endless(b"age,z\n", fill)
    stdin = _Std()
    stdin.buffer = stream
    monkeypatch.setattr(sys, "stdin", stdin)
    with pytest.raises(ValueError, match=r"the record starting on line 2 is longer than 3 MiB .*read without "
                                         r"reaching its end"):
        sio.column_counts("-", "age")
    assert stream.read_bytes <= (3 << 20) + 3 * sio.csvio._BLOCK_BYTES


def test_endless_record_with_more_fields_than_the_header_stops_early(monkeypatch):
    stream = _Endless(b"age,z\n", b"1,")
    stdin = _Std()
    stdin.buffer = stream
    monkeypatch.setattr(sys, "stdin", stdin)
    with pytest.raises(ValueError, match=r"row 1 \(line 2\) has more than 2 fields, the header has 2"):
        sio.column_counts("-", "age")
    assert stream.read_bytes <= 2 * sio.csvio._BLOCK_BYTES


def test_long_record_within_the_limit_is_fine(tmp_path, spec_path, monkeypatch):
    monkeypatch.setattr(sio.csvio, "_BLOCK_BYTES", 4096)
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    blob = '"' + ("a,b\n" * 100_000) + '"'  # 400 KB, a hundred blocks, quoted separators and line breaks
    src.write_text(f"id,blob,age\n1,{blob},5\n2,x,6\n")
    result = sio.privatize_file(src, out, mechanism=spec_path, column="age", rng=2)
    assert result.rows == 2
    text = out.read_text()
    y = [int(text.split(blob + ",")[1].split("\n")[0]), int(text.split("\n")[-2].split(",")[2])]
    assert abs(y[0] - 5) <= T and abs(y[1] - 6) <= T
    assert text == f"id,blob,age\n1,{blob},{y[0]}\n2,x,{y[1]}\n"


def test_long_header_fields_and_header_limit(tmp_path):
    p = tmp_path / "in.csv"
    wide = "w" * 200_000  # beyond the csv module's default field limit (131,072)
    p.write_text(f'"{wide}","a,""b""",age\n1,2,3\n')
    assert np.concatenate(list(sio.iter_column(p, "age"))).tolist() == [3]
    assert np.concatenate(list(sio.iter_column(p, 'a,"b"'))).tolist() == [2]
    p.write_text("x" * (sio.MAX_HEADER_BYTES + 1) + ",age\n1,2\n")
    with pytest.raises(ValueError, match=r"the header line \(line 1\) is longer than 1 MiB \(MAX_HEADER_BYTES = "
                                         r"1,048,576 bytes\); it is 1,048,581 bytes long"):
        sio.column_counts(p, "age")
    p.write_text('"a"b,age\n1,2\n')
    with pytest.raises(ValueError, match=r"a stray quote on line 1 \(a quote may only enclose a whole field"):
        sio.column_counts(p, "age")
    p.write_bytes(b"a\x00,age\n1,2\n")
    with pytest.raises(ValueError, match="malformed header line"):
        sio.column_counts(p, "age")


def test_long_bad_value_is_not_copied(tmp_path):
    p = tmp_path / "in.csv"
    p.write_text("id,age\n1," + "9" * 100_000 + "\n")
    with pytest.raises(ValueError, match=r"row 1 \(line 2\): column 'age': the value is outside the "
                                         r"supported integer range") as info:
        sio.column_counts(p, "age")
    assert "999" not in str(info.value)  # not even a preview of the raw value
    p.write_text("id,age\n1," + "9" * 100_000 + "x\n")
    with pytest.raises(ValueError, match=r"column 'age': the value is not an integer") as info:
        sio.column_counts(p, "age")
    assert "999" not in str(info.value)


def test_plural_and_size_text():
    assert sio._plural(1, "row") == "1 row" and sio._plural(2, "row") == "2 rows"
    assert sio._plural(1000, "row") == "1,000 rows" and sio._plural(0, "field") == "0 fields"
    assert sio._size_text(64 << 20) == "64 MiB" and sio._size_text(1) == "1 byte"
    assert sio._size_text(100) == "100 bytes"


# -- bounds_reason --------------------------------------------------------------------------------


def test_bounds_reason_is_appended(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text("y\n1\n74\n")
    reason = "the domain -70..70 widened by the mechanism's radius t = 3: every report it can produce"
    with pytest.raises(ValueError, match=re.escape(
            f"row 2 (line 3): column 'y': the value is outside the allowed range [-73, 73] ({reason})")):
        sio.column_counts(p, "y", bounds=(-73, 73), bounds_reason=reason)
    with pytest.raises(ValueError, match=r"is outside the allowed range \[-73, 73\] \(the value itself is not shown\)$"):
        list(sio.iter_column(p, "y", bounds=(-73, 73)))
    with pytest.raises(TypeError, match="bounds_reason must be None or a string"):
        sio.column_counts(p, "y", bounds=(-73, 73), bounds_reason=3)


# -- temporary files ------------------------------------------------------------------------------


def test_temp_files_stale_removed_live_kept_and_mode(tmp_path, spec_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    _write_people(src, 20)
    dead = tmp_path / ".out.csv.sparseldp-999999999-0123abcd.tmp"  # pid above any pid_max: not running
    live = tmp_path / f".out.csv.sparseldp-{os.getpid()}-89abcdef.tmp"
    other = tmp_path / ".other.csv.sparseldp-999999999-0123abcd.tmp"  # another target's: not ours
    for p in (dead, live, other):
        p.write_text("partial")
    sio.privatize_file(src, out, mechanism=spec_path, column="age")
    assert not dead.exists() and live.exists() and other.exists()
    assert _listing(tmp_path) == {"in.csv", "out.csv", "mech.json", live.name, other.name}
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_exception_from_progress_leaves_no_temp_and_no_output(tmp_path, spec_path, exc, fmt):
    src = tmp_path / f"in.{fmt}"
    x = _write_people(tmp_path / "people.csv", 100)
    if fmt == "parquet":
        pq.write_table(pa.table({"age": x}), src)
    else:
        src.write_bytes((tmp_path / "people.csv").read_bytes())
    out = tmp_path / f"out.{fmt}"
    before = _listing(tmp_path)
    seen = []

    def progress(rows, fraction):
        seen.append(rows)
        if rows >= 40:
            raise exc("stop")

    with pytest.raises(exc, match="stop"):
        sio.privatize_file(src, out, mechanism=spec_path, column="age", batch_size=20, progress=progress)
    assert seen == [20, 40]
    assert _listing(tmp_path) == before and not out.exists()


@pytest.fixture(scope="module")
def laplace_spec(tmp_path_factory):
    p = tmp_path_factory.mktemp("spec") / "mech.json"
    p.write_text(json.dumps({"family": "laplace", "lam": LAM, "s": S}))
    return load_spec(p)


_text_field = st.text(alphabet='ab,"\n\r\t é', max_size=6)


def _csv_field(value, quote: bool) -> str:
    text = str(value)
    if quote or any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


@given(rows=st.lists(st.tuples(st.integers(-999, 999), _text_field, st.integers(0, 9), st.booleans(),
                               st.booleans()), max_size=12),
       block=st.integers(1, 40), eol=st.sampled_from(["\n", "\r\n"]), blank_at_end=st.booleans())
def test_csv_reader_matches_the_csv_module(tmp_path_factory, laplace_spec, rows, block, eol, blank_at_end):
    # Any quoting (integers too), separators and line breaks inside fields, blank lines between
    # records, any block size (records straddling blocks, the long-record path): the same values as
    # Python's csv module, and privatizing two columns keeps every other field.
    tmp = tmp_path_factory.mktemp("prop")
    lines = ["n,t,m"]
    for n, t, m, blank, quote in rows:
        lines.append(",".join([_csv_field(n, quote), _csv_field(t, False), _csv_field(m, quote)]))
        if blank:
            lines.append("")
    text = eol.join(lines) + eol + (eol if blank_at_end else "")
    src = tmp / "in.csv"
    src.write_text(text, newline="")
    old = sio.csvio._BLOCK_BYTES
    sio.csvio._BLOCK_BYTES = block
    try:
        got = np.concatenate(list(sio.iter_column(src, "n", batch_size=3)) or [np.empty(0, np.int64)])
        result = sio.privatize_file(src, tmp / "out.csv", mechanism=laplace_spec, columns=["m", "n"], rng=1,
                                    batch_size=2)
    finally:
        sio.csvio._BLOCK_BYTES = old
    assert got.tolist() == [r[0] for r in rows]
    assert result.rows == len(rows) and result.blank_lines == sum(r[3] for r in rows) + blank_at_end
    with open(tmp / "out.csv", newline="", encoding="utf-8") as fh:
        out = [r for r in csv.reader(fh) if r]
    assert out[0] == ["n", "t", "m"] and [r[1] for r in out[1:]] == [r[1] for r in rows]
    assert all(abs(int(o[0]) - r[0]) <= T and abs(int(o[2]) - r[2]) <= T for o, r in zip(out[1:], rows))


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
    base = ["privatize", "--mechanism", str(spec_path), "--column", "age", "--allow-no-target"]
    cases = [
        (base + [str(src), "-o", str(out)], r"row 2 \(line 3\): column 'age': the value is not an integer"),
        (["privatize", "--mechanism", str(domain_spec_path), "--column", "age", str(dom), "-o", str(out),
          "--allow-no-target"],
         r"row 2 \(line 3\): column 'age': the value is outside the mechanism's domain \[0, 99\]"),
        (["privatize", "--mechanism", str(spec_path), "--column", "nope", str(src), "-o", str(out),
          "--allow-no-target"], r"column 'nope' not found"),
        (["privatize", "--mechanism", str(spec_path), "--column", "age", str(src), "-o", str(out)],
         r"records no target \(eps, H\)"),
        (base + [str(tmp_path / "missing.csv"), "-o", str(out)], r"cannot read input"),
        (["privatize", "--mechanism", str(bad_spec), "--column", "age", str(src), "-o", str(out)],
         r"bad mechanism spec .*lam must be a real number > 0"),
        (base + [str(src)], r"-o"),  # missing option: usage error, still one line
        (base + [str(src), "-o", str(out), "--batch-size", "0"], r"batch.size must be an integer"),
    ]
    for argv, message in cases:
        assert cli_main(argv) == 2, argv
        assert re.search(message, _one_error_line(capsys)), argv
        assert not out.exists()


def test_cli_success_summary_and_seed_warning(tmp_path, spec_path, capsys):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    _write_people(src, 50)
    argv = ["privatize", "--mechanism", str(spec_path), "--column", "age", str(src), "-o", str(out),
            "--allow-no-target"]
    assert cli_main(argv + ["--seed", "3"]) == 0
    err = _without_no_target_warning(capsys.readouterr().err)
    assert len(err) == 3
    assert [line for line in err if line.startswith("copied unchanged")] == [
        "copied unchanged, not privatized: columns 'id', 'city'"]
    seed = [line for line in err if "seed" in line]
    assert len(seed) == 1 and "not" in seed[0] and "simulation" in seed[0]
    assert any(re.match(r"privatized 50 rows of column 'age' -> .*out\.csv in \d", line) for line in err)
    first = out.read_bytes()
    assert cli_main(argv + ["--seed", "3"]) == 0
    assert out.read_bytes() == first
    capsys.readouterr()
    assert cli_main(argv) == 0
    err = _without_no_target_warning(capsys.readouterr().err)
    assert len(err) == 2 and not any("warning" in line for line in err)


def _without_no_target_warning(stderr: str) -> list[str]:
    # The spec of these tests records no target (eps, H); the CLI says so in a warning of its own.
    return [line for line in stderr.strip().splitlines() if "records no target" not in line]


def test_cli_quiet_when_piped(tmp_path, spec_path):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    _write_people(src, 50)
    proc = subprocess.run(
        [sys.executable, "-m", "sparseldp.cli", "privatize", "--mechanism", str(spec_path), "--column", "age",
         str(src), "-o", str(out), "--allow-no-target"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    err = _without_no_target_warning(proc.stderr)
    assert len(err) == 2 and err[0].startswith("privatized 50 rows") and err[1].startswith("copied unchanged")
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


# -- a file ordered by a privatized column (sparseldp.io.order) ------------------------------------------

def _order_csv(path: Path, ages, other=None) -> Path:
    other = np.arange(len(ages)) if other is None else other
    path.write_text("id,age,b\n" + "".join(f"{i},{a},{b}\n" for i, (a, b) in enumerate(zip(ages, other))))
    return path


@pytest.mark.parametrize("layout", ["sorted", "grouped", "descending"])
def test_a_file_ordered_by_the_column_is_refused_and_nothing_is_written(tmp_path, spec_path, layout):
    gen = np.random.default_rng(1)
    ages = np.sort(gen.integers(18, 90, 3000))
    if layout == "grouped":  # runs of equal values, the runs in random order
        values = gen.permutation(np.unique(ages))
        ages = np.concatenate([np.full(np.count_nonzero(ages == v), v) for v in values])
    elif layout == "descending":
        ages = ages[::-1]
    src = _order_csv(tmp_path / "in.csv", ages)
    with pytest.raises(ValueError, match=r"ordered by column 'age' \(lag-1 autocorrelation") as info:
        sio.privatize_file(src, tmp_path / "out.csv", mechanism=spec_path, column="age", rng=1)
    assert not (tmp_path / "out.csv").exists()
    assert not any(str(v) in str(info.value).split("rows")[0].split("values")[-1] for v in (18, 50, 89))
    # the same rows in a random order are privatized; keep_order=True accepts the sorted file
    _order_csv(tmp_path / "shuf.csv", gen.permutation(ages))
    assert sio.privatize_file(tmp_path / "shuf.csv", tmp_path / "o1.csv", mechanism=spec_path, column="age",
                              rng=1).rows == 3000
    assert sio.privatize_file(src, tmp_path / "o2.csv", mechanism=spec_path, column="age", rng=1,
                              keep_order=True).rows == 3000


def test_order_refusal_names_the_ordered_column_of_several(tmp_path, spec_path):
    gen = np.random.default_rng(2)
    src = _order_csv(tmp_path / "in.csv", gen.integers(18, 90, 2000), np.sort(gen.integers(0, 50, 2000)))
    with pytest.raises(ValueError, match=r"ordered by column 'b'"):
        sio.privatize_file(src, tmp_path / "out.csv", mechanism=spec_path, columns=["age", "b"], rng=1)
    assert not (tmp_path / "out.csv").exists()


def test_order_refusal_on_parquet_and_standard_output(tmp_path, spec_path, capsysbinary):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    ages = np.sort(np.random.default_rng(3).integers(18, 90, 2000))
    pq.write_table(pa.table({"age": ages}), tmp_path / "in.parquet")
    with pytest.raises(ValueError, match=r"ordered by column 'age'"):
        sio.privatize_file(tmp_path / "in.parquet", tmp_path / "out.parquet", mechanism=spec_path, column="age",
                           batch_size=300)
    assert not (tmp_path / "out.parquet").exists()
    src = _order_csv(tmp_path / "in.csv", ages)
    with pytest.raises(ValueError, match=r"ordered by column 'age'"):
        sio.privatize_file(src, "-", mechanism=spec_path, column="age", batch_size=128)
    assert capsysbinary.readouterr().out == b""


@pytest.mark.parametrize("batch", [1, 7, 500, 5000])
def test_order_statistic_is_the_lag1_autocorrelation_whatever_the_batches(batch):
    from sparseldp.io.order import _OrderCheck

    gen = np.random.default_rng(4)
    X = np.stack([np.cumsum(gen.normal(size=3000)).round().astype(np.int64) + 10**12,  # large offset
                  gen.integers(0, 5, 3000)], axis=1)
    check = _OrderCheck()
    for i in range(0, 3000, batch):
        check.observe(X[i:i + batch].ravel(), ("a", "b"))
    want = [float(np.corrcoef(X[:-1, j], X[1:, j])[0, 1]) for j in range(2)]
    got = check.correlations()
    assert got[0] == pytest.approx(want[0], abs=2e-3) and got[1] == pytest.approx(want[1], abs=2e-3)
    assert got[0] > 0.9 and abs(got[1]) < 0.1
