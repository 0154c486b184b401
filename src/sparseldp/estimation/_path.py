"""The members of ``method="auto"``'s regularization path, fit on the training folds' counts.

:mod:`sparseldp.estimation.auto` scores these fits on the held-out folds and chooses among them (its
module docstring has the path and the rule); here they are computed: the EMS path (most smoothing first,
warm starts), the discrepancy-stopped EM with its multiples (and, where they reach the cap, the EM flow past
it: by implicit Euler and Newton on cheap dense channels, by Chebyshev steps elsewhere), and the MLE where its
fold fits are affordable.
"""

from __future__ import annotations

import numpy as np

from ._em_members import (_STOP_CAP, _flow_times, _rest_outputs, _stop_steps, _stopped_cols, _time_path,
                          _time_times, _with_flow)
from ._flow import _em_flow
from ._ipm import _low_rank_of
from ._parallel import concurrently, side_by_side
from .mle import _mle
from .model import _Model
from ._ems import _ems_fixed
from .solvers import _chebyshev_schedule

# EMS smoothing weights on the path, most smoothing first (1/4 is method="ems" with smooth=1).
_EMS_WEIGHTS = (0.25, 0.125, 0.03125)
# The same EM kept at these multiples of the discrepancy stop (less regularized members).
_STOP_MULTS = (2, 4, 8)
# EMS on the training folds stops when its estimated TV distance to the fixed point is below
# min(_SELECT_TOL_MAX, max(_SELECT_TOL, 1 / n)) on n training reports (:func:`_select_tol`).
_SELECT_TOL = 1e-6
_SELECT_TOL_MAX = 1e-4
# The chosen EMS member's fit on all counts (auto's refit) stops at most this far (TV) from its fixed point
# (_ems_refit_tol).
_EMS_REFIT_TOL_MAX = 1e-5
# The MLE is left off the path of sparse channels with more stored entries than this (its fold
# fits need banded Newton solves: minutes on 10^4 values with windows of hundreds).
_MLE_NNZ_MAX = 1_000_000
# Certified gap (nats) at which the MLE's fold fits stop (the "em" default).  0.5 was tried: 12-15%
# faster on 1,000 values, but it changed 11 of the battery's 176 choices (and the study's reference
# MLEs), so it is not taken without a study of its own.
_FOLD_TOL = 1e-2


def _select_tol(n_train) -> float:
    """EMS's stopping distance on the training folds (``n_train`` reports each): ``1 / n`` between
    :data:`_SELECT_TOL` and :data:`_SELECT_TOL_MAX`.

    The selection reads the fold fits through their held-out log-likelihood, and a fit a TV distance
    ``d`` from its fixed point moves that score by about ``n_heldout d`` times a small factor (its first
    order vanishes at a fit of the counts); so ``d ~ 1 / n`` keeps the score's error far below the
    one-nat slack whatever ``n``, where a fixed ``d`` is either too strict for few reports or too loose
    for many.  The cap keeps the fold fits within ``1e-4`` in TV for their spread (:func:`_fold_spread`).
    """
    return min(_SELECT_TOL_MAX, max(_SELECT_TOL, 1.0 / float(np.min(n_train))))


def _ems_refit_tol(n) -> float:
    """The stopping distance of the chosen EMS member's fit on all ``n`` reports: that of the fits the
    choice was made on (:func:`~sparseldp.estimation._path._select_tol`: ``1 / n`` within ``[1e-6,
    1e-4]``, on the training folds), and at most :data:`_EMS_REFIT_TOL_MAX` (``1e-5``, the bootstrap's
    EMS refits'): ``1e-5`` in total variation up to ``10^5`` reports, ``1e-6`` from ``10^6`` on, far
    below the estimate's sampling error (about ``sqrt(k / n)``) and within the bootstrap refits' own
    distance to their fixed points (``refits._REFIT_TOL``).

    ``method="ems"`` keeps its default ``1e-8``.  Here that cost fifty thousand evaluations without
    reaching it where EMS contracts very slowly (randomized response at eps = 1 on 400 values, 10^5
    reports: 3,862 evaluations to ``1e-5``, 19,099 to ``1e-6``, over 50,000 to ``1e-7``; ``sparseldp
    compare`` spent most of its time there and flagged the estimate as stopped at its cap).
    """
    return min(_select_tol(n), _EMS_REFIT_TOL_MAX)


def _with_mle(model: _Model) -> bool:
    """Whether the MLE is on the path: its fold fits (EM finished by banded Newton) are affordable."""
    return model.dense or model.nnz <= _MLE_NNZ_MAX


