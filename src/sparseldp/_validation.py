"""Parameter checks shared by every public entry point.

Every check raises ``TypeError`` for a wrong type and ``ValueError`` for a wrong
value, naming the parameter, the allowed range and the value given
(``s must be an odd integer >= 1; got 4``).  ``numbers.Integral`` and numpy
integers are accepted alike; ``bool`` is rejected where a number is meant.
"""

from __future__ import annotations

import math
import sys
import numbers

import numpy as np

__all__ = [
    "INT64_MIN",
    "INT64_MAX",
    "MAX_S",
    "check_odd_s",
    "check_bool",
    "check_real",
    "check_positive",
    "check_nonnegative",
    "check_int",
    "check_probability",
    "check_int_array",
    "check_eps_array",
    "broadcast",
]

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
#: Largest support size accepted anywhere: with t = (s - 1)/2 <= 2^52 every offset the
#: accountant forms (h - t - 1, 2t + 1, window ends) is an integer exactly representable
#: as a double, which the closed-form kernel sums rely on (and int64 has room to spare).
MAX_S = (1 << 53) + 1


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
    """Support size: an odd integer >= 1 (Definitions 6 and 8), at most :data:`MAX_S`."""
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an odd integer >= 1; got {type(value).__name__} {value!r}")
    value = int(value)
    if value < 1 or value % 2 == 0:
        raise ValueError(f"{name} must be an odd integer >= 1; got {value}")
    if value > MAX_S:
        raise ValueError(f"{name} must be an odd integer in [1, 2^53 + 1 = {MAX_S}]; got {value}")
    return value


def check_bool(value, name: str) -> bool:
    """A flag: ``True``/``False`` (or a numpy bool); anything else is a ``TypeError``."""
    if not _is_bool(value):
        raise TypeError(f"{name} must be True or False; got {type(value).__name__} {value!r}")
    return bool(value)


def check_real(value, name: str) -> float:
    """Any finite real number (no bool)."""
    v = _real(value, name, "and finite")
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a real number and finite; got {value!r}")
    return v


def _real(value, name: str, allowed: str) -> float:
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number {allowed}; got {type(value).__name__} {value!r}")
    try:
        return float(value)
    except OverflowError:  # an int or Fraction beyond the doubles: infinite for every check here
        return math.inf if value > 0 else -math.inf


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


def check_probability(value, name: str = "delta", *, open_upper: bool = False, open_lower: bool = False) -> float:
    """A real number in [0, 1] (the ends excluded with ``open_lower`` / ``open_upper``)."""
    allowed = f"in {'(' if open_lower else '['}0, 1{')' if open_upper else ']'}"
    v = _real(value, name, allowed)
    if math.isnan(v) or v < 0 or v > 1 or (open_upper and v >= 1) or (open_lower and v <= 0):
        raise ValueError(f"{name} must be a real number {allowed}; got {value!r}")
    return v


def check_design_delta(value, name: str = "delta") -> float:
    """A target delta for the designers: 0, or a normal double in ``[2.2e-308, 1]`` (a subnormal target has
    no relative precision, and the searches work with ``log delta``)."""
    v = check_probability(value, name)
    if 0.0 < v < sys.float_info.min:
        raise ValueError(f"{name} must be 0 or in [{sys.float_info.min!r}, 1] (a normal double); got {value!r}")
    return v


def _as_array(value, allowed: str, kind) -> np.ndarray:
    """``value`` as an array (``TypeError`` with ``allowed`` for a bool, a string, a ragged list, or an
    object array with an element that is a bool or not an instance of ``kind``)."""
    if _is_bool(value):
        raise TypeError(f"{allowed}; got bool {value!r}")
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{allowed}; got {type(value).__name__} {_preview(value)}")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):  # e.g. a ragged nested list
        raise TypeError(f"{allowed} (a rectangular array); got {_preview(value)}") from None
    if arr.dtype == object:
        for v in arr.reshape(-1):
            if _is_bool(v) or not isinstance(v, kind):
                raise TypeError(f"{allowed}; got element {type(v).__name__} {_preview(v)}")
    return arr


