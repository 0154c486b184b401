"""Parameter checks shared by every public entry point.

Every check raises ``TypeError`` for a wrong type and ``ValueError`` for a wrong
value, naming the parameter, the allowed range and the value given
(``s must be an odd integer >= 1; got 4``).  ``numbers.Integral`` and numpy
integers are accepted alike; ``bool`` is rejected where a number is meant.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "check_odd_s",
    "check_positive",
    "check_nonnegative",
    "check_int",
    "check_probability",
    "check_int_array",
    "check_eps_array",
]


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def check_int(value, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as a Python int, or raise naming ``name`` and the range."""
    rng = _range_text(minimum, maximum)
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        if isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
            raise TypeError(f"{name} must be an integer{rng}; got float {value!r}")
        raise TypeError(f"{name} must be an integer{rng}; got {type(value).__name__} {value!r}")
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer{rng}; got {value}")
    return value


def _range_text(minimum, maximum) -> str:
    if minimum is not None and maximum is not None:
        return f" in [{minimum}, {maximum}]"
    if minimum is not None:
        return f" >= {minimum}"
    if maximum is not None:
        return f" <= {maximum}"
    return ""


def check_odd_s(value, name: str = "s") -> int:
    """Support size: an odd integer >= 1 (Definitions 6 and 8)."""
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an odd integer >= 1; got {type(value).__name__} {value!r}")
    value = int(value)
    if value < 1 or value % 2 == 0:
        raise ValueError(f"{name} must be an odd integer >= 1; got {value}")
    return value


def _real(value, name: str, allowed: str) -> float:
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number {allowed}; got {type(value).__name__} {value!r}")
    return float(value)


def check_positive(value, name: str) -> float:
    """A finite real number > 0 (``lam``, ``sigma``)."""
    allowed = "> 0 and finite"
    v = _real(value, name, allowed)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a real number {allowed}; got {value!r}")
    return v


def check_nonnegative(value, name: str, *, allow_inf: bool = False) -> float:
    """A real number >= 0 (``eps``); +inf only when ``allow_inf``."""
    allowed = ">= 0" if allow_inf else ">= 0 and finite"
    v = _real(value, name, allowed)
    if math.isnan(v) or v < 0 or (math.isinf(v) and not allow_inf):
        raise ValueError(f"{name} must be a real number {allowed}; got {value!r}")
    return v


def check_probability(value, name: str = "delta", *, open_upper: bool = False) -> float:
    """A real number in [0, 1] (or [0, 1) when ``open_upper``)."""
    allowed = "in [0, 1)" if open_upper else "in [0, 1]"
    v = _real(value, name, allowed)
    if math.isnan(v) or v < 0 or v > 1 or (open_upper and v >= 1):
        raise ValueError(f"{name} must be a real number {allowed}; got {value!r}")
    return v


def check_int_array(value, name: str, *, minimum: int | None = None) -> np.ndarray:
    """An integer scalar or array (no floats, even integral ones)."""
    if _is_bool(value):
        raise TypeError(f"{name} must be an integer or integer array; got bool {value!r}")
    arr = np.asarray(value)
    if arr.dtype == object:
        try:
            arr = np.asarray(value, dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            raise TypeError(f"{name} must be an integer or integer array; got {value!r}") from None
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(
            f"{name} must be an integer or integer array{_range_text(minimum, None)}; "
            f"got dtype {arr.dtype} ({_preview(value)})"
        )
    if minimum is not None and arr.size and arr.min() < minimum:
        bad = arr.min()
        raise ValueError(f"{name} must be an integer{_range_text(minimum, None)}; got {bad}")
    return arr.astype(np.int64, copy=False)


def check_eps_array(value, name: str = "eps") -> np.ndarray:
    """A real scalar or array of values >= 0 and finite."""
    if _is_bool(value):
        raise TypeError(f"{name} must be a real number >= 0 and finite; got bool {value!r}")
    if isinstance(value, numbers.Real):
        return np.asarray(check_nonnegative(value, name), dtype=float)
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number or array >= 0 and finite; got {value!r}") from None
    if arr.size and not (np.all(np.isfinite(arr)) and np.all(arr >= 0)):
        bad = arr[~(np.isfinite(arr) & (arr >= 0))].flat[0]
        raise ValueError(f"{name} must be a real number >= 0 and finite; got {bad!r}")
    return arr


def _preview(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
