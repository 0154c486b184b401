r"""The atom-seeded stopped EM: the member of ``method="auto"``'s path for a smooth truth with atoms.

Early stopping regularizes EM by where it starts and how far it goes: from the uniform start, the
discrepancy stop (:func:`_em_members._stopped_cols`) is smooth everywhere, so it smears an atom (most
people reporting exactly one age, a count of zero) over the kernel's width, while the MLE keeps the
atom but fits the noise elsewhere with spikes.  Neither is right for the commonest real shape, a smooth
distribution with a few atoms.  This member takes the atoms from the MLE and the smoothness from
early stopping:

1. *Atoms.* A value ``v`` is an atom of an MLE ``p`` when ``p_v >= 0.05`` (:data:`_ATOM_MIN`) and
   ``p_v`` is at least 70% (:data:`_ATOM_SHARE`) of the MLE's mass within ``v +- 3``
   (:data:`_ATOM_RADIUS`): a spike, not a piece of a bump.  The member's atoms are those of the MLE
   on *every* training fold (:func:`_consensus`): the MLE's spikes where the truth is smooth move
   from fold to fold, a real atom is found in each.  (All folds but one, with 5% on every fold, was
   tried: a point mass under the Gaussian window of 751 whose MLE shared the atom with a neighbour on
   one fold, 0.62 and 0.34, went from TV 0.84 to 0.04, but on a fresh draw zero-inflated counts under
   the same window at 10^7 reports took a false atom at the bump's mode and left the target, TV 0.41 ->
   0.51: docs/estimation.md.)
2. *Start.* Each atom gets its MLE mass, rounded down to 1e-3 (so that ``regularization`` records
   the start exactly); the rest, at least 1e-3, is spread uniformly (:func:`_start`).
3. *Stop.* Plain EM from that start, stopped by the discrepancy principle at either target of
   :func:`_em_members._stopped_cols` (one run): the first step ``t >= 1`` where the deviance falls to
   the value expected under the fit (``("atoms", 0)``, the earlier stop) or to the number of observed
   outputs (``("atoms", 1)``, the classical target; the battery's ``"discrepancy-stopped EM"``); at most
   :data:`_em_members._STOP_CAP` steps.  On cheap dense channels (those where ``auto``'s path runs EM
   to the cap and along its flow, ``_em_members._with_flow``) the same run goes on to the cap
   (``("atoms", 2)``): with many reports the stops come before the smooth part is resolved (a spike of
   0.3 over a bump on 100 values, the Laplace design of (2, 1e-6, 20), 10^7 reports: the classical stop
   14.9 nats below the cap's iterate in held-out fit, a standard error of 8.1; the cap's TV 0.047 where
   ``auto`` chose the EM flow from the uniform start before, TV 0.087).  The held-out likelihood chooses
   among the three.

On the selection it is scored like every member (held-out likelihood of its fits on the training
folds, each started from its own fold's MLE masses at the common atoms; where the EM path has turned
down and the MLE is off the path, its fold fits are still made on those cheap channels, for the atoms
alone), and it has to earn its place
(``auto._choose``): it replaces the choice the rule makes without it only where the rule with it picks it
(it sits before the EM flow members, which gather an atom from a flat start only by running long enough
to sharpen every bump too) and its held-out log-likelihood is above that choice's.  Its start comes from
the MLE, so a tie is not enough: under a Gaussian window of 351 on zero-inflated counts (10^6 reports)
every fold's MLE put the atom at 1 instead of 0, the member was within the slack, 0.07 nats below the
flow member the rule chose otherwise, and would have taken TV from 0.32 to 0.56.  Where the rule with
it would replace it by the MLE (the stability switch, at a ratio of :data:`_ATOM_STABLE_RATIO`: on a
point mass the member keeps its start's uniform remainder, TV 0.008 against the MLE's 0.002 at 10^6
reports), the choice without it stands.

Measured: :mod:`sparseldp.estimation.auto`'s module docstring and docs/estimation.md.
"""

from __future__ import annotations

import numpy as np

from ._em_members import _STOP_CAP, _rest_outputs, _stopped_cols
from .model import _Model

# An atom of an MLE p: p_v >= _ATOM_MIN and p_v >= _ATOM_SHARE x the MLE's mass within v +- _ATOM_RADIUS.
_ATOM_MIN = 0.05
_ATOM_SHARE = 0.7
_ATOM_RADIUS = 3
# The start's masses are rounded down to this grid (regularization records them exactly), and the rest of the
# start's mass, spread uniformly, is at least this.
_ATOM_GRID = 1e-3
# The stability switch's ratio when auto's choice is this member (auto._choose).
_ATOM_STABLE_RATIO = 2.5


def _atom_mask(M: np.ndarray) -> np.ndarray:
    """``k x b`` bool: the atoms of each column of ``M`` (MLE fits, ``k x b``, nonnegative)."""
    P = M / M.sum(axis=0, keepdims=True)
    k = P.shape[0]
    cs = np.vstack([np.zeros((1, P.shape[1])), np.cumsum(P, axis=0)])
    i = np.arange(k)
    near = cs[np.minimum(i + _ATOM_RADIUS + 1, k)] - cs[np.maximum(i - _ATOM_RADIUS, 0)]
    return (P >= _ATOM_SHARE * near) & (P >= _ATOM_MIN)


