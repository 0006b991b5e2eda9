"""Model Explorer export: the JSON loads into ai-edge-model-explorer's own types, namespaces collapse
as expected, partitions/QDQ clusters group, style rules and node data follow Model Explorer's formats,
and visualize* start (mocked) Model Explorer or say how to install it."""

from __future__ import annotations

import importlib.util
import json
import re
import sys

import pytest

from tests.conftest import requires_executorch
from tests.analysis.delegation.delegation_lowering import lowered

from etlens.errors import BackendUnavailableError, EtlensError, MissingDataError
from etlens.views import model_explorer as mex

#: found, not imported: Model Explorer's import costs seconds, paid by the tests that use it, not by collection
HAS_ME = importlib.util.find_spec("model_explorer") is not None


def _validate(collection: dict) -> None:
    """Load into Model Explorer's dataclasses (strict: unknown or missing fields fail)."""
    # the web app accepts an uploaded JSON when it has "label" and "graphs"
    assert isinstance(collection.get("label"), str) and isinstance(collection.get("graphs"), list)
    if HAS_ME:
        import dacite
        from model_explorer import graph_builder as gb

        coll = dacite.from_dict(gb.GraphCollection, collection, config=dacite.Config(strict=True))
        assert len(coll.graphs) == len(collection["graphs"])
    ids_by_graph = {g["id"] for g in collection["graphs"]}
    for g in collection["graphs"]:
        ids = [n["id"] for n in g["nodes"]]
        assert len(ids) == len(set(ids)), "node ids must be unique within a graph"
        for n in g["nodes"]:
            assert set(n) >= {"id", "label", "namespace", "attrs", "incomingEdges", "outputsMetadata"}
            for e in n["incomingEdges"]:
                assert e["sourceNodeId"] in ids, (g["id"], n["id"], e)
                assert set(e) == {"sourceNodeId", "sourceNodeOutputId", "targetNodeInputId"}
            for kv in n["attrs"]:
                assert isinstance(kv["key"], str) and isinstance(kv["value"], str)
            for sub in n.get("subgraphIds", []):
                assert sub in ids_by_graph


def _layers(namespace: str) -> list[str]:
    """The nested layers Model Explorer builds from a namespace (each prefix is one collapsible layer)."""
    parts = [p for p in namespace.split("/") if p]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


@requires_executorch
@pytest.mark.parametrize("kind", ["etrecord", "pte", "pt2"])
@pytest.mark.parametrize("clusters", [False, True])
def test_json_loads_in_model_explorer(artifacts, kind, clusters):
    collection = mex.to_model_explorer_json(getattr(artifacts["cnn_q8_xnnpack"], kind), clusters=clusters)
    _validate(collection)


@requires_executorch
def test_module_hierarchy_namespaces_collapse(artifacts):
    coll = mex.to_model_explorer_json(artifacts["cnn_xnnpack"].pt2)
    _validate(coll)
    (g,) = coll["graphs"]
    by_id = {n["id"]: n for n in g["nodes"]}
    # conv of blocks[0].depthwise sits three layers deep: blocks > 0 > depthwise
    conv = next(n for n in g["nodes"] if n["label"] == "aten.conv2d" and "depthwise" in n["namespace"])
    assert _layers(conv["namespace"])[:3] == ["blocks", "blocks/0", "blocks/0/depthwise"]
    layers = {ly for n in g["nodes"] for ly in _layers(n["namespace"])}
    assert {"stem", "blocks", "blocks/0", "blocks/1", "blocks/2", "classifier"} <= layers
    # collapsing "blocks" hides every node of the three blocks and nothing else
    inside = {n["id"] for n in g["nodes"] if n["namespace"].startswith("blocks")}
    assert inside and all("blocks" in (next((kv["value"] for kv in by_id[i]["attrs"] if kv["key"] == "module"), ""))
                          for i in inside)


@requires_executorch
def test_hierarchy_view_delegate_has_clickable_subgraph(artifacts):
    coll = mex.to_model_explorer_json(artifacts["mixed_xnnpack"].etrecord)
    _validate(coll)
    main, *subs = coll["graphs"]
    delegates = [n for n in main["nodes"] if n.get("subgraphIds")]
    assert [n["label"] for n in delegates] == ["XnnpackBackend #0", "XnnpackBackend #1"]
    inner_ops = {s["id"]: [n["id"] for n in s["nodes"] if n["label"].startswith("aten.")] for s in subs}
    assert inner_ops[delegates[1]["subgraphIds"][0]] == ["aten_linear_default_1", "aten_sin_default",
                                                           "aten_linear_default_2"]


