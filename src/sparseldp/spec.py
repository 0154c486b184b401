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

Loading re-validates every field; a bad spec raises ``ValueError`` naming the
field (the CLI turns it into exit status 2).

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
guarantee is :attr:`Spec.guarantee`.

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

import numpy as np

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
from .channel import check_domain

__all__ = ["Spec", "Guarantee", "load_spec", "save_spec", "spec_from_mechanism", "MAX_SPEC_BYTES", "CLAIM_RTOL"]

_WINDOWS = ("extended", "clipped")
#: Largest spec file read (a spec is a few hundred bytes; this stops /dev/zero-like inputs at once).
MAX_SPEC_BYTES = 1 << 20
#: Relative slack allowed between a recorded delta claim and the recomputed upper bound
#: (floating-point paths may differ in the last bits between versions and machines).
CLAIM_RTOL = 1e-9
#: Relative slack for recorded distortion moments r1, r2.
_MOMENT_RTOL = 1e-6


@dataclass(frozen=True)
class Guarantee:
    """What a mechanism certifies: ``(eps, delta)``-LDP for inputs at most ``H`` apart.

    ``delta`` is a rigorous upper bound on ``delta_star(eps, H)`` (never below
    the exact value).  ``source`` says of what: ``"mechanism"`` (the ideal
    mechanism of the spec, recomputed) or ``"sampler"`` (the distribution the
    sampler actually draws, :func:`sparseldp.sampling.certify`).  ``reports``
    is the number of reports of one person it covers (``k`` columns composed).
    """

    eps: float
    delta: float
    H: int
    source: str = "mechanism"
    reports: int = 1

    def composed(self, k: int) -> "Guarantee":
        """``k`` reports of one person: ``(k eps, min(1, k delta))`` by basic composition (an upper bound)."""
        if k == 1:
            return self
        return Guarantee(self.eps * k, min(1.0, self.delta * k), self.H, self.source, self.reports * k)

    @property
    def vacuous(self) -> bool:
        """True when ``delta >= 1``: no privacy at all at this ``(eps, H)``."""
        return self.delta >= 1.0

    def describe(self) -> str:
        """One phrase, e.g. ``(eps = 1, delta <= 9.1e-07)-LDP for inputs up to H = 5 apart``."""
        return (f"(eps = {self.eps:.6g}, delta <= {self.delta:.4g})-LDP for inputs up to H = {self.H} apart")

    def to_dict(self) -> dict:
        return {"eps": self.eps, "delta": self.delta, "H": self.H, "source": self.source, "reports": self.reports}


@dataclass(frozen=True)
class Spec:
    """A validated mechanism spec.  ``mechanism`` is on Z; ``channel()`` on the domain."""

    family: str
    param: float
    s: int
    domain: tuple[int, int] | None = None
    window: str = "extended"
    meta: dict | None = None
    guarantee: Guarantee | None = field(default=None, compare=False)

    @property
    def parameter(self) -> tuple[str, float]:
        """``(name, value)`` of the kernel parameter: the one representation shared with
        ``mechanism.parameter``, ``SparseChannel.parameter`` and ``Design.parameter``."""
        return (self.param_name, self.param)

    @property
    def param_name(self) -> str:
        return get_family(self.family).param

    @property
    def mechanism(self):
        """The mechanism on Z of the spec's family (:mod:`sparseldp.core.families`)."""
        return get_family(self.family).make(self.param, self.s)

    def channel(self):
        """The finite-domain channel (requires ``domain``); built once per spec."""
        if self.domain is None:
            raise ValueError("spec has no 'domain'; a finite-domain channel needs one")
        return self._channel

    @cached_property
    def _channel(self):
        # loading, the claim check, privatize and estimate all need it: build it once
        return get_family(self.family).channel(self.param, self.s, self.domain, self.window)

    def sampler_target(self):
        """What ``privatize`` samples from: the channel when a domain is declared, else the Z mechanism."""
        return self.channel() if self.domain is not None else self.mechanism

    def to_dict(self) -> dict:
        out = dict(self.meta or {})
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


def save_spec(spec: Spec, path) -> None:
    """Write ``spec`` as JSON atomically (temporary file, then rename); ``ValueError`` naming the path."""

    atomic_write(path, json.dumps(spec.to_dict(), indent=2) + "\n")


