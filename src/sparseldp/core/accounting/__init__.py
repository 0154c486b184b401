r"""Exact privacy accounting for the radius-truncated mechanisms on Y = Z.

For an s-sparse mechanism with window radius ``t = (s-1)/2`` and kernel ``w``,
the ordered defect between inputs ``0`` and ``h`` (Theorems 3 and 9) is

.. math::

    \delta_h(\varepsilon) = \frac{1}{C_t}\Big[\sum_{k=-t}^{h-t-1} w(k)
        + \sum_{k=h-t}^{t} [w(k) - e^{\varepsilon} w(k-h)]_+\Big],
    \qquad 0 \le h \le 2t,

and exactly 1 for ``h > 2t``.  The first sum is the *support leakage*, the
second the *overlap excess* (Remark 2).

Both kernels are symmetric and log-concave, so the overlap loss
``L_h(k) = log w(k) - log w(k-h)`` is nonincreasing in ``k``: the set where it
exceeds ``eps`` is a prefix ``h-t <= k <= K_h`` (for the Gaussian this is
Proposition 2's ``k < kappa_h``).  Hence

.. math::

    \text{overlap} = \frac{1}{C_t}\Big[\sum_{k=h-t}^{K_h} w(k)
        - e^{\varepsilon}\sum_{k=-t}^{K_h-h} w(k)\Big],

two range sums, each O(1) from closed forms (Laplace) or a log suffix-sum array
(Gaussian), after an O(t) (Gaussian) or O(1) (Laplace) set-up, never O(s) per
separation.

The worst separation (a lemma)
------------------------------
For a log-concave kernel with positive weights on its window, ``delta_h(eps)``
is nondecreasing in ``h`` -- strictly increasing for ``0 <= h <= 2t + 1`` -- so

.. math::

    \delta^*(\varepsilon; H) = \max_{1 \le h \le H} \delta_h(\varepsilon)
        = \delta_{\min(H,\,2t+1)}(\varepsilon).

*Proof.*  Let ``F(c) = sum_{y <= c} M(y | 0)`` and ``g = e^eps >= 1``.  By the
prefix structure above (and because the leakage outputs ``y < h - t`` are all
excess points) the excess set of separation ``h >= 1`` is a half-line
``{y <= c_h}`` within the window, so ``delta_h = F(c_h) - g F(c_h - h)``.  The
same half-line is one event for the pair ``(0, h')`` with ``h' > h``, hence
``delta_{h'} >= F(c_h) - g F(c_h - h') >= delta_h`` since ``F`` is
nondecreasing (the hockey-stick divergence is a supremum over events).  For
``h' = h + 1 <= 2t + 1`` the gain is strict: if ``c_h >= h - t`` it is at
least ``g M(c_h - h | 0) > 0`` (``-t <= c_h - h <= t``); otherwise
``c_h = h - t - 1`` and the half-line ``{y <= h - t}`` gives
``delta_{h+1} >= F(h - t) = delta_h + M(h - t | 0) > 0``.  ``delta_0 = 0``
and ``delta_h = 1`` for ``h > 2t``.  []

This is the classical monotonicity of the privacy profile of a location family
with monotone likelihood ratio; it rests on log-concavity alone (the same
assumption as the prefix structure).  So :func:`delta_profile` evaluates one
separation per ``eps`` for :class:`~sparseldp.core.kernels.LogConcaveKernel`
s -- O(1) whatever ``H`` -- and the worst separation it reports is
``min(H, 2t + 1)`` (the smallest maximizer of the exact values).  Kernels
without the prefix structure still take the maximum over every ``h``.  Being
the exact value at one separation, the bounds stay rigorous: the upper bound
at ``h = min(H, 2t + 1)`` is at least ``delta_h`` there, which is ``delta*``.

Scalars at function-call cost
-----------------------------
One ``(eps, h)`` pair through numpy costs about 100 numpy calls of ~1 us each.
For a Python float ``eps`` and int ``h`` (:func:`defect_scalar`; also
:func:`delta_profile`, :func:`certified_delta_star` and
:func:`epsilon_for_delta` with one ``eps``) the log-concave kernels' *scalar
twins* repeat the same formulas, operation for operation, on Python floats,
calling numpy's own elementary functions on one float
(:mod:`sparseldp.core.kernels.rounding`, "scalar twins"), and give *the same
numbers* as the array path, bit for bit (so the bounds are rigorous for the
same reasons).  What does not depend on ``eps`` is computed once and kept on
the kernel: the support leakage per separation, and the overlap's range sums
per last excess index ``K`` (:meth:`~sparseldp.core.kernels.LogConcaveKernel.overlap_s`;
bounded memory) -- the values the operations give, so nothing changes but
the cost: about 2 microseconds for a value, 3 to 4 for an upper bound
(``tests/test_interactive.py`` checks hits against misses and the array path;
benchmarks/bench_interactive.py measures both).  Only the root search inside
:func:`epsilon_for_delta` uses the C library's functions (nearest values are
all it needs; its answer is certified with the twins).

Which way the numbers err
-------------------------
All sums are carried in log space (:mod:`sparseldp.core.kernels`).  Two kinds of
value come out of the same formulas:

* :func:`defect_parts` / :func:`delta_profile` (``mode="near"``): ordinary
  round-to-nearest evaluation.  Not a bound: it may lie on either side of the
  exact value.  Measured against 80-digit references (12,000 random cases with
  ``s <= 2001`` and 80 with ``s`` up to ``2 * 10^5``, both families, including
  ``eps`` within rounding of an overlap loss and ``sigma >= 154``): within
  ``1.3e-15`` absolute of the exact value, on either side, plus about
  ``1e-17 eps`` for the Gaussian family with very large ``eps`` (``8.7e-15`` was
  seen at ``eps ~ 870``).  The Laplace excess set is decided exactly and its
  overlap is a sum of products of nonnegative factors; the Gaussian suffix
  sums are compensated, so the error no longer grows with ``s``.
* :func:`defect_bounds` / :func:`delta_profile` with ``mode="up"`` (``"dn"``):
  a rigorous upper (lower) bound on the exact value, from outward-rounded
  arithmetic and a priori error bounds on the kernel's sums (never below
  (above) the exact value in the same measurements).  Every certified answer
  of the package (``epsilon``, ``is_ldp``, the designers) compares the *upper*
  bound with its target, so no certificate claims a ``delta`` below the exact
  one.  The upper bound exceeds the exact value by at most about ``2.5e-14``
  (measured), plus about ``2.5e-16 eps`` for the Gaussian family (the factor
  ``e^eps`` is formed in log space), and is exactly 1.0 when the exact value
  is 1 (``h > 2t``).

Kernels without the prefix structure (the generic path)
-------------------------------------------------------
Kernels that are not a :class:`~sparseldp.core.kernels.LogConcaveKernel` (e.g.
:class:`~sparseldp.core.kernels.GeneralKernel`: staircases, zeros inside the
window) are accounted by summing the definition directly:
``C_t delta_h = sum_{y=-t}^{t} [w(|y|) - e^eps w(|y - h|)]_+`` with
``w(|y - h|) = 0`` off ``S(h)``, so the terms with ``y < h - t`` are the support
leakage and the others the overlap excess.  O(s) per separation, vectorized
over (eps, h) pairs; log-concavity is never used.  Every kernel offers it
(``method="generic"``), which the tests use to cross-check the closed forms.

* ``"near"``: the sums of the rounded terms; each term errs by about
  ``u (w(y) + e^eps w(y-h))``, so the value is within a few ``u`` of the exact
  one relative to ``C_t`` (plus the kernel's own weight rounding).
* ``"up"`` (``"dn"``): rigorous.  The kernel gives elementwise bounds on its
  weights (:meth:`~sparseldp.core.kernels.Kernel.weights`, exact for a general
  kernel); ``e^eps`` is enclosed by ``exp_dn``/``exp_up`` (exactly 1 at
  ``eps = 0``); each term ``a - e^eps b`` is formed with the product rounded
  inward and the difference outward (``np.nextafter``); each sum of ``n``
  nonnegative terms is widened by the factor ``1 +- 2 n u``, which bounds
  the error of any summation order (Higham, Section 4.2); the normalizer is
  bounded the other way and the quotient rounded outward.  ``h = 0`` gives
  exactly 0, ``h > 2t`` exactly 1.

For a rigorous bound on the realized (quantized) sampler, see :mod:`sparseldp.sampling`.

Layout of the package
---------------------
* this module - the certified inversion :func:`epsilon_for_delta` (with the
  per-separation set-up it caches on the kernel and the segment search
  :func:`_epsilon_segments`), and :func:`certified_delta_star` and
  :func:`leak_star`, the certificates the designers' searches ask for;
* :mod:`._array` - the array path: :class:`Defect`, :func:`defect_parts`,
  :func:`defect_bounds`, :func:`delta_profile` and :func:`max_overlap_loss`,
  through a log-concave kernel's closed forms or the generic direct sum;
* :mod:`._scalar` - the scalar twins of one ``(eps, h)`` pair
  (:func:`defect_scalar`; "Scalars at function-call cost" above);
* :mod:`._segments` - the root search on the overlap's segments: the segment
  table, the Newton search over segments, the certified bisection.

Imports point one way: ``_scalar`` < ``_array`` < ``_segments`` < this module.
"""

