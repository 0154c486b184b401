"""The fits behind the likelihood-ratio searches (:mod:`._lr_search`): tilted MLEs, one solve of the profile
problem, and the profile deficit.

:class:`_Fits` holds the report counts on the observed outputs, the channel's products and the MLE.  A *tilted*
fit (:meth:`_Fits._tilted`) is the MLE on the channel with its rows scaled by ``1 / w``, ``w = 1 - beta h``:
its certified maximum bounds the likelihood of every ``p`` with ``h^T p = t`` by ``M(beta) + n log(1 - beta t)``
(the docstring of :mod:`sparseldp.estimation.likelihood_ratio`).  :meth:`_Fits._profile_point` solves the
profile problem ``max {loglik(p) : h^T p = t}`` itself by the interior point (``_ipm._ipm(profile=...)``), whose
multiplier gives the tilt at which that bound is tight; :meth:`_Fits.deficit` brackets the profile deficit from
that solve, and from a secant over tilted fits where the solve leaves the bracket open or is not affordable.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from ._ipm import _ipm, _ipm_affordable
from ._parallel import side_by_side, small_blas
from ._roots import _Secant
from .mle import _certificate, _mle

# Tilted fits per search at most.
_MAX_SOLVES = 40
# The profile deficit's bracket (_Fits.deficit): nats.
_DEFICIT_TOL = 0.05
# The largest tilt: beta = 1 - this (h's top values then weigh 10^9 times the others).
_BETA_GAP = 1e-9
# Within one end's search, a warm-started tilted fit gets at most this many times the iterations the search's
# first fit (from the uniform start) took; one that needs more turns the search's later fits to cold starts.
_WARM_CAP = 1.5
# A warm-started solve of the profile problem starts centred at this barrier weight (nats over the values: the
# interior point's z = this / k / p), as if its start were this far from the optimum.
_WARM_GAP = 1.0


class _Fits:
    """The ends of likelihood-ratio intervals of the counts ``c`` (on the outputs that are ``A``'s columns).

    ``A``/``AT``: the column-scaled channel (dense or sparse); ``band``: its FFT banded Gram, or ``None``;
    ``width``: its Gram's superdiagonals (0 when dense); ``mle``: the MLE (``loglik``, its log-likelihood on
    these columns); ``tol``/``max_iter``: each tilted fit's certified gap and EM cap; ``low_rank``: ``A``'s
    low-rank factor (``_ipm._low_rank_of``) or ``None``."""

    def __init__(self, A, AT, c, n: int, values, mle, dense: bool, tol: float, max_iter: int, width: int, band,
                 low_rank=None):
        self._A, self._AT, self._c, self.n = A, AT, c, n
        self.values, self.mle = values, mle
        self.loglik = self._loglik(mle)
        self._dense, self._tol, self._max_iter, self._width, self._band = dense, tol, max_iter, width, band
        self._low_rank = low_rank
        # an interval's two ends are independent: side by side on large sparse channels (the banded Cholesky and
        # the products release the GIL; on small or dense ones threads only contend, as in _path)
        self._threads = 2 if side_by_side(dense, mle.size) else 1

    def blas(self):
        """A context for the searches: BLAS in one thread on a small channel (:func:`_parallel.small_blas`).
        Measured (200 values, the Gaussian design of (1, 1e-6, 5), 10^5 reports, OpenBLAS's two threads by
        default): the mean's, variance's, a range query's, three quantiles' and a CDF value's intervals
        took 0.05-0.75 s each in one thread against 0.4-12.3 s in two."""
        return small_blas(self.mle.size, self._AT.shape[0])

    # -- one end -------------------------------------------------------------------------
    def _loglik(self, p) -> float:
        q = self._AT @ p
        if np.any(q <= 0):
            return -math.inf
        return float(self._c @ np.log(q))

    def _tilted(self, w, start, starts):
        """The tilted fit of ``w`` from ``start`` (a distribution): ``(p, loglik, M_upper)``.

        ``starts`` (a dict, one per end's search) says how the interior point starts: the search's first
        fit from the uniform start (its iterations kept, ``"cold"``), later ones from ``start`` with at most
        :data:`_WARM_CAP` times that many iterations; one that needs more (a warm start whose zeros must
        revive: Gaussian kernels, where the previous point is mostly near-zero entries) turns the search's
        later fits to the uniform start (``"warm"`` false).  Measured (the CLI's default statistics, the
        Gaussian window of 349): 11-15 iterations per fit from the uniform start against 17-39 warm;
        Laplace windows: 6-8 warm against 10-11."""
        B, BT = self._scaled(w)
        s = w * start
        s = np.maximum(s / s.sum(), 0.0)
        s = (1.0 - 1e-9) * s / s.sum() + 1e-9 / s.size  # EM keeps exact zeros: leave every value reachable
        n = float(self.n)
        c = self._c
        pp = None
        low_rank = self._low_rank
        if low_rank is not None:  # the row-scaled channel's factor: L's rows scaled as A's
            low_rank = (low_rank[0] / w[:, None],) + tuple(low_rank[1:])
        if low_rank is not None or _ipm_affordable(s.size, B.shape[1], self._dense, self._width):
            band = None if self._band is None or low_rank is not None else _row_scaled_band(self._band, 1.0 / w)
            warm = starts.get("warm", True) and starts.get("cold") is not None
            conv = False
            if warm:
                # the interior point from the warm start, centred at the start's own certificate (_ipm._ipm)
                gap0 = _certificate(B, c, BT @ s, n)
                cap = max(1, math.ceil(_WARM_CAP * starts["cold"]))
                pp, _, conv, gap = _ipm(B, BT, c, n, self._tol, self._dense, band, max_steps=cap, p0=s,
                                        gap0=max(gap0, self._tol), low_rank=low_rank)
                if not conv:  # slower than from the uniform start (or a factorization failed): cold from here on
                    starts["warm"] = False
            if not conv:  # from the uniform start
                pu, steps, conv_u, gap_u = _ipm(B, BT, c, n, self._tol, self._dense, band, low_rank=low_rank)
                if conv_u and starts.get("cold") is None:
                    starts["cold"] = steps
                if not warm or conv_u or gap_u < gap:
                    pp, conv = pu, conv_u
            if not conv:  # then EM and Newton (mle._mle) from the better point
                s, pp = pp, None
        if pp is None:
            pp, _, _, _, _ = _mle(B, BT, c, n, s.size, self._tol, self._max_iter, self._dense, p0=s)
        return self._bound(w, pp, B, BT)

    def _bound(self, w, pp, B=None, BT=None):
        """``(p, loglik, M_upper)`` of a point ``pp`` of the problem tilted by ``w`` (a distribution; ``B``,
        ``BT``: the row-scaled channel, built when not given): ``M_upper`` bounds that problem's maximum by
        ``pp``'s exact certificate, and ``p`` is ``pp`` taken back (``pp / w``, renormalized); ``None`` where
        ``pp`` gives an output no probability."""
        if B is None:
            B, BT = self._scaled(w)
        pp = np.maximum(pp, 0.0)
        pp /= pp.sum()
        q = BT @ pp
        if np.any(q <= 0):
            return None
        c, n = self._c, float(self.n)
        lb = float(c @ np.log(q))
        cert = _certificate(B, c, q, n)  # the exact certificate at pp
        p = pp / w
        p /= p.sum()
        return p, self._loglik(p), lb + cert

    def _scaled(self, w):
        """The channel with its rows scaled by ``1 / w`` (the tilted problem's), and its transpose."""
        A, AT = self._A, self._AT
        if self._dense:
            return A / w[:, None], AT / w[None, :]
        return sp.csr_array(sp.diags_array(1.0 / w) @ A), sp.csr_array(AT @ sp.diags_array(1.0 / w))

    def _profile_point(self, g, t, th0, tol, warm=None):
        """One interior-point solve of the profile problem ``max {loglik(p) : g^T p = t}`` (``_ipm._ipm`` with
        ``profile``; ``g`` in ``[0, 1]``, ``th0 = g^T MLE < t``): ``(upper, lower, point, u, M)``.  ``upper`` bounds
        the profile from above through the tilt the solve's multiplier gives (its fit's certificate at the
        solve's point, as :meth:`deficit` bounds any tilt's); ``lower`` is the likelihood of ``point``, the
        solve's point mixed with the MLE (below ``t``) or with a value at ``g``'s top so that ``g^T point = t``
        exactly; ``u`` the log of the tilt (``None`` where it is not positive).  ``None`` where an interior-point
        iteration is not affordable on this channel (``_tilted``'s rule), where ``t`` is not below ``g``'s top,
        or where the solve gives no usable point.  ``M`` is the tilted problem's certified maximum behind
        ``upper`` (``inf`` without a tilt).
        ``warm`` (a dict, or ``None``): the solve starts at the point and multiplier the last solve with it left
        there (the quantiles' probes of neighbouring values), and leaves its own: on dense channels only, the first
        solve with it cold, and once a warm start takes more iterations than that one did, the later ones cold too.
        Measured (the three quantiles' intervals, 2026-12-01): randomized response on 400 values 3.9 iterations a
        solve warm against 7.7 cold; the Laplace window of 137 on 1,000 values (banded) 16.8 against 12.3, and
        the three interpolated quantiles took 6.1-6.5 s warm (the switch turning it off) against 5.5-5.7 s cold."""
        k, m = self.mle.size, self._A.shape[1]
        top = float(np.max(g))
        if not th0 < t < top:  # t at or beyond g's top: only values at the top can carry the mass (the secant's)
            return None
        if not (self._low_rank is not None or _ipm_affordable(k, m, self._dense, self._width)):
            return None
        info, p0 = {}, None
        if warm is not None and self._dense and warm.get("p") is not None and not warm.get("off"):
            info["nu"], p0 = warm["nu"], warm["p"]
        p, _, _, _ = _ipm(self._A, self._AT, self._c, float(self.n), tol, self._dense, self._band,
                          low_rank=self._low_rank, profile=(g, t, info), p0=p0, gap0=_WARM_GAP)
        if warm is not None:
            steps = info.get("steps", 0)
            if p0 is None:
                warm.setdefault("cold", steps)
            elif steps > warm.get("cold", math.inf):
                warm["off"] = True
            warm["p"], warm["nu"] = p, info.get("nu", 0.0)
        p = np.maximum(p, 0.0)
        if not (np.all(np.isfinite(p)) and p.sum() > 0):
            return None
        p /= p.sum()
        tp = float(g @ p)
        if tp > t:  # toward the MLE (below t)
            a = (tp - t) / (tp - th0)
            point = (1.0 - a) * p + a * self.mle
        else:  # toward a value at g's top (above t)
            a = (t - tp) / (top - tp)
            point = (1.0 - a) * p
            point[int(np.argmax(g))] += a
        lower = self._loglik(point)
        beta = info.get("beta", 0.0)
        upper, u, M = math.inf, None, math.inf
        if 0.0 < beta < 1.0:
            w = 1.0 - beta * g
            out = self._bound(w, w * p)
            if out is not None:
                M = out[2]
                upper, u = M + float(self.n) * math.log1p(-beta * t), math.log(beta)
        return upper, lower, point, u, M
    def deficit(self, h, t0: float, tol: float = _DEFICIT_TOL, point: bool = False, decide=(), memo=None):
        """``(lo, hi)``: brackets of the profile deficit ``loglik(MLE) - max {loglik(p) : h^T p = t0}`` (nats).

        For ``h`` rescaled to ``[0, 1]`` (flipped to ``1 - h`` below the MLE's value) and a tilt ``beta``, every
        ``p`` with ``h^T p = t0`` has ``loglik(p) <= M(beta) + n log(1 - beta t0)`` (the module docstring of
        :mod:`.likelihood_ratio`): the least of these over the tilts tried bounds the profile from above, so
        ``lo`` is a rigorous lower bound (the MLE's attained likelihood is below the maximum).  Any point with
        ``h^T p = t0`` exactly bounds the profile from below: ``hi``, an upper bound up to the MLE's certified
        gap.  First one interior-point solve of the profile problem itself (:meth:`_profile_point`, where an
        iteration is affordable): its point, and the bound at the tilt its multiplier gives, which is tight at
        the solve's optimum.  Where that leaves the bracket wider than ``tol``, a secant search on
        ``log(h^T p_beta - h^T MLE)`` against ``log beta``, from that tilt, looks for the tilt whose fit sits at
        ``t0`` (at most :data:`_MAX_SOLVES` fits), the fits on either side of ``t0`` mixed into points with
        ``h^T p = t0`` (concavity).  Measured (2026-12-01; brackets of the mean's deficit 0.5-10 nats out): on
        randomized response at eps 3 over 400 values, 2 x 10^4 reports, 0.17-0.25 s against 0.56-1.18 s by
        the secant alone (8-9 interior-point iterations, no tilted fit); under the Laplace and Gaussian designs
        of (1, 1e-6, 5) on 100 values, 10^5 reports, 2-15 ms against 8-91 ms.
        ``t0`` at the MLE's value gives ``(0, 0)``; outside ``h``'s range, ``(inf, inf)``.  With ``point``, also
        the point of the bracket's lower bound (``h^T p = t0``; ``None`` where no fit reached ``t0``).  With
        ``decide`` (thresholds, nats), the search also stops once none of them lies inside the bracket: the
        comparisons a caller makes with them are then settled (``Profile.calibration``'s draws).  ``memo`` (a
        dict) carries the tilt the search ended at (key ``"u"``, per side of the MLE's value) to the next call:
        the draws' searches at the same value start where the last one ended."""
        h = np.asarray(h, dtype=float)
        h0, h1 = float(h.min()), float(h.max())

        def result(lo, hi, p=None):
            return (lo, hi, p) if point else (lo, hi)

        if not h0 <= t0 <= h1:
            return result(math.inf, math.inf)
        if h1 == h0:
            return result(0.0, 0.0, self.mle)
        g, t = (h - h0) / (h1 - h0), (t0 - h0) / (h1 - h0)
        th0 = float(g @ self.mle)
        side = "u_low" if t < th0 else "u_high"
        if t < th0:
            g, t, th0 = 1.0 - g, 1.0 - t, 1.0 - th0
        if t <= th0:
            return result(0.0, 0.0, self.mle)
        n, L = float(self.n), self.loglik
        upper = math.inf  # of the profile at t
        below, above = (th0, L, self.mle), None  # fits on either side of t: (g^T p, loglik, p)
        lower, best = -math.inf, None
        u = math.log(min(0.5, max(1e-12, (t - th0) / max(th0 * (1.0 - th0), 1.0 / n))))  # the naive shift's tilt
        u_max = math.log1p(-_BETA_GAP)
        if memo is not None and memo.get(side) is not None:
            u = min(memo[side], u_max)
        starts, warm = {}, self.mle
        steps = _Secant(t - th0, u_max, slope=1.0, slope_max=4.0, width=1e-12)
        fast = self._profile_point(g, t, th0, 0.5 * tol)  # one solve of the profile problem itself
        if fast is not None:
            upper, lower, best, u_fast, _ = fast
            u = u if u_fast is None else min(u_fast, u_max)
        for _ in range(_MAX_SOLVES if not self._settled(L, upper, lower, tol, decide) else 0):
            beta = math.exp(u)
            out = self._tilted(1.0 - beta * g, warm, starts)
            if out is None:
                break
            p, ll, M = out
            upper = min(upper, M + n * math.log1p(-beta * t))
            tp = float(g @ p)
            if tp >= t:
                if above is None or ll > above[1]:
                    above = (tp, ll, p)
            else:
                warm = p
                if tp > below[0]:
                    below = (tp, ll, p)
            if above is not None:
                a = 1.0 if above[0] == below[0] else (above[0] - t) / (above[0] - below[0])
                mix = a * below[2] + (1.0 - a) * above[2]
                ll_mix = self._loglik(mix)
                if ll_mix > lower:
                    lower, best = ll_mix, mix
            if self._settled(L, upper, lower, tol, decide):
                break
            u_new = steps.next(u, max(tp - th0, 1e-300))
            if u_new is None:
                break
            u = u_new
        if memo is not None:
            memo[side] = u
        return result(max(L - upper, 0.0), L - lower, best)

    @staticmethod
    def _settled(L, upper, lower, tol, decide) -> bool:
        """Whether :meth:`deficit`'s bracket ``[L - upper, L - lower]`` is within ``tol`` or settles every
        threshold of ``decide``."""
        return upper - lower <= tol or bool(decide and not any(L - upper < th < L - lower for th in decide))

def _row_scaled_band(band, s):
    """``v -> diag(s) (A diag(v) A^T) diag(s)`` in the upper banded storage of ``band(v)`` (that of ``A``):
    the Gram of the row-scaled channel ``diag(s) A``."""

    factor = None  # s_i s_j in the band's storage: built at the first call (a gather of rows x k), then reused

    def scaled(v):
        nonlocal factor
        ab = band(v)
        if factor is None:
            rows, k = ab.shape
            i = np.arange(k)[None, :] - (rows - 1 - np.arange(rows))[:, None]  # ab[r, j] holds M[i, j]
            factor = s[None, :] * s[np.maximum(i, 0)]
        ab *= factor
        return ab

    return scaled
