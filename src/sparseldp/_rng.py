"""Random bit sources: one interface, two implementations.

Every sampler in sparseldp consumes uniformly distributed 64-bit words through
one call, ``source.words(n) -> uint64 array``.  :func:`as_bit_source` turns the
public ``rng`` keyword into such a source, once, at the public boundary:

``rng=None`` (the default)
    :class:`SystemBitSource`: the operating system's cryptographically secure
    generator, ``os.urandom`` (``getrandom(2)`` on Linux, ``BCryptGenRandom``
    on Windows, ``getentropy``/``/dev/urandom`` elsewhere), the same source as
    the :mod:`secrets` module.  This is what a device or pipeline must use.
an ``int`` seed >= 0, a ``SeedSequence``, a ``BitGenerator`` or a ``Generator`` (numpy)
    :class:`SeededBitSource` wrapping ``np.random.default_rng(rng)`` (a
    Generator is used as is, so its stream continues across calls).
    **Reproducible simulation only, not for production**: numpy's generators
    are statistically good but predictable; anyone who knows or guesses the
    seed can recompute every noise value and strip the privacy.

The sampling algorithm is the same for both; only the bits differ.  A source
that is already a :class:`BitSource` is passed through unchanged, so a caller
that normalizes once (for example the file pipeline, batch after batch) keeps
one continuous stream.
"""

from __future__ import annotations

import numbers
import os

import numpy as np

__all__ = ["BitSource", "SystemBitSource", "SeededBitSource", "as_bit_source", "simulation_generator"]

_NATIVE_64 = (np.random.PCG64, np.random.PCG64DXSM, np.random.Philox, np.random.SFC64)
_ACCEPTED = "None (secure OS source), an int seed >= 0, a numpy SeedSequence, BitGenerator or Generator"


class BitSource:
    """Uniform 64-bit words on demand; subclasses implement :meth:`words`."""

    #: True only for the operating system's secure source.
    secure: bool = False

    def words(self, n: int) -> np.ndarray:  # pragma: no cover - abstract
        """Return ``n`` independent uniform words as a 1-D ``uint64`` array."""
        raise NotImplementedError


class SystemBitSource(BitSource):
    """The OS CSPRNG via ``os.urandom``: ``np.frombuffer(os.urandom(8 n), uint64)``.

    Each call draws fresh bytes from the kernel; nothing is cached or seeded in
    user space, so a forked process or a restored snapshot cannot replay it.
    """

    secure = True

    def words(self, n: int) -> np.ndarray:
        return np.frombuffer(os.urandom(8 * int(n)), dtype=np.uint64)

    def __repr__(self) -> str:
        return "SystemBitSource()"


class SeededBitSource(BitSource):
    """Words from a numpy Generator: reproducible simulation, **not for production**.

    For the bit generators whose native output is a 64-bit word (PCG64, the
    default, PCG64DXSM, Philox, SFC64) the words are ``random_raw(n)``, the
    fastest path; any other bit generator (MT19937's raw output has only 32
    bits) goes through ``generator.integers(0, 2**64, dtype=np.uint64)``, which
    takes ``next_uint64`` directly (the full range needs no rejection).
    """

    secure = False

    def __init__(self, generator: np.random.Generator):
        self.generator = generator
        bg = generator.bit_generator
        self._raw = bg.random_raw if type(bg) in _NATIVE_64 else None

    def words(self, n: int) -> np.ndarray:
        if self._raw is not None:
            return self._raw(int(n))
        return self.generator.integers(0, 1 << 64, size=int(n), dtype=np.uint64)

    def __repr__(self) -> str:
        return f"SeededBitSource({self.generator!r})"


def as_bit_source(rng=None) -> BitSource:
    """Normalize the public ``rng`` keyword into a :class:`BitSource`.

    Parameters
    ----------
    rng : None, int, numpy.random.SeedSequence, numpy.random.BitGenerator, numpy.random.Generator or BitSource
        ``None`` selects the OS secure source (the default everywhere).  Any of
        the numpy forms selects reproducible simulation through
        ``np.random.default_rng(rng)``; do not use it in production.

    Raises
    ------
    TypeError
        For any other type (floats, strings, bools, ``np.random.RandomState``...).
    ValueError
        For a negative integer seed.
    """
    if rng is None:
        return SystemBitSource()
    if isinstance(rng, BitSource):
        return rng
    if isinstance(rng, (bool, np.bool_)):
        raise TypeError(f"rng must be {_ACCEPTED}; got bool {rng!r}")
    if isinstance(rng, numbers.Integral):
        if int(rng) < 0:
            raise ValueError(f"rng seed must be an integer >= 0; got {int(rng)}")
        return SeededBitSource(np.random.default_rng(int(rng)))
    if isinstance(rng, (np.random.SeedSequence, np.random.BitGenerator, np.random.Generator)):
        return SeededBitSource(np.random.default_rng(rng))
    raise TypeError(f"rng must be {_ACCEPTED}; got {type(rng).__name__} {rng!r}"[:300])


_SIMULATION = "None, an int seed >= 0, a numpy SeedSequence, BitGenerator or Generator"


def simulation_generator(rng=None) -> np.random.Generator:
    """A numpy Generator for simulation on already-privatized data (bootstrap, benchmarks, demo data).

    Unlike :func:`as_bit_source` this never feeds a privacy mechanism: ``None`` is a fresh
    ``np.random.default_rng()`` (operating-system entropy, not reproducible), a seed or numpy
    object is ``np.random.default_rng(rng)`` (a Generator continues its own stream).

    Raises
    ------
    TypeError
        For any other type (floats, strings, bools...).
    ValueError
        For a negative integer seed.
    """
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, (bool, np.bool_)):
        raise TypeError(f"rng must be {_SIMULATION}; got bool {rng!r}")
    if isinstance(rng, numbers.Integral):
        if int(rng) < 0:
            raise ValueError(f"rng must be an int seed >= 0; got {int(rng)}")
        return np.random.default_rng(int(rng))
    if isinstance(rng, (np.random.Generator, np.random.SeedSequence, np.random.BitGenerator)):
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be {_SIMULATION}; got {type(rng).__name__} {rng!r}"[:300])
