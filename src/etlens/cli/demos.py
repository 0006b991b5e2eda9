"""``etlens demos``: list the demo models (defined in code, no downloads) the other commands accept."""

from __future__ import annotations

import json

from ._common import add_command, write_text


def register(sub) -> None:
    p = add_command(sub, "demos", "list the built-in demo models (use them with --model / --demo)",
                    "etlens demos && etlens trace --model cnn --backend xnnpack -o trace.json")
    p.add_argument("--json", action="store_true", help="print {name: description} as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..passes.demos import DEMOS

    if args.json:
        text = json.dumps({name: desc for name, (_, desc) in DEMOS.items()}, indent=2)
    else:
        width = max(len(n) for n in DEMOS)
        text = "\n".join(f"{name:{width}}  {desc}" for name, (_, desc) in DEMOS.items())
    write_text(text, None)
    return 0