def check_real_array(value, name: str, what: str = "a real number or an array of them") -> np.ndarray:
    """Real numbers as a float array: no bools, strings, dates or other objects (``TypeError``); an
    integer beyond the doubles is ``+-inf``.  NaN and infinities are left to the caller."""
    arr = _as_array(value, f"{name} must be {what}", numbers.Real)
    if arr.dtype == object:
        out = np.empty(arr.size)
        for i, v in enumerate(arr.reshape(-1)):
            try:
                out[i] = float(v)
            except OverflowError:  # an int beyond the doubles
                out[i] = math.inf if v > 0 else -math.inf
        return out.reshape(arr.shape)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be {what}; got dtype {arr.dtype}")
    return arr.astype(float)


def check_int_array(value, name: str, *, minimum: int | None = None) -> np.ndarray:
    """An integer scalar or array as int64 (no floats, even integral ones).

    Values must fit in int64 (``ValueError`` naming the range otherwise, never
    a silent wrap-around); an empty sequence (``[]``) is an empty int64 array.
    """
    allowed = f"{name} must be an integer or integer array{_range_text(minimum, None)}"
    arr = _as_array(value, allowed, numbers.Integral)
    if arr.dtype == object:
        flat = arr.reshape(-1)
        for v in flat:
            if not INT64_MIN <= int(v) <= INT64_MAX:
                raise ValueError(f"{name} must be integers in [{INT64_MIN}, {INT64_MAX}] (int64); got {int(v)}")
        arr = np.array([int(v) for v in flat], dtype=np.int64).reshape(arr.shape)
    elif arr.size == 0 and arr.dtype == np.float64 and not isinstance(value, np.ndarray):
        arr = arr.astype(np.int64)  # [] or [[]]: numpy's default dtype for an empty list
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{allowed}; got dtype {arr.dtype} ({_preview(value)})")
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) > INT64_MAX:
        raise ValueError(f"{name} must be integers in [{INT64_MIN}, {INT64_MAX}] (int64); got {int(arr.max())}")
    if minimum is not None and arr.size and arr.min() < minimum:
        bad = arr.min()
        raise ValueError(f"{name} must be an integer{_range_text(minimum, None)}; got {bad}")
    return arr.astype(np.int64, copy=False)


def check_eps_array(value, name: str = "eps") -> np.ndarray:
    """A real scalar or array of values >= 0 and finite (no strings, bools or None)."""
    allowed = f"{name} must be a real number or array of real numbers >= 0 and finite"
    if _is_bool(value):
        raise TypeError(f"{name} must be a real number >= 0 and finite; got bool {value!r}")
    if isinstance(value, numbers.Real):
        return np.asarray(check_nonnegative(value, name), dtype=float)
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{allowed}; got {type(value).__name__} {_preview(value)}")
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError):
        raise TypeError(f"{allowed}; got {_preview(value)}") from None
    if raw.dtype == object:
        if not all(isinstance(v, numbers.Real) and not _is_bool(v) for v in raw.reshape(-1)):
            raise TypeError(f"{allowed}; got {_preview(value)}")
    elif raw.dtype == np.bool_ or not (np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)):
        raise TypeError(f"{allowed}; got dtype {raw.dtype} ({_preview(value)})")
    try:
        arr = raw.astype(float)
    except OverflowError:  # Python ints beyond the doubles
        raise ValueError(f"{name} must be a real number >= 0 and finite; got {_preview(value)}") from None
    if arr.size and not (np.all(np.isfinite(arr)) and np.all(arr >= 0)):
        bad = arr[~(np.isfinite(arr) & (arr >= 0))].flat[0]
        raise ValueError(f"{name} must be a real number >= 0 and finite; got {float(bad)!r}")
    return arr


def broadcast(*pairs):
    """``np.broadcast_arrays`` of ``(name, array)`` pairs, or ``ValueError`` naming them and their shapes."""
    arrays = [np.asarray(a) for _, a in pairs]
    try:
        return np.broadcast_arrays(*arrays)
    except ValueError:
        names = " and ".join(n for n, _ in pairs)
        shapes = ", ".join(f"{n} {a.shape}" for (n, _), a in zip(pairs, arrays))
        raise ValueError(f"{names} must have broadcastable shapes (numpy rules); got {shapes}") from None


def one_of(names) -> str:
    """``'a', 'b' or 'c'``: the allowed values of an option, for its error message."""
    quoted = [repr(str(n)) for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _preview(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