from __future__ import annotations

import math

import numpy as np

from ..kernels.rounding import _s_exp
from ...errors import InfeasibleError
from ._array import Defect, _uses_prefix, defect_bounds, defect_parts, delta_profile, max_overlap_loss
from ._scalar import _upper_total, defect_scalar
from ._segments import _SEGMENT_STEPS, _bisect_certified, _near_margin, _newton_root, _segment_table, _table_root

__all__ = [
    "Defect",
    "defect_parts",
    "defect_bounds",
    "leak_star",
    "certified_delta_star",
    "delta_profile",
    "epsilon_for_delta",
    "max_overlap_loss",
]


def epsilon_for_delta(kernel, delta: float, H: int, *, rtol: float = 1e-12) -> float:
    """Smallest ``eps >= 0`` (to ``rtol``) whose *upper bound* ``delta_star_upper(eps) <= delta``.

    So the exact ``delta_star`` at the returned ``eps`` is ``<= delta``: the
    answer is a certificate.  ``delta >= 1`` is always met (``eps = 0``).
    ``delta_star`` is continuous and nonincreasing in ``eps`` and equals the
    worst support leakage once ``eps`` reaches the largest overlap loss (where
    the exactly decided excess sets are empty), so the target is feasible iff
    that leakage is ``<= delta``.  Every returned ``eps`` has been checked
    with the upper bound.

    *Log-concave kernels* (:func:`_epsilon_segments`): one separation
    ``h = min(H, 2t + 1)`` matters (the lemma of the module docstring).  As a
    function of ``g = e^eps``, ``delta_h`` is convex and piecewise linear: on
    the segment where the excess set is ``[h - t, K]`` it is
    ``leak + A_K - g B_K`` with ``A_K = sum_{k=h-t}^{K} w(k) / C_t`` and
    ``B_K = sum_{k=-t}^{K-h} w(k) / C_t``, and the segment ends are the overlap
    losses ``L_h(K+1) <= eps < L_h(K)``.  The segment holding the root is
    located by bisection over the overlap's values at the segment ends
    (:func:`_segment_table`: computed once per separation in O(s), kept on the
    kernel) and the root is the segment line's, in closed form,
    ``eps = log(A_K - (delta - leak)) - log B_K``: O(log s), a microsecond.
    Separations with more than ``_TABLE_MAX`` segments search segment by
    segment instead (:func:`_newton_root`): each visited segment's line gives
    its root in closed form (a lower bound on the root, by convexity), Newton
    steps on ``log(delta_h - leak)`` move between segments, and a bracket
    guards both; a handful of O(1) evaluations.  The candidate
    ``root (1 + rtol / 2)`` is then checked once with the upper bound (the
    scalar twins: the number :meth:`delta_star_upper` returns there); if the
    bound is still above ``delta`` (its slack moves the answer by more than
    ``rtol``), the search steps up from there and bisects on the upper bound
    to ``rtol``, like the general path.

    *Other kernels*: bisection on the nearest values, then up until the
    rigorous bound meets the target, then bisection on the bound.

    Raises :class:`InfeasibleError` when the leakage exceeds ``delta`` (then no
    ``eps`` works), or when it is within rounding of ``delta`` so that no
    ``eps`` can be *certified* (the message says which).
    """
    if delta >= 1.0:
        return 0.0
    if _uses_prefix(kernel, "auto"):
        got = _epsilon_segments(kernel, float(delta), min(H, 2 * kernel.t + 1), rtol)
        if got is not None:
            return got
    # general kernels, or a case the segment search declined

    def upper(e):
        return float(delta_profile(kernel, e, H, "up")[0])

    def near(e):
        return float(delta_profile(kernel, e, H, "near")[0])

    leak_up = upper(np.inf)
    if leak_up > delta:
        leak_lo = float(delta_profile(kernel, np.inf, H, "dn")[0])
        if leak_lo > delta:
            raise InfeasibleError(
                f"the mass no eps can cover (support leakage, and outputs of zero weight under the neighbour) "
                f"is {leak_lo:.6g} > delta = {delta:g} at some separation "
                f"h <= H = {H}: no eps makes this mechanism ({kernel!r}) (eps, delta)-LDP"
            )
        raise InfeasibleError(
            f"the support leakage (in [{leak_lo:.17g}, {leak_up:.17g}]) is within rounding of "
            f"delta = {delta!r} at some h <= H = {H}: no eps can be certified for this mechanism ({kernel!r})"
        )
    if upper(0.0) <= delta:
        return 0.0
    # feasible end: at eps >= the largest overlap loss the overlap is empty
    hi = min(max(max_overlap_loss(kernel, H), 0.0), float(np.finfo(float).max))
    while upper(hi) > delta:
        hi = 2 * hi + 1e-300
        if not np.isfinite(hi):
            raise InfeasibleError(
                f"no finite eps makes this mechanism ({kernel!r}) (eps, {delta:g})-LDP on range H = {H}: "
                "its overlap loss exceeds every double"
            )
    # phase 1: bisection on the nearest values, inside [0, hi]
    lo, mid_hi = 0.0, hi
    if near(0.0) <= delta:
        mid_hi = 0.0
    else:
        for _ in range(200):
            mid = 0.5 * (lo + mid_hi)
            if near(mid) <= delta:
                mid_hi = mid
            else:
                lo = mid
            if mid_hi - lo <= rtol * max(mid_hi, 1e-300):
                break
    # phase 2: the smallest eps >= mid_hi (to rtol) that the upper bound certifies
    if upper(mid_hi) <= delta:
        return float(mid_hi)
    lo = mid_hi
    step = rtol * (mid_hi if mid_hi > 0 else hi)
    while True:
        cand = lo + step
        if cand >= hi:
            cand = hi
        if upper(cand) <= delta:
            hi = cand
            break
        lo = cand
        step *= 4.0
    return float(_bisect_certified(upper, delta, lo, hi, rtol))


