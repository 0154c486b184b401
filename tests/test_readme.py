"""The README's Python walk-through runs as written: a stale call (a renamed keyword, a method that moved)
fails here instead of in a new user's first session."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def test_python_walkthrough_runs():
    block = next(b for b in _python_blocks() if "import sparseldp as sl" in b)
    gen = np.random.default_rng(0)
    x_array = np.clip(np.round(gen.normal(40, 12, 20_000)), 0, 99).astype(np.int64)
    import sparseldp as sl

    reports = sl.SparseLaplace(lam=0.5, s=7).sample(x_array, rng=1)  # the block's m, on the block's domain
    names = {"x_array": x_array, "reports": reports}
    exec(compile(block, str(README), "exec"), names)  # noqa: S102 -- the README's own code
    # what the comments say
    assert round(float(names["m"].delta_star(1.0, H=3)), 4) == 0.4686
    est = names["est"]
    assert est.method == "auto" and est.regularization
    value, (lo, hi) = est.mean(ci=names["b"])
    assert lo <= value <= hi and abs(value - x_array.mean()) < 1.0
    assert np.allclose(names["p"], sl.estimate_frequencies(reports, names["m"], domain=(0, 99), method="em"))


def _console_commands() -> list[list[str]]:
    """The ``$ sparseldp ...`` lines of the README's command-line section, continuations joined, comments cut."""
    text = README.read_text()
    section = text[text.index("## Command line"):]
    section = section[:section.index("```", section.index("```console") + 3)]
    joined = re.sub(r"\\\n\s*", " ", section)
    commands = []
    for line in joined.splitlines():
        if line.startswith("$ sparseldp "):
            commands.append(shlex.split(line[2:].split("  #")[0])[1:])
    return commands


def test_command_line_walkthrough_runs(capsys, tmp_path, monkeypatch):
    from cli_helpers import run

    commands = _console_commands()
    assert len(commands) >= 15
    monkeypatch.chdir(tmp_path)
    gen = np.random.default_rng(2)
    ages = np.clip(np.round(gen.normal(40, 15, 3000)), 0, 99).astype(int)
    Path("people.csv").write_text("age\n" + "\n".join(map(str, ages)) + "\n")
    for argv in commands:
        if argv[0] == "reproduce":  # every table and figure of the paper: tests/test_reproduce.py
            continue
        if argv[0] == "privatize":
            argv = [*argv, "--seed", "5"]
        rc, out, err = run(capsys, *argv)
        assert rc == 0, (argv, err)
    for name in ("mech.json", "private.csv", "estimate.csv", "estimate.png", "smooth.csv", "auto.parquet",
                 "est.csv", "est.png", "report.html"):
        assert Path(name).stat().st_size > 0, name
    assert "lr_low" in Path("est.csv").read_text().splitlines()[0]
