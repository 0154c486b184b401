"""Frozen dataclasses that hold numpy arrays: equality by value, read-only arrays after pickling.

A ``@dataclass(frozen=True)`` compares its fields as a tuple, and ``==`` on two
arrays is an array, so comparing two equal results raised ``ValueError``; and
a pickled read-only array comes back writeable.  :class:`ArrayValue` gives such
classes value equality (arrays by :func:`numpy.array_equal`, fields with
``compare=False`` left out); :class:`ReadOnlyArrays` also restores read-only
arrays on unpickling, for classes that keep theirs read-only.  The classes are
declared with ``eq=False`` so the dataclass machinery keeps this ``__eq__``;
they hash as a frozen dataclass does (so not while a field is an array).
"""

from __future__ import annotations

import dataclasses

import numpy as np


def frozen_array(x, dtype=None) -> np.ndarray:
    """``x`` as a read-only array; a writeable input is copied first, so the caller's array keeps its flags."""
    arr = np.asarray(x, dtype=dtype)
    if arr.flags.writeable:
        arr = arr.copy()
        arr.setflags(write=False)
    return arr


class ArrayValue:
    """Mixin for frozen dataclasses with array fields (module docstring)."""

    __slots__ = ()

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        for f in dataclasses.fields(self):
            if not f.compare:
                continue
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
                if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                        and np.array_equal(a, b)):
                    return False
            elif a != b:
                return False
        return True

    def __hash__(self):
        # as a frozen dataclass's: the compared fields as a tuple (unhashable while one is an array)
        return hash(tuple(getattr(self, f.name) for f in dataclasses.fields(self) if f.compare))


class ReadOnlyArrays(ArrayValue):
    """:class:`ArrayValue` whose array fields are read-only, after unpickling too."""

    __slots__ = ()

    def __setstate__(self, state):
        for name, value in state.items():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
            object.__setattr__(self, name, value)
