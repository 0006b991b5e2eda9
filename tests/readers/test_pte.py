"""The native ``.pte`` reader agrees with ExecuTorch's own deserializer on real programs.

For every fixture case we parse the file with etlens and with
``executorch.exir._serialize._program.deserialize_pte_binary`` and compare methods, values,
instructions, operator tables, delegates (ids, compile specs, payload sizes) and constants.
XNNPACK payloads are checked against ``flatc``'s own JSON decoding of the XNNPACK schema.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from etlens.readers import read
from etlens.readers.pte import PteArtifact, read_pte_bytes


CASES = ["mlp_xnnpack", "mlp_portable", "cnn_xnnpack", "cnn_q8_xnnpack", "mixed_xnnpack", "transformer_portable"]


@pytest.fixture(scope="module")
def parsed(artifacts):
    """``{case: (etlens artifact, ExecuTorch PTEFile, raw bytes)}`` for every fixture case."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    out = {}
    for case in CASES:
        data = open(artifacts[case].pte, "rb").read()
        out[case] = (read(artifacts[case].pte), deserialize_pte_binary(data), data)
    return out


def _et_value(v):
    """(kind, comparable payload) of an ExecuTorch EValue."""
    val = v.val
    name = type(val).__name__
    if name == "Tensor":
        alloc = val.allocation_info
        return "tensor", (int(val.scalar_type), list(val.sizes), list(val.dim_order), val.data_buffer_idx,
                          None if alloc is None else (alloc.memory_id,
                                                      alloc.memory_offset_low | (alloc.memory_offset_high << 32)))
    kinds = {"Int": "int", "Bool": "bool", "Double": "double", "String": "string", "IntList": "int_list",
             "DoubleList": "double_list", "BoolList": "bool_list", "TensorList": "tensor_list",
             "OptionalTensorList": "optional_tensor_list", "Null": "null"}
    kind = kinds[name]
    if kind in ("int", "bool", "double", "string"):
        return kind, getattr(val, f"{kind}_val")
    if kind == "null":
        return kind, None
    return kind, list(val.items)


def _my_value(v):
    if v.kind == "tensor":
        t = v.val
        alloc = None if t.allocation is None else (t.allocation.memory_id, t.allocation.memory_offset)
        return "tensor", (t.scalar_type, list(t.sizes), list(t.dim_order), t.data_buffer_idx, alloc)
    if v.kind in ("int", "bool", "double", "string", "null"):
        return v.kind, v.val
    return v.kind, list(v.val)


def _et_instruction(ins):
    a = ins.instr_args
    name = type(a).__name__
    if name == "KernelCall":
        return name, a.op_index, list(a.args)
    if name == "DelegateCall":
        return name, a.delegate_index, list(a.args)
    if name == "MoveCall":
        return name, a.move_from, a.move_to
    if name == "JumpFalseCall":
        return name, a.cond_value_index, a.destination_instruction
    return name, a.value_index


def _my_instruction(ins):
    if ins.kind == "KernelCall":
        return ins.kind, ins.op_index, list(ins.args)
    if ins.kind == "DelegateCall":
        return ins.kind, ins.delegate_index, list(ins.args)
    if ins.kind == "MoveCall":
        return ins.kind, ins.move_from, ins.move_to
    if ins.kind == "JumpFalseCall":
        return ins.kind, ins.cond_value_index, ins.destination_instruction
    return ins.kind, ins.value_index


@pytest.mark.parametrize("case", CASES)
def test_agrees_with_executorch(parsed, case):
    _assert_agrees(*parsed[case])


