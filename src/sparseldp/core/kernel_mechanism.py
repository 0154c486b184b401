r"""The s-sparse radius mechanism with an arbitrary symmetric kernel (Definition 1).

:class:`SparseKernel` is ``M(y | x) = w(|x - y|) / C_t * 1{|x - y| <= t}`` on
the integers for any weights ``w(0), ..., w(t)`` (nonnegative, finite,
``w(0) > 0``), ``C_t = w(0) + 2 sum_{j=1}^t w(j)``.  Definition 1 of the paper
allows any nonnegative weight; the closed forms of Theorems 3 and 9 need a
log-concave kernel, so this mechanism is accounted by the generic path of
:mod:`sparseldp.core.accounting` (a direct sum over the window, exact up to
rounding, with rigorous upper bounds): staircases and zeros inside the window
are fine.  Everything :class:`~sparseldp.core.mechanisms.RadiusMechanism` offers
works on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .kernels import MAX_KERNEL_S, GeneralKernel, check_weights
from .._validation import check_odd_s
from .mechanisms import RadiusMechanism

__all__ = ["SparseKernel"]


@dataclass(frozen=True, eq=True)
class SparseKernel(RadiusMechanism):
    """s-sparse mechanism with kernel weights ``w(0..t)``: ``M(y | x) = w(|x - y|) / C_t``, ``|x - y| <= t``.

    Parameters
    ----------
    weights : tuple of float
        ``w(0), w(1), ..., w(t)``: finite, ``>= 0``, ``w(0) > 0``; any sequence
        or 1-d array is accepted and stored as a tuple of floats (so the
        mechanism is hashable; the sampler caches its tables by mechanism).
        The support size ``s = 2 len(weights) - 1`` is derived (property
        :attr:`s`), at most ``2^22 + 1``.  Scaling all weights by one positive
        constant gives the same mechanism (but a different, unequal value).

    Examples
    --------
    >>> m = SparseKernel(weights=(1.0, 1.0, 0.25))
    >>> m.s
    5
    >>> float(m.pmf(0))
    0.2
    """

    weights: tuple[float, ...]
    family: str = field(default="kernel", init=False, repr=False, compare=False)

    def __post_init__(self):
        w = check_weights(self.weights, "weights")
        object.__setattr__(self, "weights", tuple(w.tolist()))

    @property
    def s(self) -> int:
        """Support size ``s = 2t + 1``, ``t = len(weights) - 1``."""
        return 2 * len(self.weights) - 1

    @classmethod
    def from_function(cls, w, *, s) -> "SparseKernel":
        """The mechanism with weights ``w(0), ..., w(t)``, ``t = (s - 1) / 2``, from a callable of the distance.

        ``w`` is first called once with the integer array ``d = 0..t``; if it
        does not return an array of that shape (a scalar function such as
        ``lambda d: math.exp(-d)`` raises or returns one number), it is called
        once per distance with a Python int.
        """
        if not callable(w):
            raise TypeError(f"w must be a callable of the distance d = 0..t; got {type(w).__name__} {w!r}"[:300])
        s = check_odd_s(s, "s")
        if s > MAX_KERNEL_S:
            raise ValueError(f"s must be an odd integer in [1, 2^22 + 1 = {MAX_KERNEL_S}] for a general kernel; "
                             f"got {s}")
        t = (s - 1) // 2
        d = np.arange(t + 1, dtype=np.int64)
        values = None
        try:
            out = np.asarray(w(d))
            if out.shape == (t + 1,):
                values = out
        except (TypeError, ValueError):
            values = None
        if values is None:
            values = [w(int(k)) for k in range(t + 1)]
        return cls(weights=values)

    def _kernel(self):
        return GeneralKernel(self.weights)

    @property
    def parameter(self):
        return ("weights", self.weights)
