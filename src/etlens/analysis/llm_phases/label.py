"""Label an LLM's forward runs prefill / decode and split them into sessions, from timings and the program.

What a timing-only ETDump and its program tell, and how each label is found (every label here is
``inferred``; labels read from logged shapes come from :mod:`etlens.analysis.llm`):

- **the program** (:mod:`.program`): a *dynamic* tokens length means a prefill is one call of the
  whole prompt and every decode step is one call of one token (the KV cache holds the rest); a
  *static* length (``--disable_dynamic_shape``) means every call takes the same number of tokens
  (read), so a prompt is fed token by token;
- **the order**: the first run of a dump starts a session (its cache is empty), a session is a
  prefill then decode steps, and a new session starts with a prefill after decodes;
- **the duration profile** (:mod:`.signals`): a prefill of ``n`` tokens makes most kernels work on
  ``n`` rows, so its ``work`` (median per-kernel slowdown) stands out from the decode runs around it;
  decode runs right after a prefill can be slow too (the delegate re-plans for the new shape), so
  a prefill is the *first* run of such a bump, and only one run per bump is taken;
- **the attention time** grows with the position in the cache and drops when a session restarts
  at position 0 (used to place sessions where the work bump is weak).

``prompt_lens`` (``--prompt-len N[,N...]``) makes the token counts exact: one value for every
session, or one per session (the number of sessions is then known, and the boundaries are the
best-scoring runs in order). What cannot be told apart, and is therefore marked in the notes: on a
static-shape program prompt tokens and generated tokens run the same kernels on the same shapes,
so without ``--prompt-len`` only the first run of a session is known to be its prefill; with
dynamic shapes a one-token prompt is a run like any decode step.

Example::

    from etlens.analysis.llm_phases import forward_signals, label_runs, llm_inputs
    labels = label_runs(forward_signals(insp, blocks), llm_inputs(record=insp.record), prompt_lens=[8])
    labels.phase[:3], labels.session[:3], labels.n_tokens[:3]
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from ...errors import EtlensError
from .program import LlmInputs
from .sawtooth import fit_sessions
from .signals import RunSignals

__all__ = ["PhaseLabels", "label_runs", "parse_prompt_lens", "PEAK", "CONTRAST", "PEAK_ALONE", "RESET", "WINDOW"]

#: a run is a prefill when its work is this many times the decode runs' around it ...
PEAK = 1.8
#: ... and its heavy-over-light contrast (:mod:`.signals`) this many times theirs (without an ETRecord,
#: no contrast: the work alone must reach :data:`PEAK_ALONE`)
CONTRAST = 1.45
PEAK_ALONE = 5.0
#: a session starts where the attention time drops back to its floor by this much (log of the ratio)
RESET = 0.3
#: runs on each side that make a run's local baseline
WINDOW = 8
#: first runs of a dump left out of the attention-reset signal (thread pools and caches warming up)
_WARMUP = WINDOW
#: rough growth of the contrast (else the work) per prompt token, for estimates only
_TOKEN_CONTRAST = 0.1
_TOKEN_WORK = 0.15


@dataclass
class PhaseLabels:
    """Per run (dump order): ``phase``, ``session``, ``n_tokens``, ``position`` (the first token's place in the
    cache), ``phase_source`` / ``tokens_source`` (``read``, ``given`` or ``inferred``), ``evidence`` (why)."""

    phase: list[str] = field(default_factory=list)
    session: list[int] = field(default_factory=list)
    n_tokens: list[Optional[int]] = field(default_factory=list)
    position: list[Optional[int]] = field(default_factory=list)
    phase_source: list[str] = field(default_factory=list)
    tokens_source: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def parse_prompt_lens(text: str | Sequence[int] | None) -> Optional[list[int]]:
    """``"8"`` / ``"8,1,32"`` / ``[8, 1]`` -> a list of positive ints (None for None / empty)."""
    if text is None:
        return None
    if isinstance(text, str):
        parts = [p.strip() for p in text.split(",") if p.strip()]
        try:
            vals = [int(p) for p in parts]
        except ValueError:
            raise EtlensError(f"--prompt-len {text!r}: give the prompt's token count, or one per session "
                              "separated by commas (e.g. 8 or 8,1,32)") from None
    else:
        vals = [int(v) for v in text]
    if not vals:
        return None
    if any(v < 1 for v in vals):
        raise EtlensError(f"--prompt-len {','.join(map(str, vals))}: every prompt has at least 1 token")
    return vals


def _local_baseline(w: np.ndarray, j: int, skip: int = 1) -> float:
    """Median work of the runs within :data:`WINDOW` of ``j``, leaving out ``j`` and the ``skip`` runs after it."""
    lo, hi = max(0, j - WINDOW), min(len(w), j + WINDOW + 1 + skip)
    idx = [i for i in range(lo, hi) if not (j <= i <= j + skip)]
    if not idx:
        return float(np.median(w)) if len(w) else 1.0
    return float(np.median(w[idx]))


def _around(x: np.ndarray, skip: int = 1) -> np.ndarray:
    """Per run ``j``: the median of ``x`` over the :data:`WINDOW` runs on each side, leaving out ``j`` and the
    ``skip`` runs after it (vectorised over sliding windows; NaN where nothing is known)."""
    k = len(x)
    if k == 0:
        return np.zeros(0)
    pad = np.full(k + 2 * WINDOW + skip, np.nan)
    pad[WINDOW:WINDOW + k] = x
    win = np.lib.stride_tricks.sliding_window_view(pad, 2 * WINDOW + 1 + skip)[:k].copy()
    win[:, WINDOW:WINDOW + 1 + skip] = np.nan
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN window: NaN, handled by the callers
        return np.nanmedian(win, axis=1)


def _peaks(w: np.ndarray) -> np.ndarray:
    base = _around(w)
    base = np.where(np.isfinite(base), base, float(np.median(w)) if len(w) else 1.0)
    return w / np.maximum(base, 1e-9)


def _relative_contrast(c: np.ndarray) -> np.ndarray:
    """Each run's contrast over the median contrast of the runs around it (NaN where unknown)."""
    if not np.isfinite(c).any():
        return np.full(len(c), np.nan)
    return c / np.maximum(_around(c), 1e-9)


