"""Turn :class:`~etlens.model.Graph` objects into the viewer's compact, columnar JSON payload.

The browser gets one JSON document (embedded in the page, never fetched). Its shape is written once,
in ``assets/payload.schema.json`` (mirrored by the TypedDicts of :mod:`.payload_types`); per graph:

* ``strings`` (top level) — a shared string table; every other string field is an index into it,
  so a 10k-node graph stores ``aten.linear.default`` or ``float32[1, 8]`` once, not 10k times;
* ``nodes`` — one column per field (``label``, ``kind``, ``group`` …) and ``edges``, a flat list
  ``[src0, dst0, src1, dst1, …]``;
* ``groups`` — a group tree (``nn_module_stack`` modules, QDQ clusters, delegate subgraphs) the page
  collapses and expands as compound nodes.

Details that are only needed after a click (arguments, outputs, delegate specs) travel as one small
JSON string per node in ``nodes.details`` and are parsed lazily by the page.

Example::

    from etlens.views.html.payload import Strings, graph_payload
    strings = Strings()
    gp = graph_payload(graph, strings)
    payload = {"version": 2, "mode": "single", "title": graph.name, "graphs": [gp], "strings": strings.table}
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable

from ...model import Graph, Node
from ...model.transforms import inline_delegates, is_dequantize, qdq_cluster_members
from .payload_types import GraphPayload, NodeColumns

__all__ = ["Strings", "graph_payload", "graph_payload_flat", "KIND_CODES", "short_label", "shape_label",
           "overlay_column"]

#: kind name -> small int used in the ``kind`` column.
KIND_CODES = {"input": 0, "param": 1, "op": 2, "delegate": 3, "output": 4}

#: group kinds: 0 root, 1 module, 2 QDQ cluster, 3 delegate subgraph.
_G_ROOT, _G_MODULE, _G_QDQ, _G_DELEGATE = 0, 1, 2, 3

_DTYPE_SHORT = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int8": "i8",
    "uint8": "u8", "int16": "i16", "int32": "i32", "int64": "i64", "bool": "bool",
}


class Strings:
    """An interning table: ``strings("x")`` returns the index of ``"x"`` (``-1`` for ``None``)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.table: list[str] = []

    def __call__(self, s: str | None) -> int:
        i = self.index.get(s)  # hot path: one dict lookup
        if i is not None:
            return i
        if s is None:
            return -1
        s = str(s)
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.table)
            self.table.append(s)
        return i


def short_label(node: Node) -> str:
    """What the box says: the op name for operators (``convolution``), the node name otherwise."""
    if node.kind == "delegate" or node.delegate is not None:
        backend = node.delegate.backend_id if node.delegate is not None else "delegate"
        return backend
    if node.kind == "op" and node.target:
        parts = node.target.replace("::", ".").split(".")
        if len(parts) >= 3 and parts[-1] in ("default", "Tensor", "Scalar", "out", "int", "dim", "self",
                                              "input", "using_ints", "Tensor_mode", "Scalar_mode"):
            parts = parts[:-1]
        op = parts[-1] if len(parts) == 1 else parts[-1]
        ns = parts[0] if len(parts) >= 2 else ""
        if ns in ("aten", "prim", "prims", "operator", "_operator", "builtins", "", "dim_order_ops",
                  "executorch", "quantized_decomposed"):
            return op
        return f"{ns}.{op}"
    return node.name


_SHAPE_CACHE: dict[tuple, str] = {}


def shape_label(node: Node) -> str:
    """``f32[1,8,16,16]`` for the first output, plus ``+2`` when the node has more outputs."""
    if not node.outputs:
        return ""
    key = (node.outputs[0], len(node.outputs))
    hit = _SHAPE_CACHE.get(key)
    if hit is not None:
        return hit
    if len(_SHAPE_CACHE) > 100_000:
        _SHAPE_CACHE.clear()
    _SHAPE_CACHE[key] = label = _shape_label(node)
    return label


def _shape_label(node: Node) -> str:
    t = node.outputs[0]
    dt = _DTYPE_SHORT.get(t.dtype, t.dtype)
    s = f"{dt}[{','.join(str(d) for d in t.shape)}]"
    if len(node.outputs) > 1:
        s += f" +{len(node.outputs) - 1}"
    return s


