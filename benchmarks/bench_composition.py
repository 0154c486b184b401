"""Composition of k reports: the exact lattice route vs dp-accounting's discretized PLD, same run.

At s = 2001 and range H = 10 (the exact route composes h = H, the worst
separation for both families), for k = 10, 100, 1000 reports:

* ``compose(m, k, H=10).delta(eps)`` from a fresh mechanism (lattice, FFT,
  one evaluation), with its error bound (``delta_error``) relative to delta;
* dp-accounting: ``to_pld(m, 10).self_compose(k).get_delta_for_epsilon(eps)``
  at its default-like grid ``value_discretization_interval = 1e-4``
  (pessimistic); ``ratio`` is dp-accounting's time / ours, the note gives the
  relative difference ``(delta_dpa - delta_exact) / delta_exact``;
* ``epsilon(delta)`` of the exact route at k = 1000 (``delta = 1e-6``, or twice the infinity
  mass when that is larger);
* accuracy: the exact route against direct (FFT-free) convolution of the
  lattice pmf where it is cheap (all k for the Laplace lattice of 11 points,
  k = 10 for the Gaussian one); direct convolution of nonnegative numbers is
  accurate elementwise to ``n u``, so it is a reference for every delta.

``eps`` grows with k (1, 3, 10) so that delta stays between 1e-5 and 0.1.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np

from _timing import median_time
from sparseldp import SparseGaussian, SparseLaplace
from sparseldp.composition import compose
from sparseldp.composition.exact import _lattice_loss

S = 2001
H = 10
SETTINGS = ((10, 1.0), (100, 3.0), (1000, 10.0))
MECHS = ((SparseLaplace, {"lam": 0.01}), (SparseGaussian, {"sigma": 100.0}))


def _direct_delta(m, k, eps):
    """delta_k(eps) by direct convolution of the lattice pmf (repeated squaring with np.convolve)."""
    loss = _lattice_loss(m, H)
    p = np.exp(loss.logp)
    out, base, kk = None, p, k
    while kk:
        if kk & 1:
            out = base if out is None else np.convolve(out, base)
        kk >>= 1
        if kk:
            base = np.convolve(base, base)
    L = loss.unit * (k * loss.c0 + loss.step * np.arange(out.size))
    inf_k = -math.expm1(k * loss.log_fin)
    above = L > eps
    return inf_k + float(np.sum(out[above] * -np.expm1(eps - L[above])))


def run():
    rows = []
    # dp-accounting is optional: without it only the exact rows are measured
    to_pld = None
    if importlib.util.find_spec("dp_accounting") is not None:
        from sparseldp.composition import to_pld
    for cls, kw in MECHS:
        name = cls.__name__
        for k, eps in SETTINGS:
            val = {}

            def exact():
                c = compose(cls(**kw, s=S), k, H=H)
                val["d"] = float(c.delta(eps))
                val["c"] = c

            t_ex = median_time(exact, repeat=5 if k < 1000 else 3)
            d = val["d"]
            rel_bound = float(val["c"].delta_error(eps)) / d
            note = f"delta={d:.10g}, error bound {rel_bound:.1e} relative"
            if cls is SparseLaplace or k == 10:
                ref = _direct_delta(cls(**kw, s=S), k, eps)
                note += f"; vs direct convolution {abs(d - ref) / ref:.1e}"
            rows.append({"name": f"exact {name} s={S} H={H} k={k}: delta(eps={eps:g})", "median_s": t_ex,
                         "note": note})
            if to_pld is None:
                continue
            dval = {}

            def dpa():
                pld = to_pld(cls(**kw, s=S), H, value_discretization_interval=1e-4)
                dval["d"] = float((pld.self_compose(k) if k > 1 else pld).get_delta_for_epsilon(eps))

            t_dpa = median_time(dpa, repeat=3, warmup=1)
            rows.append({"name": f"dp-accounting {name} s={S} H={H} k={k}: delta(eps={eps:g})",
                         "median_s": t_dpa, "ratio": t_dpa / t_ex,
                         "note": f"delta={dval['d']:.10g}, (dpa - exact)/exact = {(dval['d'] - d) / d:.2e} "
                                 f"(ratio: dp-accounting time / exact time)"})
        out = {}
        # a target the k reports can reach: above twice their infinity mass (support leakage)
        target = max(1e-6, float(f"{2 * compose(cls(**kw, s=S), 1000, H=H).infinity_mass:.1g}"))

        def inverse():
            c = compose(cls(**kw, s=S), 1000, H=H)
            out["e"] = c.epsilon(target)
            out["d"] = float(c.delta(out["e"]))

        t_inv = median_time(inverse, repeat=3)
        rows.append({"name": f"exact {name} s={S} H={H} k=1000: epsilon(delta={target:g})", "median_s": t_inv,
                     "note": f"eps={out['e']:.12g}, delta there {out['d']:.12g}"})
    return rows
