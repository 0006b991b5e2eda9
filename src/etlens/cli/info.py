"""``etlens info ARTIFACT``: what is in a file (format, methods, operators, delegates, handles)."""

from __future__ import annotations

import json

from ._common import add_command, write_text
from .options import EXIT_OK, add_output, flatten, render_rows


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
    if args.format == "json":
        text = json.dumps(summary, indent=2, sort_keys=False, default=str)
    elif args.format in ("csv", "tsv"):  # one row per field of the JSON document
        text = render_rows(["field", "value"], flatten(summary), args.format)
    else:
        text = format_summary(summary)
    write_text(text, args.output)
    return EXIT_OK
