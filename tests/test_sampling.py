"""Samplers: exact realized distribution, statistical correctness, certificates.

Statistical tests state their false-positive rate: every chi-square test below
rejects a correct sampler with probability at most 1e-6 (critical value
``scipy.stats.chi2.isf(1e-6, df)``, expected counts >= 5 after merging
neighbouring bins).  Seeded cases are deterministic; the secure-source cases
(fresh OS randomness) can fail spuriously with probability <= 1e-6 each.
"""

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from sparseldp import SparseGaussian, SparseLaplace
from sparseldp import sampling as S
from sparseldp._rng import BitSource, SeededBitSource, SystemBitSource, as_bit_source, simulation_generator

TWO64 = 1 << 64
ALPHA = 1e-6  # false-positive rate of every chi-square test
N = 200_000  # samples per chi-square case

# (kind, parameter, s): both families, s from 1 to 201, tiny to large kernels
TABLE = [
    ("laplace", 0.5, 1),
    ("laplace", 1e-3, 3),
    ("laplace", 1e-3, 201),
    ("laplace", 0.05, 21),
    ("laplace", 0.5, 7),
    ("laplace", 1.0, 41),
    ("laplace", 5.0, 201),
    ("laplace", 20.0, 5),
    ("laplace", 20.0, 201),
    ("gaussian", 0.05, 3),
    ("gaussian", 0.05, 201),
    ("gaussian", 0.5, 11),
    ("gaussian", 1.5, 7),
    ("gaussian", 3.0, 21),
    ("gaussian", 10.0, 61),
    ("gaussian", 50.0, 201),
    ("gaussian", 1e3, 201),
    ("gaussian", 1e3, 1),
]
SOURCES = ["seeded", "secure"]


def make(kind, param, s):
    return SparseLaplace(lam=param, s=s) if kind == "laplace" else SparseGaussian(sigma=param, s=s)


def _ids(r):
    return f"{r[0]}-{r[1]:g}-{r[2]}"


def rng_for(source, seed):
    return seed if source == "seeded" else None


# ---------------------------------------------------------------------------
# chi-square machinery
# ---------------------------------------------------------------------------
def merged_bins(expected):
    """Group consecutive bins so every group has expected count >= 5 (tails merged inward)."""
    groups, cur, acc = [], [], 0.0
    for k, e in enumerate(expected):
        cur.append(k)
        acc += e
        if acc >= 5.0:
            groups.append(cur)
            cur, acc = [], 0.0
    if cur:
        if groups:
            groups[-1].extend(cur)
        else:
            groups.append(cur)
    return groups


def chi_square(observed, probs, n):
    """``(statistic, df)`` over merged bins; df = 0 means one bin (nothing to test)."""
    expected = n * np.asarray(probs, dtype=float)
    groups = merged_bins(expected)
    o = np.array([observed[g].sum() for g in groups], dtype=float)
    e = np.array([expected[g].sum() for g in groups])
    return float(((o - e) ** 2 / e).sum()), len(groups) - 1


def realized_floats(m):
    return np.array([float(p) for p in m.sampling_pmf(0)[1]])


# ---------------------------------------------------------------------------
# the battery: one table, both bit sources
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("row", TABLE, ids=_ids)
def test_chi_square_against_realized_pmf(row, source):
    kind, param, s = row
    m = make(kind, param, s)
    t = m.t
    x = np.random.default_rng(99).integers(-1000, 1000, N)
    y = m.sample(x, rng=rng_for(source, 12345 + s))
    assert y.dtype == np.int64 and y.shape == x.shape
    off = y - x
    assert off.min() >= -t and off.max() <= t
    observed = np.bincount(off + t, minlength=s)
    stat, df = chi_square(observed, realized_floats(m), N)
    if df == 0:
        # everything expected in one merged bin: e.g. s = 1 (deterministic) or all
        # mass at the centre; only the support check above applies
        return
    assert stat < stats.chi2.isf(ALPHA, df), (stat, df)


def test_chi_square_table_size():
    """The battery has the advertised size (documented in the report and README)."""
    assert len(TABLE) * len(SOURCES) == 36
    assert {r[0] for r in TABLE} == {"laplace", "gaussian"}
    assert min(r[2] for r in TABLE) == 1 and max(r[2] for r in TABLE) == 201


