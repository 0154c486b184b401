"""``sparseldp estimate``'s parts that are not the command: the ``--quantiles`` argument, the derived
statistics with their intervals, the output table (its format by extension, its bytes) and the summary
``--json`` prints."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._common import is_stdio


def _parse_quantiles(text: str) -> list[float]:
    msg = f"--quantiles must be comma-separated numbers in (0, 1), e.g. 0.1,0.5,0.9; got {text!r}"
    parts = text.split(",")
    if any(not part.strip() for part in parts):  # '0.5,,0.9' or '0.5,': refused, as --columns 'a,,b' is
        raise ValueError(msg)
    try:
        qs = [float(part) for part in parts]
    except ValueError:
        raise ValueError(msg) from None
    if not qs or len(qs) > 100 or not all(0.0 < q < 1.0 for q in qs):
        raise ValueError(msg)
    return qs


def _statistics(est, target, qs, rng_range, B, smooth, level, qmethod="inverted_cdf", robust=False,
                profiled=False, each=False):
    """Derived statistics with bootstrap intervals (and with ``profiled`` the likelihood-ratio ones, columns
    ``lr_low, lr_high``): ``(rows, per-value bootstrap intervals or None, per-value likelihood-ratio intervals
    (with ``each``) or None, the Bootstrap or None)``."""
    # seeded: the bootstrap only simulates on already privatized counts (no privacy role)
    b = est.bootstrap(target, B=B, rng=0, smooth=smooth if est.method == "ems" else None,
                      robust=robust) if B else None
    prof = est.profile(target) if profiled else None

    def stat(name, fn, **kw):
        if b is None:
            row = {"statistic": name, "value": float(fn(**kw)), "ci_low": None, "ci_high": None}
        else:
            value, (lo, hi) = fn(ci=b, level=level, **kw)
            row = {"statistic": name, "value": float(value), "ci_low": float(lo), "ci_high": float(hi)}
        if prof is not None:
            _, (lo, hi) = fn(ci=prof, level=level, **kw)
            row["lr_low"], row["lr_high"] = float(lo), float(hi)
        return row

    rows = [stat("mean", est.mean), stat("variance", est.var)]
    tag = "" if qmethod == "inverted_cdf" else f" ({qmethod})"
    rows += [stat(f"quantile {q:g}{tag}", est.quantile, q=q, method=qmethod) for q in qs]
    if rng_range is not None:
        a, c = rng_range
        rows.append(stat(f"P({a} <= X <= {c})", est.range, a=a, b=c))
    per_value = None if b is None else b.interval("p", level=level)
    return rows, per_value, prof.interval("p", level) if each else None, b


#: Output formats of the estimate table, by extension.
_TABLE_FORMATS = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet"}


def _table_format(output) -> str:
    if is_stdio(output):
        return "csv"
    fmt_ = _TABLE_FORMATS.get(Path(output).suffix.lower())
    if fmt_ is None:
        raise ValueError(f"-o must end in .csv, .tsv, .parquet or .pq (or be - for CSV on stdout); got "
                         f"{str(output)!r}")
    return fmt_


def _table_bytes(values, p, fmt_: str, ci=None, lr=None) -> bytes:
    """``value,frequency`` rows in the output's format, plus ``ci_low,ci_high`` with bootstrap intervals and
    ``lr_low,lr_high`` with likelihood-ratio ones."""
    cols = {"value": np.asarray(values, dtype=np.int64), "frequency": np.asarray(p, dtype=float)}
    for name, pair in (("ci", ci), ("lr", lr)):
        if pair is not None:
            cols[f"{name}_low"] = np.asarray(pair[0], dtype=float)
            cols[f"{name}_high"] = np.asarray(pair[1], dtype=float)
    if fmt_ == "parquet":
        import io

        import pyarrow as pa
        import pyarrow.parquet as pq

        buf = io.BytesIO()
        pq.write_table(pa.table({k: pa.array(v) for k, v in cols.items()}), buf)
        return buf.getvalue()
    sep = "," if fmt_ == "csv" else "\t"
    names = list(cols)
    lines = [sep.join(names)] + [
        sep.join(str(int(cols[k][i])) if k == "value" else repr(float(cols[k][i])) for k in names)
        for i in range(len(cols["value"]))
    ]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _summary(est, n, dom, mean, guarantee, where, method, smooth, stats_rows, boot, robust, profile,
             profile_values, lr_seconds=None, booted=None, plot_values=None, value_seconds=None) -> dict:
    """What ``--json`` prints (and the terminal summary reads); ``lr_seconds``: the likelihood-ratio intervals'
    modelled time where it decided ``--profile``'s default; ``booted``: the bootstrap that ran, whose refits'
    EM steps (``Bootstrap.refit_steps``: ``"chebyshev"``, ``"over-relaxed"`` or ``"plain"``, for ``auto``'s
    stopped-EM members) ``bootstrap_refits`` reports; ``plot_values``: with ``--plot``, whether it draws each
    value's likelihood-ratio interval (``None`` without a plot), and ``value_seconds`` their modelled time
    where that decided it."""
    summary = {
        "n": n, "domain": list(dom), "method": est.method, "iterations": est.iterations,
        "newton_steps": est.newton_steps, "converged": est.converged,
        "loglik": est.loglik if np.isfinite(est.loglik) else None,
        "gap": est.gap if np.isfinite(est.gap) else None, "output": where,
        "guarantee": None if guarantee is None else guarantee.to_dict(),
    }
    if method == "ems":
        summary["smooth"] = 1 if smooth is None else smooth
    if method == "auto":
        summary["regularization"], summary["selection_tv"] = est.regularization, est.selection_tv
    summary["mean"] = None if mean is None else mean.to_dict()
    summary["statistics"] = stats_rows
    summary["bootstrap"] = boot
    if booted is not None and booted.refit_steps:
        summary["bootstrap_refits"] = booted.refit_steps
    summary["robust"] = robust
    summary["profile"] = profile
    summary["profile_values"] = profile_values
    if lr_seconds is not None:  # the default was decided by it: on at most _AUTO_PROFILE_SECONDS
        summary["profile_modelled_seconds"] = round(float(lr_seconds), 3)
    if profile:  # statistics whose estimate the reports rule out (outside their likelihood-ratio interval)
        slack = lambda r: 1e-12 * max(1.0, abs(r["value"]))  # noqa: E731 - rounding, not evidence
        summary["ruled_out"] = [r["statistic"] for r in stats_rows
                                if not r["lr_low"] - slack(r) <= r["value"] <= r["lr_high"] + slack(r)]
    if plot_values is not None:
        summary["plot_profile_values"] = plot_values
        summary["profile_values_modelled_seconds"] = None if value_seconds is None else round(float(value_seconds), 3)
    return summary
