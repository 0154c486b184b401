"""Finite-domain channels (issue 2): exact delta over all pairs in range, kept sparse.

A domain of 10,000 values with s = 101 and H = 50 (about a million ordered
pairs): ``SparseChannel.delta_star(1, H=50)`` for extended and clipped windows,
against a plain scipy.sparse evaluation of the same pairs (rows ``P[I] - e P[J]``
per separation, positive parts summed), measured in the same run; values are
checked equal to 1e-12.  Also ``epsilon(delta, H=50)`` and the full-range
``delta(1)`` (stops at the first disjoint pair).
"""

import math

import numpy as np

from _timing import median_time
from sparseldp import SparseLaplace
from sparseldp.channel import SparseChannel

DOMAIN = (0, 9_999)
S = 101
H = 50
LAM = 0.1


def _scipy_sparse_delta(ch, eps, H):
    """Reference: scipy.sparse row arithmetic for every separation h <= H (inputs are 0..n-1)."""
    P = ch.matrix
    n = P.shape[0]
    e = math.exp(eps)
    best = 0.0
    for h in range(1, H + 1):
        i = np.arange(n - h)
        A, B = P[i], P[i + h]
        for D in (A - e * B, B - e * A):
            D = D.tocsr()
            D.data = np.maximum(D.data, 0.0)
            best = max(best, float(D.sum(axis=1).max()))
    return best


def run():
    rows = []
    mech = SparseLaplace(lam=LAM, s=S)
    for window in ("extended", "clipped"):
        holder = {}

        def build():
            holder["ch"] = SparseChannel.laplace(lam=LAM, s=S, domain=DOMAIN, window=window)

        t_build = median_time(build, repeat=3)
        ch = holder["ch"]
        val = {}
        # a fresh channel per run, built outside the timed call: the cold path incl. the band layout
        fresh = [SparseChannel.laplace(lam=LAM, s=S, domain=DOMAIN, window=window) for _ in range(6)]

        def ours():
            val["d"] = float(fresh.pop().delta_star(1.0, H))

        t_ours = median_time(ours, repeat=5)
        ref = {}

        def reference():
            ref["d"] = _scipy_sparse_delta(ch, 1.0, H)

        t_ref = median_time(reference, repeat=3, warmup=0)
        assert abs(val["d"] - ref["d"]) <= 1e-12, (val["d"], ref["d"])
        note = f"delta={val['d']:.10f}, nnz={ch.matrix.nnz:,}, build {t_build:.3f} s"
        if window == "extended":
            assert abs(val["d"] - float(mech.delta_star(1.0, H))) <= 1e-12
            note += ", = SparseLaplace.delta_star"
        rows.append({"name": f"channel delta n=10,000 s=101 H=50 {window}", "median_s": t_ours,
                     "ratio": t_ref / t_ours, "note": note + " (ratio: vs scipy.sparse rows)"})

        target = val["d"] * 0.9
        eps_val = {}

        def calibrate():
            eps_val["e"] = ch.epsilon(target, H)

        t_eps = median_time(calibrate, repeat=3, warmup=0)
        rows.append({"name": f"channel epsilon(delta) n=10,000 s=101 H=50 {window}", "median_s": t_eps,
                     "note": f"eps={eps_val['e']:.12g} for delta={target:.6g}"})

        full = {}

        def full_range():
            full["d"] = float(ch.delta_star(1.0))

        t_full = median_time(full_range, repeat=3)
        rows.append({"name": f"channel delta n=10,000 s=101 H=None {window}", "median_s": t_full,
                     "note": f"delta={full['d']} (disjoint windows at h > s-1)"})
    return rows


if __name__ == "__main__":
    for r in run():
        print(r)
