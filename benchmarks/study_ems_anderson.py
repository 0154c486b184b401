"""Study: Anderson mixing in place of SQUAREM for EMS's fixed point (2026-11-30; adopted as a second phase).

EMS with auto's weakest smoothing (weight 1/32) under a wide kernel creeps to its fixed point:
SQUAREM alone (``_ems._ems_squarem``) needs about 11,000-13,000 map evaluations on five training
folds of 10^4 reports on 1,000 values under the Gaussian design of (1, 1e-6, 10), most of a 22 s
``auto`` fit.  Anderson mixing (type II, depth ``m``) of the pairs ``(x_i, F(x_i))`` is the usual cure
for such slow contractions.  This script measures, for one training fold per case, the map
evaluations each variant needs to get within ``1e-6``, ``1e-8`` and ``1e-10`` (TV of the plain step
``F(x) - x``) from the point the two stronger weights leave, and the smallest entry it ends on.
Variants: the mixture as is (``none``: it can leave the simplex), clipped at 0 (``clip``), kept at
or above a tenth of the plain step's value (``floor``), or mixed in log coordinates (``log``).

Where it stands: ``_ems._ems_fixed`` runs SQUAREM for its first 300 evaluations and hands the
columns it leaves to ``floor`` mixing at depth 3 (``_ems._ems_anderson``), which gives a column
that stalls one restart and then hands it back to SQUAREM.  Mixing from the start (restarts on
stalls, SQUAREM only after 3,000 evaluations) lost on the battery's small domains (127,273
evaluations against SQUAREM's 109,134 over its 176 ``auto`` fits: a spike under the Laplace design of
(1, 1e-6, 5), 3,495 against 309, the same choices and errors in every case); the hybrid
keeps SQUAREM's count there and the mixing's gain on the wide kernels (``_ems_fixed``'s docstring has
the numbers).  A weighted log-coordinate mixing (positive by construction, least squares weighted by
the mass) was tried too: slower than ``floor`` on the wide kernels (554 against 359 evaluations to
1e-6 on the smooth case, 1e-10 not reached in 3,000).

What this script printed (2026-11-30, one run, one BLAS thread), evaluations to a residual of
1e-6 / 1e-8 / 1e-10:

* Gaussian, 1,000 values, smooth: ``clip`` 434 / 946 / 1,354, ``floor`` 445 / 1,128 / 1,498 (depth 3:
  359 / 758 / 1,103), ``none`` 541 / 1,089 / 1,376 ending with negative entries, ``log`` 1,861 / - / -;
  SQUAREM alone (``_ems_squarem``), run to its own stop (estimated distance 1e-4, 0.6-1.1e-4 in fact)
  from the uniform start, took 11,207-12,710 evaluations on the five folds of this case;
* Gaussian, 1,000 values, zero-inflated: ``floor`` 175 / 344 / 734, ``clip`` 582 / 747 / 898,
  ``none`` stuck above 1e-8 with an entry of -3.8e-4, ``log`` 680 / 972 / 1,131;
* Laplace, 100 values, spike, and Gaussian, 100 values, zero-inflated: 23-46 evaluations to 1e-6
  for every linear variant (``log`` up to 382).

And a first prototype of ``floor``/``clip`` inside ``_ems_fixed``, mixing from the start (all five
folds, a stopping rule from the residuals' ratio over lags of ten evaluations):

* ``auto`` on the five shapes of ``bench_estimation._wide_kernel_few_reports`` made the same
  choices with the same errors (to four digits); the smooth shape 22.1 -> 10.0 s (old and new side
  by side on the two cores, a test run beside them);
* but the mixing stalled on the Laplace spike above from the start its own stronger weights left
  (residual near 1e-6 for 50,000 evaluations with ``clip``, 8,461 with ``floor`` at depth 6, 81 at
  depth 3, again 50,000 at depth 4), and a fallback to SQUAREM after 30 evaluations without
  progress fired on the wide-kernel spike and gave the gain back (14,225 evaluations).

Run: ``python study_ems_anderson.py`` (a few minutes).
"""

from __future__ import annotations

import numpy as np

