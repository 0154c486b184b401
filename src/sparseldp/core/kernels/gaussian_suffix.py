r"""The Gaussian kernel's suffix array ``S_j = log sum_{i >= j} w(i)`` and its a priori error bounds.

Where ``w(j) >= e^-690`` (the *head*) it is summed in linear space with an exact running error term (a
compensated, double-double prefix sum: relative error ``u`` plus ``(N u)^2``,
independent of the length); beyond (the *tail*) with
``np.logaddexp.accumulate``.  A per-entry bound ``e_j`` on
``|S_j(computed) - S_j(exact)|`` is derived a priori (lazily, on the first
request for a bound; see :meth:`_SuffixArray._error_bounds`) and kept as
float32 rounded up.

:class:`_SuffixArray` is a base class of :class:`~.gaussian.GaussianKernel`, which sets the
attributes it reads (``t``, ``_c``, ``_c_up``, ``_c_dn``, ``_J``) and stores ``_suffix``; the error
bounds (``"elog"``) and, for ``t < 2^22``, the bound arrays (``"sbounds"``) are built lazily into the
kernel's ``_cache`` (:class:`~.base.Kernel`, "Caches").  Every range sum of the kernel is the
difference of two entries.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .rounding import U, _NEG_INF, _log1mexp, _quiet, _s_dn, _s_up, dn, up

# Gaussian head: offsets with w(j) = e^{-j^2/(2 sigma^2)} >= e^{-690} are summed in linear space.
_HEAD_LOG = 690.0
# Gaussian tail: the error recurrence is used while (2j + 1) / (2 sigma^2) < 40, closed-form bounds beyond.
_STEEP = 40.0
_CHUNK = 1 << 20


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


class _BoundAt:
    """One side of the suffix bounds, computed per index (``.item(i)``) for the largest windows."""

    def __init__(self, kernel, side: str):
        self.kernel, self.side = kernel, side

    def item(self, i: int) -> float:
        k = self.kernel
        e = float(k._error_bounds()[i])
        return _s_dn(k._suffix.item(i) - e) if self.side == "dn" else _s_up(k._suffix.item(i) + e)


class _SuffixArray:
    """The suffix array of :class:`~.gaussian.GaussianKernel`: its construction and its error bounds."""

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
        got = self._cache.get("elog")
        if got is not None:
            return got
        t, c, J = self.t, self._c, self._J
        suffix = self._suffix
        e = np.zeros(t + 2)
        if not c < math.inf:
            got = self._cache["elog"] = np.zeros(t + 2, dtype=np.float32)
            return got
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
        self._cache["elog"] = e32
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
        bounds = self._cache.get("sbounds")
        if bounds is None and self.t < (1 << 22):
            e = self._error_bounds().astype(float)
            bounds = self._cache["sbounds"] = (dn(self._suffix - e), up(self._suffix + e))
        if bounds is not None:
            return bounds[0 if side == "dn" else 1][idx]
        e = self._error_bounds()[idx].astype(float)
        return dn(self._suffix[idx] - e) if side == "dn" else up(self._suffix[idx] + e)
