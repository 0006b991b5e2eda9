"""Chrome trace-event JSON timelines of an ETDump (opens in https://ui.perfetto.dev or chrome://tracing).

One track (thread) per run; on it ``Method::execute``, each ``OPERATOR_CALL`` with the kernel
call inside it, each ``DELEGATE_CALL`` with the delegate's internal events as child slices, and
the load/init events of the ``Default`` run. Trace viewers nest slices by time containment, so
children are clamped into their parent's interval when a runtime clock makes them overhang by a
few ticks (the raw times stay in ``args``).

Given an attribution (:func:`etlens.analysis.attribution.attribute`, e.g. ``inspector.attribution()``),
delegate-internal slices are named by the ATen node they ran and its module
(``aten_linear_default · attn.qkv``), the backend's own event name kept in ``args.backend_event``.

Example::

    from etlens.views.perfetto import perfetto_trace, write_perfetto
    write_perfetto(inspector, "trace.json")
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..readers.etdump import PROFILE
from ..schema import DELEGATE_CALL

__all__ = ["perfetto_trace", "write_perfetto"]


def _op_types_by_event(inspector) -> dict[tuple[int, int], tuple[list[str], Any, str | None]]:
    """``{(run, event index): (op types, debug handles, backend)}`` from the inspector's blocks."""
    out = {}
    for b in inspector.block_columns:
        for i in range(len(b)):
            if not (b.op_types[i] or b.debug_handles[i] is not None or b.backend_names[i]):
                continue
            for j, r in enumerate(b.runs):
                pe = int(b.prof_events[i, j])
                if pe >= 0:
                    out[(r, pe)] = (b.op_types[i], b.debug_handles[i], b.backend_names[i])
    return out


def _attributed_names(inspector, attribution) -> dict[tuple[int, int], Any]:
    """``{(run, event index): EventAttribution}`` of the delegate-internal events."""
    out: dict[tuple[int, int], Any] = {}
    if attribution is None:
        return out
    blocks = inspector.block_columns
    for ea in attribution.events:
        b = blocks[ea.block]
        for j, r in enumerate(b.runs):
            pe = int(b.prof_events[ea.index, j])
            if pe >= 0:
                out[(r, pe)] = ea
    return out


def _run_labels(inspector, llm: Any) -> dict[int, str]:
    """``{dump run: "forward · prefill (5 tokens) @0"}``: the method of each run when the program has
    several, and an LLM run's phase (from :func:`etlens.analysis.llm.llm_profile`)."""
    out: dict[int, str] = {}
    labels = list(getattr(inspector, "block_methods", None) or [])
    if len(set(labels)) > 1:
        for b, m in zip(inspector.block_columns, labels):
            if b.name != "Default":
                for r in b.runs:
                    out[int(r)] = m
    if llm is not None:
        blocks = inspector.block_columns
        for run in llm.runs:
            r = int(blocks[run.block].runs[run.column])
            pos = f" @{run.input_pos}" if run.input_pos is not None else ""
            out[r] = f"{out.get(r, llm.method)} · {run.label}{pos}"
    return out


def perfetto_trace(inspector, attribution: Any = None, llm: Any = None) -> dict:
    """The trace as a dict ``{"traceEvents": [...], "displayTimeUnit": "ns", "metadata": {...}}``;
    with ``attribution``, delegate-internal slices carry their ATen node and module; tracks are
    named by method (multi-method programs) and, with ``llm`` (an ``LlmProfile``), by phase."""
    dump = inspector.etdump
    scale = inspector.source_time_scale.value
    # timestamps in the trace are microseconds; runtime ticks are ns unless told otherwise
    to_us = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6, "cycles": 1e-3}[scale]
    extra = _op_types_by_event(inspector)
    named = _attributed_names(inspector, attribution)
    t0 = None
    for r in dump.runs:
        p = r.kind == PROFILE
        if p.any():
            lo = int(r.start_time[p].min())
            t0 = lo if t0 is None else min(t0, lo)
    t0 = t0 or 0
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
                           "args": {"name": f"ExecuTorch ETDump {dump.path}"}}]
    run_labels = _run_labels(inspector, llm)
    for ri, r in enumerate(dump.runs):
        tid = ri + 1
        what = f"{r.name} · {run_labels[ri]}" if ri in run_labels else r.name
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                       "args": {"name": f"run {ri}: {what}"}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid, "args": {"sort_index": ri}})
        idx = np.flatnonzero(r.kind == PROFILE)
        if not idx.size:
            continue
        st = r.start_time[idx].astype(np.int64)
        en = np.maximum(r.end_time[idx].astype(np.int64), st)
        # parents first: earlier start, then longer duration
        order = np.lexsort((-(en - st), st))
        stack: list[list[int]] = []   # [start, end] of open slices
        for k in order.tolist():
            i = int(idx[k])
            s, e = int(st[k]), int(en[k])
            while stack and s >= stack[-1][1]:
                stack.pop()
            if stack:
                ps, pe = stack[-1]
                s, e = max(s, ps), min(e, pe)
            nm = dump.string(int(r.name_id[i]))
            did = int(r.delegate_id_int[i])
            dstr = dump.string(int(r.delegate_id_str[i]))
            delegated = did != -1 or bool(dstr)
            if delegated:
                nm = str(did) if did != -1 else dstr
            args: dict[str, Any] = {"instruction_id": int(r.instruction_id[i]),
                                    "start_tick": int(r.start_time[i]), "end_tick": int(r.end_time[i])}
            if delegated:
                args["delegate_debug_identifier"] = did if did != -1 else dstr
            info = extra.get((ri, i))
            if info:
                ops, handles, backend = info
                if ops:
                    args["op_types"] = list(ops)
                if handles is not None:
                    args["debug_handles"] = handles if isinstance(handles, int) else list(handles)
                if backend:
                    args["backend"] = backend
            ea = named.get((ri, i)) if delegated else None
            if ea is not None:
                args["backend_event"] = nm
                args["match"] = ea.match.quality
                if ea.match.handles:
                    args["debug_handles"] = list(ea.match.handles)
                    args["backend_ops"] = list(ea.match.backend_ops + ea.match.fused)
                    args["aten_node"], args["aten_op"], args["module"] = ea.node, ea.op, ea.module_path
                    nm = f"{ea.node} · {ea.module_path}" if ea.module_path else ea.node
                else:
                    nm = f"{nm} (unattributed)"
            cat = "delegate" if delegated else ("framework" if (nm or "").startswith(("Method::", "Program::"))
                                                else ("delegate_call" if nm == DELEGATE_CALL else "operator"))
            events.append({"name": nm or "(unnamed)", "cat": cat, "ph": "X", "pid": 1, "tid": tid,
                           "ts": (s - t0) * to_us, "dur": (e - s) * to_us, "args": args})
            stack.append([s, e])
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "metadata": {"source": "etlens", "etdump": dump.path, "time_scale": scale}}


def write_perfetto(inspector, path: str, attribution: Any = None, llm: Any = None) -> str:
    """Write :func:`perfetto_trace` to ``path``; returns the path."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(perfetto_trace(inspector, attribution, llm), f)
    return path
