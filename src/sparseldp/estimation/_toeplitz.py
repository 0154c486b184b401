r"""The channel of a mechanism on Z as a convolution: EM products in ``O(k log k)`` by FFT.

For a mechanism on Z with a translation-invariant kernel (``SparseLaplace``,
``SparseGaussian``) restricted to the domain ``lo..hi`` with the extended
window, every row is the same window shifted: ``Q(y | x) = w(y - x)`` for
``|y - x| <= t``, and the outputs are ``lo - t .. hi + t`` (``m = k + s - 1``
of them).  So the estimators' two products are a convolution and a
correlation with the window ``w`` (length ``s``):

.. math::

    (Q^T p)_j = \sum_x p_x\, w(j - x), \qquad (Q r)_x = \sum_j r_j\, w(j - x),

each ``O(m log m)`` by a real FFT of length ``L >= m`` (no wrap-around:
``w`` is zero outside ``0..s-1``) instead of ``O(k s)`` as a sparse product.
That is what makes the regularization path of ``method="auto"`` and the
bootstrap affordable on domains of ``10^4`` values with windows of hundreds.
The transforms themselves and their threads are :mod:`sparseldp.estimation._fft`'s.

Column scaling as in :class:`~sparseldp.estimation.model._Model`:
``S[x, j] = w(j - x) / max_x' w(j - x')``, i.e. ``w_rel(j - x) f_j`` with
``w_rel = w / max w`` and ``f_j = max w / max_x' w(j - x') >= 1`` (``f_j > 1``
only on the ``s - 1`` outputs at each end).  The operators below apply
exactly this ``S`` (restricted to the observed outputs ``obs``), so they are
drop-in replacements for ``model.columns(obs)`` in every EM-type iteration:
the FFT products times ``f_j`` where ``f_j <=`` :data:`_EDGE_SCALE` (their
roundoff grows with ``f_j``), the exact sparse columns at the far ends.
Measured (a Gaussian window of 701 on 1,000 values, where the ends are 1,400
of the 1,700 outputs): ``auto`` 16.4-18.3 s against 21.2 s with every end
output exact, its bootstrap (B = 200) 14.8-15.1 s against 17.3 s, the same
estimate and intervals to 1e-12.

Accuracy (which way it errs).  A floating-point FFT convolution of
nonnegative vectors errs by about ``log2(L)`` units of roundoff *relative to
the largest entry of the result*, not entrywise.  Entries of ``Q^T p`` below
:data:`_REL_FLOOR` times the column's largest entry carry no correct digits,
so they are raised to that floor (never negative, never zero); entries above
it are accurate to about ``1e-12`` relative.  This is used only where an
approximate product is the right tool: the iterations of EMS and of early-
stopped EM, the held-out scores of the selection and the bootstrap refits.
The log-likelihood and the certified gap that an estimate reports are always
computed with the exact sparse channel (``frequencies._result``).

Single precision (``_Conv.em_rows(dtype=np.float32)``) serves one caller: the
bootstrap's refits of ``auto``'s ``"em steps=t"`` member, a Monte Carlo
quantity whose spread is far above float32's roundoff (``intervals.bootstrap``,
``precision``).  The same rule holds with its own floor,
:data:`_REL_FLOOR_SINGLE`: entries are accurate to about ``1e-6`` of the
row's largest entry, and the run's iterates stay within a few ``1e-6`` of
the double run's, relative to the largest probability.
"""

from __future__ import annotations

import numpy as np
import scipy.fft as sfft
import scipy.sparse as sp

from ._fft import _IRFFT, _RFFT, fft_workers

