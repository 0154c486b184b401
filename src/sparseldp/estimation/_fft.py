"""The real FFTs behind the window channels' products (:mod:`sparseldp.estimation._toeplitz`), and how many
threads they use.

``_RFFT`` / ``_IRFFT`` transform along the last axis of a 2-D array, straight into scipy's pocketfft module
where it is present and agrees with ``scipy.fft`` (:func:`_direct_transforms`).  A batch of at least
:data:`_PARALLEL_ROWS` rows uses two FFT threads (:func:`fft_workers`), unless the calling thread runs inside
:func:`one_fft_thread` (blocks of a batch run in threads of their own, :mod:`sparseldp.estimation._parallel`).
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import scipy.fft as sfft

# Entries of a convolution below this share of the column's largest entry are raised to it.
_REL_FLOOR = 1e-13
# The same for single precision (``_fft_em.em_rows``' dtype=float32): its roundoff is 2^29 times double's.
_REL_FLOOR_SINGLE = 1e-7
# Batches with at least this many columns use two FFT threads.
_PARALLEL_ROWS = 8

_LOCAL = threading.local()


def _direct_transforms():
    """``(rfft, irfft)`` along the last axis of a 2-D array, straight into scipy's pocketfft module
    (``scipy.fft._pocketfft.pypocketfft``): without ``scipy.fft``'s dispatch and argument handling,
    about 10 us a call, as much as the transform itself at the lengths of 1,000-value domains (1,500).
    Inputs must have the transform's length (no padding here) and a real or complex float dtype.  The
    module is private, so the pair is checked against ``scipy.fft`` on both precisions at import; where
    it is missing or disagrees, ``scipy.fft``'s own functions stand in."""

    def public():
        return (lambda X, workers: sfft.rfft(X, axis=-1, workers=workers),
                lambda F, n, workers: sfft.irfft(F, n, axis=-1, workers=workers))

    try:
        from scipy.fft._pocketfft import pypocketfft as pfft

        def rfft(X, workers):
            return pfft.r2c(X, (X.ndim - 1,), True, 0, None, workers)

        def irfft(F, n, workers):
            return pfft.c2r(F, (F.ndim - 1,), n, False, 2, None, workers)

        rng = np.random.default_rng(0)
        for dtype in (np.float32, np.float64):
            X = rng.random((3, 37)).astype(dtype)
            F, G = rfft(X, 1), sfft.rfft(X, axis=-1)
            Y, Z = irfft(F, 37, 1), sfft.irfft(G, 37, axis=-1)
            if F.dtype != G.dtype or Y.dtype != Z.dtype or not (np.array_equal(F, G) and np.array_equal(Y, Z)):
                return public()
        return rfft, irfft
    except Exception:  # pragma: no cover - a scipy without the private module: the public functions
        return public()


_RFFT, _IRFFT = _direct_transforms()


def fft_workers(rows: int) -> int:
    """FFT threads for a batch of ``rows``: two for a large batch, one inside :func:`one_fft_thread`."""
    return 2 if rows >= _PARALLEL_ROWS and not getattr(_LOCAL, "single", False) else 1


@contextlib.contextmanager
def one_fft_thread():
    """Within this context (in the calling thread only), the FFT products use one thread: for
    callers that run several batches in threads of their own (:mod:`sparseldp.estimation._parallel`)."""
    before = getattr(_LOCAL, "single", False)
    _LOCAL.single = True
    try:
        yield
    finally:
        _LOCAL.single = before
