r"""k reports of one person: the composed ``(eps, delta)`` profile, exactly for the two families on Z.

A person who reports the same value ``k`` times (fresh noise each time)
releases the product channel ``M^{(x)k}``; for inputs ``x, x'`` its defect is
the hockey-stick divergence of the ``k``-fold products, i.e. of the ``k``-fold
composition of one report's privacy loss distribution (PLD):

.. math::

    \delta_k(\varepsilon) = 1 - (1 - p_\infty)^k
        + \sum_{L > \varepsilon} P^{*k}(L)\,(1 - e^{\varepsilon - L}),

``p_inf = M(S(x) \ S(x') | x)`` the support leakage of Remark 2 (loss
``+inf``) and ``P`` the law of the finite loss ``L(y) = log M(y|x) - log
M(y|x')``, ``y in S(x) & S(x')``, under ``M(.|x)``; ``k = 1`` is the ordered
defect of Definition 2 (Theorems 3 and 9 on Z).

**The lattice (exact route).**  For the pair ``(0, h)`` on Z (every pair at
separation ``h`` has the same PLD by translation, both orders the same by
reflection, docs/paper.md, "delta* and ordered pairs") both normalizers are
``C_t``, so the finite loss is ``log w(y) - log w(y - h)``:

* discrete Laplace (Definition 6): ``lam (|y - h| - |y|) = lam (h - 2 clip(y, 0, h))``,
  multiples of ``lam`` of the parity of ``h`` (lattice step ``2 lam``);
* Gaussian (Definition 13): ``(h^2 - 2 y h) / (2 sigma^2)``, linear in ``y``
  (lattice step ``h / sigma^2``, one point per output).

So the ``k``-fold loss lies on the same lattice and composing is a
convolution of integer-indexed pmfs, done in :mod:`._lattice` by FFT on an
exponentially tilted pmf (no discretization; rounding only, with an a
posteriori error bound per ``eps``, see that module).  Probabilities come from
the mechanism's ``logpmf`` and ``support`` (the local randomizer protocol);
only the lattice coordinates use the family's closed form.

**The range H.**  For a log-concave kernel (both families) the worst pair at
separation at most ``H`` is ``h = min(H, 2t + 1)``, for every ``k`` and
``eps``: ``delta_k`` is nondecreasing in ``h``.  Proof: log-concavity of ``w``
(zero outside the window) makes ``M(y|h) / M(y|0) = w(y - h) / w(y)``
nondecreasing in ``y`` (its log is minus a sum of ``h`` consecutive
increments of ``log w``, which decrease), so for every level ``alpha`` the
Neyman-Pearson test of ``M(.|0)`` against ``M(.|h)`` can be taken as one
threshold test ``phi_alpha`` (nondecreasing in ``y``, randomized at one point,
fixed by ``alpha`` and ``M(.|0)`` alone) for all ``h`` at once.  Its type II
error ``sum_z M(z|0) (1 - phi_alpha(z + h))`` is nonincreasing in ``h``, so
the trade-off function of ``(M(.|0), M(.|h))`` lies pointwise below that of
``(M(.|0), M(.|h'))`` for ``h' < h``; by Blackwell's theorem for binary
experiments (in the trade-off-function form of Dong, Roth and Su, *Gaussian
differential privacy*, JRSS-B 2022) a randomized map ``K`` sends ``M(.|0)``
to itself and ``M(.|h)`` to ``M(.|h')``; ``K`` applied to each report does the
same for the ``k``-fold products, and the hockey-stick divergence cannot grow
under ``K``.  (For ``k = 1`` this proves the monotonicity of ``delta_h`` in
``h`` listed in docs/paper.md, "Observed, not proven".)  The tests check it
against brute force for every ``h``.

**Other randomizers** (:class:`~sparseldp.SparseKernel`, whose losses lie on
no lattice in general, and finite channels, whose rows have different
normalizers) fall back to dp-accounting (:func:`sparseldp.composition.to_pld`
and ``self_compose``): pessimistic, every ``delta`` an upper bound, with
losses rounded up to ``value_discretization_interval``.  The object returned
says which route was taken (``exact``).

**k different values.**  The same bound covers ``k`` reports of ``k``
different values (e.g. ``k`` columns privatized by the same mechanism) whose
pairs ``x_i, x_i'`` are each at most ``H`` apart: a translation and, when
``x_i' < x_i``, the reflection ``y -> x_i - y``, applied to both rows, turn
column ``i`` into the pair ``(0, h_i)`` without changing any divergence, and
the map ``K_i`` above turns ``(0, H)`` into ``(0, h_i)``; the product of the
``K_i`` garbles the ``k``-fold product at ``h = H`` into the mixed one.  So
``compose(m, k, H=H)`` is the exact worst case over all such neighbouring
``k``-tuples (attained when every column moves by ``min(H, 2t + 1)``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from .._validation import check_eps_array, check_int, check_positive, check_probability
from ..core.kernels import GaussianKernel, LaplaceKernel
from ..core.mechanisms import RadiusMechanism
from ..core.protocol import LocalRandomizer
from ..errors import InfeasibleError
from ._lattice import MAX_POINTS, KFold, LatticeLoss
from .pld import _pld_or_none, to_pld

__all__ = ["compose", "Composition", "LatticeComposition", "PLDComposition"]


class Composition:
    """The ``(eps, delta)`` profile of ``k`` reports of one person (the interface of both routes).

    ``delta(eps)`` broadcasts over ``eps``; ``epsilon(delta)`` is the smallest
    ``eps`` with ``delta(eps) <= delta``.  ``exact`` says whether the numbers
    are exact up to rounding (the lattice route) or pessimistic upper bounds
    (dp-accounting).
    """

    k: int
    exact: bool
    route: str

    def delta(self, eps):  # pragma: no cover - abstract
        raise NotImplementedError

    def epsilon(self, delta) -> float:  # pragma: no cover - abstract
        raise NotImplementedError


class LatticeComposition(Composition):
    """``k`` reports of :class:`~sparseldp.SparseLaplace` / :class:`~sparseldp.SparseGaussian`, composed exactly.

    Made by :func:`compose`.  Attributes: ``mechanism``, ``k``, ``h`` (the
    separation composed: the given ``h``, or ``min(H, 2t + 1)`` for a range,
    module docstring), ``H`` (the range, or ``None``), ``infinity_mass``
    (``1 - (1 - p_inf)^k``: the delta that no ``eps`` removes) and
    ``max_loss`` (the largest finite loss of ``k`` reports, rounded up:
    ``delta(eps)`` is the infinity mass for ``eps >= max_loss``).
    """

    exact = True
    route = "lattice"

    def __init__(self, mechanism, k: int, h: int, H: int | None, kfold: KFold):
        self.mechanism = mechanism
        self.k = k
        self.h = h
        self.H = H
        self._kfold = kfold

    def __repr__(self) -> str:
        what = f"H={self.H}" if self.H is not None else f"h={self.h}"
        return f"LatticeComposition({self.mechanism!r}, k={self.k}, {what})"

    @property
    def infinity_mass(self) -> float:
        return self._kfold.inf_mass

    @property
    def max_loss(self) -> float:
        return self._kfold.max_loss if self._kfold.npts else 0.0

    def delta(self, eps):
        """``delta_k(eps)``, rounded (not a bound): relative error measured about ``1e-13``.

        Broadcasts over ``eps`` (``eps >= 0``); a scalar gives a float.
        :meth:`delta_error` bounds the error for each ``eps``.  Cost: one FFT
        of ``k (n - 1) + 1`` points per tilt (``n <= s - h + 1`` lattice
        points per report; neighbouring ``eps`` share tilts) plus one pass
        over the lattice per ``eps``.
        """
        return self._delta(eps)[0]

    def delta_error(self, eps):
        """A bound on ``|delta(eps) - delta_k(eps)|`` from the floating-point error model of the FFT.

        The model (Higham's FFT bound, the ``k``-th power's rounding, see
        :mod:`sparseldp.composition._lattice`) is standard but not outward
        rounded, so this is an estimate that errs high, not a certificate.
        Broadcasts like :meth:`delta`.
        """
        return self._delta(eps)[1]

    def delta_with_error(self, eps):
        """``(delta(eps), delta_error(eps))`` from one evaluation (each broadcasts like ``eps``)."""
        return self._delta(eps)

    def _delta(self, eps):
        e = check_eps_array(eps, "eps")
        vals, errs = self._kfold.delta(e)
        return vals[()], errs[()]

    def epsilon(self, delta) -> float:
        """Smallest ``eps >= 0`` with ``delta(eps) <= delta`` (to about ``1e-13`` relative, from above).

        ``0.0`` when ``delta(0) <= delta``.  Newton's method on the log of the
        finite part, started at the Chernoff bound's answer (typically one
        tilt and five evaluations, see :meth:`KFold.epsilon
        <sparseldp.composition._lattice.KFold.epsilon>`).  Raises
        :class:`sparseldp.InfeasibleError` when ``delta`` is below the
        infinity mass ``1 - (1 - p_inf)^k`` (no ``eps`` works).  Like
        :meth:`delta`, computed from rounded values (not certified).
        """
        delta = check_probability(delta, "delta")
        kf = self._kfold
        if delta >= 1.0:
            return 0.0
        if delta < kf.inf_mass:
            raise InfeasibleError(
                f"delta = {delta:.6g} is below the infinity mass {kf.inf_mass:.6g} of {self.k} reports "
                f"(1 - (1 - p_inf)^k, p_inf the support leakage of one report at h = {self.h}): no eps works")
        if float(kf.delta(np.zeros(1))[0][0]) <= delta:
            return 0.0
        e = kf.epsilon(delta)
        step = 1e-13 * e
        while e < kf.max_loss and float(kf.delta(np.array([e]))[0][0]) > delta:
            e, step = min(kf.max_loss, e + step), 2.0 * step  # the last rounding of delta = inf_mass + finite
        return e


class PLDComposition(Composition):
    """``k`` reports composed by dp-accounting: every ``delta`` an upper bound (pessimistic discretization).

    Made by :func:`compose` for randomizers without a lattice loss.  Holds one
    composed dp-accounting PLD per separation (``plds``, a tuple of
    ``(h, pld)``; ``pld`` is ``None`` for disjoint supports, delta 1) and
    answers the maximum over them.
    """

    exact = False
    route = "dp-accounting"

    def __init__(self, mechanism, k: int, plds, *, h=None, H=None):
        self.mechanism = mechanism
        self.k = k
        self.plds = tuple(plds)
        self.h = h
        self.H = H

    def __repr__(self) -> str:
        return f"PLDComposition({self.mechanism!r}, k={self.k}, pairs={len(self.plds)})"

    def delta(self, eps):
        """An upper bound on ``delta_k(eps)`` (dp-accounting, ``pessimistic_estimate=True``); broadcasts."""
        e = check_eps_array(eps, "eps")
        out = np.zeros(e.shape)
        for _, pld in self.plds:
            if pld is None:
                return np.ones(e.shape)[()]
            d = np.asarray(pld.get_delta_for_epsilon(e.reshape(-1).tolist()), dtype=float).reshape(e.shape)
            out = np.maximum(out, d)
        return out[()]

    def epsilon(self, delta) -> float:
        """An ``eps`` with ``delta_k(eps) <= delta`` (dp-accounting's, pessimistic); raises when none exists."""
        delta = check_probability(delta, "delta")
        if delta >= 1.0:
            return 0.0
        best = 0.0
        for h, pld in self.plds:
            e = math.inf if pld is None else float(pld.get_epsilon_for_delta(delta))
            if not math.isfinite(e):
                raise InfeasibleError(f"delta = {delta:.6g} is below the infinity mass of {self.k} reports"
                                      + (f" at h = {h}" if h is not None else "") + ": no eps works")
            best = max(best, e)
        return best


def _lattice_loss(mechanism, h: int) -> LatticeLoss:
    """One report's PLD for the pair ``(0, h)`` on its lattice, probabilities through the protocol."""
    kern = mechanism.kernel
    t = mechanism.t
    if h > 2 * t:  # disjoint windows: all the mass is leakage
        return LatticeLoss(np.empty(0), unit=1.0, c0=0, step=1, log_inf=0.0, log_fin=-math.inf)
    s0 = np.asarray(mechanism.support(0), dtype=np.int64)
    common = s0[s0 >= h - t]  # S(0) & S(h) = [h - t, t]
    leak = s0[s0 < h - t]  # S(0) \ S(h): loss +inf
    logp = np.asarray(mechanism.logpmf(common, 0), dtype=float)
    log_inf = float(logsumexp(np.asarray(mechanism.logpmf(leak, 0), dtype=float)))
    p_inf = math.exp(log_inf)
    log_fin = math.log1p(-p_inf) if p_inf < 0.5 else float(logsumexp(logp))  # never 1 - p by subtraction
    if isinstance(kern, LaplaceKernel):
        # lam (h - 2 clip(y, 0, h)): coefficient h - 2j, j = clip(y, 0, h); ascending loss = descending j
        unit, step = kern.lam, 2
        coef = h - 2 * np.clip(common, 0, h)
    else:  # GaussianKernel: h (h - 2y) / (2 sigma^2), one lattice point per output
        den = 2.0 * kern.sigma * kern.sigma  # the kernel's own 1 / (2 sigma^2), rounded the same way
        if not (den > 0 and math.isfinite(1.0 / den)):  # a point mass at x: the two rows are disjoint
            return LatticeLoss(np.empty(0), unit=1.0, c0=0, step=1, log_inf=0.0, log_fin=-math.inf)
        unit, step = 1.0 / den, 2 * h
        coef = h * (h - 2 * common)
    c0 = int(coef.min())
    idx = (coef - c0) // step
    n = int(idx.max()) + 1
    order = np.argsort(idx, kind="stable")
    idx, lp = idx[order], logp[order]
    starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
    out = np.full(n, -np.inf)
    out[idx[starts]] = np.logaddexp.reduceat(lp, starts)  # Laplace: the two end lumps, in log space
    return LatticeLoss(out, unit=unit, c0=c0, step=step, log_inf=log_inf, log_fin=log_fin)


def _lattice_composition(mechanism, k: int, h: int, H: int | None, *,
                         max_points: int = MAX_POINTS) -> LatticeComposition:
    """The exact route of :func:`compose`: ``k`` reports of ``mechanism`` at separation ``h`` on the lattice.

    The one construction of a :class:`LatticeComposition` (``compose`` and
    :func:`~sparseldp.composition.k_reports` both call it, so their numbers
    agree bit for bit).  Raises :class:`~sparseldp.composition._lattice.LatticeTooLarge`
    when the composed lattice would have more than ``max_points`` points, and
    ``ValueError`` when its coefficients pass ``2^53`` or a loss overflows.
    """
    return LatticeComposition(mechanism, k, h, H, KFold(_lattice_loss(mechanism, h), k, max_points=max_points))


def compose(mechanism, k, *, h=None, H=None, x=None, x_prime=None, value_discretization_interval=1e-4):
    r"""The ``(eps, delta)`` profile of ``k`` reports of one person, each with fresh noise.

    The ``k`` reports may be of one value or, with ``H``, of ``k`` values each
    moving by at most ``H`` (module docstring: the worst case is the same).

    Parameters
    ----------
    mechanism : a local randomizer
        :class:`~sparseldp.SparseLaplace` and :class:`~sparseldp.SparseGaussian`
        are composed exactly on their loss lattice (module docstring);
        :class:`~sparseldp.SparseKernel` and channels go through dp-accounting
        (pessimistic upper bounds; it must be installed).
    k : int >= 1
        Number of reports.
    h : int >= 1
        One separation ``|x - x'|`` (mechanisms on Z).
    H : int >= 1
        A privacy range instead: the worst pair at separation ``1..H``.  For
        the two families this is ``h = min(H, 2t + 1)`` (proved in the module
        docstring); for :class:`~sparseldp.SparseKernel` every ``h`` is
        composed by dp-accounting and the maximum taken (``H`` PLDs; delta 1
        at once when ``H > 2t``).
    x, x_prime : int
        The two inputs of a channel (both orders are covered).
    value_discretization_interval : float > 0
        dp-accounting's loss grid (the fallback route only).

    Returns
    -------
    LatticeComposition or PLDComposition
        ``.delta(eps)``, ``.epsilon(delta)``; ``.exact`` says which route.

    Examples
    --------
    >>> from sparseldp import SparseLaplace
    >>> m = SparseLaplace(lam=0.5, s=7)
    >>> c = compose(m, 1, h=3)
    >>> abs(float(c.delta(1.0)) - float(m.delta_h(1.0, 3))) < 1e-15
    True
    >>> float(compose(m, 10, H=3).delta(5.0)) > float(m.delta_h(5.0, 3))
    True
    """

    if not isinstance(mechanism, LocalRandomizer):
        raise TypeError(f"mechanism must be a local randomizer (a mechanism on Z or a SparseChannel); got "
                        f"{type(mechanism).__name__}")
    k = check_int(k, "k", minimum=1)
    vdi = check_positive(value_discretization_interval, "value_discretization_interval")
    if isinstance(mechanism, RadiusMechanism):
        if x is not None or x_prime is not None:
            raise ValueError("a mechanism on Z is translation invariant: give the separation h or the range H, "
                             "not x and x_prime")
        if (h is None) == (H is None):
            raise ValueError("give exactly one of h (one separation |x - x'|, an integer >= 1) and H (the "
                             "privacy range: the worst separation 1..H)")
        if h is not None:
            h = check_int(h, "h", minimum=1)
        else:
            H = check_int(H, "H", minimum=1)
        if isinstance(mechanism.kernel, (LaplaceKernel, GaussianKernel)):
            h_eff = h if h is not None else min(H, 2 * mechanism.t + 1)
            return _lattice_composition(mechanism, k, h_eff, H)
        t = mechanism.t
        if (h if h is not None else H) > 2 * t:  # disjoint windows at this separation: delta = 1
            return PLDComposition(mechanism, k, [(min(h or H, 2 * t + 1), None)], h=h, H=H)
        hs = [h] if h is not None else range(1, H + 1)
        plds = [(g, _self_composed(to_pld(mechanism, g, value_discretization_interval=vdi), k)) for g in hs]
        return PLDComposition(mechanism, k, plds, h=h, H=H)
    if h is not None or H is not None:
        raise ValueError("a channel is not translation invariant: give x and x_prime instead of h or H")
    if x is None or x_prime is None:
        raise ValueError("x and x_prime (two input values of the channel) are required for a channel")
    pld = _pld_or_none(mechanism, x=x, x_prime=x_prime, value_discretization_interval=vdi)
    return PLDComposition(mechanism, k, [(None, None if pld is None else _self_composed(pld, k))])


def _self_composed(pld, k: int):
    return pld if k == 1 else pld.self_compose(k)
