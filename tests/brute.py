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
