r"""The classic full-support baselines (randomized response, geometric, discrete Gaussian) and
the paper's sparse windows, as channels on ``a..b`` (see :mod:`sparseldp.baselines`).

All pmfs are built in log space in closed form; nothing is truncated except
where a docstring says so and bounds the omitted mass.  The full-support
baselines are dense ``k x k`` channels, ``k = b - a + 1``.
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_nonnegative, check_positive
from ..channel import SparseChannel, check_domain, check_entries

__all__ = ["randomized_response", "geometric", "discrete_gaussian", "sparse_laplace", "sparse_gaussian"]

_GEOMETRIC_MODES = ("clamp", "fold")
# exp(-700) < 1e-304: the relative size of every mass left out of a discrete-Gaussian tail sum
_TAIL_LOG_REL = 700.0
_CHUNK = 1 << 20
# Largest discrete-Gaussian sigma: the tail sums take O(sigma) time (about 8 s at the cap).
_SIGMA_MAX = 1e7


def _dense_parts(k: int, m: int | None = None):
    """CSR ``indptr`` and ``indices`` of a dense ``k x m`` channel (``m = k`` by default)."""
    m = k if m is None else m
    indptr = np.arange(k + 1, dtype=np.int64) * m
    indices = np.tile(np.arange(m, dtype=np.int64), k)
    return indptr, indices


def randomized_response(*, eps, domain) -> SparseChannel:
    r"""k-ary randomized response on ``a..b`` (``k = b - a + 1``).

    .. math::

        Q(y \mid x) = \begin{cases} e^\varepsilon / (e^\varepsilon + k - 1) & y = x \\
                                    1 / (e^\varepsilon + k - 1) & y \ne x \end{cases}

    Pure ``eps``-LDP exactly (for ``k >= 2``): ``pure_epsilon() == eps`` for any
    range ``H >= 1``.  Logs are formed as ``-log1p((k-1) e^{-eps})`` and
    ``-eps - log1p((k-1) e^{-eps})`` (no cancellation).
    """
    eps = check_nonnegative(eps, "eps")
    a, b = check_domain(domain)
    k = b - a + 1
    check_entries(k, k, f"domain ({a}, {b}) (randomized response is dense)")
    log_same = -math.log1p((k - 1) * math.exp(-eps))
    log_other = -eps + log_same
    indptr, indices = _dense_parts(k)
    logw = np.full((k, k), log_other)
    np.fill_diagonal(logw, log_same)
    x = np.arange(a, b + 1, dtype=np.int64)
    # the exact channel's columns take two values in the ratio e^eps: its pure epsilon is eps exactly
    meta = {"family": "rr", "param": ("eps", eps), "domain": (a, b), "_built_domain": (a, b), "_pure_eps_up": eps}
    return SparseChannel._from_log_parts(indptr, indices, logw.ravel(), (k, k), x, x, meta)


def geometric(*, lam, domain, mode="clamp") -> SparseChannel:
    r"""Full-support discrete Laplace (two-sided geometric) noise on ``a..b``.

    ``Y = x + Z`` with ``P(Z = z) = c q^{|z|}`` on all of ``Z``,
    ``q = e^{-lam}``, ``c = (1 - q)/(1 + q)``, then mapped back into ``[a, b]``:

    * ``mode="clamp"``: values below ``a`` become ``a``, above ``b`` become ``b``:

      .. math::

          Q(y \mid x) = c\,q^{|y - x|} \ (a < y < b), \qquad
          Q(a \mid x) = \frac{q^{x - a}}{1 + q}, \qquad Q(b \mid x) = \frac{q^{b - x}}{1 + q}.

      Pure epsilon ``lam * min(H, b - a)`` (attained at the clamped ends).
    * ``mode="fold"``: reflection at the half-integers ``a - 1/2`` and
      ``b + 1/2`` (``a - 1 -> a``, ``b + 1 -> b``, period ``2k``,
      ``k = b - a + 1``), summed in closed form over all images:

      .. math::

          Q(y \mid x) = c\,[S(y - x) + S(2a - 1 - y - x)], \qquad
          S(u) = \frac{q^{r} + q^{2k - r}}{1 - q^{2k}},\ r = u \bmod 2k.

      Folding is post-processing of ``x + Z``, so the pure epsilon is at most
      ``lam * min(H, b - a)`` (the exact value comes from ``pure_epsilon``).

    Exact closed forms in log space: no truncation error.
    """
    lam = check_positive(lam, "lam")
    a, b = check_domain(domain)
    if mode not in _GEOMETRIC_MODES:
        raise ValueError(f"mode must be 'clamp' or 'fold'; got {mode!r}")
    k = b - a + 1
    check_entries(k, k, f"domain ({a}, {b}) (the geometric mechanism is dense)")
    x = np.arange(a, b + 1, dtype=np.int64)
    log_c = math.log(-math.expm1(-lam)) - math.log1p(math.exp(-lam))
    X = x[:, None]
    Y = x[None, :]
    if mode == "clamp":
        logw = log_c - lam * np.abs(Y - X).astype(float)
        if k == 1:
            logw[:] = 0.0
        else:
            log1pq = math.log1p(math.exp(-lam))
            logw[:, 0] = -lam * (x - a) - log1pq
            logw[:, -1] = -lam * (b - x) - log1pq
    else:
        period = 2 * k
        log_den = math.log(-math.expm1(-lam * period))

        def log_s(u):
            r = np.mod(u, period).astype(float)
            return np.logaddexp(-lam * r, -lam * (period - r)) - log_den

        logw = log_c + np.logaddexp(log_s(Y - X), log_s(2 * a - 1 - Y - X))
    indptr, indices = _dense_parts(k)
    meta = {"family": f"geometric-{mode}", "param": ("lam", lam), "domain": (a, b), "_built_domain": (a, b),
            "mode": mode}
    return SparseChannel._from_log_parts(indptr, indices, logw.ravel(), (k, k), x, x, meta)


def _inv_two_sigma2(sigma: float) -> float:
    """``1 / (2 sigma^2)``; ``inf`` when ``sigma^2`` underflows (the noise is then a point mass)."""
    den = 2.0 * sigma * sigma
    return 1.0 / den if den > 0 else math.inf


def _log_g(z, c: float):
    """``-z^2 c`` with ``log g(0) = 0`` exactly, also when ``c = inf`` (sigma^2 underflowed)."""
    with np.errstate(invalid="ignore"):
        return np.where(z == 0, 0.0, -(z * z) * c)


def _log_gauss_tails(sigma: float, D: int) -> np.ndarray:
    r"""``log T(j)``, ``T(j) = sum_{z >= j} e^{-z^2/(2 sigma^2)}``, for ``j = 0..D``.

    The sum is cut at ``z = D + L`` with
    ``L >= sigma sqrt(2 (700 + log(1 + sigma sqrt(pi/2))))``.  Since
    ``sum_{z > K} g(z) <= g(K+1) (1 + sigma sqrt(pi/2))`` (integral bound) and
    ``T(j) >= g(j)`` with ``(K+1)^2 - j^2 >= L^2``, the omitted mass is below
    ``e^{-700} < 1e-304`` times every ``T(j)``: far below double precision.
    """
    c = _inv_two_sigma2(sigma)
    L = int(math.ceil(sigma * math.sqrt(2.0 * (_TAIL_LOG_REL + math.log1p(sigma * math.sqrt(math.pi / 2.0)))))) + 1
    # log sum_{z = D+1}^{D+L} g(z), accumulated in chunks (bounded memory)
    acc = -np.inf
    start = D + 1
    stop = D + L
    while start <= stop:
        z = np.arange(start, min(stop, start + _CHUNK - 1) + 1, dtype=float)
        acc = np.logaddexp(acc, np.logaddexp.reduce(_log_g(z, c)))
        start += _CHUNK
    j = np.arange(D + 1, dtype=float)
    terms = np.concatenate([_log_g(j, c), [acc]])
    return np.logaddexp.accumulate(terms[::-1])[::-1][: D + 1]


def discrete_gaussian(*, sigma, domain) -> SparseChannel:
    r"""Full-support discrete Gaussian noise clamped to ``a..b``.

    ``Y = clamp(x + Z, a, b)`` with ``P(Z = z) = e^{-z^2/(2 sigma^2)} / N`` on all
    of ``Z``, ``N = sum_z e^{-z^2/(2 sigma^2)}``:

    .. math::

        Q(y \mid x) = \frac{e^{-(y-x)^2/(2\sigma^2)}}{N}\ (a < y < b), \quad
        Q(a \mid x) = \frac{T(x - a)}{N}, \quad Q(b \mid x) = \frac{T(b - x)}{N},

    with ``T(j) = sum_{z >= j} e^{-z^2/(2 sigma^2)}`` and ``N = 2 T(0) - 1``.
    Tails are summed in log space over ``z <= (b - a) + L``, where
    ``L = ceil(sigma sqrt(2 (700 + log(1 + sigma sqrt(pi/2)))))``: the omitted
    mass is below ``1e-300`` (indeed ``e^{-700}``) *relative to each tail*, so
    every probability is exact to double precision.  Time ``O(k^2 + sigma)``.

    The pure epsilon is finite (full support) but has no simple closed form;
    :meth:`SparseChannel.pure_epsilon` evaluates it exactly.
    """
    sigma = check_positive(sigma, "sigma")
    if sigma > _SIGMA_MAX:
        raise ValueError(f"sigma must be a real number in (0, 1e7] for the discrete Gaussian (its tails are "
                         f"summed term by term, O(sigma) work); got {sigma!r}")
    a, b = check_domain(domain)
    k = b - a + 1
    check_entries(k, k, f"domain ({a}, {b}) (the discrete Gaussian is dense)")
    x = np.arange(a, b + 1, dtype=np.int64)
    D = b - a
    log_t = _log_gauss_tails(sigma, D)
    # N = 2 T(0) - g(0) = 2 T(0) - 1
    log_n = float(log_t[0] + math.log(2.0 - math.exp(-log_t[0])))
    c = _inv_two_sigma2(sigma)
    diff = (x[None, :] - x[:, None]).astype(float)
    logw = _log_g(diff, c) - log_n
    if k == 1:
        logw[:] = 0.0
    else:
        logw[:, 0] = log_t[x - a] - log_n
        logw[:, -1] = log_t[b - x] - log_n
    indptr, indices = _dense_parts(k)
    meta = {"family": "discrete-gaussian", "param": ("sigma", sigma), "domain": (a, b), "_built_domain": (a, b)}
    return SparseChannel._from_log_parts(indptr, indices, logw.ravel(), (k, k), x, x, meta)


def sparse_laplace(*, lam, s, domain, window="clipped") -> SparseChannel:
    """The paper's s-sparse discrete-Laplace mechanism on ``a..b``: :meth:`SparseChannel.laplace`.

    Default ``window="clipped"`` (outputs stay in ``a..b``, like the other
    baselines).  Never pure LDP when two inputs in range have different
    windows (Theorem 1).
    """
    return SparseChannel.laplace(lam=lam, s=s, domain=domain, window=window)


def sparse_gaussian(*, sigma, s, domain, window="clipped") -> SparseChannel:
    """The paper's s-sparse Gaussian mechanism on ``a..b``: :meth:`SparseChannel.gaussian`."""
    return SparseChannel.gaussian(sigma=sigma, s=s, domain=domain, window=window)
