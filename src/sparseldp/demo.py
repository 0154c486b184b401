"""``make demo``: the main job, end to end, through the command line.

1. Reproduce the paper's Tables I-IV and Figures 1-4 (``sparseldp reproduce``).
2. Design a mechanism for ages (``sparseldp design -o mech.json``).
3. Generate a synthetic data set: ages of 100,000 people.
4. Privatize it with the OS's secure randomness (``sparseldp privatize``).
5. Show the before/after summary.
6. Estimate the age distribution and mean back from the reports
   (``sparseldp estimate --plot``) three ways: the maximum-likelihood
   estimate (``--method em``), EM with smoothing (``--method ems``) and
   least-squares inversion (``--method inversion``); a table of their errors
   against the true histogram, and ``estimate_vs_true.png``: the true
   histogram with the EM and EMS estimates.  The mechanism's window (137
   values) is wider than the domain (100 ages), so the deconvolution is
   ill-posed: the MLE fits the noise, EMS does not.

Everything lands in ``demo-output/``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from ._format import format_upper
from .cli import main as cli
from .core.families import get_family
from .demo_data import write_demo_csv

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
        f"delta*<={format_upper(spec['delta_star'], 3)} at eps={spec['eps']} for |x - x'| <= {spec['H']}  "
        f"(R1={spec['r1']:.3f}, R2={spec['r2']:.3f})"
    )

    ests = {}
    for method in ("auto", "em", "ems", "inversion"):
        out = OUT / ("estimate.csv" if method == "auto" else f"estimate_{method}.csv")
        # the default estimate also with likelihood-ratio intervals: what the reports alone pin down
        extra = ["--plot", str(OUT / "estimate.png"), "--profile", "--range", "18:65", "--truth", str(raw),
                 "--truth-column", "age"] if method == "auto" else ["--no-profile"]  # (on 100 values, on unasked)
        _run(["estimate", "--mechanism", str(mech), "--column", "age", "--domain", "0:99", str(private),
              "-o", str(out), "--method", method, *extra])
        ests[method] = pacsv.read_csv(out).column("frequency").to_numpy()
    p_true = np.bincount(before, minlength=100)[:100] / before.size
    console.print(_error_table(p_true, ests, before.size))
    fam = get_family(spec["family"])
    family, param = fam.mechanism.__name__, fam.param
    title = (f"Ages: true histogram vs estimates from {before.size:,} privatized reports\n"
             f"{family}({param}={spec[param]:.3g}, s={spec['s']}), extended window on 0..99; "
             f"eps={spec['eps']:g}, delta={spec['delta']:g} for |x - x'| <= {spec['H']}")
    figure = OUT / "estimate_vs_true.png"
    figure.write_bytes(_comparison_png(p_true, ests, title))
    console.print(f"true vs estimated histograms: {figure}")

    # baselines under the same exact accountant, on a small domain (seeded simulation)
    _run(["compare", "--eps", "1", "--delta", "1e-3", "--H", "2", "--domain", "0:30", "--seed", "2026",
          "--plot", str(OUT / "compare.png")])
    console.print(f"[green]demo outputs in {OUT.resolve()}[/]")
    return 0


def _errors(p_true: np.ndarray, p_hat: np.ndarray) -> tuple[float, float, float]:
    """Total variation, Kolmogorov (largest CDF difference) and |mean error| in years."""
    ages = np.arange(p_true.size)
    return (0.5 * float(np.abs(p_hat - p_true).sum()),
            float(np.abs(np.cumsum(p_hat) - np.cumsum(p_true)).max()),
            abs(float(ages @ p_hat) - float(ages @ p_true)))


_LABELS = {"auto": "auto (default)", "em": "em (MLE)", "ems": "ems (smoothed EM)",
           "inversion": "inversion (LS)"}


def _error_table(p_true: np.ndarray, ests: dict, n: int):
    from rich.table import Table

    table = Table(title=f"Estimated vs true age histogram (n = {n:,})")
    for col in ("method", "total variation", "max CDF diff", "|mean error| (years)"):
        table.add_column(col, justify="right" if col != "method" else "left")
    for method, p_hat in ests.items():
        tv, ks, dm = _errors(p_true, p_hat)
        table.add_row(_LABELS[method], f"{tv:.4f}", f"{ks:.4f}", f"{dm:.4f}")
    return table


def _comparison_png(p_true: np.ndarray, ests: dict, title: str) -> bytes:
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ages = np.arange(p_true.size)
    fig = Figure(figsize=(8.0, 4.6), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.bar(ages, p_true, width=1.0, color="0.80", edgecolor="0.65", linewidth=0.4, label="true histogram")
    styles = {"em": dict(color="tab:red", lw=0.9, marker=".", ms=4, alpha=0.85),
              "ems": dict(color="tab:blue", lw=2.2), "auto": dict(color="tab:green", lw=1.6, ls="--")}
    for method, style in styles.items():
        tv = _errors(p_true, ests[method])[0]
        name = {"em": "EM = maximum likelihood", "ems": "EMS = EM with (1,2,1)/4 smoothing",
                "auto": "auto (the default)"}[method]
        ax.plot(ages, ests[method], label=f"{name} (--method {method}): TV {tv:.3f}", **style)
    ax.set_xlim(-0.5, p_true.size - 0.5)
    # headroom: the legend sits above the MLE's spikes
    ax.set_ylim(0, 1.4 * max(float(p_true.max()), float(ests["em"].max()), float(ests["ems"].max())))
    ax.set_xlabel("age")
    ax.set_ylabel("share of people")
    ax.set_title(title, fontsize=10)
    handles, labels = ax.get_legend_handles_labels()  # bars are drawn first but listed last: move up
    order = [labels.index("true histogram")] + [i for i, lab in enumerate(labels) if lab != "true histogram"]
    ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=9, loc="upper right",
              framealpha=0.92, edgecolor="0.8")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=130, metadata={"Software": None})
    return buf.getvalue()


if __name__ == "__main__":
    sys.exit(main())