def test_inline_delegates_and_two_methods(parsed):
    """Re-serialized by ExecuTorch with inline delegate data and a second method: still agrees."""
    import copy

    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    for case in ("mlp_xnnpack", "mixed_xnnpack"):
        pte_file = copy.deepcopy(parsed[case][1])
        second = copy.deepcopy(pte_file.program.execution_plan[0])
        second.name = "second"
        pte_file.program.execution_plan.append(second)
        data = bytes(serialize_pte_binary(pte_file, extract_delegate_segments=False))
        art = read_pte_bytes(data, name=f"{case}_inline.pte")
        assert [p.name for p in art.program.execution_plan] == ["forward", "second"]
        assert {d.location for p in art.program.execution_plan for d in p.delegates} == {"INLINE"}
        _assert_agrees(art, deserialize_pte_binary(data), data)
        assert set(art.graphs()) == {"forward", "second"}
        assert [m["name"] for m in art.summary()["methods"]] == ["forward", "second"]


def _assert_agrees(art, pte_file, data):
    mine, theirs = art.program, pte_file.program
    assert isinstance(art, PteArtifact)
    assert mine.version == theirs.version
    assert [p.name for p in mine.execution_plan] == [p.name for p in theirs.execution_plan]
    for mp, tp in zip(mine.execution_plan, theirs.execution_plan):
        assert list(mp.inputs) == list(tp.inputs)
        assert list(mp.outputs) == list(tp.outputs)
        assert [_my_value(v) for v in mp.values] == [_et_value(v) for v in tp.values]
        assert [len(c.instructions) for c in mp.chains] == [len(c.instructions) for c in tp.chains]
        for mc, tc in zip(mp.chains, tp.chains):
            assert list(mc.inputs) == list(tc.inputs) and list(mc.outputs) == list(tc.outputs)
            assert [_my_instruction(i) for i in mc.instructions] == [_et_instruction(i) for i in tc.instructions]
        assert [(o.name, o.overload) for o in mp.operators] == [(o.name, o.overload) for o in tp.operators]
        assert list(mp.non_const_buffer_sizes) == list(tp.non_const_buffer_sizes)
        assert [d.id for d in mp.delegates] == [d.id for d in tp.delegates]
        for md, td in zip(mp.delegates, tp.delegates):
            assert [(c.key, c.value) for c in md.compile_specs] == [(c.key, bytes(c.value)) for c in td.compile_specs]
            # ExecuTorch moves segment payloads back inline; the bytes must be the same.
            payload = theirs.backend_delegate_data[td.processed.index].data
            assert md.payload_size == len(payload)
            assert bytes(data[md.payload_offset:md.payload_offset + md.payload_size]) == payload
            assert md.decoded is not None or "xnnpack" not in md.id.lower()
    # Constants: ExecuTorch splits the constant segment back into one buffer per tensor.
    assert mine.num_constant_buffers() == len(theirs.constant_buffer)
    assert mine.constant_data_size() == sum(len(b.storage) for b in theirs.constant_buffer)
    assert mine.constant_sizes() == [len(b.storage) for b in theirs.constant_buffer]
    if pte_file.named_data is not None:
        assert sorted(nd.key for nd in mine.named_data) == sorted(pte_file.named_data.pte_data)


@pytest.mark.parametrize("case", CASES)
def test_graph_follows_data_flow(parsed, case):
    art, pte_file, _ = parsed[case]
    graphs = art.graphs()
    plan = pte_file.program.execution_plan[0]
    g = graphs[plan.name].lint()
    assert g.meta == {**g.meta, "format": "pte", "method": plan.name}
    calls = [i.instr_args for c in plan.chains for i in c.instructions]
    kernel = [a for a in calls if type(a).__name__ == "KernelCall"]
    delegate = [a for a in calls if type(a).__name__ == "DelegateCall"]
    assert len([n for n in g if n.kind == "op"]) == len(kernel)
    assert len([n for n in g if n.kind == "delegate"]) == len(delegate)
    assert len([n for n in g if n.kind == "input"]) == len(plan.inputs)
    assert [n.kind for n in g][-1] == "output"
    ops = [n for n in g if n.kind == "op"]
    for node, call in zip(ops, kernel):
        op = plan.operators[call.op_index]
        spelled = f"{op.name}.{op.overload}" if op.overload else op.name
        assert node.attrs["operator"] == spelled
        assert node.target == spelled.replace("::", ".")
    # Every op consumes something and every non-output node feeds someone (a connected program).
    users = g.users()
    for n in g:
        if n.kind in ("op", "delegate"):
            assert n.inputs, n.name
        if n.kind != "output":
            assert users[n.name], n.name
    for n in g.delegates():
        assert n.delegate.inner is not None and n.delegate.inner.ops()
        assert n.delegate.backend_id == "XnnpackBackend"
        assert n.delegate.payload_size > 0
        assert n.delegate.ops and all(op.startswith("XNN") for op in n.delegate.ops)
        assert n.attrs["xnnpack"]["num_values"] > 0
    out = g.nodes[-1]
    assert out.outputs and all(m.dtype == "float32" for m in out.outputs)


