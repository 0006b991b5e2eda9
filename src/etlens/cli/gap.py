"""``etlens gap``: per-operator numeric gap between the ETRecord reference and the device run.

Runs the reference program recorded in the ETRecord on its representative inputs, pairs every
reference output with the runtime's intermediate output (ETDump + debug buffer) by debug handle,
and prints one row per op group with the distance. With ``--fail-on-gap`` the exit status is 3 when
any gap is on the bad side of it (above for MSE/L1/max_abs, below for SNR/cosine), so CI can gate
on numeric drift; the first divergence (earliest op in graph order) is named with its module and
source line.
"""

from __future__ import annotations

from ._common import add_command
from ._gap_inside import add_inside_arguments, run_inside
from .emit import emit
from .options import EXIT_OK, add_gate, gate_failed, add_output

_METRICS = ["MSE", "L1", "SNR", "cosine", "max_abs"]


def register(sub) -> None:
    p = add_command(sub, "gap", "numeric gap per operator: ETRecord reference vs runtime intermediate outputs",
                    "etlens gap --etdump run.etdp --etrecord model.etrecord --debug-buffer run.debug.bin "
                    "--metric SNR --fail-on-gap 30")
    p.add_argument("--etdump", help="ETDump (.etdp) written with intermediate outputs")
    p.add_argument("--etrecord", help="ETRecord with representative inputs")
    p.add_argument("--debug-buffer", help="debug buffer file written next to the ETDump")
    p.add_argument("--inputs", metavar="FILE.pt",
                   help="the method's inputs, torch.save-d as a tuple (default: the ETRecord's representative "
                        "inputs, else recovered from the debug buffer)")
    add_inside_arguments(p)
    p.add_argument("--run", type=int, default=0, metavar="N",
                   help="which run of forward to compare: 0 = the first (an LLM's prefill, default); N > 0 replays "
                        "the reference over runs 0..N carrying the KV cache (a decode step)")
    p.add_argument("--metric", default="MSE", choices=_METRICS, type=_metric, help="distance (default MSE)")
    add_gate(p, "gap", "rows whose gap crosses X are marked; a crossing fails the gate (above X for MSE/L1/max_abs, "
             "below X for SNR/cosine)", aliases=["--threshold"], dest="threshold")
    p.add_argument("--reference-graph", default=None,
                   help="exported_program | edge_dialect_exported_program | a graph-map name (default: auto)")
    p.add_argument("--explain", action="store_true", help="also list ops/events without a row, and why")
    p.add_argument("--multi-output", action="store_true",
                   help="also compare ops that return several tensors (ExecuTorch skips them; torch.nn.LSTM/GRU "
                        "export as one such op)")
    p.add_argument("--delegate-outputs", default="graph", choices=["graph", "executorch"],
                   help="pair each output of a delegate call with the node that returns it (graph, default) or "
                        "by ExecuTorch's positional rule (executorch)")
    add_output(p)
    p.set_defaults(func=run)


def _metric(text: str) -> str:
    for m in _METRICS:
        if m.lower() == text.lower():
            return m
    return text


def _fmt_gap(values) -> str:
    return ", ".join(f"{v:.6g}" for v in values)


def _short(items, limit: int = 4) -> str:
    items = list(items)
    if len(items) <= limit:
        return ", ".join(map(str, items))
    return ", ".join(map(str, items[:limit])) + f", ... (+{len(items) - limit})"


