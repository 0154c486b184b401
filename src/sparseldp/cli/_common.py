"""Helpers shared by the CLI commands.

* :class:`Command`: the typer command class every command here registers with;
  it turns a usage error found while parsing options (missing option, value
  that is not a number, unknown option) into a ``ValueError`` so that
  :func:`sparseldp.cli.main` prints it as one line on stderr and exits 2, like
  any other bad parameter.
* Family and parameter parsing: :func:`check_family`, :func:`family_param`,
  :func:`build_mechanism`.
* Output: :func:`print_json` (plain JSON on stdout, nothing else),
  :func:`stdout_console` (rich), :func:`fmt` (numbers in tables),
  :func:`stage` (what a long command is doing, on a terminal only).
* Files: :func:`atomic_write_bytes`, :func:`atomic_write_text` (temporary file
  in the target directory, then ``os.replace``; no partial file is ever left
  behind) and :func:`ensure_directory`.
"""

from __future__ import annotations

import json
import math
import numbers
import re
import sys
from pathlib import Path

import numpy as np
from typer.core import TyperCommand
from typer.exceptions import TyperException

from .._files import atomic_write, atomic_write_all, check_output_path, ensure_directory, same_file  # noqa: F401
from .._validation import check_positive, one_of
from ..core.families import family_names, get_family

__all__ = [
    "MAX_H_ACCOUNT",
    "MAX_H_SUMMARY",
    "MAX_H_DESIGN",
    "STDIO",
    "check_distinct_paths",
    "check_output",
    "is_stdio",
    "one_of",
    "stage",
    "guarantee_text",
    "warn",
    "FAMILIES",
    "Command",
    "check_family",
    "family_param",
    "build_mechanism",
    "print_json",
    "to_jsonable",
    "stdout_console",
    "fmt",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_all",
    "ensure_directory",
]

FAMILIES = family_names()

#: Largest privacy range ``account`` lists (every h = 1..H is a row of its output: about 70 bytes
#: of JSON per row, so at most about 70 MB, written in about 3 s).  ``account --summary`` prints
#: no rows and takes any ``H`` up to :data:`MAX_H_SUMMARY`.
MAX_H_ACCOUNT = 1_000_000
#: Largest privacy range ``account --summary`` takes: ``delta_star`` costs O(1) whatever ``H`` (the
#: worst separation is ``min(H, 2t + 1)``, :mod:`sparseldp.core.accounting`), so the cap is only int64.
MAX_H_SUMMARY = (1 << 63) - 1
#: Largest privacy range ``design`` searches (each candidate costs O(H); the support is >= 2H + 1).
MAX_H_DESIGN = 10_000
#: The path that means standard input / standard output.
STDIO = "-"


def is_stdio(path) -> bool:
    """True for ``-`` (standard input or output)."""
    return path is not None and str(path) == STDIO


def warn(text: str) -> None:
    """One ``warning:`` line on stderr."""
    sys.stderr.write("warning: " + " ".join(str(text).split()) + "\n")


def stderr_progress(columns):
    """A transient rich ``Progress`` with ``columns`` (a function of the ``rich.progress`` module) on
    stderr, or ``None`` when stderr is not a terminal (piped or redirected: nothing is drawn, so logs
    and the one-line error contract are unchanged)."""
    if not sys.stderr.isatty():
        return None
    import rich.progress
    from rich.console import Console

    return rich.progress.Progress(*columns(rich.progress), console=Console(file=sys.stderr), transient=True)


def stage(text: str):
    """A context showing ``text`` with a spinner and the time elapsed, on stderr, while it runs.

    Only when stderr is a terminal (:func:`stderr_progress`); the line is erased when the stage
    ends.  Otherwise a context that does nothing.
    """
    import contextlib

    progress = stderr_progress(lambda rp: (rp.SpinnerColumn(), rp.TextColumn("{task.description}"),
                                           rp.TimeElapsedColumn()))
    if progress is None:
        return contextlib.nullcontext()
    progress.add_task(text, total=None)
    return progress