# The set-up and the segment search are globals of the package itself, not of ._segments: a test that
# sets ``accounting._TABLE_MAX`` or ``accounting._epsilon_segments`` reaches the code that reads them.
#: Largest number of segments (runs of equal overlap loss) tabulated per separation for ``epsilon``
#: (40 bytes each; at most ``_SETUPS`` separations are kept per kernel: 5 MB at most).
_TABLE_MAX = 1 << 14
_SETUPS = 8


def _epsilon_setup(kernel, h: int):
    """Per-separation constants of the root search (cached on the kernel, a few separations):
    ``(log C, leak, hi, table)`` -- the nearest ``log C_t``, the nearest support leakage, the largest
    overlap loss ``L_h(h - t)`` and the segment table (:func:`_segment_table`, or None)."""
    cache = kernel._cache.setdefault("epsilon_setup", {})
    got = cache.get(h)
    if got is None:
        if len(cache) >= _SETUPS:
            cache.clear()
        t = kernel.t
        log_c = kernel.log_normalizer_bound("near")
        table = _segment_table(kernel, h, log_c) if kernel.segment_count(h) <= _TABLE_MAX else None
        got = cache[h] = (log_c, _s_exp(kernel._range_fast(-t, h - t - 1) - log_c), kernel.loss_s(h, h - t), table)
    return got


