"""Spec parsing: one table of malformed spec dicts, applied to every spec family.

The window families (``laplace``, ``gaussian``) and the baseline families
(``rr``, ``square-wave``, ...) share the parsing of keys, of the parameter's
presence and of ``domain``; the table pins that every family refuses the same
malformed field with the same error type and message (module docstring of
:mod:`sparseldp.spec`), both from the dict (``_validate``, the parser that
``spec_from_mechanism`` / ``spec_from_channel`` use) and from a file
(:func:`load_spec`, which reports every error as ``ValueError`` prefixed with
the path).  Every case fails before the guarantee is recomputed: fast.
"""

from __future__ import annotations

import json

import pytest

from sparseldp import spec as S
from sparseldp.spec import load_spec

I64 = "[-9223372036854775808, 9223372036854775807]"
META_KEYS = "H, delta, delta_star, domain, eps, family"
#: family -> (a valid spec, the key of its parameter, the keys the spec may hold, whether it is a baseline)
FAMILIES = {
    "laplace": ({"family": "laplace", "lam": 0.5, "s": 7, "domain": [0, 9]}, "lam",
                f"{META_KEYS}, lam, r1, r2, s, window", False),
    "gaussian": ({"family": "gaussian", "sigma": 2.0, "s": 7, "domain": [0, 9]}, "sigma",
                 f"{META_KEYS}, r1, r2, s, sigma, window", False),
    "rr": ({"family": "rr", "mechanism_eps": 1.0, "domain": [0, 9]}, "mechanism_eps",
           f"{META_KEYS}, mechanism_eps, r1, r2", True),
    "geometric-clamp": ({"family": "geometric-clamp", "lam": 0.5, "domain": [0, 9]}, "lam",
                        f"{META_KEYS}, lam, r1, r2", True),
    "discrete-gaussian": ({"family": "discrete-gaussian", "sigma": 2.0, "domain": [0, 9]}, "sigma",
                          f"{META_KEYS}, r1, r2, sigma", True),
    "square-wave": ({"family": "square-wave", "mechanism_eps": 1.0, "band": 3, "domain": [0, 9]}, "mechanism_eps",
                    "H, band, delta, delta_star, domain, eps, family, mechanism_eps, r1, r2", True),
    "piecewise": ({"family": "piecewise", "mechanism_eps": 1.0, "resolution": 4, "domain": [0, 9]},
                  "mechanism_eps", f"{META_KEYS}, mechanism_eps, r1, r2, resolution", True),
}
_PAIR = "domain must be a pair [lo, hi] of integers with lo <= hi; got "

DROP = object()  # a change that removes the key
# (label, changes to the valid spec, error type, message); in the message
# {family}, {key} and {keys} are the family's name, parameter key and allowed keys
CASES = [
    ("unknown key", {"windw": "clipped"}, ValueError, "unknown key 'windw' in a {family} spec; the keys are {keys}"),
    ("two unknown keys", {"zz": 1, "aa": 2}, ValueError,
     "unknown keys 'aa', 'zz' in a {family} spec; the keys are {keys}"),
    ("missing parameter", {"{key}": DROP}, ValueError, "a {family} spec needs '{key}'"),
    ("domain a string", {"domain": "0,9"}, ValueError, _PAIR + "'0,9'"),
    ("domain one number", {"domain": [0]}, ValueError, _PAIR + "[0]"),
    ("domain three numbers", {"domain": [0, 1, 2]}, ValueError, _PAIR + "[0, 1, 2]"),
    ("domain empty", {"domain": []}, ValueError, _PAIR + "[]"),
    ("domain an object", {"domain": {"lo": 0}}, ValueError, _PAIR + "{'lo': 0}"),
    ("domain a number", {"domain": 5}, ValueError, _PAIR + "5"),
    ("domain reversed", {"domain": [9, 0]}, ValueError,
     "domain must be a pair (lo, hi) of integers with lo <= hi; got (9, 0)"),
    ("domain float", {"domain": [0.5, 3]}, TypeError, f"domain lo must be an integer in {I64}; got float 0.5"),
    ("domain string ends", {"domain": ["0", 3]}, TypeError, f"domain lo must be an integer in {I64}; got str '0'"),
    ("domain bool", {"domain": [True, 3]}, TypeError, f"domain lo must be an integer in {I64}; got bool True"),
    ("domain beyond int64", {"domain": [0, 2**70]}, ValueError,
     f"domain hi must be an integer in {I64}; got {2**70}"),
]
# the parameter's own checks differ between the two kinds (a window family's parameter is checked by the
# mechanism's validator, a baseline's as a number first): pinned per kind
PARAM_CASES = [
    ("parameter a string", "1", (TypeError, "{key} must be a real number > 0 and finite; got str '1'"),
     (ValueError, "{key} must be a number; got '1'")),
    ("parameter null", None, (TypeError, "{key} must be a real number > 0 and finite; got NoneType None"),
     (ValueError, "{key} must be a number; got None")),
    ("parameter negative", -1.0, (ValueError, "{key} must be a real number > 0 and finite; got -1.0"), None),
]


def _fill(text: str, **names) -> str:
    for name, value in names.items():
        text = text.replace("{" + name + "}", value)
    return text


def _cases():
    for family, (valid, key, keys, baseline) in FAMILIES.items():
        for label, change, exc, message in CASES:
            yield family, label, {_fill(k, key=key): v for k, v in change.items()}, exc, _fill(
                message, family=family, key=key, keys=keys)
        for label, value, window, base in PARAM_CASES:
            got = base if baseline else window
            if got is not None:
                yield family, label, {key: value}, got[0], _fill(got[1], key=key)
        if baseline:
            yield family, "no domain", {"domain": DROP}, ValueError, (
                f"a {family} spec needs 'domain' [lo, hi]: a baseline is a channel on a finite domain")


def _spec(family: str, change: dict) -> dict:
    data = dict(FAMILIES[family][0])
    for k, v in change.items():
        if v is DROP:
            data.pop(k)
        else:
            data[k] = v
    return data


@pytest.mark.parametrize("family, label, change, exc, message", list(_cases()),
                         ids=[f"{c[0]}: {c[1]}" for c in _cases()])
def test_every_family_refuses_a_malformed_field_with_the_same_message(tmp_path, family, label, change, exc, message):
    data = _spec(family, change)
    with pytest.raises(exc) as got:
        S._validate(data)
    assert type(got.value) is exc and str(got.value) == message
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as got:
        load_spec(path)
    assert str(got.value) == f"bad mechanism spec {str(path)!r}: {message}"


def test_domain_is_parsed_alike_for_every_family():
    # the accepted forms: a list or a tuple of two integers, lo <= hi (one value is a domain too)
    for family in ("laplace", "rr", "square-wave"):
        for dom in ([0, 9], (0, 9), [4, 4] if family != "square-wave" else [0, 3]):
            assert S._validate(_spec(family, {"domain": dom})).domain == tuple(dom)
    # a window family without a domain is the mechanism on Z; a baseline refuses it (table above)
    assert S._validate(_spec("laplace", {"domain": None})).domain is None
