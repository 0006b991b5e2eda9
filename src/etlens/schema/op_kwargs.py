"""Operator arguments torch passes by keyword, from ``op_kwargs.json`` (scripts/gen_op_kwargs.py).

``KEYWORD_ARGS["aten.add.Tensor"] == "alpha"``: the comma-separated names of the keyword-only
arguments and those with a default value; ``""`` for none. Operators not listed are looked up in
torch at run time. The table is package data (generated from torch's schemas, ~3,800 operators) so
the ETRecord reader can print arguments as torch does without importing torch.
"""

from __future__ import annotations

import json
from importlib import resources

__all__ = ["KEYWORD_ARGS", "TORCH_VERSION"]

_DATA = json.loads(resources.files(__package__).joinpath("op_kwargs.json").read_text(encoding="utf-8"))

#: the torch version the table was generated with
TORCH_VERSION: str = _DATA["torch_version"]
#: ``"ns.op.overload"`` -> comma-separated keyword argument names
KEYWORD_ARGS: dict[str, str] = _DATA["keyword_args"]
