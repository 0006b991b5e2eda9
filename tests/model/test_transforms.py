"""model.transforms on real graphs: delegate inlining, QDQ clusters, the (de)quantize test."""

from __future__ import annotations

import pytest

from etlens.model import DelegateInfo, Graph, Node
from etlens.model.transforms import (
    inline_delegates,
    inlined_graph,
    is_dequantize,
    is_quantize,
    qdq_cluster_members,
    qdq_clusters,
)
from etlens.readers import read


@pytest.mark.parametrize("target, q, dq", [
    ("quantized_decomposed.quantize_per_tensor.default", True, False),
    ("quantized_decomposed::quantize_per_tensor.out", True, False),
    ("quantized_decomposed.dequantize_per_channel.default", False, True),
    ("quantized_decomposed::dequantize_per_tensor.out", False, True),
    ("quantized_decomposed.choose_qparams.tensor", False, False),  # computes a scale: neither
    ("torchao.quantize_affine.default", True, False),
    ("torchao.dequantize_affine.default", False, True),
    ("aten.convolution.default", False, False),
])
def test_quantize_vs_dequantize_by_operator_name(target, q, dq):
    node = Node("n", target=target)
    assert (is_quantize(node), is_dequantize(node)) == (q, dq)


def test_inline_committed_pte(committed):
    graph = read(committed["mlp_xnnpack"].pte).graph()
    items = inline_delegates(graph)
    by_name = {it.name: it for it in items}
    call = next(n for n in graph if n.delegate is not None)
    inner = call.delegate.inner
    # every inner node appears once, prefixed, before the call; top-level nodes keep their names
    assert [it.name for it in items if it.delegate == call.name] == [f"{call.name}/{n.name}" for n in inner]
    assert [it.name for it in items].index(call.name) > max(
        [it.name for it in items].index(f"{call.name}/{n.name}") for n in inner)
    assert {n.name for n in graph} <= set(by_name)
    # the subgraph's input placeholders read the call's arguments in order; its constants read nothing
    placeholders = [n.name for n in inner if n.kind == "input"]
    assert [by_name[f"{call.name}/{p}"].inputs for p in placeholders] == [[a] for a in call.inputs]
    assert all(by_name[f"{call.name}/{n.name}"].inputs == [] for n in inner if n.kind == "param")
    # the call reads the subgraph's output; its readers still read the call
    out = next(n.name for n in inner if n.kind == "output")
    assert by_name[call.name].inputs == [f"{call.name}/{out}"]
    assert by_name[call.name].node is call and by_name[call.name].delegate is None
    # every input is an earlier item (a DAG in order)
    seen: set[str] = set()
    for it in items:
        assert set(it.inputs) <= seen
        seen.add(it.name)
    flat = inlined_graph(graph)
    assert [n.name for n in flat] == [it.name for it in items]
    assert flat[f"{call.name}/{out}"].kind == "output" and flat[call.name].delegate is call.delegate


def test_inline_without_delegates_is_identity(committed):
    graph = read(committed["mlp_portable"].pte).graph()
    items = inline_delegates(graph)
    assert [it.name for it in items] == [n.name for n in graph]
    assert all(it.node is n and it.delegate is None for it, n in zip(items, graph, strict=True))
    assert inlined_graph(graph) is graph


def test_etrecord_shaped_subgraph_binds_every_placeholder_in_call_order():
    # a subgraph rebuilt from an ETRecord lists weights as placeholders too, in call order
    inner = Graph("inner")
    inner.add(Node("w", kind="param"))
    inner.add(Node("x", kind="input"))
    inner.add(Node("mm", target="aten.mm.default", inputs=["x", "w"]))
    g = Graph("g")
    g.add(Node("p_w", kind="param"))
    g.add(Node("x", kind="input"))
    g.add(Node("call", kind="delegate", target="executorch_call_delegate", inputs=["p_w", "x"],
               delegate=DelegateInfo("XnnpackBackend", inner=inner)))
    by_name = {it.name: it for it in inline_delegates(g)}
    assert by_name["call/w"].inputs == ["p_w"] and by_name["call/x"].inputs == ["x"]
    assert by_name["call"].inputs == ["p_w", "x"]  # no output node: the call reads its own arguments


def test_qdq_clusters_on_a_quantized_program(artifacts):  # the fixture skips without ExecuTorch
    rec = read(artifacts["cnn_q8_xnnpack"].etrecord)
    graph = rec.graph(stage="edge_dialect_exported_program/forward")
    clusters = qdq_clusters(graph)
    assert clusters, "a pt2e-quantized CNN has QDQ clusters"
    users = graph.users()
    heads = set(clusters.values())
    for name, head in clusters.items():
        node, op = graph[name], graph[head]
        assert op.category != "quantize" and op.kind == "op"
        if name == head:
            continue
        if is_dequantize(node):  # feeds only its op
            assert users.get(name) == [head]
        else:  # quantizes the op's result
            assert is_quantize(node) and node.inputs[0] == head
    convs = [n.name for n in graph if n.target and "convolution" in n.target]
    assert convs and set(convs) <= heads
    conv = graph[convs[0]]
    members = [m for m, h in clusters.items() if h == conv.name and m != conv.name]
    assert any(is_dequantize(graph[m]) for m in members) and any(is_quantize(graph[m]) for m in members)


def test_qdq_rules_shared_dequantize_and_boundaries():
    g = Graph("q")
    g.add(Node("x", kind="input"))
    g.add(Node("dq", target="quantized_decomposed.dequantize_per_tensor.default", inputs=["x"]))
    g.add(Node("a", target="aten.relu.default", inputs=["dq"]))
    g.add(Node("b", target="aten.sin.default", inputs=["dq"]))  # dq shared: it joins no cluster
    g.add(Node("q", target="quantized_decomposed.quantize_per_tensor.default", inputs=["a"]))
    g.add(Node("output", kind="output", inputs=["q", "b"]))
    assert qdq_clusters(g) == {"a": "a", "q": "a"}
    assert qdq_clusters(g, same_side=lambda m, op: False) == {}
    assert qdq_clusters(Graph("empty")) == {}
    nodes = list(g)
    assert qdq_cluster_members(nodes, [[], [0], [1], [1], [2], [4, 3]],
                               [[1], [2, 3], [4], [5], [5], []]) == {2: [4]}
