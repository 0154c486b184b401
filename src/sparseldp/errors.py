"""Exceptions raised by sparseldp."""

from __future__ import annotations

__all__ = ["InfeasibleError"]


class InfeasibleError(ValueError):
    """No mechanism in the requested family meets the privacy target.

    Raised with a proof sketch in the message: e.g. the support leakage alone
    exceeds ``delta`` for every ``eps`` (so no ``eps`` works), or the limit
    ``s -> infinity`` of ``delta_star`` (which is nonincreasing in ``s``)
    already exceeds ``delta`` (so no ``s`` works).
    """
