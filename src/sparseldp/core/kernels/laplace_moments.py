"""The first and second moment sums of the discrete-Laplace window, for R1/R2 (Definition 6).

Sums over ``j = 1..t`` of ``j e^{-lam j}`` and ``j^2 e^{-lam j}``, positive terms
only (no cancellation), for any ``t`` up to the Laplace cap: arrays for up to
``2^20`` blocks of ``2^20`` radii, binary doubling of blocks beyond.
"""

from __future__ import annotations

import math

import numpy as np


def laplace_moment_sums(lam: float, t: int):
    """``(sum_{j=1..t} j e^{-lam j}, sum_{j=1..t} j^2 e^{-lam j})`` (``LaplaceKernel.moment_sums``): summed in
    blocks of ``2^20`` radii as arrays, blocks beyond ``2^20`` of them combined by doubling."""
    if t == 0:
        return 0.0, 0.0
    block = min(t, 1 << 20)
    i = np.arange(1, block + 1, dtype=float)
    wi = np.exp(-lam * i)
    a0, a1, a2 = wi.sum(), (i * wi).sum(), (i * i * wi).sum()
    # j = m*block + i: sum over blocks m of q^{m block} (sums shifted by m block)
    nblocks, rem = divmod(t, block)
    if nblocks <= _MAX_BLOCKS:
        m = np.arange(nblocks, dtype=float)
        scale = np.exp(-lam * block * m)
        s1 = float(np.sum(scale * (m * block * a0 + a1)))
        s2 = float(np.sum(scale * ((m * block) ** 2 * a0 + 2 * m * block * a1 + a2)))
    else:
        _, s1, s2 = _laplace_blocks_by_doubling(lam, block, nblocks, (float(a0), float(a1), float(a2)))
    if rem:
        j = nblocks * block + np.arange(1, rem + 1, dtype=float)
        wj = np.exp(-lam * j)
        s1 += float((j * wj).sum())
        s2 += float((j * j * wj).sum())
    return s1, s2


# Blocks of 2^20 radii summed as one array; beyond (t > 2^40) the blocks are combined by doubling.
_MAX_BLOCKS = 1 << 20


def _laplace_blocks_by_doubling(lam: float, block: int, nblocks: int, one):
    """``(sum q^j, sum j q^j, sum j^2 q^j)`` over ``j = 1 .. nblocks * block`` in O(log nblocks).

    ``one`` holds the three sums over one block ``j = 1 .. block``.  A range
    shifted by ``d`` contributes ``q^d (S0, d S0 + S1, d^2 S0 + 2 d S1 + S2)``, so
    sums over ``n1 + n2`` blocks follow from those over ``n1`` and ``n2`` blocks;
    binary doubling needs ``2 log2(nblocks)`` such steps, each adding positive
    terms only (no cancellation), and constant memory.
    """

    def shifted(S, d):
        q = math.exp(-lam * d)
        return (q * S[0], q * (d * S[0] + S[1]), q * (d * d * S[0] + 2.0 * d * S[1] + S[2]))

    def add(A, B):
        return (A[0] + B[0], A[1] + B[1], A[2] + B[2])

    total, covered = (0.0, 0.0, 0.0), 0  # sums over the first `covered` blocks
    power, size = one, 1  # sums over `size` consecutive blocks starting at j = 1
    n = nblocks
    while n:
        if n & 1:
            total = add(total, shifted(power, float(covered) * block))
            covered += size
        n >>= 1
        if n:
            power = add(power, shifted(power, float(size) * block))
            size *= 2
    return total
