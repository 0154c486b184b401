r"""Radius kernels: the declared interface, the two log-concave families and a general kernel.

A kernel is a symmetric nonnegative weight ``w(k) = w(|k|)`` with ``w(0) > 0``,
restricted to the window ``|k| <= t`` (Definition 1).  :class:`Kernel` is the
abstract interface (its docstring lists the assumptions and the methods the
package calls); :class:`LogConcaveKernel` adds the closed-form, prefix-structured
accounting that log-concavity allows:

* discrete Laplace (Definition 6): ``log w(k) = -lam |k|``;
* Gaussian (Definition 13): ``log w(k) = -k^2 / (2 sigma^2)``;

and :class:`GeneralKernel` takes any weights ``w(0..t)`` and is accounted by
the generic path of :mod:`sparseldp.core.accounting` (no shape assumed).

Everything the accountant needs reduces to sums of ``w`` over integer ranges,
served here in log space so that nothing underflows.  Each kernel gives the
numerator of the defect (Theorems 3 and 9) as a short list of nonnegative log
terms, in one of three modes:

* ``"near"``: ordinary round-to-nearest evaluation (the value ``delta`` reports);
* ``"up"`` / ``"dn"``: a rigorous upper / lower bound on the exact term.

Which way the numbers err
-------------------------
The bounds use directed rounding written out in numpy: after every
correctly rounded ``+ - * /`` the result is moved one unit outward with
``np.nextafter`` (which always contains the exact result of that operation on
the same operands), and every elementary function (``exp``, ``expm1``,
``log``, ``log1p``) is widened by ``4u |r| + 2^-1072`` (``u = 2^-53``): the
functions are assumed accurate to 2 ulp, which ``tests/test_rigor.py`` checks
against mpmath (they measure below 1 ulp).  Terms that underflow are covered
by an absolute slack of ``2^-1072`` per nonempty term, added by the
accountant.

* Laplace: every sum is a geometric closed form.  The overlap excess is split
  into three nonnegative products (no cancellation, see
  :meth:`LaplaceKernel.numerator_terms`) and the excess set is decided
  *exactly*: ``lam m > eps`` is evaluated with an error-free product
  (Dekker's ``TwoProduct``), so ``eps`` within rounding of ``lam h`` is
  classified correctly and ``lam m - eps`` is known to 2 ulp.
* Gaussian: one suffix array ``S_j = log sum_{i >= j} w(i)``.  Where
  ``w(j) >= e^-690`` (the *head*) it is summed in linear space with an exact
  running error term (a compensated, double-double prefix sum: relative error
  ``u`` plus ``(N u)^2``, independent of the length); beyond (the *tail*) with
  ``np.logaddexp.accumulate``.  A per-entry bound ``e_j`` on
  ``|S_j(computed) - S_j(exact)|`` is derived a priori (lazily, on the first
  request for a bound; see :meth:`GaussianKernel._error_bounds`) and kept as
  float32 rounded up.
"""

from __future__ import annotations

import abc
import itertools
import math

import numpy as np

__all__ = [
    "Kernel",
    "LogConcaveKernel",
    "LaplaceKernel",
    "GaussianKernel",
    "GeneralKernel",
    "check_weights",
    "MAX_KERNEL_S",
    "bounded_sum",
    "normalizer_bound",
    "sum_factor",
    "logsubexp",
    "check_gaussian_s",
    "GAUSSIAN_MAX_S",
    "U",
    "TINY",
    "up",
    "dn",
    "exp_up",
    "exp_dn",
    "log_up",
    "log_dn",
]

_NEG_INF = -np.inf
#: Largest Gaussian support size.  The exact accounting keeps a log suffix sum per
#: offset with its compensation term and error bounds (about 50 bytes per offset at
#: peak): measured 417 MB for ``account`` at s = 2^23 + 1, within the 512 MiB stated
#: in the README (2^27 + 1 took 5.9 GB).
GAUSSIAN_MAX_S = (1 << 23) + 1

#: Unit roundoff of float64 (round to nearest).
U = 2.0**-53
# Elementary functions are assumed accurate to 2 ulp: relative error <= 4u (measured < 1 ulp).
_FN_REL = 4.0 * U * (1.0 + 2.0**-20)
#: Absolute slack for results in the subnormal range (4 units of the smallest subnormal).
TINY = 2.0**-1072
# Gaussian head: offsets with w(j) = e^{-j^2/(2 sigma^2)} >= e^{-690} are summed in linear space.
_HEAD_LOG = 690.0
# Gaussian tail: the error recurrence is used while (2j + 1) / (2 sigma^2) < 40, closed-form bounds beyond.
_STEEP = 40.0
_CHUNK = 1 << 20


def check_gaussian_s(s: int, name: str = "s") -> int:
    """``s <= GAUSSIAN_MAX_S``: the Gaussian kernel's exact sums need O(s) memory."""
    if s > GAUSSIAN_MAX_S:
        raise ValueError(
            f"{name} must be an odd integer in [1, 2^23 + 1 = {GAUSSIAN_MAX_S}] for the Gaussian family "
            f"(its exact accounting keeps one log suffix sum per offset, O(s) memory); got {s}"
        )
    return s


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
# kernels
# ---------------------------------------------------------------------------
class Kernel(abc.ABC):
    r"""The declared interface of a radius kernel ``w`` on the window ``|k| <= t``.

    A mechanism ``M(y | x) = w(|x - y|) / C_t * 1{|x - y| <= t}`` (Definition 1
    allows any nonnegative weight) is described completely by its kernel.
    Every algorithm of the package relies on these assumptions, which each
    subclass must guarantee:

    * **symmetric**: ``w(k) = w(-k)``, so a kernel is given by ``w(0..t)``
      and both orders of a pair give the same defect (docs/paper.md,
      "delta* and ordered pairs");
    * **nonnegative and finite** weights, with ``w(0) > 0`` (every input can
      report itself, so every normalizer is positive);
    * a **finite window** ``|k| <= t`` (``t = (s - 1) / 2`` is the attribute
      ``t``, an ``int >= 0``): ``w(k) = 0`` beyond it.

    ``log_concave`` says whether ``w`` (zero beyond its support) is
    log-concave.  The closed-form accountant (:class:`LogConcaveKernel`,
    Theorems 3 and 9) relies on it: then the overlap loss
    ``L_h(k) = log w(k) - log w(k - h)`` is nonincreasing in ``k``, so the
    excess set ``{k : L_h(k) > eps}`` is a *prefix* of the overlap and
    ``delta_h`` is two range sums (Proposition 2 for the Gaussian).  Kernels
    that do not derive from :class:`LogConcaveKernel` (e.g.
    :class:`GeneralKernel`, whatever its ``log_concave``) are accounted by the
    generic path of :mod:`sparseldp.core.accounting`, which sums
    ``[P(y|0) - e^eps P(y|h)]_+`` over the window and assumes nothing about
    the shape.

    Abstract methods (exactly what the rest of the package calls):

    * :meth:`log_w` -- ``log w(k)`` (mechanism ``logpmf``, channels);
    * :meth:`log_normalizer_bound` -- ``log C_t`` nearest / rigorous bounds
      (accounting, channels, design);
    * :meth:`log_range` -- ``log sum_{k=a}^{b} w(k)`` (clipped channel rows);
    * :meth:`moment_sums` -- ``(sum j w(j), sum j^2 w(j))`` (``r1``, ``r2``);
    * :meth:`decimal_weights` -- exact ``w(0..t)`` as Decimals (sampling);
    * :meth:`weights` -- ``w(0..t)`` as doubles, nearest or rigorous bounds
      (the generic accountant).

    ``log_normalizer`` (a property) is derived from :meth:`log_normalizer_bound`.
    """

    t: int
    #: Whether ``w`` is log-concave (see the class docstring); ``False`` unless verified.
    log_concave: bool = False

    @abc.abstractmethod
    def log_w(self, k):
        """``log w(|k|)`` for integer arrays ``|k| <= t`` (``-inf`` where ``w = 0``), rounded to nearest."""

    @abc.abstractmethod
    def log_normalizer_bound(self, mode: str) -> float:
        """``log C_t``, ``C_t = sum_{|k| <= t} w(k)``: nearest (``"near"``) or a rigorous upper
        (``"up"``) / lower (``"dn"``) bound, on the scale of :meth:`log_w` and :meth:`weights`."""

    @abc.abstractmethod
    def log_range(self, a, b, mode="near"):
        """``log sum_{k=a}^{b} w(k)`` for integer arrays ``-t <= a``, ``b <= t`` (``-inf`` if ``a > b``);
        ``mode="up"``/``"dn"``: a rigorous upper/lower bound."""

    @abc.abstractmethod
    def moment_sums(self):
        """``(sum_{j=1}^t j w(j), sum_{j=1}^t j^2 w(j))`` on the scale of :attr:`log_normalizer`
        (Propositions 1 and 3: ``R1 = 2 S1 / C_t``, ``R2 = 2 S2 / C_t``)."""

    @abc.abstractmethod
    def decimal_weights(self, ctx) -> list:
        """``w(0..t)`` as :class:`decimal.Decimal` s in context ``ctx`` (any common positive scale;
        used by :mod:`sparseldp.sampling`, which normalizes them exactly)."""

    @abc.abstractmethod
    def weights(self, mode: str = "near") -> np.ndarray:
        """``w(0..t) / c`` as doubles for one positive constant ``c`` fixed by the kernel (the scale of
        :meth:`log_w`): rounded to nearest, or elementwise rigorous lower (``"dn"``) / upper (``"up"``)
        bounds.  Read-only; O(t) memory."""

    @property
    def log_normalizer(self) -> float:
        """``log C_t = log sum_{|k| <= t} w(k)`` (Definitions 6 and 13)."""
        return self.log_normalizer_bound("near")


