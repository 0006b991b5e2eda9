"""Turn collected :class:`~etlens.report.collect.ReportData` into report sections.

Interactive graphs are written as stand-alone viewer pages next to the report (so they can be
opened full-screen too) and embedded in it through ``<iframe srcdoc>``; the report stays one
file that works offline.
"""

from __future__ import annotations

import html
import os
from typing import Any

from .collect import ReportData
from .memory_section import memory_sections
from .render import Card, ReportPage, Section, bar_chart_svg, table_html, viewer_frame

__all__ = ["build_page"]


def _ms(v: float | None) -> str:
    return "n/a" if v is None else (f"{v:.3f} ms" if v < 100 else f"{v:,.1f} ms")


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def _tensor_desc(t: Any) -> str:
    shape = getattr(t, "shape", None)
    dtype = getattr(t, "dtype", None)
    if shape is None:
        if isinstance(t, (list, tuple)):
            return "(" + ", ".join(_tensor_desc(x) for x in t) + ")"
        return type(t).__name__
    return f"{str(dtype).replace('torch.', '')}{list(shape)}"


def _ops(names: list) -> str:
    names = [str(n) for n in names]
    if len(names) <= 6:
        return ", ".join(names)
    return f"{', '.join(names[:3])}, … {len(names) - 6} more …, {', '.join(names[-3:])}"


def _cards(data: ReportData) -> list[Card]:
    where = f"'{data.method}': " if data.method and len(data.methods) > 1 else ""
    others = [m for m in data.methods if m.method != data.method]
    more = (f"\n(also {sum(m.runs for m in others)} run(s) of {', '.join(m.method for m in others)}, not averaged "
            "in)") if others else ""
    cards = [Card(f"Latency of {data.method}" if where else "Total latency", _ms(data.total_latency_ms),
                  (f"{where}mean Method::execute over {data.runs} run(s)" if data.runs else "sum of operator averages")
                  + more)]
    d = data.delegation
    if d is not None:
        total = d.num_delegated_nodes + d.num_non_delegated_nodes
        share = d.num_delegated_nodes / total if total else 0.0
        cards.append(Card("Delegated share", _pct(share),
                          f"{d.num_delegated_nodes}/{total} ops in {d.num_delegated_subgraphs} delegate(s); "
                          f"{_pct(data.delegated_time_share)} of operator time in delegate calls",
                          "ok" if share >= 0.9 else "warn"))
    elif data.delegated_time_share is not None:
        cards.append(Card("Delegated share of time", _pct(data.delegated_time_share),
                          "share of operator time in DELEGATE_CALL"))
    if data.worst_gap is not None:
        value, ops = data.worst_gap
        cards.append(Card(f"Worst gap ({data.gap_metric})", f"{value:.4g}", ", ".join(ops[-3:]),
                          "bad" if data.divergence is not None and value > 1e-3 else "ok"))
    if data.gap_df is not None:
        div = data.divergence
        if div is not None:
            detail = f"{div.target}"
            if div.module_path:
                detail += f" in {div.module_path}"
            detail += f"\n{data.gap_metric} {', '.join(f'{g:.3g}' for g in div.gap)} > {data.gap_threshold:.3g}"
            cards.append(Card("First divergence", div.op, detail, "warn"))
        else:
            detail = (f"no op crosses {data.gap_threshold:.3g}" if data.gap_threshold is not None
                      else "every gap is at float-rounding level")
            cards.append(Card("First divergence", "none", detail, "ok"))
    cards.append(Card("Operator events", str(len(data.op_latency)), "distinct runtime events per run"))
    return cards


def _latency_section(data: ReportData) -> Section:
    top = [(f"{o.name}" + (f" [{o.op_types}]" if o.op_types and o.op_types != o.name else ""), o.avg_ms)
           for o in data.op_latency[:20]]
    rows = [(o.name, o.op_types, o.runs, o.avg_ms, o.total_ms, 100 * o.share, o.delegated, o.backend)
            + ((o.aten, o.module) if data.attribution is not None else ()) for o in data.op_latency]
    body = (bar_chart_svg(top, unit="ms")
            + table_html(rows, ["event", "op types", "runs", "avg (ms)", "total (ms)", "% of latency",
                                "delegated", "backend"] + (["ATen op (in delegate)", "module"]
                                                           if data.attribution is not None else []),
                         table_id="latency-table", numeric=(2, 3, 4, 5)))
    return Section("latency", "Per-operator latency", body,
                   "Average time per event over the runs (ExecuTorch Inspector semantics; operators inside a "
                   "delegate appear when the backend logs them and are also counted inside DELEGATE_CALL).")


