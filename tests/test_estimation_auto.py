"""method="auto": cross-validated choice of regularization (sparseldp.estimation.auto).

Deterministic for given counts; an exact split of the counts into folds; little
smoothing on a point mass, more on a smooth truth (well below the MLE's error);
max_iter respected.  Seeded simulations only; each case is a single fit on
k = 40 values, a fraction of a second.
"""

import warnings

import numpy as np
import pytest

from sparseldp import SparseLaplace
from sparseldp.estimation import ConvergenceWarning, ReportCounts, _path, estimate_frequencies
from sparseldp.estimation.auto import _FOLDS, _split
from sparseldp.sampling import sample

K = 40
MECH = SparseLaplace(lam=0.3, s=61)  # window wider than the domain: the MLE overfits smooth truths


def _reports(pop, n, seed):
    gen = np.random.default_rng(seed)
    counts = gen.multinomial(n, pop)
    return sample(MECH, np.repeat(np.arange(K), counts), rng=gen), counts / n


def _tv(p, q):
    return 0.5 * float(np.abs(np.asarray(p) - q).sum())


def _smooth_pop():
    x = np.arange(K)
    w = np.exp(-0.5 * ((x - 15) / 6.0) ** 2)
    return w / w.sum()


def test_split_is_exact_and_deterministic():
    c = np.array([0, 5, 17, 1, 0, 240, 3], dtype=float)
    a, b = _split(c, _FOLDS), _split(c, _FOLDS)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a.sum(axis=1), c)
    sizes = a.sum(axis=0)
    assert sizes.max() - sizes.min() <= 1 and np.all(a >= 0)


def test_deterministic_for_given_counts():
    y, _ = _reports(_smooth_pop(), 20_000, 1)
    a = estimate_frequencies(y, MECH, domain=(0, K - 1), method="auto", return_info=True)
    rc = ReportCounts.from_reports(y)
    b = estimate_frequencies(rc, MECH, domain=(0, K - 1), method="auto", return_info=True)
    assert a.method == "auto" and a.regularization == b.regularization
    np.testing.assert_array_equal(a.p, b.p)
    assert a.n == 20_000 and abs(a.p.sum() - 1.0) < 1e-12 and np.all(a.p >= 0)


def test_point_mass_gets_little_smoothing():
    pop = np.zeros(K)
    pop[17] = 1.0
    y, truth = _reports(pop, 20_000, 2)
    est = estimate_frequencies(y, MECH, domain=(0, K - 1), method="auto", return_info=True)
    assert not est.regularization.startswith("ems"), est.regularization
    assert _tv(est.p, truth) < 0.1


def test_choose_takes_the_mle_when_it_is_within_one_se_and_as_stable():
    from sparseldp.estimation.auto import _STABLE_RATIO, _choose

    rng = np.random.default_rng(0)
    base = rng.normal(size=(50, _FOLDS))
    H = np.full((50, _FOLDS), 20.0)
    wobble = rng.normal(size=base.shape)
    scores = {("ems", 0.25): base - 1.0,  # far below: outside one SE
              ("stop", 1): base,  # the best (ties go to the more regularized)
              ("mle", 0): base + 1e-3 * (wobble - wobble.mean())}  # the same total: within one SE
    stop, mle = ("stop", 1), ("mle", 0)
    assert _choose(scores, H) == stop  # no spreads: the one-SE rule alone
    assert _choose(scores, H, spreads={stop: 0.1, mle: 0.1 * _STABLE_RATIO}) == mle
    assert _choose(scores, H, spreads={stop: 0.1, mle: 0.101 * _STABLE_RATIO}) == stop
    # an MLE outside one SE is never taken, however stable
    scores[mle] = base - 0.5
    assert _choose(scores, H, spreads={stop: 0.1, mle: 0.0}) == stop