# ---------------------------------------------------------------------------
# the realized pmf
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("row", TABLE, ids=_ids)
def test_sampling_pmf_exact(row):
    kind, param, s = row
    m = make(kind, param, s)
    offsets, probs = m.sampling_pmf(0)
    assert offsets.dtype == np.int64
    np.testing.assert_array_equal(offsets, np.arange(-m.t, m.t + 1))
    assert all(isinstance(p, Fraction) for p in probs)
    assert sum(probs) == 1
    for p in probs:
        d = p.denominator
        assert d & (d - 1) == 0 and d <= TWO64  # power of two
        assert p >= Fraction(1, TWO64)  # every window point keeps mass
    assert probs == probs[::-1]  # symmetric: reflection argument holds


@pytest.mark.parametrize("row", TABLE, ids=_ids)
def test_quantization_close_to_ideal(row):
    """|c_k - 2^64 p_k| <= 1 except where p_k < 2^-64 was raised; p_k by mpmath (independent)."""
    kind, param, s = row
    m = make(kind, param, s)
    t = m.t
    with mpmath.workdps(50):
        k = [mpmath.mpf(j) for j in range(-t, t + 1)]
        if kind == "laplace":
            w = [mpmath.exp(-mpmath.mpf(param) * abs(j)) for j in k]
        else:
            w = [mpmath.exp(-(j * j) / (2 * mpmath.mpf(param) ** 2)) for j in k]
        z = mpmath.fsum(w)
        ideal = [wi / z * TWO64 for wi in w]
        counts = [int(p * TWO64) for p in m.sampling_pmf(0)[1]]
        floored = 0
        for c, r in zip(counts, ideal):
            if r < 1:
                assert c == 1 or (s == 1)
                floored += 1
            elif floored == 0:
                assert abs(c - r) <= 1 + 1e-9, (c, r)
        if floored == 0:
            tab = S.sampling_tables(m)
            assert tab.max_pmf_error <= 2.0**-64 * 1.000001
        # the centre absorbs the floored tails: its error is at most their number
        centre_err = abs(counts[t] - ideal[t])
        assert centre_err <= floored + 1 + 1e-9


# ---------------------------------------------------------------------------
# the sampling function is exactly the inverse CDF on integer thresholds
# ---------------------------------------------------------------------------
EXACT = [
    ("laplace", 0.5, 1),
    ("laplace", 0.5, 21),
    ("laplace", 1e-3, 301),  # t > 126: int16 guide; thresholds in many buckets
    ("gaussian", 0.05, 9),  # almost all mass in one bucket range
    ("gaussian", 300.0, 2001),
]


@pytest.mark.parametrize("row", EXACT, ids=_ids)
def test_offsets_are_the_integer_inverse_cdf(row):
    m = make(*row)
    tab = S.sampling_tables(m)
    T = tab.thresholds
    t = tab.t
    edges = [0, TWO64 - 1]
    for b in range(0, 1 << 16, 97):
        edges += [b << 48, ((b + 1) << 48) - 1]
    for thr in T.tolist():
        edges += [thr - 1, thr, min(thr + 1, TWO64 - 1)]
    u = np.concatenate([np.array(edges, dtype=np.uint64),
                        np.random.default_rng(0).integers(0, TWO64, 50_000, dtype=np.uint64)])
    got = S.offset_of_words(m, u)
    want = np.searchsorted(T, u, side="right").astype(np.int64) - t
    np.testing.assert_array_equal(got, want)
    # inverse CDF of the counts: word u gives offset j - t iff T_{j-1} <= u < T_j, so the
    # offset k is hit by exactly c_k of the 2^64 words
    if t:
        lo = [0] + T.tolist()
        hi = T.tolist() + [TWO64]
        assert [b - a for a, b in zip(lo, hi)] == list(tab.counts)


class RecordingSource(BitSource):
    """Seeded words, remembering every request (to replay the sampler's bit use)."""

    def __init__(self, seed):
        self.gen = np.random.default_rng(seed)
        self.calls = []

    def words(self, n):
        w = self.gen.integers(0, TWO64, n, dtype=np.uint64, endpoint=False)
        self.calls.append(w)
        return w


