"""``sparseldp estimate``'s parts that are not the command: the ``--quantiles`` argument, the derived
statistics with their intervals and the likelihood-ratio intervals' checks by simulation (and their stderr
lines), the output table (its format by extension, its bytes) and the summary ``--json`` prints."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ._common import fmt, is_stdio


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
                profiled=False, each=False, calibrate=None, auto_seconds=0.0):
    """Derived statistics with bootstrap intervals (and with ``profiled`` the likelihood-ratio ones, columns
    ``lr_low, lr_high``, calibrated by simulation where the mean's check fails: ``calibrate`` true, or ``None``
    and modelled at most ``auto_seconds`` in all): ``(rows, per-value bootstrap intervals or None, per-value
    likelihood-ratio intervals (with ``each``) or None, the Bootstrap or None)``."""
    # seeded: the bootstrap only simulates on already privatized counts (no privacy role)
    b = est.bootstrap(target, B=B, rng=0, smooth=smooth if est.method == "ems" else None,
                      robust=robust) if B else None
    prof = est.profile(target) if profiled else None

    def stat(name, fn, key, **kw):
        if b is None:
            row = {"statistic": name, "value": float(fn(**kw)), "ci_low": None, "ci_high": None}
        else:
            value, (lo, hi) = fn(ci=b, level=level, **kw)
            row = {"statistic": name, "value": float(value), "ci_low": float(lo), "ci_high": float(hi)}
        if prof is not None:
            _, (lo, hi) = fn(ci=prof, level=level, **kw)
            row["lr_low"], row["lr_high"] = float(lo), float(hi)
            # simulation from the estimate: the mean's always (does Wilks' calibration hold for these reports?),
            # the others' where the reports seem to disfavour the estimate's value (until a draw comes as far)
            outside = _outside(row)
            if key == "mean" or outside:
                kw.pop("method", None)
                row["lr_check"] = _lr_check(prof, est, target, key, level, kw, detect=key == "mean", test=outside)
        return row

    rows = [stat("mean", est.mean, "mean"), stat("variance", est.var, "var")]
    tag = "" if qmethod == "inverted_cdf" else f" ({qmethod})"
    rows += [stat(f"quantile {q:g}{tag}", est.quantile, "quantile", q=q, method=qmethod) for q in qs]
    # the statistics whose LR intervals are calibrated by simulation where the mean's check fails
    calibratable = [(rows[0], "mean", {}), (rows[1], "var", {})] + [
        (row, "quantile", {"q": q, "method": qmethod}) for row, q in zip(rows[2:], qs)]
    if rng_range is not None:
        a, c = rng_range
        rows.append(stat(f"P({a} <= X <= {c})", est.range, "range", a=a, b=c))
        calibratable.append((rows[-1], "range", {"a": a, "b": c}))
    if prof is not None:  # --no-calibrate: no budget at all (the warning still says how to ask)
        _calibrate_rows(prof, calibratable, level, None if calibrate else auto_seconds if calibrate is None else -1.0,
                        est, target)
    per_value = None if b is None else b.interval("p", level=level)
    return rows, per_value, prof.interval("p", level) if each else None, b


#: The simulation that checks a statistic's likelihood-ratio interval (:meth:`Profile.calibration`) runs where its
#: draws are modelled at most this many seconds (one draw: an MLE fit and one end's search, modelled as the
#: statistic's interval: ``likelihood_ratio.modelled_seconds``).
_CHECK_SECONDS = 60.0
#: Draws of the mean's routine check of the chi-square threshold: 4 or more of 7 beyond it (a binomial tail of
#: 1.9e-4 where Wilks holds) or one beyond 7.57 nats flags it.  Where it failed (randomized response on 100-400
#: values, a concentrated truth) 18-19 of 19 draws were beyond; 19 draws cost 8.3 s on 1,000 values under the
#: Laplace window of 137 (10^6 reports), more than the intervals themselves.
_DETECT_DRAWS = 7


#: Where the mean's check finds the chi-square threshold fails, the statistics' likelihood-ratio intervals are
#: calibrated by simulation (:meth:`Profile.calibrated_interval`).  Unasked, each is modelled as this many times the
#: mean's interval (``likelihood_ratio.modelled_seconds``, a model of the iterations, not a clock: the same reports
#: get the same output however busy the machine) times the domain's size over 100 (at least 1): its draws' MLE fits
#: grow with the domain faster than the interval's searches.  Measured (randomized response at eps 3, 2026-12-01,
#: 5 statistics each, the draws' MLEs by the interior point from the uniform start, two draws at a time on 400
#: values): 0.7-9.5 times the mean's modelled interval on 100 values (0.45-1.9 s against 0.15 s), 0.8-6.1 times on
#: 400 values once divided by 4 (7.5-20 s against 0.6 s, most of it the dense Grams and their Cholesky).  The budget was a clock before: on 400 values
#: whether the mean was calibrated then turned on the check's measured 0.10-0.11 s per draw (150 draws against 15 s).
_CALIBRATED_UNITS = 7.0


def _calibrate_rows(prof, calibratable, level: float, budget, est, target) -> None:
    """Replace the statistics' likelihood-ratio intervals by calibrated ones where the mean's check says the
    chi-square threshold fails (``lr_calibrated`` in their rows: the thresholds, or why not).  ``None``: asked,
    every statistic; else one after another while their modelled seconds (each :data:`_CALIBRATED_UNITS` times
    the mean's modelled interval on ``est``'s counts, times the domain's size over 100) stay within ``budget``."""
    import time

    from ..estimation.likelihood_ratio import modelled_seconds

    check = calibratable[0][0].get("lr_check") or {}
    if not check.get("chi_square_fails"):
        return
    unit = _CALIBRATED_UNITS * modelled_seconds(est, target, ["mean"]) * max(1.0, est.p.size / 100.0)
    modelled = 0.0
    for row, key, kw in calibratable:
        if budget is not None and modelled + unit > budget:
            row["lr_calibrated"] = {"calibrated": False, "modelled_seconds": round(unit, 3), "asked": False}
            continue
        modelled += unit
        start = time.perf_counter()
        cal = prof.calibrated_interval(key, level, rng=0, **kw)
        last = time.perf_counter() - start
        row["lr_low"], row["lr_high"] = cal.low, cal.high
        row["lr_calibrated"] = {"calibrated": True, "kappa_low": _finite(cal.kappa_low),
                                "kappa_high": _finite(cal.kappa_high), "rounds": cal.rounds, "seconds": round(last, 3),
                                "modelled_seconds": round(unit, 3)}


def _finite(x):
    """A float for ``--json``, which has no infinity: ``None`` for one."""
    return float(x) if math.isfinite(x) else None


def _outside(row) -> bool:
    """Whether a statistic's estimate lies outside its likelihood-ratio interval (beyond rounding)."""
    slack = 1e-12 * max(1.0, abs(row["value"]))
    return not row["lr_low"] - slack <= row["value"] <= row["lr_high"] + slack


def _lr_check(prof, est, target, key: str, level: float, kw: dict, detect: bool, test: bool) -> dict:
    """The checks by simulation of one statistic's likelihood-ratio interval (:meth:`Profile.calibration`;
    seeded: simulation on privatized counts only), as ``--json`` reports them: with ``detect``, whether the
    chi-square threshold holds for these reports (:data:`_DETECT_DRAWS` draws: ``chi_square_fails``,
    ``beyond_kappa`` of ``draws``, ``largest_draw``); with ``test``, whether the reports disfavour the estimate's
    value (sequential draws, at most the fewest that can reject at ``level``: ``disfavoured``, ``p_value``,
    ``test_draws``).  Not run where modelled above :data:`_CHECK_SECONDS`."""
    import time

    from ..estimation._lr_search import kappa_of
    from ..estimation.likelihood_ratio import modelled_seconds

    B = max(1, math.ceil(1.0 / (1.0 - level) - 1e-9) - 1)
    seconds = (_DETECT_DRAWS * detect + B * test) * modelled_seconds(est, target, [key])
    if seconds > _CHECK_SECONDS:
        return {"checked": False, "modelled_seconds": round(seconds, 3)}
    out = {"checked": True, "kappa": kappa_of(level), "disfavoured": None,
           "chi_square_fails": None}
    if detect:
        start = time.perf_counter()
        cal = prof.calibration(key, level, B=_DETECT_DRAWS, rng=0, **kw)
        out.update(draws=int(cal.draws.size), beyond_kappa=cal.beyond, largest_draw=_finite(cal.draws_low.max()),
                   chi_square_fails=cal.chi_square_fails, deficit=_finite(cal.deficit),
                   seconds_per_draw=round((time.perf_counter() - start) / cal.draws.size, 4))
    if test:
        cal = prof.calibration(key, level, B=B, rng=1, sequential=True, **kw)
        out.update(B=B, test_draws=int(cal.draws.size), deficit=_finite(cal.deficit), p_value=cal.p_value,
                   disfavoured=cal.disfavoured)
        if not detect:  # the sequential draws say what they can about the threshold too
            out.update(chi_square_fails=cal.chi_square_fails, beyond_kappa=cal.beyond, draws=int(cal.draws.size),
                       largest_draw=_finite(cal.draws_low.max()))
    return out


def _too_narrow(rows) -> list:
    """The statistics whose check by simulation found the chi-square threshold fails for these reports (the
    too-narrow warning's, and the plot's outline label's)."""
    return [r for r in rows if (r.get("lr_check") or {}).get("chi_square_fails")]


def _lr_notes(rows, ruled_out, confidence) -> list:
    """The stderr lines for statistics outside their likelihood-ratio intervals: disfavoured (no simulation from
    the estimate came as far from its maximum at its value, or not checked), or cleared by the simulation, as
    chance or because the intervals' chi-square calibration fails for these reports."""
    notes, level = [], f"{confidence:.0%}"

    def where(r):
        return f"{r['statistic']} {fmt(r['value'], 6)} not in [{fmt(r['lr_low'], 6)}, {fmt(r['lr_high'], 6)}]"

    def how(r):
        check = r["lr_check"]
        if not check["checked"]:
            return f" (not checked by simulation: modelled at {check['modelled_seconds']:.0f} s)"
        return (f" (none of {check['test_draws']} simulations from the estimate came as far from its maximum at "
                f"its value, {check['deficit']:.2f} nats: Monte Carlo p = {check['p_value']:.2g})")

    out = [r for r in rows if r["statistic"] in ruled_out]
    if out:
        notes.append(f"warning: the reports disfavour the estimate at the {level} level, outside the "
                     f"likelihood-ratio interval: {'; '.join(where(r) + how(r) for r in out)}; a regularized "
                     "estimate's bias is the usual cause (far outside: atoms or heaps smoothed away)")
    cleared = [r for r in rows if _outside(r) and r["statistic"] not in ruled_out]
    fails = _too_narrow(rows)
    if fails:
        r, check = fails[0], fails[0]["lr_check"]
        notes.append(f"warning: the likelihood-ratio intervals are too narrow for these reports: simulated from "
                     f"the estimate itself, {check['beyond_kappa']} of {check['draws']} report sets sat more than "
                     f"{check['kappa']:.2f} nats below their maximum at its {r['statistic']} (up to "
                     f"{check['largest_draw']:.1f}), where Wilks' chi-square allows {1 - confidence:.0%} of them "
                     "(small masses on many values the channel cannot resolve; README, \"Limits\")"
                     + (f"; {', '.join(c['statistic'] for c in cleared)} outside them is not evidence against the "
                        "estimate" if cleared else "") + _calibrated_text(rows))
    chance = [r for r in cleared if not r["lr_check"]["chi_square_fails"]]
    if chance and not fails:
        notes.append("note: " + "; ".join(where(r) for r in chance) + f": just outside the {level} likelihood-"
                     f"ratio interval{'s' if len(chance) > 1 else ''}, but simulations from the estimate came as "
                     "far from their maximum at its value: chance, not evidence against the estimate")
    return notes


def _nats(kappa) -> str:
    """A calibrated threshold as printed: ``None`` (infinite: the end at the statistic's extreme) is ``inf``."""
    return "inf" if kappa is None else f"{kappa:.1f}"


def _calibrated_text(rows) -> str:
    """What the too-narrow warning adds about the intervals calibrated by simulation (or not, and why)."""
    done = [r for r in rows if r.get("lr_calibrated", {}).get("calibrated")]
    skipped = [r for r in rows if r.get("lr_calibrated", {}).get("calibrated") is False]
    text = ""
    if done:
        text += ("; calibrated by simulation instead (test inversion, thresholds in nats): " + ", ".join(
            f"{r['statistic']} [{fmt(r['lr_low'], 6)}, {fmt(r['lr_high'], 6)}] at "
            f"{_nats(r['lr_calibrated']['kappa_low'])} / {_nats(r['lr_calibrated']['kappa_high'])}" for r in done)
                 + " (each value's, --profile-values and the plot's outline, are not)")
    if skipped:
        info = skipped[-1]["lr_calibrated"]
        text += (f"; not calibrated ({', '.join(r['statistic'] for r in skipped)}: about "
                 f"{info['modelled_seconds']:.0f} s each; --calibrate or Profile.calibrated_interval in Python)")
    return text


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
    if profile:  # statistics whose estimate the reports rule out: outside their likelihood-ratio interval, and
        # not cleared by the simulation (lr_check: unchecked, or no draw came as far from its maximum)
        summary["ruled_out"] = [r["statistic"] for r in stats_rows if _outside(r) and (
            not r["lr_check"]["checked"] or r["lr_check"]["disfavoured"])]
    if plot_values is not None:
        summary["plot_profile_values"] = plot_values
        summary["profile_values_modelled_seconds"] = None if value_seconds is None else round(float(value_seconds), 3)
    return summary