def _epsilon_segments(kernel, delta: float, h: int, rtol: float):
    """:func:`epsilon_for_delta` for a log-concave kernel at separation ``h = min(H, 2t + 1)`` (see there).

    The nearest-value root comes from the segment table (:func:`_segment_table`: one bisection
    over the breakpoints and a closed form, O(log s)) when the separation has at most
    ``_TABLE_MAX`` segments, else from the Newton search over segments (:func:`_newton_root`).
    It is then certified once with the rigorous upper bound (the scalar twins).

    Returns the certified ``eps`` (its upper bound checked ``<= delta``), or
    None when the case is not a plain one -- the leakage above ``delta`` or
    within ``1e-9`` (relative) of it, infinite losses, a bracket that does not
    close -- and the caller's general search (with its error messages) takes
    over.
    """
    if not (1 <= h <= 2 * kernel.t and 0.0 < delta < 1.0):
        return None
    log_c, leak, hi, table = kernel._cache.get("epsilon_setup", _NO_SETUP).get(h) or _epsilon_setup(kernel, h)
    # the leakage must be clearly below delta (the nearest value errs by ~1e-15 relative; were it
    # wrong, the certification below would fail and the general search take over)
    if not leak < delta * (1.0 - 1e-9):
        return None
    if not hi > 0.0:  # h = 2t: no overlap excess at any eps >= 0, delta_h = leak
        return 0.0 if defect_scalar(kernel, 0.0, h, "up")[0] <= delta else None
    if not hi < math.inf:
        return None
    log_target = math.log(delta - leak)  # the overlap allowed
    found = _table_root(table, log_target) if table is not None else None
    if found is None:
        found = _newton_root(kernel, h, log_c, log_target, hi, delta, rtol)
        if found is None:
            return None
    root, log_b = found
    if not math.isfinite(root):
        return None
    if root == 0.0 and _upper_total(kernel, 0.0, h) <= delta:
        return 0.0
    # certify: the upper bound just above the nearest-value root
    cand = root * (1.0 + 0.5 * rtol)
    u = _upper_total(kernel, cand, h)
    if u <= delta:
        return cand

    def upper(e):
        return _upper_total(kernel, e, h)

    # the bound's slack moves the answer by more than rtol: step up from cand, then bisect on the bound
    lo = cand
    slope = _s_exp(cand + log_b) if log_b is not None else 0.0  # -d delta_h / d eps there
    step = 2.0 * (u - delta) / slope if slope > 0 else math.inf
    step = max(step, rtol * cand, 1e-300)
    for _ in range(_SEGMENT_STEPS):
        hi = lo + step
        if not math.isfinite(hi):
            return None
        if upper(hi) <= delta:
            break
        lo, step = hi, 4.0 * step
    else:
        return None
    return _bisect_certified(upper, delta, lo, hi, rtol)


