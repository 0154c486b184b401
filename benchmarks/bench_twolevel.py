"""Two-level products (``sparseldp.estimation._twolevel``) against the dense ones they replace.

Randomized response, the square wave, the Piecewise and the Hybrid Mechanisms give each output one
probability on an interval of inputs and a lower one elsewhere; EM's and EMS's products then take prefix sums,
``O(k + m)`` instead of ``O(k m)``.  Rows, each measured in the same run with the dense products (the structure
turned off by patching ``TwoLevel.of``), one BLAS thread:

* the two products alone on 400 and 1,000 values (5 columns: auto's folds);
* ``estimate_frequencies_full(method="auto")`` on 10^5 reports of a geometric population, k-RR at eps = 2 and
  the Hybrid Mechanism at eps = 1 on 400 values (medians of 3, old and new interleaved; the same choice);
* ``sparseldp.compare`` of the four two-level families on 0..399 (eps 1, delta 1e-6, H 5, 10^5 people,
  seed 1; one run each): the same table either way.
"""

from __future__ import annotations

import contextlib
import statistics
import time

import numpy as np

from _timing import median_time


@contextlib.contextmanager
def _dense_only():
    from sparseldp.estimation._twolevel import TwoLevel

    saved = TwoLevel.__dict__["of"]
    TwoLevel.of = classmethod(lambda cls, S: None)
    try:
        yield
    finally:
        TwoLevel.of = saved


def _products():
    import sparseldp as sl
    from sparseldp.baselines import numeric
    from sparseldp.estimation import _model

    rows = []
    for label, ch, k in (("piecewise eps=1, 400 values", numeric.piecewise(eps=1.0, domain=(0, 399)), 400),
                         ("rr eps=2, 1,000 values", sl.baselines.randomized_response(eps=2.0, domain=(0, 999)), 1000)):
        model = _model(ch, (0, k - 1))
        idx = np.arange(model.m)
        A, AT = model.fast_columns(idx)
        D, DT = model.columns(idx)
        rng = np.random.default_rng(0)
        P, R = np.asfortranarray(rng.random((k, 5))), np.asfortranarray(rng.random((model.m, 5)))
        for name, fast, dense in (("S^T P", lambda: AT @ P, lambda: DT @ P), ("S R", lambda: A @ R, lambda: D @ R)):
            t_fast = median_time(fast, repeat=200)
            t_dense = median_time(dense, repeat=200)
            rows.append({"name": f"two-level {name}, {label}, 5 columns", "median_s": t_fast,
                         "ratio": t_dense / t_fast, "note": f"dense {t_dense * 1e6:.0f} us"})
    return rows


def _auto_fits():
    import sparseldp as sl
    from sparseldp.baselines import numeric
    from sparseldp.estimation import estimate_frequencies_full
    from sparseldp.sampling import sample

    rows = []
    for label, mech in (("k-RR eps=2", sl.baselines.randomized_response(eps=2.0, domain=(0, 399))),
                        ("hybrid eps=1", numeric.hybrid(eps=1.0, domain=(0, 399)))):
        gen = np.random.default_rng(5)
        x = np.minimum(gen.geometric(0.05, 10**5) - 1, 399)
        y = sample(mech, x, rng=gen)
        fast, dense, choices = [], [], set()
        for _ in range(3):
            for out, ctx in ((fast, contextlib.nullcontext), (dense, _dense_only)):
                with ctx():
                    t0 = time.perf_counter()
                    est = estimate_frequencies_full(y, mech, domain=(0, 399))
                    out.append(time.perf_counter() - t0)
                    choices.add(est.regularization)
        tf, td = statistics.median(fast), statistics.median(dense)
        rows.append({"name": f"auto, {label}, 400 values, 1e5 reports: two-level", "median_s": tf,
                     "ratio": td / tf, "note": f"dense {td:.2f} s; choices {sorted(choices)}"})
    return rows


def _compare():
    from sparseldp.compare import compare

    kw = dict(eps=1.0, delta=1e-6, H=5, domain=(0, 399), n=100_000, rng=1,
              families=["rr", "square-wave", "piecewise", "hybrid"])
    t0 = time.perf_counter()
    new = compare(**kw)
    t_new = time.perf_counter() - t0
    with _dense_only():
        t0 = time.perf_counter()
        old = compare(**kw)
        t_old = time.perf_counter() - t0
    same = all(abs(a.w1 - b.w1) <= 1e-6 * max(1.0, b.w1) for a, b in zip(new.rows, old.rows))
    return [{"name": "compare rr, square-wave, piecewise, hybrid on 0..399: two-level", "median_s": t_new,
             "ratio": t_old / t_new, "note": f"dense {t_old:.1f} s; same W1: {same}"}]


def run() -> list[dict]:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return _products() + _auto_fits() + _compare()


if __name__ == "__main__":
    for row in run():
        print(f"{row['name']:<72} {row['median_s']:10.4f} s {row.get('ratio', 0):6.1f}x  {row.get('note', '')}")
