"""The mechanism a file is privatized with: what to sample from, which inputs it accepts.

Part of :mod:`sparseldp.io`.  :func:`_resolve_mechanism` turns a spec, a
spec's path or a mechanism object into a :class:`_Target` once;
:func:`_validated` and :func:`_sample` then check and privatize one batch at a
time for both formats.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..channel import SparseChannel
from ..sampling import sample
from ..spec import Spec, load_spec
from .batch import _Batch, _fail_value


@dataclass(frozen=True)
class _Target:
    """What to sample from and which inputs it accepts."""

    sampler: object
    lo: int | None = None  # inclusive bounds when the allowed inputs are a range
    hi: int | None = None
    inputs: np.ndarray | None = None  # sorted allowed inputs when not a range
    description: str = ""

    def check(self, x: np.ndarray) -> np.ndarray | None:
        """Boolean mask of rows whose value the mechanism does not accept (None if all fine)."""
        if self.inputs is not None:
            bad = ~np.isin(x, self.inputs)
        elif self.lo is not None:
            bad = (x < self.lo) | (x > self.hi)
        else:
            return None
        return bad if bad.any() else None


def _resolve_mechanism(mechanism) -> _Target:
    if isinstance(mechanism, (str, os.PathLike)):
        mechanism = load_spec(mechanism)
    if isinstance(mechanism, Spec):
        sampler = mechanism.sampler_target()
        if mechanism.domain is not None:
            lo, hi = mechanism.domain
            return _Target(sampler, lo=lo, hi=hi, description=f"the mechanism's domain [{lo}, {hi}]")
        return _Target(sampler)
    if not (callable(getattr(mechanism, "sample", None)) or isinstance(mechanism, SparseChannel)):
        raise TypeError(
            "mechanism must be a Spec, a path to a mechanism spec (JSON) or a mechanism with "
            f".sample(x, rng=...); got {type(mechanism).__name__}"
        )
    inputs = getattr(mechanism, "inputs", None)
    if inputs is None:
        return _Target(mechanism)
    inputs = np.unique(np.asarray(inputs, dtype=np.int64))
    lo, hi = int(inputs[0]), int(inputs[-1])
    if inputs.size == hi - lo + 1:
        return _Target(mechanism, lo=lo, hi=hi, description=f"the mechanism's domain [{lo}, {hi}]")
    return _Target(mechanism, inputs=inputs, description="the mechanism's input values")


def _sample(target: _Target, x: np.ndarray, rng) -> np.ndarray:
    method = getattr(target.sampler, "sample", None)
    if method is None:  # a library object without the method: the sampling module knows how
        y = np.asarray(sample(target.sampler, x, rng=rng))
    else:
        y = np.asarray(method(x, rng=rng))
    if y.shape != x.shape or not np.issubdtype(y.dtype, np.integer):
        raise TypeError(f"mechanism.sample returned {y.dtype} of shape {y.shape}; expected integers of "
                        f"shape {x.shape}")
    return y.astype(np.int64, copy=False)


def _validated(batch: _Batch, target: _Target) -> np.ndarray:
    x = batch.values()
    bad = target.check(x) if x.size else None
    if bad is not None:
        raise _fail_value(batch, int(np.argmax(bad)), f"is outside {target.description}")
    return x
