"""What a spec file says is what is used, and what the CLI prints is what holds (findings of a user trial).

1. a key given twice in a spec file is refused (a reviewer reads one value, JSON readers use another);
2. printed upper bounds on delta are rounded up, never to nearest (``:.4g`` turned ``1.0000000001932833e-06``
   into ``1e-06``, below the certified bound);
3. the field metadata of a privatized Parquet column (which may hold the raw values) is not copied;
4. errors about a target column's values name the row, line and column, never the raw value;
5. ``design`` refuses a design on Z whose support ``privatize`` cannot sample, instead of writing it;
6. ``design --domain`` refuses at once a domain too large for the clipped search (it ran out of memory).
"""

from __future__ import annotations

import json
import math
import re
import time
from decimal import Decimal

import numpy as np
import pytest

from sparseldp import SparseLaplace
from sparseldp._format import format_lower, format_upper
from sparseldp.spec import Guarantee, load_spec
from cli_helpers import one_error, run

SPEC = {"family": "laplace", "lam": 0.5, "s": 7, "eps": 1.0, "H": 3,
        "delta_star": float(SparseLaplace(lam=0.5, s=7).delta_star(1.0, 3))}
DOMAIN_SPEC = {"family": "laplace", "lam": 0.5, "s": 7, "domain": [0, 99], "window": "extended"}


def printed_bounds(text: str) -> list[str]:
    """Every number printed as ``delta <= X``."""
    return re.findall(r"delta <= ([0-9.e+-]+[0-9])", text)


# -- 1. duplicate keys ---------------------------------------------------------------------------------


DUPLICATE = '{"family": "laplace", "lam": 0.5, "lam": 30, "s": 3}'


def test_duplicate_key_in_a_spec_is_refused_naming_it(tmp_path):
    p = tmp_path / "dup.json"
    p.write_text(DUPLICATE)
    with pytest.raises(ValueError, match=r"has the key 'lam' more than once"):
        load_spec(p)


def test_duplicate_key_is_refused_at_any_depth(tmp_path):
    p = tmp_path / "dup.json"
    p.write_text('{"family": "laplace", "lam": 0.5, "s": 3, "extra": {"a": 1, "a": 2}}')
    with pytest.raises(ValueError, match=r"has the key 'a' more than once"):
        load_spec(p)
    p.write_text('{"family": "laplace", "lam": 0.5, "s": 3, "domain": [0, {"b": 1, "b": 1}]}')
    with pytest.raises(ValueError, match=r"has the key 'b' more than once"):  # even with equal values
        load_spec(p)
    p.write_text('{"family": "laplace", "lam": 0.5, "s": 3}')  # the same keys once each: fine
    assert load_spec(p).param == 0.5


@pytest.mark.parametrize("command", ["privatize", "account"])
def test_cli_refuses_a_spec_with_a_duplicate_key(tmp_path, capsys, command):
    spec = tmp_path / "dup.json"
    spec.write_text(DUPLICATE)
    src = tmp_path / "in.csv"
    src.write_text("age\n1\n2\n")
    out = tmp_path / "out.csv"
    argv = {"privatize": ["privatize", src, "-m", spec, "-c", "age", "-o", out],
            "account": ["account", "--mechanism", spec, "--eps", 1, "--H", 1]}[command]
    line = one_error(capsys, *argv)
    assert "'lam' more than once" in line
    assert not out.exists()


# -- 2. printed bounds are rounded up ------------------------------------------------------------------


@pytest.mark.parametrize("x, up, down", [
    (1.0000000001932833e-06, "1.0000000002e-06", "1e-06"),  # a hair above 1e-06: the hair is shown
    (1.0000000000000002e-06, "1.001e-06", "1e-06"),  # ... but not a double's own rounding
    (9.35781e-14, "9.358e-14", "9.357e-14"),
    (1e-06, "1e-06", "9.999e-07"),  # the double 1e-06 is just below 10^-6
    (0.5, "0.5", "0.5"),
    (1.0, "1", "1"),
    (0.0, "0", "0"),
    (0.46862205214, "0.4687", "0.4686"),
    (9.99951e-05, "0.0001", "9.999e-05"),
    (-0.46862205214, "-0.4686", "-0.4687"),
])
def test_format_bounds_round_outward(x, up, down):
    assert format_upper(x) == up and format_lower(x) == down
    assert Decimal(format_upper(x)) >= Decimal(x) >= Decimal(format_lower(x))