@pytest.mark.parametrize("row", EXACT, ids=_ids)
def test_sampler_draws_uniform_words_lazily(row):
    """Each draw is u = (16 bits from a shared word) << 48 | (48 bits of an extra word if needed),
    mapped by offset_of_words: the sample equals that map applied to the replayed words."""
    m = make(*row)
    n = 70_001  # two chunks, a partial word at the end
    src = RecordingSource(1)
    y = m.sample(np.zeros(n, dtype=np.int64), rng=src)
    tab = S.sampling_tables(m)
    expect = np.empty(n, dtype=np.int64)
    calls = iter(src.calls)
    for start in range(0, n, S._CHUNK):
        k = min(S._CHUNK, n - start)
        top = next(calls).view(np.uint16)[:k].astype(np.uint64)
        guess = tab.guide[top.astype(np.intp)]
        bad = np.flatnonzero(guess == tab.sentinel) if tab.t else []
        u = top << np.uint64(48)
        if tab.n_ambiguous:
            # always exactly F extra words, whatever the number of ambiguous draws
            extra = next(calls)
            assert extra.size == S._fixup_slots(tab.n_ambiguous, k) >= len(bad)
            u[bad] |= extra[: len(bad)] >> np.uint64(16)
        # words outside ambiguous buckets: any low bits give the same offset
        expect[start:start + k] = S.offset_of_words(m, u)
    assert next(calls, None) is None
    np.testing.assert_array_equal(y, expect)


@pytest.mark.parametrize("row", EXACT, ids=_ids)
def test_random_bytes_requested_do_not_depend_on_the_draws(row):
    """Timing side channel: the words requested (count and sizes) are the same for every seed."""
    m = make(*row)
    patterns = set()
    for seed in range(30):
        src = RecordingSource(seed)
        m.sample(np.zeros(1, dtype=np.int64), rng=src)  # one privatized value
        m.sample(np.zeros(70_001, dtype=np.int64), rng=src)
        patterns.add(tuple(w.size for w in src.calls))
    assert len(patterns) == 1


def test_fixup_slots_bound():
    assert S._fixup_slots(0, 65536) >= 0
    assert S._fixup_slots(20, 1) == 1
    # the bound holds: Binomial(m, p) tail beyond F is <= 2^-64
    for n_amb, m in [(20, 65536), (200, 65536), (3000, 65536), (20, 1000)]:
        F = S._fixup_slots(n_amb, m)
        assert F <= m
        if F < m:
            assert stats.binom.sf(F, m, n_amb / 65536) <= 2.0**-64


# ---------------------------------------------------------------------------
# certificates
# ---------------------------------------------------------------------------
def exp_bracket(eps):
    """Rationals lo <= e^eps <= hi (mpmath at 60 digits, widened by 1e-50 relative)."""
    with mpmath.workdps(60):
        v = mpmath.exp(mpmath.mpf(eps))
        man, exp = mpmath.mpf(v).man_exp
        f = Fraction(int(man)) * Fraction(2) ** int(exp)
    return f * (1 - Fraction(1, 10**50)), f * (1 + Fraction(1, 10**50))


def hockey(p_counts, q_counts, ell):
    """``sum [p - ell q]_+`` in exact rationals (counts are integers)."""
    num, den = ell.numerator, ell.denominator
    tot = sum(max(pc * den - num * qc, 0) for pc, qc in zip(p_counts, q_counts))
    return Fraction(tot, den)


def realized_delta_bracket(m, eps, H):
    """Exact-arithmetic bracket of the realized delta*(eps; H), by brute force over h."""
    counts = [int(p * TWO64) for p in m.sampling_pmf(0)[1]]
    s = len(counts)
    lo_e, hi_e = exp_bracket(eps)
    best_hi = best_lo = Fraction(0)
    for h in range(1, H + 1):
        if h > s - 1:
            best_hi = best_lo = Fraction(1)
            break
        p = counts + [0] * h  # row of input 0 on offsets -t .. t + h
        q = [0] * h + counts  # row of input h
        best_hi = max(best_hi, hockey(p, q, lo_e) / TWO64)
        best_lo = max(best_lo, hockey(p, q, hi_e) / TWO64)
    return best_lo, best_hi


