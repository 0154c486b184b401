"""Two-level products (estimation._twolevel): randomized response, the square wave, the Piecewise and Hybrid
Mechanisms by prefix sums.

* one table of channels drives the checks: the structure is found, its products equal the dense matrix's on
  every output and on a sorted subset, for one and several columns, and ``fast_columns`` serves them (not with
  ``two_level=False``);
* channels that are not two-level, a low value below ``_C_MIN``, a row whose high outputs are not contiguous and
  an unsorted subset keep the dense products;
* (hypothesis) any two-level matrix, column-scaled, has products equal to its dense ones;
* ``auto`` and the MLE give the same estimates with the two-level products as with the dense ones, and EMS's
  Newton finish still runs on them.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparseldp as sl
from sparseldp.baselines import numeric
from sparseldp.estimation import _model, estimate_frequencies_full
from sparseldp.estimation._ems_newton import _newton_affordable
from sparseldp.estimation import _twolevel
from sparseldp.estimation._twolevel import TwoLevel, _C_MIN, _Products, dense_of
from sparseldp.sampling import sample

# (channel, domain size, irregular columns)
CHANNELS = {
    "rr": (lambda k: sl.baselines.randomized_response(eps=1.0, domain=(0, k - 1)), 300, 0),
    "square-wave": (lambda k: numeric.square_wave(eps=1.0, domain=(0, k - 1)), 200, 0),
    "piecewise": (lambda k: numeric.piecewise(eps=2.0, domain=(0, k - 1)), 150, 0),
    "piecewise-res3": (lambda k: numeric.piecewise(eps=1.0, domain=(0, k - 1), resolution=3), 100, 0),
    "hybrid": (lambda k: numeric.hybrid(eps=1.0, domain=(0, k - 1)), 200, 2),
}


@pytest.fixture(autouse=True)
def small_channels_too(monkeypatch):
    """The products on these test channels (smaller than where they pay, _twolevel._MIN_ENTRIES)."""
    monkeypatch.setattr(_twolevel, "_MIN_ENTRIES", 0)


def _rel_err(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("name", CHANNELS)
@pytest.mark.parametrize("subset", [False, True])
def test_products_match_the_dense_channel(name, subset):
    make, k, odd = CHANNELS[name]
    model = _model(make(k), (0, k - 1))
    assert model.dense
    tl = TwoLevel.of(model.S)
    assert tl is not None and int((~tl.regular).sum()) == odd
    rng = np.random.default_rng(7)
    idx = np.sort(rng.choice(model.m, model.m * 2 // 3, replace=False)) if subset else np.arange(model.m)
    A, AT = model.fast_columns(idx)
    assert type(A).__name__ == "_Side" and not A._t and AT._t and A.shape == (k, idx.size) and AT.shape == (idx.size, k)
    D = model.S[:, idx]
    assert np.array_equal(A.matrix, D) and np.array_equal(AT.matrix, D.T) and np.array_equal(A.toarray(), D)
    assert dense_of(A) is A.matrix and dense_of(D) is D
    P = rng.random((k, 4))
    R = rng.random((idx.size, 4))
    assert _rel_err(AT @ P, D.T @ P) < 1e-12 and _rel_err(A @ R, D @ R) < 1e-12
    assert _rel_err(AT @ P[:, 0], D.T @ P[:, 0]) < 1e-12 and _rel_err(A @ R[:, 1], D @ R[:, 1]) < 1e-12
    # column layout (EM's runs take Fortran-ordered views)
    PF = np.asfortranarray(P)
    assert _rel_err(AT @ PF, D.T @ P) < 1e-12
    # opting out gives the exact columns
    E, ET = model.fast_columns(idx, two_level=False)
    assert isinstance(E, np.ndarray) and np.array_equal(E, D) and np.array_equal(ET, D.T)
    assert _newton_affordable(A)


@pytest.mark.parametrize("make,k", [
    (lambda k: sl.baselines.geometric(lam=0.2, domain=(0, k - 1)), 150),
    (lambda k: numeric.duchi(eps=1.0, domain=(0, k - 1)), 150),
    (lambda k: sl.baselines.randomized_response(eps=-np.log(_C_MIN) + 2.0, domain=(0, k - 1)), 150),
], ids=["geometric", "duchi", "rr-eps-large"])
def test_other_channels_keep_dense_products(make, k):
    model = _model(make(k), (0, k - 1))
    assert model.dense and TwoLevel.of(model.S) is None
    A, _ = model.fast_columns(np.arange(model.m))
    assert isinstance(A, np.ndarray)


def test_sparse_channel_keeps_its_products():
    model = _model(sl.SparseLaplace(lam=0.5, s=11), (0, 199))
    assert not model.dense
    A, _ = model.fast_columns(np.arange(model.m))
    assert dense_of(A) is None


def test_structure_is_refused_where_it_does_not_hold():
    c = 0.3
    S = np.full((4, 5), c)
    S[0, 0:2] = S[1, 1:3] = S[2, 2:4] = S[3, 3:5] = 1.0
    assert TwoLevel.of(S) is not None
    bad = S.copy()
    bad[1, 3] = 1.0  # row 1: outputs 1..3, still contiguous, but column 3 now holds 1 in rows 1..3: fine
    assert TwoLevel.of(bad) is not None
    gap = S.copy()
    gap[0, 3] = 1.0  # row 0's high outputs 0, 1, 3: not contiguous; column 3 rows 0, 2, 3: not contiguous
    assert TwoLevel.of(gap) is None
    three = S.copy()
    three[3, 0] = 0.5  # column 0 takes three values; the rest is too small a share to set aside
    assert TwoLevel.of(three) is None
    tl = TwoLevel.of(S)
    assert tl.pair(np.array([3, 1, 2])) is None  # not sorted
    assert tl.pair(np.arange(5)) is not None


def test_small_channels_keep_dense_products(monkeypatch):
    monkeypatch.setattr(_twolevel, "_MIN_ENTRIES", 100_000)  # the module's own bound
    small = _model(sl.baselines.randomized_response(eps=1.0, domain=(0, 199)), (0, 199))
    assert isinstance(small.fast_columns(np.arange(small.m))[0], np.ndarray)
    large = _model(sl.baselines.randomized_response(eps=1.0, domain=(0, 399)), (0, 399))
    assert type(large.fast_columns(np.arange(large.m))[0]).__name__ == "_Side"


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 40), st.integers(1, 12), st.integers(1, 5), st.data())
def test_any_two_level_matrix_has_the_dense_products(k, width, b, data):
    """Rows' intervals ``[lo(x), lo(x) + width(x))`` with nondecreasing ends, any low values, column-scaled."""
    steps = data.draw(st.lists(st.integers(0, 2), min_size=k - 1, max_size=k - 1))
    lo = np.concatenate([[0], np.cumsum(steps)]).astype(int)
    grow = data.draw(st.lists(st.integers(0, 1), min_size=k, max_size=k))
    hi = np.maximum.accumulate(lo + width - 1 + np.asarray(grow))
    m = int(hi[-1]) + 1 + data.draw(st.integers(0, 3))
    low = np.asarray(data.draw(st.lists(st.floats(1e-3, 0.999), min_size=m, max_size=m)))
    y = np.arange(m)
    S = np.where((y[None, :] >= lo[:, None]) & (y[None, :] <= hi[:, None]), 1.0, low[None, :])
    S = S / S.max(axis=0)
    tl = TwoLevel.of(S)
    assert tl is not None
    idx = np.flatnonzero(np.asarray(data.draw(st.lists(st.booleans(), min_size=m, max_size=m))))
    if idx.size == 0:
        idx = np.arange(m)
    prod = _Products(tl, idx)
    rng = np.random.default_rng(k * 100 + m)
    P, R = rng.random((k, b)), rng.random((idx.size, b))
    D = S[:, idx]
    assert np.allclose(prod.at(P), D.T @ P, rtol=1e-12, atol=1e-13)
    assert np.allclose(prod.a(R), D @ R, rtol=1e-12, atol=1e-13)


