"""The ``sparseldp`` command line (typer + rich).

Each command lives in its own module below this package and registers itself
on :data:`app`.  :func:`main` is the console entry point: any ``TypeError`` or
``ValueError`` raised by the library (bad parameters, infeasible targets,
malformed files) becomes one line on stderr and exit status 2.
"""

from __future__ import annotations

import importlib
import sys

import typer

app = typer.Typer(
    name="sparseldp",
    help="Sparse local differential privacy: exact accounting, design, privatization and estimation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Command modules, each registering its commands on ``app`` when imported.
COMMAND_MODULES = ["account", "design", "reproduce", "privatize", "estimate", "compare"]

for _name in COMMAND_MODULES:
    importlib.import_module(f"{__name__}.{_name}")


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit status."""
    try:
        app(args=argv, standalone_mode=False)
    except (ValueError, TypeError) as exc:
        msg = " ".join(str(exc).split())
        typer.echo(f"error: {msg}", err=True)
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:  # pragma: no cover - typer internals
        return int(exc.code or 0)
    except typer.exceptions.Abort:
        typer.echo("error: aborted", err=True)
        return 2
    except typer.exceptions.TyperException as exc:  # usage errors (typer's bundled click)
        text = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        text = " ".join(text.split()) or "no command given; run 'sparseldp --help' for the commands"
        typer.echo(f"error: {text}", err=True)
        return 2
    return 0


def _entry() -> None:  # pragma: no cover
    sys.exit(main())
