"""sparseldp: sparse local differential privacy, exactly.

Local randomizers ``M(y | x) ~ w(x, y) 1{y in S(x)}`` that report each integer
value ``x`` as a random ``y`` from a small window around it, with a discrete
Laplace or Gaussian kernel; exact ``(eps, delta)`` accounting, design from a
target, certified sampling and estimation from reports.

The core, channels, design, sampling and estimation need only numpy and
scipy; the CLI, figures and file I/O need the ``cli`` extra.

Layout (subpackages; imports point down this list, never up, checked by
tests/test_layers.py)::

    cli/          command line (typer + rich), one module per command
    figures, io/  plots; streamed CSV/Parquet privatization and counting
    compare, reproduce, spec   baselines side by side; the paper's tables; spec files
    estimation/   frequencies and means from reports (counts, model, solvers, mean)
    design/       smallest support and joint optimum on Z (radius) and finite domains (finite)
    baselines, composition     k-RR / geometric / discrete Gaussian channels; PLD export
    core/         families registry, mechanisms on Z (Laplace, Gaussian, general kernel)
    channel/      finite channels: construction, exact pairwise accounting, rigorous bounds
    sampling/     exact integer-threshold samplers and their certificates
    core/         accounting and bounds (Theorems 3 and 9; 4, 5, 10, 11) over the kernels
    core/         kernels: the declared interface and its implementations

(``core`` appears three times: its modules sit below and above channels and
sampling, which know mechanisms only through the protocol.)
"""

from __future__ import annotations

import importlib

from .errors import InfeasibleError
from .core.mechanisms import SparseGaussian, SparseLaplace
from .design.radius import Design, design, smallest_support  # eager: the function shadows the module name

__version__ = "0.1.0"

# Public names served lazily from their modules, so that importing sparseldp
# stays light and each layer loads only when used.
_LAZY = {  # name -> (module, attribute or None for the module itself)
    "SparseChannel": ("channel", "SparseChannel"),
    "SparseKernel": ("core.kernel_mechanism", "SparseKernel"),
    "estimate_frequencies": ("estimation", "estimate_frequencies"),
    "estimate_mean": ("estimation", "estimate_mean"),
    "MeanEstimate": ("estimation", "MeanEstimate"),
    "FrequencyEstimate": ("estimation", "FrequencyEstimate"),
    "design_finite": ("design.finite", "design_finite"),
    "calibrate": ("design.finite", "calibrate"),
    "to_pld": ("composition", "to_pld"),
    "compose": ("composition", "compose"),
    "bounds": ("core.bounds", None),
    "accounting": ("core.accounting", None),
    "mechanisms": ("core.mechanisms", None),
    "families": ("core.families", None),
    "protocol": ("core.protocol", None),
    "finite_design": ("design.finite", None),
    "sampling": ("sampling", None),
    "estimation": ("estimation", None),
    "baselines": ("baselines", None),
    "channel": ("channel", None),
    "spec": ("spec", None),
    "io": ("io", None),
    "reproduce": ("reproduce", None),
    "figures": ("figures", None),
}

__all__ = [
    "InfeasibleError", "SparseLaplace", "SparseGaussian", "Design", "design", "smallest_support",
    "__version__", *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        module_name, attr = _LAZY[name]
        module = importlib.import_module(f".{module_name}", __name__)
        value = module if attr is None else getattr(module, attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sparseldp' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
