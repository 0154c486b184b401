"""Rigorous upper bounds on the defect, and the certified epsilon search.

Every stored probability of row ``x`` carries the constructor's rounding bound
``alpha_x`` (package docstring, "Which way the numbers err"); :func:`_pair_upper`
turns it into an upper bound on a pair's exact defect, :func:`_scan_upper`
takes the maximum over pairs in range (``SparseChannel.delta_star_upper``), and
:func:`_epsilon` finds the smallest ``eps`` whose bound is at most ``delta``
(``SparseChannel.epsilon``): these are the certified answers.

Channels whose rows share one support (the full-support baselines) also have
an ``O(n K)`` bound, :func:`_fast_upper`: each output's log ratio is bounded
by its largest value over all partners in range (a sliding minimum along the
inputs) instead of pair by pair.  ``SparseChannel.delta_star_upper`` returns it
where it is provably no looser than the scan (:func:`_delta_star_upper`).
"""

from __future__ import annotations

import math

import numpy as np

from ..core.accounting import epsilon_for_delta
from ..errors import InfeasibleError
from .construct import _BETA, _NEG_INF, _U
from .flat import _FlatBlock
from .terms import _EPS_LINEAR_MAX

# absolute slack per stored entry for probabilities in the subnormal range
_SUB = 2.0**-1073


def _pair_upper(rb, rows_i, rows_j, T, eps, parts, *, monotone=False):
    r"""Rigorous upper bounds on the exact defects of pairs ``(rows_i, rows_j)`` at ``eps``.

    ``T`` (shape ``(len(eps), r)``) are the computed sums of positive parts;
    ``parts = (leak, x_max, any_miss)`` from a block's ``structure()`` (the
    computed leakage, the largest computed log ratio ``X~`` on the common
    support, whether any output is missing); ``rb`` from
    ``SparseChannel._row_bounds``.  With ``r_y = alpha_x + beta |log Q~(y|x)|``
    the stored probabilities' relative errors (and the same bound, absolute,
    on their logs), ``w`` the row width, ``m``, ``E`` the row's mass and
    ``sum Q~ |log Q~|``, and ``L_x`` the row's largest ``|log Q~|``:

    * summation and per-term rounding: ``T (1 + 1.02 (w + 6) u)``;
    * linear path (``eps <= 700``): an exactly positive term differs from the
      computed one by at most ``r_y Q~(y|x) + (r'_y + 5u) e^eps Q~(y|x')`` where it
      can be positive, and there ``e^eps Q~(y|x') <= 1.003 Q~(y|x)`` and
      ``|log Q~(y|x')| <= |log Q~(y|x)| + c`` with ``c = min(max(x_max, 0),
      1.01 max(eps, 1) + 0.4)`` (``lambda |log lambda| <= 1/e`` for the second);
    * log path (``eps > 700``): the log ratio errs by ``zeta_y <= alpha_x + alpha_x'
      + beta (|LP| + |LQ|) + u |X~|`` and ``(1 - e^{-z})_+`` is 1-Lipschitz with
      slope ``e^{-z}``.

    Both give ``T (1 + 1.02 (w + 6) u) + 1.02 (2 alpha_x + alpha_x' + 8u + (beta + u) c
    + 0.01 beta) m + 3.1 beta E + w 2^-1073`` (the last for subnormal entries).
    Every exact log ratio is ``<= thr = x_max + 1.01 (u |x_max| + beta (L_x + L_x'))
    + alpha_x + alpha_x'``; for ``eps >= thr`` the pair has no overlap excess and
    its defect is its leakage, ``<= leak (1 + 1.02 (w + 2) u)(1 + 1.01 (alpha_x
    + beta L_x))`` (plus ``w 2^-1073`` if an output is missing).  ``monotone=True``
    uses ``c = max(x_max, 0)``, making the bound nonincreasing in ``eps``.
    Returns ``(bound, leakage bound, thr)``.
    """
    const = _pair_constants(rb, rows_i, rows_j, parts, monotone=monotone, eps=eps)
    return _pair_eval(T, eps, *const), const[2], const[3]


