"""Fully-int8 I/O: the program takes and returns int8 and matches the float-wrapped program.

Both programs run (XNNPACK: in the ExecuTorch runtime; portable: as edge programs): the float-wrapped one
on the float input, the int8 one on the input quantized with the recorded parameters; the int8
output, dequantized at the boundary, must equal the float-wrapped program's output.
"""

from __future__ import annotations

import pytest

from .conftest import requires_executorch

pytestmark = requires_executorch


@pytest.fixture(scope="module")
def quantized():
    import torch

    from etlens.demos import get_demo
    from etlens.builder.backends import get_backend
    from etlens.builder.quantize import quantize_pt2e

    model, inputs = get_demo("mlp")
    q = quantize_pt2e(model, inputs, get_backend("xnnpack"))
    return torch.export.export(q, inputs), inputs


_KEEP = []  # the runtime reads the program buffer in place: keep it alive


def _run(edge, x):
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    buf = edge.to_executorch().buffer
    _KEEP.append(buf)
    return _load_for_executorch_from_buffer(buf).forward((x,))[0]


@pytest.mark.parametrize("delegate", [False, True], ids=["portable", "xnnpack"])
def test_int8_io_matches_float_wrapped(quantized, delegate):
    import torch
    from executorch.exir import to_edge_transform_and_lower

    from etlens.passes.quantize_io import QuantizeInputs, QuantizeOutputs

    ep, inputs = quantized

    def partitioner():
        if not delegate:
            return None
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        return [XnnpackPartitioner()]

    wrapped = to_edge_transform_and_lower(ep, partitioner=partitioner())
    qin, qout = QuantizeInputs(), QuantizeOutputs()
    int8 = to_edge_transform_and_lower(ep, transform_passes=[qin, qout], partitioner=partitioner())

    # the edge program's own signature: int8 in, int8 out
    prog = int8.exported_program()
    user_in = [n for n in prog.graph.nodes if n.op == "placeholder" and n.name in prog.graph_signature.user_inputs]
    assert [n.meta["val"].dtype for n in user_in] == [torch.int8]
    out_node = next(n for n in prog.graph.nodes if n.op == "output")
    assert [a.meta["val"].dtype for a in out_node.args[0]] == [torch.int8]
    assert set(qin.qparams) == {0} and set(qout.qparams) == {0}

    x = inputs[0]
    # XNNPACK: both programs in the ExecuTorch runtime. Portable: the edge programs themselves (the
    # runtime would need the quantized kernel library, whose AOT registration clashes with the
    # pybindings in one process).
    run = _run if delegate else (
        lambda e, v: e.exported_program().module()(v))
    y_float = run(wrapped, x)
    xq = qin.qparams[0].quantize(x)
    assert xq.dtype == torch.int8
    yq = run(int8, xq)
    assert yq.dtype == torch.int8
    assert y_float.dtype == torch.float32
    y = qout.qparams[0].dequantize(yq)
    assert torch.allclose(y, y_float, atol=1e-6), (y - y_float).abs().max()


def test_strict_indices_explain_what_is_wrong():
    import torch

    from etlens.errors import EtlensError
    from etlens.passes.quantize_io import QuantizeInputs, QuantizeOutputs

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x)

    gm = torch.export.export(M(), (torch.randn(2),)).graph_module
    with pytest.raises(EtlensError, match="input 0 does not exist"):
        QuantizeInputs([0])(gm)
    with pytest.raises(EtlensError, match="not by a dequantize_per_tensor|not a dequantize|produced by"):
        QuantizeOutputs([0])(gm)
    assert QuantizeOutputs()(gm).modified is False


def test_tracer_quantize_io_stage():

    import etlens
    from etlens.demos import get_demo

    trace = etlens.trace_passes(*get_demo("mlp"), backend="xnnpack", quantize=True, quantize_io=True, passes=[])
    assert [s.stage for s in trace.snapshots] == ["quantize", "export", "to_edge", "quantize_io", "quantize_io",
                                                  "lower"]
    qi = trace["QuantizeInputs"]
    removed = [trace.snapshots[qi.index - 1].graph[n].target for n in qi.diff["removed"]]
    assert removed == ["quantized_decomposed.quantize_per_tensor.default"]
    x = next(n for n in qi.graph if n.kind == "input")
    assert x.outputs[0].dtype == "int8"
    qo = trace["QuantizeOutputs"]
    assert [trace.snapshots[qo.index - 1].graph[n].target for n in qo.diff["removed"]] == [
        "quantized_decomposed.dequantize_per_tensor.default"]
    low = trace["lower"].graph
    assert next(n for n in low if n.kind == "input").outputs[0].dtype == "int8"
