"""Small hand-built graphs for the viewer tests."""

from __future__ import annotations

from etlens.model import DelegateInfo, Graph, LineageStep, Node, TensorMeta

HOSTILE = [
    "</script><script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "javascript:alert(1)",
    "x" * 5000,
    "\u2028\u2029 ünïcødé 名前 🚀 \u202e",
    "\"'&amp;<!--",
]


def tiny(name: str = "tiny") -> Graph:
    g = Graph(name)
    t = TensorMeta((1, 16), "float32")
    g.add(Node("x", kind="input", outputs=[t]))
    g.add(Node("w", kind="param", outputs=[TensorMeta((16, 16), "float32")]))
    g.add(Node("linear", target="aten.linear.default", inputs=["x", "w"], outputs=[t],
               module_stack=[("fc", "torch.nn.Linear")], debug_handles=(1,), stack_trace='File "m.py", line 3',
               lineage=[LineageStep("linear", "aten.linear.default", "export")], attrs={"args": [1, 2]}))
    g.add(Node("relu", target="aten.relu.default", inputs=["linear"], outputs=[t], debug_handles=(2,)))
    g.add(Node("output", kind="output", inputs=["relu"]))
    return g


def hostile() -> Graph:
    g = Graph("</title><script>alert('title')</script>", {"note": "<script>alert(2)</script>"})
    g.add(Node("x", kind="input", outputs=[TensorMeta((1,), "<b>dtype</b>")]))
    prev = "x"
    for i, name in enumerate(HOSTILE):
        g.add(Node(name, target=f"evil.{name[:60]}.default", inputs=[prev], outputs=[TensorMeta((1,), "float32")],
                   module_stack=[(f"m{i}", name[:80])], stack_trace=name[:200],
                   attrs={name[:50]: name[:50]}))
        prev = name
    g.add(Node("output", kind="output", inputs=[prev]))
    return g


def lowered() -> Graph:
    """A partially delegated graph: one delegate with an inner graph, one op left on the CPU."""
    inner = Graph("inner")
    inner.add(Node("a", kind="input"))
    inner.add(Node("mm", target="aten.mm.default", inputs=["a"]))
    inner.add(Node("out", kind="output", inputs=["mm"]))
    g = Graph("lowered")
    g.add(Node("x", kind="input"))
    g.add(Node("call_delegate", kind="delegate", target="executorch_call_delegate", inputs=["x"],
               delegate=DelegateInfo("XnnpackBackend", payload_size=1234, ops=["mm"], inner=inner),
               lineage=[LineageStep("linear", "aten.linear.default", "to_backend")], debug_handles=(1,)))
    g.add(Node("cumsum", target="aten.cumsum.default", inputs=["call_delegate"], debug_handles=(2,)))
    g.add(Node("output", kind="output", inputs=["cumsum"]))
    return g
