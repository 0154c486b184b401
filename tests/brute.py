"""Independent brute-force evaluations used as oracles by the tests.

Deliberately naive: build both rows of the channel on a wide integer window
with plain numpy (no log space, no closed forms) and sum the positive parts.
"""

import numpy as np


def rows(kind, param, s, h):
    t = (s - 1) // 2
    y = np.arange(-t - 2, t + h + 3)
    d0, dh = np.abs(y), np.abs(y - h)
    if kind == "laplace":
        w0, wh = np.exp(-param * d0), np.exp(-param * dh)
    else:
        w0, wh = np.exp(-(d0**2) / (2 * param**2)), np.exp(-(dh**2) / (2 * param**2))
    w0 = np.where(d0 <= t, w0, 0.0)
    wh = np.where(dh <= t, wh, 0.0)
    return y, w0 / w0.sum(), wh / wh.sum()


def delta(kind, param, s, eps, h):
    _, p, q = rows(kind, param, s, h)
    return float(np.maximum(p - np.exp(eps) * q, 0.0).sum())


def split(kind, param, s, eps, h):
    y, p, q = rows(kind, param, s, h)
    t = (s - 1) // 2
    in0, inh = np.abs(y) <= t, np.abs(y - h) <= t
    leak = float(p[in0 & ~inh].sum())
    both = in0 & inh
    ov = float(np.maximum(p[both] - np.exp(eps) * q[both], 0.0).sum())
    return leak, ov


def delta_star(kind, param, s, eps, H):
    return max(delta(kind, param, s, eps, h) for h in range(1, H + 1))


def moments(kind, param, s):
    t = (s - 1) // 2
    k = np.arange(-t, t + 1)
    w = np.exp(-param * np.abs(k)) if kind == "laplace" else np.exp(-(k**2) / (2 * param**2))
    w = w / w.sum()
    return float((np.abs(k) * w).sum()), float((k**2 * w).sum())


# ---------------------------------------------------------------------------
# mpmath references (high precision, used by tests/test_rigor.py)
# ---------------------------------------------------------------------------
# Every double is converted exactly (mpf(float) is exact), the kernel is built in
# 80-digit arithmetic, and the overlap excess is decided by an exact comparison of
# the privacy loss with eps (then summed as w(k) (1 - e^{eps - L(k)}), no cancellation),
# so exact ties give exactly zero.  Independent of the library's closed forms.
_MP_DPS = 80
_MP_ROWS = {}


def _mp():
    import mpmath

    return mpmath


def mp_kernel(kind, param, s):
    """``(t, [w(-t), ..., w(t)], C, prefix)`` as mpf at 80 digits (cached); ``prefix[i] = sum w[:i]``."""
    key = (kind, float(param), int(s))
    got = _MP_ROWS.get(key)
    if got is not None:
        return got
    mpmath = _mp()
    t = (s - 1) // 2
    with mpmath.workdps(_MP_DPS):
        p = mpmath.mpf(float(param))
        if kind == "laplace":
            half = [mpmath.exp(-p * k) for k in range(t + 1)]
        else:
            half = [mpmath.exp(-mpmath.mpf(k * k) / (2 * p * p)) for k in range(t + 1)]
        w = half[:0:-1] + half
        prefix = [mpmath.mpf(0)]
        for v in w:
            prefix.append(prefix[-1] + v)
        C = prefix[-1]
    _MP_ROWS[key] = (t, w, C, prefix)
    return _MP_ROWS[key]


def mp_defect(kind, param, s, eps, h):
    """Exact ``(total, support_leakage, overlap)`` of separation ``h`` as mpf (80 digits).

    The overlap loss ``L(k) = log w(k) - log w(k - h)`` is nonincreasing in ``k``
    for both kernels, so the scan over ``k = h - t, h - t + 1, ...`` stops at the
    first index that is not an excess point.
    """
    mpmath = _mp()
    t, w, C, prefix = mp_kernel(kind, param, s)
    h = int(h)
    if h > 2 * t:
        return mpmath.mpf(1), mpmath.mpf(1), mpmath.mpf(0)
    with mpmath.workdps(_MP_DPS):
        e = mpmath.mpf(float(eps))
        p = mpmath.mpf(float(param))
        leak = prefix[h]  # k = -t .. h-t-1
        terms = []
        for k in range(h - t, t + 1):
            if kind == "laplace":
                loss = p * (abs(k - h) - abs(k))  # exact: 53-bit lam times a small integer
                excess = loss > e
            else:
                # L(k) = h (h - 2k) / (2 sigma^2) > eps  <=>  h (h - 2k) > 2 sigma^2 eps (exact at 80 digits)
                loss = mpmath.mpf(h * (h - 2 * k)) / (2 * p * p)
                excess = mpmath.mpf(h * (h - 2 * k)) > 2 * p * p * e
            if not excess:
                break
            terms.append(w[k + t] * -mpmath.expm1(e - loss))
        ov = mpmath.fsum(terms)
        return (leak + ov) / C, leak / C, ov / C