# Entries of a convolution below this share of the column's largest entry are raised to it.
_REL_FLOOR = 1e-13
# The same for single precision (em_rows' dtype=float32): its roundoff is 2^29 times double's.
_REL_FLOOR_SINGLE = 1e-7
# End outputs whose column scale f_j is at most this go through the FFT too (times f_j): their entries
# err by at most f_j times the FFT's roundoff relative to the column's largest entry; beyond, exact.
_EDGE_SCALE = 100.0
# Use the FFT products when the window has at least this many entries ...
_MIN_WINDOW = 24
# ... and the channel at least this many stored entries (below, sparse products are as fast).
_MIN_NNZ = 200_000
# ... or this many, for products applied to a batch of at least _BATCH_ROWS rows at once (the bootstrap's
# "em steps=t" refits, in blocks of 25 rows at B = 200): the FFT's per-call cost is shared by the rows.
# Measured (Laplace windows, plain EM steps, the FFT in single precision against sparse products in
# double; us a row and step with 25 / 100 rows): 1,000 values and a window of 59 (59,000 entries)
# 23.2 / 17.7 against 43.8 / 50.4, a window of 25 (25,000) 16.3 / 11.7 against 22.5 / 23.7, 300
# values and a window of 59 (17,700) 10.4 / 6.3 against 13.2 / 9.0; 200 values and a window of 25
# (5,000) 5.3 / 4.0 against 4.8 / 3.1.
_MIN_NNZ_BATCH = 20_000
_BATCH_ROWS = 16
# em_rows renormalizes its rows every this many steps (the EM map ignores their scale; rounding drifts it).
_RENORMALIZE = 32
# The exact end columns go dense in em_rows when they have at most this many entries (values x outputs).
_DENSE_EDGE = 2_000_000


# EM iterates are kept at or above this, per dtype (em_rows; solvers._em_run): far below anything the products
# resolve (their floors are 1e-13 and 1e-7 of a column's largest entry), and far enough above the smallest normal
# number (2.2e-308, 1.2e-38) that the products' intermediate terms stay normal.  Subnormal arithmetic is many times
# slower on x86: a forward FFT of rows holding values near 1e-308 took 240-360 us against 28-42 us (1,000 values,
# length 1,200, double; the zero-inflated fit below), and float32 values near 1.2e-38 doubled it.
ITERATE_FLOOR = {np.dtype(np.float64): 1e-200, np.dtype(np.float32): 1e-30}

def _next_look(said, t: int):
    """What an EM run's ``observe`` said after ``t`` steps: ``None`` to stop (true), else the next step
    to call it at (``t + 1`` for false, or the step it gave, at least ``t + 1``)."""
    if isinstance(said, (bool, np.bool_)) or said is None:
        return None if said else t + 1
    return max(int(said), t + 1)


