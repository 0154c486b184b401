"""Interactive speed: scalar accounting calls at function-call cost, estimate_mean on Z in O(n).

Rows (medians in this process; per-call times in microseconds in the note):

* scalar calls on one mechanism (float eps, int h / H): ``delta_h``, ``delta_h_upper``,
  ``delta_star`` and ``delta_star_upper`` (``H = 3`` at s = 21, 10 at s = 2001), ``epsilon`` -- Laplace and Gaussian at
  s = 21 and s = 2001.  Each call cycles through a few arguments (no result is cached; the
  mechanism's own constants -- normalizer, Gaussian suffix sums, the eps-free pieces of the
  defect per separation and per last excess index K, ``epsilon``'s table of breakpoints per
  separation -- are, as in any use).
* the same upper bound *cold*: the per-separation and per-K pieces emptied before every call
  (what the first visit of a K costs), with fresh random eps; and ``epsilon``'s one-time set-up
  per separation (its breakpoint table) at s = 2001.
* dp-accounting's fastest single-pair route at the same s and the ratio (dp-accounting / ours):
  a pair's PLD from the two pmfs (``from_two_probability_mass_functions``, dictionaries
  prebuilt: its cheapest input) and, for the Gaussian, the closed-form truncated discrete
  Gaussian (``DiscreteGaussianPrivacyLoss``).  The fastest of these is the reference for
  ``delta_h`` / ``delta_star`` (and their upper bounds) and ``get_epsilon_for_delta`` on the
  pmf PLD for ``epsilon``.  Building the pmfs from the mechanism is extra for dp-accounting and
  is listed on its own.
* ``estimate_mean`` on Z vs numpy's ``mean`` + ``std`` of the same 10^6 reports (ratio = ours /
  numpy), and the channel path it replaced (the same mechanism as an extended-window channel).

Each group is one function returning rows, so that more groups can be added to :func:`run`.
"""

from __future__ import annotations

import statistics
import time
import timeit

import numpy as np

from _timing import median_time

# (family, parameter, s, eps, h, H, delta) -- delta above the support leakage of separation H
CASES = [
    ("laplace", 0.5, 21, 1.0, 3, 3, 5e-2),
    ("gaussian", 3.0, 21, 1.0, 3, 3, 5e-2),
    ("laplace", 0.05, 2001, 1.0, 3, 10, 1e-6),
    ("gaussian", 30.0, 2001, 1.0, 3, 10, 1e-6),
]
# per-call medians: `number` calls per timing, `repeat` timings
_NUMBER, _REPEAT = 100, 15


def _per_call_us(fn, number=_NUMBER, repeat=_REPEAT) -> float:
    fn()
    times = timeit.repeat(fn, number=number, repeat=repeat)
    return statistics.median(times) / number * 1e6


def _mechanism(family, param, s):
    from sparseldp import SparseGaussian, SparseLaplace

    return SparseLaplace(lam=param, s=s) if family == "laplace" else SparseGaussian(sigma=param, s=s)


def _cycler(args):
    """A zero-argument callable for timeit that cycles through argument tuples."""
    state = [0]
    n = len(args)

    def pick():
        i = state[0]
        state[0] = (i + 1) % n
        return args[i]

    return pick


def scalar_times(family, param, s, eps, h, H, delta) -> dict:
    """Median microseconds per scalar call, by method name."""
    m = _mechanism(family, param, s)
    eps_list = [eps, 0.5 * eps, 1.5 * eps, 0.25 * eps]
    pick_e = _cycler(eps_list)
    pick_d = _cycler([delta, 0.5 * delta, 0.25 * delta, 0.75 * delta])
    out = {}
    out["delta_h"] = _per_call_us(lambda: m.delta_h(pick_e(), h))
    out["delta_h_upper"] = _per_call_us(lambda: m.delta_h_upper(pick_e(), h))
    out["delta_star"] = _per_call_us(lambda: m.delta_star(pick_e(), H))
    out["delta_star_upper"] = _per_call_us(lambda: m.delta_star_upper(pick_e(), H))
    out["epsilon"] = _per_call_us(lambda: m.epsilon(pick_d(), H), number=20)
    return out


def cold_times(family, param, s, eps, h, H, delta) -> dict:
    """Median microseconds of ``delta_star_upper`` with the scalar memo emptied first, and of the epsilon set-up."""
    from sparseldp.core import accounting

    m = _mechanism(family, param, s)
    k = m.kernel
    rng = np.random.default_rng(5)
    pick = _cycler([float(x) for x in rng.uniform(0.0, 4.0 * eps, 997)])
    m.delta_star_upper(eps, H)

    def cold():
        k._smemo["up"].clear()
        k._sleak["up"].clear()
        return m.delta_star_upper(pick(), H)

    hh = min(H, 2 * m.t + 1)
    log_c = k.log_normalizer_bound("near")
    return {"delta_star_upper cold": _per_call_us(cold),
            "epsilon set-up (once per separation)": _per_call_us(lambda: accounting._segment_table(k, hh, log_c),
                                                                 number=5, repeat=5)}


