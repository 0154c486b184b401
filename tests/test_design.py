"""smallest_support is the exact minimum; design certifies and optimizes."""

import ast
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import brute
import sparseldp
from sparseldp import Design, InfeasibleError, SparseGaussian, SparseLaplace, design, smallest_support
from sparseldp.core.families import FAMILIES, get_family
from sparseldp.design.finite import design_finite


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
            n = make(kind, d.parameter[1] * f, s)
            if n.delta_star(1.0, 2) <= 0.05:
                assert getattr(n, objective) >= val * (1 - 1e-6)


def test_design_with_fixed_parameter_is_smallest_support():
    d = design("laplace", eps=1.0, delta=0.3, H=3, lam=0.5)
    assert d.s == smallest_support("laplace", eps=1.0, delta=0.3, H=3, lam=0.5) == 13
    assert set(d.to_dict()) == {"family", "lam", "s", "eps", "delta", "H", "delta_star", "r1", "r2"}


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: smallest_support("cauchy", eps=1, delta=0.1, H=1, lam=1), ValueError, "family must be"),
    (lambda: smallest_support("laplace", eps=1, delta=0.1, H=1), ValueError, "needs lam"),
    (lambda: smallest_support("laplace", eps=1, delta=0.1, H=1, sigma=1), ValueError,
     "sigma is not a parameter of the laplace family"),
    (lambda: smallest_support("gaussian", eps=1, delta=0.1, H=1, lam=1), ValueError,
     "lam is not a parameter of the gaussian family"),
    (lambda: smallest_support("laplace", eps=1, delta=0.1, H=1, param=1, lam=1), ValueError,
     "laplace parameter was given twice: param = 1 and lam = 1"),
    (lambda: design("gaussian", eps=1, delta=0.1, H=1, param=2, sigma=2), ValueError,
     "gaussian parameter was given twice"),
    (lambda: design("gaussian", eps=1, delta=0.1, H=1, lam=2), ValueError, "lam is not a parameter"),
    (lambda: design("laplace", eps=1, delta=0.1, H=1, param=-1), ValueError, "lam must be a real number > 0"),
    (lambda: design("laplace", eps=1, delta=0.1, H=1, param="x"), TypeError, "lam"),
    (lambda: design_finite("gaussian", eps=1, delta=0.1, H=1, domain=(0, 5), lam=1), ValueError,
     "lam is not a parameter of the gaussian family"),
    (lambda: design_finite("laplace", eps=1, delta=0.1, H=1, domain=(0, 5), param=1, lam=1), ValueError,
     "given twice"),
    (lambda: design("laplace", eps=1, delta=0.1, H=1, tau=1), TypeError, "tau"),
    (lambda: smallest_support("laplace", eps=-1, delta=0.1, H=1, lam=1), ValueError, "eps"),
    (lambda: smallest_support("laplace", eps=1, delta=2, H=1, lam=1), ValueError, "delta must be"),
    (lambda: smallest_support("laplace", eps=1, delta=0.1, H=0, lam=1), ValueError, "H must be an integer >= 1"),
    (lambda: design("laplace", eps=1, delta=0.1, H=1, objective="r3"), ValueError, "objective"),
])
def test_design_bad_input(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


# -- one parameter keyword -------------------------------------------------------------

@pytest.mark.parametrize("family, value", [("laplace", 0.5), ("gaussian", 2.0)])
def test_param_keyword_equals_family_spelling(family, value):
    spelled = {get_family(family).param: value}
    target = dict(eps=1.0, delta=0.35, H=3)
    assert (smallest_support(family, **target, param=value)
            == smallest_support(family, **target, **spelled))
    by_param = design(family, **target, param=value)
    assert by_param == design(family, **target, **spelled)
    assert by_param.parameter == (get_family(family).param, value) == by_param.mechanism.parameter
    fin = dict(eps=1.0, delta=0.35, H=3, domain=(0, 12))
    assert (design_finite(family, **fin, param=value).to_dict()
            == design_finite(family, **fin, **spelled).to_dict())


def test_family_record_is_accepted():
    fam = get_family("gaussian")
    assert design(fam, eps=1.0, delta=0.35, H=3, param=2.0) == design("gaussian", eps=1.0, delta=0.35, H=3, sigma=2.0)


# -- one design result type ------------------------------------------------------------

DESIGN_FIELDS = ["family", "mechanism", "parameter", "s", "eps", "delta", "H", "delta_star", "r1", "r2", "domain",
                 "window", "channel", "objective", "note"]


@pytest.mark.parametrize("family", ["laplace", "gaussian"])
def test_design_and_design_finite_return_the_same_type(family):
    z = design(family, eps=1.0, delta=0.05, H=2, objective="r1")
    f = design_finite(family, eps=1.0, delta=0.05, H=2, domain=(0, 10), window="clipped")
    assert type(z) is type(f) is Design is sparseldp.Design
    assert [fl.name for fl in dataclasses.fields(Design)] == DESIGN_FIELDS
    pname = get_family(family).param
    for d in (z, f):
        assert d.family == family and d.parameter == d.mechanism.parameter and d.parameter[0] == pname
        assert (d.param_name, d.param) == d.parameter and d.s == d.mechanism.s
        assert d.delta_star <= d.delta
        assert not hasattr(d, "delta_reached")
        with pytest.raises(dataclasses.FrozenInstanceError):
            d.s = 3
    assert (z.domain, z.window, z.channel, z.objective) == (None, None, None, "r1")
    assert f.domain == (0, 10) and f.window == "clipped" and f.objective == "r2"
    assert f.channel.parameter == f.parameter and f.delta_star == float(f.channel.delta_star_upper(1.0, 2))
    assert list(z.to_dict()) == ["family", pname, "s", "eps", "delta", "H", "delta_star", "r1", "r2"]
    assert list(f.to_dict()) == ["family", pname, "s", "eps", "delta", "H", "delta_star", "r1", "r2", "domain",
                                 "window"]
    assert f.to_dict()["domain"] == [0, 10]


def test_design_refuses_inconsistent_fields():
    m = SparseLaplace(lam=0.5, s=7)
    with pytest.raises(ValueError, match="must be those of the mechanism"):
        Design("laplace", m, ("lam", 0.6), 7, 1.0, 0.1, 2, 0.05, m.r1, m.r2)
    with pytest.raises(ValueError, match="all given"):
        Design("laplace", m, ("lam", 0.5), 7, 1.0, 0.1, 2, 0.05, m.r1, m.r2, domain=(0, 5))


# -- no family names in the designers ------------------------------------------------

SRC = Path(sparseldp.__file__).parent


def _string_constants(tree):
    """Every str constant that is not a docstring (module, class or function)."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node


@pytest.mark.parametrize("module", sorted(str(p.relative_to(SRC)) for p in (SRC / "design").glob("*.py")))
def test_designers_do_not_name_families(module):
    """Families are looked up in the registry (sparseldp.core.families), never compared by name."""
    names = set(FAMILIES) | {n.capitalize() for n in FAMILIES}
    tree = ast.parse((SRC / module).read_text(encoding="utf-8"))
    found = [(node.lineno, node.value) for node in _string_constants(tree)
             if node.value.strip().lower() in {n.lower() for n in names}]
    assert found == [], f"{module} names families in code: {found}"


# -- the closed forms the searches use (registry, DesignSearch) ---------------------------

CLOSED = [("laplace", 0.3, 40, 1.0, 3), ("laplace", 2.0, 5, 0.5, 7), ("laplace", 1e-3, 3000, 0.1, 50),
          ("laplace", 0.25, 30, 1.0, 4), ("gaussian", 0.7, 6, 1.0, 2), ("gaussian", 40.0, 400, 0.3, 25),
          ("gaussian", 3.0, 2, 2.0, 3), ("gaussian", 1500.0, 12000, 1.0, 300)]


@pytest.mark.parametrize("kind, param, t, eps, h", CLOSED)
def test_closed_forms_match_the_accountant(kind, param, t, eps, h):
    """O(1) delta_h and moments (DesignSearch) equal the accountant's (Theorems 3/9, Propositions 1/3)."""
    S = get_family(kind).search
    m = make(kind, param, 2 * t + 1)
    ref = float(m.delta_h(eps, h))
    assert math.exp(S.log_delta(param, t, eps, h)) == pytest.approx(ref, rel=1e-11, abs=1e-300)
    assert S.moments(param, t) == pytest.approx((m.r1, m.r2), rel=1e-12)
    # the limit s -> infinity: below every finite radius (Lemma 1), and reached once the tail is negligible
    far = int(S.settle(param, 1e-12, h)) + 1
    assert S.log_delta(param, math.inf, eps, h) <= S.log_delta(param, t, eps, h) + 1e-12
    lim, at_far = math.exp(S.log_delta(param, math.inf, eps, h)), math.exp(S.log_delta(param, far, eps, h))
    assert lim * (1 - 1e-13) <= at_far <= lim * (1 + 1e-9) + 1e-12 * math.exp(-60)


@given(kind=st.sampled_from(["laplace", "gaussian"]), param=st.floats(0.05, 5.0), t=st.integers(1, 12),
       eps=st.floats(0.0, 3.0))
def test_delta_h_is_nondecreasing_in_h(kind, param, t, eps):
    """Lemma 2 of sparseldp.design.radius, on the independent brute-force rows: delta_star = delta_H."""
    vals = [brute.delta(kind, param, 2 * t + 1, eps, h) for h in range(1, 2 * t + 2)]
    assert all(b >= a - 1e-13 for a, b in zip(vals, vals[1:]))


# -- edges: tiny and large delta, the caps --------------------------------------------

@pytest.mark.parametrize("family", ["laplace", "gaussian"])
@pytest.mark.parametrize("delta", [1e-20, 1e-300])
def test_tiny_delta_is_reached(family, delta):
    d = design(family, eps=1.0, delta=delta, H=3)
    assert 0.0 < d.delta_star <= delta
    assert d.delta_star == float(d.mechanism.delta_star_upper(1.0, 3))
    s = smallest_support(family, eps=1.0, delta=delta, H=3, param=d.param)
    assert s <= d.s
    assert float(make(family, d.param, s).delta_star_upper(1.0, 3)) <= delta
    assert float(make(family, d.param, s - 2).delta_star_upper(1.0, 3)) > delta


def test_laplace_lam_03_reaches_1e_20():
    # lam = 0.3 reaches 9.8e-21 at s = 305 (eps = 1, H = 3): the radius search has no fixed ceiling in 1/lam
    s = smallest_support("laplace", eps=1.0, delta=1e-20, H=3, lam=0.3)
    assert s <= 305 and float(SparseLaplace(lam=0.3, s=s).delta_star_upper(1.0, 3)) <= 1e-20
    assert design("laplace", eps=1.0, delta=1e-20, H=3).r2 <= SparseLaplace(lam=0.3, s=s).r2


@pytest.mark.parametrize("family", ["laplace", "gaussian"])
@pytest.mark.parametrize("delta", [0.5, 0.999])
def test_large_delta(family, delta):
    d = design(family, eps=0.5, delta=delta, H=4)
    assert d.delta_star <= delta
    assert brute.delta_star(family, d.param, d.s, 0.5, 4) <= delta + 1e-12
    assert design(family, eps=0.5, delta=1.0, H=4).s == 1  # delta = 1: the identity qualifies


@pytest.mark.parametrize("call", [
    lambda: design("laplace", eps=1.0, delta=1e-6, H=2_000_000),
    lambda: design("gaussian", eps=1.0, delta=1e-6, H=10_001, sigma=5.0),
    lambda: smallest_support("laplace", eps=1.0, delta=1e-6, H=10 ** 12, lam=1e-7),
])
def test_H_cap_is_named(call):
    with pytest.raises(ValueError, match=r"H must be an integer in \[1, 10000\] \(the designers' cap MAX_H_DESIGN"):
        call()


def test_gaussian_support_cap_names_the_size_needed():
    with pytest.raises(InfeasibleError, match=r"needs about s = \d+, above the gaussian family's cap s <= 8388609"):
        design("gaussian", eps=0.05, delta=1e-15, H=10_000)
    with pytest.raises(InfeasibleError, match=r"needs about s = \d+, above the gaussian family's cap"):
        smallest_support("gaussian", eps=1.0, delta=1e-9, H=1, sigma=1e7)
    # a delta below the absolute slack of the nearest values: the size named was 9462275, where delta_star
    # is 1.1e-11 (an independent 80-digit reference: 73579035 is the smallest)
    with pytest.raises(InfeasibleError, match=r"needs about s = 73579035, above"):
        smallest_support("gaussian", eps=1000, delta=1e-300, H=2, sigma=1e6)
    # a limit of 1.4e-87 > 1e-300: proven infeasible (it named s = 8388611 before)
    with pytest.raises(InfeasibleError, match=r"its limit as s -> infinity is at least 1.38\d*e-87 > delta"):
        smallest_support("gaussian", eps=1000, delta=1e-300, H=2, sigma=0.05)


# -- the joint optimum against a brute-force grid ----------------------------------------

@pytest.mark.parametrize("family, eps, delta, H", [("laplace", 1.0, 0.05, 2), ("gaussian", 1.0, 0.05, 2),
                                                   ("laplace", 1.0, 1e-9, 2), ("gaussian", 0.5, 1e-3, 1)])
def test_joint_design_beats_a_brute_grid(family, eps, delta, H):
    d = design(family, eps=eps, delta=delta, H=H)
    assert brute.delta_star(family, d.param, d.s, eps, H) <= delta + 1e-13
    val = brute.moments(family, d.param, d.s)[1]
    assert val == pytest.approx(d.r2, rel=1e-10)
    t_d = (d.s - 1) // 2
    params = d.param * np.geomspace(0.5, 2.0, 61)
    for t in range(max((H + 1) // 2, t_d - 15), t_d + 25):
        for p in params:
            if brute.delta(family, float(p), 2 * t + 1, eps, H) <= delta - 1e-13:  # Lemma 2: h = H is the worst
                assert brute.moments(family, float(p), 2 * t + 1)[1] >= d.r2 * (1 - 1e-9), (t, p)


@pytest.mark.parametrize("call", [
    lambda: design("gaussian", eps=1e300, delta=1e-6, H=5),  # ZeroDivisionError before
    lambda: design("gaussian", eps=1e100, delta=1e-6, H=5),  # an uncertifiable design (RuntimeError) before
    lambda: design_finite("gaussian", eps=1e100, delta=1e-6, H=2, domain=(0, 9)),
])
def test_eps_beyond_the_gaussian_design_cap_is_named(call):
    with pytest.raises(ValueError, match=r"eps must be a real number in \[0, 1e\+50\] for a gaussian design "
                                         r"\(sigma would underflow beyond\)"):
        call()


@pytest.mark.parametrize("family, eps, delta, H", [
    ("gaussian", 0.1, 1e-6, 5),  # s = 2897 where 2861 is certified at the same sigma (an independent probe)
    ("laplace", 4.0, 0.99, 5),  # s = 27 where 25 is
    ("laplace", 1.0, 1 - 1e-15, 3),  # s = 9 where 5 is
    ("laplace", 1.0, 1e-6, 5), ("gaussian", 1.0, 1e-6, 5), ("gaussian", 2.0, 1e-9, 20),
])
def test_design_takes_the_smallest_support_of_its_parameter(family, eps, delta, H):
    d = design(family, eps=eps, delta=delta, H=H)
    assert d.s == smallest_support(family, eps=eps, delta=delta, H=H, param=d.parameter[1])


@pytest.mark.parametrize("family", ["laplace", "gaussian"])
@pytest.mark.parametrize("delta", [1e-310, 5e-324])
def test_a_subnormal_delta_is_a_clear_error(family, delta):
    """A subnormal target has no relative precision (the searches work with log delta): refused by name."""
    from sparseldp.design.finite import design_finite

    for call in (lambda: design(family, eps=1.0, delta=delta, H=5),
                 lambda: design_finite(family, eps=1.0, delta=delta, H=2, domain=(0, 20))):
        with pytest.raises(ValueError, match=r"delta must be 0 or in \[2.2250738585072014e-308, 1\].*got"):
            call()
    assert design(family, eps=1.0, delta=1e-300, H=5).delta_star <= 1e-300