def _delegation_section(data: ReportData) -> Section:
    d = data.delegation
    body = f"<pre>{html.escape(d.get_summary())}</pre>"
    df = data.delegation_df
    if df is not None and len(df):
        body += table_html(df.itertuples(index=False), list(df.columns), table_id="delegation-table",
                           numeric=tuple(range(1, len(df.columns))))
    return Section("delegation", "Delegation", body, "What the backend took and what stayed on the CPU.")


def _gap_section(data: ReportData) -> Section:
    df = data.gap_df
    rows, hl = [], {}
    for i, r in enumerate(df.itertuples(index=False)):
        gaps = [float(g) for g in r.gap]
        handles = sorted(set(r.aot_debug_handle))
        hs = str(tuple(handles)) if len(handles) <= 8 else f"{handles[0]}…{handles[-1]} ({len(handles)} handles)"
        rows.append((_ops(r.aot_ops), _ops(r.runtime_ops), hs,
                     _tensor_desc(r.aot_intermediate_output), _tensor_desc(r.runtime_intermediate_output),
                     gaps[0] if len(gaps) == 1 else gaps))
        div = data.divergence
        if div is not None and i == div.row:
            hl[i] = "bad"
        elif data.gap_threshold is not None and not data.gap_higher_is_better and \
                any(g > data.gap_threshold for g in gaps):
            hl[i] = "warn"
    intro = (f"Reference ({data.reference_graph.name if data.reference_graph is not None else '?'}) vs runtime "
             f"intermediate outputs paired by debug handle; metric {data.gap_metric}.")
    body = ""
    if data.divergence is not None:
        body += f"<pre>{html.escape(str(data.divergence))}"
        if data.divergence.stack_trace:
            body += "\n\n" + html.escape(data.divergence.stack_trace.strip())
        body += "</pre>"
    body += table_html(rows, ["reference ops", "runtime ops", "debug handles", "reference", "runtime",
                              f"gap ({data.gap_metric})"], table_id="gap-table", numeric=(5,), highlight=hl)
    un = data.unpaired_df
    if un is not None and len(un):
        cols = [c for c in ("side", "name", "op", "debug_handle", "reason", "detail", "module_path") if c in un.columns]
        body += "<h3>Not paired, and why</h3>" + table_html(
            un[cols].itertuples(index=False), cols, table_id="unpaired-table")
    return Section("numerics", "Numeric gap", body, intro)


def _module_time_section(data: ReportData) -> Section:
    """Icicle of time by module (delegate-internal time in the module that ran it) + per-node table."""
    from ..views.icicle import icicle_html, icicle_tree

    att = data.attribution
    s = att.summary()
    frac = s["attributed_fraction"]
    head = (f"<p>Per run: Method::execute {_ms(s['execute_ms'])}; delegates {_ms(s['delegate_ms'])}, of which "
            f"operator events {_ms(s['delegate_internal_ms'])} ({_pct(frac)} attributed to ATen nodes) and delegate "
            f"overhead {_ms(s['delegate_overhead_ms'])}; portable kernels {_ms(s['operator_ms'])}; framework tax "
            f"{_ms(s['framework_ms'])}.</p>")
    cycles = s.get("cycle_events")
    if cycles:  # an accelerator that counts cycles (QNN): cycles stay cycles, the ms are an estimate
        head += (f"<p>Accelerator: {s['cycles_avg']:.0f} cycles per run in {cycles} per-op events, "
                 f"{_pct(s['cycles_attributed_fraction'])} attributed to ATen nodes; the estimated ms of a node "
                 "are its cycles at the delegate's own clock (its cycle total vs its µs of the same run).</p>")
    rows = []
    for r in att.rows[:200]:
        st = r.stats()
        rows.append((r.node, r.op, r.module_path or ("(root)" if r.in_module else ""), r.source_line,
                     r.inside_delegate, ", ".join(r.backend_ops[:3]) or ", ".join(r.events[:2]), r.match,
                     st["p50"], st["avg"]) + ((r.cycle_stats()["cycles_avg"], r.cycle_stats()["estimated_avg_ms"])
                                              if cycles else ()))
    body = head + icicle_html(icicle_tree(att)) + table_html(
        rows, ["node", "ATen op", "module", "source line", "in delegate", "backend ops", "match", "p50 (ms)",
               "avg (ms)"] + (["cycles", "estimated (ms)"] if cycles else []), table_id="node-time-table",
        numeric=(7, 8, 9, 10) if cycles else (7, 8))
    return Section("module-time", "Time by module", body,
                   "Where the time goes, module by module: each box is as wide as its time; time inside a "
                   "delegate is attributed to the ATen node the backend operator ran (hover a box for details).")