def _regularized_fits(model: _Model, obs: np.ndarray, C: np.ndarray, max_iter: int, A, AT):
    """The members of :data:`_PATH` before the MLE, fit on each column of the counts ``C`` (observed
    outputs ``obs`` x b) with the products ``A``, ``AT`` (``model.fast_columns``); ``(fits, evals)``."""
    n_train = C.sum(axis=0)
    k, b = model.k, C.shape[1]
    fits: dict[tuple[str, float], np.ndarray] = {}

    def ems_path():  # most smoothing first, warm starts
        P, members, e_all = np.full((k, b), 1.0 / k), {}, 0
        tol = _select_tol(n_train)
        for w in _EMS_WEIGHTS:
            P, e, _ = _ems_fixed(A, AT, C, 1.0 / n_train, P, 1, w, tol, max_iter)
            e_all += e
            members[("ems", w)] = P
        return members, e_all

    # discrepancy-stopped EM on each column
    mults = _STOP_MULTS if _with_mle(model) else ()  # the bridge to the MLE, where the MLE is on the path
    cap = min(_STOP_CAP, max_iter)
    flow = _with_flow(model, obs, cap)  # cheap dense channels: EM on to the cap, and the flow beyond

    def stopped():
        return _stopped_cols(A, AT, C, np.exp(model.log_cs[obs]), cap, mults, _rest_outputs(model, obs), flow,
                             "within")

    # the two are independent: on a large sparse channel (FFT or sparse products, one core each, long enough
    # to leave the GIL) they run side by side, elsewhere one after the other; the same fits either way
    if side_by_side(model.dense, k):
        (ems, evals), (Ps, steps) = concurrently(ems_path, stopped)
    else:
        (ems, evals), (Ps, steps) = ems_path(), stopped()
    fits.update(ems)
    at_cap = Ps.pop("cap", None)
    if np.all(Ps.pop("classic_steps") >= 0):  # the classical stop, where every column reached it in the run
        fits[("classic", 1)] = Ps["classic"]
    del Ps["classic"]
    for f, P in Ps.items():
        fits[("stop", f)] = P
    if flow:
        # the flow's Newton steps need the matrix itself, not FFT products
        EA, EAT = model.columns(obs)
        times, failed = _em_flow(EA, EAT, C, at_cap, cap, _flow_times(cap))
        fits[("flow", 0)] = at_cap  # plain EM at the cap: no flow substep in it
        if not failed.any():  # a fold whose flow could not be integrated leaves the path without the flow
            fits.update({("flow", j): P for j, P in enumerate(times, start=1)})
        return fits, evals + cap
    evals += _stop_steps(int(steps.max()), max(mults, default=1), cap)
    if mults and cap == _STOP_CAP and all(_stop_steps(int(t), max(mults), cap) == cap for t in steps):
        # every column's largest multiple is the cap's iterate, and the flow's Newton steps do not pay here:
        # the EM flow of log g by Chebyshev steps bridges the cap and the MLE (_em_members._TIME_DOUBLINGS)
        times = _time_times(cap)
        start = np.ascontiguousarray(fits[("stop", max(mults))].T)
        path = _time_path(A, AT, start, np.ascontiguousarray(C.T), cap, times)
        fits.update({("time", j): np.ascontiguousarray(P.T) for j, P in enumerate(path, start=1)})
        evals += sum(s for t0, T in zip([cap] + times[:-1], times) for _, s in _chebyshev_schedule(t0, T))
    return fits, evals


def _mle_fits(model: _Model, obs: np.ndarray, C: np.ndarray, max_iter: int):
    """The MLE of each column of ``C`` (``k x b``, clipped at 0, not renormalized), the evaluations, and
    the exact ``AT`` it is scored with.  EM by FFT where it applies (no rigorous gap is needed to score
    a fold), Newton exact."""
    EA, EAT = model.columns(obs)
    n_train = C.sum(axis=0)
    M = np.empty((model.k, C.shape[1]))
    evals = 0
    for j in range(C.shape[1]):
        cj = C[:, j]
        nz = np.flatnonzero(cj > 0)
        Aj, ATj = (EA[:, nz], EAT[nz]) if model.dense else (EA[:, nz].tocsr(), EAT[nz].tocsr())
        fast = model.fast_columns(obs[nz], (Aj, ATj))
        pj, e, _, _, _ = _mle(Aj, ATj, cj[nz], float(n_train[j]), model.k, _FOLD_TOL, max_iter, model.dense, fast,
                              band=model.gram_band(obs[nz], fast), low_rank=_low_rank_of(model, obs[nz]))
        evals += e
        M[:, j] = np.maximum(pj, 0.0)
    return M, evals, EAT


def _path_fits(model: _Model, obs: np.ndarray, C: np.ndarray, max_iter: int):
    """Every member of :data:`_PATH` fit on each column of the counts ``C`` (observed outputs ``obs`` x b).

    Returns ``(fits, evals, AT_fast, AT_exact)``: ``fits[key]`` is ``k x b`` (the
    MLE's columns clipped at 0, not renormalized), ``AT_exact`` is ``None`` when the
    MLE is off the path.  The MLE is fit with the exact products (Newton needs the
    matrix); the other members with ``model.fast_columns``.  (The selection,
    :func:`_select`, fits the MLE only where the EM path has not turned down.)
    """
    A, AT = model.fast_columns(obs)
    fits, evals = _regularized_fits(model, obs, C, max_iter, A, AT)
    if not _with_mle(model):
        return fits, evals, AT, None
    fits[("mle", 0)], e, EAT = _mle_fits(model, obs, C, max_iter)
    return fits, evals + e, AT, EAT
