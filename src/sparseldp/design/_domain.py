"""What the finite-domain designers share (:mod:`.finite`, :mod:`._clipped`).

The checks of a target on a domain and of a prior (:func:`_check_target`,
:func:`_check_prior`), the distortion moments averaged over the prior
(:func:`_moments`), the channel with a family's windows
(:func:`_window_channel`), the channel's certificate for searches
(:func:`_certified`), the finished :class:`~sparseldp.design.Design`
(:func:`_finish`), and the size of the parameter's log grid (:data:`_GRID`).
"""

from __future__ import annotations

import numbers

import numpy as np

from .._validation import check_design_delta, check_int
from ..core.accounting import _near_margin
from ._common import Design, check_design_eps
from ..core.families import Family
from ..channel import check_domain, check_entries

_GRID = 24


def _check_target(eps, delta, H, domain, fam: Family | None = None):

    eps = check_design_eps(eps, fam)
    delta = check_design_delta(delta, "delta")
    H = check_int(H, "H", minimum=1)
    a, b = check_domain(domain)
    # every channel on the domain stores at least one entry per input: refuse before any O(k) work
    check_entries(b - a + 1, 1, f"domain ({a}, {b})")
    return eps, delta, H, (a, b)


def _check_prior(prior, k: int, name: str = "prior"):
    if prior is None:
        return np.full(k, 1.0 / k)
    allowed = (f"{name} must be an array of {k} nonnegative weights (one per domain value), finite, "
               "with a positive sum")
    if isinstance(prior, (str, bytes)) or isinstance(prior, (bool, np.bool_)):
        raise TypeError(f"{allowed}; got {prior!r}"[:200])
    try:
        raw = np.asarray(prior)
        if raw.dtype.kind not in "iuf" and not (raw.dtype == object and raw.size and all(
                isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) for v in raw.reshape(-1))):
            raise TypeError
        w = raw.astype(float)
    except (TypeError, ValueError):
        raise TypeError(f"{allowed}; got {prior!r}"[:200]) from None
    if w.shape != (k,):
        raise ValueError(f"{allowed}; got shape {w.shape}")
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{allowed}; got {float(w[i])!r} at index {i}")
    if w.sum() <= 0:
        raise ValueError(f"{allowed}; got weights summing to {float(w.sum())!r}")
    return w / w.sum()


def _moments(channel, prior) -> tuple[float, float]:
    order = np.argsort(np.asarray(channel.inputs), kind="stable")
    r1 = channel.distortion(1)[order]
    r2 = channel.distortion(2)[order]
    return float(prior @ r1), float(prior @ r2)


def _window_channel(fam: Family, param, t, domain, window):
    return fam.channel(param, 2 * t + 1, domain, window)


def _certified(channel, eps, H, delta) -> float:
    """For searches: ``<= delta`` only if ``channel.delta_star_upper(eps, H)`` is.

    The nearest ``delta`` is tried first and returned when it exceeds the target
    by more than any rounding error (as :func:`sparseldp.core.accounting.certified_delta_star`).
    """
    near = float(channel.delta_star(eps, H))
    if near > delta + _near_margin(delta, eps):
        return near
    return float(channel.delta_star_upper(eps, H))


def _finish(fam: Family, param, t, eps, delta, H, domain, window, objective, w, note) -> Design:
    ch = _window_channel(fam, param, t, domain, window)
    certified = float(ch.delta_star_upper(eps, H))
    r1, r2 = _moments(ch, w)
    mech = fam.make(param, 2 * t + 1)
    return Design(fam.name, mech, mech.parameter, mech.s, eps, delta, H, certified, r1, r2, domain, window, ch,
                  objective, note)
