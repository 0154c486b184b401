"""The :class:`SparseChannel` class: construction, description, probabilities, distortion
and the local-randomizer protocol (package docstring for the math).

The class describes a channel; the computing is done by the modules below it:
:mod:`~sparseldp.channel.privacy` (the privacy accounting methods: the base class),
:mod:`~sparseldp.channel.construct` (stored form and rounding bounds),
:mod:`~sparseldp.channel.store` (storage and indexes: the base class of that one),
:mod:`~sparseldp.channel.scan` (exact pairwise accounting),
:mod:`~sparseldp.channel.upper` (rigorous upper bounds, certified epsilon) and
:mod:`sparseldp.sampling` (samplers).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..core.kernels import GaussianKernel, LaplaceKernel
from .._validation import broadcast, check_int, check_odd_s, check_positive
from ..sampling import certify_channel, channel_sampling_pmf, sample_channel
from .construct import (
    _NEG_INF,
    _default_alpha,
    _log_normalize,
    _log_normalize_bounds,
    _log_weights_to_csr,
    _radius_parts,
    _restrict_parts,
    _row_ids,
    _weights_parts,
)
from .privacy import _ChannelPrivacy
from .validation import check_domain, check_window


class SparseChannel(_ChannelPrivacy):
    r"""A finite channel ``Q(y | x) ∝ w(x, y) 1{y in S(x)}`` (Definitions 1 and 9).

    Parameters
    ----------
    weights : array_like or scipy.sparse matrix, shape (n_inputs, n_outputs)
        Nonnegative finite weights ``w(x, y) 1{y in S(x)}``; rows are inputs,
        columns outputs.  Zeros are outside the support.  Every row needs a
        positive sum; rows are normalized here.  Sparse input stays sparse.
    inputs : 1-D integer array_like, optional
        Distinct input values of the rows (default ``0 .. n_inputs - 1``).  The
        privacy range ``|x - x'| <= H`` is measured on these values.
    outputs : 1-D integer array_like, optional
        Distinct output labels of the columns (default ``0 .. n_outputs - 1``):
        the values reported and read back by estimation.

    Notes
    -----
    The channel is immutable: its arrays are read-only and attributes cannot
    be set.  ``matrix`` holds the probabilities in CSR form; its sparsity
    pattern is exactly the supports ``S(x)`` (an entry can be ``0.0`` only
    through underflow of a mathematically positive probability, whose exact
    logarithm is kept in ``log_matrix``).

    The window constructors :meth:`laplace` and :meth:`gaussian` build the
    paper's s-sparse mechanisms on a finite domain directly in banded form.

    Examples
    --------
    >>> ch = SparseChannel([[2, 1, 0], [0, 1, 2]])
    >>> float(ch.pmf(0, 0))
    0.6666666666666666
    >>> ch.pure_epsilon()                      # supports differ (Theorem 1)
    inf
    >>> round(float(ch.delta_star(0.0)), 4)   # total variation
    0.6667
    """

    __slots__ = ()  # the stored arrays are the base's slots (sparseldp.channel.store)

    def __getattr__(self, name):
        # only reached for missing attributes: say where a renamed method went (one meaning per name)
        renamed = {"delta": "delta_star(eps, H)", "param": "parameter"}
        if name in renamed:
            raise AttributeError(f"SparseChannel.{name} was renamed: use {renamed[name]}")
        raise AttributeError(f"'SparseChannel' object has no attribute {name!r}")

    def __init__(self, weights, inputs=None, outputs=None):
        indptr, indices, logp, shape, meta, data = _weights_parts(weights)
        self._setup(indptr, indices, logp, shape, inputs, outputs, meta, data=data)

    # -- construction --------------------------------------------------------
    @classmethod
    def _from_log_parts(cls, indptr, indices, logw, shape, inputs=None, outputs=None, meta=None, *, normalized=False):
        """Internal fast path: a CSR pattern with log weights (rows nonempty, indices sorted)."""
        self = object.__new__(cls)
        indptr = np.asarray(indptr, dtype=np.int64)
        indices = np.asarray(indices, dtype=np.int64)
        logw = np.asarray(logw, dtype=float)
        meta = dict(meta or {})
        if normalized:
            logp = logw
            if "_alpha" not in meta:  # pragma: no cover - every internal caller passes its bound
                meta["_alpha"] = _default_alpha(indptr)
        else:
            logp, off = _log_normalize(indptr, logw, with_offset=True)
            # data = exp(logp): the log error plus 4.1u for exp
            meta["_alpha"] = _log_normalize_bounds(np.diff(indptr).astype(float), off, extra=4.1)
        self._setup(indptr, indices, logp, shape, inputs, outputs, meta)
        return self

    @classmethod
    def from_log_weights(cls, log_weights, inputs=None, outputs=None) -> "SparseChannel":
        """Build from log weights: ``log_weights`` is a scipy.sparse matrix whose
        stored entries are the support and whose values are ``log w(x, y)``
        (finite; an explicit ``-inf`` entry means "not in the support").

        Use this when weights underflow in linear space (e.g. ``lam |x - y|``
        in the thousands): normalization is done in log space and the support
        is kept exactly.  Build the matrix from explicit entries, e.g.
        ``scipy.sparse.coo_array((logw, (rows, cols)), shape=...)``: converting
        a dense array drops the entries equal to ``0.0``, which here are log
        weights of 1, not absent outputs.
        """
        indptr, cols, vals, shape = _log_weights_to_csr(log_weights)
        return cls._from_log_parts(indptr, cols, vals, shape, inputs, outputs)

    @classmethod
    def laplace(cls, *, lam, s, domain, window="extended") -> "SparseChannel":
        r"""The s-sparse discrete-Laplace mechanism (Definition 6) on inputs ``a..b``.

        ``Q(y | x) = e^{-lam |y - x|} / Z_x`` on the window ``W(x)``:

        * ``window="extended"``: ``W(x) = {x - t, ..., x + t}``, outputs
          ``a - t .. b + t``; every row is exactly the mechanism on Z, so
          ``Z_x = C_t`` and the defect of a pair depends on ``|x - x'|`` only
          (Theorem 3);
        * ``window="clipped"``: ``W(x) = {x - t, ..., x + t} ∩ [a, b]``,
          outputs ``a .. b``, renormalized per row, so ``Z_x`` varies near the
          edges and only the general Theorem 2 applies (docs/paper.md, "Output alphabet").

        Built banded in ``O(n s)`` time and memory from log-space kernel sums.
        """
        lam = check_positive(lam, "lam")
        s = check_odd_s(s, "s")
        a, b = check_domain(domain)
        window = check_window(window)
        kernel = LaplaceKernel(lam, (s - 1) // 2)
        return cls._radius(kernel, "laplace", ("lam", lam), s, a, b, window)

    @classmethod
    def gaussian(cls, *, sigma, s, domain, window="extended") -> "SparseChannel":
        r"""The s-sparse Gaussian mechanism (Definition 13, ``Q(y | x) ∝ e^{-(y-x)^2/(2 sigma^2)}``)
        on inputs ``a..b``; windows as in :meth:`laplace` (Theorem 9 applies when
        extended, only the general Theorem 8 when clipped)."""
        sigma = check_positive(sigma, "sigma")
        s = check_odd_s(s, "s")
        a, b = check_domain(domain)
        window = check_window(window)
        kernel = GaussianKernel(sigma, (s - 1) // 2)
        return cls._radius(kernel, "gaussian", ("sigma", sigma), s, a, b, window)

    @classmethod
    def _radius(cls, kernel, family, param, s, a, b, window):
        return cls._from_log_parts(*_radius_parts(kernel, family, param, s, a, b, window), normalized=True)

    # -- pickling and repr (immutability: sparseldp.channel.store) ----------------
    def __reduce__(self):
        m = self._matrix
        return (
            _rebuild,
            (m.indptr, m.indices, self._logdata, m.data, m.shape, self._inputs, self._outputs, self._meta),
        )

    def __repr__(self) -> str:
        extra = ""
        if self._meta.get("family") is not None:
            name, value = self._meta["param"]
            extra = f", family={self._meta['family']!r}, {name}={value!r}"
            if self._meta.get("s") is not None:
                extra += f", s={self._meta['s']}"
            if self._meta.get("domain") is not None:
                extra += f", domain={self._meta['domain']}"
            if self._meta.get("window") is not None:
                extra += f", window={self._meta['window']!r}"
        return (
            f"SparseChannel(n_inputs={self.n_inputs}, n_outputs={self.n_outputs}, "
            f"nnz={self._matrix.nnz}{extra})"
        )

    # -- description -------------------------------------------------------------
    @property
    def matrix(self) -> sp.csr_array:
        """``Q`` as a read-only CSR array (rows = inputs, columns = outputs); pattern = supports."""
        return self._matrix

    @property
    def log_matrix(self) -> sp.csr_array:
        """``log Q`` on the support (same pattern as :attr:`matrix`; exact even where ``Q`` underflows)."""
        mat = self._cache.get("log_matrix")
        if mat is None:
            m = self._matrix
            mat = sp.csr_array((self._logdata, m.indices, m.indptr), shape=m.shape)
            mat.has_sorted_indices = True
            self._cache["log_matrix"] = mat
        return mat

    @property
    def inputs(self) -> np.ndarray:
        return self._inputs

    @property
    def outputs(self) -> np.ndarray:
        return self._outputs

    @property
    def n_inputs(self) -> int:
        return int(self._matrix.shape[0])

    @property
    def n_outputs(self) -> int:
        return int(self._matrix.shape[1])

    @property
    def family(self) -> str | None:
        """Name of the construction (``"laplace"``, ``"gaussian"`` or a baseline name); ``None`` for raw weights."""
        return self._meta.get("family")

    @property
    def parameter(self) -> tuple[str, float] | None:
        """``("lam", value)`` / ``("sigma", value)`` / ... when built by a named constructor.

        The same representation as :attr:`sparseldp.SparseLaplace.parameter`; ``None``
        for a channel built from raw weights.
        """
        return self._meta.get("param")


    @property
    def s(self) -> int | None:
        return self._meta.get("s")

    @property
    def domain(self) -> tuple[int, int] | None:
        return self._meta.get("domain")

    @property
    def window(self) -> str | None:
        return self._meta.get("window")

    @property
    def mode(self) -> str | None:
        """For the geometric baseline: ``"clamp"`` or ``"fold"``."""
        return self._meta.get("mode")

    # -- distribution ------------------------------------------------------------
    def logpmf(self, y, x):
        """``log Q(y | x)`` by labels, broadcasting; ``-inf`` off the support or for an unknown ``y``.

        ``x`` must be an input value (``ValueError`` otherwise).  Read from the
        stored exact logarithms, never ``log(pmf)``.
        """
        rows = self._rows_of(x)
        cols = self._cols_of(y)
        cols, rows = broadcast(("y", cols), ("x", rows))
        pos, found = self._lookup(rows, cols)
        return np.where(found, self._logdata[pos], _NEG_INF)[()]

    def pmf(self, y, x):
        """``Q(y | x)`` by labels, broadcasting; 0 off the support or for an unknown ``y``."""
        rows = self._rows_of(x)
        cols = self._cols_of(y)
        cols, rows = broadcast(("y", cols), ("x", rows))
        pos, found = self._lookup(rows, cols)
        return np.where(found, self._matrix.data[pos], 0.0)[()]

    def row(self, x) -> tuple[np.ndarray, np.ndarray]:
        """``(labels, probabilities)`` of the support ``S(x)``, in column order."""
        r = int(self._rows_of(check_int(x, "x")))
        m = self._matrix
        sl = slice(m.indptr[r], m.indptr[r + 1])
        return self._outputs[m.indices[sl]], m.data[sl].copy()

    def support(self, x) -> np.ndarray:
        """The output labels of ``S(x)``."""
        return self.row(x)[0]

    # -- distortion ------------------------------------------------------------------
    def distortion(self, order=1) -> np.ndarray:
        """``E[|Y - x|^order | X = x]`` for every input, in the order of :attr:`inputs`.

        ``order = 1`` and ``2`` give the distortion moments ``R1`` and ``R2``
        per input (for extended windows every entry equals the mechanism's
        ``r1`` / ``r2`` of Propositions 1 and 3; clipped windows distort less
        near the edges but are biased there).
        """
        order = check_int(order, "order", minimum=1)
        m = self._matrix
        rows = _row_ids(m.indptr)
        dist = np.abs((self._outputs[m.indices] - self._inputs[rows]).astype(float)) ** order
        return np.add.reduceat(dist * m.data, m.indptr[:-1])

    def mean_output(self) -> np.ndarray:
        """``E[Y | X = x]`` for every input (equals ``x`` for extended windows, docs/paper.md, "Distortion and bias")."""
        return self._matrix @ self._outputs.astype(float)

    # -- sampling and protocol (sparseldp.sampling does the work; one-way) --
    def sample(self, x, *, rng=None):
        """Draw one report per input in ``x`` (integer labels from ``inputs``).

        Exact integer inverse-CDF sampling of each row quantized to multiples of
        2^-64 (see :mod:`sparseldp.sampling`).  ``rng=None`` uses the operating
        system's secure source; an int, ``SeedSequence`` or ``Generator`` gives
        reproducible simulation, not for production.
        """
        return sample_channel(self, x, rng=rng)

    def sampling_pmf(self, x):
        """The exactly realized distribution of row ``x``: output labels and ``Fraction`` probabilities."""
        return channel_sampling_pmf(self, x)

    def to_channel(self, domain=None, window=None) -> "SparseChannel":
        """The channel on the inputs in ``domain = (lo, hi)`` (all of them when ``None``).

        The local-randomizer protocol's conversion: a channel is already one,
        so this restricts its rows (the outputs and the rows kept are
        unchanged, and so are their probabilities).  ``window`` must be
        ``None`` or this channel's own window: re-windowing a channel needs
        its kernel (use the mechanism's ``to_channel``).
        """
        if window is not None and check_window(window) != self.window:
            raise ValueError(f"window must be None or this channel's own window {self.window!r}; got {window!r} "
                             "(re-window through the mechanism on Z: mechanism.to_channel(domain, window))")
        if domain is None:
            return self
        lo, hi = check_domain(domain)
        keep = np.flatnonzero((self._inputs >= lo) & (self._inputs <= hi))
        if keep.size == 0:
            raise ValueError(f"domain ({lo}, {hi}) holds none of the channel's inputs")
        if keep.size == self._inputs.size:
            return self
        return SparseChannel._from_log_parts(*_restrict_parts(self, keep), normalized=True)

    def certify(self, eps, H=None):
        """Rigorous upper bound on ``delta`` of the realized (quantized) rows; see :func:`sparseldp.sampling.certify`."""
        return certify_channel(self, eps, H)


def _rebuild(indptr, indices, logp, data, shape, inputs, outputs, meta):
    """Unpickling: restore a channel from its stored arrays (no re-normalization)."""
    self = object.__new__(SparseChannel)
    self._setup(
        np.array(indptr, dtype=np.int64), np.array(indices, dtype=np.int64), np.array(logp, dtype=float),
        tuple(shape), inputs, outputs, meta, data=np.array(data, dtype=float),
    )
    return self


# Pickles name the function by the package path (re-exported by sparseldp.channel), as they did
# when the package was one module: the pickled bytes do not depend on the layout inside it.
_rebuild.__module__ = "sparseldp.channel"
