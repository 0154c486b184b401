"""sparseldp: sparse local differential privacy, exactly.

Local randomizers ``M(y | x) ~ w(x, y) 1{y in S(x)}`` that report each integer
value ``x`` as a random ``y`` from a small window around it, with a discrete
Laplace or Gaussian kernel; exact ``(eps, delta)`` accounting, design from a
target, certified sampling and estimation from reports.

The core (mechanisms, accounting, bounds, design, channels, sampling,
estimation) needs only numpy and scipy; the CLI, figures and file I/O need the
``cli`` extra.

Layout (imports point down this list, never up)::

    cli/          command line (typer + rich)      -> everything below
    io, figures   files (pyarrow/csv), plots       -> estimation, sampling, spec
    compare       baselines side by side           -> estimation, design, baselines
    estimation    frequencies and means from reports -> channel
    spec          mechanism spec files (JSON)      -> mechanisms, channel
    sampling      exact integer-threshold samplers -> mechanisms, channel
    design        smallest support, joint optimum  -> bounds, mechanisms
    bounds        the paper's closed-form bounds   -> mechanisms
    baselines     k-RR, geometric, discrete Gaussian channels -> channel
    channel       general finite channels (Theorems 2, 5)
    mechanisms    SparseLaplace, SparseGaussian    -> accounting
    accounting    exact defects (Theorems 3, 9)    -> _kernels
"""

from __future__ import annotations

import importlib

from .errors import InfeasibleError
from .mechanisms import SparseGaussian, SparseLaplace
from .design import Design, design, smallest_support  # eager: the function shadows the module name

__version__ = "0.1.0"

# Public names served lazily from their modules, so that importing sparseldp
# stays light and each layer loads only when used.
_LAZY = {
    "SparseChannel": "channel",
    "SparseKernel": "kernel_mechanism",
    "estimate_frequencies": "estimation",
    "estimate_mean": "estimation",
    "MeanEstimate": "estimation",
    "FrequencyEstimate": "estimation",
    "design_finite": "finite_design",
    "calibrate": "finite_design",
    "to_pld": "composition",
    "bounds": None,
    "accounting": None,
    "sampling": None,
    "estimation": None,
    "baselines": None,
    "channel": None,
    "spec": None,
    "io": None,
    "reproduce": None,
    "figures": None,
}

__all__ = [
    "InfeasibleError", "SparseLaplace", "SparseGaussian", "Design", "design", "smallest_support",
    "__version__", *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        module = importlib.import_module(f".{_LAZY[name] or name}", __name__)
        value = module if _LAZY[name] is None else getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sparseldp' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