def test_mlp_portable_graph_shape(parsed):
    g = parsed["mlp_portable"][0].graphs()["forward"]
    targets = [n.target for n in g.ops()]
    assert targets == ["aten.permute_copy.out", "aten.addmm.out", "aten.relu.out", "aten.permute_copy.out",
                       "aten.addmm.out", "aten.add.out"]
    addmm = g["addmm"]
    assert [g[i].kind for i in addmm.inputs] == ["param", "input", "op"]
    assert addmm.outputs[0].dtype == "float32" and len(addmm.outputs[0].shape) == 2
    assert addmm.attrs["instruction"] == 1 and addmm.attrs["chain"] == 0
    assert g.nodes[-1].inputs == ["add"]
    # the first weight (32x16 float32) is constant buffer 1 of 2048 bytes
    params = {n.attrs["data_buffer_idx"]: n for n in g if n.kind == "param"}
    assert params[1].attrs["nbytes"] == 2048 and params[1].outputs[0].shape == (32, 16)


def _flatc_json(payload: bytes, tmp_path) -> dict:
    """Decode an XNNGraph FlatBuffer with the real flatc and the XNNPACK schema."""
    import executorch.backends.xnnpack.serialization as ser
    from executorch.exir._serialize._flatbuffer import _get_flatc_path

    schema = os.path.join(list(ser.__path__)[0], "schema.fbs")
    fb = tmp_path / "graph.bin"
    fb.write_bytes(payload)
    subprocess.run([_get_flatc_path(), "--json", "--strict-json", "--defaults-json", "--raw-binary",
                    "-o", str(tmp_path), schema, "--", str(fb)], check=True, capture_output=True)
    # flatc writes non-finite floats (output_min/max) as bare inf/nan, which JSON lacks
    text = re.sub(r":\s*[-+]?(inf|nan)\b", ": null", (tmp_path / "graph.json").read_text())
    return json.loads(text)


@pytest.mark.parametrize("case", ["mlp_xnnpack", "cnn_q8_xnnpack", "mixed_xnnpack"])
def test_xnnpack_payload_matches_flatc(parsed, case, tmp_path):
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import XNNHeader

    art, _, data = parsed[case]
    for d in art.program.execution_plan[0].delegates:
        payload = bytes(data[d.payload_offset:d.payload_offset + d.payload_size])
        header = XNNHeader.from_bytes(payload[:XNNHeader.EXPECTED_LENGTH])
        x = d.decoded
        assert x is not None and x.has_header
        assert x.flatbuffer_size == header.flatbuffer_size
        assert x.constant_data_size == header.constant_data_size
        ref = _flatc_json(payload[header.flatbuffer_offset:header.flatbuffer_offset + header.flatbuffer_size],
                          tmp_path)
        assert x.op_names() == [n["xnode_union_type"] for n in ref["xnodes"]]
        assert len(x.values) == len(ref["xvalues"])
        assert [n.debug_handle for n in x.nodes] == [
            0 if n["debug_handle"] in (0xFFFF, 0xFFFFFFFF) else n["debug_handle"] for n in ref["xnodes"]]
        assert list(x.input_ids) == ref["input_ids"] and list(x.output_ids) == ref["output_ids"]
        for node, rn in zip(x.nodes, ref["xnodes"]):
            fields = rn["xnode_union"]
            outs = [v for k, v in fields.items() if k.startswith("output") and k.endswith("_id")]
            ids = [v for k, v in fields.items() if k.endswith("_id") and not k.startswith("output")]
            assert list(node.outputs) == outs
            assert all(i in ids for i in node.inputs)
        named = sum(1 for c in ref.get("constant_data", []) if c.get("named_key"))
        assert len(x.named_keys) == named
        # the delegated subgraph: one op node per XNode, wired by value ids
        inner = x.to_graph("inner").lint()
        assert [n.target for n in inner.ops()] == ["xnnpack." + t[3:] for t in x.op_names()]
        assert all(n.category == "backend" for n in inner.ops())
        assert len([n for n in inner if n.kind == "input"]) == len(ref["input_ids"])
        assert inner.nodes[-1].kind == "output" and len(inner.nodes[-1].inputs) == len(ref["output_ids"])
        users = inner.users()
        assert all(users[n.name] for n in inner if n.kind != "output")


