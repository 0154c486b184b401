"""``make demo``: the main job, end to end, through the command line.

1. Reproduce the paper's Tables I-IV and Figures 1-4 (``sparseldp reproduce``).
2. Design a mechanism for ages (``sparseldp design -o mech.json``).
3. Generate a synthetic data set: ages of 100,000 people.
4. Privatize it with the OS's secure randomness (``sparseldp privatize``).
5. Show the before/after summary.
6. Estimate the age distribution and mean back from the reports
   (``sparseldp estimate --plot``), plotted against the true histogram.

Everything lands in ``demo-output/``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from .cli import main as cli

OUT = Path("demo-output")


def _run(args: list[str]) -> None:
    from rich.console import Console

    Console(stderr=True).print(f"[bold cyan]$ sparseldp {' '.join(args)}[/]")
    code = cli(args)
    if code:
        raise SystemExit(f"demo step failed: sparseldp {' '.join(args)} (exit {code})")


def main() -> int:
    from rich.console import Console
    from rich.table import Table

    from .demo_data import write_demo_csv

    console = Console()
    OUT.mkdir(exist_ok=True)
    _run(["reproduce", "--out", str(OUT / "paper")])

    # privacy target: (eps, delta) = (1, 1e-6) for any two ages up to 5 years apart
    mech = OUT / "mech.json"
    _run(["design", "--family", "laplace", "--eps", "1", "--delta", "1e-6", "--H", "5", "-o", str(mech)])
    spec = json.loads(mech.read_text())
    spec.update({"domain": [0, 99], "window": "extended"})
    mech.write_text(json.dumps(spec, indent=2) + "\n")

    raw = OUT / "ages.csv"
    write_demo_csv(raw, 100_000, rng=np.random.default_rng(2026))
    private = OUT / "ages_private.csv"
    _run(["privatize", "--mechanism", str(mech), "--column", "age", str(raw), "-o", str(private)])

    import pyarrow.csv as pacsv

    before = pacsv.read_csv(raw).column("age").to_numpy()
    after = pacsv.read_csv(private).column("age").to_numpy()
    table = Table(title="Ages before and after privatization (n = 100,000)")
    for col in ("", "mean", "std", "min", "max", "share changed"):
        table.add_column(col, justify="right")
    table.add_row("true", f"{before.mean():.3f}", f"{before.std():.3f}", str(before.min()), str(before.max()), "")
    table.add_row("privatized", f"{after.mean():.3f}", f"{after.std():.3f}", str(after.min()), str(after.max()),
                  f"{np.mean(before != after):.1%}")
    console.print(table)
    console.print(
        f"mechanism: {spec['family']} lam={spec['lam']:.4g} s={spec['s']}  "
        f"delta*={spec['delta_star']:.3g} at eps={spec['eps']} for |x - x'| <= {spec['H']}  "
        f"(R1={spec['r1']:.3f}, R2={spec['r2']:.3f})"
    )

    est = OUT / "estimate.csv"
    _run(["estimate", "--mechanism", str(mech), "--column", "age", "--domain", "0:99", str(private),
          "-o", str(est), "--plot", str(OUT / "estimate.png")])
    p_true = np.bincount(before, minlength=100)[:100] / before.size
    p_hat = pacsv.read_csv(est).column("frequency").to_numpy()
    console.print(
        f"total-variation distance between estimated and true age histograms: "
        f"{0.5 * np.abs(p_hat - p_true).sum():.4f}"
    )
    console.print(f"[green]demo outputs in {OUT.resolve()}[/]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
