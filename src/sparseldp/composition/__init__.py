r"""Composition of repeated reports: the ``(eps, delta)`` profile of ``k`` reports of one person.

Two routes, one interface (``delta(eps)``, ``epsilon(delta)``):

* :func:`compose` -- exact for :class:`~sparseldp.SparseLaplace` and
  :class:`~sparseldp.SparseGaussian`: their finite privacy losses lie on a
  lattice, so ``k`` reports compose by a lattice convolution with no
  discretization, plus the infinity mass ``1 - (1 - p_inf)^k`` of support
  leakage (:mod:`.exact`, numerics in :mod:`._lattice`).  Other randomizers
  fall back to dp-accounting, and the result says so (``exact``).
* :func:`to_pld` -- one report's PLD as a dp-accounting object
  (pessimistic), to compose with other mechanisms (:mod:`.pld`).
* :func:`k_reports` -- the guarantee of ``k`` reports as the CLI states it:
  basic composition beside the exact one, each labelled (:mod:`.guarantee`);
  :func:`spec_route` / :func:`spec_k_reports` -- the same for a mechanism
  spec (which route its reports take, and why not the lattice).

>>> from sparseldp import SparseGaussian
>>> c = compose(SparseGaussian(sigma=2.0, s=21), 10, H=2)
>>> c.exact, c.h
(True, 2)
"""

from __future__ import annotations

from .exact import Composition, LatticeComposition, PLDComposition, compose
from .guarantee import KReports, SpecRoute, k_reports, spec_k_reports, spec_route
from .pld import log_pmf_pair, to_pld

__all__ = ["compose", "Composition", "LatticeComposition", "PLDComposition", "to_pld", "log_pmf_pair", "k_reports",
           "KReports", "SpecRoute", "spec_route", "spec_k_reports"]