def _pair_constants(rb, rows_i, rows_j, parts, *, monotone, eps=None):
    """The eps-independent pieces of :func:`_pair_upper`: ``(gamma, const, leak bound, thr)``.

    With ``monotone=False`` ``const`` depends on ``eps`` (shape ``(len(eps), r)``).
    """
    alpha, mass, ent, nnz, lmax = rb
    leak, xmax, any_miss = parts
    a_i, a_j, m_i, e_i, w_i, l_i = alpha[rows_i], alpha[rows_j], mass[rows_i], ent[rows_i], nnz[rows_i], lmax[rows_i]
    with np.errstate(invalid="ignore", over="ignore"):
        c = np.maximum(xmax, 0.0)
        if not monotone:
            e = np.asarray(eps, dtype=float).reshape(-1, 1)
            c = np.minimum(c, 1.01 * np.maximum(e, 1.0) + 0.4)
        const = (1.02 * (2.0 * a_i + a_j + 8.0 * _U + (_BETA + _U) * c + 0.01 * _BETA) * m_i + 3.1 * _BETA * e_i
                 + w_i * _SUB)
        gamma = 1.0 + 1.02 * (w_i + 6.0) * _U
        lk = (np.minimum(leak, 1.0) * (1.0 + 1.02 * (w_i + 2.0) * _U) * (1.0 + 1.01 * (a_i + _BETA * l_i))
              + np.where(any_miss, w_i * _SUB, 0.0))
        lk = np.minimum(np.where(lk > 0, np.nextafter(lk, np.inf), lk), 1.0)  # an exact zero stays zero
        slack = 1.01 * (_U * np.abs(xmax) + _BETA * (l_i + lmax[rows_j])) + a_i + a_j
        thr = np.nextafter(np.nextafter(xmax + slack, np.inf) + 2.0 * _U * slack, np.inf)
        thr = np.where(np.isneginf(xmax), _NEG_INF, thr)
    return gamma, const, lk, thr


def _pair_eval(T, eps, gamma, const, lk, thr):
    """:func:`_pair_upper` from its constants: the leakage bound where ``eps >= thr``."""
    e = np.asarray(eps, dtype=float).reshape(-1, 1)
    with np.errstate(invalid="ignore", over="ignore"):
        gen = T * gamma + const
        out = np.where(thr <= e, lk, np.maximum(gen, lk))
        out = np.where(out > 0, np.nextafter(out, np.inf), out)
    return np.minimum(out, 1.0)


def _max_pair_upper(ch, eps: np.ndarray, pair_sets):
    """``max`` of :func:`_pair_upper` over the pairs of ``pair_sets`` (0.0 with no pair), stopping at 1.

    ``pair_sets`` yields arrays ``(I, J)`` of sorted positions; once every ``eps`` has reached 1 (the
    bound's cap) no later set can raise the maximum, so the rest are not visited.
    """
    backend = ch._backend()
    rb = ch._row_bounds()
    order, _ = ch._sorted_inputs()
    best = np.zeros(eps.size)
    for I, J in pair_sets:
        for blk in backend.blocks(I, J):
            T = blk.totals(eps)
            parts = blk.structure()
            up, _, _ = _pair_upper(rb, order[blk.I], order[blk.J], T, eps, (parts[0], parts[2], parts[1]))
            np.maximum(best, up.max(axis=1), out=best)
        if eps.size and (best >= 1.0).all():
            break
    return best


def _scan_upper(ch, eps: np.ndarray, H):
    """``max`` over pairs in range of :func:`_pair_upper` (0.0 with no pair), stopping at 1."""
    return _max_pair_upper(ch, eps, ch._pair_shifts(H))


class _PairSet:
    """Pairs ``(I, J)`` (sorted positions) with the eps-independent constants of their monotone bound."""

    def __init__(self, ch, I, J, consts):
        self.ch, self.I, self.J, self.consts = ch, I, J, consts

    def upper(self, eps):
        """Monotone per-pair upper bounds at one ``eps``, aligned with ``(I, J)``."""
        backend = self.ch._backend()
        out = np.empty(self.I.size)
        e = np.array([eps], dtype=float)
        for blk in backend.blocks(self.I, self.J):
            pos = blk.pos
            out[pos] = _pair_eval(blk.totals(e), e, *(c[pos] for c in self.consts))[0]
        return out

    def subset(self, keep):
        return _PairSet(self.ch, self.I[keep], self.J[keep], tuple(c[keep] for c in self.consts))