def _reset_scores(att: np.ndarray, mask: np.ndarray, work: np.ndarray) -> np.ndarray:
    """Per run ``j``: how much the attention time drops from the runs before ``j`` to the runs from ``j`` on
    (``log`` of the ratio, >0 = a drop, 0 = none), where the runs from ``j`` on are back at the floor
    (the attention time at the first positions of a session).

    Each side's level is its lower envelope (its smallest value): a busy CPU or a thread-pool wait
    only ever adds time, so the smallest values are the ones that follow the position. Runs in
    ``mask`` (prefill-sized), runs slowed as a whole (``work``) and the first :data:`_WARMUP` runs
    of the dump (first-run effects) are left out."""
    k = len(att)
    w = np.asarray(work, float)
    # the attention is already per unit of work: only runs slowed far beyond a busy CPU's usual are left out
    busy = w > 3.0 * float(np.median(w)) if len(w) else np.zeros(k, bool)
    a = np.where(mask | busy | ~np.isfinite(att), np.nan, att)
    a[:_WARMUP] = np.nan
    out = np.zeros(k)
    good = a[np.isfinite(a)]
    if len(good) < 8:
        return out
    floor = float(np.percentile(good, 10))

    def low(x: np.ndarray) -> float:
        x = np.sort(x[np.isfinite(x)])
        return float(x[0]) if len(x) >= 4 else math.nan

    for j in range(1, k):
        before, after = low(a[max(0, j - WINDOW):j]), low(a[j:j + WINDOW])
        if before == before and after == after and 0 < after <= 1.25 * floor and before > after:
            out[j] = math.log(before / after)
            if a[j] == a[j] and a[j] <= 1.2 * after:  # the drop is at this very run, not one later
                out[j] += 0.05
    return out


