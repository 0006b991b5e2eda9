"""ETRecord reader: agrees with executorch.devtools.etrecord.parse_etrecord on real artifacts."""

from __future__ import annotations

import json

import pytest

from tests.conftest import requires_executorch
from etlens.readers import read
from etlens.readers.etrecord import ETRecord

CASES = ["mlp_xnnpack", "mlp_portable", "cnn_xnnpack", "cnn_q8_xnnpack", "mixed_xnnpack", "transformer_portable"]


@pytest.fixture(scope="module")
def parsed(artifacts):
    """{case: (etlens ETRecord, ExecuTorch ETRecord)} parsed once per module."""
    from executorch.devtools.etrecord import parse_etrecord

    return {c: (read(artifacts[c].etrecord), parse_etrecord(artifacts[c].etrecord)) for c in CASES}


def _norm_handles(table):
    """ExecuTorch stores a handle as int or list and keys as strings: normalise both."""
    return {m: {int(k): (v if isinstance(v, list) else [v]) for k, v in t.items()} for m, t in table.items()}


def _et_stages(et):
    stages = []
    if et.exported_program is not None:
        stages.append("exported_program")
    edge = et.edge_dialect_program
    if isinstance(edge, dict):
        stages += [f"edge_dialect_exported_program/{m}" for m in edge]
    elif edge is not None:
        stages.append("edge_dialect_exported_program/forward")
    stages += list(et.graph_map or {})
    return stages


def _et_program(et, stage):
    if stage == "exported_program":
        return et.exported_program
    if stage.startswith("edge_dialect_exported_program/"):
        edge = et.edge_dialect_program
        return edge[stage.split("/", 1)[1]] if isinstance(edge, dict) else edge
    return et.graph_map[stage]


def _node_set(ep):
    from etlens.readers._fx import target_name

    out = set()
    for n in ep.graph.nodes:
        if n.op == "call_function":
            out.add((n.name, target_name(n.target)))
        else:
            out.add((n.name, n.op))
    return out


def _graph_node_set(graph):
    kinds = {"input": "placeholder", "param": "placeholder", "output": "output"}
    return {(n.name, n.target if n.kind in ("op", "delegate") else kinds[n.kind]) for n in graph}


@requires_executorch
@pytest.mark.parametrize("case", CASES)
def test_stages_and_maps_match_executorch(parsed, case):
    ours, et = parsed[case]
    assert isinstance(ours, ETRecord) and ours.format == "etrecord"
    assert ours.stages == _et_stages(et)
    assert ours.stages[:2] == ["exported_program", "edge_dialect_exported_program/forward"]
    assert ours.debug_handle_map == _norm_handles(et._debug_handle_map)
    assert ours.instruction_id_to_num_outs_map == {
        m: {int(k): v for k, v in t.items()} for m, t in et._instruction_id_to_num_outs_map.items()}
    et_delegates = {m: {int(k): v for k, v in t.items()} for m, t in et._delegate_map.items()}
    assert ours.delegate_map == et_delegates
    assert ours.export_graph_id == et.export_graph_id
    # the ExecuTorch-compatible raw views are exactly what ExecuTorch holds
    assert ours._debug_handle_map == et._debug_handle_map
    assert ours._delegate_map == et._delegate_map


@requires_executorch
@pytest.mark.parametrize("case", CASES)
def test_node_sets_match_executorch_and_metadata_kept(parsed, case):
    ours, et = parsed[case]
    graphs = ours.graphs()
    assert list(graphs) == ours.stages
    for stage, graph in graphs.items():
        graph.lint()
        et_ep = _et_program(et, stage)
        assert _graph_node_set(graph) == _node_set(et_ep), stage
        et_nodes = {n.name: n for n in et_ep.graph.nodes}
        for node in graph:
            ref = et_nodes[node.name].meta
            want = ref.get("debug_handle")
            want = () if want is None else (tuple(want) if isinstance(want, (list, tuple)) else (want,))
            assert node.debug_handles == want, (stage, node.name)
            stack = ref.get("nn_module_stack")
            if stack:
                assert node.attrs["nn_module_stack"] == {k: list(v) for k, v in stack.items()}
                assert node.module_stack == [tuple(v) for v in stack.values()]
            assert node.stack_trace == (ref.get("stack_trace") or None)
            src = ref.get("from_node")
            if src:
                assert node.lineage and node.lineage[0].name == src[0].name
                assert node.lineage[0].pass_name == src[0].pass_name
        # the edge program is where ExecuTorch assigns handles: every op has one
        if stage.startswith("edge_dialect_exported_program/"):
            covered, total = graph.debug_handle_coverage()
            assert total and covered == total
        assert graph.meta["format"] == "etrecord" and graph.meta["stage"] == stage