class _Conv:
    """Shared FFT state: the window's spectrum, the observed outputs, the exact edge columns."""

    def __init__(self, w_rel: np.ndarray, k: int, f: np.ndarray, obs: np.ndarray, S):
        self.k = k
        self.s = w_rel.size
        self.m = k + self.s - 1
        self.w_rel = w_rel
        self.obs = obs
        at_edge = f[obs] > _EDGE_SCALE  # the ends whose scale f_j is too large for the FFT's roundoff
        self.i_edge = np.flatnonzero(at_edge)  # positions in obs of the end columns (exact, sparse)
        self.i_mid = np.flatnonzero(~at_edge)
        self.mid = obs[self.i_mid]
        # the FFT length from the outputs that go through the FFT when all are observed (a function of the
        # channel alone, so products on a subset of outputs are those on all, bit for bit)
        through = np.flatnonzero(f <= _EDGE_SCALE)
        self.L = _fft_length(k, self.s, through)
        # the FFT outputs that may be read (no wrap-around there): the floor is relative to their largest
        self.span = slice(int(through[0]), int(through[-1]) + 1) if through.size else slice(0, 0)
        self.W = sfft.rfft(w_rel, self.L)
        self.Wc = np.conj(self.W)
        f_mid = f[self.mid]
        self.f_mid = None if np.all(f_mid == 1.0) else f_mid  # the column scales of the FFT outputs
        cols = obs[self.i_edge]
        # an end output sees only the s - 1 values at its end: read those rows, not all of S
        near = np.unique(np.r_[np.arange(min(self.s - 1, k)), np.arange(max(k - self.s + 1, 0), k)])
        part = sp.coo_array(sp.csc_array(S[near])[:, cols])
        # the exact end columns on the values that reach them: E is len(edge_rows) x len(cols)
        used = np.unique(part.row)
        self.edge_rows = near[used]
        E = sp.coo_array((part.data, (np.searchsorted(used, part.row), part.col)), shape=(used.size, cols.size))
        self.E = sp.csr_array(E)
        self.ET = sp.csr_array(E.T)
        # contiguous runs as slices (every output observed: the bootstrap), else index arrays
        self.mid_ix = _as_slice(self.mid)
        self.i_mid_ix = _as_slice(self.i_mid)

    def _fft(self, X, spectrum, n):
        workers = fft_workers(X.shape[0])
        if X.shape[1] != self.L:  # zero-padded to the transform's length
            Xp = np.zeros((X.shape[0], self.L), X.dtype)
            Xp[:, :X.shape[1]] = X
            X = Xp
        F = _RFFT(X, workers)
        F *= spectrum
        return _IRFFT(F, self.L, workers)[:, :n]

    def conv(self, P: np.ndarray) -> np.ndarray:
        """``(S^T P)`` on the observed outputs; ``P`` is ``(k,)`` or ``(k, b)``."""
        one = P.ndim == 1
        X = P[None, :] if one else np.ascontiguousarray(P.T)  # FFTs along contiguous rows (no copy for F order)
        Z = self._fft(X, self.W, self.m)
        floor = _REL_FLOOR * Z[:, self.span].max(axis=1, keepdims=True, initial=0.0)
        out = np.empty((X.shape[0], self.obs.size))
        if isinstance(self.i_mid_ix, slice):
            np.maximum(Z[:, self.mid_ix], floor, out=out[:, self.i_mid_ix])
        else:
            out[:, self.i_mid_ix] = np.maximum(Z[:, self.mid_ix], floor)
        if self.f_mid is not None:
            out[:, self.i_mid_ix] *= self.f_mid
        if self.i_edge.size:
            out[:, self.i_edge] = (self.ET @ X[:, self.edge_rows].T).T
        return out[0] if one else out.T

    def corr(self, R: np.ndarray) -> np.ndarray:
        """``S R`` for ``R`` on the observed outputs, ``(len(obs),)`` or ``(len(obs), b)``."""
        one = R.ndim == 1
        X = R[None, :] if one else np.ascontiguousarray(R.T)
        full = np.zeros((X.shape[0], self.L))  # the inputs on the middle outputs, zero-padded to L
        full[:, self.mid_ix] = X[:, self.i_mid_ix]
        if self.f_mid is not None:
            full[:, self.mid_ix] *= self.f_mid
        Z = self._fft(full, self.Wc, self.k)
        np.maximum(Z, 0.0, out=Z)
        if self.i_edge.size:
            Z[:, self.edge_rows] += (self.E @ X[:, self.i_edge].T).T
        return Z[0] if one else Z.T

    def em_rows(self, P: np.ndarray, C: np.ndarray, steps: int, inv_n=None, observe=None,
                dtype=np.float64, relax: int = 0) -> np.ndarray:
        r"""Up to ``steps`` plain EM steps ``p <- p * (S r) / n``, ``r = c / (S^T p)``, on every row of ``P``
        (``b x k``) with the counts ``C`` (``b x len(obs)``, rows); the rows reached (float64).

        ``inv_n`` (``b``): the factor ``1 / n`` of each row; ``None``: each step is renormalized to sum 1
        instead (the same in exact arithmetic; it keeps rounding from drifting).  ``observe(t, P, Q)``,
        if given, sees the rows ``P`` after ``t`` steps and their outputs ``Q = S^T P`` (``b x len(obs)``,
        as :meth:`conv` gives them; one buffer, overwritten at the next step) before the first step and
        after the last, and in between as it asks (``solvers._em_run``: true stops the run, false asks for
        the next step, an integer names the next step it needs; ``Q`` is only assembled for it then).
        The arithmetic is that of :meth:`conv` and :meth:`corr`, fused for a long run of steps:
        the zero-padded FFT inputs are kept from step to step (the padding is written once, the ratios
        ``r`` land in place), the column scales cancel in the FFT outputs (``f_j r_j = c_j / (w_rel * p)_j``,
        so they are applied only to the ``Q`` that ``observe`` sees), the end outputs' exact products
        touch only the ``2 (s - 1)`` values near the ends, and nothing of size ``b x L`` is copied
        beyond the FFTs' own outputs.

        ``relax``: over-relaxed steps ``p <- p * g^(2 - 2^-relax)`` (renormalized every step), each worth
        ``2 - 2^-relax`` plain steps (:func:`sparseldp.estimation.solvers._em_run`); 0: plain steps.

        ``dtype=np.float32`` runs the FFT products and the iterates in single precision (the exact end
        columns stay in double): for the bootstrap's refits, whose spread is a Monte Carlo quantity
        far above single-precision rounding (see :func:`~sparseldp.estimation.intervals.bootstrap`'s
        ``precision``).  Its floor :data:`_REL_FLOOR_SINGLE` is single precision's share of the
        FFT's roundoff, as :data:`_REL_FLOOR` is double's.

        The factor ``1 / n`` rides in the counts (``r = c / (n q)``), so a step is ``p *= g`` alone; the rows
        are renormalized every :data:`_RENORMALIZE` steps (every step where ``observe`` reads them), which
        changes nothing in exact arithmetic (the EM map ignores the scale of ``p``).  The exact end columns
        are dense BLAS products where they have at most :data:`_DENSE_EDGE` entries.

        Measured (10^4 values, a window of 275, 50 rows in two threads of one FFT thread each):
        133 us a row and step before this fusion's scale cancellation, 104 us in double, 66 us in single.
        The FFT length from the clean outputs (:func:`_fft_length`: 10,240 against 10,368), the dense end
        columns and the renormalization every 32 steps, one FFT thread, 25 rows, single precision,
        measured beside other work (2026-11-29): 145 -> 118 us a row and step; 1,000 values under the
        Gaussian window of 695 (lengths 1,500 against 1,728), 26 -> 17.5 us.
        Without ``observe`` the exact end columns that no row observes are left out (their ratio is 0,
        so the iterates are the same bit for bit): 1,000 values under a Gaussian window of 695 (438 exact
        end columns), 10^4 reports, 25 rows in single precision, 79 us a row and step against 35-44 us.
        """
        if relax and inv_n is not None:
            raise ValueError("relaxed steps renormalize every step: inv_n must be None")
        rs = _RowSteps(self, P, C, inv_n, dtype, observe is not None)
        p, tiny, scale = rs.p, rs.tiny, rs.scale
        renormalize = 1 if observe is not None or relax else _RENORMALIZE
        Q = None if observe is None else np.empty((p.shape[0], self.obs.size))  # reused: observe reads it at once
        look = 0  # the next step observe sees (solvers._em_run: it may name a later one)
        for t in range(steps + 1):
            if t == steps and observe is None:
                break
            Zm, Qe = rs.forward()
            if observe is not None and (t >= look or t == steps):  # Q only where observe reads it
                Q[:, self.i_mid_ix] = Zm if self.f_mid is None else Zm * self.f_mid
                Q[:, self.i_edge] = Qe
                look = _next_look(observe(t, p, Q), t)
                if look is None or t == steps:
                    break
            G = rs.backward()
            p *= G
            for _ in range(relax):  # p <- p * g^(1 + 1/2 + ... + 2^-relax), renormalized every step
                np.sqrt(G, out=G)
                p *= G
            np.maximum(p, tiny, out=p)  # no subnormal terms (ITERATE_FLOOR)
            if scale is None and (t + 1) % renormalize == 0:
                p *= 1.0 / p.sum(axis=1, keepdims=True)
        out = p.astype(np.float64)
        if scale is None:  # the rows sum to 1 (in double too)
            out /= out.sum(axis=1, keepdims=True)
        return out

    def g_rows(self, P: np.ndarray, C: np.ndarray, dtype=np.float64):
        """``(p, g)``: the EM map's factor ``g(p) = S (c / (n S^T p))`` on rows, as :meth:`em_rows` computes it
        (``p`` a ``b x k`` buffer of ``dtype`` holding ``P``, to be overwritten with any rows, ``g()`` their
        factors as a fresh ``b x k`` array of ``dtype``; the counts ``C`` are each row's own, normalized by
        their totals).  For integrators of the EM flow other than plain steps (``solvers._em_chebyshev``)."""
        rs = _RowSteps(self, P, C, None, dtype, False)

        def g():
            rs.forward()
            return rs.backward()

        return rs.p, g


    def gram_band(self, w: np.ndarray) -> np.ndarray:
        r"""``S diag(w) S^T`` (``k x k``, ``w`` on the observed outputs) in LAPACK's upper banded storage.

        Entry ``(x, x + d)`` (``0 <= d < s``) is ``sum_j w_j S[x, j] S[x + d, j]``.  On the middle
        outputs ``S[x, j] = w_rel(j - x)``, so each superdiagonal ``d`` is one correlation of the
        weights with ``u_d(i) = w_rel(i) w_rel(i - d)``: all ``s`` of them by one forward and ``s``
        inverse FFTs (the spectra of ``u_d`` are computed once).  The end outputs add their exact
        sparse product.  Returns ``ab`` (``s x k``) with ``ab[s - 1 + x - y, y] = M[x, y]`` for ``x <= y``
        (``scipy.linalg.solveh_banded``'s upper form).  Used by Newton's step
        (``_newton._newton``), whose result is checked by the exact certificate.
        """
        k, s = self.k, self.s
        if getattr(self, "_U", None) is None:
            w_rel = self.w_rel
            U = np.zeros((s, s))
            for d in range(s):
                U[d, d:] = w_rel[d:] * w_rel[: s - d]
            self._U = np.conj(sfft.rfft(U, self.L, axis=1))
        full = np.zeros(self.L)
        full[self.mid] = w[self.i_mid] if self.f_mid is None else w[self.i_mid] * self.f_mid ** 2
        Z = sfft.irfft(self._U * sfft.rfft(full, self.L)[None, :], self.L, axis=1)[:, :k]
        ab = np.zeros((s, k))
        for d in range(min(s, k)):
            ab[s - 1 - d, d:] = Z[d, : k - d]
        if self.i_edge.size:
            Me = sp.coo_array(self.E @ sp.diags_array(w[self.i_edge]) @ self.ET)
            r, c = self.edge_rows[Me.row], self.edge_rows[Me.col]
            up = r <= c
            np.add.at(ab, (s - 1 + r[up] - c[up], c[up]), Me.data[up])
        return ab


