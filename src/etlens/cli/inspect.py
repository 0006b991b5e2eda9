"""``etlens inspect``: per-operator timings of an ETDump as a table, TSV, CSV or JSON, plus timelines.

Prints the events (ExecuTorch Inspector columns, ``OPERATOR_CALL`` rows folded away as in
``print_data_tabular``) and a one-paragraph summary: total time per block, top operators and the
delegated share of time. ``--perfetto`` writes a Chrome trace-event timeline, ``--tensorboard`` a
TensorBoard event file.

``--by-node`` (with ``--etrecord`` and ``--pte``) prints one row per ATen node instead: time inside
delegates attributed to the node that ran it (XNNPACK operators matched to the payload's nodes),
its module path and source line, plus the framework tax; ``--format json`` gives
``{"rows": [{"node", "debug_handles", "module_path", "avg_ms", "inside_delegate", "backend_ops", ...}],
"delegate_ms", "attributed_ms", "framework_ms", ...}``.
"""

from __future__ import annotations

import sys

from .._progress import console
from ._common import add_command, write_text
from .emit import emit, render, wants_data
from .options import EXIT_OK, add_output, add_prompt_len

__all__ = ["register", "run"]


def register(sub) -> None:
    p = add_command(sub, "inspect", "per-operator timings of an ETDump (+ ETRecord, + debug buffer)",
                    "etlens inspect --etdump run.etdp --etrecord model.etrecord --perfetto trace.json")
    p.add_argument("--etdump", required=True, help=".etdp written by write_etdump_result_to_file")
    p.add_argument("--etrecord", help=".etrecord of the same program (op types, stack traces, modules)")
    p.add_argument("--pte", help=".pte of the same program (lets --by-node look inside delegates)")
    p.add_argument("--by-node", action="store_true",
                   help="one row per ATen node, delegate-internal time included, plus the framework tax")
    p.add_argument("--debug-buffer", help="debug buffer .bin written next to the .etdp (intermediate outputs)")
    add_output(p)
    p.add_argument("--perfetto", metavar="TRACE_JSON", help="also write a Chrome/Perfetto trace-event timeline")
    p.add_argument("--tensorboard", metavar="LOGDIR", help="also write per-operator latency for TensorBoard")
    p.add_argument("--source-time-scale", default="ns", choices=["ns", "us", "ms", "s", "cycles"])
    p.add_argument("--target-time-scale", default="ms", choices=["ns", "us", "ms", "s", "cycles"])
    p.add_argument("--all-events", action="store_true", help="keep OPERATOR_CALL rows")
    p.add_argument("--no-summary", action="store_true", help="do not print the summary paragraph")
    p.add_argument("--allocations", action="store_true",
                   help="show the runtime allocations per run (allocators, largest, timeline) instead")
    p.add_argument("--method", help="only the runs of this method (a multi-method program, e.g. an LLM's "
                                    "'forward' apart from its metadata methods); default: all")
    p.add_argument("--llm", action="store_true",
                   help="the LLM view instead of the event table: each run labelled prefill (n tokens) or decode "
                        "and split into generate sessions, TTFT, tokens/s, decode latency p50/p90/p99 and drift, "
                        "time per operator class by phase. Labels are read from logged shapes with --debug-buffer, "
                        "else inferred from timings and the program (marked inferred). LLM dumps get a one-line "
                        "version in the summary automatically")
    add_prompt_len(p, "prompt length in tokens (one value for every session, or one per session in order): "
                      "exact token counts, TTFT and tokens/s on a timing-only dump")
    p.set_defaults(func=run)


def _by_node(insp) -> tuple[dict, int, str]:
    """(the emitter's shapes, rows, summary line) of ``--by-node``."""
    att = insp.attribution()
    s = att.summary()
    frac = s["attributed_fraction"]
    line = (f"Method::execute {s['execute_ms']:.4f} ms/run: delegates {s['delegate_ms']:.4f} ms (internal events "
            f"{s['delegate_internal_ms']:.4f}, of which attributed to nodes {s['attributed_ms']:.4f}"
            + (f" = {100 * frac:.1f}%" if frac is not None else "") + f"; delegate overhead "
            f"{s['delegate_overhead_ms']:.4f}), kernels {s['operator_ms']:.4f}, framework tax {s['framework_ms']:.4f}")
    if s.get("cycle_events"):  # accelerator cycles (QNN): kept apart from time, never summed into ms
        cf = s["cycles_attributed_fraction"]
        line += (f"; accelerator {s['cycles_avg']:.0f} cycles/run in {s['cycle_events']} per-op events, "
                 + (f"{100 * cf:.1f}% attributed to nodes" if cf is not None else "none attributed")
                 + " (rows: cycles_avg, estimated_avg_ms from the delegate's own clock)")

    def text() -> str:
        from tabulate import tabulate

        shown = insp.node_dataframe().drop(columns=["debug_handles", "match", "op", "backend", "p10 (ms)",
                                                    "p90 (ms)"])
        shown["backend_ops"] = [", ".join(x[:2]) + (" …" if len(x) > 2 else "") for x in shown["backend_ops"]]
        return tabulate(shown, headers="keys", tablefmt="simple", showindex=False, floatfmt=".4f")

    return {"doc": att.to_json, "rows": insp.node_dataframe, "text": text}, len(att.rows), line


