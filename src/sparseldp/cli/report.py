r"""``sparseldp report``: one self-contained HTML page a privacy reviewer can read.

``sparseldp report --mechanism mech.json -o report.html`` writes the page of
:func:`sparseldp.report.build_report` for the spec: the mechanism and its
target, the guarantee (profile, per-separation split, smallest eps for the
target delta, pure-LDP status), the realized sampler's certificate,
composition over ``--reports k`` reports of one person, utility (``R1``,
``R2``, one input's output distribution, expected estimation errors for
``--n`` people) and how each number was obtained.  The page has inline SVG
plots, no script and no external resource: it opens offline.

* ``--domain lo:hi``: the data's domain for the utility section (frequency
  errors need one) when the spec has no domain; a spec's own domain is used
  as it is, and a different ``--domain`` is an error.
* ``--eps`` / ``--H``: evaluate another target than the one recorded (or the
  target of a spec that records none).
* The spec is loaded and its recorded claims checked first; a spec whose
  claims do not hold is refused.  ``-o`` must not name the spec itself.
* The page is written atomically (temporary file, then rename): on any error
  no file is left behind.  ``-o -`` writes it to standard output.
* Mistakes: one line on stderr, exit status 2.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from . import app
from ._common import Command, atomic_write_text, check_distinct_paths, check_output, is_stdio, parse_domain

__all__ = ["report_command"]


@app.command("report", cls=Command)
def report_command(
    mechanism: Annotated[Path, typer.Option("--mechanism", "--spec", "-m", help="Mechanism spec (JSON), e.g. from "
                                            "`sparseldp design -o`.", show_default=False)],
    output: Annotated[Path, typer.Option("-o", "--output", help="The HTML page to write, or - for stdout.",
                                         show_default=False)],
    domain: Annotated[Optional[str], typer.Option(
        "--domain", help="The data's domain lo:hi for the utility section (a spec's own domain is used as is).",
        show_default=False)] = None,
    reports: Annotated[int, typer.Option("--reports", "-k", help="Reports of one person to compose "
                                         "(1..10000).")] = 10,
    n: Annotated[int, typer.Option("--n", help="Number of people, for the expected estimation errors.")] = 10_000,
    eps: Annotated[Optional[float], typer.Option("--eps", help="Target eps (default: the spec's).",
                                                 show_default=False)] = None,
    H: Annotated[Optional[int], typer.Option("--H", "--range", help="Privacy range H (default: the spec's).",
                                             show_default=False)] = None,
) -> None:
    """Write a self-contained HTML privacy report of a mechanism spec (guarantee, sampler, composition, utility)."""
    from .._validation import check_int
    from ..report import MAX_N, MAX_REPORTS, build_report
    from ..spec import load_spec

    check_int(reports, "--reports", minimum=1, maximum=MAX_REPORTS)
    check_int(n, "--n", minimum=1, maximum=MAX_N)
    check_distinct_paths({"--mechanism": mechanism}, {"-o": output})
    check_output(output)
    lohi = None if domain is None else parse_domain(domain)
    spec = load_spec(mechanism)  # a spec whose recorded claims do not hold is refused here
    if lohi is not None and spec.domain is not None and tuple(lohi) != tuple(spec.domain):
        raise ValueError(f"--domain {lohi[0]}:{lohi[1]} differs from the spec's own domain "
                         f"{spec.domain[0]}:{spec.domain[1]}, where its mechanism is defined; omit --domain")
    if spec.guarantee is None and (eps is None or H is None):
        raise ValueError(f"the spec {str(mechanism)!r} records no target (eps, H): give --eps and --H")
    digest = hashlib.sha256(Path(mechanism).read_bytes()).hexdigest()
    html = build_report(spec, eps=eps, H=H, domain=lohi, reports=reports, n=n,
                        source=f"{mechanism.name} (sha256 {digest[:16]})")
    if is_stdio(output):
        sys.stdout.write(html)
        sys.stdout.flush()
        return
    atomic_write_text(output, html)
    typer.echo(f"report written to {output} ({len(html.encode('utf-8')) / 1024:.0f} KB)", err=True)
