"""Helpers shared by the CLI commands.

* :class:`Command`: the typer command class every command here registers with;
  it turns a usage error found while parsing options (missing option, value
  that is not a number, unknown option) into a ``ValueError`` so that
  :func:`sparseldp.cli.main` prints it as one line on stderr and exits 2, like
  any other bad parameter.
* Family and parameter parsing: :func:`check_family`, :func:`family_param`,
  :func:`build_mechanism`.
* Output: :func:`print_json` (plain JSON on stdout, nothing else),
  :func:`stdout_console` (rich), :func:`fmt` (numbers in tables).
* Files: :func:`atomic_write_bytes`, :func:`atomic_write_text` (temporary file
  in the target directory, then ``os.replace``; no partial file is ever left
  behind) and :func:`ensure_directory`.
"""

from __future__ import annotations

import json
import math
import numbers
import sys
from pathlib import Path

import numpy as np
from typer.core import TyperCommand
from typer.exceptions import TyperException

from .._files import atomic_write, atomic_write_all, ensure_directory  # noqa: F401 (re-exported)
from .._validation import check_positive

__all__ = [
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

FAMILIES = ("laplace", "gaussian")
_PARAM = {"laplace": "lam", "gaussian": "sigma"}


class Command(TyperCommand):
    """Typer command whose option-parsing errors surface as ``ValueError``.

    Click reports a missing option or an unparsable value as a ``UsageError``
    and, outside standalone mode, would print a multi-line usage block.  The
    project's contract is one line on stderr and exit status 2 for every bad
    parameter, which :func:`sparseldp.cli.main` implements for ``ValueError``;
    converting here keeps that contract independent of the click version.
    ``--help`` (an ``Exit``, not a usage error) passes through untouched.
    """

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except TyperException as exc:  # click's UsageError / BadParameter / MissingParameter
            raise ValueError(" ".join(exc.format_message().split())) from None


# -- families and parameters -----------------------------------------------------


def check_family(family) -> str:
    """``'laplace'`` or ``'gaussian'`` (case-insensitive); ``ValueError`` otherwise."""
    if not isinstance(family, str) or family.strip().lower() not in FAMILIES:
        raise ValueError(f"family must be 'laplace' or 'gaussian'; got {family!r}")
    return family.strip().lower()


def family_param(family: str, *, lam=None, sigma=None, required: bool = True) -> tuple[str, float | None]:
    """The family's parameter ``("lam", value)`` or ``("sigma", value)``.

    ``--lam`` belongs to the Laplace family and ``--sigma`` to the Gaussian
    family; giving the other one is an error, and so is omitting the right one
    when ``required``.  The value is validated (finite and > 0).
    """
    family = check_family(family)
    name = _PARAM[family]
    other = "sigma" if name == "lam" else "lam"
    given = {"lam": lam, "sigma": sigma}
    if given[other] is not None:
        raise ValueError(f"--{other} does not apply to the {family} family (it takes --{name})")
    value = given[name]
    if value is None:
        if required:
            raise ValueError(f"the {family} family needs --{name} (a real number > 0 and finite)")
        return name, None
    return name, check_positive(value, name)


def build_mechanism(family: str, *, s, lam=None, sigma=None):
    """The mechanism on Z: ``SparseLaplace(lam=, s=)`` or ``SparseGaussian(sigma=, s=)``."""
    from ..mechanisms import SparseGaussian, SparseLaplace

    name, value = family_param(family, lam=lam, sigma=sigma, required=True)
    if name == "lam":
        return SparseLaplace(lam=value, s=s)
    return SparseGaussian(sigma=value, s=s)


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
