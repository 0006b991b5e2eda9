"""Collect the numbers of the joined report from device artifacts.

Every figure comes from the same public APIs a user would call — :class:`etlens.Inspector`
(timings), :mod:`etlens.analysis.numerics` (gaps), :func:`etlens.get_delegation_info`
(delegation), the HTML viewer and the Perfetto writer — so the report never disagrees with
them. Each part is optional: a missing debug buffer drops the numerics section with a note
saying how to produce it, instead of failing the whole report.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import EtlensError
from ..schema import DELEGATE_CALL, FRAMEWORK_EVENT_NAMES, METHOD_EXECUTE

__all__ = ["ReportInputs", "ReportData", "collect"]


@dataclass
class ReportInputs:
    """The files a report is made from (only ``etdump`` is required)."""

    etdump: str
    etrecord: str | None = None
    debug_buffer: str | None = None
    pte: str | None = None
    trace: Any = None  # a Trace object or a path to trace JSON
    title: str = "etlens report"
    subtitle: str = ""
    metric: str = "MSE"
    gap_threshold: float | None = None


@dataclass
class OpLatency:
    name: str
    op_types: str
    runs: int
    avg_ms: float
    total_ms: float
    share: float
    delegated: bool
    backend: str


@dataclass
class ReportData:
    """Everything the renderer draws; plain values, no live objects except DataFrames."""

    inputs: ReportInputs
    total_latency_ms: float | None = None
    runs: int = 0
    op_latency: list[OpLatency] = field(default_factory=list)
    delegated_time_share: float | None = None
    delegation: Any = None  # DelegationInfo
    delegation_df: Any = None
    gap_df: Any = None
    gap_metric: str = "MSE"
    #: the comparator's answer: True for similarities (SNR, cosine), False for distances
    gap_higher_is_better: bool = False
    gap_threshold: float | None = None
    worst_gap: tuple[float, list] | None = None
    divergence: Any = None
    unpaired_df: Any = None
    reference_graph: Any = None  # etlens Graph the gaps refer to
    latency_overlay: dict[str, float] = field(default_factory=dict)
    gap_overlay: dict[str, float] = field(default_factory=dict)
    inspector: Any = None
    notes: list[str] = field(default_factory=list)
    inside: Any = None  # InsideResult: per-op values inside delegates (report.inside)


#: gaps below this (MSE / L1 / max_abs) are float rounding noise, not a divergence
_NOISE_FLOOR = 1e-8


def _execute_rows(df) -> Any:
    """Rows of the "Execute" blocks (not Method::init / load_method)."""
    if "event_block_name" in df.columns and (df["event_block_name"] == "Execute").any():
        return df[df["event_block_name"] == "Execute"]
    return df


def _latency(data: ReportData, df) -> None:
    rows = _execute_rows(df)
    execute = rows[rows["event_name"] == METHOD_EXECUTE]
    if len(execute):
        data.total_latency_ms = float(execute["avg (ms)"].mean())
        data.runs = int(len(execute["raw"].iloc[0]))
    skip = set(FRAMEWORK_EVENT_NAMES)
    ops = rows[~rows["event_name"].isin(skip)]
    if data.total_latency_ms is None and len(ops):
        data.total_latency_ms = float(ops[~ops["is_delegated_op"]]["avg (ms)"].sum())
    total = data.total_latency_ms or 0.0
    out: list[OpLatency] = []
    for _, r in ops.iterrows():
        avg = float(r["avg (ms)"])
        n = len(r["raw"]) if isinstance(r["raw"], (list, tuple)) else 1
        out.append(OpLatency(
            name=str(r["event_name"]), op_types=", ".join(str(t) for t in (r.get("op_types") or [])),
            runs=n, avg_ms=avg, total_ms=float(sum(r["raw"])) if n else avg,
            share=avg / total if total else 0.0, delegated=bool(r["is_delegated_op"]),
            backend=str(r.get("delegate_backend_name") or "")))
    out.sort(key=lambda o: -o.avg_ms)
    data.op_latency = out
    calls = ops[ops["event_name"] == DELEGATE_CALL]
    if total and len(calls):
        data.delegated_time_share = min(1.0, float(calls["avg (ms)"].sum()) / total)
    elif total:
        data.delegated_time_share = 0.0


def _latency_overlay(data: ReportData, inspector, handle_to_nodes: dict[int, list[str]]) -> None:
    """Average latency per reference-graph node through the events' debug handles.

    Events with fewer handles are more specific (an op inside a delegate) and win over a composite
    event (the whole DELEGATE_CALL) for the same node.
    """
    events: list[tuple[tuple[int, ...], float]] = []
    for block in inspector.event_blocks:
        if block.name != "Execute" and any(b.name == "Execute" for b in inspector.event_blocks):
            continue
        for ev in block.events:
            handles = ev.debug_handles
            if handles is None or ev.perf_data is None or ev.name == METHOD_EXECUTE:
                continue
            handles = tuple(handles) if isinstance(handles, (list, tuple)) else (handles,)
            if handles and all(isinstance(h, int) for h in handles):
                events.append((handles, float(ev.perf_data.avg)))
    events.sort(key=lambda e: len(e[0]))
    owner_size: dict[str, int] = {}
    for handles, avg in events:
        names = {name for h in handles for name in handle_to_nodes.get(h, ())}
        for name in names:
            size = owner_size.get(name)
            if size is None:
                data.latency_overlay[name] = avg
                owner_size[name] = len(handles)
            elif size == len(handles):
                data.latency_overlay[name] += avg


def _numerics(data: ReportData, inspector, metric: str, threshold: float | None) -> None:
    from ..analysis.comparators import get_comparator
    from ..analysis.numerics import analyze

    analysis = analyze(inspector)
    gap_df = analysis.gap_table(metric)
    data.gap_df, data.gap_metric = gap_df, metric
    data.unpaired_df = analysis.explain_unpaired()
    similarity = bool(getattr(get_comparator(metric), "higher_is_better", False))
    data.gap_higher_is_better = similarity
    best = None
    for gaps, ops in zip(gap_df["gap"], gap_df["aot_ops"]):
        vals = [float(g) for g in gaps]
        worst = min(vals) if similarity else max(vals)
        if best is None or (worst < best[0] if similarity else worst > best[0]) or math.isnan(worst):
            best = (worst, list(ops))
        for name in ops:
            data.gap_overlay[name] = worst
    data.worst_gap = best
    if threshold is None and best is not None and not similarity:
        # default: flag the first op whose gap exceeds 1% of the worst one (where drift starts), but
        # never call float rounding noise a divergence
        threshold = max(best[0] * 0.01, _NOISE_FLOOR) if best[0] > _NOISE_FLOOR else None
    data.gap_threshold = threshold
    if threshold is not None:
        data.divergence = analysis.first_divergence(threshold, metric)
    return analysis


def collect(inputs: ReportInputs) -> ReportData:
    """Run every analysis the report shows; missing inputs become notes, not failures."""
    from ..analysis.inspector import Inspector

    data = ReportData(inputs=inputs)
    record = None
    if inputs.etrecord:  # parsed once, shared by the Inspector and the numerics
        from ..readers.etrecord import read as read_etrecord

        record = read_etrecord(inputs.etrecord)
    inspector = Inspector(etdump_path=inputs.etdump, etrecord=record, debug_buffer_path=inputs.debug_buffer)
    data.inspector = inspector
    df = inspector.to_dataframe()
    _latency(data, df)

    handle_to_nodes: dict[int, list[str]] = {}
    source = inputs.etrecord or inputs.pte
    if source:
        from ..analysis.delegation import get_delegation_info

        try:
            data.delegation = get_delegation_info(source)
            data.delegation_df = data.delegation.get_operator_delegation_dataframe()
        except EtlensError as exc:
            data.notes.append(f"delegation: {exc}")
    else:
        data.notes.append("delegation: no ETRecord or .pte given (pass --etrecord or --pte)")

    if record is not None and inputs.debug_buffer:
        try:
            analysis = _numerics(data, inspector, inputs.metric, inputs.gap_threshold)
            data.reference_graph = record.graph(prefer=(analysis.reference_graph,))
            for name, node in analysis.capture.nodes.items():
                for h in node.handle or ():
                    handle_to_nodes.setdefault(h, []).append(name)
        except EtlensError as exc:
            data.notes.append(f"numerics: {exc}")
    elif record is not None:
        data.notes.append("numerics: no debug buffer given, so no intermediate outputs to compare "
                          "(run with debug_buffer_size>0 and pass --debug-buffer)")
    else:
        data.notes.append("numerics: needs the ETRecord (--etrecord) and the debug buffer (--debug-buffer)")
    if record is not None and data.reference_graph is None and record.graphs():
        data.reference_graph = record.graph(prefer=("edge_dialect_exported_program",))
    if data.reference_graph is not None and not handle_to_nodes:
        for node in data.reference_graph:
            for h in node.debug_handles:
                handle_to_nodes.setdefault(h, []).append(node.name)
    if handle_to_nodes:
        _latency_overlay(data, inspector, handle_to_nodes)
    return data


def write_side_files(data: ReportData, out_dir: str, stem: str) -> dict[str, str]:
    """Write the Perfetto trace and the per-op TSV next to the report; return their paths."""
    files: dict[str, str] = {}
    perfetto = os.path.join(out_dir, f"{stem}.perfetto.json")
    from ..views.perfetto import write_perfetto

    write_perfetto(data.inspector, perfetto)
    files["Perfetto trace (open in ui.perfetto.dev)"] = perfetto
    tsv = os.path.join(out_dir, f"{stem}.events.tsv")
    with open(tsv, "w", encoding="utf-8") as f:
        data.inspector.save_data_to_tsv(f)
    files["all events (TSV)"] = tsv
    return files
