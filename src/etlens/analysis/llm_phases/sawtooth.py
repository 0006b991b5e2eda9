"""Generate sessions of a static-shape LLM dump, from the sawtooth of its attention time.

A static-shape program (``--disable_dynamic_shape``) takes one token per run, prompt and generated
tokens alike, so nothing in a run's shapes says where a new generate session starts. What does:
the attention kernel attends to every cached position, so its time grows with the position and
drops back when a new session restarts at position 0. A dump of several sessions is a sawtooth.

This module fits that sawtooth to the per-run attention time (``RunSignals.attention``: the SDPA
time divided by the run's overall slowdown) as a change-point problem:

- the model: one curve ``g(p)``, attention time at position ``p``, shared by every session (same
  program, same kernels) and non-decreasing (more cached positions never take less); not a line:
  the kernel changes its blocking as the cache grows (ExecuTorch's custom SDPA steps up near
  position 96). Fitted per position as a low percentile (:data:`PCT`) of the ``2 * SMOOTH + 1``
  runs nearest it, made monotone (pool adjacent violators), corrected by the residuals' percentile
  and refitted without the runs :data:`OUTLIER` above it;
- the cost of a run is asymmetric in ``r = log(observed / g(p))``: a busy CPU, a thread pool
  waiting for a core, a cold cache only ever *add* time, so a run far above the curve costs little
  (capped at :data:`ABOVE_CAP`), while a run below it is strong evidence that its position is
  wrong and costs :data:`BELOW` per unit of ``-r``;
- the steps: the starts a threshold on the drop found (``initial``; label.py) are pruned, one at a
  time while that lowers the total cost, each candidate scored with a curve refitted without it,
  plus :data:`NEW_SESSION` per session (a reset must pay for itself); then, their number fixed
  (or given: ``--prompt-len`` per session, each session at least its prompt long), the starts are
  placed by a dynamic program over segment starts (vectorised over candidate starts: O(runs x
  :data:`MAX_SESSION`)) and the curve refitted, a few rounds; last, each start is moved up to
  :data:`SHIFT` runs while the cost with a refitted curve falls (curve and starts fitted to each
  other can settle a start a few runs off).

The fit never *adds* a session the threshold did not see: a curve fitted to a segmentation that
misses a reset is flattened by it (monotone through the missed drop) and predicts no reset there.

Why not the threshold alone: under load whole stretches of runs are slowed (seen on a 2-core CI
machine: 3 runs in 10, for 5-10x), so a window's minimum can jump up and back for reasons that have
nothing to do with positions; a false new session in a one-session dump was the result. In the fit a
reset has to pay for itself over every run that follows it: the runs after a true reset sit far
below the curve the old positions predict, for as long as the session lasts. What stays open: when
the runs just before a start are slowed, they read like the new session's first runs; the start
is then placed up to a few runs early.

Example::

    from etlens.analysis.llm_phases.sawtooth import fit_sessions
    fit = fit_sessions(sig.attention, sig.work, initial=[0, 37, 64])   # count unknown: prune + place
    fit = fit_sessions(sig.attention, sig.work, n_sessions=3, min_len=[4, 12, 1])   # --prompt-len 4,12,1
    fit.starts, fit.drops
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import numpy.typing  # noqa: F401  (np.typing in annotations)

__all__ = ["SawtoothFit", "fit_sessions", "BELOW", "ABOVE_CAP", "NEW_SESSION", "MAX_SESSION", "PCT", "SMOOTH",
           "OUTLIER", "SHIFT"]

#: cost per unit of ``-log(observed / predicted)`` of a run *below* the line (cannot be noise)
BELOW = 3.0
#: most a run *above* the line costs (noise only adds time: a spike is not evidence)
ABOVE_CAP = 0.4
#: cost of one more session when their number is unknown: a reset must buy more than this
NEW_SESSION = 2.0
#: longest session considered (runs); bounds the work at O(runs x this)
MAX_SESSION = 4096
#: how far (runs) a start may move when polished
SHIFT = 6
#: fewest usable runs for a fit at all
MIN_RUNS = 8
#: positions on each side pooled for the curve's value at a position
SMOOTH = 4
#: the percentile of those runs taken as the curve's value (noise only adds time: a low one)
PCT = 25
#: ``log`` of how far above the curve a run is noise, left out of the next fit (1.3x)
OUTLIER = math.log(1.3)


@dataclass
class SawtoothFit:
    """``starts``: session start runs (0 first); ``curve_ms``: the fitted attention time by position (ms per
    unit of work, non-decreasing); ``drops``: per later start, the fall of the fitted attention time there
    (new over old, < 1); ``cost``: the fit's total cost."""

    starts: list[int]
    curve_ms: np.ndarray
    drops: dict[int, float]
    cost: float