class _RowSteps:
    r"""The buffers and products of :meth:`_Conv.em_rows`, one EM evaluation at a time: :meth:`forward` the
    outputs ``S^T p`` of the rows ``p`` (middle ones through the FFT, floored; exact end ones),
    :meth:`backward` the factor ``g = S r``, ``r = c / (S^T p)`` (the counts carry each row's ``1 / n``).

    The zero-padded FFT inputs are kept from evaluation to evaluation (the padding is written once, the
    ratios ``r`` land in place), the column scales cancel in the FFT outputs (``f_j r_j = c_j / (w_rel *
    p)_j``), the end outputs' exact products touch only the ``2 (s - 1)`` values near the ends, and
    without ``observed`` (no one reads the outputs) the exact end columns that no row observes are left out
    (their ratio is 0, so the factors are the same bit for bit).
    """

    def __init__(self, conv: _Conv, P, C, inv_n, dtype, observed: bool):
        dtype = np.dtype(dtype)
        if dtype not in (np.float64, np.float32):
            raise ValueError(f"dtype must be float64 or float32; got {dtype}")
        self.c = conv
        b, k, L = P.shape[0], conv.k, conv.L
        single = dtype == np.float32
        self.W, self.Wc = ((conv.W.astype(np.complex64), conv.Wc.astype(np.complex64)) if single
                           else (conv.W, conv.Wc))
        self.rel_floor = dtype.type(_REL_FLOOR_SINGLE if single else _REL_FLOOR)
        self.tiny = dtype.type(ITERATE_FLOOR[dtype])
        self.scale = None if inv_n is None else np.broadcast_to(np.asarray(inv_n, dtype=dtype), (b,))[:, None]
        self.workers = fft_workers(b)
        self.xp = np.zeros((b, L), dtype)
        self.xr = np.zeros((b, L), dtype)
        self.p = self.xp[:, :k]
        self.p[...] = P
        C = np.asarray(C, dtype=float)
        # the factor 1 / n goes into the counts (g = S (c / q) / n sums to 1 against p): each step is then
        # p *= g alone; without inv_n, each row's own total, and the rows renormalized every
        # _RENORMALIZE steps (every step where observe reads them) against drift
        if self.scale is None:
            total = C.sum(axis=1)
            C = C * (1.0 / np.where(total > 0, total, 1.0))[:, None]
        else:
            C = C * np.asarray(self.scale, dtype=float)
        self.mid_slice = isinstance(conv.mid_ix, slice)
        self.Cm = C[:, conv.i_mid_ix].astype(dtype)
        self.Rm = self.xr[:, conv.mid_ix] if self.mid_slice else np.zeros_like(self.Cm)
        edges = conv.i_edge.size > 0
        rows, E, ET = conv.edge_rows, conv.E, conv.ET
        Ce = C[:, conv.i_edge]
        if edges and not observed:
            # no one reads Q: the end outputs no row observes add nothing (their ratio is 0), so their
            # exact columns are left out (the far ends of a wide window: most of them at 10^4 reports)
            seen = np.flatnonzero((Ce > 0).any(axis=0))
            if seen.size < Ce.shape[1]:
                E = sp.csr_array(E[:, seen])
                touched = np.flatnonzero(np.diff(E.indptr))  # the values that reach those outputs
                rows, E = rows[touched], sp.csr_array(E[touched])
                ET, Ce = sp.csr_array(E.T), Ce[:, seen]
                edges = seen.size > 0
        self.has_e = Ce > 0
        self.Re = np.zeros_like(Ce)
        if edges and E.shape[0] * E.shape[1] <= _DENSE_EDGE:  # small: dense products (BLAS), not sparse ones
            E = E.toarray()
            ET = np.ascontiguousarray(E.T)
        self.edges, self.rows, self.E, self.ET, self.Ce = edges, rows, E, ET, Ce
        self.Qe = np.zeros((b, 0))

    def forward(self):
        """``(Zm, Qe)``: the middle outputs' FFT products of the rows ``p`` (floored; without their column
        scales) and the end outputs' exact ones."""
        c, p = self.c, self.p
        F = _RFFT(self.xp, self.workers)
        F *= self.W
        Z = _IRFFT(F, c.L, self.workers)
        floor = self.rel_floor * Z[:, c.span].max(axis=1, keepdims=True)
        self.Zm = Zm = Z[:, c.mid_ix]
        np.maximum(Zm, floor, out=Zm)  # > 0: a ratio with no count is 0
        if self.edges:
            E, rows = self.E, self.rows
            self.Qe = p[:, rows].astype(float) @ E if isinstance(E, np.ndarray) else (self.ET @ p[:, rows].T.astype(float)).T
        return Zm, self.Qe

    def backward(self):
        """The factor ``g`` (``b x k``) of the rows :meth:`forward` saw."""
        c = self.c
        np.divide(self.Cm, self.Zm, out=self.Rm)  # f_j r_j = c_j / (f_j Z_j) * f_j
        if not self.mid_slice:
            self.xr[:, c.mid] = self.Rm
        if self.edges:
            np.divide(self.Ce, self.Qe, out=self.Re, where=self.has_e)
        F = _RFFT(self.xr, self.workers)
        F *= self.Wc
        G = _IRFFT(F, c.L, self.workers)[:, :c.k]
        np.maximum(G, 0.0, out=G)
        if self.edges:
            E = self.E
            G[:, self.rows] += self.Re @ self.ET if isinstance(E, np.ndarray) else (E @ self.Re.T).T
        return G


