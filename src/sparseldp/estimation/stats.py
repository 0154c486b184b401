r"""Statistics of an estimated distribution and distances between distributions.

Point statistics
----------------
For a distribution ``p`` on increasing integer values ``v_0 < ... < v_{k-1}``
(a :class:`~sparseldp.estimation.FrequencyEstimate`'s ``p`` and ``values``):

* ``mean = sum_j v_j p_j``, ``var = sum_j (v_j - mean)^2 p_j``;
* ``cdf(x) = P(X <= x) = sum_{v_j <= x} p_j`` (any real ``x``);
* ``range_prob(a, b) = P(a <= X <= b)``;
* ``quantile(q) = min {v_j : cdf(v_j) >= q}`` for ``q`` in ``(0, 1)`` (the
  left-continuous inverse of the CDF, numpy's ``"inverted_cdf"`` rule; the
  median is ``quantile(0.5)``): always one of the values;
* ``quantile(q, method="interpolated")``: the grouped-data rule.  Each value's
  mass is spread uniformly over its cell, from half-way to the value below
  to half-way to the value above (``[v_j - 1/2, v_j + 1/2]`` for consecutive
  integers; the end cells are symmetric about ``v_0`` and ``v_{k-1}``), and the
  quantile is where that piecewise-linear CDF reaches ``q``:
  ``e_j + (q - cdf(v_{j-1})) / p_j (e_{j+1} - e_j)`` with ``v_j`` the
  inverted-CDF quantile and ``e_j, e_{j+1}`` its cell's edges (the textbook
  median of grouped data).  A real number within half a step of the
  inverted-CDF quantile, and a continuous function of ``p``: its bootstrap
  intervals are ordinary intervals like the mean's, where the
  inverted-CDF quantile, a step function of ``p``, needs intervals that are
  sets of values (:meth:`~sparseldp.estimation.intervals.Bootstrap.interval`).

Every function works along the last axis of ``p``, so a ``B x k`` array of
bootstrap replicates gives ``B`` statistics in one call.

Distances
---------
:func:`distance` between two distributions on the same values: total
variation ``TV = (1/2) sum_j |p_j - q_j|``, Wasserstein-1 on the line
``W1 = sum_{j<k-1} |F_p(v_j) - F_q(v_j)| (v_{j+1} - v_j)`` and
Kolmogorov-Smirnov ``KS = max_j |F_p(v_j) - F_q(v_j)|``.

The parametric bootstrap behind the ``ci=`` intervals lives in
:mod:`sparseldp.estimation.intervals`.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_real_array

__all__ = ["cdf", "distance", "mean", "quantile", "range_prob", "var"]

_METRICS = ("tv", "w1", "ks")
_STATS = ("mean", "var", "quantile", "cdf", "range", "p")
# Quantile rules (module docstring): a value of the domain, or the grouped-data interpolation.
QUANTILE_METHODS = ("inverted_cdf", "interpolated")
# Values with cdf within this fraction of q below it count as reaching q (cumsum rounding of a p that sums
# to 1).  Relative, not absolute: a q below any absolute slack would be reached by every value.
_CDF_SLACK = 1e-12


def _reach_level(q):
    """The cdf level that counts as reaching ``q`` (:data:`_CDF_SLACK`)."""
    return q * (1.0 - _CDF_SLACK)


def _stay_level(q):
    """The cdf level that counts as still at or below ``q`` (:data:`_CDF_SLACK`)."""
    return q * (1.0 + _CDF_SLACK)


# -- validation ----------------------------------------------------------------

def _check_dist(p, name: str) -> np.ndarray:
    arr = check_real_array(p, name, "an array of probabilities")
    if arr.ndim == 0 or arr.shape[-1] == 0:
        raise ValueError(f"{name} must be a non-empty array of probabilities; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = np.ravel(arr)[np.argmax(~np.isfinite(np.ravel(arr)))]
        raise ValueError(f"{name} must have finite entries >= 0; got {float(bad)!r}")
    if np.any(arr < 0):
        raise ValueError(f"{name} must have finite entries >= 0; got {float(arr.min())!r}")
    s = arr.sum(axis=-1)
    if np.any(np.abs(s - 1.0) > 1e-6):
        bad = float(np.ravel(s)[np.argmax(np.ravel(np.abs(s - 1.0)))])
        raise ValueError(f"{name} must sum to 1 (within 1e-6) along its last axis; got a sum of {bad!r}")
    return arr


def _check_values(values, k: int) -> np.ndarray:
    if values is None:
        return np.arange(k, dtype=np.int64)
    if isinstance(values, (str, bytes)):
        raise TypeError(f"values must be an array of increasing numbers; got str {values!r}")
    v = np.asarray(values)
    if v.dtype == bool or not (np.issubdtype(v.dtype, np.integer) or np.issubdtype(v.dtype, np.floating)):
        raise TypeError(f"values must be an array of increasing numbers; got dtype {v.dtype}")
    if v.ndim != 1 or v.size != k:
        raise ValueError(f"values must be a 1-D array of length {k} (the length of p); got shape {v.shape}")
    # compared, not differenced: np.diff wraps around on unsigned and overflows on extreme int64 values
    if not np.all(np.isfinite(v)) or np.any(v[1:] <= v[:-1]):
        raise ValueError("values must be finite and strictly increasing")
    if v.dtype.kind == "u":
        if v.size and v[-1] > np.iinfo(np.int64).max:
            raise ValueError(f"values must fit in int64; got {int(v[-1])}")
        v = v.astype(np.int64)
    return v


def _check_q(q) -> np.ndarray:
    arr = _check_point(q, "q")
    if not np.all((arr > 0) & (arr < 1)):
        bad = np.ravel(arr)[np.argmax(np.ravel(~((arr > 0) & (arr < 1))))]
        raise ValueError(f"q must lie in (0, 1); got {float(bad)!r}")
    return arr


def _check_point(x, name: str) -> np.ndarray:
    arr = check_real_array(x, name)
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} must not be nan")
    return arr


def _check_quantile_method(method) -> str:
    if not isinstance(method, str):
        raise TypeError(f"method must be 'inverted_cdf' or 'interpolated'; got {type(method).__name__} {method!r}")
    if method not in QUANTILE_METHODS:
        raise ValueError(f"method must be 'inverted_cdf' or 'interpolated'; got {method!r}")
    return method


def _scalar(out):
    return float(out) if np.ndim(out) == 0 else out


def _evaluate(stat: str, P: np.ndarray, values: np.ndarray, kw: dict):
    """The statistic ``stat`` (keywords ``kw``) of each row of ``P`` (or of one ``p``) on ``values``: the
    argument checks and arithmetic shared by the bootstrap's and the profile's intervals."""
    if not isinstance(stat, str):
        raise TypeError(f"stat must be one of {', '.join(map(repr, _STATS))}; got {type(stat).__name__}")
    if stat not in _STATS:
        raise ValueError(f"stat must be one of {', '.join(map(repr, _STATS))}; got {stat!r}")
    need = {"mean": (), "var": (), "p": (), "quantile": ("q",), "cdf": ("x",), "range": ("a", "b")}[stat]
    optional = ("method",) if stat == "quantile" else ()
    if not set(need) <= set(kw) <= set(need) | set(optional):
        raise TypeError(f"stat={stat!r} takes keyword arguments {need + optional or 'none'}; "
                        f"got {tuple(kw) or 'none'}")
    if stat == "mean":
        return _mean(P, values)
    if stat == "var":
        return _var(P, values)
    if stat == "p":
        return P
    if stat == "quantile":
        if _check_quantile_method(kw.get("method", "inverted_cdf")) == "interpolated":
            return _quantile_interp(P, values, _check_q(kw["q"]))
        return _quantile(P, values, _check_q(kw["q"]))
    if stat == "cdf":
        return _cdf(P, values, _check_point(kw["x"], "x"))
    a, b = _check_range(kw["a"], kw["b"])
    return _range(P, values, a, b)


# -- distances -------------------------------------------------------------------

def distance(p, q, metric: str = "tv", *, values=None):
    """Distance between two distributions on the same increasing values.

    Parameters
    ----------
    p, q : array of float, last axis of length k
        Probabilities (``>= 0``, summing to 1 within 1e-6); leading axes broadcast.
    metric : {"tv", "w1", "ks"}
        ``"tv"``: total variation ``(1/2) sum |p - q|`` (in ``[0, 1]``);
        ``"w1"``: Wasserstein-1 on the line, ``sum_j |F_p(v_j) - F_q(v_j)| (v_{j+1} - v_j)``
        (in the unit of ``values``); ``"ks"``: Kolmogorov-Smirnov ``max_j |F_p(v_j) - F_q(v_j)|``.
    values : 1-D increasing array of length k, optional
        Where the mass sits (default ``0..k-1``; only ``"w1"`` depends on it).

    Returns
    -------
    float (or an array over the leading axes).
    """
    if not isinstance(metric, str):
        raise TypeError(f"metric must be 'tv', 'w1' or 'ks'; got {type(metric).__name__} {metric!r}")
    if metric not in _METRICS:
        raise ValueError(f"metric must be 'tv', 'w1' or 'ks'; got {metric!r}")
    p = _check_dist(p, "p")
    q = _check_dist(q, "q")
    if p.shape[-1] != q.shape[-1]:
        raise ValueError(f"p and q must have the same length; got {p.shape[-1]} and {q.shape[-1]}")
    v = _check_values(values, p.shape[-1])
    if metric == "tv":
        return _scalar(0.5 * np.abs(p - q).sum(axis=-1))
    dF = np.abs(np.cumsum(p, axis=-1) - np.cumsum(q, axis=-1))
    if metric == "ks":
        return _scalar(dF.max(axis=-1))
    steps = v[1:].astype(float) - v[:-1].astype(float)  # in floats: an int64 difference can overflow
    return _scalar((dF[..., :-1] * steps).sum(axis=-1))


# -- point statistics (along the last axis) ------------------------------------------

def mean(p, values=None):
    """``sum_j v_j p_j``."""
    p = _check_dist(p, "p")
    return _scalar(_mean(p, _check_values(values, p.shape[-1])))


def var(p, values=None):
    """``sum_j (v_j - mean)^2 p_j`` (the variance of the distribution, not of an estimator)."""
    p = _check_dist(p, "p")
    return _scalar(_var(p, _check_values(values, p.shape[-1])))


def quantile(p, q, values=None, *, method: str = "inverted_cdf"):
    """The ``q``-quantile for ``q`` in (0, 1) (scalar or array; output axes ``p.shape[:-1] + q.shape``).

    ``method="inverted_cdf"`` (default): ``min {v_j : cdf(v_j) >= q}``, a value of
    the domain.  ``method="interpolated"``: the grouped-data rule of the module
    docstring, a real number in the inverted-CDF quantile's cell.
    """
    p = _check_dist(p, "p")
    v = _check_values(values, p.shape[-1])
    if _check_quantile_method(method) == "interpolated":
        return _scalar(_quantile_interp(p, v, _check_q(q)))
    return _scalar(_quantile(p, v, _check_q(q)))


def cdf(p, x, values=None):
    """``P(X <= x)`` for real ``x`` (scalar or array; output axes ``p.shape[:-1] + x.shape``)."""
    p = _check_dist(p, "p")
    return _scalar(_cdf(p, _check_values(values, p.shape[-1]), _check_point(x, "x")))


def range_prob(p, a, b, values=None):
    """``P(a <= X <= b)`` (``a <= b``, scalars or broadcasting arrays)."""
    p = _check_dist(p, "p")
    a, b = _check_range(a, b)
    return _scalar(_range(p, _check_values(values, p.shape[-1]), a, b))


def _check_range(a, b):
    a, b = _check_point(a, "a"), _check_point(b, "b")
    try:
        a, b = np.broadcast_arrays(a, b)
    except ValueError:
        raise ValueError(f"a and b must be scalars or arrays that broadcast together; got shapes {a.shape} "
                         f"and {b.shape}") from None
    if np.any(a > b):
        i = int(np.argmax(np.ravel(a > b)))
        raise ValueError(f"a must be <= b; got a = {float(np.ravel(a)[i])!r} > b = {float(np.ravel(b)[i])!r}")
    return a, b


def _relative(v):
    """``(v0, v - v0)``, the second in float: the values relative to the first, formed in exact integer
    arithmetic for integer values (so that statistics of a domain far from 0, up to the +-2^53 that
    ``model.check_exact_domain`` allows, keep their precision), ``v0`` a Python number."""
    if v.size == 0:
        return 0, v.astype(float)
    if v.dtype.kind == "i" and int(v[-1]) - int(v[0]) < 2**63:  # the int64 difference cannot overflow
        return int(v[0]), (v - v[0]).astype(float)
    vf = v.astype(float)
    return float(vf[0]), vf - vf[0]


def _mean(p, v):
    v0, d = _relative(v)
    return v0 + p @ d


def _var(p, v):
    _, d = _relative(v)  # the variance does not depend on the origin
    m = p @ d
    e = d - np.asarray(m)[..., None]
    return np.maximum((p * e * e).sum(axis=-1), 0.0)


def _cum(p):
    """CDF at each value, renormalized so that the last entry is exactly 1."""
    c = np.cumsum(p, axis=-1)
    return c / c[..., -1:]


def _reaching(F, qf):
    """Index of the first value whose cdf ``F`` (last axis) reaches each ``q`` of the flat ``qf``: the number
    of values whose cdf is still below it (capped at the last value); shape ``F.shape[:-1] + qf.shape``."""
    return np.minimum((F[..., None, :] < _reach_level(qf)[:, None]).sum(axis=-1), F.shape[-1] - 1)


def _quantile(p, v, q):
    out = v[_reaching(_cum(p), np.ravel(q))]
    return out.reshape(p.shape[:-1] + q.shape)


def _edges(v) -> np.ndarray:
    """Cell edges of the grouped-data rule: midpoints between values, end cells symmetric (``k + 1`` edges)."""
    vf = np.asarray(v, dtype=float)
    if vf.size == 1:
        return np.array([vf[0] - 0.5, vf[0] + 0.5])
    mid = 0.5 * (vf[1:] + vf[:-1])
    return np.concatenate([[vf[0] - (mid[0] - vf[0])], mid, [vf[-1] + (vf[-1] - mid[-1])]])


def _quantile_interp(p, v, q):
    F = _cum(p)
    P = p / p.sum(axis=-1, keepdims=True)
    qf = np.ravel(q)
    idx = _reaching(F, qf)  # (..., nq)
    F_below = np.take_along_axis(F, idx, axis=-1) - np.take_along_axis(P, idx, axis=-1)
    mass = np.take_along_axis(P, idx, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(mass > 0, (qf - F_below) / mass, 1.0)
    e = _edges(v)
    out = e[idx] + np.clip(frac, 0.0, 1.0) * (e[idx + 1] - e[idx])
    return out.reshape(p.shape[:-1] + q.shape)


def _cdf(p, v, x):
    F = np.concatenate([np.zeros(p.shape[:-1] + (1,)), _cum(p)], axis=-1)
    idx = np.searchsorted(v, np.ravel(x), side="right")
    return F[..., idx].reshape(p.shape[:-1] + x.shape)


def _range(p, v, a, b):
    F = np.concatenate([np.zeros(p.shape[:-1] + (1,)), _cum(p)], axis=-1)
    hi = np.searchsorted(v, np.ravel(b), side="right")
    lo = np.searchsorted(v, np.ravel(a), side="left")
    return np.maximum(F[..., hi] - F[..., lo], 0.0).reshape(p.shape[:-1] + a.shape)
