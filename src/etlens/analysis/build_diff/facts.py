"""Per-source-op facts of one build: the unit two builds are aligned by.

A *source op* is what one line of the user's model became in this build: every ATen node that shares
a debug handle (a decomposition keeps its parent's handle, so ``linear`` and its ``permute_copy`` +
``addmm`` are one source op), wherever it runs (top level or inside a delegate). For each one
:func:`source_ops` records what survives a rebuild — the module path (the ETRecord's
``nn_module_stack``), the main ATen op and its output shapes, the position in the graph — and what a
build decides: placement (the delegate's backend id as the ``.pte`` spells it, or ``portable`` for a
CPU kernel call), the ops it became, the kernels or backend operations that ran it, dtypes, constant
bytes, planned arena bytes, and its time per run (the inspector's attribution: a delegate-internal
event that ran several source ops is split evenly between them).

Example::

    from etlens.analysis.build_diff.facts import source_ops
    ops = source_ops(build)            # build: etlens.analysis.build_diff.load.Build
    ops[0].module_path, ops[0].op, ops[0].placement, ops[0].time_ms
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["SourceOp", "source_ops", "short_op", "PORTABLE", "QDQ_OPS", "COPY_OPS", "LAYOUT_OPS"]

#: the placement of an op run by a CPU kernel call of the program (not inside a delegate)
PORTABLE = "portable"
#: ops that only quantize, dequantize or choose quantization parameters
QDQ_OPS = ("quantize_per_tensor", "dequantize_per_tensor", "quantize_per_channel", "dequantize_per_channel",
           "choose_qparams", "quantize_per_token", "dequantize_per_token", "quantize_affine", "dequantize_affine")
#: ops that copy a tensor into another layout or dtype (what a delegate boundary or a memory format adds)
COPY_OPS = ("_to_dim_order_copy", "_clone_dim_order", "clone", "_to_copy", "contiguous")
#: ops that only move or reshape data: a source op is named after its other ops
LAYOUT_OPS = ("view_copy", "view", "expand_copy", "permute_copy", "squeeze_copy", "unsqueeze_copy", "slice_copy",
              "select_copy", "transpose_copy", "t_copy", "alias_copy", "reshape", "_unsafe_view", "t", "permute")
_COUNTER = re.compile(r"\s*#\d+$")
_ITEMSIZE = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float64": 8, "double": 8,
             "int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8, "long": 8, "bool": 1, "qint8": 1}


def short_op(target: str | None) -> str:
    """``aten.addmm.default`` -> ``addmm``; ``quantized_decomposed.quantize_per_tensor.default`` ->
    ``quantize_per_tensor``; ``aten::addmm.out`` -> ``addmm``."""
    t = (target or "").replace("::", ".")
    parts = [p for p in t.split(".") if p]
    if len(parts) >= 3:
        return parts[1]
    if len(parts) == 2:
        return parts[1] if parts[0] in ("aten", "quantized_decomposed", "dim_order_ops", "torchao") else parts[0]
    return parts[0] if parts else ""


def _bytes(meta: Any) -> int:
    n = _ITEMSIZE.get(str(meta.dtype).replace("torch.", ""), 4)
    for s in meta.shape:
        n *= int(s) if isinstance(s, int) else 1
    return n


@dataclass
class SourceOp:
    """One source op of one build (see the module docstring); ``time_ms`` holds one value per run."""

    key: int
    module_path: str
    module_type: str
    op: str
    ops: list[str]
    nodes: list[str]
    position: int
    shapes: tuple[tuple[Any, ...], ...]
    placement: str
    kernels: list[str] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)
    const_bytes: int = 0
    const_dtypes: list[str] = field(default_factory=list)
    arena_bytes: int = 0
    boundary: bool = False
    source_line: str = ""
    time_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    neighbours: list[int] = field(default_factory=list)
    #: the nodes' names in the inlined graph the viewer draws (``<delegate call>/<node>`` inside a delegate)
    view_names: list[str] = field(default_factory=list)
    #: every debug handle of its nodes (``key`` is the first; a folded weight dequantize adds its own)
    handles: list[int] = field(default_factory=list)

    @property
    def is_qdq(self) -> bool:
        return bool(self.ops) and all(o in QDQ_OPS for o in self.ops)

    @property
    def is_copy(self) -> bool:
        return bool(self.ops) and all(o in COPY_OPS for o in self.ops)

    @property
    def quantized(self) -> bool:
        """Computes on quantized values: a q/dq op, an int8 output or an int8 constant among its inputs."""
        return (any(o in QDQ_OPS for o in self.ops) or any(d in ("int8", "uint8", "qint8") for d in self.dtypes)
                or any(d in ("int8", "uint8", "qint8") for d in self.const_dtypes))

    @property
    def median_ms(self) -> float:
        return float(np.median(self.time_ms)) if self.time_ms.size else float("nan")

    def compute_ops(self) -> list[str]:
        """Its ops without quantize/dequantize, copies and pure layout moves (what decomposition changes)."""
        return sorted(o for o in self.ops if o not in QDQ_OPS and o not in COPY_OPS)

    def side_json(self) -> dict[str, Any]:
        """This op's columns of one side of an aligned row."""
        t = self.time_ms
        return {"placement": self.placement, "ops": list(self.ops), "kernels": list(self.kernels),
                "nodes": list(self.nodes), "time_ms": float(np.median(t)) if t.size else None,
                "time_mean_ms": float(t.mean()) if t.size else None, "runs": int(t.size),
                "bytes": {"constants": self.const_bytes, "arena": self.arena_bytes},
                "dtypes": list(self.dtypes), "quantized": self.quantized, "boundary": self.boundary,
                "position": self.position, "shapes": [list(s) for s in self.shapes]}


