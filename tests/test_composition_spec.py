"""k reports of a spec: one route for every command (spec_route), and k_reports composing as compose() does."""

from __future__ import annotations

import json

import pytest

from sparseldp import SparseGaussian, SparseLaplace
from sparseldp.baselines import randomized_response
from sparseldp.cli.privatize import _exact_per_person
from sparseldp.composition import compose, k_reports, spec_k_reports, spec_route
from sparseldp.spec import Guarantee, spec_from_channel, spec_from_mechanism


@pytest.mark.parametrize("mech, H, k", [
    (SparseLaplace(lam=0.5, s=41), 3, 2),
    (SparseGaussian(sigma=2.0, s=21), 5, 10),
    # a lattice that trimming for k = 3 shortens (far points below 1e-300 / (k n)): trimming it a second
    # time shortened it again and moved delta_k by 4e-13 relative
    (SparseGaussian(sigma=30.0, s=4001), 1, 3),
], ids=repr)
def test_k_reports_is_compose_bit_for_bit(mech, H, k):
    for eps in (0.3, 2.0):
        r = k_reports(mech, k, eps=eps, delta=0.5, H=H, with_eps=False)
        value, error = compose(mech, k, H=H).delta_with_error(k * eps)
        assert r.route == "lattice"
        assert (r.exact_delta, r.exact_delta_error) == (float(value), float(error))


def test_k_reports_over_the_point_limit_names_the_lattice_size():
    m = SparseGaussian(sigma=2.0, s=21)
    n = compose(m, 7, H=3)._kfold.loss.n  # the lattice that would be composed
    r = k_reports(m, 7, eps=1.0, delta=0.5, H=3, max_points=7 * (n - 1))
    assert r.route == "basic"
    assert r.why_basic == (f"the composed privacy-loss lattice would have k (n - 1) + 1 = {7 * (n - 1) + 1:,} "
                           f"points (n = {n} per report), more than the {7 * (n - 1):,} composed here")
    assert k_reports(m, 7, eps=1.0, delta=0.5, H=3, max_points=7 * (n - 1) + 1).route == "lattice"


LAP = SparseLaplace(lam=0.5, s=7)


@pytest.mark.parametrize("spec, H, lattice, H_eff, why", [
    (spec_from_mechanism(LAP), 4, True, 4, None),
    (spec_from_mechanism(LAP, domain=(0, 20)), 4, True, 4, None),
    (spec_from_mechanism(LAP, domain=(0, 2)), 4, True, 2, None),
    (spec_from_mechanism(LAP, domain=(0, 20), window="clipped"), 4, False, 4, "clipped windows"),
    (spec_from_mechanism(LAP, domain=(5, 5)), 4, False, 0, "the domain has one value"),
    (spec_from_channel(randomized_response(eps=1.0, domain=(0, 9))), 4, False, 4, "a rr channel"),
], ids=["z", "extended", "extended-narrow", "clipped", "one-value", "baseline"])
def test_spec_route_and_the_commands_that_follow_it(spec, H, lattice, H_eff, why):
    route = spec_route(spec, H)
    assert (route.lattice, route.H) == (lattice, H_eff)
    assert (route.why_basic is None) if why is None else route.why_basic.startswith(why)
    r = spec_k_reports(spec, 3, eps=1.0, delta=0.25, H=H)
    assert (r.basic_eps, r.basic_delta) == (3.0, 0.75)
    if lattice:  # the mechanism on Z, composed on the range that occurs
        assert r.route == "lattice" and r.H == H_eff
        want = k_reports(LAP, 3, eps=1.0, delta=0.25, H=H_eff)
        assert json.dumps(r.to_dict()) == json.dumps(want.to_dict())
    else:  # basic composition on the range asked, with the reason
        assert r.route == "basic" and r.H == H and r.why_basic == route.why_basic
    # privatize states the exact composition exactly where the route is the lattice
    exact = _exact_per_person(spec, Guarantee(eps=1.0, delta=0.25, H=H), 3)
    assert (exact is not None) == lattice
    if lattice:
        assert exact.exact_delta == r.exact_delta and exact.h == r.h
    with pytest.raises(ValueError, match=r"H must be an integer >= 1; got 0"):
        spec_route(spec, 0)


def test_the_report_follows_the_same_route():
    from sparseldp.report._composition import _composition_section

    ext = spec_from_mechanism(LAP, domain=(0, 2))
    sec = _composition_section(ext, 1.0, 4, None, 3, 0.25)
    assert sec["route"] == "lattice" and "at most 2 apart" in sec["how"]
    assert sec["rows"][-1]["delta_at_keps"].value == float(compose(LAP, 3, H=2).delta(3.0))
    one = spec_from_mechanism(LAP, domain=(5, 5), window="clipped")
    assert _composition_section(one, 1.0, 4, None, 3, 0.0)["route"] == "none"
    clipped = spec_from_mechanism(LAP, domain=(0, 8), window="clipped")
    assert _composition_section(clipped, 1.0, 2, None, 60, 0.25)["route"] == "basic"  # beyond dp-accounting's k

