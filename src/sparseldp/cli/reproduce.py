r"""``sparseldp reproduce``: the paper's Tables I-IV and Figures 1-4, computed.

Writes into ``--out`` (default ``./reproduce-output``)::

    table1_laplace_support.{csv,md,tex}    figure1_laplace_support.{png,pdf}
    table2_gaussian_support.{csv,md,tex}   figure2_gaussian_support.{png,pdf}
    table3_laplace_lambda.{csv,md,tex}     figure3_laplace_lambda.{png,pdf}
    table4_gaussian_sigma.{csv,md,tex}     figure4_gaussian_sigma.{png,pdf}

and prints the tables (four decimals, as in the paper).  Everything is
computed (see :mod:`sparseldp.reproduce` and :mod:`sparseldp.figures`) and
rendered in memory before the first file is written; each file is then
written atomically, so a failure never leaves a partial file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import app
from ._common import Command, stdout_console

__all__ = ["reproduce_command"]


def _print_tables(computed) -> None:
    from rich.table import Table

    console = stdout_console()
    for t in computed:
        e = t.experiment
        table = Table()
        for name in t.header():
            table.add_column(name, justify="right")
        for cells in t.cells(4):
            table.add_row(*cells)
        console.print(e.title)
        console.print(table)


@app.command("reproduce", cls=Command)
def reproduce_command(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory (created if missing).")] = Path(
        "reproduce-output"
    ),
) -> None:
    """Tables I-IV (CSV, Markdown, LaTeX) and Figures 1-4 (PNG, PDF), computed exactly."""
    from ..figures import render_figures
    from ..reproduce import render_tables, tables, write_files

    if out.exists() and not out.is_dir():
        raise ValueError(f"--out must be a directory; {str(out)!r} is a file")
    computed = tables()
    files: dict[str, bytes | str] = dict(render_tables(computed))
    files.update(render_figures())
    _print_tables(computed)
    written = write_files(out, files)
    console = stdout_console()
    console.print(f"wrote {len(written)} files to {out}/:")
    for p in written:
        console.print(f"  {p.name}")
