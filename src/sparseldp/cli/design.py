r"""``sparseldp design``: a mechanism from a privacy target.

Given ``(eps, delta)`` and the privacy range ``H``, calls
:func:`sparseldp.design.design`: with ``--lam`` (``--sigma``) the smallest odd
support ``s`` with ``delta_star(eps, H) <= delta`` for that parameter (which is
distortion-optimal for it, Theorems 6 and 12); without, the jointly optimal
``(s, lam)`` / ``(s, sigma)`` minimizing ``R1`` or ``R2`` (``--objective``).

With ``--domain lo:hi`` the mechanism is designed for that finite input
domain (:func:`sparseldp.design.finite.design_finite`), accounted exactly with
the general Theorem 2 / 8 for ``--window clipped`` (outputs stay in the
domain; the default) or ``extended`` (outputs ``lo - t .. hi + t``), and
``R1``/``R2`` are averages over a uniform input.

``--json`` prints exactly ``{"family", "lam" | "sigma", "s", "eps", "delta",
"H", "delta_star", "r1", "r2"}`` (plus ``"domain"`` and ``"window"`` with
``--domain``); ``-o FILE`` writes the same object as a
mechanism spec (:mod:`sparseldp.spec`) for ``privatize`` and ``estimate``,
atomically.  An unreachable target exits with status 2 and the proof of
infeasibility on stderr.

Edges, each said in words: ``--delta 0`` on Z is impossible by Theorem 1
(pure LDP forces every support to be the same set, so a sparse window that
moves with the input cannot be pure) and is refused at once with what is
possible instead; on a finite ``--domain`` it asks for windows that cover the
whole domain.  ``--delta 1`` is met by every mechanism, the identity included,
and prints a warning.  ``--window`` needs ``--domain``.  ``H`` is at most
:data:`sparseldp.design.radius.MAX_H_DESIGN` (10,000), checked before any
work; a target that needs a support above the family's cap is refused with
the size it would need, and so is a design on Z whose support is above what
``privatize`` samples exactly (``2^22 + 1``, :func:`sparseldp.sampling.sampling_tables`):
no spec is written that ``privatize`` would refuse.  A ``--domain`` too large
for the clipped search (more than ``2^27`` channel entries at its largest
support, ``s = 2(b - a) + 1``) is refused before the search starts.  The
printed ``delta_star`` is rounded up (a rigorous upper bound stays one).  The
output path is checked before the search starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from . import app
from ..core.families import get_family
from ..design.radius import MAX_H_DESIGN
from ._common import Command, check_family, check_output, family_param, fmt, print_json, stdout_console, warn

__all__ = ["design_command"]


def _print_table(d, output: Path | None, header: str) -> None:
    from rich.table import Table

    from .._format import format_upper

    m = d.mechanism
    table = Table(show_header=False)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_column("meaning", style="dim")
    name, value = d.parameter
    table.add_row(name, fmt(value, 10), get_family(d.family).meaning)
    table.add_row("s", str(d.s), f"support size (radius t = {m.t})")
    table.add_row("eps", fmt(d.eps, 10), "target")
    table.add_row("delta", fmt(d.delta, 10), "target")
    table.add_row("H", str(d.H), "privacy range")
    table.add_row("delta_star", format_upper(d.delta_star, 10), f"max of delta_h, 1 <= h <= {d.H}; rounded up")
    table.add_row("R1", fmt(d.r1, 10), "E|Y - x|")
    table.add_row("R2", fmt(d.r2, 10), "E(Y - x)^2")
    console = stdout_console()
    console.print(header)
    console.print(table)
    if output is not None:
        console.print(f"mechanism spec written to {output}")


def _check_sampler_support(d) -> None:
    """Refuse a design on Z whose support ``privatize`` cannot sample (rather than write an unusable spec).

    ``privatize`` samples a mechanism on Z exactly from one integer count per offset, for supports up to
    :data:`sparseldp.sampling.quantize._MAX_S` (``2^22 + 1``); a larger design is refused here with the
    size it would need.  (A design on a ``--domain`` is sampled as a channel, whose size is checked there.)
    """
    from ..sampling.quantize import _MAX_S

    if d.s > _MAX_S:
        raise ValueError(
            f"the design needs s = {d.s} ({d.parameter[0]} = {d.parameter[1]:.6g}), above the largest support "
            f"privatize's exact sampler accepts, s <= 2^22 + 1 = {_MAX_S}: such a spec could not be used; "
            "relax the target (a larger eps or delta, a smaller H) or design on a finite --domain lo:hi")


def _save(d, output: Path):
    from ..spec import save_spec, spec_from_mechanism

    spec = spec_from_mechanism(d.mechanism, domain=d.domain, window=d.window or "extended", eps=d.eps,
                               delta=d.delta, H=d.H, delta_star=d.delta_star, r1=d.r1, r2=d.r2)
    check_output(output)
    try:
        save_spec(spec, output)  # temporary file + rename
    except OSError as exc:
        raise ValueError(f"cannot write {str(output)!r}: {exc.strerror or exc}") from None
    return spec


def _warn_if_the_sampler_misses(spec, delta: float) -> None:
    """Warn when the sampler that ``privatize`` uses (probabilities in multiples of 2^-64) is certified above
    the target: the design meets ``delta`` as a mechanism, the drawn distribution does not (privatize says
    so too)."""
    from .._format import format_upper
    from .privatize import applied_guarantee, sampler_above_target

    g = applied_guarantee(spec)
    if sampler_above_target(g, delta):
        warn(f"privatize's sampler draws this mechanism with delta <= {format_upper(g.delta)}, above the target "
             f"{delta:g}: its probabilities are multiples of 2^-64, so targets below about 1e-16 are not met "
             "exactly by what is drawn (the spec is written; privatize states the delta that holds)")


@app.command("design", cls=Command)
def design_command(
    family: Annotated[str, typer.Option("--family", help="Mechanism family: laplace or gaussian.")],
    eps: Annotated[float, typer.Option("--eps", help="Target eps >= 0.")],
    delta: Annotated[float, typer.Option("--delta", help="Target delta in [0, 1].")],
    H: Annotated[int, typer.Option("--H", "--range", help=f"Privacy range: separations 1..H are protected "
                                                          f"(H <= {MAX_H_DESIGN:,}).")],
    lam: Annotated[Optional[float], typer.Option("--lam", help="Fix lam (laplace): only s is chosen.")] = None,
    sigma: Annotated[Optional[float], typer.Option("--sigma", help="Fix sigma (gaussian): only s is chosen.")] = None,
    objective: Annotated[str, typer.Option("--objective", help="Distortion to minimize: r1 or r2.")] = "r2",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Write a mechanism spec (JSON) here.")] = None,
    domain: Annotated[Optional[str], typer.Option(
        "--domain", help="Finite input domain lo:hi; accounted exactly over its pairs (Theorem 2).")] = None,
    window: Annotated[Optional[str], typer.Option(
        "--window", help="With --domain: clipped (outputs stay in lo..hi; the default) or extended.",
        show_default=False)] = None,
) -> None:
    """Smallest support meeting (eps, delta) on range H, and the best lam/sigma when none is given."""
    from .._validation import check_int, check_nonnegative, check_probability
    from ..design.radius import design

    family = check_family(family)
    _, param = family_param(family, lam=lam, sigma=sigma, required=False)  # wrong-family option -> one clear line
    objective = objective.strip().lower()
    if objective not in ("r1", "r2"):
        raise ValueError(f"objective must be 'r1' or 'r2'; got {objective!r}")
    eps = check_nonnegative(eps, "eps")
    delta = check_probability(delta, "delta")
    H = check_int(H, "H", minimum=1)
    if H > MAX_H_DESIGN:  # before any work: the search and its certificate grow with H
        raise ValueError(f"H must be an integer in [1, {MAX_H_DESIGN}] (the designers' cap MAX_H_DESIGN); got {H}")
    if window is not None:
        window = window.strip().lower()
        if window not in ("clipped", "extended"):
            raise ValueError(f"--window must be 'clipped' or 'extended'; got {window!r}")
        if domain is None:
            raise ValueError(f"--window {window} applies only with --domain lo:hi (on Z every window is the "
                             "whole s-point window)")
    if delta == 0.0 and domain is None:
        raise ValueError(
            "delta = 0 (pure LDP) is impossible for a sparse mechanism on Z: by Theorem 1 pure LDP forces every "
            "support to be the same set, and a window that moves with the input is not; use delta > 0, or "
            "--domain lo:hi where windows can cover the whole domain, or k-RR (`sparseldp compare`)")
    if output is not None:
        check_output(output)  # before the search, which can take seconds
    if delta >= 1.0 and output is not None:  # the design is the identity, and a spec of it would be refused
        raise ValueError("delta = 1 certifies nothing: every mechanism meets it, and the design is the identity "
                         "(s = 1), which publishes the raw value; no spec is written (use delta < 1)")
    if delta >= 1.0:
        warn("delta = 1 certifies nothing: every mechanism meets it, including the identity (s = 1), which "
             "publishes the raw value")
    if domain is not None:
        from ..design.finite import design_finite
        from ._common import parse_domain

        d = design_finite(family, eps=eps, delta=delta, H=H, domain=parse_domain(domain),
                          window=window or "clipped", objective=objective, param=param)
    else:
        d = design(family, eps=eps, delta=delta, H=H, objective=objective, param=param)
        _check_sampler_support(d)
    if output is not None:
        _warn_if_the_sampler_misses(_save(d, output), delta)
    if as_json:
        print_json(d.to_dict())
    else:
        chosen = "s" if param is not None else f"s and {d.parameter[0]}"
        header = (f"Sparse {d.family}: {chosen} chosen"
                  + ("" if chosen == "s" else f" to minimize {objective.upper()}")
                  + " subject to delta_star <= delta")
        if d.domain is not None:
            header += (f" on the domain {d.domain[0]}..{d.domain[1]} ({d.window} windows, exact Theorem 2 "
                       "accounting)")
        _print_table(d, output, header)
