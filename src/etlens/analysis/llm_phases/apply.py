"""Fill an LLM profile's runs from timings (no debug buffer), and group any profile's runs into sessions.

:func:`etlens.analysis.llm.llm_profile` builds one :class:`~etlens.analysis.llm.LlmRun` per forward
run; with intermediate outputs their phases are read from logged shapes. Without them,
:func:`label_from_timings` labels them here (:mod:`.label`); :func:`sessions_of` then splits any
list of labelled runs into generate sessions and computes each one's speed (:mod:`.stats`).

Example::

    notes = label_from_timings(inspector, runs, blocks=[2], prompt_lens=[8])
    sessions = sessions_of(runs)
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from .label import label_runs
from .program import llm_inputs
from .signals import forward_signals
from .stats import SessionStats, session_stats

__all__ = ["label_from_timings", "sessions_of", "summary_of"]


def label_from_timings(inspector: Any, runs: list, blocks: list[int],
                       prompt_lens: Optional[Sequence[int]] = None) -> tuple[list[str], Any]:
    """Set ``phase``, ``n_tokens``, ``session``, ``position`` and the sources of ``runs`` (``LlmRun`` objects in
    dump order, from ``blocks``) from timings and the program; returns ``(notes, LlmInputs)``."""
    facts = llm_inputs(record=getattr(inspector, "record", None), pte=getattr(inspector, "pte", None))
    if not _has_kv_cache(inspector, blocks, facts):
        return (["no KV cache (no input_pos input, no KV-cache update kernel): every run processes its whole "
                 "sequence, so runs are not split into prefill and decode"], facts)
    sig = forward_signals(inspector, blocks)
    by_ref = {(r.block, r.column): r for r in runs}
    ordered = [by_ref[ref] for ref in sig.refs if ref in by_ref]
    lab = label_runs(sig, facts, prompt_lens)
    for j, r in enumerate(ordered):
        r.phase = lab.phase[j]
        r.n_tokens = lab.n_tokens[j]
        r.session = lab.session[j]
        r.position = lab.position[j]
        r.phase_source = lab.phase_source[j]
        r.tokens_source = lab.tokens_source[j]
        r.evidence = lab.evidence[j]
        r.start_ms = float(sig.start_ms[j])
    return lab.notes, facts


_KV_MARKERS = ("update_cache", "custom_sdpa", "sdpa_with_kv_cache", "index_put")


def _has_kv_cache(inspector: Any, blocks: list[int], facts: Any) -> bool:
    """A KV-cache program: the program declares an ``input_pos`` input, or the runs update a cache."""
    if facts.dynamic is not None and facts.has_input_pos:
        return True
    for bi in blocks:
        b = inspector.block_columns[bi]
        for i, name in enumerate(b.names):
            text = " ".join([name or "", *b.op_types[i]]).lower()
            if any(m in text for m in _KV_MARKERS):
                return True
    return False


def _assign_sessions(runs: list) -> None:
    """Read labels: a session starts at the first run and at every prefill that follows a decode (or a run
    at position 0 after other runs)."""
    s = -1
    prev = None
    for r in runs:
        if prev is None or (r.phase == "prefill" and (prev.phase != "prefill" or r.input_pos == 0)):
            s += 1
        r.session = max(s, 0)
        if getattr(r, "position", None) is None:
            r.position = r.input_pos
        prev = r


def sessions_of(runs: list) -> list[SessionStats]:
    """One :class:`SessionStats` per session of ``runs`` (labelled ``LlmRun`` objects in dump order); runs read
    from logged shapes get their sessions here, runs labelled from timings already have them."""
    if runs and all(getattr(r, "phase_source", "read") == "read" for r in runs):
        _assign_sessions(runs)
    out = []
    groups: dict[int, list] = {}
    for r in runs:
        groups.setdefault(r.session, []).append(r)
    for s, rs in sorted(groups.items()):
        pre = [r for r in rs if r.phase == "prefill"]
        dec = [r for r in rs if r.phase == "decode"]
        tokens = sum(r.n_tokens or 0 for r in pre) if pre and all(r.n_tokens for r in pre) else None
        srcs = {getattr(r, "tokens_source", "read") for r in pre}
        src = "inferred" if "inferred" in srcs else "given" if "given" in srcs else "read"
        wall = None
        starts = [getattr(r, "start_ms", None) for r in pre]
        if pre and all(x is not None for x in starts):
            wall = (starts[-1] + pre[-1].time_ms) - starts[0]
        out.append(session_stats(s, [r.time_ms for r in pre], tokens, [r.time_ms for r in dec],
                                 [getattr(r, "position", None) for r in dec], first_run=rs[0].index,
                                 prefill_wall_ms=wall, tokens_source=src))
    return out


def summary_of(sessions: list[SessionStats], runs: list) -> dict:
    """Pooled numbers over every session: TTFT (mean over sessions), tokens/s, decode latency percentiles,
    drift (the median of the sessions' slopes, weighted by nothing: each session is one observation)."""
    import math

    import numpy as np

    from .stats import percentiles

    dec = [r.time_ms for r in runs if r.phase == "decode"]
    pre_ms = sum(r.time_ms for r in runs if r.phase == "prefill")
    pre_tok = sum(s.prompt_tokens or 0 for s in sessions)
    p50, p90, p99 = percentiles(dec)
    drifts = [s.drift_ms_per_100 for s in sessions if s.drift_ms_per_100 == s.drift_ms_per_100]
    ttfts = [s.ttft_ms for s in sessions if s.prefill_runs]

    def f(x: float) -> Optional[float]:
        return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)

    return {
        "sessions": len(sessions),
        "ttft_ms": f(float(np.mean(ttfts)) if ttfts else math.nan),
        "prefill_tokens_per_s": f(1000.0 * pre_tok / pre_ms if pre_tok and pre_ms > 0 and
                                  all(s.prompt_tokens for s in sessions) else math.nan),
        "decode_tokens_per_s": f(1000.0 * len(dec) / sum(dec) if dec and sum(dec) > 0 else math.nan),
        "decode_p50_ms": f(p50), "decode_p90_ms": f(p90), "decode_p99_ms": f(p99),
        "drift_ms_per_100_tokens": f(float(np.median(drifts)) if drifts else math.nan),
        "labels": "read" if runs and all(getattr(r, "phase_source", "read") == "read" for r in runs) else "inferred",
    }
