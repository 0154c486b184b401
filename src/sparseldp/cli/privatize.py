r"""``sparseldp privatize``: replace one integer column of a CSV or Parquet file by reports.

``sparseldp privatize --mechanism mech.json --column age people.csv -o private.csv``
streams the file through :func:`sparseldp.io.privatize_file`: each value ``x``
of the column becomes one report ``Y ~ M(. | x)`` of the mechanism in the spec
(``sparseldp design -o``), everything else is kept (the header, the row order,
for CSV the bytes of every other field).  Memory stays bounded whatever the
file size.

* Randomness comes from the operating system's secure source.  ``--seed N``
  switches to a seeded generator for reproducible *simulation* and prints a
  warning: anyone who knows the seed can recompute the noise.
* A value that is not an integer or lies outside the spec's ``domain``, a
  missing column, an unreadable or malformed file, a bad spec: one line on
  stderr naming the problem (row number and value for bad values), exit
  status 2, and no output file (the output is written to a temporary file and
  renamed only at the end).
* On a terminal a progress bar is drawn on stderr; when stderr is not a
  terminal (piped, redirected) nothing but the final summary line is printed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from . import app
from ._common import Command

__all__ = ["privatize_command", "SEED_WARNING"]

#: Printed on stderr whenever ``--seed`` is given.
SEED_WARNING = ("warning: --seed makes the noise reproducible by anyone who knows the seed: "
                "simulation only, not for production (omit --seed to use the OS's secure source)")

_DEFAULT_BATCH = 1 << 18  # = sparseldp.io.DEFAULT_BATCH_SIZE (not imported, to keep `--help` light)


def _progress_bar():
    """A rich progress bar on stderr, or ``None`` when stderr is not a terminal."""
    if not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    return Progress(
        TextColumn("[bold]privatizing[/]"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[rows]:>12,} rows"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        transient=True,
    )


@app.command("privatize", cls=Command)
def privatize_command(
    input: Annotated[Path, typer.Argument(help="Input file (.csv, .tsv, .parquet or .pq).", show_default=False)],
    mechanism: Annotated[Path, typer.Option("--mechanism", "-m",
                                            help="Mechanism spec (JSON), e.g. from `sparseldp design -o`.")],
    column: Annotated[str, typer.Option("--column", "-c", help="Name of the integer column to privatize.")],
    output: Annotated[Path, typer.Option("-o", "--output",
                                         help="Output file (same format; must differ from the input).")],
    seed: Annotated[Optional[int], typer.Option(
        "--seed", help="Seeded randomness for reproducible simulation. NOT for production.")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Rows per batch.")] = _DEFAULT_BATCH,
    format: Annotated[Optional[str], typer.Option(
        "--format", help="Input format (csv, tsv or parquet) when the extension does not say.")] = None,
) -> None:
    """Privatize one integer column of a CSV or Parquet file, streaming."""
    from ..io import privatize_file
    from ..spec import load_spec

    spec = load_spec(mechanism)  # a bad spec fails before anything is read or written
    if seed is not None:
        if seed < 0:  # before the warning: a bad option gives exactly one line on stderr
            raise ValueError(f"--seed must be an integer >= 0; got {seed}")
        typer.echo(SEED_WARNING, err=True)
    bar = _progress_bar()
    if bar is None:
        result = privatize_file(input, output, mechanism=spec, column=column, rng=seed,
                                batch_size=batch_size, format=format)
    else:
        with bar:
            task = bar.add_task("privatize", total=1.0, rows=0)

            def report(rows: int, fraction: float | None) -> None:
                bar.update(task, completed=fraction if fraction is not None else 0.0, rows=rows)

            result = privatize_file(input, output, mechanism=spec, column=column, rng=seed,
                                    batch_size=batch_size, progress=report, format=format)
    rate = result.rows / result.seconds if result.seconds > 0 else float("inf")
    typer.echo(
        f"privatized {result.rows:,} rows of column {result.column!r} -> {str(result.output)} "
        f"in {result.seconds:.2f} s ({rate:,.0f} rows/s){' [seeded: simulation only]' if result.seeded else ''}",
        err=True,
    )
