"""Independent columns of a batched refit, cut into blocks run in threads.

The batched solvers of the bootstrap (``refits._refit_em_steps``, ``refits._refit_ems``,
``_mle_refits._refit_em``) iterate every column on its own: a column's
iterates and stopping do not depend on the other columns of the batch.  So a
batch can be cut into blocks of columns, run in threads, and put back
together.  Only rounding can tell the blocks from one batch (a few units in
the last place from how a product is vectorized), and the MLE's refits,
which stop anywhere within their tolerance on a flat likelihood, can carry
that to differences far below the bootstrap spread.  So the blocks are a
function of the number of columns alone (:func:`blocks_for`), never of the
machine: a seed gives the same replicates on any number of CPUs; the CPUs
only decide how many blocks run at once.

Threads pay where the work releases the GIL and is not already parallel:
FFT products (:mod:`sparseldp.estimation._toeplitz`; each block then uses
one FFT thread), sparse products (scipy's sparse kernels release the GIL)
and the elementwise numpy work around them.  Dense matrix products are one
block: BLAS already uses every core, and splitting the product measured slower.
Small dense channels, whose products run in one BLAS thread (:func:`small_blas`),
were tried in blocks too and were slower (2026-11-28, B = 200 on the 2-core
machine, same replicates: the MLE's refits on 73 values under a Gaussian window
of 351, 2.4 s against 1.9 s; 5,218 EM steps on 100 values, 4.8 s against 4.2 s):
their per-step work is too small to leave the GIL for long.
Measured (10^4 values, a window of 275, ``em steps=1622``, B = 50, one run
each on the 2-core machine): 21.9 s as one batch, 12.2 s in two threads.
"""

from __future__ import annotations

import contextlib
import functools
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._fft import one_fft_thread

try:  # optional (the cli extra installs it): the core needs numpy and scipy alone
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover - exercised only without the extra
    threadpool_limits = None

# Channels with at most this many entries (inputs x outputs) run their BLAS products in one thread.
_SMALL_BLAS = 250_000
# Dense channels from this many entries up to _SMALL_BLAS run the calibration's draws two at a time (draw_threads).
_DRAWS_SIDE_BY_SIDE = 40_000
# Fewest columns per block (below, the per-step overhead of a block outweighs the gain).
_MIN_COLUMNS = 16
# Most blocks (a power of two: blocks pair up evenly on 2, 4 or 8 CPUs).
_MAX_BLOCKS = 8
# Two independent jobs on one channel (auto's EMS path and stopped EM, _path._regularized_fits; the two
# ends of a likelihood-ratio interval, _lr_search) run side by side in two threads on sparse channels of at
# least this many values: each product and elementwise step then works on long rows and leaves the GIL.
# Measured (one run each, the same fits bit for bit either way): 10^4 values under the Laplace window of 275,
# 10^8 reports, 5.21 -> 3.95 s; 10^4 values under a window of 59, 10^6 reports, 0.33-0.63 s against
# 0.25-0.55 s.  Slower side by side on smaller domains, where the numpy calls are short and the threads
# contend for the GIL: 1,000 values under the Laplace window of 275, 10^6 reports of a spike, 2.7-3.0 s
# against 3.4-4.0 s; under the Gaussian window of 695 (a dense channel), 10^4 reports, 20.7 / 14.8 s
# against 27.6 / 20.1 s (smooth / spike); 4,000 values under the window of 275 about even (0.6-1.2 s).
SIDE_BY_SIDE_K = 5_000


def _cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on every platform
        return os.cpu_count() or 1


