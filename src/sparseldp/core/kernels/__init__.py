r"""Radius kernels: the declared interface, the two log-concave families and a general kernel.

A kernel is a symmetric nonnegative weight ``w(k) = w(|k|)`` with ``w(0) > 0``,
restricted to the window ``|k| <= t`` (Definition 1).  :class:`Kernel` is the
abstract interface (its docstring lists the assumptions and the methods the
package calls); :class:`LogConcaveKernel` adds the closed-form, prefix-structured
accounting that log-concavity allows:

* discrete Laplace (Definition 6): ``log w(k) = -lam |k|``;
* Gaussian (Definition 13): ``log w(k) = -k^2 / (2 sigma^2)``;

and :class:`GeneralKernel` takes any weights ``w(0..t)`` and is accounted by
the generic path of :mod:`sparseldp.core.accounting` (no shape assumed).

Everything the accountant needs reduces to sums of ``w`` over integer ranges,
served here in log space so that nothing underflows.  Each kernel gives the
numerator of the defect (Theorems 3 and 9) as a short list of nonnegative log
terms, in one of three modes:

* ``"near"``: ordinary round-to-nearest evaluation (the value ``delta`` reports);
* ``"up"`` / ``"dn"``: a rigorous upper / lower bound on the exact term.

Modules (imports point down this list; none imports outside numpy and the
standard library):

* :mod:`.rounding` - directed rounding, log-space helpers and bounded sums:
  which way every number errs, and by how much; and their scalar twins on
  Python floats (the same values, for one ``(eps, h)`` at function-call cost);
* :mod:`.base` - :class:`Kernel` and :class:`LogConcaveKernel`;
* :mod:`.laplace` - :class:`LaplaceKernel` (geometric closed forms; moment sums in :mod:`.laplace_moments`; the
  excess set decided exactly);
* :mod:`.gaussian` - :class:`GaussianKernel` (one log suffix-sum array with
  a priori error bounds, built in :mod:`.gaussian_suffix`), ``GAUSSIAN_MAX_S``;
* :mod:`.general` - :class:`GeneralKernel`, its weight validation and the
  generic path's normalizer.
"""

from __future__ import annotations

from .base import Kernel, LogConcaveKernel
from .gaussian import GAUSSIAN_MAX_S, GaussianKernel, check_gaussian_s
from .general import MAX_KERNEL_S, GeneralKernel, check_weights, normalizer_bound
from .laplace import LaplaceKernel
from .rounding import (
    TINY,
    U,
    _exp_dn,  # private, imported by sparseldp.core.accounting
    _exp_up,  # private, imported by sparseldp.core.accounting
    bounded_sum,
    dn,
    exp_dn,
    exp_up,
    log_dn,
    log_up,
    logsubexp,
    sum_factor,
    up,
)

__all__ = [
    "Kernel",
    "LogConcaveKernel",
    "LaplaceKernel",
    "GaussianKernel",
    "GeneralKernel",
    "check_weights",
    "MAX_KERNEL_S",
    "bounded_sum",
    "normalizer_bound",
    "sum_factor",
    "logsubexp",
    "check_gaussian_s",
    "GAUSSIAN_MAX_S",
    "U",
    "TINY",
    "up",
    "dn",
    "exp_up",
    "exp_dn",
    "log_up",
    "log_dn",
]