def _tied_with_the_mle(member, seed: int):
    """Held-out scores (and counts) where ``member`` and the MLE have the same total: the MLE within the slack."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(50, _FOLDS))
    wobble = rng.normal(size=base.shape)
    mle = ("mle", 0)
    return {member: base, mle: base + 1e-3 * (wobble - wobble.mean())}, np.full((50, _FOLDS), 20.0), mle


@pytest.mark.parametrize("member", [("stop", 1), ("flow", 3), ("time", 2)])
def test_choose_allows_a_wider_spread_ratio_against_a_flow_member(member):
    # the MLE replaces a chosen flow member (the EM continued past its cap, whose limit the MLE is) up to
    # _STABLE_RATIO_FLOW times its fold spread, any other member up to _STABLE_RATIO times
    from sparseldp.estimation.auto import _STABLE_RATIO, _STABLE_RATIO_FLOW, _choose

    scores, H, mle = _tied_with_the_mle(member, 1)
    ratio = _STABLE_RATIO_FLOW if member[0] in ("flow", "time") else _STABLE_RATIO
    assert _STABLE_RATIO < 0.5 * _STABLE_RATIO_FLOW  # the two cases below differ
    mid = 0.5 * (_STABLE_RATIO + _STABLE_RATIO_FLOW)  # between the two ratios
    d = 0.04  # the member's spread: the MLE's below _AMBIGUOUS_TV at every ratio tried
    assert _choose(scores, H, spreads={member: d, mle: d * mid}) == (mle if member[0] in ("flow", "time")
                                                                  else member)
    assert _choose(scores, H, spreads={member: d, mle: d * ratio}) == mle
    assert _choose(scores, H, spreads={member: d, mle: 1.01 * d * ratio}) == member


@pytest.mark.parametrize("member", [("stop", 1), ("flow", 3)])
def test_choose_keeps_its_member_where_the_mle_itself_is_unstable(member):
    # an MLE whose fold fits lie _AMBIGUOUS_TV apart or more is noise the reports do not fix: it does not replace
    # the choice, whatever the ratio of the spreads (a bimodal truth under the Gaussian kernel of (2, 1e-6, 20)
    # took the MLE at fold spread 0.77, TV 0.93, against the flow member's 0.135 and 0.32)
    from sparseldp.estimation.auto import _AMBIGUOUS_TV, _choose

    scores, H, mle = _tied_with_the_mle(member, 2)
    below, at = 0.999 * _AMBIGUOUS_TV, _AMBIGUOUS_TV
    assert _choose(scores, H, spreads={member: below, mle: below}) == mle
    assert _choose(scores, H, spreads={member: at, mle: at}) == member
    assert _choose(scores, H, spreads={member: 0.9, mle: 0.5}) == member  # more stable than the member, still noise


def test_point_mass_takes_the_mle_when_regularization_buys_no_stability(monkeypatch):
    # on this draw the one-SE rule stops EM after 848 steps (TV 0.10); the MLE is within one SE and
    # no less stable over the folds, and is the point mass to TV 0.02
    from sparseldp.estimation import auto

    pop = np.zeros(K)
    pop[17] = 1.0
    y, truth = _reports(pop, 20_000, 5)
    est = estimate_frequencies(y, MECH, domain=(0, K - 1), method="auto", return_info=True)
    monkeypatch.setattr(auto, "_STABLE_RATIO", 0.0)
    one_se = estimate_frequencies(y, MECH, domain=(0, K - 1), method="auto", return_info=True)
    assert est.regularization == "em mle" and one_se.regularization.startswith("em steps=")
    assert _tv(est.p, truth) < 0.5 * _tv(one_se.p, truth)


def test_smooth_truth_gets_regularized():
    y, truth = _reports(_smooth_pop(), 20_000, 3)
    auto = estimate_frequencies(y, MECH, domain=(0, K - 1), method="auto", return_info=True)
    mle = estimate_frequencies(y, MECH, domain=(0, K - 1), method="em")
    assert auto.regularization != "em mle"
    assert _tv(auto.p, truth) < 0.5 * _tv(mle, truth)


def test_respects_max_iter():
    y, _ = _reports(_smooth_pop(), 5_000, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = estimate_frequencies(y, MECH, domain=(0, K - 1), method="auto", max_iter=20, return_info=True)
    assert est.iterations <= 20
    if est.regularization.startswith("em steps="):
        assert int(est.regularization.split("=")[1].split()[0]) <= 20  # "em steps=t" or "em steps=t atoms=..."
    # a refit cut short by the budget says so, and only then
    warned = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert bool(warned) == (not est.converged), (est.regularization, est.converged, [str(w.message) for w in warned])


def test_few_reports_fall_back_to_mle():
    est = estimate_frequencies([3, 5, 7], MECH, domain=(0, K - 1), method="auto", return_info=True)
    assert est.regularization == "em mle" and est.method == "auto"


def test_other_methods_record_no_regularization():
    y, _ = _reports(_smooth_pop(), 1_000, 5)
    assert estimate_frequencies(y, MECH, domain=(0, K - 1), method="ems", return_info=True).regularization is None
    with pytest.raises(ValueError, match="smooth applies to method='ems' only"):
        estimate_frequencies(y, MECH, domain=(0, K - 1), method="auto", smooth=2)


def _counts(mech, k, pop, n, seed):
    from sparseldp.estimation import _model

    model = _model(mech, (0, k - 1))
    q = np.maximum(np.asarray(model.unscaled().T @ pop).ravel(), 0.0)
    rc = ReportCounts(int(model.outputs[0]), np.random.default_rng(seed).multinomial(n, q / q.sum()))
    return model, model.counts_of(rc, False)


@pytest.mark.parametrize("shape, turned", [("bumps", True), ("point", False)])
def test_mle_left_off_the_selection_once_the_em_path_turns_down(monkeypatch, shape, turned):
    # Laplace, 200 values, window 137: on two bumps the held-out likelihood falls from 4 to 8 times
    # the discrepancy stop (the EM path is past its best) and the MLE, its limit, is not fitted; on a
    # point mass it keeps rising and the MLE is on the path.  With the test switched off (an infinite
    # margin) the MLE is always fitted.
    from sparseldp.estimation import auto

    k = 200
    x = np.arange(k)
    if shape == "bumps":
        pop = np.exp(-0.5 * ((x - 80) / 20) ** 2) + 0.5 * np.exp(-0.5 * ((x - 160) / 6) ** 2)
    else:
        pop = (x == 66).astype(float)
    model, c = _counts(SparseLaplace(lam=0.2, s=137), k, pop / pop.sum(), 10**5, 1)
    scores, H, _, _, _ = auto._select(model, c, 2_000)
    assert (("mle", 0) not in scores) == turned
    # flow: on cheap dense channels only; time: where every fold's EM reaches the (full) cap; the classical
    # stop: where every fold reaches it within the run; atoms: with the MLE, where it has atoms on every fold
    assert set(scores) >= {key for key in auto._PATH if key[0] not in ("mle", "flow", "time", "classic", "atoms")}
    assert (("atoms", 1) in scores) == (shape == "point")
    monkeypatch.setattr(auto, "_TURN_SE", np.inf)
    assert ("mle", 0) in auto._select(model, c, 2_000)[0]


def test_select_tol_is_one_over_n_between_its_bounds():
    assert _path._select_tol(np.full(5, 800.0)) == _path._SELECT_TOL_MAX
    assert _path._select_tol(np.array([4e4, 5e4])) == pytest.approx(1 / 4e4)
    assert _path._select_tol(np.full(5, 8e7)) == _path._SELECT_TOL


@pytest.mark.parametrize("n, tol", [(2_000, 1e-5), (10**5, 1e-5), (4 * 10**5, 2.5e-6), (10**7, 1e-6)])
def test_chosen_ems_member_is_refit_to_the_folds_distance_at_most_1e_5(monkeypatch, n, tol):
    """The chosen EMS member's fit on all counts stops where the fold fits stopped (1 / n within
    [1e-6, 1e-4]) and at most 1e-5 from its fixed point (the bootstrap refits'), not at method="ems"'s
    1e-8, which slow contractions do not reach in 50,000 evaluations."""
    from sparseldp.estimation import auto, frequencies

    assert auto._ems_refit_tol(n) == pytest.approx(tol)
    y, _ = _reports(_smooth_pop(), 20_000, 3)
    seen = []
    real = frequencies._fit

    def recorded(model, c_all, method, tol, *rest):
        seen.append((method, tol))
        return real(model, c_all, method, tol, *rest)

    monkeypatch.setattr(frequencies, "_fit", recorded)
    est = estimate_frequencies(y, MECH, domain=(0, K - 1), method="auto", return_info=True)
    assert est.regularization == "ems smooth=1"
    assert seen == [("ems", auto._ems_refit_tol(20_000))] and est.converged


def test_ems_fold_fits_stop_at_one_over_n_and_score_alike(monkeypatch):
    """At 10^4 reports the EMS fold fits stop at a TV distance of 1e-4 from their fixed points instead
    of 1e-6: fewer evaluations, and held-out totals within 0.05 nats of the strict fits' (the rule's
    slack is at least one nat)."""
    from sparseldp.estimation import auto

    k = 200
    x = np.arange(k)
    pop = np.exp(-0.5 * ((x - 80) / 20) ** 2) + 0.5 * np.exp(-0.5 * ((x - 160) / 6) ** 2)
    model, c = _counts(SparseLaplace(lam=0.05, s=181), k, pop / pop.sum(), 10**4, 3)
    obs = np.flatnonzero(c > 0)
    H = _split(c[obs], _FOLDS).astype(float)
    C = H.sum(axis=1, keepdims=True) - H
    A, AT = model.fast_columns(obs)

    real = _path._ems_fixed

    def ems_path():
        evals = []

        def counted(*args):
            out = real(*args)
            evals.append(out[1])
            return out

        monkeypatch.setattr(_path, "_ems_fixed", counted)
        fits, _ = auto._regularized_fits(model, obs, C, 50_000, A, AT)
        return {key: float((H * auto._logq(AT, P)).sum()) for key, P in fits.items() if key[0] == "ems"}, sum(evals)

    loose, evals_loose = ems_path()
    monkeypatch.setattr(_path, "_SELECT_TOL_MAX", _path._SELECT_TOL)
    strict, evals_strict = ems_path()
    assert evals_loose < 0.9 * evals_strict
    for key in strict:
        assert abs(loose[key] - strict[key]) < 0.05


def test_choose_grants_at_least_one_nat_of_slack():
    # a regularized member 0.5 nats below the best in all, with a standard error of its difference far
    # smaller (members next to each other on the path predict the reports alike): within the slack of
    # _SLACK_NATS = 1, outside one SE; 1.5 nats below: outside both
    from sparseldp.estimation.auto import _SLACK_NATS, _choose, _diff_se

    assert _SLACK_NATS == 1.0
    rng = np.random.default_rng(2)
    base = rng.normal(size=(50, _FOLDS))
    H = np.full((50, _FOLDS), 20.0)
    wobble = rng.normal(size=base.shape)
    for below, chosen in ((0.5, ("stop", 1)), (1.5, ("stop", 8))):
        D = 1e-4 * (wobble - wobble.mean()) - below / H.sum()  # total -below, se about 0.007
        scores = {("stop", 1): base + D, ("stop", 8): base}
        diff, se = _diff_se(scores, ("stop", 1), ("stop", 8), H)
        assert diff == pytest.approx(-below) and se < 0.05
        assert _choose(scores, H) == chosen
        assert _choose(scores, H, nats=0.0) == ("stop", 8)  # the one-SE rule alone


def test_the_one_nat_slack_keeps_the_smooth_member_where_the_se_is_tiny():
    # the battery's case "smooth k=20 n=1e4 gaussian eps=2 H=20" (bench_estimators, seed 1164): a Gaussian
    # window of 751 over 20 values; along the EM path the held-out log-likelihood creeps up by fractions
    # of a nat with standard errors smaller still, so one SE alone walks to the end of the flow (TV 0.67);
    # within one nat plain EM (at its discrepancy stop or at the cap) is taken (TV 0.12)
    from sparseldp import SparseGaussian
    from sparseldp.estimation import _model
    from sparseldp.estimation.auto import _choose, _select

    mech = SparseGaussian(sigma=44.60781989998324, s=751)
    x = np.arange(20.0)
    pop = np.exp(-0.5 * ((x - 8.0) / 2.4) ** 2)
    pop /= pop.sum()
    gen = np.random.default_rng(1164)
    counts = gen.multinomial(10**4, pop)
    y = sample(mech, np.repeat(np.arange(20), counts), rng=gen)
    est = estimate_frequencies(y, mech, domain=(0, 19), return_info=True)
    assert _tv(est.p, counts / 1e4) < 0.2, est.regularization
    model = _model(mech, (0, 19))
    scores, H, _, spreads, _ = _select(model, model.counts_of(y, False), 50_000)  # estimate_frequencies' max_iter
    choice = _choose(scores, H, spreads=spreads)
    assert choice[0] in ("stop", "classic") or choice == ("flow", 0)  # plain EM, stopped or at the cap
    assert _choose(scores, H, spreads=spreads, nats=0.0)[0] in ("flow", "mle")


def test_the_ems_path_and_the_stopped_em_side_by_side_are_the_same_fits(monkeypatch):
    """_path._regularized_fits runs its EMS path and its stopped EM in two threads on large sparse channels
    (_parallel.concurrently): the same estimate, bit for bit, as one after the other."""
    from sparseldp.estimation import _model, _parallel, estimate_frequencies_full

    mech, k = SparseLaplace(lam=0.1, s=275), 1000
    model = _model(mech, (0, k - 1))
    assert not model.dense
    x = np.arange(k)
    p = np.exp(-0.5 * ((x - 400) / 60.0) ** 2) + 0.5 * np.exp(-0.5 * ((x - 700) / 20.0) ** 2)
    q = np.maximum(np.asarray(model.unscaled().T @ (p / p.sum())).ravel(), 0.0)
    rc = ReportCounts(int(model.outputs[0]), np.random.default_rng(2).multinomial(10**6, q / q.sum()))
    fits, calls = {}, []
    real = _path.concurrently
    monkeypatch.setattr(_path, "concurrently", lambda *fns: calls.append(len(fns)) or real(*fns))
    for side in (True, False):
        monkeypatch.setattr(_parallel, "SIDE_BY_SIDE_K", 0 if side else 10**9)
        fits[side] = estimate_frequencies_full(rc, mech, domain=(0, k - 1))
        assert bool(calls) == side  # the side-by-side run went through concurrently, the other did not
        calls.clear()
    assert fits[True].regularization == fits[False].regularization
    np.testing.assert_array_equal(fits[True].p, fits[False].p)


def test_concurrently_keeps_the_order_and_raises():
    from sparseldp.estimation._parallel import concurrently

    assert concurrently(lambda: 1, lambda: 2, lambda: 3) == [1, 2, 3]
    assert concurrently() == []

    def boom():
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        concurrently(lambda: 1, boom)


def test_selection_tv_is_how_far_apart_the_members_held_out_likelihood_cannot_tell_apart_lie():
    """auto records the largest TV distance from its choice to a member within the rule's slack of the
    best (each as its mean fold fit): recomputed here from _select's own outputs; None for the fixed
    methods and where nothing is held out; larger where the kernel is wide and the reports few (a heap
    over a smooth bump under a Laplace window of 61 on 40 values, 10^4 reports) than where it is narrow
    and the reports many (a window of 7, 10^5 reports)."""
    from sparseldp.estimation import _model
    from sparseldp.estimation.auto import _PATH, _choose, _diff_se, _select

    k = 40
    pop = np.exp(-0.5 * ((np.arange(k) - 15) / 6.0) ** 2)
    pop = 0.55 * pop / pop.sum()
    pop[22] += 0.45
    got = {}
    for mech, n in ((SparseLaplace(lam=1.0, s=7), 10**5), (MECH, 10**4)):
        gen = np.random.default_rng(3)
        y = sample(mech, gen.choice(k, size=n, p=pop), rng=gen)
        est = estimate_frequencies(y, mech, domain=(0, k - 1), return_info=True)
        model = _model(mech, (0, k - 1))
        scores, H, _, spreads, centres = _select(model, model.counts_of(y, False), 50_000)
        choice = _choose(scores, H, spreads=spreads)
        keys = [key for key in _PATH if key in scores]
        best = max(keys, key=lambda key: float((H * scores[key]).sum()))
        near = [key for key in keys if _diff_se(scores, key, best, H)[0] >= -max(_diff_se(scores, key, best, H)[1], 1.0)]
        want = max(0.5 * np.abs(centres[key] - centres[choice]).sum() for key in near)
        assert est.selection_tv == pytest.approx(want, abs=1e-12) and 0.0 <= est.selection_tv <= 1.0
        got[mech.s] = est.selection_tv
        assert estimate_frequencies(y, mech, domain=(0, k - 1), method="em", return_info=True).selection_tv is None
    assert got[7] < 0.05 < 0.3 < got[61]
    few = estimate_frequencies(np.array([3, 5, 7]), MECH, domain=(0, k - 1), return_info=True)
    assert few.method == "auto" and few.regularization == "em mle" and few.selection_tv is None


def test_bootstrap_warns_where_the_reports_do_not_fix_the_shape():
    """bootstrap() warns (ShapeWarning) where auto's selection_tv is at least 0.3: its intervals of local
    statistics then describe the chosen shape, not the truth's.  Not below 0.3, not for the fixed methods,
    not with robust=True (the hull with the MLE's is the advice)."""
    import dataclasses

    from sparseldp.estimation import ShapeWarning

    y, _ = _reports(_smooth_pop(), 2_000, seed=5)
    est = estimate_frequencies(y, MECH, domain=(0, K - 1), return_info=True)
    for tv, warned in ((0.29, False), (0.3, True), (None, False)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dataclasses.replace(est, selection_tv=tv).bootstrap(MECH, B=10, rng=1)
        shape = [w for w in caught if issubclass(w.category, ShapeWarning)]
        assert bool(shape) == warned, (tv, [str(w.message) for w in caught])
    assert "selection_tv" in str(shape[0].message) if shape else True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataclasses.replace(est, selection_tv=0.5).bootstrap(MECH, B=10, rng=1, robust=True)
    assert not [w for w in caught if issubclass(w.category, ShapeWarning)]
    # a hand-built estimate's selection_tv is checked like its other fields: a TV distance in [0, 1]
    for bad, exc in (("0.5", TypeError), (True, TypeError), (1.5, ValueError), (-0.1, ValueError),
                     (float("nan"), ValueError)):
        with pytest.raises(exc, match=r"selection_tv must be a real number in \[0, 1\]; got"):
            dataclasses.replace(est, selection_tv=bad)
