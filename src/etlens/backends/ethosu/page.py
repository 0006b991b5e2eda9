"""The report of an Ethos-U build: Vela's estimates instead of run times.

Ethos-U programs cannot run here (no FVP, no board), so ``etlens report --backend ethos-u55-128``
builds the program (``.pte`` + ``.etrecord`` + the Vela sidecar in ``OUT_artifacts/``), skips the run
stages, and lays out what the compiler knows:

* headline cards: Vela's NPU cycles (and the time at the NPU clock), SRAM and flash (from the
  ``.pte``'s payload, with Vela's figures beside them), how many ATen nodes run on the NPU / CPU, and
  the share of NPU time spent changing layouts;
* the edge graph with each node's estimated NPU cycles as the overlay, the lowered program and the
  compiler passes (when traced);
* tables: NPU cycles per ATen node and module, CPU fallbacks with the Arm partitioner's reason,
  layout changes (transposes, reshapes, copies) with their cycles, Vela's per-layer rows and where
  each landed, and Vela's own printed report;
* the per-op int8 values inside the NPU subgraph (:mod:`.tosa_values`).

:func:`report_from_estimates` is the ``page`` hook: what :func:`etlens.report.report_from_session` calls
for a build of this backend (its ``BackendConfig.runs`` is ``False``).
"""

from __future__ import annotations

import html
import os
from typing import Any

from etlens.report.render import Card, ReportPage, Section, render_report, table_html, viewer_frame

__all__ = ["report_from_estimates", "ethos_u_page"]


def _or(value, default):
    return default if value is None else value


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "n/a"