def _fft_length(k: int, s: int, mid: np.ndarray) -> int:
    r"""The FFT length for products whose outputs through the FFT are ``mid`` (sorted, in ``0..m-1``).

    A circular convolution of length ``L`` adds the linear convolution's output ``j + L`` to output
    ``j``.  The outputs read, ``a <= j < b`` (``a, b`` the ends of ``mid``), stay clean when
    ``L >= m - a`` and ``L >= b``; the correlation back onto the values ``0..k-1`` from inputs on
    ``a..b-1`` then stays clean too (a negative index ``x >= a - s + 1`` wraps to ``x + L >= k``).
    So ``L`` is the next fast length from ``max(k, m - a, b)``, not from ``m``: the end outputs
    handled exactly (:data:`_EDGE_SCALE`) need no room.  A window of 275 on 10^4 values: 10,240
    (2^11 5) instead of 10,368 (2^7 3^4), 9 % less time per transform.
    """
    m = k + s - 1
    need = m if mid.size == 0 else max(k, m - int(mid[0]), int(mid[-1]) + 1)
    return sfft.next_fast_len(need, real=True)


def _as_slice(ix: np.ndarray):
    """``ix`` as a slice when it is one contiguous increasing run, else ``ix`` itself."""
    if ix.size and int(ix[-1]) - int(ix[0]) + 1 == ix.size:
        return slice(int(ix[0]), int(ix[-1]) + 1)
    return ix