#: attrs some readers keep verbatim that the model already holds in its own fields
_DUPLICATE_ATTRS = frozenset({"nn_module_stack", "stack_trace", "from_node", "debug_handle", "debug_handles"})


def _clean(v: Any, depth: int = 0) -> Any:
    """JSON-safe copy: non-finite floats become strings, unknown objects their ``str``."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if depth > 8:
        return str(v)
    if isinstance(v, dict):
        return {str(k): _clean(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x, depth + 1) for x in v]
    return str(v)


def _details(node: Node) -> str | None:
    """Click-time details as one JSON string (parsed lazily by the page)."""
    d: dict[str, Any] = {}
    if len(node.outputs) > 1 or (node.outputs and len(shape_label(node)) > 40):
        d["outputs"] = [str(t) for t in node.outputs]
    attrs = {k: v for k, v in node.attrs.items() if k not in _DUPLICATE_ATTRS}
    if attrs:
        d["attrs"] = _clean(attrs)
    if node.delegate is not None:
        dg = node.delegate
        d["delegate"] = {
            "backend": dg.backend_id, "payload_size": dg.payload_size, "compile_specs": dg.compile_specs,
            "ops": list(dg.ops) or ([n.target for n in dg.inner.ops()] if dg.inner is not None else []),
            "index": dg.index, "inner_nodes": len(dg.inner) if dg.inner is not None else None}
    if not d:
        return None
    return json.dumps(d, separators=(",", ":"), default=str, ensure_ascii=False)


class _Flat:
    """A graph with delegate subgraphs inlined: nodes, display names, inputs and owning groups."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.names: list[str] = []
        self.inputs: list[list[int]] = []
        self.group: list[int] = []
        self.owner: list[str] = []  # the top-level node each flat node belongs to
        # group columns
        self.g_parent: list[int] = [-1]
        self.g_kind: list[int] = [_G_ROOT]
        self.g_label: list[str] = [""]
        self.g_type: list[str] = [""]
        self.g_rep: list[int] = [-1]
        self._gkeys: dict[tuple, int] = {}
        self._stack_memo: dict[tuple, int] = {}

    def group_for(self, parent: int, key: tuple, kind: int, label: str, typ: str) -> int:
        k = (parent,) + key
        g = self._gkeys.get(k)
        if g is None:
            g = self._gkeys[k] = len(self.g_parent)
            self.g_parent.append(parent)
            self.g_kind.append(kind)
            self.g_label.append(label)
            self.g_type.append(typ)
            self.g_rep.append(-1)
        return g

    def module_group(self, base: int, stack: list[tuple[str, str]]) -> int:
        if not stack:
            return base
        try:
            key = (base, tuple(stack))
            g = self._stack_memo.get(key)
        except TypeError:  # a reader gave [path, type] lists: no memo, same result
            return self._module_group(base, stack)
        if g is None:
            g = self._stack_memo[key] = self._module_group(base, stack)
        return g

    def _module_group(self, base: int, stack: list[tuple[str, str]]) -> int:
        g = base
        for path, typ in stack:
            if not path:  # the model itself: one box around everything adds nothing
                continue
            typ = (typ or "").rsplit(".", 1)[-1]
            parts = path.split(".") if path else []
            # "layers.3" reads better than "3"
            label = ".".join(parts[-2:]) if len(parts) >= 2 and parts[-1].isdigit() else (parts[-1] if parts else typ)
            g = self.group_for(g, ("m", path), _G_MODULE, label or "module", typ or "")
        return g