def build_page(data: ReportData, out_dir: str, stem: str, files: dict[str, str]) -> ReportPage:
    from ..views.html import generate_html, generate_multi_pass_html

    from . import inside_section as inside

    inputs = data.inputs
    page = ReportPage(title=inputs.title, subtitle=inputs.subtitle, cards=_cards(data), notes=list(data.notes))
    inside.adjust_cards(page.cards, data)
    from . import doctor_section  # the findings come first: what to change, before what happened

    found = doctor_section.findings(data, page.notes)
    page.sections.extend(s for s in [doctor_section.section(found)] if s is not None)
    page.cards.extend(c for c in [doctor_section.card(found)] if c is not None)
    if data.reference_graph is not None:
        g = data.reference_graph
        body = ""
        if data.latency_overlay:
            p = generate_html(g, os.path.join(out_dir, f"{stem}.graph-latency.html"), overlay=data.latency_overlay,
                              overlay_label="latency (ms)", title=f"{g.name} · latency")
            files["graph with latency overlay"] = p
            body += "<h3>Latency overlay</h3>" + viewer_frame(p, "graph with latency overlay")
        if data.gap_overlay:
            p = generate_html(g, os.path.join(out_dir, f"{stem}.graph-gap.html"), overlay=data.gap_overlay,
                              overlay_label=f"numeric gap ({data.gap_metric})", title=f"{g.name} · numeric gap")
            files["graph with numeric-gap overlay"] = p
            body += "<h3>Numeric-gap overlay</h3>" + viewer_frame(p, "graph with numeric-gap overlay")
        if not body:
            p = generate_html(g, os.path.join(out_dir, f"{stem}.graph.html"), title=g.name)
            files["graph"] = p
            body = viewer_frame(p, "graph")
        page.sections.append(Section("graph", "Graph", body,
                                     f"Stage {g.name}: click a node for its details; colours show the overlay."))
    if inputs.pte:
        program = data.artifacts.pte().graph(prefer=("forward",))
        p = generate_html(program, os.path.join(out_dir, f"{stem}.program.html"),
                          title=f"{os.path.basename(inputs.pte)} (lowered program)")
        files["lowered program graph"] = p
        page.sections.append(Section("program", "Lowered program (.pte)", viewer_frame(p, "lowered program", 520),
                                     "The program as the runtime executes it: kernels and delegate calls, "
                                     "with the operations inside each delegate."))
    if inputs.trace is not None:
        p = generate_multi_pass_html(inputs.trace, os.path.join(out_dir, f"{stem}.passes.html"))
        files["pass stepper"] = p
        page.sections.append(Section("passes", "Compiler passes", viewer_frame(p, "pass stepper"),
                                     "Step through the compilation pass by pass (buttons, arrow keys or the "
                                     "dropdown); added, removed and rewritten nodes are marked."))
    if data.delegation is not None:
        page.sections.append(_delegation_section(data))
    from .llm_section import llm_section

    page.sections.extend(s for s in [llm_section(data, out_dir, stem, files, viewer_frame)] if s is not None)
    page.sections.append(_latency_section(data))
    if data.attribution is not None:
        page.sections.append(_module_time_section(data))
    if data.gap_df is not None:
        page.sections.append(_gap_section(data))
    page.sections.extend(s for s in [inside.section(data)] if s is not None)
    from . import fix_section

    page.sections.extend(s for s in [fix_section.section(data, out_dir, stem, files)] if s is not None)
    page.cards.extend(c for c in [fix_section.card(data)] if c is not None)
    page.sections.extend(memory_sections(inputs, out_dir, stem, files, page.notes, artifacts=data.artifacts))
    links = "".join(
        f"<li>{html.escape(label)}: <a href='{html.escape(os.path.relpath(path, out_dir))}'>"
        f"{html.escape(os.path.relpath(path, out_dir))}</a></li>" for label, path in files.items() if path)
    page.sections.append(Section("files", "Files", f"<ul>{links}</ul>",
                                 "Written next to this report (paths relative to it)."))
    return page