import sparseldp as sl
from bench_estimators import _shapes
from sparseldp.estimation import _model
from sparseldp.estimation._ems import _ems_squarem
from sparseldp.estimation._ems_map import _ems_map

CASES = {  # name: (k, family, H, n, seed, shape)
    "Laplace, 100 values, spike, 1e5": (100, "laplace", 5, 10**5, 98, "spike"),
    "Gaussian, 1,000 values, smooth, 1e4": (1000, "gaussian", 10, 10**4, 96, "smooth"),
    "Gaussian, 1,000 values, zero-inflated, 1e4": (1000, "gaussian", 10, 10**4, 99, "zero-inflated"),
    "Gaussian, 100 values, zero-inflated, 1e5": (100, "gaussian", 5, 10**5, 99, "zero-inflated"),
}
LEVELS = (1e-6, 1e-8, 1e-10)


def fold_map(k, family, H, n, seed, shape):
    """The EMS map (weight 1/32) on one training fold (4/5 of the counts) and its start: the fixed point
    of the two stronger weights, as on auto's path."""
    mech = sl.design(family, eps=1, delta=1e-6, H=H).mechanism
    model = _model(mech, (0, k - 1))
    q = np.maximum(np.asarray(model.unscaled().T @ _shapes(k)[shape]).ravel(), 0.0)
    gen = np.random.default_rng(seed)
    c = gen.multinomial(n, q / q.sum())
    held = np.array([gen.binomial(cj, 0.2) if cj else 0 for cj in c])
    train = (c - held).astype(float)
    obs = np.flatnonzero(train > 0)
    A, AT = model.fast_columns(obs, model.columns(obs))
    C = train[obs][:, None]
    inv_n = 1.0 / C.sum()
    P = np.full((k, 1), 1.0 / k)
    for w in (0.25, 0.125):
        P, _, _ = _ems_squarem(A, AT, C, inv_n, P, 1, w, 1e-6, 50_000)
    return (lambda X: _ems_map(A, AT, C, inv_n, X, 1, 0.03125)), P


def anderson(F, X0, variant, iters=3_000, depth=6, floor=0.1):
    """Evaluations to reach each level of LEVELS, and the smallest entry of the last point."""
    # the coordinates the mixing works in (log: an underflowed entry taken as 1e-300)
    to = (lambda X: np.log(np.maximum(X, 1e-300))) if variant == "log" else (lambda X: X)
    X, G = X0, F(X0)
    R = to(G) - to(X)
    dGs, dRs, first = [], [], {}
    for it in range(1, iters):
        if dGs:
            gamma = np.linalg.lstsq(np.hstack(dRs), R[:, 0], rcond=1e-10)[0]
            u = to(G) - np.hstack(dGs) @ gamma[:, None]
            if variant == "log":
                Xn = np.exp(u - u.max())
            elif variant == "clip":
                Xn = np.maximum(u, 0.0)
            elif variant == "floor":
                Xn = np.maximum(u, floor * G)
            else:
                Xn = u
            Xn = Xn / Xn.sum()
        else:
            Xn = G
        Gn = F(Xn)
        Rn = to(Gn) - to(Xn)
        dGs.append(to(Gn) - to(G))
        dRs.append(Rn - R)
        dGs, dRs = dGs[-depth:], dRs[-depth:]
        X, G, R = Xn, Gn, Rn
        res = 0.5 * float(np.abs(G - X).sum())
        for lvl in LEVELS:
            if res <= lvl and lvl not in first:
                first[lvl] = it + 1
        if res <= LEVELS[-1]:
            break
    return first, float(G.min())


def main():
    for name, case in CASES.items():
        F, X0 = fold_map(*case)
        for variant, depth in (("none", 6), ("clip", 6), ("floor", 6), ("floor", 3), ("log", 6)):
            first, low = anderson(F, X0, variant, depth=depth)
            reached = ", ".join(f"{lvl:g}: {first.get(lvl, '-')}" for lvl in LEVELS)
            print(f"{name:45s} {variant:5s} depth {depth}: evaluations to {reached}; smallest entry {low:.2g}",
                  flush=True)


if __name__ == "__main__":
    main()