def _flatten(graph: Graph, modules: bool) -> _Flat:
    """Lay out :func:`~etlens.model.transforms.inline_delegates` in groups: module boxes, and one
    delegate box per inlined call holding its subgraph (the call node closes the box)."""
    flat = _Flat()
    items = inline_delegates(graph)
    index: dict[str, int] = {}
    parent: dict[str, str | None] = {}
    owner_of: dict[str, str] = {}
    calls: dict[str, Node] = {}
    dgroups: dict[str, int] = {}
    if any(it.delegate is not None for it in items):
        parent = {it.name: it.delegate for it in items}
        call_names = set(parent.values())
        calls = {it.name: it.node for it in items if it.name in call_names}

    def owner(name: str) -> str:
        o = owner_of.get(name)
        if o is None:
            up = parent.get(name)
            o = owner_of[name] = name if up is None else owner(up)
        return o

    def base(delegate: str | None) -> int:
        return 0 if delegate is None else dgroup(delegate)

    def dgroup(call: str) -> int:
        g = dgroups.get(call)
        if g is None:
            node = calls[call]
            grp = base(parent.get(call))
            if modules:
                grp = flat.module_group(grp, node.module_stack)
            g = dgroups[call] = flat.group_for(grp, ("d", call), _G_DELEGATE, f"{node.delegate.backend_id}",
                                               node.name)
        return g

    for it in items:
        if it.name in calls:  # the call closes its delegate box
            grp = dgroup(it.name)
            flat.g_rep[grp] = len(flat.nodes)
        else:
            grp = base(it.delegate)
            if modules:
                grp = flat.module_group(grp, it.node.module_stack)
        index[it.name] = _append(flat, it.node, it.name, grp, [index[s] for s in it.inputs],
                                 owner(it.name) if parent else it.name)
    return flat


def _append(flat: _Flat, node: Node, name: str, group: int, inputs: list[int], owner: str) -> int:
    flat.owner.append(owner)
    flat.nodes.append(node)
    flat.names.append(name)
    flat.inputs.append(inputs)
    flat.group.append(group)
    return len(flat.nodes) - 1


def _users(flat: _Flat) -> list[list[int]]:
    users: list[list[int]] = [[] for _ in flat.nodes]
    for i, ins in enumerate(flat.inputs):
        for s in ins:
            users[s].append(i)
    return users


def _lca(flat: _Flat, a: int, b: int, depth: list[int]) -> int:
    while depth[a] > depth[b]:
        a = flat.g_parent[a]
    while depth[b] > depth[a]:
        b = flat.g_parent[b]
    while a != b:
        a, b = flat.g_parent[a], flat.g_parent[b]
    return a


def _group_depths(flat: _Flat) -> list[int]:
    depth = [0] * len(flat.g_parent)
    for g in range(1, len(flat.g_parent)):  # parents are always created before children
        depth[g] = depth[flat.g_parent[g]] + 1
    return depth


def _place_params(flat: _Flat, users: list[list[int]]) -> None:
    """Move module-less weights and (de)quantize nodes next to their users.

    ``convert_pt2e`` adds weight (de)quantize nodes and scale/zero-point buffers without an
    ``nn_module_stack``; left at the top level they form one long row far from their users. Walking
    backwards lets a chain weight → quantize → dequantize follow its consumer into the same box.
    """
    depth = _group_depths(flat)
    for i in range(len(flat.nodes) - 1, -1, -1):
        node = flat.nodes[i]
        if node.module_stack or not users[i] or flat.g_kind[flat.group[i]] == _G_QDQ:
            continue
        if not (node.kind == "param" or (node.kind == "op" and node.category == "quantize")):
            continue
        g = flat.group[users[i][0]]
        for u in users[i][1:]:
            g = _lca(flat, g, flat.group[u], depth)
        flat.group[i] = g


def _qdq_clusters(flat: _Flat, users: list[list[int]]) -> None:
    """Box each compute op with its QDQ cluster (:func:`~etlens.model.transforms.qdq_cluster_members`).

    A dequantize joins only from the op's own box or the top level; a quantize after the op may
    already sit in the next module's box (where :func:`_place_params` put it) and still joins.
    """
    group, nodes = flat.group, flat.nodes

    def same_side(m: int, i: int) -> bool:
        return group[m] in (group[i], 0) or not is_dequantize(nodes[m])

    for i, members in qdq_cluster_members(nodes, flat.inputs, users, same_side).items():
        g = flat.group_for(group[i], ("q", i), _G_QDQ, short_label(nodes[i]), "QDQ")
        flat.g_rep[g] = i
        for m in [i] + members:
            group[m] = g