def test_format_bounds_never_cross_the_value():
    rng = np.random.default_rng(7)
    values = np.concatenate([10.0 ** rng.uniform(-320, 300, 400), rng.uniform(0, 1, 400),
                             [5e-324, 2.2250738585072014e-308, 1.7976931348623157e308]])
    for x in values.tolist():
        for digits in (2, 4, 10):
            up, down = format_upper(x, digits), format_lower(x, digits)
            assert Decimal(up) >= Decimal(x) >= Decimal(down), (x, digits, up, down)
            hair = Decimal(x) - Decimal(down) <= abs(Decimal(x)) * Decimal("1e-6")  # format_upper shows it
            assert len(Decimal(up).normalize().as_tuple().digits) <= digits + 1 or hair, (x, digits, up)


def test_a_refused_claim_states_the_recomputed_bound_rounded_up(tmp_path):
    p = tmp_path / "low.json"
    p.write_text(json.dumps({**SPEC, "delta_star": 0.4686}))  # below delta_star = 0.46862205...
    with pytest.raises(ValueError, match=r"does not hold: .* = 0\.468623 \(recomputed, a rigorous upper bound"):
        load_spec(p)


def test_guarantee_describe_rounds_delta_up():
    g = Guarantee(eps=1.0, delta=1.0000000001932833e-06, H=5, source="sampler")
    assert "delta <= 1.0000000002e-06" in g.describe()


def test_account_prints_delta_rounded_up(capsys):
    argv = ["account", "--family", "laplace", "--lam", 0.5, "--s", 7, "--eps", 1, "--H", 3]
    rc, out, _ = run(capsys, *argv, "--json")
    exact = json.loads(out)["delta_star"]
    for extra in ([], ["--summary"], ["--summary", "--reports", 3]):
        rc, out, err = run(capsys, *argv, *extra)
        assert rc == 0, err
        shown = printed_bounds(out)
        assert shown and all(float(v) >= exact for v in shown[:1]), (shown, exact)
        assert "delta <= 0.4687" in out  # 0.46862..., not 0.4686
        m = re.search(r"delta_star = ([0-9.e+-]+)", out)
        assert float(m.group(1)) >= exact


def test_account_of_a_spec_prints_delta_rounded_up(tmp_path, capsys):
    spec = tmp_path / "dom.json"
    spec.write_text(json.dumps(DOMAIN_SPEC))
    rc, out, _ = run(capsys, "account", "--mechanism", spec, "--eps", 1, "--H", 3, "--json")
    exact = json.loads(out)["delta_star"]
    rc, out, err = run(capsys, "account", "--mechanism", spec, "--eps", 1, "--H", 3)
    assert rc == 0, err
    assert [float(v) >= exact for v in printed_bounds(out)] == [True]


def test_privatize_prints_the_sampler_delta_rounded_up(tmp_path, capsys):
    spec, src = tmp_path / "d.json", tmp_path / "in.csv"
    rc, _, err = run(capsys, "design", "--family", "laplace", "--eps", 1, "--delta", 1e-6, "--H", 5, "-o", spec)
    assert rc == 0, err
    src.write_text("age\n3\n4\n5\n")
    rc, out, err = run(capsys, "privatize", src, "-m", spec, "-c", "age", "-o", tmp_path / "o.csv", "--json")
    assert rc == 0, err
    certified = json.loads(out)["guarantee"]["delta"]
    rc, _, err = run(capsys, "privatize", src, "-m", spec, "-c", "age", "-o", tmp_path / "o.csv")
    assert rc == 0, err
    shown = printed_bounds(err)
    assert shown and all(float(v) >= certified for v in shown), (shown, certified)


def test_design_table_prints_delta_star_rounded_up(capsys):
    # delta_star = 9.99999989036737e-07: to nearest, 10 digits print 9.99999989e-07, below it
    argv = ["design", "--family", "laplace", "--eps", 2, "--delta", 1e-6, "--H", 5]
    rc, out, _ = run(capsys, *argv, "--json")
    exact = json.loads(out)["delta_star"]
    rc, out, err = run(capsys, *argv)
    assert rc == 0, err
    m = re.search(r"delta_star\s*│\s*([0-9.e+-]+)", out)
    assert m and float(m.group(1)) >= exact, (out, exact)


# -- 3. Parquet: no field metadata of a privatized column ----------------------------------------------