@pytest.fixture
def dense_only(monkeypatch):
    """Turn the two-level products off (the reference)."""
    def off():
        monkeypatch.setattr(TwoLevel, "of", classmethod(lambda cls, S: None))
    return off


@pytest.mark.parametrize("name,method", [("hybrid", "auto"), ("rr", "auto"), ("piecewise", "em"),
                                         ("square-wave", "ems")])
def test_estimates_are_those_of_the_dense_products(name, method, dense_only):
    make, k, _ = CHANNELS[name]
    mech = make(k)
    gen = np.random.default_rng(3)
    x = np.minimum(gen.geometric(0.03, 20_000) - 1, k - 1)
    reports = sample(mech, x, rng=gen)
    fast = estimate_frequencies_full(reports, mech, domain=(0, k - 1), method=method)
    dense_only()
    ref = estimate_frequencies_full(reports, mech, domain=(0, k - 1), method=method)
    assert fast.regularization == ref.regularization
    # the iterations' rounding differs, so the fits stop at different points within their tolerance
    if method == "em":  # both certified within tol of the maximum (a flat likelihood: the points may differ)
        assert fast.converged and ref.converged and fast.gap <= 1e-2 and ref.gap <= 1e-2
        assert abs(fast.loglik - ref.loglik) <= 1e-2
    else:  # EMS fits stop within 1e-5 in TV of their fixed point up to 10^5 reports
        assert 0.5 * np.abs(fast.p - ref.p).sum() < 1e-5