def check_distinct_paths(reads: dict, writes: dict) -> None:
    """Refuse an output that is one of the command's inputs or another of its outputs.

    ``reads`` and ``writes`` map a label (``"--mechanism"``, ``"-o"``) to a
    path or ``None``; ``-`` (standard input/output) is never a file, and at most one
    input may be ``-``.  Checked before any work, through links (``os.path.samefile``).
    """
    stdin = [k for k, v in reads.items() if v is not None and is_stdio(v)]
    if len(stdin) > 1:
        raise ValueError(f"{' and '.join(stdin)} both read standard input ('-'); give all but one as a file")
    reads = {k: Path(v) for k, v in reads.items() if v is not None and not is_stdio(v)}
    writes = {k: Path(v) for k, v in writes.items() if v is not None and not is_stdio(v)}
    for wlabel, wpath in writes.items():
        for rlabel, rpath in reads.items():
            if same_file(wpath, rpath):
                raise ValueError(f"{wlabel} {str(wpath)!r} is the file read by {rlabel}; refusing to overwrite "
                                 "an input: write the output elsewhere")
    labels = list(writes)
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            if same_file(writes[a], writes[b]):
                raise ValueError(f"{a} and {b} name the same file {str(writes[a])!r}; give each output its own path")


def check_output(path, what: str = "output") -> None:
    """An output file that can be written: its directory exists and it is not a directory (``-`` passes)."""
    if path is None or is_stdio(path):
        return
    check_output_path(path, what)


def guarantee_text(g) -> str:
    """The guarantee in words, saying what it bounds."""
    if g is None:
        return "no guarantee recorded in the spec"
    src = "the realized sampler, certified" if g.source == "sampler" else "the mechanism, recomputed"
    return f"{g.describe()} ({src}; delta is a rigorous upper bound)"


class Command(TyperCommand):
    """Typer command whose option-parsing errors surface as ``ValueError``.

    Click reports a missing option or an unparsable value as a ``UsageError``
    and, outside standalone mode, would print a multi-line usage block.  The
    project's contract is one line on stderr and exit status 2 for every bad
    parameter, which :func:`sparseldp.cli.main` implements for ``ValueError``;
    converting here keeps that contract independent of the click version.
    ``--help`` (an ``Exit``, not a usage error) passes through untouched.

    An option that takes one value and is given twice (``--eps 1 --eps 2``,
    ``-o a -o b``) is an error: click would silently keep the last one, and a
    user who repeats an option expects both to count.  Options that accept
    several values (``-c a -c b``) declare it and are exempt.

    Numbers are read strictly (:func:`_check_numbers`): ``--eps 1_0`` is refused, not read as 10.
    """

    def parse_args(self, ctx, args):
        _refuse_repeats(self, args)
        _check_numbers(self, args)
        try:
            return super().parse_args(ctx, args)
        except TyperException as exc:  # click's UsageError / BadParameter / MissingParameter
            raise ValueError(" ".join(exc.format_message().split())) from None


def _refuse_repeats(command, args) -> None:
    """``ValueError`` naming an option given more than once (options declared ``multiple`` excepted)."""
    seen: dict[str, str] = {}
    for name, param, takes_value, _ in _given_options(command, args):
        if getattr(param, "multiple", False) or not takes_value:
            continue  # a repeated flag (--json --json) means what it says
        if param.name in seen:
            first = seen[param.name]
            same = first if first == name else f"{first} / {name}"
            raise ValueError(f"option {same} is given more than once; give it once")
        seen[param.name] = name


def _given_options(command, args):
    """``(option string, param, takes a value, value token or None)`` for each of the command's options in
    ``args`` (unknown options are click's to report)."""
    by_name = {}  # option string -> (param, takes_value)
    for param in command.params:
        if getattr(param, "param_type_name", "") != "option":
            continue
        takes_value = not getattr(param, "is_flag", False) and not getattr(param, "count", False)
        for opt in list(getattr(param, "opts", ())) + list(getattr(param, "secondary_opts", ())):
            by_name[opt] = (param, takes_value)
    args = list(args)
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token == "--":
            break
        if not token.startswith("-") or token == "-":
            continue
        if token.startswith("--"):
            name, value = token.split("=", 1) if "=" in token else (token, None)
        else:
            name, value = token[:2], (token[2:] or None)
        entry = by_name.get(name)
        if entry is None:
            continue
        param, takes_value = entry
        if takes_value and value is None and i < len(args):
            value, i = args[i], i + 1  # this option's value, whatever it looks like ("-o -", "--eps -1")
        yield name, param, takes_value, value


# Plain decimal numbers only: Python's float() and int() also take "1_0" (ten) and surrounding blanks, so a
# typo could silently weaken a privacy parameter.  inf and nan pass to the command's own range check.
_REAL = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)", re.IGNORECASE)
_INT = re.compile(r"[+-]?\d+")


def _number_kind(param) -> str | None:
    """``"real"``, ``"integer"`` or ``None`` (not a number) for a command option."""
    desc = getattr(param, "type_descriptor", None)  # typer >= 0.2x: the annotation, Optional unwrapped
    kind = getattr(desc, "annotation", None)
    if kind is None:  # typer on click: the click type
        kind = {"float": float, "integer": int}.get(getattr(getattr(param, "type", None), "name", None))
    return "real" if kind is float else "integer" if kind is int else None