CERT = [
    ("laplace", 0.5, 7),
    ("laplace", 20.0, 11),
    ("laplace", 1e-3, 41),
    ("laplace", 5.0, 21),
    ("gaussian", 0.05, 9),
    ("gaussian", 1.5, 21),
    ("gaussian", 1e3, 41),
    ("gaussian", 0.5, 1),
]


@pytest.mark.parametrize("row", CERT, ids=_ids)
@pytest.mark.parametrize("eps", [0.0, 0.3, 1.0, 5.0, 60.0])
def test_certify_brackets_the_exact_realized_delta(row, eps):
    m = make(*row)
    for H in sorted({1, 2, max(1, m.t), 2 * m.t, 2 * m.t + 1} - {0}):
        c = m.certify(eps, H)
        lo, hi = realized_delta_bracket(m, eps, H)
        assert Fraction(c.delta_star_upper) >= hi  # never below the realized value
        assert Fraction(c.delta_star_lower) <= lo
        assert c.delta_star_upper - float(hi) <= 1e-15  # and tight
        assert float(lo) - c.delta_star_lower <= 1e-15


@given(
    kind=st.sampled_from(["laplace", "gaussian"]),
    log_param=st.floats(-3, 3),
    t=st.integers(0, 15),
    eps=st.floats(0, 8),
    H=st.integers(1, 35),
)
def test_certify_bracket_property(kind, log_param, t, eps, H):
    m = make(kind, 10.0**log_param, 2 * t + 1)
    c = m.certify(eps, H)
    lo, hi = realized_delta_bracket(m, eps, H)
    assert Fraction(c.delta_star_lower) <= lo <= hi <= Fraction(c.delta_star_upper)
    assert c.delta_star_upper - c.delta_star_lower <= 1e-15


ORDINARY = [("laplace", lam, s) for lam in (0.05, 0.5, 2.0, 5.0) for s in (3, 21, 101, 201)] + [
    ("gaussian", sig, s) for sig in (0.5, 2.0, 10.0, 50.0) for s in (3, 21, 101, 201)
]


@pytest.mark.parametrize("row", ORDINARY, ids=_ids)
def test_certify_agrees_with_delta_star_for_ordinary_parameters(row):
    m = make(*row)
    for eps in (0.1, 1.0, 3.0):
        for H in (1, 5, 20):
            c = m.certify(eps, H)
            ideal = float(m.delta_star(eps, H))
            assert c.delta_star_ideal == ideal
            assert abs(c.delta_star_upper - ideal) <= 1e-12, (eps, H, c)
            assert c.delta_star_lower <= c.delta_star_upper
            assert c.exact
            # a warning only when the ideal delta* is below what 2^-64 counts can realize
            if ideal > 1e-15:
                assert c.warning is None
            else:
                assert c.warning is not None and c.delta_star_lower >= 2.0**-64 > ideal


def test_certificate_fields_and_warning():
    c = SparseLaplace(lam=0.5, s=7).certify(1.0, 3)
    assert c.worst_pair == (0, 3) and c.eps == 1.0 and c.H == 3
    assert c.delta_star == c.delta_star_upper and c.floored == 0
    assert "exact integer counts" in c.method
    with pytest.raises(AttributeError):
        c.delta_star_upper = 0.0  # frozen
    # probabilities below 2^-64 raised to 2^-64 make the realized leakage
    # (2^-64 at h = 1) dwarf the ideal one (e^-50/C): said in the result
    w = SparseLaplace(lam=5.0, s=21).certify(10.0, 1)
    assert w.floored == 4
    assert w.delta_star_upper == 2.0**-64 == w.delta_star_lower
    assert w.delta_star_ideal < 1e-21
    assert w.warning is not None and "2^-64" in w.warning
    # disjoint windows: exactly 1
    one = SparseGaussian(sigma=2.0, s=5).certify(1.0, 5)
    assert one.delta_star_upper == 1.0 == one.delta_star_lower and one.worst_pair == (0, 5)


def test_certify_large_support_is_fast_enough_and_tight():
    m = SparseGaussian(sigma=3000.0, s=20001)
    c = m.certify(0.5, 3000)
    assert c.delta_star_lower <= c.delta_star_upper <= c.delta_star_lower + 1e-14
    assert abs(c.delta_star_upper - float(m.delta_star(0.5, 3000))) <= 1e-12


