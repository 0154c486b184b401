"""sparseldp.spark and ``--engine spark``: the same sampler and counts as the single-process path.

One SparkSession (``local[2]``) serves the whole module; each test runs at
most a few small jobs, so the module's time is mostly the session's start.
Statistical tests state their false-positive rate: the two-sample chi-square
test below rejects identically distributed outputs with probability at most
``ALPHA = 1e-6`` (critical value ``scipy.stats.chi2.isf(ALPHA, df)``,
expected counts >= 5 after merging neighbouring bins); it draws from the OS
secure source on both engines, so it can fail spuriously with probability
<= 1e-6.  The test of the missing extra runs without pyspark.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from importlib.util import find_spec

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

from sparseldp import SparseLaplace, estimate_frequencies
from sparseldp import io as sio
from sparseldp.cli import main as cli_main
from sparseldp.estimation import ReportCounts
from sparseldp.spec import save_spec, spec_from_mechanism

ALPHA = 1e-6  # false-positive rate of the chi-square test
MECH = SparseLaplace(lam=0.5, s=7)
N_PART = 20_000  # rows per part file (two files, one partition each)

needs_spark = pytest.mark.skipif(
    find_spec("pyspark") is None or (shutil.which("java") is None and not os.environ.get("JAVA_HOME")),
    reason="needs pyspark (the spark extra) and Java")

_LOG4J = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %p %c{1}: %m%n
# the tests make tasks fail on purpose: their stack traces are not news
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = off
logger.tsm.name = org.apache.spark.scheduler.TaskSetManager
logger.tsm.level = off
logger.writer.name = org.apache.spark.sql.execution.datasources
logger.writer.level = off
"""


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    pytest.importorskip("pyspark")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    conf = tmp_path_factory.mktemp("spark") / "log4j2.properties"
    conf.write_text(_LOG4J)
    session = (SparkSession.builder.master("local[2]").appName("sparseldp-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.driver.extraJavaOptions",
                       # C1 only and the serial collector: a short-lived JVM runs small jobs on about half the CPU
                       f"-Dlog4j2.configurationFile=file:{conf} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two identical part files of ``x`` in {0, 3} (and ``xs``, the same as strings), a spec, a domain spec."""
    root = tmp_path_factory.mktemp("spark-data")
    parts = root / "parts"
    parts.mkdir()
    x = np.tile(np.array([0, 3], np.int64), N_PART // 2)
    table = pa.table({"x": pa.array(x), "xs": pa.array([str(v) for v in x[:2]] * (N_PART // 2)),
                      "id": pa.array(np.arange(N_PART))})
    for i in range(2):
        pq.write_table(table, parts / f"part-{i}.parquet")
    spec = root / "mech.json"
    save_spec(spec_from_mechanism(MECH), spec)
    dom = root / "mech_dom.json"
    save_spec(spec_from_mechanism(MECH, domain=(0, 3), window="clipped"), dom)
    return {"root": root, "parts": parts, "spec": spec, "dom": dom, "x": x}


def _two_sample_chi_square(a: np.ndarray, b: np.ndarray) -> tuple[float, int]:
    """Homogeneity statistic of two histograms on one support; bins merged until expected counts >= 5."""
    na, nb = a.sum(), b.sum()
    pooled = (a + b) / (na + nb)
    groups, cur = [], []
    for k in range(a.size):
        cur.append(k)
        if min(na, nb) * pooled[cur].sum() >= 5:
            groups.append(cur)
            cur = []
    if cur:
        if groups:
            groups[-1] += cur
        else:
            groups.append(cur)
    stat = 0.0
    for g in groups:
        p = pooled[g].sum()
        for obs, n in ((a[g].sum(), na), (b[g].sum(), nb)):
            stat += (obs - n * p) ** 2 / (n * p)
    return float(stat), len(groups) - 1


def _hist(x, y, x_value, lo, hi):
    return np.bincount(y[x == x_value] - lo, minlength=hi - lo + 1).astype(float)


# -- the same sampler ---------------------------------------------------------


@needs_spark
def test_spark_and_local_outputs_are_identically_distributed(spark, data, tmp_path):
    from sparseldp.spark import privatize

    df = spark.read.parquet(str(data["parts"]))
    assert df.rdd.getNumPartitions() == 2
    out = privatize(privatize(df, "x", data["spec"], output_column="y"), "x", data["dom"], output_column="z")
    got = out.select("x", "y", "z").toArrow()
    xs, ys, zs = (got.column(c).to_numpy() for c in ("x", "y", "z"))
    # the local path: privatize_file on the same part files, with the same specs
    loc = {}
    for col, spec in (("y", data["spec"]), ("z", data["dom"])):
        outs = []
        for part in sorted(data["parts"].iterdir()):
            dst = tmp_path / f"{col}-{part.name}"
            sio.privatize_file(part, dst, mechanism=spec, column="x")
            outs.append(pq.read_table(dst).column("x").to_numpy())
        loc[col] = np.concatenate(outs)
    local_x = np.tile(data["x"], 2)
    total, dof = 0.0, 0
    for col, lo, hi in (("y", -3, 6), ("z", 0, 3)):
        spark_y = {"y": ys, "z": zs}[col]
        assert spark_y.min() >= lo and spark_y.max() <= hi
        for v in (0, 3):
            stat, d = _two_sample_chi_square(_hist(xs, spark_y, v, lo, hi), _hist(local_x, loc[col], v, lo, hi))
            total, dof = total + stat, dof + d
    assert dof >= 8 and total < stats.chi2.isf(ALPHA, dof), (total, dof)
    # the reports are noisy: far from all equal to their inputs
    assert np.mean(ys != xs) > 0.3


@needs_spark
def test_seeds_reproduce_per_partition_and_never_repeat_a_stream(spark, data):
    from sparseldp.spark import privatize

    df = spark.read.parquet(str(data["parts"]))  # two partitions with identical inputs

    def run():  # (shuffle=False: the layout is what this test looks at; the shuffle has a test of its own)
        out = privatize(privatize(df, "x", MECH, output_column="a", rng=7, shuffle=False), "x", MECH,
                        output_column="b", rng=7, shuffle=False)
        t = out.select("id", "x", "a", "b").toArrow()
        return {c: t.column(c).to_numpy() for c in ("id", "x", "a", "b")}

    first, second = run(), run()
    for c in ("a", "b"):
        np.testing.assert_array_equal(first[c], second[c])  # same seed, same partitioning: same output
    assert np.mean(first["a"] != first["b"]) > 0.3  # two output columns: two streams
    half = first["id"].size // 2  # the second partition's rows repeat the first's inputs: not its noise
    np.testing.assert_array_equal(first["x"][:half], first["x"][half:])
    assert np.mean(first["a"][:half] != first["a"][half:]) > 0.3


@needs_spark
def test_the_layout_says_nothing_of_the_input(spark, tmp_path):
    # a data set partitioned by the target: age=30/ and age=40/ came out as two files holding exactly those
    # rows, so the file of a report gave its raw age away; shuffled, every output file mixes both
    import pyarrow.parquet as pq_

    from sparseldp.spark import privatize, save_parquet

    root = tmp_path / "part"
    for age in (30, 40):
        (root / f"age={age}").mkdir(parents=True)
        pq_.write_table(pa.table({"id": pa.array(np.arange(age * 1000, age * 1000 + 1000))}),
                        root / f"age={age}" / "f.parquet")
    df = spark.read.parquet(str(root))
    assert df.rdd.getNumPartitions() >= 2
    for rng in (None, 3):
        out = tmp_path / f"out-{rng}"
        assert save_parquet(privatize(df, "age", MECH, rng=rng), str(out)) == 2000
        files = sorted(out.glob("*.parquet"))
        ids = [pq_.read_table(f).column("id").to_numpy() for f in files]
        assert sum(i.size for i in ids) == 2000 and all(i.size for i in ids)
        for i in ids:  # each output file holds rows of both partitions, in no particular order
            share = float(np.mean(i >= 40_000))
            assert 0.3 < share < 0.7, share
            assert abs(np.corrcoef(np.arange(i.size), i)[0, 1]) < 0.2
    a = privatize(df, "age", MECH, rng=3).select("id", "age").toArrow()
    b = privatize(df, "age", MECH, rng=3).select("id", "age").toArrow()
    assert a.equals(b)  # seeded: the shuffle reproduces too


@needs_spark
def test_output_column_is_matched_in_any_case(spark, data):
    from sparseldp.spark import privatize

    df = spark.read.parquet(str(data["parts"]))
    for name in ("ID", "X"):  # Spark resolves names in any case: these would overwrite id / x
        with pytest.raises(ValueError, match=f"output_column '{name}' already exists"):
            privatize(df, "x", MECH, output_column=name)
    both = df.selectExpr("x", "id AS X")  # (pyspark's raw AMBIGUOUS_REFERENCE before)
    with pytest.raises(ValueError, match=r"column 'x' and 'X' differ only in case"):
        privatize(both, "x", MECH)


@needs_spark
def test_pandas_udf_path_and_string_columns_draw_the_same_reports(spark, data, bad, monkeypatch):
    from sparseldp import spark as sspark

    df = spark.read.parquet(str(data["parts"]))

    def reports(column):  # same seed, same output name, same partitioning: the same stream per partition
        return sspark.privatize(df, column, MECH, output_column="r", rng=5).select("r").toArrow().column(0)

    arrow_path = reports("x")
    monkeypatch.setattr(sspark, "_has_arrow_udf", lambda: False)  # pyspark < 4.1: pandas_udf
    assert reports("xs").equals(arrow_path) and reports("x").equals(arrow_path)
    with pytest.raises(ValueError, match=r"row 2 of the partition: column 'x' is null"):
        sspark.count_reports(sspark.privatize(spark.read.parquet(str(bad)), "x", MECH), "x")


# -- the same counts ------------------------------------------------------------


@needs_spark
def test_count_reports_equals_column_counts(spark, data, tmp_path):
    from sparseldp.spark import count_reports

    reports = tmp_path / "reports"
    reports.mkdir()
    for i, part in enumerate(sorted(data["parts"].iterdir())):
        sio.privatize_file(part, reports / f"part-{i}.parquet", mechanism=data["spec"], column="x", rng=i)
    local = [sio.column_counts(p, "x", bounds=(-3, 6)) for p in sorted(reports.iterdir())]
    expected = local[0][1] + local[1][1]
    df = spark.read.parquet(str(reports))
    rc = count_reports(df, "x", bounds=(-3, 6))
    assert isinstance(rc, ReportCounts) and rc.offset == -3
    np.testing.assert_array_equal(rc.counts, expected)
    free = count_reports(df, "x")  # without bounds: smallest to largest report
    np.testing.assert_array_equal(np.trim_zeros(free.counts), np.trim_zeros(expected))
    assert free.n == 2 * N_PART
    # strings holding integers take the parser's path; the estimators take the result unchanged
    strings = count_reports(spark.read.parquet(str(data["parts"])), "xs")
    assert strings.offset == 0 and strings.counts.tolist() == [N_PART, 0, 0, N_PART]
    est = estimate_frequencies(rc, MECH, domain=(0, 3))
    assert abs(est[0] - 0.5) < 0.05 and abs(est[3] - 0.5) < 0.05


# -- bad values fail the job, naming column, value and where ---------------------


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    """A directory of two part files; the second holds a null, a non-integer string and a huge value."""
    root = tmp_path_factory.mktemp("spark-bad")
    good = pa.table({"x": pa.array([1, 2, 3] * 10, pa.int64()), "s": pa.array(["1", "2", "3"] * 10)})
    pq.write_table(good, root / "part-0.parquet")
    pq.write_table(pa.table({"x": pa.array([1, None, 10**18] + [2] * 27, pa.int64()),
                             "s": pa.array(["1", "2", "3.5"] + ["2"] * 27)}), root / "part-1.parquet")
    return root


@needs_spark
def test_null_fails_privatize_and_nothing_is_written(spark, bad, tmp_path):
    from sparseldp.spark import privatize, save_parquet

    df = spark.read.parquet(str(bad))
    target = tmp_path / "out"
    with pytest.raises(ValueError, match=r"row 2 of the partition: column 'x' is null") as info:
        save_parquet(privatize(df, "x", MECH), target)
    assert "part-1.parquet" in str(info.value) and "partition " in str(info.value)
    assert not target.exists() and list(tmp_path.iterdir()) == []
    # a hidden directory left by a run killed outright (SIGKILL) is removed by the next run to the target
    stale = tmp_path / ".out.sparseldp-999999999-deadbeef.tmp"
    (stale / "_temporary").mkdir(parents=True)
    assert save_parquet(privatize(df.where("x is not null and x < 100"), "x", MECH), target) > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@needs_spark
def test_non_integer_string_and_huge_value_fail_with_value_and_file(spark, bad):
    from sparseldp.spark import count_reports

    df = spark.read.parquet(str(bad))
    with pytest.raises(ValueError, match=r"row 3 of the partition: column 's': the value is not an integer") as info:
        count_reports(df, "s")
    assert "part-1.parquet" in str(info.value)
    with pytest.raises(ValueError, match=r"part-1.parquet.*column 'x': a value is outside the "
                                         r"supported integer range"):
        count_reports(df.where("x is not null"), "x")


@needs_spark
def test_value_outside_the_domain_fails(spark, data, bad):
    from sparseldp.spark import count_reports, privatize

    df = spark.read.parquet(str(bad)).where("x is null or x < 100").fillna(0, ["x"])
    with pytest.raises(ValueError, match=r"column 'x': the value is outside the mechanism's domain \[1, 3\]"):
        count_reports(privatize(df, "x", spec_from_mechanism(MECH, domain=(1, 3))), "x")
    with pytest.raises(ValueError, match=r"column 'x': a value is outside the allowed range \[0, 5\] \(why\) "
                                         r"\(the value itself is not shown\)"):
        count_reports(spark.createDataFrame([(1,), (10,)], "x long"), "x", bounds=(0, 5), bounds_reason="why")


@needs_spark
def test_bad_arguments_fail_before_any_job(spark):
    from sparseldp.spark import count_reports, privatize

    df = spark.createDataFrame([(1, 1.5, "a")], "x long, f double, s string")
    with pytest.raises(ValueError, match="column 'f' has type double"):
        privatize(df, "f", MECH)
    with pytest.raises(ValueError, match="column 'nope' not found in the DataFrame; its columns are 'x', 'f', 's'"):
        count_reports(df, "nope")
    with pytest.raises(ValueError, match="output_column 's' already exists"):
        privatize(df, "x", MECH, output_column="s")
    with pytest.raises(TypeError, match="cannot be split across partitions"):
        privatize(df, "x", MECH, rng=np.random.default_rng(1))
    with pytest.raises(ValueError, match="rng seed must be an integer >= 0; got -1"):
        privatize(df, "x", MECH, rng=-1)
    with pytest.raises(TypeError, match="df must be a pyspark.sql.DataFrame"):
        count_reports([1, 2], "x")


# -- the command line -------------------------------------------------------------


@needs_spark
def test_cli_engine_spark_end_to_end(spark, data, bad, tmp_path, capsys):
    out = tmp_path / "private"
    assert cli_main(["privatize", "--engine", "spark", "--allow-no-target", str(data["parts"]), "-m", str(data["spec"]), "-c", "x",
                     "-o", str(out), "--seed", "3", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 2 * N_PART and summary["output"] == str(out)
    assert summary["kept_columns"] == ["xs", "id"]  # copied unchanged: named, as on the local engine
    assert sorted(p.name for p in out.glob("part-*.parquet")) and (out / "_SUCCESS").exists()
    table = pq.read_table(out)
    assert table.column_names == ["x", "xs", "id"] and table.schema.field("x").type == pa.int64()
    est = tmp_path / "est.csv"
    assert cli_main(["estimate", "--engine", "spark", str(out / "part-*.parquet"), "-m", str(data["spec"]),
                     "-c", "x", "--domain", "0:3", "-o", str(est), "--bootstrap", "0", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n"] == 2 * N_PART and abs(summary["mean"]["mean"] - 1.5) < 0.2
    # a bad value: one line on stderr, exit 2, no output directory and no hidden temporary
    failed = tmp_path / "failed"
    assert cli_main(["privatize", "--engine", "spark", "--allow-no-target", str(bad), "-m", str(data["spec"]), "-c", "x",
                     "-o", str(failed)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "is null" in err and "part-1.parquet" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["est.csv", "private"]
    # arguments the engine cannot take are refused before Spark runs
    assert cli_main(["privatize", "--engine", "spark", "--allow-no-target", "-", "-m", str(data["spec"]), "-c", "x",
                     "-o", str(tmp_path / "o")]) == 2
    assert "not standard input" in capsys.readouterr().err
    assert cli_main(["privatize", "--engine", "spark", "--allow-no-target", str(data["parts"]), "-m", str(data["spec"]), "-c", "x",
                     "-o", str(out)]) == 2
    assert "it exists" in capsys.readouterr().err
    # an input that is not Parquet says why (the innermost Java cause), not "an error occurred while calling"
    (tmp_path / "not.parquet").write_text("not parquet\n")
    assert cli_main(["privatize", "--engine", "spark", "--allow-no-target", str(tmp_path / "not.parquet"), "-m", str(data["spec"]),
                     "-c", "x", "-o", str(tmp_path / "o2")]) == 2
    assert "is not a Parquet file" in capsys.readouterr().err


def test_engine_spark_without_the_extra_says_what_to_install(monkeypatch, tmp_path, capsys):
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"x": pa.array([1, 2, 3])}), src)
    spec = tmp_path / "mech.json"
    save_spec(spec_from_mechanism(MECH), spec)
    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark now fails as if not installed
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    assert cli_main(["privatize", "--engine", "spark", "--allow-no-target", str(src), "-m", str(spec), "-c", "x",
                     "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'sparseldp[spark]'" in err and "pyspark" in err
    assert cli_main(["estimate", "--engine", "spark", str(src), "-m", str(spec), "-c", "x", "--domain", "0:3",
                     "-o", str(tmp_path / "e.csv")]) == 2
    assert "pip install 'sparseldp[spark]'" in capsys.readouterr().err
    assert cli_main(["privatize", "--engine", "local", "--master", "local[2]", str(src), "-m", str(spec),
                     "-c", "x", "-o", str(tmp_path / "o.parquet")]) == 2
    assert "--master applies to --engine spark only" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and not (tmp_path / "o.parquet").exists()
    from sparseldp import spark as sspark

    with pytest.raises(ModuleNotFoundError, match=r"pip install 'sparseldp\[spark\]'"):
        sspark.count_reports(object(), "x")