def _epsilon(ch, delta: float, H, rtol: float) -> float:
    if delta >= 1.0:
        return 0.0  # every defect is at most 1
    z = ch._z_kernel(H)
    if z is not None:
        kernel, Hz = z
        return 0.0 if Hz < 1 else epsilon_for_delta(kernel, delta, Hz, rtol=rtol)
    backend = ch._backend()
    rb = ch._row_bounds()
    order, xs = ch._sorted_inputs()
    zero = np.zeros(1)
    act_I, act_J, act_parts = [], [], []
    leak_star, leak_pair, miss_pair = -1.0, None, None
    lk_star = -1.0
    for I, J in ch._pair_shifts(H):
        for blk in backend.blocks(I, J):
            leak, any_miss, xmax = blk.structure()
            consts = _pair_constants(rb, order[blk.I], order[blk.J], (leak, xmax, any_miss), monotone=True)
            up0 = _pair_eval(blk.totals(zero), zero, *consts)
            lk_up = consts[2]
            k = int(np.argmax(lk_up))
            if lk_up[k] > lk_star:
                lk_star, leak_star, leak_pair = float(lk_up[k]), float(min(leak[k], 1.0)), (blk.I[k], blk.J[k])
            if miss_pair is None and any_miss.any():
                k = int(np.argmax(any_miss))
                miss_pair = (blk.I[k], blk.J[k])
            keep = up0[0] > delta
            if keep.any():
                act_I.append(blk.I[keep])
                act_J.append(blk.J[keep])
                act_parts.append(tuple(c[keep] for c in consts))
    if leak_pair is None:
        return 0.0  # no pair in range
    in_range = "over all pairs" if H is None else f"within H = {H}"
    if delta == 0.0 and miss_pair is not None:
        x, xp = int(xs[miss_pair[0]]), int(xs[miss_pair[1]])
        raise InfeasibleError(
            f"delta = 0 needs equal supports, but S({x}) is not contained in S({xp}) "
            f"(|x - x'| = {abs(x - xp)}, {in_range}): the support leakage is positive for every eps"
        )
    if lk_star > delta:
        x, xp = int(xs[leak_pair[0]]), int(xs[leak_pair[1]])
        if leak_star > delta:
            raise InfeasibleError(
                f"support leakage alone is {leak_star:.6g} > delta = {delta:g} for the pair "
                f"(x = {x}, x' = {xp}) {in_range}: no eps makes this channel (eps, delta)-LDP"
            )
        raise InfeasibleError(
            f"the support leakage {leak_star:.17g} of the pair (x = {x}, x' = {xp}) {in_range} is within "
            f"rounding of delta = {delta!r} (rigorous upper bound {lk_star:.17g}): no eps can be certified"
        )
    if not act_I:
        return 0.0
    pairs = _PairSet(ch, np.concatenate(act_I), np.concatenate(act_J),
                     tuple(np.concatenate([p[i] for p in act_parts]) for i in range(4)))
    # Upper end: every active pair's overlap is certainly empty there, so its bound is its leakage.
    thr = pairs.consts[3]
    hi = max(float(np.max(thr)), 0.0)
    f_hi = float(pairs.upper(hi).max())
    grow = 0
    while f_hi > delta:  # pragma: no cover - defensive: the bound at hi is the leakage
        hi = 2.0 * hi + 1e-9
        f_hi = float(pairs.upper(hi).max())
        grow += 1
        if grow > 60:
            raise InfeasibleError(f"delta = {delta:g} not reached for any eps (defect stays at {f_hi:.6g})")
    lo = 0.0
    vals_lo = pairs.upper(lo)
    keep = vals_lo > delta
    pairs, vals_lo = pairs.subset(keep), vals_lo[keep]
    a = int(np.argmax(vals_lo))
    f_lo = float(vals_lo[a])
    flat = ch._flat()

    def slope_at(eps_v, pi, pj):
        if eps_v > _EPS_LINEAR_MAX:
            return 0.0  # tangent steps are only taken in the linear range; bisection beyond
        blk = _FlatBlock(flat, np.array([pi]), np.array([pj]))
        return float(blk.slope(eps_v)[0])

    def step_lo(c, vals):
        nonlocal pairs, f_lo, g_lo, lo
        keep = vals > delta  # the bound is nonincreasing in eps: pairs at or below delta stay there
        pairs, vals = pairs.subset(keep), vals[keep]
        a = int(np.argmax(vals))
        lo, f_lo = c, float(vals[a])
        g_lo = slope_at(lo, pairs.I[a], pairs.J[a])

    def probe(c):  # the bound at c moves one end of the bracket there
        nonlocal hi, f_hi
        vals = pairs.upper(c)
        fc = float(vals.max()) if vals.size else 0.0
        if fc <= delta:
            hi, f_hi = c, fc
        else:
            step_lo(c, vals)

    g_lo = slope_at(lo, pairs.I[a], pairs.J[a])
    for _ in range(400):
        if hi - lo <= rtol * hi:
            break
        width = hi - lo
        cands = []
        if hi <= _EPS_LINEAR_MAX:
            u_lo, u_hi = math.exp(lo), math.exp(hi)
            if f_lo > f_hi:  # chord from above (convexity in u of the computed sums)
                uc = u_lo + (f_lo - delta) * (u_hi - u_lo) / (f_lo - f_hi)
                cands.append(math.log(uc) if uc > 0 else lo)
            if g_lo < 0:  # tangent from below
                un = u_lo + (f_lo - delta) / (-g_lo)
                cands.append(math.log(un) if un > 0 else lo)
        cands = [c for c in cands if lo < c < hi]
        if not cands:
            cands = [0.5 * (lo + hi)]
        for c in cands:
            if lo < c < hi:
                probe(c)
        if hi - lo > 0.5 * width:  # safeguard: guarantee at least halving
            probe(0.5 * (lo + hi))
    if hi > _EPS_LINEAR_MAX and float(_scan_upper(ch, np.array([hi]), H)[0]) > delta:  # pragma: no cover
        # the computed sums switch to log space at eps = 700, where monotonicity is not proven
        hi = max(float(np.max(thr)), _EPS_LINEAR_MAX)
    return float(hi)


