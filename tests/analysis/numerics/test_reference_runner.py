"""The JSON reference runner on effect-only ops, and its fallback to torch's deserializer."""

from __future__ import annotations

from tests.conftest import requires_executorch


def test_bind_accepts_ops_that_return_nothing():
    from etlens.analysis.numerics.jsonrun import JsonNode, JsonProgram

    env: dict = {}
    # aten._assert_tensor_metadata / _assert_scalar: no outputs, result None (raised TypeError before)
    JsonProgram._bind(JsonNode("assert", "torch.ops.aten._assert_tensor_metadata.default", [], [], {}), None, env)
    JsonProgram._bind(JsonNode("n", "t", [], [{"as_none": True}], {}), None, env)
    JsonProgram._bind(JsonNode("m", "t", [], [{"as_tensor": {"name": "m"}}], {}), None, env)
    assert env == {"m": None}


@requires_executorch
def test_json_runner_failure_falls_back_to_the_deserialized_program():
    import torch

    from etlens.analysis.numerics.capture import RUNNER_FX, RUNNER_JSON, ReferenceProgram, capture_reference
    from etlens.analysis.numerics.jsonrun import JsonProgram

    class Add(torch.nn.Module):
        def forward(self, x):
            return x + 1

    ep = torch.export.export(Add(), (torch.ones(2),))
    for node in ep.graph_module.graph.nodes:
        if node.op == "call_function":
            node.meta["debug_handle"] = 1
    # add.Tensor without its second operand: the eager call raises TypeError inside the JSON runner
    doc = {"graph_module": {"graph": {
        "inputs": [{"as_tensor": {"name": "x"}}],
        "nodes": [{"name": "add", "target": "torch.ops.aten.add.Tensor",
                   "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "x"}}}],
                   "outputs": [{"as_tensor": {"name": "add"}}], "metadata": {"debug_handle": "1"}}]}}}
    ref = ReferenceProgram("edge_dialect_exported_program", JsonProgram(doc, {}), fallback=lambda: ep)
    cap = capture_reference(ref, (torch.ones(2),))
    assert cap.runner == RUNNER_FX and "JSON runner failed" in cap.fallback_reason
    assert torch.equal(cap.outputs[(1,)], torch.full((2,), 2.0))
    ok = {"graph_module": {"graph": {"inputs": doc["graph_module"]["graph"]["inputs"], "nodes": [dict(
        doc["graph_module"]["graph"]["nodes"][0], inputs=doc["graph_module"]["graph"]["nodes"][0]["inputs"] + [
            {"name": "other", "arg": {"as_tensor": {"name": "x"}}}])]}}}
    cap = capture_reference(ReferenceProgram("edge", JsonProgram(ok, {})), (torch.ones(2),))
    assert cap.runner == RUNNER_JSON and cap.fallback_reason is None


@requires_executorch
def test_compiled_json_runner_and_kept_lineage_match_the_deserialized_programs(artifacts):
    """The JSON runner (compiled once into steps) against torch's fx interpreter on the deserialized
    program, and the ATen handles propagated from the record's kept node columns against those from
    the edge program's full JSON, on real programs (decomposed attention, quantized, delegated)."""
    import torch

    from etlens.analysis.numerics.capture import (RUNNER_FX, RUNNER_JSON, ReferenceProgram, capture_reference,
                                                  pick_edge_stage, propagate_back_handles, resolve_reference)
    from etlens.analysis.numerics.jsonrun import JsonProgram, NodeLineage
    from etlens.analysis.record import as_record
    from etlens.readers.etrecord import read

    for case in ("transformer_portable", "cnn_q8_xnnpack", "mixed_xnnpack"):
        rec = as_record(read(artifacts[case].etrecord))
        edge = pick_edge_stage(rec.stages())
        aten = JsonProgram.from_record(rec, "exported_program")
        kept = propagate_back_handles(aten, rec.export_graph_id, NodeLineage.from_record(rec, edge))
        full = propagate_back_handles(aten, rec.export_graph_id, JsonProgram.from_record(rec, edge))
        assert kept == full and kept is not None, case
        ref = resolve_reference(rec)
        inputs = rec.representative_inputs()[0]
        fast = capture_reference(ref, inputs)
        slow = capture_reference(ReferenceProgram(ref.name, rec.load_program(ref.program.name), ref.handles), inputs)
        assert fast.runner == RUNNER_JSON and slow.runner == RUNNER_FX
        assert list(fast.outputs) == list(slow.outputs), case
        for key, a in fast.outputs.items():
            b = slow.outputs[key]
            if isinstance(a, torch.Tensor):
                assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), (case, key)
