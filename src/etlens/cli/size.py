"""``etlens size X.pte``: where the bytes of a program go; the parts add up exactly to the file size."""

from __future__ import annotations

from ._common import add_command
from .emit import emit
from .options import EXIT_OK, add_output

__all__ = ["register", "run"]


def register(sub) -> None:
    p = add_command(sub, "size", "byte breakdown of a .pte (header, program tables, constants, delegates, padding)",
                    "etlens size model.pte --etrecord model.etrecord --html size.html")
    p.add_argument("pte", help="the .pte program")
    p.add_argument("--etrecord", help=".etrecord of the same program: names constants by module")
    add_output(p)
    p.add_argument("--html", metavar="FILE", help="also write a treemap (offline HTML)")
    p.add_argument("--top", type=int, default=20, help="largest parts listed in the text output")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..analysis.size import size_of_file

    etrecord = None
    if args.etrecord:
        from ..readers.etrecord import read as read_etrecord

        etrecord = read_etrecord(args.etrecord)
    report = size_of_file(args.pte, etrecord)
    from ..views.memsize_text import format_size

    # CSV/TSV: one row per part; the bytes add up to the file size
    emit(args, doc=report.to_json(), rows=[p.to_json() for p in report.parts],
         columns=["name", "bytes", "kind", "group", "detail"], text=lambda: format_size(report, args.top))
    if args.html:
        from ..views.treemap import write_treemap_html

        write_treemap_html(report, args.html)
    return EXIT_OK
