"""Could the robust intervals be switched on by the data?  An offline study (not adopted).

``bootstrap(..., robust=True)`` makes every interval the hull of the estimate's
and the MLE's; it holds on heaped data and over-covers smooth data at several
times the width (README, "Estimating from reports").  A rule that used it only
where the data look rougher than ``auto``'s estimate would need a test with
power against that roughness.  The natural one is a parametric-bootstrap
likelihood-ratio test of ``auto``'s fit against the MLE:

    G = loglik(MLE) - loglik(auto),   G*_b the same on counts drawn from auto's fit,

with ``auto``'s member refit on each replicate (``refits._refit_plan``: its
choice held fixed) and the MLE refit from the estimate (warm start), and the
p-value ``(1 + #{G*_b >= G}) / (1 + B)``.

Measured (``bench_coverage``'s Laplace design, n = 10^5, B = 40, three draws per
column, seed ``[7, len(name)]``): health index p = 0.024, 0.098, 0.220; doctor
visits 0.049, 0.780, 0.049; years of education 1.0, 0.098, 1.0 (``auto`` chose
the MLE in two draws: G = 0); smooth truth 0.34, 0.20, 0.24; bimodal 0.95, 0.63, 0.27;
spiky 1.0, 0.37, 1.0.  The comb of the health index, whose range query and CDF
``auto``'s intervals miss in 81.5-87 % of repetitions, is rejected at 5 % in one
draw of three: the test cannot be the switch.

Run: ``python benchmarks/study_robust.py [draws] [B]`` (with ``SPARSELDP_COVERAGE_SHAPES=real`` for the
real columns, which need the bench extra's statsmodels).
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

import bench_coverage as bc


def lr_test(shape: str, draws: int = 3, B: int = 40):
    """``[(regularization, G, p-value), ...]`` for ``draws`` data sets of ``shape``."""
    import sparseldp as sl
    from sparseldp.estimation import estimate_frequencies
    from sparseldp.estimation.model import _model
    from sparseldp.estimation.refits import _REFIT_TOL, _refit_plan, _refit_replicates
    from sparseldp.sampling import sample

    mech = sl.design(bc.FAMILY, eps=1, delta=1e-6, H=5).mechanism
    p = bc.population(shape)
    dom = (0, p.size - 1)
    model = _model(mech, dom)
    U = model.unscaled()
    gen = np.random.default_rng([7, len(shape)])
    out = []
    for _ in range(draws):
        y = sample(mech, gen.choice(p.size, size=bc.N, p=p), rng=gen)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ea = estimate_frequencies(y, mech, domain=dom, return_info=True)
            em = estimate_frequencies(y, mech, domain=dom, method="em", return_info=True)
            q = np.maximum(np.asarray(U.T @ ea.p).ravel(), 0.0)
            C = gen.multinomial(bc.N, q / q.sum(), size=B).astype(float)
            meth, smooth, steps, w = _refit_plan(ea, None)
            tol = 0.0 if meth in ("em-steps", "em-flow") else _REFIT_TOL.get(meth, 0.0)
            Pa = _refit_replicates(model, C, bc.N, ea.p, meth, smooth, w, steps, tol, 2000)[0]
            Pm = _refit_replicates(model, C, bc.N, ea.p, "em", 1, 0.25, None, _REFIT_TOL["em"], 2000)[0]

        def loglik(P):
            return (C * np.log(np.maximum(np.asarray(U.T @ P.T).T, 1e-300))).sum(axis=1)

        G = em.loglik - ea.loglik
        Gs = loglik(Pm) - loglik(Pa)
        out.append((ea.regularization, G, (1 + int((Gs >= G).sum())) / (1 + B)))
    return out


if __name__ == "__main__":
    nums = [int(a) for a in sys.argv[1:] if a.isdigit()]
    draws, B = (nums + [3, 40])[:2] if len(nums) < 2 else nums[:2]
    for shape in bc.SHAPES:
        for reg, G, pval in lr_test(shape, draws, B):
            print(f"{shape:<24} {reg:<22} G {G:8.1f}  p {pval:.3f}", flush=True)