def ethos_u_page(pte: str, etrecord: str, out_dir: str, stem: str, files: dict[str, str], *, title: str,
                 subtitle: str = "", trace: Any = None) -> tuple[ReportPage, Any]:
    """The page (and the :class:`~etlens.backends.ethosu.mapping.EthosUDelegation`) of one Ethos-U build."""
    from etlens.readers.etrecord import read as read_etrecord
    from etlens.readers.pte import read as read_pte
    from etlens.views.html import generate_html, generate_multi_pass_html

    from .delegation import ethos_u_delegation
    from .memory import ethos_u_memory

    est = ethos_u_delegation(etrecord)
    t = est.totals()
    mem = ethos_u_memory(read_pte(pte)) or {}
    cycles = t["npu_cycles"] or 0.0
    clock = t.get("clock_hz") or 0.0
    page = ReportPage(title=title, subtitle=subtitle, notes=[
        "Ethos-U programs are compiled and estimated here, not run (no FVP or board): times are Vela's cycle "
        "estimates at the NPU clock, not measurements; the CPU part of the program is not timed."])
    page.cards = [
        Card("NPU cycles (Vela)", f"{cycles:,.0f}",
             f"{1e6 * cycles / clock:.1f} us at {clock / 1e6:.0f} MHz" if clock else "", "info"),
        Card("SRAM", f"{_or(mem.get('sram_bytes'), t['sram_bytes']):,} B",
             (f"fast scratch (Vela's arena cache; {mem['memory_mode']}: the {mem['dram_bytes']:,} B scratch is in "
              "DRAM)" if mem.get("dram_bytes") else "NPU scratch from the .pte")
             + f"; Vela says {t['sram_bytes']:,} B; + {mem.get('arena_bytes', 0):,} B program arena"
             + (f"; fast scratch {mem['fast_scratch_bytes']:,} B"
                if mem.get("fast_scratch_bytes") is not None and not mem.get("dram_bytes") else ""), "info"),
        Card("Flash", f"{mem.get('flash_with_command_stream_bytes', t['flash_bytes']):,} B",
             f"weights {mem.get('flash_bytes', 0):,} B (Vela: {t['flash_bytes']:,} B) + command stream "
             f"{mem.get('command_stream_bytes', 0):,} B", "info"),
        Card("On the NPU", f"{t['npu_nodes']} nodes", f"{t['cpu_nodes']} on the CPU; Vela: {t['npu_ops']} NPU / "
             f"{t['cpu_ops']} CPU operators", "ok" if t["cpu_nodes"] <= 3 else "warn"),
        Card("Layout changes", _pct(t["layout_cycles"], cycles),
             f"{t['layout_cycles']:,.0f} cycles of transposes/reshapes/copies on the NPU",
             "warn" if cycles and t["layout_cycles"] > 0.25 * cycles else "info"),
    ]
    overlay = {n.name: float(n.npu_cycles) for n in est.nodes if n.npu_cycles}
    edge = read_etrecord(etrecord).graph(prefer=("edge_dialect_exported_program",))
    p = generate_html(edge, os.path.join(out_dir, f"{stem}.graph-npu-cycles.html"), overlay=overlay,
                      overlay_label="NPU cycles (Vela)", title=f"{edge.name} · NPU cycles")
    files["graph with NPU-cycles overlay"] = p
    page.sections.append(Section("graph", "Graph", viewer_frame(p, "graph with NPU-cycles overlay"),
                                 "The edge program; colour = Vela's estimated NPU cycles of each ATen node "
                                 "(nodes on the CPU have none). Click a node for its details."))
    program = read_pte(pte).graph(prefer=("forward",))
    p = generate_html(program, os.path.join(out_dir, f"{stem}.program.html"),
                      title=f"{os.path.basename(pte)} (lowered program)")
    files["lowered program graph"] = p
    page.sections.append(Section("program", "Lowered program (.pte)", viewer_frame(p, "lowered program", 480),
                                 "Kernels on the CPU and the Ethos-U delegate calls (the delegate node lists its "
                                 "command stream, weights, scratch and I/O)."))
    if trace is not None:
        p = generate_multi_pass_html(trace, os.path.join(out_dir, f"{stem}.passes.html"))
        files["pass stepper"] = p
        page.sections.append(Section("passes", "Compiler passes", viewer_frame(p, "pass stepper"),
                                     "Export, quantization, edge and lowering, stage by stage."))
    npu = sorted((n for n in est.nodes if n.backend is not None and n.npu_cycles), key=lambda n: -(n.npu_cycles or 0))
    rows = [(n.name, n.module_path, n.target, round(n.npu_cycles or 0.0), _pct(n.npu_cycles or 0.0, cycles),
             round(n.macs), round(n.layout_cycles), ", ".join(n.layers)) for n in npu]
    page.sections.append(Section("npu", "NPU time per ATen node (Vela's estimate)", table_html(
        rows, ["node", "module", "operator", "cycles", "share", "MACs", "layout cycles", "Vela rows"],
        table_id="npu-nodes"),
        f"Each of Vela's {t['layers']} per-layer rows charged to one ATen node ({t['layers_by_name']} by the TOSA "
        f"tensor it writes, {t['layers_inserted']} that Vela inserted itself to their consumer); the rows sum to "
        f"{t['node_cycles_sum']:,.0f} of Vela's {cycles:,.0f} cycles. Nodes fused into another (activations, "
        "quantize/dequantize) have none of their own."))
    cpu = [n for n in est.nodes if n.backend is None]
    page.sections.append(Section("cpu", f"On the CPU ({len(cpu)} nodes) and why", table_html(
        [(n.name, n.module_path, n.target, n.reason) for n in cpu], ["node", "module", "operator", "reason"],
        table_id="cpu-nodes"),
        "Every ATen node the Ethos-U partitioner left to the CPU, with the reason its operator-support checks "
        "gave (recorded at compile time)."))
    layout = [m for m in est.layers if m.layer.op in ("Transpose", "Reshape", "MemoryCopy", "Copy")]
    if layout:
        page.sections.append(Section("layout", "Layout changes on the NPU", table_html(
            [(m.layer.op, m.layer.name, round(m.layer.cycles), _pct(m.layer.cycles, cycles), m.node,
              "inserted by Vela" if m.how == "inserted" else "from the TOSA graph") for m in layout],
            ["operation", "Vela row", "cycles", "share", "charged to", "origin"], table_id="layout"),
            f"{t['layout_cycles']:,.0f} cycles ({_pct(t['layout_cycles'], cycles)}) go to moving data between "
            "layouts (PyTorch's NCHW vs the NPU's NHWC, reshapes around reductions and matmuls)."))
    page.sections.append(Section("vela", "Vela's per-layer table", table_html(
        [(m.partition, m.layer.name, m.layer.op, round(m.layer.cycles), round(m.layer.macs),
          round(m.layer.sram_access_cycles), round(m.layer.utilization_pct, 2), m.tosa_op, m.node, m.how)
         for m in est.layers],
        ["delegate", "name (TOSA tensor)", "op", "cycles", "MACs", "SRAM access", "util %", "TOSA op", "node",
         "mapped by"], table_id="vela-layers")
        + "".join(f"<details><summary>Vela's printed report, delegate {p.index}</summary><pre>"
                  f"{html.escape(p.stdout)}</pre></details>" for p in est.sidecar.partitions),
        f"As Vela {est.sidecar.vela_version} printed it with --verbose-performance, and the node each row is "
        "charged to."))
    return page, est


