"""The privacy accounting of :class:`~sparseldp.channel.SparseChannel`: a base class holding its
privacy methods (package docstring for the math).

The ordered defect of a pair and its split (Remark 2), ``delta*(eps; H)`` rounded to nearest and
its rigorous upper bounds, the certified ``epsilon`` and the pure epsilon (Theorems 1, 2, 7, 8).
The methods check their arguments and say which way each number errs; the computing is done by
:mod:`~sparseldp.channel.scan` (exact pairwise accounting) and :mod:`~sparseldp.channel.upper`
(rigorous upper bounds, certified epsilon), on the stored arrays of
:mod:`~sparseldp.channel.store`.
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_eps_array, check_int, check_nonnegative, check_positive, check_probability
from ..core.accounting import Defect, delta_profile
from .scan import WorstPair, _pair_split, _pure_epsilon, _worst_pair
from .store import _ChannelStore
from .upper import _delta_star_upper, _epsilon, _fast_pure_upper, _fast_upper
from .validation import _check_H


class _ChannelPrivacy(_ChannelStore):
    """The privacy methods of :class:`~sparseldp.channel.SparseChannel` (its base class; not used alone)."""

    __slots__ = ()  # the stored arrays are the base's slots (sparseldp.channel.store)

    def defect(self, eps, x, x_prime) -> Defect:
        r"""Ordered defect ``Delta_eps(x, x')`` with its split (Theorems 2 and 8, Remark 2).

        ``support_leakage = Q(S(x) \ S(x') | x)`` and
        ``overlap = sum_{S(x) ∩ S(x')} [Q(y|x) - e^eps Q(y|x')]_+``;
        ``total = support_leakage + overlap`` (each capped at 1 against rounding).
        ``eps`` may be an array; the fields then have its shape.  Rounded to
        nearest, not a bound (package docstring).
        """
        e = check_eps_array(eps, "eps")
        i = int(self._rows_of(check_int(x, "x")))
        j = int(self._rows_of(check_int(x_prime, "x_prime"), "x_prime"))
        leak, ov = _pair_split(self, i, j, e.reshape(-1))
        leak = np.minimum(leak, 1.0)  # a sum of probabilities can round to 1.0000000000000002
        total = np.minimum(leak + ov, 1.0)
        shape = e.shape
        return Defect(total.reshape(shape)[()], leak.reshape(shape)[()], ov.reshape(shape)[()])

    def delta_star(self, eps, H=None):
        """``delta*(eps; H)``: the ``sup`` over ordered pairs ``x != x'`` with ``|x - x'| <= H`` (all pairs when ``None``)
        of ``Delta_eps(x, x')`` (Theorems 2 and 8).

        ``eps`` may be an array: the result is the privacy profile with its
        shape.  ``0.0`` when no pair is in range.  Rounded to nearest, so it
        may lie slightly below the exact value (measured within ``3e-16`` on
        600 random channels; the window channels inherit the kernels' accuracy,
        see :mod:`sparseldp.core.accounting`); :meth:`delta_star_upper` is the
        rigorous counterpart.  Cost ``O(P w)`` for ``P`` pairs in range and rows of width
        ``w`` (e.g. ``n H s``), with working memory ``O(n w)``; it stops early
        once the defect reaches 1.
        """
        return self.delta_with_argmax(eps, H, _split=False).delta


    def delta_star_upper(self, eps, H=None):
        """A rigorous upper bound on :meth:`delta_star`: never below the exact value, at most 1.

        0.0 only when no pair is in range.  Per pair, the computed defect is
        raised by a priori bounds on the rounding of the stored probabilities
        (the constructors' ``alpha``, see the package docstring) and of the sum
        (:func:`_pair_upper`); a pair whose log ratios are certainly ``<= eps``
        on the common support is bounded by its support leakage alone.  For the
        extended windows of :meth:`laplace` / :meth:`gaussian`, whose pairs are
        exactly the mechanism on Z, this is that mechanism's
        ``delta_star_upper`` on range ``min(H, b - a)``.  Measured at most
        ``3e-14`` above the exact value on 600 random channels; the excess
        grows with the log ratios (about ``1e-15`` per unit of ``eps`` or of the
        largest log ratio) and with the size of the log weights' common offset
        in :meth:`from_log_weights`.  About two to three times the cost of
        :meth:`delta_star`, except where the ``O(n K)`` bound of
        :meth:`delta_star_upper_fast` is provably no looser than the full scan
        (it is 0, or at most a lower bound on the scan's result computed from a
        few rows): then that bound is returned.
        """
        e = check_eps_array(eps, "eps")
        H = _check_H(H)
        z = self._z_kernel(H)
        if z is not None:
            kernel, Hz = z
            if Hz < 1:
                return np.zeros(e.shape)[()]
            return np.asarray(delta_profile(kernel, e, Hz, "up")[0], dtype=float)[()]
        best = _delta_star_upper(self, e.reshape(-1), H)
        return best.reshape(e.shape)[()]

    def delta_star_upper_fast(self, eps, H=None):
        r"""A rigorous upper bound on :meth:`delta_star` in ``O(n_inputs K)`` per ``eps``, for channels
        whose rows share one support of ``K`` outputs (the full-support baselines); ``1.0`` (the
        trivial bound) for any other channel.

        With no support leakage every pair's defect is ``sum_y Q(y|x) (1 - e^{eps - X(y)})_+``
        (Theorems 2 and 8); bounding each log ratio ``X(y)`` by its largest value over all partners
        in range (a sliding minimum of ``log Q(y|.)`` along the inputs) and the stored
        probabilities and logs by their rounding bounds gives a bound per input, whose maximum is
        returned (derivation at :func:`sparseldp.channel.upper._fast_upper`).  Exactly ``0.0`` when
        ``eps`` is at least the certified pure epsilon (:meth:`pure_epsilon_upper`): the exact
        defect is then 0.  Never below the exact value; within rounding of :meth:`delta_star` when
        one partner attains every output's largest ratio (randomized response, Square Wave, the
        Piecewise and Hybrid Mechanisms on a range that separates two bands), otherwise possibly
        far above it -- :meth:`delta_star_upper` is the tight bound.
        """
        e = check_eps_array(eps, "eps")
        H = _check_H(H)
        flat = e.reshape(-1)
        got = _fast_upper(self, flat, H)
        if got is None:
            got = np.ones(flat.size)
        return got.reshape(e.shape)[()]

    def pure_epsilon_upper(self, H=None) -> float:
        """A rigorous upper bound on the exact pure epsilon on range ``H`` (Theorems 1 and 7).

        :meth:`pure_epsilon` is computed from the stored logarithms (rounded
        to nearest); this bound adds their a priori rounding bounds, so that
        ``delta_star_upper(eps, H) == 0.0`` for every ``eps`` at or above it
        (pure ``eps``-LDP is certified).  A constructor that proves its exact
        pure epsilon (randomized response, Square Wave, the Piecewise
        Mechanism: every column takes two values in a ratio of exactly
        ``e^eps``) records it, and the bound is then at most that value.
        ``inf`` when some pair in range has different supports; 0.0 with no
        pair in range.  Costs ``O(n_inputs K)`` when the rows share one
        support, else a scan of the pairs (as :meth:`epsilon` with ``delta = 0``).
        """
        H = _check_H(H)
        got = _fast_pure_upper(self, H)
        if got is not None:
            return got
        if math.isinf(_pure_epsilon(self, H)):
            return math.inf
        return _epsilon(self, 0.0, H, 1e-12)

    def delta_with_argmax(self, eps, H=None, *, _split=True) -> WorstPair:
        """:meth:`delta_star` together with a maximizing ordered pair and its split (a :class:`WorstPair`)."""
        e = check_eps_array(eps, "eps")
        H = _check_H(H)
        return _worst_pair(self, e, H, _split)

    def epsilon(self, delta, H=None, *, rtol: float = 1e-12) -> float:
        """Smallest ``eps >= 0`` (rounded up, relative ``rtol``) whose rigorous upper bound
        :meth:`delta_star_upper` ``(eps, H) <= delta``: a certificate, the exact defect there is
        at most ``delta``.

        ``delta >= 1`` always holds (returns 0.0).  ``delta(eps)`` is
        continuous and nonincreasing, and convex in ``u = e^eps`` (each term
        ``[p - u q]_+`` is), so the root is bracketed by tangent steps from
        below and chord steps from above (safeguarded by bisection); only pairs
        still above ``delta`` are re-evaluated.  The search evaluates a per-pair
        upper bound that is nonincreasing in ``eps``; the upper end of the final
        bracket is returned, and it has been checked.

        Raises :class:`sparseldp.InfeasibleError` when the support leakage of
        some pair in range exceeds ``delta`` (no ``eps`` can help), including
        ``delta = 0`` with any support mismatch, or is within rounding of
        ``delta`` (then no ``eps`` can be certified; the message says which).
        """
        delta = check_probability(delta, "delta")
        H = _check_H(H)
        rtol = check_positive(rtol, "rtol")
        return _epsilon(self, delta, H, rtol)

    def is_ldp(self, eps, delta, H=None) -> bool:
        """Whether the channel is certifiably ``(eps, delta)``-LDP on range ``H`` (Theorems 2 and 8).

        ``True`` iff :meth:`delta_star_upper` ``<= delta`` (never ``True`` when
        the exact defect exceeds ``delta``); ``delta >= 1`` always holds.
        """
        delta = check_probability(delta, "delta")
        check_nonnegative(eps, "eps")
        if delta >= 1.0:
            return True
        return bool(self.delta_star_upper(eps, H) <= delta)

    def pure_epsilon(self, H=None) -> float:
        """Smallest ``eps`` with pure ``eps``-LDP on range ``H`` (Theorems 1 and 7).

        ``inf`` when some pair in range has different supports (pure LDP forces
        input-*independent* supports, docs/paper.md, "Pure LDP needs a common support"); otherwise the largest
        ``log Q(y|x) - log Q(y|x')`` over pairs in range and common support
        points, from the exact stored logarithms.  ``0.0`` with no pair in range.
        """
        H = _check_H(H)
        return _pure_epsilon(self, H)

    def is_pure_ldp(self, eps, H=None, *, rtol: float = 0.0) -> bool:
        """Whether pure ``eps``-LDP on range ``H`` is certified: :meth:`pure_epsilon_upper` ``<= eps (1 + rtol)``.

        With the default ``rtol = 0`` a certificate, as :meth:`is_ldp` (never ``True`` when the exact
        pure epsilon exceeds ``eps``).  A positive ``rtol`` is a tolerance the caller opts into, not a
        certificate (before 2026-11-28 the default was ``1e-12`` on the nearest value, and a channel
        whose exact pure epsilon was ``1 + 4e-13`` passed at ``eps = 1``)."""
        eps = check_nonnegative(eps, "eps", allow_inf=True)
        rtol = check_nonnegative(rtol, "rtol")
        return bool(self.pure_epsilon_upper(H) <= eps * (1.0 + rtol))
