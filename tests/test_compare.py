"""compare(): every family under the same accountant, what users measure, the recommendation; the
`compare` and `estimate` commands."""

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

from sparseldp import SparseLaplace
from sparseldp.baselines import FAMILIES, duchi, geometric, randomized_response, square_wave
from sparseldp.channel import SparseChannel
from sparseldp.cli import main
from sparseldp.compare import COMPARE_FAMILIES, METRICS, SHAPES, Comparison, compare, population_shape
from sparseldp.compare.metrics import simulate_counts, unbiased_mean_estimator
from sparseldp.compare.sweep import sweep
from sparseldp.estimation import estimate_frequencies, estimate_mean
from sparseldp.sampling import sample
from sparseldp.spec import load_spec

TARGET = dict(eps=1.0, delta=1e-2, H=2, domain=(0, 11))


def brute_delta(P, x, eps, H):
    """Exact sup over ordered pairs |x - x'| <= H of sum_y [P(y|x) - e^eps P(y|x')]_+ (dense)."""
    best = 0.0
    for i in range(len(x)):
        for j in range(len(x)):
            if i != j and abs(x[i] - x[j]) <= H:
                best = max(best, float(np.maximum(P[i] - math.exp(eps) * P[j], 0).sum()))
    return best


@pytest.fixture(scope="module")
def result():
    return compare(**TARGET, n=2000, rng=11, ems="authors", method="em")


def test_every_family_meets_the_target_by_an_independent_check(result):
    assert isinstance(result, Comparison)
    assert [r.family for r in result.rows] == list(COMPARE_FAMILIES)
    for r in result.rows:
        assert r.error is None, r.error
        assert r.delta_star <= TARGET["delta"]
        ch = r.channel
        assert brute_delta(ch.matrix.toarray(), ch.inputs.tolist(), 1.0, 2) <= TARGET["delta"] + 1e-12
        assert 0 <= r.tv <= 1 and r.w1 >= 0 and r.quantile_error >= 0 and r.mean_rmse > 0
        assert 0 < r.r1 and r.r1 ** 2 <= r.r2 + 1e-9  # Jensen
        assert abs(r.estimate.sum() - 1) < 1e-9 and r.estimate.shape == (12,)
    rows = {r.family: r for r in result.rows}
    assert rows["square-wave"].w1_ems is not None and rows["rr"].w1_ems is None  # ems="authors"
    assert rows["piecewise"].mean_method == "unbiased (paper)"
    assert rows["sparse-laplace"].mean_method == "report mean" and rows["sparse-laplace"].params["s"] % 2 == 1
    assert rows["geometric-clamp"].mean_method == "unbiased (channel inversion)"  # a linear unbiased mean
    assert rows["rr"].mean_method == rows["square-wave"].mean_method == "unbiased (channel inversion)"
    assert rows["discrete-gaussian"].mean_method == "EM estimate"  # clamped far tails: the inversion is refused
    assert rows["duchi"].params["eps"] > 1.5  # on range H = 2 of 12 values Duchi affords a larger eps of its own
    assert rows["rr"].support == 12


@pytest.mark.parametrize("name", ["duchi", "geometric-clamp", "square-wave"])
def test_calibrated_parameter_is_at_the_boundary(result, name):
    """A little less noise than the calibrated parameter breaks the target (checked by brute force)."""
    r = result.row(name)
    entry = FAMILIES[name]
    worse = entry.constructor(**{entry.param: r.params[entry.param] * 1.001}, domain=TARGET["domain"])
    assert brute_delta(worse.matrix.toarray(), worse.inputs.tolist(), 1.0, 2) > TARGET["delta"]


def test_pure_at_eps_and_infeasible_rows():
    res = compare(eps=1.0, delta=0.0, H=2, domain=(0, 11), n=500, rng=1, ems="none", method="em", pure_at_eps=True,
                  families=["piecewise", "duchi", "sparse-laplace"])
    pm, du, sl = res.rows
    assert pm.params["eps"] <= 1.0 and pm.params["eps"] == pytest.approx(1.0, rel=1e-8) and pm.delta_star == 0.0
    assert du.params["eps"] == pytest.approx(1.0, rel=1e-8)
    assert sl.error is not None and sl.w1 is None  # delta = 0: no sparse window on Z (Theorem 1)
    assert res.to_dict()["families"][2] == {"family": "sparse-laplace", "label": sl.label, "error": sl.error}


