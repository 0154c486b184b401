"""Report histograms: :class:`ReportCounts` and turning reports into counts.

The report histogram is a sufficient statistic for every estimator of the
package (:mod:`sparseldp.estimation`): reports, given as an integer array or
an iterable of arrays (e.g. :func:`sparseldp.io.iter_column`), are reduced to
counts by chunked ``np.bincount`` passes, never per report in Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass

import numpy as np

from .._frozen import ReadOnlyArrays
from .._validation import check_int, check_int_array

# Reports per bincount chunk: 32 MiB of int64, cache-friendly and bounded memory.
_CHUNK = 1 << 22
# Widest span of output values counted with a direct bincount table.
_SPAN_MAX = 1 << 26


@dataclass(frozen=True, eq=False)
class ReportCounts(ReadOnlyArrays):
    """A report histogram: ``counts[j]`` reports had the value ``offset + j``.

    This is what :func:`sparseldp.io.column_counts` returns (as a pair), and
    what the estimators reduce any input to.  ``counts`` is a read-only int64
    array of nonnegative entries.
    """

    offset: int
    counts: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "offset", check_int(self.offset, "offset"))
        c = check_int_array(self.counts, "counts", minimum=0)
        if c.ndim != 1:
            raise ValueError(f"counts must be a 1-D array of integers >= 0; got shape {c.shape}")
        c = np.array(c, dtype=np.int64)
        c.setflags(write=False)
        object.__setattr__(self, "counts", c)

    @property
    def n(self) -> int:
        """Number of reports."""
        return int(self.counts.sum())

    @property
    def values(self) -> np.ndarray:
        """The report values ``offset .. offset + len(counts) - 1``."""
        return np.arange(self.offset, self.offset + self.counts.size, dtype=np.int64)

    @classmethod
    def from_reports(cls, reports) -> "ReportCounts":
        """Histogram of an integer array (or an iterable of integer arrays, e.g.
        :func:`sparseldp.io.iter_column`) in chunked bincount passes."""
        lo, hi = None, None
        counts = np.zeros(0, np.int64)
        for chunk in _chunks(reports):
            if chunk.size == 0:
                continue
            a, b = int(chunk.min()), int(chunk.max())
            nlo = a if lo is None else min(lo, a)
            nhi = b if hi is None else max(hi, b)
            if nhi - nlo + 1 > _SPAN_MAX:
                raise ValueError(
                    f"reports must span at most {_SPAN_MAX} consecutive integers to be counted; "
                    f"got values from {nlo} to {nhi}"
                )
            if lo is None or nlo < lo or nhi > hi:
                grown = np.zeros(nhi - nlo + 1, np.int64)
                if lo is not None:
                    grown[lo - nlo : lo - nlo + counts.size] = counts
                counts, lo, hi = grown, nlo, nhi
            counts += np.bincount(chunk - lo, minlength=counts.size)
        return cls(0 if lo is None else lo, counts)


def _chunks(reports):
    """Yield int64 chunks of the reports (an array, or an iterable of arrays)."""
    # a list of arrays is a list of chunks (np.array_split's output: their lengths may differ)
    chunked = isinstance(reports, (list, tuple)) and len(reports) > 0 and all(
        isinstance(part, np.ndarray) and part.ndim >= 1 for part in reports)
    if not chunked and (isinstance(reports, (np.ndarray, list, tuple)) or np.isscalar(reports)):
        arr = check_int_array(reports, "reports").reshape(-1)
        for start in range(0, arr.size, _CHUNK):
            yield arr[start : start + _CHUNK]
        return
    if isinstance(reports, Iterable) and not isinstance(reports, (str, bytes, Mapping, Set)):
        for part in reports:
            arr = check_int_array(part, "reports").reshape(-1)
            for start in range(0, arr.size, _CHUNK):
                yield arr[start : start + _CHUNK]
        return
    raise TypeError(
        "reports must be an integer array, an iterable of integer arrays, a ReportCounts or a "
        f"mapping value -> count; got {type(reports).__name__}"
        + (" (a set drops repeated reports: pass a list or an array)" if isinstance(reports, Set) else "")
    )


def _as_report_counts(reports, counts: bool) -> ReportCounts | None:
    """ReportCounts for inputs that already are counts; None for raw reports."""
    if isinstance(reports, ReportCounts):
        return reports
    if counts:
        if isinstance(reports, Mapping):
            keys = check_int_array(np.fromiter(reports.keys(), dtype=object, count=len(reports)), "report values")
            vals = check_int_array(np.fromiter(reports.values(), dtype=object, count=len(reports)),
                                   "report counts", minimum=0)
            if keys.size == 0:
                return ReportCounts(0, np.zeros(0, np.int64))
            lo = int(keys.min())
            span = int(keys.max()) - lo + 1
            if span > _SPAN_MAX:
                raise ValueError(f"report values must span at most {_SPAN_MAX} integers; got {span}")
            c = np.zeros(span, np.int64)
            np.add.at(c, keys - lo, vals)
            return ReportCounts(lo, c)
        if not (isinstance(reports, (tuple, list)) and len(reports) == 2):
            raise TypeError(
                "with counts=True, reports must be a pair (offset, counts) as returned by "
                f"sparseldp.io.column_counts, a ReportCounts or a mapping value -> count; got {reports!r}"[:300]
            )
        return ReportCounts(reports[0], reports[1])
    if isinstance(reports, Mapping):
        raise TypeError("reports is a mapping value -> count: pass counts=True")
    return None
