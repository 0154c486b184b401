"""The declared kernel interface: :class:`Kernel` and the log-concave refinement :class:`LogConcaveKernel`."""

from __future__ import annotations

import abc
import math

import numpy as np

from .rounding import _INF, _NEG_INF, _logaddexp, _nextafter, _quiet, _s_exp, _s_exp_dn, _s_exp_up, _s_logaddexp

#: Separations whose scalar-twin constants a kernel keeps per mode (:meth:`LogConcaveKernel._memo`).
MEMO_SEPARATIONS = 32
#: Per-``K`` entries kept per separation and mode (about 200 bytes each with the dictionary's own:
#: at most about 10 MB per kernel over every separation and mode, typically a few kB).
MEMO_INDICES = 512

_FLIP = {"near": "near", "up": "dn", "dn": "up"}


def _lin(logv: float, log_c: float, mode: str) -> float:
    """One numerator term ``e^{logv - log_c}`` as the accountant's array path forms it: nearest, or the
    exponent and the exponential bounded outward (``2^-1072`` underflow slack included)."""
    if mode == "near":
        return _s_exp(logv - log_c)
    if mode == "up":
        return _s_exp_up(_nextafter(logv - log_c, _INF))
    return _s_exp_dn(_nextafter(logv - log_c, _NEG_INF))