def test_seeded_reproducible_and_independent_of_the_other_families(result):
    alone = compare(**TARGET, n=2000, rng=11, ems="authors", method="em", families=["square-wave"])
    assert alone.rows[0].w1 == result.row("square-wave").w1
    assert alone.rows[0].w1_ems == result.row("square-wave").w1_ems
    assert np.array_equal(alone.true_histogram, result.true_histogram)
    other = compare(**TARGET, n=2000, rng=12, ems="none", method="em", families=["square-wave"])
    assert other.rows[0].w1 != alone.rows[0].w1
    assert result.seeded and result.seed == 11


def test_mean_trials_measure_only_the_em_means():
    kw = dict(**TARGET, n=500, rng=9, ems="none", method="em", families=["discrete-gaussian", "duchi"])
    one, many = compare(**kw), compare(**kw, mean_trials=12)
    assert many.mean_trials == 12 and many.to_dict()["mean_trials"] == 12
    assert many.rows[0].w1 == one.rows[0].w1  # the distribution errors use the first trial only
    assert many.rows[0].mean_rmse != one.rows[0].mean_rmse  # over 12 EM fits instead of 1
    assert many.rows[1].mean_rmse == one.rows[1].mean_rmse  # Duchi's is exact


def test_exact_mean_rmse_matches_simulation():
    """The linear estimator's exact RMSE against 400 simulated populations (chi-square bounds, FPR 2e-6)."""
    dom, n, T = (0, 11), 300, 400
    ch = duchi(eps=1.0, domain=dom)
    v, var, method = unbiased_mean_estimator(ch, dom)
    assert method == "unbiased (paper)"
    counts = np.full(12, n // 12)
    sigma2 = float(counts @ var) / (counts.sum() ** 2)
    gen = np.random.default_rng(5)
    xs = np.arange(12)
    errs = [float(simulate_counts(ch, counts, gen, dom) @ v) / counts.sum() - float(counts @ xs) / counts.sum()
            for _ in range(T)]
    stat = float(np.sum(np.square(errs))) / sigma2  # ~ chi2(T): the mean of 300 reports is near normal
    assert stats.chi2.ppf(1e-6, T) < stat < stats.chi2.isf(1e-6, T)


@pytest.mark.parametrize("family, build", [
    ("rr", lambda dom: randomized_response(eps=1.0, domain=dom)),
    ("geometric-clamp", lambda dom: geometric(lam=0.5, domain=dom)),
    ("square-wave", lambda dom: square_wave(eps=1.0, domain=dom)),
    ("clipped laplace", lambda dom: SparseChannel.laplace(lam=0.4, s=7, domain=dom, window="clipped")),
])
def test_the_channel_inversions_exact_rmse_matches_simulation_and_it_is_unbiased(family, build):
    """The channel's unbiased linear estimator (estimate_mean's for biased channels): 400 simulated report
    sets from a concentrated population, error against the inputs' own mean; chi-square bounds (FPR 2e-6)."""
    dom, n, T = (0, 11), 300, 400
    ch = build(dom)
    v, var, method = unbiased_mean_estimator(ch, dom)
    assert method == "unbiased (channel inversion)"
    assert np.allclose(ch.matrix.toarray() @ v, ch.inputs, atol=1e-9)  # E[v(Y) | x] = x, every input
    counts = np.array([150, 90, 40, 20, 0, 0, 0, 0, 0, 0, 0, 0])  # most of the domain empty
    sigma2 = float(counts @ var) / (counts.sum() ** 2)
    gen = np.random.default_rng(7)
    xs = np.arange(12)
    errs = [float(simulate_counts(ch, counts, gen, dom) @ v) / n - float(counts @ xs) / n for _ in range(T)]
    stat = float(np.sum(np.square(errs))) / sigma2
    assert stats.chi2.ppf(1e-6, T) < stat < stats.chi2.isf(1e-6, T)


def test_simulated_counts_follow_the_channel():
    ch = duchi(eps=0.8, domain=(0, 11))
    c_in = np.zeros(12, dtype=np.int64)
    c_in[3] = 20_000
    got = simulate_counts(ch, c_in, np.random.default_rng(2), (0, 11))
    exp = 20_000 * ch.matrix.toarray()[3]
    stat = float(((got - exp) ** 2 / exp).sum())
    assert got.sum() == 20_000 and stat < stats.chi2.isf(1e-6, 1)


def test_user_data_is_the_truth():
    values = np.array([0, 0, 1, 5, 5, 5, 11, 3] * 50)
    res = compare(**TARGET, data=values, rng=3, ems="none", method="em", families=["sparse-laplace", "rr"])
    np.testing.assert_allclose(res.true_histogram, np.bincount(values, minlength=12) / values.size)
    assert res.n == values.size and res.source == "data"
    again = compare(**TARGET, data=(0, np.bincount(values, minlength=12)), rng=3, ems="none", method="em",
                    families=["sparse-laplace", "rr"])
    assert [r.w1 for r in again.rows] == [r.w1 for r in res.rows]


def test_recommendation_and_winner_spec(result, tmp_path):
    for metric in METRICS:
        rec = result.recommend(metric)
        values = [r.metric(metric) for r in result.rows if r.metric(metric) is not None]
        assert rec.value == min(values) and rec.winner.metric(metric) == rec.value
        assert rec.ranking[0] == (rec.winner.family, rec.value)
    assert "best for w1" in result.recommend("w1").describe()
    for name in ("square-wave", "sparse-laplace", "geometric-fold"):
        spec = result.spec(name)
        path = tmp_path / f"{name}.json"
        from sparseldp.spec import save_spec

        save_spec(spec, path)
        loaded = load_spec(path)  # recomputes and checks every recorded claim
        assert (loaded.channel().matrix != result.row(name).channel.matrix).nnz == 0
        assert loaded.guarantee.delta <= TARGET["delta"] and loaded.guarantee.H == 2


def test_population_shapes():
    for name in SHAPES:
        p = population_shape(name, (0, 19))
        assert p.shape == (20,) and (p >= 0).all() and p.sum() == pytest.approx(1.0, abs=1e-12)
    assert population_shape("spiky", (0, 19))[4] > 0.3
    res = compare(**TARGET, population="spiky", n=1000, rng=2, ems="none", method="em", families=["duchi"])
    assert res.true_histogram[2] > 0.25  # the spike at 20% of 0..11


@pytest.mark.parametrize("kwargs, exc, needle", [
    (dict(population=[1] * 12, data=[1, 2]), ValueError, "cannot be combined"),
    (dict(n=10, data=[1, 2]), ValueError, "cannot be combined"),
    (dict(data=[1, 20]), ValueError, "data values must lie in the domain 0..11; got 20"),
    (dict(data="x"), TypeError, "data must be a 1-D array"),
    (dict(window="open"), ValueError, "window must be 'extended' or 'clipped'"),
    (dict(ems="some"), ValueError, "ems must be 'all', 'authors' or 'none'; got 'some'"),
    (dict(trials=0), ValueError, "trials must be an integer in"),
    (dict(method="mle"), ValueError, "method must be 'auto', 'em', 'ems' or 'inversion' \\(or omitted"),
    (dict(objective="r3"), ValueError, "objective must be 'r1' or 'r2'; got 'r3'"),
    (dict(pure_at_eps=1), TypeError, "pure_at_eps must be"),
    (dict(trials=3, mean_trials=2), ValueError, "mean_trials must be an integer in \\[3, "),
    (dict(families=["laplace"]), ValueError, "families must be names from"),
    (dict(population=[1, 2, 3]), ValueError, "population must be an array of 12"),
    (dict(rng=1.5), TypeError, "rng must be None, an int seed"),
    (dict(population="flat"), ValueError, "population shape must be one of two-bump, uniform"),
])
def test_compare_bad_input(kwargs, exc, needle):
    with pytest.raises(exc, match=needle):
        compare(**TARGET, **kwargs)
    with pytest.raises(ValueError, match="metric must be one of"):
        Comparison(1.0, 0.1, 1, (0, 1), 1, False, None, np.ones(2) / 2, ()).recommend("rmse")


def test_sweep_figure():
    sw = sweep([2.0, 0.5], delta=1e-2, H=2, domain=(0, 11), n=500, rng=4, ems="none", method="em",
               families=["rr"], target_eps=1.0)
    assert sw.eps == (0.5, 2.0) and set(sw.values["w1"]) == {"rr"}
    assert sw.values["r2"]["rr"][0] > sw.values["r2"]["rr"][1]  # more privacy, more distortion
    assert sw.render("png")[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(json.dumps(sw.to_dict()))["eps"] == [0.5, 2.0]


def test_comparison_figure_bytes(result):
    assert result.render("png")[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="fmt must be 'png' or 'pdf'"):
        result.render("svg")


# ---------------------------------------------------------------------------
# the compare command
# ---------------------------------------------------------------------------
def run(argv, capsys):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


BASE = ["compare", "--eps", 1, "--delta", 0.01, "--H", 2, "--domain", "0:11", "--seed", 3]


def test_compare_cli_recommends_and_writes_a_spec_privatize_accepts(capsys, tmp_path):
    spec, fig = tmp_path / "winner.json", tmp_path / "errors.png"
    rc, out, err = run(BASE + ["--n", 1000, "--families", "square-wave,duchi", "--metric", "mean", "-o", spec,
                               "--shape", "normal", "--method", "em"], capsys)
    assert rc == 0, err
    assert "Recommendation: best for mean" in out and "square-wave" in out and "reproducible" in out
    assert "simulated normal population" in out and not fig.exists()
    doc = json.loads(spec.read_text())
    assert doc["family"] in ("square-wave", "duchi") and doc["eps"] == 1 and doc["H"] == 2
    people = tmp_path / "people.csv"
    people.write_text("id,age\n" + "".join(f"{i},{i % 12}\n" for i in range(60)))
    private = tmp_path / "private.csv"
    rc, out, err = run(["privatize", "-m", spec, "-c", "age", people, "-o", private], capsys)
    assert rc == 0, err
    assert len(private.read_text().splitlines()) == 61 and "guarantee per column" in err


def test_compare_cli_json_with_user_data(capsys, tmp_path):
    data = tmp_path / "ages.csv"
    data.write_text("age\n" + "".join(f"{v}\n" for v in [1, 2, 2, 3, 9, 11] * 20))
    fig = tmp_path / "errors.png"
    rc, out, err = run(BASE + ["--data", data, "--column", "age", "--families", "duchi", "--json", "--method", "em",
                               "--plot", fig, "--plot-eps", "2"], capsys)
    assert rc == 0, err
    assert fig.read_bytes()[:4] == b"\x89PNG"
    doc = json.loads(out)
    assert doc["n"] == 120 and doc["truth"] == "data"
    assert doc["recommendation"]["metric"] == "w1"
    assert doc["recommendation"]["family"] == min(doc["families"], key=lambda f: f["w1"])["family"]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--domain", "5:1"], "--domain must be lo:hi with integers lo <= hi"),
        (["--families", "rr,nope"], "--families must be a comma-separated subset"),
        (["--plot", "x.svg"], "--plot must end in .png or .pdf"),
        (["--plot-eps", "1,2"], "--plot-eps applies only with --plot"),
        (["--seed", "-1"], "--seed must be an integer >= 0"),
        (["--delta", "2"], "delta must be a real number in [0, 1]"),
        (["--metric", "rmse"], "--metric must be one of w1, tv"),
        (["--data", "x.csv"], "--data FILE and --column NAME go together"),
        (["--window", "open"], "--window must be 'extended' or 'clipped'"),
        (["--trials", "0"], "--trials must be an integer"),
        (["--trials", "2", "--mean-trials", "1"], "--mean-trials must be an integer in [2, 10000]; got 1"),
        (["--objective", "r3"], "--objective must be 'r1' or 'r2'; got 'r3'"),
        (["--shape", "flat"], "--shape must be one of two-bump, uniform"),
        (["--method", "mle"], "--method must be 'auto', 'em', 'ems' or 'inversion'"),
        (["--plot", "x.png", "--plot-eps", "1,-2"], "--plot-eps must be comma-separated numbers > 0"),
    ],
)
def test_compare_cli_bad_input(capsys, argv, needle):
    base = {"--eps": "1", "--delta": "0.01", "--H": "2", "--domain": "0:11"}
    args = ["compare"]
    over = dict(zip(argv[::2], argv[1::2]))
    for key, val in {**base, **over}.items():
        args += [key, val]
    rc, out, err = run(args, capsys)
    assert rc == 2 and needle in err and err.count("\n") == 1


