r"""EM steps on rows through a window channel's FFT products (``_toeplitz._Conv``): :func:`em_rows`, the
plain (or over-relaxed) steps of ``solvers._em_run`` fused over kept buffers, and :func:`g_rows`, the EM
factor alone for other integrators of the EM flow (``solvers._em_chebyshev``); both through
:class:`_RowSteps`.  The products' accuracy is :mod:`sparseldp.estimation._toeplitz`'s docstring's.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._fft import _IRFFT, _REL_FLOOR, _REL_FLOOR_SINGLE, _RFFT, fft_workers

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


def em_rows(conv, P: np.ndarray, C: np.ndarray, steps: int, inv_n=None, observe=None,
            dtype=np.float64, relax: int = 0) -> np.ndarray:
    r"""Up to ``steps`` plain EM steps ``p <- p * (S r) / n``, ``r = c / (S^T p)``, on every row of ``P``
    (``b x k``) with the counts ``C`` (``b x len(obs)``, rows); the rows reached (float64).

    ``inv_n`` (``b``): the factor ``1 / n`` of each row; ``None``: each step is renormalized to sum 1
    instead (the same in exact arithmetic; it keeps rounding from drifting).  ``observe(t, P, Q)``,
    if given, sees the rows ``P`` after ``t`` steps and their outputs ``Q = S^T P`` (``b x len(obs)``,
    as ``conv.conv`` gives them; one buffer, overwritten at the next step) before the first step and
    after the last, and in between as it asks (``solvers._em_run``: true stops the run, false asks for
    the next step, an integer names the next step it needs; ``Q`` is only assembled for it then).
    The arithmetic is that of ``conv.conv`` and ``conv.corr``, fused for a long run of steps
    (:class:`_RowSteps`; the column scales are applied only to the ``Q`` that ``observe`` sees), and nothing
    of size ``b x L`` is copied beyond the FFTs' own outputs.

    ``relax``: over-relaxed steps ``p <- p * g^(2 - 2^-relax)`` (renormalized every step), each worth
    ``2 - 2^-relax`` plain steps (:func:`sparseldp.estimation.solvers._em_run`); 0: plain steps.

    ``dtype=np.float32`` runs the FFT products and the iterates in single precision (the exact end
    columns stay in double): for the bootstrap's refits, whose spread is a Monte Carlo quantity
    far above single-precision rounding (see :func:`~sparseldp.estimation.intervals.bootstrap`'s
    ``precision``).  Its floor ``_fft._REL_FLOOR_SINGLE`` is single precision's share of the
    FFT's roundoff, as ``_fft._REL_FLOOR`` is double's.

    The factor ``1 / n`` rides in the counts (``r = c / (n q)``), so a step is ``p *= g`` alone; the rows
    are renormalized every :data:`_RENORMALIZE` steps (every step where ``observe`` reads them), which
    changes nothing in exact arithmetic (the EM map ignores the scale of ``p``).  The exact end columns
    are dense BLAS products where they have at most :data:`_DENSE_EDGE` entries.

    Measured (10^4 values, a window of 275, 50 rows in two threads of one FFT thread each):
    133 us a row and step before this fusion's scale cancellation, 104 us in double, 66 us in single.
    The FFT length from the clean outputs (``_toeplitz._fft_length``: 10,240 against 10,368), the dense end
    columns and the renormalization every 32 steps, one FFT thread, 25 rows, single precision,
    measured beside other work (2026-11-29): 145 -> 118 us a row and step; 1,000 values under the
    Gaussian window of 695 (lengths 1,500 against 1,728), 26 -> 17.5 us.
    Without ``observe``, leaving out the exact end columns no row observes (:class:`_RowSteps`): 1,000
    values under a Gaussian window of 695 (438 exact end columns), 10^4 reports, 25 rows in single
    precision, 79 us a row and step against 35-44 us.
    """
    if relax and inv_n is not None:
        raise ValueError("relaxed steps renormalize every step: inv_n must be None")
    rs = _RowSteps(conv, P, C, inv_n, dtype, observe is not None)
    p, tiny, scale = rs.p, rs.tiny, rs.scale
    renormalize = 1 if observe is not None or relax else _RENORMALIZE
    Q = None if observe is None else np.empty((p.shape[0], conv.obs.size))  # reused: observe reads it at once
    look = 0  # the next step observe sees (solvers._em_run: it may name a later one)
    for t in range(steps + 1):
        if t == steps and observe is None:
            break
        Zm, Qe = rs.forward()
        if observe is not None and (t >= look or t == steps):  # Q only where observe reads it
            Q[:, conv.i_mid_ix] = Zm if conv.f_mid is None else Zm * conv.f_mid
            Q[:, conv.i_edge] = Qe
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

def g_rows(conv, P: np.ndarray, C: np.ndarray, dtype=np.float64):
    """``(p, g)``: the EM map's factor ``g(p) = S (c / (n S^T p))`` on rows, as :func:`em_rows` computes it
    (``p`` a ``b x k`` buffer of ``dtype`` holding ``P``, to be overwritten with any rows, ``g()`` their
    factors as a fresh ``b x k`` array of ``dtype``; the counts ``C`` are each row's own, normalized by
    their totals).  ``g(loglik=True)``: ``(factors, each row's sum_y c_y log q_y / n)`` from the same forward
    products (``q`` without the column scales: a constant shift per row).  For integrators of the EM flow
    other than plain steps (``solvers._em_chebyshev``, whose guard reads the log-likelihood)."""
    rs = _RowSteps(conv, P, C, None, dtype, False)

    def g(loglik=False):
        Zm, Qe = rs.forward()
        if not loglik:
            return rs.backward()
        ll = (rs.Cm * np.log(Zm)).sum(axis=1, dtype=np.float64)
        if rs.edges:
            ll += (rs.Ce * np.log(np.where(rs.has_e, Qe, 1.0))).sum(axis=1)
        return rs.backward(), ll

    return rs.p, g


class _RowSteps:
    r"""The buffers and products of :func:`em_rows`, one EM evaluation at a time: :meth:`forward` the
    outputs ``S^T p`` of the rows ``p`` (middle ones through the FFT, floored; exact end ones),
    :meth:`backward` the factor ``g = S r``, ``r = c / (S^T p)`` (the counts carry each row's ``1 / n``).

    The zero-padded FFT inputs are kept from evaluation to evaluation (the padding is written once, the
    ratios ``r`` land in place), the column scales cancel in the FFT outputs (``f_j r_j = c_j / (w_rel *
    p)_j``), the end outputs' exact products touch only the ``2 (s - 1)`` values near the ends, and
    without ``observed`` (no one reads the outputs) the exact end columns that no row observes are left out
    (their ratio is 0, so the factors are the same bit for bit).
    """

    def __init__(self, conv, P, C, inv_n, dtype, observed: bool):
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
            near = p[:, rows].astype(float)
            self.Qe = near @ E if isinstance(E, np.ndarray) else (self.ET @ near.T).T
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
