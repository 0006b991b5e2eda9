"""``etlens size X.pte``: where the bytes of a program go; the parts add up exactly to the file size."""

from __future__ import annotations

import json

from ._common import add_command, write_text

__all__ = ["register", "run", "format_size"]


def register(sub) -> None:
    p = add_command(sub, "size", "byte breakdown of a .pte (header, program tables, constants, delegates, padding)",
                    "etlens size model.pte --etrecord model.etrecord --html size.html")
    p.add_argument("pte", help="the .pte program")
    p.add_argument("--etrecord", help=".etrecord of the same program: names constants by module")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("-o", "--output", help="write the text/JSON here instead of stdout")
    p.add_argument("--html", metavar="FILE", help="also write a treemap (offline HTML)")
    p.add_argument("--top", type=int, default=20, help="largest parts listed in the text output")
    p.set_defaults(func=run)


def format_size(report, top: int = 20) -> str:
    from ..views.memory_timeline import human_bytes

    total = report.total_bytes or 1
    groups: dict[str, int] = {}
    for p in report.parts:
        groups[p.group] = groups.get(p.group, 0) + p.bytes
    lines = [f"{report.path}: {report.total_bytes} bytes ({human_bytes(report.total_bytes)}), "
             f"{len(report.parts)} parts"]
    for g, b in sorted(groups.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {g:<34} {b:>12} B  {100 * b / total:5.1f}%")
    lines.append(f"largest {min(top, len(report.parts))} parts:")
    for p in sorted(report.parts, key=lambda p: -p.bytes)[:top]:
        lines.append(f"  {p.bytes:>12} B  {p.kind:<16} {p.name}")
    return "\n".join(lines)


def run(args) -> int:
    from ..analysis.size import size_of_file

    etrecord = None
    if args.etrecord:
        from ..readers.etrecord import read as read_etrecord

        etrecord = read_etrecord(args.etrecord)
    report = size_of_file(args.pte, etrecord)
    text = json.dumps(report.to_json(), indent=1) if args.format == "json" else format_size(report, args.top)
    write_text(text, args.output)
    if args.html:
        from ..views.treemap import write_treemap_html

        write_treemap_html(report, args.html)
    return 0
