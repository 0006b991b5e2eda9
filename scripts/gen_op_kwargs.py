#!/usr/bin/env python3
"""Generate ``src/etlens/schema/op_kwargs.json``: which operator arguments torch passes by keyword.

The ETRecord's graph reader (``readers/_export_json.py``) prints each node's arguments the way
torch's own graph printer does: positional, except the arguments that are keyword-only or have a
default value. That is a fact of each operator's schema; asking torch for it means importing torch
(seconds of CPU) just to print argument lists, which made ``etlens report`` several times slower than
``etlens inspect``. This script records the answer for the operator namespaces ExecuTorch graphs use
(``aten``, ``quantized_decomposed``, ExecuTorch's ``llama`` custom ops, ``torchao``,
``dim_order_ops``); operators not in the table still ask torch.

Run it after upgrading torch or ExecuTorch, then review the diff::

    python scripts/gen_op_kwargs.py            # rewrite src/etlens/schema/op_kwargs.json
    python scripts/gen_op_kwargs.py --check    # exit 1 when it is out of date
"""

from __future__ import annotations

import argparse
import json
import keyword
import os
import sys

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src", "etlens", "schema",
                   "op_kwargs.json")
NAMESPACES = ("aten", "quantized_decomposed", "llama", "torchao", "dim_order_ops")


def collect() -> tuple[str, dict[str, str]]:
    import torch
    import torch.ao.quantization.fx._decomposed  # noqa: F401  quantized_decomposed.*

    for mod in ("executorch.extension.llm.custom_ops.custom_ops", "executorch.exir.passes.dim_order_ops_registry",
                "torchao.quantization.quant_primitives"):
        try:
            __import__(mod)
        except Exception as exc:  # noqa: BLE001 - a missing library only leaves its ops to torch at run time
            print(f"note: {mod} not loaded ({type(exc).__name__}); its ops are not in the table", file=sys.stderr)
    table: dict[str, str] = {}
    for schema in torch._C._jit_get_all_schemas():
        ns, _, name = schema.name.partition("::")
        if ns not in NAMESPACES or not name:
            continue
        kws = [a.name for a in schema.arguments
               if (a.kwarg_only or a.has_default_value()) and not keyword.iskeyword(a.name)]
        table[f"{ns}.{name}.{schema.overload_name or 'default'}"] = ",".join(kws)
    return torch.__version__, dict(sorted(table.items()))


def render(version: str, table: dict[str, str]) -> str:
    """The JSON data file :mod:`etlens.schema.op_kwargs` reads (one operator per line, diff-friendly)."""
    body = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in table.items())
    return f'{{"torch_version": {json.dumps(version)},\n "keyword_args": {{\n{body}\n}}}}\n'


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the generated file is out of date")
    args = ap.parse_args(argv)
    text = render(*collect())
    if args.check:
        current = open(OUT).read() if os.path.exists(OUT) else ""
        if current != text:
            print(f"{OUT} is out of date: run python scripts/gen_op_kwargs.py", file=sys.stderr)
            return 1
        return 0
    with open(OUT, "w") as f:
        f.write(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
