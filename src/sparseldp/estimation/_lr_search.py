"""The search behind :mod:`~sparseldp.estimation.likelihood_ratio`: one end of a likelihood-ratio interval.

:class:`_Search` holds the report counts on the observed outputs, the channel's products and the MLE; its
:meth:`~_Search.upper` bounds ``max h^T p`` over ``{loglik >= L0}`` from outside by tilted MLEs on a row-scaled
channel, and :meth:`~_Search.ends` and :meth:`~_Search.quantile_ends` turn that into the two ends of a linear
statistic and of a quantile.  The bound, the search and what they cost are in the docstring of
:mod:`sparseldp.estimation.likelihood_ratio`.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from ._ipm import _ipm, _ipm_affordable
from ._parallel import concurrently
from ._path import _SIDE_BY_SIDE_K
from .mle import _certificate, _mle
from .stats import _edges, _reach_level, _stay_level

# A tilted fit within this many nats of the set's boundary ends the root search (U then exceeds
# the exact end by about (this + gap) se / 2: 0.5 % of the half width at the default).
_BOUNDARY_TOL = 0.02
# Tilted fits per end at most.
_MAX_SOLVES = 40
# The largest tilt: beta = 1 - this (h's top values then weigh 10^9 times the others).
_BETA_GAP = 1e-9
# Bisection steps inside a cell for interpolated quantiles (ends rounded outwards by 1/2^this of a cell).
_CELL_STEPS = 8


class _Search:
    """The ends of likelihood-ratio intervals of the counts ``c`` (on the outputs that are ``A``'s columns).

    ``A``/``AT``: the column-scaled channel (dense or sparse); ``band``: its FFT banded Gram, or ``None``;
    ``width``: its Gram's superdiagonals (0 when dense); ``mle`` and ``loglik``: the MLE and its
    log-likelihood on these columns; ``tol``/``max_iter``: each tilted fit's certified gap and EM cap."""

    def __init__(self, A, AT, c, n: int, values, mle, loglik: float, dense: bool, tol: float, max_iter: int,
                 width: int, band):
        self._A, self._AT, self._c, self.n = A, AT, c, n
        self.values, self.mle, self.loglik = values, mle, loglik
        self._dense, self._tol, self._max_iter, self._width, self._band = dense, tol, max_iter, width, band
        # an interval's two ends are independent: side by side on large sparse channels (the banded Cholesky and
        # the products release the GIL; on small or dense ones threads only contend, as in _path)
        self._threads = 2 if (not dense and mle.size >= _SIDE_BY_SIDE_K) else 1

    # -- one end -------------------------------------------------------------------------
    def _loglik(self, p) -> float:
        q = self._AT @ p
        if np.any(q <= 0):
            return -math.inf
        return float(self._c @ np.log(q))

    def _tilted(self, w, start):
        """The tilted fit of ``w`` from ``start`` (a distribution): ``(p, loglik, M_upper)``."""
        A, AT = self._A, self._AT
        if self._dense:
            B, BT = A / w[:, None], AT / w[None, :]
        else:
            B, BT = sp.csr_array(sp.diags_array(1.0 / w) @ A), sp.csr_array(AT @ sp.diags_array(1.0 / w))
        s = w * start
        s = np.maximum(s / s.sum(), 0.0)
        s = (1.0 - 1e-9) * s / s.sum() + 1e-9 / s.size  # EM keeps exact zeros: leave every value reachable
        n = float(self.n)
        c = self._c
        pp = None
        if _ipm_affordable(s.size, B.shape[1], self._dense, self._width):
            # the interior point from the warm start, centred at the start's own certificate (_ipm._ipm)
            q0 = BT @ s
            gap0 = _certificate(B, c, q0, n)
            band = None if self._band is None else _row_scaled_band(self._band, 1.0 / w)
            pp, _, conv, gap = _ipm(B, BT, c, n, self._tol, self._dense, band, p0=s, gap0=max(gap0, self._tol))
            if not conv:  # (a factorization failed on the way): once more from the uniform start
                pu, _, conv, gap_u = _ipm(B, BT, c, n, self._tol, self._dense, band)
                pp = pu if conv or gap_u < gap else pp
            if not conv:  # then EM and Newton (mle._mle) from the better point
                s, pp = pp, None
        if pp is None:
            pp, _, _, _, _ = _mle(B, BT, c, n, s.size, self._tol, self._max_iter, self._dense, p0=s)
        pp = np.maximum(pp, 0.0)
        pp /= pp.sum()
        q = BT @ pp
        if np.any(q <= 0):
            return None
        lb = float(self._c @ np.log(q))
        cert = _certificate(B, self._c, q, n)  # the exact certificate at pp
        p = pp / w
        p /= p.sum()
        return p, self._loglik(p), lb + cert

    def upper(self, h, L0, threshold=None, memo=None) -> float:
        """An outer bound of ``max h^T p`` over the set ``loglik >= L0`` (``h`` in ``[0, 1]``).

        With ``threshold`` only the side of it matters (the quantiles' bisection): the search stops at
        the first bound below it, or at the first point of the set at or above it (then the bound
        returned, at least that point's value, is at or above it too).  ``memo`` (a dict) carries the
        last tilt from one call to the next: the quantiles' probes of neighbouring CDF values start
        where the previous one ended instead of at the naive standard error's tilt."""
        if float(h.max()) <= 0.0:
            return 0.0
        if float(h.min()) >= 1.0:
            return 1.0
        n = float(self.n)
        theta0 = float(h @ self.mle)
        best = 1.0
        p_warm = self.mle

        def evaluate(beta, warm):
            nonlocal best, inner, decided
            out = self._tilted(1.0 - beta * h, warm)
            if out is None:
                return None
            p, ll, M = out
            best = min(best, -math.expm1((L0 - M) / n) / beta)
            if ll >= L0:  # a point of the set: the end is at least its value (which no rounding may undercut)
                inner = max(inner, float(h @ p))
            if threshold is not None and (max(best, inner) < threshold or inner >= threshold):
                decided = True
            return p, ll - L0

        decided = False
        inner = theta0  # the MLE is in the set

        # Near the MLE the set's frontier is quadratic: the drop d(beta) = loglik(MLE) - loglik(p_beta) grows
        # as (n beta se)^2 / 2, so log d is about linear in u = log beta (slope 2).  The search steps to
        # d = kappa along that line, its slope re-estimated from the last two fits (a secant on log d),
        # inside the bracket of fits on either side of the boundary once there is one (else bisection).
        kappa = self.loglik - L0
        var = max(theta0 * (1.0 - theta0), 1.0 / n)  # the naive standard error's beta: the first guess
        u_max = math.log1p(-_BETA_GAP)
        u = min(u_max, math.log(min(0.5, math.sqrt(2.0 * kappa / (n * var)))))
        if memo is not None and memo.get("u") is not None:
            u = min(u_max, memo["u"])
        lo = hi = prev = None  # u with r > 0 (inside the set), u with r < 0; the last (u, log d)
        for _ in range(_MAX_SOLVES):
            out = evaluate(math.exp(u), p_warm)
            if memo is not None:
                memo["u"] = u
            if out is None:
                break
            p, r = out
            if abs(r) <= _BOUNDARY_TOL or decided:
                break
            if r > 0:
                lo, p_warm = u, p
                if u >= u_max:  # h's top is reachable inside the set
                    break
            else:
                hi = u
            d = kappa - r
            slope = 2.0
            if prev is not None and d > 0 and u != prev[0]:
                est = (math.log(d) - prev[1]) / (u - prev[0])
                if 0.25 <= est <= 8.0:
                    slope = est
            step = math.log(kappa / d) / slope if d > 0 else math.log(4.0)
            step = max(-math.log(16.0), min(math.log(16.0), step))
            if d > 0:
                prev = (u, math.log(d))
            u_new = min(u_max, u + step)
            if lo is not None and hi is not None:
                if hi - lo < 1e-9:
                    break
                if not (lo < u_new < hi):
                    u_new = 0.5 * (lo + hi)
            u = u_new
        return min(max(best, inner), 1.0)

    def ends(self, h, kappa):
        """``(lo, hi)`` of ``h^T p`` for any real ``h`` (affine rescaling to ``[0, 1]``)."""
        h = np.asarray(h, dtype=float)
        h0, h1 = float(h.min()), float(h.max())
        if h1 == h0:
            return h0, h0
        g = (h - h0) / (h1 - h0)
        L0 = self.loglik - kappa
        hi, top = concurrently(lambda: self.upper(g, L0), lambda: self.upper(1.0 - g, L0), threads=self._threads)
        lo = 1.0 - top
        return h0 + (h1 - h0) * max(lo, 0.0), h0 + (h1 - h0) * min(hi, 1.0)

    def quantile_ends(self, q: float, kappa: float, interp: bool):
        """``{t : q in CI(F(t))}``: from the first ``t`` whose upper CDF end reaches ``q`` to the first whose
        lower end does (domain values), or (interpolated) to the last whose lower end stays at or below ``q``."""
        v = self.values
        k = v.size
        L0 = self.loglik - kappa
        reach = _reach_level(q)

        up_memo, down_memo = {}, {}  # one per end (they may run in two threads)

        def upper_cdf(i):  # outer upper end of F(v_i) (its side of the reach level)
            return self.upper((np.arange(k) <= i).astype(float), L0, reach, up_memo)

        def lower_cdf(i, level):  # outer lower end of F(v_i) (its side of level)
            return 1.0 - self.upper((np.arange(k) > i).astype(float), L0, 1.0 - level, down_memo)

        # the MLE's quantile: its CDF reaches q there and not below, so the ends lie on either side of it
        start = int(np.minimum(np.searchsorted(np.cumsum(self.mle), reach), k - 1))

        def first(pred):  # first index in 0..k-1 with pred true (pred monotone), k - 1 if none
            return _first_true(pred, start, k)

        e = _edges(v)
        stay = _stay_level(q)

        def h_at(i, u):  # the grouped-data CDF at fraction u of cell i: F(v_{i-1}) + u p_i
            h = (np.arange(k) < i).astype(float)
            h[i] = u
            return h

        def cell_point(i, pred, outward_low):
            lo, hi = 0.0, 1.0
            for _ in range(_CELL_STEPS):
                mid = 0.5 * (lo + hi)
                if pred(i, mid):
                    hi = mid
                else:
                    lo = mid
            return e[i] + (lo if outward_low else hi) * (e[i + 1] - e[i])

        def low_end():  # the first t whose upper CDF end reaches q: in cell i_lo (its right edge is v_{i_lo})
            i_lo = first(lambda i: upper_cdf(i) >= reach)
            if not interp:
                return float(v[i_lo])
            return cell_point(i_lo, lambda i, u: self.upper(h_at(i, u), L0, reach, up_memo) >= reach, True)

        def high_end():  # the first value whose lower CDF end reaches q; interpolated: the last t whose lower
            if not interp:  # end stays at or below q, in the cell j where it first exceeds q
                return float(v[first(lambda i: lower_cdf(i, reach) >= reach)])
            j = first(lambda i: lower_cdf(i, stay) > stay)
            if lower_cdf(j, stay) <= stay:
                return float(e[-1])
            return cell_point(j, lambda i, u: 1.0 - self.upper(1.0 - h_at(i, u), L0, 1.0 - stay, down_memo) > stay,
                              False)

        t_lo, t_hi = concurrently(low_end, high_end, threads=self._threads)
        return t_lo, t_hi


def _first_true(pred, start: int, k: int) -> int:
    """The first ``i`` in ``0..k-1`` with ``pred(i)`` for a monotone ``pred`` (False, then True), ``k - 1`` if
    none: galloping from ``start`` (steps 1, 2, 4, ... away from it), then bisection, so the calls grow with
    the log of the distance from ``start``, not of ``k``."""
    if pred(start):
        hi, lo, step = start, -1, 1
        while hi - step >= 0:
            j = hi - step
            if not pred(j):
                lo = j
                break
            hi, step = j, 2 * step
    else:
        lo, hi, step = start, k - 1, 1
        while lo + step < k - 1:
            j = lo + step
            if pred(j):
                hi = j
                break
            lo, step = j, 2 * step
    while hi - lo > 1:  # pred(lo) is False (or lo = -1), pred(hi) True (or hi = k - 1, by convention)
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _row_scaled_band(band, s):
    """``v -> diag(s) (A diag(v) A^T) diag(s)`` in the upper banded storage of ``band(v)`` (that of ``A``):
    the Gram of the row-scaled channel ``diag(s) A``."""

    def scaled(v):
        ab = band(v)
        rows, k = ab.shape
        i = np.arange(k)[None, :] - (rows - 1 - np.arange(rows))[:, None]  # ab[r, j] holds M[i, j]
        return ab * s[None, :] * s[np.maximum(i, 0)]

    return scaled