def _table(df) -> str:
    """The event table for people: the raw ``start_time`` ticks are left to TSV/CSV/JSON."""
    from tabulate import tabulate

    shown = df.drop(columns=[c for c in ("start_time",) if c in df.columns])
    return tabulate(shown, headers="keys", tablefmt="simple", showindex=False)


def _allocations(args) -> int:
    from ..analysis.allocations import allocation_summary
    from ..readers.etdump import read_etdump
    from ..views.allocations import format_allocations

    summary = allocation_summary(read_etdump(args.etdump))
    emit(args, doc=summary, text=lambda: format_allocations(summary))   # CSV/TSV: field,value rows
    return EXIT_OK


def _llm_line(prof) -> str:
    parts = []
    for name in ("prefill", "decode"):
        st = prof.phases[name]
        if st.runs:
            parts.append(f"{name} {st.runs} run(s), {st.tokens} token(s), {st.ms_per_token:.4g} ms/token "
                         f"({st.tokens_per_s:,.0f} tokens/s)")
    if not parts:
        parts.append("runs not labelled")
    how = "" if getattr(prof, "labels", "read") == "read" else " (phases inferred from timings: no debug buffer)"
    n = len(getattr(prof, "sessions", []) or [])
    sessions = f"{n} sessions; " if n > 1 else ""
    return f"LLM ({prof.method}){how}: " + sessions + "; ".join(parts) + ". Details: etlens inspect --llm."


def run(args) -> int:
    if args.allocations:
        return _allocations(args)
    import warnings

    from .._progress import progress
    from ..compat import Inspector
    from ..model.events import TimeScale

    import os

    size = os.path.getsize(args.etdump) if os.path.exists(args.etdump) else 0
    bar = progress(total=3, desc="etlens inspect", unit="step", enabled=console().isatty() and size > (1 << 20))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bar.set_description("reading ETDump, grouping events" + (" + ETRecord" if args.etrecord else ""))
        insp = Inspector(etdump_path=args.etdump, etrecord=args.etrecord, debug_buffer_path=args.debug_buffer,
                         source_time_scale=TimeScale(args.source_time_scale),
                         target_time_scale=TimeScale(args.target_time_scale), pte=args.pte)
        bar.update(1)
        bar.set_description("building table")
        by_node_line = ""
        llm = None
        if args.llm or not args.no_summary:
            from ..analysis.llm import llm_profile

            llm = llm_profile(insp, args.method, prompt_lens=getattr(args, "prompt_len", None))
            if args.llm and llm is None:
                from ..errors import EtlensError

                raise EtlensError(f"{args.etdump}: no LLM ops (custom SDPA / KV-cache update / SDPA) in this "
                                  "ETDump, so there is no prefill/decode view; drop --llm")
        if args.llm:
            from ..views.llm import llm_text

            # CSV/TSV: one row per run: phase, tokens, time
            shapes = {"doc": llm.to_json, "rows": lambda: llm.to_json()["runs"], "text": lambda: llm_text(llm)}
            nrows = len(llm.runs)
        elif args.by_node:
            if not args.etrecord:
                from ..errors import EtlensError

                raise EtlensError("etlens inspect --by-node needs --etrecord (it names the nodes, modules and "
                                 "source lines); add --pte to look inside delegates")
            if not args.pte:
                warnings.warn("--by-node without --pte: time inside delegates stays <unattributed>; pass the "
                              ".pte to attribute it to nodes", stacklevel=1)
            shapes, nrows, by_node_line = _by_node(insp)
        else:
            if args.all_events:
                df = insp.to_dataframe(method=args.method).drop(columns=["debug_data"])
            else:
                df = insp.printed_dataframe(method=args.method)
            nrows = len(df)
            shapes = {"rows": df, "text": lambda: _table(df)}
        text = render(args, **shapes)
        bar.update(1)
        if args.perfetto:
            bar.set_description("writing timeline")
            insp.write_perfetto_trace(args.perfetto)
        if args.tensorboard:
            insp.write_tensorboard_artifact(args.tensorboard)
        bar.update(1)
        bar.close()
    for w in caught:
        if "Output Buffer not found" in str(w.message) and wants_data(args):
            continue
        print(f"etlens: warning: {w.message}", file=console())
    write_text(text, args.output)
    notes = []
    if args.output:
        notes.append(f"wrote {nrows} rows to {args.output}")
    if args.perfetto:
        notes.append(f"wrote timeline {args.perfetto} (open in https://ui.perfetto.dev)")
    if args.tensorboard:
        notes.append(f"wrote TensorBoard logs to {args.tensorboard} (tensorboard --logdir {args.tensorboard})")
    summary = "" if args.no_summary or args.llm else (by_node_line or insp.summary_text())
    if summary and llm is not None:
        summary += "\n" + _llm_line(llm)
    # keep machine-readable stdout clean: notes and summary go to stderr unless the table went to a file
    stream = sys.stdout if (not wants_data(args) or args.output) else console()
    if summary:
        print("\n" + summary if stream is sys.stdout and not args.output else summary, file=stream)
    for n in notes:
        print(n, file=stream)
    return EXIT_OK
