"""Result values that hold arrays (sparseldp._frozen): equal by value, hashable as a frozen dataclass
is (only without arrays), read-only arrays kept read-only through pickling.

``==`` on two frozen dataclasses compares their fields as tuples; with array fields
that raised "truth value of an array is ambiguous" on equal results."""

import copy
import pickle

import numpy as np
import pytest

import sparseldp as sl
from sparseldp.estimation import ReportCounts


def _same_and_different():
    m = sl.SparseLaplace(lam=0.5, s=7)
    ch = m.to_channel((0, 9), "extended")
    return [
        (ReportCounts(3, [1, 2, 0]), ReportCounts(3, [1, 2, 0]), ReportCounts(4, [1, 2, 0])),
        (ch.delta_with_argmax([0.5, 1.0]), ch.delta_with_argmax([0.5, 1.0]), ch.delta_with_argmax([0.5, 1.5])),
    ]


@pytest.mark.parametrize("a, same, other", _same_and_different(), ids=["ReportCounts", "WorstPair (arrays)"])
def test_values_with_arrays_compare_by_value(a, same, other):
    assert a == same and not a != same
    assert a != other
    assert a == copy.deepcopy(a) == pickle.loads(pickle.dumps(a))
    assert a != "something else"
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)


def test_scalar_worst_pair_stays_hashable():
    ch = sl.SparseLaplace(lam=0.5, s=7).to_channel((0, 9), "extended")
    w = ch.delta_with_argmax(1.0)
    assert hash(w) == hash(copy.deepcopy(w)) and {w: 1}[copy.deepcopy(w)] == 1


def test_read_only_counts_stay_read_only_through_pickle():
    back = pickle.loads(pickle.dumps(ReportCounts(0, [5, 6])))
    assert not back.counts.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        back.counts[0] = 1
