r"""Exact integer-threshold samplers with a certified realized distribution.

What is sampled
---------------
For a radius mechanism (:class:`~sparseldp.SparseLaplace`,
:class:`~sparseldp.SparseGaussian`) the report is ``y = x + K`` where the
offset ``K`` in ``-t..t`` has the *realized* pmf

.. math::

    \Pr[K = k] = c_k / 2^{64}, \qquad c_k \in \mathbb{Z},\ c_k \ge 1,\
    \sum_{k=-t}^{t} c_k = 2^{64},\ c_{-k} = c_k .

The integer counts ``c_k`` quantize the ideal pmf ``p_k = w(k)/C_t``
(Definitions 6 and 13).  The ideal values are computed in decimal arithmetic
with 60 significant digits (``decimal`` with an unbounded exponent range, so
``exp(-2 * 10^6)`` is still a number), and rounded by largest remainder:
``c_k = max(floor(2^64 p_k), 1)`` for ``k > 0`` plus one unit for the
entries with the largest fractional parts (or one unit less for the entries
with the smallest, when floored-up tails overshoot), and
``c_0 = 2^64 - 2 sum_{k>0} c_k`` absorbs the rest.  Hence every point of the
window keeps mass at least ``2^-64``, the realized pmf is symmetric (so the
reflection argument of docs/paper.md, "delta* and ordered pairs" still applies to it), it sums to exactly
one, and ``|c_k - 2^64 p_k| <= 1`` except where a probability below ``2^-64``
had to be raised to ``2^-64``.  :func:`sampling_pmf` returns it as
:class:`fractions.Fraction` values.

How it is sampled
-----------------
Inverse CDF on integers: with thresholds ``T_j = c_{-t} + ... + c_{-t+j}``
(``j = 0..s-2``, all ``< 2^64``) and a uniform 64-bit word ``u``, the offset
is ``#{j : T_j <= u} - t`` (:func:`offset_of_words`), so
``Pr[K = k] = c_k / 2^64`` exactly: no float is involved anywhere.  For speed
a guide table indexed by the top 16 bits of ``u`` stores the answer for every
``2^48``-wide bucket that contains no threshold (all but at most ``s - 1`` of
the 65,536 buckets); a draw landing in one of the few buckets that do is
finished by an exact branch-free binary search over that bucket's uint64
thresholds.  Since only those draws need the low 48 bits, the bits are drawn
lazily: each 64-bit word supplies the top 16 bits of four draws, and a draw
in an ambiguous bucket takes one more word for its low 48 bits.  Each draw is
still a uniform 64-bit ``u``, and how many words are used depends on the
random bits only.  Everything is vectorized over fixed-size chunks, so memory
is the output plus a few hundred kilobytes.

Finite-domain channels (``SparseChannel``, extended or clipped windows) are
sampled the same way with one threshold row per input: a branch-free binary
search with a fixed number of steps (``ceil(log2(row length))``) over a flat
uint64 threshold table (:func:`sample_channel`).

What is certified
-----------------
:func:`certify` (and :func:`certify_channel`) bound ``delta*(eps; H)`` of the
*realized* counts, not of the ideal pmf: leakage terms are summed as exact
integers, ``e^eps`` is replaced by a double on the safe side, every overlap
term is bounded in double arithmetic with a proven error bound and rounded
outward to a whole number of ``2^-62`` units, and the units are summed
exactly.  ``delta_star_upper`` is therefore never below the realized value,
and it sits within ``5.6e-16 + s 2^-62`` of it; ``delta_star_lower`` brackets
it from below.  For ordinary parameters it agrees with the floating-point
``delta_star`` of Theorems 3 and 9 to 1e-12; the certificate carries a
``warning`` where the two provably differ (e.g. an ideal delta* below
``2^-64``, the smallest leakage a realized window can have).

Security
--------
*Threat model.*  The input ``x`` is the secret of one person; the report ``y``
is public.  The adversary sees every report, knows the mechanism, the code and
the spec, may choose or know the other inputs, and may observe how long
sampling took.  The guarantee is ``(eps, delta)``-LDP on range ``H`` for the
*realized* distribution, certified by :func:`certify`.  Out of scope: an
adversary who reads the process's memory or controls the operating system.

*Floating-point attacks.*  Mironov (CCS 2012, "On significance of the least
significant bits for differential privacy") showed that the textbook Laplace
sampler ``x + b * log(U)`` on doubles leaks the input: the set of doubles it
can output depends on ``x``, so one report can rule out inputs, and some
outputs are reachable from one input only.  Here no float touches a sample:
outputs are integers, the offset is chosen by comparing a uniform 64-bit
integer with integer thresholds, and the distribution of the offset is
exactly ``c_k / 2^64`` for every ``x`` (the integers are the same for every
input on Z).  The privacy statement is therefore about a distribution that is
known exactly, and :func:`certify` bounds its ``delta`` with outward-rounded
arithmetic instead of trusting floating-point accounting.

*Timing.*  The work done must not depend on the secret input beyond the
output -- and since ``x = y - K``, not on the offset ``K`` either, or timing
plus the public report would point at ``x``.  For the mechanisms on Z the
offset is drawn without looking at ``x`` and ``x`` only enters one vectorized
addition.  Draws that land in an ambiguous guide bucket are correlated with
the offset (a bucket holding a threshold sits between two known offsets), so
their number must not show: every chunk of ``m`` draws always requests the
same number ``F(m)`` of extra words and resolves ``F(m)`` slots (padding
with a dummy), where ``F`` is chosen so that more than ``F`` ambiguous draws
occur with probability at most ``2^-64`` (only then is extra work done).  A
single privatized value therefore costs the same every time.  For channels
the row is found and searched by branch-free code with a fixed number of
steps for every input, so the number of operations is the same for every
``x``.  The memory addresses touched (guide entry, threshold row) do depend
on the draw and the row, and a pure-Python/numpy library cannot promise
constant-time memory access (cache timing): deployments that must resist a
co-located cache attacker should use a constant-time native sampler.  Input
validation (integer type, value in the declared domain, room for ``x +- t`` in
int64) branches on ``x`` only to reject inputs.

*Randomness.*  ``rng=None`` (the default everywhere) reads the operating
system's CSPRNG through ``os.urandom`` (``getrandom(2)`` on Linux), fresh for
every chunk; nothing is seeded or cached in user space.  An ``int``,
``SeedSequence`` or numpy ``Generator`` switches to numpy's PCG64 stream for
reproducible simulation: statistically sound but predictable, so it is
**not for production** (anyone who learns the seed can subtract the noise).
Both sources feed the same algorithm through one interface
(:mod:`sparseldp._rng`).
"""