def test_compare_cli_data_errors_leave_no_output(capsys, tmp_path):
    data = tmp_path / "ages.csv"
    data.write_text("age\n1\n50\n")
    spec = tmp_path / "w.json"
    rc, out, err = run(BASE + ["--data", data, "--column", "age", "-o", spec], capsys)
    assert rc == 2 and ": the value is outside the allowed range [0, 11]" in err and "'50'" not in err
    assert not spec.exists()
    rc, out, err = run(BASE + ["--data", data, "--column", "age", "--n", 10], capsys)
    assert rc == 2 and "--n sets the size of a simulated population" in err


# ---------------------------------------------------------------------------
# the estimate command
# ---------------------------------------------------------------------------
@pytest.fixture()
def reports(tmp_path):
    rng = np.random.default_rng(3)
    x = np.clip(rng.normal(40, 12, 4000).astype(int), 0, 99)
    mech = SparseLaplace(lam=0.5, s=21)
    y = sample(mech, x, rng=4)
    csv = tmp_path / "private.csv"
    csv.write_text("id,age\n" + "".join(f"{i},{v}\n" for i, v in enumerate(y)))
    spec = tmp_path / "mech.json"
    spec.write_text(json.dumps({"family": "laplace", "lam": 0.5, "s": 21}))
    return tmp_path, csv, spec, y, mech


