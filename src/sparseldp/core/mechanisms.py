r"""The s-sparse radius-truncated mechanisms on the integers (output alphabet Z).

* :class:`SparseLaplace` (Definition 6):
  ``Q(y | x) = exp(-lam |x - y|) / C_t * 1{|x - y| <= t}``,
  ``C_t = 1 + 2 sum_{j=1}^t exp(-lam j)``.
* :class:`SparseGaussian` (Definition 13):
  ``G(y | x) = exp(-(x - y)^2 / (2 sigma^2)) / Gamma_t * 1{|x - y| <= t}``.

Here ``s`` is odd and ``t = (s - 1)/2`` is the window radius.  Both are
translation invariant, so every privacy quantity depends on the separation
``h = |x - x'|`` only (Theorems 3 and 9), and by the reflection ``y -> -y`` the
two orders of a pair give the same defect (docs/paper.md, "delta* and ordered pairs").

The privacy range ``H`` (Definition 7) is the largest separation protected:
``(eps, delta)``-LDP on range ``H`` means ``delta_h(eps) <= delta`` for
``1 <= h <= H``.

A mechanism is a frozen, validated value; computing things about it lives in
:mod:`sparseldp.core.accounting`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from . import accounting
from .. import sampling
from ..channel import SparseChannel, check_domain, check_window
from .kernels import GAUSSIAN_MAX_S, GaussianKernel, LaplaceKernel, LogConcaveKernel, check_gaussian_s
from .._validation import (
    INT64_MAX,
    INT64_MIN,
    MAX_S,
    broadcast,
    check_eps_array,
    check_int,
    check_int_array,
    check_odd_s,
    check_positive,
    check_probability,
)

__all__ = ["SparseLaplace", "SparseGaussian", "RadiusMechanism"]

#: Methods renamed when the mechanisms joined the local-randomizer protocol (one meaning per name).
_RENAMED = {
    "delta": "delta_h(eps, h) for one separation, or delta_star(eps, H) for the range",
    "delta_upper": "delta_h_upper(eps, h), or delta_star_upper(eps, H) for the range",
}


_INF = math.inf
_F64 = np.float64
_defect_scalar = accounting.defect_scalar
_epsilon_segments = accounting._epsilon_segments


def _scalar_eps(eps):
    """``eps`` as a float when it is a plain valid scalar (float, np.float64 or int, ``0 <= eps < inf``), else None.

    The scalar fast path takes only what it can check in a few comparisons;
    anything else (arrays, other types, invalid values) goes through the full
    validation of the array path, which raises the documented errors.
    """
    tp = type(eps)
    if tp is float or tp is np.float64:
        e = float(eps)
    elif tp is int:
        if not 0 <= eps <= 1 << 1023:
            return None
        e = float(eps)
    else:
        return None
    return e if 0.0 <= e < _INF else None


def _scalar_int(h, minimum: int):
    """``h`` as an int when it is a plain int / np.int64 in ``[minimum, INT64_MAX]``, else None."""
    tp = type(h)
    if tp is int or tp is np.int64:
        h = int(h)
        return h if minimum <= h <= INT64_MAX else None
    return None


class RadiusMechanism:
    """Behaviour shared by the two families; subclasses define the kernel."""

    s: int
    family: str = ""

    # -- description -------------------------------------------------------
    @property
    def t(self) -> int:
        """Window radius ``t = (s - 1) / 2``."""
        return (self.s - 1) // 2

    @property
    def radius(self) -> int:
        return self.t

    def _kernel(self):  # pragma: no cover - abstract
        raise NotImplementedError

    @cached_property
    def kernel(self):
        return self._kernel()

    @cached_property
    def _scalar_kernel(self):
        """The kernel when it has scalar twins (log-concave: the fast path for one ``(eps, h)``), else None."""
        k = self.kernel
        return k if isinstance(k, LogConcaveKernel) else None

    @property
    def parameter(self) -> tuple[str, float]:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_dict(self) -> dict:
        name, value = self.parameter
        return {"family": self.family, name: value, "s": self.s}

    # -- distribution ------------------------------------------------------
    def logpmf(self, y, x=0):
        """``log M(y | x)``, ``-inf`` outside the window; broadcasts like numpy.

        Computed as ``log w(y - x) - log C_t`` directly (never ``log(pmf)``),
        so it stays finite far into the tails, e.g. ``lam = 100, |y - x| = t``.
        """
        y, x = broadcast(("y", check_int_array(y, "y")), ("x", check_int_array(x, "x")))
        with np.errstate(over="ignore"):
            d = y - x
        # int64 wrap-around: x and y of opposite signs whose difference leaves int64
        # are 2^63 or more apart, far outside every window (t <= 2^52)
        wrapped = ((y ^ x) & (y ^ d)) < 0
        inside = ~wrapped & (np.abs(d) <= self.t)
        out = self.kernel.log_w(np.where(inside, d, 0)) - self.kernel.log_normalizer
        return np.where(inside, out, -np.inf)[()]

    def pmf(self, y, x=0):
        """``M(y | x)``, 0 outside the window; broadcasts like numpy."""
        return np.exp(self.logpmf(y, x))

    def support(self, x) -> np.ndarray:
        """The window ``S(x) = {x - t, ..., x + t}``."""
        x = check_int(x, "x", minimum=INT64_MIN + self.t, maximum=INT64_MAX - self.t)
        return np.arange(x - self.t, x + self.t + 1, dtype=np.int64)

    # -- accounting --------------------------------------------------------
    def defect_h(self, eps, h) -> accounting.Defect:
        """The separation defect ``delta_h(eps)`` with its split (Theorems 3/9, Remark 2).

        ``total = support_leakage + overlap``; ``support_leakage`` is
        ``M(S(0) \\ S(h) | 0)`` and ``overlap`` the positive part on
        ``S(0) & S(h)``.  ``eps`` and ``h`` broadcast; ``h > 2t`` gives exactly
        ``1.0`` (disjoint windows), ``h = 0`` exactly ``0.0``.

        Rounded to nearest, not a bound: each field may lie slightly *below* or
        above the exact value (measured: within ``1.3e-15`` absolute, plus about
        ``1e-17 eps`` for the Gaussian family with very large ``eps``, and
        about ``1e-16 eps w`` for Laplace far out, where the excess set's
        boundary is decided in floating point: a relative ``2e-4`` at ``eps``
        near ``10^13``; README; see :mod:`sparseldp.core.accounting`).  Certify with :meth:`delta_h_upper` /
        :meth:`delta_star_upper`.
        """
        k, e1, h1 = self._scalar_kernel, _scalar_eps(eps), _scalar_int(h, 0)
        if k is not None and e1 is not None and h1 is not None:
            total, leak, ov = accounting.defect_scalar(k, e1, h1, "near")
            return accounting.Defect(np.float64(total), np.float64(leak), np.float64(ov))
        e, hh = broadcast(("eps", check_eps_array(eps, "eps")), ("h", check_int_array(h, "h", minimum=0)))
        total, leak, ov = accounting.defect_parts(self.kernel, e, hh)
        return accounting.Defect(total[()], leak[()], ov[()])

    def defect(self, eps, x, x_prime) -> accounting.Defect:
        """The ordered defect ``Delta_eps(x, x')`` of one pair of inputs, with its split.

        The local-randomizer protocol's pair defect (the same name and meaning
        as :meth:`sparseldp.SparseChannel.defect`).  On Z it depends on
        ``|x - x'|`` only (translation invariance and the reflection
        ``y -> -y``), so it equals :meth:`defect_h` at ``h = |x - x'|``.
        """
        x1, xp1 = _scalar_int(x, INT64_MIN), _scalar_int(x_prime, INT64_MIN)
        if x1 is not None and xp1 is not None:  # plain ints: the separation exactly, then the scalar path
            return self.defect_h(eps, min(abs(xp1 - x1), 2 * self.t + 1))
        x, xp = broadcast(("x", check_int_array(x, "x")), ("x_prime", check_int_array(x_prime, "x_prime")))
        with np.errstate(over="ignore"):
            d = xp - x
        wrapped = ((xp ^ x) & (xp ^ d)) < 0  # int64 wrap-around: the pair is farther apart than any window
        h = np.where(wrapped, 2 * self.t + 1, np.minimum(np.abs(d), 2 * self.t + 1))
        return self.defect_h(eps, h)

    def delta_h(self, eps, h):
        """The separation defect ``delta_h(eps)`` (Theorem 3 / Theorem 9); exactly 1.0 for ``h > 2t``.

        Rounded to nearest (may err slightly below the exact value; see
        :meth:`defect_h`); :meth:`delta_h_upper` is the rigorous counterpart.
        A float ``eps`` and an int ``h`` take the scalar fast path (a few
        microseconds; :mod:`sparseldp.core.accounting`, "Scalars at
        function-call cost"); arrays broadcast.
        """
        if type(eps) is float and type(h) is int and 0.0 <= eps < _INF and 0 <= h <= INT64_MAX:
            k = self._scalar_kernel  # the plain case first: two type tests, no conversion
            if k is not None:
                return _F64(_defect_scalar(k, eps, h, "near")[0])
        k, e1, h1 = self._scalar_kernel, _scalar_eps(eps), _scalar_int(h, 0)
        if k is not None and e1 is not None and h1 is not None:
            return _F64(_defect_scalar(k, e1, h1, "near")[0])
        return self.defect_h(eps, h).total

    def delta_h_upper(self, eps, h):
        """A rigorous upper bound on ``delta_h(eps)``: never below the exact value.

        At most 1, exactly 1.0 when the exact value is 1 (``h > 2t``), and 0.0
        only when the exact value is 0 (``h = 0``).  At most about ``2.5e-14``
        above the exact value (measured; plus about ``2.5e-16 eps`` for the
        Gaussian family).  Computed with outward rounding and a priori bounds
        on the kernel sums (see :mod:`sparseldp.core.kernels`); broadcasts like
        :meth:`delta_h` (scalars take the same fast path).
        """
        if type(eps) is float and type(h) is int and 0.0 <= eps < _INF and 0 <= h <= INT64_MAX:
            k = self._scalar_kernel
            if k is not None:
                return _F64(_defect_scalar(k, eps, h, "up")[0])
        k, e1, h1 = self._scalar_kernel, _scalar_eps(eps), _scalar_int(h, 0)
        if k is not None and e1 is not None and h1 is not None:
            return _F64(_defect_scalar(k, e1, h1, "up")[0])
        e, hh = broadcast(("eps", check_eps_array(eps, "eps")), ("h", check_int_array(h, "h", minimum=0)))
        return accounting.defect_bounds(self.kernel, e, hh)[0][()]

    def __getattr__(self, name):
        # only reached for missing attributes: say where a renamed method went
        if name in _RENAMED:
            raise AttributeError(f"{type(self).__name__}.{name} was renamed: use {_RENAMED[name]}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def delta_star(self, eps, H):
        """``delta*(eps; H) = max_{1 <= h <= H} delta_h(eps)`` (Section V).

        ``eps`` may be an array: the result is then the privacy profile
        ``eps -> delta*`` with the same shape.  Since ``delta_h`` is
        nondecreasing in ``h`` for both families (a lemma in
        :mod:`sparseldp.core.accounting`), ``delta* = delta_{min(H, 2t+1)}``:
        O(1) per eps whatever ``H``, a few microseconds for a float ``eps``.
        Rounded to nearest (may err slightly below the exact value);
        certificates use :meth:`delta_star_upper`.
        """
        if type(eps) is float and type(H) is int and 0.0 <= eps < _INF and 1 <= H <= INT64_MAX:
            k = self._scalar_kernel
            if k is not None:
                top = 2 * k.t + 1
                return _F64(_defect_scalar(k, eps, H if H < top else top, "near")[0])
        k, e1, H1 = self._scalar_kernel, _scalar_eps(eps), _scalar_int(H, 1)
        if k is not None and e1 is not None and H1 is not None:
            return _F64(_defect_scalar(k, e1, min(H1, 2 * self.t + 1), "near")[0])
        e = check_eps_array(eps, "eps")
        H = check_int(H, "H", minimum=1)
        return accounting.delta_profile(self.kernel, e, H)[0][()]

    def delta_star_upper(self, eps, H):
        """A rigorous upper bound on ``delta*(eps; H)``: never below the exact value, at most 1.

        The maximum over ``1 <= h <= H`` of :meth:`delta_h_upper`; exactly 1.0
        when ``H > 2t`` (disjoint windows).  At most about ``2.5e-14`` above the
        exact value (measured; for the Gaussian family plus about
        ``2.5e-16 eps``, since ``e^eps`` is formed in log space).  Scalar or
        array ``eps`` like :meth:`delta_star`, at about twice its cost.
        This is what :meth:`epsilon`, :meth:`is_ldp` and
        :func:`sparseldp.design` compare with their targets.
        """
        if type(eps) is float and type(H) is int and 0.0 <= eps < _INF and 1 <= H <= INT64_MAX:
            k = self._scalar_kernel
            if k is not None:
                top = 2 * k.t + 1
                return _F64(_defect_scalar(k, eps, H if H < top else top, "up")[0])
        k, e1, H1 = self._scalar_kernel, _scalar_eps(eps), _scalar_int(H, 1)
        if k is not None and e1 is not None and H1 is not None:
            return _F64(_defect_scalar(k, e1, min(H1, 2 * self.t + 1), "up")[0])
        e = check_eps_array(eps, "eps")
        H = check_int(H, "H", minimum=1)
        return accounting.delta_profile(self.kernel, e, H, "up")[0][()]

    def epsilon(self, delta, H) -> float:
        """Smallest ``eps >= 0`` (rounded up, rel. 1e-12) with ``delta_star_upper(eps, H) <= delta``.

        A certificate: the exact ``delta_star`` at the returned ``eps`` is at
        most ``delta``.  ``delta >= 1`` always holds (returns 0.0).  Raises
        :class:`sparseldp.InfeasibleError` when the support leakage alone
        exceeds ``delta`` for some ``h <= H`` (then no ``eps`` works), or is
        within rounding of ``delta`` (then no ``eps`` can be certified; the
        message says so).  A root-find on one separation (``h = min(H, 2t+1)``,
        by the lemma of :mod:`sparseldp.core.accounting`): the segment of the
        root located in a table of the breakpoints (built once per separation),
        the root in closed form, then one certification with the upper bound --
        a few microseconds whatever ``H``.
        """
        if type(delta) is float and type(H) is int and 0.0 < delta < 1.0 and 1 <= H <= INT64_MAX:
            k = self._scalar_kernel  # the plain case: the segment search, no other dispatch
            if k is not None:
                top = 2 * k.t + 1
                got = _epsilon_segments(k, delta, H if H < top else top, 1e-12)
                if got is not None:
                    return got
        if not (type(delta) is float and 0.0 <= delta <= 1.0):
            delta = check_probability(delta, "delta")
        if not (type(H) is int and H >= 1):
            H = check_int(H, "H", minimum=1)
        return accounting.epsilon_for_delta(self.kernel, delta, H)

    def is_ldp(self, eps, delta, H) -> bool:
        """Whether the mechanism is certifiably ``(eps, delta)``-LDP on range ``H``.

        ``True`` iff :meth:`delta_star_upper` ``<= delta`` (so never ``True``
        when the exact ``delta_star`` exceeds ``delta``; it may say ``False``
        when the two are within rounding of each other).
        """
        delta = check_probability(delta, "delta")
        e = check_eps_array(eps, "eps")
        H = check_int(H, "H", minimum=1)
        if delta >= 1.0:
            return True
        return bool(np.all(self.delta_star_upper(e, H) <= delta))

    # -- distortion --------------------------------------------------------
    @cached_property
    def _moments(self):
        s1, s2 = self.kernel.moment_sums()
        c = math.exp(self.kernel.log_normalizer)
        return 2.0 * s1 / c, 2.0 * s2 / c

    @property
    def r1(self) -> float:
        """``R1 = E|Y - x| = 2 sum_{j=1}^t j w(j) / C_t`` (Propositions 1 and 3)."""
        return self._moments[0]

    @property
    def r2(self) -> float:
        """``R2 = E(Y - x)^2 = 2 sum_{j=1}^t j^2 w(j) / C_t`` (Propositions 1 and 3).

        Since the mechanism is symmetric, ``E[Y | x] = x`` and ``R2`` is the
        variance of the report (docs/paper.md, "Distortion and bias").
        """
        return self._moments[1]

    # -- sampling (sparseldp.sampling, a lower layer: it knows mechanisms only by their protocol) --
    def sample(self, x, *, rng=None):
        """Privatize integer input(s) ``x``: ``x + K`` with ``K`` from :meth:`sampling_pmf`.

        ``rng=None`` (default) uses the operating system's secure source; an
        int seed, SeedSequence or numpy Generator gives reproducible simulation
        and is not for production.  Returns int64 with the shape of ``x``.
        See :func:`sparseldp.sampling.sample`.
        """
        return sampling.sample(self, x, rng=rng)

    def sampling_pmf(self, x):
        """The distribution actually sampled for input ``x``, as exact ``Fraction`` s ``c_k / 2^64``.

        ``(outputs x-t..x+t, probabilities)``, like
        :meth:`sparseldp.SparseChannel.sampling_pmf`; the offsets alone are
        :func:`sparseldp.sampling.sampling_pmf`.
        """
        offsets, probs = sampling.sampling_pmf(self)
        x = check_int(x, "x", minimum=INT64_MIN + self.t, maximum=INT64_MAX - self.t)
        return np.asarray(offsets, dtype=np.int64) + x, probs

    # -- conversion --------------------------------------------------------
    def to_channel(self, domain, window: str = "extended"):
        """This mechanism on the finite input domain ``lo..hi`` as a :class:`~sparseldp.SparseChannel`.

        ``window="extended"``: outputs ``lo - t .. hi + t``, every row exactly
        this mechanism (Theorems 3/9 apply); ``"clipped"``: outputs stay in the
        domain, rows renormalized, only the general Theorems 2/8 apply
        (docs/paper.md, "Output alphabet").
        """
        lo, hi = check_domain(domain)
        return SparseChannel._radius(self.kernel, self.family, self.parameter, self.s, lo, hi,
                                     check_window(window))

    def certify(self, eps, H):
        """Rigorous (outward-rounded) bounds on ``delta*(eps; H)`` of the realized sampler.

        Returns a frozen :class:`sparseldp.sampling.Certificate`; its
        ``delta_star_upper`` is never below the exact value for the sampled
        distribution.  See :func:`sparseldp.sampling.certify`.
        """
        return sampling.certify(self, eps, H)


@dataclass(frozen=True, eq=True)
class SparseLaplace(RadiusMechanism):
    """s-sparse discrete-Laplace mechanism ``Q_{lam,s}`` (Definition 6).

    ``Q(y | x) = exp(-lam |x - y|) / C_t`` for ``|x - y| <= t = (s-1)/2``.

    Parameters
    ----------
    lam : float
        Inverse temperature, finite and > 0.
    s : int
        Support size, odd and >= 1.  Use :meth:`from_radius` to give ``t``.

    Examples
    --------
    >>> m = SparseLaplace(lam=0.5, s=7)
    >>> round(float(m.delta_star(1.0, 3)), 4)
    0.4686
    """

    lam: float
    s: int
    family: str = field(default="laplace", init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "lam", check_positive(self.lam, "lam"))
        object.__setattr__(self, "s", check_odd_s(self.s, "s"))

    @classmethod
    def from_radius(cls, *, lam, t) -> "SparseLaplace":
        """The radius-``t`` mechanism ``Q_{lam,r}`` of Definition 4, i.e. ``s = 2t + 1``."""
        t = check_int(check_int(t, "t", minimum=0), "t", minimum=0, maximum=(MAX_S - 1) // 2)
        return cls(lam=lam, s=2 * t + 1)

    def _kernel(self):
        return LaplaceKernel(self.lam, self.t)

    @property
    def parameter(self):
        return ("lam", self.lam)


@dataclass(frozen=True, eq=True)
class SparseGaussian(RadiusMechanism):
    """s-sparse Gaussian mechanism ``G_{sigma,s}`` (Definition 13).

    ``G(y | x) = exp(-(x - y)^2 / (2 sigma^2)) / Gamma_t`` for ``|x - y| <= t``.

    Parameters
    ----------
    sigma : float
        Scale, finite and > 0.
    s : int
        Support size, odd and >= 1.  Use :meth:`from_radius` to give ``t``.

    Examples
    --------
    >>> m = SparseGaussian(sigma=2.0, s=7)
    >>> round(float(m.delta_star(1.0, 3)), 4)
    0.4173
    """

    sigma: float
    s: int
    family: str = field(default="gaussian", init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "sigma", check_positive(self.sigma, "sigma"))
        object.__setattr__(self, "s", check_gaussian_s(check_odd_s(self.s, "s")))

    @classmethod
    def from_radius(cls, *, sigma, t) -> "SparseGaussian":
        """The radius-``t`` mechanism ``G_{sigma,r}`` of Definition 11, i.e. ``s = 2t + 1``."""
        t = check_int(check_int(t, "t", minimum=0), "t", minimum=0, maximum=(GAUSSIAN_MAX_S - 1) // 2)
        return cls(sigma=sigma, s=2 * t + 1)

    def _kernel(self):
        return GaussianKernel(self.sigma, self.t)

    @property
    def parameter(self):
        return ("sigma", self.sigma)