from __future__ import annotations

import decimal
import math
import numbers
import sys
import weakref
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ._rng import BitSource, as_bit_source
from ._validation import check_int, check_int_array, check_nonnegative

__all__ = [
    "BitSource",
    "Certificate",
    "MechanismTables",
    "ChannelTables",
    "as_bit_source",
    "sampling_tables",
    "sampling_pmf",
    "sample",
    "offset_of_words",
    "certify",
    "channel_sampling_tables",
    "channel_sampling_pmf",
    "sample_channel",
    "certify_channel",
]

_TWO64 = 1 << 64
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
# Draws per chunk: small enough for the working buffers to stay in cache.
_CHUNK = 1 << 16
_BUCKET_BITS = 48
# Largest support with exact sampling tables (one exact count per offset).
_MAX_S = (1 << 22) + 1
# Decimal precision (significant digits) for the ideal pmf: ~199 bits.
_DIGITS = 60
# Realized vs ideal differences below these are "do not matter" (see certify).
_ABS_TOL = 1e-12
_REL_TOL = 1e-2


# ---------------------------------------------------------------------------
# exact quantization of the ideal pmf (radius mechanisms)
# ---------------------------------------------------------------------------

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
    """Counts ``c_0..c_t`` (half window) from weights ``w(0..t)``; see the module docstring.

    Returns ``(half_counts, max_abs_error, floored)`` where ``max_abs_error`` is
    ``max_k |c_k/2^64 - p_k|`` and ``floored`` counts offsets whose ideal
    probability is below ``2^-64`` (raised to ``2^-64``).
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
            f"mechanism must be a SparseLaplace or SparseGaussian{hint}; "
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


# ---------------------------------------------------------------------------
# sampling
# ---------------------------------------------------------------------------

def _as_int_input(x, name: str = "x") -> np.ndarray:
    """Integer scalar/array -> integer ndarray (int64, or the original narrower dtype)."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer or integer array; got bool {x!r}")
    arr = np.asarray(x)
    if arr.dtype == np.uint64:
        if arr.size and int(arr.max()) > _INT64_MAX:
            raise ValueError(f"{name} must be integers in [{_INT64_MIN}, {_INT64_MAX}]; got {int(arr.max())}")
        return arr.astype(np.int64)
    if np.issubdtype(arr.dtype, np.integer):
        return arr
    if arr.dtype == object:
        # e.g. Python ints beyond int64, or a list mixing ints with other things
        flat = arr.reshape(-1)
        for v in flat:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
                raise TypeError(f"{name} must be an integer or integer array; got element {type(v).__name__} {v!r}")
        for v in flat:
            if not _INT64_MIN <= int(v) <= _INT64_MAX:
                raise ValueError(f"{name} must be integers in [{_INT64_MIN}, {_INT64_MAX}]; got {int(v)}")
        return np.array([int(v) for v in flat], dtype=np.int64).reshape(arr.shape)
    return check_int_array(x, name)  # the original, so that [] counts as an empty integer array


def _resolve(tab: MechanismTables, u: np.ndarray) -> np.ndarray:
    """Exact offsets ``#{j : T_j <= u} - t`` for words whose top-16-bit bucket holds a threshold.

    Searches only the word's bucket: thresholds below the bucket are counted
    by ``bucket_lo``, those inside by a branch-free binary search.
    """
    b = (u >> np.uint64(_BUCKET_BITS)).astype(np.intp)
    lo = tab.bucket_lo[b]
    return lo + _branchless_count_le(tab.thresholds, lo, tab.bucket_n[b], u, tab.fix_steps) - tab.t


def offset_of_words(mechanism, u) -> np.ndarray:
    """The sampler's map from 64-bit words to offsets: ``#{j : T_j <= u} - t``.

    This is the definition :func:`sample` implements (exposed for tests and
    audits): guide-table lookup on the top 16 bits, exact search in the few
    buckets that contain a threshold.
    """
    tab = sampling_tables(mechanism)
    u = np.asarray(u, dtype=np.uint64).reshape(-1)
    off = tab.guide[(u >> np.uint64(_BUCKET_BITS)).astype(np.intp)].astype(np.int64)
    bad = np.flatnonzero(off == tab.sentinel) if tab.t else np.zeros(0, np.intp)
    if bad.size:
        off[bad] = _resolve(tab, u[bad])
    return off


