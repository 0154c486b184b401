r"""Frequencies and means of the true inputs, estimated from privatized reports.

Model
-----
Each of ``n`` people holds an integer ``x`` in the domain ``lo..hi`` (``k``
values) and reports ``Y ~ Q(. | x)``.  With ``p`` the unknown input
distribution on the domain, the reports are i.i.d. from the output
distribution ``q = Q^T p``, and the report histogram (counts ``c_y``) is a
sufficient statistic: everything here works on counts, obtained by one
``np.bincount`` pass over the reports (in chunks), never per report in Python.

``Q`` is the mechanism's channel restricted to the domain:

* for :class:`~sparseldp.SparseLaplace` / :class:`~sparseldp.SparseGaussian`
  (output alphabet Z, Definitions 6 and 8) the rows ``x = lo..hi`` with
  outputs ``lo - t .. hi + t`` (the extended window: every report the
  mechanism can produce from the domain);
* for a :class:`~sparseldp.SparseChannel` (extended or clipped windows,
  baselines, any weights) its rows ``lo..hi`` and the outputs they reach.

``Q`` is kept sparse (``scipy.sparse`` CSR, ``O(k s)`` entries for windows of
size ``s``); only channels that are dense anyway (randomized response, the
full-support baselines) are held as dense arrays.

Frequencies: maximum likelihood by EM
-------------------------------------
The log-likelihood ``l(p) = sum_y c_y log (Q^T p)_y`` is concave on the
simplex.  EM (the iterative Bayesian update) is

.. math::

    p_x \leftarrow p_x\, g_x(p), \qquad
    g_x(p) = \frac{1}{n}\sum_y c_y \frac{Q(y \mid x)}{(Q^T p)_y},

two sparse mat-vecs per step (``O(nnz)``), restricted to the observed outputs.
The steps are accelerated by SQUAREM (Varadhan and Roland, Scand. J. Stat. 35,
2008: squared extrapolation of two EM steps, step length ``-|r|/|v|``,
backtracked towards a plain double EM step to stay nonnegative, and rejected
if the likelihood does not increase), so the iteration stays monotone.

EM is slow when the channel is ill-conditioned (wide Gaussian kernels,
full-support baselines): even accelerated it can need 10^5 steps on a domain
of 12 values.  So after 600 EM evaluations the solver predicts the remaining
EM cost from the observed rate of the certificate below and, when a Newton
method is predicted cheaper, finishes with a primal log-barrier interior-point
Newton method (banded sparse LU for window channels; see ``_newton``), then
resumes EM if needed.  Both phases are judged by the same certificate, so the
choice affects speed only, never what "converged" means.

Convergence rule (a certificate, not a heuristic).  Because ``l`` is concave
and ``sum_x p_x g_x(p) = 1``, Jensen's inequality gives, for the maximizer
``p*``,

.. math::

    l(p^*) - l(p) = \sum_y c_y \log\frac{(Q^T p^*)_y}{(Q^T p)_y}
        \le n \log \sum_x p^*_x g_x(p) \le n \log \max_x g_x(p).

EM stops as soon as this bound, ``gap = n log max_x g_x``, is at most ``tol``
nats (default ``1e-2``: the returned estimate's log-likelihood is within
0.01 of the maximum, a difference no likelihood-ratio test can see), and
returns ``p * g(p)``, whose log-likelihood is at least ``l(p)`` (EM is
monotone), so the bound holds for it too.  ``max_iter`` caps the number of EM
map evaluations; if it is hit, :class:`ConvergenceWarning` is issued and the
result says ``converged=False`` with the gap reached.

A caution that the tests and the benchmark measure: when the kernel is wide
relative to the structure of ``p`` (deconvolution is ill-posed), the exact
MLE fits the noise and can be *less* accurate than an early iterate for
smooth ``p``; for spiky ``p`` it is the most accurate.  ``method="em"``
returns the MLE and says how close it is; it does not regularize:
``method="ems"`` (below) does.

Frequencies: EM with smoothing (EMS)
------------------------------------
``method="ems"``: the EMS algorithm of Silverman, Jones, Wilson and Nychka
("A smoothed EM approach to indirect estimation problems", J. R. Stat. Soc. B
52, 1990), applied to numerical LDP reports by Li, Wang, Lopuhaä-Zwakenberg,
Li and Škorić ("Estimating Numerical Distributions under Local Differential
Privacy", SIGMOD 2020).  Each step is an EM step followed by ``m`` passes
(``smooth=m``, default 1) of the binomial kernel ``(1, 2, 1)/4`` over
neighbouring values of the domain:

.. math::

    p \leftarrow T(p) = S^m \bigl(p \odot g(p)\bigr), \qquad
    (S v)_x = \tfrac14 v_{x-1} + \tfrac12 v_x + \tfrac14 v_{x+1},

where at the two ends of the domain the quarter that would fall outside is
kept on the end value (``(S v)_{lo} = \tfrac34 v_{lo} + \tfrac14 v_{lo+1}``,
Silverman et al.'s Section 3.2.2 convention).  ``S`` is then symmetric and
doubly stochastic, so ``T`` maps the simplex to itself and preserves mass
exactly; ``S^m`` is the binomial kernel ``C(2m, m + j) / 4^m``, ``|j| <= m``,
in the interior.  The smoothing is a prior belief that neighbouring values
have similar frequencies: it removes the high-frequency components that the
ill-posed deconvolution cannot identify (the MLE's spikes), at the price of
a bias of order ``m p''/4`` (half the kernel's variance times the second
difference of ``p``), so it is the right choice for smooth distributions
(ages, incomes, measurements) and the wrong one for spiky ones (a few
isolated atoms), where ``"em"`` wins.  EMS does not maximize a likelihood:
``loglik`` and ``gap`` of the result are the log-likelihood at the EMS
estimate and the certified bound on its distance to the maximum (the same
certificate as for EM), which measure how much likelihood the smoothing
gives up, not convergence.

Stopping rule for EMS.  ``T`` is a smooth map whose fixed point is the EMS
estimate; its iterates converge linearly in practice (50 to 200 steps in our
measurements, for domains of 100 to 10^4 values and n from 10^4 to 10^7),
so the distance to the fixed point is estimated from the observed rate: with ``d_k = ||p_{k} - p_{k-1}||_1 / 2``
(total variation of the last step) and ``rho = (d_k / d_{k-5})^{1/5}``,

.. math::

    \mathrm{TV}(p_k, p^*) \lesssim d_k \, \frac{\rho}{1 - \rho},

the a-posteriori bound of a contraction with constant ``rho``.  EMS stops
when this estimate is at most ``tol`` (default ``1e-8`` in total variation,
six orders of magnitude below the statistical error at any realistic
``n``), or when a step changes nothing beyond rounding (``d_k <= 1e-14``).
It is an estimate, not a certificate: ``rho`` is measured, not proven.

Frequencies: unbiased inversion
-------------------------------
``method="inversion"``: the least-squares solution of ``Q^T p = f``
(``f = c / n``, over every output the domain can produce), unbiased because
``E f = Q^T p``, solved from the normal equations ``Q Q^T p = Q f`` (a banded
``k x k`` sparse system, sparse LU; dense least squares for dense channels),
then the Euclidean projection onto the simplex (:func:`project_simplex`,
the ``O(k log k)`` sort algorithm of Held, Wolfe and Crowder 1974 / Duchi
et al. 2008).  The projection makes it biased but never farther from ``p``
in Euclidean norm.

Means
-----
See :func:`estimate_mean`: the plain mean of the reports when the channel is
unbiased (``E[Y | x] = x``, true on Z by symmetry, docs/paper.md, "Distortion and bias", and for
extended windows), else the mean of the EM estimate with a delta-method
standard error from the expected Fisher information.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ._validation import check_bool, check_int, check_int_array, check_positive
from .families import family_of

__all__ = [
    "ConvergenceWarning",
    "FrequencyEstimate",
    "MeanEstimate",
    "ReportCounts",
    "estimate_frequencies",
    "estimate_frequencies_full",
    "estimate_mean",
    "project_simplex",
]

# Reports per bincount chunk: 32 MiB of int64, cache-friendly and bounded memory.
_CHUNK = 1 << 22
# A channel is held dense when at least this share of its k x m entries are stored ...
_DENSE_SHARE = 0.25
# ... and it has at most this many entries (about 200 MB as float64).
_DENSE_MAX = 25_000_000
# Widest span of output values counted with a direct bincount table.
_SPAN_MAX = 1 << 26
_METHODS = ("em", "ems", "inversion")
# Default tolerance per method: EM certified gap in nats; EMS estimated distance to its fixed point in TV.
_DEFAULT_TOL = {"em": 1e-2, "ems": 1e-8, "inversion": 1e-2}
# EMS: steps over which the linear rate is measured, and the step size treated as rounding.
_EMS_RATE_SPAN = 5
_EMS_FLOOR = 1e-14


class ConvergenceWarning(RuntimeWarning):
    """EM stopped at ``max_iter`` before its certified log-likelihood gap reached ``tol``."""


# ---------------------------------------------------------------------------
# counts
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ReportCounts:
    """A report histogram: ``counts[j]`` reports had the value ``offset + j``.

    This is what :func:`sparseldp.io.column_counts` returns (as a pair), and
    what the estimators reduce any input to.  ``counts`` is a read-only int64
    array of nonnegative entries.
    """

    offset: int
    counts: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "offset", check_int(self.offset, "offset"))
        c = check_int_array(self.counts, "counts", minimum=0)
        if c.ndim != 1:
            raise ValueError(f"counts must be a 1-D array of integers >= 0; got shape {c.shape}")
        c = np.array(c, dtype=np.int64)
        c.setflags(write=False)
        object.__setattr__(self, "counts", c)

    @property
    def n(self) -> int:
        """Number of reports."""
        return int(self.counts.sum())

    @property
    def values(self) -> np.ndarray:
        """The report values ``offset .. offset + len(counts) - 1``."""
        return np.arange(self.offset, self.offset + self.counts.size, dtype=np.int64)

    @classmethod
    def from_reports(cls, reports) -> "ReportCounts":
        """Histogram of an integer array (or an iterable of integer arrays, e.g.
        :func:`sparseldp.io.iter_column`) in chunked bincount passes."""
        lo, hi = None, None
        counts = np.zeros(0, np.int64)
        for chunk in _chunks(reports):
            if chunk.size == 0:
                continue
            a, b = int(chunk.min()), int(chunk.max())
            nlo = a if lo is None else min(lo, a)
            nhi = b if hi is None else max(hi, b)
            if nhi - nlo + 1 > _SPAN_MAX:
                raise ValueError(
                    f"reports must span at most {_SPAN_MAX} consecutive integers to be counted; "
                    f"got values from {nlo} to {nhi}"
                )
            if lo is None or nlo < lo or nhi > hi:
                grown = np.zeros(nhi - nlo + 1, np.int64)
                if lo is not None:
                    grown[lo - nlo : lo - nlo + counts.size] = counts
                counts, lo, hi = grown, nlo, nhi
            counts += np.bincount(chunk - lo, minlength=counts.size)
        return cls(0 if lo is None else lo, counts)


def _chunks(reports):
    """Yield int64 chunks of the reports (an array, or an iterable of arrays)."""
    if isinstance(reports, np.ndarray) or isinstance(reports, (list, tuple)) or np.isscalar(reports):
        arr = check_int_array(reports, "reports").reshape(-1)
        for start in range(0, arr.size, _CHUNK):
            yield arr[start : start + _CHUNK]
        return
    if isinstance(reports, Iterable) and not isinstance(reports, (str, bytes, Mapping, Set)):
        for part in reports:
            arr = check_int_array(part, "reports").reshape(-1)
            for start in range(0, arr.size, _CHUNK):
                yield arr[start : start + _CHUNK]
        return
    raise TypeError(
        "reports must be an integer array, an iterable of integer arrays, a ReportCounts or a "
        f"mapping value -> count; got {type(reports).__name__}"
        + (" (a set drops repeated reports: pass a list or an array)" if isinstance(reports, Set) else "")
    )


def _as_report_counts(reports, counts: bool) -> ReportCounts | None:
    """ReportCounts for inputs that already are counts; None for raw reports."""
    if isinstance(reports, ReportCounts):
        return reports
    if counts:
        if isinstance(reports, Mapping):
            keys = check_int_array(np.fromiter(reports.keys(), dtype=object, count=len(reports)), "report values")
            vals = check_int_array(np.fromiter(reports.values(), dtype=object, count=len(reports)),
                                   "report counts", minimum=0)
            if keys.size == 0:
                return ReportCounts(0, np.zeros(0, np.int64))
            lo = int(keys.min())
            span = int(keys.max()) - lo + 1
            if span > _SPAN_MAX:
                raise ValueError(f"report values must span at most {_SPAN_MAX} integers; got {span}")
            c = np.zeros(span, np.int64)
            np.add.at(c, keys - lo, vals)
            return ReportCounts(lo, c)
        if not (isinstance(reports, (tuple, list)) and len(reports) == 2):
            raise TypeError(
                "with counts=True, reports must be a pair (offset, counts) as returned by "
                f"sparseldp.io.column_counts, a ReportCounts or a mapping value -> count; got {reports!r}"[:300]
            )
        return ReportCounts(reports[0], reports[1])
    if isinstance(reports, Mapping):
        raise TypeError("reports is a mapping value -> count: pass counts=True")
    return None


# ---------------------------------------------------------------------------
# the channel restricted to the domain
# ---------------------------------------------------------------------------
class _Model:
    """``Q`` restricted to inputs ``lo..hi``, outputs sorted, columns scaled for EM.

    ``S[x, y] = Q(y | x) / max_x' Q(y | x')`` (column scaling computed from the
    exact log-probabilities, so that no column of ``S`` underflows to all
    zeros); ``log_cs[y] = log max_x' Q(y | x')``.  EM is invariant under column
    scaling (``g`` has the same ratio in numerator and denominator); the
    log-likelihood is shifted by ``sum_y c_y log_cs[y]``, added back.
    """

    def __init__(self, channel, lo: int, hi: int, label: str):
        self.lo, self.hi = lo, hi
        self.k = hi - lo + 1
        self.label = label
        inputs = np.asarray(channel.inputs)
        order = np.argsort(inputs, kind="stable")
        xs = inputs[order]
        want = np.arange(lo, hi + 1, dtype=np.int64)
        pos = np.clip(np.searchsorted(xs, want), 0, xs.size - 1)
        missing = xs[pos] != want
        if missing.any():
            raise ValueError(
                f"domain must lie within the channel's input values (between {int(xs[0])} and "
                f"{int(xs[-1])}, every value present); {int(want[missing][0])} is not an input"
            )
        rows = order[pos]
        # Carry entry positions (+1, never zero) through the row selection and the
        # CSC conversion, so that the support pattern survives exactly (an explicit
        # log-probability of 0.0 or an underflowed probability could be dropped).
        M = channel.matrix
        tag = sp.csr_array((np.arange(1, M.nnz + 1, dtype=float), M.indices, M.indptr), shape=M.shape)
        logm = sp.csc_array(tag[rows])
        logm.sort_indices()
        logm.data = np.asarray(channel.log_matrix.data, dtype=float)[logm.data.astype(np.int64) - 1]
        # keep only reachable columns, in increasing output order
        outputs = np.asarray(channel.outputs)
        nnz_col = np.diff(logm.indptr)
        keep = np.flatnonzero(nnz_col > 0)
        keep = keep[np.argsort(outputs[keep], kind="stable")]
        logm = logm[:, keep]
        self.outputs = outputs[keep].astype(np.int64)
        self.m = self.outputs.size
        indptr = logm.indptr
        data = np.asarray(logm.data, dtype=float)
        colmax = np.maximum.reduceat(data, indptr[:-1]) if data.size else np.zeros(0)
        cols = np.repeat(np.arange(self.m), np.diff(indptr))
        scaled = np.exp(data - colmax[cols])
        self.log_cs = colmax
        S = sp.csc_array((scaled, logm.indices, indptr), shape=(self.k, self.m)).tocsr()
        S.sort_indices()
        self.nnz = int(S.nnz)
        self.dense = self.nnz >= _DENSE_SHARE * self.k * self.m and self.k * self.m <= _DENSE_MAX
        self.S = S.toarray() if self.dense else S
        # offsets y - x of every stored entry (for the bias of the report)
        self._contiguous = bool(self.m == 0 or int(self.outputs[-1]) - int(self.outputs[0]) + 1 == self.m)

    # -- matrices --------------------------------------------------------------
    def columns(self, idx):
        """``S`` restricted to columns ``idx`` and its transpose, in the fast layout."""
        if self.dense:
            A = np.ascontiguousarray(self.S[:, idx])
            return A, np.ascontiguousarray(A.T)
        A = sp.csr_array(sp.csc_array(self.S)[:, idx])
        A.sort_indices()
        AT = sp.csr_array(A.T)
        AT.sort_indices()
        return A, AT

    def unscaled(self):
        """``Q`` itself (k x m), probabilities that may underflow to 0."""
        scale = np.exp(self.log_cs)
        if self.dense:
            return self.S * scale[None, :]
        return sp.csr_array(self.S @ sp.diags_array(scale))

    def bias(self) -> np.ndarray:
        """``E[Y - x | x]`` for each input ``x`` of the domain."""
        Q = self.unscaled()
        x = np.arange(self.lo, self.hi + 1, dtype=np.int64)
        if self.dense:
            D = (self.outputs[None, :] - x[:, None]).astype(float)
            return (Q * D).sum(axis=1), float(np.abs(D).max(initial=0.0))
        coo = sp.coo_array(Q)
        d = (self.outputs[coo.col] - x[coo.row]).astype(float)
        b = np.bincount(coo.row, weights=coo.data * d, minlength=self.k)
        return b, float(np.abs(d).max(initial=0.0))

    def min_noise_variance(self, b: np.ndarray) -> float:
        """``min_x Var(Y | x)`` over the domain, given the bias ``b`` from :meth:`bias`.

        A lower bound: probabilities that underflow to 0 in :meth:`unscaled`
        only drop nonnegative terms.
        """
        Q = self.unscaled()
        x = np.arange(self.lo, self.hi + 1, dtype=np.int64)
        if self.dense:
            D = (self.outputs[None, :] - x[:, None]).astype(float) - b[:, None]
            v = (Q * D * D).sum(axis=1)
        else:
            coo = sp.coo_array(Q)
            d = (self.outputs[coo.col] - x[coo.row]).astype(float) - b[coo.row]
            v = np.bincount(coo.row, weights=coo.data * d * d, minlength=self.k)
        return max(float(v.min()), 0.0) if v.size else 0.0

    # -- counts over outputs ---------------------------------------------------
    def describe_outputs(self) -> str:
        if self.m == 0:
            return "no outputs"
        if self._contiguous:
            return f"outputs {int(self.outputs[0])}..{int(self.outputs[-1])}"
        return f"{self.m} outputs between {int(self.outputs[0])} and {int(self.outputs[-1])}"

    def _impossible(self, value: int, count: int):
        return ValueError(
            f"reports must be values that {self.label} can produce from inputs in the domain "
            f"{self.lo}..{self.hi} ({self.describe_outputs()}); got {value} "
            f"({count} such report{'s' if count != 1 else ''} in all)"
        )

    def counts_of(self, reports, counts_flag: bool) -> np.ndarray:
        """Counts over ``self.outputs`` (float64), or ValueError for an impossible report."""
        rc = _as_report_counts(reports, counts_flag)
        if rc is not None:
            return self._from_report_counts(rc)
        out = np.zeros(self.m, np.int64)
        if self.m == 0:
            raise ValueError(f"{self.label} produces no output from the domain {self.lo}..{self.hi}")
        y0, y1 = int(self.outputs[0]), int(self.outputs[-1])
        span = y1 - y0 + 1
        table = None
        if span <= max(4 * self.m, 1 << 16) and span <= _SPAN_MAX:
            table = np.full(span, -1, np.int64)
            table[self.outputs - y0] = np.arange(self.m)
            acc = np.zeros(span, np.int64)
        chunks = _chunks(reports)
        for chunk in chunks:
            if chunk.size == 0:
                continue
            a, b = int(chunk.min()), int(chunk.max())
            if a < y0 or b > y1:
                bad = (chunk < y0) | (chunk > y1)
                self._raise_first(chunk[int(np.argmax(bad))], chunks, table, bad_in_chunk=int(bad.sum()))
            if table is not None:
                acc += np.bincount(chunk - y0, minlength=span)
            else:
                pos = np.searchsorted(self.outputs, chunk)
                pos = np.minimum(pos, self.m - 1)
                miss = self.outputs[pos] != chunk
                if miss.any():
                    self._raise_first(chunk[int(np.argmax(miss))], chunks, table, bad_in_chunk=int(miss.sum()))
                out += np.bincount(pos, minlength=self.m)
        if table is not None:
            hole = (table < 0) & (acc > 0)
            if hole.any():
                j = np.flatnonzero(hole)
                raise self._impossible(int(j[0]) + y0, int(acc[j].sum()))
            out = acc[self.outputs - y0]
        return out.astype(float)

    def _raise_first(self, first, rest, table, bad_in_chunk):
        # error path: count the remaining impossible reports (one more pass)
        total = bad_in_chunk
        for chunk in rest:
            pos = np.clip(np.searchsorted(self.outputs, chunk), 0, self.m - 1)
            total += int((self.outputs[pos] != chunk).sum())
        raise self._impossible(int(first), total)

    def _from_report_counts(self, rc: ReportCounts) -> np.ndarray:
        vals = rc.values
        nz = rc.counts > 0
        v, c = vals[nz], rc.counts[nz]
        out = np.zeros(self.m, np.int64)
        if v.size == 0:
            return out.astype(float)
        if self.m == 0:
            raise self._impossible(int(v[0]), int(c.sum()))
        pos = np.clip(np.searchsorted(self.outputs, v), 0, self.m - 1)
        miss = self.outputs[pos] != v
        if miss.any():
            raise self._impossible(int(v[miss][0]), int(c[miss].sum()))
        np.add.at(out, pos, c)
        return out.astype(float)


def _model(mechanism, domain) -> _Model:
    from .channel import SparseChannel, check_domain
    from .mechanisms import RadiusMechanism

    if isinstance(mechanism, RadiusMechanism):
        if domain is None:
            raise ValueError(
                f"domain is required for a mechanism on Z ({mechanism!r}): pass domain=(lo, hi), "
                "the range of the true values"
            )
        lo, hi = check_domain(domain)
        _, value = mechanism.parameter
        ch = family_of(mechanism).channel(value, mechanism.s, (lo, hi), "extended")
        return _Model(ch, lo, hi, repr(mechanism))
    if isinstance(mechanism, SparseChannel):
        if domain is None:
            xs = np.sort(np.asarray(mechanism.inputs))
            lo, hi = int(xs[0]), int(xs[-1])
        else:
            lo, hi = check_domain(domain)
        return _Model(mechanism, lo, hi, "the channel")
    raise TypeError(
        "mechanism must be a SparseLaplace, SparseGaussian or SparseChannel; "
        f"got {type(mechanism).__name__}"
    )


# ---------------------------------------------------------------------------
# simplex projection
# ---------------------------------------------------------------------------
def project_simplex(v) -> np.ndarray:
    r"""Euclidean projection of a real vector onto the probability simplex.

    ``argmin_{p >= 0, sum p = 1} ||p - v||_2 = (v - theta)_+`` with
    ``theta = (sum_{j <= rho} u_j - 1) / rho``, ``u`` = ``v`` sorted in
    decreasing order and ``rho`` the largest ``j`` with
    ``u_j > (sum_{i <= j} u_i - 1)/j`` (Held, Wolfe and Crowder 1974; Duchi,
    Shalev-Shwartz, Singer and Chandra 2008).  ``O(k log k)``.
    """
    v = np.asarray(v, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"v must be a nonempty 1-D array; got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("v must contain finite numbers only")
    u = np.sort(v)[::-1]
    css = np.cumsum(u)
    j = np.arange(1, v.size + 1)
    cond = u * j > css - 1.0
    rho = int(np.flatnonzero(cond)[-1]) + 1
    theta = (css[rho - 1] - 1.0) / rho
    p = np.maximum(v - theta, 0.0)
    s = p.sum()
    return p / s if s > 0 else np.full(v.size, 1.0 / v.size)


# ---------------------------------------------------------------------------
# EM
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class FrequencyEstimate:
    """An estimated input distribution with how it was obtained.

    Attributes
    ----------
    p : ndarray
        Frequencies over ``values`` (``lo..hi``), ``>= 0``, summing to 1 (read-only).
    domain : (lo, hi)
    method : "em", "ems" or "inversion"
    n : int
        Number of reports.
    iterations : int
        EM (or EMS) map evaluations (each costs two sparse mat-vecs); 0 for inversion.
    newton_steps : int
        Interior-point Newton steps used to finish (0 when EM alone certified).
    converged : bool
        EM: the certified gap reached ``tol``.  EMS: the estimated distance to
        the fixed point reached ``tol`` (module docstring).  Inversion: always
        True (direct solve).
    loglik : float
        ``sum_y c_y log (Q^T p)_y`` in nats (``-inf`` if an observed report has
        probability 0 under ``p``, possible after inversion).
    gap : float
        Certified upper bound ``n log max_x g_x`` on ``max l - l(p)`` (nats; see
        the module docstring); ``inf`` when ``loglik`` is ``-inf``.  For EMS and
        inversion it measures how far the estimate is from the MLE in
        likelihood (by design, not a failure to converge).
    """

    p: np.ndarray
    domain: tuple[int, int]
    method: str
    n: int
    iterations: int
    converged: bool
    loglik: float
    gap: float
    newton_steps: int = 0

    @property
    def values(self) -> np.ndarray:
        return np.arange(self.domain[0], self.domain[1] + 1, dtype=np.int64)

    @property
    def mean(self) -> float:
        """``sum_x x p_x`` (see :func:`estimate_mean` for error bars)."""
        return float(np.dot(self.values.astype(float), self.p))


def _em(A, AT, c, n, p0, tol, max_iter, history=None):
    """SQUAREM-accelerated EM on observed columns; returns (p, evals, converged, gap).

    ``gap`` is the certificate of the returned point.  ``history`` (a list), if
    given, receives ``(evals, gap)`` pairs, used to predict the remaining cost.
    """
    inv_n = 1.0 / n

    def g_of(q):
        return (A @ (c / q)) * inv_n

    def loglik(q):
        with np.errstate(divide="ignore"):
            return float(c @ np.log(q)) if np.all(q > 0) else -math.inf

    def cert(g):
        return n * math.log(max(float(g.max()), 1e-300))

    p = p0
    q = AT @ p
    evals = 0
    while True:
        g = g_of(q)
        gap = cert(g)
        if history is not None:
            history.append((evals, gap))
        if gap <= tol:
            return p * g, evals, True, max(gap, 0.0)
        if evals >= max_iter:
            return p * g, evals, False, gap
        p1 = p * g
        evals += 1
        q1 = AT @ p1
        g1 = g_of(q1)
        gap1 = cert(g1)
        if gap1 <= tol:
            return p1 * g1, evals, True, max(gap1, 0.0)
        p2 = p1 * g1
        evals += 1
        q2 = AT @ p2
        if evals >= max_iter:
            p, q = p2, q2
            continue
        r = p1 - p
        v = p2 - p1 - r
        vv = float(v @ v)
        if vv <= 0.0:
            p, q = p2, q2
            continue
        alpha = min(-math.sqrt(float(r @ r) / vv), -1.0)
        pe = None
        while alpha < -1.0:
            cand = p - 2.0 * alpha * r + alpha * alpha * v
            if cand.min() >= 0.0:
                pe = cand
                break
            alpha = 0.5 * (alpha - 1.0)
            if alpha > -1.0 - 1e-3:
                break
        if pe is None:
            p, q = p2, q2
            continue
        pe = pe / pe.sum()
        qe = AT @ pe
        if loglik(qe) >= loglik(q2):
            p, q = pe, qe
        else:
            p, q = p2, q2


def _newton(A, AT, c, n, p_start, gap_start, tol, max_steps, dense):
    r"""Primal log-barrier interior-point Newton method for the same MLE.

    Maximizes ``F_mu(p) = sum_y c_y log (Q^T p)_y + mu sum_x log p_x`` on
    ``sum p = 1`` for ``mu`` decreasing tenfold, each by damped Newton steps on
    the KKT system ``[M 1; 1^T 0]`` with ``M = Q diag(c/q^2) Q^T + mu diag(1/p^2)``
    (banded for window channels: sparse LU in natural order).  At the barrier
    optimum ``g_x = (nu - mu/p_x)/n <= 1 + k mu / n``, so the certificate
    ``n log max g <= k mu``; the same certificate as EM is checked on the
    iterate, so nothing is taken on trust.  Returns (p, steps, converged, gap).
    """
    import scipy.sparse.linalg as spla

    k = A.shape[0]
    theta = 1e-3
    p = (1.0 - theta) * p_start + theta / k
    p /= p.sum()
    mu = max(gap_start, tol) / k
    ones = np.ones(k)
    best = None
    steps = 0

    def F(p, mu):
        q = AT @ p
        if np.any(q <= 0) or np.any(p <= 0):
            return -math.inf, q
        return float(c @ np.log(q)) + mu * float(np.log(p).sum()), q

    Fv, q = F(p, mu)
    while steps < max_steps:
        for _ in range(50):
            steps += 1
            w = c / (q * q)
            G = A @ (c / q) + mu / p
            if dense:
                M = (A * w[None, :]) @ A.T
                M[np.diag_indices(k)] += mu / (p * p)
                try:
                    sol = np.linalg.solve(M, np.column_stack([G, ones]))
                except np.linalg.LinAlgError:
                    break
            else:
                M = sp.csc_array(A @ sp.diags_array(w) @ AT + sp.diags_array(mu / (p * p)))
                try:
                    sol = spla.splu(M, permc_spec="NATURAL").solve(np.column_stack([G, ones]))
                except RuntimeError:
                    break
            a, b = sol[:, 0], sol[:, 1]
            d = a - (a.sum() / b.sum()) * b
            dec = float(G @ d)  # predicted increase x 2 of F_mu along the Newton step
            if not np.isfinite(dec) or dec <= 0.05 * tol or steps >= max_steps:
                break
            neg = d < 0
            alpha = min(1.0, 0.99 * float(np.min(-p[neg] / d[neg]))) if neg.any() else 1.0
            while alpha > 1e-12:
                pn = p + alpha * d
                Fn, qn = F(pn, mu)
                if Fn >= Fv + 0.1 * alpha * dec:
                    break
                alpha *= 0.5
            else:
                break  # no progress possible at this mu (numerical floor)
            p, q, Fv = pn, qn, Fn
        g = (A @ (c / q)) / n
        gap = n * math.log(max(float(g.max()), 1e-300))
        if best is None or gap < best[1]:
            best = (p * g, gap)
        if gap <= tol:
            return p * g, steps, True, max(gap, 0.0)
        if k * mu < 1e-3 * tol:
            break  # the barrier is negligible: further mu cannot help
        mu /= 10.0
        Fv, q = F(p, mu)
    return best[0], steps, False, best[1]


# EM evaluations before the solver considers switching to Newton.
_EM_FIRST = 600
# Smallest EM run between two predictions.
_EM_RUN = 5000
# Newton steps allowed in one finishing run.
_NEWTON_STEPS = 120
# Predicted Newton steps (the typical count) used to compare costs with EM.
_NEWTON_TYPICAL = 60


def _newton_cost(A, dense: bool) -> float:
    """Flops of one Newton step: factorizing the k x k (banded) system."""
    k = A.shape[0]
    if dense:
        return k**3 / 3.0 + 2.0 * k * k * A.shape[1]
    coo = sp.coo_array(A)
    if coo.nnz == 0:
        return 0.0
    lo = np.full(A.shape[0], np.iinfo(np.int64).max)
    hi = np.full(A.shape[0], -1)
    np.minimum.at(lo, coo.row, coo.col)
    np.maximum.at(hi, coo.row, coo.col)
    # rows x and x' couple in M when their column spans overlap: bandwidth in rows
    order = np.argsort(lo, kind="stable")
    reach = np.searchsorted(lo[order], hi[order], side="right") - np.arange(k)
    bw = float(max(1, reach.max()))
    return k * bw * bw + 2.0 * coo.nnz * bw


def _mle(A, AT, c, n, k, tol, max_iter, dense):
    """Maximum likelihood: SQUAREM EM, finished by Newton when that is predicted cheaper.

    After a first EM run, the remaining EM cost is predicted from the observed
    geometric rate of the certificate; EM continues (for twice the predicted
    count) while that is cheaper than a typical Newton finish, else Newton runs
    once, and EM takes whatever budget is left.  Returns
    (p, em_evals, newton_steps, converged, gap).
    """
    p = np.full(k, 1.0 / k)
    evals, steps, newton_tried = 0, 0, False
    nnz = A.size if dense else A.nnz
    newton_cost = None
    budget = min(max_iter, _EM_FIRST)
    while True:
        hist = []
        p, e, conv, gap = _em(A, AT, c, n, p, tol, budget, hist)
        evals += e
        if conv or evals >= max_iter:
            return p, evals, steps, conv, gap
        # predicted remaining EM evaluations from the second half of this run
        half = [gp for ev, gp in hist if ev >= e // 2 and gp > 0]
        rate = (gap / half[0]) ** (1.0 / max(1, e - e // 2)) if half and gap > 0 else 1.0
        em_left = math.log(tol / gap) / math.log(rate) if 0 < rate < 1 else math.inf
        if newton_cost is None:
            newton_cost = _NEWTON_TYPICAL * _newton_cost(A, dense)
        if not newton_tried and not (em_left <= max_iter - evals and em_left * 4.0 * nnz <= newton_cost):
            newton_tried = True
            p_n, steps, conv_n, gap_n = _newton(A, AT, c, n, p, gap, tol, _NEWTON_STEPS, dense)
            if conv_n:
                return p_n, evals, steps, True, gap_n
            if gap_n < gap:
                p = p_n
            budget = max_iter - evals
        else:
            # long runs: SQUAREM's path is erratic, so short re-predicted runs would thrash
            budget = (min(max_iter - evals, max(int(2 * em_left) + 100, _EM_RUN))
                      if math.isfinite(em_left) else max_iter - evals)


def _smooth(p: np.ndarray, passes: int) -> np.ndarray:
    """``S^passes p``: the ``(1, 2, 1)/4`` kernel, edge overflow kept on the end values.

    ``S`` is symmetric and doubly stochastic (module docstring), so the sum of
    ``p`` is preserved.  Vectorized over the domain; the loop is over passes.
    """
    for _ in range(passes):
        out = 0.5 * p
        out[1:] += 0.25 * p[:-1]
        out[:-1] += 0.25 * p[1:]
        out[0] += 0.25 * p[0]
        out[-1] += 0.25 * p[-1]
        p = out
    return p


def _ems(A, AT, c, n, k, tol, max_iter, passes):
    """EM with smoothing: iterate ``p <- S^passes (p * g(p))`` from the uniform start.

    Stops when the distance to the fixed point, estimated from the last step
    and the observed linear rate (module docstring), is at most ``tol`` in
    total variation.  Returns (p, evals, converged).
    """
    inv_n = 1.0 / n
    p = np.full(k, 1.0 / k)
    q = AT @ p
    steps = []
    for evals in range(1, max_iter + 1):
        pn = _smooth(p * (A @ (c / q)) * inv_n, passes)
        pn /= pn.sum()  # exact in exact arithmetic: keeps rounding from drifting
        d = 0.5 * float(np.abs(pn - p).sum())
        steps.append(d)
        p = pn
        if d <= _EMS_FLOOR:
            return p, evals, True
        if evals > _EMS_RATE_SPAN:
            rho = (d / steps[-1 - _EMS_RATE_SPAN]) ** (1.0 / _EMS_RATE_SPAN)
            if rho < 1.0 and d * rho / (1.0 - rho) <= tol:
                return p, evals, True
        q = AT @ p
    return p, max_iter, False


def _fit(model: _Model, c_all: np.ndarray, method: str, tol: float, max_iter: int,
         smooth: int = 1) -> FrequencyEstimate:
    n_f = float(c_all.sum())
    n = int(round(n_f))
    if n == 0:
        raise ValueError("reports must contain at least one report; got none")
    obs = np.flatnonzero(c_all > 0)
    c = c_all[obs]
    A, AT = model.columns(obs)
    shift = float(c @ model.log_cs[obs])
    if method == "em":
        # rows that reach no observed report get zero mass under the MLE (g = 0 there)
        p, evals, newton_steps, converged, em_gap = _mle(A, AT, c, n_f, model.k, tol, max_iter, model.dense)
        p = np.maximum(p, 0.0)
        p /= p.sum()
        if not converged:
            warnings.warn(
                f"EM stopped after max_iter = {max_iter} steps with a certified log-likelihood gap of "
                f"{em_gap:.4g} nats > tol = {tol:g}; raise max_iter or tol",
                ConvergenceWarning,
                stacklevel=3,
            )
    elif method == "ems":
        p, evals, converged = _ems(A, AT, c, n_f, model.k, tol, max_iter, smooth)
        newton_steps, em_gap = 0, math.inf
        if not converged:
            warnings.warn(
                f"EMS stopped after max_iter = {max_iter} steps before its estimated distance to the "
                f"fixed point reached tol = {tol:g}; raise max_iter or tol",
                ConvergenceWarning,
                stacklevel=3,
            )
    else:
        p = project_simplex(_least_squares(model, c_all / n_f))
        evals, newton_steps, converged, em_gap = 0, 0, True, math.inf
    q = AT @ p
    with np.errstate(divide="ignore"):
        if np.all(q > 0):
            ll = float(c @ np.log(q)) + shift
            g = (A @ (c / q)) / n_f
            # two valid certificates: the one EM stopped on (EM is monotone) and this one
            gap = min(em_gap, max(0.0, n_f * math.log(float(g.max()))))
        else:
            ll, gap = -math.inf, math.inf
    p.setflags(write=False)
    return FrequencyEstimate(p, (model.lo, model.hi), method, n, evals, converged, ll, gap, newton_steps)


def _least_squares(model: _Model, f: np.ndarray) -> np.ndarray:
    """``argmin ||Q^T p - f||_2`` (normal equations, sparse LU; lsqr if singular)."""
    Q = model.unscaled()
    if model.dense:
        return np.linalg.lstsq(Q.T, f, rcond=None)[0]
    import scipy.sparse.linalg as spla

    G = sp.csc_array(Q @ Q.T)
    rhs = Q @ f
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", spla.MatrixRankWarning)
            sol = spla.splu(G).solve(rhs)
        if np.all(np.isfinite(sol)):
            return sol
    except (RuntimeError, spla.MatrixRankWarning):
        pass
    return spla.lsqr(sp.csr_array(Q.T), f, atol=1e-14, btol=1e-14, iter_lim=50 * model.k)[0]


def _check_method(method) -> str:
    if not isinstance(method, str):
        raise TypeError(f"method must be 'em', 'ems' or 'inversion'; got {type(method).__name__} {method!r}")
    if method not in _METHODS:
        raise ValueError(f"method must be 'em', 'ems' or 'inversion'; got {method!r}")
    return method


def _check_tol(tol, max_iter):
    tol = check_positive(tol, "tol")
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    return tol, max_iter


def _check_smooth(smooth, method: str) -> int:
    if smooth is None:
        return 1
    if method != "ems":
        raise ValueError(f"smooth applies to method='ems' only; got smooth={smooth!r} with method={method!r}")
    return check_int(smooth, "smooth", minimum=1)


def estimate_frequencies_full(reports, mechanism, *, domain=None, method="em", tol=None,
                              max_iter=50_000, smooth=None, counts=False) -> FrequencyEstimate:
    """:func:`estimate_frequencies` returning the :class:`FrequencyEstimate` with its diagnostics."""
    method = _check_method(method)
    tol, max_iter = _check_tol(_DEFAULT_TOL[method] if tol is None else tol, max_iter)
    smooth = _check_smooth(smooth, method)
    counts = check_bool(counts, "counts")
    model = _model(mechanism, domain)
    c_all = model.counts_of(reports, counts)
    return _fit(model, c_all, method, tol, max_iter, smooth)


def estimate_frequencies(reports, mechanism, *, domain=None, method="em", tol=None, max_iter=50_000,
                         smooth=None, counts=False, return_info=False):
    r"""Estimate the distribution of the true values on ``lo..hi`` from reports.

    Parameters
    ----------
    reports : int array, iterable of int arrays, ReportCounts, or counts
        The reports, one per person (any integer dtype; an iterable such as
        :func:`sparseldp.io.iter_column` is consumed chunk by chunk).  With
        ``counts=True``: a pair ``(offset, counts)`` as returned by
        :func:`sparseldp.io.column_counts`, or a mapping ``value -> count``.
        A :class:`ReportCounts` is always accepted.
    mechanism : SparseLaplace, SparseGaussian or SparseChannel
        What produced the reports.  On Z the channel restricted to the domain
        has outputs ``lo - t .. hi + t``; a channel is restricted to its rows
        ``lo..hi``.
    domain : (lo, hi)
        The range of the true values; required for mechanisms on Z, defaults
        to the channel's input range for a channel.
    method : {"em", "ems", "inversion"}
        Which estimator (module docstring for the math):

        * ``"em"`` (default): the maximum-likelihood estimate, by EM with the
          certified stopping rule.  Consistent, and its log-likelihood is
          certified within ``tol`` of the maximum; the best choice for spiky
          distributions and for large ``n``.  But deconvolution is ill-posed:
          when the mechanism's window is wide relative to the domain (or to
          the structure of ``p``) and ``n`` is modest, the MLE fits the noise
          and comes out spiky.  Example: ages 0..99, ``SparseLaplace(lam=0.2,
          s=137)``, 10^5 reports of a smooth age pyramid: total-variation
          error about 0.4.
        * ``"ems"``: EM with smoothing (EMS; Silverman et al. 1990, Li et al.
          SIGMOD 2020): each EM step is followed by ``smooth`` passes of the
          ``(1, 2, 1)/4`` kernel over neighbouring values.  Biased towards
          smooth distributions, and far more accurate when the truth is
          smooth: on the example above, total-variation error about 0.013 (30
          times lower).  Use it for numerical attributes with smooth
          distributions; it blurs isolated atoms (there use ``"em"``).
        * ``"inversion"``: unbiased least squares, then Euclidean projection
          onto the simplex.  Fast and assumption-free, but it inherits the
          ill-conditioning of the channel (on the example above it is worse
          than the MLE); mostly a baseline.
    tol : float > 0, optional
        Stopping tolerance, in the unit of the method.  ``"em"``: EM stops when
        the certified log-likelihood gap ``n log max_x g_x`` is at most ``tol``
        nats (default ``1e-2``).  ``"ems"``: EMS stops when its estimated
        total-variation distance to the fixed point is at most ``tol``
        (default ``1e-8``).  Not used by ``"inversion"``.
    max_iter : int >= 1
        Cap on EM (or EMS) map evaluations (a :class:`ConvergenceWarning` if
        reached without meeting ``tol``; a Newton finish of EM, if used, adds
        at most 120 steps).
    smooth : int >= 1, optional
        ``"ems"`` only: smoothing passes per EM step (default 1; ``m`` passes
        are the binomial kernel of width ``2m + 1`` and variance ``m/2``, so
        larger values smooth more).  A ValueError with another method.
    counts : bool
        Whether ``reports`` is a histogram (see above).
    return_info : bool
        Return the :class:`FrequencyEstimate` instead of the bare array.

    Returns
    -------
    ndarray of float, length ``hi - lo + 1``
        ``p[j]`` estimates the share of people whose value is ``lo + j``;
        ``p >= 0`` and ``p.sum() == 1`` (up to rounding).

    Raises
    ------
    ValueError
        A report that the mechanism cannot produce from any input in the
        domain (the message names the first one and how many there are), no
        reports, a domain outside a channel's inputs, a bad parameter.
    TypeError
        Non-integer reports, an unsupported mechanism.
    """
    return_info = check_bool(return_info, "return_info")
    est = estimate_frequencies_full(reports, mechanism, domain=domain, method=method, tol=tol,
                                    max_iter=max_iter, smooth=smooth, counts=counts)
    return est if return_info else np.array(est.p)


# ---------------------------------------------------------------------------
# means
# ---------------------------------------------------------------------------
class MeanEstimate(float):
    """A mean estimate: a ``float`` carrying ``stderr``, ``ci`` and how it was made.

    Attributes
    ----------
    value : float
        The estimate (also the float value of the object itself).
    stderr : float
        Estimated standard error: finite, and positive unless the mean is
        known exactly (the domain has one value).
    ci : (float, float)
        Normal-approximation confidence interval ``value -+ z stderr`` at
        ``confidence``, clipped to the domain (the true mean lies in it);
        ``ci[0] <= ci[1]``.
    confidence : float
    method : str
        How the estimate and its standard error were made (see
        :func:`estimate_mean`): ``"report-mean"`` (unbiased channel),
        ``"em-fisher"`` (biased channel, delta method), ``"em-range-bound"``
        (biased channel whose Fisher information does not pin the mean down:
        the worst-case standard deviation ``(hi - lo)/2``) or
        ``"one-value-domain"`` (the mean is the domain's only value).
    n : int
        Number of reports.

    The constructor refuses a standard error that is not a finite number
    ``>= 0`` and an interval that is not finite and ordered (ValueError).
    """

    __slots__ = ("stderr", "ci", "confidence", "method", "n")

    def __new__(cls, value, *, stderr, ci, confidence, method, n):
        stderr, lo, hi = float(stderr), float(ci[0]), float(ci[1])
        if not (math.isfinite(stderr) and stderr >= 0.0):
            raise ValueError(f"stderr must be a finite number >= 0; got {stderr!r}")
        if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            raise ValueError(f"ci must be a finite interval (low, high) with low <= high; got {ci!r}")
        obj = super().__new__(cls, value)
        for name, val in (("stderr", float(stderr)), ("ci", (float(ci[0]), float(ci[1]))),
                          ("confidence", float(confidence)), ("method", str(method)), ("n", int(n))):
            object.__setattr__(obj, name, val)
        return obj

    def __setattr__(self, name, value):
        raise AttributeError(f"MeanEstimate is immutable; cannot set {name!r}")

    @property
    def value(self) -> float:
        return float(self)

    def __reduce__(self):
        return (_rebuild_mean, (float(self), self.stderr, self.ci, self.confidence, self.method, self.n))

    def __repr__(self) -> str:
        return (f"MeanEstimate(value={float(self)!r}, stderr={self.stderr!r}, ci={self.ci!r}, "
                f"confidence={self.confidence!r}, method={self.method!r}, n={self.n})")

    def to_dict(self) -> dict:
        return {"mean": float(self), "stderr": self.stderr, "ci_low": self.ci[0], "ci_high": self.ci[1],
                "confidence": self.confidence, "method": self.method, "n": self.n}


def _rebuild_mean(value, stderr, ci, confidence, method, n):
    return MeanEstimate(value, stderr=stderr, ci=ci, confidence=confidence, method=method, n=n)


def _check_confidence(confidence) -> float:
    if isinstance(confidence, (bool, np.bool_)) or not isinstance(confidence, numbers.Real):
        raise TypeError(f"confidence must be a real number in (0, 1); got {type(confidence).__name__} {confidence!r}")
    c = float(confidence)
    if not (0.0 < c < 1.0):
        raise ValueError(f"confidence must be a real number in (0, 1); got {confidence!r}")
    return c


# Fisher information: an output whose probability under the estimate is below this
# share of the largest output probability is counted as if it had this probability.
_FISHER_Q_FLOOR = 1e-9
# The ridge values are tried when the plain solve leaves an unexplained part of the
# mean functional larger than this share of its range.
_FISHER_RESIDUAL = 1e-9
# Ridge values mu (relative to the unit diagonal of the Jacobi-scaled information).
_FISHER_RIDGE = (0.0, 1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2)
# Inputs and outputs are sorted, so window channels give a banded information
# matrix, factorized fastest (no fill beyond the band) in its natural order.
_PERMC = "NATURAL"
# Rule of three: after n reports all equal to one value, 3/n is a 95% upper
# confidence bound on the share of the others (exactly, 1 - 0.05^(1/n) <= 3/n).
_RULE_OF_THREE = 3.0


def estimate_mean(reports, mechanism, *, domain=None, confidence=0.95, counts=False, tol=1e-2,
                  max_iter=50_000) -> MeanEstimate:
    r"""Estimate the mean of the true values from reports, with a standard error and CI.

    The case is decided exactly from the channel restricted to the domain by
    its bias ``b(x) = E[Y | x] - x`` (computed entry by entry):

    * **unbiased channel** (``max |b| <= 1e-9 max |y - x|``): mechanisms on Z
      (symmetric, docs/paper.md, "Distortion and bias"), extended windows.  The estimate is the
      report mean ``(1/n) sum_i Y_i``, exactly unbiased; the standard error is
      ``sqrt(v / n)`` with ``v`` the sample variance (``ddof=1``), which
      estimates ``Var(Y) = Var_p(x) + E_p Var(Y | x)`` (``= Var_p(x) + R2`` on
      Z).  Two floors guard degenerate samples.  ``v >= min_x Var(Y | x)``:
      the noise alone, a lower bound on ``Var(Y)`` whatever ``p``.  And when
      all ``n`` reports are equal (``v = 0``), ``v = r (1 - r) w^2`` with
      ``r = min(3/n, 1/2)`` and ``w`` the span of the outputs: by the rule of
      three, ``r`` bounds the share of other reports at 95%, and
      ``r (1 - r) w^2`` is the largest variance such a share can carry (a
      noiseless channel and a constant sample would otherwise give an
      interval of width 0).  ``method="report-mean"``.
    * **biased channel** (clipped windows, clamped or folded baselines): the
      report mean is pulled towards the middle near the edges.  The estimate is
      the mean ``sum_x x p̂_x`` of the EM estimate :func:`estimate_frequencies`
      (same ``tol``, ``max_iter``).  Its standard error is the delta method with
      the expected Fisher information at ``p̂``: with
      ``I = Q diag(1/q̃) Q^T`` (per report) and ``u = x - mean``,
      ``se^2 = u^T I^{-1} u / n`` (the constrained information
      ``I^{-1} - p p^T`` applied to the mean functional; ``I`` is a banded
      sparse ``k x k`` system, sparse LU).  This is the asymptotic standard
      error of the MLE when it is interior; when ``p̂`` sits on the boundary
      of the simplex (zeros) the constraint only removes variance, so the
      figure errs on the large (conservative) side.  ``method="em-fisher"``.

      Two safeguards make it always finite.  (1) ``q̃ = max(q̂, f max q̂)``
      with ``q̂ = Q^T p̂`` and ``f = 1e-9``: outputs that the estimate makes
      (nearly) impossible, such as those of the empty end of a domain wider
      than the data, would otherwise put ``1/q̂`` of 1e160, or ``1/0``, into
      ``I`` (this made the standard error ``nan``, or silently 250 times too
      small).  Raising ``q`` removes information (``I`` decreases in every
      ``q_y``), so the floor can only enlarge the figure; in our
      measurements it moves it by less than 1e-5 relative.  (2) When ``I``
      is singular or nearly so (wide Gaussian windows, randomized response
      with tiny ``eps``: the channel barely identifies the mean), the
      standard error is the smallest over a few ridge solutions of
      ``sqrt(E g(Y)^2 / n) + (max r - min r)``, where ``E[g(Y) | x] + r(x) = u(x)``:
      the part of the mean that a function of the reports estimates plus a
      worst-case bound on the part it does not (see ``_fisher_stderr``).
      Still ``"em-fisher"``.  If that exceeds ``(hi - lo) / 2`` -- the
      largest standard deviation of any estimate confined to ``[lo, hi]``
      (Popoviciu's inequality), a bound that needs no asymptotics -- that is
      returned instead, with ``method="em-range-bound"``, and the interval
      is the whole domain (for a confidence of 68% or more).
    * **one-value domain** (``lo == hi``): the mean is ``lo``, exactly;
      standard error 0, interval ``(lo, lo)``.  ``method="one-value-domain"``.

    The confidence interval is ``value -+ z_{(1+confidence)/2} stderr``
    (normal approximation), clipped to ``[lo, hi]``; should it miss the
    domain altogether (a report mean far outside it) it shrinks to the
    nearest end.  The standard error is always finite and ``>= 0``.

    Parameters are those of :func:`estimate_frequencies`; at least two reports
    are needed.  Returns a :class:`MeanEstimate`, a ``float`` subclass.
    """
    from scipy.stats import norm

    confidence = _check_confidence(confidence)
    tol, max_iter = _check_tol(tol, max_iter)
    counts = check_bool(counts, "counts")
    model = _model(mechanism, domain)
    c_all = model.counts_of(reports, counts)
    n_f = float(c_all.sum())
    n = int(round(n_f))
    if n < 2:
        raise ValueError(f"reports must contain at least 2 reports to estimate a mean with a standard error; got {n}")
    lo, hi = model.lo, model.hi
    if model.k == 1:
        return MeanEstimate(lo, stderr=0.0, ci=(lo, lo), confidence=confidence, method="one-value-domain", n=n)
    z = float(norm.ppf(0.5 + 0.5 * confidence))
    # centering keeps sums exact for large values (int64 differences are exact in float64 below 2^53)
    center = lo + (hi - lo) // 2
    bias, scale = model.bias()
    if float(np.abs(bias).max(initial=0.0)) <= 1e-9 * max(scale, 1.0):
        d = (model.outputs - center).astype(float)
        m1 = float(c_all @ d) / n_f
        var = float(c_all @ (d - m1) ** 2) / (n_f - 1.0)
        if var <= 0.0:  # every report is the same value
            r = min(_RULE_OF_THREE / n_f, 0.5)
            span = float(model.outputs[-1] - model.outputs[0])
            var = r * (1.0 - r) * span * span
        var = max(var, model.min_noise_variance(bias))
        value, se, method = center + m1, math.sqrt(var / n_f), "report-mean"
    else:
        est = _fit(model, c_all, "em", tol, max_iter)
        x = (np.arange(lo, hi + 1, dtype=np.int64) - center).astype(float)
        m1 = float(est.p @ x)
        value = center + m1
        se = _fisher_stderr(model, est.p, x - m1, n_f)
        se_range = 0.5 * float(hi - lo)
        method = "em-fisher"
        if not se <= se_range:
            se, method = se_range, "em-range-bound"
    lo_ci = min(max(lo, value - z * se), hi)
    hi_ci = max(min(hi, value + z * se), lo)
    return MeanEstimate(value, stderr=se, ci=(lo_ci, hi_ci), confidence=confidence, method=method, n=n)


def _fisher_stderr(model: _Model, p: np.ndarray, u: np.ndarray, n: float) -> float:
    r"""Delta-method standard error of ``u^T p̂``: ``min_h sqrt(|h|^2 / n) + (max r - min r)``; ``inf`` if none.

    With ``q̃ = max(Q^T p, f max Q^T p)`` (``f`` = :data:`_FISHER_Q_FLOOR`)
    and ``B = Q diag(q̃)^{-1/2}`` (``k x m``, so ``I = B B^T``), any ``h``
    splits ``u = B h + r``.  The first part is ``Q g`` for the output
    function ``g = h / sqrt(q̃)``, whose report average estimates it with
    variance at most ``E_q̃ g^2 / n = |h|^2 / n``; the rest moves the mean of
    any two distributions on the domain apart by at most ``max r - min r``.
    For ``h = B^T I^{-1} u`` (``r = 0``), ``|h|^2 = u^T I^{-1} u``: the usual
    delta method.  When ``I`` is singular or nearly so, that ``h`` is huge or
    not computable; the ridge solutions ``h_mu = B^T (I + mu D)^{-1} u``
    (``D = diag I``) trade a small unexplained ``r`` for a much smaller
    ``|h|``, and the smallest bound over ``mu`` in :data:`_FISHER_RIDGE` is
    returned.  If ``u`` is outside the range of ``B`` (the channel does not
    identify the mean) the unexplained range stays and bounds the error of
    the unidentified part.  Since that range is added to the standard error,
    a ``z``-interval stays valid for ``z >= 1`` (confidence >= 68%).

    Computation.  From the column-scaled ``S`` (``Q = S diag(cs)``), so that
    no probability underflows: ``B = S diag(exp(log cs - log q̃ / 2))``,
    bounded by ``(f max q)^{-1/2}`` thanks to the floor.  ``I`` is Jacobi
    scaled (unit diagonal) and solved by sparse LU (banded for window
    channels) or, for dense channels, a dense solve and, if a ridge is
    needed, one symmetric eigendecomposition for all ``mu``.
    The residual ``r`` is recomputed from each ``h``, so a poor solve can
    only make the figure larger, never wrong.
    """
    S = model.S
    with np.errstate(divide="ignore"):
        log_q = model.log_cs + np.log(S.T @ p)
    top = float(np.max(log_q, initial=-math.inf))
    if not math.isfinite(top):
        return math.inf
    sw = np.exp(model.log_cs - 0.5 * np.maximum(log_q, top + math.log(_FISHER_Q_FLOOR)))
    if model.dense:
        B = S * sw[None, :]
        d = np.sqrt(np.einsum("ij,ij->i", B, B))
    else:
        B = sp.csr_array(S @ sp.diags_array(sw))
        d = np.sqrt(np.asarray((B * B).sum(axis=1)).ravel())
    d = np.where(np.isfinite(d) & (d > 0.0), d, 1.0)  # a row with no information stays as it is
    Bs = B / d[:, None] if model.dense else sp.csr_array(sp.diags_array(1.0 / d) @ B)
    us = u / d
    G = Bs @ Bs.T  # I with unit diagonal
    span = float(u.max() - u.min())
    if model.dense:
        eig = []  # computed once, only if a ridge is needed

        def solve(mu):
            if mu == 0.0:
                return np.linalg.solve(G, us)
            if not eig:
                ev, V = np.linalg.eigh(G)
                eig.extend((np.maximum(ev, 0.0), V, V.T @ us))
            ev, V, coef = eig
            return V @ (coef / (ev + mu))

        failures = (np.linalg.LinAlgError,)
    else:
        import scipy.sparse.linalg as spla

        G = sp.csc_array(G)
        eye = sp.identity(G.shape[0], format="csc")

        def solve(mu):
            with warnings.catch_warnings():
                warnings.simplefilter("error", spla.MatrixRankWarning)
                return spla.splu(sp.csc_array(G + mu * eye) if mu else G, permc_spec=_PERMC).solve(us)

        failures = (RuntimeError, spla.MatrixRankWarning)
    best = math.inf
    with np.errstate(all="ignore"):
        for mu in _FISHER_RIDGE:
            try:
                lam = solve(mu)
            except failures:
                continue
            h = Bs.T @ lam
            if not np.all(np.isfinite(h)):
                continue
            r = u - B @ h
            unexplained = float(r.max() - r.min())
            se = math.sqrt(float(h @ h) / n) + unexplained
            if math.isfinite(se) and se < best:
                best = se
            if mu == 0.0 and unexplained <= _FISHER_RESIDUAL * span:
                break  # the exact delta method: I is well conditioned
    return best