def _check_numbers(command, args) -> None:
    """``ValueError`` naming a numeric option whose value is not a plain decimal number: the option, what it
    takes (its help text) and the value given."""
    for name, param, takes_value, value in _given_options(command, args):
        kind = _number_kind(param)
        if not takes_value or value is None or kind is None or (_REAL if kind == "real" else _INT).fullmatch(value):
            continue
        what = "a real number" if kind == "real" else "an integer"
        help_text = " ".join(str(getattr(param, "help", "") or "").split()).rstrip(".")
        if help_text[:2].istitle():  # "Target eps >= 0" -> "target eps >= 0"; "H <= ..." stays
            help_text = help_text[0].lower() + help_text[1:]
        raise ValueError(f"{name} must be {what}" + (f" ({help_text})" if help_text else "") + f"; got {value!r}")


# -- families and parameters -----------------------------------------------------


def check_family(family) -> str:
    """A registered family name (case-insensitive, :mod:`sparseldp.core.families`); ``ValueError`` otherwise."""
    if not isinstance(family, str):
        raise ValueError(f"--family must be one of {', '.join(FAMILIES)}; got {family!r}")
    return get_family(family).name


def family_param(family: str, *, lam=None, sigma=None, required: bool = True) -> tuple[str, float | None]:
    """The family's parameter ``(name, value)`` from the ``--lam`` / ``--sigma`` options.

    Only the family's own parameter option may be given (its name comes from
    the registry); giving another family's is an error, and so is omitting the
    right one when ``required``.  The value is validated (finite and > 0).
    """
    fam = get_family(family)
    given = {"lam": lam, "sigma": sigma}
    for other, value in given.items():
        if other != fam.param and value is not None:
            raise ValueError(f"--{other} does not apply to the {fam.name} family (it takes --{fam.param})")
    value = given.get(fam.param)
    if value is None:
        if required:
            raise ValueError(f"the {fam.name} family needs --{fam.param} (a real number > 0 and finite)")
        return fam.param, None
    return fam.param, check_positive(value, fam.param)


def build_mechanism(family: str, *, s, lam=None, sigma=None):
    """The family's mechanism on Z from the options (``SparseLaplace(lam=, s=)``, ...)."""
    _, value = family_param(family, lam=lam, sigma=sigma, required=True)
    return get_family(family).make(value, s)


# -- output -----------------------------------------------------------------------


def to_jsonable(value):
    """Numpy scalars/arrays to plain Python; refuses NaN (never valid output here)."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        v = float(value)
        if math.isnan(v):
            raise ValueError("internal error: a NaN reached JSON output")
        return v
    return value


def print_json(obj) -> None:
    """Write ``obj`` as one JSON document on stdout (nothing else)."""
    sys.stdout.write(json.dumps(to_jsonable(obj), allow_nan=False) + "\n")
    sys.stdout.flush()


def stdout_console():
    """A rich console on the current ``sys.stdout`` (so captured output works)."""
    from rich.console import Console

    return Console(file=sys.stdout, highlight=False, soft_wrap=False)


def fmt(x, digits: int = 6) -> str:
    """A number for a table: ``digits`` significant digits, exact 0 and 1 kept short."""
    x = float(x)
    if x == 0.0:
        return "0"
    if x == 1.0:
        return "1"
    return f"{x:.{digits}g}"


# -- files ------------------------------------------------------------------------


def atomic_write_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`sparseldp._files.atomic_write`)."""
    return atomic_write(path, data)


def atomic_write_text(path, text: str) -> Path:
    """:func:`atomic_write_bytes` for UTF-8 text."""
    return atomic_write(path, text.encode("utf-8"))


def parse_domain(text: str, name: str = "--domain") -> tuple[int, int]:
    """``"lo:hi"`` -> ``(lo, hi)`` with integers ``lo <= hi`` (negative values allowed: ``-5:5``)."""
    msg = f"{name} must be lo:hi with integers lo <= hi (e.g. 0:99); got {text!r}"
    if not isinstance(text, str) or text.count(":") != 1:
        raise ValueError(msg)
    lo_s, hi_s = (part.strip() for part in text.split(":"))
    try:
        lo, hi = int(lo_s), int(hi_s)
    except ValueError:
        raise ValueError(msg) from None
    if hi < lo:
        raise ValueError(msg)
    return lo, hi
