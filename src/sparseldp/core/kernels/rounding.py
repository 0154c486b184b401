r"""Directed rounding and log-space helpers: the arithmetic every kernel's bounds are built from.

The bounds use directed rounding written out in numpy: after every
correctly rounded ``+ - * /`` the result is moved one unit outward with
``np.nextafter`` (which always contains the exact result of that operation on
the same operands), and every elementary function (``exp``, ``expm1``,
``log``, ``log1p``) is widened by ``4u |r| + 2^-1072`` (``u = 2^-53``): the
functions are assumed accurate to 2 ulp, which ``tests/test_rigor.py`` checks
against mpmath (they measure below 1 ulp).  Terms that underflow are covered
by an absolute slack of ``2^-1072`` per nonempty term, added by the
accountant.

The helpers with a ``mode`` argument return the value rounded to nearest
(``"near"``) or a rigorous upper (``"up"``) / lower (``"dn"``) bound;
:func:`sum_factor` and :func:`bounded_sum` do the same for sums of many
nonnegative doubles.
"""

from __future__ import annotations

import math

import numpy as np

_NEG_INF = -np.inf

#: Unit roundoff of float64 (round to nearest).
U = 2.0**-53
# Elementary functions are assumed accurate to 2 ulp: relative error <= 4u (measured < 1 ulp).
_FN_REL = 4.0 * U * (1.0 + 2.0**-20)
#: Absolute slack for results in the subnormal range (4 units of the smallest subnormal).
TINY = 2.0**-1072


# ---------------------------------------------------------------------------
# nearest and directed elementwise helpers
# ---------------------------------------------------------------------------
def logsubexp(x, y):
    """``log(exp(x) - exp(y))`` for ``x >= y``, elementwise; ``-inf`` when equal."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        out = x + np.log(-np.expm1(y - x))
    return np.where((y >= x) | np.isneginf(x), _NEG_INF, np.where(np.isneginf(y), x, out))


def up(x):
    """One unit up: an upper bound on the exact result of the correctly rounded operation giving ``x``."""
    return np.nextafter(x, np.inf)


def dn(x):
    """One unit down: a lower bound on the exact result of the operation giving ``x``."""
    return np.nextafter(x, -np.inf)


def _fup(r):
    """Upper bound on the exact value of an elementary function whose double result is ``r`` (finite)."""
    return np.nextafter(r + (_FN_REL * np.abs(r) + TINY), np.inf)


def _fdn(r):
    return np.nextafter(r - (_FN_REL * np.abs(r) + TINY), -np.inf)


def _exp_up(x):
    r = np.exp(x)
    return np.where(np.isinf(r), r, _fup(r))


def _exp_dn(x):
    r = np.exp(x)
    return np.where(np.isinf(r), r, np.maximum(_fdn(r), 0.0))


def _log_up(y):
    r = np.log(y)
    return np.where(np.isfinite(r), _fup(r), r)


def _log_dn(y):
    r = np.log(y)
    return np.where(y > 0, np.where(np.isfinite(r), _fdn(r), r), _NEG_INF)


def exp_up(x):
    """Upper bound on ``e^x`` for an exact argument ``x`` (``+inf`` stays ``+inf``)."""
    with np.errstate(all="ignore"):
        return _exp_up(x)


def exp_dn(x):
    """Lower bound (>= 0) on ``e^x``."""
    with np.errstate(all="ignore"):
        return _exp_dn(x)


def log_up(y):
    """Upper bound on ``log y`` for exact ``y >= 0`` (``-inf`` at 0)."""
    with np.errstate(all="ignore"):
        return _log_up(y)


def log_dn(y):
    """Lower bound on ``log y``; ``-inf`` for ``y <= 0``."""
    with np.errstate(all="ignore"):
        return _log_dn(y)


# The helpers below run inside the callers' ``np.errstate(all="ignore")`` (infinities are
# expected: empty ranges are -inf, and every such case is masked afterwards).
def _log1mexp(x, mode):
    """``log(1 - e^{-x})`` for ``x >= 0`` (increasing in ``x``): nearest, or a bound from a bounding ``x``."""
    g = -np.expm1(-x)
    if mode == "near":
        return np.log(g)
    if mode == "up":
        return _log_up(np.minimum(_fup(g), 1.0))
    return _log_dn(_fdn(g))


def _logaddexp(a, b, mode):
    """``log(e^a + e^b)``; for ``up``/``dn`` a bound given bounding ``a`` and ``b``."""
    if mode == "near":
        return np.logaddexp(a, b)
    m = np.maximum(a, b)
    n = np.minimum(a, b)
    if mode == "up":
        out = up(m + _fup(np.log1p(_exp_up(up(n - m)))))
    else:
        out = dn(m + np.maximum(_fdn(np.log1p(_exp_dn(dn(n - m)))), 0.0))
    return np.where(m == _NEG_INF, _NEG_INF, np.where(n == _NEG_INF, m, out))


def _logsubexp(x, y, mode):
    """``log(e^X - e^Y)`` for ``X > Y``; with ``up`` (``dn``) ``x >= X``, ``y <= Y`` (``x <= X``, ``y >= Y``)."""
    if mode == "near":
        return logsubexp(x, y)
    if mode == "up":
        z = dn(y - x)  # smaller z, larger 1 - e^z
        g = np.minimum(_fup(-np.expm1(z)), 1.0)
        ux = up(x)
        out = np.minimum(up(x + _log_up(g)), ux)
        # bounds that do not separate: e^X - e^Y <= e^X <= e^x
        return np.where(x == _NEG_INF, _NEG_INF, np.where(z < 0, out, ux))
    z = up(y - x)
    g = _fdn(-np.expm1(z))
    out = dn(x + _log_dn(g))
    return np.where((z < 0) & (g > 0) & (x > _NEG_INF), out, _NEG_INF)


def _add(a, b, mode):
    s = a + b
    return s if mode == "near" else (up(s) if mode == "up" else dn(s))


def _quiet(fn):
    """Run ``fn`` with floating-point warnings off (see the note above ``_log1mexp``)."""

    def wrapped(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    wrapped.__name__, wrapped.__doc__, wrapped.__qualname__ = fn.__name__, fn.__doc__, fn.__qualname__
    return wrapped


def _flip(mode):
    return {"near": "near", "up": "dn", "dn": "up"}[mode]


def _split(a):
    """Veltkamp split: ``a = hi + lo`` exactly, each half with at most 26 significant bits."""
    c = 134217729.0 * a
    hi = c - (c - a)
    return hi, a - hi


def _two_prod(a, b):
    """Dekker's error-free product: ``a * b = p + e`` exactly (no overflow or underflow here)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


