"""The maximum-likelihood estimate on count vectors: SQUAREM-accelerated EM finished by an interior point.

* :func:`_mle`: EM (:func:`_em`) first, then the primal-dual interior point
  (:mod:`sparseldp.estimation._ipm`), and where that fails a log-barrier interior-point
  Newton method (:func:`_newton`) when that is predicted cheaper or EM stalls;
  all judged by the certified log-likelihood gap ``n log max_x g_x``.
* :func:`_newton_cost` and the constants below: the switching rule's costs.
* the barrier Newton itself (``_newton``, with its linear solves) is in :mod:`sparseldp.estimation._newton`.

The solvers take ``A``, the column-scaled channel restricted to the observed
outputs (``k`` rows; sparse CSR or dense), its transpose ``AT`` and the nonzero
counts ``c``; optionally FFT products for the EM runs
(:mod:`sparseldp.estimation._toeplitz`).  The math, the stopping rules and the
certificate are in the :mod:`sparseldp.estimation` docstring.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from ._ipm import _band_width, _ipm, _ipm_affordable, _ipm_flops, _low_rank_flops, _row_spans
from ._newton import _Best, _newton
from .solvers import _squarem


# Active-set Newton (_active_newton): tried first when the first EM run's iterate is sparse
# (_active_sparse: the values carrying more than _ACTIVE_REL of the largest mass are at most
# _ACTIVE_SHARE of the domain, and the others carry at most _ACTIVE_MASS of it; two atoms on 1,000 or
# 10^4 values left 1.4-3.1e-4 outside after 600 EM evaluations, two atoms over a floor of 0.2 % / 2 %
# 1.1e-3 / 2.7e-3).  The set's rules
# (see its docstring): at most _ACTIVE_ADD values join a round, with _ACTIVE_NEW of the largest mass;
# values below _ACTIVE_DROP of it with g < 1 - _ACTIVE_SLACK leave; _ACTIVE_EM EM steps before each
# Newton run (Gaussian window 701, two atoms, 40 refits: 6.9 s with 20 against 12.8 s with none),
# _ACTIVE_EM_FINISH after one that stalls; at most _ACTIVE_ROUNDS rounds, and it gives up after
# _ACTIVE_STALLS rounds in a row whose set it could not solve (two atoms over a 2 % floor on 10^4
# values, window 275, let the set grow by 60 values a round, each unsolved: 148 s before the full
# solver's 11 s, without this rule and the mass criterion).  The refits of 60
# replicates converged alike with _ACTIVE_DROP from 1e-8 to 1e-4 (3.6-4.8 s).
_ACTIVE_REL = 1e-4
_ACTIVE_SHARE = 0.25
_ACTIVE_MASS = 5e-4
_ACTIVE_NEW = 1e-3
_ACTIVE_DROP = 1e-6
_ACTIVE_SLACK = 1e-3
_ACTIVE_ROUNDS = 20
_ACTIVE_STALLS = 2
_ACTIVE_ADD = 64
_ACTIVE_EM = 20
_ACTIVE_EM_FINISH = 2000
# Sets of a sparse channel run dense while |S| x m' is at most this; sparse (product and LU) beyond.
_ACTIVE_DENSE = 200_000
# On a sparse iterate the active set runs before the interior point (_ipm) where one interior-point
# iteration costs more than this (_ipm._ipm_flops, or _ipm._low_rank_flops through the channel's low-rank
# factor): two atoms on 10^4 values under the Laplace window 275 (7.6e8), active set 0.79 s against 1.7 s;
# a zero-inflated count on 1,000 values under the window 59 (3.5e6), 0.54 s against 0.04 s.
_IPM_AFTER_ACTIVE = 1e8


def _certificate(A, c, q, n_f: float) -> float:
    """``max(0, n log max_x g_x)`` with ``g = A (c / q) / n``: the certified gap at the point whose output
    probabilities (column-scaled, all positive) are ``q``."""
    return max(0.0, n_f * math.log(max(float(((A @ (c / q)) / n_f).max()), 1e-300)))


def _em(A, AT, c, n, p0, tol, max_iter, history=None, step=True):
    """SQUAREM-accelerated EM on observed columns; returns (p, evals, converged, gap).

    ``gap`` is the certificate of the point it was computed at, and with ``step``
    (the default) the returned point is one EM step beyond it (EM is monotone, so
    the certificate bounds the returned point's gap too); with ``step=False`` the
    certified point itself is returned, so that a caller can recompute its
    certificate (``_mle(fast=...)``).  ``history`` (a list), if given, receives
    ``(evals, gap)`` pairs, used to predict the remaining cost.
    """
    last = (lambda p, g: p * g) if step else (lambda p, g: p)
    inv_n = 1.0 / n

    def g_of(q):
        return (A @ (c / q)) * inv_n

    def loglik(q):
        with np.errstate(divide="ignore"):
            return float(c @ np.log(q)) if np.all(q > 0) else -math.inf

    def cert(g):
        return n * math.log(max(float(g.max()), 1e-300))

    p = p0
    q = AT @ p
    evals = 0
    while True:
        g = g_of(q)
        gap = cert(g)
        if history is not None:
            history.append((evals, gap))
        if gap <= tol:
            return last(p, g), evals, True, max(gap, 0.0)
        if evals >= max_iter:
            return last(p, g), evals, False, gap
        p1 = p * g
        evals += 1
        q1 = AT @ p1
        g1 = g_of(q1)
        gap1 = cert(g1)
        if gap1 <= tol:
            return last(p1, g1), evals, True, max(gap1, 0.0)
        if evals >= max_iter:  # an odd budget: no second evaluation (max_iter caps the evaluations)
            return last(p1, g1), evals, False, gap1
        p2 = p1 * g1
        evals += 1
        q2 = AT @ p2
        if evals >= max_iter:
            p, q = p2, q2
            continue
        a, pe = _squarem(p, p1 - p, p2 - p1, p2)
        if not a < -1.0:  # no extrapolation: the plain step
            p, q = p2, q2
            continue
        qe = AT @ pe
        if loglik(qe) >= loglik(q2):
            p, q = pe, qe
        else:
            p, q = p2, q2


def _active_newton(A, AT, c, n, p_start, tol, max_steps, dense, step=True):
    r"""Newton (:func:`_newton`) on an active set of values, grown until the certificate holds on all ``k``.

    The MLE of a deconvolution is sparse: most values carry no mass (it is
    discrete, with few support points, wherever the kernel is smooth).  So
    the interior-point Newton runs on the values ``S`` that carry mass in
    ``p_start`` (above :data:`_ACTIVE_REL` of its largest), plus one value reaching each
    observed output that ``S`` does not reach (:func:`_covering`), as a dense
    ``|S| x m'`` problem: ``O(|S|^2 m')`` a step instead of ``O(k^2 m')`` (dense)
    or a banded solve over all ``k`` values.  Then ``g = A (c / q) / n`` is
    computed on all ``k`` values, and the certificate ``n log max_x g_x <= tol``
    is the same as EM's and Newton's (so nothing is taken on trust).  While it
    fails, the values outside ``S`` with ``g_x > 1`` that are local maxima of
    ``g`` over the ordered values (one per direction that raises the
    likelihood; at most :data:`_ACTIVE_ADD`, the largest ``g`` first) join
    ``S`` with :data:`_ACTIVE_NEW` of the largest mass, and the values left
    with less than :data:`_ACTIVE_DROP` of it and ``g_x < 1 -``
    :data:`_ACTIVE_SLACK` leave it, each value at most once (a value that
    left can turn into an ascent direction again; letting it leave again made
    the set cycle).  This is the vertex-exchange idea of the Kiefer-Wolfowitz
    NPMLE literature (Lindsay 1983; Boehning 1986) with the barrier Newton as
    inner solver.  Each round runs :data:`_ACTIVE_EM` EM steps on ``S`` before
    Newton (cheap; they move the values that just entered), and
    :data:`_ACTIVE_EM_FINISH` EM evaluations after a Newton run that stalls
    (the barrier can stall on an ill-conditioned set; EM's multiplicative
    steps also empty the values that should leave).  It gives up (not converged,
    the caller's full solver takes over) after :data:`_ACTIVE_STALLS` rounds in
    a row whose set it could not solve: then the problem is not sparse.  On a
    window channel the set's matrices stay sparse once ``|S| m'`` exceeds
    :data:`_ACTIVE_DENSE` (each value reaches only its window).  ``max_steps``
    bounds each inner Newton run; at most :data:`_ACTIVE_ROUNDS` rounds.  Returns
    ``(p, steps, converged, gap)`` as :func:`_newton` (with ``step``, ``p`` is
    one EM step beyond the certified point).

    Measured (1,000 values, 10^6 reports of two atoms, design(eps=1, delta=1e-6, H=10)): the MLE in
    0.22 s against 1.7 s (Laplace window 275) and 0.77 s against 2.5 s (Gaussian window 701, dense);
    60 replicate refits from the MLE, 67 ms each, all certified.  On two smooth bumps the set would
    hold 80-90 % of the values and nothing is gained, so :func:`_mle` tries it only on sparse iterates.
    """
    k = A.shape[0]
    p = np.maximum(np.asarray(p_start, dtype=float), 0.0)
    S = np.flatnonzero(p > _ACTIVE_REL * p.max())
    steps, best, stalls = 0, _Best(A, c, n, step), 0
    left = np.zeros(k, bool)
    for _ in range(_ACTIVE_ROUNDS):
        S = _covering(A, p, S, dense)
        # a window channel stays sparse: the set's rows reach few outputs each, so its Newton system is
        # a sparse product and LU (dense, it was |S|^2 m' a step: 10-20 s a run at |S| = 900, m' = 10^4)
        dense_s = dense or S.size * A.shape[1] <= _ACTIVE_DENSE
        AS = A[S]
        if dense_s:
            AS = np.asarray(AS) if dense else AS.toarray()
            AST = AS.T
        else:
            AS = sp.csr_array(AS)
            AST = sp.csr_array(AS.T)
        ps = np.maximum(p[S], _ACTIVE_REL * p.max())
        ps /= ps.sum()
        ps, _, inner, gap_s = _em(AS, AST, c, n, ps, 0.5 * tol, _ACTIVE_EM, None, False)
        st = 0
        if not inner:
            ps, st, inner, gap_s = _newton(AS, AST, c, n, ps, gap_s, 0.5 * tol, max_steps, dense_s, None, False)
            if not inner:  # the barrier stalled (ill-conditioned): EM on the set from where it stopped
                ps, _, inner, _ = _em(AS, AST, c, n, ps, 0.5 * tol, _ACTIVE_EM_FINISH, None, False)
        steps += st
        stalls = 0 if inner else stalls + 1
        p = np.zeros(k)
        p[S] = ps
        g, gap = best.offer(p, AST @ ps)
        if gap <= tol:
            return best.result(steps, True)
        if stalls >= _ACTIVE_STALLS:
            break  # the sets are not solved either: not a sparse problem; the full solver takes over
        outside = np.ones(k, bool)
        outside[S] = False
        up = outside & (g > 1.0)
        if not up.any():
            if inner:
                break  # the set's own optimum, and no value outside would raise the likelihood
            continue  # the inner run stopped short: go on from where it stopped, on the same set
        cand = np.flatnonzero(up & _peaks(g))  # the local maxima of g: one per direction of ascent
        if cand.size == 0:
            cand = np.flatnonzero(up)
        add = cand[np.argsort(-g[cand], kind="stable")[:_ACTIVE_ADD]]
        # values without mass whose g is clearly below 1 leave the set, each at most once (no cycling)
        keep = (ps > _ACTIVE_DROP * ps.max()) | (g[S] > 1.0 - _ACTIVE_SLACK) | left[S]
        left[S[~keep]] = True
        S = np.union1d(S[keep], add)
        p[add] = _ACTIVE_NEW * p.max()
        p /= p.sum()
    return best.result(steps, False)


def _peaks(g):
    """Mask of the local maxima of ``g`` over the ordered values (ties count as maxima)."""
    peak = np.ones(g.size, bool)
    peak[1:] &= g[1:] >= g[:-1]
    peak[:-1] &= g[:-1] >= g[1:]
    return peak


def _active_sparse(p) -> bool:
    """Whether ``p`` is sparse enough for :func:`_active_newton`: at most :data:`_ACTIVE_SHARE` of the
    values carry more than :data:`_ACTIVE_REL` of the largest mass, and the rest carry at most
    :data:`_ACTIVE_MASS` of the total."""
    small = p <= _ACTIVE_REL * p.max()
    return p.size - np.count_nonzero(small) <= _ACTIVE_SHARE * p.size and p[small].sum() <= _ACTIVE_MASS * p.sum()


def _covering(A, p, S, dense):
    """``S`` plus, for each output that no value of ``S`` reaches, the value with the largest
    ``p_x A[x, y]`` (any reaching value if ``p`` is 0 on all of them): the restricted likelihood
    must be finite.  Sparse channels stay sparse (the lost outputs can number in the thousands)."""
    reach = np.asarray(A[S].sum(axis=0)).ravel() if S.size else np.zeros(A.shape[1])
    lost = np.flatnonzero(reach <= 0)
    if lost.size == 0:
        return S
    if dense:
        cols = np.asarray(A[:, lost])
        weight = cols * p[:, None]
        pick = weight.argmax(axis=0)
        none = weight.max(axis=0) <= 0
        pick[none] = cols[:, none].argmax(axis=0)
    else:
        cols = sp.csc_array(A[:, lost])
        weight = sp.csc_array(cols.multiply(p[:, None]))
        pick = np.asarray(weight.argmax(axis=0)).ravel()
        none = np.asarray(weight.max(axis=0).toarray()).ravel() <= 0
        if none.any():
            pick[none] = np.asarray(cols[:, np.flatnonzero(none)].argmax(axis=0)).ravel()
    return np.union1d(S, np.unique(pick))


# EM evaluations before the solver considers switching to Newton.
_EM_FIRST = 600
# Smallest EM run between two predictions.
_EM_RUN = 5000
# Newton steps allowed in one finishing run.
_NEWTON_STEPS = 120
# Newton runs at most this many times in one fit (EM between them).
_NEWTON_TRIES = 3
# Predicted Newton steps (the typical count) used to compare costs with EM.
_NEWTON_TYPICAL = 60


def _newton_cost(A, dense: bool) -> float:
    """Cost of one Newton step in EM-flop units: factorizing the k x k (banded) system.

    Dense: ``k^3/3 + 2 k^2 m`` flops of matrix-matrix work, divided by
    ``min(10, max(1, k m / 20000))``: BLAS runs matrix-matrix products (level 3)
    that much faster per flop than EM's matrix-vector products once the matrices
    leave the cache, as measured here (Newton step time / EM evaluation time
    against the flop ratio: 1.3 at k m = 24,000, 4.1 at 85,000, 6-11 at
    100,000-210,000, 8.7-8.8 at 500,000-1,700,000).
    """
    k = A.shape[0]
    if dense:
        return _dense_newton_cost(k, A.shape[1])
    coo = sp.coo_array(A)
    if coo.nnz == 0:
        return 0.0
    lo, hi = _row_spans(coo)
    # rows x and x' couple in M when their column spans overlap: bandwidth in rows
    order = np.argsort(lo, kind="stable")
    reach = np.searchsorted(lo[order], hi[order], side="right") - np.arange(k)
    bw = float(max(1, reach.max()))
    return k * bw * bw + 2.0 * coo.nnz * bw


def _dense_newton_cost(k: int, m: int) -> float:
    """:func:`_newton_cost` of a dense ``k x m`` channel."""
    return (k**3 / 3.0 + 2.0 * k * k * m) / min(10.0, max(1.0, k * m / 20_000.0))


def _band_of(FA):
    """The banded Gram of FFT products (``_toeplitz._Conv.gram_band``), or ``None``."""
    return getattr(getattr(FA, "_c", None), "gram_band", None)


def _mle(A, AT, c, n, k, tol, max_iter, dense, fast=None, p0=None, band=None, low_rank=None):
    """Maximum likelihood: SQUAREM EM, finished by the interior point or Newton.

    A first EM run of :data:`_EM_FIRST` evaluations certifies the easy cases.  Where
    it does not, the primal-dual interior point (``_ipm._ipm``, warm-started at EM's iterate,
    where one of its iterations is affordable: ``_ipm._ipm_affordable``) runs once; it
    certified in 3-19 iterations everywhere it was measured (8-22 from the uniform start), 1.5-12x faster than the
    solvers below (10^4 values under a Laplace window of 275, 10^7 reports of a smooth
    truth: 1.6 s against 17.3 s; 1,000 values under a Gaussian window of 695: 0.45-0.9 s
    against 1.8-9.9 s).  On a sparse iterate the active-set Newton (:func:`_active_newton`)
    runs once too, before the interior point where one of its iterations costs more than
    :data:`_IPM_AFTER_ACTIVE` flops (a few atoms on a large channel: the sets are small).  If
    neither certifies, the solver goes on from the best point so far: the remaining EM cost is
    predicted from the observed
    geometric rate of the certificate; EM continues (for twice the predicted
    count) while that is cheaper than a typical Newton finish, else Newton runs
    once.  A prediction is trusted once: when EM has run twice the predicted
    count without converging (SQUAREM's certificate can stall or rise on
    ill-conditioned channels), Newton runs next whatever the costs say.  A Newton
    run that does not converge (:data:`_NEWTON_STEPS`) is followed by an EM run as
    long as all evaluations so far (at least :data:`_EM_RUN`) and Newton again
    from the better point, at most :data:`_NEWTON_TRIES` times; then EM takes
    whatever budget is left.  Returns (p, em_evals, newton_steps, converged, gap)
    (``newton_steps`` counts the interior point's iterations too).

    ``fast``: optional ``(A, AT)`` applied by FFT (``model.fast_columns``) for the
    EM runs; Newton always uses the exact ``A``.  The EM runs' certificates are then
    approximate (to about ``1e-12`` relative in ``g``): for fits that need no
    rigorous gap, such as the fold fits of ``method="auto"``'s selection, or for
    a caller that checks the returned point with the exact products
    (``frequencies._fit``); so with ``fast`` the point returned on convergence is
    the one the certificate was computed at (no last EM step).  ``p0``: the start
    (default uniform).  ``band``: the Gram's banded form for the interior point and Newton
    (``model.gram_band``: by FFT on window channels, dense ones too where the banded Cholesky pays);
    default: on a sparse channel the FFT products' own where ``fast`` has one, else ``_ipm`` and
    ``_newton`` build it from sparse products.  ``low_rank``: the channel's low-rank factor for the interior
    point (``_ipm._low_rank_of``: wide smooth kernels), which makes its iterations affordable and cheap.
    """
    FA, FAT = (A, AT) if fast is None else fast
    if band is None and not dense:
        band = _band_of(FA)
    step = fast is None
    p = np.full(k, 1.0 / k) if p0 is None else p0
    evals, steps, tries, predicted, tried_active, tried_ipm = 0, 0, 0, False, False, False
    nnz = A.size if dense else A.nnz
    newton_cost = width = None
    budget = min(max_iter, _EM_FIRST)
    while True:
        hist = []
        p, e, conv, gap = _em(FA, FAT, c, n, p, tol, budget, hist, step)
        evals += e
        if conv or evals >= max_iter:
            return p, evals, steps, conv, gap
        # the interior point (from the uniform start) and, on a sparse iterate, Newton on its active set,
        # each once; the active set first where an interior-point iteration is costly
        finishers = []
        if width is None:
            width = 0 if dense else _band_width(A)
        if not tried_ipm and (low_rank is not None or _ipm_affordable(k, A.shape[1], dense, width)):
            finishers.append("ipm")
        if not tried_active and _active_sparse(p):
            ipm_flops = (_low_rank_flops(k, A.shape[1], low_rank[0].shape[1]) if low_rank is not None
                         else _ipm_flops(k, A.shape[1], dense, width))
            first = ipm_flops > _IPM_AFTER_ACTIVE
            finishers.insert(0 if first else len(finishers), "active")
        p_em, gap_em = p, gap
        for finisher in finishers:
            if finisher == "ipm":
                tried_ipm = True
                p_f, s_f, conv_f, gap_f = _ipm(A, AT, c, n, tol, dense, band, step=step, p0=p_em, gap0=gap_em,
                                                low_rank=low_rank)
            else:
                tried_active = True
                p_f, s_f, conv_f, gap_f = _active_newton(A, AT, c, n, p_em, tol, _NEWTON_STEPS, dense, step)
            steps += s_f
            if conv_f:
                return p_f, evals, steps, True, gap_f
            if gap_f < gap:
                p, gap = p_f, gap_f
        # predicted remaining EM evaluations from the second half of this run
        half = [gp for ev, gp in hist if ev >= e // 2 and gp > 0]
        rate = (gap / half[0]) ** (1.0 / max(1, e - e // 2)) if half and gap > 0 else 1.0
        em_left = math.log(tol / gap) / math.log(rate) if 0 < rate < 1 else math.inf
        if newton_cost is None:
            newton_cost = _NEWTON_TYPICAL * _newton_cost(A, dense)
        em_cheaper = em_left <= max_iter - evals and em_left * 4.0 * nnz <= newton_cost
        if tries < _NEWTON_TRIES and (predicted or not em_cheaper):
            tries += 1
            p_n, s_n, conv_n, gap_n = _newton(A, AT, c, n, p, gap, tol, _NEWTON_STEPS, dense, band, step)
            steps += s_n
            if conv_n:
                return p_n, evals, steps, True, gap_n
            if gap_n < gap:
                p = p_n
            # EM from the better point, then Newton again (a failed Newton is often one whose start
            # was still far off); the last try leaves EM the whole budget
            predicted = tries < _NEWTON_TRIES
            budget = min(max_iter - evals, max(_EM_RUN, evals)) if predicted else max_iter - evals
        else:
            # long runs: SQUAREM's path is erratic, so short re-predicted runs would thrash
            predicted = math.isfinite(em_left)
            budget = min(max_iter - evals, max(int(2 * em_left) + 100, _EM_RUN)) if predicted else max_iter - evals
