"""The shared graph model: invariants, categories, JSON round trip, diff and matching."""

from __future__ import annotations

import json

import pytest

from etlens.errors import FormatError, GraphLintError
from etlens.model import DelegateInfo, Graph, LineageStep, Node, TensorMeta, categorize
from etlens.model.diff import diff_graphs, match_nodes


def _graph() -> Graph:
    g = Graph("g", {"format": "test"})
    g.add(Node("x", kind="input", outputs=[TensorMeta((1, "s0"), "float32")]))
    g.add(Node("w", kind="param", outputs=[TensorMeta((4, 4), "float32")]))
    g.add(Node("lin", target="aten.linear.default", inputs=["x", "w"], debug_handles=(1,),
               module_stack=[("", "M"), ("fc", "torch.nn.Linear")], stack_trace='File "m.py", line 3',
               lineage=[LineageStep("linear", "aten.linear.default", "export", 7)]))
    inner = Graph("inner")
    inner.add(Node("a", kind="input"))
    inner.add(Node("relu", target="aten.relu.default", inputs=["a"]))
    g.add(Node("call", kind="delegate", target="executorch_call_delegate", inputs=["lin"],
               delegate=DelegateInfo("XnnpackBackend", 128, {"k": "v"}, ["XNNFullyConnected"], inner, 0)))
    g.add(Node("out", kind="output", inputs=["call", "call"], attrs={"note": "twice"}))
    return g


@pytest.mark.parametrize("target,kind,expected", [
    ("aten.convolution.default", "op", "aten_compute"),
    ("aten::add.out", "op", "aten_compute"),
    ("aten.view_copy.default", "op", "memory"),
    ("aten::permute_copy.out", "op", "memory"),
    ("quantized_decomposed.quantize_per_tensor.default", "op", "quantize"),
    ("quantized_decomposed::dequantize_per_channel.out", "op", "quantize"),
    ("cortex_m::quantized_add.out", "op", "backend"),
    ("executorch_call_delegate", "op", "delegate"),
    ("dim_order_ops._to_dim_order_copy.default", "op", "memory"),
    (None, "input", "placeholder"),
    (None, "param", "param"),
    (None, "output", "output"),
])
def test_categorize(target, kind, expected):
    assert categorize(target, kind) == expected


def test_graph_basics_and_lint():
    g = _graph().lint()
    assert len(g) == 5 and "lin" in g and g["lin"].module_path == "fc"
    assert g["lin"].lineage_root == "linear"
    assert g.counts_by_category() == {"placeholder": 1, "param": 1, "aten_compute": 1, "delegate": 1, "output": 1}
    assert list(g.edges()) == [("x", "lin", 0), ("w", "lin", 1), ("lin", "call", 0), ("call", "out", 0),
                               ("call", "out", 1)]
    assert g.users()["call"] == ["out"]
    assert g.debug_handle_coverage() == (1, 2)
    assert [n.name for n in g.delegates()] == ["call"]
    assert g.unique_name("lin") == "lin_1" and g.unique_name("new") == "new"


@pytest.mark.parametrize("mutate,message", [
    (lambda g: g.add(Node("bad", kind="weird")), "unknown kind"),
    (lambda g: g.add(Node("y", inputs=["nope"])), "not a node"),
    (lambda g: g.add(Node("i2", kind="input", inputs=["x"])), "cannot have inputs"),
    (lambda g: g.add(Node("d", kind="delegate")), "without DelegateInfo"),
    (lambda g: g.add(Node("h", inputs=["x"], debug_handles=(-1,))), "debug handles"),
])
def test_lint_catches(mutate, message):
    g = _graph()
    mutate(g)
    with pytest.raises(GraphLintError, match=message):
        g.lint()


def test_lint_topological_order():
    g = Graph("t")
    g._nodes["b"] = Node("b", inputs=["a"])  # bypass add() order on purpose
    g._nodes["a"] = Node("a", kind="input")
    assert any("topological" in p for p in g.problems())


def test_duplicate_name_refused():
    g = _graph()
    with pytest.raises(GraphLintError, match="duplicate"):
        g.add(Node("x", kind="input"))


def test_json_round_trip_is_exact_and_compact():
    g = _graph()
    data = g.to_json()
    text = json.dumps(data, sort_keys=True)
    back = Graph.from_json(json.loads(text))
    assert json.dumps(back.to_json(), sort_keys=True) == text
    assert back["lin"].outputs == [] and back["x"].outputs[0] == TensorMeta((1, "s0"), "float32")
    assert back["call"].delegate.inner["relu"].target == "aten.relu.default"
    assert back["lin"].lineage[0] == LineageStep("linear", "aten.linear.default", "export", 7)
    assert back["out"].inputs == ["call", "call"]
    # strings are shared: the module path table holds one entry for the one stack
    assert data["strings"].count("torch.nn.Linear") == 1 and len(data["modules"]) == 1


@pytest.mark.parametrize("bad", [
    {}, {"schema": "etlens.graph", "version": 99}, {"schema": "etlens.graph", "version": 1, "strings": []},
    {"schema": "etlens.graph", "version": 1, "strings": [], "nodes": {"name": [3]}},
])
def test_json_malformed(bad):
    with pytest.raises(FormatError):
        Graph.from_json(bad)


def test_diff_by_lineage():
    old = Graph("old")
    old.add(Node("x", kind="input"))
    old.add(Node("lin", target="aten.linear.default", inputs=["x"], debug_handles=(1,)))
    old.add(Node("gone", target="aten.relu.default", inputs=["lin"]))
    old.add(Node("out", kind="output", inputs=["gone"]))
    new = Graph("new")
    new.add(Node("x", kind="input"))
    new.add(Node("t", target="aten.t.default", inputs=["x"], debug_handles=(1,), lineage=[LineageStep("lin")]))
    new.add(Node("mm", target="aten.mm.default", inputs=["t"], debug_handles=(1,), lineage=[LineageStep("lin")]))
    new.add(Node("fresh", target="aten.add.Tensor", inputs=["mm"]))
    new.add(Node("out", kind="output", inputs=["fresh"]))
    d = diff_graphs(old, new)
    assert d.rewritten == ["t", "mm", "out"] and d.replaced == ["lin"]
    assert d.added == ["fresh"] and d.removed == ["gone"] and d.kept == ["x"]
    assert d.origin["mm"] == "lin" and d.changed
    assert not diff_graphs(old, old).changed


def test_match_nodes_order_of_evidence():
    a = Graph("a")
    a.add(Node("linear", target="aten.linear.default", debug_handles=(3,)))
    a.add(Node("relu", target="aten.relu.default", debug_handles=(4,)))
    a.add(Node("same", target="aten.sin.default"))
    b = Graph("b")
    b.add(Node("addmm", target="aten.addmm.default", lineage=[LineageStep("linear")]))
    b.add(Node("fused", kind="delegate", delegate=DelegateInfo("X"), debug_handles=(4, 5)))
    b.add(Node("same", target="aten.sin.default"))
    m = match_nodes(a, b)
    assert m == {"linear": ["addmm"], "relu": ["fused"], "same": ["same"]}
