"""Mechanism spec files: the JSON that ``sparseldp design -o`` writes and later
commands (``privatize``, ``estimate``) read.

A spec is a flat JSON object::

    {"family": "laplace", "lam": 0.5, "s": 7,            # the mechanism
     "eps": 1.0, "delta": 0.5, "H": 3,                   # the target it was designed for
     "delta_star": 0.4686, "r1": 1.1851, "r2": 2.4071,   # its certificate and distortion
     "domain": [0, 120], "window": "clipped"}            # optional: finite input domain

``family`` is ``"laplace"`` (with ``lam``) or ``"gaussian"`` (with ``sigma``);
``s`` is the odd support size.  Without ``domain`` the mechanism is the
translation-invariant one on Z and any integer input is accepted; with
``domain = [lo, hi]`` inputs must lie in ``lo..hi`` and ``window`` says whether
outputs may leave the domain (``"extended"``, outputs ``lo - t .. hi + t``, the
default) or are clipped to it (``"clipped"``, docs/paper.md, "Output alphabet").

Baseline specs
--------------
A baseline channel of :mod:`sparseldp.baselines` (what ``sparseldp compare -o``
writes when a baseline wins) is a spec with the family's name, its parameter,
a required ``domain`` and no ``s`` or ``window``::

    {"family": "square-wave", "mechanism_eps": 1.0, "band": 25, "domain": [0, 99],
     "eps": 1.0, "delta": 1e-06, "H": 99, "delta_star": 3.2e-14, "r1": 30.6, "r2": 1570.1}

The families are :data:`sparseldp.baselines.SPEC_FAMILIES`.  The parameter is
``lam`` (geometric), ``sigma`` (discrete Gaussian), or, for the families
parameterized by their own epsilon (``rr``, ``square-wave``, ``piecewise``,
``hybrid``, ``duchi``), ``mechanism_eps``: the key ``eps`` is the *target* the
spec certifies, which may differ (a mechanism calibrated to ``(eps, delta)``
on a range ``H`` can have a larger epsilon of its own).  Integer options of
:data:`sparseldp.baselines.OPTIONS` (``band``, ``resolution``) may follow;
when absent the constructor's default is used.  ``r1``/``r2`` are the
distortion of the report label itself, ``E|Y - x|^r`` averaged uniformly over
the domain, as for the other channel specs.  The guarantee is recomputed on
loading exactly as for the other specs.

Loading re-validates every field; a bad spec raises ``ValueError`` naming the
field (the CLI turns it into exit status 2).  A key given twice in one JSON
object (at any depth: ``{"lam": 0.5, "lam": 30}``) is refused, naming the key:
JSON readers disagree on which value wins, so a reviewer could read another
value than the one used.

A spec carries what it claims, and loading checks the claims
-----------------------------------------------------------
``eps`` and ``H`` (recorded together) are the target; ``delta`` is the target
delta and ``delta_star`` the certificate.  Loading recomputes ``delta_star(eps,
H)`` of the spec's mechanism (the channel on the domain when there is one) as
a rigorous upper bound and refuses the spec when a recorded ``delta_star`` or
``delta`` is below it (up to a relative :data:`CLAIM_RTOL`), when ``delta`` or
``delta_star`` is recorded without ``eps`` and ``H``, when recorded ``r1`` /
``r2`` disagree with the mechanism, and when the mechanism reports every input
unchanged (``lam = 1e308``, or ``s = 1``: no privacy at all).  The recomputed
guarantee is :attr:`Spec.guarantee` (the check and :class:`Guarantee` live in
:mod:`sparseldp._claims`; this module parses, builds and writes specs).  For a
channel on a domain the
``O(n K)`` bound :meth:`SparseChannel.delta_star_upper_fast` is tried first:
when it already proves every recorded claim it is the guarantee (rigorous,
possibly looser than :meth:`SparseChannel.delta_star_upper`), and the scan of
all pairs is skipped -- a baseline spec on 1,000 values loads in a tenth of a
second instead of ten.  A recorded ``delta = 0`` for a channel that is pure
``eps``-LDP only up to the rounding of its probabilities (the Hybrid and
Duchi mechanisms at their own ``eps``) is refused with what does hold: a
tiny ``delta`` or the certified pure epsilon
(:meth:`SparseChannel.pure_epsilon_upper`).

Size: a spec file is at most :data:`MAX_SPEC_BYTES` and must be a regular file
(``/dev/zero`` or a FIFO is refused before anything is read).
"""