def _main_op(ops: list[str]) -> str:
    """The op a source op is named after: its first compute op, else its first layout move, else copy, else q/dq."""
    for pool in ([o for o in ops if o not in QDQ_OPS and o not in COPY_OPS and o not in LAYOUT_OPS],
                 [o for o in ops if o in LAYOUT_OPS], [o for o in ops if o not in QDQ_OPS], ops):
        if pool:
            return pool[0]
    return ""


class _Group:
    __slots__ = ("nodes", "view_names", "placements", "consts", "const_dtypes", "position", "boundary", "params_seen")

    def __init__(self, position: int) -> None:
        self.nodes: list[Any] = []
        self.view_names: list[str] = []
        self.placements: list[str] = []
        self.consts = 0
        self.const_dtypes: list[str] = []
        self.position = position
        self.boundary = False
        self.params_seen: set[str] = set()


def _walk(graph: Any) -> list[tuple[Any, str, Any, bool, str]]:
    """``(node, placement, graph it sits in, at a delegate boundary, its name in the inlined graph)`` of
    every op node, in program order (a node inside a delegate is ``<call>/<node>`` there, as the viewer
    names it)."""
    out = []
    users = graph.users() if hasattr(graph, "users") else {}
    for node in graph:
        if node.kind == "delegate" and node.delegate is not None and node.delegate.inner is not None:
            inner = node.delegate.inner
            backend = node.delegate.backend_id or "delegate"
            for m in inner:
                if m.kind == "op" and m.target and m.target != "getitem":
                    out.append((m, backend, inner, False, f"{node.name}/{m.name}"))
        elif node.kind == "op" and node.target and node.target != "getitem":
            near = [graph.get(x) for x in node.inputs] + [graph.get(x) for x in users.get(node.name, [])]
            near_delegate = any(n is not None and (n.kind == "delegate" or (n.target == "getitem")) for n in near)
            out.append((node, PORTABLE, graph, near_delegate, node.name))
    return out


def _graphs(graph: Any) -> list[Any]:
    return [graph] + [n.delegate.inner for n in graph
                      if n.kind == "delegate" and n.delegate is not None and n.delegate.inner is not None]


def _fold_weight_qdq(groups: dict[int, _Group], graph: Any) -> None:
    """A (de)quantize of a constant (a quantized weight) is part of the one op that reads it, not an op of its own."""
    owner = {n.name: key for key, g in groups.items() for n in g.nodes}
    users: dict[str, list[str]] = {}
    for g in _graphs(graph):
        for node in g:
            for src in node.inputs:
                users.setdefault(src, []).append(node.name)
    for key, grp in list(groups.items()):
        if not grp.consts or not all(short_op(n.target) in QDQ_OPS for n in grp.nodes):
            continue
        consumers = {owner[u] for n in grp.nodes for u in users.get(n.name, []) if owner.get(u) not in (None, key)}
        if len(consumers) != 1:
            continue
        target = groups[consumers.pop()]
        target.nodes = grp.nodes + target.nodes
        target.view_names = grp.view_names + target.view_names
        target.placements = grp.placements + target.placements
        target.consts += grp.consts
        target.const_dtypes += grp.const_dtypes
        target.boundary = target.boundary or grp.boundary
        del groups[key]
        for n in grp.nodes:
            owner[n.name] = next(k for k, g in groups.items() if g is target)