def _best_boundaries(score: np.ndarray, n: int, min_len: Sequence[int]) -> list[int]:
    """``n`` ordered session starts after run 0 maximising the summed score, where session ``s`` (0-based)
    holds at least ``min_len[s]`` runs (a dynamic program over positions). ``score`` is one row of scores
    per run, or one row per boundary (``score[s - 1][j]``: boundary ``s`` at run ``j``)."""
    score = np.asarray(score, float)
    if score.ndim == 1:
        score = np.tile(score, (max(n, 1), 1))
    k = score.shape[1]
    if n <= 0:
        return []
    neg = -1e18
    # best[s][j]: best total with the s-th boundary (1-based) at run j
    best = np.full((n + 1, k), neg)
    back = np.zeros((n + 1, k), np.int64)
    best[0][0] = 0.0
    for s in range(1, n + 1):
        need = max(1, min_len[s - 1])
        prev_best = np.full(k, neg)
        prev_arg = np.zeros(k, np.int64)
        run_max, run_arg = neg, 0
        for j in range(k):
            # boundary s-1 at i <= j - need
            i = j - need
            if i >= 0 and best[s - 1][i] > run_max:
                run_max, run_arg = best[s - 1][i], i
            prev_best[j], prev_arg[j] = run_max, run_arg
        for j in range(1, k):
            if prev_best[j] > neg / 2:
                best[s][j] = prev_best[j] + score[s - 1][j]
                back[s][j] = prev_arg[j]
    last_need = max(1, min_len[n]) if len(min_len) > n else 1
    cand = [(best[n][j], j) for j in range(1, k - last_need + 1) if best[n][j] > neg / 2]
    if not cand:
        return []
    _, j = max(cand)
    out = [j]
    for s in range(n, 1, -1):
        j = int(back[s][j])
        out.append(j)
    return sorted(out)


