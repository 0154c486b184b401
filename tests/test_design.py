"""smallest_support is the exact minimum; design certifies and optimizes."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import brute
from sparseldp import InfeasibleError, SparseGaussian, SparseLaplace, design, smallest_support


def make(kind, param, s):
    return SparseLaplace(lam=param, s=s) if kind == "laplace" else SparseGaussian(sigma=param, s=s)


@given(
    kind=st.sampled_from(["laplace", "gaussian"]),
    param=st.floats(0.1, 4.0),
    eps=st.floats(0.1, 3.0),
    delta=st.floats(0.01, 0.9),
    H=st.integers(1, 6),
)
def test_smallest_support_is_exact_minimum(kind, param, eps, delta, H):
    kw = {"lam": param} if kind == "laplace" else {"sigma": param}
    try:
        s = smallest_support(kind, eps=eps, delta=delta, H=H, **kw)
    except InfeasibleError:
        # then even a very wide window fails (the limit argument), checked by brute force
        assert brute.delta_star(kind, param, 401, eps, H) > delta
        return
    assert brute.delta_star(kind, param, s, eps, H) <= delta + 1e-12
    if s >= 3:
        assert brute.delta_star(kind, param, s - 2, eps, H) > delta - 1e-12


@pytest.mark.parametrize("kind,kw", [("laplace", {"lam": 0.05}), ("gaussian", {"sigma": 30.0}), ("laplace", {"lam": 1e-3})])
def test_smallest_support_tiny_delta(kind, kw):
    s = smallest_support(kind, eps=1.0, delta=1e-12, H=3, **kw)
    m = make(kind, next(iter(kw.values())), s)
    assert m.delta_star(1.0, 3) <= 1e-12 < make(kind, next(iter(kw.values())), s - 2).delta_star(1.0, 3)


def test_infeasible_is_proven():
    with pytest.raises(InfeasibleError, match="limit"):
        smallest_support("gaussian", eps=1.0, delta=0.001, H=3, sigma=2.0)
    with pytest.raises(InfeasibleError):
        smallest_support("laplace", eps=1.0, delta=1e-3, H=3, lam=0.5)


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
@pytest.mark.parametrize("objective", ["r1", "r2"])
def test_design_certificate_and_local_optimality(kind, objective):
    d = design(kind, eps=1.0, delta=0.05, H=2, objective=objective)
    m = d.mechanism
    assert d.delta_star == pytest.approx(float(m.delta_star(1.0, 2)))
    assert d.delta_star <= 0.05
    assert d.s == m.s and d.to_dict()["s"] == m.s
    val = getattr(m, objective)
    # no feasible neighbour in (s, param) does better
    for s in (m.s - 2, m.s, m.s + 2):
        if s < 1:
            continue
        for f in (0.98, 0.995, 1.0, 1.005, 1.02):
            n = make(kind, d.param * f, s)
            if n.delta_star(1.0, 2) <= 0.05:
                assert getattr(n, objective) >= val * (1 - 1e-6)


def test_design_with_fixed_parameter_is_smallest_support():
    d = design("laplace", eps=1.0, delta=0.3, H=3, lam=0.5)
    assert d.s == smallest_support("laplace", eps=1.0, delta=0.3, H=3, lam=0.5) == 13
    assert set(d.to_dict()) == {"family", "lam", "s", "eps", "delta", "H", "delta_star", "r1", "r2"}


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: smallest_support("cauchy", eps=1, delta=0.1, H=1, lam=1), ValueError, "family must be"),
    (lambda: smallest_support("laplace", eps=1, delta=0.1, H=1), ValueError, "needs lam"),
    (lambda: smallest_support("laplace", eps=1, delta=0.1, H=1, sigma=1), ValueError, "sigma"),
    (lambda: smallest_support("laplace", eps=-1, delta=0.1, H=1, lam=1), ValueError, "eps"),
    (lambda: smallest_support("laplace", eps=1, delta=2, H=1, lam=1), ValueError, "delta must be"),
    (lambda: smallest_support("laplace", eps=1, delta=0.1, H=0, lam=1), ValueError, "H must be an integer >= 1"),
    (lambda: design("laplace", eps=1, delta=0.1, H=1, objective="r3"), ValueError, "objective"),
])
def test_design_bad_input(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()