def test_parquet_output_drops_the_target_columns_metadata(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"id": [1, 2, 3, 4], "age": pd.Categorical([50, 57, 50, 61])})
    table = pa.Table.from_pandas(df, preserve_index=False)
    schema = table.schema
    schema = schema.set(schema.get_field_index("age"), schema.field("age").with_metadata({"orig": "50,57,50,61"}))
    schema = schema.set(schema.get_field_index("id"), schema.field("id").with_metadata({"note": "row id"}))
    schema = schema.with_metadata({**schema.metadata, b"owner": b"survey team"})
    src, out, spec = tmp_path / "in.parquet", tmp_path / "out.parquet", tmp_path / "m.json"
    pq.write_table(table.cast(schema), src)
    spec.write_text(json.dumps(SPEC))
    rc, _, err = run(capsys, "privatize", src, "-m", spec, "-c", "age", "-o", out, "--seed", 1)
    assert rc == 0, err
    # the summary says what was copied: the other column and the table's metadata
    assert "copied unchanged: the file's metadata (keys 'pandas', 'owner', \"column 'id': note\";" in err
    got = pq.read_table(out)
    assert got.schema.field("age").metadata is None  # the raw values are gone
    assert got.schema.field("id").metadata == {b"note": b"row id"}  # a copied column keeps its own
    assert got.schema.metadata[b"owner"] == b"survey team"  # the table's metadata is kept
    entries = {c["name"]: c for c in json.loads(got.schema.metadata[b"pandas"])["columns"]}
    assert entries["age"]["metadata"] is None  # no num_categories of the raw column
    assert entries["age"]["pandas_type"] == "int64"
    back = got.to_pandas()
    assert back["age"].dtype == np.int64 and list(back["id"]) == [1, 2, 3, 4]


def test_parquet_output_drops_the_target_in_sparks_schema_copy(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    row = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {"note": "row id"}},
        {"name": "age", "type": "long", "nullable": True, "metadata": {"orig": "50,57,50,61"}}]}
    key = b"org.apache.spark.sql.parquet.row.metadata"
    table = pa.table({"id": [1, 2, 3, 4], "age": [50, 57, 50, 61]})
    table = table.replace_schema_metadata({key: json.dumps(row).encode()})
    src, out, spec = tmp_path / "in.parquet", tmp_path / "out.parquet", tmp_path / "m.json"
    pq.write_table(table, src)
    spec.write_text(json.dumps(SPEC))
    rc, _, err = run(capsys, "privatize", src, "-m", spec, "-c", "age", "-o", out, "--seed", 1)
    assert rc == 0, err
    fields = {f["name"]: f for f in json.loads(pq.read_table(out).schema.metadata[key])["fields"]}
    assert fields["age"]["metadata"] == {} and fields["id"]["metadata"] == {"note": "row id"}


# -- 4. raw values are not echoed in errors ------------------------------------------------------------


@pytest.mark.parametrize("value, reason", [
    ("-5", "is outside the mechanism's domain [0, 99]"),
    ("48x1", "is not an integer"),
    ("123456789012345678901", "is outside the supported integer range"),
])
def test_privatize_error_names_row_line_and_column_not_the_value(tmp_path, capsys, value, reason):
    spec, src, out = tmp_path / "m.json", tmp_path / "in.csv", tmp_path / "out.csv"
    spec.write_text(json.dumps(DOMAIN_SPEC))
    src.write_text(f"id,age\n1,10\n2,{value}\n3,30\n")
    line = one_error(capsys, "privatize", src, "-m", spec, "-c", "age", "-o", out, "--allow-no-target")
    assert "row 2 (line 3)" in line and "column 'age'" in line and reason in line
    assert value not in line.replace(str(tmp_path), "")  # (the temporary path may hold any digits)
    assert not out.exists()