def _loss(r: np.ndarray) -> np.ndarray:
    """Asymmetric cost of log-residuals (NaN: an unusable run, free)."""
    out = np.where(r < 0, -BELOW * r, np.minimum(r, ABOVE_CAP))
    return np.where(np.isfinite(out), out, 0.0)


def _positions(k: int, starts: Sequence[int]) -> np.ndarray:
    pos = np.zeros(k)
    bounds = list(starts) + [k]
    for s in range(len(starts)):
        pos[bounds[s]:bounds[s + 1]] = np.arange(bounds[s + 1] - bounds[s])
    return pos


def _isotonic(v: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence nearest ``v`` in least squares (pool adjacent violators)."""
    vals: list[float] = []
    counts: list[int] = []
    for x in v:
        vals.append(float(x))
        counts.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            n = counts[-2] + counts[-1]
            vals[-2] = (vals[-2] * counts[-2] + vals[-1] * counts[-1]) / n
            counts[-2] = n
            vals.pop()
            counts.pop()
    return np.asarray(np.repeat(vals, counts), float)


def _windowed_percentile(p: np.ndarray, v: np.ndarray, length: int) -> np.ndarray:
    """Per position ``q < length``: the :data:`PCT` percentile of ``v`` over the ``2 * SMOOTH + 1`` runs
    nearest ``q`` in position order (``p`` sorted; all of them when fewer), one vectorised pass."""
    need = 2 * SMOOTH + 1
    if len(v) == 0:
        return np.full(length, np.nan)
    if len(v) <= need:
        return np.full(length, float(np.percentile(v, PCT)))
    pct = np.percentile(np.lib.stride_tricks.sliding_window_view(v, need), PCT, axis=1)
    first = np.clip(np.searchsorted(p, np.arange(length)) - need // 2, 0, len(v) - need)
    return pct[first]


def _monotone(out: np.ndarray) -> np.ndarray:
    known = np.isfinite(out)
    if not known.any():
        return np.zeros(len(out))
    idx = np.arange(len(out))
    return _isotonic(np.interp(idx, idx[known], out[known]))  # gaps (and the ends) from their neighbours


def _fit_curve(logy: np.ndarray, pos: np.ndarray, length: int) -> np.ndarray:
    """``log`` attention time by position, ``length`` positions, non-decreasing (attention over more cached
    positions never takes less). Not a line: the kernel changes its blocking as the cache grows (a step
    near position 96 in ExecuTorch's custom SDPA).

    Two passes: a low percentile of the runs around each position (the fast runs follow the position,
    noise only adds time), made monotone; then the same percentile of the runs' residuals from that
    first curve, added back. The first pass alone reads low where the curve rises (its window reaches
    earlier positions), which placed every later start early; the residuals carry no such slope. Then
    again without the runs more than :data:`OUTLIER` above the curve: a stretch of runs the machine
    slowed longer than the window would otherwise lift the curve, and monotonicity would keep it up
    for every later position."""
    usable = np.isfinite(logy)
    ok = usable.copy()
    pos = pos.astype(np.int64)
    curve = np.zeros(length)
    for _ in range(3):
        order = np.argsort(pos[ok], kind="stable")
        p, v = pos[ok][order], logy[ok][order]
        first = _monotone(_windowed_percentile(p, v, length))
        base = first[np.minimum(p, length - 1)]
        curve = _monotone(first + np.nan_to_num(_windowed_percentile(p, v - base, length)))
        # runs far above the curve are noise (a stretch the machine slowed): fit again without them
        keep = usable & ~(logy - curve[np.minimum(pos, length - 1)] > OUTLIER)
        if keep.sum() < MIN_RUNS or (keep == ok).all():
            break
        ok = keep
    return curve


def _segment_dp(logy: np.ndarray, curve: np.ndarray, n_sessions: Optional[int],
                min_len: Sequence[int], max_len: int) -> tuple[list[int], float]:
    """Session starts minimising the summed cost (see the module docstring)."""
    k = len(logy)
    big = 1e18
    # seg[s]: cost of runs s..e-1 as one session starting at s, for the current end e (updated per run)
    seg = np.zeros(k)
    idx = np.arange(k)
    if n_sessions is None:
        # best[e]: least cost of runs 0..e-1 cut into sessions, the last ending at e-1
        best = np.full(k + 1, big)
        arg = np.zeros(k + 1, np.int64)
        best[0] = 0.0
        need = max(1, min(min_len) if min_len else 1)
        for e in range(1, k + 1):
            j = e - 1
            lo = max(0, e - max_len)
            s = idx[lo:e]
            seg[lo:e] += _loss(logy[j] - curve[np.minimum(j - s, len(curve) - 1)])
            cand_end = e - need + 1
            if cand_end <= lo:
                continue
            starts = s[: cand_end - lo]
            tot = best[starts] + seg[starts] + np.where(starts > 0, NEW_SESSION, 0.0)
            i = int(np.argmin(tot))
            best[e], arg[e] = float(tot[i]), int(starts[i])
        out, e = [], k
        while e > 0:
            s0 = int(arg[e])
            out.append(s0)
            e = s0
        return sorted(out), float(best[k])
    n = n_sessions
    lens = [max(1, int(x)) for x in (list(min_len) + [1] * n)[:n]]
    best2 = np.full((n + 1, k + 1), big)
    arg2 = np.zeros((n + 1, k + 1), np.int64)
    best2[0][0] = 0.0
    for e in range(1, k + 1):
        j = e - 1
        lo = max(0, e - max_len)
        s = idx[lo:e]
        seg[lo:e] += _loss(logy[j] - curve[np.minimum(j - s, len(curve) - 1)])
        for m in range(1, n + 1):
            cand_end = e - lens[m - 1] + 1
            if cand_end <= lo:
                continue
            starts = s[: cand_end - lo]
            tot = best2[m - 1][starts] + seg[starts]
            i = int(np.argmin(tot))
            best2[m][e], arg2[m][e] = float(tot[i]), int(starts[i])
    if best2[n][k] >= big / 2:
        return [], math.inf
    out, e = [], k
    for m in range(n, 0, -1):
        s0 = int(arg2[m][e])
        out.append(s0)
        e = s0
    return sorted(out), float(best2[n][k])


def fit_sessions(attention: "np.typing.ArrayLike", work: "Optional[np.typing.ArrayLike]" = None,
                 n_sessions: Optional[int] = None, min_len: Optional[Sequence[int]] = None,
                 initial: Optional[Sequence[int]] = None, rounds: int = 3) -> Optional[SawtoothFit]:
    """Fit the sawtooth (module docstring) to per-run ``attention``; None when fewer than :data:`MIN_RUNS`
    runs have a usable attention time (no attention kernel seen: nothing to fit).

    ``work``: each run's overall slowdown; runs slowed far beyond a busy CPU's usual (3x the median) are
    left out. ``n_sessions``: their number when known (``--prompt-len`` per session), with ``min_len``
    the fewest runs of each; ``initial``: the threshold's starts (the candidates when the number is
    unknown; the first segmentation to fit a curve to either way; default: one session)."""
    y = np.asarray(attention, float).copy()
    k = len(y)
    w = np.asarray(work, float) if work is not None else np.zeros(0)
    if len(w) == k:
        if np.isfinite(w).any():
            y[w > 3.0 * float(np.nanmedian(w))] = np.nan
    y[~(y > 0)] = np.nan
    if int(np.isfinite(y).sum()) < MIN_RUNS:
        return None
    logy = np.log(y)
    span = min(k, MAX_SESSION)
    ml = list(min_len or [1])
    start = sorted(set([0, *(initial or [])]))
    if n_sessions is None:
        # the threshold's resets, each kept only while it pays for itself against a refitted curve, then
        # placed by the fit with their number fixed
        n_sessions, ml = len(_prune(logy, start, span)), [1]
    found = _refine(logy, start, n_sessions, ml, span, rounds)
    if found is None:
        return None
    found = _polish(logy, found, ml, span)
    cost, curve = _total(logy, found, span, False)
    best = (cost, found, curve)
    cost, fit_starts, curve = best
    bounds = fit_starts + [k]
    drops = {}
    for i in range(1, len(fit_starts)):
        last = min(bounds[i] - bounds[i - 1] - 1, span - 1)
        drops[fit_starts[i]] = float(np.exp(curve[0] - curve[last]))
    return SawtoothFit(starts=fit_starts, curve_ms=np.exp(curve), drops=drops, cost=cost)


def _total(logy: np.ndarray, starts: list[int], span: int, penalised: bool) -> tuple[float, np.ndarray]:
    """Cost of ``starts`` with the curve fitted to them (plus :data:`NEW_SESSION` per later start when
    ``penalised``), and that curve."""
    pos = _positions(len(logy), starts).astype(np.int64)
    curve = _fit_curve(logy, pos, span)
    cost = float(_loss(logy - curve[np.minimum(pos, span - 1)]).sum())
    return cost + (NEW_SESSION * (len(starts) - 1) if penalised else 0.0), curve


def _refine(logy: np.ndarray, starts: list[int], n_sessions: Optional[int], min_len: list[int], span: int,
            rounds: int) -> Optional[list[int]]:
    """Curve from ``starts``, starts from the curve, until they repeat (at most ``rounds``)."""
    seen: set[tuple[int, ...]] = set()
    for _ in range(max(1, rounds)):
        curve = _fit_curve(logy, _positions(len(logy), starts), span)
        found, _ = _segment_dp(logy, curve, n_sessions, min_len, span)
        if not found:
            return None
        if tuple(found) in seen:
            break
        seen.add(tuple(found))
        starts = found
    return starts


def _polish(logy: np.ndarray, starts: list[int], min_len: list[int], span: int) -> list[int]:
    """Move each later start up to :data:`SHIFT` runs either way while the cost with a refitted curve falls:
    the curve and the starts were fitted to each other, which can settle a start a few runs off."""
    starts = list(starts)
    k = len(logy)
    cur, _ = _total(logy, starts, span, False)
    for _ in range(2):
        moved = False
        for i in range(1, len(starts)):
            lo = starts[i - 1] + max(1, min_len[i - 1] if i - 1 < len(min_len) else 1)
            hi = (starts[i + 1] if i + 1 < len(starts) else k) - max(1, min_len[i] if i < len(min_len) else 1)
            for cand in range(max(lo, starts[i] - SHIFT), min(hi, starts[i] + SHIFT) + 1):
                if cand == starts[i]:
                    continue
                trial = starts[:i] + [cand] + starts[i + 1:]
                cost, _ = _total(logy, trial, span, False)
                if cost < cur - 1e-9:
                    cur, starts, moved = cost, trial, True
        if not moved:
            break
    return starts


def _prune(logy: np.ndarray, starts: list[int], span: int) -> list[int]:
    """Drop later starts one at a time while that lowers the total cost (each candidate with its own curve):
    a reset found against one curve must still pay for itself once the curve is refitted without it."""
    cur, _ = _total(logy, starts, span, True)
    while len(starts) > 1:
        trials = [(_total(logy, [s for s in starts if s != x], span, True)[0], x) for x in starts[1:]]
        cost, x = min(trials)
        if cost > cur:
            break
        cur, starts = cost, [s for s in starts if s != x]
    return starts