def test_estimate_cli_csv_output_matches_library(capsys, reports):
    tmp, csv, spec, y, mech = reports
    out_csv, fig = tmp / "est.csv", tmp / "est.png"
    rc, out, err = run(["estimate", "--mechanism", spec, "--column", "age", "--domain", "0:99", csv, "-o", out_csv,
                        "--plot", fig], capsys)
    assert rc == 0, err
    lines = out_csv.read_text().splitlines()
    assert lines[0] == "value,frequency,ci_low,ci_high" and len(lines) == 101
    got = np.array([float(line.split(",")[1]) for line in lines[1:]])
    np.testing.assert_allclose(got, estimate_frequencies(y, mech, domain=(0, 99)), rtol=0, atol=1e-15)
    m = estimate_mean(y, mech, domain=(0, 99))
    assert "mean = " in out and f"{float(m):.6g}"[:5] in out and "report-mean" in out
    assert fig.read_bytes()[:4] == b"\x89PNG"


def test_estimate_cli_parquet_json_and_spec_domain(capsys, reports):
    tmp, csv, spec, y, mech = reports
    pq_path = tmp / "private.parquet"
    pq.write_table(pa.table({"age": pa.array(y, pa.int32())}), pq_path)
    dom_spec = tmp / "mech_dom.json"
    dom_spec.write_text(json.dumps({"family": "laplace", "lam": 0.5, "s": 21, "domain": [0, 99],
                                    "window": "extended"}))
    out_csv = tmp / "est.csv"
    rc, out, err = run(["estimate", "-m", dom_spec, "-c", "age", pq_path, "-o", out_csv, "--json",
                        "--method", "inversion"], capsys)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["n"] == y.size and doc["method"] == "inversion" and doc["domain"] == [0, 99]
    assert doc["mean"]["mean"] == pytest.approx(y.mean(), rel=1e-12)