def test_certify_validates():
    m = SparseLaplace(lam=0.5, s=7)
    with pytest.raises(ValueError, match="eps"):
        m.certify(-1.0, 3)
    with pytest.raises(ValueError, match="H"):
        m.certify(1.0, 0)
    with pytest.raises(TypeError, match="H"):
        m.certify(1.0, 2.5)
    with pytest.raises(TypeError, match="mechanism"):
        S.certify("laplace", 1.0, 3)


# ---------------------------------------------------------------------------
# rng handling, shapes, validation
# ---------------------------------------------------------------------------
M = SparseLaplace(lam=0.01, s=201)


def test_seeded_is_reproducible_and_one_stream():
    x = np.arange(1000)
    assert np.array_equal(M.sample(x, rng=7), M.sample(x, rng=7))
    assert not np.array_equal(M.sample(x, rng=7), M.sample(x, rng=8))
    ss = np.random.SeedSequence(3)
    assert np.array_equal(M.sample(x, rng=np.random.SeedSequence(3)), M.sample(x, rng=ss))
    # a Generator is used as is: consecutive calls continue one stream
    g = np.random.default_rng(5)
    a, b = M.sample(x, rng=g), M.sample(x, rng=g)
    assert not np.array_equal(a, b)
    g2 = np.random.default_rng(5)
    assert np.array_equal(M.sample(x, rng=g2), a) and np.array_equal(M.sample(x, rng=g2), b)
    # a 32-bit bit generator still gives full 64-bit words
    w = as_bit_source(np.random.Generator(np.random.MT19937(1))).words(2000)
    assert w.dtype == np.uint64 and int(w.max()) >= 1 << 63 and int((w >> np.uint64(32)).min()) >= 0
    assert int((w >> np.uint64(32)).max()) > 0


def test_secure_default_differs_across_calls():
    x = np.zeros(64, dtype=np.int64)
    assert not np.array_equal(M.sample(x), M.sample(x))
    assert not np.array_equal(M.sample(x, rng=None), M.sample(x, rng=None))
    src = as_bit_source(None)
    assert isinstance(src, SystemBitSource) and src.secure
    w = src.words(10)
    assert w.dtype == np.uint64 and w.shape == (10,)
    seeded = as_bit_source(1)
    assert isinstance(seeded, SeededBitSource) and not seeded.secure
    assert as_bit_source(seeded) is seeded


@pytest.mark.parametrize(
    "bad, exc",
    [(1.5, TypeError), ("seed", TypeError), (True, TypeError), (np.random.RandomState(0), TypeError),
     ([1, 2], TypeError), (-1, ValueError)],
)
def test_bad_rng(bad, exc):
    with pytest.raises(exc, match="rng"):
        M.sample(0, rng=bad)


def test_simulation_generator():
    # simulation on privatized data: None is fresh entropy, a seed reproduces, a Generator continues its stream
    a, b = simulation_generator(None).integers(1 << 62, size=4), simulation_generator(None).integers(1 << 62, size=4)
    assert not np.array_equal(a, b)
    assert np.array_equal(simulation_generator(3).random(5), np.random.default_rng(3).random(5))
    g = np.random.default_rng(8)
    assert simulation_generator(g) is g
    assert np.array_equal(simulation_generator(np.random.SeedSequence(4)).random(3),
                          np.random.default_rng(np.random.SeedSequence(4)).random(3))
    for bad, exc in [(1.5, TypeError), ("seed", TypeError), (True, TypeError), (np.random.RandomState(0), TypeError),
                     (-1, ValueError)]:
        with pytest.raises(exc, match="rng must be"):
            simulation_generator(bad)


@pytest.mark.parametrize(
    "bad, exc",
    [
        (1.5, TypeError),
        (np.array([1.0, 2.0]), TypeError),
        (True, TypeError),
        ("3", TypeError),
        ([1, None], TypeError),
        (np.array([True]), TypeError),
        (2**70, ValueError),
        (np.array([2**64 - 1], dtype=np.uint64), ValueError),
        (np.array([2**63 - 1], dtype=np.int64), ValueError),
        (np.array([-(2**63)], dtype=np.int64), ValueError),
    ],
)
def test_bad_x(bad, exc):
    with pytest.raises(exc, match="x must be"):
        M.sample(bad, rng=1)


