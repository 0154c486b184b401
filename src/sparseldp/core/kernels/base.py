"""The declared kernel interface: :class:`Kernel` and the log-concave refinement :class:`LogConcaveKernel`."""

from __future__ import annotations

import abc

import numpy as np

from .rounding import _NEG_INF, _logaddexp, _quiet


class Kernel(abc.ABC):
    r"""The declared interface of a radius kernel ``w`` on the window ``|k| <= t``.

    A mechanism ``M(y | x) = w(|x - y|) / C_t * 1{|x - y| <= t}`` (Definition 1
    allows any nonnegative weight) is described completely by its kernel.
    Every algorithm of the package relies on these assumptions, which each
    subclass must guarantee:

    * **symmetric**: ``w(k) = w(-k)``, so a kernel is given by ``w(0..t)``
      and both orders of a pair give the same defect (docs/paper.md,
      "delta* and ordered pairs");
    * **nonnegative and finite** weights, with ``w(0) > 0`` (every input can
      report itself, so every normalizer is positive);
    * a **finite window** ``|k| <= t`` (``t = (s - 1) / 2`` is the attribute
      ``t``, an ``int >= 0``): ``w(k) = 0`` beyond it.

    ``log_concave`` says whether ``w`` (zero beyond its support) is
    log-concave.  The closed-form accountant (:class:`LogConcaveKernel`,
    Theorems 3 and 9) relies on it: then the overlap loss
    ``L_h(k) = log w(k) - log w(k - h)`` is nonincreasing in ``k``, so the
    excess set ``{k : L_h(k) > eps}`` is a *prefix* of the overlap and
    ``delta_h`` is two range sums (Proposition 2 for the Gaussian).  Kernels
    that do not derive from :class:`LogConcaveKernel` (e.g.
    :class:`GeneralKernel`, whatever its ``log_concave``) are accounted by the
    generic path of :mod:`sparseldp.core.accounting`, which sums
    ``[P(y|0) - e^eps P(y|h)]_+`` over the window and assumes nothing about
    the shape.

    Abstract methods (exactly what the rest of the package calls):

    * :meth:`log_w` -- ``log w(k)`` (mechanism ``logpmf``, channels);
    * :meth:`log_normalizer_bound` -- ``log C_t`` nearest / rigorous bounds
      (accounting, channels, design);
    * :meth:`log_range` -- ``log sum_{k=a}^{b} w(k)`` (clipped channel rows);
    * :meth:`moment_sums` -- ``(sum j w(j), sum j^2 w(j))`` (``r1``, ``r2``);
    * :meth:`decimal_weights` -- exact ``w(0..t)`` as Decimals (sampling);
    * :meth:`weights` -- ``w(0..t)`` as doubles, nearest or rigorous bounds
      (the generic accountant).

    ``log_normalizer`` (a property) is derived from :meth:`log_normalizer_bound`.
    """

    t: int
    #: Whether ``w`` is log-concave (see the class docstring); ``False`` unless verified.
    log_concave: bool = False

    @abc.abstractmethod
    def log_w(self, k):
        """``log w(|k|)`` for integer arrays ``|k| <= t`` (``-inf`` where ``w = 0``), rounded to nearest."""

    @abc.abstractmethod
    def log_normalizer_bound(self, mode: str) -> float:
        """``log C_t``, ``C_t = sum_{|k| <= t} w(k)``: nearest (``"near"``) or a rigorous upper
        (``"up"``) / lower (``"dn"``) bound, on the scale of :meth:`log_w` and :meth:`weights`."""

    @abc.abstractmethod
    def log_range(self, a, b, mode="near"):
        """``log sum_{k=a}^{b} w(k)`` for integer arrays ``-t <= a``, ``b <= t`` (``-inf`` if ``a > b``);
        ``mode="up"``/``"dn"``: a rigorous upper/lower bound."""

    @abc.abstractmethod
    def moment_sums(self):
        """``(sum_{j=1}^t j w(j), sum_{j=1}^t j^2 w(j))`` on the scale of :attr:`log_normalizer`
        (Propositions 1 and 3: ``R1 = 2 S1 / C_t``, ``R2 = 2 S2 / C_t``)."""

    @abc.abstractmethod
    def decimal_weights(self, ctx) -> list:
        """``w(0..t)`` as :class:`decimal.Decimal` s in context ``ctx`` (any common positive scale;
        used by :mod:`sparseldp.sampling`, which normalizes them exactly)."""

    @abc.abstractmethod
    def weights(self, mode: str = "near") -> np.ndarray:
        """``w(0..t) / c`` as doubles for one positive constant ``c`` fixed by the kernel (the scale of
        :meth:`log_w`): rounded to nearest, or elementwise rigorous lower (``"dn"``) / upper (``"up"``)
        bounds.  Read-only; O(t) memory."""

    @property
    def log_normalizer(self) -> float:
        """``log C_t = log sum_{|k| <= t} w(k)`` (Definitions 6 and 13)."""
        return self.log_normalizer_bound("near")


