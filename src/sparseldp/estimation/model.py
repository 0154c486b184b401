"""The mechanism's channel restricted to the domain, as the estimators use it.

:func:`_model` turns a mechanism on Z (its extended-window channel) or a
:class:`~sparseldp.SparseChannel` into a :class:`_Model`: the rows ``lo..hi``,
the outputs they can produce (sorted), column-scaled for EM, sparse or dense;
and it maps reports onto those outputs (counts, or an error naming the first
impossible report).  See the :mod:`sparseldp.estimation` docstring, "Model".
"""

from __future__ import annotations

import threading

import numpy as np
import scipy.sparse as sp

from ..channel import SparseChannel, check_domain
from ..channel.validation import check_entries
from ..core.mechanisms import RadiusMechanism
from . import _lowrank, _toeplitz
from ._toeplitz import fft_pair, gram_band_of, window_of, window_scales
from ._twolevel import TwoLevel
from .counts import _SPAN_MAX, ReportCounts, _as_report_counts, _chunks

# A channel is held dense when at least this share of its k x m entries are stored ...
_DENSE_SHARE = 0.25
# ... and it has at most this many entries (about 200 MB as float64).
_DENSE_MAX = 25_000_000


def _sliding_max(a: np.ndarray, w: int) -> np.ndarray:
    """``max(a[j:j + w])`` for ``j = 0 .. len(a) - w``, in ``O(len(a))`` (van Herk / Gil-Werman: the
    window meets at most two blocks of ``w``; the suffix maximum of the first and the prefix maximum of
    the second).  Exact: maxima do not round."""
    n = a.size
    nb = -(-n // w)
    b = np.concatenate([a, np.full(nb * w - n, -np.inf)]).reshape(nb, w)
    pre = np.maximum.accumulate(b, axis=1).ravel()
    suf = np.maximum.accumulate(b[:, ::-1], axis=1)[:, ::-1].ravel()
    j = np.arange(n - w + 1)
    return np.maximum(suf[j], pre[j + w - 1])


# One low-rank factor per model (_Model.low_rank), also when the bootstrap's threads ask for it at once.
_LOW_RANK_LOCK = threading.Lock()


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
        # the common log-window when every row is one window shifted (a kernel on Z, extended window);
        # only looked for where the FFT products could apply (large enough, at least for a batch of rows;
        # dense or not: a window wider than the domain makes the channel dense, and its products are then
        # the costliest)
        self.log_window = window_of(logm.tocsr(), self.k) if self.nnz >= _toeplitz._MIN_NNZ_BATCH else None
        # offsets y - x of every stored entry (for the bias of the report)
        self._contiguous = bool(self.m == 0 or int(self.outputs[-1]) - int(self.outputs[0]) + 1 == self.m)

    @classmethod
    def _of_window(cls, row_log: np.ndarray, lo: int, hi: int, label: str) -> "_Model":
        """The model of a mechanism on Z (extended window) from its log-window ``row_log`` (the
        ``s`` log-probabilities of one row, offsets ``-t..t``), in ``O(k s)`` without the sparse
        conversions of ``__init__``: every row is ``row_log`` shifted, so a column's scale is the
        largest of the offsets that reach it (:func:`_sliding_max`), and ``S`` is built in CSR
        directly.  The same arrays as ``__init__`` on the channel (tested): the channel's rows are
        copies of that one row, and the maxima and ``exp`` see the same numbers.  Measured (10^4 values,
        a window of 275): 0.02-0.04 s against 0.3-0.65 s for ``__init__`` on the channel."""
        self = object.__new__(cls)
        self.lo, self.hi, self.k, self.label = lo, hi, hi - lo + 1, label
        k, s = self.k, row_log.size
        t = (s - 1) // 2
        self.m = k + s - 1
        self.outputs = np.arange(lo - t, hi + t + 1, dtype=np.int64)
        # column j holds row_log[d] for the offsets d in j - k + 1 .. j that lie in 0..s-1
        pad = np.full(k - 1, -np.inf)
        colmax = _sliding_max(np.concatenate([pad, row_log, pad]), k)
        self.log_cs = colmax
        indices = (np.arange(k, dtype=np.int64)[:, None] + np.arange(s, dtype=np.int64)[None, :]).ravel()
        scaled = np.exp(np.tile(row_log, k) - colmax[indices])
        S = sp.csr_array((scaled, indices, np.arange(k + 1, dtype=np.int64) * s), shape=(k, self.m))
        S.has_sorted_indices = True
        self.nnz = k * s
        self.dense = self.nnz >= _DENSE_SHARE * k * self.m and k * self.m <= _DENSE_MAX
        self.S = S.toarray() if self.dense else S
        self.log_window = np.array(row_log, dtype=float) if self.nnz >= _toeplitz._MIN_NNZ_BATCH else None
        self._contiguous = True
        return self

    # -- matrices --------------------------------------------------------------
    def columns(self, idx):
        """``S`` restricted to columns ``idx`` and its transpose, in the fast layout (CSR, sorted indices).

        Sparse: ``AT`` gathers rows of ``S^T`` (built once per model, in CSR), and ``A`` is its one
        conversion back; the same arrays as converting ``S`` to CSC, slicing and converting twice, as
        before 2026-11-30.  Measured (a window of 275 on 10^4 values, all / half the outputs): 65 / 35 ms
        against 160 / 116 ms (``S^T`` itself 45 ms, once); 1,000 values under a window of 137: 1.7 / 0.9
        ms against 3.0 / 2.2 ms.  The interior point's refits call it once per replicate."""
        if self.dense:
            A = np.ascontiguousarray(self.S[:, idx])
            return A, np.ascontiguousarray(A.T)
        ST = self.__dict__.get("_ST")
        if ST is None:  # (two threads may both build it: the same array, the last one kept)
            ST = sp.csr_array(self.S.T)
            ST.sort_indices()
            self._ST = ST
        AT = ST[np.asarray(idx)]
        AT.sort_indices()
        A = sp.csr_array(AT.T)
        A.sort_indices()
        return A, AT

    def fast_columns(self, idx, exact=None, batch: int = 1, two_level: bool = True):
        """Like :meth:`columns`, applied by FFT when the channel is a shifted window and that pays
        (:mod:`sparseldp.estimation._toeplitz`: approximate products, for iterations only) on ``batch``
        rows at once, or by prefix sums on a dense two-level channel (randomized response, the square wave,
        the Piecewise and Hybrid Mechanisms: :mod:`sparseldp.estimation._twolevel`; unless ``two_level`` is
        false).  Where neither applies, ``exact`` (the caller's ``columns(idx)``, if it has them) is returned
        as is."""
        pair = fft_pair(self.log_window, self.k, self.log_cs, np.asarray(idx), self.S, batch)
        if pair is None and two_level and self.dense:
            if "_two_level" not in self.__dict__:  # found once per model (two threads may both look: the same)
                self._two_level = TwoLevel.of(self.S)
            if self._two_level is not None:
                pair = self._two_level.pair(np.asarray(idx))
        if pair is not None:
            return pair
        return exact if exact is not None else self.columns(idx)

    def gram_band(self, idx, fast=None):
        """``w -> A diag(w) A^T`` for ``A = columns(idx)`` in upper banded storage, by FFT
        (:func:`~sparseldp.estimation._toeplitz.gram_band_of`) where the channel is a shifted window;
        ``None`` where it is not (the interior point and Newton then build the band from sparse products,
        or factor dense matrices).  On a dense channel only where the banded Cholesky pays
        (:func:`_band_pays`).  ``fast``: the caller's ``fast_columns(idx)``, whose FFT state gives the band
        where they are FFT products (the window's transform and end columns are not built twice)."""
        if self.dense_gram(len(idx)):
            return None
        conv = None if fast is None else getattr(fast[0], "_c", None)
        if conv is not None:
            return conv.gram_band
        return gram_band_of(self.log_window, self.k, self.log_cs, np.asarray(idx), self.S)

    def dense_gram(self, m: int) -> bool:
        """Whether the interior point and Newton factor a dense Gram on ``m`` observed outputs: a dense
        channel whose banded Cholesky does not pay (:func:`_band_pays`; a window channel's band is by
        FFT, :meth:`gram_band`).  Sparse channels are always banded."""
        return self.dense and (self.log_window is None or not _band_pays(self.k, self.log_window.size, m))

    def window_scales(self):
        """``(w_rel, f)`` for a channel whose rows are one window shifted over contiguous outputs: the window
        scaled to a largest entry of 1 and the column scales, ``S = T diag(f)`` with ``T[x, x + d] =
        w_rel[d]`` (``f`` is ``inf`` on columns far below the window's peak; ``_toeplitz.window_scales``);
        ``None`` for other channels.  Computed once per model."""
        if "_scales" not in self.__dict__:
            lw = self.log_window
            contiguous = lw is not None and self._contiguous and self.m == self.k + lw.size - 1
            self._scales = window_scales(lw, self.log_cs) if contiguous else None
        return self._scales

    def rank_estimate(self):
        """The window section's numerical rank by Szegő's count (:func:`_lowrank.rank_estimate`), ``None`` for
        a channel that is not a window (:meth:`window_scales`).  Computed once per model."""
        if "_rank" not in self.__dict__:
            scales = self.window_scales()
            self._rank = None if scales is None else _lowrank.rank_estimate(scales[0], self.k)
        return self._rank

    def low_rank(self, max_rank: int):
        """``(L, V)`` with the window section ``T = L V^T`` (:meth:`window_scales`; ``V`` orthonormal,
        ``m x r``) up to :data:`_lowrank._RTOL` of its norm, by :func:`_lowrank.factor`; ``None`` for a
        channel that is not a window or whose rank exceeds ``max_rank``.  Computed once per model."""
        with _LOW_RANK_LOCK:  # computed once, whichever of the bootstrap's threads asks first
            cached = self.__dict__.get("_low_rank")  # (the max_rank it was computed for, the factor or None)
            if cached is not None:
                bound, out = cached
                if out is not None:
                    return out if out[0].shape[1] <= max_rank else None
                if max_rank <= bound:
                    return None
            scales = self.window_scales()
            if scales is None:
                return None
            w_rel = scales[0]
            out = _lowrank.factor(_lowrank.Section(w_rel, self.k), _lowrank.rank_estimate(w_rel, self.k), max_rank)
            self._low_rank = (max_rank, out)
            return out

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


# Largest magnitude of a domain bound: integers up to 2^53 are exact in floating point, where the
# statistics of an estimate are computed.
_EXACT_INT = 2**53


def channel_columns(channel, model: _Model) -> np.ndarray:
    """The column of ``channel`` (a :class:`~sparseldp.channel.SparseChannel`) of each of ``model``'s outputs
    (the model of that channel on a domain: its outputs are some of the channel's labels)."""
    outs = np.asarray(channel.outputs)
    order = np.argsort(outs, kind="stable")
    return order[np.searchsorted(outs[order], model.outputs)]


def check_exact_domain(domain) -> tuple[int, int]:
    """:func:`~sparseldp.channel.check_domain`, and both bounds within ``[-2^53, 2^53]``."""
    lo, hi = check_domain(domain)
    if not (-_EXACT_INT <= lo and hi <= _EXACT_INT):
        raise ValueError(f"domain must lie within [-2^53, 2^53] for estimation (its statistics are computed "
                         f"in floating point); got ({lo}, {hi})")
    return lo, hi


# An estimate fit on a SparseChannel keeps its model for its bootstrap when the model holds at most this many
# channel entries (about 60 MB sparse): the general construction takes about 1 s for 10^4 values under a
# window of 275 (a mechanism on Z's model is built from one row in 0.03 s and is not kept).
_KEEP_NNZ = 5_000_000


def keep_model(estimate, mechanism, model: _Model):
    """Attach ``model`` (built for the channel ``mechanism``) to ``estimate`` as a cache for :func:`model_for`,
    if it is small enough (:data:`_KEEP_NNZ`); the estimate drops it when pickled or copied."""
    if isinstance(mechanism, SparseChannel) and model.nnz <= _KEEP_NNZ:
        object.__setattr__(estimate, "_channel_model", (mechanism, model))
    return estimate


def checked_counts(estimate, model: _Model) -> np.ndarray:
    """``estimate.counts`` as floats, checked to be its ``n`` reports' counts on ``model``'s outputs (finite,
    ``>= 0``): a ValueError names the mismatch (another mechanism's outputs, most likely)."""
    counts = np.asarray(estimate.counts, dtype=float)
    n = int(estimate.n)
    total = float(counts.sum())
    if counts.shape != (model.m,) or not np.isfinite(total) or bool((counts < 0).any()) or round(total) != n:
        size = counts.shape[0] if counts.ndim else 0
        raise ValueError(f"estimate.counts must be the {n:,} reports' counts on the {model.m} outputs of the "
                         f"domain {estimate.domain} under this mechanism (finite, >= 0); got {size} entries "
                         f"summing to {total:g}: is it the mechanism the estimate was fitted with?")
    return counts


def _same_model(a: _Model, b: _Model) -> bool:
    """Whether two models on one domain have the same outputs and log-probabilities (rounding aside)."""
    if not np.array_equal(a.outputs, b.outputs) or a.dense != b.dense:
        return False
    if not np.allclose(a.log_cs, b.log_cs, rtol=1e-12, atol=1e-12):
        return False
    if a.dense:
        return bool(np.allclose(a.S, b.S, rtol=1e-12, atol=0.0))
    return bool(np.array_equal(a.S.indptr, b.S.indptr) and np.array_equal(a.S.indices, b.S.indices)
                and np.allclose(a.S.data, b.S.data, rtol=1e-12, atol=0.0))


def mechanism_of(estimate, mechanism, caller: str):
    """``mechanism``, or when it is ``None`` the one the estimate was fitted with (``FrequencyEstimate.mechanism``)
    for ``caller`` (``"bootstrap"``, ``"profile"``); :func:`model_for` checks a given one against it."""
    if mechanism is not None:
        return mechanism
    kept = getattr(estimate, "mechanism", None)
    if kept is None:
        raise TypeError(f"{caller} needs mechanism=: this estimate does not record the mechanism it was "
                        "fitted with (built by hand); pass the one that produced the reports")
    return kept


def model_for(estimate, mechanism) -> _Model:
    """The model of ``mechanism`` on ``estimate.domain``: the one the estimate's fit built when it kept it
    (:func:`keep_model`) for this very channel (the same object), else a new one.

    A mechanism other than the one the estimate records (``FrequencyEstimate.mechanism``) must have the same
    channel on the domain (an equal value, or the same outputs and log-probabilities, e.g. a kernel
    mechanism's own channel), else a ValueError: its counts, refits and likelihoods would silently describe
    another experiment (two Laplace windows of the same support differ only in their weights, which the
    counts cannot reveal)."""
    domain = tuple(estimate.domain)
    recorded = getattr(estimate, "mechanism", None)
    if recorded is not None and mechanism is not recorded:
        model = _model(mechanism, domain)  # a TypeError for what is not a mechanism
        equal = False
        if type(recorded) is type(mechanism) and isinstance(mechanism, RadiusMechanism):
            try:
                equal = bool(recorded == mechanism)  # frozen mechanisms compare by their parameters
            except (TypeError, ValueError):  # a parameter that does not compare to a single bool
                pass
        if not (equal or _same_model(model_for(estimate, recorded), model)):
            raise ValueError(f"mechanism must be the one the estimate was fitted with ({recorded!r}) or one with "
                             f"the same channel on the domain {domain}; got {mechanism!r}")
        return model
    kept = getattr(estimate, "_channel_model", None)
    if kept is not None:
        mech, model = kept
        if mech is mechanism and (model.lo, model.hi) == domain:
            return model
    return _model(mechanism, domain)


def _band_pays(k: int, s: int, m: int) -> bool:
    """Whether the interior point and Newton on a dense window channel (``k`` values, a window of ``s``,
    ``m`` observed outputs) factor the banded Gram (FFT, ``k s^2`` flops for the banded Cholesky) rather
    than the dense one (``k^3 / 3`` for Cholesky and ``2 k^2 m`` for the Gram's product): where the band
    holds at most half the matrix (``s <= k / 2``) and costs at most half the flops."""
    return 2 * s <= k and 2.0 * k * s * s <= k ** 3 / 3.0 + 2.0 * k * k * m


def _model(mechanism, domain) -> _Model:
    if isinstance(mechanism, RadiusMechanism):
        if domain is None:
            raise ValueError(
                f"domain is required for a mechanism on Z ({mechanism!r}): pass domain=(lo, hi), "
                "the range of the true values"
            )
        lo, hi = check_exact_domain(domain)
        # the protocol's conversion (any kernel), on one value: every row of the domain's channel is this
        # row shifted (the extended window), so the model is built from it (_Model._of_window), after the
        # domain channel's own size check (a domain within 2^53 keeps its outputs within int64)
        check_entries(hi - lo + 1, mechanism.s, f"domain ({lo}, {hi}) with s = {mechanism.s}")
        row = mechanism.to_channel((lo, lo), "extended")
        return _Model._of_window(np.asarray(row.log_matrix.data, dtype=float), lo, hi, repr(mechanism))
    if isinstance(mechanism, SparseChannel):
        if domain is None:
            xs = np.sort(np.asarray(mechanism.inputs))
            lo, hi = int(xs[0]), int(xs[-1])
            lo, hi = check_exact_domain((lo, hi))
        else:
            lo, hi = check_exact_domain(domain)
        return _Model(mechanism, lo, hi, "the channel")
    raise TypeError(
        "mechanism must be a SparseLaplace, SparseGaussian or SparseChannel; "
        f"got {type(mechanism).__name__}"
    )
