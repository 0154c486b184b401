r"""``sparseldp estimate``: the distribution and mean of the true values, from a column of reports.

``sparseldp estimate --mechanism mech.json --column age --domain 0:99 private.csv -o estimate.csv``

* Reads the report column of a CSV/TSV/Parquet file in one streamed pass
  (:func:`sparseldp.io.column_counts`: one ``np.bincount`` per batch), so
  memory is bounded by the batch size and the number of distinct reports.
* The mechanism comes from the spec (``sparseldp design -o``).  Without a
  ``domain`` in the spec it is the mechanism on Z; with one, the spec's
  channel (extended or clipped window).  ``--domain lo:hi`` is the range of the
  true values (required unless the spec has a domain; it must lie inside it).
* Writes ``value,frequency`` rows for ``lo..hi`` (CSV) atomically: on any
  error nothing is written.  Prints the estimated mean with its standard error
  and confidence interval, and the estimator's diagnostics (converged, EM
  steps, certified log-likelihood gap) on the terminal; ``--json`` prints them
  as JSON instead.  ``--plot FILE`` draws the estimated histogram (PNG/PDF).
* ``--method``: ``em`` (default, the maximum-likelihood estimate), ``ems`` (EM
  with smoothing: far more accurate for smooth distributions when the window is
  wide relative to the domain; ``--smooth m`` passes of the (1, 2, 1)/4 kernel
  per step) or ``inversion`` (least squares + simplex projection); see
  :func:`sparseldp.estimate_frequencies`.  The mean is estimated the same way
  whatever the method (:func:`sparseldp.estimate_mean`).
* A report the mechanism cannot produce from the domain, a bad spec, a bad
  file: one line on stderr and exit status 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from . import app
from ._common import parse_domain
from ._common import Command, atomic_write_all, fmt, print_json, stdout_console

__all__ = ["estimate_command"]


def _check_out(path: Path, what: str) -> None:
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"cannot write {what} {str(path)!r}: directory {str(parent)!r} does not exist")
    if path.is_dir():
        raise ValueError(f"cannot write {what} {str(path)!r}: it is a directory")


def _plot_bytes(values, p, mean, title: str, fmt_: str) -> bytes:
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.bar(values, p, width=1.0, color="tab:blue", alpha=0.8, label="estimated frequency")
    ax.axvline(float(mean), color="tab:red", lw=1.5, label=f"estimated mean {float(mean):.4g}")
    lo, hi = mean.ci
    ax.axvspan(lo, hi, color="tab:red", alpha=0.15, label=f"{mean.confidence:.0%} CI")
    ax.set_xlabel("value")
    ax.set_ylabel("frequency")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, frameon=False)
    buf = io.BytesIO()
    metadata = {"CreationDate": None} if fmt_ == "pdf" else {"Software": None}
    fig.savefig(buf, format=fmt_, dpi=130, metadata=metadata)
    return buf.getvalue()


@app.command("estimate", cls=Command)
def estimate_command(
    input: Annotated[Path, typer.Argument(help="File of reports (.csv, .tsv, .parquet or .pq).", show_default=False)],
    mechanism: Annotated[Path, typer.Option("--mechanism", "-m", help="Mechanism spec (JSON) that made the reports.")],
    column: Annotated[str, typer.Option("--column", "-c", help="Name of the report column.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Output CSV: value,frequency for lo..hi.")],
    domain: Annotated[Optional[str], typer.Option(
        "--domain", help="Range of the true values, lo:hi (default: the spec's domain).")] = None,
    method: Annotated[str, typer.Option(
        "--method", help="em (maximum likelihood), ems (EM with smoothing: for smooth distributions) "
                         "or inversion.")] = "em",
    smooth: Annotated[Optional[int], typer.Option(
        "--smooth", help="ems only: (1,2,1)/4 smoothing passes per step (default 1).", show_default=False)] = None,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Also draw the estimate (.png or .pdf).")] = None,
    confidence: Annotated[float, typer.Option("--confidence", help="Level of the mean's interval.")] = 0.95,
    tol: Annotated[Optional[float], typer.Option(
        "--tol", help="em: stop within this many nats of the maximum (default 1e-2); ems: at this estimated "
                      "total-variation distance to the fixed point (default 1e-8).", show_default=False)] = None,
    max_iter: Annotated[int, typer.Option("--max-iter", help="Cap on EM steps.")] = 50_000,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    format: Annotated[Optional[str], typer.Option(
        "--format", help="Input format (csv, tsv or parquet) when the extension does not say.")] = None,
) -> None:
    """Estimate the distribution and mean of the true values from a column of reports."""
    import warnings

    import numpy as np

    from ..estimation import ConvergenceWarning, ReportCounts, estimate_frequencies_full, estimate_mean
    from ..io import column_counts
    from ..spec import load_spec

    spec = load_spec(mechanism)
    if method not in ("em", "ems", "inversion"):
        raise ValueError(f"--method must be 'em', 'ems' or 'inversion'; got {method!r}")
    if smooth is not None and method != "ems":
        raise ValueError(f"--smooth applies to --method ems only; got --smooth {smooth} "
                         f"with --method {method}")
    if domain is None:
        if spec.domain is None:
            raise ValueError("--domain lo:hi is required: the mechanism spec has no domain")
        dom = spec.domain
    else:
        dom = parse_domain(domain)
    if spec.domain is not None and not (spec.domain[0] <= dom[0] and dom[1] <= spec.domain[1]):
        raise ValueError(f"--domain {dom[0]}:{dom[1]} must lie inside the spec's domain "
                         f"{spec.domain[0]}:{spec.domain[1]}")
    if spec.domain is None:  # the channel restricted to --domain is built below: refuse a huge one now
        from ..channel import check_entries

        check_entries(dom[1] - dom[0] + 1, spec.s, f"--domain {dom[0]}:{dom[1]} with s = {spec.s}")
    target = spec.channel() if spec.domain is not None else spec.mechanism
    _check_out(output, "output")
    if plot is not None:
        _check_out(plot, "plot")
        plot_fmt = plot.suffix.lower().lstrip(".")
        if plot_fmt not in ("png", "pdf"):
            raise ValueError(f"--plot must end in .png or .pdf; got {str(plot)!r}")
    if output.exists() and output.resolve() == Path(input).resolve():
        raise ValueError("the output must differ from the input file")

    # bounds = every output the mechanism has: a report outside is an error naming its row
    if spec.domain is None:
        t = spec.mechanism.t
        bounds = (dom[0] - t, dom[1] + t)
    else:
        outs = np.asarray(target.outputs)
        bounds = (int(outs.min()), int(outs.max()))
    offset, counts = column_counts(input, column, bounds=bounds, format=format)
    rc = ReportCounts(offset, counts)
    if rc.n == 0:
        raise ValueError(f"column {column!r} of {str(input)!r} has no reports")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        est = estimate_frequencies_full(rc, target, domain=dom, method=method, tol=tol, max_iter=max_iter,
                                        smooth=smooth)
        # the mean's EM (biased channels only) takes --tol in nats; an ems tolerance is in TV, not nats
        mean_tol = 1e-2 if (tol is None or method == "ems") else tol
        mean = estimate_mean(rc, target, domain=dom, confidence=confidence, tol=mean_tol, max_iter=max_iter) \
            if rc.n >= 2 else None
    values = est.values
    lines = ["value,frequency"] + [f"{int(v)},{float(f)!r}" for v, f in zip(values, est.p)]
    plot_bytes = None
    if plot is not None:
        title = (f"{spec.family} {spec.param_name}={spec.param:g} s={spec.s}: "
                 f"{est.method} estimate from {rc.n:,} reports")
        if mean is not None:
            plot_bytes = _plot_bytes(values, est.p, mean, title, plot_fmt)
    summary = {
        "n": rc.n, "domain": list(dom), "method": est.method, "iterations": est.iterations,
        "newton_steps": est.newton_steps, "converged": est.converged,
        "loglik": est.loglik if np.isfinite(est.loglik) else None,
        "gap": est.gap if np.isfinite(est.gap) else None, "output": str(output),
    }
    if method == "ems":
        summary["smooth"] = 1 if smooth is None else smooth
    if mean is not None:
        summary["mean"] = mean.to_dict()
    # write only after everything has succeeded, both files or neither
    files = {output: ("\n".join(lines) + "\n").encode("utf-8")}
    if plot_bytes is not None:
        files[plot] = plot_bytes
    atomic_write_all(files)

    if as_json:
        print_json(summary)
        return
    console = stdout_console()
    say = lambda text: console.print(text, soft_wrap=True)  # noqa: E731 - one line per message
    say(f"estimated the distribution of {column!r} on {dom[0]}..{dom[1]} from {rc.n:,} reports "
                  f"({est.method}) -> {output}")
    if mean is not None:
        say(f"mean = {fmt(mean, 8)}  (standard error {fmt(mean.stderr, 4)}, "
                      f"{mean.confidence:.0%} CI [{fmt(mean.ci[0], 8)}, {fmt(mean.ci[1], 8)}], {mean.method})")
    if est.method == "em":
        say(f"EM: {est.iterations} steps"
                      + (f" + {est.newton_steps} Newton steps" if est.newton_steps else "")
                      + f", log-likelihood within {fmt(est.gap, 3)} nats of the maximum"
                      + ("" if est.converged else "  [NOT converged: raise --max-iter or --tol]"))
    elif est.method == "ems":
        say(f"EMS: {est.iterations} steps, smoothing passes {summary['smooth']}, "
            + ("converged to the fixed point" if est.converged
               else "[NOT converged: raise --max-iter or --tol]")
            + f"; log-likelihood within {fmt(est.gap, 3)} nats of the maximum (given up by smoothing)")
    for w in caught:
        typer.echo(f"warning: {w.message}", err=True)
    if plot_bytes is not None:
        say(f"plot written to {plot}")
    elif plot is not None:
        typer.echo(f"warning: no plot written to {plot}: it shows the mean, which needs at least 2 reports",
                   err=True)