class LogConcaveKernel(Kernel):
    """A log-concave kernel with closed-form (prefix-structured) accounting.

    Subclasses must be log-concave (class docstring of :class:`Kernel`): the
    accountant then asks :meth:`numerator_terms` for the defect numerator as
    a few range sums over the prefix excess set.  Subclasses give
    :meth:`log_w`, ``_range_nonneg(a, b, mode)`` (``log sum_{i=a}^{b} w(i)``
    for ``0 <= a``), :meth:`numerator_terms`, :meth:`moment_sums`,
    :meth:`decimal_weights` and :meth:`weights`.
    """

    log_concave = True

    @abc.abstractmethod
    def _range_nonneg(self, a, b, mode):
        """``log sum_{i=a}^{b} w(i)`` for integer arrays ``0 <= a``, ``b <= t``."""

    @abc.abstractmethod
    def numerator_terms(self, eps, h, mode):
        """The defect numerator ``C_t delta_h(eps)`` as a list of ``(log_value, nonempty, part)``,
        ``part`` in ``{"leak", "overlap"}``; ``0 <= h <= 2t`` (Theorems 3 and 9)."""

    @_quiet
    def log_range(self, a, b, mode="near"):
        """``log sum_{k=a}^{b} w(k)`` for ``-t <= a``, ``b <= t`` (any sign), by symmetry.

        ``mode="up"``/``"dn"``: a rigorous upper/lower bound on the exact value.
        """
        return self._range(a, b, mode)

    def _range(self, a, b, mode):
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        a, b = np.broadcast_arrays(a, b)
        # negative part [a, min(b, -1)] mirrored to [max(1, -b), -a]
        neg = self._range_nonneg(np.maximum(1, -b), -a, mode)
        pos = self._range_nonneg(np.maximum(0, a), b, mode)
        neg = np.where(a <= -1, neg, _NEG_INF)
        pos = np.where(b >= 0, pos, _NEG_INF)
        return _logaddexp(neg, pos, mode)

    @_quiet
    def log_range_nonneg(self, a, b, mode="near"):
        """``log sum_{i=a}^{b} w(i)`` for integer arrays ``0 <= a``, ``b <= t``; ``-inf`` if ``a > b``.

        ``mode="up"``/``"dn"``: a rigorous upper/lower bound on the exact value.
        """
        return self._range_nonneg(a, b, mode)

    def log_normalizer_bound(self, mode: str) -> float:
        """``log C_t`` rounded to nearest, or a rigorous upper (``"up"``) / lower (``"dn"``) bound."""
        key = "_logc_" + mode
        got = self.__dict__.get(key)
        if got is None:
            with np.errstate(all="ignore"):
                got = float(_logaddexp(self._range_nonneg(0, self.t, mode), self._range_nonneg(1, self.t, mode), mode))
            self.__dict__[key] = got
        return got


