r"""The dp-accounting route: one report's privacy loss distribution as a dp-accounting object.

A person who reports ``k`` times (fresh noise each time) releases the product
channel; its ``(eps, delta)`` profile is that of the ``k``-fold composition of
the single-report privacy loss distribution (PLD).  This module hands
dp-accounting the exact pair of output distributions (through the local
randomizer protocol) and lets its ``PrivacyLossDistribution.self_compose`` do
the rest: the interoperable route, e.g. to compose with other mechanisms'
PLDs.  :func:`sparseldp.composition.compose` composes the two families on Z
without discretization (:mod:`sparseldp.composition.exact`).

For inputs ``x`` and ``x'`` the PLD is the law of the privacy loss
``L(Y) = log Q(Y | x) - log Q(Y | x')`` under ``Y ~ Q(. | x)``; then

.. math::

    \delta(\varepsilon) = \mathbb{E}_{Y \sim Q(\cdot|x)}\big[(1 - e^{\varepsilon - L(Y)})_+\big]
      = \sum_y [Q(y|x) - e^{\varepsilon} Q(y|x')]_+ ,

the ordered defect of Definition 2 / Theorem 2.  Outputs in ``S(x) \ S(x')``
have ``L = +inf``: their mass (the support leakage of Remark 2) is passed as
dp-accounting's *infinity mass*, never folded into a float.  dp-accounting
rounds the loss values up to multiples of ``value_discretization_interval``
(``pessimistic_estimate=True``), so every ``delta`` it reports is an upper
bound on the true one, before and after composition (up to its own tail
truncation in ``self_compose``, ``1e-15`` by default).

dp-accounting is an optional dependency, imported only when this route is used.
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_int, check_positive
from ..core.mechanisms import RadiusMechanism
from ..core.protocol import LocalRandomizer

__all__ = ["to_pld", "log_pmf_pair"]

# Largest support handed to dp-accounting (two dicts of s entries; the sampler's limit too).
_MAX_S = (1 << 22) + 1


def _dp_accounting():
    try:
        from dp_accounting.pld import privacy_loss_distribution as pld
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "sparseldp.composition needs the optional dependency dp-accounting "
            "(pip install dp-accounting); it is used to compose privacy loss distributions"
        ) from exc
    return pld


def log_pmf_pair(mechanism, h=None, *, x=None, x_prime=None) -> tuple[dict, dict]:
    """The two rows as ``{output: log probability}`` dicts (supports only), through the protocol.

    Any local randomizer takes the two inputs ``x`` and ``x_prime``.  For a
    mechanism on Z the separation ``h`` alone is a shorthand for the pair
    ``x = 0``, ``x' = h`` (by translation invariance every pair at
    separation ``h`` has the same PLD, and by reflection both orders too,
    docs/paper.md, "delta* and ordered pairs").  For a :class:`SparseChannel` give the two input values
    ``x`` and ``x_prime``.  Log-probabilities come from the exact ``logpmf``
    (never ``log(pmf)``).
    """

    if not isinstance(mechanism, LocalRandomizer):
        raise TypeError(f"mechanism must be a local randomizer (a mechanism on Z or a SparseChannel); got "
                        f"{type(mechanism).__name__}")
    on_z = isinstance(mechanism, RadiusMechanism)
    if h is not None:
        if not on_z:
            raise ValueError("a channel is not translation invariant: give x and x_prime instead of h")
        if x is not None or x_prime is not None:
            raise ValueError("give either the separation h or the inputs x and x_prime, not both")
        x, x_prime = 0, check_int(h, "h", minimum=1)
    elif x is None or x_prime is None:
        raise ValueError("h (the separation |x - x'|, an integer >= 1) is required for a mechanism on Z"
                         if on_z else "x and x_prime (two input values of the channel) are required for a channel")
    x = check_int(x, "x")
    x_prime = check_int(x_prime, "x_prime")
    if on_z and mechanism.s > _MAX_S:
        raise ValueError(
            f"s must be an odd integer <= 2^22 + 1 = {_MAX_S} to build a PLD (dp-accounting takes the two "
            f"rows as Python dicts, one entry per output); got {mechanism.s}"
        )
    out = []
    for v in (x, x_prime):  # the protocol: support(x) and logpmf(y, x), for every randomizer alike
        labels = np.asarray(mechanism.support(v), dtype=np.int64)
        logp = np.asarray(mechanism.logpmf(labels, v), dtype=float)
        out.append(dict(zip(labels.tolist(), logp.tolist())))
    return out[0], out[1]


def to_pld(mechanism, h=None, *, x=None, x_prime=None, value_discretization_interval=1e-4):
    r"""The privacy loss distribution of one report, as a dp-accounting object.

    Parameters
    ----------
    mechanism : SparseLaplace, SparseGaussian or SparseChannel
    h : int >= 1
        Separation ``|x - x'|`` (mechanisms on Z).
    x, x_prime : int
        The two inputs (channels).  The PLD then covers both orders (dp-accounting's
        "remove" and "add" directions, ``symmetric=False``): its delta is the
        maximum of the two ordered defects.  On Z the two orders coincide and a
        symmetric PLD is returned.
    value_discretization_interval : float > 0
        dp-accounting's grid for loss values; losses are rounded *up*
        (pessimistic), so the deltas reported are upper bounds.

    Raises
    ------
    ValueError
        Disjoint supports (e.g. ``h > 2t``): then ``delta = 1`` exactly and there
        is nothing to compose.

    Returns
    -------
    dp_accounting.pld.privacy_loss_distribution.PrivacyLossDistribution
        Compose ``k`` reports with ``pld.self_compose(k)`` (or ``pld.compose``
        with other mechanisms' PLDs) and read ``get_delta_for_epsilon`` /
        ``get_epsilon_for_delta``.

    Examples
    --------
    >>> from sparseldp import SparseLaplace
    >>> pld = to_pld(SparseLaplace(lam=0.5, s=7), 3)
    >>> d1 = float(pld.get_delta_for_epsilon(1.0))
    >>> abs(d1 - float(SparseLaplace(lam=0.5, s=7).delta_h(1.0, 3))) < 1e-3
    True
    """

    vdi = check_positive(value_discretization_interval, "value_discretization_interval")
    upper, lower = log_pmf_pair(mechanism, h, x=x, x_prime=x_prime)
    if not (set(upper) & set(lower)):
        raise ValueError(
            "the two rows have disjoint supports, so one report tells the inputs apart: delta = 1 for every "
            "eps, for one report and for any number of them (dp-accounting cannot compose a privacy loss "
            "distribution that is all infinity mass)"
        )
    pld = _dp_accounting()
    symmetric = isinstance(mechanism, RadiusMechanism)
    # dp-accounting: mu_upper = Q(.|x) (the loss is computed under it), mu_lower = Q(.|x')
    return pld.from_two_probability_mass_functions(
        log_probability_mass_function_lower=lower, log_probability_mass_function_upper=upper,
        pessimistic_estimate=True, value_discretization_interval=vdi,
        log_mass_truncation_bound=-math.inf, symmetric=symmetric,
    )


def _pld_or_none(mechanism, *, x, x_prime, value_discretization_interval):
    """:func:`to_pld` of a channel's rows ``x``, ``x_prime``, or ``None`` when their supports are disjoint
    (one report tells them apart: ``delta = 1``, which dp-accounting cannot represent; a
    :class:`~sparseldp.composition.PLDComposition` entry of ``None`` stands for it)."""
    try:
        return to_pld(mechanism, x=x, x_prime=x_prime, value_discretization_interval=value_discretization_interval)
    except ValueError as exc:
        if "disjoint supports" not in str(exc):
            raise
        return None
