"""The one decoder of torch.export's argument union (etlens.readers.export_args), kind by kind.

Each serialized kind torch.export writes decodes to one plain-Python form, shows as the text the graph
viewer prints, and yields the producer names the graph's edges follow; the numerics' JSON runner turns
the same decoded form into the values an ATen call takes (checked against torch here).
"""

from __future__ import annotations

import math

import pytest

from etlens.readers.export_args import (DeviceArg, EnumArg, GraphArg, OperatorArg, Ref, UnknownArg, arg_text,
                                        decode_arg, decode_float, refs, tensor_names)

#: (serialized argument, decoded, text)
CASES = [
    ({"as_tensor": {"name": "x"}}, Ref("x"), "%x"),
    ({"as_tensors": [{"name": "a"}, {"name": "b"}]}, [Ref("a"), Ref("b")], "[%a, %b]"),
    ({"as_optional_tensors": [{"as_tensor": {"name": "a"}}, {"as_none": True}]}, [Ref("a"), None], "[%a, None]"),
    ({"as_optional_tensor": {"as_tensor": {"name": "w"}}}, Ref("w"), "%w"),
    ({"as_optional_tensor": {"as_none": True}}, None, "None"),
    ({"as_none": True}, None, "None"),
    ({"as_int": 3}, 3, "3"),
    ({"as_bool": True}, True, "True"),
    ({"as_string": "mean"}, "mean", "mean"),
    ({"as_float": 0.5}, 0.5, "0.5"),
    ({"as_float": "-Infinity"}, -math.inf, "-inf"),
    ({"as_ints": [1, -1]}, [1, -1], "[1, -1]"),
    ({"as_floats": [1.0, "Infinity"]}, [1.0, math.inf], "[1.0, inf]"),
    ({"as_sym_int": {"as_name": "s0"}}, Ref("s0", sym=True), "%s0"),
    ({"as_sym_int": {"as_int": 4}}, 4, "4"),
    ({"as_sym_ints": [{"as_name": "s0"}, {"as_int": 2}]}, [Ref("s0", sym=True), 2], "[%s0, 2]"),
    ({"as_scalar_type": 7}, EnumArg("dtype", "float32"), "float32"),
    ({"as_scalar_type": 999}, EnumArg("dtype", "999", False), "999"),
    ({"as_memory_format": 1}, EnumArg("memory_format", "contiguous_format"), "contiguous_format"),
    ({"as_layout": 7}, EnumArg("layout", "strided"), "strided"),
    ({"as_device": {"type": "cpu", "index": 0}}, DeviceArg("cpu", 0), "cpu:0"),
    ({"as_device": {"type": "cpu"}}, DeviceArg("cpu"), "cpu"),
    ({"as_int_lists": [[1, 2], [3]]}, [[1, 2], [3]], "<as_int_lists>"),
    ({"as_complex": {"real": 1.0, "imag": -2.0}}, complex(1, -2), "<as_complex>"),
    ({"as_operator": "torch.ops.aten.add.Tensor"}, OperatorArg("torch.ops.aten.add.Tensor"), "<as_operator>"),
    ({"as_graph": {"name": "g"}}, GraphArg({"name": "g"}), "<graph>"),
    ({"as_new_kind": 1}, UnknownArg("as_new_kind", 1), "<as_new_kind>"),
]


@pytest.mark.parametrize("arg,decoded,text", CASES, ids=[next(iter(c[0])) + str(i) for i, c in enumerate(CASES)])
def test_decode_and_text(arg, decoded, text):
    assert decode_arg(arg) == decoded
    assert arg_text(decode_arg(arg)) == text


def test_names_and_refs():
    inputs = [{"name": "self", "arg": {"as_tensor": {"name": "x"}}},
              {"name": "others", "arg": {"as_optional_tensors": [{"as_tensor": {"name": "y"}}, {"as_none": True}]}},
              {"name": "size", "arg": {"as_sym_ints": [{"as_name": "s0"}]}}]
    assert tensor_names(inputs) == ["x", "y"]
    assert [r.name for a in inputs for r in refs(decode_arg(a["arg"]))] == ["x", "y", "s0"]
    assert tensor_names([{"as_tensors": [{"name": "a"}, {"name": "b"}]}]) == ["a", "b"]   # outputs
    assert math.isnan(decode_float("NaN")) and decode_float(2) == 2.0


def test_json_runner_values_match_torch():
    torch = pytest.importorskip("torch")
    from etlens.analysis.numerics.jsonrun import JsonProgram, Unsupported

    prog = JsonProgram({"graph_module": {"graph": {"nodes": []}}}, {})
    env = {"x": torch.ones(2), "s0": 5}
    assert prog.value(decode_arg({"as_scalar_type": 7}), env) is torch.float32
    assert prog.value(decode_arg({"as_device": {"type": "cpu", "index": 0}}), env) == torch.device("cpu", 0)
    assert prog.value(decode_arg({"as_sym_ints": [{"as_name": "s0"}, {"as_int": 2}]}), env) == [5, 2]
    assert prog.value(decode_arg({"as_operator": "torch.ops.aten.add.Tensor"}), env) is torch.ops.aten.add.Tensor
    assert prog.value(decode_arg({"as_tensor": {"name": "x"}}), env) is env["x"]
    for bad in ({"as_graph": {}}, {"as_new_kind": 1}, {"as_scalar_type": 999}):
        with pytest.raises(Unsupported):
            prog.value(decode_arg(bad), env)