def label_runs(sig: RunSignals, facts: LlmInputs, prompt_lens: Optional[Sequence[int]] = None) -> PhaseLabels:
    """Label every run of ``sig`` (see the module docstring); ``facts`` from :func:`~.program.llm_inputs`."""
    k = len(sig)
    lab = PhaseLabels()
    if k == 0:
        return lab
    lens = list(prompt_lens) if prompt_lens else None
    static = facts.dynamic is False
    per_call = facts.tokens_per_call or 1
    w = np.asarray(sig.work, float)
    peaks = _peaks(w)
    rel = _relative_contrast(np.asarray(sig.contrast, float))
    if static:
        starts, ev = _static_sessions(sig, lens, k)
    else:
        starts, ev = _dynamic_sessions(w, peaks, rel, sig, lens, k)
    bounds = starts + [k]
    for s in range(len(starts)):
        a, b = bounds[s], bounds[s + 1]
        p_given = None if lens is None else (lens[s] if len(lens) > 1 else lens[0])
        if static:
            n_prefill = min(b - a, -(-p_given // per_call)) if p_given else 1
        else:
            n_prefill = 1
        pos = 0
        for j in range(a, b):
            is_pre = j - a < n_prefill
            lab.phase.append("prefill" if is_pre else "decode")
            lab.session.append(s)
            lab.phase_source.append("inferred")
            if static:
                n = per_call
                lab.tokens_source.append("read")
            elif is_pre and p_given:
                n = p_given
                lab.tokens_source.append("given")
            elif is_pre:
                found_by_reset = ev.get(j, "").startswith("attention time drops")
                n = 1 if found_by_reset else _estimate_tokens(rel[j], peaks[j])
                if facts.max_tokens:
                    n = min(n, facts.max_tokens)
                lab.tokens_source.append("inferred")
            else:
                n = 1
                lab.tokens_source.append("inferred")
            lab.n_tokens.append(n)
            lab.position.append(pos)
            pos += n
            if is_pre and static and p_given:
                lab.evidence.append(f"prompt token {j - a + 1} of {p_given} (--prompt-len), session start: "
                                    + ev.get(a, "first run"))
            elif is_pre:
                lab.evidence.append(ev.get(j, "first run of the dump"))
            else:
                lab.evidence.append("after the prefill: one token per step (KV cache)")
    lab.notes += _notes(facts, lens, static, len(starts))
    return lab


def _estimate_tokens(rel: float, peak: float) -> int:
    """A rough prompt length from how much a prefill stood out (documented as an estimate)."""
    if rel == rel:
        return max(2, int(round(1 + (rel - 1) / _TOKEN_CONTRAST)))
    return max(2, int(round(1 + (peak - 1) / _TOKEN_WORK)))


def _is_prefill(j: int, w: np.ndarray, peaks: np.ndarray, rel: np.ndarray, med: float) -> bool:
    if rel[j] == rel[j]:
        # the contrast is what load cannot fake: a strong one needs less of the overall work (a 12-token
        # prompt of an XNNPACK build whose delegated kernels are left out of the work: 1.45x work, 2.5x contrast)
        return bool((peaks[j] >= PEAK and rel[j] >= CONTRAST) or (peaks[j] >= 1.25 and rel[j] >= 1.6 * CONTRAST))
    lo, hi = max(0, j - 2), min(len(w), j + 3)
    return bool(peaks[j] >= PEAK_ALONE and w[j] >= 1.8 * med and w[j] >= w[lo:hi].max())


def _dynamic_sessions(w: np.ndarray, peaks: np.ndarray, rel: np.ndarray, sig: RunSignals,
                      lens: Optional[list[int]], k: int) -> tuple[list[int], dict[int, str]]:
    ev = {0: "first run of the dump (empty cache)"}
    big = peaks >= PEAK
    reset = _reset_scores(np.asarray(sig.attention, float), big | np.roll(big, 1), w)
    size = np.log(np.maximum(peaks, 1e-9)) + np.where(
        np.isfinite(rel), 2.0 * np.log(np.maximum(np.nan_to_num(rel, nan=1.0), 1e-9)), 0.0)
    # where the contrast is known, a run that worked harder without its heavy kernels gaining on the light
    # ones was slowed by the machine, not given more tokens: its size does not place a session start
    size = np.where(np.isfinite(rel) & (np.nan_to_num(rel, nan=1.0) < 1.15), 0.0, size)
    if lens is not None and len(lens) > 1:
        if len(lens) > k:
            raise EtlensError(f"--prompt-len gives {len(lens)} sessions but the dump has {k} forward run(s)")
        free, free_ev = _dynamic_sessions(w, peaks, rel, sig, None, k)
        if len(free) == len(lens):  # the sessions found without the lengths agree on their number: keep them
            for j in free[1:]:
                ev[j] = free_ev[j] + f", session {free.index(j)} of {len(lens)} (--prompt-len)"
            return free, ev
        # else place exactly that many: the best-scoring runs in order (a dynamic program)
        # a prompt of one or two tokens does not stand out: only the position reset can place its session
        # (a little of the size still breaks ties between the runs of one reset plateau)
        scores = [reset + (size if p >= 3 else 0.25 * size) for p in lens[1:]]
        # the run after a prefill may be slow too: never two session starts in a row
        starts = [0] + _best_boundaries(np.array(scores), len(lens) - 1, [2] * len(lens))
        for j in starts[1:]:
            ev[j] = (f"work {peaks[j]:.1f}x the decode runs around it" if peaks[j] >= PEAK else
                     "attention time drops (position reset)" if reset[j] > 0 else "best remaining candidate") \
                + f", session {starts.index(j)} of {len(lens)} (--prompt-len)"
        return starts, ev
    med = float(np.median(w))
    starts = [0]
    for j in range(1, k):
        if _is_prefill(j, w, peaks, rel, med) and starts[-1] < j - 1:
            starts.append(j)
            ev[j] = f"work {peaks[j]:.1f}x the decode runs around it" + (
                f", heavy kernels {rel[j]:.1f}x the light ones (more tokens)" if rel[j] == rel[j] else "")
    # after a prefill the next runs' attention is often slowed for a while (caches, thread pools): not a
    # position, so those runs are left out of the reset signal
    after = np.zeros(k, bool)
    for s0 in starts:
        after[s0:s0 + WINDOW] = True
    att = np.asarray(sig.attention, float)
    reset = _reset_scores(att, big | after, w)
    return _add_resets(starts, ev, reset, big, size, att), ev


def _first_at_floor(att: np.ndarray, j: int, end: int) -> Optional[int]:
    """The first run of ``j..end`` whose attention time is back at the level of the runs after ``end`` (within
    1.2x of their lowest): the first run of the new session that the machine did not slow."""
    after = att[end + 1:end + 1 + WINDOW]
    after = after[np.isfinite(after)]
    if len(after) == 0:
        return None
    low = 1.2 * float(after.min())
    return next((i for i in range(j, end + 1) if att[i] == att[i] and att[i] <= low), None)


def _add_resets(starts: list[int], ev: dict[int, str], reset: np.ndarray,
                big: Optional[np.ndarray] = None, size: Optional[np.ndarray] = None,
                att: Optional[np.ndarray] = None) -> list[int]:
    """Session starts where the attention time drops back to its floor by at least :data:`RESET`, away from
    the starts already found. Every run up to :data:`WINDOW` before a reset scores about the same (its
    window already reaches the new session), and so do the first runs of the new session while they
    are slowed (their attention is not at the floor yet): of such a plateau the start is the first run
    whose attention (``att``) is back at the floor, or the run just before it when that one looks like
    a prefill (``size``: work and contrast, dynamic shapes), else the last run of the top scores; with
    ``big`` (prefill-sized runs) a prefill just before it is the start instead."""
    k = len(reset)
    out = list(starts)
    j = 1
    while j < k:
        if reset[j] < RESET:
            j += 1
            continue
        end = j
        while end + 1 < k and reset[end + 1] >= RESET:
            end += 1
        top = float(reset[j:end + 1].max())
        b = max(i for i in range(j, end + 1) if reset[i] >= top - 0.02)
        at_floor = _first_at_floor(att, j, end) if att is not None else None
        if size is not None:
            near = [i for i in range(j, end + 1) if reset[i] >= top - 0.15]
            best = max(near, key=lambda i: size[i])
            if size[best] >= math.log(1.15):  # a prompt of 2+ tokens: the run that worked hardest
                b = best
            elif at_floor is not None:
                b = at_floor
        elif at_floor is not None:
            b = at_floor
        if big is not None and b > 0 and big[b - 1] and not big[b]:
            b -= 1
        if all(abs(b - x) > WINDOW for x in out):  # a drop within a window of a start is that start's
            out.append(b)
            ev[b] = f"attention time drops back to its floor (position reset, {math.exp(-reset[b]):.2f}x)"
        j = end + 1
    return sorted(out)


def _static_sessions(sig: RunSignals, lens: Optional[list[int]], k: int) -> tuple[list[int], dict[int, str]]:
    """Session starts of a static-shape dump: the sawtooth fit of the attention time (:mod:`.sawtooth`), started
    from the threshold resets; with ``lens`` of several sessions their number is known, each at least its
    prompt long. Without a usable attention time: the threshold resets alone (none: one session)."""
    ev = {0: "first run of the dump (empty cache)"}
    given = list(lens or [])
    many = len(given) > 1
    need = sum(given if many else given[:1])
    if need > k:
        raise EtlensError(f"--prompt-len {','.join(map(str, given))}: a static-shape program feeds "
                          f"{'each prompt' if many else 'the prompt'} one token per run "
                          f"({need} runs), but the dump has only {k} forward run(s)")
    att = np.asarray(sig.attention, float)
    reset = _reset_scores(att, np.zeros(k, bool), np.asarray(sig.work, float))
    initial = _add_resets([0], {}, reset, att=att)
    fit = fit_sessions(att, np.asarray(sig.work, float), n_sessions=len(given) if many else None,
                       min_len=given or None, initial=initial)
    if fit is not None:
        starts = fit.starts
        for i, j in enumerate(starts[1:], 1):
            ev[j] = (f"attention time drops back to its floor (position reset: the sawtooth fit predicts "
                     f"{fit.drops[j]:.2f}x)" + (f", session {i} of {len(given)} (--prompt-len)" if many else ""))
        return starts, ev
    if many:
        starts = [0] + _best_boundaries(reset, len(given) - 1, given)
        for j in starts[1:]:
            ev[j] = (f"attention time drops (position reset), session {starts.index(j)} of {len(given)} "
                     "(--prompt-len)")
        return starts, ev
    starts = _add_resets([0], ev, reset)
    if lens:  # each session at least its prompt long
        keep = [0]
        for j in starts[1:]:
            if j - keep[-1] >= lens[0] and k - j >= lens[0]:
                keep.append(j)
        starts = keep
    return starts, ev


def _notes(facts: LlmInputs, lens: Optional[list[int]], static: bool, sessions: int) -> list[str]:
    out = ["no intermediate outputs (a timing-only dump): phases are inferred from the program and the run "
           "timings, not read from logged shapes; " + facts.describe()]
    if static and not lens:
        out.append("static shapes: prompt tokens and generated tokens run the same kernels on the same shapes, so "
                   "the prompt's length cannot be told from the dump: only the first run of a session is labelled "
                   "prefill, and sessions are not split; pass --prompt-len N (or N1,N2,... per session) for exact "
                   "labels")
    elif static and lens and len(lens) > 1:
        out.append(f"static shapes, {len(lens)} sessions (--prompt-len): sessions placed where the attention time "
                   "drops back (a position reset), each at least its prompt long")
    elif not lens:
        out.append("prefill token counts are estimates from how much harder the run worked (marked inferred); "
                   "a one-token prompt is a run like any decode step and only shows as the dump's first run; "
                   "pass --prompt-len N (or N1,N2,... per session) for exact counts, TTFT and tokens/s")
    elif len(lens) > 1:
        out.append(f"{len(lens)} sessions (--prompt-len): each starts at the run that stands out most (work, or the "
                   "attention time dropping back), in order")
    if sessions > 1:
        out.append(f"{sessions} generate sessions in this dump")
    return out
