r"""What every section of the privacy report shares: :class:`Num`, a number with its kind, and the size of a spec.

A :class:`Num` is a value with a ``kind`` that says how far it can be trusted:

``exact``     the closed form evaluated in floating point and rounded to nearest (Theorems 2/3/8/9,
              Propositions 1 and 3): not a bound, off by a few units in the last place at most;
``upper``     a rigorous upper bound (outward rounding, or a pessimistic discretization): never
              below the true value;
``lower``     a rigorous lower bound;
``estimate``  neither: an asymptotic formula, a stochastic estimate or a computation whose error
              model is not outward rounded (the ``how`` text says which and how large).

Besides: whether a spec is a clipped channel, how much one scan of its pairs costs
(:func:`clipped_work`) and how many scans a section may spend (``_scans``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Num", "MAX_CLIPPED_WORK", "clipped_work"]

#: Largest clipped channel reported: pairs in range x window entries (one scan of every pair costs this).
MAX_CLIPPED_WORK = 20_000_000
#: Scans of every pair a clipped channel's report may spend on its profile and per-separation bars.
_SCAN_BUDGET = 100_000_000


@dataclass(frozen=True)
class Num:
    """One number of the page: ``key`` (stable, for machines), ``value``, ``kind`` and ``how`` (for people)."""

    key: str
    value: float
    kind: str
    how: str

    def __post_init__(self):
        if self.kind not in ("exact", "upper", "lower", "estimate", "recorded"):
            raise ValueError(f"kind must be exact, upper, lower, estimate or recorded; got {self.kind!r}")


def _is_clipped(spec) -> bool:
    return spec.domain is not None and spec.window == "clipped"


def clipped_work(spec, H: int) -> int:
    """Pairs in range times window entries: the cost of one scan of a clipped channel's pairs (0 on Z)."""
    if not _is_clipped(spec):
        return 0
    k = spec.domain[1] - spec.domain[0] + 1
    return k * max(1, min(H, k - 1)) * spec.s


def _scans(spec, H: int, most: int, least: int) -> int:
    """How many scans of every pair the budget allows, between ``least`` and ``most``."""
    work = clipped_work(spec, H)
    return most if work == 0 else int(min(most, max(least, _SCAN_BUDGET // work)))


def _range_on_domain(spec, H: int) -> int:
    """The largest separation that occurs: ``H`` on Z, ``min(H, hi - lo)`` on a domain."""
    if spec.domain is None:
        return H
    return min(H, spec.domain[1] - spec.domain[0])