# ---------------------------------------------------------------------------
# sums of nonnegative doubles
# ---------------------------------------------------------------------------
# Summation bound used by the generic paths: for n >= 1 nonnegative doubles, np.sum (any order,
# pairwise included) returns S~ with |S~ - S| <= gamma_{n-1} S, gamma_m = m u / (1 - m u) (Higham,
# Accuracy and Stability, Section 4.2; gradual underflow adds no error to an addition).  For
# n u <= 1/4: S <= S~ (1 + 2 n u) and S >= S~ (1 - 2 n u), both factors rounded outward.
def sum_factor(n: int, mode: str) -> float:
    """The factor ``(1 +- 2 n u)`` (rounded outward) that turns ``np.sum`` of ``n`` nonnegative doubles
    into a rigorous upper (``"up"``) / lower (``"dn"``) bound; ``1.0`` for ``"near"``."""
    if mode == "near":
        return 1.0
    g = 2.0 * float(n) * U
    if g > 0.5:  # pragma: no cover - n > 2^50
        raise ValueError(f"sums of more than 2^50 terms are not supported; got {n}")
    return float(up(1.0 + g)) if mode == "up" else float(dn(1.0 - g))


def bounded_sum(x, axis=None, *, mode: str, n: int | None = None):
    """``sum x`` over ``axis`` for nonnegative ``x``: nearest, or a rigorous upper/lower bound."""
    s = np.sum(x, axis=axis)
    if mode == "near":
        return s
    n = int(x.size if axis is None else x.shape[axis]) if n is None else n
    f = sum_factor(max(n, 1), mode)
    return up(s * f) if mode == "up" else dn(s * f)