def blocks_for(dense: bool, columns: int) -> int:
    """How many blocks to cut ``columns`` independent columns into: 1 on a dense channel, else the
    largest power of two at most ``min(_MAX_BLOCKS, columns // _MIN_COLUMNS)`` (at least 1)."""
    if dense:
        return 1
    most = min(_MAX_BLOCKS, columns // _MIN_COLUMNS)
    return 1 << (most.bit_length() - 1) if most >= 1 else 1


def dense_step_blocks(k: int, m: int, columns: int) -> int:
    """Blocks for the plain EM steps of ``auto``'s ``"em steps=t"`` and ``"em flow=T"`` refits on a dense
    channel (``k`` inputs, ``m`` outputs): 2 where BLAS runs in one thread anyway (:func:`small_blas`: at most
    :data:`_SMALL_BLAS` entries) and each block keeps at least :data:`_MIN_COLUMNS` columns, else 1.

    Unlike the MLE's refits (module docstring), these run thousands of steps whose two products are
    each ``k x m`` by ``B / 2`` columns, long enough to leave the GIL.  Measured (2026-11-29, 500
    steps, B = 200, one BLAS thread, a quiet 2-core machine; double / single precision): 100 values,
    Gaussian window 695 (m = 794), 1.52 / 0.90 s in one batch against 0.76 / 0.47 s in two blocks
    and 0.82 / 0.55 s in four; Laplace window 275 (m = 374), 0.68 / 0.33 s against 0.36 / 0.25 s;
    Gaussian window 143 (m = 242), 0.38 / 0.23 s against 0.28 / 0.18 s; 20 values (m = 320-368),
    0.20-0.24 s against 0.15-0.17 s.  Two blocks, not one per CPU, so that a seed gives the same
    replicates on any machine.
    """
    return 2 if k * m <= _SMALL_BLAS and columns >= 2 * _MIN_COLUMNS else 1


def draw_threads(model) -> int:
    """Threads for the likelihood-ratio calibration's draws (``_lr_calibration._draw_deficits``) on a channel
    model: two where the cores allow on a dense channel of :data:`_DRAWS_SIDE_BY_SIDE` to :data:`_SMALL_BLAS`
    entries, whose BLAS runs in one thread anyway (:func:`small_blas`), so that each draw's dense Grams and
    Cholesky factorizations hold a core.  Measured (19 draws of the mean's check, 2026-12-01, two runs each, a
    quiet machine): randomized response on 400 values 2.03-2.07 s in one thread against 1.22-1.48 s in two; on
    100 values 0.08 s against 0.15-0.16 s (per-draw overhead, the GIL); on 1,000 values under the Laplace window
    of 137 (sparse) 2.02-2.12 s against 2.24-2.26 s."""
    if _cpus() < 2 or not model.dense:
        return 1
    return 2 if _DRAWS_SIDE_BY_SIDE <= model.k * max(model.m, 1) <= _SMALL_BLAS else 1


def side_by_side(dense: bool, k: int) -> bool:
    """Whether two independent jobs on a channel of ``k`` values run in two threads (:data:`SIDE_BY_SIDE_K`)."""
    return not dense and k >= SIDE_BY_SIDE_K


def map_blocks(fn, columns: int, blocks: int) -> list:
    """``[fn(b) for b in the blocks]`` in order: ``blocks`` consecutive slices of ``range(columns)``, as
    equal as can be, run in ``min(blocks, CPUs)`` threads (each with one FFT thread)."""
    cuts = np.linspace(0, columns, blocks + 1).round().astype(int)
    parts = [slice(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])]
    return concurrently(*(functools.partial(fn, part) for part in parts), threads=min(blocks, _cpus()))


def concurrently(*fns, threads: int | None = None) -> list:
    """``[fn() for fn in fns]`` in order, run in ``threads`` threads (default: one per function, at most the
    CPUs), each with one FFT thread; one after the other where that is one thread.  For independent
    computations on FFT or sparse products (not dense BLAS, which is parallel already): the blocks of
    :func:`map_blocks`, ``auto``'s EMS path and its stopped EM (``_path._regularized_fits``).  The results
    are those of the sequential calls: nothing is shared but the read-only inputs."""
    threads = min(len(fns), _cpus()) if threads is None else threads
    if threads <= 1:
        return [fn() for fn in fns]

    def run(fn):
        with one_fft_thread():
            return fn()

    # BLAS in one thread while the workers run: the workers hold the cores, and a threaded BLAS in each
    # would oversubscribe them (measured: the likelihood-ratio searches' two ends side by side on 10^4
    # values, banded Cholesky factorizations in each, 20-25 % faster: _lr_search._Search.blas).
    # threadpoolctl's limit is process-wide, so it is set here, around the pool, not in each worker.
    with one_blas_thread(), ThreadPoolExecutor(threads) as pool:
        return list(pool.map(run, fns))


def small_blas(k: int, m: int):
    """A context in which BLAS uses one thread when the channel (``k`` inputs, ``m`` outputs) has at most
    :data:`_SMALL_BLAS` entries (threadpoolctl, where installed; else it changes nothing).

    A threaded BLAS splits even a 100 x 236 product across threads, which costs more than it
    gains, and far more when another process holds a core: measured (100 values, a spiky MLE, the
    bootstrap B = 200 with its Newton finish) 1.4 s with one thread against 5.3 s with OpenBLAS's
    two while another process kept one of the two cores busy, and the same 1.45 s on a quiet machine.
    """
    return contextlib.nullcontext() if k * m > _SMALL_BLAS else one_blas_thread()


def one_blas_thread():
    """A context in which BLAS uses one thread (threadpoolctl, where installed; else it changes nothing):
    for small matrix products (:func:`small_blas`; ``_mle_refits._active_solo``, whose blocks run in threads)."""
    if threadpool_limits is None:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")
