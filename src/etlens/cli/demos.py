"""``etlens demos``: list the demo models (defined in code, no downloads) the other commands accept."""

from __future__ import annotations

import json

from ._common import add_command, write_text
from .options import EXIT_OK, add_output, render_rows


def register(sub) -> None:
    p = add_command(sub, "demos", "list the built-in demo models (use them with --model / --demo)",
                    "etlens demos && etlens trace --model cnn --backend xnnpack -o trace.json")
    add_output(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..build.demos import DEMOS

    if args.format == "json":  # {name: description}, as before
        text = json.dumps({name: desc for name, (_, desc) in DEMOS.items()}, indent=2)
    elif args.format in ("csv", "tsv"):
        text = render_rows(["name", "description"], [(n, d) for n, (_, d) in DEMOS.items()], args.format)
    else:
        width = max(len(n) for n in DEMOS)
        text = "\n".join(f"{name:{width}}  {desc}" for name, (_, desc) in DEMOS.items())
    write_text(text, args.output)
    return EXIT_OK
