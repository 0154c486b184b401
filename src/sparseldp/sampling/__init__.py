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

Layout
------
One concern per module; imports inside the package point one way, down this
list (each module imports only modules listed below it):

* :mod:`.certificate` -- :class:`Certificate`, :func:`certify`,
  :func:`certify_channel` and the outward-rounding arithmetic they share;
* :mod:`.sampler` -- the radius mechanisms' integer inverse-CDF sampler:
  :func:`sample`, :func:`offset_of_words`;
* :mod:`.channel_tables` -- finite channels: :class:`ChannelTables`,
  :func:`channel_sampling_tables`, :func:`sample_channel`,
  :func:`channel_sampling_pmf`;
* :mod:`.quantize` -- exact decimal weights to integer counts ``c_k``:
  :class:`MechanismTables`, :func:`sampling_tables`, :func:`sampling_pmf`;
* :mod:`._integers` -- input coercion and the branch-free search both
  samplers use.

Bits come from :mod:`sparseldp._rng`.  Mechanisms and channels are known by
protocol only: nothing here imports :mod:`sparseldp.core.mechanisms` or
:mod:`sparseldp.channel`.
"""

from __future__ import annotations

# Besides __all__, three private names stay reachable here as they were before
# this module became a package: _CHUNK and _fixup_slots (tests/test_sampling.py
# reads them) and _CACHE_KEY (the key of the tables in SparseChannel._cache).
from .._rng import BitSource, as_bit_source
from ._integers import _CHUNK
from .certificate import Certificate, certify, certify_channel
from .channel_tables import (
    _CACHE_KEY,
    ChannelTables,
    channel_sampling_pmf,
    channel_sampling_tables,
    sample_channel,
)
from .quantize import MechanismTables, sampling_pmf, sampling_tables
from .sampler import _fixup_slots, offset_of_words, sample

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
