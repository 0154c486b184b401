"""The ``sparseldp`` command line (typer + rich).

Each command lives in its own module below this package and registers itself
on :data:`app`.  :func:`main` is the console entry point and keeps the CLI
contract for every command:

* success: exit status 0;
* a mistake of the user's (bad option, bad file, infeasible target, a spec
  whose recorded guarantee does not hold, a missing optional package): one
  line on stderr starting with ``error:``, exit status 2, and no output file
  left behind (every file is written to a temporary file and renamed);
* ``SIGINT`` / ``SIGTERM``: temporary files are removed, one line on stderr,
  exit status 130 / 143;
* anything else is a bug: one line starting with ``internal error:`` and exit
  status 70 (``SPARSELDP_DEBUG=1`` shows the traceback).

Each command imports the library modules it uses inside its function: that
keeps ``sparseldp --help`` and ``--version`` from loading scipy, pyarrow and
matplotlib (a startup cost paid only by the command that needs them).  These,
the optional dependencies and :mod:`sparseldp._entry` (which must run without
the ``cli`` extra) are the package's only function-level imports.
"""

from __future__ import annotations

import errno
import importlib
import os
import signal
import sys
import threading
from typing import Annotated

import typer

from .. import __version__
from .._files import remove_live_temps

#: ``-h`` works like ``--help`` everywhere (subcommands inherit it from the root context).
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name="sparseldp",
    help="Sparse local differential privacy: exact accounting, design, privatization and estimation.",
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings=CONTEXT_SETTINGS,
)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", "-V", help="Print the version and exit.",
                                          is_eager=True)] = False,
) -> None:
    """Sparse local differential privacy: exact accounting, design, privatization and estimation."""
    if version:
        typer.echo(f"sparseldp {__version__}")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:  # bare `sparseldp`: the help, as `--help` gives it
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


# Command modules, each registering its commands on ``app`` when imported.
COMMAND_MODULES = ["account", "design", "reproduce", "privatize", "estimate", "compare", "report"]

for _name in COMMAND_MODULES:
    importlib.import_module(f"{__name__}.{_name}")

#: Packages of the ``cli`` extra that commands import when they need them.
_OPTIONAL = {"pyarrow", "matplotlib", "mpmath", "rich", "dp_accounting", "typer"}


class Interrupted(BaseException):
    """Raised by the CLI's signal handler: unwinds ``finally`` blocks (temporary files) like Ctrl-C."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


# Signals received in this run: a signal raised inside a library's own I/O (py4j's socket read, under
# --engine spark) can come back as that library's error instead of Interrupted; the run still ends as
# interrupted.
_SIGNALLED: list[int] = []


def _on_signal(signum, frame):  # pragma: no cover - exercised in a subprocess test
    # Further signals would interrupt the clean-up this exception triggers: ignore them from now on.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    _SIGNALLED.append(signum)
    raise Interrupted(signum)


def _interrupted(signum: int) -> int:
    remove_live_temps()
    return _error(f"interrupted by {signal.Signals(signum).name}; no output file was written", 128 + signum)


def _one_line(text) -> str:
    return " ".join(str(text).split())


def _error(text: str, status: int = 2) -> int:
    try:
        sys.stderr.write(f"error: {_one_line(text)}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # pragma: no cover - stderr closed
        pass
    return status


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit status (see the module docstring)."""
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            handlers[sig] = signal.signal(sig, _on_signal)
    try:
        return _run(argv)
    finally:
        for sig, old in handlers.items():
            signal.signal(sig, old)


def _run(argv) -> int:
    _SIGNALLED.clear()
    try:
        result = app(args=argv, standalone_mode=False)
        return result if isinstance(result, int) and not isinstance(result, bool) else 0
    except Interrupted as exc:
        return _interrupted(exc.signum)
    except KeyboardInterrupt:  # a KeyboardInterrupt raised before our handler was installed
        remove_live_temps()
        return _error("interrupted by SIGINT; no output file was written", 130)
    except (ValueError, TypeError) as exc:
        if _SIGNALLED:  # the signal surfaced as a library's error (module comment of _SIGNALLED)
            return _interrupted(_SIGNALLED[0])
        return _error(exc)
    except typer.Exit as exc:
        return exc.exit_code
    except typer.exceptions.Abort:
        return _error("aborted")
    except typer.exceptions.TyperException as exc:  # usage errors (typer's bundled click)
        text = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        return _error(_one_line(text) or "bad command line; run 'sparseldp --help' for the commands")
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top in _OPTIONAL:
            return _error(f"this command needs the Python package {top!r}, which is not installed; "
                          "install the command-line extra: pip install 'sparseldp[cli]'")
        return _internal(exc)
    except MemoryError:
        return _error("out of memory; use a smaller input or parameter (see the limits in `sparseldp "
                      "<command> --help`)")
    except RecursionError:
        return _error("input nested too deeply to process")
    except BrokenPipeError:
        # the reader of our stdout went away (e.g. `| head`): stop quietly, as POSIX tools do
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # pragma: no cover
            pass
        return 128 + signal.SIGPIPE
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            return _error("no space left on device" + (f": {exc.filename}" if exc.filename else
                                                       " (writing the output)"))
        return _error(f"{exc.strerror or exc}{': ' + str(exc.filename) if exc.filename else ''}")
    except SystemExit as exc:  # pragma: no cover - typer internals
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except Exception as exc:  # noqa: BLE001 - the last resort of the contract: a bug, said in one line
        if _SIGNALLED:  # e.g. py4j's "SparkSession does not exist in the JVM" after SIGTERM
            return _interrupted(_SIGNALLED[0])
        return _internal(exc)


def _internal(exc: BaseException) -> int:
    """A bug: one line (``internal error: ...``), exit status 70; the traceback on request."""
    if os.environ.get("SPARSELDP_DEBUG"):
        import traceback

        traceback.print_exception(exc)
    try:
        sys.stderr.write(f"internal error: {_one_line(f'{type(exc).__name__}: {exc}')} (please report it; "
                         "SPARSELDP_DEBUG=1 shows the traceback)\n")
    except (OSError, ValueError):  # pragma: no cover
        pass
    return 70


def _entry() -> None:  # pragma: no cover
    sys.exit(main())