def test_committed_pte_parse(committed):
    for case in ("mlp_xnnpack", "mlp_portable"):
        art = read(committed[case].pte)
        assert art.format == "pte" and art.path == committed[case].pte
        plan = art.program.execution_plan[0]
        assert plan.name == "forward"
        g = art.graphs()["forward"].lint()
        assert g.meta["format"] == "pte"
    x = read(committed["mlp_xnnpack"].pte)
    d = x.program.execution_plan[0].delegates[0]
    assert d.id == "XnnpackBackend" and d.location == "SEGMENT" and d.payload_size > 0
    assert d.decoded.op_names() == ["XNNFullyConnected", "XNNFullyConnected", "XNNAdd"]
    p = read(committed["mlp_portable"].pte)
    assert [o.qualified for o in p.program.execution_plan[0].operators] == [
        "aten::permute_copy.out", "aten::addmm.out", "aten::relu.out", "aten::add.out"]
    assert p.program.extended_header is not None and p.program.constant_data_size() > 0


def test_read_pte_bytes_and_summary(committed):
    data = open(committed["mlp_xnnpack"].pte, "rb").read()
    art = read_pte_bytes(data, name="mem.pte")
    s = art.summary()
    assert s["format"] == "pte" and s["path"] == "mem.pte" and s["file_size"] == len(data)
    (m,) = s["methods"]
    assert m["name"] == "forward" and m["num_instructions"] == 1 and m["operators"] == []
    (d,) = m["delegates"]
    assert d["backend_id"] == "XnnpackBackend" and d["ops"] == ["XNNFullyConnected", "XNNFullyConnected", "XNNAdd"]
    assert d["payload_size"] == art.program.execution_plan[0].delegates[0].payload_size
    assert m["by_category"]["delegate"] == 1
    json.dumps(s)  # JSON-ready
    # graphs are cached and returned as fresh dicts
    assert art.graphs()["forward"] is art.graphs()["forward"]


@pytest.mark.parametrize("case", ["mlp_portable", "transformer_portable", "mixed_xnnpack"])
def test_instruction_ids_match_etdump(parsed, artifacts, case):
    """``attrs['chain']``/``attrs['instruction']`` are the ids ETDump's operator events carry."""
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    g = parsed[case][0].graphs()["forward"]
    by_id = {(n.attrs["chain"], n.attrs["instruction"]): n for n in g.ops()}
    dump = deserialize_from_etdump_flatcc(open(artifacts[case].etdump, "rb").read())
    seen = set()
    for run in dump.run_data:
        for event in run.events:
            pe = event.profile_event
            if pe is None or not (pe.name or "").startswith("native_call_"):
                continue
            node = by_id[(pe.chain_index, pe.instruction_id)]
            assert node.attrs["operator"].split("::")[-1] == pe.name[len("native_call_"):]
            seen.add(node.name)
    assert seen == {n.name for n in g.ops() if n.kind == "op"}
