r"""``sparseldp design``: a mechanism from a privacy target.

Given ``(eps, delta)`` and the privacy range ``H``, calls
:func:`sparseldp.design.design`: with ``--lam`` (``--sigma``) the smallest odd
support ``s`` with ``delta_star(eps, H) <= delta`` for that parameter (which is
distortion-optimal for it, Theorems 6 and 12); without, the jointly optimal
``(s, lam)`` / ``(s, sigma)`` minimizing ``R1`` or ``R2`` (``--objective``).

``--json`` prints exactly ``{"family", "lam" | "sigma", "s", "eps", "delta",
"H", "delta_star", "r1", "r2"}``; ``-o FILE`` writes the same object as a
mechanism spec (:mod:`sparseldp.spec`) for ``privatize`` and ``estimate``,
atomically.  An unreachable target exits with status 2 and the proof of
infeasibility on stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from . import app
from ._common import Command, check_family, family_param, fmt, print_json, stdout_console

__all__ = ["design_command"]


def _print_table(d, output: Path | None, header: str) -> None:
    from rich.table import Table

    m = d.mechanism
    table = Table(show_header=False)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_column("meaning", style="dim")
    table.add_row(d.param_name, fmt(d.param, 10),
                  "inverse temperature" if d.param_name == "lam" else "scale")
    table.add_row("s", str(d.s), f"support size (radius t = {m.t})")
    table.add_row("eps", fmt(d.eps, 10), "target")
    table.add_row("delta", fmt(d.delta, 10), "target")
    table.add_row("H", str(d.H), "privacy range")
    table.add_row("delta_star", fmt(d.delta_star, 10), f"max of delta_h, 1 <= h <= {d.H}")
    table.add_row("R1", fmt(d.r1, 10), "E|Y - x|")
    table.add_row("R2", fmt(d.r2, 10), "E(Y - x)^2")
    console = stdout_console()
    console.print(header)
    console.print(table)
    if output is not None:
        console.print(f"mechanism spec written to {output}")


def _save(d, output: Path) -> None:
    from ..spec import save_spec, spec_from_mechanism

    spec = spec_from_mechanism(d.mechanism, eps=d.eps, delta=d.delta, H=d.H,
                               delta_star=d.delta_star, r1=d.r1, r2=d.r2)
    parent = output.parent if str(output.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"cannot write {str(output)!r}: directory {str(parent)!r} does not exist")
    if output.is_dir():
        raise ValueError(f"cannot write {str(output)!r}: it is a directory")
    try:
        save_spec(spec, output)  # temporary file + rename
    except OSError as exc:
        raise ValueError(f"cannot write {str(output)!r}: {exc.strerror or exc}") from None


@app.command("design", cls=Command)
def design_command(
    family: Annotated[str, typer.Option("--family", help="Mechanism family: laplace or gaussian.")],
    eps: Annotated[float, typer.Option("--eps", help="Target eps >= 0.")],
    delta: Annotated[float, typer.Option("--delta", help="Target delta in [0, 1].")],
    H: Annotated[int, typer.Option("--H", "--range", help="Privacy range: separations 1..H are protected.")],
    lam: Annotated[Optional[float], typer.Option("--lam", help="Fix lam (laplace): only s is chosen.")] = None,
    sigma: Annotated[Optional[float], typer.Option("--sigma", help="Fix sigma (gaussian): only s is chosen.")] = None,
    objective: Annotated[str, typer.Option("--objective", help="Distortion to minimize: r1 or r2.")] = "r2",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Write a mechanism spec (JSON) here.")] = None,
) -> None:
    """Smallest support meeting (eps, delta) on range H, and the best lam/sigma when none is given."""
    from ..design import design

    family = check_family(family)
    family_param(family, lam=lam, sigma=sigma, required=False)  # wrong-family option -> one clear line
    objective = objective.strip().lower()
    if objective not in ("r1", "r2"):
        raise ValueError(f"objective must be 'r1' or 'r2'; got {objective!r}")
    d = design(family, eps=eps, delta=delta, H=H, objective=objective, lam=lam, sigma=sigma)
    if output is not None:
        _save(d, output)
    if as_json:
        print_json(d.to_dict())
    else:
        chosen = "s" if (lam is not None or sigma is not None) else f"s and {d.param_name}"
        header = (f"Sparse {d.family}: {chosen} chosen"
                  + ("" if chosen == "s" else f" to minimize {objective.upper()}")
                  + " subject to delta_star <= delta")
        _print_table(d, output, header)