from __future__ import annotations

import json
import math
import numbers
import os
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ._validation import (
    INT64_MAX,
    INT64_MIN,
    check_int,
    check_nonnegative,
    check_odd_s,
    check_positive,
    check_probability,
)
from .core.families import get_family
from ._files import atomic_write
from .baselines import FAMILIES as BASELINES, OPTIONS as BASELINE_OPTIONS, SPEC_FAMILIES, construction
from .channel import check_domain
from ._claims import CLAIM_RTOL, Guarantee, _verify

__all__ = ["Spec", "Guarantee", "load_spec", "save_spec", "spec_from_mechanism", "spec_from_channel", "MAX_SPEC_BYTES",
           "CLAIM_RTOL"]

_WINDOWS = ("extended", "clipped")
#: Largest spec file read (a spec is a few hundred bytes; this stops /dev/zero-like inputs at once).
MAX_SPEC_BYTES = 1 << 20


@dataclass(frozen=True)
class Spec:
    """A validated mechanism spec.  ``mechanism`` is on Z; ``channel()`` on the domain.

    For a baseline spec (``baseline`` is True, module docstring) ``s`` and
    ``window`` are ``None``, ``options`` holds the construction options and
    there is no mechanism on Z: ``sampler_target()`` is the channel.
    """

    family: str
    param: float
    s: int | None
    domain: tuple[int, int] | None = None
    window: str | None = "extended"
    meta: dict | None = None
    guarantee: Guarantee | None = field(default=None, compare=False)
    options: dict | None = None

    @property
    def baseline(self) -> bool:
        """Whether the spec names a baseline channel (:data:`sparseldp.baselines.SPEC_FAMILIES`)."""
        return self.family in SPEC_FAMILIES

    @property
    def parameter(self) -> tuple[str, float]:
        """``(name, value)`` of the kernel parameter: the one representation shared with
        ``mechanism.parameter``, ``SparseChannel.parameter`` and ``Design.parameter``."""
        return (self.param_name, self.param)

    @property
    def param_name(self) -> str:
        if self.baseline:
            return BASELINES[self.family].param
        return get_family(self.family).param

    @property
    def param_key(self) -> str:
        """The key of the parameter in the spec file (``mechanism_eps`` for a baseline's own epsilon)."""
        return _param_key(self.param_name) if self.baseline else self.param_name

    @property
    def mechanism(self):
        """The mechanism on Z of the spec's family (:mod:`sparseldp.core.families`)."""
        if self.baseline:
            raise ValueError(f"a {self.family} spec is a channel on its domain and has no mechanism on Z; use "
                             "channel()")
        return get_family(self.family).make(self.param, self.s)

    def channel(self):
        """The finite-domain channel (requires ``domain``); built once per spec."""
        if self.domain is None:
            raise ValueError("spec has no 'domain'; a finite-domain channel needs one")
        return self._channel

    @cached_property
    def _channel(self):
        # loading, the claim check, privatize and estimate all need it: build it once
        if self.baseline:
            return BASELINES[self.family].constructor(**{self.param_name: self.param}, domain=self.domain,
                                                      **(self.options or {}))
        return get_family(self.family).channel(self.param, self.s, self.domain, self.window)

    def sampler_target(self):
        """What ``privatize`` samples from: the channel when a domain is declared, else the Z mechanism."""
        return self.channel() if self.domain is not None else self.mechanism

    def to_dict(self) -> dict:
        out = dict(self.meta or {})
        if self.baseline:
            out.update({"family": self.family, self.param_key: self.param, **(self.options or {}),
                        "domain": [self.domain[0], self.domain[1]]})
            return out
        out.update({"family": self.family, self.param_name: self.param, "s": self.s})
        if self.domain is not None:
            out["domain"] = [self.domain[0], self.domain[1]]
            out["window"] = self.window
        return out


def spec_from_mechanism(mechanism, *, domain=None, window="extended", **meta) -> Spec:
    """Build a spec for a mechanism on Z, with optional domain and metadata (eps, delta, H, ...)."""
    name, value = mechanism.parameter
    return _validate({"family": mechanism.family, name: value, "s": mechanism.s,
                      **({"domain": list(domain), "window": window} if domain is not None else {}),
                      **meta})