# ---------------------------------------------------------------------------
# scalar twins (Python floats)
# ---------------------------------------------------------------------------
# The accountant's scalar fast path (one (eps, h) pair at function-call cost) repeats the
# formulas above operation for operation on Python floats: + - * / are the same IEEE
# operations, math.nextafter is np.nextafter, and the four elementary functions are
# numpy's own ufuncs called on one float (``_ex``, ``_exm1``, ``_lg``, ``_lg1p``; a quarter
# of a microsecond each), so the results are *identical* to the array path's: numpy's
# SIMD exp/log/expm1/log1p differ from the C library's in a few percent of the last bits,
# and an ulp there would separate the two paths.  (``np.logaddexp`` calls the C library
# inside, so its twin does too.)  Arguments where numpy would raise a floating-point
# signal (overflow, underflow to a subnormal, log of 0) are served by the math module
# with numpy's conventions instead -- exp overflows to inf, log(0) = -inf, NaN passes
# through -- so no ``np.errstate`` (1.5 us) is needed and a user's ``np.seterr`` never
# fires.  NaN propagates through min/max as in numpy (the computed value is always the
# first argument).  The helpers are written flat (nextafter inlined, one function per
# mode where it is hot): a Python call costs about as much as the arithmetic it wraps.
_INF = math.inf
_NAN = math.nan
_nextafter = math.nextafter
_np_exp = np.exp
_np_expm1 = np.expm1
_np_log = np.log
_np_log1p = np.log1p
_LOGE2 = math.log(2.0)
# |x| above this is a normal double: exp/expm1/log1p results there raise no underflow signal
_NORMAL = 2.0**-1020


def _ex(x: float) -> float:
    """``np.exp(x)`` as a float; inf on overflow, C library below ``-708`` (subnormal results)."""
    if -708.0 < x < 709.0:
        return float(_np_exp(x))
    try:
        return math.exp(x)  # NaN and -inf pass; results here are 0, subnormal or beyond e^709
    except OverflowError:
        return _INF


def _exm1(x: float) -> float:
    """``np.expm1(x)`` as a float; inf on overflow."""
    if _NORMAL < x < 709.0 or -_INF < x < -_NORMAL:
        return float(_np_expm1(x))
    try:
        return math.expm1(x)  # tiny |x| (the result is x), NaN, infinities
    except OverflowError:
        return _INF


def _lg(x: float) -> float:
    """``np.log(x)`` as a float: -inf at 0, NaN below."""
    if x > 0.0:
        return float(_np_log(x))
    return -_INF if x == 0.0 else _NAN


def _lg1p(x: float) -> float:
    """``np.log1p(x)`` as a float: -inf at -1, NaN below."""
    if x > -1.0:
        return float(_np_log1p(x)) if (x > _NORMAL or x < -_NORMAL) else math.log1p(x)
    return -_INF if x == -1.0 else _NAN


def _s_up(x: float) -> float:
    return _nextafter(x, _INF)


def _s_dn(x: float) -> float:
    return _nextafter(x, -_INF)


_s_exp = _ex
_s_log = _lg


def _s_ldexp(x: float, e: int) -> float:
    try:
        return math.ldexp(x, e)
    except OverflowError:
        return math.copysign(_INF, x)


def _s_ceil(x: float) -> float:
    """``np.ceil`` on a float: infinities and NaN pass through (``math.ceil`` would raise)."""
    return float(math.ceil(x)) if -_INF < x < _INF else x


def _s_fup(r: float) -> float:
    return _nextafter(r + (_FN_REL * abs(r) + TINY), _INF)


def _s_fdn(r: float) -> float:
    return _nextafter(r - (_FN_REL * abs(r) + TINY), -_INF)


def _s_exp_up(x: float) -> float:
    r = _ex(x)
    return r if r == _INF else _nextafter(r + (_FN_REL * r + TINY), _INF)  # NaN passes through


def _s_exp_dn(x: float) -> float:
    r = _ex(x)
    if r == _INF:
        return r
    r = _nextafter(r - (_FN_REL * r + TINY), -_INF)
    return r if not r < 0.0 else 0.0


def _s_log_up(y: float) -> float:
    r = _lg(y)
    return _nextafter(r + (_FN_REL * abs(r) + TINY), _INF) if -_INF < r < _INF else r