@requires_executorch
@pytest.mark.parametrize("case", CASES)
def test_json_graph_equals_rebuilt_program_graph(parsed, case):
    """The fast graph (from the stored JSON) equals the graph of the rebuilt, runnable program."""
    from etlens.readers._fx import ORIGINAL_TARGET_META

    ours, _ = parsed[case]
    for stage in ours.stages:
        fast, slow = ours.graph(stage), ours.graph(stage, rebuild=True)
        assert fast.to_json() == slow.to_json(), stage
        # ops replaced by a plain-torch equivalent still show what ExecuTorch recorded
        for node in ours.load_exported_program(stage).graph.nodes:
            if ORIGINAL_TARGET_META in node.meta:
                assert fast[node.name].target.startswith("dim_order_ops.")
                assert "dim_order=" in fast[node.name].attrs["args"]


@requires_executorch
def test_handles_in_map_are_in_edge_graph(parsed):
    """Every handle of the runtime map names at least one node of the edge program."""
    for case in CASES:
        ours, _ = parsed[case]
        edge = ours.graph("edge_dialect_exported_program/forward")
        have = {h for n in edge for h in n.debug_handles}
        used = {h for t in ours.debug_handle_map.values() for hs in t.values() for h in hs}
        assert used <= have, case


@requires_executorch
@pytest.mark.parametrize("case", ["mlp_xnnpack", "cnn_q8_xnnpack", "mixed_xnnpack", "transformer_portable"])
def test_programs_run_like_executorch(parsed, case):
    import torch

    ours, et = parsed[case]
    inputs = ours.representative_inputs
    assert inputs is not None and len(inputs) == 1
    et_inputs = et._representative_inputs
    assert all(torch.equal(a, b) for a, b in zip(inputs[0], et_inputs[0]))
    for stage in ("exported_program", "edge_dialect_exported_program/forward"):
        ep = ours.load_exported_program(stage)
        assert ours.load_exported_program(stage) is ep  # cached
        got = ep.module()(*inputs[0])
        want = _et_program(et, stage).module()(*inputs[0])
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    # the edge program computes what the ATen program computes
    torch.testing.assert_close(ours.load_exported_program("edge_dialect_exported_program/forward").module()(*inputs[0]),
                               ours.exported_program.module()(*inputs[0]))


@requires_executorch
def test_edge_program_keeps_stored_target_names(parsed):
    """dim_order ops run as plain clone/_to_copy but the Graph shows what ExecuTorch recorded."""
    ours, _ = parsed["transformer_portable"]
    graph = ours.graph("edge_dialect_exported_program/forward")
    targets = graph.counts_by_target()
    assert "dim_order_ops._clone_dim_order.default" in targets
    ep = ours.load_exported_program("edge_dialect_exported_program/forward")
    clones = [n for n in ep.graph.nodes if n.name.startswith("dim_order_ops__clone_dim_order")]
    assert clones and all(str(n.target) == "aten.clone.default" for n in clones)


@requires_executorch
def test_summary(parsed):
    ours, _ = parsed["mixed_xnnpack"]
    s = ours.summary()
    json.dumps(s)
    assert s["format"] == "etrecord"
    assert s["stages"] == ours.stages
    assert s["maps"]["debug_handle_map"] == {"forward": 3}
    assert s["delegates"] == {"XnnpackBackend": 2}
    assert s["has_representative_inputs"] is True and s["has_reference_outputs"] is False
    edge = s["graphs"]["edge_dialect_exported_program/forward"]
    assert edge["debug_handle_coverage"] == [6, 6]
    assert edge["operators"]["aten.linear.default"] == 3
    assert edge["schema_version"] == "5.4"


def test_committed_etrecord_reads(committed):
    """The committed files read without the artifacts fixture (also run with executorch blocked)."""
    for case in committed.values():
        rec = read(case.etrecord)
        assert rec.stages[:2] == ["exported_program", "edge_dialect_exported_program/forward"]
        assert rec.debug_handle_map["forward"]
        for g in rec.graphs().values():
            g.lint()
        ep = rec.load_exported_program("edge_dialect_exported_program/forward")
        out = ep.module()(*rec.representative_inputs[0])
        ref = rec.load_exported_program("exported_program").module()(*rec.representative_inputs[0])
        assert out.shape == ref.shape


def test_public_api_is_pinned(committed):
    """Other parts of etlens code against exactly these names."""
    from etlens.readers import etrecord, exported

    assert sorted(etrecord.__all__) == ["EDGE_PREFIX", "ETRecord", "EXPORTED_PROGRAM", "IDENTIFIER", "read"]
    assert sorted(exported.__all__) == ["ExportedArtifact", "graph_from_exported_program", "graph_from_graph_module",
                                        "load_exported_program", "read", "read_object", "spec_type_names"]
    rec = read(committed["mlp_portable"].etrecord)
    for name in ("stages", "debug_handle_map", "delegate_map", "instruction_id_to_num_outs_map", "export_graph_id",
                 "representative_inputs", "reference_outputs", "graphs", "graph", "summary", "load_exported_program",
                 "program_json", "edge_stages", "graph_map_stages", "exported_program", "edge_dialect_program",
                 "graph_map", "_debug_handle_map", "_delegate_map", "_instruction_id_to_num_outs_map",
                 "_representative_inputs", "_reference_outputs", "entries"):
        assert hasattr(rec, name), name
    assert isinstance(rec.debug_handle_map["forward"], dict)
    assert all(isinstance(k, int) and isinstance(v, list) for k, v in rec.debug_handle_map["forward"].items())
