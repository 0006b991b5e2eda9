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
import re
from dataclasses import dataclass, field
from typing import Any

from ..model.spans import span
from ..errors import EtlensError
from ..schema import DELEGATE_CALL, FRAMEWORK_EVENT_NAMES, METHOD_EXECUTE

__all__ = ["ReportInputs", "ReportData", "collect", "op_types_text"]


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
    #: the method of the headline and the operator table (None: the one that did the work)
    method: str | None = None
    #: an LLM's prompt length per generate session (one value: every session), for the LLM section of a
    #: timing-only dump: exact token counts, TTFT and tokens/s (``etlens report --prompt-len``)
    prompt_lens: list[int] | None = None


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
    module: str = ""   # module path of the ATen node a delegate-internal event ran (attribution)
    aten: str = ""     # that node's ATen op


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
    #: delegate-internal time per ATen node (:class:`etlens.analysis.attribution.Attribution`), with a .pte
    attribution: Any = None
    notes: list[str] = field(default_factory=list)
    #: optional stages that failed, ``{stage: one line}`` (the numeric gap here; the build's from the session)
    failures: dict[str, str] = field(default_factory=dict)
    inside: Any = None  # InsideResult: per-op values inside delegates (report.inside)
    introduced: Any = None  # report.fix_section.Introduced: culprits by introduced error (quantized builds)
    #: per-method timings (:class:`etlens.analysis.inspector.methods.MethodTiming`) and the headline's method
    methods: list = field(default_factory=list)
    method: str | None = None
    llm: Any = None  # LlmProfile (analysis.llm) when the program looks like an LLM
    #: the run's files, each parsed once and shared (:class:`etlens.readers.artifacts.ArtifactSet`)
    artifacts: Any = None


#: gaps below this (MSE / L1 / max_abs) are float rounding noise, not a divergence
_NOISE_FLOOR = 1e-8


def _execute_rows(df) -> Any:
    """Rows of the "Execute" blocks (not Method::init / load_method)."""
    if "event_block_name" in df.columns and (df["event_block_name"] == "Execute").any():
        return df[df["event_block_name"] == "Execute"]
    return df


_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'")
_TOTAL = re.compile(r"\((\d+) total\)\s*$")