class LaplaceKernel(LogConcaveKernel):
    r"""``w(k) = exp(-lam |k|)`` on ``|k| <= t``; geometric closed forms.

    With ``q = e^{-lam}`` and ``G(a, n) = sum_{j=a}^{a+n-1} q^j
    = q^a (1 - q^n) / (1 - q)``, every quantity is a product of factors
    ``e^{-lam a}``, ``1 - e^{-x}`` and ``1/(1 - q)``, each evaluated (in log
    space) to a few ulp: no subtraction of nearly equal numbers occurs.
    """

    def __init__(self, lam: float, t: int):
        self.lam = float(lam)
        self.t = int(t)
        # log(1 - e^{-lam}) without cancellation for tiny lam, and its bounds
        with np.errstate(all="ignore"):
            self._log_one_minus_q = float(_log1mexp(self.lam, "near"))
            self._l1mq = {"near": self._log_one_minus_q, "up": float(_log1mexp(self.lam, "up")),
                          "dn": float(_log1mexp(self.lam, "dn"))}
        # lam = f 2^E with 1/2 <= f < 1: products f * m are error-free for integers m <= 2^53
        f, E = math.frexp(self.lam)
        self._lam_f, self._lam_e = float(f), int(E)

    def __repr__(self) -> str:
        return f"SparseLaplace(lam={self.lam!r}, s={2 * self.t + 1})"

    def decimal_weights(self, ctx) -> list:
        """``w(0..t) = q^k``, ``q = e^{-lam}``, as Decimals in context ``ctx`` (used by :mod:`sparseldp.sampling`).

        Each step multiplies correctly rounded numbers, so ``w(k)`` has relative
        error below ``k + 2`` units of the context's precision.
        """
        import decimal

        D = decimal.Decimal
        with decimal.localcontext(ctx):
            w = [D(1)]
            q = (-D(self.lam)).exp()
            for _ in range(self.t):
                w.append(w[-1] * q)
        return w

    def log_w(self, k):
        return -self.lam * np.abs(np.asarray(k, dtype=float))

    @_quiet
    def weights(self, mode: str = "near") -> np.ndarray:
        """``w(0..t) = e^{-lam k}``: nearest, or rigorous bounds (``lam k`` rounded outward, ``exp`` to 2 ulp)."""
        k = np.arange(self.t + 1, dtype=float)
        if mode == "near":
            return np.exp(-self.lam * k)
        if mode == "up":
            return np.where(k == 0, 1.0, _exp_up(-dn(self.lam * k)))
        return np.where(k == 0, 1.0, _exp_dn(-up(self.lam * k)))

    def _log_geom(self, a, n, mode):
        """``log G(a, n) = -lam a + log(1 - q^n) - log(1 - q)`` for float arrays ``a >= 0``, ``n >= 1``."""
        lam = self.lam
        if mode == "near":
            return -lam * a + _log1mexp(lam * n, "near") - self._log_one_minus_q
        if mode == "up":
            s = up(-dn(lam * a) + _log1mexp(up(lam * n), "up"))
            return up(s - self._l1mq["dn"])
        s = dn(-up(lam * a) + _log1mexp(dn(lam * n), "dn"))
        return dn(s - self._l1mq["up"])

    def _range_nonneg(self, a, b, mode):
        # sum_{i=a}^{b} q^i = G(a, n),  n = b - a + 1
        a = np.asarray(a, dtype=float)
        b = np.minimum(np.asarray(b, dtype=float), self.t)
        n = b - a + 1
        val = self._log_geom(a, np.maximum(n, 1.0), mode)
        return np.where(n >= 1, val, _NEG_INF)

    @_quiet
    def tail_bound(self) -> float:
        """Rigorous upper bound on ``sum_{j > t} w(j) = q^{t+1} / (1 - q)`` (exact geometric tail)."""
        arg = up(-dn(self.lam * (self.t + 1.0)) - self._l1mq["dn"])
        return float(_exp_up(arg))

    # -- the overlap excess, decided exactly -------------------------------------
    def _lam_m_minus_eps(self, m, eps, mode="near"):
        """``lam m - eps`` for integer-valued float arrays ``m >= 0``: ``(positive, value)``.

        ``value`` is rounded to nearest, or a lower (``mode="dn"``) / upper (``"up"``) bound.

        ``positive`` is the exact sign.  In plain floating point
        ``fl(fl(lam m) - eps)`` is used, with outward rounding for the bounds;
        where ``|lam m - eps| <= 2^-20 lam m`` (cancellation could hide the sign
        or the leading bits) the exact split is used instead: ``lam m = 2^E (p + e)``
        exactly (``TwoProduct`` of the mantissa ``f`` and ``m``), and the sign of
        ``fl((p - eps') + e)``, ``eps' = eps 2^-E``, is exact (``p - eps'`` is exact
        by Sterbenz's lemma there, and one correctly rounded addition keeps the
        sign), with ``lam m - eps`` then known to 2 ulp.
        """
        # (the caller suppresses floating-point warnings)
        p = self.lam * m
        near = p - eps
        d = near if mode == "near" else (up(up(p) - eps) if mode == "up" else dn(dn(p) - eps))
        amb = np.abs(near) <= 2.0**-20 * p
        if amb.any():
            shape = amb.shape
            idx = np.flatnonzero(amb.reshape(-1))
            mm = np.broadcast_to(m, shape).reshape(-1)[idx]
            ee = np.ldexp(np.broadcast_to(eps, shape).reshape(-1)[idx], -self._lam_e)
            pp, e = _two_prod(self._lam_f, mm)
            df = pp - ee
            near = np.array(np.broadcast_to(near, shape), dtype=float)
            near.reshape(-1)[idx] = df + e  # the sign is exact; scaled below
            pos = near > 0
            near.reshape(-1)[idx] = np.ldexp(near.reshape(-1)[idx], self._lam_e)
            if mode == "near":
                d = near
            else:
                d = np.array(np.broadcast_to(d, shape), dtype=float)
                if mode == "up":
                    d.reshape(-1)[idx] = up(np.ldexp(up(up(df) + e), self._lam_e))
                else:
                    d.reshape(-1)[idx] = dn(np.ldexp(dn(dn(df) + e), self._lam_e))
            return pos, d
        return near > 0, d

    def _last_excess(self, h, eps, k1, cap, exact=True):
        """Exact largest ``k`` in ``[k1, cap]`` with ``lam (h - 2k) > eps`` (``k1 - 1`` if none).

        ``h``, ``k1``, ``cap`` float arrays of integers, ``eps`` finite with
        ``lam h > eps``.  ``K = ceil(x) - 1`` with ``x = (h - eps/lam)/2``; the
        rounded ``x`` errs by at most ``2u (h + eps/lam)``, so ``K`` is certain
        unless ``x`` lies that close to an integer.  Those few are corrected by
        the exact ``lam (h - 2K) - eps`` and verified with exact comparisons.
        """
        lam = self.lam
        r = eps / lam
        x = (h - r) / 2.0
        K = np.minimum(np.maximum(np.ceil(x) - 1.0, k1 - 1.0), cap)
        if not exact:  # nearest values: an index at a near tie contributes a rounding-sized term either way
            return K
        amb = ~(np.abs(x - np.round(x)) > 4.0 * U * (h + np.abs(r)) + 1e-300)
        if not amb.any():
            return K
        idx = np.flatnonzero(amb)
        hs, es, a1, cp = h[idx], eps[idx], k1[idx], cap[idx]
        Ks = K[idx]
        _, d0 = self._lam_m_minus_eps(hs - 2.0 * Ks, es)
        Ks = np.minimum(np.maximum(Ks + np.ceil(d0 / (2.0 * lam)) - 1.0, a1 - 1.0), cp)
        for _ in range(8):
            here = self._lam_m_minus_eps(hs - 2.0 * Ks, es)[0]
            nxt = self._lam_m_minus_eps(hs - 2.0 * Ks - 2.0, es)[0]
            bad_here = (Ks >= a1) & ~here  # K claims an excess point it does not have
            bad_next = (Ks + 1.0 <= cp) & nxt  # the next point is an excess point too
            if not (bad_here.any() or bad_next.any()):
                K = K.copy()
                K[idx] = Ks
                return K
            Ks = np.where(bad_here, Ks - 1.0, np.where(bad_next, Ks + 1.0, Ks))
        raise RuntimeError("internal error: the Laplace excess boundary did not settle")  # pragma: no cover

    @_quiet
    def numerator_terms(self, eps, h, mode):
        r"""The defect numerator ``C_t delta_h(eps)`` as nonnegative log terms (Theorem 3).

        ``eps`` float, ``h`` int64 arrays of one shape with ``0 <= h <= 2t``.
        Returns a list of ``(log_value, nonempty, part)`` with ``part`` in
        ``{"leak", "overlap"}``.  The overlap loss is ``lam h`` for ``k <= 0``
        and ``lam (h - 2k)`` for ``0 <= k <= h``, so the excess set on
        ``[h - t, t]`` is ``[h - t, 0]`` (when ``h <= t`` and ``lam h > eps``)
        followed by ``[k1, K]``, ``k1 = max(1, h - t)``.  With ``d = lam h - eps``
        and ``d_K = lam (h - 2K) - eps`` (both > 0, from an exact product):

        * region 1: ``(1 - e^{-d}) G(0, t - h + 1)``;
        * region 2: ``sum_{k=k1}^{K} (q^k - e^eps q^{h-k})
          = q^{k1} (1 - q^{K-k1}) (1-q^n)/(1-q) + (1 - e^{-d_K}) q^K (1-q^n)/(1-q)``,
          ``n = K - k1 + 1``,

        three products of nonnegative factors.
        """
        t = self.t
        hf = h.astype(float)
        small = h <= t
        terms = []
        # support leakage: k = -t .. h-t-1
        a1 = np.where(small, t - hf + 1.0, 1.0)
        n1 = np.where(small, hf, float(t))
        ne1 = np.where(small, h >= 1, t >= 1)
        terms.append((self._log_geom(a1, np.maximum(n1, 1.0), mode), ne1, "leak"))
        ne2 = ~small
        terms.append((self._log_geom(np.zeros_like(hf), np.maximum(hf - t, 1.0), mode), ne2, "leak"))
        # overlap: only where lam h > eps (decided exactly); computed on that subset
        shape = hf.shape
        pos, dh = self._lam_m_minus_eps(hf, eps, mode)
        idx = np.flatnonzero(pos.reshape(-1) & (h.reshape(-1) >= 1))
        logs = [np.full(hf.size, _NEG_INF) for _ in range(3)]
        nes = [np.zeros(hf.size, dtype=bool) for _ in range(3)]
        if idx.size:
            hs = hf.reshape(-1)[idx]
            es = np.broadcast_to(eps, shape).reshape(-1)[idx]
            d = dh.reshape(-1)[idx]
            sm = hs <= t
            # region 1: k = h-t .. 0, all with loss lam h
            g = self._log_geom(np.zeros_like(hs), np.maximum(t - hs + 1.0, 1.0), mode)
            logs[0][idx] = np.where(sm, _add(_log1mexp(d, mode), g, mode), _NEG_INF)
            nes[0][idx] = sm
            # region 2: k = k1 .. K
            k1 = np.maximum(1.0, hs - t)
            cap = np.ceil(hs / 2.0) - 1.0
            K = self._last_excess(hs, es, k1, cap, exact=mode != "near")
            has = K >= k1
            Ks = np.where(has, K, k1)
            n = Ks - k1 + 1.0
            _, dk = self._lam_m_minus_eps(hs - 2.0 * Ks, es, mode)
            if mode == "near":  # K may sit one past a near tie: its term is then within rounding of 0
                dk = np.maximum(dk, 0.0)
            common = self._log_geom(np.zeros_like(hs), n, mode)  # log (1 - q^n)/(1 - q)
            lam = self.lam
            if mode == "near":
                v1 = -lam * k1 + _log1mexp(lam * (Ks - k1), "near") + common
                v2 = _log1mexp(dk, "near") - lam * Ks + common
            else:
                lamk1 = up(lam * k1) if mode == "dn" else dn(lam * k1)
                lamK = up(lam * Ks) if mode == "dn" else dn(lam * Ks)
                lamd = dn(lam * (Ks - k1)) if mode == "dn" else up(lam * (Ks - k1))
                v1 = _add(_add(-lamk1, _log1mexp(lamd, mode), mode), common, mode)
                v2 = _add(_add(_log1mexp(dk, mode), -lamK, mode), common, mode)
            more = has & (Ks > k1)
            logs[1][idx] = np.where(more, v1, _NEG_INF)
            nes[1][idx] = more
            logs[2][idx] = np.where(has, v2, _NEG_INF)
            nes[2][idx] = has
        for lv, ne in zip(logs, nes):
            terms.append((lv.reshape(shape), ne.reshape(shape), "overlap"))
        return terms

    def moment_sums(self):
        t, lam = self.t, self.lam
        if t == 0:
            return 0.0, 0.0
        block = min(t, 1 << 20)
        i = np.arange(1, block + 1, dtype=float)
        wi = np.exp(-lam * i)
        a0, a1, a2 = wi.sum(), (i * wi).sum(), (i * i * wi).sum()
        # j = m*block + i: sum over blocks m of q^{m block} (sums shifted by m block)
        nblocks, rem = divmod(t, block)
        if nblocks <= _MAX_BLOCKS:
            m = np.arange(nblocks, dtype=float)
            scale = np.exp(-lam * block * m)
            s1 = float(np.sum(scale * (m * block * a0 + a1)))
            s2 = float(np.sum(scale * ((m * block) ** 2 * a0 + 2 * m * block * a1 + a2)))
        else:
            _, s1, s2 = _laplace_blocks_by_doubling(lam, block, nblocks, (float(a0), float(a1), float(a2)))
        if rem:
            j = nblocks * block + np.arange(1, rem + 1, dtype=float)
            wj = np.exp(-lam * j)
            s1 += float((j * wj).sum())
            s2 += float((j * j * wj).sum())
        return s1, s2