def _s_log_dn(y: float) -> float:
    if not y > 0.0:
        return -_INF
    r = float(_np_log(y))
    return _nextafter(r - (_FN_REL * abs(r) + TINY), -_INF) if -_INF < r < _INF else r


def _s_log1mexp(x: float, mode: str) -> float:
    """Scalar :func:`_log1mexp`: ``log(1 - e^{-x})`` for ``x >= 0``."""
    g = -_exm1(-x)
    if mode == "near":
        return _lg(g)
    if mode == "up":
        g = _nextafter(g + (_FN_REL * abs(g) + TINY), _INF)
        return _s_log_up(g if not g > 1.0 else 1.0)
    return _s_log_dn(_nextafter(g - (_FN_REL * abs(g) + TINY), -_INF))


def _s_logaddexp(a: float, b: float, mode: str) -> float:
    """Scalar :func:`_logaddexp` (``"near"``: ``np.logaddexp``, which uses the C library's exp and log1p)."""
    if a != a or b != b:
        return _NAN
    if mode == "near":
        if a == b:
            return a + _LOGE2
        d = a - b
        if d > 0:
            return a + math.log1p(math.exp(-d))
        if d <= 0:
            return b + math.log1p(math.exp(d))
        return d  # NaN (inf - inf)
    m, n = (a, b) if a >= b else (b, a)
    if m == -_INF:
        return -_INF
    if n == -_INF:
        return m
    if mode == "up":
        r = _lg1p(_s_exp_up(_nextafter(n - m, _INF)))
        return _nextafter(m + _nextafter(r + (_FN_REL * abs(r) + TINY), _INF), _INF)
    r = _lg1p(_s_exp_dn(_nextafter(n - m, -_INF)))
    r = _nextafter(r - (_FN_REL * abs(r) + TINY), -_INF)
    return _nextafter(m + (r if not r < 0.0 else 0.0), -_INF)


def _s_logsubexp_near(x: float, y: float) -> float:
    """Scalar :func:`logsubexp`: ``log(e^x - e^y)``, ``-inf`` when ``y >= x``."""
    if y >= x or x == -_INF:
        return -_INF
    if y == -_INF:
        return x
    return x + _lg(-_exm1(y - x))  # y < x: no overflow; NaN passes through


def _s_logsubexp_up(x: float, y: float) -> float:
    """Scalar ``_logsubexp(x, y, "up")``: an upper bound from ``x >= X``, ``y <= Y``."""
    if x == -_INF:
        return -_INF
    z = _nextafter(y - x, -_INF)
    ux = _nextafter(x, _INF)
    if not z < 0:
        return ux
    g = -_exm1(z)
    g = _nextafter(g + (_FN_REL * g + TINY), _INF)
    v = _nextafter(x + _s_log_up(g if not g > 1.0 else 1.0), _INF)
    return ux if ux < v else v


def _s_logsubexp_dn(x: float, y: float) -> float:
    """Scalar ``_logsubexp(x, y, "dn")``: a lower bound from ``x <= X``, ``y >= Y``."""
    z = _nextafter(y - x, _INF)
    if not (z < 0 and x > -_INF):
        return -_INF
    g = -_exm1(z)
    g = _nextafter(g - (_FN_REL * g + TINY), -_INF)
    if not g > 0:
        return -_INF
    return _nextafter(x + _s_log_dn(g), -_INF)


def _s_logsubexp(x: float, y: float, mode: str) -> float:
    """Scalar :func:`_logsubexp` (``"near"``: :func:`logsubexp`)."""
    if mode == "near":
        return _s_logsubexp_near(x, y)
    return _s_logsubexp_up(x, y) if mode == "up" else _s_logsubexp_dn(x, y)


def _s_add(a: float, b: float, mode: str) -> float:
    s = a + b
    return s if mode == "near" else (_nextafter(s, _INF) if mode == "up" else _nextafter(s, -_INF))


def _s_two_prod(a: float, b: float):
    """Scalar :func:`_two_prod` (the same operations in the same order)."""
    p = a * b
    c = 134217729.0 * a
    ah = c - (c - a)
    al = a - ah
    c = 134217729.0 * b
    bh = c - (c - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e
