"""Numbers as text that still err the way they claim: bounds rounded outwards.

``f"{x:.4g}"`` rounds to nearest, so a printed upper bound can fall below the
number it stands for (``1.0000000001932833e-06`` printed as ``1e-06``).
:func:`format_upper` and :func:`format_lower` round toward the bound's side.
Light on purpose (the command line imports it at start-up).
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

__all__ = ["format_upper", "format_lower"]


def _format_directed(x, digits: int, rounding: str) -> str:
    """``x`` to ``digits`` significant digits as ``:g`` prints it, rounded in the direction ``rounding``."""
    x = float(x)
    if x == 0.0 or not math.isfinite(x):
        return f"{x:.{digits}g}"
    exact = Decimal(x)  # the double's exact value
    q = exact.quantize(Decimal(1).scaleb(exact.adjusted() - digits + 1), rounding=rounding)
    # q has ``digits`` significant digits (one more zero when the rounding carried, 9.9996 -> 10.000): the
    # double nearest q prints as q's digits, except where the doubles are sparser than that (subnormals)
    text = f"{float(q):.{digits}g}"
    shown = Decimal(text) if "inf" not in text else None
    if shown is None or (shown < exact if rounding == ROUND_CEILING else shown > exact):
        text = f"{q:e}"  # the decimal itself
    return text


def format_upper(x, digits: int = 4) -> str:
    """An upper bound as text: ``digits`` significant digits rounded *up* (toward +inf), so that the printed
    number is still an upper bound (``1.0000000001932833e-06`` -> ``1.001e-06``; a value exact in
    ``digits`` digits is printed as is: ``0.5`` -> ``0.5``, ``1.0`` -> ``1``)."""
    return _format_directed(x, digits, ROUND_CEILING)


def format_lower(x, digits: int = 4) -> str:
    """A lower bound as text: ``digits`` significant digits rounded *down* (toward -inf) (:func:`format_upper`)."""
    return _format_directed(x, digits, ROUND_FLOOR)