def _consensus(M: np.ndarray) -> np.ndarray:
    """The positions that are atoms of the MLE on every fold (columns of ``M``)."""
    return np.flatnonzero(_atom_mask(M).all(axis=1))


def _masses(p: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The masses of the atoms ``idx`` of the MLE ``p`` for the start: rounded down to :data:`_ATOM_GRID`."""
    p = np.asarray(p, dtype=float)
    return np.floor(p[idx] / p.sum() / _ATOM_GRID) * _ATOM_GRID


def _start(k: int, idx: np.ndarray, masses: np.ndarray) -> np.ndarray:
    """The start: ``masses`` at ``idx`` and the rest (at least :data:`_ATOM_GRID`) uniform, normalized."""
    rest = max(1.0 - float(np.sum(masses)), _ATOM_GRID)
    p = np.full(k, rest / k)
    p[idx] += masses
    return p / p.sum()


def _seeded_stop(model: _Model, obs: np.ndarray, FA, FAT, C: np.ndarray, starts: np.ndarray, max_iter: int,
                 classic: bool = True, to_cap: bool = False):
    """EM from the rows of ``starts`` (``b x k``) on the columns of the counts ``C`` (``obs`` x b),
    each stopped at the discrepancy stops (at most ``min(_STOP_CAP, max_iter)`` steps): ``{0: (fits k x b,
    steps per column) at the deviance expected under the fit, 1: the same at the classical target}``
    (without ``classic``, only ``0``: the run ends at the earlier stop), and with ``to_cap`` ``2``: the run
    on to the cap (the classical stop then only within it, the cap's iterate where not reached)."""
    cap = min(_STOP_CAP, max_iter)
    Ps, st = _stopped_cols(FA, FAT, np.asarray(C, dtype=float), np.exp(model.log_cs[obs]), cap,
                           (), _rest_outputs(model, obs), to_cap=to_cap,
                           classic=("within" if to_cap else "until") if classic else None, start=starts)
    out = {0: (Ps[1], st), **({1: (Ps["classic"], Ps["classic_steps"])} if classic else {})}
    if to_cap:
        out[2] = (Ps["cap"], np.full(st.shape, cap))
    return out


def _fold_fits(model: _Model, obs: np.ndarray, FA, FAT, C: np.ndarray, M: np.ndarray, max_iter: int,
               to_cap: bool = False):
    """The members on each training fold (columns of ``C``; ``M`` their MLEs): ``({0: fits, 1: fits, 2: fits
    with to_cap}, atoms)`` (:func:`_seeded_stop`'s members), or ``(None, atoms)`` where the folds' MLEs have
    no common atom (:func:`_consensus`)."""
    idx = _consensus(M)
    if idx.size == 0:
        return None, idx
    starts = np.vstack([_start(model.k, idx, _masses(M[:, j], idx)) for j in range(M.shape[1])])
    return {w: v[0] for w, v in _seeded_stop(model, obs, FA, FAT, C, starts, max_iter, to_cap=to_cap).items()}, idx


def _refit(model: _Model, c_all: np.ndarray, idx: np.ndarray, mle: np.ndarray, max_iter: int, which: int = 1):
    """Member ``which`` (0: the stop at the expected deviance, 1: the classical one, 2: the cap) on all the
    counts ``c_all``: the atoms ``idx`` (:func:`_consensus`), their masses those of the MLE ``mle`` on all the counts.
    ``(obs, A, AT, c, p, steps, regularization's atoms)``, ``A, AT`` the exact products on the observed
    outputs ``obs`` (the estimate's log-likelihood and gap), ``c`` their counts."""
    obs = np.flatnonzero(c_all > 0)
    A, AT = model.columns(obs)
    FA, FAT = model.fast_columns(obs, (A, AT))
    c = c_all[obs]
    masses = _masses(mle, idx)
    # each member's run goes only as far as it needs: the expected-deviance stop no further than itself
    P, steps = _seeded_stop(model, obs, FA, FAT, c[:, None], _start(model.k, idx, masses)[None, :], max_iter,
                            classic=which == 1, to_cap=which == 2)[which]
    return obs, A, AT, c, P[:, 0], int(steps[0]), _describe_atoms(model.lo + idx, masses)


def _describe_atoms(values: np.ndarray, masses: np.ndarray) -> str:
    """``"v:m,v:m"``: the start's atoms (domain values) and masses, as ``regularization`` records them."""
    return ",".join(f"{int(v)}:{m:.3f}" for v, m in zip(values, masses))


def _parse_atoms(text: str, lo: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions and masses of :func:`_describe_atoms`'s ``text`` on the domain ``lo..lo + k - 1``
    (``ValueError`` where it does not read as atoms of that domain)."""
    pairs = [part.split(":") for part in text.split(",")]
    if not text or any(len(pair) != 2 for pair in pairs):
        raise ValueError(text)
    idx = np.array([int(v) - lo for v, _ in pairs])
    masses = np.array([float(m) for _, m in pairs])
    if (np.any(idx < 0) or np.any(idx >= k) or np.unique(idx).size != idx.size or np.any(masses <= 0)
            or float(masses.sum()) > 1.0 + 1e-9):
        raise ValueError(text)
    return idx, masses
