"""``etlens memory X.pte``: planned memory per method and arena (sizes, lifetimes, peak, waste, overlaps)."""

from __future__ import annotations

import json

from ._common import add_command, write_text
from .options import EXIT_OK, add_output, render_records

__all__ = ["register", "run"]


def register(sub) -> None:
    p = add_command(sub, "memory", "planned memory of a .pte: arenas, tensor lifetimes, peak, waste, overlaps",
                    "etlens memory model.pte --etrecord model.etrecord --html memory.html")
    p.add_argument("pte", help="the .pte program")
    p.add_argument("--etrecord", help=".etrecord of the same program: names the ATen node and module of each tensor")
    add_output(p)
    p.add_argument("--html", metavar="FILE", help="also write the arena occupancy chart (offline HTML)")
    p.add_argument("--top", type=int, default=10, help="tensors listed per arena in the text output")
    p.add_argument("--method", help="only this method (e.g. 'forward' of an LLM program; default: every method)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..analysis.memory import analyze_memory, attach_etrecord
    from ..readers.pte import read

    report = analyze_memory(read(args.pte))
    if args.method:
        from ..errors import EtlensError

        kept = [m for m in report.methods if m.name == args.method]
        if not kept:
            raise EtlensError(f"{args.pte}: no method {args.method!r}; methods: "
                              f"{', '.join(m.name for m in report.methods)}")
        report.methods = kept
    if args.etrecord:
        from ..readers.etrecord import read as read_etrecord

        attach_etrecord(report, read_etrecord(args.etrecord))
    if args.format == "json":
        text = json.dumps(report.to_json(), indent=1)
    elif args.format in ("csv", "tsv"):  # one row per planned tensor, every method and arena
        text = render_records([{"method": m.name, **t.to_json()} for m in report.methods for t in m.tensors],
                              args.format)
    else:
        from ..views.memsize_text import format_memory

        text = format_memory(report, args.top)
    write_text(text, args.output)
    if args.html:
        from ..views.memory_timeline import write_memory_html

        write_memory_html(report, args.html)
    return EXIT_OK