def _offsets_into(tab: MechanismTables, source: BitSource, m: int, off: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``m`` offsets drawn with ``source`` into the buffer ``off`` (first ``m`` entries).

    The offset of a word ``u`` depends on its top 16 bits alone except in the
    buckets that hold a threshold (at most ``s - 1`` of 65,536), so the bits are
    drawn lazily: one 64-bit word gives the top 16 bits of four draws, and
    only a draw that lands in such a bucket takes one more word for its low
    48 bits.  Every draw is thus a uniform 64-bit ``u = (b << 48) | r``, mapped
    exactly as in :func:`offset_of_words`; how many extra words are taken
    depends on the random bits only, never on the input.
    """
    words = source.words((m + 3) // 4)
    idx = words.view(np.uint16)[:m]
    full = off[: m + 1]  # slot m is scratch for the padding below
    off = full[:m]
    # mode="wrap" skips numpy's bounds check (and its output copy); a uint16
    # index is always in range
    np.take(tab.guide, idx, mode="wrap", out=off)
    if tab.n_ambiguous:
        np.equal(off, tab.sentinel, out=mask[:m])
        bad = np.flatnonzero(mask[:m])
        # Fixed work: always F extra words and F resolutions, real draws first,
        # padding in scratch slot m (a dummy word in an ambiguous bucket).  The
        # count of ambiguous draws, which tells something about the offsets,
        # thus does not show in the running time or in the number of random
        # bytes requested -- except if it exceeds F (probability <= 2^-64).
        F = _fixup_slots(tab.n_ambiguous, m)
        done = 0
        while True:
            take = min(F, bad.size - done)
            pos = np.full(F, m, dtype=np.intp)
            pos[:take] = bad[done : done + take]
            top = np.where(pos < m, idx[np.minimum(pos, m - 1)], tab.dummy_bucket).astype(np.uint64)
            low = source.words(F) >> np.uint64(64 - _BUCKET_BITS)
            full[pos] = _resolve(tab, (top << np.uint64(_BUCKET_BITS)) | low)
            done += take
            if done >= bad.size:
                break
    return off


@lru_cache(maxsize=256)
def _fixup_slots(n_ambiguous: int, m: int) -> int:
    """Fix-up slots F per chunk of ``m`` draws: ``Pr[#ambiguous > F] <= 2^-64``.

    The number of draws in ambiguous buckets is Binomial(m, p) with
    ``p = n_ambiguous / 2^16``; Bernstein's inequality gives
    ``Pr[X >= mu + a] <= exp(-a^2 / (2 (mu + a/3)))``, which is ``<= 2^-64`` for
    ``a = (2L/3 + sqrt((2L/3)^2 + 8 L mu)) / 2``, ``L = 64 ln 2``.  Never more
    than ``m`` (then the bound is certain).
    """
    mu = m * n_ambiguous / 65536.0
    big_l = 64.0 * math.log(2.0)
    a = (2.0 * big_l / 3.0 + math.sqrt((2.0 * big_l / 3.0) ** 2 + 8.0 * big_l * mu)) / 2.0
    return int(min(m, math.ceil(mu + a)))


def sample(mechanism, x, *, rng=None):
    """Report ``y = x + K`` for each integer ``x``, ``K`` from the realized pmf.

    Parameters
    ----------
    mechanism : SparseLaplace or SparseGaussian
    x : int or array of int
        Inputs (any integer dtype; floats, bools and strings are refused).
        ``x +- t`` must fit in int64.
    rng : None, int, SeedSequence, Generator or BitSource, keyword-only
        ``None`` (default): the OS secure source.  Anything else: reproducible
        simulation, **not for production** (see :mod:`sparseldp._rng`).

    Returns
    -------
    int64 ndarray with the shape of ``x`` (a numpy int64 scalar for a scalar ``x``).
    Each entry is independent with ``Pr[y = x + k] = c_k / 2^64`` exactly
    (:func:`sampling_pmf`).  A finite channel (an object with ``.matrix``,
    ``.inputs`` and ``.outputs``, e.g. ``SparseChannel``) is handed to
    :func:`sample_channel`.
    """
    if _is_channel(mechanism):
        return sample_channel(mechanism, x, rng=rng)
    tab = sampling_tables(mechanism)
    source = as_bit_source(rng)
    arr = _as_int_input(x)
    t = tab.t
    # x +- t can only leave int64 for 64-bit inputs; checked chunk by chunk
    # (while the chunk is in cache) rather than by two passes over all of x
    check = arr.dtype.itemsize >= 8 and t > 0
    flat = arr.reshape(-1)
    n = flat.size
    out = np.empty(n, dtype=np.int64)
    size = min(n, _CHUNK)
    offbuf = np.empty(size + 1, dtype=tab.guide.dtype)
    mask = np.empty(size, dtype=bool)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        xc = flat[start:stop]
        if check:
            _check_room(xc, t)
        off = _offsets_into(tab, source, stop - start, offbuf, mask)
        np.add(xc, off, out=out[start:stop], dtype=np.int64)
    return out.reshape(arr.shape)[()]


def _check_room(xc: np.ndarray, t: int) -> None:
    lo, hi = int(xc.min()), int(xc.max())
    if lo < _INT64_MIN + t or hi > _INT64_MAX - t:
        bad = lo if lo < _INT64_MIN + t else hi
        raise ValueError(
            f"x must be integers in [{_INT64_MIN + t}, {_INT64_MAX - t}] so that x +- t fits in int64; got {bad}"
        )


# ---------------------------------------------------------------------------
# certification
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Certificate:
    """A rigorous statement about the *realized* (quantized) distribution.

    Attributes
    ----------
    eps, H
        The target the certificate is for.
    delta_star_upper : float
        Rigorous upper bound on ``max`` over neighbouring pairs (separation
        ``1..H``) of the hockey-stick divergence ``sum_y [P(y|x) - e^eps P(y|x')]_+``
        of the realized distribution; never below its exact value.
    delta_star_lower : float
        Rigorous lower bound on the same quantity (at the worst pair).
    delta_star_ideal : float or None
        The floating-point ``delta_star`` of the ideal mechanism (channel: its
        own ``delta_star`` if it has one).
    worst_pair : tuple of int
        The pair ``(x, x')`` attaining the upper bound (``(0, h)`` on Z).
    max_pmf_error : float
        ``max |realized - ideal|`` over all probabilities.
    floored : int
        Number of probabilities below ``2^-64`` that were raised to ``2^-64``.
    method : str
        How the bound was obtained.
    warning : str or None
        Set when the realized ``delta_star`` provably differs from the ideal
        one by more than 1e-12 absolutely or 1% relatively (for instance an
        ideal delta* below ``2^-64``, the smallest leakage any realized window
        can have).
    """

    eps: float
    H: int | None
    delta_star_upper: float
    delta_star_lower: float
    delta_star_ideal: float | None
    worst_pair: tuple
    max_pmf_error: float
    floored: int
    method: str
    warning: str | None

    @property
    def exact(self) -> bool:
        """True when the bracket ``[lower, upper]`` pins the realized delta* to 1e-12."""
        return self.delta_star_upper - self.delta_star_lower <= _ABS_TOL

    @property
    def delta_star(self) -> float:
        """The safe end: :attr:`delta_star_upper`."""
        return self.delta_star_upper


_U = 2.0**-53
_U_SAFE = 2.0**-53 + 2.0**-93  # u (1 + 2^-40) >= u (1 + u)^3
_C2 = 2.0 + 2.0**-40  # >= 2 + u
_ELL_CAP = 2.0**70  # e^eps beyond this: every overlap term is negative anyway


def _exp_bounds(eps: float) -> tuple[float, float]:
    """Doubles ``lo <= e^eps <= hi`` (rigorous), both capped at ``2^70``.

    The cap keeps the double arithmetic finite.  It is harmless in both
    directions: every partner count is >= 1 and every count <= 2^64 < 2^70, so
    with ``ell >= 2^70`` each overlap term ``c - ell c'`` is negative, for the
    capped value and for the true ``e^eps`` alike.

    ``decimal``'s ``exp`` is correctly rounded to nearest, so its neighbours one
    unit in the last place away bracket ``e^eps``; converting those to double
    with a directed correction keeps the bracket.
    """
    if eps == 0:
        return 1.0, 1.0
    if eps >= 49.0:  # e^49 > 2^70: both ends capped (decimal exp would overflow for huge eps)
        return _ELL_CAP, _ELL_CAP
    ctx = decimal.Context(prec=40, Emin=decimal.MIN_EMIN, Emax=decimal.MAX_EMAX)
    v = ctx.exp(decimal.Decimal(eps))
    lo_d, hi_d = v.next_minus(ctx), v.next_plus(ctx)
    lo = _float_down(Fraction(lo_d))
    hi = _float_up(Fraction(hi_d))
    return min(lo, _ELL_CAP), min(hi, _ELL_CAP)


def _float_down(q: Fraction) -> float:
    try:
        f = float(q)
    except OverflowError:
        return sys.float_info.max
    return math.nextafter(f, -math.inf) if Fraction(f) > q else f


def _float_up(q: Fraction) -> float:
    try:
        f = float(q)
    except OverflowError:
        return math.inf
    return math.nextafter(f, math.inf) if Fraction(f) < q else f


def _term_bounds(a, b, ell, *, upper: bool) -> np.ndarray:
    r"""Per-term integers ``Y_k`` (units of 4 counts) bracketing ``[c_k - ell c'_k]_+``.

    ``a = fl(c_k)``, ``b = fl(c'_k)`` are the counts rounded to nearest double
    (exactly what ``float(int)`` does), ``ell`` a double.  Upper: ``4 Y_k >=
    [c_k - ell c'_k]_+``; lower: ``4 Y_k <= [c_k - ell c'_k]_+``.

    Proof.  With round-to-nearest and no underflow/overflow (all values are 0
    or >= 1 and <= 2^70 * 2^64), ``x = fl(x)(1 + d)``, ``|d| <= u = 2^-53``.
    Let ``p = fl(ell b)``, ``d_k = fl(a - p)``, ``tau = c_k - ell c'_k``.  Then
    ``|a - c_k| <= u a``, ``|p - ell b| <= u p``, ``ell |b - c'_k| <= ell u b
    <= u (1+u) p`` and ``|d_k - (a - p)| <= u |d_k|``, so

    ``|tau - d_k| <= e_k := u (|d_k| + a + (2 + u) p)``.

    The code evaluates ``e'_k = fl(fl(fl(|d_k| + a) + fl(C2 p)) U)`` with
    ``C2 = 2 + 2^-40 >= 2 + u`` and ``U = u (1 + 2^-40) >= u (1+u)^3``; each of
    the three roundings of nonnegative values loses at most a factor
    ``1/(1+u)``, so ``e'_k >= e_k``.  Upper: ``tau <= d_k + e'_k =: v``.  With
    ``z = fl(v)``, round-to-nearest gives ``v <= z + ulp/2 <= nextafter(z, +inf)``
    (and ``z = 0`` only if ``v = 0``: every nonzero value here is >= 2^-53,
    far from underflow; ``z < 0`` means ``v <= 0``).  ``nextafter`` is exact, so
    is the division by 4, and the ceiling only rounds up.  Lower is the mirror
    image: ``tau >= d_k - e'_k >= nextafter(fl(d_k - e'_k), -inf)`` and the
    floor rounds down.  Because ``[.]_+`` is monotone the bounds carry over to
    the positive parts.  Every ``Y_k <= 2^62 (1 + 2^-40)`` is an
    integer-valued double below ``2^63``, so the int64 conversion and the
    int64 sum (of at most ~2^20 terms) are exact.

    Size of the slack: on the terms with ``v > 0`` we have ``p <= a (1+3u)``,
    so ``e_k <= 3 u a (1 + 4u)``, plus one ulp ``<= 2 u a`` from ``nextafter``
    and at most 4 counts from the ceiling: in total below ``5 u = 5.6e-16``
    times the row mass plus ``s 2^-62``, whatever ``eps``.
    """
    p = ell * b
    d = a - p
    e = (np.abs(d) + a + _C2 * p) * _U_SAFE
    if upper:
        z = np.nextafter(d + e, np.inf)
        z = np.maximum(z, 0.0) * 0.25
        return np.ceil(z).astype(np.int64)
    z = np.nextafter(d - e, -np.inf)
    z = np.maximum(z, 0.0) * 0.25
    return np.floor(z).astype(np.int64)


def _hockey_bounds_mech(tab: MechanismTables, ell_lo: float, ell_hi: float, H: int):
    """``(max_h upper_h, argmax h, lower at that h)`` as exact integers (counts)."""
    t = tab.t
    s = 2 * t + 1
    cf = np.array([float(c) for c in tab.counts])  # float(int) rounds to nearest
    prefix = list(_cumsum(tab.counts))
    best, best_h = -1, 1
    for h in range(1, min(H, 2 * t) + 1):
        # leakage k = -t..h-t-1 (exact integers); overlap k = h-t..t, partner k-h
        val = prefix[h - 1] + 4 * int(_term_bounds(cf[h:], cf[: s - h], ell_lo, upper=True).sum())
        if val > best:
            best, best_h = val, h
    h = best_h
    low = prefix[h - 1] + 4 * int(_term_bounds(cf[h:], cf[: s - h], ell_hi, upper=False).sum())
    return best, best_h, low


def _warning(lower: float, upper: float, ideal: float | None, max_err: float, floored: int) -> str | None:
    """A message when the realized delta* *provably* differs from the ideal one in a way that matters.

    The realized value lies in ``[lower, upper]``; it matters when it is
    certainly more than 1e-12 away from the ideal value, or certainly more than
    1% away relatively (e.g. a tiny ideal delta* below the ``2^-64`` floor that
    any realized leakage has: one count out of ``2^64``).
    """
    if ideal is None:
        return None
    matters = (
        lower - ideal > _ABS_TOL
        or ideal - upper > _ABS_TOL
        or lower > ideal * (1.0 + _REL_TOL)
        or upper < ideal * (1.0 - _REL_TOL)
    )
    if not matters:
        return None
    why = (
        f"{floored} probabilities below 2^-64 were raised to 2^-64"
        if floored
        else f"quantization to multiples of 2^-64 moved probabilities by up to {max_err:.3g}"
    )
    return (
        f"the realized (sampled) distribution's delta* is in [{lower:.6g}, {upper:.6g}], "
        f"the ideal mechanism's delta* is {ideal:.6g}: {why}; "
        f"rely on delta_star_upper, not on the ideal value"
    )


def certify(mechanism, eps, H) -> Certificate:
    r"""Certify ``delta*(eps; H)`` of the distribution :func:`sample` actually draws.

    For the realized counts ``c_k`` (symmetric, so both orders of a pair agree,
    docs/paper.md, "delta* and ordered pairs"),

    .. math::

        \delta^{real}_h(\varepsilon) = 2^{-64}\Big[\sum_{k=-t}^{h-t-1} c_k
            + \sum_{k=h-t}^{t} [c_k - e^{\varepsilon} c_{k-h}]_+\Big]

    (the realized counterpart of Theorems 3 and 9) and exactly 1 for
    ``h > 2t``.  The leakage sum is computed in exact integers.  For the
    overlap, ``e^eps`` is replaced by a double ``ell <= e^eps`` (from a
    correctly rounded 40-digit decimal ``exp``, moved one unit outward, then
    rounded down to double), which can only increase each positive part; each
    term is then bounded above in double arithmetic with a proven error bound
    and rounded up to a whole number of 4-count units (:func:`_term_bounds`),
    and the units are summed in exact integers.  The maximum over
    ``1 <= h <= H`` of these integers, divided by ``2^64`` and rounded up to a
    double, is ``delta_star_upper``.  The same computation with
    ``ell >= e^eps`` and rounding down at the worst ``h`` gives
    ``delta_star_lower``.  Total slack below ``5.6e-16 + s 2^-62``;
    cost O(H s) vectorized (about a second for s = 20001, H = 3000).

    Parameters
    ----------
    mechanism : SparseLaplace or SparseGaussian
        (a finite channel is handed to :func:`certify_channel`)
    eps : float >= 0
    H : int >= 1
        Privacy range (Definition 7).
    """
    if _is_channel(mechanism):
        return certify_channel(mechanism, eps, H)
    tab = sampling_tables(mechanism)
    eps = check_nonnegative(eps, "eps")
    H = check_int(H, "H", minimum=1)
    t = tab.t
    ell_lo, ell_hi = _exp_bounds(eps)
    if H > 2 * t:
        # h = 2t + 1: disjoint windows, delta = 1 exactly
        upper_n = lower_n = _TWO64
        worst = 2 * t + 1
    else:
        upper_n, worst, lower_n = _hockey_bounds_mech(tab, ell_lo, ell_hi, H)
    return _certificate(
        eps, H, upper_n, lower_n, float(mechanism.delta_star(eps, H)), (0, int(worst)), tab,
        "exact integer counts c_k/2^64; leakage summed exactly; overlap with e^eps bounded "
        "outward (decimal exp, directed to double) and per-term double arithmetic with a proven "
        "error bound, rounded outward to 2^-62 units and summed exactly",
    )


def _certificate(eps, H, upper_n, lower_n, ideal, worst, tab, method) -> Certificate:
    """Round the exact integer bounds (units of 2^-64) outward and package them."""
    upper = min(_float_up(Fraction(upper_n, _TWO64)), 1.0)
    lower = min(_float_down(Fraction(lower_n, _TWO64)), upper)
    return Certificate(
        eps=eps,
        H=H,
        delta_star_upper=upper,
        delta_star_lower=lower,
        delta_star_ideal=ideal,
        worst_pair=worst,
        max_pmf_error=tab.max_pmf_error,
        floored=tab.floored,
        method=method,
        warning=_warning(lower, upper, ideal, tab.max_pmf_error, tab.floored),
    )


# ---------------------------------------------------------------------------
# finite channels (duck-typed: .matrix CSR row-stochastic, .inputs, .outputs)
# ---------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class ChannelTables:
    """Realized rows of a finite channel and their flat threshold table.

    Row ``r`` (input ``inputs[r]``) occupies positions ``indptr[r]:indptr[r+1]``
    of ``indices`` (output columns, increasing) and ``counts`` (uint64, >= 1,
    summing to ``2^64`` per row; a row with a single output stores 0, meaning
    ``2^64``).  ``thresholds`` holds the within-row cumulative counts, with the
    last position of every row set to ``2^64 - 1`` (it is never needed).
    """

    inputs: np.ndarray
    outputs: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    counts: np.ndarray
    thresholds: np.ndarray
    order: np.ndarray  # argsort of inputs
    sorted_inputs: np.ndarray
    contiguous: bool
    steps: int
    max_pmf_error: float
    floored: int
    # for certify_channel: counts as doubles (rounded to nearest), split 4 (c >> 2) + (c & 3),
    # first column of each row and whether every row is one run of columns
    cf: np.ndarray
    quarter: np.ndarray
    rem4: np.ndarray
    first: np.ndarray
    banded: bool
    lazy: dict = field(default_factory=dict, repr=False)

    def row_classes(self) -> np.ndarray:
        """Class id per row: equal ids <=> equal counts on the same column pattern up to a shift.

        The defect of a pair depends only on (class of x, class of x', shift of
        their first columns), so :func:`certify_channel` evaluates each such
        triple once (e.g. one pair per separation for extended windows).
        """
        cls = self.lazy.get("row_classes")
        if cls is None:
            ids: dict = {}
            ptr, idx, c = self.indptr.tolist(), self.indices, self.counts
            cls = np.empty(len(ptr) - 1, dtype=np.int64)
            for r in range(len(ptr) - 1):
                a, b = ptr[r], ptr[r + 1]
                key = (c[a:b].tobytes(), (idx[a:b] - idx[a]).tobytes())
                cls[r] = ids.setdefault(key, len(ids))
            self.lazy["row_classes"] = cls
        return cls

    def row_counts(self, r: int) -> list[int]:
        seg = self.counts[self.indptr[r] : self.indptr[r + 1]]
        return [int(c) if c else _TWO64 for c in seg]

    def pmf(self, x):
        """``(outputs, probabilities as Fractions)`` of the realized row for input ``x``."""
        x = check_int(x, "x")
        r = _rows_of(self, np.array([x], dtype=np.int64))[0]
        cols = self.indices[self.indptr[r] : self.indptr[r + 1]]
        return self.outputs[cols], [Fraction(c, _TWO64) for c in self.row_counts(r)]


_CHANNEL_CACHE: dict[int, tuple] = {}
_CACHE_KEY = "sparseldp.sampling.tables"


def channel_sampling_tables(channel) -> ChannelTables:
    """Quantize every row of ``channel.matrix`` to integer counts summing to ``2^64``.

    Each row's ideal probabilities are the stored matrix entries normalized by
    their row sum, ``q = v / sum(v)`` (double precision: the channel's matrix is
    itself a double approximation of its kernel).  Counts are
    ``c = max(floor(2^64 q), 1)`` (every stored entry, even an explicit zero,
    keeps mass >= 2^-64) and the row's deficit ``2^64 - sum(c)``, computed
    exactly in uint64 arithmetic modulo 2^64, is added to the row's largest
    entry, so each row sums to exactly ``2^64``.  The realized rows are then
    within about ``2^-52`` of the matrix rows (``max_pmf_error`` says how far).

    Cached per channel object: in the channel's own ``_cache`` dict when it has
    one (:class:`~sparseldp.SparseChannel`), else keyed by a weak reference.
    """
    own = getattr(channel, "_cache", None)
    if isinstance(own, dict):  # SparseChannel keeps derived data in its own cache dict
        tables = own.get(_CACHE_KEY)
        if tables is None:
            tables = own[_CACHE_KEY] = _build_channel_tables(channel)
        return tables
    key = id(channel)
    hit = _CHANNEL_CACHE.get(key)
    if hit is not None and hit[0]() is channel:
        return hit[1]
    tables = _build_channel_tables(channel)
    try:
        ref = weakref.ref(channel, lambda _r, key=key: _CHANNEL_CACHE.pop(key, None))
    except TypeError:  # neither a cache dict nor weak-referenceable: no caching
        return tables
    _CHANNEL_CACHE[key] = (ref, tables)
    return tables


def _build_channel_tables(channel) -> ChannelTables:
    for attr in ("matrix", "inputs", "outputs"):
        if not hasattr(channel, attr):
            raise TypeError(f"channel must have .matrix, .inputs and .outputs (a SparseChannel); "
                            f"got {type(channel).__name__} without .{attr}")
    mat = channel.matrix.tocsr()
    if not mat.has_sorted_indices:
        mat = mat.sorted_indices()
    indptr = np.asarray(mat.indptr, dtype=np.int64)
    indices = np.asarray(mat.indices, dtype=np.int64)
    data = np.asarray(mat.data, dtype=np.float64)
    inputs = np.asarray(channel.inputs, dtype=np.int64).reshape(-1)
    outputs = np.asarray(channel.outputs, dtype=np.int64).reshape(-1)
    nrows = indptr.size - 1
    if inputs.size != nrows:
        raise ValueError(f"channel.inputs must have one value per matrix row ({nrows}); got {inputs.size}")
    lens = np.diff(indptr)
    if nrows == 0 or np.any(lens == 0):
        raise ValueError("channel.matrix must have at least one stored entry in every row")
    if np.any(~np.isfinite(data)) or np.any(data < 0):
        raise ValueError("channel.matrix entries must be finite and >= 0")
    row = np.repeat(np.arange(nrows), lens)
    sums = np.add.reduceat(data, indptr[:-1])
    if np.any(sums <= 0):
        raise ValueError("channel.matrix rows must have positive mass")
    q = data / sums[row]
    ideal = q * 2.0**64
    floored = int(np.count_nonzero(ideal < 1.0))
    # largest double below 2^64 is 2^64 - 2048; the deficit step fixes the rest
    c = np.minimum(np.maximum(np.floor(ideal), 1.0), 2.0**64 - 2048.0).astype(np.uint64)
    rowsum = np.add.reduceat(c, indptr[:-1])  # modulo 2^64
    deficit = (np.uint64(0) - rowsum)  # 2^64 - sum, modulo 2^64 (two's complement)
    # first position of the largest entry of each row
    rowmax = np.maximum.reduceat(data, indptr[:-1])
    cand = np.flatnonzero(data == rowmax[row])
    _, first = np.unique(row[cand], return_index=True)
    mode = cand[first]
    c[mode] += deficit  # wraps: a single-entry row becomes 0, i.e. 2^64
    exact = c.astype(np.float64)
    exact[c == 0] = 2.0**64
    max_err = float(np.max(np.abs(exact * 2.0**-64 - q)))
    thresholds = np.cumsum(c, dtype=np.uint64)  # rows sum to 0 mod 2^64: within-row sums
    thresholds[indptr[1:] - 1] = np.uint64(_TWO64 - 1)
    order = np.argsort(inputs, kind="stable")
    sorted_inputs = inputs[order]
    if np.any(np.diff(sorted_inputs) == 0):
        raise ValueError("channel.inputs must be distinct")
    contiguous = bool(int(sorted_inputs[-1]) - int(sorted_inputs[0]) == nrows - 1)  # no int64 wrap-around
    steps = int(math.ceil(math.log2(int(lens.max())))) if lens.max() > 1 else 0
    cf = c.astype(np.float64)  # uint64 -> double rounds to nearest
    cf[c == 0] = 2.0**64
    quarter = (c >> np.uint64(2)).astype(np.int64)
    quarter[c == 0] = 1 << 62
    rem4 = (c & np.uint64(3)).astype(np.int64)
    first = indices[indptr[:-1]]
    banded = bool(np.all(indices[indptr[1:] - 1] - first == lens - 1))
    for arr in (indptr, indices, c, thresholds, order, sorted_inputs, inputs, outputs, cf, quarter, rem4, first):
        arr.setflags(write=False)
    return ChannelTables(inputs, outputs, indptr, indices, c, thresholds, order, sorted_inputs,
                         contiguous, steps, max_err, floored, cf, quarter, rem4, first, banded)


def _branchless_count_le(table, start, length, keys, steps):
    """``#{j < length : table[start + j] <= key}`` per key, for sorted segments.

    Fixed ``steps >= ceil(log2(max length))`` iterations of the same vectorized
    operations for every key: no branch depends on the keys.
    """
    base = start.copy()
    n = length.copy()
    for _ in range(steps):
        half = n >> 1
        mid = base + half
        base = np.where(table[mid] <= keys, mid, base)
        n -= half
    return base - start + (table[base] <= keys)


def _rows_of(tab: ChannelTables, x: np.ndarray) -> np.ndarray:
    """Row index of each input value; ``ValueError`` naming the first unknown value."""
    n_in = tab.sorted_inputs.size
    if tab.contiguous:
        pos = x - tab.sorted_inputs[0]
        ok = (pos >= 0) & (pos < n_in)
        pos = np.where(ok, pos, 0)
    else:
        steps = int(math.ceil(math.log2(n_in))) if n_in > 1 else 0
        cnt = _branchless_count_le(tab.sorted_inputs, np.zeros(x.size, np.int64),
                                   np.full(x.size, n_in, np.int64), x, steps)
        pos = np.maximum(cnt - 1, 0)
        ok = (cnt >= 1) & (tab.sorted_inputs[pos] == x)
    if not ok.all():
        bad = int(x[np.flatnonzero(~ok)[0]])
        lo, hi = int(tab.sorted_inputs[0]), int(tab.sorted_inputs[-1])
        allowed = (f"an integer in [{lo}, {hi}]" if tab.contiguous
                   else f"one of the channel's {n_in} inputs in [{lo}, {hi}]")
        raise ValueError(f"x must be {allowed}; got {bad}")
    return tab.order[pos]


def sample_channel(channel, x, *, rng=None):
    """Report for each input ``x`` an output of ``channel`` from its realized row.

    ``Pr[y = outputs[j] | x] = c_{r,j} / 2^64`` exactly, with the row counts of
    :func:`channel_sampling_tables`.  ``x`` must hold values of
    ``channel.inputs`` (``ValueError`` naming the first other value); the
    result is an int64 array of the same shape (a scalar for a scalar).
    ``rng`` as in :func:`sample`: ``None`` is the OS secure source, a seed or
    Generator is reproducible simulation, not for production.
    """
    tab = channel_sampling_tables(channel)
    source = as_bit_source(rng)
    arr = _as_int_input(x)
    flat = arr.reshape(-1).astype(np.int64, copy=False)
    n = flat.size
    out = np.empty(n, dtype=np.int64)
    lens = np.diff(tab.indptr)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        rows = _rows_of(tab, flat[start:stop])
        base = tab.indptr[rows]
        length = lens[rows]
        u = source.words(stop - start)
        j = _branchless_count_le(tab.thresholds, base, length, u, tab.steps)
        j = np.minimum(j, length - 1)
        np.take(tab.outputs, tab.indices[base + j], out=out[start:stop])
    return out.reshape(arr.shape)[()]


def channel_sampling_pmf(channel, x):
    """``(outputs, Fractions)``: the realized row :func:`sample_channel` draws from for input ``x``."""
    return channel_sampling_tables(channel).pmf(x)


# Pairs evaluated together in certify_channel: bounds working memory.
_PAIR_ENTRIES = 1 << 20


def _pair_bounds(tab: ChannelTables, keys, ncols, r1, r2, ell, *, upper: bool):
    """Exact integers bracketing ``sum_y [c_{r1}(y) - ell c_{r2}(y)]_+`` per pair (in counts).

    Outputs of ``r1`` that ``r2`` cannot produce (support leakage) add their
    counts exactly; the others add ``4 Y`` from :func:`_term_bounds`.  Each
    count is split as ``4 (c >> 2) + (c & 3)`` so that both kinds sum in int64
    (per pair at most ``2^62`` plus the slack) without rounding.
    """
    lens = tab.indptr[r1 + 1] - tab.indptr[r1]
    total = int(lens.sum())
    seg_start = np.cumsum(lens) - lens
    e = np.repeat(tab.indptr[r1] - seg_start, lens) + np.arange(total, dtype=np.int64)
    cols = tab.indices[e]
    r2e = np.repeat(r2, lens)
    if tab.banded:
        # every row's outputs are one run of columns: locate by arithmetic
        rel = cols - tab.first[r2e]
        len2 = tab.indptr[r2e + 1] - tab.indptr[r2e]
        found = (rel >= 0) & (rel < len2)
        pos = tab.indptr[r2e] + np.clip(rel, 0, len2 - 1)
    else:
        q = r2e * ncols + cols
        pos = np.minimum(np.searchsorted(keys, q), keys.size - 1)
        found = keys[pos] == q
    b = np.where(found, tab.cf[pos], 0.0)
    units = np.where(found, _term_bounds(tab.cf[e], b, ell, upper=upper), tab.quarter[e])
    rem = np.where(found, 0, tab.rem4[e])
    u_sum = np.add.reduceat(units, seg_start).astype(object)
    r_sum = np.add.reduceat(rem, seg_start).astype(object)
    return 4 * u_sum + r_sum


def certify_channel(channel, eps, H) -> Certificate:
    r"""Certify ``delta*`` of the realized rows of a finite channel (Theorems 2 and 8).

    ``delta* = max_{x != x', |x - x'| <= H} sum_y [P(y|x) - e^eps P(y|x')]_+``
    over ordered pairs of inputs of ``channel.inputs`` (clipped windows are not
    symmetric, so both orders are evaluated; pairs whose rows are equal up to a
    shift of the columns are evaluated once), with ``P`` the realized counts
    ``c / 2^64`` of :func:`channel_sampling_tables`.  Leakage (outputs the
    partner cannot produce) is summed exactly; overlap terms are bounded
    outward exactly as in :func:`certify`; the slack is below
    ``5.6e-16 + (row length) 2^-62``.  ``delta_star_ideal`` is
    ``channel.delta_star(eps, H)`` when the channel provides it.  ``H=None``
    covers every pair of inputs (as :meth:`SparseChannel.delta` does).
    """
    tab = channel_sampling_tables(channel)
    eps = check_nonnegative(eps, "eps")
    H = None if H is None else check_int(H, "H", minimum=1)
    ell_lo, ell_hi = _exp_bounds(eps)
    ncols = int(tab.outputs.size)
    nrows = tab.indptr.size - 1
    if tab.banded:
        keys = None
    else:
        row = np.repeat(np.arange(nrows, dtype=np.int64), np.diff(tab.indptr))
        keys = row * ncols + tab.indices
    xs = tab.sorted_inputs
    cls = tab.row_classes()
    best, best_pair = -1, None
    avg_len = max(1, tab.counts.size // max(1, nrows))
    block = max(1, _PAIR_ENTRIES // avg_len)
    # pairs by rank distance k in the sorted inputs (at most n - 1 passes, whatever the
    # spread of the labels): separations only grow with k, so stop at the first k with
    # no pair in range
    for k in range(1, xs.size):
        sep = xs[k:] - xs[:-k]  # >= 0 for sorted inputs; negative only on int64 wrap-around (huge)
        i = np.flatnonzero((sep >= 0) & (sep <= H)) if H is not None else np.arange(xs.size - k)
        if i.size == 0:
            break
        ra, rb = tab.order[i], tab.order[i + k]
        r1 = np.concatenate([ra, rb])
        r2 = np.concatenate([rb, ra])
        # one representative (the first) per (class, class, column shift)
        triple = np.stack([cls[r1], cls[r2], tab.first[r2] - tab.first[r1]], axis=1)
        _, rep = np.unique(triple, axis=0, return_index=True)
        rep.sort()
        r1, r2 = r1[rep], r2[rep]
        for s0 in range(0, r1.size, block):
            vals = _pair_bounds(tab, keys, ncols, r1[s0:s0 + block], r2[s0:s0 + block], ell_lo, upper=True)
            k = int(np.argmax(vals))
            if vals[k] > best:
                best = int(vals[k])
                best_pair = (int(r1[s0 + k]), int(r2[s0 + k]))
    if best_pair is None:
        upper_n = lower_n = 0
        worst = ()
    else:
        upper_n = best
        r1 = np.array([best_pair[0]], dtype=np.int64)
        r2 = np.array([best_pair[1]], dtype=np.int64)
        lower_n = int(_pair_bounds(tab, keys, ncols, r1, r2, ell_hi, upper=False)[0])
        worst = (int(tab.inputs[best_pair[0]]), int(tab.inputs[best_pair[1]]))
    ideal_fn = getattr(channel, "delta_star", None)
    ideal = float(ideal_fn(eps, H)) if callable(ideal_fn) else None
    return _certificate(
        eps, H, upper_n, lower_n, ideal, worst, tab,
        "exact integer row counts c/2^64; ordered pairs with separation 1..H; leakage summed "
        "exactly; overlap with e^eps bounded outward and per-term double arithmetic with a "
        "proven error bound, rounded outward to 2^-62 units and summed exactly",
    )
