"""Torch reader: .pt2 files, in-memory ExportedProgram / GraphModule / ExecuTorch managers."""

from __future__ import annotations

import json

import pytest

from tests.conftest import requires_executorch
from etlens.errors import FormatError, MissingDataError, UnsupportedFormatError
from etlens.readers import read, read_object
from etlens.readers._fx import target_name
from etlens.readers.exported import graph_from_exported_program, graph_from_graph_module

CASES = ["mlp_xnnpack", "mlp_portable", "cnn_xnnpack", "cnn_q8_xnnpack", "mixed_xnnpack", "transformer_portable"]


def _load(path):
    import torch

    from etlens.readers._torch_compat import ensure_quant_ops

    ensure_quant_ops()
    return torch.export.load(path)


@requires_executorch
@pytest.mark.parametrize("case", CASES)
def test_pt2_matches_in_memory_program(artifacts, case):
    path = artifacts[case].pt2
    art = read(path)
    assert art.format == "pt2"
    (name, graph), = art.graphs().items()
    assert name == case
    graph.lint()
    ep = _load(path)
    mem = read_object(ep, name=case).graphs()[case]
    assert json.dumps(graph.to_json(), sort_keys=True) == json.dumps(mem.to_json(), sort_keys=True)
    # node set = the program's node set
    want = {(n.name, target_name(n.target) if n.op == "call_function" else n.op) for n in ep.graph.nodes}
    kinds = {"input": "placeholder", "param": "placeholder", "output": "output"}
    assert {(n.name, n.target if n.kind == "op" else kinds[n.kind]) for n in graph} == want
    # parameters/buffers come from the graph signature
    sig = {s.arg.name: s for s in ep.graph_signature.input_specs}
    for node in graph:
        if node.kind in ("input", "param"):
            assert (node.kind == "input") == (sig[node.name].kind.name == "USER_INPUT")
    for fx_node in ep.graph.nodes:
        node = graph[fx_node.name]
        val = fx_node.meta.get("val")
        if hasattr(val, "shape"):
            assert node.outputs[0].shape == tuple(val.shape)
            assert node.outputs[0].dtype == str(val.dtype).replace("torch.", "")
        stack = fx_node.meta.get("nn_module_stack")
        if stack:
            assert node.attrs["nn_module_stack"] == {k: list(v) for k, v in stack.items()}
            assert node.module_stack[-1] == tuple(list(stack.values())[-1])
        assert node.stack_trace == (fx_node.meta.get("stack_trace") or None)
    assert graph.meta["format"] == "exported_program"


@requires_executorch
def test_pt2_graph_matches_etrecord_aten_stage(artifacts):
    """The .pt2 and the ETRecord's ATen program are the same program: same nodes and targets."""
    from etlens.readers.etrecord import read as read_etrecord

    for case in ("mlp_xnnpack", "transformer_portable"):
        pt2 = read(artifacts[case].pt2).graphs()[case]
        aten = read_etrecord(artifacts[case].etrecord).graph("exported_program")
        assert [(n.name, n.target, n.kind) for n in pt2] == [(n.name, n.target, n.kind) for n in aten]


def test_symbolic_dims_and_args():
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)
            self.register_buffer("scale", torch.ones(3))

        def forward(self, x):
            return self.lin(x).relu() * self.scale

    batch = torch.export.Dim("batch", min=2, max=64)
    ep = torch.export.export(M(), (torch.randn(5, 4),), dynamic_shapes=({0: batch},))
    g = graph_from_exported_program(ep, "m").lint()
    x = g["x"]
    assert x.kind == "input" and isinstance(x.outputs[0].shape[0], str) and x.outputs[0].shape[1] == 4
    assert g["b_scale"].kind == "param" and g["b_scale"].attrs["param_kind"] == "buffer"
    assert g["b_scale"].attrs["target"] == "scale"
    assert g["p_lin_weight"].attrs["param_kind"] == "parameter"
    lin = g["linear"]
    assert lin.target == "aten.linear.default" and lin.inputs == ["x", "p_lin_weight", "p_lin_bias"]
    assert lin.attrs["args"] == "%x, %p_lin_weight, %p_lin_bias"
    assert lin.module_stack[-1] == ("lin", "torch.nn.modules.linear.Linear")
    assert g.counts_by_category() == {"placeholder": 1, "param": 3, "aten_compute": 3, "output": 1}
    # a plain GraphModule: no signature, so every placeholder is an input
    gm = graph_from_graph_module(ep.module(), "gm").lint()
    assert gm.meta == {"format": "graph_module", "stage": "gm"}
    assert any(n.target == "aten.linear.default" for n in gm)


def test_unsupported_object():
    with pytest.raises(UnsupportedFormatError, match="cannot read a builtins.int"):
        read_object(42)


def test_pt2_bad_input(tmp_path):
    p = tmp_path / "model.pt2"
    p.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(FormatError, match="model.pt2"):
        read(p)
    import zipfile

    q = tmp_path / "other.pt2"
    with zipfile.ZipFile(q, "w") as z:
        z.writestr("archive/data.json", "{}")
    with pytest.raises(FormatError, match=r"other\.pt2: torch\.export\.load could not read this \.pt2"):
        read(q)
    with pytest.raises(MissingDataError, match="no such file"):
        from etlens.readers.exported import read as read_pt2

        read_pt2(tmp_path / "missing.pt2")


def test_pt2_absurd_sizes_and_names(committed, tmp_path):
    import zipfile

    src = committed["mlp_portable"].pt2
    evil = tmp_path / "evil.pt2"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(evil, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info.filename))
        zout.writestr("../outside", b"x")
    with pytest.raises(FormatError, match=r"'\.\./outside' escapes the archive"):
        read(evil)
    data = bytearray(open(src, "rb").read())
    with zipfile.ZipFile(src) as z:
        first = z.infolist()[0].filename.encode()
    pos = 0
    while True:  # the central-directory record of the first entry (the signature also occurs in data)
        pos = data.index(b"PK\x01\x02", pos)
        n = int.from_bytes(data[pos + 28:pos + 30], "little")
        if data[pos + 46:pos + 46 + n] == first:
            break
        pos += 4
    data[pos + 24:pos + 28] = (0x7FFFFFF0).to_bytes(4, "little")
    big = tmp_path / "big.pt2"
    big.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="declares 2147483632 bytes"):
        read(big)


def test_committed_pt2(committed):
    for case in committed.values():
        art = read(case.pt2)
        (g,) = art.graphs().values()
        g.lint()
        assert g.ops() and all(n.target.startswith("aten.") for n in g.ops())


# In-memory EdgeProgramManager / ExecutorchProgramManager / lowered GraphModule: see
# test_etrecord_delegates.py (it shares one lowering of the demo with the ETRecord delegate tests).


@requires_executorch
def test_dict_of_programs(artifacts):
    ep = _load(artifacts["mlp_portable"].pt2)
    art = read_object({"a": ep, "b": ep})
    assert list(art.graphs()) == ["a", "b"] and art.format == "programs"
