"""The scalar twins of the accountant: one ``(eps, h)`` pair on Python floats.

:func:`defect_scalar` repeats the array path's formulas (:mod:`._array`) for a
log-concave kernel, operation for operation, and gives the same numbers bit for
bit at function-call cost (the package docstring, "Scalars at function-call
cost"); :func:`_upper_total` is its upper bound on the total alone, for the
root search of :mod:`._epsilon`.
"""

from __future__ import annotations

from ..kernels.rounding import _INF, _nextafter


def defect_scalar(kernel, eps: float, h: int, mode: str = "near"):
    """``(total, support_leakage, overlap)`` of one pair as floats: the scalar twin of :func:`_combine`.

    ``kernel`` a :class:`~sparseldp.core.kernels.LogConcaveKernel`, ``eps`` a float
    ``>= 0`` (``inf`` allowed: the mass no ``eps`` covers), ``h`` an int ``>= 0``.
    The same terms, order, rounding directions and safety nets as the array
    path (package docstring, "Scalars at function-call cost"): ``"near"``
    rounds to nearest, ``"up"`` / ``"dn"`` are rigorous bounds.  The leakage
    (:meth:`~sparseldp.core.kernels.LogConcaveKernel.leak_s`) does not depend
    on ``eps`` and is computed once per ``h``; the overlap
    (:meth:`~sparseldp.core.kernels.LogConcaveKernel.overlap_s`) reuses its
    ``eps``-free pieces.
    """
    if h > 2 * kernel.t:
        return 1.0, 1.0, 0.0
    if h >= 1:
        leak = kernel.leak_s(h, mode)
        overlap = kernel.overlap_s(eps, h, mode)
    else:
        leak = overlap = 0.0
    total = leak + overlap
    if mode == "near":
        # min(x, 1.0) without the builtin's cost; NaN passes through as in np.minimum
        return (total if not total > 1.0 else 1.0), (leak if not leak > 1.0 else 1.0), \
            (overlap if not overlap > 1.0 else 1.0)
    if overlap > 0:
        total = _nextafter(total, _INF if mode == "up" else -_INF)
    # the array path's safety net for degenerate parameters: a bound that is not a number is trivial
    trivial = 1.0 if mode == "up" else 0.0
    if leak != leak:
        leak = trivial
    if overlap != overlap:
        overlap = trivial
    if total != total:
        total = trivial
    if mode == "dn":
        leak, overlap, total = max(leak, 0.0), max(overlap, 0.0), max(total, 0.0)
    return min(total, 1.0), min(leak, 1.0), min(overlap, 1.0)


def _upper_total(kernel, eps: float, h: int) -> float:
    """``defect_scalar(kernel, eps, h, "up")[0]`` for ``1 <= h <= 2t``: the same operations, without the split."""
    overlap = kernel.overlap_s(eps, h, "up")
    total = kernel.leak_s(h, "up") + overlap
    if overlap > 0:
        total = _nextafter(total, _INF)
    return total if total < 1.0 else 1.0  # NaN (a degenerate bound) is the trivial bound 1