def mp_delta_star(kind, param, s, eps, H):
    """Exact ``max_{1<=h<=H} delta_h(eps)`` as mpf."""
    t = (int(s) - 1) // 2
    top = min(int(H), 2 * t + 1)
    return max(mp_defect(kind, param, s, eps, h)[0] for h in range(1, top + 1))


def mp_channel_rows(weights):
    """Exact row-normalized probabilities (list of lists of mpf) of a dense weight matrix."""
    mpmath = _mp()
    W = np.asarray(weights, dtype=float)
    with mpmath.workdps(_MP_DPS):
        rows = []
        for r in W:
            vals = [mpmath.mpf(float(v)) for v in r]
            z = mpmath.fsum(vals)
            rows.append([v / z for v in vals])
    return rows


def mp_channel_delta(rows, inputs, eps, H=None):
    """Exact ``sup`` over ordered pairs with ``0 < |x - x'| <= H`` of the hockey-stick defect (mpf)."""
    mpmath = _mp()
    with mpmath.workdps(_MP_DPS):
        E = mpmath.exp(mpmath.mpf(float(eps)))
        best = mpmath.mpf(0)
        n = len(rows)
        for i in range(n):
            for j in range(n):
                if i == j or (H is not None and abs(int(inputs[i]) - int(inputs[j])) > H):
                    continue
                d = mpmath.fsum(max(mpmath.mpf(0), p - E * q) for p, q in zip(rows[i], rows[j]))
                best = max(best, d)
        return best


# ---------------------------------------------------------------------------
# general kernels given by their weights w(0..t) (tests/test_kernels.py)
# ---------------------------------------------------------------------------
def weight_rows(weights, h):
    """Both rows ``P(.|0)``, ``P(.|h)`` of the kernel ``w(|k|) = weights[|k|]`` on a wide window (plain numpy)."""
    w = np.asarray(weights, dtype=float)
    t = w.size - 1
    y = np.arange(-t - 2, t + h + 3)
    d0, dh = np.abs(y), np.abs(y - h)
    w0 = np.where(d0 <= t, w[np.minimum(d0, t)], 0.0)
    wh = np.where(dh <= t, w[np.minimum(dh, t)], 0.0)
    return y, w0 / w0.sum(), wh / wh.sum()


def weight_split(weights, eps, h):
    """``(support_leakage, overlap)`` with the windows ``|y| <= t``, ``|y - h| <= t`` as supports."""
    y, p, q = weight_rows(weights, h)
    t = len(weights) - 1
    in0, inh = np.abs(y) <= t, np.abs(y - h) <= t
    with np.errstate(invalid="ignore"):
        d = np.where(q > 0, p - np.exp(eps) * q, p)
    return float(p[in0 & ~inh].sum()), float(np.maximum(d[in0 & inh], 0.0).sum())


def mp_weight_defect(weights, eps, h):
    """Exact ``(total, support_leakage, overlap)`` (mpf, 80 digits) of a weight kernel at separation ``h``."""
    mpmath = _mp()
    w = [float(v) for v in weights]
    t = len(w) - 1
    h = int(h)
    if h > 2 * t:
        return mpmath.mpf(1), mpmath.mpf(1), mpmath.mpf(0)
    with mpmath.workdps(_MP_DPS):
        W = [mpmath.mpf(v) for v in w]
        C = W[0] + 2 * mpmath.fsum(W[1:])
        E = mpmath.exp(mpmath.mpf(float(eps)))
        leak = mpmath.fsum(W[abs(y)] for y in range(-t, h - t))
        ov = mpmath.fsum(max(mpmath.mpf(0), W[abs(y)] - E * W[abs(y - h)]) for y in range(h - t, t + 1))
        return (leak + ov) / C, leak / C, ov / C
