r"""``sparseldp account``: the exact privacy accounting of one mechanism.

For ``SparseLaplace(lam, s)`` or ``SparseGaussian(sigma, s)`` on Z and a target
``eps``, prints the separation defect ``delta_h(eps)`` for ``h = 1..H``
(Theorems 3 and 9) with its split into support leakage and overlap excess
(Remark 2), then ``delta_star = max_{1<=h<=H} delta_h`` and the distortion
moments ``R1``, ``R2`` (Propositions 1 and 3).  ``delta_h`` is increasing in
``h`` (a lemma in :mod:`sparseldp.core.accounting`), so the worst separation
is ``min(H, 2t + 1)``.

``--json`` prints exactly::

    {"family", "lam" | "sigma", "s", "eps", "H", "delta_star",
     "per_h": [{"h", "delta", "support_leakage", "overlap"}, ...], "r1", "r2", "guarantee"}

with every ``h = 1..H`` listed (rows are generated in chunks, so memory stays
bounded; for ``h > 2t`` the windows are disjoint and the row is exactly
``delta = support_leakage = 1``, ``overlap = 0``).  The table view lists every
row up to :data:`FULL_TABLE_ROWS` and otherwise the first and last rows plus
the maximizing ``h``.  ``H`` is at most
:data:`~sparseldp.cli._common.MAX_H_ACCOUNT` (every ``h`` is a row).

``--summary`` prints no rows: ``delta_star``, the worst separation and its
split, ``R1``, ``R2`` and the guarantee, in O(1) whatever ``H`` (up to
:data:`~sparseldp.cli._common.MAX_H_SUMMARY`); with ``--json``, exactly::

    {"family", "lam" | "sigma", "s", "eps", "H", "delta_star", "worst_h",
     "support_leakage", "overlap", "r1", "r2", "guarantee"}

``--mechanism spec.json`` accounts the spec's mechanism (the channel on its
domain when it has one) at its recorded ``eps`` and ``H`` unless ``--eps`` /
``--H`` are given; a spec whose recorded claims do not hold is refused.  Its
channel output is a summary already (the worst pair, no rows).

``--reports k`` adds the guarantee of ``k`` reports of one person
(:func:`sparseldp.composition.k_reports`; for a spec, routed by
:func:`sparseldp.composition.spec_route`): basic composition ``(k eps,
min(1, k delta_star))``, a rigorous upper bound, and beside it the exact
composition on the privacy-loss lattice (:func:`sparseldp.composition.compose`)
for Sparse Laplace / Gaussian on Z or with extended windows: the ``k``-fold
``delta`` at ``k eps`` with its FFT error bound (floating point, the bound
from an error model, not outward rounded: the sum is an upper estimate, not
a certificate) and the smallest ``eps`` whose ``delta + error`` is basic
composition's ``delta``.  Elsewhere (clipped windows, baselines, general
kernels, a composed lattice above :data:`MAX_REPORT_POINTS` points) basic
composition alone is stated, with the reason.  With ``--json`` the document
gets one more key, ``"reports"`` (:meth:`sparseldp.composition.KReports.to_dict`).
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import numpy as np
import typer

from . import app
from pathlib import Path

from ._common import MAX_H_ACCOUNT, MAX_H_SUMMARY, Command, build_mechanism, check_family, fmt, print_json, \
    stdout_console, to_jsonable
from .._validation import check_int, check_nonnegative

__all__ = ["account", "account_rows", "FULL_TABLE_ROWS", "MAX_REPORT_POINTS"]

#: Largest composed lattice (``k (n - 1) + 1`` points) ``account --reports`` composes exactly (about a
#: second for the Gaussian at s = 2001, k = 1000); beyond, basic composition only.
MAX_REPORT_POINTS = 1 << 21

#: the table shows every h up to this many rows, a summary beyond
FULL_TABLE_ROWS = 40
_HEAD = 10
_TAIL = 5
_JSON_CHUNK = 1 << 16


def account_rows(mechanism, eps: float, hs: np.ndarray):
    """``(delta, support_leakage, overlap)`` arrays for the separations ``hs``."""
    d = mechanism.defect_h(eps, np.asarray(hs, dtype=np.int64))
    return (np.atleast_1d(d.total), np.atleast_1d(d.support_leakage), np.atleast_1d(d.overlap))


def _write_json(mechanism, eps: float, H: int, delta_star: float, reports=None) -> None:
    from ..spec import Guarantee
    name, value = mechanism.parameter
    head = {"family": mechanism.family, name: value, "s": mechanism.s, "eps": eps, "H": H,
            "delta_star": delta_star}
    tail = {"r1": mechanism.r1, "r2": mechanism.r2,
            "guarantee": Guarantee(eps=eps, delta=delta_star, H=H).to_dict()}
    if reports is not None:
        tail["reports"] = reports.to_dict()
    out = sys.stdout
    # the document is streamed so that per_h for a huge H never sits in memory at once
    out.write(json.dumps(to_jsonable(head), allow_nan=False)[:-1] + ', "per_h": [')
    first = True
    for start in range(1, H + 1, _JSON_CHUNK):
        hs = np.arange(start, min(H, start + _JSON_CHUNK - 1) + 1, dtype=np.int64)
        tot, leak, ov = account_rows(mechanism, eps, hs)
        text = ", ".join(
            f'{{"h": {h}, "delta": {d!r}, "support_leakage": {l!r}, "overlap": {o!r}}}'
            for h, d, l, o in zip(hs.tolist(), tot.tolist(), leak.tolist(), ov.tolist())
        )
        out.write(text if first else ", " + text)
        first = False
    out.write("], " + json.dumps(to_jsonable(tail), allow_nan=False)[1:] + "\n")
    out.flush()


def _worst_h(mechanism, H: int) -> int:
    """The smallest ``h <= H`` attaining ``delta_star``: ``min(H, 2t + 1)`` (``delta_h`` increases with ``h``)."""
    return min(H, 2 * mechanism.t + 1)


def _summary(mechanism, eps: float, H: int, as_json: bool, k=None) -> None:
    """``--summary``: ``delta_star`` (rigorous upper bound), the worst separation and its split; O(1) in ``H``.

    Every printed bound is rounded outward (:func:`sparseldp._format.format_upper`): still a bound."""
    from .._format import format_upper
    from ..spec import Guarantee

    upper = _upper(mechanism, eps, H)
    h = _worst_h(mechanism, H)
    d = mechanism.defect_h(eps, h)
    name, value = mechanism.parameter
    reports = None if k is None else _k_reports(mechanism, k, eps, upper, H)
    out = {"family": mechanism.family, name: value, "s": mechanism.s, "eps": eps, "H": H, "delta_star": upper,
           "worst_h": h, "support_leakage": float(d.support_leakage), "overlap": float(d.overlap),
           "r1": mechanism.r1, "r2": mechanism.r2, "guarantee": Guarantee(eps=eps, delta=upper, H=H).to_dict()}
    if reports is not None:
        out["reports"] = reports.to_dict()
    if as_json:
        print_json(out)
        return
    console = stdout_console()
    console.print(f"Sparse {mechanism.family.capitalize()} ({name} = {value:g}, s = {mechanism.s}, "
                  f"t = {mechanism.t}) at eps = {eps:g}, H = {H}", soft_wrap=True)
    console.print(f"delta_star = {format_upper(upper, 10)}  (max over 1 <= h <= {H}, attained at h = {h}: "
                  f"support leakage {fmt(d.support_leakage)} + overlap {fmt(d.overlap)})", soft_wrap=True)
    console.print(f"R1 = E|Y - x|     = {fmt(mechanism.r1, 10)}")
    console.print(f"R2 = E(Y - x)^2   = {fmt(mechanism.r2, 10)}")
    console.print(f"guarantee: (eps = {eps:g}, delta <= {format_upper(upper)})-LDP for inputs up to H = {H} apart "
                  "(delta_star is a rigorous upper bound, rounded up)", soft_wrap=True)
    _print_reports(console, reports)


def _k_reports(mechanism, k: int, eps: float, upper: float, H: int):
    """The guarantee of ``k`` reports of a mechanism on Z (:func:`sparseldp.composition.k_reports`)."""
    from ..composition import k_reports

    return k_reports(mechanism, k, eps=eps, delta=upper, H=H, max_points=MAX_REPORT_POINTS)


def _print_reports(console, r) -> None:
    """The lines of ``--reports k``: basic composition, then the exact composition or why there is none.

    Upper bounds (basic composition's delta, the error bound, ``delta + error``, the smallest eps) are
    printed rounded up (:func:`sparseldp._format.format_upper`)."""
    if r is None:
        return
    from .._format import format_upper
    console.print(f"{r.k} reports of one person (fresh noise each), inputs up to H = {r.H} apart:", soft_wrap=True)
    console.print(f"  basic composition: (eps = {r.basic_eps:.6g}, delta <= {format_upper(r.basic_delta)})-LDP "
                  "(k eps and min(1, k delta_star): a rigorous upper bound)", soft_wrap=True)
    if r.route == "basic":
        console.print(f"  exact composition: not computed ({r.why_basic}); basic composition is the guarantee",
                      soft_wrap=True)
        return
    console.print(f"  exact composition (lattice route, worst separation h = {r.h}): at eps = {r.basic_eps:.6g}, "
                  f"delta = {fmt(r.exact_delta, 10)} +- {format_upper(r.exact_delta_error, 2)}, so delta <= "
                  f"{format_upper(r.exact_delta_upper)} (floating point; the error bound is from the FFT error model, not "
                  "outward rounded: an upper estimate, not a certificate)", soft_wrap=True)
    if r.basic_delta >= 1.0:
        console.print("  (basic composition's delta is 1 here: it certifies nothing; the exact delta above is the "
                      "informative statement)", soft_wrap=True)
    elif r.exact_eps is not None:
        console.print(f"  exact composition: delta <= {format_upper(r.basic_delta)} (basic composition's) already at "
                      f"eps = {format_upper(r.exact_eps, 6)} (the smallest eps with delta + error <= it)", soft_wrap=True)
    else:
        console.print(f"  exact composition: no eps found for delta <= {format_upper(r.basic_delta)} "
                      f"({r.exact_eps_note})",
                      soft_wrap=True)


def _shown_hs(H: int, h_max: int) -> list[int]:
    if H <= FULL_TABLE_ROWS:
        return list(range(1, H + 1))
    hs = set(range(1, _HEAD + 1)) | set(range(H - _TAIL + 1, H + 1)) | {h_max}
    return sorted(hs)


def _print_table(mechanism, eps: float, H: int, delta_star: float, h_max: int, reports=None) -> None:
    """The table view; ``h_max`` is the smallest ``h <= H`` attaining ``delta_star`` (printed rounded up)."""
    from rich.table import Table

    from .._format import format_upper

    name, value = mechanism.parameter
    hs = _shown_hs(H, h_max)
    tot, leak, ov = account_rows(mechanism, eps, np.asarray(hs))
    title = (f"Sparse {mechanism.family.capitalize()} ({name} = {value:g}, s = {mechanism.s}, "
             f"t = {mechanism.t}) at eps = {eps:g}, H = {H}")
    table = Table()
    table.add_column("h", justify="right")
    table.add_column("delta_h", justify="right")
    table.add_column("support leakage", justify="right")
    table.add_column("overlap", justify="right")
    prev = 0
    for h, d, l, o in zip(hs, tot.tolist(), leak.tolist(), ov.tolist()):
        if h > prev + 1:
            table.add_row("...", "", "", "")
        mark = " *" if h == h_max else ""
        table.add_row(f"{h}{mark}", fmt(d), fmt(l), fmt(o))
        prev = h
    console = stdout_console()
    console.print(title)
    console.print(table)
    if H > FULL_TABLE_ROWS:
        note = f"{len(hs)} of {H} rows shown (--json lists all)"
        if H > 2 * mechanism.t:
            note += f"; every h > 2t = {2 * mechanism.t} has disjoint windows: delta_h = 1"
        console.print(note)
    console.print(f"delta_star = {format_upper(delta_star, 10)}  (max over 1 <= h <= {H}, attained at h = {h_max} *)")
    console.print(f"R1 = E|Y - x|     = {fmt(mechanism.r1, 10)}")
    console.print(f"R2 = E(Y - x)^2   = {fmt(mechanism.r2, 10)}")
    console.print(f"guarantee: (eps = {eps:g}, delta <= {format_upper(delta_star)})-LDP for inputs up to H = {H} "
                  "apart (delta_star is a rigorous upper bound, rounded up)", soft_wrap=True)
    _print_reports(console, reports)


def _on_z(mechanism, eps: float, H: int, as_json: bool, summary: bool, k) -> None:
    """The three views of a mechanism on Z (summary, JSON rows, table), with ``--reports k`` if given."""
    if summary:
        _summary(mechanism, eps, H, as_json, k)
        return
    upper = _upper(mechanism, eps, H)
    reports = None if k is None else _k_reports(mechanism, k, eps, upper, H)
    if as_json:
        _write_json(mechanism, eps, H, upper, reports)
    else:
        _print_table(mechanism, eps, H, upper, _worst_h(mechanism, H), reports)


def _check_reports(k):
    """``--reports``: an integer >= 1, or None when not given."""
    return None if k is None else check_int(k, "--reports", minimum=1)


def _account_spec(path, eps, H, as_json: bool, summary: bool, k=None) -> None:
    """``account --mechanism spec.json``: the spec's guarantee, recomputed (and its claims checked on load)."""
    from .._format import format_upper
    from ..spec import Guarantee, load_spec

    spec = load_spec(path)
    g = spec.guarantee
    if eps is None:
        if g is None:
            raise ValueError("--eps is required: the spec records no target eps")
        eps = g.eps
    if H is None:
        if g is None:
            raise ValueError("--H is required: the spec records no privacy range H")
        H = g.H
    eps = check_nonnegative(eps, "eps")
    H = _check_H(H, summary)
    if spec.domain is None:
        _on_z(spec.mechanism, eps, H, as_json, summary, k)
        return
    ch = spec.channel()
    worst = ch.delta_with_argmax(eps, H)
    upper = _upper(ch, eps, H)
    out = {**spec.to_dict(), "eps": eps, "H": H, "delta_star": upper, "worst_pair": None if worst.x is None else [int(worst.x), int(worst.x_prime)],
           "support_leakage": float(worst.support_leakage), "overlap": float(worst.overlap),
           "r1": float(np.mean(ch.distortion(1))), "r2": float(np.mean(ch.distortion(2))),
           "guarantee": Guarantee(eps=eps, delta=upper, H=H).to_dict()}
    reports = None
    if k is not None:
        from ..composition import spec_k_reports

        reports = spec_k_reports(spec, k, eps=eps, delta=upper, H=H, max_points=MAX_REPORT_POINTS)
        out["reports"] = reports.to_dict()
    if as_json:
        print_json(out)
        return
    console = stdout_console()
    what = (f"Baseline {spec.family} ({spec.param_name} = {spec.param:g})" if spec.baseline else
            f"Sparse {spec.family} ({spec.param_name} = {spec.param:g}, s = {spec.s}, {spec.window} windows)")
    console.print(f"{what} on the domain {spec.domain[0]}..{spec.domain[1]}, exact Theorem 2 accounting",
                  soft_wrap=True)
    console.print(f"delta_star = {format_upper(upper, 10)}  (max over input pairs at most H = {H} apart"
                  + ("" if worst.x is None else f", attained at (x, x') = ({int(worst.x)}, {int(worst.x_prime)}): "
                     f"support leakage {fmt(worst.support_leakage)} + overlap {fmt(worst.overlap)}") + ")",
                  soft_wrap=True)
    console.print(f"R1 = E|Y - x|     = {fmt(out['r1'], 10)}  (uniform average over the domain)")
    console.print(f"R2 = E(Y - x)^2   = {fmt(out['r2'], 10)}")
    console.print(f"guarantee: (eps = {eps:g}, delta <= {format_upper(upper)})-LDP for inputs up to H = {H} apart "
                  "(rigorous upper bound, rounded up)", soft_wrap=True)
    _print_reports(console, reports)


def _upper(target, eps, H) -> float:
    """The rigorous upper bound the guarantee states (the protocol's ``delta_star_upper``)."""
    return float(target.delta_star_upper(eps, H))


def _check_H(H, summary: bool) -> int:
    """``H`` within the cap of the mode: rows (:data:`MAX_H_ACCOUNT`) or ``--summary`` (:data:`MAX_H_SUMMARY`)."""
    if summary:
        return check_int(H, "H", minimum=1, maximum=MAX_H_SUMMARY)
    if isinstance(H, int) and MAX_H_ACCOUNT < H <= MAX_H_SUMMARY:
        raise ValueError(f"H must be an integer in [1, {MAX_H_ACCOUNT}] (each h = 1..H is a row of the output); "
                         f"got {H}: use --summary for delta_star and the worst h alone at any H")
    return check_int(H, "H", minimum=1, maximum=MAX_H_ACCOUNT)


@app.command(cls=Command)
def account(
    family: Annotated[Optional[str], typer.Option("--family", help="Mechanism family: laplace or gaussian.",
                                                  show_default=False)] = None,
    s: Annotated[Optional[int], typer.Option("--s", help="Support size (odd, >= 1).", show_default=False)] = None,
    eps: Annotated[Optional[float], typer.Option("--eps", help="Privacy parameter eps >= 0.",
                                                 show_default=False)] = None,
    H: Annotated[Optional[int], typer.Option(
        "--H", "--range", help=f"Privacy range: separations 1..H are protected (H <= {MAX_H_ACCOUNT:,}).",
        show_default=False)] = None,
    lam: Annotated[Optional[float], typer.Option("--lam", help="Laplace inverse temperature (laplace only).")] = None,
    sigma: Annotated[Optional[float], typer.Option("--sigma", help="Gaussian scale (gaussian only).")] = None,
    mechanism: Annotated[Optional[Path], typer.Option(
        "--mechanism", "--spec", "-m", help="Account a mechanism spec (JSON) instead; its recorded claims are checked.",
        show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (all h) instead of a table.")] = False,
    summary: Annotated[bool, typer.Option(
        "--summary", help="Only delta_star, the worst h and its split (no rows; any H up to 2^63 - 1).")] = False,
    reports: Annotated[Optional[int], typer.Option(
        "--reports", help="Also state the guarantee of K reports of one person: exact composition (lattice) "
                          "beside basic composition.", show_default=False, metavar="K")] = None,
) -> None:
    """Exact delta_h for h = 1..H with its split (support leakage + overlap), delta_star, R1, R2."""
    k = _check_reports(reports)
    if mechanism is not None:
        given = [name for name, v in (("--family", family), ("--s", s), ("--lam", lam), ("--sigma", sigma))
                 if v is not None]
        if given:
            raise ValueError(f"{given[0]} cannot be combined with --mechanism (the spec names the mechanism)")
        _account_spec(mechanism, eps, H, as_json, summary, k)
        return
    missing = [name for name, v in (("--family", family), ("--s", s), ("--eps", eps), ("--H", H)) if v is None]
    if missing:
        raise ValueError(f"missing option {missing[0]} (or give --mechanism SPEC)")
    family = check_family(family)
    mechanism_ = build_mechanism(family, s=s, lam=lam, sigma=sigma)
    eps = check_nonnegative(eps, "eps")
    H = _check_H(H, summary)
    _on_z(mechanism_, eps, H, as_json, summary, k)
