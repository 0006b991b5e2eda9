"""Failing passes are recorded (traceback, valid file); the handle validator catches dropped handles."""

from __future__ import annotations

import json

import pytest

from .conftest import requires_executorch


def _noop(gm):
    from torch.fx.passes.infra.pass_base import PassResult

    return PassResult(gm, False)


def first_pass(gm):
    return _noop(gm)


def second_pass(gm):
    return _noop(gm)


def exploding_pass(gm):
    raise ValueError("kaboom: unsupported pattern in exploding_pass")


def never_runs(gm):  # pragma: no cover - must not be reached
    raise AssertionError("a pass after the failing one ran")


def drop_addmm_handles(gm):
    """A careless pass: rewrites addmm nodes in place and forgets their debug handle."""
    from torch.fx.passes.infra.pass_base import PassResult

    hit = False
    for n in gm.graph.nodes:
        if "addmm" in str(n.target):
            n.meta.pop("debug_handle", None)
            hit = True
    return PassResult(gm, hit)


@pytest.fixture(scope="module")
def mlp():
    from etlens.demos import get_demo

    return get_demo("mlp")


def test_failing_pass_is_recorded_and_file_still_valid(mlp, tmp_path):
    import etlens
    from etlens.readers import read

    out = tmp_path / "failed.json"
    trace = etlens.trace_passes(*mlp, backend="aten", passes=[first_pass, second_pass, exploding_pass, never_runs],
                                output=str(out))
    names = [s.name for s in trace.snapshots]
    assert names == ["export", "run_decompositions", "first_pass", "second_pass", "exploding_pass"]
    failed = trace.failed
    assert failed is trace.snapshots[-1]
    assert failed.error["type"] == "ValueError"
    assert failed.error["message"].startswith(
        "pass exploding_pass failed after ['export', 'run_decompositions', 'first_pass', 'second_pass']")
    assert "kaboom" in failed.error["message"]
    assert 'in exploding_pass' in failed.error["traceback"] and "kaboom" in failed.error["traceback"]
    # the graph shown for the failed pass is the program it failed on
    assert len(failed.graph) == len(trace.snapshots[-2].graph)
    data = json.loads(out.read_text())
    assert data["snapshots"][-1]["error"]["type"] == "ValueError"
    art = read(out)
    assert art.format == "trace" and art.trace.failed.name == "exploding_pass"
    assert "exploding_pass" in art.summary()["failed"]


def test_raise_on_error_chains_the_original(mlp, tmp_path):
    import etlens
    from etlens.errors import PassFailedError

    out = tmp_path / "raised.json"
    with pytest.raises(PassFailedError, match=r"pass exploding_pass failed after \[.*'first_pass'\]") as info:
        etlens.trace_passes(*mlp, backend="aten", passes=[first_pass, exploding_pass], output=str(out),
                            raise_on_error=True)
    assert isinstance(info.value.__cause__, ValueError)
    assert out.exists() and json.loads(out.read_text())["snapshots"][-1]["error"] is not None


@requires_executorch
def test_failing_pass_inside_xnnpack_pipeline(tmp_path):
    import etlens
    from etlens.demos import get_demo
    from executorch.backends.xnnpack._passes.convert_to_linear import ConvertToLinearPass

    out = tmp_path / "x.json"
    trace = etlens.trace_passes(*get_demo("mlp"), backend="xnnpack", passes=[ConvertToLinearPass, exploding_pass],
                                output=str(out))
    assert [s.name for s in trace.snapshots] == ["export", "to_edge", "ConvertToLinearPass", "exploding_pass"]
    err = trace.failed.error
    # ExecuTorch's pass manager wraps the exception; the snapshot shows the original one
    assert err["type"] == "ValueError"
    assert err["message"].startswith("pass exploding_pass failed after ['export', 'to_edge', 'ConvertToLinearPass']")
    assert "lower" not in [s.name for s in trace.snapshots]
    assert etlens.read(str(out)).trace.failed is not None


