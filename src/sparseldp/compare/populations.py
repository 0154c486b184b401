"""The populations a comparison simulates: :func:`default_population` and the named :data:`SHAPES`.

Each is a distribution over the ``k = b - a + 1`` values of the domain ``a..b``, described on the
cell midpoints ``u = (j + 1/2) / k``.
"""

from __future__ import annotations

import numpy as np

from ..channel import check_domain

__all__ = ["SHAPES", "default_population", "population_shape"]


def default_population(domain) -> np.ndarray:
    """A smooth two-bump distribution on ``a..b``: bumps at 30% and 70% of the domain
    (widths 8% and 15%, weights 1 and 0.6) over a 5% uniform floor."""

    a, b = check_domain(domain)
    k = b - a + 1
    u = (np.arange(k) + 0.5) / k
    p = np.exp(-0.5 * ((u - 0.3) / 0.08) ** 2) + 0.6 * np.exp(-0.5 * ((u - 0.7) / 0.15) ** 2)
    p = p / p.sum()
    return 0.95 * p + 0.05 / k


def _normal(u, mu, sd):
    w = np.exp(-0.5 * ((u - mu) / sd) ** 2)
    return w / w.sum()


#: Named population shapes for ``population=`` (and ``sparseldp compare --shape``), on ``u = (j + 1/2)/k``.
SHAPES = {
    "two-bump": "the default: bumps at 30% and 70% of the domain over a 5% uniform floor",
    "uniform": "every value equally likely",
    "normal": "a normal bump at the middle, standard deviation 15% of the domain",
    "skewed": "a heavy right tail, weight (1 + u / 0.05)^-2.5",
    "spiky": "70% a normal bump (middle, sd 15%) and 30% on the single value at 20% of the domain",
}


def population_shape(name: str, domain) -> np.ndarray:
    """The distribution :data:`SHAPES` names, on ``a..b``; ``ValueError`` for an unknown name."""
    if name not in SHAPES:
        raise ValueError(f"population shape must be one of {', '.join(SHAPES)}; got {name!r}")
    a, b = check_domain(domain)
    k = b - a + 1
    u = (np.arange(k) + 0.5) / k
    if name == "two-bump":
        return default_population(domain)
    if name == "uniform":
        return np.full(k, 1.0 / k)
    if name == "normal":
        return _normal(u, 0.5, 0.15)
    if name == "skewed":
        w = (1.0 + u / 0.05) ** -2.5
        return w / w.sum()
    p = 0.7 * _normal(u, 0.5, 0.15)
    p[int(0.2 * k)] += 0.3
    return p
