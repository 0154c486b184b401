"""Sampler throughput (issue 3, "Speed"), every ratio measured in the same run.

* seeded path, n = 10^7, s = 21: rate relative to ``np.random.default_rng().random(n)``
  (target >= 0.5x; a float-CDF ``searchsorted`` sampler is shown for reference);
* secure path (``rng=None``, os.urandom): rate relative to os.urandom delivering
  8-byte words (target >= 0.5x), and relative to OpenDP's exact discrete-Laplace
  sampler ``make_laplace`` on an integer vector domain (target >= 100x).  OpenDP
  is timed at a smaller n (it runs at microseconds per value) and compared by
  rate, values per second;
* also: wider windows, a clipped finite-domain channel, and ``certify`` at
  s = 20,001, H = 3,000.

``ratio`` is always (our rate) / (reference rate), i.e. reference time / our
time for the same n, except where the note says otherwise.
"""

from __future__ import annotations

import os

import numpy as np

from _timing import median_time
from sparseldp import SparseGaussian, SparseLaplace
from sparseldp import sampling as S

N = 10_000_000
N_OPENDP = 200_000
REPEAT = 5


def _opendp_sampler(scale: float):
    try:
        import opendp.prelude as dp
    except ImportError:  # pragma: no cover - optional
        return None
    dp.enable_features("contrib")
    return dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=scale)


def _urandom_words(n: int, chunk: int = 1 << 16) -> None:
    """os.urandom delivering n 8-byte words, in the same 512 KiB requests the sampler makes."""
    for start in range(0, n, chunk):
        np.frombuffer(os.urandom(8 * min(chunk, n - start)), dtype=np.uint64)


def run() -> list[dict]:
    rows = []
    lap = SparseLaplace(lam=0.5, s=21)
    x = np.random.default_rng(0).integers(0, 121, N)  # e.g. ages: int64 inputs
    lap.sample(x[:10], rng=0)  # build and cache the tables outside the timings

    # -- seeded path ---------------------------------------------------------
    g = np.random.default_rng(1)
    t_random = median_time(lambda: g.random(N), repeat=REPEAT)
    rows.append({"name": "numpy default_rng().random(1e7) [reference]", "median_s": t_random,
                 "note": f"{N / t_random / 1e6:.0f} M values/s"})
    t_seeded = median_time(lambda: lap.sample(x, rng=g), repeat=REPEAT)
    rows.append({"name": "SparseLaplace(s=21).sample(1e7 ints, rng=Generator)", "median_s": t_seeded,
                 "ratio": t_random / t_seeded, "note": "rate vs random(n); target >= 0.5x"})
    cdf = np.cumsum(lap.pmf(np.arange(-lap.t, lap.t + 1)))

    def naive():
        return np.searchsorted(cdf, g.random(N), side="right").clip(max=2 * lap.t) - lap.t + x

    t_naive = median_time(naive, repeat=REPEAT)
    rows.append({"name": "float-CDF searchsorted sampler (not exact) [reference]", "median_s": t_naive,
                 "ratio": t_random / t_naive, "note": "rate vs random(n)"})
    for m in (SparseGaussian(sigma=30.0, s=201), SparseGaussian(sigma=3000.0, s=20001)):
        m.sample(x[:10], rng=0)
        t = median_time(lambda m=m: m.sample(x, rng=g), repeat=REPEAT)
        rows.append({"name": f"SparseGaussian(s={m.s}).sample(1e7, rng=Generator)", "median_s": t,
                     "ratio": t_random / t, "note": "rate vs random(n)"})

    # -- secure path ---------------------------------------------------------
    t_urandom = median_time(lambda: _urandom_words(N), repeat=REPEAT)
    rows.append({"name": "os.urandom: 1e7 8-byte words, 512 KiB calls [reference]", "median_s": t_urandom,
                 "note": f"{N / t_urandom / 1e6:.0f} M words/s"})
    t_urandom1 = median_time(lambda: np.frombuffer(os.urandom(8 * N), dtype=np.uint64), repeat=3)
    rows.append({"name": "os.urandom: 1e7 8-byte words, one call [reference]", "median_s": t_urandom1,
                 "note": f"{N / t_urandom1 / 1e6:.0f} M words/s"})
    t_secure = median_time(lambda: lap.sample(x), repeat=REPEAT)
    rows.append({"name": "SparseLaplace(s=21).sample(1e7 ints) [secure default]", "median_s": t_secure,
                 "ratio": min(t_urandom, t_urandom1) / t_secure,
                 "note": "rate vs the faster os.urandom row; target >= 0.5x"})

    odp = _opendp_sampler(scale=1.0 / lap.lam)
    if odp is not None:
        xs = [int(v) for v in x[:N_OPENDP]]
        t_odp = median_time(lambda: odp(xs), repeat=3)
        rate_odp = N_OPENDP / t_odp
        rows.append({"name": f"OpenDP make_laplace, n={N_OPENDP:,} [reference]", "median_s": t_odp,
                     "note": f"{rate_odp / 1e6:.3f} M values/s (exact discrete Laplace, scale 1/lam)"})
        rows.append({"name": "secure sample vs OpenDP (rate ratio)", "median_s": t_secure,
                     "ratio": (N / t_secure) / rate_odp, "note": f"ours at n=1e7, OpenDP at n={N_OPENDP:,}; target >= 100x"})
    else:
        rows.append({"name": "OpenDP make_laplace", "note": "opendp not installed: skipped"})

    # -- channel and certificate -------------------------------------------------
    try:
        from sparseldp.channel import SparseChannel
    except ImportError:  # pragma: no cover
        SparseChannel = None
    if SparseChannel is not None:
        ch = SparseChannel.laplace(lam=0.5, s=21, domain=(0, 120), window="clipped")
        S.sample_channel(ch, x[:10], rng=0)
        t_ch = median_time(lambda: S.sample_channel(ch, x, rng=g), repeat=3)
        rows.append({"name": "clipped channel (0..120, s=21).sample(1e7, rng=Generator)", "median_s": t_ch,
                     "ratio": t_random / t_ch, "note": "rate vs random(n); per-row branch-free binary search"})
    big = SparseGaussian(sigma=3000.0, s=20001)
    t_cert = median_time(lambda: big.certify(0.5, 3000), repeat=3)
    rows.append({"name": "certify(eps=0.5, H=3000), s=20001", "median_s": t_cert,
                 "note": "rigorous outward-rounded delta* of the realized sampler"})
    return rows


if __name__ == "__main__":
    for r in run():
        print(r)