def test_validator_catches_pass_that_drops_handles(mlp):
    import etlens
    from etlens.passes.debug_handles import validate_handles

    trace = etlens.trace_passes(*mlp, backend="aten", passes=[first_pass, drop_addmm_handles, second_pass])
    s = trace["drop_addmm_handles"]
    lost = s.handle_report["lost"]
    addmms = [n.name for n in s.graph if n.target == "aten.addmm.default"]
    assert addmms and sorted(x["node"] for x in lost) == sorted(addmms)
    assert all(x["pass"] == "drop_addmm_handles" and x["handles"] for x in lost)
    # the next pass does not get the blame
    assert trace["second_pass"].handle_report["lost"] == []
    assert trace["first_pass"].handle_report["lost"] == []
    # standalone validator, on the graphs as the pass left them (before propagation)
    before = trace["first_pass"].graph
    after = etlens.Graph.from_json(s.graph.to_json())
    for n in after:
        if n.attrs.pop("handles_propagated", False):
            n.debug_handles = ()
    problems = validate_handles(before, after, "drop_addmm_handles")
    assert sorted(p.node for p in problems) == sorted(addmms)
    assert "lost debug handles" in str(problems[0]) and "drop_addmm_handles" in str(problems[0])


def test_union_rule_for_fused_nodes():
    from etlens.model import Graph, Node
    from etlens.passes.debug_handles import check_handles

    prev = Graph("prev")
    prev.add(Node("x", kind="input"))
    prev.add(Node("a", target="aten.mul.Tensor", inputs=["x"], debug_handles=(3,)))
    prev.add(Node("b", target="aten.add.Tensor", inputs=["a"], debug_handles=(5,)))
    prev.add(Node("output", kind="output", inputs=["b"]))
    new = Graph("new")
    new.add(Node("x", kind="input"))
    new.add(Node("fused", target="backend.mul_add.default", inputs=["x"]))
    new.add(Node("output", kind="output", inputs=["fused"]))
    report = check_handles(prev, new, "Fuse", {"fused": ["a", "b"]})
    assert new["fused"].debug_handles == (3, 5)
    assert report["lost"][0]["from"] == ["a", "b"]
    # without recorded provenance the data flow still finds both fused nodes
    new["fused"].debug_handles = ()
    report = check_handles(prev, new, "Fuse")
    assert new["fused"].debug_handles == (3, 5) and report["inferred"] == ["fused"]


def test_generation_matches_executorch():
    """Our generator reproduces ExecuTorch's DebugHandleGeneratorPass on a real edge program."""
    pytest.importorskip("executorch.exir")
    import torch
    from executorch.exir import to_edge
    from executorch.exir.passes.debug_handle_generator_pass import DebugHandleGeneratorPass

    from etlens.demos import get_demo
    from etlens.passes.debug_handles import generate_debug_handles

    model, inputs = get_demo("transformer")
    gm = to_edge(torch.export.export(model, inputs)).exported_program().graph_module
    DebugHandleGeneratorPass()(gm)
    theirs = {n.name: n.meta.get("debug_handle") for n in gm.graph.nodes}
    for n in gm.graph.nodes:
        n.meta.pop("debug_handle", None)
    generate_debug_handles(gm)
    ours = {n.name: n.meta.get("debug_handle") for n in gm.graph.nodes}
    assert ours == theirs
    assert len(set(v for v in ours.values() if v)) < sum(1 for v in ours.values() if v)  # decompositions share


def test_fx_sources_follow_from_node():
    import torch
    from torch.fx.traceback import NodeSource

    from etlens.passes.debug_handles import fx_sources

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) + 1

    gm = torch.fx.symbolic_trace(M())
    nodes = {n.name: n for n in gm.graph.nodes}
    x, relu, add = nodes["x"], nodes["relu"], nodes["add"]
    # pretend a pass built `add` from x and relu of the previous graph
    add.meta["from_node"] = [NodeSource(x, "Fuse"), NodeSource(relu, "Fuse")]
    assert fx_sources(gm, ["x", "relu"])["add"] == ["x", "relu"]  # union of both sources
    # a name kept from the previous graph is the same node, whatever its history says
    assert fx_sources(gm, ["x", "relu", "add"])["add"] == ["add"]
    assert "add" not in fx_sources(gm, ["other"])