def load_spec(path) -> Spec:
    """Read and validate a spec file; ``ValueError`` naming the problem otherwise.

    The file must be UTF-8 JSON (a byte-order mark is tolerated) holding an
    object with only the known keys (:data:`KEYS`): an unknown key, such as a
    misspelt ``"window"``, is an error rather than silently ignored.
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
        data = json.loads(text)
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


def _validate(data: dict) -> Spec:

    family = data.get("family")
    if isinstance(family, str):
        family = family.strip().lower()  # as design() accepts "Laplace"
    fam = get_family(family)  # raises, naming the registered families
    family, pname = fam.name, fam.param
    allowed = {"family", pname, "s", "domain", "window", *_META}
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise ValueError(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} in a "
                         f"{family} spec; the keys are {', '.join(sorted(allowed))}")
    if pname not in data:
        raise ValueError(f"a {family} spec needs '{pname}'")
    param = check_positive(data[pname], pname)
    if "s" not in data:
        raise ValueError("spec needs 's' (odd support size >= 1)")
    s = check_odd_s(data["s"], "s")
    mechanism = fam.make(param, s)
    domain = None
    window = "extended"
    if data.get("domain") is not None:
        dom = data["domain"]
        if not (isinstance(dom, (list, tuple)) and len(dom) == 2):
            raise ValueError(f"domain must be a pair [lo, hi] of integers with lo <= hi; got {dom!r}")
        domain = check_domain(tuple(dom))
        window = data.get("window", "extended")
        if window not in _WINDOWS:
            raise ValueError(f"window must be one of {_WINDOWS}; got {window!r}")
        t = mechanism.t
        if window == "extended" and (domain[0] - t < INT64_MIN or domain[1] + t > INT64_MAX):
            raise ValueError(f"domain must lie in [{INT64_MIN + t}, {INT64_MAX - t}] so that the extended "
                             f"outputs lo - t .. hi + t fit in int64; got {list(domain)}")
    elif "window" in data:
        raise ValueError(f"window applies only with a domain; got window = {data['window']!r} and no domain")
    meta = {key: _META[key](data[key], key) for key in _META if key in data}
    spec = Spec(family=family, param=param, s=s, domain=domain, window=window, meta=meta)
    # the guarantee is recomputed on this very instance, so the channel it builds is kept
    object.__setattr__(spec, "guarantee", _verify(spec))
    return spec


def _reports_input_unchanged(spec: Spec, target) -> bool:
    """True when every report equals its input with probability 1 in double precision."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        return _unchanged(spec, target)


def _unchanged(spec: Spec, target) -> bool:
    if spec.domain is None:
        return spec.s == 1 or float(target.pmf(0, 0)) == 1.0
    inputs = np.asarray(target.inputs)
    if inputs.size < 2:  # one input value: there is no neighbouring pair to protect
        return False
    return bool(np.all(np.asarray(target.pmf(inputs, inputs), dtype=float) == 1.0))


def _verify(spec: Spec) -> Guarantee | None:
    """Recompute what the spec claims; ``ValueError`` when a claim does not hold (module docstring)."""
    meta = spec.meta or {}
    target = spec.sampler_target()
    where = "" if spec.domain is None else f" on the domain {spec.domain[0]}..{spec.domain[1]} ({spec.window})"
    what = f"{spec.param_name} = {spec.param!r}, s = {spec.s}{where}"
    if _reports_input_unchanged(spec, target):
        raise ValueError(f"the mechanism ({what}) reports every input unchanged (probability 1 in double "
                         "precision): it gives no privacy")
    if ("eps" in meta) != ("H" in meta):
        have, miss = ("eps", "H") if "eps" in meta else ("H", "eps")
        raise ValueError(f"a spec records its target as 'eps' and 'H' together; it has '{have}' but no '{miss}'")
    claims = [k for k in ("delta", "delta_star") if k in meta]
    if claims and "eps" not in meta:
        raise ValueError(f"'{claims[0]}' means nothing without the 'eps' and 'H' it holds at; the spec has neither")
    for key in ("r1", "r2"):
        if key in meta:
            order = 1 if key == "r1" else 2
            actual = (float(np.mean(target.distortion(order))) if spec.domain is not None
                      else float(getattr(target, key)))
            if not math.isclose(meta[key], actual, rel_tol=_MOMENT_RTOL, abs_tol=1e-12):
                raise ValueError(f"the spec records {key} = {meta[key]!r} but the mechanism ({what}) has "
                                 f"{key} = {actual!r}")
    if "eps" not in meta:
        return None
    eps, H = float(meta["eps"]), int(meta["H"])
    upper = min(float(target.delta_star_upper(eps, H)), 1.0)  # rigorous (the protocol's upper bound)
    for key in ("delta_star", "delta"):
        if key in meta and upper > float(meta[key]) * (1.0 + CLAIM_RTOL):
            label = "certificate delta_star" if key == "delta_star" else "target delta"
            raise ValueError(
                f"the spec's recorded {label} = {float(meta[key]):.6g} does not hold: the mechanism ({what}) "
                f"has delta_star(eps = {eps:g}, H = {H}) = {upper:.6g} (recomputed, a rigorous upper bound)")
    return Guarantee(eps=eps, delta=upper, H=H, source="mechanism")


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

#: Every key a spec file may hold (``lam`` for the Laplace family, ``sigma`` for the Gaussian).
KEYS = ("family", "lam", "sigma", "s", "domain", "window", *_META)