class LogConcaveKernel(Kernel):
    """A log-concave kernel with closed-form (prefix-structured) accounting.

    Subclasses must be log-concave (class docstring of :class:`Kernel`): the
    accountant then asks :meth:`numerator_terms` for the defect numerator as
    a few range sums over the prefix excess set.  Subclasses give
    :meth:`log_w`, ``_range_nonneg(a, b, mode)`` (``log sum_{i=a}^{b} w(i)``
    for ``0 <= a``), :meth:`numerator_terms`, :meth:`moment_sums`,
    :meth:`decimal_weights` and :meth:`weights`.
    """

    log_concave = True

    @abc.abstractmethod
    def _range_nonneg(self, a, b, mode):
        """``log sum_{i=a}^{b} w(i)`` for integer arrays ``0 <= a``, ``b <= t``."""

    @abc.abstractmethod
    def numerator_terms(self, eps, h, mode):
        """The defect numerator ``C_t delta_h(eps)`` as a list of ``(log_value, nonempty, part)``,
        ``part`` in ``{"leak", "overlap"}``; ``0 <= h <= 2t`` (Theorems 3 and 9)."""

    @_quiet
    def log_range(self, a, b, mode="near"):
        """``log sum_{k=a}^{b} w(k)`` for ``-t <= a``, ``b <= t`` (any sign), by symmetry.

        ``mode="up"``/``"dn"``: a rigorous upper/lower bound on the exact value.
        """
        return self._range(a, b, mode)

    def _range(self, a, b, mode):
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        a, b = np.broadcast_arrays(a, b)
        # negative part [a, min(b, -1)] mirrored to [max(1, -b), -a]
        neg = self._range_nonneg(np.maximum(1, -b), -a, mode)
        pos = self._range_nonneg(np.maximum(0, a), b, mode)
        neg = np.where(a <= -1, neg, _NEG_INF)
        pos = np.where(b >= 0, pos, _NEG_INF)
        return _logaddexp(neg, pos, mode)

    @_quiet
    def log_range_nonneg(self, a, b, mode="near"):
        """``log sum_{i=a}^{b} w(i)`` for integer arrays ``0 <= a``, ``b <= t``; ``-inf`` if ``a > b``.

        ``mode="up"``/``"dn"``: a rigorous upper/lower bound on the exact value.
        """
        return self._range_nonneg(a, b, mode)

    def log_normalizer_bound(self, mode: str) -> float:
        """``log C_t`` rounded to nearest, or a rigorous upper (``"up"``) / lower (``"dn"``) bound."""
        key = "_logc_" + mode
        got = self.__dict__.get(key)
        if got is None:
            with np.errstate(all="ignore"):
                got = float(_logaddexp(self._range_nonneg(0, self.t, mode), self._range_nonneg(1, self.t, mode), mode))
            self.__dict__[key] = got
        return got
