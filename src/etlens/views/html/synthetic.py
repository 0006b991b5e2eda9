"""Synthetic graphs of any size for the viewer's tests and benchmarks (no torch needed).

``synthetic_graph(n)`` builds a transformer-like stack: ``stages.{s}.layers.{l}`` modules, each
layer a pre-norm attention + MLP block (~26 nodes with weights), so module collapsing, long
residual edges and realistic op names are exercised. ``modules=False`` drops the hierarchy to
stress the flat layout.

Example::

    g = synthetic_graph(10_000)
    generate_html(g, "big.html")
"""

from __future__ import annotations

from ...model import Graph, Node, TensorMeta

__all__ = ["synthetic_graph"]

_LAYER = [  # (local name, target, inputs by local name or "x"; params listed separately)
    ("ln1", "aten.native_layer_norm.default", ["x", "ln1_w", "ln1_b"]),
    ("qkv", "aten.linear.default", ["ln1", "qkv_w", "qkv_b"]),
    ("view", "aten.view.default", ["qkv"]),
    ("permute", "aten.permute.default", ["view"]),
    ("q", "aten.select.int", ["permute"]),
    ("k", "aten.select.int", ["permute"]),
    ("v", "aten.select.int", ["permute"]),
    ("kt", "aten.transpose.int", ["k"]),
    ("scores", "aten.matmul.default", ["q", "kt"]),
    ("scale", "aten.mul.Tensor", ["scores"]),
    ("softmax", "aten._softmax.default", ["scale"]),
    ("ctx", "aten.matmul.default", ["softmax", "v"]),
    ("merge", "aten.view.default", ["ctx"]),
    ("proj", "aten.linear.default", ["merge", "proj_w", "proj_b"]),
    ("add1", "aten.add.Tensor", ["x", "proj"]),
    ("ln2", "aten.native_layer_norm.default", ["add1", "ln2_w", "ln2_b"]),
    ("fc1", "aten.linear.default", ["ln2", "fc1_w", "fc1_b"]),
    ("gelu", "aten.gelu.default", ["fc1"]),
    ("fc2", "aten.linear.default", ["gelu", "fc2_w", "fc2_b"]),
    ("add2", "aten.add.Tensor", ["add1", "fc2"]),
]
_PARAMS = ["ln1_w", "ln1_b", "qkv_w", "qkv_b", "proj_w", "proj_b", "ln2_w", "ln2_b", "fc1_w", "fc1_b",
           "fc2_w", "fc2_b"]
_SUBMODULE = {"ln1": "ln1", "qkv": "attn.qkv", "view": "attn", "permute": "attn", "q": "attn", "k": "attn",
              "v": "attn", "kt": "attn", "scores": "attn", "scale": "attn", "softmax": "attn", "ctx": "attn",
              "merge": "attn", "proj": "attn.proj", "ln2": "ln2", "fc1": "mlp.fc1", "gelu": "mlp.act",
              "fc2": "mlp.fc2"}
_TYPES = {"ln1": "LayerNorm", "ln2": "LayerNorm", "attn": "Attention", "attn.qkv": "Linear",
          "attn.proj": "Linear", "mlp": "Sequential", "mlp.fc1": "Linear", "mlp.act": "GELU", "mlp.fc2": "Linear"}


def _stack(prefix: str, sub: str | None) -> list[tuple[str, str]]:
    parts = prefix.split(".")
    out = [(".".join(parts[:2]), "Stage"), (prefix, "Block")]
    if sub:
        acc = ""
        for piece in sub.split("."):
            acc = f"{acc}.{piece}" if acc else piece
            out.append((f"{prefix}.{acc}", _TYPES.get(acc, "Module")))
    return out


def synthetic_graph(n: int, modules: bool = True, stages: int = 40, name: str | None = None) -> Graph:
    """A transformer-like graph of about ``n`` nodes (see the module docstring)."""
    per_layer = len(_LAYER) + len(_PARAMS)
    layers = max(1, (n - 2) // per_layer)
    per_stage = max(1, -(-layers // stages))
    g = Graph(name or f"synthetic_{n}", {"source": "synthetic"})
    act = TensorMeta((1, 128, 512), "float32")
    g.add(Node("x", kind="input", outputs=[act]))
    x = "x"
    handle = 0
    for layer in range(layers):
        prefix = f"stages.{layer // per_stage}.layers.{layer}"
        local = {"x": x}
        for p in _PARAMS:
            pname = f"p_{prefix.replace('.', '_')}_{p}"
            g.add(Node(pname, kind="param", outputs=[TensorMeta((512, 512) if p.endswith("_w") else (512,),
                                                                "float32")]))
            local[p] = pname
        for lname, target, ins in _LAYER:
            handle += 1
            nname = f"{lname}_{layer}"
            g.add(Node(nname, kind="op", target=target, inputs=[local[i] for i in ins], outputs=[act],
                       module_stack=_stack(prefix, _SUBMODULE.get(lname)) if modules else [],
                       debug_handles=(handle,),
                       stack_trace=f'File "model.py", line {100 + _LAYER.index((lname, target, ins))}, in forward'))
            local[lname] = nname
        x = local["add2"]
    g.add(Node("output", kind="output", inputs=[x]))
    return g
