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
