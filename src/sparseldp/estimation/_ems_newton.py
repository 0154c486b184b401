"""Newton's method on EMS's fixed point, for dense channels whose Jacobian is cheap.

:func:`_ems_newton` finishes the columns :mod:`sparseldp.estimation._ems`'s SQUAREM and Anderson mixing
leave short where EMS contracts very slowly; :func:`_trials` are its trial steps.
"""

from __future__ import annotations

import numpy as np

from ._ems_map import _EMS_FLOOR, _LOG_FLOOR, _smooth
from ._twolevel import dense_of

# Newton's method (_ems_newton) on dense channels whose Jacobian costs at most _NEWTON_COST flops (k^2 m'):
# the evaluations of F kept for it (at most a tenth of max_iter), its trials per step, its smallest damping.
_NEWTON_COST = 2e8
_NEWTON_EVALS = 200
_NEWTON_TRIES = 12
_NEWTON_MU = 1e-4


def _newton_affordable(A, limit: float = _NEWTON_COST) -> bool:
    """Whether :func:`_ems_newton` runs on the channel ``A`` (``k x m'``): dense, with ``k^2 m'`` (a Jacobian
    per step) at most ``limit`` (default :data:`_NEWTON_COST`: about 400 values with 400 outputs).  Two-level
    products (:mod:`sparseldp.estimation._twolevel`) count as dense: they carry the matrix."""
    return dense_of(A) is not None and A.shape[0] ** 2 * A.shape[1] <= limit


def _trials(eye, D, r, mu):
    """:func:`_ems_newton`'s trial steps, in order: ``((1 + mu) I - D)^-1 r`` and its halvings, then
    steps damped tenfold more each time (Levenberg-Marquardt); each with whether it is Newton's full
    undamped step and the damping it used."""
    def solve(m):
        try:
            return np.linalg.solve(eye * (1.0 + m) - D, r)
        except np.linalg.LinAlgError:
            return np.full(r.size, np.nan)

    d, a = solve(mu), 1.0
    for _ in range(_NEWTON_TRIES):
        yield a * d, a == 1.0 and mu == 0.0, mu
        a *= 0.5
    for _ in range(_NEWTON_TRIES):
        mu = max(10.0 * mu, _NEWTON_MU)
        yield solve(mu), False, mu


def _ems_newton(A, AT, C, inv_n, P, passes, weight, tol, max_evals):
    r"""Newton's method on EMS's fixed point in the logarithms, column by column, for a dense ``A``
    (``k x m'``): :func:`~sparseldp.estimation._ems._ems_fixed`'s finish for the columns the mixing leaves short.

    With ``F(p) = S (p * g(p))`` (``S`` the smoothing, ``g = A (c / A^T p) / n``; ``sum p g = 1`` for
    every ``p``), ``dF/dp = S (diag(g) - diag(p) A diag(c / (n q^2)) A^T)``, ``q = A^T p``.  In
    ``t = log p`` the fixed point solves ``log F(e^t) = t``; each step solves
    ``((1 + mu) I - D) d = log F(p) - log p`` with ``D = diag(1 / F) (dF/dp) diag(p)`` and moves
    ``p <- p e^d`` (renormalized; positive without a floor), the trials of :func:`_trials` in turn
    until the residual's norm ``sum p (log F(p) - log p)^2`` shrinks (weighted by the current ``p``,
    so entries near 0, whose logarithms are large and matter little, do not hold the step back): the
    step and its halvings, then steps damped more (Levenberg-Marquardt's ``mu``, lowered tenfold after
    each step taken).

    Where EMS contracts within about 1e-5 of 1 (randomized response on 400 values: a long flat tail
    that the smoothing diffuses over and the data barely restore) the mixing needs tens of thousands of
    evaluations; Newton converged in 7-10 steps from SQUAREM's first 300 evaluations there, and finished
    all 34 bootstrap refits the mixing left (eps = 3, B = 50; 33 with halvings alone: Jacobians
    conditioned at 1e7-1e9 move some entries by factors of e^800, which the damped steps avoid).

    A column is converged after an undamped step (``mu = 0``) no longer than ``tol`` in total variation,
    its distance then the last step's (quadratic convergence leaves far less), or once its plain step is
    at most ``1e-14`` (rounding).  ``max_evals`` caps each column's evaluations of ``F`` (one per trial
    point); a column no trial step improves stays where it was.  Returns (P, evaluations: the most any column used,
    converged mask, ``2 x b``: distance and last plain step).
    """
    k, b = P.shape
    A, AT = dense_of(A), dense_of(AT)  # the matrix itself (two-level products carry it)
    eye = np.eye(k)
    P = np.array(P, dtype=float)
    conv = np.zeros(b, bool)
    dist = np.full((2, b), np.inf)
    used = 0
    for j in range(b):
        c, nj = C[:, j], float(inv_n[j])
        has = c > 0

        def F(p):
            q = AT @ p
            g = nj * (A @ np.divide(c, q, out=np.zeros_like(q), where=has))
            return np.maximum(_smooth(p * g, passes, weight), _LOG_FLOOR), q, g

        p = np.maximum(P[:, j], _LOG_FLOOR)
        p /= p.sum()
        Fp, q, g = F(p)
        r = np.log(Fp) - np.log(p)
        evals, mu = 1, 0.0
        while evals < max_evals:
            plain = 0.5 * float(np.abs(Fp - p).sum())
            if plain <= _EMS_FLOOR:  # a fixed point to rounding (the mixing's rule too)
                conv[j] = True
                dist[:, j] = 0.0, plain
                break
            w = nj * np.divide(c, q * q, out=np.zeros_like(q), where=has)
            D = _smooth(np.diag(g) - p[:, None] * ((A * w) @ AT), passes, weight, axis=0) * (p[None, :] / Fp[:, None])
            merit = float(p @ (r * r))
            for d, undamped, mu_t in _trials(eye, D, r, mu):
                if not np.all(np.isfinite(d)):
                    continue
                pn = p * np.exp(np.minimum(d, 700.0))
                pn = np.maximum(pn / pn.sum(), _LOG_FLOOR)
                Fn, qn, gn = F(pn)
                evals += 1
                rn = np.log(Fn) - np.log(pn)
                if float(p @ (rn * rn)) < merit or evals >= max_evals:
                    break
            else:
                break
            step = 0.5 * float(np.abs(pn - p).sum())
            p, Fp, q, g, r = pn, Fn, qn, gn, rn  # the accepted trial's residual, not computed again
            mu = mu_t / 10.0 if mu_t > _NEWTON_MU else 0.0
            if undamped and step <= tol:
                conv[j] = True
                dist[:, j] = step, 0.5 * float(np.abs(Fp - p).sum())
                break
        used = max(used, evals)
        if conv[j]:
            P[:, j] = p / p.sum()
    return P, used, conv, dist
