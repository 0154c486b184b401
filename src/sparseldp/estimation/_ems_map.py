"""EMS's map (Li et al., SIGMOD 2020): the smoothing kernel, one step on a batch of columns, the floors.

* :func:`_smooth`: the ``(w, 1 - 2w, w)`` kernel (EMS's ``(1, 2, 1)/4`` at ``w = 1/4``), and
  :func:`_check_smooth` the ``smooth`` argument's check;
* :func:`_ems_map`: one EMS step on a batch of columns.

Its fixed point is :mod:`sparseldp.estimation._ems`'s (SQUAREM and Anderson mixing) and
:mod:`sparseldp.estimation._ems_newton`'s (Newton's method on dense channels).
"""

from __future__ import annotations

import numpy as np

from .._validation import check_int

# EMS: the step size treated as rounding; the mixing of logs and Newton's method take entries below
# _LOG_FLOOR at it before their log.
_EMS_FLOOR = 1e-14
_LOG_FLOOR = 1e-300


def _smooth(p: np.ndarray, passes: int, weight: float = 0.25, axis: int = -1) -> np.ndarray:
    """``S^passes p``: the ``(w, 1 - 2w, w)`` kernel (``w = weight``; the default ``1/4`` is EMS's
    ``(1, 2, 1)/4``), edge overflow kept on the end values.

    ``S`` is symmetric and doubly stochastic (:mod:`sparseldp.estimation` docstring), so the sum of
    ``p`` is preserved.  Works along ``axis`` (the last by default: a ``B x k`` array of bootstrap
    replicates is smoothed row by row); vectorized over the domain, the loop is over passes.
    """
    lead = (slice(None),) * (axis % p.ndim)  # index along ``axis`` in place (no moved copies per pass)
    head, tail, first, last = lead + (slice(1, None),), lead + (slice(None, -1),), lead + (0,), lead + (-1,)
    for _ in range(passes):
        out = (1.0 - 2.0 * weight) * p
        out[head] += weight * p[tail]
        out[tail] += weight * p[head]
        out[first] += weight * p[first]
        out[last] += weight * p[last]
        p = out
    return p


def _check_smooth(smooth, method: str) -> int:
    """EMS smoothing passes: ``None`` -> 1; an integer >= 1, and only with ``method="ems"``."""
    if smooth is None:
        return 1
    if method != "ems":
        raise ValueError(f"smooth applies to method='ems' only; got smooth={smooth!r} with method={method!r}")
    return check_int(smooth, "smooth", minimum=1)


def _ems_map(A, AT, C, inv_n, P, passes, weight):
    """One EMS step in every column of ``P`` (``k x b``): ``S^passes (P * g(P))``, columns renormalized."""
    Q = AT @ P
    R = np.divide(C, Q, out=np.zeros_like(C), where=C > 0)
    Pn = _smooth(P * (A @ R) * inv_n, passes, weight, axis=0)
    Pn /= Pn.sum(axis=0, keepdims=True)  # exact in exact arithmetic: keeps rounding from drifting
    return Pn
