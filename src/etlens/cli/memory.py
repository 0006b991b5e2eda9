"""``etlens memory X.pte``: planned memory per method and arena (sizes, lifetimes, peak, waste, overlaps)."""

from __future__ import annotations

import json

from ._common import add_command, write_text

__all__ = ["register", "run", "format_memory"]


def register(sub) -> None:
    p = add_command(sub, "memory", "planned memory of a .pte: arenas, tensor lifetimes, peak, waste, overlaps",
                    "etlens memory model.pte --etrecord model.etrecord --html memory.html")
    p.add_argument("pte", help="the .pte program")
    p.add_argument("--etrecord", help=".etrecord of the same program: names the ATen node and module of each tensor")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("-o", "--output", help="write the text/JSON here instead of stdout")
    p.add_argument("--html", metavar="FILE", help="also write the arena occupancy chart (offline HTML)")
    p.add_argument("--top", type=int, default=10, help="tensors listed per arena in the text output")
    p.set_defaults(func=run)


def format_memory(report, top: int = 10) -> str:
    from ..views.memory_timeline import human_bytes

    lines = [f"{report.path}"]
    for m in report.methods:
        lines.append(f"\nmethod {m.name}: {len(m.instructions)} instructions, {len(m.tensors)} planned tensors, "
                     f"non_const_buffer_sizes {list(m.non_const_buffer_sizes)}")
        for a in m.arenas:
            op = m.instructions[a.peak_at] if 0 <= a.peak_at < len(m.instructions) else "-"
            lines.append(f"  arena {a.id}: size {a.size} B ({human_bytes(a.size)}), peak live {a.peak_live} B at "
                         f"instruction {a.peak_at} ({op}), waste {a.waste} B, {len(a.live_at_peak)} tensors live at "
                         "the peak")
            big = sorted((t for t in m.tensors if t.arena == a.id), key=lambda t: -t.size)[:top]
            for t in big:
                where = f"  {t.node} ({t.module})" if t.node else ""
                lines.append(f"    v{t.value:<5} off {t.offset:>9} size {t.size:>9} live {t.first:>4}..{t.last:<4} "
                             f"{t.dtype}{list(t.shape)} {t.producer}{where}")
        for o in m.overlaps:
            lines.append(f"  overlap ({o.kind}): v{o.a} and v{o.b} share {o.bytes} B of arena {o.arena} during "
                         f"instructions {o.instructions[0]}..{o.instructions[1]}: {o.reason}")
    return "\n".join(lines)


def run(args) -> int:
    from ..analysis.memory import analyze_memory, attach_etrecord
    from ..readers.pte import read

    report = analyze_memory(read(args.pte))
    if args.etrecord:
        from ..readers.etrecord import read as read_etrecord

        attach_etrecord(report, read_etrecord(args.etrecord))
    if args.format == "json":
        text = json.dumps(report.to_json(), indent=1)
    else:
        text = format_memory(report, args.top)
    write_text(text, args.output)
    if args.html:
        from ..views.memory_timeline import write_memory_html

        write_memory_html(report, args.html)
    return 0