# ---------------------------------------------------------------------------
# The fast bound for channels whose rows share one support
# ---------------------------------------------------------------------------
def _common_support(ch):
    """``(P, L, alpha)`` in sorted input order, ``P`` and ``L`` as ``(n, K)`` arrays (views when the inputs
    are stored sorted), when every row has the same support (the full-support baselines); ``None``
    otherwise (cached)."""
    if "common_support" not in ch._cache:
        m = ch._matrix
        n = m.shape[0]
        nnz = np.diff(m.indptr)
        K = int(nnz[0]) if n else 0
        got = None
        if n and K and bool((nnz == K).all()):
            idx = m.indices.reshape(n, K)
            if bool((idx == idx[0]).all()) and bool(np.isfinite(ch._logdata).all()):
                order, _ = ch._sorted_inputs()
                alpha = np.asarray(ch._row_bounds()[0], dtype=float)
                P, L = m.data.reshape(n, K), ch._logdata.reshape(n, K)
                if not np.array_equal(order, np.arange(n)):
                    P, L, alpha = P[order], L[order], alpha[order]
                got = (P, L, alpha)
        ch._cache["common_support"] = got
    return ch._cache["common_support"]


def _fast_log_ratio(ch, H):
    r"""``Xbar[x, y]``: a rigorous upper bound on every exact ``log Q(y|x) - log Q(y|x')`` over ``x'``
    with ``|x - x'| <= H`` (``x`` itself included), rows in sorted input order; ``None`` unless the
    rows share one support.  Cached for the last ``H``.

    The computed log ratios are maximized by a minimum over ``x'`` per column: the plain column
    minimum when ``H`` covers the domain, else a sliding minimum over ``2 H + 1`` ranks (distinct
    integers ``H`` apart are at most ``H`` ranks apart, so the rank window holds every partner in
    range; more partners only raise the bound).  ``fl(a - b)`` is monotone in ``b``, so
    ``X~ = L~[x, y] - min L~[x', y]`` is the largest computed ratio, ``>= 0``.  The exact ratio is at
    most ``X~ + 1.01 u X~ + (alpha_x + beta |L~[x, y]|) + (alpha_x' + beta |L~[x', y]|)`` (package
    docstring, "Which way the numbers err"), with ``alpha_x'`` the window's largest and
    ``|L~[x', y]|`` the column's largest; the slack is raised by 1% (its own rounding) and the sum
    rounded up (``nextafter``).  A recorded ``_pure_eps_up`` (the constructor's proof that no exact
    ratio exceeds it, e.g. rows that are permutations of the same log weights) caps the bound.
    """
    key = ("fast_log_ratio", H)
    hit = ch._cache.get("fast_log_ratio")
    if hit is not None and hit[0] == key:
        return hit[1]
    cs = _common_support(ch)
    if cs is None:
        return None
    _, L, alpha = cs
    n = L.shape[0]
    _, xs = ch._sorted_inputs()
    if H is None or H >= int(xs[-1]) - int(xs[0]):
        low = L.min(axis=0)[None, :]
        a_win = np.full(n, float(alpha.max()))
    else:
        from scipy.ndimage import maximum_filter1d, minimum_filter1d

        size = 2 * min(int(H), n - 1) + 1
        low = minimum_filter1d(L, size=size, axis=0, mode="nearest")
        a_win = maximum_filter1d(alpha, size=size, mode="nearest")
    X = L - low
    del low
    slack = np.abs(L)  # in place from here on: two n x K arrays at a time
    slack += slack.max(axis=0)[None, :]
    slack *= _BETA
    slack += (alpha + a_win)[:, None]
    slack += _U * X
    slack *= 1.01
    X += slack
    del slack
    np.nextafter(X, np.inf, out=X)
    cap = ch._meta.get("_pure_eps_up")
    if cap is not None:
        np.minimum(X, float(cap), out=X)
    ch._cache["fast_log_ratio"] = (key, X)
    return X