def spec_from_channel(channel, **meta) -> Spec:
    """A spec for a channel on a domain, with metadata (eps, delta, H, ...), validated like a loaded one.

    The paper's window channels (:meth:`SparseChannel.laplace` / ``gaussian``,
    the ``sparse-*`` baselines) give a ``laplace`` / ``gaussian`` spec with
    their domain and window; the baselines of
    :data:`sparseldp.baselines.SPEC_FAMILIES` give a baseline spec (module
    docstring).  Any other channel (raw weights) has no spec: ``ValueError``.
    """
    fam = getattr(channel, "family", None)
    if fam in ("laplace", "gaussian") and channel.domain is not None and channel.s is not None:
        name, value = channel.parameter
        return _validate({"family": fam, name: value, "s": channel.s, "domain": list(channel.domain),
                          "window": channel.window, **meta})
    if fam in SPEC_FAMILIES:
        fam, kwargs = construction(channel)
        name, value = channel.parameter
        dom = kwargs.pop("domain")
        kwargs.pop(name)
        return _validate({"family": fam, _param_key(name): value, **kwargs, "domain": list(dom), **meta})
    raise ValueError(f"channel must be a window channel on a domain or a baseline ({', '.join(SPEC_FAMILIES)}) "
                     f"to have a spec; got family {fam!r}")


def save_spec(spec: Spec, path) -> None:
    """Write ``spec`` as JSON atomically (temporary file, then rename); ``ValueError`` naming the path."""

    atomic_write(path, json.dumps(spec.to_dict(), indent=2) + "\n")


def load_spec(path) -> Spec:
    """Read and validate a spec file; ``ValueError`` naming the problem otherwise.

    The file must be UTF-8 JSON (a byte-order mark is tolerated) holding an
    object with only the known keys (:data:`KEYS`), each at most once: an
    unknown key, such as a misspelt ``"window"``, or a duplicated one is an
    error rather than silently ignored.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a path (str or os.PathLike) to a mechanism spec; got "
                        f"{type(path).__name__} {path!r}")
    path = Path(path)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise ValueError(f"cannot read mechanism spec {str(path)!r}: it is {kind}")
        if st.st_size > MAX_SPEC_BYTES:
            raise ValueError(f"mechanism spec {str(path)!r} is {st.st_size:,} bytes; a spec is at most "
                             f"{MAX_SPEC_BYTES:,} bytes")
        with open(path, "rb") as fh:
            raw = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read mechanism spec {str(path)!r}: {exc.strerror or exc}") from None
    if len(raw) > MAX_SPEC_BYTES:
        raise ValueError(f"mechanism spec {str(path)!r} is longer than {MAX_SPEC_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"mechanism spec {str(path)!r} is not valid JSON: it is not UTF-8 text") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except _DuplicateKey as exc:
        key = exc.key if len(exc.key) <= 60 else exc.key[:57] + "..."
        raise ValueError(f"mechanism spec {str(path)!r} has the key {key!r} more than once (JSON readers "
                         "disagree on which value wins, so a reviewer may read another value than the one "
                         "used); give each key once") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"mechanism spec {str(path)!r} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise ValueError(f"mechanism spec {str(path)!r} is nested too deeply; a spec is a flat JSON object") from None
    if not isinstance(data, dict):
        raise ValueError(f"mechanism spec {str(path)!r} must be a JSON object; got {type(data).__name__}")
    try:
        return _validate(data)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bad mechanism spec {str(path)!r}: {exc}") from None


class _DuplicateKey(ValueError):
    """A key given twice in one JSON object of a spec file."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _no_duplicate_keys(pairs: list) -> dict:
    """``object_pairs_hook`` for reading a spec: a key given twice in one object (at any depth) is refused
    instead of the last value silently winning."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _param_key(name: str) -> str:
    """A baseline's parameter key: ``eps`` is the spec's target, so a mechanism's own epsilon is ``mechanism_eps``."""
    return "mechanism_eps" if name == "eps" else name


def _check_keys(data: dict, family: str, allowed: set) -> None:
    """Refuse every key of ``data`` outside ``allowed``: a misspelt key is an error, not silently ignored."""
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise ValueError(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} in a "
                         f"{family} spec; the keys are {', '.join(sorted(allowed))}")


def _required(data: dict, family: str, key: str):
    """``data[key]``; ``ValueError`` naming the key when the spec lacks it."""
    if key not in data:
        raise ValueError(f"a {family} spec needs '{key}'")
    return data[key]


