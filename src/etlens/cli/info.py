"""``etlens info ARTIFACT``: what is in a file (format, methods, operators, delegates, handles)."""

from __future__ import annotations

import json

from ._common import add_command, write_text


def register(sub) -> None:
    p = add_command(sub, "info", "summarise any artifact (.pte, .etrecord, .pt2, .etdp, trace JSON)",
                    "etlens info model.pte --json")
    p.add_argument("artifact", help="path to the file")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("-o", "--output", help="write to this file instead of stdout")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..readers import read
    from ..views.text import format_summary

    summary = read(args.artifact).summary()
    text = json.dumps(summary, indent=2, sort_keys=False, default=str) if args.json else format_summary(summary)
    write_text(text, args.output)
    return 0
