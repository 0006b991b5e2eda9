"""LLM phases from event rows (the fleet dataset's columns), without an Inspector.

``etlens collect`` writes one row per timed event per run; this labels each run of an LLM's forward
method ``prefill`` / ``decode`` with its generate ``session`` from those same rows (the signals and
rules of :mod:`.signals` and :mod:`.label`), so a dataset can be queried by phase:
``SELECT device, median(latency_ms) FROM runs WHERE phase = 'decode' GROUP BY device``.

A run is an LLM forward run when it logged an LLM kernel (custom SDPA, KV-cache update, SDPA);
other runs (metadata methods, non-LLM models) get no phase.

Example::

    labels = label_rows(run, event_index, name_codes, names, duration_ms, start, inside_delegate,
                        handle_codes, handles, record)
    labels[7]   # ("decode", 0, 1): phase, session, tokens
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ...schema import DELEGATE_CALL, FRAMEWORK_EVENT_NAMES, METHOD_EXECUTE, OPERATOR_CALL
from .label import label_runs
from .program import llm_inputs
from .signals import signals_from_matrix, token_weights

__all__ = ["LLM_MARKERS", "is_llm_name", "label_rows"]

#: kernel names that make a run an LLM's forward run
LLM_MARKERS = ("custom_sdpa", "update_cache", "sdpa_with_kv_cache", "scaled_dot_product")
_ATTENTION = ("sdpa", "scaled_dot_product", "attention")


def is_llm_name(name: Optional[str]) -> bool:
    low = (name or "").lower()
    return any(m in low for m in LLM_MARKERS)


def label_rows(run: np.ndarray, event_index: np.ndarray, name_codes: np.ndarray, names: Sequence[Optional[str]],
               duration_ms: np.ndarray, start: np.ndarray, inside_delegate: np.ndarray,
               handle_codes: Optional[np.ndarray] = None, handles: Sequence[Optional[str]] = (), record: Any = None,
               prompt_lens: Optional[Sequence[int]] = None) -> dict[int, tuple[str, int, int]]:
    """``{run: (phase, session, n_tokens)}`` for the LLM forward runs among the rows, ``{}`` when no run is an
    LLM's. Parallel arrays, one value per row: run id, event position, name code (into ``names``), duration
    ms, raw start ticks, timed inside a delegate, debug-handles code (into ``handles``: ``"3,4"`` strings).
    Strings come as codes into their distinct values (the dataset's dictionary columns): no Python work
    per row."""
    run = np.asarray(run)
    codes = np.asarray(name_codes, np.int64)
    names = list(names)
    is_llm = np.array([is_llm_name(n) for n in names] + [False], bool)
    llm_rows = is_llm[codes]
    if not llm_rows.any():
        return {}
    runs = np.unique(run[llm_rows])
    keep = np.isin(run, runs)
    run, codes = run[keep], codes[keep]
    idx = np.asarray(event_index)[keep]
    dur = np.asarray(duration_ms, float)[keep]
    st = np.asarray(start)[keep]
    inside = np.asarray(inside_delegate, bool)[keep]
    hcodes = np.asarray(handle_codes, np.int64)[keep] if handle_codes is not None else np.full(len(run), -1)
    col = np.searchsorted(runs, run)
    k = len(runs)
    exe_code = np.array([n == METHOD_EXECUTE for n in names] + [False], bool)
    is_op = np.array([bool(n) and n not in FRAMEWORK_EVENT_NAMES and n not in (OPERATOR_CALL, DELEGATE_CALL)
                      for n in names] + [False], bool)
    exe = exe_code[codes]
    time_ms = np.full(k, np.nan)
    start_ms = np.zeros(k)
    time_ms[col[exe]] = dur[exe]
    start_ms[col[exe]] = st[exe].astype(np.float64) / 1e6
    op = is_op[codes] & ~inside
    events, first = np.unique(idx[op], return_index=True)
    ops = np.full((len(events), k), np.nan)
    ops[np.searchsorted(events, idx[op]), col[op]] = dur[op]
    ev_names = [names[c] if 0 <= c < len(names) else "" for c in codes[op][first]]
    att = np.array([any(m in str(n).lower() for m in _ATTENTION) for n in ev_names], bool)
    if np.isnan(time_ms).any():  # no Method::execute: the operator sum
        time_ms = np.where(np.isnan(time_ms), np.nansum(ops, axis=0), time_ms)
    per_token = None
    weights = token_weights(record) if record is not None else None
    if weights:
        hlist = list(handles)

        def w(c: int) -> int:
            h = hlist[c] if 0 <= c < len(hlist) else None
            hs = [int(x) for x in str(h).split(",") if x.strip().lstrip("-").isdigit()] if h else []
            return max([weights.get(x, -1) for x in hs] or [-1])
        per_token = np.array([w(int(c)) for c in hcodes[op][first]])
    facts = llm_inputs(record=record)
    kv = any(m in str(n).lower() for n in names for m in ("update_cache", "custom_sdpa", "sdpa_with_kv_cache"))
    if not kv and not (facts.dynamic is not None and facts.has_input_pos):
        return {}  # no KV cache: every run processes its whole sequence, there is no prefill / decode
    sig = signals_from_matrix(time_ms, start_ms, ops, att, per_token)
    lab = label_runs(sig, facts, prompt_lens)
    return {int(r): (lab.phase[j], lab.session[j], int(lab.n_tokens[j] or 0)) for j, r in enumerate(runs)}