def _domain(data: dict) -> tuple[int, int] | None:
    """The spec's ``domain`` as ``(lo, hi)`` (:func:`check_domain`), or None when absent or null."""
    dom = data.get("domain")
    if dom is None:
        return None
    if not (isinstance(dom, (list, tuple)) and len(dom) == 2):
        raise ValueError(f"domain must be a pair [lo, hi] of integers with lo <= hi; got {dom!r}")
    return check_domain(tuple(dom))


def _meta(data: dict) -> dict:
    """The metadata of :data:`_META` the spec records, each checked."""
    return {key: _META[key](data[key], key) for key in _META if key in data}


def _verified(spec: Spec) -> Spec:
    """``spec`` with its claims checked and its :attr:`Spec.guarantee` set (:func:`_verify`)."""
    # the guarantee is recomputed on this very instance, so the channel it builds is kept
    object.__setattr__(spec, "guarantee", _verify(spec))
    return spec


def _validate_baseline(data: dict, family: str) -> Spec:
    pname = BASELINES[family].param
    key = _param_key(pname)
    options = dict(BASELINE_OPTIONS.get(family, ()))
    _check_keys(data, family, {"family", key, "domain", *options, *_META})
    value = _number(check_positive if family in ("piecewise", "hybrid", "duchi") or pname != "eps"
                    else check_nonnegative)(_required(data, family, key), key)
    domain = _domain(data)
    if domain is None:
        raise ValueError(f"a {family} spec needs 'domain' [lo, hi]: a baseline is a channel on a finite domain")
    opts = {name: check_int(data[name], name, minimum=low) for name, low in options.items() if name in data}
    return _verified(Spec(family=family, param=value, s=None, domain=domain, window=None, meta=_meta(data),
                          options=opts))


def _validate(data: dict) -> Spec:
    """A spec from its JSON object (module docstring), every field checked and every claim recomputed."""
    family = data.get("family")
    if isinstance(family, str):
        family = family.strip().lower()  # as design() accepts "Laplace"
    if family in SPEC_FAMILIES:
        return _validate_baseline(data, family)
    try:
        fam = get_family(family)  # raises, naming the registered families
    except ValueError as exc:
        raise ValueError(f"{exc} (or a baseline: {', '.join(SPEC_FAMILIES)})") from None
    family, pname = fam.name, fam.param
    _check_keys(data, family, {"family", pname, "s", "domain", "window", *_META})
    param = check_positive(_required(data, family, pname), pname)
    if "s" not in data:
        raise ValueError("spec needs 's' (odd support size >= 1)")
    s = check_odd_s(data["s"], "s")
    mechanism = fam.make(param, s)
    domain = _domain(data)
    window = "extended"
    if domain is not None:
        window = data.get("window", "extended")
        if window not in _WINDOWS:
            raise ValueError(f"window must be one of {_WINDOWS}; got {window!r}")
        t = mechanism.t
        if window == "extended" and (domain[0] - t < INT64_MIN or domain[1] + t > INT64_MAX):
            raise ValueError(f"domain must lie in [{INT64_MIN + t}, {INT64_MAX - t}] so that the extended "
                             f"outputs lo - t .. hi + t fit in int64; got {list(domain)}")
    elif "window" in data:
        raise ValueError(f"window applies only with a domain; got window = {data['window']!r} and no domain")
    return _verified(Spec(family=family, param=param, s=s, domain=domain, window=window, meta=_meta(data)))


def _number(check):
    def run(value, key):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or (
            isinstance(value, float) and math.isnan(value)
        ):
            raise ValueError(f"{key} must be a number; got {value!r}")
        return check(value, key)
    return run


# Metadata a spec may carry (what ``sparseldp design -o`` writes), each with its check.
_META = {
    "eps": _number(check_nonnegative),
    "delta": _number(check_probability),
    "H": _number(lambda v, k: check_int(v, k, minimum=1)),
    "delta_star": _number(check_probability),
    "r1": _number(lambda v, k: check_nonnegative(v, k)),
    "r2": _number(lambda v, k: check_nonnegative(v, k)),
}

#: Every key a spec file may hold (``lam`` for the Laplace family, ``sigma`` for the Gaussian;
#: ``mechanism_eps``, ``band`` and ``resolution`` in baseline specs).
KEYS = ("family", "lam", "sigma", "s", "domain", "window", *_META, "mechanism_eps", "band", "resolution")
