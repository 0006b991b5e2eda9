"""``etlens info ARTIFACT``: what is in a file (format, methods, operators, delegates, handles)."""

from __future__ import annotations

from ._common import add_command
from .emit import emit
from .options import EXIT_OK, add_output


def register(sub) -> None:
    p = add_command(sub, "info", "summarise any artifact (.pte, .etrecord, .pt2, .etdp, trace JSON)",
                    "etlens info model.pte --format json")
    p.add_argument("artifact", help="path to the file")
    add_output(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..readers import read
    from ..views.text import format_summary

    summary = read(args.artifact).summary()
    # CSV/TSV: one field,value row per field of the JSON document
    emit(args, doc=summary, text=lambda: format_summary(summary))
    return EXIT_OK
