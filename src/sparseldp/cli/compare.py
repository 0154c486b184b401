r"""``sparseldp compare``: which mechanism to deploy, at the same guarantee, on what users measure.

``sparseldp compare --eps 1 --delta 1e-6 --H 5 --domain 0:99 [--metric w1] [-o spec.json] [--plot errors.png]``

Calibrates every family -- k-ary randomized response, the geometric mechanism
(clamped and folded), the clamped discrete Gaussian, the paper's sparse
Laplace and Gaussian mechanisms, Square Wave, the Piecewise and Hybrid
Mechanisms and Duchi et al.'s one-bit mechanism -- to the target with the same
exact accountant (:mod:`sparseldp.compare`), privatizes the same people
through each, and prints per family the parameters, the certified
``delta_star`` ("delta reached"), the per-report distortion ``R1``/``R2``,
the W1 and TV errors of the default frequency estimate (and W1 with EMS),
the RMSE of the mean and the quantile error.  Then it names the best family
for ``--metric`` (``w1``, ``tv``, ``mean``, ``r2``, ``r1``, ``quantile``,
``w1-ems``, ``tv-ems``) with the numbers behind it; ``-o`` writes its
mechanism spec for ``sparseldp privatize``.

* The people: a simulated population of ``--n`` (default 100,000) drawn from
  ``--shape`` (``two-bump``, the default, ``uniform``, ``normal``, ``skewed``
  or ``spiky``; :data:`sparseldp.compare.SHAPES`), or the user's own column
  (``--data FILE --column NAME``: its values are the truth, re-privatized in
  every trial; each value must lie in ``--domain``).
* ``--trials T`` repeats the privatization (errors averaged); the mean's RMSE
  is exact for mechanisms with a linear unbiased estimator, else over
  ``--mean-trials`` trials (default ``T``; the extra ones fit only EM).  ``--seed`` makes everything reproducible (a simulation protects
  nothing); without it the OS's secure source is used.
* ``--window extended|clipped`` chooses the sparse designs' windows
  (``extended``, the default: :func:`sparseldp.design.design`, fast;
  ``clipped``: outputs stay in the domain, designed over the domain's pairs,
  slow on large domains).  ``--pure-at-eps`` runs the pure-epsilon baselines
  at ``--eps`` instead of calibrating their own epsilon to (eps, delta, H).
* ``--method`` picks the frequency estimator behind the W1, TV and quantile
  columns (default: ``sparseldp estimate``'s default).
* ``--plot FILE`` (``.png``/``.pdf``) repeats the comparison at every eps of
  ``--plot-eps`` (default eps/4, eps/2, eps, 2 eps, 4 eps) and draws the
  errors against eps, one panel per metric.

Every output is checked before the work starts and written atomically; an
unreachable target for one family is reported in its row.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .._format import format_upper
from . import app
from ._common import Command, atomic_write_bytes, check_distinct_paths, check_output, fmt, print_json, \
    stdout_console
from ._common import parse_domain

__all__ = ["compare_command"]

_PLOT_EPS_MAX = 12


def _plot_eps(text: str | None, eps: float) -> list[float]:
    if text is None:
        if not eps > 0:
            raise ValueError("--plot needs --eps > 0 (or --plot-eps with eps values > 0)")
        return [eps / 4, eps / 2, eps, 2 * eps, 4 * eps]
    out = []
    for part in text.split(","):
        try:
            v = float(part)
        except ValueError:
            v = float("nan")
        if not (v > 0 and v < float("inf")):
            raise ValueError(f"--plot-eps must be comma-separated numbers > 0; got {text!r}")
        out.append(v)
    if not out or len(out) > _PLOT_EPS_MAX:
        raise ValueError(f"--plot-eps must hold 1 to {_PLOT_EPS_MAX} values; got {text!r}")
    return out


def _ems_note(result, metric: str, value: float) -> str | None:
    """The hint that EMS estimation does better than the recommended ``value`` of ``w1`` / ``tv``; ``None``
    unless the best EMS value is strictly lower as printed (4 significant digits): an equal one, e.g. the
    winner's own estimate when the default estimator already smooths, is no news."""
    if metric not in ("w1", "tv"):
        return None
    alt = result.ranking(metric + "-ems")
    if not alt or not float(f"{alt[0][1]:.4g}") < float(f"{value:.4g}"):
        return None
    return (f"with EMS estimation, lower still: {alt[0][0].family} ({metric} = {alt[0][1]:.4g}, against "
            f"{value:.4g}); estimate its reports with `sparseldp estimate --method ems`")