def test_parquet_error_does_not_echo_the_value(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    spec, src, out = tmp_path / "m.json", tmp_path / "in.parquet", tmp_path / "out.parquet"
    spec.write_text(json.dumps(DOMAIN_SPEC))
    for col, reason in ((pa.array([10, 777, 30]), "is outside the mechanism's domain [0, 99]"),
                        (pa.array(["10", "7x7", "30"]), "is not an integer")):
        pq.write_table(pa.table({"age": col}), src)
        line = one_error(capsys, "privatize", src, "-m", spec, "-c", "age", "-o", out, "--allow-no-target")
        assert "row 2" in line and "column 'age'" in line and reason in line
        assert "777" not in line.replace(str(tmp_path), "") and "7x7" not in line
        assert not out.exists()


def test_estimate_error_does_not_echo_the_value(tmp_path, capsys):
    spec, src = tmp_path / "m.json", tmp_path / "r.csv"
    spec.write_text(json.dumps(SPEC))
    src.write_text("a\n1\n2\nsecret42\n")
    line = one_error(capsys, "estimate", src, "-m", spec, "-c", "a", "-o", tmp_path / "e.csv", "--domain", "0:9")
    assert "row 3 (line 4)" in line and "column 'a'" in line and "is not an integer" in line
    assert "secret42" not in line.replace(str(tmp_path), "")


# -- 5. design refuses a support privatize cannot sample -----------------------------------------------


def test_design_refuses_a_support_the_sampler_cannot_take(tmp_path, capsys):
    out = tmp_path / "spec.json"
    line = one_error(capsys, "design", "--family", "laplace", "--eps", 1e-6, "--delta", 1e-6, "--H", 5,
                     "--lam", 1e-7, "-o", out)
    assert "4194305" in line and "s = 4462873" in line and "privatize" in line
    assert not out.exists()
    line = one_error(capsys, "design", "--family", "laplace", "--eps", 1e-7, "--delta", 1e-6, "--H", 5, "--json")
    assert "4194305" in line


def test_design_below_the_sampler_limit_gives_a_usable_spec(tmp_path, capsys):
    out, src = tmp_path / "spec.json", tmp_path / "in.csv"
    rc, _, err = run(capsys, "design", "--family", "laplace", "--eps", 1, "--delta", 1e-6, "--H", 5, "-o", out)
    assert rc == 0, err
    src.write_text("age\n1\n2\n")
    rc, _, err = run(capsys, "privatize", src, "-m", out, "-c", "age", "-o", tmp_path / "o.csv")
    assert rc == 0, err


# -- 6. design --domain refuses a domain too large for the search, at once -----------------------------


def test_design_refuses_a_huge_clipped_domain_at_once(tmp_path, capsys):
    out = tmp_path / "spec.json"
    start = time.perf_counter()
    line = one_error(capsys, "design", "--family", "laplace", "--eps", 1, "--delta", 1e-6, "--H", 5,
                     "--domain", "0:100000", "-o", out)
    assert time.perf_counter() - start < 20  # it ran 4.5 minutes into an out-of-memory failure
    assert "2^27" in line and "at most 8192 values" in line and "--window extended" in line
    assert not out.exists()
    line = one_error(capsys, "design", "--family", "laplace", "--eps", 1, "--delta", 1e-6, "--H", 5,
                     "--lam", 0.2, "--domain", "0:100000")
    assert "2^27" in line


def test_design_finite_refuses_a_huge_clipped_domain():
    from sparseldp.design.finite import design_finite

    with pytest.raises(ValueError, match=r"too large for a clipped design.*2\^27"):
        design_finite("laplace", eps=1.0, delta=1e-6, H=5, domain=(0, 8192))
    with pytest.raises(ValueError, match=r"too large for a clipped design"):
        design_finite("gaussian", eps=1.0, delta=1e-6, H=5, domain=(0, 100_000), sigma=3.0)
    # delta = 1 needs no search; extended windows are the Z design and build one channel
    assert design_finite("laplace", eps=1.0, delta=1.0, H=5, domain=(0, 100_000)).s == 1
    d = design_finite("laplace", eps=1.0, delta=1e-6, H=5, domain=(0, 100_000), window="extended")
    assert d.delta_star <= 1e-6


def test_clipped_band_term_by_term_gives_the_same_numbers(monkeypatch):
    """The closed form (prefix sums) and the term-by-term sums it falls back on near the threshold agree,
    in blocks of a few rows (the fallback forced on every row)."""
    from sparseldp.core.families import get_family
    from sparseldp.design import _clipped

    k = 60
    prior = np.full(k, 1.0 / k)
    for fam, params in (("laplace", (0.05, 0.7, 3.0)), ("gaussian", (0.8, 4.0, 30.0))):
        one = _clipped._ClippedBand(get_family(fam), (0, k - 1), 1.0, 4, prior)
        want = {(p, t): one.evaluate(p, t) for p in params for t in (0, 1, 5, 29, 59, 80)}
        monkeypatch.setattr(_clipped, "_BLOCK_ENTRIES", 7)  # a few rows per block
        monkeypatch.setattr(_clipped, "_EXACT_BELOW", 2.0)  # every row term by term
        terms = _clipped._ClippedBand(get_family(fam), (0, k - 1), 1.0, 4, prior)
        for (p, t), v in want.items():
            got = terms.evaluate(p, t)
            assert got[1:] == v[1:]
            assert got[0] == v[0] or math.exp(got[0]) == pytest.approx(math.exp(v[0]), rel=1e-9)
        monkeypatch.undo()