def op_types_text(value: Any) -> str:
    """The op types of one DataFrame row as text: ``"aten.conv2d, aten.relu"``.

    ExecuTorch's ``to_dataframe`` keeps up to four op types as a list and replaces longer lists
    (a delegate call that ran dozens of ops) by one string, ``"['a', 'b' ... 'z'] (37 total)"``.
    Iterating that string would give its characters, so it is read back into its names:
    ``"a, b, …, z (37 ops)"``.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, str):
        names = _QUOTED.findall(value)
        if not names:
            return value
        total = _TOTAL.search(value)
        if total and int(total.group(1)) > len(names):
            return ", ".join(names[:-1]) + f", …, {names[-1]} ({total.group(1)} ops)"
        return ", ".join(names)
    if isinstance(value, (list, tuple)):
        return ", ".join(op_types_text(v) if isinstance(v, str) and v.startswith("[") else str(v) for v in value)
    return str(value)


def _latency(data: ReportData, df, inspector) -> None:
    """Headline and per-operator table of the method that did the work (``forward`` in an LLM
    program), never an average across methods; other methods are listed in ``data.methods``."""
    from ..analysis.inspector.methods import main_method, method_timings

    data.methods = method_timings(inspector)
    main = main_method(data.methods)
    if data.inputs.method is not None:
        main = next((m for m in data.methods if m.method == data.inputs.method), None)
        if main is None:
            raise EtlensError(f"{data.inputs.etdump}: no run of method {data.inputs.method!r}; methods that ran: "
                              f"{', '.join(m.method for m in data.methods) or 'none'}")
    rows = _execute_rows(df)
    if main is not None and "event_block_name" in df.columns:
        data.method = main.method
        names = inspector.block_columns
        keep = [i for i, b in enumerate(names) if i in main.blocks]
        # DataFrame rows follow the blocks in order; select this method's blocks by position
        sizes = [len(b) for b in names]
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        pos = [p for i in keep for p in range(starts[i], starts[i] + sizes[i])]
        if len(df) == sum(sizes):
            rows = df.iloc[pos]
        data.total_latency_ms = main.latency
        data.runs = main.runs
    skip = set(FRAMEWORK_EVENT_NAMES)
    ops = rows[~rows["event_name"].isin(skip)]
    ops = ops[ops["avg (ms)"].notna()]  # events with debug data but no timing
    if data.total_latency_ms is None and len(ops):
        data.total_latency_ms = float(ops[~ops["is_delegated_op"]]["avg (ms)"].sum())
    total = data.total_latency_ms or 0.0
    out: list[OpLatency] = []
    for _, r in ops.iterrows():
        avg = float(r["avg (ms)"])
        n = len(r["raw"]) if isinstance(r["raw"], (list, tuple)) else 1
        out.append(OpLatency(
            name=str(r["event_name"]), op_types=op_types_text(r.get("op_types")),
            runs=n, avg_ms=avg, total_ms=float(sum(r["raw"])) if n else avg,
            share=avg / total if total else 0.0, delegated=bool(r["is_delegated_op"]),
            backend=str(r.get("delegate_backend_name") or "")))
    out.sort(key=lambda o: -o.avg_ms)
    data.op_latency = out
    if main is not None:
        data.delegated_time_share = main.delegated_share
    elif total:
        calls = ops[ops["event_name"] == DELEGATE_CALL]
        data.delegated_time_share = min(1.0, float(calls["avg (ms)"].sum()) / total) if len(calls) else 0.0


def _latency_overlay(data: ReportData, inspector, handle_to_nodes: dict[int, list[str]]) -> None:
    """Average latency per reference-graph node through the events' debug handles.

    Events with fewer handles are more specific (an op inside a delegate) and win over a composite
    event (the whole DELEGATE_CALL) for the same node.
    """
    events: list[tuple[tuple[int, ...], float]] = []
    main = next((m for m in data.methods if m.method == data.method), None)
    for bi, block in enumerate(inspector.event_blocks):
        if main is not None:
            if bi not in main.blocks:
                continue
        elif block.name != "Execute" and any(b.name == "Execute" for b in inspector.event_blocks):
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
    runner = getattr(analysis.capture, "runner", None)
    if runner:  # provenance: which path computed the reference outputs
        why = getattr(analysis.capture, "fallback_reason", None)
        data.notes.append(f"numerics: reference {analysis.reference_graph!r} run by the {runner}"
                          + (f" (the JSON runner could not: {why})" if why else ""))
    if analysis.inputs_source and "ETRecord" not in analysis.inputs_source:
        data.notes.append(f"numerics: the reference ran on inputs {analysis.inputs_source}")
    gap_df = analysis.gap_table(metric)
    multi = False
    if not len(gap_df):  # e.g. a bare torch.nn.LSTM/GRU: one op returning (output, state), skipped by default
        multi_df = analysis.gap_table(metric, multi_output=True)
        if len(multi_df):
            gap_df, multi = multi_df, True
            data.notes.append("numerics: every compared op returns several tensors (a torch.nn.LSTM/GRU layer "
                              "exports as one such op); the gap table compares each of its tensors "
                              "(multi_output=True; ExecuTorch's table skips such ops)")
    data.gap_df, data.gap_metric = gap_df, metric
    data.unpaired_df = analysis.explain_unpaired(multi_output=multi)
    similarity = bool(getattr(get_comparator(metric), "higher_is_better", False))
    data.gap_higher_is_better = similarity
    suspects = analysis.mispaired(multi_output=multi)
    if suspects:
        listed = "; ".join(f"{s['op']} (relative MSE {s['relative_mse']:.3g}; the runtime tensor equals "
                           f"{s['equals']}'s output, {s['equals_relative_mse']:.1e})"
                           for s in list(suspects.values())[:5])
        data.notes.append(f"numerics: {len(suspects)} row(s) of the gap table compare a delegate's tensor with the "
                          f"wrong reference op (ExecuTorch's positional rule): {listed}"
                          f"{' …' if len(suspects) > 5 else ''}; left out of the worst gap, the overlay and the "
                          f"first divergence")
    best = None
    for i, (gaps, ops) in enumerate(zip(gap_df["gap"], gap_df["aot_ops"])):
        if i in suspects:
            continue
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
        data.divergence = analysis.first_divergence(threshold, metric, multi_output=multi, skip_rows=suspects)
    return analysis


def collect(inputs: ReportInputs) -> ReportData:
    """Run every analysis the report shows; missing inputs become notes, not failures."""
    from ..analysis.inspector import Inspector
    from ..readers.artifacts import ArtifactSet

    # every file parsed once, shared by the Inspector, numerics, delegation, attribution and the page
    arts = ArtifactSet(etdump=inputs.etdump, etrecord=inputs.etrecord, pte=inputs.pte,
                       debug_buffer=inputs.debug_buffer)
    data = ReportData(inputs=inputs, artifacts=arts)
    with span("analyze/read files"):
        record = arts.etrecord()
        dump = arts.etdump()
    with span("analyze/inspector"):
        inspector = Inspector(etdump_data=dump, etrecord=record, debug_buffer_path=inputs.debug_buffer,
                              pte=arts.pte())
        data.inspector = inspector
        df = inspector.to_dataframe()
        _latency(data, df, inspector)

    handle_to_nodes: dict[int, list[str]] = {}
    source = inputs.etrecord or inputs.pte
    if source:
        from ..analysis.delegation import get_delegation_info

        try:
            # with both, the .pte's kernel list places the nodes that share a handle with a delegate
            pte = arts.pte() if inputs.etrecord and inputs.pte else None
            with span("analyze/delegation"):
                data.delegation = get_delegation_info(record if record is not None else arts.pte(), pte=pte)
                data.delegation_df = data.delegation.get_operator_delegation_dataframe()
        except EtlensError as exc:
            data.notes.append(f"delegation: {exc}")
    else:
        data.notes.append("delegation: no ETRecord or .pte given (pass --etrecord or --pte)")

    if record is not None and inputs.debug_buffer:
        try:
            with span("analyze/numerics"):
                analysis = _numerics(data, inspector, inputs.metric, inputs.gap_threshold)
            data.reference_graph = record.graph(prefer=(analysis.reference_graph,))
            for name, node in analysis.capture.nodes.items():
                for h in node.handle or ():
                    handle_to_nodes.setdefault(h, []).append(name)
        except EtlensError as exc:
            data.notes.append(f"numerics: {exc}")
        except Exception as exc:  # noqa: BLE001 - an optional analysis never takes the report down
            text = str(exc).strip()
            data.failures["numeric gap"] = f"{type(exc).__name__}: {text.splitlines()[0][:500] if text else ''}"
            data.gap_df = data.unpaired_df = data.divergence = data.worst_gap = data.reference_graph = None
            data.gap_overlay.clear()
            handle_to_nodes.clear()
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
    from ..analysis.llm import llm_profile

    with span("analyze/llm profile"):
        data.llm = llm_profile(inspector, data.method, handle_to_nodes, prompt_lens=inputs.prompt_lens)
    if data.llm is None and inputs.prompt_lens:
        data.notes.append(f"LLM: prompt lengths {','.join(map(str, inputs.prompt_lens))} given, but this dump ran no "
                          "LLM ops (custom SDPA / KV-cache update / SDPA), so there is no prefill/decode section")
    if record is not None and inputs.pte:
        with span("analyze/attribution"):
            _attribute(data, inspector, arts.pte(), handle_to_nodes)
    return data


def _attribute(data: ReportData, inspector, pte: Any, handle_to_nodes: dict[int, list[str]]) -> None:
    """Per-node time inside delegates: the overlay gives each node its own time (not its delegate's),
    delegate-internal rows of the operator table gain their module and ATen op."""
    from ..analysis.attribution import attribute

    try:
        att = attribute(inspector, pte)
    except EtlensError as exc:
        data.notes.append(f"attribution: {exc}")
        return
    data.attribution = att
    overlay: dict[str, float] = {}
    inside: set[str] = set()
    for r in att.rows:
        avg = r.stats()["avg"]
        if avg != avg and r.estimated:  # cycles only (QNN): the time estimated from the delegate's own clock
            avg = float(sum(r.estimated.values()) / len(r.estimated))
        if not r.debug_handles or avg != avg:
            continue
        for name in {n for h in r.debug_handles for n in handle_to_nodes.get(h, ())}:
            overlay[name] = overlay.get(name, 0.0) + avg
            if r.inside_delegate:
                inside.add(name)
    if inside:
        # nodes of a delegate that ran no operator of their own (folded away) lose the delegate's
        # whole time; kernels keep theirs
        delegated = {n for ev in att.events for h in ev.match.handles for n in handle_to_nodes.get(h, ())}
        kept = {k: v for k, v in data.latency_overlay.items() if k not in delegated and k not in overlay}
        calls = {n for b in inspector.block_columns for i, nm in enumerate(b.names) if nm == DELEGATE_CALL
                 for h in _handles(b.debug_handles[i]) for n in handle_to_nodes.get(h, ())}
        data.latency_overlay = {**{k: v for k, v in kept.items() if k not in calls}, **overlay}
    by_name: dict[str, list[tuple[float, str, str]]] = {}
    for ev in att.events:
        b = inspector.block_columns[ev.block]
        avg = float(b.stats()[ev.index, 3])
        module = ev.module_path or ("(root)" if ev.op else "")
        by_name.setdefault(b.names[ev.index], []).append((avg, ev.op, module))
    for o in data.op_latency:
        cands = by_name.get(o.name) if o.delegated else None
        if cands:
            best = min(cands, key=lambda c: abs(c[0] - o.avg_ms))
            o.aten, o.module = best[1], best[2]


def _handles(h: Any) -> tuple[int, ...]:
    return () if h is None else ((h,) if isinstance(h, int) else tuple(h))


def write_side_files(data: ReportData, out_dir: str, stem: str) -> dict[str, str]:
    """Write the Perfetto trace and the per-op TSV next to the report; return their paths."""
    files: dict[str, str] = {}
    perfetto = os.path.join(out_dir, f"{stem}.perfetto.json")
    from ..views.perfetto import write_perfetto

    write_perfetto(data.inspector, perfetto, data.attribution, data.llm)
    files["Perfetto trace (open in ui.perfetto.dev)"] = perfetto
    tsv = os.path.join(out_dir, f"{stem}.events.tsv")
    with open(tsv, "w", encoding="utf-8") as f:
        data.inspector.save_data_to_tsv(f)
    files["all events (TSV)"] = tsv
    return files