def test_bootstrap_ems_refits_take_the_two_level_products(monkeypatch, dense_only):
    """EMS refits run on the two-level products (measured: the same interval of the mean to every printed
    digit); the MLE's refits keep the dense matrices."""
    from sparseldp.estimation import refits

    make, k, _ = CHANNELS["hybrid"]
    mech = make(k)
    gen = np.random.default_rng(4)
    reports = sample(mech, np.minimum(gen.geometric(0.03, 20_000) - 1, k - 1), rng=gen)
    est = estimate_frequencies_full(reports, mech, domain=(0, k - 1), method="ems")
    seen = []
    for name in ("_refit_ems", "_refit_em"):
        orig = getattr(refits, name)

        def spy(A, *a, _orig=orig, **kw):
            seen.append(type(A).__name__)
            return _orig(A, *a, **kw)

        monkeypatch.setattr(refits, name, spy)
    fast = est.mean(ci=est.bootstrap(mech, B=20, rng=3))[1]
    assert seen and set(seen) == {"_Side"}
    seen.clear()
    est_em = estimate_frequencies_full(reports, mech, domain=(0, k - 1), method="em")
    est_em.bootstrap(mech, B=4, rng=3)
    assert seen and set(seen) == {"ndarray"}
    dense_only()
    exact = est.mean(ci=est.bootstrap(mech, B=20, rng=3))[1]
    width = exact[1] - exact[0]
    assert abs(fast[0] - exact[0]) < 1e-3 * width and abs(fast[1] - exact[1]) < 1e-3 * width


def test_a_domain_narrower_than_the_channel_leaves_columns_of_ones():
    """k-RR built on 0..399, estimated on 0..199: the outputs 200..399 come from every input of the domain
    alike (columns of 1s after the scaling, c = 1, no interval); the products still equal the matrix's."""
    mech = sl.baselines.randomized_response(eps=2.0, domain=(0, 399))
    model = _model(mech, (0, 199))
    tl = TwoLevel.of(model.S)
    assert tl is not None and int((tl.c == 1.0).sum()) == 200 and int((tl.x1 == tl.x0).sum()) == 200
    A, AT = model.fast_columns(np.arange(model.m))
    rng = np.random.default_rng(1)
    P, R = rng.random((200, 3)), rng.random((model.m, 3))
    assert _rel_err(AT @ P, model.S.T @ P) < 1e-12 and _rel_err(A @ R, model.S @ R) < 1e-12