def source_ops(build: Any) -> list[SourceOp]:
    """The build's source ops in program order (see the module docstring)."""
    groups: dict[int, _Group] = {}
    order = 0
    anon = -1
    for node, placement, g, boundary, view_name in _walk(build.graph):
        handles = node.debug_handles or ()
        key = handles[0] if handles else anon
        if not handles:
            anon -= 1
        grp = groups.get(key)
        if grp is None:
            grp = groups[key] = _Group(order)
        order += 1
        grp.nodes.append(node)
        grp.view_names.append(view_name)
        grp.placements.append(placement)
        grp.boundary = grp.boundary or boundary
        for src in node.inputs:
            p = g.get(src)
            if p is not None and p.kind == "param" and src not in grp.params_seen:
                grp.params_seen.add(src)
                for o in p.outputs:
                    grp.consts += _bytes(o)
                    grp.const_dtypes.append(str(o.dtype))
    _fold_weight_qdq(groups, build.graph)
    out: list[SourceOp] = []
    for key, grp in groups.items():
        ops = [short_op(n.target) for n in grp.nodes]
        main = _main_op(ops)
        lead = next((n for n in grp.nodes if short_op(n.target) == main), grp.nodes[0])
        paths = [n.module_path for n in grp.nodes if n.module_stack]
        path = lead.module_path if lead.module_stack else (paths[0] if paths else "")
        mtype = lead.module_stack[-1][1] if lead.module_stack else ""
        # where its own work runs: a copy or q/dq node the build added beside it does not move the op
        own = [p for n, p in zip(grp.nodes, grp.placements, strict=True)
               if short_op(n.target) not in COPY_OPS and short_op(n.target) not in QDQ_OPS]
        placements = sorted(set(own or grp.placements))
        out.append(SourceOp(key=key, module_path=path, module_type=mtype, op=main, ops=ops,
                            nodes=[n.name for n in grp.nodes], view_names=list(grp.view_names),
                            position=grp.position,
                            shapes=tuple(tuple(o.shape) for o in lead.outputs), placement="+".join(placements),
                            dtypes=sorted({str(o.dtype) for n in grp.nodes for o in n.outputs}),
                            const_bytes=grp.consts, const_dtypes=sorted(set(grp.const_dtypes)), boundary=grp.boundary,
                            handles=sorted({h for n in grp.nodes for h in n.debug_handles})))
    out.sort(key=lambda s: s.position)
    _add_times(build, out)
    _add_arena(build, out)
    _add_neighbours(build, out)
    return out


def _add_times(build: Any, ops: list[SourceOp]) -> None:
    """Per-run time of each source op from the attribution rows (a row of several ops split evenly)."""
    by_key = {s.key: s for s in ops}
    runs = len(build.execute_ms)
    acc = {s.key: np.zeros(runs) for s in ops}
    base = 0
    for att in build.attributions:
        k = len(att.execute_per_run)
        for r in att.rows:
            keys = [h for h in r.debug_handles if h in by_key]
            if not keys or not r.runs:
                continue
            share = 1.0 / len(keys)
            for j, v in r.runs.items():
                if 0 <= j < k:
                    for h in keys:
                        acc[h][base + j] += v * share
            for h in keys:
                s = by_key[h]
                if r.source_line and not s.source_line:
                    s.source_line = r.source_line
                for e in r.events:  # the kernels or backend operations that ran it, as the runtime named them
                    name = _COUNTER.sub("", e).removeprefix("native_call_")
                    if name not in s.kernels:
                        s.kernels.append(name)
        base += k
    for s in ops:
        s.time_ms = acc[s.key]


def _add_arena(build: Any, ops: list[SourceOp]) -> None:
    """Bytes of the planned tensors each source op's instructions produce."""
    m = build._method_memory()
    if m is None:
        return
    by_key = {s.key: s for s in ops}
    handles = build.instruction_handles
    for t in m.tensors:
        if t.first < 0 or t.role in ("input", "state"):
            continue
        hs = [h for h in handles.get(t.first, []) if h in by_key]
        if hs:
            by_key[hs[-1]].arena_bytes += t.size


def _add_neighbours(build: Any, ops: list[SourceOp]) -> None:
    """For each source op, the keys of the source ops it reads from and feeds (by node names)."""
    owner: dict[str, int] = {}
    for s in ops:
        for n in s.nodes:
            owner[n] = s.key
    graphs = _graphs(build.graph)
    near: dict[int, list[int]] = {s.key: [] for s in ops}
    for g in graphs:
        for node in g:
            k = owner.get(node.name)
            if k is None:
                continue
            for src in node.inputs:
                j = owner.get(src)
                if j is not None and j != k:
                    if j not in near[k]:
                        near[k].append(j)
                    if k not in near[j]:
                        near[j].append(k)
    for s in ops:
        s.neighbours = near[s.key]
