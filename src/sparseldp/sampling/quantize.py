"""Exact quantization of a radius mechanism's pmf: integer counts ``c_k / 2^64``.

The ideal pmf ``p_k = w(k)/C_t`` is computed from the kernel's exact decimal
weights (60 significant digits) and rounded by largest remainder to integers
``c_k >= 1`` that sum to ``2^64`` and are symmetric (``c_{-k} = c_k``); see
"What is sampled" in :mod:`sparseldp.sampling`.  :class:`MechanismTables`
holds those counts together with the inverse-CDF thresholds and the guide
table the sampler (:mod:`.sampler`) reads; :func:`sampling_tables` builds and
caches it, :func:`sampling_pmf` returns the realized pmf as Fractions.

A mechanism is known by protocol (``t``, ``s`` and a kernel with
``decimal_weights``), never by importing :mod:`sparseldp.core.mechanisms`.
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

_TWO64 = 1 << 64
_BUCKET_BITS = 48
# Largest support with exact sampling tables (one exact count per offset).
_MAX_S = (1 << 22) + 1
# Decimal precision (significant digits) for the ideal pmf: ~199 bits.
_DIGITS = 60


def _decimal_context() -> decimal.Context:
    return decimal.Context(prec=_DIGITS, Emin=decimal.MIN_EMIN, Emax=decimal.MAX_EMAX,
                           rounding=decimal.ROUND_HALF_EVEN)


def _ideal_weights(mechanism) -> list:
    """``w(0..t)`` as 60-digit Decimals (``w(0) = 1``), by exact-ratio recurrences.

    Laplace: ``w(k) = q^k``, ``q = e^{-lam}``.  Gaussian: ``w(k) = w(k-1) a b^{k-1}``
    with ``a = e^{-c}``, ``b = e^{-2c}``, ``c = 1/(2 sigma^2)``.  Each step
    multiplies correctly rounded numbers, so ``w(k)`` carries a relative error
    below ``(k^2 + 2) 10^{-59}``: far below ``2^{-64}`` for any feasible ``t``.
    """
    return mechanism.kernel.decimal_weights(_decimal_context())


def _quantize_symmetric(w: list) -> tuple[list[int], float, int]:
    """Counts ``c_0..c_t`` (half window) from weights ``w(0..t)``; see :mod:`sparseldp.sampling`.

    Returns ``(half_counts, max_abs_error, floored)`` where ``max_abs_error`` is
    ``max_k |c_k/2^64 - p_k|`` and ``floored`` counts offsets whose ideal
    probability is below ``2^-64`` (raised to ``2^-64``, zero weights included).
    """
    t = len(w) - 1
    if t == 0:
        return [_TWO64], 0.0, 0
    ctx = _decimal_context()
    with decimal.localcontext(ctx):
        total = w[0] + 2 * sum(w[1:], decimal.Decimal(0))
        scale = decimal.Decimal(_TWO64) / total
        r = [wk * scale for wk in w]  # ideal counts 2^64 p_k
        fl = [int(rk) for rk in r]  # floor (all positive)
        # every point of the window keeps at least one count, a weight of exactly zero (general
        # kernels) included: the thresholds then stay strictly below 2^64.  Such a point is drawn
        # with probability 2^-64, and certify() accounts for it (support leakage of the realized sampler).
        c = [max(f, 1) for f in fl]
        # error of the half window, E = sum_{k>0} (c_k - r_k); c_0 - r_0 = -2E
        err = sum((c[k] - r[k] for k in range(1, t + 1)), decimal.Decimal(0))
        if err < 0:
            m = int((-err).to_integral_value(rounding=decimal.ROUND_HALF_EVEN))
            # +1 to the m eligible entries with the largest fractional parts
            elig = sorted((k for k in range(1, t + 1) if fl[k] >= 1), key=lambda k: r[k] - fl[k], reverse=True)
            for k in elig[:m]:
                c[k] += 1
        elif err > 0:
            m = int(err.to_integral_value(rounding=decimal.ROUND_HALF_EVEN))
            # -1 to the m entries >= 2 with the smallest fractional parts; the
            # centre absorbs whatever cannot be taken back (all-tiny tails)
            elig = sorted((k for k in range(1, t + 1) if fl[k] >= 2), key=lambda k: r[k] - fl[k])
            for k in elig[:m]:
                c[k] -= 1
        c[0] = _TWO64 - 2 * sum(c[1:])
        max_err = max(abs(c[k] - r[k]) for k in range(t + 1)) / decimal.Decimal(_TWO64)
        floored = 2 * sum(1 for k in range(1, t + 1) if fl[k] == 0) + (1 if fl[0] == 0 else 0)
    return c, float(max_err), floored


def _guide_table(thresholds: np.ndarray, t: int):
    """Offset for every top-16-bit bucket with no threshold inside; a sentinel elsewhere."""
    if t <= 126:
        dtype = np.int8
    elif t <= 32766:
        dtype = np.int16
    elif t <= 2**31 - 2:
        dtype = np.int32
    else:  # pragma: no cover - tables that large cannot be built anyway
        dtype = np.int64
    sentinel = np.iinfo(dtype).min
    starts = np.arange(1 << 16, dtype=np.uint64) << np.uint64(_BUCKET_BITS)
    ends = starts + np.uint64((1 << _BUCKET_BITS) - 1)
    lo = np.searchsorted(thresholds, starts, side="right").astype(np.int64)
    hi = np.searchsorted(thresholds, ends, side="right").astype(np.int64)
    guide = np.where(lo == hi, lo - t, sentinel).astype(dtype)
    width = int((hi - lo).max()) if t else 0
    steps = int(math.ceil(math.log2(width))) if width > 1 else 0
    return guide, dtype(sentinel), lo, hi - lo, steps


@dataclass(frozen=True, eq=False)
class MechanismTables:
    """The realized offset distribution of a radius mechanism and its sampling tables.

    Attributes
    ----------
    t : int
        Window radius.
    counts : tuple of int
        ``c_{-t}, ..., c_t``: integers >= 1 summing to ``2^64``.
    thresholds : ndarray of uint64
        ``T_j = c_{-t} + ... + c_{-t+j}`` for ``j = 0..s-2``.
    guide : ndarray
        Offset per top-16-bit bucket, or ``sentinel`` where a threshold falls inside.
    bucket_lo, bucket_n, fix_steps
        Per bucket: index of its first threshold and how many fall inside; the
        number of binary-search steps that resolves any bucket.
    n_ambiguous, dummy_bucket
        How many buckets hold a threshold, and one of them (padding target).
    max_pmf_error : float
        ``max_k |c_k / 2^64 - p_k|`` against the ideal pmf ``p``.
    floored : int
        Number of offsets whose ideal probability is below ``2^-64`` (raised to it).
    """

    t: int
    counts: tuple
    thresholds: np.ndarray
    guide: np.ndarray
    sentinel: object
    bucket_lo: np.ndarray
    bucket_n: np.ndarray
    fix_steps: int
    n_ambiguous: int
    dummy_bucket: int
    max_pmf_error: float
    floored: int

    @property
    def offsets(self) -> np.ndarray:
        return np.arange(-self.t, self.t + 1, dtype=np.int64)


def _is_radius(obj) -> bool:
    """A radius mechanism on Z (the protocol sampling needs): ``t``, ``s`` and a kernel with exact weights."""
    return hasattr(obj, "t") and hasattr(obj, "s") and callable(getattr(getattr(obj, "kernel", None),
                                                                         "decimal_weights", None))


def _check_mechanism(mechanism):
    if not _is_radius(mechanism):
        hint = " (for a finite channel use sample_channel / certify_channel)" if _is_channel(mechanism) else ""
        raise TypeError(
            f"mechanism must be a radius mechanism (SparseLaplace, SparseGaussian, SparseKernel){hint}; "
            f"got {type(mechanism).__name__} {mechanism!r}"[:300]
        )


def _is_channel(obj) -> bool:
    return not _is_radius(obj) and all(hasattr(obj, a) for a in ("matrix", "inputs", "outputs"))


@lru_cache(maxsize=128)
def _tables_cached(mechanism) -> MechanismTables:
    half, max_err, floored = _quantize_symmetric(_ideal_weights(mechanism))
    t = mechanism.t
    counts = tuple(half[:0:-1] + half)
    thresholds = np.array(list(_cumsum(counts[:-1])), dtype=np.uint64)
    guide, sentinel, bucket_lo, bucket_n, steps = _guide_table(thresholds, t)
    amb = np.flatnonzero(guide == sentinel) if t else np.zeros(0, dtype=np.intp)
    for arr in (thresholds, guide, bucket_lo, bucket_n):
        arr.setflags(write=False)
    return MechanismTables(t, counts, thresholds, guide, sentinel, bucket_lo, bucket_n, steps,
                           int(amb.size), int(amb[0]) if amb.size else 0, max_err, floored)


def _cumsum(values):
    acc = 0
    for v in values:
        acc += v
        yield acc


def sampling_tables(mechanism) -> MechanismTables:
    """The (cached) realized distribution and sampling tables of a radius mechanism.

    Building them costs O(s) exact decimal operations (about 10 ms for
    s = 20,001); supports above ``2^22 + 1`` are refused.
    """
    _check_mechanism(mechanism)
    if mechanism.s > _MAX_S:
        raise ValueError(
            f"s must be an odd integer <= {_MAX_S} to sample exactly (one exact count per offset); "
            f"got {mechanism.s}"
        )
    return _tables_cached(mechanism)


def sampling_pmf(mechanism):
    """The distribution :func:`sample` realizes, exactly.

    Returns
    -------
    offsets : ndarray of int64
        ``-t, ..., t``.
    probs : list of fractions.Fraction
        ``c_k / 2^64`` for each offset: power-of-two denominators, every value
        ``>= 2^-64``, summing to exactly 1.  The report for input ``x`` is
        ``x + k`` with probability ``probs[k + t]``.
    """
    tab = sampling_tables(mechanism)
    return tab.offsets, [Fraction(c, _TWO64) for c in tab.counts]