@pytest.mark.parametrize(
    "column, extra, content, needle",
    [
        ("age", [], "age\n1\n2\n500\n",
         "row 3 (line 4): column 'age': the value is outside the allowed range [-10, 109]"),
        ("age", [], "age\n1\nx\n", "row 2"),
        ("age", ["--method", "mle"], "age\n1\n", "--method must be 'auto', 'em', 'ems' or 'inversion'"),
        ("height", [], "age\n1\n", "height"),
        ("age", [], "age\n", "has no reports"),
    ],
)
def test_estimate_cli_errors_leave_no_output(capsys, tmp_path, column, extra, content, needle):
    spec = tmp_path / "mech.json"
    spec.write_text(json.dumps({"family": "laplace", "lam": 0.5, "s": 21}))
    src = tmp_path / "in.csv"
    src.write_text(content)
    out_csv = tmp_path / "est.csv"
    rc, out, err = run(["estimate", "-m", spec, "-c", column, src, "-o", out_csv, "--domain", "0:99", *extra],
                       capsys)
    assert rc == 2 and needle in err and err.count("\n") == 1
    assert not out_csv.exists()


def test_estimate_cli_bad_domain(capsys, reports):
    tmp, csv, spec, y, mech = reports
    rc, out, err = run(["estimate", "-m", spec, "-c", "age", csv, "-o", tmp / "e.csv", "--domain", "9:0"], capsys)
    assert rc == 2 and "--domain must be lo:hi" in err and not (tmp / "e.csv").exists()


def test_estimate_cli_needs_domain_without_spec_domain(capsys, reports):
    tmp, csv, spec, y, mech = reports
    rc, out, err = run(["estimate", "-m", spec, "-c", "age", csv, "-o", tmp / "e.csv"], capsys)
    assert rc == 2 and "--domain lo:hi is required" in err
    dom_spec = tmp / "d.json"
    dom_spec.write_text(json.dumps({"family": "laplace", "lam": 0.5, "s": 21, "domain": [0, 50]}))
    rc, out, err = run(["estimate", "-m", dom_spec, "-c", "age", csv, "-o", tmp / "e.csv", "--domain", "0:99"],
                       capsys)
    assert rc == 2 and "must lie inside the spec's domain" in err