@requires_executorch
def test_clusters_group_partitions_and_qdq(artifacts):
    coll = mex.to_model_explorer_json(artifacts["mixed_xnnpack"].etrecord, clusters=True)
    _validate(coll)
    ns = {n["id"]: n["namespace"] for n in coll["graphs"][0]["nodes"]}
    assert ns["aten_linear_default"] == ns["aten_relu_default"] == "partition 0 (XnnpackBackend #0)"
    assert ns["aten_sin_default"] == "partition 1 (XnnpackBackend #1)"
    assert ns["aten_cumsum_default"] == ""  # the fallback stays outside every partition
    # edges go through the expanded delegate: cumsum reads getitem which reads relu
    edges = {n["id"]: [e["sourceNodeId"] for e in n["incomingEdges"]] for n in coll["graphs"][0]["nodes"]}
    assert edges["aten_cumsum_default"] == ["getitem"] and edges["getitem"] == ["aten_relu_default"]
    assert len(coll["graphs"][0]["groupNodeConfigs"]) == 2

    q = mex.to_model_explorer_json(artifacts["cnn_q8_xnnpack"].etrecord, clusters=True)
    qns = {n["id"]: n["namespace"] for n in q["graphs"][0]["nodes"]}
    conv = "partition 0 (XnnpackBackend #0)/cluster (aten_convolution_default)"
    assert qns["aten_convolution_default"] == conv
    assert qns["quantized_decomposed_dequantize_per_tensor_default"] == conv       # dq feeding it
    assert qns["quantized_decomposed_quantize_per_tensor_default_1"] == conv       # q after it
    assert qns["quantized_decomposed_dequantize_per_channel_default"] == conv      # weight dq
    assert qns["getitem"] == ""  # no cluster across the partition boundary


@requires_executorch
def test_fx_callbacks_receive_torch_fx_nodes_like_executorch():
    # ExecuTorch's visualize_with_clusters contract: callbacks take a torch.fx.Node; partitions are
    # named "partition <i> (<name>)" in first-seen order, clusters "cluster (<name>)", "/" -> ":".
    import torch.fx
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge

    seen = []

    def part(node):
        seen.append(type(node))
        return node.meta.get("delegation_tag")

    ep = torch.export.export(*_mixed())
    edge_ep = to_edge(ep).exported_program()
    XnnpackPartitioner().partition(edge_ep)  # tags nodes with meta["delegation_tag"] like ExecuTorch does
    coll = mex.to_model_explorer_json(
        edge_ep, clusters=True, get_node_partition_name=part,
        get_node_qdq_cluster_name=lambda n: "a/b" if n.name == "aten_sin_default" else None)
    _validate(coll)
    assert seen and all(t is torch.fx.Node for t in seen)
    ns = {n["id"]: n["namespace"] for n in coll["graphs"][0]["nodes"]}
    first_gemm = next(n for n in coll["graphs"][0]["nodes"] if n["label"] in ("aten.addmm", "aten.linear"))
    assert first_gemm["namespace"].startswith("partition 0 (tag")
    assert ns["aten_sin_default"].startswith("partition 1 (tag") and ns["aten_sin_default"].endswith("/cluster (a:b)")
    assert ns["aten_cumsum_default"] == ""


def _mixed():
    from etlens.demos import get_demo

    return get_demo("mixed")


@requires_executorch
def test_in_memory_lowered_program_clusters():
    coll = mex.to_model_explorer_json(lowered("mixed_xnnpack"), clusters=True)
    _validate(coll)
    ns = {n["id"]: n["namespace"] for n in coll["graphs"][0]["nodes"]}
    # inner fx nodes carry the partitioner's tag; the delegate is their partition
    assert ns["aten_relu_default"].startswith("partition 0 (")
    assert ns["aten_sin_default"].startswith("partition 1 (")
    assert ns["aten_cumsum_default"] == ""


@requires_executorch
def test_style_rules_match_partitions_like_the_web_app(artifacts):
    coll = mex.to_model_explorer_json(artifacts["mixed_xnnpack"].etrecord, clusters=True)
    rules = mex.style_rules(coll)
    assert len(rules) == 4 and all(r["version"] == "v2" for r in rules)
    op_rules = [r for r in rules if r["nodeType"] == "op_nodes"]
    # the web app tests "key:value" of each attribute against the regex (case-insensitive)
    for i, rule in enumerate(op_rules):
        rx = re.compile(rule["queries"][1]["queryRegex"], re.I)
        hits = [n["id"] for n in coll["graphs"][0]["nodes"]
                if any(rx.search(f"{kv['key']}:{kv['value']}") for kv in n["attrs"])]
        by_id = {n["id"]: n for n in coll["graphs"][0]["nodes"]}
        assert hits and all(f"partition {i} (" in by_id[h]["namespace"] for h in hits)
    assert op_rules[0]["styles"]["node_bg_color"]["value"] != op_rules[1]["styles"]["node_bg_color"]["value"]