def test_shapes_and_dtypes():
    y = M.sample(5, rng=1)
    assert isinstance(y, np.int64) and abs(int(y) - 5) <= M.t
    y0 = M.sample(np.array(5), rng=1)
    assert np.ndim(y0) == 0 and np.asarray(y0).dtype == np.int64
    x2 = np.arange(12, dtype=np.int32).reshape(3, 4)
    y2 = M.sample(x2, rng=1)
    assert y2.shape == (3, 4) and y2.dtype == np.int64
    assert np.all(np.abs(y2 - x2) <= M.t)
    assert M.sample(np.zeros(0, dtype=np.int64), rng=1).shape == (0,)
    assert M.sample([1, 2, 3], rng=1).shape == (3,)
    assert M.sample(np.array([2**62], dtype=np.uint64), rng=1).dtype == np.int64
    # non-contiguous input, several chunks
    xs = np.arange(300_000, dtype=np.int64)[::2]
    ys = M.sample(xs, rng=2)
    assert ys.shape == xs.shape and np.all(np.abs(ys - xs) <= M.t)
    # int8 inputs near their own limits do not overflow: arithmetic is int64
    y8 = SparseLaplace(lam=0.01, s=201).sample(np.array([127, -128], dtype=np.int8), rng=3)
    assert np.all(np.abs(y8 - np.array([127, -128])) <= 100)


def test_sample_function_rejects_non_mechanisms():
    with pytest.raises(TypeError, match="mechanism"):
        S.sample(object(), 1, rng=1)
    with pytest.raises(ValueError, match=r"s must be an odd integer <= 4194305.*got 4194307"):
        SparseLaplace(lam=1.0, s=(1 << 22) + 3).sample(0, rng=1)


# ---------------------------------------------------------------------------
# finite channels (SparseChannel: extended and clipped windows)
# ---------------------------------------------------------------------------
channel_mod = pytest.importorskip("sparseldp.channel", reason="sparseldp.channel is not available")
SparseChannel = channel_mod.SparseChannel

CHANNELS = [
    ("laplace", 0.5, 7, (0, 10), "extended"),
    ("laplace", 0.5, 7, (0, 10), "clipped"),
    ("laplace", 3.0, 21, (-5, 5), "clipped"),
    ("gaussian", 1.5, 9, (3, 12), "extended"),
    ("gaussian", 0.5, 11, (0, 8), "clipped"),
    ("gaussian", 40.0, 41, (0, 30), "clipped"),
]


def make_channel(kind, param, s, domain, window):
    if kind == "laplace":
        return SparseChannel.laplace(lam=param, s=s, domain=domain, window=window)
    return SparseChannel.gaussian(sigma=param, s=s, domain=domain, window=window)