# ---------------------------------------------------------------------------
# estimate: the papers' unbiased mean for Piecewise, Hybrid and Duchi; the EMS hint of compare
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name, source", [("piecewise", "Wang et al. 2019"), ("hybrid", "Wang et al. 2019"),
                                          ("duchi", "Duchi et al. 2013")])
def test_estimate_mean_is_the_papers_unbiased_estimator_and_its_interval_covers(name, source):
    """The value is the mean of report_estimates over the reports; over 100 seeded simulations of 400
    fixed inputs the 95% interval misses the inputs' mean at most 18 times (for a true coverage of 95%,
    P(more than 18 misses) < 1e-6)."""
    from sparseldp.baselines import report_estimates

    ch = FAMILIES[name].constructor(eps=1.0, domain=(0, 20))
    est = report_estimates(ch)
    x = np.random.default_rng(5).integers(2, 15, 400)  # fixed inputs, away from the middle
    counts = np.bincount(x, minlength=21)
    gen = np.random.default_rng(6)
    misses = 0
    for trial in range(100):
        c = simulate_counts(ch, counts, gen, (0, 20))
        m = estimate_mean(np.repeat(ch.outputs, c), ch, domain=(0, 20))
        assert m.method == f"unbiased ({source})"
        assert float(m) == pytest.approx(float(c @ est) / c.sum(), rel=1e-12)
        misses += not (m.ci[0] <= x.mean() <= m.ci[1])
    assert misses <= 18


def test_estimate_cli_reports_the_unbiased_mean_beside_the_distribution(capsys, tmp_path):
    from sparseldp.baselines import piecewise, report_estimates
    from sparseldp.spec import save_spec, spec_from_channel

    ch = piecewise(eps=1.0, domain=(0, 30))
    spec = tmp_path / "pm.json"
    save_spec(spec_from_channel(ch, eps=1.0, H=30, delta=0.0), spec)
    y = ch.sample(np.random.default_rng(1).integers(0, 31, 3000), rng=2)
    csv = tmp_path / "reports.csv"
    csv.write_text("y\n" + "\n".join(map(str, y)) + "\n")
    want = float(np.mean(report_estimates(ch)[np.searchsorted(ch.outputs, y)]))
    rc, out, err = run(["estimate", "-m", spec, "-c", "y", csv, "-o", tmp_path / "e.csv", "--bootstrap", 0],
                       capsys)
    assert rc == 0, err
    line = next(s for s in out.splitlines() if s.startswith("mean = "))
    assert f"{want:.6g}"[:6] in line and "unbiased (Wang et al. 2019)" in line
    assert "the distribution estimate's" in out and "derived statistics" in out
    rc, out, err = run(["estimate", "-m", spec, "-c", "y", csv, "-o", tmp_path / "e2.csv", "--bootstrap", 0,
                        "--json"], capsys)
    doc = json.loads(out)
    assert doc["mean"]["method"] == "unbiased (Wang et al. 2019)"
    assert doc["mean"]["mean"] == pytest.approx(want, rel=1e-12)
    # the derived statistics keep the distribution estimate's own mean
    assert doc["statistics"][0]["statistic"] == "mean" and doc["statistics"][0]["value"] != doc["mean"]["mean"]


def test_ems_hint_only_when_strictly_lower_as_printed():
    from sparseldp.cli.compare import _ems_note
    from sparseldp.compare import ComparisonRow

    def result(w1_ems):
        rows = (ComparisonRow("square-wave", "sw", w1=0.12345, w1_ems=w1_ems),
                ComparisonRow("rr", "rr", w1=0.2, w1_ems=0.3))
        return Comparison(1.0, 0.0, 1, (0, 9), 10, True, 1, np.zeros(10), rows)

    assert _ems_note(result(0.12344), "w1", 0.12344) is None  # equal
    assert _ems_note(result(0.12341), "w1", 0.12344) is None  # lower, but equal as printed (0.1234 both)
    note = _ems_note(result(0.1), "w1", 0.12344)
    assert note.startswith("with EMS estimation, lower still: square-wave (w1 = 0.1, against 0.1234)")
    assert _ems_note(result(0.1), "mean", 0.12344) is None
