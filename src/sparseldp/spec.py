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
default) or are clipped to it (``"clipped"``, NOTES item 2).

Loading re-validates every field; a bad spec raises ``ValueError`` naming the
field (the CLI turns it into exit status 2).
"""

from __future__ import annotations

import json
import math
import numbers
import os
from dataclasses import dataclass
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
from .mechanisms import SparseGaussian, SparseLaplace

__all__ = ["Spec", "load_spec", "save_spec", "spec_from_mechanism"]

_WINDOWS = ("extended", "clipped")


@dataclass(frozen=True)
class Spec:
    """A validated mechanism spec.  ``mechanism`` is on Z; ``channel()`` on the domain."""

    family: str
    param: float
    s: int
    domain: tuple[int, int] | None = None
    window: str = "extended"
    meta: dict | None = None

    @property
    def param_name(self) -> str:
        return "lam" if self.family == "laplace" else "sigma"

    @property
    def mechanism(self):
        """The mechanism on Z (:class:`SparseLaplace` or :class:`SparseGaussian`)."""
        if self.family == "laplace":
            return SparseLaplace(lam=self.param, s=self.s)
        return SparseGaussian(sigma=self.param, s=self.s)

    def channel(self):
        """The finite-domain channel (requires ``domain``)."""
        if self.domain is None:
            raise ValueError("spec has no 'domain'; a finite-domain channel needs one")
        from .channel import SparseChannel

        build = SparseChannel.laplace if self.family == "laplace" else SparseChannel.gaussian
        return build(**{self.param_name: self.param}, s=self.s, domain=self.domain, window=self.window)

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
    from ._files import atomic_write

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
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise ValueError(f"cannot read mechanism spec {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"mechanism spec {str(path)!r} is not valid JSON: it is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"mechanism spec {str(path)!r} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict):
        raise ValueError(f"mechanism spec {str(path)!r} must be a JSON object; got {type(data).__name__}")
    try:
        return _validate(data)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bad mechanism spec {str(path)!r}: {exc}") from None


def _validate(data: dict) -> Spec:
    from .channel import check_domain

    family = data.get("family")
    if isinstance(family, str):
        family = family.strip().lower()  # as design() accepts "Laplace"
    if family not in ("laplace", "gaussian"):
        raise ValueError(f"family must be 'laplace' or 'gaussian'; got {family!r}")
    pname = "lam" if family == "laplace" else "sigma"
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
    mechanism = SparseLaplace(lam=param, s=s) if family == "laplace" else SparseGaussian(sigma=param, s=s)
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
    return Spec(family=family, param=param, s=s, domain=domain, window=window, meta=meta)


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
    "eps": _number(lambda v, k: check_nonnegative(v, k, allow_inf=True)),
    "delta": _number(check_probability),
    "H": _number(lambda v, k: check_int(v, k, minimum=1)),
    "delta_star": _number(check_probability),
    "r1": _number(lambda v, k: check_nonnegative(v, k)),
    "r2": _number(lambda v, k: check_nonnegative(v, k)),
}

#: Every key a spec file may hold (``lam`` for the Laplace family, ``sigma`` for the Gaussian).
KEYS = ("family", "lam", "sigma", "s", "domain", "window", *_META)
