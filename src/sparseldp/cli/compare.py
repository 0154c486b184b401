r"""``sparseldp compare``: every family at the same guarantee, side by side.

``sparseldp compare --eps 1 --delta 1e-6 --H 5 --domain 0:99 [--n 100000] [--seed 7] [--plot compare.png] [--json]``

Calibrates k-ary randomized response, the geometric mechanism (clamped and
folded), the clamped discrete Gaussian and the paper's sparse Laplace and
Gaussian mechanisms (clipped windows) to the target with the same exact
accountant (:func:`sparseldp.compare.compare`), then prints for each the
parameters, the certified ``delta_star`` (column "delta reached"), ``R1``/``R2`` (uniform average), the mean
support size and the total-variation error of the maximum-likelihood estimate
on a simulated population of ``--n`` people.

The simulation draws from the OS's secure source unless ``--seed`` is given;
with a seed the whole comparison is reproducible (a simulation protects
nothing, so a seed is appropriate here).  ``--plot`` writes the figure
atomically; an unreachable target for one family is reported in its row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from . import app
from ._common import Command, check_output, atomic_write_bytes, fmt, print_json, stdout_console
from ._common import parse_domain

__all__ = ["compare_command"]


@app.command("compare", cls=Command)
def compare_command(
    eps: Annotated[float, typer.Option("--eps", help="Target eps >= 0.")],
    delta: Annotated[float, typer.Option("--delta", help="Target delta in [0, 1].")],
    H: Annotated[int, typer.Option("--H", "--range", help="Privacy range: separations 1..H are protected.")],
    domain: Annotated[str, typer.Option("--domain", help="Input domain lo:hi.")],
    n: Annotated[int, typer.Option("--n", help="Simulated population size.")] = 100_000,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Seed the simulation (reproducible).")] = None,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Write the figure (.png or .pdf).")] = None,
    families: Annotated[Optional[str], typer.Option(
        "--families", help="Comma-separated subset, e.g. rr,sparse-laplace (default: all six).")] = None,
    objective: Annotated[str, typer.Option("--objective", help="r1 or r2 (sparse designs).")] = "r2",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Compare baselines and sparse mechanisms at the same (eps, delta) on range H."""
    from ..compare import COMPARE_FAMILIES, compare, format_params

    dom = parse_domain(domain)
    fams = None
    if families is not None:
        fams = [f.strip() for f in families.split(",") if f.strip()]
        bad = [f for f in fams if f not in COMPARE_FAMILIES]
        if bad or not fams:
            raise ValueError(f"--families must be a comma-separated subset of {','.join(COMPARE_FAMILIES)}; "
                             f"got {families!r}")
    if plot is not None:
        check_output(plot, "plot")
        plot_fmt = plot.suffix.lower().lstrip(".")
        if plot_fmt not in ("png", "pdf"):
            raise ValueError(f"--plot must end in .png or .pdf; got {str(plot)!r}")
    if seed is not None and seed < 0:
        raise ValueError(f"--seed must be an integer >= 0; got {seed}")
    result = compare(eps=eps, delta=delta, H=H, domain=dom, n=n, families=fams, rng=seed, objective=objective)
    if plot is not None:
        atomic_write_bytes(plot, result.render(plot_fmt))
    if as_json:
        print_json(result.to_dict())
        return
    from rich.table import Table

    sim = f"seeded with {seed}, reproducible" if seed is not None else "OS randomness, not reproducible"
    table = Table(title=f"(eps, delta) = ({eps:g}, {delta:g}) on range H = {H}, domain {dom[0]}..{dom[1]}; "
                        f"TV error on n = {n:,} simulated reports ({sim})")
    for col, just in (("family", "left"), ("parameters", "left"), ("delta reached", "right"), ("R1", "right"),
                      ("R2", "right"), ("mean support", "right"), ("TV error (EM)", "right"),
                      ("TV error (EMS)", "right")):
        table.add_column(col, justify=just)
    for r in result.rows:
        if r.error is not None:
            table.add_row(r.family, "[red]infeasible[/]", "-", "-", "-", "-", "-", "-")
            continue
        tv = fmt(r.tv, 4) + ("" if r.converged else " *")
        table.add_row(r.family, format_params(r.params), fmt(r.delta_star, 4), fmt(r.r1, 5), fmt(r.r2, 5),
                      fmt(r.support, 4), tv, fmt(r.tv_ems, 4))
    import sys

    from rich.console import Console

    # wide enough for the eight columns when piped (rich defaults to 80 there)
    console = stdout_console() if sys.stdout.isatty() else Console(file=sys.stdout, highlight=False, width=180)
    console.print(table)
    if any(r.converged is False for r in result.rows):
        console.print("* EM stopped at its step cap before the certified gap reached its tolerance", soft_wrap=True)
    for r in result.rows:
        if r.error is not None:
            console.print(f"{r.family}: {r.error}", soft_wrap=True)
    if plot is not None:
        console.print(f"figure written to {plot}", soft_wrap=True)