def _has_pair(ch, H) -> bool:
    _, xs = ch._sorted_inputs()
    return xs.size >= 2 and (H is None or int(np.diff(xs).min()) <= H)


def _fast_upper(ch, eps: np.ndarray, H, peaks=None):
    r"""A rigorous upper bound on ``delta*(eps; H)`` in ``O(n K)`` per ``eps`` for rows that share one
    support of ``K`` outputs (``None`` otherwise).

    With no support leakage, for every pair in range

    .. math::

        \Delta_\varepsilon(x, x') = \sum_y Q(y|x) (1 - e^{\varepsilon - X(y)})_+
            \le D(x) = \sum_y \bar Q(y|x) (1 - e^{\varepsilon - \bar X(x, y)})_+ ,

    where ``Xbar >= X`` for every partner in range (:func:`_fast_log_ratio`) and
    ``Qbar = Q~ (1 + 1.02 r_y)``, ``r_y = alpha_x + beta |log Q~(y|x)|``, bounds the exact
    probability (relative error ``r_y <= 1e-3``, checked).  Terms with ``Xbar <= eps`` are exactly
    zero (``expm1(0) = 0``); each other term is computed with relative error ``<= 8u``
    (``z = eps - Xbar`` to ``u |z|`` moves ``1 - e^z`` by at most ``u`` relative, since
    ``|z| / (e^{|z|} - 1) <= 1``; ``expm1`` 2u; three products), the row sum adds ``(K - 1) u``, so
    ``max_x D(x) (1 + 1.02 (K + 10) u)`` plus ``2^-1073`` per possibly positive term (subnormal
    probabilities), rounded up, is returned; 0.0 exactly when every ``Xbar <= eps`` (then the exact
    defect is 0) or no pair is in range.  ``peaks`` (a list) receives the sorted position of a row
    attaining the maximum, per ``eps``.

    The bound is exact up to rounding when one partner attains every column's maximum ratio
    (randomized response, Square Wave and the Piecewise Mechanism on a range that separates two
    bands); otherwise it can be far above ``delta*``.

    The last result is cached with its ``(H, eps)``: asking ``delta_star_upper_fast`` and then
    ``delta_star_upper`` at the same point (as a spec's claim check does when the fast bound does
    not prove the claim) computes it once.
    """
    if not _has_pair(ch, H):
        return np.zeros(eps.size)
    key = (H, np.asarray(eps, dtype=float).tobytes())
    hit = ch._cache.get("fast_upper")
    if hit is None or hit[0] != key:
        hit = (key, _fast_upper_eval(ch, eps, H))
        ch._cache["fast_upper"] = hit
    out, rows = hit[1]
    if peaks is not None:
        peaks.extend(rows)
    return None if out is None else out.copy()  # callers may write into it


