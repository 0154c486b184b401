"""The shared parameter table: every kind of local randomizer the package builds.

One table feeds one battery of protocol checks (tests/test_battery.py), in the
manner of scipy.stats' ``_distr_params``: a new family, kernel or channel is
covered by adding a row here.  Each row is ``(id, factory, domain)`` where
``domain`` is the input range the battery works on (radius mechanisms on Z are
looked at through the inputs ``lo..hi`` and every output they can produce).
"""

from __future__ import annotations

from sparseldp import SparseChannel, SparseGaussian, SparseKernel, SparseLaplace
from sparseldp.baselines import discrete_gaussian, duchi, geometric, hybrid, piecewise, randomized_response, square_wave

RANDOMIZERS = [
    ("laplace-z", lambda: SparseLaplace(lam=0.5, s=7), (0, 8)),
    ("laplace-z-sharp", lambda: SparseLaplace(lam=2.0, s=5), (0, 6)),
    ("laplace-z-flat", lambda: SparseLaplace(lam=0.05, s=11), (0, 8)),
    ("gaussian-z", lambda: SparseGaussian(sigma=1.5, s=9), (0, 8)),
    ("gaussian-z-narrow", lambda: SparseGaussian(sigma=0.7, s=5), (0, 6)),
    ("laplace-clipped", lambda: SparseLaplace(lam=0.5, s=7).to_channel((0, 10), "clipped"), (0, 10)),
    ("laplace-extended", lambda: SparseLaplace(lam=0.8, s=5).to_channel((0, 6), "extended"), (0, 6)),
    ("gaussian-clipped", lambda: SparseGaussian(sigma=1.2, s=7).to_channel((0, 9), "clipped"), (0, 9)),
    ("k-rr", lambda: randomized_response(eps=1.0, domain=(0, 5)), (0, 5)),
    ("geometric-clamp", lambda: geometric(lam=0.7, domain=(0, 7), mode="clamp"), (0, 7)),
    ("discrete-gaussian", lambda: discrete_gaussian(sigma=1.5, domain=(0, 6)), (0, 6)),
    ("square-wave", lambda: square_wave(eps=1.0, domain=(0, 6)), (0, 6)),
    ("piecewise", lambda: piecewise(eps=1.0, domain=(0, 6)), (0, 6)),
    ("hybrid", lambda: hybrid(eps=1.5, domain=(0, 6)), (0, 6)),
    ("duchi", lambda: duchi(eps=1.0, domain=(0, 6)), (0, 6)),
    ("kernel-staircase", lambda: SparseKernel(weights=(1.0, 1.0, 0.6, 0.6, 0.1)), (0, 8)),
    ("kernel-laplace-shape", lambda: SparseKernel.from_function(lambda d: 0.6 ** d, s=7), (0, 6)),
    ("kernel-staircase-clipped", lambda: SparseKernel(weights=(2.0, 1.0, 1.0, 0.3)).to_channel((0, 9), "clipped"),
     (0, 9)),
    ("raw-weights", lambda: SparseChannel([[4, 2, 1, 0], [1, 4, 2, 1], [0, 1, 4, 2]]), (0, 2)),
]

#: Privacy targets the battery evaluates every randomizer at.
EPS = (0.0, 0.3, 1.0, 2.5)
H_VALUES = (1, 2, 4)
