"""Does ``bootstrap``'s ``ShapeWarning`` (``auto``'s ``selection_tv`` >= 0.3) mark the settings where the local
intervals miss?  Coverage of nominal 95% bootstrap intervals, split by whether it fired.

Settings: ``bench_coverage``'s (``design(family, eps=1, delta=1e-6, H=5)``, true values on 0..99 from its smooth,
bimodal and spiky populations, 10^5 reports), ``auto``'s fit and its bootstrap at B = 100; per repetition, whether
``selection_tv`` was at least ``auto._AMBIGUOUS_TV`` and whether the intervals of P(30 <= X <= 50), the CDF at 60
and the mean hold the population's values.  Result of 2026-11-30 (100 repetitions each, seeds ``[7, r]``), in
docs/estimation.md ("How decisive the choice is"): fired on 0-2 of 100 under the Laplace design, where the
local intervals cover 92-96%; on 43 / 65 / 80 of 100 under the Gaussian one (smooth / bimodal / spiky), where
they cover 92 / 70 / 3-46%, the silent repetitions missing as often as the others.

Usage: ``python benchmarks/study_shape_warning.py [laplace|gaussian] [smooth|bimodal|spiky] [reps]`` (all six
settings without arguments, 100 repetitions: about 20 minutes on one core).
"""

from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def coverage(family: str, shape: str, reps: int = 100, seed: int = 7) -> dict:
    import bench_coverage as BC

    import sparseldp as sl
    from sparseldp.estimation import auto, estimate_frequencies_full
    from sparseldp.sampling import sample

    mech = sl.design(family, eps=1, delta=1e-6, H=5).mechanism
    pop = BC.population(shape)
    truth = {"range": pop[30:51].sum(), "cdf60": pop[:61].sum(), "mean": float(pop @ np.arange(pop.size))}
    fired, hits = [], {name: [] for name in truth}
    for r in range(reps):
        gen = np.random.default_rng([seed, r])
        x = gen.choice(pop.size, size=10**5, p=pop)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = estimate_frequencies_full(sample(mech, x, rng=gen), mech, domain=(0, pop.size - 1))
            b = est.bootstrap(mech, B=100, rng=gen)
        fired.append(est.selection_tv is not None and est.selection_tv >= auto._AMBIGUOUS_TV)
        for name, (_, (lo, hi)) in (("range", est.range(30, 50, ci=b)), ("cdf60", est.cdf(60, ci=b)),
                                    ("mean", est.mean(ci=b))):
            hits[name].append(bool(lo <= truth[name] <= hi))
    return {"fired": np.array(fired), **{name: np.array(v) for name, v in hits.items()}}


def main(argv):
    sys.path.insert(0, HERE)
    families = [argv[1]] if len(argv) > 1 else ["laplace", "gaussian"]
    shapes = [argv[2]] if len(argv) > 2 else ["smooth", "bimodal", "spiky"]
    reps = int(argv[3]) if len(argv) > 3 else 100
    for family in families:
        for shape in shapes:
            t0 = time.perf_counter()
            res = coverage(family, shape, reps)
            f = res["fired"]
            line = f"{family:<9} {shape:<8} fired {f.sum():3d}/{f.size}"
            for name in ("range", "cdf60", "mean"):
                c = 100 * res[name]
                part = lambda m: f"{c[m].mean():5.1f}" if m.any() else "  -  "  # noqa: E731
                line += f" | {name} all {c.mean():5.1f} fired {part(f)} silent {part(~f)}"
            print(line + f"  ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main(sys.argv)
