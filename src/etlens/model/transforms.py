"""Graph transforms every view shares: delegate inlining, QDQ clusters, (de)quantize tests.

The HTML viewer, the compare view's node matching and the Model Explorer export all need to see
"through" a delegate call (the ops a backend took, wired to the values around the call) and to group
each quantized op with the (de)quantize nodes around it. The rules live here once:

* :func:`inline_delegates` — a delegate call with a lowered subgraph becomes that subgraph's nodes,
  named ``<call>/<inner>``, followed by the call itself; the subgraph's placeholders are bound to the
  call's arguments and the call reads the subgraph's output;
* :func:`qdq_clusters` — each compute op with the dequantize nodes feeding only it and the quantize
  nodes it feeds (what a quantized backend fuses into one integer kernel);
* :func:`is_quantize` / :func:`is_dequantize` — decided from the operator name, not by substring
  matching on the whole target (``quantized_decomposed.choose_qparams`` is neither).

Example::

    from etlens.model.transforms import inline_delegates, inlined_graph, qdq_clusters
    for item in inline_delegates(graph):
        print(item.name, item.inputs, item.delegate)   # "executorch_call_delegate/aten_mm_default" …
    clusters = qdq_clusters(graph)                     # {"dq_1": "conv", "conv": "conv", "q_2": "conv"}
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple, Sequence

from .graph import Graph, Node

__all__ = [
    "InlinedNode",
    "inline_delegates",
    "inlined_graph",
    "is_quantize",
    "is_dequantize",
    "qdq_clusters",
    "qdq_cluster_members",
]


# -- (de)quantize --------------------------------------------------------------------------------
def _op_name(target: str | None) -> str:
    """``quantize_per_tensor`` from ``quantized_decomposed.quantize_per_tensor.default`` or ``…::….out``."""
    parts = (target or "").replace("::", ".").split(".")
    return (parts[1] if len(parts) >= 2 else parts[0]).lower()


def is_dequantize(node: Node) -> bool:
    """A dequantize op (``dequantize_per_tensor``, ``dequantize_per_channel``, ``dequantize_affine`` …)."""
    return node.category == "quantize" and "dequant" in _op_name(node.target)


def is_quantize(node: Node) -> bool:
    """A quantize op (``quantize_per_tensor``, ``quantize_affine`` …); not a dequantize, not ``choose_qparams``."""
    if node.category != "quantize":
        return False
    op = _op_name(node.target)
    return "quant" in op and "dequant" not in op


# -- delegate inlining ---------------------------------------------------------------------------
class InlinedNode(NamedTuple):
    """One node of a graph with its delegates inlined.

    ``name`` is unique in the inlined graph (``<call>/<inner>`` inside a delegate, nested calls
    nest the prefix); ``node`` is the original node, never copied or changed; ``inputs`` are the
    inlined names of its producers; ``delegate`` is the inlined name of the delegate call whose
    subgraph it came from (``None`` at the top level).
    """

    name: str
    node: Node
    inputs: list[str]
    delegate: str | None


def _inlines(node: Node) -> bool:
    return node.delegate is not None and node.delegate.inner is not None and len(node.delegate.inner) > 0


def _bind(inner: Graph, args: list[str]) -> dict[str, str]:
    """``{placeholder: outer value}``: which argument of the call feeds each placeholder of ``inner``.

    Two shapes exist: a subgraph rebuilt from the ETRecord lists every argument the call passes,
    weights included, as placeholders in call order; a subgraph decoded from the ``.pte`` (XNNPACK)
    keeps its own constants as ``param`` nodes and only its ``input`` placeholders are arguments.
    """
    placeholders = [n for n in inner if n.kind in ("input", "param")]
    if len(placeholders) != len(args):
        placeholders = [n for n in placeholders if n.kind == "input"]
    return {p.name: a for p, a in zip(placeholders, args, strict=False)}


def inline_delegates(graph: Graph) -> list[InlinedNode]:
    """``graph``'s nodes in order, each delegate call with a lowered subgraph replaced by that
    subgraph's nodes followed by the call itself (see :class:`InlinedNode`).

    The subgraph's placeholders read the call's arguments; the call reads the subgraph's output
    node (or, when the subgraph has none, its own arguments). Graphs without inner subgraphs come
    back one item per node.
    """
    out: list[InlinedNode] = []
    _inline(out, graph, "", None, None)
    return out


def _inline(out: list[InlinedNode], graph: Graph, prefix: str, delegate: str | None,
            bound: dict[str, str] | None) -> list[str]:
    """Append ``graph``; return the inlined names of its output nodes."""
    local: dict[str, str] = {}
    outputs: list[str] = []
    for node in graph:
        name = prefix + node.name
        ins = [local[s] for s in node.inputs if s in local]
        if _inlines(node):
            assert node.delegate is not None and node.delegate.inner is not None  # what _inlines checked
            inner_out = _inline(out, node.delegate.inner, name + "/", name, _bind(node.delegate.inner, ins))
            out.append(InlinedNode(name, node, inner_out or ins, delegate))
        else:
            if bound is not None and node.kind in ("input", "param"):
                ins = [bound[node.name]] if node.name in bound else []
            out.append(InlinedNode(name, node, ins, delegate))
            if bound is not None and node.kind == "output":
                outputs.append(name)
        local[node.name] = name
    return outputs


def inlined_graph(graph: Graph) -> Graph:
    """:func:`inline_delegates` as a :class:`Graph` of renamed copies (no edges), for name lookups
    and node matching across graphs; ``graph`` itself when it has no inner subgraph."""
    if not any(_inlines(n) for n in graph):
        return graph
    out = Graph(graph.name, graph.meta)
    for item in inline_delegates(graph):
        if item.name not in out:
            out.add(dataclasses.replace(item.node, name=item.name, inputs=[]))
    return out


# -- QDQ clusters --------------------------------------------------------------------------------
def qdq_cluster_members(nodes: Sequence[Node], inputs: Sequence[Sequence[int]], users: Sequence[Sequence[int]],
                        same_side: Callable[[int, int], bool] | None = None) -> dict[int, list[int]]:
    """``{compute op index: [member indices]}`` over parallel lists (the index form of :func:`qdq_clusters`).

    A compute op (kind ``op``, not a (de)quantize, not ``getitem``/``alloc``) takes each
    dequantize node that feeds only it and each quantize node whose first input it is, unless the
    node was taken by an earlier op or ``same_side(member, op)`` says they sit on different sides
    of a boundary (partition, module box). Ops that take nothing form no cluster.
    """
    if not any(n.category == "quantize" for n in nodes):
        return {}
    taken = [False] * len(nodes)
    out: dict[int, list[int]] = {}
    for i, node in enumerate(nodes):
        if node.kind != "op" or node.category == "quantize" or node.target in ("getitem", "alloc"):
            continue
        members = [s for s in inputs[i] if not taken[s] and is_dequantize(nodes[s]) and len(users[s]) == 1
                   and (same_side is None or same_side(s, i))]
        members += [u for u in users[i] if not taken[u] and is_quantize(nodes[u]) and list(inputs[u][:1]) == [i]
                    and (same_side is None or same_side(u, i))]
        if not members:
            continue
        out[i] = members
        taken[i] = True
        for m in members:
            taken[m] = True
    return out


def qdq_clusters(graph: Graph, same_side: Callable[[Node, Node], bool] | None = None) -> dict[str, str]:
    """``{node name: cluster}``: each compute op with the dequantize ops feeding it and the quantize
    ops it feeds, named after the compute op (rules: :func:`qdq_cluster_members`).

    ``same_side(member, op)`` may forbid a cluster across a boundary (e.g. a partition). Graphs
    without (de)quantize ops get no clusters.
    """
    nodes = list(graph)
    index = {n.name: k for k, n in enumerate(nodes)}
    inputs = [[index[s] for s in n.inputs if s in index] for n in nodes]
    users: list[list[int]] = [[] for _ in nodes]
    for k, ins in enumerate(inputs):
        for s in dict.fromkeys(ins):
            users[s].append(k)
    side = None if same_side is None else (lambda a, b: same_side(nodes[a], nodes[b]))
    out: dict[str, str] = {}
    for i, members in qdq_cluster_members(nodes, inputs, users, side).items():
        for m in [i] + members:
            out[nodes[m].name] = nodes[i].name
    return out