def _lin_add(acc: float, logv: float, log_c: float, mode: str) -> float:
    """``acc + e^{logv - log_c}`` as the accountant's array path forms and adds one numerator term:
    nearest, or (``"up"`` / ``"dn"``) the exponent and the exponential bounded outward (``2^-1072``
    underflow slack included) and the addition of a positive term rounded outward."""
    if mode == "near":
        return acc + _s_exp(logv - log_c)
    if mode == "up":
        v = _s_exp_up(_nextafter(logv - log_c, _INF))
        return _nextafter(acc + v, _INF) if v > 0 else acc + v
    v = _s_exp_dn(_nextafter(logv - log_c, _NEG_INF))
    return _nextafter(acc + v, _NEG_INF) if v > 0 else acc + v


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

    Caches: a kernel is immutable once built (its parameters are never
    reassigned), so what it derives from them is kept, in dictionaries that
    :meth:`__init__` creates empty -- the one place the kernel classes make
    their caches; a subclass's constructor calls ``super().__init__()``.
    ``_cache`` holds the values computed at most once, by name
    (``"logc_<mode>"`` for :meth:`log_normalizer_bound`, a subclass's lazily
    built arrays).  The caches take no part in equality (a kernel equals
    itself only) and are pickled with the kernel: an unpickled kernel keeps
    what was computed.  The accountant (:mod:`sparseldp.core.accounting`)
    keeps its tables there too (``"epsilon_setup"``, ``"generic_tables"``).
    """

    t: int
    #: Whether ``w`` is log-concave (see the class docstring); ``False`` unless verified.
    log_concave: bool = False

    def __init__(self) -> None:
        self._cache = {}  # values computed at most once, by name (class docstring, "Caches")

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
    :meth:`decimal_weights` and :meth:`weights`; and, for one ``(eps, h)`` at
    function-call cost, their *scalar twins* on Python floats, which must
    return exactly the array methods' values (the same operations, numpy's
    elementary functions; :mod:`.rounding`, "scalar twins"):
    ``_range_nonneg_s``, ``_leak_terms_s`` and :meth:`overlap_s` (the
    numerator's leakage and overlap terms, normalized and summed as the
    accountant's array path does), plus :meth:`loss_s`,
    :meth:`last_excess_s`, :meth:`segments` and ``_half_fast`` for the root
    search of ``epsilon``.

    Besides :class:`Kernel`'s ``_cache``, :meth:`__init__` creates the scalar
    twins' tables: ``_smemo`` (:meth:`_memo`) and ``_sleak`` (:meth:`leak_s`),
    ``{mode: {h: ...}}``, each bounded by :data:`MEMO_SEPARATIONS`.
    """

    log_concave = True

    def __init__(self) -> None:
        super().__init__()
        # the scalar twins' eps-free constants: mode -> {h: ...} (_memo, leak_s)
        self._smemo = {"near": {}, "up": {}, "dn": {}}
        self._sleak = {"near": {}, "up": {}, "dn": {}}

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

    # -- scalar twins: one (eps, h) at function-call cost --------------------------------
    # The same formulas on Python floats (:mod:`.rounding`, "scalar twins"), used by the
    # accountant's scalar fast path; they agree with the array methods to an ulp of an
    # elementary function, and their bounds are as rigorous.

    @abc.abstractmethod
    def _range_nonneg_s(self, a: int, b: int, mode: str) -> float:
        """Scalar ``_range_nonneg``: ``log sum_{i=a}^{b} w(i)`` for integers ``0 <= a``, ``b <= t``."""

    @abc.abstractmethod
    def _leak_terms_s(self, h: int, mode: str) -> list:
        """The support-leakage terms of :meth:`numerator_terms` for one ``1 <= h <= 2t``: the *nonempty* ones,
        in the same order, as log values (they do not depend on ``eps``; :meth:`leak_s` sums them once)."""

    @abc.abstractmethod
    def overlap_s(self, eps: float, h: int, mode: str) -> float:
        """The overlap excess ``delta_h(eps) - leak`` of one ``eps`` (float ``>= 0``, may be ``inf``) and
        ``1 <= h <= 2t``: the scalar twin of the overlap part of the accountant's array path.

        Each overlap term of :meth:`numerator_terms` becomes ``e^{log v - log C}`` (``C`` bounded the
        other way for ``"up"`` / ``"dn"``, the exponent and the exponential rounded outward, with the
        ``2^-1072`` underflow slack) and the terms are summed in order, each addition of a positive
        term rounded outward: the operations of ``_prefix_parts`` in
        :mod:`sparseldp.core.accounting`, on one float.  The pieces that do not depend on ``eps``
        (per separation, and per last excess index ``K``) are computed once and kept
        (:meth:`_memo`): the values are the ones the operations give, so the result is the array
        path's, bit for bit.
        """

    def _memo(self, mode: str) -> dict:
        """The scalar twins' per-separation constants in one mode: ``{h: constants}`` (eps-free, computed once).

        At most :data:`MEMO_SEPARATIONS` separations are kept (the table is emptied beyond), and each
        separation keeps at most :data:`MEMO_INDICES` per-``K`` entries: memory stays bounded
        whatever the calls.
        """
        memo = self._smemo[mode]
        if len(memo) >= MEMO_SEPARATIONS:
            memo.clear()
        return memo

    def leak_s(self, h: int, mode: str) -> float:
        """The support leakage ``M(S(0) \\ S(h) | 0)`` for ``1 <= h <= 2t`` as the array path computes it
        (nearest, or a rigorous bound): its terms (:meth:`_leak_terms_s`) turned into ``e^{log v - log C}``
        and summed like the overlap terms of :meth:`overlap_s`.  Independent of ``eps``: kept per ``h``."""
        memo = self._sleak[mode]
        got = memo.get(h)
        if got is None:
            if len(memo) >= MEMO_SEPARATIONS:
                memo.clear()
            log_c = self.log_normalizer_bound(_FLIP[mode])
            got = 0.0
            for logv in self._leak_terms_s(h, mode):
                got = _lin_add(got, logv, log_c, mode)
            memo[h] = got
        return got

    @abc.abstractmethod
    def loss_s(self, h: int, k: int) -> float:
        """The overlap loss ``L_h(k) = log w(k) - log w(k - h)`` (rounded) for ``h - t <= k <= t``."""

    @abc.abstractmethod
    def segments(self, h: int):
        """``(K, L)``: int64 and float arrays, ``K`` ascending, for ``1 <= h <= 2t``.

        As ``eps`` falls from the largest overlap loss to 0, the excess set ``[h - t, K(eps)]`` grows
        through the values ``K``: the last indices of the runs of equal loss ``L_h(k) > 0`` on
        ``[h - t, t]`` (a run ends where the loss drops), and ``L = L_h(K)`` (rounded).  The excess set
        is ``[h - t, K_j]`` exactly for ``L_{j+1} <= eps < L_j`` (``L_{j+1} = 0`` past the last);
        ``K`` is empty when no overlap loss is positive.  Used by the table root search of
        :func:`sparseldp.core.accounting.epsilon_for_delta`; :meth:`segment_count` is its length,
        in O(1)."""

    @abc.abstractmethod
    def segment_count(self, h: int) -> int:
        """The length of :meth:`segments` ``(h)``, without building it."""

    @abc.abstractmethod
    def last_excess_s(self, eps: float, h: int) -> int:
        """Nearest-value ``K``: the last ``k`` in ``[h - t, t]`` with ``L_h(k) > eps`` (``h - t - 1`` if none),
        ``1 <= h <= 2t``, finite ``eps >= 0``; the excess set is ``[h - t, K]`` (a prefix, by log-concavity)."""

    def _range_s(self, a: int, b: int, mode: str) -> float:
        """Scalar :meth:`_range`: ``log sum_{k=a}^{b} w(k)`` for integers ``-t <= a``, ``b <= t``."""
        neg = self._range_nonneg_s(max(1, -b), -a, mode) if a <= -1 else _NEG_INF
        pos = self._range_nonneg_s(max(0, a), b, mode) if b >= 0 else _NEG_INF
        # logaddexp with an empty side returns the other side exactly
        if neg == _NEG_INF:
            return pos
        if pos == _NEG_INF:
            return neg
        return _s_logaddexp(neg, pos, mode)

    # -- for searches: nearest values with the C library's functions -----------------------
    @abc.abstractmethod
    def _half_fast(self, i: int, j: int) -> float:
        """``log sum_{k=i}^{j} w(k)`` for integers ``0 <= i <= j <= t``, with the math module's functions.

        Nearest values like ``"near"`` but not bit for bit (no numpy call: a quarter of the cost); for
        the root search of :func:`sparseldp.core.accounting.epsilon_for_delta`, whose answer is then
        certified with the rigorous twins."""

    def _range_fast(self, a: int, b: int) -> float:
        """``log sum_{k=a}^{b} w(k)`` for integers ``-t <= a``, ``b <= t`` (as :meth:`_half_fast`)."""
        t = self.t
        neg = pos = _NEG_INF
        if a <= -1:
            i, j = max(1, -b), min(-a, t)
            if i <= j:
                neg = self._half_fast(i, j)
        if b >= 0:
            i, j = max(0, a), min(b, t)
            if i <= j:
                pos = self._half_fast(i, j)
        if neg == _NEG_INF:
            return pos
        if pos == _NEG_INF:
            return neg
        m, n = (neg, pos) if neg >= pos else (pos, neg)
        return m + math.log1p(math.exp(n - m))

    def log_normalizer_bound(self, mode: str) -> float:
        """``log C_t`` rounded to nearest, or a rigorous upper (``"up"``) / lower (``"dn"``) bound."""
        key = "logc_" + mode
        got = self._cache.get(key)
        if got is None:
            # C_t = w(0) + 2 sum_{i>=1} w(i): the two one-sided sums, by the scalar twins (the same value
            # as the array methods give, at function-call cost: kernels are built in the design searches)
            got = _s_logaddexp(self._range_nonneg_s(0, self.t, mode), self._range_nonneg_s(1, self.t, mode), mode)
            self._cache[key] = got
        return got
