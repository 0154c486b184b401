"""One local-randomizer protocol: radius mechanisms and finite channels answer the same names alike."""

from __future__ import annotations

import inspect
from fractions import Fraction

import numpy as np
import pytest

from sparseldp import SparseChannel, SparseGaussian, SparseLaplace
from sparseldp.baselines import randomized_response
from sparseldp.core.protocol import PROTOCOL_METHODS, LocalRandomizer

MECHS = [SparseLaplace(lam=0.5, s=7), SparseGaussian(sigma=1.5, s=9)]
DOMAIN = (0, 12)


def _randomizers():
    out = list(MECHS)
    for m in MECHS:
        out += [m.to_channel(DOMAIN, "extended"), m.to_channel(DOMAIN, "clipped")]
    out.append(randomized_response(eps=1.0, domain=(0, 5)))
    return out


@pytest.mark.parametrize("r", _randomizers(), ids=repr)
def test_every_randomizer_honours_the_protocol(r):
    assert isinstance(r, LocalRandomizer)
    for name in PROTOCOL_METHODS:
        params = list(inspect.signature(getattr(r, name)).parameters)
        proto = [p for p in inspect.signature(getattr(LocalRandomizer, name)).parameters if p != "self"]
        assert params[: len(proto)] == proto, (name, params, proto)


@pytest.mark.parametrize("m", MECHS, ids=repr)
def test_mechanism_and_its_extended_channel_agree_name_by_name(m):
    ch = m.to_channel(DOMAIN, "extended")
    assert ch.parameter == m.parameter
    ref = getattr(SparseChannel, m.family)(**dict([m.parameter]), s=m.s, domain=DOMAIN, window="extended")
    np.testing.assert_array_equal(ch.log_matrix.toarray(), ref.log_matrix.toarray())
    np.testing.assert_array_equal(ch.outputs, ref.outputs)
    for eps in (0.0, 0.5, 2.0):
        for H in (1, 3, 12):
            assert float(ch.delta_star(eps, H)) == pytest.approx(float(m.delta_star(eps, H)), abs=1e-14)
            assert float(ch.delta_star_upper(eps, H)) >= float(m.delta_star(eps, H))
        for x, xp in ((3, 5), (5, 3), (0, 7)):
            a, b = m.defect(eps, x, xp), ch.defect(eps, x, xp)
            assert float(a.total) == pytest.approx(float(b.total), abs=1e-14)
            assert float(a.support_leakage) == pytest.approx(float(b.support_leakage), abs=1e-14)
            assert float(m.defect(eps, x, xp).total) == float(m.delta_h(eps, abs(x - xp)))
    x = 6
    np.testing.assert_array_equal(m.support(x), ch.support(x))
    ys = np.arange(x - m.t - 1, x + m.t + 2)
    np.testing.assert_allclose(m.logpmf(ys, x), ch.logpmf(ys, x), atol=1e-14)
    out_m, p_m = m.sampling_pmf(x)
    out_c, p_c = ch.sampling_pmf(x)
    np.testing.assert_array_equal(np.asarray(out_m), np.asarray(out_c))
    assert sum(p_m) == 1 and all(isinstance(p, Fraction) for p in p_m)
    assert m.epsilon(0.5, 3) == pytest.approx(ch.epsilon(0.5, 3), rel=1e-9)


def test_channel_to_channel_restricts_rows():
    ch = SparseLaplace(lam=0.5, s=7).to_channel((0, 20), "clipped")
    sub = ch.to_channel((5, 10))
    np.testing.assert_array_equal(sub.inputs, np.arange(5, 11))
    for x in (5, 8, 10):
        np.testing.assert_array_equal(sub.pmf(sub.outputs, x), ch.pmf(sub.outputs, x))
    assert ch.to_channel() is ch
    with pytest.raises(ValueError, match="re-window through the mechanism"):
        ch.to_channel((5, 10), "extended")
    with pytest.raises(ValueError, match="holds none of the channel's inputs"):
        ch.to_channel((100, 120))


def test_pair_defect_far_apart_is_one():
    m = SparseLaplace(lam=0.5, s=7)
    assert float(m.defect(1.0, -(2**62), 2**62).total) == 1.0


@pytest.mark.parametrize("obj, old, new", [
    (SparseLaplace(lam=0.5, s=7), "delta", "delta_h"),
    (SparseGaussian(sigma=1.5, s=9), "delta_upper", "delta_h_upper"),
    (SparseLaplace(lam=0.5, s=7).to_channel((0, 9)), "delta", "delta_star"),
    (SparseLaplace(lam=0.5, s=7).to_channel((0, 9)), "param", "parameter"),
])
def test_renamed_names_say_where_they_went(obj, old, new):
    """One meaning per name: the old spellings are gone, with a message naming the new one."""
    with pytest.raises(AttributeError, match=f"was renamed: use {new}"):
        getattr(obj, old)
    assert not hasattr(obj, "no_such_name")


def test_one_parameter_representation(tmp_path):
    import json

    from sparseldp.design import design
    from sparseldp.spec import load_spec

    m = SparseGaussian(sigma=1.5, s=9)
    (tmp_path / "g.json").write_text(json.dumps({"family": "gaussian", "sigma": 1.5, "s": 9}))
    spec = load_spec(tmp_path / "g.json")
    d = design("laplace", eps=1.0, delta=0.1, H=2, lam=0.5)
    assert spec.parameter == m.parameter == m.to_channel((0, 5)).parameter == ("sigma", 1.5)
    assert d.parameter == d.mechanism.parameter == ("lam", 0.5)