# Blocks of 2^20 radii summed as one array; beyond (t > 2^40) the blocks are combined by doubling.
_MAX_BLOCKS = 1 << 20


def _laplace_blocks_by_doubling(lam: float, block: int, nblocks: int, one):
    """``(sum q^j, sum j q^j, sum j^2 q^j)`` over ``j = 1 .. nblocks * block`` in O(log nblocks).

    ``one`` holds the three sums over one block ``j = 1 .. block``.  A range
    shifted by ``d`` contributes ``q^d (S0, d S0 + S1, d^2 S0 + 2 d S1 + S2)``, so
    sums over ``n1 + n2`` blocks follow from those over ``n1`` and ``n2`` blocks;
    binary doubling needs ``2 log2(nblocks)`` such steps, each adding positive
    terms only (no cancellation), and constant memory.
    """

    def shifted(S, d):
        q = math.exp(-lam * d)
        return (q * S[0], q * (d * S[0] + S[1]), q * (d * d * S[0] + 2.0 * d * S[1] + S[2]))

    def add(A, B):
        return (A[0] + B[0], A[1] + B[1], A[2] + B[2])

    total, covered = (0.0, 0.0, 0.0), 0  # sums over the first `covered` blocks
    power, size = one, 1  # sums over `size` consecutive blocks starting at j = 1
    n = nblocks
    while n:
        if n & 1:
            total = add(total, shifted(power, float(covered) * block))
            covered += size
        n >>= 1
        if n:
            power = add(power, shifted(power, float(size) * block))
            size *= 2
    return total


# ---------------------------------------------------------------------------
# Gaussian
# ---------------------------------------------------------------------------
def _sequential_cumsum(x):
    """``np.cumsum`` after checking it is the sequential recurrence ``s_i = fl(s_{i-1} + x_i)``.

    The compensated sums below need each partial sum to be one correctly rounded
    addition of the previous one; numpy's accumulate is, and this is checked
    (falling back to ``itertools.accumulate``, sequential by definition).
    """
    s = np.cumsum(x)
    if x.size > 1 and not np.array_equal(s[1:], s[:-1] + x[1:]):  # pragma: no cover - numpy is sequential
        s = np.fromiter(itertools.accumulate(x.tolist()), dtype=float, count=x.size)
    return s


def _two_sum_err(a, b, s):
    """Exact ``a + b - s`` for ``s = fl(a + b)`` (Knuth's TwoSum), elementwise."""
    bb = s - a
    return (a - (s - bb)) + (b - bb)


def _head_end(c: float, t: int) -> int:
    """Largest ``J <= t`` with ``J^2 c <= 690`` (``w(J) >= e^-690``, a normal double)."""
    if not c < math.inf:
        return 0
    if c == 0.0:
        return t
    J = min(t, int(math.sqrt(_HEAD_LOG / c)))
    while J > 0 and float(J) * J * c > _HEAD_LOG:
        J -= 1
    while J < t and float(J + 1) * (J + 1) * c <= _HEAD_LOG:
        J += 1
    return J


