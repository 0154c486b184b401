"""Tables I-IV against the paper (four decimals), writers, figures, ``sparseldp reproduce``."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from sparseldp import SparseGaussian, SparseLaplace
from sparseldp import figures, reproduce
from sparseldp.cli import main

# The paper's printed values (Section "Numerical illustrations"): swept value -> (delta*, R1, R2).
PAPER = {
    1: {3: (1.0000, 0.5481, 0.5481), 5: (0.6696, 0.9104, 1.4094), 7: (0.4686, 1.1851, 2.4071),
        9: (0.3706, 1.3929, 3.4108), 11: (0.3179, 1.5475, 4.3362), 13: (0.2880, 1.6603, 5.1386)},
    2: {3: (1.0000, 0.6383, 0.6383), 5: (0.6257, 1.0536, 1.6634), 7: (0.4173, 1.3267, 2.6929),
        9: (0.3468, 1.4744, 3.4283), 11: (0.3255, 1.5365, 3.8084), 13: (0.3203, 1.5563, 3.9513),
        15: (0.3193, 1.5611, 3.9906)},
    3: {0.2: (0.2402, 1.4996, 3.3254), 0.4: (0.1954, 1.2872, 2.6959), 0.6: (0.2466, 1.0870, 2.1390),
        0.8: (0.3811, 0.9061, 1.6695), 1.0: (0.4985, 0.7483, 1.2890), 1.2: (0.5974, 0.6142, 0.9899)},
    4: {0.8: (0.6886, 0.5469, 0.6398), 1.0: (0.5407, 0.7267, 0.9959), 1.2: (0.4009, 0.8915, 1.3997),
        1.5: (0.2651, 1.0984, 1.9831), 2.0: (0.2012, 1.3267, 2.6929), 2.5: (0.2301, 1.4551, 3.1140),
        3.0: (0.2466, 1.5306, 3.3673)},
}
SETTINGS = {1: ("laplace", 1.0, 3, "s", 0.5), 2: ("gaussian", 1.0, 3, "s", 2.0),
            3: ("laplace", 1.0, 2, "lam", 7), 4: ("gaussian", 1.0, 2, "sigma", 7)}


@pytest.fixture(scope="module")
def computed():
    return {t.number: t for t in reproduce.tables()}


@pytest.mark.parametrize("number", [1, 2, 3, 4])
def test_tables_match_paper_to_four_decimals(computed, number):
    table = computed[number]
    assert [row[0] for row in table.rows] == list(PAPER[number])
    for value, d, r1, r2 in table.rows:
        expected = PAPER[number][value]
        assert tuple(f"{x:.4f}" for x in (d, r1, r2)) == tuple(f"{x:.4f}" for x in expected), value


@pytest.mark.parametrize("number", [1, 2, 3, 4])
def test_experiment_settings_and_values_come_from_the_mechanisms(computed, number):
    family, eps, H, swept, fixed = SETTINGS[number]
    e = computed[number].experiment
    assert (e.family, e.eps, e.H, e.swept) == (family, eps, H, swept)
    for value, d, r1, r2 in computed[number].rows:
        s, p = (value, fixed) if swept == "s" else (fixed, value)
        m = SparseLaplace(lam=p, s=s) if family == "laplace" else SparseGaussian(sigma=p, s=s)
        assert (d, r1, r2) == (float(m.delta_star(eps, H)), m.r1, m.r2)


def test_csv_round_trips_exactly(computed):
    for t in computed.values():
        rows = list(csv.reader(io.StringIO(reproduce.to_csv(t))))
        assert rows[0] == [t.experiment.swept, "delta_star", "r1", "r2"]
        assert len(rows) == len(t.rows) + 1
        for got, (value, d, r1, r2) in zip(rows[1:], t.rows):
            assert float(got[0]) == value
            assert [float(x) for x in got[1:]] == [d, r1, r2]


def test_markdown_and_latex_carry_four_decimals(computed):
    t = computed[1]
    md = reproduce.to_markdown(t)
    assert "| 7 | 0.4686 | 1.1851 | 2.4071 |" in md
    assert md.count("\n| ") == len(t.rows) + 1  # header + rows
    tex = reproduce.to_latex(computed[4])
    assert r"\begin{tabular}{cccc}" in tex and r"\toprule" in tex and r"\bottomrule" in tex
    assert r"2.0 & 0.2012 & 1.3267 & 2.6929 \\" in tex
    assert r"\delta^{\mathrm G,*}(1,\sigma,7;2)" in tex and r"\label{tab:gaussian-sweep-sigma}" in tex
    assert r"\lambda" in reproduce.to_latex(computed[3])


def test_experiment_validation():
    with pytest.raises(ValueError, match="swept"):
        reproduce.Experiment(9, "k", "l", "laplace", eps=1.0, H=2, swept="sigma", values=(1.0,), s=7)
    with pytest.raises(ValueError, match="family"):
        reproduce.Experiment(9, "k", "l", "poisson", eps=1.0, H=2, swept="s", values=(3,), param=1.0)


def test_atomic_write_failures_leave_nothing(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        reproduce.atomic_write(tmp_path / "nope" / "a.csv", "x")
    (tmp_path / "dir").mkdir()
    with pytest.raises(ValueError, match="directory"):
        reproduce.atomic_write(tmp_path / "dir", b"x")
    assert [p.name for p in tmp_path.iterdir()] == ["dir"]
    reproduce.atomic_write(tmp_path / "a.txt", "hello")
    assert (tmp_path / "a.txt").read_text() == "hello"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "dir"]


# -- figures ------------------------------------------------------------------------


@pytest.mark.parametrize("number,family,fixed", [(1, "laplace", ("lam", 0.8)), (2, "gaussian", ("sigma", 1.5))])
def test_support_sweep_figures(number, family, fixed):
    data = figures.figure_data(number)
    spec = data.spec
    assert (spec.family, spec.eps, spec.H, spec.swept, spec.param) == (family, 1.0, 2, "s", fixed[1])
    assert np.all(data.x % 2 == 1)
    assert data.delta_star[0] == 1.0  # s = 1 < H + 1: Theorem 4
    assert np.all(np.diff(data.delta_star) <= 1e-15)  # nonincreasing in s (design module lemma)
    assert np.all(np.diff(data.r1) > 0)
    i = int(np.flatnonzero(data.x == 9)[0])
    m = SparseLaplace(lam=0.8, s=9) if family == "laplace" else SparseGaussian(sigma=1.5, s=9)
    assert (data.delta_star[i], data.r1[i]) == (float(m.delta_star(1.0, 2)), m.r1)


@pytest.mark.parametrize("number,table", [(3, 3), (4, 4)])
def test_parameter_sweep_figures_mark_table_points_and_minimum(computed, number, table):
    data = figures.figure_data(number)
    assert data.x.size >= 200  # dense sweep of the continuous parameter
    t = computed[table]
    np.testing.assert_array_equal(data.table_x, t.column(t.experiment.swept))
    np.testing.assert_array_equal(data.table_delta_star, t.column("delta_star"))
    # the plotted curve passes exactly through the table points
    idx = np.searchsorted(data.x, data.table_x)
    np.testing.assert_array_equal(data.x[idx], data.table_x)
    np.testing.assert_array_equal(data.delta_star[idx], data.table_delta_star)
    np.testing.assert_array_equal(data.r1[idx], data.table_r1)
    assert data.min_delta_star <= data.delta_star.min() + 1e-15
    assert data.min_delta_star <= min(t.column("delta_star"))
    spec = data.spec
    m = spec.mechanism(data.argmin_x)
    assert float(m.delta_star(spec.eps, spec.H)) == pytest.approx(data.min_delta_star, abs=1e-15)


def test_figure_number_validated():
    with pytest.raises(ValueError, match="figure number"):
        figures.figure_data(5)
    with pytest.raises(ValueError, match="fmt"):
        figures.render_figure(1, "svgz")


# -- the command ----------------------------------------------------------------------

TABLE_KEYS = ["table1_laplace_support", "table2_gaussian_support", "table3_laplace_lambda", "table4_gaussian_sigma"]
FIGURE_KEYS = ["figure1_laplace_support", "figure2_gaussian_support", "figure3_laplace_lambda",
               "figure4_gaussian_sigma"]


def test_reproduce_command_writes_everything(capsys, tmp_path):
    out_dir = tmp_path / "nested" / "out"
    rc = main(["reproduce", "--out", str(out_dir)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    expected = {f"{k}.{ext}" for k in TABLE_KEYS for ext in ("csv", "md", "tex")}
    expected |= {f"{k}.{ext}" for k in FIGURE_KEYS for ext in ("png", "pdf")}
    assert {p.name for p in out_dir.iterdir()} == expected  # nothing else (no temporaries)
    for k in FIGURE_KEYS:
        assert (out_dir / f"{k}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out_dir / f"{k}.pdf").read_bytes()[:5] == b"%PDF-"
        assert (out_dir / f"{k}.png").stat().st_size > 20_000
    assert "| 0.4 | 0.1954 | 1.2872 | 2.6959 |" in (out_dir / "table3_laplace_lambda.md").read_text()
    for roman in ("I", "II", "III", "IV"):
        assert f"Table {roman}:" in out
    assert "0.4686" in out and "0.3193" in out and "0.5974" in out and "0.2012" in out


def test_reproduce_out_is_a_file(capsys, tmp_path):
    target = tmp_path / "file.txt"
    target.write_text("keep")
    rc = main(["reproduce", "--out", str(target)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and len(err.splitlines()) == 1 and "directory" in err
    assert [p.name for p in tmp_path.iterdir()] == ["file.txt"] and target.read_text() == "keep"
