r"""The paper's closed-form results besides the exact defects.

Each function says which way it errs:

* :func:`minimum_support` — Theorem 4 (and its Gaussian twin): necessary,
  ``delta_h = 1`` exactly when ``h > s - 1``.
* :func:`laplace_clean_delta` — Theorem 5's identity (exact, under its conditions).
* :func:`laplace_clean_bound` — Theorem 5's bound: an *upper* bound on ``delta_star``
  (evaluated with outward rounding, so it is an upper bound in floating point too).
* :func:`laplace_sufficient_support` — Corollary 2: a *sufficient* ``s`` (an
  upper bound on the smallest feasible one; see :func:`sparseldp.smallest_support`
  for the exact value).
* :func:`gaussian_clean_delta`, :func:`gaussian_clean_bound` — Theorem 11 (the bound
  rounded outward, like Theorem 5's).
* :func:`gaussian_window` — Corollary 4: a range of sufficient ``s``.
* :func:`kappa` — Proposition 2's overlap threshold (exact).
* :func:`laplace_pure_sufficient` — Corollary 1: sufficient for pure LDP under
  common support.

All functions validate their arguments and raise ``ValueError`` when a
theorem's hypotheses fail, naming the hypothesis, rather than returning a
number that would not be a bound.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .kernels import GaussianKernel, LaplaceKernel, dn, exp_up, log_up, up
from .._validation import (
    check_bool,
    check_int,
    check_int_array,
    check_nonnegative,
    check_odd_s,
    check_positive,
    check_probability,
    check_real,
)

__all__ = [
    "minimum_support",
    "is_trivially_infeasible",
    "laplace_clean_delta",
    "laplace_clean_bound",
    "laplace_sufficient_support",
    "gaussian_clean_delta",
    "gaussian_clean_bound",
    "gaussian_window",
    "kappa",
    "laplace_pure_sufficient",
]


def _odd_ceil(x: float) -> int:
    """Smallest odd integer >= x."""
    n = math.ceil(x)
    return n if n % 2 == 1 else n + 1


def minimum_support(H) -> int:
    """Smallest odd ``s`` with ``s >= H + 1`` (Theorem 4; Theorem 10 for the Gaussian).

    Any ``s`` below it has ``delta_H = 1``: the windows of two inputs ``H``
    apart are disjoint, so no ``delta < 1`` is possible.  Necessary, not sufficient.
    """
    H = check_int(H, "H", minimum=0)
    return _odd_ceil(H + 1)


def is_trivially_infeasible(*, s, H) -> bool:
    """True when ``s - 1 < H`` (Theorem 4): then ``delta_star = 1`` for every eps."""
    s = check_odd_s(s)
    H = check_int(H, "H", minimum=0)
    return s - 1 < H


def _check_h_H(h, H):
    """Validated ``(h, H)`` with ``0 <= h <= H``; ``H`` defaults to ``max(h)``."""
    h = check_int_array(h, "h", minimum=0)
    H = int(h.max(initial=0)) if H is None else check_int(H, "H", minimum=0)
    if h.size and h.max() > H:
        raise ValueError(f"h must be <= H = {H}; got {int(h.max())}")
    return h, H


def _leakage_only(kernel, h):
    """``C_t^{-1} sum_{j=t-h+1}^{t} w(j)``: the defect when the overlap term vanishes (Theorems 5, 11)."""
    t = kernel.t
    return np.exp(kernel.log_range_nonneg(t - h + 1, t) - kernel.log_normalizer)[()]


def _clean_conditions_laplace(eps, lam, s, H):
    # a relative slack of 1e-12 absorbs the rounding of lam = eps / H; at that
    # scale the overlap term it would admit is below 1e-12 of the leakage
    if lam * H > eps * (1 + 1e-12):
        raise ValueError(
            f"Theorem 5 needs lam * H <= eps; got lam * H = {lam * H:g} > eps = {eps:g}"
        )
    if s < 2 * H + 1:
        raise ValueError(f"Theorem 5 needs s >= 2H + 1 = {2 * H + 1}; got s = {s}")


def laplace_clean_delta(*, eps, lam, s, h, H=None):
    r"""Theorem 5: ``delta_h = C_t^{-1} sum_{j=t-h+1}^{t} e^{-lam j}`` (pure support leakage).

    Exact (up to rounding to nearest) when ``lam H <= eps`` and ``s >= 2H + 1``
    (``H`` defaults to ``max(h)``); ``ValueError`` otherwise.  ``lam H`` may
    exceed ``eps`` by a relative ``1e-12`` (the rounding of ``lam = eps / H``):
    the exact ``delta_h`` is then larger by at most ``lam H - eps``.
    Broadcasts over ``h``.
    """
    eps = check_nonnegative(eps, "eps")
    lam = check_positive(lam, "lam")
    s = check_odd_s(s)
    h, H = _check_h_H(h, H)
    _clean_conditions_laplace(eps, lam, s, H)
    return _leakage_only(LaplaceKernel(lam, (s - 1) // 2), h)


def laplace_clean_bound(*, eps, lam, s, H, loose=False) -> float:
    r"""Theorem 5's bound ``delta_star <= H e^{-lam (t - H + 1)} / C_t`` (``<= H e^{-lam(t-H+1)}``).

    An upper bound on ``delta_star(eps, lam, s; H)`` under ``lam H <= eps`` and
    ``s >= 2H + 1``; ``loose=True`` gives the second, normalizer-free form.
    Rounded outward; when ``lam H`` exceeds ``eps`` within the tolerated
    ``1e-12`` relative, ``lam H - eps`` (a bound on the overlap excess) is added.
    """
    eps = check_nonnegative(eps, "eps")
    lam = check_positive(lam, "lam")
    s = check_odd_s(s)
    H = check_int(H, "H", minimum=1)
    loose = check_bool(loose, "loose")
    _clean_conditions_laplace(eps, lam, s, H)
    t = (s - 1) // 2
    # rounded outward (an upper bound also in floating point): log H up, lam (t - H + 1) down, C_t down
    log_b = up(float(log_up(float(H))) - float(dn(lam * (t - H + 1))))
    if not loose:
        log_b = up(log_b - LaplaceKernel(lam, t).log_normalizer_bound("dn"))
    # within the tolerated rounding lam H may exceed eps by d > 0: the overlap excess is then at most
    # sum_k w(k)/C_t (1 - e^{-(L(k) - eps)}) <= d, so d is added (0 when lam H <= eps)
    excess = max(float(up(up(lam * H) - eps)), 0.0)
    return float(up(exp_up(log_b) + excess)) if excess > 0 else float(exp_up(log_b))


def laplace_sufficient_support(*, eps, delta, H, lam=None) -> int:
    r"""Corollary 2: the smallest odd ``s >= 2H - 1 + (2/lam) log(H/delta)`` (also ``>= 2H + 1``).

    Sufficient for ``(eps, delta)``-LDP on range ``H`` when ``lam H <= eps``;
    ``lam`` defaults to the largest overlap-compatible value ``eps / H``.  It
    over-estimates the exact smallest support
    (:func:`sparseldp.smallest_support`).
    """
    eps = check_positive(eps, "eps")
    delta = check_probability(delta, "delta")
    H = check_int(H, "H", minimum=1)
    if delta <= 0:
        raise ValueError("delta must be > 0 for Corollary 2; got 0")
    if lam is None:
        lam = _largest_lam(eps, H)
    else:
        lam = check_positive(lam, "lam")
        if Fraction(lam) * H > Fraction(eps):  # exactly: an excess of 1e-17 eps is an overlap no s removes
            raise ValueError(f"Corollary 2 needs lam * H <= eps exactly; got lam = {lam!r}, lam * H - eps = "
                             f"{float(Fraction(lam) * H - Fraction(eps)):.3g} > 0 (the largest lam allowed is "
                             f"{_largest_lam(eps, H)!r})")
    # the logarithm of a ratio that can overflow, and a last relative margin for the rounding of the sum
    need = 2 * H - 1 + (2.0 / lam) * (math.log(H) - math.log(delta))
    return _odd_ceil(max(need * (1 + 1e-12), 2 * H + 1))


def _largest_lam(eps: float, H: int) -> float:
    """The largest double ``lam`` with ``lam * H <= eps`` exactly (``eps / H`` rounds up about a third of the
    time; an ``lam H`` above ``eps`` leaves an overlap excess, Proposition 1, that no support removes)."""
    lam = eps / H
    while lam > 0 and Fraction(lam) * H > Fraction(eps):
        lam = math.nextafter(lam, 0.0)
    return lam


def kappa(h, *, eps, sigma):
    r"""Proposition 2: ``kappa_h = h/2 - sigma^2 eps / h``.

    For ``0 < h <= 2t`` the Gaussian overlap term is positive only at indices
    ``k < kappa_h``.  Broadcasts over ``h``.
    """
    h = check_int_array(h, "h", minimum=1)
    eps = check_nonnegative(eps, "eps")
    sigma = check_positive(sigma, "sigma")
    return (h / 2.0 - (sigma * sigma * eps if eps > 0 else 0.0) / h)[()]  # never inf * 0


def _clean_conditions_gaussian(eps, sigma, s, H):
    t = (s - 1) // 2
    num, den = H * (2 * t - H), 2 * sigma * sigma
    # den = 0 when sigma^2 underflows: then the bound is +-inf (or 0), never a ZeroDivisionError
    need = num / den if den > 0 else (math.copysign(math.inf, num) if num else 0.0)
    if eps < need:
        raise ValueError(f"Theorem 11 needs eps >= H(2t - H)/(2 sigma^2) = {need:g}; got eps = {eps:g}")
    if s < 2 * H + 1:
        raise ValueError(f"Theorem 11 needs s >= 2H + 1 = {2 * H + 1}; got s = {s}")


def gaussian_clean_delta(*, eps, sigma, s, h, H=None):
    r"""Theorem 11: ``delta_h = Gamma_t^{-1} sum_{j=t-h+1}^{t} e^{-j^2/(2 sigma^2)}``.

    Exact when ``eps >= H(2t - H)/(2 sigma^2)`` and ``s >= 2H + 1``.
    """
    eps = check_nonnegative(eps, "eps")
    sigma = check_positive(sigma, "sigma")
    s = check_odd_s(s)
    h, H = _check_h_H(h, H)
    _clean_conditions_gaussian(eps, sigma, s, H)
    return _leakage_only(GaussianKernel(sigma, (s - 1) // 2), h)


def gaussian_clean_bound(*, eps, sigma, s, H, loose=False) -> float:
    r"""Theorem 11's bound ``delta_star <= H e^{-(t-H+1)^2/(2 sigma^2)} / Gamma_t``.

    An upper bound under the theorem's conditions; ``loose=True`` drops ``Gamma_t``.
    """
    eps = check_nonnegative(eps, "eps")
    sigma = check_positive(sigma, "sigma")
    s = check_odd_s(s)
    H = check_int(H, "H", minimum=1)
    loose = check_bool(loose, "loose")
    _clean_conditions_gaussian(eps, sigma, s, H)
    t = (s - 1) // 2
    kern = GaussianKernel(sigma, t)
    # rounded outward: (t-H+1)^2 / (2 sigma^2) bounded below with c >= kern._c_dn, Gamma_t from below
    q = float(t - H + 1) ** 2  # t >= H here: (t-H+1)^2 > 0, exact below 2^53
    log_b = up(float(log_up(float(H))) - float(dn(q * kern._c_dn)))
    if not loose:
        log_b = up(log_b - kern.log_normalizer_bound("dn"))
    # the condition eps >= H (2t - H) c is checked in floating point; if the exact largest loss exceeds
    # eps by d > 0, the overlap excess is at most d (as for Theorem 5), which is added
    excess = max(float(up(up(float(H * (2 * t - H)) * kern._c_up) - eps)), 0.0)
    return float(up(exp_up(log_b) + excess)) if excess > 0 else float(exp_up(log_b))


def gaussian_window(*, eps, delta, sigma, H) -> tuple[int, int] | None:
    r"""Corollary 4: odd ``s`` with
    ``2H - 1 + 2 sqrt(2 sigma^2 log(H/delta)) <= s <= H + 1 + 2 sigma^2 eps / H``.

    Every odd ``s`` in the returned inclusive range ``(s_lo, s_hi)`` is
    sufficient for ``(eps, delta)``-LDP on range ``H``; ``None`` when the window
    is empty.  (Theorem 11 also needs ``s >= 2H + 1``; for ``delta < H`` the
    lower end already implies it for integer ``t``, docs/paper.md, "The Gaussian window", and we
    enforce it anyway.)
    """
    eps = check_nonnegative(eps, "eps")
    delta = check_probability(delta, "delta")
    sigma = check_positive(sigma, "sigma")
    H = check_int(H, "H", minimum=1)
    if delta <= 0:
        raise ValueError("delta must be > 0 for Corollary 4; got 0")
    lo_t = H - 1 + math.sqrt(2 * sigma * sigma * max(math.log(H) - math.log(delta), 0.0))  # H / delta overflows
    hi_t = H / 2 + (sigma * sigma * eps / H if eps > 0 else 0.0)  # never inf * 0
    if not (math.isfinite(lo_t) and math.isfinite(hi_t)):
        raise ValueError(
            f"sigma must be small enough for Corollary 4's window to be a finite double "
            f"(sigma^2 eps / H <= 1.8e308); got sigma = {sigma!r} with eps = {eps!r}, H = {H}"
        )
    # rounded inwards, past the few ulps of the log, sqrt and products (a sufficient window): the slack of
    # 1e-12 the other way admitted an s just below the lower end, or just above the upper one
    t_lo = max(math.ceil(lo_t * (1 + 1e-14)), H)
    t_hi = math.floor(hi_t * (1 - 1e-14))
    if t_lo > t_hi:
        return None
    return 2 * t_lo + 1, 2 * t_hi + 1


def laplace_pure_sufficient(*, eps, lam, D, log_normalizer_ratio=0.0) -> bool:
    r"""Corollary 1: ``lam D + log(Z_{x'}/Z_x) <= eps`` implies pure ``eps``-LDP under common support.

    ``D`` is the input diameter; with equal normalizers (``log_normalizer_ratio
    = 0``) the condition is ``lam D <= eps``.  Sufficient, not necessary; it
    says nothing when supports differ (then pure LDP fails, Theorem 1).
    """
    eps = check_nonnegative(eps, "eps")
    lam = check_positive(lam, "lam")
    D = check_int(D, "D", minimum=0)
    ratio = check_real(log_normalizer_ratio, "log_normalizer_ratio")
    return lam * D + ratio <= eps