def _cids(r):
    return f"{r[0]}-{r[1]:g}-{r[2]}-{r[4]}"


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("row", CHANNELS, ids=_cids)
def test_channel_chi_square(row, source):
    """All rows in one test: independent chi-squares add (sum of stats, sum of df), rate 1e-6."""
    ch = make_channel(*row)
    inputs = np.asarray(ch.inputs)
    x = np.repeat(inputs, N // inputs.size)
    np.random.default_rng(4).shuffle(x)
    y = S.sample_channel(ch, x, rng=rng_for(source, 2024))
    assert y.shape == x.shape and y.dtype == np.int64
    total, df = 0.0, 0
    for v in inputs:
        outs, probs = S.channel_sampling_pmf(ch, int(v))
        yy = y[x == v]
        assert np.isin(yy, outs).all()  # never outside the row's support
        observed = np.array([(yy == o).sum() for o in outs])
        stat, d = chi_square(observed, [float(p) for p in probs], yy.size)
        total += stat
        df += d
    assert df > 0 and total < stats.chi2.isf(ALPHA, df), (total, df)


@pytest.mark.parametrize("row", CHANNELS, ids=_cids)
def test_channel_rows_exact(row):
    ch = make_channel(*row)
    tab = S.channel_sampling_tables(ch)
    assert S.channel_sampling_tables(ch) is tab  # cached
    for v in np.asarray(ch.inputs):
        outs, probs = tab.pmf(int(v))
        assert sum(probs) == 1 and min(probs) >= Fraction(1, TWO64)
        assert all(p.denominator & (p.denominator - 1) == 0 for p in probs)
        np.testing.assert_array_equal(outs, ch.support(int(v)))
        ideal = ch.pmf(outs, int(v))
        assert np.max(np.abs(np.array([float(p) for p in probs]) - ideal)) <= 1e-15


def channel_bracket(ch, eps, H):
    tab = S.channel_sampling_tables(ch)
    lo_e, hi_e = exp_bracket(eps)
    rows = {}
    for v in np.asarray(ch.inputs).tolist():
        outs, probs = tab.pmf(v)
        rows[v] = {int(o): int(p * TWO64) for o, p in zip(outs, probs)}
    best_lo = best_hi = Fraction(0)
    for a in rows:
        for b in rows:
            if a == b or abs(a - b) > H:
                continue
            keys = list(rows[a])
            p = [rows[a][k] for k in keys]
            q = [rows[b].get(k, 0) for k in keys]
            best_hi = max(best_hi, hockey(p, q, lo_e) / TWO64)
            best_lo = max(best_lo, hockey(p, q, hi_e) / TWO64)
    return best_lo, best_hi


@pytest.mark.parametrize("row", CHANNELS, ids=_cids)
@pytest.mark.parametrize("eps", [0.0, 1.0, 4.0])
def test_certify_channel_brackets_exact(row, eps):
    ch = make_channel(*row)
    for H in (1, 3):
        c = S.certify_channel(ch, eps, H)
        lo, hi = channel_bracket(ch, eps, H)
        assert Fraction(c.delta_star_upper) >= hi and Fraction(c.delta_star_lower) <= lo
        assert c.delta_star_upper - float(hi) <= 1e-15
        assert abs(c.delta_star_upper - float(ch.delta_star(eps, H))) <= 1e-12
        assert c.warning is None
        assert abs(c.worst_pair[0] - c.worst_pair[1]) <= H


def test_channel_noncontiguous_inputs_and_single_output_rows():
    ch = SparseChannel([[3.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 2.0]],
                       inputs=[10, -4, 7], outputs=[100, 200, 300, 400])
    x = np.array([[10, -4], [7, 7]])
    y = S.sample_channel(ch, x, rng=1)
    assert y.shape == (2, 2)
    assert y[1, 0] == 400 and y[1, 1] == 400  # single-output row: deterministic
    assert y[0, 0] in (100, 200) and y[0, 1] in (200, 300)
    assert isinstance(S.sample_channel(ch, 7, rng=1), np.int64)
    outs, probs = S.channel_sampling_pmf(ch, 7)
    assert list(outs) == [400] and probs == [Fraction(1)]
    with pytest.raises(ValueError, match="got 8"):
        S.sample_channel(ch, np.array([10, 8, 9]), rng=1)
    with pytest.raises(TypeError, match="x must be"):
        S.sample_channel(ch, 1.0, rng=1)
    big = S.sample_channel(ch, np.full(100_000, 10), rng=5)
    frac = np.mean(big == 100)
    assert abs(frac - 0.75) < 5 * np.sqrt(0.75 * 0.25 / 100_000)
    c = S.certify_channel(ch, 1.0, 20)
    lo, hi = channel_bracket(ch, 1.0, 20)
    assert Fraction(c.delta_star_upper) >= hi and Fraction(c.delta_star_lower) <= lo
    assert c.delta_star_upper == 1.0  # row 7 and row -4 have disjoint supports


def test_channel_domain_error_names_value():
    ch = make_channel("laplace", 0.5, 7, (0, 10), "clipped")
    with pytest.raises(ValueError, match=r"x must be an integer in \[0, 10\]; got 11"):
        S.sample_channel(ch, [3, 11, -1], rng=1)


def test_module_functions_dispatch_channels():
    ch = make_channel("gaussian", 1.5, 9, (3, 12), "clipped")
    y = S.sample(ch, np.array([3, 12]), rng=1)
    assert y.shape == (2,) and 3 <= y.min() and y.max() <= 12
    assert np.array_equal(y, S.sample_channel(ch, np.array([3, 12]), rng=1))
    assert S.certify(ch, 1.0, 2) == S.certify_channel(ch, 1.0, 2)
    with pytest.raises(TypeError, match="sample_channel"):
        S.sampling_pmf(ch)
