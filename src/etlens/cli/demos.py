"""``etlens demos``: list the demo models (defined in code, no downloads) the other commands accept."""

from __future__ import annotations

from ._common import add_command
from .emit import emit
from .options import EXIT_OK, add_output


def register(sub) -> None:
    p = add_command(sub, "demos", "list the built-in demo models (use them with --model / --demo)",
                    "etlens demos && etlens trace --model cnn --backend xnnpack -o trace.json")
    add_output(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..builder.demos import DEMOS

    width = max(len(n) for n in DEMOS)
    emit(args, doc={name: desc for name, (_, desc) in DEMOS.items()},   # JSON: {name: description}
         rows=[{"name": n, "description": d} for n, (_, d) in DEMOS.items()],
         text="\n".join(f"{name:{width}}  {desc}" for name, (_, desc) in DEMOS.items()))
    return EXIT_OK