def dpa_times(family, param, s, eps, h, H, delta) -> dict | None:
    """dp-accounting's single-pair routes at separation ``H`` (microseconds per call), or None if absent."""
    try:
        from dp_accounting.pld import privacy_loss_distribution as pld
        from dp_accounting.pld import privacy_loss_mechanism as plm
    except ImportError:
        return None
    m = _mechanism(family, param, s)
    t = m.t
    y = np.arange(-t, t + H + 1)
    p0 = {int(a): float(b) for a, b in zip(y, m.pmf(y, 0)) if b > 0}
    ph = {int(a): float(b) for a, b in zip(y, m.pmf(y, H)) if b > 0}
    number = 20 if s <= 101 else 2
    out = {}
    out["pmfs->delta"] = _per_call_us(
        lambda: pld.from_two_probability_mass_functions(p0, ph).get_delta_for_epsilon(eps), number=number)
    out["pmfs->epsilon"] = _per_call_us(
        lambda: pld.from_two_probability_mass_functions(p0, ph).get_epsilon_for_delta(delta), number=number)

    def build():
        yy = np.arange(-t, t + H + 1)
        return dict(zip(yy.tolist(), m.pmf(yy, 0).tolist())), dict(zip(yy.tolist(), m.pmf(yy, H).tolist()))

    out["build pmfs"] = _per_call_us(build, number=number)
    if family == "gaussian":
        out["closed form->delta"] = _per_call_us(
            lambda: plm.DiscreteGaussianPrivacyLoss(param, sensitivity=H, truncation_bound=t)
            .get_delta_for_epsilon(eps), number=number)
    return out


def scalar_rows() -> list[dict]:
    """Scalar calls, dp-accounting's fastest single-pair route, and the ratios."""
    rows = []
    for case in CASES:
        family, param, s, eps, h, H, delta = case
        pname = "lam" if family == "laplace" else "sigma"
        label = f"{family} {pname}={param:g} s={s}"
        ours = scalar_times(*case)
        dpa = dpa_times(*case)
        delta_ref = epsilon_ref = None
        if dpa is not None:
            delta_ref = min(v for k, v in dpa.items() if k.endswith("->delta"))
            epsilon_ref = dpa["pmfs->epsilon"]
        for name, us in ours.items():
            ref = epsilon_ref if name == "epsilon" else delta_ref
            row = {"name": f"scalar {name} {label}", "median_s": us * 1e-6,
                   "note": f"{us:.1f} us per call"}
            if ref is not None:
                row["ratio"] = ref / us
                row["note"] += f"; dp-accounting fastest single pair {ref:.1f} us (ratio = dp-accounting / ours)"
            rows.append(row)
        if s > 21:
            for name, us in cold_times(*case).items():
                row = {"name": f"scalar {name} {label}", "median_s": us * 1e-6, "note": f"{us:.1f} us per call"}
                if name.endswith("cold") and delta_ref is not None:
                    row["ratio"] = delta_ref / us
                    row["note"] += f"; ratio = dp-accounting fastest single pair ({delta_ref:.1f} us) / ours"
                rows.append(row)
        if dpa is not None:
            for name, us in dpa.items():
                rows.append({"name": f"dp-accounting {name} {label} (h={H})", "median_s": us * 1e-6,
                             "note": f"{us:.1f} us per call" + (" (dictionaries prebuilt)" if "pmfs->" in name
                                                                 else "")})
    return rows


def mean_rows(n: int = 10**6) -> list[dict]:
    """estimate_mean on Z (O(n), no channel) vs numpy mean + std of the same reports, and the channel path."""
    from sparseldp import SparseLaplace
    from sparseldp.estimation import estimate_mean

    m = SparseLaplace(lam=0.01, s=2827)  # a 100 x 2926 extended channel on the domain 0..99
    gen = np.random.default_rng(2026)
    y = m.sample(gen.integers(0, 100, n), rng=gen)
    got = {}

    def ours():
        got["est"] = estimate_mean(y, m, domain=(0, 99))

    def numpy_ms():
        got["np"] = (float(y.mean()), float(y.std(ddof=1)))

    t_ours = median_time(ours, repeat=7)
    t_np = median_time(numpy_ms, repeat=7)
    est = got["est"]
    diff = abs(float(est) - got["np"][0])
    rows = [
        {"name": f"estimate_mean on Z, {n:.0e} reports", "median_s": t_ours, "ratio": t_ours / t_np,
         "note": f"ratio = ours / numpy mean+std; |mean - numpy mean| = {diff:.1e}, method {est.method}"},
        {"name": f"numpy mean + std, {n:.0e} reports", "median_s": t_np},
    ]
    ch = m.to_channel((0, 99))
    t0 = time.perf_counter()
    est_ch = estimate_mean(y, ch)
    t_ch = time.perf_counter() - t0
    rows.append({"name": f"estimate_mean via the extended channel, {n:.0e} reports", "median_s": t_ch,
                 "ratio": t_ch / t_ours, "note": f"one run (channel built inside); ratio = channel path / ours; "
                                                 f"same mean to {abs(float(est_ch) - float(est)):.1e}"})
    return rows


def run() -> list[dict]:
    return scalar_rows() + mean_rows()


if __name__ == "__main__":
    for row in run():
        ratio = row.get("ratio")
        print(f"{row['name']:<66} {row['median_s'] * 1e6:10.1f} us  "
              f"{'' if ratio is None else f'{ratio:8.2f}x'}  {row.get('note', '')}")