def _tosa_section(etrecord: str, session: Any, notes: list[str]) -> Section:
    """Per-op int8 values inside the NPU subgraph (TOSA reference model vs pt2e and float)."""
    from etlens.errors import EtlensError

    from .tosa_values import tosa_inside_values

    intro = ("Each Ethos-U partition's TOSA graph run in the TOSA reference model (the integer arithmetic the NPU "
             "implements), per ATen node against the int8 code pt2e simulated (in int8 steps) and against the "
             "float model (SNR). A row more than 2 steps off, or under 10 dB against float, is flagged; the first "
             "flagged row is where an int8 fault starts.")
    try:
        res = tosa_inside_values(etrecord, inputs=tuple(session.inputs), float_program=session.exported)
    except EtlensError as exc:
        notes.append(f"per-op values inside the NPU subgraph not computed: {exc}")
        return Section("tosa", "Inside the NPU (TOSA reference model)", f"<p>{html.escape(str(exc))}</p>", intro)
    rows = [("!" if r.flagged else "", r.node, r.module_path, r.tosa_tensor, r.max_abs_lsb,
             f"{100 * r.mismatch_share:.1f}%", r.max_abs,
             "-" if r.float_snr_db is None else round(r.float_snr_db, 1)) for r in res.rows]
    first = res.first_flagged
    head = (f"<p><b>First flagged: {html.escape(first.node)}</b> ({html.escape(first.module_path or 'top level')}), "
            f"{first.max_abs_lsb} int8 steps off.</p>" if first else "<p>No operator is flagged.</p>")
    return Section("tosa", "Inside the NPU (TOSA reference model)", head + table_html(
        rows, ["", "node", "module", "TOSA tensor", "max int8 steps", "> 1 step", "max abs", "SNR vs float (dB)"],
        table_id="tosa-values"), intro)


def report_from_estimates(session: Any, output: str, *, title: str | None = None,
                          progress: bool | None = None) -> dict[str, str]:
    """Build ``session``'s model (no run) and write the estimates report to ``output``; closes the session.
    Returns the files written beside it (``{label: path}``); the caller wraps them in its ``ReportResult``."""
    from etlens._progress import StageBar
    from etlens.model.spans import span

    out_dir = os.path.dirname(os.path.abspath(output)) or "."
    stem = os.path.splitext(os.path.basename(output))[0]
    art_dir = os.path.join(out_dir, f"{stem}_artifacts")
    name, trace_path = session.name, os.path.join(art_dir, f"{session.name}.trace.json")
    bar = StageBar(total=1 + int(session.quantize) + 1 + 2, desc="etlens report", enabled=progress)
    session.on_stage = bar.step
    with session, bar:
        arts = session.lower(art_dir, trace_path=trace_path)
        files = {"program (.pte)": arts.pte, "ETRecord": arts.etrecord}
        from .vela import sidecar_for

        if os.path.exists(sidecar_for(arts.pte)):
            files["Vela's estimates (sidecar JSON)"] = sidecar_for(arts.pte)
        if session.record_trace and os.path.exists(trace_path):
            files["pass trace (etlens trace JSON)"] = trace_path
        bar.step("analyze")
        subtitle = (f"model {name} · backend {session.backend} · int8 (pt2e) · compiled with Vela, "
                    "estimated (not run)")
        with span("analyze"):
            page, est = ethos_u_page(arts.pte, arts.etrecord, out_dir, stem, files,
                                     title=title or f"etlens report: {name}", subtitle=subtitle,
                                     trace=session.trace if session.record_trace else None)
        with span("analyze/TOSA reference model"):
            page.sections.insert(len(page.sections) - 1, _tosa_section(arts.etrecord, session, page.notes))
        bar.step("render")
        links = "".join(
            f"<li>{html.escape(label)}: <a href='{html.escape(os.path.relpath(path, out_dir))}'>"
            f"{html.escape(os.path.relpath(path, out_dir))}</a></li>" for label, path in files.items() if path)
        page.sections.append(Section("files", "Files", f"<ul>{links}</ul>",
                                     "Written next to this report (paths relative to it)."))
        with open(output, "w", encoding="utf-8") as f:
            f.write(render_report(page))
    return files