@requires_executorch
def test_node_data_by_id_and_by_debug_handle(artifacts):
    coll = mex.to_model_explorer_json(artifacts["mixed_xnnpack"].etrecord, clusters=True)
    gid = coll["graphs"][0]["id"]
    nd = mex.node_data(coll, {"aten_cumsum_default": 0.5, "5": 2.0}, "latency_ms")  # 5 = sin's handle
    results = nd[gid]["results"]
    assert results["aten_cumsum_default"] == {"value": 0.5}
    assert results["aten_sin_default"] == {"value": 2.0}
    if HAS_ME:
        import dacite
        from model_explorer.node_data_builder import GraphNodeData

        dacite.from_dict(GraphNodeData, nd[gid], config=dacite.Config(strict=True))
    with pytest.raises(MissingDataError, match="none of its keys"):
        mex.node_data(coll, {"no_such_node": 1.0}, "x")


def test_load_node_values_formats_and_errors(tmp_path):
    p = tmp_path / "a.json"
    p.write_text(json.dumps({"conv": 1, "relu": 2.5}))
    assert mex.load_node_values(str(p)) == {"conv": 1.0, "relu": 2.5}
    p.write_text(json.dumps([{"node": "conv", "value": 3}]))
    assert mex.load_node_values(str(p)) == {"conv": 3.0}
    p.write_text(json.dumps({"g": {"results": {"conv": {"value": 4}}}}))
    assert mex.load_node_values(str(p)) == {"conv": 4.0}
    p.write_text(json.dumps({"conv": "fast"}))
    with pytest.raises(EtlensError, match="should be a number"):
        mex.load_node_values(str(p))
    p.write_text("{not json")
    with pytest.raises(EtlensError, match="not valid JSON"):
        mex.load_node_values(str(p))
    with pytest.raises(EtlensError, match="no such file"):
        mex.load_node_values(str(tmp_path / "missing.json"))


@requires_executorch
@pytest.mark.skipif(not HAS_ME, reason="ai-edge-model-explorer not installed")
@pytest.mark.parametrize("reuse", [True, False])
def test_visualize_starts_model_explorer_mocked(artifacts, monkeypatch, reuse):
    import model_explorer

    calls = {}
    monkeypatch.setattr(model_explorer, "visualize_from_config",
                        lambda config=None, **kw: calls.setdefault("start", (config, kw)))
    monkeypatch.setattr(model_explorer.config().__class__, "set_reuse_server",
                        lambda self, *a, **k: calls.setdefault("reuse", True) and self)
    cfg = mex.visualize(artifacts["mixed_xnnpack"].etrecord, reuse_server=reuse, no_open_in_browser=True, port=8123,
                        node_data_values={"lat": {"aten_cumsum_default": 1.0}})
    config, kw = calls["start"]
    assert config is cfg and kw == {"no_open_in_browser": True, "port": 8123}
    assert calls.get("reuse", False) is reuse
    served = json.loads(cfg.graphs_list[0])
    _validate({"label": "x", "graphs": served["graphs"]})
    assert cfg.model_sources == [{"url": "graphs://Executorch/0"}]
    results = json.loads(cfg.node_data_list[0])[served["graphs"][0]["id"]]["results"]
    assert results["aten_cumsum_default"]["value"] == 1.0

    calls.clear()
    mex.visualize_with_clusters(lowered("mixed_xnnpack").exported_program(), reuse_server=reuse)
    config, _ = calls["start"]
    nodes = json.loads(config.graphs_list[0])["graphs"][0]["nodes"]
    assert any(n["namespace"].startswith("partition 1 (") for n in nodes)
    assert calls.get("reuse", False) is reuse


@requires_executorch
def test_visualize_without_model_explorer_says_how_to_install(artifacts, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "model_explorer", None)  # import fails as if not installed
    with pytest.raises(BackendUnavailableError, match="pip install ai-edge-model-explorer"):
        mex.visualize(artifacts["mixed_xnnpack"].etrecord)
    with pytest.raises(BackendUnavailableError, match="pip install ai-edge-model-explorer"):
        mex.visualize_with_clusters(artifacts["mixed_xnnpack"].etrecord)
    # writing the JSON needs no Model Explorer
    out = tmp_path / "g.json"
    mex.visualize_with_clusters(artifacts["mixed_xnnpack"].etrecord, json_file_name=str(out))
    monkeypatch.undo()
    _validate(json.loads(out.read_text()))
    assert (tmp_path / "g.style.json").exists()
