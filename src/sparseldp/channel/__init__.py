r"""General sparse channels on finite alphabets (Definitions 1 and 9, Theorems 1, 2, 7, 8).

A channel is a row-stochastic matrix ``Q(y | x)`` over finite input and output
alphabets, given through nonnegative weights

.. math::

    Q(y \mid x) = \frac{w(x, y)\, 1\{y \in S(x)\}}{\sum_{y' \in S(x)} w(x, y')},

where the support ``S(x)`` is the set of outputs with ``w(x, y) > 0`` (the
sparsity pattern of the stored matrix).  The sparse discrete-Laplace family
(``w = e^{-lam d(x,y)}``) and the sparse Gaussian family
(``w = e^{-d^2/(2 sigma^2)}``) are the two cases the paper studies; any
weights are accepted here.

Privacy (Section "Preliminaries" and the definition of the privacy range):
``Q`` is ``(eps, delta)``-LDP on range ``H`` iff for every *ordered* pair of
inputs with ``0 < |x - x'| <= H`` the hockey-stick defect

.. math::

    \Delta_\varepsilon(x, x') = \sum_y [Q(y|x) - e^\varepsilon Q(y|x')]_+
      = \underbrace{Q(S(x) \setminus S(x') \mid x)}_{\text{support leakage}}
      + \underbrace{\sum_{y \in S(x) \cap S(x')} [Q(y|x) - e^\varepsilon Q(y|x')]_+}_{\text{overlap excess}}

is at most ``delta`` (Theorem 2 for the Laplace family, Theorem 8 for the
Gaussian family, Remark 2 for the split).  Pure ``eps``-LDP (Theorems 1 and 7)
holds iff every pair in range has the *same* support and the log ratio on it is
at most ``eps`` (docs/paper.md, "Pure LDP needs a common support": pure LDP forces input-*independent* supports).

Results are cited by the compiled paper's numbers (README, "Citing the paper's
results"): Theorems 1/7 pure LDP, Theorems 2/8 the general defect.

Computation.  ``delta`` visits ordered pairs by increasing rank distance in the
sorted input order and stops as soon as no pair of that rank distance is
within ``H`` (separations only grow with rank distance), or once the defect
reaches 1.  Each pair costs ``O(|S(x)|)``: the positive part is only nonzero on
``S(x)``, so row ``x'`` is only looked up at the points of ``S(x)``.  Banded
channels (every row's support inside a short run of columns, as for the window
mechanisms) are held as an ``n x W`` band and handled with strided slices;
other channels with a sorted-key lookup.  Nothing of size
``n_inputs x n_outputs`` is ever built unless the channel itself is dense.

Numbers: probabilities are stored together with their logarithms
(``log_matrix``) so that supports are structural (a probability that
underflows to ``0.0`` is still in the support).  :meth:`SparseChannel.delta`
is a sum of nonnegative terms rounded to nearest (not a bound: it may lie a few
``1e-16`` on either side of the exact value); for ``eps > 700`` the terms are
evaluated in log space as ``Q(y|x) (1 - e^{eps - L})``.

Which way the numbers err.  "Exact" means the channel defined by its
construction: the given weights normalized exactly (or the exact ``exp`` of
given log weights, normalized), and for :meth:`SparseChannel.laplace` /
:meth:`SparseChannel.gaussian` the exact kernel.  Every constructor records a
per-row bound ``alpha_x`` such that each stored probability and log
probability of row ``x`` is within relative (resp. absolute) error
``alpha_x + beta |log Q~(y|x)|`` (``beta = 8u``, ``u = 2^-53``) of the exact
one (derivations at :func:`_log_normalize_bounds` and the constructors).
:meth:`SparseChannel.delta_star_upper` turns these into a rigorous upper bound
per pair (:func:`_pair_upper`), and every certified answer (``epsilon``,
``is_ldp``, :mod:`sparseldp.design.finite`) compares that bound with its
target.

Layout (imports point down this list, never up; nothing here imports the
mechanisms, families or design layers):

* :mod:`~sparseldp.channel.core`: the :class:`SparseChannel` class;
* :mod:`~sparseldp.channel.privacy`: its privacy methods (defects, ``delta_star``, ``epsilon``, pure LDP);
* :mod:`~sparseldp.channel.upper`: rigorous upper bounds, the certified ``epsilon`` search;
* :mod:`~sparseldp.channel.scan`: exact pairwise accounting, :class:`WorstPair`, pure epsilon;
* :mod:`~sparseldp.channel.store`: stored arrays, label lookup, pair enumeration, backend choice;
* :mod:`~sparseldp.channel.band` / :mod:`~sparseldp.channel.flat`: the two pair backends;
* :mod:`~sparseldp.channel.terms`: the hockey-stick terms (linear and log-space paths);
* :mod:`~sparseldp.channel.construct`: CSR building, log normalization, rounding bounds;
* :mod:`~sparseldp.channel.validation`: ``check_domain``, ``check_window``, ``check_entries``.
"""

from __future__ import annotations

from .band import _Band  # noqa: F401  (tests check which backend a channel uses)
from .core import SparseChannel, _rebuild  # noqa: F401  (_rebuild: pickles refer to sparseldp.channel._rebuild)
from .scan import WorstPair
from .validation import MAX_ENTRIES, check_domain, check_entries, check_window

__all__ = ["SparseChannel", "WorstPair", "check_domain", "check_window", "check_entries", "MAX_ENTRIES"]