def run(args) -> int:
    import os

    from ..errors import MissingDataError

    if args.model or args.demo or args.inside_delegates:
        return run_inside(args)
    for flag in ("etdump", "etrecord", "debug_buffer"):
        if getattr(args, flag) is None:
            raise MissingDataError(f"--{flag.replace('_', '-')} is required (or --model/--demo with "
                                   "--inside-delegates to lower and run a model)")
    for flag, path in (("--etdump", args.etdump), ("--etrecord", args.etrecord), ("--debug-buffer", args.debug_buffer)):
        if not os.path.exists(path):
            hint = (" (write it with module.write_etdump_result_to_file(etdp, debug_path) after loading the "
                    "program with enable_etdump=True, debug_buffer_size=...)") if flag == "--debug-buffer" else ""
            raise MissingDataError(f"{flag} {path}: no such file{hint}")

    from ..analysis import numerics
    from ..analysis.comparators import get_comparator
    from ..analysis.inspector import Inspector

    insp = Inspector(etdump_path=args.etdump, etrecord=args.etrecord, debug_buffer_path=args.debug_buffer)
    analysis = numerics.analyze(insp, args.reference_graph, inputs=args.inputs, run=args.run,
                                delegate_outputs=args.delegate_outputs)
    multi = bool(getattr(args, "multi_output", False))
    df = analysis.gap_table(args.metric, multi_output=multi)
    comparator = get_comparator(args.metric)
    crossing = []
    if args.threshold is not None:
        for i, gaps in enumerate(df["gap"]):
            if any(comparator.crosses(float(g), args.threshold) for g in gaps):
                crossing.append(i)
    first = analysis.first_divergence(args.threshold, args.metric, multi_output=multi) if crossing else None
    explain = analysis.explain_unpaired(multi_output=multi) if args.explain else None
    inside = _inside_rows(args, analysis)  # per-op outputs inside delegates that log them by name (QNN)
    covered = {n for _, res in inside for n in res.names}
    if covered:  # their own rows replace the generic pairing of those outputs (raw, NHWC, no encodings)
        keep = [i for i, r in enumerate(df.itertuples()) if not set(r.runtime_ops) <= covered]
        crossing = [keep.index(i) for i in crossing if i in keep]
        df = df.iloc[keep].reset_index(drop=True)
        first = first if first is None or not set(first.runtime_ops) <= covered else None
    inside_first = next((res.first_divergence_json() for _, res in inside if res.first_divergence), None)
    inside_crossing = sum(1 for _, res in inside for r in res.rows if r.crosses) if args.threshold is not None else 0

    def doc() -> dict:
        out = {
            "metric": args.metric,
            "threshold": args.threshold,
            "reference_graph": analysis.reference_graph,
            "inputs_source": analysis.inputs_source,
            "run": analysis.run,
            "rows": [{
                "aot_debug_handle": list(r.aot_debug_handle), "aot_ops": list(r.aot_ops),
                "runtime_ops": list(r.runtime_ops), "runtime_debug_handle": list(r.runtime_debug_handle),
                "gap": list(r.gap),   # NaN and inf are null (the emitter's NaN policy)
                "crosses_threshold": i in crossing, "inside_delegate": False,
            } for i, r in enumerate(df.itertuples())] + [r.to_json(args.metric) for _, res in inside for r in res.rows],
            "crossing": len(crossing) + inside_crossing,
            # the op inside a delegate names the divergence more precisely than the delegate's output
            "first_divergence": inside_first or (first.to_dict() if first else None),
        }
        for backend, res in inside:
            out[f"{backend}_inside"] = {"criterion": res.criterion, "rows": len(res.rows), "unpaired": res.unpaired}
        if explain is not None:
            out["unpaired"] = [{k: v for k, v in rec.items() if k != "stack_trace"}
                               for rec in explain.astype(object).where(explain.notna(), None).to_dict("records")]
        return out

    def text() -> str:
        from tabulate import tabulate

        rows = [[i, _short(r.aot_ops), _short(r.runtime_ops), _short(r.aot_debug_handle, 6), _fmt_gap(r.gap),
                 "!" if i in crossing else ""] for i, r in enumerate(df.itertuples())]
        lines = [f"numeric gap ({args.metric}) against {analysis.reference_graph}: {len(df)} op groups"
                 + (f", run {analysis.run}" if analysis.run else "")
                 + (f" (inputs {analysis.inputs_source})" if analysis.inputs_source else ""), "",
                 tabulate(rows, headers=["#", "reference ops", "runtime ops", "debug handles", args.metric, ""],
                          tablefmt="simple")]
        if args.threshold is not None:
            side = "below" if comparator.higher_is_better else "above"
            lines += ["", f"{len(crossing)} of {len(df)} groups {side} threshold {args.threshold:g}"]
            if first is not None:
                lines.append(str(first))
                from ..builder.inside.graph import user_frame

                frame = user_frame(first.stack_trace)
                if frame:
                    lines.append("  at " + frame)
        for backend, res in inside:
            lines += ["", f"inside {backend}: {len(res.rows)} per-op outputs ({args.metric}, SNR dB)",
                      tabulate([[r.node, r.module_path, r.layout, f"{r.gap:.6g}" if r.gap is not None else "",
                                 f"{r.snr_db:.1f}" if r.snr_db is not None else "", "!" if r.crosses else ""]
                                for r in res.rows], headers=["node", "module", "layout", args.metric, "SNR dB", ""],
                               tablefmt="simple")]
            if res.first_divergence is not None:
                r = res.first_divergence
                lines.append(f"first divergence inside {backend}: {r.node} ({r.module_path or 'root'}; "
                             f"{res.criterion}: SNR {r.snr_db:.1f} dB)")
        if explain is not None and len(explain):
            lines += ["", f"without a row of their own ({len(explain)}):",
                      tabulate([[r.side, r.name, r.reason, r.detail] for r in explain.itertuples()],
                               headers=["side", "name", "reason", "why"], tablefmt="simple")]
        return "\n".join(lines)

    emit(args, doc=doc, text=text,
         rows=(["group", "aot_ops", "runtime_ops", "aot_debug_handle", "runtime_debug_handle", "gap",
                "crosses_threshold"],
               [[i, list(r.aot_ops), list(r.runtime_ops), list(r.aot_debug_handle), list(r.runtime_debug_handle),
                 list(r.gap), i in crossing] for i, r in enumerate(df.itertuples())]))
    if crossing or inside_crossing:
        return gate_failed(f"{len(crossing) + inside_crossing} op group(s) cross --fail-on-gap {args.threshold:g} "
                           f"({args.metric})")
    return EXIT_OK


def _inside_rows(args, analysis) -> list:
    """``[(backend name, result)]`` from every backend whose ``numerics`` hook reads per-op outputs of a dump."""
    from ..backends import hooks

    out = []
    for backend, numerics in hooks("numerics"):
        fn = getattr(numerics, "inside_rows", None)
        res = fn(analysis, args.etdump, args.debug_buffer, args.etrecord, metric=args.metric,
                 threshold=args.threshold) if fn is not None else None
        if res is not None:
            out.append((backend.name, res))
    return out
