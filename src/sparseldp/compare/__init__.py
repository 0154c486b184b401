r"""Which mechanism should I deploy?  Every family at the same guarantee, measured the way users measure.

For a target ``(eps, delta)`` on range ``H`` over a domain ``a..b``,
:func:`compare` calibrates every family of :data:`COMPARE_FAMILIES` to the
target (:mod:`sparseldp.compare.calibration`: every row is a channel on the
domain certified by the same exact accountant, ``delta_star`` a rigorous
upper bound ``<= delta``), simulates the reports of the same people through
each (:mod:`sparseldp.compare.metrics`) and reports, per mechanism:

* ``R1``, ``R2``: per-report distortion ``E|v(Y) - x|``, ``E(v(Y) - x)^2``
  (``v`` the report's value on the input scale, the papers' unbiased estimate
  for Piecewise, Hybrid and Duchi), exact, averaged over the input weights;
* ``tv``, ``w1``: total-variation and Wasserstein-1 (domain units) distance
  between the true histogram and the project's default frequency estimate
  (:func:`sparseldp.estimation.estimate_frequencies`), and ``tv_ems``,
  ``w1_ems`` with EMS (EM with smoothing, how the Square Wave's authors
  estimate; stopped at an estimated ``1e-5`` in TV from its fixed point);
* ``mean_rmse``: root-mean-square error of the estimated mean, estimated as
  a deployment would (:mod:`sparseldp.compare.metrics`): the papers' unbiased
  estimator for Piecewise, Hybrid and Duchi, the report mean for unbiased
  channels -- both exact, no simulation -- else the mean of the EM (maximum
  likelihood) estimate, over the trials, as :func:`sparseldp.estimate_mean`
  does (``mean_rmse_estimate``: the RMSE of the default estimate's mean, for
  every family);
* ``quantile_error``: mean absolute error of the 10, 25, 50, 75 and 90%
  quantiles of the default estimate (domain units).

Truth: a simulated population of ``n`` people drawn from ``population``
(default :func:`default_population`), fresh in every trial, or the user's own
values (``data``: every trial re-privatizes the same people).  Every family
sees the same people; ``rng`` seeds everything (``None``: the operating
system's secure source, not reproducible; a seed is appropriate here because
a simulation protects nothing), and each family's draws depend only on the
seed, the trial and the family, not on which other families are compared.

:meth:`Comparison.recommend` names the best mechanism for a metric with the
numbers behind it; :meth:`Comparison.spec` writes the winner as a mechanism
spec for ``sparseldp privatize``.  :func:`sparseldp.compare.sweep.sweep`
repeats the comparison over several ``eps`` (the error-against-eps figure).

Layout: :func:`compare` runs the comparison here (validation, the simulation loop and each
family's measurements); :mod:`~sparseldp.compare.populations` holds the simulated populations,
:mod:`~sparseldp.compare.calibration` the calibration of each family,
:mod:`~sparseldp.compare.metrics` the simulation and the error measures, and
:mod:`~sparseldp.compare.results` the rows, the table and the recommendation.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterable

import numpy as np

from .._rng import simulation_generator
from .._validation import check_bool, check_int, one_of
from ..design.finite import _check_prior, _check_target
from ..errors import InfeasibleError
from ..estimation import METHODS as _METHODS, ConvergenceWarning, estimate_frequencies_full
from ..estimation._information import INVERSION_METHOD
from .calibration import SPARSE, TooLargeError, calibrate_family
from .metrics import distortion, distribution_errors, exact_rmse, unbiased_mean_estimator, report_counts, \
    simulate_counts
from .populations import SHAPES, default_population, population_shape
from .results import METRICS, Comparison, ComparisonRow, Recommendation, format_params

__all__ = ["COMPARE_FAMILIES", "METRICS", "SHAPES", "Comparison", "ComparisonRow", "Recommendation", "compare",
           "default_population", "population_shape", "format_params"]

# Largest simulated population (the counts are drawn, so the cost does not grow with n; the cap keeps
# every count and sum of counts far inside int64 and float64 integers).
_N_MAX = 1 << 28
_TRIALS_MAX = 10_000
_EMS_MODES = ("all", "authors", "none")
# Families whose authors estimate the distribution with EMS.
_EMS_AUTHORS = ("square-wave",)

#: Families compared, in table order.
COMPARE_FAMILIES = ("rr", "geometric-clamp", "geometric-fold", "discrete-gaussian", "sparse-laplace",
                    "sparse-gaussian", "square-wave", "piecewise", "hybrid", "duchi")

_LABELS = {
    "rr": "k-ary randomized response",
    "geometric-clamp": "geometric (discrete Laplace), clamped",
    "geometric-fold": "geometric (discrete Laplace), folded",
    "discrete-gaussian": "discrete Gaussian, clamped",
    "sparse-laplace": "sparse Laplace (this paper)",
    "sparse-gaussian": "sparse Gaussian (this paper)",
    "square-wave": "Square Wave (Li et al. 2020)",
    "piecewise": "Piecewise Mechanism (Wang et al. 2019)",
    "hybrid": "Hybrid Mechanism (Wang et al. 2019)",
    "duchi": "Duchi et al. one-bit (2013)",
}


def _check_data(data, domain) -> np.ndarray:
    """Counts per domain value from ``data``: integer values in the domain, or ``(offset, counts)``."""
    a, b = domain
    k = b - a + 1
    allowed = ("data must be a 1-D array of integer values in the domain, or a pair (offset, counts) as "
               "returned by sparseldp.io.column_counts")
    if isinstance(data, tuple) and len(data) == 2 and np.ndim(data[1]) == 1:
        offset = check_int(data[0], "data offset")
        counts = np.asarray(data[1])
        if counts.dtype.kind not in "iu" or (counts < 0).any():
            raise ValueError(f"{allowed}; the counts must be integers >= 0")
        values = np.arange(offset, offset + counts.size)
        if counts.size and (values[counts > 0].min(initial=a) < a or values[counts > 0].max(initial=b) > b):
            raise ValueError(f"{allowed}; values with counts lie outside the domain {a}..{b}")
        out = np.zeros(k, dtype=np.int64)
        inside = (values >= a) & (values <= b)
        out[values[inside] - a] = counts[inside]
    else:
        if isinstance(data, (str, bytes)) or not isinstance(data, (np.ndarray, list, tuple)):
            raise TypeError(f"{allowed}; got {type(data).__name__}")
        arr = np.asarray(data)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise TypeError(f"{allowed}; got an array of dtype {arr.dtype} and shape {arr.shape}")
        if arr.size and (arr.min() < a or arr.max() > b):
            bad = arr[(arr < a) | (arr > b)][0]
            raise ValueError(f"data values must lie in the domain {a}..{b}; got {int(bad)}")
        out = np.bincount(arr.astype(np.int64) - a, minlength=k).astype(np.int64)
    if out.sum() < 1:
        raise ValueError(f"{allowed}; got no values")
    return out


def _check_options(*, window="extended", objective="r2", method=None, trials=1, mean_trials=None,
                   pure_at_eps=False, ems="all", flag=lambda name: name):
    """Check :func:`compare`'s options; return ``(trials, mean_trials, pure_at_eps)`` normalized.

    The one check of these options, shared by :func:`compare` and ``sparseldp compare``
    (which passes ``flag`` to name them as command-line options, ``"--mean-trials"``).
    """
    if window not in ("extended", "clipped"):
        raise ValueError(f"{flag('window')} must be 'extended' or 'clipped'; got {window!r}")
    if objective not in ("r1", "r2"):
        raise ValueError(f"{flag('objective')} must be 'r1' or 'r2'; got {objective!r}")
    if ems not in _EMS_MODES:
        raise ValueError(f"{flag('ems')} must be {one_of(_EMS_MODES)}; got {ems!r}")
    if method is not None and method not in _METHODS:
        raise ValueError(f"{flag('method')} must be {one_of(_METHODS)} (or omitted: the estimator's default); "
                         f"got {method!r}")
    trials = check_int(trials, flag("trials"), minimum=1, maximum=_TRIALS_MAX)
    mean_trials = trials if mean_trials is None else check_int(mean_trials, flag("mean_trials"), minimum=trials,
                                                               maximum=_TRIALS_MAX)
    return trials, mean_trials, check_bool(pure_at_eps, flag("pure_at_eps"))


def _check_families(families) -> tuple[str, ...]:
    if families is None:
        return COMPARE_FAMILIES
    if isinstance(families, (str, bytes)) or not isinstance(families, Iterable):
        raise TypeError(f"families must be an iterable of names from {list(COMPARE_FAMILIES)}; "
                        f"got {type(families).__name__} {families!r}")
    families = tuple(families)
    for f in families:
        if f not in COMPARE_FAMILIES:
            raise ValueError(f"families must be names from {list(COMPARE_FAMILIES)}; got {f!r}")
    return families


# EMS stops when its estimated distance to its fixed point is below this (total variation): three orders of
# magnitude under the statistical error of any simulation here, and 3 to 5 times fewer steps than its default.
_EMS_TOL = 1e-5


def _estimate(rc, ch, domain, method=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # reported in the row instead
        if method is None:  # the project's default estimator, whatever it is, with its defaults
            return estimate_frequencies_full(rc, ch, domain=domain, counts=True)
        tol = _EMS_TOL if method == "ems" else None
        return estimate_frequencies_full(rc, ch, domain=domain, counts=True, method=method, tol=tol)


def compare(*, eps, delta, H, domain, n=None, population=None, data=None, families=None, rng=None,
            objective="r2", window="extended", pure_at_eps=False, trials=1, ems="all", method=None,
            mean_trials=None, progress=None) -> Comparison:
    r"""Calibrate every family to ``(eps, delta)`` on range ``H`` and measure them (module docstring).

    Parameters
    ----------
    eps, delta, H, domain
        The target and the finite input domain ``(a, b)``.
    n : int >= 1, optional
        Simulated population size (default 100,000); not with ``data``.
    population : array of ``b - a + 1`` weights, or a name of :data:`SHAPES`, optional
        Input distribution of the simulated population (default
        :func:`default_population`); also the weights of ``R1``/``R2`` and of
        the sparse designs' objective (uniform when not given).
    data : integer array, or ``(offset, counts)``, optional
        The user's own values (e.g. :func:`sparseldp.io.column_counts` of a
        column): the truth is their histogram, re-privatized in every trial;
        it also weights ``R1``/``R2`` and the designs.  Not with ``population`` or ``n``.
    families : iterable of str, optional
        Subset of :data:`COMPARE_FAMILIES` (default: all).
    rng : None, int or numpy Generator
        Simulation randomness: ``None`` is the OS's secure source (not
        reproducible); a seed makes the comparison reproducible.
    objective : {"r2", "r1"}
        What the sparse families' designs minimize.
    window : {"extended", "clipped"}
        The sparse families' windows (:mod:`sparseldp.compare.calibration`).
    pure_at_eps : bool
        Run the pure-epsilon families at ``eps`` instead of calibrating their
        own epsilon to ``(eps, delta, H)``.
    trials : int >= 1
        Independent repetitions of the privatization (errors are averaged;
        the mean's RMSE is over the trials unless exact).
    mean_trials : int >= trials, optional
        Repetitions for the mean's RMSE where it is measured (the families
        whose mean comes from the EM estimate): the trials beyond ``trials``
        fit only that estimate.  Default ``trials``.  The RMSE over ``T``
        trials has a relative standard error of about ``1/sqrt(2T)``.
    ems : {"all", "authors", "none"}
        Which families also get the EMS estimate (``"authors"``: Square Wave only).
    method : str, optional
        The frequency estimator behind ``tv``, ``w1`` and ``quantile_error``
        (a ``method`` of :func:`sparseldp.estimation.estimate_frequencies`);
        ``None``, the default, is that function's own default.
    progress : callable(str), optional
        Called with each family's name before it is processed.

    Returns
    -------
    Comparison
        A family that cannot meet the target, or whose channel is too large
        to simulate, gets a row with ``error`` set.
    """
    eps, delta, H, domain = _check_target(eps, delta, H, domain)
    a, b = domain
    k = b - a + 1
    if data is not None and (population is not None or n is not None):
        raise ValueError("data gives the people themselves: it cannot be combined with population or n")
    trials, mean_trials, pure_at_eps = _check_options(window=window, objective=objective, method=method,
                                                      trials=trials, mean_trials=mean_trials,
                                                      pure_at_eps=pure_at_eps, ems=ems)
    families = _check_families(families)
    gen = simulation_generator(rng)
    seeded = rng is not None
    seed = int(rng) if isinstance(rng, numbers.Integral) else None
    entropy = int(gen.integers(1 << 62))
    if data is not None:
        fixed = _check_data(data, domain)
        n = int(fixed.sum())
        weights = fixed / n
        prior, source = weights, "data"
        truths = [fixed] * mean_trials
    else:
        n = check_int(100_000 if n is None else n, "n", minimum=1, maximum=_N_MAX)
        if isinstance(population, str):
            population = population_shape(population, domain)
        given = None if population is None else _check_prior(population, k, "population")
        pop = given if given is not None else default_population(domain)
        weights = given if given is not None else np.full(k, 1.0 / k)
        prior, source = given, "simulated population"
        truths = [np.random.default_rng([entropy, t, 1 << 20]).multinomial(n, pop) for t in range(mean_trials)]
    values = np.arange(a, b + 1, dtype=np.int64)
    truth_p = [c / n for c in truths]
    rows = []
    for name in families:
        if progress is not None:
            progress(name)
        label = _LABELS[name] + (f", {window} windows" if name in SPARSE else "")
        try:
            cal = calibrate_family(name, eps=eps, delta=delta, H=H, domain=domain, window=window,
                                   objective=objective, prior=prior, pure_at_eps=pure_at_eps)
        except (InfeasibleError, TooLargeError) as exc:
            rows.append(ComparisonRow(name, label, error=str(exc)))
            continue
        rows.append(_measure(name, label, cal, domain, values, truths, truth_p, weights, n, entropy,
                             ems == "all" or (ems == "authors" and name in _EMS_AUTHORS), method, trials))
    last = truth_p[trials - 1]
    last.setflags(write=False)
    return Comparison(eps, delta, H, domain, n, seeded, seed, last, tuple(rows), trials, source, mean_trials)


def _measure(name, label, cal, domain, values, truths, truth_p, weights, n, entropy, with_ems,
             method, trials) -> ComparisonRow:
    ch = cal.channel
    fam_id = COMPARE_FAMILIES.index(name)
    r1, r2 = distortion(ch, weights, domain)
    linear = unbiased_mean_estimator(ch, domain)
    half_range = 0.5 * (domain[1] - domain[0])
    if linear is not None and linear[2] == INVERSION_METHOD and not exact_rmse(linear[1], weights, n) < half_range:
        linear = None  # as estimate_mean: the EM estimate's mean where the inversion is no better than the range
    errs, errs_ems, mean_sq, em_sq = [], [], [], []
    converged = True
    est = ems_est = None
    for t, (c_in, p_true) in enumerate(zip(truths, truth_p)):
        if t >= trials and linear is not None:
            break  # this family's mean RMSE is exact: no extra trials
        gen = np.random.default_rng([entropy, t, fam_id])
        rc = report_counts(ch, simulate_counts(ch, c_in, gen, domain))
        if t >= trials:  # the extra trials of the mean: only the EM estimate
            em = _estimate(rc, ch, domain, "em")
            em_sq.append((float(em.p @ values) - float(p_true @ values)) ** 2)
            continue
        est = _estimate(rc, ch, domain, method)
        converged = converged and bool(est.converged)
        errs.append(distribution_errors(est.p, p_true, values))
        true_mean = float(p_true @ values)
        mean_sq.append((float(est.p @ values) - true_mean) ** 2)
        if linear is None:  # the mean as sparseldp.estimate_mean makes it for a biased channel: EM's
            em = est if est.method == "em" else _estimate(rc, ch, domain, "em")
            em_sq.append((float(em.p @ values) - true_mean) ** 2)
        if with_ems:
            ems_est = _estimate(rc, ch, domain, "ems")
            errs_ems.append(distribution_errors(ems_est.p, p_true, values))
    rmse_est = math.sqrt(float(np.mean(mean_sq)))
    if linear is None:
        mean_rmse, mean_method = math.sqrt(float(np.mean(em_sq))), "EM estimate"
    else:
        _, var, mean_method = linear
        mean_rmse = exact_rmse(var, weights, n)
    avg = lambda rows, key: float(np.mean([e[key] for e in rows])) if rows else None  # noqa: E731
    return ComparisonRow(
        name, label, params=dict(cal.params), delta_star=cal.delta_star, r1=r1, r2=r2,
        support=float(np.diff(ch.matrix.indptr).mean()), tv=avg(errs, "tv"), w1=avg(errs, "w1"),
        tv_ems=avg(errs_ems, "tv"), w1_ems=avg(errs_ems, "w1"), mean_rmse=mean_rmse, mean_method=mean_method,
        mean_rmse_estimate=rmse_est, quantile_error=avg(errs, "quantile"), converged=converged,
        estimate=np.array(est.p),
        estimate_ems=None if ems_est is None else np.array(ems_est.p), channel=ch, note=cal.note)

