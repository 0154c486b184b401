"""The rigorous channel bounds of sparseldp.channel.upper: the pair scans and the fast bound's reuse."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from sparseldp.baselines import FAMILIES, discrete_gaussian, randomized_response, square_wave
from sparseldp.channel import SparseChannel
from sparseldp.channel import upper as U
from sparseldp._format import format_upper
from sparseldp.spec import load_spec, spec_from_channel

EPS = np.array([0.0, 0.05, 0.3, 1.0, 2.5, 7.0, 750.0])


def _spread():
    """Rows with outputs 39 apart and one of their own: a channel the flat backend holds (its band would be
    mostly empty)."""
    W = np.zeros((6, 40))
    for i in range(6):
        W[i, 0], W[i, 39], W[i, 10 + i] = 5.0, 5.0 + i, 0.01
    return SparseChannel(W, inputs=[0, 1, 3, 4, 8, 9])


CHANNELS = {
    "rr": lambda: randomized_response(eps=1.0, domain=(0, 7)),
    "square-wave": lambda: square_wave(eps=1.0, domain=(0, 11)),
    "geometric-clamp": lambda: FAMILIES["geometric-clamp"].constructor(lam=0.7, domain=(0, 9)),
    "clipped-laplace": lambda: SparseChannel.laplace(lam=0.5, s=7, domain=(0, 12), window="clipped"),
    "random": lambda: SparseChannel(np.random.default_rng(3).random((7, 9)) * (np.random.default_rng(4).random((7, 9)) > 0.4)
                                    + np.eye(7, 9)),
    "flat": _spread,
}


def _pair_by_pair(ch, eps, H):
    """The maximum of the per-pair bound, each ordered pair in range evaluated on its own."""
    backend, rb = ch._backend(), ch._row_bounds()
    order, xs = ch._sorted_inputs()
    best = np.zeros(eps.size)
    for i in range(xs.size):
        for j in range(xs.size):
            if i == j or (H is not None and abs(int(xs[i]) - int(xs[j])) > H):
                continue
            for blk in backend.blocks(np.array([i]), np.array([j])):
                leak, miss, xmax = blk.structure()
                up, _, _ = U._pair_upper(rb, order[blk.I], order[blk.J], blk.totals(eps), eps, (leak, xmax, miss))
                best = np.maximum(best, up.max(axis=1))
    return best


@pytest.mark.parametrize("name", CHANNELS)
@pytest.mark.parametrize("H", [1, 3, None])
def test_both_scans_are_the_maximum_of_the_per_pair_bound(name, H):
    ch = CHANNELS[name]()
    ref = _pair_by_pair(ch, EPS, H)
    up = U._scan_upper(ch, EPS, H)
    # stopping at 1 is the only shortcut: below 1 every pair was visited
    assert np.array_equal(up, ref) or (np.all(up == 1.0) and np.all(ref == 1.0))
    # the lower bound from every row sees the same pairs, lowered by its summation-order factor
    w = float(ch._row_bounds()[3].max())
    low = U._scan_lower(ch, EPS, H, range(ch.n_inputs))
    assert np.array_equal(low, ref * (1.0 - 2.1 * (w + 6.0) * U._U))
    row = U._scan_lower(ch, EPS, H, [1])  # one row's pairs: never above every row's
    assert np.all(row <= low)


def test_a_spec_check_computes_the_fast_bound_once(tmp_path, monkeypatch):
    # the fast bound does not prove this claim (it is the tight bound), so the pair scan decides
    ch = discrete_gaussian(sigma=2.0, domain=(0, 12))
    up = float(ch.delta_star_upper(1.0, 2))
    assert float(ch.delta_star_upper_fast(1.0, 2)) > up
    calls = []
    real = U._fast_upper_eval
    monkeypatch.setattr(U, "_fast_upper_eval", lambda *a: calls.append(1) or real(*a))
    path = tmp_path / "dg.json"
    path.write_text(json.dumps({**spec_from_channel(ch).to_dict(), "eps": 1.0, "H": 2, "delta_star": up}))
    assert load_spec(path).guarantee.delta == up
    assert len(calls) == 1
    path.write_text(json.dumps({**spec_from_channel(ch).to_dict(), "eps": 1.0, "H": 2, "delta": up / 2}))
    shown = re.escape(format_upper(up, 6))  # the recomputed bound is printed rounded up
    with pytest.raises(ValueError, match=r"recorded target delta = .* does not hold: .* = " + shown):
        load_spec(path)
    assert len(calls) == 2


def test_the_kept_fast_bound_is_handed_out_as_a_copy_and_keyed_by_range_and_eps():
    ch = FAMILIES["geometric-clamp"].constructor(lam=0.7, domain=(0, 9))
    eps = np.array([0.2, 0.5])
    first = U._fast_upper(ch, eps, 3)
    first[:] = -1.0  # _delta_star_upper writes into what it gets
    peaks = []
    again = U._fast_upper(ch, eps, 3, peaks)
    fresh, rows = U._fast_upper_eval(ch, eps, 3)
    assert np.array_equal(again, fresh) and peaks == rows and len(rows) == 2
    # another range or another eps is not served the kept one
    for e, H in ((eps, 1), (eps + 1.0, 3)):
        assert np.array_equal(U._fast_upper(ch, e, H), U._fast_upper_eval(ch, e, H)[0])
        assert not np.array_equal(U._fast_upper_eval(ch, e, H)[0], fresh)
