"""``schema/op_kwargs.py`` (scripts/gen_op_kwargs.py) agrees with torch's operator schemas.

The ETRecord graph reader prints arguments by keyword as torch does, from this table instead of
importing torch; a table out of step with the installed torch would print them differently.
"""

from __future__ import annotations

import keyword

import pytest


def test_table_matches_torch_schemas():
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch.ao.quantization.fx._decomposed")  # registers quantized_decomposed.*

    from etlens.schema.op_kwargs import KEYWORD_ARGS

    checked = 0
    for key, value in KEYWORD_ARGS.items():
        ns, name, overload = key.split(".")
        try:
            op = getattr(getattr(getattr(torch.ops, ns), name), overload)
        except (AttributeError, RuntimeError):
            continue  # a library that is not loaded here (ExecuTorch's custom ops, torchao)
        want = {a.name for a in op._schema.arguments
                if (a.kwarg_only or a.has_default_value()) and not keyword.iskeyword(a.name)}
        assert set(filter(None, value.split(","))) == want, key
        checked += 1
    assert checked > 2000
    assert KEYWORD_ARGS["aten.add.Tensor"] == "alpha"


def test_reader_does_not_import_torch_for_known_ops():
    import subprocess
    import sys

    code = ("import sys; from etlens.readers._export_json import _keyword_args; "
            "r = _keyword_args('executorch.exir.dialects.edge.ops.aten.add.Tensor'); "
            "print(sorted(r), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['alpha'] False"
