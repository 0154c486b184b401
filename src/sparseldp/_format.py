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

#: A value within this relative distance above its short floor is printed with the digits that show it.
_HAIR = 1e-6
#: ... unless it is within this (a double's own rounding): then it is printed as any other value.
_ROUNDING = 1e-15


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
    number is still an upper bound (``9.35781e-14`` -> ``9.358e-14``; a value exact in ``digits`` digits is
    printed as is: ``0.5`` -> ``0.5``, ``1.0`` -> ``1``).

    A value a hair above a round number (a ``digits``-digit floor of at most three significant digits,
    exceeded by a relative :data:`_HAIR` at most and by more than a double's own rounding,
    :data:`_ROUNDING`), such as a sampler's certificate a
    few ``1e-16`` above the target ``1e-6``, gets the digits that show the hair instead of a round-up that
    would look 0.1 % over: ``1.0000000001932833e-06`` -> ``1.0000000002e-06`` (``1.001e-06`` with
    ``digits`` digits)."""
    text = _format_directed(x, digits, ROUND_CEILING)
    x = float(x)
    if x == 0.0 or not math.isfinite(x):
        return text
    exact = Decimal(x)
    floor = Decimal(_format_directed(x, digits, ROUND_FLOOR))
    excess = exact - floor
    short = len(floor.normalize().as_tuple().digits) <= 3  # a round number, such as a target 1e-6 or 2.5e-5
    if short and digits <= 6 and abs(exact) * Decimal(_ROUNDING) < excess <= abs(exact) * Decimal(_HAIR):
        for d in range(digits + 1, 18):
            longer = _format_directed(x, d, ROUND_CEILING)
            if Decimal(longer) - exact <= excess:  # the round-up adds no more than the hair itself
                return longer
    return text


def format_lower(x, digits: int = 4) -> str:
    """A lower bound as text: ``digits`` significant digits rounded *down* (toward -inf) (:func:`format_upper`)."""
    return _format_directed(x, digits, ROUND_FLOOR)