_NO_SETUP: dict = {}


def certified_delta_star(kernel, eps, H: int, delta: float) -> float:
    """For searches: a number that is ``<= delta`` only if the rigorous upper bound is.

    The nearest value is computed first; when it exceeds ``delta`` by more than
    any rounding error of this module (``1e-12 + 1e-14 eps + 1e-9 delta``, far
    above the measured ``4e-15 + 2e-15 eps``) it is returned as is (the point is
    not certifiable), otherwise the upper bound is.  So a point is accepted
    (value ``<= delta``) only on the strength of the upper bound; the shortcut
    can at worst pass over a point that is feasible within rounding.  A scalar
    ``eps`` with a log-concave kernel costs two scalar-twin evaluations at
    ``h = min(H, 2t + 1)`` (a few microseconds each).
    """
    if np.ndim(eps) == 0 and _uses_prefix(kernel, "auto"):
        e, h = float(eps), min(H, 2 * kernel.t + 1)
        near = defect_scalar(kernel, e, h, "near")[0]
        if near > delta + _near_margin(delta, e):
            return near
        return defect_scalar(kernel, e, h, "up")[0]
    near = float(delta_profile(kernel, eps, H, "near")[0])
    if near > delta + _near_margin(delta, float(eps)):
        return near
    return float(delta_profile(kernel, eps, H, "up")[0])


def leak_star(kernel, H: int, *, upper: bool = True) -> float:
    """Rigorous upper (lower) bound on the worst support leakage ``max_{1<=h<=H} delta_h(inf)``."""
    return float(delta_profile(kernel, np.inf, H, "up" if upper else "dn")[0])
