r"""``sparseldp privatize``: replace integer columns of a CSV or Parquet file by reports.

``sparseldp privatize --mechanism mech.json --column age people.csv -o private.csv``
streams the file through :func:`sparseldp.io.privatize_file`: each value ``x``
of each named column becomes one report ``Y ~ M(. | x)`` of the mechanism in
the spec (``sparseldp design -o``), an independent draw per row and column;
everything else is kept (the header, the row order, for CSV the bytes of every
other field).  Memory stays bounded whatever the file size.  An input ordered
(sorted or grouped) by a privatized column is refused, since its row order
would give the raw values away (:mod:`sparseldp.io.order`); ``--keep-order``
accepts it where the order is public anyway.

* Several columns: ``-c a -c b`` or ``--columns a,b``.  Each is privatized
  with the spec's mechanism; the summary states the guarantee per column and,
  by basic composition, for all the reports of one person together (a
  rigorous upper bound); beside it, where it is cheap (Sparse Laplace /
  Gaussian on Z or with extended windows, a composed lattice of at most
  :data:`EXACT_COMPOSITION_POINTS` points), the exact composition of the
  mechanism at the same ``eps`` (:func:`sparseldp.composition.k_reports`:
  floating point with an FFT error bound, an upper estimate, not a
  certificate; of the ideal mechanism, while the per-column guarantee may be
  the realized sampler's).
* The guarantee: the spec's recorded claims are recomputed when it is loaded
  and a spec whose claims do not hold is refused (:mod:`sparseldp.spec`).
  The summary (and ``--json``) states the guarantee applied: the realized
  sampler's certificate (:func:`sparseldp.sampling.certify`, a rigorous upper
  bound on the delta of what is actually drawn) when it costs at most
  :data:`CERTIFY_BUDGET` operations, else the mechanism's recomputed bound.
  A mechanism whose guarantee is vacuous (delta = 1 at the spec's target) is
  refused: it would publish the raw values; one with delta of at least
  :data:`WEAK_DELTA` or eps of at least :data:`WEAK_EPS` is used with a
  warning, as is a sampler whose certified delta is above the spec's target
  (:data:`TARGET_EXCESS`).  A spec that records no target (``eps``, ``H``)
  certifies nothing and is refused unless ``--allow-no-target`` is given.
* Randomness comes from the operating system's secure source.  ``--seed N``
  switches to a seeded generator for reproducible *simulation*; a warning is
  printed after the run: anyone who knows the seed can recompute the noise.
* ``-`` as the input reads CSV from standard input, ``-o -`` writes CSV to
  standard output (the summary then goes to stderr only; ``--json`` needs a
  file output).
* Any mistake: one line on stderr naming the problem (row number and value for
  bad values), exit status 2, and no output file (it is written to a temporary
  file and renamed only at the end).
* Every other column is copied unchanged: the summary names them ("copied
  unchanged, not privatized"; ``kept_columns`` in ``--json``), so that an
  identifier or a sensitive column left in the file is seen, not assumed away.
* On a terminal a progress bar is drawn on stderr; when stderr is not a
  terminal (piped, redirected) nothing but the final summary is printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .._format import format_upper
from . import app
from ._common import (Command, check_distinct_paths, check_output, guarantee_text, is_stdio, print_json,
                      stderr_progress, warn)

__all__ = ["privatize_command", "SEED_WARNING", "CERTIFY_BUDGET", "MAX_BATCH", "applied_guarantee",
           "EXACT_COMPOSITION_POINTS"]

#: Printed on stderr (after the run) whenever ``--seed`` is given.
SEED_WARNING = ("--seed makes the noise reproducible by anyone who knows the seed: "
                "simulation only, not for production (omit --seed to use the OS's secure source)")

#: A guarantee with delta at least this (and below 1, which is refused) is privatized with a warning.
WEAK_DELTA = 0.01
#: ... and so is one with eps at least this: a report may be e^eps times likelier under one input than another.
WEAK_EPS = 10.0
#: The applied (sampler's) delta may exceed the spec's target by this share before a warning: the sampler's
#: probabilities are multiples of 2^-64, which adds a few 1e-16 at most (targets far below that are not met).
TARGET_EXCESS = 0.01

#: Work (pairs x window entries) up to which the realized sampler is certified before privatizing.
CERTIFY_BUDGET = 20_000_000
#: Largest --batch-size (rows held in memory at once, several arrays of 8 bytes each).
MAX_BATCH = 1 << 24
#: Largest composed lattice (``k (n - 1) + 1`` points) for the exact per-person statement (a few ms).
EXACT_COMPOSITION_POINTS = 1 << 17

_DEFAULT_BATCH = 1 << 18  # = sparseldp.io.DEFAULT_BATCH_SIZE (not imported, to keep `--help` light)


def _progress_bar():
    """The privatizing progress bar on stderr, or ``None`` when stderr is not a terminal."""
    return stderr_progress(lambda rp: (
        rp.TextColumn("[bold]privatizing[/]"), rp.BarColumn(), rp.TaskProgressColumn(),
        rp.TextColumn("{task.fields[rows]:>12,} rows"), rp.TimeElapsedColumn(), rp.TimeRemainingColumn()))


def _columns(column: list[str] | None, columns: str | None) -> list[str]:
    names = list(column or [])
    if columns is not None:
        parts = [c.strip() for c in columns.split(",")]
        if not all(parts):
            raise ValueError(f"--columns must be comma-separated column names, none empty; got {columns!r}")
        names += parts
    if not names:
        raise ValueError("name the column(s) to privatize: --column NAME (repeatable) or --columns A,B")
    for name in names:
        if not name:
            raise ValueError("--column must be a non-empty column name; got ''")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"column {dup[0]!r} is named more than once; name each column once")
    return names


def _names(cols: list[str], shown: int = 12) -> str:
    """``'a', 'b', ...`` for a summary line, the first ``shown`` names and how many more."""
    text = ", ".join(repr(c) for c in cols[:shown])
    return text if len(cols) <= shown else f"{text} and {len(cols) - shown} more"


def sampler_above_target(guarantee, target_delta) -> bool:
    """Whether the realized sampler's certified delta is above ``target_delta`` by more than
    :data:`TARGET_EXCESS` (``privatize`` and ``design -o`` warn then)."""
    return (guarantee is not None and target_delta is not None and guarantee.source == "sampler"
            and guarantee.delta > target_delta * (1.0 + TARGET_EXCESS))


def applied_guarantee(spec):
    """The guarantee ``privatize`` applies: the realized sampler's when affordable, else the mechanism's.

    ``None`` when the spec records no target (``eps``, ``H``).
    """
    from ..spec import Guarantee

    g = spec.guarantee
    if g is None:
        return None
    target = spec.sampler_target()
    if spec.domain is None:
        cost = min(g.H, 2 * target.t + 1) * target.s
    else:
        n = spec.domain[1] - spec.domain[0] + 1
        cost = n * min(g.H, n) * target.s if hasattr(target, "s") and target.s else n * n * n
    if cost > CERTIFY_BUDGET:
        return g
    from ..sampling import certify

    cert = certify(target, g.eps, g.H)
    return Guarantee(eps=g.eps, delta=float(cert.delta_star_upper), H=g.H, source="sampler")


def _exact_per_person(spec, guarantee, k: int):
    """The exact composition of the ``k`` reports of one person where it is cheap, else None (basic only).

    Routed as ``account --reports`` routes a spec (:func:`sparseldp.composition.spec_k_reports`).
    """
    if guarantee is None or k < 2:
        return None
    from ..composition import spec_k_reports

    r = spec_k_reports(spec, k, eps=guarantee.eps, delta=guarantee.delta, H=guarantee.H,
                       max_points=EXACT_COMPOSITION_POINTS, with_eps=False)
    return r if r.route == "lattice" else None


@app.command("privatize", cls=Command)
def privatize_command(
    input: Annotated[Path, typer.Argument(help="Input file (.csv, .tsv, .parquet or .pq), or - for CSV on stdin.",
                                          show_default=False)],
    mechanism: Annotated[Path, typer.Option("--mechanism", "--spec", "-m",
                                            help="Mechanism spec (JSON), e.g. from `sparseldp design -o`.")],
    output: Annotated[Path, typer.Option("-o", "--output",
                                         help="Output file (same format as the input), or - for stdout (CSV or TSV, as the input).")],
    column: Annotated[Optional[list[str]], typer.Option(
        "--column", "-c", help="An integer column to privatize (repeat for several).", show_default=False)] = None,
    columns: Annotated[Optional[str], typer.Option(
        "--columns", help="Comma-separated integer columns to privatize.", show_default=False)] = None,
    seed: Annotated[Optional[int], typer.Option(
        "--seed", help="Seeded randomness for reproducible simulation (the same output for the same seed, "
                       "input and --batch-size). NOT for production.")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help=f"Rows per batch (1..{MAX_BATCH}).")] = _DEFAULT_BATCH,
    allow_no_target: Annotated[bool, typer.Option(
        "--allow-no-target", help="Privatize with a spec that records no target (eps, H), so no certified "
                                  "guarantee (refused by default).")] = False,
    format: Annotated[Optional[str], typer.Option(
        "--format", help="Input format (csv, tsv or parquet) when the extension does not say.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")] = False,
    keep_order: Annotated[bool, typer.Option(
        "--keep-order", help="Accept an input ordered by a privatized column (refused by default: averaging "
                             "neighbouring reports would recover the raw values). Only if the order is public. "
                             "--engine spark needs no check: it always shuffles the output rows.")] = False,
    engine: Annotated[str, typer.Option(
        "--engine", help="local (one process, streamed) or spark (IN: Parquet file, directory or glob; -o: a "
                         "directory of Parquet parts; needs the spark extra).")] = "local",
    master: Annotated[Optional[str], typer.Option(
        "--master", help="--engine spark: Spark master URL, e.g. local[2] or yarn.", show_default=False)] = None,
) -> None:
    """Privatize integer columns of a CSV or Parquet file, streaming, with a certified guarantee."""
    from .._validation import check_int
    from ..io import privatize_file
    from ..spec import load_spec

    names = _columns(column, columns)
    if seed is not None and seed < 0:
        raise ValueError(f"--seed must be an integer >= 0; got {seed}")
    check_int(batch_size, "--batch-size", minimum=1, maximum=MAX_BATCH)
    if as_json and is_stdio(output):
        raise ValueError("--json prints the summary on stdout, where -o - writes the data; use -o FILE")
    check_distinct_paths({"the input": input, "--mechanism": mechanism}, {"-o": output})
    from ._spark import check_engine

    spark_job = check_engine(engine, master, input=input, output=output, format=format)  # None: local engine
    if spark_job is None:
        check_output(output)
    spec = load_spec(mechanism)  # a spec whose claims do not hold fails here, before anything is read
    guarantee = applied_guarantee(spec)
    if guarantee is None and not allow_no_target:
        raise ValueError(f"the spec {str(mechanism)!r} records no target (eps, H), so no guarantee can be "
                         "certified: add \"eps\" and \"H\" to it (or write it with `sparseldp design -o`), or pass "
                         "--allow-no-target to privatize without one")
    if guarantee is not None and guarantee.vacuous:
        raise ValueError(f"the mechanism in {str(mechanism)!r} has delta_star = 1 at its target (eps = "
                         f"{guarantee.eps:g}, H = {guarantee.H}): it protects nothing there; refusing to "
                         "privatize with it (design one with `sparseldp design`)")
    exact = _exact_per_person(spec, guarantee, len(names))  # before any output: a failure leaves nothing
    src = "-" if is_stdio(input) else input  # the io layer reads "-" as standard input
    output = "-" if is_stdio(output) else output
    bar = _progress_bar() if not is_stdio(output) else None
    kwargs = dict(mechanism=spec, columns=names, rng=seed, batch_size=batch_size, format=format, keep_order=keep_order)
    if spark_job is not None:
        result = spark_job.privatize(spec, names, seed, batch_size)
    elif bar is None:
        result = privatize_file(src, output, **kwargs)
    else:
        with bar:
            task = bar.add_task("privatize", total=1.0, rows=0)

            def report(rows: int, fraction: float | None) -> None:
                bar.update(task, completed=fraction if fraction is not None else 0.0, rows=rows)

            result = privatize_file(src, output, progress=report, **kwargs)
    k = len(names)
    rows = result.rows
    rate = rows / result.seconds if result.seconds > 0 else float("inf")
    cols = ", ".join(repr(c) for c in names)
    where = "stdout" if is_stdio(output) else str(result.output)
    line = (f"privatized {rows:,} row{'s' if rows != 1 else ''} of column{'s' if k > 1 else ''} {cols} -> {where} "
            f"in {result.seconds:.2f} s ({rate:,.0f} rows/s)")
    blank = getattr(result, "blank_lines", 0) or 0
    kept = list(getattr(result, "kept_columns", ()))
    kept_meta = list(getattr(result, "kept_metadata", ()))
    if as_json:
        summary = {"rows": rows, "columns": names, "kept_columns": kept, "kept_metadata": kept_meta, "output": where,
                   "seconds": result.seconds, "seeded": seed is not None, "blank_lines": blank,
                   "guarantee": None if guarantee is None else guarantee.to_dict(),
                   "guarantee_per_person": None if guarantee is None else guarantee.composed(k).to_dict(),
                   "guarantee_per_person_exact": None if exact is None else exact.to_dict()["exact"]}
        print_json(summary)
    else:
        if guarantee is None:
            typer.echo(line, err=True)
        else:
            typer.echo(f"{line}; guarantee per column: {guarantee_text(guarantee)}", err=True)
            if k > 1:
                typer.echo(f"the {k} reports of one person together: {guarantee.composed(k).describe()} "
                           "(basic composition, an upper bound)", err=True)
                if exact is not None:
                    typer.echo(f"exact composition of the mechanism's {k} reports (lattice route, h = {exact.h}): "
                               f"delta = {exact.exact_delta:.4g} +- {format_upper(exact.exact_delta_error, 2)} at eps = "
                               f"{exact.basic_eps:.6g} (floating point with an FFT error-model bound, not "
                               "a certificate; the ideal mechanism, not the realized sampler)", err=True)
        if kept:
            typer.echo(f"copied unchanged, not privatized: column{'s' if len(kept) > 1 else ''} "
                       f"{_names(kept)}", err=True)
        if kept_meta:
            typer.echo(f"copied unchanged: the file's metadata (key{'s' if len(kept_meta) > 1 else ''} "
                       f"{_names(kept_meta)}; the privatized columns' own entries removed)", err=True)
        if blank:
            typer.echo(f"{blank:,} blank line{'s' if blank != 1 else ''} copied through (not rows)", err=True)
    if guarantee is None:
        warn(f"the spec {str(mechanism)!r} records no target (eps, H), so no guarantee was certified; "
             "write specs with `sparseldp design -o` or add \"eps\" and \"H\"")
    target_delta = (spec.meta or {}).get("delta")
    if sampler_above_target(guarantee, target_delta):
        warn(f"the sampler draws with delta <= {format_upper(guarantee.delta)}, above the spec's target delta = "
             f"{target_delta:g}: its probabilities are multiples of 2^-64, so a target below about 1e-16 is not met "
             "exactly (the guarantee printed is the one that holds)")
    if guarantee is not None and guarantee.eps >= WEAK_EPS:
        warn(f"eps = {guarantee.eps:g} is a weak guarantee: a report may be e^{guarantee.eps:g} times likelier under "
             "one input than under another (local DP targets are usually eps <= 4; see `sparseldp design`)")
    if guarantee is not None and WEAK_DELTA <= guarantee.delta < 1.0:
        warn(f"delta <= {format_upper(guarantee.delta)} at eps = {guarantee.eps:g} is a weak guarantee: a report may give "
             f"its input away with probability up to delta (targets are usually 1e-6 or below; see "
             "`sparseldp design`)")
    if seed is not None:
        warn(SEED_WARNING)