class GaussianKernel(LogConcaveKernel):
    """``w(k) = exp(-k^2 / (2 sigma^2))`` on ``|k| <= t``; one log suffix-sum array with error bounds."""

    def __init__(self, sigma: float, t: int):
        self.sigma = float(sigma)
        self.t = int(t)
        check_gaussian_s(2 * self.t + 1)
        # sigma^2 may underflow to 0: then c = inf (a point mass at 0), handled by log_w
        den = 2.0 * self.sigma * self.sigma
        self._c = 1.0 / den if den > 0 else math.inf
        # rigorous bounds on c = 1 / (2 sigma^2) (sigma^2 subnormal or overflowing included)
        s2 = self.sigma * self.sigma
        s2_dn = max(float(dn(s2)), 0.0)
        s2_up = float(up(s2))
        den_dn = min(2.0 * s2_dn, float(np.finfo(float).max))
        self._c_up = float(up(1.0 / den_dn)) if den_dn > 0 else math.inf
        self._c_dn = max(float(dn(1.0 / (2.0 * s2_up))), 0.0) if 2.0 * s2_up < math.inf else 0.0
        self._s2 = (s2_dn, s2_up)
        self._J = _head_end(self._c, self.t)
        with np.errstate(all="ignore"):
            self._suffix = self._build_suffix()  # suffix[j] = log sum_{i=j}^{t} w(i)
        self._elog = None  # lazily: float32 bounds on |suffix - exact|
        self._sbounds = None  # lazily, for t < 2^22: (lower, upper) bounds on the suffix array

    def __repr__(self) -> str:
        return f"SparseGaussian(sigma={self.sigma!r}, s={2 * self.t + 1})"

    def decimal_weights(self, ctx) -> list:
        """``w(0..t)`` as Decimals in context ``ctx`` by the exact-ratio recurrence ``w(k) = w(k-1) a b^(k-1)``.

        ``a = e^{-c}``, ``b = e^{-2c}``, ``c = 1/(2 sigma^2)``; each step multiplies
        correctly rounded numbers, so ``w(k)`` has relative error below ``(k^2 + 2)``
        units of the context's precision (used by :mod:`sparseldp.sampling`).
        """
        import decimal

        D = decimal.Decimal
        with decimal.localcontext(ctx):
            w = [D(1)]
            sig = D(self.sigma)
            c = D(1) / (2 * sig * sig)
            a = (-c).exp()
            b = a * a
            m = a
            for _ in range(self.t):
                w.append(w[-1] * m)
                m = m * b
        return w

    def log_w(self, k):
        k = np.asarray(k, dtype=float)
        if np.isinf(self._c):  # sigma so small that sigma^2 underflows: w = 1{k = 0}
            return np.where(k == 0, 0.0, _NEG_INF)
        return -(k * k) * self._c

    @_quiet
    def weights(self, mode: str = "near") -> np.ndarray:
        """``w(0..t) = e^{-k^2 c}``, ``c = 1/(2 sigma^2)``: nearest, or rigorous bounds (``k^2`` is exact for
        ``k <= 2^26``; ``c`` is enclosed in ``[c_dn, c_up]``, products rounded outward, ``exp`` to 2 ulp)."""
        k = np.arange(self.t + 1, dtype=float)
        if not self._c < math.inf:
            return np.where(k == 0, 1.0, 0.0)
        if mode == "near":
            return np.exp(-(k * k) * self._c)
        if mode == "up":
            return np.where(k == 0, 1.0, _exp_up(-dn((k * k) * self._c_dn)))
        return np.where(k == 0, 1.0, _exp_dn(-up((k * k) * self._c_up)))

    # -- the suffix array ------------------------------------------------------------
    def _head_chunks(self):
        """Chunks ``(start, stop)`` of the head ``0..J``, from the top (``J``) down."""
        J = self._J
        for stop in range(J, -1, -_CHUNK):
            yield max(0, stop - _CHUNK + 1), stop

    def _build_suffix(self):
        t, c, J = self.t, self._c, self._J
        suffix = np.empty(t + 2)
        suffix[t + 1] = _NEG_INF
        if not c < math.inf:
            suffix[0] = 0.0
            suffix[1 : t + 1] = _NEG_INF
            return suffix
        # tail J+1..t in log space (every term below e^-690 of w(0) = 1)
        if J < t:
            j = np.arange(J + 1, t + 1, dtype=float)
            suffix[J + 1 : t + 1] = np.logaddexp.accumulate((-(j * j) * c)[::-1])[::-1]
            carry = math.exp(suffix[J + 1])
        else:
            carry = 0.0
        # head 0..J in linear space, summed from the small end with an exact running error term
        hi, lo = carry, 0.0
        for start, stop in self._head_chunks():
            js = np.arange(stop, start - 1, -1, dtype=float)
            xs = np.empty(js.size + 1)
            xs[0] = hi
            xs[1:] = np.exp(-(js * js) * c)
            s = _sequential_cumsum(xs)
            err = np.cumsum(_two_sum_err(s[:-1], xs[1:], s[1:]))
            err += lo
            total = s[1:] + err
            suffix[start : stop + 1] = np.log(total[::-1])
            hi = float(s[-1] + err[-1])
            lo = float(_two_sum_err(np.float64(s[-1]), np.float64(err[-1]), np.float64(hi)))
        return suffix

    @_quiet
    def _error_bounds(self):
        r"""``e[j] >= |suffix[j] - log S_j|`` (float32, rounded up), ``S_j = sum_{i >= j} w(i)`` exact.

        *Inputs.*  ``c~ = fl(1/fl(2 fl(sigma^2)))`` has ``|c~/c - 1| <= 2.0001u``;
        ``j*j`` is exact (``j <= 2^26``), so ``|log w~_j - log w_j| <= 3.0002u j^2 c``.

        *Head* (``j <= J``, ``j^2 c <= 690``).  ``x_j = fl(exp(log w~_j))`` has
        relative error ``<= 3.001u j^2 c + 4.001u``; the carry ``x_0 = fl(e^{S~_{J+1}})``
        relative error ``psi = expm1(e_{J+1}) + 4.001u`` (plus ``2^-1074``
        absolute).  The prefix sums are error-free transformations (TwoSum per
        step, the errors summed separately): ``|sum~ - sum x| <= (u + (N u)^2) sum~``.
        Hence ``rho_j = (3.001u M_j + psi x_0 + 2^-1074) / S~_j + 4.002u + 1.01 (u + (Nu)^2)``
        with ``M_j = sum_{i=j}^{J} x_i i^2 c`` (a running sum, relative error
        ``<= N u``, covered by a factor 1.001), and ``e_j = 1.01 rho_j + 4.002u |suffix_j|``
        (the last term: ``log`` to 2 ulp).

        *Tail* (``J < j <= J2``, ``J2`` the first ``j`` with ``(2j + 1) c >= 40``).  ``np.logaddexp(a, b) =
        max + log1p(exp(-|a-b|))`` errs by ``eps_m <= u (|S~_m| + 7.3)``.  For the
        ratio ``F_m = e^{S~_m} / e^{S_m}``, exactly,
        ``F_m <= e^{eps_m} (p_m F_{m+1} + (1 - p_m)(1 + Delta_m))`` with
        ``p_m = e^{S_{m+1} - S_m}`` and ``Delta_m = expm1(3.0002u m^2 c)`` (and the
        mirror image for ``1/F``), so with ``X_m = sum_{i=m}^{J2} eps_i`` and
        ``G_m = S_m - X_m`` (the products of ``p e^eps`` telescope):

        ``|F_j - 1| <= e^{-G_j} sum_{m=j}^{J2} e^{G_m} (expm1(eps_m) + e^{eps_m} (w_m/e^{S_m}) Delta_m)
        + e^{S_{J2+1} - S_j + X_j} |F_{J2+1} - 1|``.

        This is evaluated with ``np.logaddexp.accumulate`` using ``S~`` for
        ``S``; by induction from ``J2`` down, as long as every bound is
        ``<= 0.004`` the substitution changes it by a factor ``<= 1.011``, and a
        factor 1.03 is applied (the sum is at most ``u t / 2`` in practice).  Beyond
        ``J2``, and wherever the induction would fail, the closed-form bounds
        ``w_j <= S_j <= w_j / (1 - e^{-(2j+1) c})`` are used (tight to ``e^-40``
        beyond ``J2``).
        """
        if self._elog is not None:
            return self._elog
        t, c, J = self.t, self._c, self._J
        suffix = self._suffix
        e = np.zeros(t + 2)
        if not c < math.inf:
            self._elog = np.zeros(t + 2, dtype=np.float32)
            return self._elog
        N = float(t + 2)
        comp = 1.01 * (U + (N * U) ** 2)
        # tail
        if J < t:
            # the recurrence up to where the kernel is steep ((2j + 1) c >= 40): beyond, the closed
            # form is tight (relative width e^-40), and so is the bound it hands the recurrence at J2 + 1
            J2 = t if c == 0.0 else min(t, max(J, int(math.ceil((_STEEP / c - 1.0) / 2.0))))
            if J2 < t:
                j = np.arange(J2 + 1, t + 1, dtype=float)
                lo_a, up_a = self._closed_tail_bounds(j)
                S = suffix[J2 + 1 : t + 1]
                e[J2 + 1 : t + 1] = up(np.maximum(up_a - S, S - lo_a))
                lo_a1, up_a1 = float(lo_a[0]), float(up_a[0])
                S1 = float(suffix[J2 + 1])
                F1 = float(max(up(np.expm1(S1 - lo_a1)), up(-np.expm1(S1 - up_a1)), 0.0)) * (1 + 8 * U)
            else:
                up_a1, F1 = _NEG_INF, 0.0
            failed_below = None
            acc, X = _NEG_INF, 0.0
            for stop in range(J2, J, -_CHUNK):
                start = max(J + 1, stop - _CHUNK + 1)
                j = np.arange(stop, start - 1, -1, dtype=float)  # descending
                S = suffix[start : stop + 1][::-1]
                logw = -(j * j) * c
                epsm = U * (np.abs(S) + 7.3) * 1.001
                Xc = np.cumsum(epsm) + X  # X_m = sum_{i=m}^{J2} eps_i
                delta = np.expm1(3.0002 * U * (j * j) * c) * 1.001
                with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                    y = np.expm1(epsm) * 1.001 + np.exp(epsm) * np.exp(logw - S) * delta
                    G = S - Xc
                    a = np.logaddexp.accumulate(np.concatenate([[acc], G + np.log(y)]))[1:]
                    E = np.exp(a - G)
                    if F1 > 0:
                        E = E + np.exp(up_a1 - S + Xc) * F1
                E = E * 1.03
                ok = E <= 0.004
                if not ok.all():
                    first = int(np.argmin(ok))
                    failed_below = int(j[first])  # this index and every smaller one use the closed form
                    E[first:] = np.inf
                e[start : stop + 1] = (1.01 * E)[::-1]
                acc, X = float(a[-1]), float(Xc[-1])
                if failed_below is not None:
                    break
            if failed_below is not None:  # pragma: no cover - needs |S| * length * u near 1e-3
                j = np.arange(J + 1, failed_below + 1, dtype=float)
                lo_a, up_a = self._closed_tail_bounds(j)
                S = suffix[J + 1 : failed_below + 1]
                e[J + 1 : failed_below + 1] = up(np.maximum(up_a - S, S - lo_a))
            e_carry = float(e[J + 1])
            carry = math.exp(suffix[J + 1])
        else:
            e_carry, carry = 0.0, 0.0
        psi = (math.expm1(e_carry) * 1.001 + 4.001 * U) if e_carry < 1.0 else math.inf
        carry_err = (psi * carry if carry > 0 else 0.0) + 2.0**-1074
        # head: recompute the chunks (deterministic: the same values as the construction)
        hi, lo, M = carry, 0.0, 0.0
        for start, stop in self._head_chunks():
            js = np.arange(stop, start - 1, -1, dtype=float)
            xs = np.empty(js.size + 1)
            xs[0] = hi
            q = (js * js) * c
            xs[1:] = np.exp(-q)
            s = _sequential_cumsum(xs)
            err = np.cumsum(_two_sum_err(s[:-1], xs[1:], s[1:]))
            err += lo
            total = s[1:] + err
            if not np.array_equal(np.log(total[::-1]), suffix[start : stop + 1]):  # pragma: no cover
                raise RuntimeError("internal error: the Gaussian head sums are not reproducible")
            Ms = np.cumsum(xs[1:] * q) + M
            rho = (3.001 * U * Ms * 1.001 + carry_err) / total * 1.001 + 4.002 * U + comp
            ls = suffix[start : stop + 1][::-1]
            e[start : stop + 1] = (1.01 * rho + 4.002 * U * np.abs(ls))[::-1]
            hi = float(s[-1] + err[-1])
            lo = float(_two_sum_err(np.float64(s[-1]), np.float64(err[-1]), np.float64(hi)))
            M = float(Ms[-1])
        e32 = e.astype(np.float32)
        e32 = np.where(e32.astype(float) < e, np.nextafter(e32, np.float32(np.inf)), e32)
        self._elog = e32
        return e32

    def _closed_tail_bounds(self, j):
        """``[log w_j, log w_j - log(1 - e^{-(2j+1) c})]`` as rigorous (lower, upper) bounds on ``log S_j``."""
        with np.errstate(over="ignore", invalid="ignore"):
            jj = j * j  # exact for j <= 2^26
            lo = -up(jj * self._c_up)
            hi = up(-dn(jj * self._c_dn) - _log1mexp(dn((2.0 * j + 1.0) * self._c_dn), "dn"))
        return lo, hi

    def _suffix_bounds(self, idx, side):
        """Lower (``side="dn"``) or upper bounds on ``log S_j`` at the indices ``idx``."""
        if self._sbounds is None and self.t < (1 << 22):
            e = self._error_bounds().astype(float)
            self._sbounds = (dn(self._suffix - e), up(self._suffix + e))
        if self._sbounds is not None:
            return self._sbounds[0 if side == "dn" else 1][idx]
        e = self._error_bounds()[idx].astype(float)
        return dn(self._suffix[idx] - e) if side == "dn" else up(self._suffix[idx] + e)

    def _range_nonneg(self, a, b, mode):
        a = np.asarray(a, dtype=np.int64)
        b = np.minimum(np.asarray(b, dtype=np.int64), self.t)
        empty = a > b
        top = self.t + 1
        ai = np.minimum(np.maximum(a, 0), top)
        bi = np.minimum(np.maximum(b + 1, 0), top)
        if mode == "near":
            val = logsubexp(self._suffix[ai], self._suffix[bi])
        elif mode == "up":
            val = _logsubexp(self._suffix_bounds(ai, "up"), self._suffix_bounds(bi, "dn"), "up")
        else:
            val = _logsubexp(self._suffix_bounds(ai, "dn"), self._suffix_bounds(bi, "up"), "dn")
        return np.where(empty, _NEG_INF, val)

    def tail_bound(self) -> float:
        """Rigorous upper bound on ``sum_{j > t} w(j)``.

        For ``j >= t+1``, ``j^2 >= (t+1)^2 + 2(t+1)(j-t-1)``, so the tail is at most
        the geometric series ``w(t+1) / (1 - exp(-(t+1)/sigma^2))``.
        """
        u = float(self.t + 1)
        with np.errstate(all="ignore"):
            arg = up(-dn(u * u * self._c_dn) - _log1mexp(dn(2.0 * u * self._c_dn), "dn"))
            return float(_exp_up(arg))

    def last_excess_index(self, h, eps):
        """Largest ``k`` with ``(h^2 - 2kh)/(2 sigma^2) > eps``: ``k < kappa_h`` (Proposition 2), rounded."""
        h = np.asarray(h, dtype=float)
        eps = np.asarray(eps, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            kappa = h / 2.0 - np.where(eps > 0, self.sigma * self.sigma * eps, 0.0) / h  # never inf * 0
            k = np.ceil(kappa) - 1.0
        return np.where(h > 0, k, -np.inf)

    @_quiet
    def numerator_terms(self, eps, h, mode):
        r"""The defect numerator ``Gamma_t delta_h(eps)`` as nonnegative log terms (Theorem 9).

        Leakage ``sum_{k=-t}^{h-t-1} w(k)``; overlap ``A - e^eps B`` with
        ``A = sum_{k=h-t}^{K} w(k)``, ``B = sum_{k=-t}^{K-h} w(k)`` and ``K`` the
        last index below Proposition 2's ``kappa_h = h/2 - sigma^2 eps / h``.
        For the bounds ``kappa`` is enclosed in ``[kappa_dn, kappa_up]`` (directed
        rounding); indices ``k <= K_lo = ceil(kappa_dn) - 1`` are certainly in the
        excess set, and the at most few indices in ``(K_lo, K_hi]`` have
        ``0 <= L(k) - eps <= 2 h c (kappa_up - kappa_dn)``, so their positive parts
        are at most ``w(k) min(1, 2 h c (kappa_up - kappa_dn))`` (an extra term
        of the upper bound; the lower bound omits them).
        """
        t = self.t
        terms = [(self._range(np.full_like(h, -t), h - t - 1, mode), h >= 1, "leak")]
        lo = h - t
        if mode == "near":
            last = self.last_excess_index(h, eps)
            last = np.minimum(np.maximum(last, lo - 1), t).astype(np.int64)
            nonempty = (last >= lo) & (h >= 1)
            a_hi = np.where(nonempty, last, lo)
            log_a = self._range(lo, a_hi, "near")
            log_b = self._range(np.full_like(lo, -t), a_hi - h, "near")
            ov = np.where(nonempty, logsubexp(log_a, eps + log_b), _NEG_INF)
            terms.append((ov, nonempty, "overlap"))
            return terms
        hf = h.astype(float)
        s2_dn, s2_up = self._s2
        se_up = up(s2_up * eps)
        se_dn = np.maximum(dn(s2_dn * eps), 0.0)
        k_up = up(hf / 2.0 - dn(se_dn / hf))
        k_dn = dn(hf / 2.0 - up(se_up / hf))
        pos_h = h >= 1
        lof = lo - 1.0
        K_lo = np.ceil(k_dn) - 1.0
        K_hi = np.ceil(k_up) - 1.0
        K_lo = np.where(pos_h & np.isfinite(K_lo), np.minimum(np.maximum(K_lo, lof), float(t)), lof).astype(np.int64)
        K_hi = np.where(pos_h & np.isfinite(K_hi), np.minimum(np.maximum(K_hi, lof), float(t)), lof).astype(np.int64)
        K_hi = np.maximum(K_hi, K_lo)
        nonempty = K_lo >= lo
        a_hi = np.where(nonempty, K_lo, lo)
        log_a = self._range(lo, a_hi, mode)
        log_b = self._range(np.full_like(lo, -t), a_hi - h, _flip(mode))
        if mode == "up":
            ov = _logsubexp(log_a, dn(eps + log_b), "up")
        else:
            ov = _logsubexp(log_a, up(eps + log_b), "dn")
        terms.append((np.where(nonempty, ov, _NEG_INF), nonempty, "overlap"))
        if mode == "up":
            edge = K_hi > K_lo
            if edge.any():
                F = up(up(2.0 * hf * self._c_up) * up(k_up - k_dn))
                lf = _log_up(np.minimum(np.where(edge, F, 0.0), 1.0))
                b_lo = np.where(edge, K_lo + 1, lo)
                b_hi = np.where(edge, K_hi, lo)
                lb = _add(self._range(b_lo, b_hi, "up"), lf, "up")
                terms.append((np.where(edge, lb, _NEG_INF), edge, "overlap"))
        return terms

    def moment_sums(self):
        t = self.t
        if t == 0:
            return 0.0, 0.0
        # beyond j = 40 sigma + 1 every term is below e^{-800}: exactly zero in double
        jmax = int(min(t, np.ceil(40.0 * self.sigma) + 1))
        s1 = s2 = 0.0
        chunk = 1 << 22
        for start in range(1, jmax + 1, chunk):
            j = np.arange(start, min(jmax, start + chunk - 1) + 1, dtype=float)
            wj = np.exp(-(j * j) * self._c)
            s1 += float((j * wj).sum())
            s2 += float((j * j * wj).sum())
        return s1, s2


# ---------------------------------------------------------------------------
# a general kernel: any nonnegative symmetric weights on the window
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


def check_weights(weights, name: str = "weights") -> np.ndarray:
    """Validate kernel weights ``w(0), ..., w(t)``: a 1-d array of finite reals ``>= 0`` with ``w(0) > 0``.

    Returns a read-only float64 copy (``-0.0`` becomes ``0.0``).  ``TypeError``
    for a non-numeric argument, ``ValueError`` (naming the argument, the
    allowed range and the value) otherwise.
    """
    allowed = "a 1-d sequence of finite real numbers >= 0 (w(0), ..., w(t)) with w(0) > 0"
    if isinstance(weights, (str, bytes)) or callable(weights):
        raise TypeError(f"{name} must be {allowed}; got {type(weights).__name__} {weights!r}"[:300])
    arr = np.asarray(weights)
    if arr.dtype.kind == "b" or (arr.dtype.kind == "O" and any(isinstance(v, (bool, np.bool_)) for v in arr.flat)):
        raise TypeError(f"{name} must be {allowed}; got booleans {weights!r}"[:300])
    if arr.dtype.kind not in "iuf":
        try:
            if arr.dtype.kind in "cSUV":
                raise TypeError
            arr = arr.astype(float)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be {allowed}; got {type(weights).__name__} {weights!r}"[:300]) from None
    if arr.ndim != 1 or arr.size < 1:
        raise ValueError(f"{name} must be {allowed}; got an array of shape {arr.shape}")
    if arr.size > (MAX_KERNEL_S + 1) // 2:
        raise ValueError(f"{name} must have at most {(MAX_KERNEL_S + 1) // 2} entries (s <= {MAX_KERNEL_S}); "
                         f"got {arr.size}")
    with np.errstate(over="ignore", invalid="ignore"):
        w = np.asarray(arr, dtype=float) + 0.0
    bad = ~(np.isfinite(w) & (w >= 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name} must be {allowed}; got {name}[{i}] = {arr[i].item()!r}")
    if not w[0] > 0:
        raise ValueError(f"{name}[0] = w(0) must be a real number > 0 (every input can report itself); got {arr[0].item()!r}")
    w = w.copy()
    w.setflags(write=False)
    return w


#: Largest support of a general kernel: its accounting is O(s) per separation and its sampler keeps
#: one exact count per offset (the sampler's own limit, 2^22 + 1).
MAX_KERNEL_S = (1 << 22) + 1


def _exact_log_concave(w) -> bool:
    """Whether ``w(0..t)`` (mirrored, zero beyond) is log-concave, decided exactly.

    Log-concave on Z iff the support is an interval and ``w(k)^2 >= w(k-1) w(k+1)``
    inside it.  With ``w = m 2^e`` (``frexp``, ``m`` in ``[1/2, 1)``) the products
    of mantissas are formed error-free (Dekker's ``TwoProduct``, no underflow
    since ``m >= 1/2``) and compared together with the exponent sums.
    """
    pos = w > 0
    m_last = int(np.flatnonzero(pos)[-1])
    if not pos[: m_last + 1].all():
        return False
    if m_last == 0:
        return True
    v = w[: m_last + 1]
    full = np.concatenate([[0.0], v[:0:-1], v, [0.0]])  # w(-m-1..m+1): zero beyond the support
    mid, lo, hi = full[1:-1], full[:-2], full[2:]
    keep = (lo > 0) & (hi > 0)  # where a neighbour is 0 the inequality holds trivially
    mid, lo, hi = mid[keep], lo[keep], hi[keep]
    if mid.size == 0:
        return True
    fm, em = np.frexp(mid)
    fl, el = np.frexp(lo)
    fh, eh = np.frexp(hi)
    p1, e1 = _two_prod(fm, fm)
    p2, e2 = _two_prod(fl, fh)
    D = 2 * em.astype(np.int64) - (el.astype(np.int64) + eh.astype(np.int64))
    # p1 + e1 in [1/4, 1), p2 + e2 in [1/4, 1): D >= 2 decides ">", D <= -2 decides "<"
    Dc = np.clip(D, -1, 1)
    q1, r1 = np.ldexp(p1, Dc), np.ldexp(e1, Dc)  # exact: a power-of-two scaling of normal numbers
    ge = (q1 > p2) | ((q1 == p2) & (r1 >= e2))
    ok = np.where(D >= 2, True, np.where(D <= -2, False, ge))
    return bool(ok.all())


class GeneralKernel(Kernel):
    r"""Any symmetric nonnegative kernel: ``w(k) = weights[|k|]`` on ``|k| <= t = len(weights) - 1``.

    No shape is assumed: the accountant sums ``[P(y|0) - e^eps P(y|h)]_+``
    over the window directly (:mod:`sparseldp.core.accounting`, generic path), so
    zeros inside the window and non-monotone (e.g. staircase) weights are
    fine.  ``log_concave`` is ``True`` only when verified exactly
    (:func:`_exact_log_concave`); it is informational, no path relies on it.

    Scale and rounding: the weights are stored scaled by the power of two
    ``2^-E`` that brings the largest into ``[1/2, 1)`` (so no sum overflows).
    That scaling is exact unless a scaled weight falls into the subnormal
    range; :meth:`weights` then brackets the exact scaled value by one unit
    each way (``"dn"``/``"up"``), so every bound stays rigorous.
    """

    def __init__(self, weights):
        w = check_weights(weights)
        self.t = int(w.size - 1)
        self._orig = w
        E = int(np.frexp(np.max(w))[1])
        ws = np.ldexp(w, -E)
        back = np.ldexp(ws, E)  # exact: scaling back up cannot round
        w_dn = np.where(back > w, np.maximum(dn(ws), 0.0), ws)
        w_up = np.where(back < w, up(ws), ws)
        self._w = {"near": ws, "dn": w_dn, "up": w_up}
        for a in self._w.values():
            a.setflags(write=False)
        with np.errstate(divide="ignore"):
            self._logw = np.log(ws)
        self._cum = {}
        self.log_concave = _exact_log_concave(ws)

    def __repr__(self) -> str:
        w = self._orig
        shown = ", ".join(repr(float(v)) for v in w[:6]) + (", ..." if w.size > 6 else ("," if w.size == 1 else ""))
        return f"SparseKernel(weights=({shown}), s={2 * self.t + 1})"

    @property
    def original_weights(self) -> np.ndarray:
        """The weights as given (read-only), before the power-of-two scaling."""
        return self._orig

    def weights(self, mode: str = "near") -> np.ndarray:
        return self._w[mode]

    def log_w(self, k):
        k = np.abs(np.asarray(k))
        inside = k <= self.t
        idx = np.where(inside, k, 0).astype(np.int64)
        return np.where(inside, self._logw[idx], _NEG_INF)

    def log_normalizer_bound(self, mode: str) -> float:
        key = "_logc_" + mode
        got = self.__dict__.get(key)
        if got is None:
            c = normalizer_bound(self._w[mode], mode)
            with np.errstate(divide="ignore"):
                got = float(np.log(c)) if mode == "near" else float(log_up(c) if mode == "up" else log_dn(c))
            self.__dict__[key] = got
        return got

    @_quiet
    def log_range(self, a, b, mode="near"):
        """``log sum_{k=a}^{b} w(|k|)`` summed directly over the window (O(s) per range, in chunks);
        bounds from outward-bounded weights and :func:`bounded_sum`."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        a, b = np.broadcast_arrays(a, b)
        shape = a.shape
        af, bf = a.reshape(-1), b.reshape(-1)
        t = self.t
        full = np.concatenate([self._w[mode][:0:-1], self._w[mode]])  # w(-t..t)
        k = np.arange(-t, t + 1, dtype=np.int64)
        out = np.empty(af.size)
        rows = max(1, (1 << 20) // full.size)
        for start in range(0, af.size, rows):
            lo, hi = af[start : start + rows, None], bf[start : start + rows, None]
            x = np.where((k[None, :] >= lo) & (k[None, :] <= hi), full[None, :], 0.0)
            s = bounded_sum(x, axis=1, mode=mode)
            out[start : start + rows] = np.log(s) if mode == "near" else (_log_up(s) if mode == "up" else _log_dn(s))
        return out.reshape(shape)

    def moment_sums(self):
        if self.t == 0:
            return 0.0, 0.0
        j = np.arange(1, self.t + 1, dtype=float)
        wj = self._w["near"][1:]
        return float(np.sum(j * wj)), float(np.sum(j * j * wj))

    def decimal_weights(self, ctx) -> list:
        """The given ``w(0..t)`` as Decimals: ``Decimal(float)`` is exact (``ctx`` is not needed)."""
        import decimal

        return [decimal.Decimal(v) for v in self._orig.tolist()]


def normalizer_bound(w, mode: str) -> float:
    """``C = w(0) + 2 sum_{j=1}^t w(j)`` from weights ``w(0..t)`` (bounds when ``w`` holds bounds):
    nearest, or a rigorous upper (``"up"``) / lower (``"dn"``) bound (:func:`bounded_sum`)."""
    rest = float(bounded_sum(w[1:], mode=mode)) if w.size > 1 else 0.0
    c = float(w[0]) + 2.0 * rest  # 2 x is exact
    if mode == "near" or rest == 0.0:
        return c
    return float(up(c) if mode == "up" else dn(c))