def _prune_groups(flat: _Flat) -> None:
    """Drop module groups that hold exactly one child (a wrapper around a single module/node)."""
    n_groups = len(flat.g_parent)
    child_groups = [0] * n_groups
    members = [0] * n_groups
    for g in range(1, n_groups):
        child_groups[flat.g_parent[g]] += 1
    for g in flat.group:
        members[g] += 1
    remap = list(range(n_groups))
    for g in range(1, n_groups):
        if flat.g_kind[g] == _G_MODULE and child_groups[g] + members[g] <= 1:
            remap[g] = remap[flat.g_parent[g]]
    # compact ids; parents keep coming before children
    keep = [g for g in range(n_groups) if remap[g] == g]
    new_id = {g: k for k, g in enumerate(keep)}

    def resolve(g: int) -> int:
        while remap[g] != g:
            g = remap[g]
        return new_id[g]

    flat.group = [resolve(g) for g in flat.group]
    flat.g_parent = [(-1 if flat.g_parent[g] < 0 else resolve(flat.g_parent[g])) for g in keep]
    for col in ("g_kind", "g_label", "g_type", "g_rep"):
        setattr(flat, col, [getattr(flat, col)[g] for g in keep])


def graph_payload(graph: Graph, strings: Strings, *, modules: bool = True,
                  overlay: dict[str, float] | None = None) -> GraphPayload:
    """Columns for one graph (see the module docstring). ``overlay`` maps node name -> number."""
    return graph_payload_flat(graph, strings, modules=modules, overlay=overlay)[0]


def graph_payload_flat(graph: Graph, strings: Strings, *, modules: bool = True,
                       overlay: dict[str, float] | None = None) -> tuple[GraphPayload, _Flat]:
    """:func:`graph_payload` plus the flattened graph (names, owners) for callers that align data."""
    flat = _flatten(graph, modules)
    users = _users(flat)
    _place_params(flat, users)
    _qdq_clusters(flat, users)
    _place_params(flat, users)
    _prune_groups(flat)
    s = strings
    edges: list[int] = []
    for i, ins in enumerate(flat.inputs):
        seen: set[int] = set()
        for src in ins:
            if src not in seen:
                seen.add(src)
                edges.append(src)
                edges.append(i)
    stacks: dict[tuple, int] = {}
    mod_col: list[int] = []
    by_stack: dict[tuple, int] = {}
    for node in flat.nodes:
        raw = tuple(tuple(x) for x in node.module_stack)
        m = by_stack.get(raw)
        if m is None:
            key = tuple((s(p), s(t)) for p, t in raw)
            m = by_stack[raw] = stacks.setdefault(key, len(stacks)) if key else -1
        mod_col.append(m)
    nodes: NodeColumns = {
        "name": [s(n) for n in flat.names],
        "label": [s(short_label(n)) for n in flat.nodes],
        "kind": [KIND_CODES.get(n.kind, 2) for n in flat.nodes],
        "target": [s(n.target) for n in flat.nodes],
        "category": [s(n.category) for n in flat.nodes],
        "shape": [s(shape_label(n)) for n in flat.nodes],
        "group": flat.group,
        "module_stack": mod_col,
        "stack_trace": [s(n.stack_trace) for n in flat.nodes],
        "debug_handles": [list(n.debug_handles) if n.debug_handles else 0 for n in flat.nodes],
        "details": [s(_details(n)) for n in flat.nodes],
        # lineage as string ids: pass names and targets repeat on every node
        "lineage": [[x for st in n.lineage for x in (s(st.name), s(st.target or ""), s(st.pass_name or ""))] or 0
                    for n in flat.nodes],
    }
    if overlay is not None:
        nodes["overlay"] = overlay_column(flat.names, overlay)
    out: GraphPayload = {
        "name": s(graph.name),
        "nodes": nodes,
        "module_stacks": [[x for pair in key for x in pair] for key in stacks],
        "edges": edges,
        "groups": {"parent": flat.g_parent, "kind": flat.g_kind, "label": [s(x) for x in flat.g_label],
                   "type": [s(x) for x in flat.g_type], "representative": flat.g_rep},
    }
    return out, flat


def overlay_column(names: Iterable[str], overlay: dict[str, Any]) -> list[float | None]:
    """Overlay values aligned with ``names`` (``None`` where a node has no finite value)."""
    col: list[float | None] = []
    for name in names:
        v = overlay.get(name)
        try:
            f = float(v) if v is not None else None
        except (TypeError, ValueError):
            f = None
        col.append(f if f is not None and math.isfinite(f) else None)
    return col
