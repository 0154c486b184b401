"""Synthetic data for the demo and the benchmarks: ages of a population, as a CSV.

Nothing here is private data: it is a fixed, documented distribution so that
``make demo`` and the I/O benchmark have something realistic to privatize.
"""

from __future__ import annotations

import numpy as np

from ._rng import simulation_generator
from ._validation import check_int

__all__ = ["AGE_MAX", "CITIES", "age_pmf", "synthetic_ages", "write_demo_csv"]

#: Ages are integers in ``0..AGE_MAX``.
AGE_MAX = 99

#: Cities of the demo file, with their shares.  One name contains the separator
#: so the CSV exercises quoting.
CITIES = (
    ("Lyon", 0.30),
    ("Nantes", 0.20),
    ("Lille", 0.15),
    ("Saint-Denis, La Réunion", 0.10),
    ("Grenoble", 0.15),
    ("Brest", 0.10),
)


def age_pmf() -> np.ndarray:
    r"""The demo's age distribution on ``0..99``: a mixture shaped like a population pyramid.

    ``p(a) \propto 0.55 * plateau(a) + 0.30 * N(a; 38, 11^2) + 0.15 * N(a; 68, 9^2)``
    where ``plateau(a) = 1`` for ``a < 60`` and decays like ``exp(-(a - 60)/10)``
    after: a flat young population, a bulge of working age, a post-war cohort and
    a tail of the very old.  Normalized to sum to 1.
    """
    a = np.arange(AGE_MAX + 1, dtype=float)
    plateau = np.where(a < 60, 1.0, np.exp(-(a - 60) / 10.0))
    plateau /= plateau.sum()

    def normal(mu, sd):
        w = np.exp(-0.5 * ((a - mu) / sd) ** 2)
        return w / w.sum()

    p = 0.55 * plateau + 0.30 * normal(38.0, 11.0) + 0.15 * normal(68.0, 9.0)
    return p / p.sum()


def synthetic_ages(n: int, *, rng) -> np.ndarray:
    """``n`` ages drawn independently from :func:`age_pmf` (``int64`` array in ``0..99``).

    ``rng`` is a seed or Generator (simulated data, reproducibility is the point).
    """
    n = check_int(n, "n", minimum=0)
    return simulation_generator(rng).choice(AGE_MAX + 1, size=n, p=age_pmf()).astype(np.int64)


def write_demo_csv(path, n: int, rng) -> None:
    """Write a CSV with columns ``id`` (1..n), ``age`` (:func:`synthetic_ages`) and ``city``.

    Written in slices of a million rows (lines assembled with pyarrow compute,
    no per-row Python), so ``n`` in the millions needs little memory.  Fields
    are quoted only where needed (RFC 4180), lines end with LF.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    n = check_int(n, "n", minimum=0)
    gen = simulation_generator(rng)
    # Each city already carries the line end, so the lines' data buffer is the file's text.
    rendered = pa.array([(f'"{c}"' if ("," in c or '"' in c) else c) + "\n" for c, _ in CITIES])
    shares = np.array([w for _, w in CITIES])
    shares = shares / shares.sum()
    step = 1_000_000
    with open(path, "wb") as fh:
        fh.write(b"id,age,city\n")
        for lo in range(0, n, step):
            m = min(step, n - lo)
            ids = pc.cast(pa.array(np.arange(lo + 1, lo + m + 1)), pa.string())
            ages = pc.cast(pa.array(synthetic_ages(m, rng=gen)), pa.string())
            city = rendered.take(pa.array(gen.choice(len(CITIES), size=m, p=shares)))
            lines = pc.binary_join_element_wise(ids, ages, city, ",")
            _, offsets, data = lines.buffers()
            offs = np.frombuffer(offsets, np.int32, count=len(lines) + 1, offset=4 * lines.offset)
            fh.write(memoryview(data)[int(offs[0]) : int(offs[-1])])
