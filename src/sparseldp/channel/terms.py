"""The hockey-stick terms ``[Q(y|x) - e^eps Q(y|x')]_+`` as both pair backends evaluate them.

For ``eps <= 700`` the terms are linear in ``u = e^eps``; above, ``e^eps``
overflows in float64 and a term is evaluated in log space as
``Q(y|x) (1 - e^{eps - L})`` with ``L`` the log ratio (package docstring).
"""

from __future__ import annotations

import numpy as np

# Above this eps, e^eps overflows in float64: defects are then evaluated in log space.
_EPS_LINEAR_MAX = 700.0
# Working-set size (array elements) of one block of pairs.
_BLOCK_ELEMS = 1 << 19


def _linear_and_log(eps):
    """Split eps values into the linear path (u = e^eps) and the log path."""
    eps = np.asarray(eps, dtype=float)
    lin = eps <= _EPS_LINEAR_MAX
    return lin, np.exp(np.where(lin, eps, 0.0))


def _log_path_sum(P, X, eps):
    """Terms ``P (1 - e^{eps - X})`` where the log ratio ``X > eps`` (``X = inf``: all of ``P``)."""
    with np.errstate(invalid="ignore", over="ignore"):
        term = P * -np.expm1(np.minimum(eps - X, 0.0))
    return np.where(X > eps, term, 0.0)
