"""The integer inverse-CDF sampler of radius mechanisms.

``y = x + K`` with ``K = #{j : T_j <= u} - t`` for a uniform 64-bit word
``u`` (:func:`offset_of_words`), found by a guide table on the top 16 bits
and an exact search in the few buckets that hold a threshold, with the bits
drawn lazily and a fixed number of fix-up slots per chunk; see "How it is
sampled" and "Timing" in :mod:`sparseldp.sampling`.  Bits come from
:mod:`sparseldp._rng` (the OS secure source by default).  :func:`sample`
hands a finite channel to :func:`~.channel_tables.sample_channel`.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .._rng import BitSource, as_bit_source
from ._integers import _CHUNK, _INT64_MAX, _INT64_MIN, _as_int_input, _branchless_count_le
from .channel_tables import sample_channel
from .quantize import _BUCKET_BITS, MechanismTables, _is_channel, sampling_tables


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