class _ConvA:
    """``A`` (``k x len(obs)``): ``A @ R``."""

    def __init__(self, conv: _Conv):
        self._c = conv
        self.shape = (conv.k, conv.obs.size)

    def __matmul__(self, R):
        return self._c.corr(np.asarray(R, dtype=float))

    def em_rows(self, P, C, steps, inv_n=None, observe=None, dtype=np.float64, relax=0):
        """Plain (or over-relaxed) EM steps on rows (:meth:`_Conv.em_rows`)."""
        return self._c.em_rows(P, C, steps, inv_n, observe, dtype, relax)

    def g_rows(self, P, C, dtype=np.float64):
        """The EM map's factor on rows (:meth:`_Conv.g_rows`)."""
        return self._c.g_rows(P, C, dtype)


class _ConvAT:
    """``A^T`` (``len(obs) x k``): ``AT @ P``."""

    def __init__(self, conv: _Conv):
        self._c = conv
        self.shape = (conv.obs.size, conv.k)

    def __matmul__(self, P):
        return self._c.conv(np.asarray(P, dtype=float))


def window_of(logm_csr, k: int) -> np.ndarray | None:
    """The common log-window of a ``k``-row CSR log-channel whose rows are one window shifted by one
    output per row (``None`` otherwise).  ``O(nnz)``: every row is compared with the first.
    """
    indptr, indices, data = logm_csr.indptr, logm_csr.indices, np.asarray(logm_csr.data, dtype=float)
    nnz = np.diff(indptr)
    if k == 0 or nnz.size != k or not np.all(nnz == nnz[0]) or nnz[0] == 0:
        return None
    s = int(nnz[0])
    idx = indices.reshape(k, s)
    first = idx[0]
    if not np.all(np.diff(first) == 1) or not np.all(idx == first[None, :] + np.arange(k)[:, None]):
        return None
    rows = data.reshape(k, s)
    if not np.array_equal(rows, np.broadcast_to(rows[0], rows.shape)):
        return None
    return rows[0].copy()