@app.command("compare", cls=Command)
def compare_command(
    eps: Annotated[float, typer.Option("--eps", help="Target eps >= 0.")],
    delta: Annotated[float, typer.Option("--delta", help="Target delta in [0, 1].")],
    H: Annotated[int, typer.Option("--H", "--range", help="Privacy range: separations 1..H are protected.")],
    domain: Annotated[str, typer.Option("--domain", help="Input domain lo:hi.")],
    metric: Annotated[str, typer.Option(
        "--metric", help="Recommend the best family for w1, tv, mean, r2, r1, quantile, w1-ems or tv-ems.")] = "w1",
    output: Annotated[Optional[Path], typer.Option(
        "-o", "--output", help="Write the winner's mechanism spec (JSON) here, for `privatize`.")] = None,
    n: Annotated[Optional[int], typer.Option("--n", help="Simulated population size (default 100000).")] = None,
    shape: Annotated[Optional[str], typer.Option(
        "--shape", help="Simulated population: two-bump (default), uniform, normal, skewed or spiky.")] = None,
    data: Annotated[Optional[Path], typer.Option(
        "--data", help="Use the values of --column in this CSV/Parquet file as the truth.")] = None,
    column: Annotated[Optional[str], typer.Option("--column", "-c", help="The column of --data.")] = None,
    trials: Annotated[int, typer.Option("--trials", help="Repetitions of the privatization (errors averaged).")] = 1,
    mean_trials: Annotated[Optional[int], typer.Option(
        "--mean-trials", help="Repetitions for the mean's RMSE where it is measured (EM means); >= --trials.")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Seed the simulation (reproducible).")] = None,
    families: Annotated[Optional[str], typer.Option(
        "--families", help="Comma-separated subset, e.g. rr,sparse-laplace,square-wave (default: all).")] = None,
    window: Annotated[str, typer.Option("--window", help="Sparse designs' windows: extended or clipped.")] = "extended",
    pure_at_eps: Annotated[bool, typer.Option(
        "--pure-at-eps", help="Run the pure-eps baselines at --eps instead of calibrating them.")] = False,
    objective: Annotated[str, typer.Option("--objective", help="r1 or r2 (sparse designs).")] = "r2",
    method: Annotated[Optional[str], typer.Option(
        "--method", help="Frequency estimator behind W1/TV: auto, em, ems or inversion (default: estimate's).")] = None,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Write errors against eps (.png or .pdf).")] = None,
    plot_eps: Annotated[Optional[str], typer.Option(
        "--plot-eps", help="Comma-separated eps values of --plot (default eps/4, eps/2, eps, 2eps, 4eps).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Which mechanism should I deploy? Every family at the same (eps, delta) on range H, measured."""
    from .._validation import check_int
    from ..compare import COMPARE_FAMILIES, METRICS, _check_options

    dom = parse_domain(domain)
    if metric not in METRICS:
        raise ValueError(f"--metric must be one of {', '.join(METRICS)}; got {metric!r}")
    fams = None
    if families is not None:
        fams = [f.strip() for f in families.split(",") if f.strip()]
        bad = [f for f in fams if f not in COMPARE_FAMILIES]
        if bad or not fams:
            raise ValueError(f"--families must be a comma-separated subset of {','.join(COMPARE_FAMILIES)}; "
                             f"got {families!r}")
    _check_options(window=window, objective=objective, method=method, trials=trials, mean_trials=mean_trials,
                   flag=lambda name: "--" + name.replace("_", "-"))
    if seed is not None:
        check_int(seed, "--seed", minimum=0)
    if (data is None) != (column is None):
        raise ValueError("--data FILE and --column NAME go together: the column of the file is the truth")
    if data is not None and n is not None:
        raise ValueError("--n sets the size of a simulated population; with --data the people are the file's rows")
    if shape is not None:
        from ..compare import SHAPES

        if shape not in SHAPES:
            raise ValueError(f"--shape must be one of {', '.join(SHAPES)}; got {shape!r}")
        if data is not None:
            raise ValueError("--shape chooses a simulated population; with --data the people are the file's rows")
    if n is not None:
        check_int(n, "--n", minimum=1)
    plot_fmt = None
    eps_list = None
    if plot is not None:
        plot_fmt = plot.suffix.lower().lstrip(".")
        if plot_fmt not in ("png", "pdf"):
            raise ValueError(f"--plot must end in .png or .pdf; got {str(plot)!r}")
        eps_list = _plot_eps(plot_eps, eps)
    elif plot_eps is not None:
        raise ValueError("--plot-eps applies only with --plot FILE")
    check_output(output)
    check_output(plot, "plot")
    check_distinct_paths({"--data": data}, {"-o": output, "--plot": plot})
    truth = None
    if data is not None:
        from ..io import column_counts

        offset, counts = column_counts(data, column, bounds=dom, bounds_reason=f"the --domain {dom[0]}:{dom[1]}")
        if int(counts.sum()) == 0:
            raise ValueError(f"column {column!r} of {str(data)!r} has no values")
        truth = (offset, counts)
    _run(eps, delta, H, dom, metric, output, n, truth, trials, seed, fams, window, pure_at_eps, objective, plot,
         plot_fmt, eps_list, as_json, column, shape, method, mean_trials)


def _run(eps, delta, H, dom, metric, output, n, truth, trials, seed, fams, window, pure_at_eps, objective, plot,
         plot_fmt, eps_list, as_json, column, shape, method, mean_trials):
    from ..compare import compare, format_params
    from ..compare.sweep import sweep
    from ..spec import save_spec

    kw = dict(families=fams, rng=seed, objective=objective, window=window, pure_at_eps=pure_at_eps, trials=trials,
              method=method, mean_trials=mean_trials)
    if truth is not None:
        kw["data"] = truth
    else:
        kw["n"] = n
        kw["population"] = shape
    result = compare(eps=eps, delta=delta, H=H, domain=dom, **kw)
    try:
        rec = result.recommend(metric)
    except ValueError:
        raise ValueError(f"no family could be compared on {metric}: every one is infeasible at this target "
                         f"({'; '.join(f'{r.family}: {r.error}' for r in result.rows)})"[:600]) from None
    spec = result.spec(rec.winner.family) if output is not None else None
    plot_bytes = None
    if plot is not None:
        sw = sweep(eps_list, delta=delta, H=H, domain=dom, target_eps=eps, **kw)
        plot_bytes = sw.render(plot_fmt)
    if spec is not None:
        save_spec(spec, output)
    if plot_bytes is not None:
        atomic_write_bytes(plot, plot_bytes)
    if as_json:
        doc = result.to_dict()
        doc["recommendation"] = {"metric": metric, "family": rec.winner.family, "value": rec.value,
                                 "ranking": [{"family": f, "value": v} for f, v in rec.ranking],
                                 "spec": None if output is None else str(output)}
        print_json(doc)
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    who = (f"the {result.n:,} values of column {column!r}" if truth is not None
           else f"a simulated {shape or 'two-bump'} population of {result.n:,}")
    sim = f"seed {seed}, reproducible" if seed is not None else "OS randomness, not reproducible"
    table = Table(title=f"(eps, delta) = ({eps:g}, {delta:g}) on range H = {H}, domain {dom[0]}..{dom[1]}; "
                        f"{who}, {trials} trial{'s' if trials > 1 else ''} ({sim})")
    cols = (("family", "left"), ("parameters", "left"), ("delta reached", "right"), ("R1", "right"),
            ("R2", "right"), ("W1", "right"), ("TV", "right"), ("W1 (EMS)", "right"), ("mean RMSE", "right"),
            ("quantile err", "right"))
    for col, just in cols:
        table.add_column(col, justify=just)
    for r in result.rows:
        if r.error is not None:
            table.add_row(r.family, "[red]not run[/]", *["-"] * (len(cols) - 2))
            continue
        mark = lambda r, name: "[bold green]" if r.family == rec.winner.family and name == metric else ""  # noqa
        cell = lambda v, d, name: ("-" if v is None else mark(r, name) + fmt(v, d))  # noqa: E731
        w1 = cell(r.w1, 4, "w1") + ("" if r.converged else " *")
        mean = cell(r.mean_rmse, 4, "mean") + ("" if r.mean_method != "EM estimate" else " ~")
        table.add_row(r.family, format_params(r.params), format_upper(r.delta_star, 3), cell(r.r1, 4, "r1"),
                      cell(r.r2, 4, "r2"), w1, cell(r.tv, 4, "tv"), cell(r.w1_ems, 4, "w1-ems"), mean,
                      cell(r.quantile_error, 4, "quantile"))
    # wide enough for the ten columns when piped (rich defaults to 80 there)
    console = stdout_console() if sys.stdout.isatty() else Console(file=sys.stdout, highlight=False, width=200)
    console.print(table)
    notes = ["R1/R2 and the mean use each report's value on the input scale (the papers' unbiased estimate for "
             "piecewise, hybrid, duchi)",
             "~ mean RMSE of the EM estimate's mean (as `sparseldp estimate` computes it), measured over the "
             "trials; otherwise exact (the papers' unbiased estimator, the report mean of an unbiased channel, "
             "or the channel's inversion, as `sparseldp estimate` takes them)"]
    if any(r.converged is False for r in result.rows):
        notes.append("* the default estimator stopped at its step cap before its tolerance")
    for note in notes:
        console.print(note, soft_wrap=True, style="dim")
    for r in result.rows:
        if r.error is not None:
            console.print(f"{r.family}: {r.error}", soft_wrap=True)
    console.print("[bold]Recommendation:[/] " + escape(rec.describe()), soft_wrap=True)
    measured = metric not in ("r1", "r2") and not (metric == "mean" and rec.winner.mean_method != "EM estimate")
    used = result.mean_trials if metric == "mean" else trials
    if measured and used < 10:
        flag = "--mean-trials" if metric == "mean" else "--trials"
        console.print(f"(measured on {used} simulated trial{'s' if used > 1 else ''}: use {flag} 20 or more for a "
                      "stable ranking)", soft_wrap=True, style="dim")
    note = _ems_note(result, metric, rec.value)
    if note is not None:
        console.print(note, soft_wrap=True)
    if output is not None:
        scale = ("; its r1/r2 are those of the report itself, E|Y - x|^r, not of the unbiased estimate in the "
                 "table" if rec.winner.family in ("piecewise", "hybrid", "duchi") else "")
        console.print(f"mechanism spec of {rec.winner.family} written to {output} (for `sparseldp privatize`{scale})",
                      soft_wrap=True)
    if plot is not None:
        console.print(f"errors against eps written to {plot}", soft_wrap=True)
