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