def window_scales(log_window: np.ndarray, log_cs: np.ndarray):
    """``(w_rel, f)``: the window scaled to a largest entry of 1 and the column scales, ``S = T diag(f)`` with
    ``T[x, x + d] = w_rel[d]`` (``f`` is 1 where a column holds the window's peak, more at the ends, and
    ``inf`` on an end column far below the peak, which stays exact and sparse)."""
    top = float(log_window.max())
    with np.errstate(over="ignore"):
        return np.exp(log_window - top), np.exp(top - np.asarray(log_cs, dtype=float))


def gram_band_of(log_window: np.ndarray | None, k: int, log_cs: np.ndarray, obs: np.ndarray, S):
    """``w -> S diag(w) S^T`` on the observed outputs ``obs`` in upper banded storage by FFT
    (:meth:`_Conv.gram_band`), for a channel that is a shifted window of at least :data:`_MIN_WINDOW`
    entries; ``None`` otherwise.  Unlike the EM products (:func:`fft_pair`), the Gram pays on any such
    channel: the sparse product behind ``_ipm._sparse_band`` costs about ``m s^2``, the FFT ``s``
    inverse transforms of length ``L``.  Measured (one BLAS thread, one call, sparse product against FFT):
    500 values under the Laplace window of 137, 26.9 ms against 1.35 ms; 1,000 values, 50.6 / 1.9 ms; a
    window of 45 on 500 / 2,000 values, 3.9 / 14.5 ms against 0.55 / 1.1 ms; the Gaussian window of 113 on
    500 values, 29.8 / 1.3 ms (channels whose EM products stay sparse, which had no FFT band before
    2026-11-30; larger ones, e.g. 2,000 values under the window of 137, had it already).  Its roundoff is that of
    the FFT products (module docstring); the interior point and Newton steps it serves are checked by the
    exact certificate."""
    if log_window is None or log_window.size < _MIN_WINDOW:
        return None
    w_rel, f = window_scales(log_window, log_cs)
    return _Conv(w_rel, k, f, np.asarray(obs, dtype=np.int64), S).gram_band


def fft_pair(log_window: np.ndarray | None, k: int, log_cs: np.ndarray, obs: np.ndarray, S, batch: int = 1):
    """``(A, AT)`` for the observed outputs ``obs`` of the column-scaled channel ``S`` (``k x m``,
    sparse or dense), by FFT in the middle and exactly at the ends; ``None`` when the channel is not
    a shifted window or the FFT would not pay (module docstring) for products on ``batch`` rows at once
    (:data:`_MIN_NNZ`, or :data:`_MIN_NNZ_BATCH` from :data:`_BATCH_ROWS` rows)."""
    # a shifted window stores exactly its s entries in each of the k rows
    min_nnz = _MIN_NNZ_BATCH if batch >= _BATCH_ROWS else _MIN_NNZ
    if log_window is None or log_window.size < _MIN_WINDOW or log_window.size * k < min_nnz:
        return None
    w_rel, f = window_scales(log_window, log_cs)  # f > 1 on the s - 1 outputs at each end
    conv = _Conv(w_rel, k, f, np.asarray(obs, dtype=np.int64), S)
    return _ConvA(conv), _ConvAT(conv)
