r"""``sparseldp estimate``: the distribution and mean of the true values, from a column of reports.

``sparseldp estimate --mechanism mech.json --column age --domain 0:99 private.csv -o estimate.csv``

* Reads the report column of a CSV/TSV/Parquet file in one streamed pass
  (:func:`sparseldp.io.column_counts`: one ``np.bincount`` per batch), so
  memory is bounded by the batch size and the number of distinct reports.
* The mechanism comes from the spec (``sparseldp design -o``).  Without a
  ``domain`` in the spec it is the mechanism on Z; with one, the spec's
  channel (extended or clipped window).  ``--domain lo:hi`` is the range of the
  true values (required unless the spec has a domain; it must lie inside it).
* Prints derived statistics (mean, variance, ``--quantiles``, ``--range a:b``)
  with intervals from a parametric bootstrap of the counts (``--bootstrap B``
  replicates, seeded: it only simulates on privatized counts; 0 turns the
  intervals off), and adds ``ci_low,ci_high`` columns to the table.  For
  ``auto``'s stopped-EM members ``--json`` says how the refits ran their EM
  steps (``bootstrap_refits``: ``chebyshev``, ``over-relaxed`` or ``plain``;
  ``Bootstrap.refit_steps``).
  ``--robust``: each interval is the hull of the estimate's and the MLE's
  (the MLE fit on the same counts and bootstrapped too): intervals that hold
  on heaped or rounded values, where a regularized estimate's intervals miss (README,
  "Estimation"), several times wider on smooth data.
* ``--profile`` (the default where :func:`sparseldp.estimation.likelihood_ratio.modelled_seconds`
  is at most 10 s, ``profile_modelled_seconds`` in ``--json``; ``--no-profile`` turns it off): also the likelihood-ratio interval of each statistic
  (:func:`sparseldp.estimation.likelihood_ratio.profile`: the values of the statistic under which the
  reports are within ``chi^2_1 / 2`` nats of their maximum likelihood), columns ``LR low`` and
  ``LR high`` (``lr_low``, ``lr_high`` in ``--json``): what the reports alone pin down.  Their
  threshold (``chi^2_1 / 2`` nats) is checked by simulation
  (:meth:`sparseldp.estimation.Profile.calibration`, seeded, within a modelled 60 s): 7 report sets
  drawn from the estimate, each one's profile deficit at the estimate's mean; where they
  contradict ``chi^2_1 / 2`` (randomized response on many values with a concentrated truth) a warning
  says the LR intervals are too narrow for these reports (``lr_check`` of the mean's row in
  ``--json``), and every statistic's (mean, variance, quantiles, ``--range``) is calibrated by
  simulation instead (:meth:`~sparseldp.estimation.Profile.calibrated_interval`; ``lr_calibrated``
  in ``--json``): unasked one after another within 15 s, all with ``--calibrate``, none with
  ``--no-calibrate``.  A statistic whose estimate falls outside its LR interval is checked the same
  way, draws stopping at the first that comes as far from its maximum: if none does, the reports disfavour
  it at that level (usually a regularized estimate that smoothed away atoms or heaps), a warning on
  stderr and ``ruled_out`` in ``--json``; if one does, a note says chance (or the warning above).
* ``--profile-values`` (implies ``--profile``): also each value's likelihood-ratio interval, as
  ``lr_low,lr_high`` columns of the output table and a dashed outline in ``--plot`` beside the
  bootstrap's band: two searches per value, 2-3 s on 100 values, about 20 s on 300 and 3 minutes on
  1,000 under the Laplace window of 137 (measured on the shared 2-core machine, another job running).
  ``--plot`` draws the outline unasked (not the columns) where ``--profile`` is on and it is modelled at
  most 10 s (``modelled_seconds(est, m, "p")``; ``plot_profile_values`` in ``--json``): under a wide
  kernel the band shows the estimate's spread, not what the reports pin down (README, "Estimation").
* Writes ``value,frequency`` rows for ``lo..hi`` atomically, as CSV, TSV or
  Parquet by the extension of ``-o`` (``-o -``: CSV on stdout, the summary
  then on stderr): on any error nothing is written.  ``-`` as the input reads
  CSV reports from stdin.  No output may be one of the inputs, and ``-o`` and
  ``--plot`` must differ.
* States the guarantee of the mechanism that made the reports, recomputed
  from the spec (a spec whose recorded guarantee does not hold is refused).  Prints the estimated mean with its standard error
  and confidence interval, and the estimator's diagnostics (converged, EM
  steps, certified log-likelihood gap) on the terminal; ``--json`` prints them
  as JSON instead.  ``--plot FILE`` draws the estimated histogram (PNG/PDF).
* ``--method``: ``auto`` (default: the amount of regularization chosen from
  the reports by held-out likelihood, named in the summary), ``em`` (the
  maximum-likelihood estimate, discrete by construction: the choice for values
  known to sit on a few atoms, README "Limits"; for intervals of CDF points,
  ranges, quantiles and frequencies on heaped or rounded data, ``--robust``
  adds the MLE's intervals to the default estimate's), ``ems`` (EM with smoothing; ``--smooth m``
  passes of the (1, 2, 1)/4 kernel per step) or ``inversion`` (least squares +
  simplex projection); see :func:`sparseldp.estimate_frequencies`.
* ``--quantile-method``: ``inverted_cdf`` (default: each quantile is a value
  of the domain, its interval a set of values, conservative) or
  ``interpolated`` (the grouped-data rule of
  :mod:`sparseldp.estimation.stats`: a real number, its interval the points
  ``t`` whose interval of the piecewise-linear CDF ``F(t)`` contains ``q``,
  Woodruff's inversion).  The mean is estimated the same way
  whatever the method (:func:`sparseldp.estimate_mean`): for a Piecewise,
  Hybrid or Duchi spec with the papers' unbiased per-report estimator
  (labelled "unbiased (Wang et al. 2019)" / "unbiased (Duchi et al. 2013)",
  interval from the sample variance of the per-report estimates), printed
  alongside the distribution estimate, whose own mean is in the derived
  statistics.
* A report the mechanism cannot produce from the domain, a bad spec, a bad
  file: one line on stderr and exit status 2.
* On a terminal, each stage (reading, fitting, bootstrap) shows a spinner and
  its elapsed time on stderr, erased when it ends: on ``10^4`` values a
  bootstrap of a long-window fit can take a minute.  Piped or redirected,
  nothing but the summary is printed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import typer

from .._format import format_upper
from . import app
from ._common import Command, atomic_write_all, check_distinct_paths, check_output, fmt, guarantee_text, \
    is_stdio, one_of, parse_domain, print_json, stage, stdout_console
from ._estimate_table import (_lr_notes, _parse_quantiles, _statistics, _summary, _table_bytes, _table_format,
                              _too_narrow)

#: Largest --max-iter.
MAX_ITER = 10_000_000
#: Largest --bootstrap (each replicate is one refit).
MAX_BOOT = 10_000


__all__ = ["estimate_command"]


#: The likelihood-ratio intervals are printed unasked (``--profile``'s default) where their modelled time is at most
#: this many seconds (``likelihood_ratio.modelled_seconds``: one interior-point iteration's modelled cost on the
#: reports' channel times the iterations the searches took, per statistic asked; a count, not a clock, so the same input
#: gives the same table on any machine).  Measured (2026-11-30, 10^5 reports of a bimodal truth, the mean, variance,
#: a range query and three quantiles, one BLAS thread; modelled in brackets): the Laplace design of (1, 1e-6, 5)
#: (window 137) on 300 / 1,000 / 2,000 values 1.0 / 4.9 / 9.8 s (2.3 / 5.4 / 9.8); that of (1, 1e-6, 10) (window 275) on
#: 300 / 1,000 values 1.9 / 11.6 s (2.6 / 11.7); that of (1, 1e-6, 3) (window 83) on 3,000 / 10^4 values 5.1 /
#: 17.3 s (8.4 / 25.5); the Gaussian design of (1, 1e-6, 5) (window 349) on 200 / 300 / 500 values 2.4 / 4.4 /
#: 19.0 s (3.9 / 6.5 / 18.9).  The rule before (on for at most 200 values) left them off on domains where they
#: cost a few seconds, and those are where a wide kernel's bootstrap intervals miss.
_AUTO_PROFILE_SECONDS = 10.0
#: Unasked, LR intervals are calibrated one after another within this many modelled seconds in all (not a clock:
#: ``_estimate_table._calibrate_rows``).  Randomized response at eps 3 (2026-12-01): 100 values, all five calibrated
#: (1.05 s modelled each, 0.45-1.9 s measured); 400 values, none (16.8 s each; --calibrate: 7.5-20 s measured).
_AUTO_CALIBRATE_SECONDS = 15.0

# What the mean line's estimator is (estimate_mean's method), beside the distribution estimate's mean.
_MEAN_METHODS = {
    "report-mean": "the mean of the reports themselves (unbiased: the window is centred on the true value)",
    "unbiased (channel inversion)": "the mean of g(report), where g inverts the channel (E[g(Y) | x] = x for every "
                                    "x of the domain: unbiased whatever the data; the reports' own mean is biased "
                                    "here: a clipped window, or a channel that is not centred on the input)",
    "em-fisher": "the MLE's mean with a Fisher-information standard error (the reports' own mean is biased here "
                 "and the channel cannot be inverted within half the domain's range)",
    "em-range-bound": "the MLE's mean with the worst-case standard error (hi - lo)/2",
    "one-value-domain": "the domain's only value",
}
@app.command("estimate", cls=Command)
def estimate_command(
    input: Annotated[Path, typer.Argument(
        help="File of reports (.csv, .tsv, .parquet or .pq), or - for CSV on stdin.", show_default=False)],
    mechanism: Annotated[Path, typer.Option("--mechanism", "--spec", "-m", help="Mechanism spec (JSON) that made the reports.")],
    column: Annotated[str, typer.Option("--column", "-c", help="Name of the report column.")],
    output: Annotated[Path, typer.Option(
        "-o", "--output", help="Output table value,frequency for lo..hi: .csv, .tsv, .parquet, or - for CSV on "
                               "stdout.")],
    domain: Annotated[Optional[str], typer.Option(
        "--domain", help="Range of the true values, lo:hi (default: the spec's domain).")] = None,
    method: Annotated[str, typer.Option(
        "--method", help="auto (default: regularization chosen from the reports by 5-fold held-out "
                         "likelihood), em (maximum likelihood: for values known to sit on a few "
                         "atoms), "
                         "ems (EM with smoothing: for smooth distributions), or inversion.")] = "auto",
    smooth: Annotated[Optional[int], typer.Option(
        "--smooth", help="ems only: (1,2,1)/4 smoothing passes per step (default 1).", show_default=False)] = None,
    plot: Annotated[Optional[Path], typer.Option(
        "--plot", help="Also draw the estimate (.png or .pdf): its bootstrap band, and each value's "
                       "likelihood-ratio interval where --profile-values is given or it is modelled cheap.")] = None,
    confidence: Annotated[float, typer.Option(
        "--confidence", help="Level of every interval: the mean's line, the table, the ci columns of -o and "
                             "the plot's band.")] = 0.95,
    tol: Annotated[Optional[float], typer.Option(
        "--tol", help="em: stop within this many nats of the maximum (default 1e-2); ems: at this estimated "
                      "total-variation distance to the fixed point (default 1e-8).", show_default=False)] = None,
    max_iter: Annotated[int, typer.Option("--max-iter", help=f"Cap on EM steps (1..{MAX_ITER}).")] = 50_000,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    format: Annotated[Optional[str], typer.Option(
        "--format", help="Input format (csv, tsv or parquet) when the extension does not say.")] = None,
    quantiles: Annotated[str, typer.Option(
        "--quantiles", help="Quantiles to report, comma-separated in (0, 1).")] = "0.1,0.5,0.9",
    quantile_method: Annotated[str, typer.Option(
        "--quantile-method", help="inverted_cdf (each quantile a value of the domain) or interpolated "
                                  "(grouped-data rule: a real number).")] = "inverted_cdf",
    range_: Annotated[Optional[str], typer.Option(
        "--range", help="Also report P(a <= X <= b) for a:b.", show_default=False)] = None,
    truth: Annotated[Optional[Path], typer.Option(
        "--truth", help="With --plot: a file of the true values to overlay (simulations).",
        show_default=False)] = None,
    truth_column: Annotated[Optional[str], typer.Option(
        "--truth-column", help="Column of --truth (default: --column).", show_default=False)] = None,
    boot: Annotated[int, typer.Option(
        "--bootstrap", help=f"Bootstrap replicates for the intervals (0: none; at most {MAX_BOOT}).")] = 100,
    robust: Annotated[bool, typer.Option(
        "--robust", help="Intervals that do not assume the distribution is as smooth as the estimate: the hull "
                         "of its bootstrap intervals and the MLE's (for heaped or rounded values; wider).")] = False,
    profile: Annotated[Optional[bool], typer.Option(
        "--profile/--no-profile", help="Also print likelihood-ratio intervals (the profile likelihood) of the mean, "
                                       "variance, quantiles and range: the values the reports alone do not rule "
                                       "out, no smoothness assumed.  Default: on where they are modelled to take at "
                                       f"most {_AUTO_PROFILE_SECONDS:g} s (up to about 2,000 values under a Laplace "
                                       "window of 137, 1,100 under a Gaussian window of 349), off above "
                                       "(seconds to minutes per quantile).", show_default=False)] = None,
    profile_values: Annotated[bool, typer.Option(
        "--profile-values", help="Also each value's likelihood-ratio interval (implies --profile): columns "
                                 "lr_low,lr_high in the output and an outline in --plot (which draws it unasked "
                                 f"where it is modelled at most {_AUTO_PROFILE_SECONDS:g} s and --profile is "
                                 "on).  Two searches per value: 1-2 s on 100 values, 10-20 s on 300, 3 min on "
                                 "1,000.")] = False,
    calibrate: Annotated[Optional[bool], typer.Option(
        "--calibrate/--no-calibrate", help="Where the simulation check says the likelihood-ratio intervals' "
                                           "chi-square threshold fails for these reports, calibrate them by "
                                           "simulation (a test inversion, 39 draws per round at each end; implies "
                                           "--profile).  Default: one statistic after another while the time "
                                           f"stays within {_AUTO_CALIBRATE_SECONDS:g} s.",
        show_default=False)] = None,
    engine: Annotated[str, typer.Option(
        "--engine", help="local (one process, streamed) or spark (count the reports with Spark; input: Parquet "
                         "file, directory or glob; needs the spark extra).")] = "local",
    master: Annotated[Optional[str], typer.Option(
        "--master", help="--engine spark: Spark master URL, e.g. local[2] or yarn.", show_default=False)] = None,
) -> None:
    """Estimate the distribution and mean of the true values from a column of reports."""
    import warnings

    from .._validation import check_int
    from ..estimation import METHODS, ConvergenceWarning, ReportCounts, estimate_frequencies_full, estimate_mean
    from ..estimation.likelihood_ratio import modelled_seconds as _lr_seconds
    from ..estimation.stats import QUANTILE_METHODS
    from ..io import column_counts
    from ..spec import load_spec

    if method not in METHODS:
        raise ValueError(f"--method must be {one_of(METHODS)}; got {method!r}")
    if smooth is not None and method != "ems":
        raise ValueError(f"--smooth applies to --method ems only; got --smooth {smooth} "
                         f"with --method {method}")
    max_iter = check_int(max_iter, "--max-iter", minimum=1, maximum=MAX_ITER)
    boot = check_int(boot, "--bootstrap", minimum=0, maximum=MAX_BOOT)
    if boot == 1:
        raise ValueError("--bootstrap must be 0 (no intervals) or an integer in [2, 10000]; got 1")
    if robust and boot == 0:
        raise ValueError("--robust widens the bootstrap intervals, and --bootstrap 0 turns them off; give "
                         "--bootstrap B >= 2")
    if not 0.0 < confidence < 1.0:  # (NaN too) before reading and fitting, under the option's own name
        raise ValueError(f"--confidence must be a number in (0, 1); got {confidence!r}")
    qs = _parse_quantiles(quantiles)
    if quantile_method not in QUANTILE_METHODS:
        raise ValueError(f"--quantile-method must be {one_of(QUANTILE_METHODS)}; got {quantile_method!r}")
    rng_range = None if range_ is None else parse_domain(range_, "--range")
    if not column:
        raise ValueError("--column must be a non-empty column name; got ''")
    asked_profile = profile  # None: by the modelled cost, after the fit
    if profile is False and profile_values:
        raise ValueError("--profile-values adds each value's likelihood-ratio interval to the statistics', which "
                         "--no-profile turns off; give one of them")
    if profile is False and calibrate:
        raise ValueError("--calibrate calibrates the likelihood-ratio intervals, which --no-profile turns off; give "
                         "one of them")
    if calibrate:
        profile = asked_profile = True
    if (truth is not None or truth_column is not None) and plot is None:
        raise ValueError("--truth and --truth-column draw the true histogram into --plot; give --plot FILE")
    if truth_column is not None and truth is None:
        raise ValueError("--truth-column needs --truth FILE")
    check_distinct_paths({"the input": input, "--mechanism": mechanism, "--truth": truth},
                         {"-o": output, "--plot": plot})
    table_fmt = _table_format(output)
    from ._spark import check_engine

    spark_job = check_engine(engine, master, input=input, output=None, format=format)  # None: local engine
    plot_fmt = None
    if plot is not None:
        if is_stdio(plot):
            raise ValueError("--plot needs a file name ending in .png or .pdf; got '-'")
        plot_fmt = plot.suffix.lower().lstrip(".")
        if plot_fmt not in ("png", "pdf"):
            raise ValueError(f"--plot must end in .png or .pdf; got {str(plot)!r}")
    if as_json and is_stdio(output):
        raise ValueError("--json prints the summary on stdout, where -o - writes the table; use -o FILE")
    check_output(output)
    check_output(plot, "plot")

    spec = load_spec(mechanism)  # refuses a spec whose recorded guarantee does not hold
    target = spec.sampler_target()
    dom, bounds, reason = _domain_and_bounds(spec, domain, target)

    src = "-" if is_stdio(input) else input
    with stage(f"reading the reports in column {column!r}"):
        if spark_job is not None:
            offset, counts = spark_job.column_counts(column, bounds=bounds, bounds_reason=reason)
        else:
            offset, counts = column_counts(src, column, bounds=bounds, format=format, bounds_reason=reason)
    rc = ReportCounts(offset, counts)
    if rc.n == 0:
        raise ValueError(f"column {column!r} of {'stdin' if is_stdio(input) else repr(str(input))} has no reports")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        with stage(f"fitting ({method}): {dom[1] - dom[0] + 1:,} values, {rc.n:,} reports"):
            est = estimate_frequencies_full(rc, target, domain=dom, method=method, tol=tol, max_iter=max_iter,
                                            smooth=smooth)
            # the mean's EM (biased channels only) takes --tol in nats; an ems tolerance is in TV, not nats
            mean_tol = 1e-2 if (tol is None or method == "ems") else tol
            mean = estimate_mean(rc, target, domain=dom, confidence=confidence, tol=mean_tol,
                                 max_iter=max_iter) if rc.n >= 2 else None
        widened = robust and not _is_mle(est)  # --robust adds the MLE's intervals (a no-op for an MLE)
        also = " and the MLE's fit and refits (--robust)" if widened else ""
        label = f"bootstrap: {boot} refits ({est.regularization or est.method}){also}" if boot else "statistics"
        # each value's intervals come with the statistics'; unasked, on where they are modelled to be cheap
        lr_seconds = None
        if asked_profile is None and not profile_values:
            lr_seconds = _lr_seconds(est, target, ["mean", "var"] + ["quantile"] * len(qs)
                                     + ([] if rng_range is None else ["range"]))
        profile = bool(profile_values or asked_profile or (lr_seconds is not None
                                                           and lr_seconds <= _AUTO_PROFILE_SECONDS))
        if profile:
            label += ", likelihood-ratio intervals (" + ("each value, --profile-values)" if profile_values
                                                          else "--profile)" if asked_profile else
                                                          f"modelled at {lr_seconds:.1f} s)")
        # --plot draws each value's likelihood-ratio interval beside the bootstrap's band where that is modelled
        # cheap too: under a wide kernel the band shows the estimate's spread, not what the reports pin down
        value_seconds = _lr_seconds(est, target, ["p"]) if plot is not None and profile and not profile_values else None
        plot_values = profile_values or (value_seconds is not None and value_seconds <= _AUTO_PROFILE_SECONDS)
        if plot_values and not profile_values:
            label += f", each value's for the plot (modelled at {value_seconds:.1f} s)"
        with stage(label):
            stats_rows, per_value, lr_value, booted = _statistics(est, target, qs, rng_range, boot, smooth, confidence,
                                                          quantile_method, robust, profile, plot_values,
                                                          calibrate, _AUTO_CALIBRATE_SECONDS)
    for value in ([float(mean), float(mean.stderr)] if mean is not None else []) + [float(np.sum(est.p))]:
        if not np.isfinite(value):  # never print or write a NaN as if it were a number
            raise ValueError("the estimate is not finite (a numerical failure); try --method ems or a larger --domain")
    plot_bytes = None
    if plot is not None:
        true_p = None if truth is None else _true_histogram(truth, truth_column or column, dom)
        plot_bytes = _plot_bytes(est, mean, spec.guarantee, column, rc.n, plot_fmt, true_p, per_value, lr_value,
                                 confidence, widened, bool(_too_narrow(stats_rows)))
    where = "stdout" if is_stdio(output) else str(output)
    summary = _summary(est, rc.n, dom, mean, spec.guarantee, where, method, smooth, stats_rows, boot, robust,
                       profile, profile_values, lr_seconds, booted,
                       plot_values=None if plot is None else plot_values, value_seconds=value_seconds)
    table = _table_bytes(est.values, est.p, table_fmt, per_value, lr_value if profile_values else None)
    # write only after everything has succeeded, all files or none
    files = {} if is_stdio(output) else {output: table}
    if plot_bytes is not None:
        files[plot] = plot_bytes
    atomic_write_all(files)
    if is_stdio(output):
        sys.stdout.buffer.write(table)
        sys.stdout.flush()

    from ..estimation.intervals import ShapeWarning

    # the auto line says what bootstrap's ShapeWarning says (_print_text)
    notes = [f"warning: {w.message}" for w in caught if not issubclass(w.category, ShapeWarning)]
    if profile:
        notes += _lr_notes(stats_rows, summary["ruled_out"], confidence)
    if mean is None:
        notes.append("warning: the mean is not estimated from a single report (its standard error needs at "
                     "least 2)")
    if as_json:
        print_json(summary)
        for note in notes:
            typer.echo(note, err=True)
        return
    console = _summary_console(output)
    _print_text(console, summary, est, mean, spec.guarantee, column, confidence, widened)
    for note in notes:
        typer.echo(note, err=True)
    if plot_bytes is not None:
        console.print(f"plot written to {plot}", soft_wrap=True, markup=False)


def _is_mle(est) -> bool:
    """Whether the estimate is the MLE (``--method em``, or ``auto``'s MLE member)."""
    return est.method == "em" or est.regularization == "em mle"


def _domain_and_bounds(spec, domain, target):
    """``(dom, bounds, reason)``: the true values' range (``--domain`` or the spec's, inside the spec's), and
    the range of every report ``target`` (the spec's sampler target) can produce from it (a report outside is
    an error naming its row) with the reason the error gives."""
    if domain is None:
        if spec.domain is None:
            raise ValueError("--domain lo:hi is required: the mechanism spec has no domain")
        dom = spec.domain
    else:
        dom = parse_domain(domain)
    if spec.domain is not None and not (spec.domain[0] <= dom[0] and dom[1] <= spec.domain[1]):
        raise ValueError(f"--domain {dom[0]}:{dom[1]} must lie inside the spec's domain "
                         f"{spec.domain[0]}:{spec.domain[1]}")
    if spec.domain is None:  # the channel restricted to --domain is built later: refuse a huge one now
        from ..channel import check_entries

        check_entries(dom[1] - dom[0] + 1, spec.s, f"--domain {dom[0]}:{dom[1]} with s = {spec.s}")
        t = spec.mechanism.t
        return dom, (dom[0] - t, dom[1] + t), (
            f"every report the mechanism can produce from the domain {dom[0]}..{dom[1]}: the domain widened by "
            f"its radius t = {t}")
    outs = np.asarray(target.outputs)
    return dom, (int(outs.min()), int(outs.max())), (
        f"every report the spec's {spec.window} channel on {spec.domain[0]}..{spec.domain[1]} can produce")


def _true_histogram(truth: Path, column: str, dom) -> np.ndarray:
    """``--truth``'s column as a distribution on ``dom`` (a value outside it is an error)."""
    from ..io import column_counts

    _, counts = column_counts(truth, column, bounds=dom, bounds_reason=f"the domain {dom[0]}..{dom[1]}")
    if counts.sum() == 0:
        raise ValueError(f"--truth {str(truth)!r} has no values")
    return counts / counts.sum()


def _plot_bytes(est, mean, guarantee, column, n, plot_fmt, true_p, per_value, lr_value, confidence, widened, narrow):
    """``--plot``'s file: the estimate, its band, each value's LR interval (``narrow``: labelled too narrow), the truth."""
    from ..figures import render_estimate

    return render_estimate(est.values, est.p, mean=mean, column=column,
                           guarantee=None if guarantee is None else guarantee.describe(),
                           method=est.method, n=n, fmt=plot_fmt, true_p=true_p, ci=per_value,
                           ci_label=f"{confidence:.0%} interval per value" + (" (robust)" if widened else ""),
                           lr=lr_value, lr_label=f"{confidence:.0%} likelihood-ratio interval per value"
                           + (" (chi-square: too narrow for these reports)" if narrow else ""))


def _summary_console(output):
    """Where the terminal summary goes: stdout, or stderr when ``-o -`` writes the table to stdout."""
    if is_stdio(output):
        from rich.console import Console

        return Console(file=sys.stderr, highlight=False, soft_wrap=False)
    return stdout_console()


def _print_text(console, summary, est, mean, guarantee, column, confidence, widened) -> None:
    """The terminal summary: the estimate, the guarantee, the mean, the fit's diagnostics and the table of
    derived statistics with their intervals."""
    say = lambda text: console.print(text, soft_wrap=True, markup=False)  # noqa: E731 - one line per message
    dom, n, boot, profile = summary["domain"], summary["n"], summary["bootstrap"], summary["profile"]
    say(f"estimated the distribution of {column!r} on {dom[0]}..{dom[1]} from {n:,} "
        f"report{'s' if n != 1 else ''} ({est.method}) -> {summary['output']}")
    say("reports made by " + (guarantee_text(guarantee) if guarantee is not None
                              else "a mechanism whose spec records no target (eps, H)"))
    if mean is not None:
        say(f"mean = {fmt(mean, 8)}  (standard error {fmt(mean.stderr, 4)}, "
            f"{mean.confidence:.0%} CI [{fmt(mean.ci[0], 8)}, {fmt(mean.ci[1], 8)}], {mean.method})")
        if mean.method.startswith("unbiased (") and mean.method not in _MEAN_METHODS:
            say("  the papers' unbiased estimator: the mean of the per-report estimates x^(y), CLT interval from "
                "their sample variance; the 'mean' of the derived statistics below is the distribution "
                f"estimate's ({est.method})")
        else:  # two estimators of the mean: say which is which
            say(f"  {_MEAN_METHODS.get(mean.method, mean.method)}; the 'mean' of the derived statistics below "
                f"is the distribution estimate's ({est.regularization or est.method})")
        if not dom[0] <= float(mean) <= dom[1]:
            say(f"  the mean estimate lies outside the domain {dom[0]}..{dom[1]}: unbiased estimates are not clipped "
                "(the mean is near an edge, and noise carried the estimate past it); the interval is clipped to "
                "the domain")
    if est.method == "em":
        say(f"EM: {est.iterations} steps"
            + (f" + {est.newton_steps} Newton steps" if est.newton_steps else "")
            + f", log-likelihood within {format_upper(est.gap, 3)} nats of the maximum"
            + ("" if est.converged else "  [NOT converged: raise --max-iter or --tol]"))
    elif est.method == "ems":
        say(f"EMS: {est.iterations} steps, smoothing passes {summary['smooth']}, "
            + ("converged to the fixed point" if est.converged
               else "[NOT converged: raise --max-iter or --tol]")
            + f"; log-likelihood within {format_upper(est.gap, 3)} nats of the maximum (given up by smoothing)")
    elif est.method == "auto":
        given_up = "" if est.regularization == "em mle" else ", given up by regularization"
        rule = "the most regularized member within one standard error or one nat of the best"
        if est.regularization == "em mle":
            rule += ", the MLE where it is as stable over the folds"
        from ..estimation.auto import _AMBIGUOUS_TV

        tv = est.selection_tv
        say(f"auto: chose {est.regularization} by 5-fold held-out likelihood ({rule}); "
            f"log-likelihood within {format_upper(est.gap, 3)} nats of the maximum (a certified bound{given_up})"
            + ("" if tv is None else f"; the members held-out likelihood does not tell apart lie within TV {tv:.2g}"
               " of it" + (" (the reports do not fix the shape at the kernel's scale: read local statistics from "
                           "the LR intervals)" if tv >= _AMBIGUOUS_TV else "")))
    from rich.table import Table

    tab = Table(title=(f"derived statistics, {confidence:.0%} intervals from a parametric bootstrap "
                       f"({boot} replicates)") if boot else
                "derived statistics (no bootstrap intervals: --bootstrap 0)" if profile else
                "derived statistics (no intervals: --bootstrap 0)")
    tab.add_column("statistic")
    cols = ("estimate", "low", "high") + (("LR low", "LR high") if profile else ())
    for col in cols:
        tab.add_column(col, justify="right")
    for row in summary["statistics"]:
        cells = [row["statistic"], fmt(row["value"], 6)]
        for key in ("ci_low", "ci_high") + (("lr_low", "lr_high") if profile else ()):
            cells.append("-" if row[key] is None else fmt(row[key], 6))  # no bootstrap: --bootstrap 0
        tab.add_row(*cells)
    console.print(tab)
    if profile:
        say(f"LR: {confidence:.0%} likelihood-ratio intervals (profile likelihood, outer bounds): the values the "
            "reports alone do not rule out, no smoothness assumed; where they are much wider than the bootstrap's, "
            "the estimate's smoothness, not the reports, narrows the latter")
    regularized = est.method == "ems" or (est.method == "auto" and not _is_mle(est))  # (inversion is not)
    if boot and widened:
        say(f"robust intervals: the hull of the estimate's ({est.regularization or est.method}) and the MLE's, "
            "fit on the same reports and bootstrapped too")
    elif boot and regularized:
        say(f"the intervals cover the regularized estimate ({est.regularization or est.method}), assuming the "
            "distribution is as smooth; for heaped or rounded values add --robust"
            + ("" if profile else ", and --profile for what the reports alone pin down"
               + ("" if summary.get("profile_modelled_seconds") is None else
                  f" (modelled at {summary['profile_modelled_seconds']:.0f} s here)")))
