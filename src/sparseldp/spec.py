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

from ._validation import check_int, check_odd_s, check_positive
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
    """Write ``spec`` as JSON atomically (temporary file, then rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(json.dumps(spec.to_dict(), indent=2) + "\n")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def load_spec(path) -> Spec:
    """Read and validate a spec file; ``ValueError`` naming the problem otherwise."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"cannot read mechanism spec {str(path)!r}: {exc.strerror or exc}") from None
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
    family = data.get("family")
    if family not in ("laplace", "gaussian"):
        raise ValueError(f"family must be 'laplace' or 'gaussian'; got {family!r}")
    pname = "lam" if family == "laplace" else "sigma"
    if pname not in data:
        raise ValueError(f"a {family} spec needs '{pname}'")
    param = check_positive(data[pname], pname)
    if "s" not in data:
        raise ValueError("spec needs 's' (odd support size >= 1)")
    s = check_odd_s(data["s"], "s")
    domain = None
    window = "extended"
    if data.get("domain") is not None:
        dom = data["domain"]
        if not (isinstance(dom, (list, tuple)) and len(dom) == 2):
            raise ValueError(f"domain must be a pair [lo, hi] of integers with lo <= hi; got {dom!r}")
        lo = check_int(dom[0], "domain lo")
        hi = check_int(dom[1], "domain hi", minimum=lo)
        domain = (lo, hi)
        window = data.get("window", "extended")
        if window not in _WINDOWS:
            raise ValueError(f"window must be one of {_WINDOWS}; got {window!r}")
    meta = {}
    for key in ("eps", "delta", "H", "delta_star", "r1", "r2"):
        if key in data:
            val = data[key]
            if isinstance(val, bool) or not isinstance(val, numbers.Real) or (
                isinstance(val, float) and math.isnan(val)
            ):
                raise ValueError(f"{key} must be a number; got {val!r}")
            meta[key] = val
    return Spec(family=family, param=param, s=s, domain=domain, window=window, meta=meta)
