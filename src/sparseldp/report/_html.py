"""The privacy report's HTML: one self-contained page (inline CSS and SVG, no script, no external resource).

A Content-Security-Policy meta tag forbids every fetch (``default-src 'none'``),
so the page cannot reach the network even if a future edit added a link to a
resource.  Every number is a ``<span class="num">`` with ``data-key``,
``data-value`` (Python's ``repr``: the float round-trips exactly) and
``data-kind`` (:class:`~._compute.Num`), followed by a badge that says its kind
in words; its method is in the ``title`` tooltip and in the last section.
"""

from __future__ import annotations

import math
from html import escape

import numpy as np

from ._compute import Num, ReportData
from ._svg import PALETTE, bar_chart, fmt_num, html_num, line_chart, pmf_chart

__all__ = ["render", "KIND_LABEL"]

#: How each kind of number is named on the page.
KIND_LABEL = {
    "exact": "exact",
    "upper": "upper bound",
    "lower": "lower bound",
    "estimate": "estimate",
    "recorded": "recorded",
}

_KIND_TEXT = {
    "exact": ("Exact: the closed form (Theorems 2/3 and 8/9, Propositions 1 and 3, or the stated formula) "
              "evaluated in floating point. Not a bound: it may sit slightly on either side of the true value "
              "(a few units in the last place for the privacy numbers; the linear algebra of the utility "
              "formulas loses about the channel's condition number times 10^-16)."),
    "upper": ("Rigorous upper bound: computed with outward rounding (or dp-accounting's pessimistic "
              "discretization, or basic composition), never below the true value."),
    "lower": "Rigorous lower bound: never above the true value.",
    "estimate": ("Estimate: an asymptotic formula, a stochastic estimate, or a floating-point computation whose "
                 "error model is not outward rounded; its method says how large the error can be."),
    "recorded": "Recorded: copied from the spec file; every claim in it was recomputed and checked on loading.",
}

_CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f4f5f7; color: #1b1f24;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", "Liberation Sans", sans-serif; }
main { max-width: 980px; margin: 0 auto; padding: 28px 32px 48px; background: #fff; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 34px 0 8px; padding-top: 12px; border-top: 2px solid #e3e6ea; }
h3 { font-size: 16px; margin: 22px 0 6px; }
p { margin: 6px 0 10px; }
.sub { color: #57606a; margin: 0 0 18px; }
.verdict { border: 1px solid #c8d6e5; background: #f2f7fc; border-radius: 8px; padding: 12px 18px; }
.verdict ul { margin: 4px 0; padding-left: 20px; }
.verdict li { margin: 3px 0; }
.warn { border: 1px solid #e3b341; background: #fff8e1; border-radius: 6px; padding: 8px 12px; }
table { border-collapse: collapse; margin: 8px 0 14px; font-size: 14px; }
th, td { padding: 5px 12px; border-bottom: 1px solid #e3e6ea; text-align: left; vertical-align: top; }
th { background: #f6f8fa; font-weight: 600; }
td.r, th.r { text-align: right; }
td.r { white-space: nowrap; }
th { max-width: 170px; }
.num { font-variant-numeric: tabular-nums; white-space: nowrap; }
.kind { display: inline-block; margin-left: 6px; padding: 0 7px; border-radius: 9px; font-size: 11px;
  line-height: 17px; vertical-align: 1px; white-space: nowrap; }
.kind-exact { background: #dff3e4; color: #145a2a; }
.kind-upper { background: #dcecfb; color: #0b4a82; }
.kind-lower { background: #ece4fb; color: #4b2a85; }
.kind-estimate { background: #fde9d5; color: #8a3b00; }
.kind-recorded { background: #eceef1; color: #444; }
div.scroll { overflow-x: auto; }
small.err { color: #57606a; }
table.kv td:first-child { white-space: nowrap; color: #3d444d; }
th .kind { font-weight: 400; }
figure.chart { margin: 12px 0 18px; }
figure.chart svg { display: block; max-width: 100%; height: auto; border: 1px solid #e3e6ea; border-radius: 6px; }
figcaption { color: #57606a; font-size: 13px; margin-top: 6px; max-width: 720px; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 13px; background: #f3f4f6;
  padding: 0 3px; border-radius: 3px; }
dl.how dt { font-weight: 600; margin-top: 8px; }
dl.how dd { margin: 2px 0 6px 18px; color: #333; }
footer { margin-top: 36px; color: #57606a; font-size: 13px; }
"""


_DIRECTION = {"upper": "up", "lower": "down"}


def _num(x: Num | None, digits: int = 6, badge: bool = True) -> str:
    """A number with its ``data-*`` attributes and, unless the column header carries it, its kind badge.

    Upper bounds are shown rounded up and lower bounds rounded down, so the
    digits on the page keep the bound's direction; ``data-value`` holds the
    full double.
    """
    if x is None:
        return "—"
    text = html_num(x.value, digits, _DIRECTION.get(x.kind, "nearest"))
    out = (f'<span class="num" data-key="{escape(x.key, quote=True)}" data-value="{escape(repr(float(x.value)))}" '
           f'data-kind="{x.kind}" title="{escape(x.how, quote=True)}">{text}</span>')
    return out + _badge(x.kind) if badge else out


def _badge(kind: str) -> str:
    return (f'<span class="kind kind-{kind}" title="{escape(_KIND_TEXT[kind], quote=True)}">'
            f'{KIND_LABEL[kind]}</span>')


def _plain(x, digits: int = 6) -> str:
    return html_num(x, digits)


def _table(head, rows, right=(), cls: str = "") -> str:
    """A table (``head`` empty: no header row) in a wrapper that scrolls sideways on narrow screens."""
    al = lambda i: ' class="r"' if i in right else ""  # noqa: E731
    out = [f'<div class="scroll"><table{f" class={chr(34)}{cls}{chr(34)}" if cls else ""}>']
    if any(head):
        out += ["<thead><tr>"] + [f"<th{al(i)}>{h}</th>" for i, h in enumerate(head)] + ["</tr></thead>"]
    out.append("<tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td{al(i)}>{c}</td>" for i, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _mech_name(d: ReportData) -> str:
    m = d.mechanism
    sym = {"lam": "λ", "sigma": "σ"}.get(m["param_name"], m["param_name"])
    return f"Sparse {m['family'].capitalize()} ({sym} = {fmt_num(m['param'], 6)}, s = {m['s']})"


def render(d: ReportData) -> str:
    """The whole page for ``d``."""
    title = f"Privacy report: {_mech_name(d)}"
    p = d.provenance
    body = [
        f"<header><h1>{escape(title)}</h1>",
        f'<p class="sub">sparseldp {escape(p["version"])} · generated {escape(p["generated"])}'
        + (f" · from {escape(p['source'])}" if p.get("source") else "") + "</p></header>",
        _summary(d),
        _mechanism(d),
        _guarantee(d),
        _certificate(d),
        _composition(d),
        _utility(d),
        _how(d),
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<meta name=\"generator\" content=\"sparseldp {escape(p['version'], quote=True)}\">\n"
            f"<title>{escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n"
            + "\n".join(body) + "\n</main>\n</body>\n</html>\n")


# -- sections -----------------------------------------------------------------------------------------


def _summary(d: ReportData) -> str:
    g = d.guarantee
    items = [f"<strong>Guarantee:</strong> (ε = {_plain(d.eps)}, δ ≤ {_num(g['delta_star'], 8, badge=False)})-LDP "
             f"for any two inputs at most H = {d.H} apart{_badge('upper')}."]
    if g["vacuous"]:
        items.append("<strong>This guarantee is vacuous (δ = 1): the mechanism protects nothing at this "
                     "target.</strong>")
    c = d.certificate
    if "cert" in c:
        items.append(f"<strong>Realized sampler</strong> (what is actually drawn): δ ≤ {_num(c['upper'], 8)}"
                     + (" — <strong>with a warning, see section 3</strong>." if c["cert"].warning else "."))
    else:
        items.append("<strong>Realized sampler:</strong> " + escape(c["skipped"]) + ".")
    pe = g["pure"]["pure_epsilon"]
    items.append("<strong>Pure LDP:</strong> " + (
        "not for any ε (Theorem 1): two inputs in range have different supports." if math.isinf(pe.value)
        else f"yes, pure ε-LDP with ε = {_num(pe)}."))
    last = d.composition["rows"][-1]
    K = last["k"]
    if "delta_at_keps" in last:
        items.append(f"<strong>After {K} reports</strong> of one person: δ = {_num(last['delta_at_keps'])} at "
                     f"ε = {_plain(K * d.eps)}; basic composition gives δ ≤ {_num(last['basic_delta'])}.")
    elif K > 1:
        items.append(f"<strong>After {K} reports</strong> of one person: (ε = {_plain(K * d.eps)}, "
                     f"δ ≤ {_num(last['basic_delta'])}) by basic composition.")
    u = d.utility
    items.append(f"<strong>Distortion:</strong> E|Y − x| = {_num(u['r1'])}, E(Y − x)² = {_num(u['r2'])}.")
    return '<section id="summary" class="verdict"><strong>In short</strong><ul>' + "".join(
        f"<li>{i}</li>" for i in items) + "</ul></section>"


def _mechanism(d: ReportData) -> str:
    m = d.mechanism
    sym = {"lam": "λ (inverse temperature)", "sigma": "σ (scale)"}.get(m["param_name"], m["param_name"])
    kernel = "exp(−λ |y − x|)" if m["family"] == "laplace" else "exp(−(y − x)² / (2σ²))"
    rows = [
        ("family", escape(m["family"]) + f": M(y | x) ∝ {kernel} on the window |y − x| ≤ t"),
        (escape(sym), _plain(m["param"], 10)),
        ("support size s", f"{m['s']} (window radius t = {m['t']})"),
    ]
    if m["domain"] is not None:
        lo, hi = m["domain"]
        win = ("extended: outputs lo − t .. hi + t, every row the mechanism on Z" if m["window"] == "extended"
               else "clipped: outputs stay in lo .. hi, rows renormalized at the edges (Theorems 2 and 8)")
        rows.append(("input domain", f"{lo} .. {hi} ({hi - lo + 1} values)"))
        rows.append(("window", escape(win)))
    else:
        rows.append(("input domain", "all integers, outputs in Z (Theorems 3 and 9)"))
        if m["utility_domain"] is not None:
            lo, hi = m["utility_domain"]
            rows.append(("data domain (utility only)", f"{lo} .. {hi} ({hi - lo + 1} values)"))
    html = ['<section id="mechanism"><h2>1. The mechanism and its spec</h2>', _table((), rows, cls="kv")]
    rec = m["recorded"]
    html.append("<h3>The target it was designed for</h3>")
    if rec:
        names = {"eps": "ε", "delta": "target δ", "H": "privacy range H", "delta_star": "certified δ*",
                 "r1": "R1", "r2": "R2"}
        html.append(_table(("recorded in the spec", "value " + _badge("recorded")),
                           [(names[k], _num(v, 10, badge=False)) for k, v in rec.items()], cls="kv"))
    else:
        html.append("<p>The spec records no target.</p>")
    html.append(f"<p>This report evaluates the target ε = {_plain(d.eps)}, H = {d.H}"
                + (f", δ = {_plain(d.delta_target)}" if d.delta_target is not None else " (no target δ given)")
                + ".</p></section>")
    return "".join(html)


def _guarantee(d: ReportData) -> str:
    g = d.guarantee
    html = ['<section id="guarantee"><h2>2. The guarantee</h2>']
    w = g["worst"]
    wtext = "" if w is None else (f", attained at (x, x′) = ({w[0]}, {w[1]})" if g["clipped"]
                                  else f", attained at h = {w[1]}")
    html.append(f"<p>δ*(ε; H), the largest defect ∑<sub>y</sub> [M(y | x) − e<sup>ε</sup> M(y | x′)]<sub>+</sub> "
                f"over inputs at most H apart, is {_num(g['delta_star'], 10)} at ε = {_plain(d.eps)}, "
                f"H = {d.H}{wtext}. It splits (Remark 2) into the <em>support leakage</em> "
                f"{_num(g['support_leakage'])} (outputs one input can produce and the other cannot: no ε removes "
                f"them) and the <em>overlap</em> {_num(g['overlap'])}.</p>")
    pr = g["profile"]
    hlines = [] if pr["floor"] is None or pr["floor"] <= 0 else [("support leakage", pr["floor"], PALETTE[1])]
    html.append(line_chart(
        key="profile", title="Privacy profile δ*(ε; H)",
        desc=f"upper bound on delta_star against eps from 0 to {pr['eps'][-1]:g}, range H = {d.H}",
        caption=(f"The privacy profile: for each ε, the smallest δ such that the mechanism is (ε, δ)-LDP on range "
                 f"H = {d.H} (rigorous upper bounds"
                 + (", log scale). The dot is the target ε." if np.any(pr["delta"] > 0) else
                    "): δ = 0 for every ε, no two inputs are within H of each other.")
                 + ("" if pr["floor"] is None else " The dotted line is the support leakage: δ never falls below it.")
                 + (" Values δ = 0 cannot be drawn on the log scale." if np.any(pr["delta"] <= 0)
                    and np.any(pr["delta"] > 0) else "")),
        series=[("δ*(ε; H)", pr["eps"], pr["delta"], PALETTE[0], False)], xlabel="ε", ylabel="δ", logy=True,
        hlines=hlines, points=[("target", d.eps, g["delta_star"].value, PALETTE[1])]
        if g["delta_star"].value > 0 else []))
    ph = g["per_h"]
    if ph["h"].size:
        html.append("<h3>The defect for each separation, split</h3>")
        what = ("δ*(ε; h), the worst pair at most h apart," if ph["clipped"] else "δ<sub>h</sub>(ε)")
        html.append(bar_chart(
            key="per-h", title="Defect per separation, split into support leakage and overlap",
            desc="stacked bars of support leakage and overlap for each h",
            caption=(f"{what} for h = 1 .. {int(ph['h'][-1])} at ε = {_plain(d.eps)} (exact, rounded to nearest), "
                     "split into support leakage (bottom) and overlap (top). "
                     + ("" if ph["all_shown"] else f"{ph['h'].size} values of h are shown. ")
                     + (f"For h > 2t = {2 * d.mechanism['t']} the windows are disjoint: δ<sub>h</sub> = 1, all of "
                        "it leakage." if ph["beyond"] else "")),
            categories=[str(int(h)) for h in ph["h"]],
            stacks=[("support leakage", ph["leak"], PALETTE[1]), ("overlap", ph["overlap"], PALETTE[0])],
            xlabel="range h (|x − x′| ≤ h)" if ph["clipped"] else "separation h = |x − x′|", ylabel="δ"))
        rows = []
        for i in _table_rows(ph["h"].size):
            if i is None:
                rows.append(("…", "", "", "", ""))
                continue
            h = int(ph["h"][i])
            pair = ph["pairs"][i]
            rows.append((str(h), "" if pair is None else f"({pair[0]}, {pair[1]})",
                         _num(Num(f"per_h[{h}].total", ph["total"][i], "exact", "defect, rounded to nearest"),
                              badge=False),
                         _num(Num(f"per_h[{h}].leak", ph["leak"][i], "exact", "support leakage (Remark 2)"),
                              badge=False),
                         _num(Num(f"per_h[{h}].overlap", ph["overlap"][i], "exact", "overlap (Remark 2)"),
                              badge=False)))
        html.append(_table(("h", "worst pair", "δ " + _badge("exact"), "support leakage " + _badge("exact"),
                            "overlap " + _badge("exact")), rows, right=(0, 2, 3, 4)))
    html.append("<h3>The smallest ε for a given δ</h3>")
    rows = []
    for delta, num, why in g["eps_for_delta"]:
        mark = " (target)" if d.delta_target is not None and delta == d.delta_target else ""
        rows.append((_plain(delta) + mark, _num(num, 10, badge=False) if num is not None else _none(why)))
    html.append(_table(("δ", f"smallest ε with δ*(ε; {d.H}) ≤ δ " + _badge("upper")), rows, right=(0, 1)))
    if any(num is None for _, num, _ in g["eps_for_delta"]):
        html.append("<p>“none”: the support leakage alone is at least δ, so no ε reaches it (hover for the "
                    "details).</p>")
    pe = g["pure"]
    why = pe["why"][0].upper() + pe["why"][1:]
    html.append(f"<h3>Pure LDP (Theorem 1)</h3><p>The smallest ε of pure ε-LDP on range H is "
                f"{_num(pe['pure_epsilon'])}. {escape(why)}.</p></section>")
    return "".join(html)


def _none(why: str) -> str:
    return f'<span class="none" title="{escape(why, quote=True)}">none</span>'


def _table_rows(n: int, head: int = 8, tail: int = 4):
    if n <= head + tail + 1:
        return list(range(n))
    return list(range(head)) + [None] + list(range(n - tail, n))


def _certificate(d: ReportData) -> str:
    c = d.certificate
    html = ['<section id="certificate"><h2>3. The realized sampler</h2>',
            "<p>Reports are drawn by exact integer inverse-CDF sampling from probabilities quantized to multiples of "
            "2<sup>−64</sup>. The certificate bounds δ* of that realized distribution, not of the ideal one.</p>"]
    if "cert" not in c:
        html.append(f"<p>{escape(c['skipped'])}.</p></section>")
        return "".join(html)
    cert = c["cert"]
    rows = [("δ* of the realized sampler is at most", _num(c["upper"], 10)),
            ("δ* of the realized sampler is at least", _num(c["lower"], 10)),
            ("δ* of the ideal mechanism", _num(c["ideal"], 10)),
            ("worst pair (x, x′)", f"({cert.worst_pair[0]}, {cert.worst_pair[1]})" if len(cert.worst_pair) == 2
             else "none: no two inputs in range"),
            ("largest |realized − ideal| probability", _num(c["max_pmf_error"], 3)),
            ("probabilities raised to 2<sup>−64</sup>", str(cert.floored)),
            ("method", escape(cert.method))]
    html.append(_table((), rows, cls="kv"))
    if cert.warning:
        html.append(f'<p class="warn"><strong>Warning:</strong> {escape(cert.warning)}</p>')
    else:
        html.append("<p>No warning: the realized and the ideal δ* do not provably differ by more than "
                    "10<sup>−12</sup> or 1%.</p>")
    html.append("</section>")
    return "".join(html)


def _composition(d: ReportData) -> str:
    c = d.composition
    kind = c["kind"]
    html = [f'<section id="composition"><h2>4. Composition: {d.reports} report{"s" if d.reports != 1 else ""} of one '
            "person</h2>",
            "<p>One person who reports k times (fresh noise each time, each value moving by at most H) releases "
            f"the k-fold product. Route: <strong>{escape(c['route'])}</strong>: {escape(c['how'])}. Basic "
            "composition, (kε₀, min(1, k δ*)) with ε₀ the target and δ* its bound, is shown beside it.</p>"]
    has = "delta_at_keps" in c["rows"][0]
    floor = any("inf_mass" in r for r in c["rows"])
    head = ["k", "basic: (kε₀, δ ≤) " + _badge("upper")]
    if has:
        head.append("δ<sub>k</sub> at ε = kε₀ " + _badge(kind))
        if floor:
            head.append("leakage floor " + _badge(kind))
        head.append("ε at δ = k δ* " + _badge(kind))
        if d.delta_target is not None:
            head.append(f"ε at δ = {_plain(d.delta_target)} " + _badge(kind))
    rows = []
    for r in c["rows"]:
        row = [str(r["k"]), f"({_plain(r['k'] * d.eps)}, {_num(r['basic_delta'], badge=False)})"]
        if has:
            err = r.get("delta_error")
            row.append(_num(r["delta_at_keps"], badge=False)
                       + ("" if err is None else f'<br><small class="err">± {_plain(err, 2)}</small>'))
            if floor:
                row.append(_num(r.get("inf_mass"), badge=False))
            row.append(_eps_cell(r["eps_at_kdelta"]))
            if d.delta_target is not None:
                row.append(_eps_cell(r["eps_at_target"]))
        rows.append(row)
    html.append(_table(head, rows, right=tuple(range(len(head)))))
    notes = []
    if any(r.get("delta_error") is not None for r in c["rows"]):
        notes.append("± is the FFT error-model bound of the lattice composition.")
    if floor:
        notes.append("The leakage floor 1 − (1 − p<sub>∞</sub>)<sup>k</sup> is the part of δ that no ε removes "
                     "(p<sub>∞</sub>: one report's support leakage at the worst separation); it grows with k.")
    if has and any(r[key][0] is None for r in c["rows"] for key in ("eps_at_kdelta", "eps_at_target") if key in r):
        notes.append("“none”: the leakage floor exceeds that δ.")
    if notes:
        html.append("<p>" + " ".join(notes) + "</p>")
    pl = c.get("plot")
    if pl is not None:
        colours = PALETTE[0], PALETTE[2], PALETTE[3]
        series = [(f"k = {k}", pl["eps"], v, colours[i % 3], False) for i, (k, v) in enumerate(pl["curves"])]
        points = [("basic composition", e, dd, PALETTE[1]) for _, e, dd in pl["basic"] if dd > 0]
        html.append(line_chart(
            key="composition", title="Privacy profile of k reports",
            desc="delta of k composed reports against eps for several k",
            caption=(f"δ<sub>k</sub>(ε) of k reports ({escape(KIND_LABEL[kind])}s, log scale); the dots are what "
                     "basic composition guarantees, (kε₀, min(1, k δ*))."),
            series=series, xlabel="ε", ylabel="δ", logy=True, points=points))
    html.append("</section>")
    return "".join(html)


def _eps_cell(value) -> str:
    num, why = value
    return _num(num, 8, badge=False) if num is not None else _none(why)


def _utility(d: ReportData) -> str:
    u = d.utility
    html = ['<section id="utility"><h2>5. Utility</h2>',
            _table((), [("R1 = E|Y − x|", _num(u["r1"], 10)), ("R2 = E(Y − x)²", _num(u["r2"], 10))], cls="kv")]
    if d.mechanism["domain"] is not None:
        html.append("<p>R1 and R2 are averaged over the inputs of the domain (Propositions 1 and 3 per row).</p>")
    labels, probs = u["pmf"]
    html.append(pmf_chart(
        key="pmf", title=f"Output distribution for the input x = {d.x0}",
        desc=f"probability of each report y for the input {d.x0}",
        caption=(f"P(Y = y | x = {d.x0}) (exact, rounded to nearest) of the reports the input {d.x0} can produce"
                 + ("." if u["pmf_note"] is None else f" ({escape(u['pmf_note'])}).")),
        xs=labels, ps=probs, x0=d.x0, xlabel="report y", ylabel="probability"))
    html.append(f"<h3>Expected error of estimates from n = {d.n:,} reports</h3>")
    rows = []
    if "mean_se_noise" in u:
        rows.append(("mean: standard error the noise adds, √(R2 / n)", _num(u["mean_se_noise"])))
    if "mean_se_uniform" in u:
        rows.append(("mean: standard error of the report mean, inputs uniform on the domain",
                     _num(u["mean_se_uniform"])))
    if "mean_se_mle" in u:
        rows.append(("mean: standard error of the EM mean, inputs uniform (large n)", _num(u["mean_se_mle"])))
    if "freq_mse_inversion" in u:
        k = u["k"]
        rows += [(f"frequencies, inversion: E‖p̂ − p‖² summed over the {k} values", _num(u["freq_mse_inversion"])),
                 ("frequencies, inversion: root mean square error per value", _num(u["freq_rmse_inversion"])),
                 (f"frequencies, EM (large n): E‖p̂ − p‖² summed over the {k} values", _num(u["freq_mse_mle"])),
                 ("frequencies, EM (large n): root mean square error per value", _num(u["freq_rmse_mle"]))]
    if rows:
        html.append(_table(("quantity", "value"), rows, right=(1,)))
    if "mean_note" in u:
        html.append(f"<p>Mean: {escape(u['mean_note'])}.</p>")
    if d.domain is None:
        html.append("<p>Frequencies need a finite domain: run <code>sparseldp report --domain lo:hi</code> to see "
                    "their expected error.</p>")
    elif "freq_note" in u:
        html.append(f"<p>Frequencies: {escape(u['freq_note'])}.</p>")
    else:
        html.append("<p>Frequency errors are for inputs uniform on the domain (they depend on the input distribution "
                    "p through the report distribution q = Q<sup>T</sup>p) and scale as 1/n. Inversion is the "
                    "unbiased least-squares estimator; EM (the default of <code>sparseldp estimate</code>) is the "
                    "maximum-likelihood estimate, its error here the large-n (asymptotic) one.</p>")
    html.append("</section>")
    return "".join(html)


def _how(d: ReportData) -> str:
    html = ['<section id="how"><h2>6. How each number was obtained</h2>',
            "<p>Each number carries its kind (a badge beside it or in its column's header); hovering over a number "
            "shows its method. The digits shown of a bound are rounded outward (upper bounds up, lower bounds "
            "down), so they remain bounds; the full double is in the number's <code>data-value</code>.</p>",
            _table(("kind", "meaning"), [(_badge(k), escape(_KIND_TEXT[k]))
                                         for k in ("exact", "upper", "lower", "estimate", "recorded")])]
    g, u = d.guarantee, d.utility
    methods = [
        ("guarantee δ*", "upper", g["delta_star"].how),
        ("split and per-separation defects", "exact",
         "Theorems 3 and 9 on Z (Theorems 2 and 8 for a clipped domain); support leakage and overlap as in "
         "Remark 2"),
        ("smallest ε for δ", "upper", g["eps_for_delta"][0][1].how if g["eps_for_delta"][0][1] else
         "epsilon(delta, H), rounded up"),
        ("pure LDP", "exact", g["pure"]["pure_epsilon"].how),
        ("realized sampler", "upper", "sparseldp.sampling.certify: rigorous upper and lower bounds from the "
         "integer counts the sampler uses"),
        ("composition", d.composition["kind"], d.composition["how"]),
        ("basic composition", "upper", "k reports are (kε, min(1, kδ))-LDP whenever one is (ε, δ)-LDP"),
        ("R1, R2", "exact", u["r1"].how),
    ]
    for key, name in (("mean_se_noise", "mean, noise"), ("mean_se_uniform", "mean, uniform inputs"),
                      ("mean_se_mle", "mean, EM"), ("freq_mse_inversion", "frequencies, inversion"),
                      ("freq_mse_mle", "frequencies, EM")):
        if key in u:
            methods.append((name, u[key].kind, u[key].how))
    html.append("<h3>Methods</h3>")
    html.append(_table(("number", "kind", "how it was computed"),
                       [(escape(a), _badge(k), escape(b)) for a, k, b in methods]))
    p = d.provenance
    versions = ", ".join(f"{escape(k)} {escape(str(v))}" for k, v in p["deps"].items() if v)
    html.append(f"<footer>Made by sparseldp {escape(p['version'])} ({versions}) on {escape(p['generated'])}"
                + (f" from {escape(p['source'])}" if p.get("source") else "")
                + ". The page is self-contained: no script, no network access.</footer></section>")
    return "".join(html)