def _fast_upper_eval(ch, eps: np.ndarray, H):
    """:func:`_fast_upper` computed: ``(bound or None, peak rows)``."""
    rows = []
    Xbar = _fast_log_ratio(ch, H)
    if Xbar is None:
        return None, rows
    P, L, alpha = _common_support(ch)
    K = P.shape[1]
    out = np.zeros(eps.size)
    Pbar = None
    with np.errstate(under="ignore"):
        for k, e in enumerate(eps.tolist()):
            pos = (Xbar > e).sum(axis=1)
            if not pos.any():
                continue
            if Pbar is None:
                r = np.abs(L)
                r *= _BETA
                r += alpha[:, None]
                if float(r.max()) > 1e-3:
                    return None, rows  # rounding model too coarse for this bound
                r *= 1.02
                r += 1.0
                r *= P
                Pbar = r
            term = np.subtract(e, Xbar)
            np.minimum(term, 0.0, out=term)
            np.expm1(term, out=term)
            term *= Pbar
            D = -term.sum(axis=1)
            del term
            tot = D * (1.0 + 1.02 * (K + 10.0) * _U) + pos * _SUB
            i = int(np.argmax(tot))
            out[k] = min(float(np.nextafter(tot[i], np.inf)), 1.0)
            rows.append(i)
    return out, rows


def _fast_pure_upper(ch, H):
    """A rigorous upper bound on the exact pure epsilon on range ``H`` for rows that share one support
    (the largest :func:`_fast_log_ratio`; 0.0 with no pair in range); ``None`` otherwise."""
    if not _has_pair(ch, H):
        return 0.0
    Xbar = _fast_log_ratio(ch, H)
    return None if Xbar is None else float(Xbar.max())


def _row_partners(ch, rows, H):
    """Pair sets ``(I, J)`` (sorted positions): each row of ``rows`` against every partner in range."""
    _, xs = ch._sorted_inputs()
    others = np.arange(xs.size)
    for i in rows:
        near = others != i
        if H is not None:
            near &= np.abs(xs - xs[i]) <= H
        J = np.flatnonzero(near).astype(np.int64)
        yield np.full(J.size, i, dtype=np.int64), J


def _scan_lower(ch, eps: np.ndarray, H, rows) -> np.ndarray:
    """A lower bound on :func:`_scan_upper` ``(ch, eps, H)``: its own per-pair bound on the pairs
    ``(x, x')`` with ``x`` at the sorted positions ``rows`` and every ``x'`` in range, lowered by the
    largest difference another order of summation can make in the computed sums (two sums of the
    same ``w`` rounded terms, each within ``(w - 1) u`` relative of their exact sum)."""
    best = _max_pair_upper(ch, eps, _row_partners(ch, rows, H))
    w = float(ch._row_bounds()[3].max())
    return best * (1.0 - 2.1 * (w + 6.0) * _U)


def _delta_star_upper(ch, eps: np.ndarray, H):
    """``SparseChannel.delta_star_upper`` on a flat ``eps`` array (no kernel on Z).

    The fast bound (:func:`_fast_upper`) is returned where it is provably no looser than the full
    scan (:func:`_scan_upper`): where it is 0 (the exact defect is 0), or where it is at most a lower
    bound on the scan's result (:func:`_scan_lower` on the rows where the fast bound peaks and on the
    two ends of the domain).  The other ``eps`` take the full scan.
    """
    peaks = []
    fast = _fast_upper(ch, eps, H, peaks)
    if fast is None:
        return _scan_upper(ch, eps, H)
    todo = fast > 0.0
    if todo.any():
        n = ch.n_inputs
        rows = sorted(set(peaks[:2]) | {0, n - 1})
        idx = np.flatnonzero(todo)
        ok = fast[idx] <= _scan_lower(ch, eps[idx], H, rows)
        todo[idx[ok]] = False
    if todo.any():
        fast[todo] = _scan_upper(ch, eps[todo], H)
    return fast
