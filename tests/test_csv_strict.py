"""CSV quoting that could smuggle a raw value past the privatizer is refused (sparseldp.io.csvio).

A quote inside an unquoted field (``5 ft 10"``) used to open a quoted section
that ran to the next quote, merging rows: the merged record had the header's
field count, its target field came from the second row, and the first row's
raw value went out as text inside a "copied unchanged" field (exit 0).  A file
with CR-only line breaks read as one header line holding every value, copied
through as column names.  Both are refused now, before anything is written;
every file Python's own ``csv`` module writes is still read, field for field.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparseldp import io as sio

LAM, S = 0.4, 7


@pytest.fixture
def spec_path(tmp_path):
    p = tmp_path / "mech.json"
    p.write_text(json.dumps({"family": "laplace", "lam": LAM, "s": S}))
    return p


@pytest.mark.parametrize("body, line", [
    ('id,note,age\n1,5 ft 10",31\n2,6 ft 1",47\n3,x,52\n', 2),  # the merged-rows leak
    ('id,note,age\n1,ok,30\n2,x"y,31\n', 3),  # a quote mid-field
    ('id,note,age\n1,"a"b,31\n', 2),  # text after a closing quote
    ('id\tnote\tage\n1\t5 ft 10"\t31\n2\t6 ft 1"\t47\n', 2),  # TSV alike
    ('id,no"te,age\n1,x,31\n', 1),  # in the header
])
@pytest.mark.parametrize("how", ["privatize", "read"])
def test_a_stray_quote_is_refused_and_nothing_is_written(tmp_path, spec_path, body, line, how):
    fmt = "tsv" if "\t" in body else "csv"
    src, dst = tmp_path / f"in.{fmt}", tmp_path / f"out.{fmt}"
    src.write_text(body)
    with pytest.raises(ValueError, match=f"malformed CSV .*: a stray quote on line {line} "):
        if how == "privatize":
            sio.privatize_file(src, dst, mechanism=spec_path, column="age")
        else:
            list(sio.iter_column(src, "age"))
    assert not dst.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["mech.json", src.name])


def test_the_message_names_the_line_not_the_text(tmp_path, spec_path):
    src = tmp_path / "in.csv"
    src.write_text('id,note,age\n1,secret"4817,4817\n')
    with pytest.raises(ValueError) as info:
        sio.privatize_file(src, tmp_path / "out.csv", mechanism=spec_path, column="age")
    text = str(info.value).replace(str(src), "")  # (the temporary path may hold any digits)
    assert "secret" not in text and "4817" not in text and "line 2" in text


@pytest.mark.parametrize("body", [
    "age,id\r30,1\r40,2\r55,3",  # classic Mac OS line breaks: one "header line" holding every record
    "age,id\r30,1\r40,2\r55,3\n",
])
def test_cr_only_line_breaks_are_refused(tmp_path, spec_path, body):
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_bytes(body.encode())
    with pytest.raises(ValueError, match="the header line contains a carriage return outside quotes"):
        sio.privatize_file(src, dst, mechanism=spec_path, column="age")
    assert not dst.exists()


def test_quoted_fields_with_quotes_separators_and_line_breaks_still_read(tmp_path, spec_path):
    body = 'id,"no""te",age\r\n1,"5 ft 10""",31\r\n2,"a,b\nc",47\n3,"",52\r\n4,x,"53"\n5,"a\rb",54'
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    src.write_bytes(body.encode())
    assert [int(v) for b in sio.iter_column(src, "age") for v in b] == [31, 47, 52, 53, 54]
    result = sio.privatize_file(src, dst, mechanism=spec_path, column="age", rng=1)
    assert result.rows == 5
    rows = list(csv.DictReader(io.StringIO(dst.read_bytes().decode(), newline="")))
    assert [r["no\"te"] for r in rows] == ['5 ft 10"', "a,b\nc", "", "x", "a\rb"]


_text = st.text(st.sampled_from(list('ab ,"\n\r\t5')), max_size=8)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_text, st.integers(-5, 5), _text), min_size=1, max_size=6),
       st.sampled_from(["\n", "\r\n"]), st.sampled_from([",", "\t"]))
def test_whatever_the_csv_module_writes_is_read_field_for_field(tmp_path_factory, rows, end, delim):
    # RFC 4180 as Python writes it (QUOTE_MINIMAL): every age is found, in order, none merged
    buf = io.StringIO(newline="")
    w = csv.writer(buf, lineterminator=end, delimiter=delim)
    w.writerow(["note", "age", "other"])
    w.writerows(rows)
    path = tmp_path_factory.mktemp("csv") / ("in.tsv" if delim == "\t" else "in.csv")
    path.write_bytes(buf.getvalue().encode())
    assert [int(v) for b in sio.iter_column(path, "age") for v in b] == [r[1] for r in rows]
