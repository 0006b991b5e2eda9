"""Vela's per-layer estimates, mapped back to the ATen nodes and modules of the edge program.

Vela names each scheduled NPU operation after the TOSA tensor it writes. The sidecar written at
compile time (:mod:`etlens.readers.vela_sidecar`) records, for every TOSA operator the Arm backend
serialized, that tensor name and the fx node it came from (its ``debug_handle`` and ``from_node``
chain). The ETRecord's edge program carries the same debug handles. So a layer row is mapped:

1. row name -> TOSA operator: the exact tensor name, else the longest ``_``-prefix of it that is one
   (Vela derives names for the operations it splits off: ``tosa_rescale_default_2_transpose``);
2. TOSA operator -> edge nodes of the matching delegate: those sharing its debug handle, else the
   node whose export-time ancestor (``lineage`` root) is the operator's oldest ``from_node`` name;
3. within those nodes, the row's estimates go to one node — the first that is not a
   quantize/dequantize — so every cycle lands exactly once and per-node sums equal Vela's totals;
4. rows Vela inserted itself (named ``#<n>``: layout transposes around the graph) are charged to
   the node of the next mapped row (else the previous one) and flagged ``inserted``.

Every edge node gets a row: ``backend`` (``EthosUBackend`` or ``None`` on the CPU), ``reason`` for
the CPU ones (the Arm partitioner's own, recorded at compile time; a rule of thumb for nodes it
never rejected, such as the quantize at the program's input) and ``npu_cycles`` for the NPU ones.
Transposes and copies (layout changes) are counted separately (``layout_cycles``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from etlens.model import Graph, Node

from .vela import VelaLayer, VelaPartition, VelaSidecar

__all__ = ["NodeEstimate", "LayerMapping", "EthosUDelegation", "map_delegation", "LAYOUT_OPS", "QDQ_OPS"]

#: Vela operators that only move data between layouts (their cycles are layout cost).
LAYOUT_OPS = frozenset({"Transpose", "Reshape", "MemoryCopy", "Copy", "Identity", "Concat", "Slice",
                        "StridedSlice", "Pad", "Tile"})
#: quantize/dequantize operator names (they fold into the NPU's rescales: no cycles of their own)
QDQ_OPS = ("quantize_per_tensor", "dequantize_per_tensor", "quantize_per_channel", "dequantize_per_channel")
_QDQ = QDQ_OPS
_ETHOSU_IDS = ("EthosUBackend", "ArmBackendEthosU")


@dataclass
class NodeEstimate:
    """One ATen node of the edge program and what Vela estimated for it."""

    name: str
    target: str
    module_path: str
    backend: str | None
    reason: str | None = None
    delegate: int | None = None       # which Ethos-U delegate (partition) took it
    npu_cycles: float | None = None
    macs: float = 0.0
    sram_access_cycles: float = 0.0
    dram_access_cycles: float = 0.0
    flash_access_cycles: float = 0.0
    layout_cycles: float = 0.0
    layers: list[str] = field(default_factory=list)   # Vela rows charged here

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "target": self.target, "module_path": self.module_path,
                               "backend": self.backend}
        if self.backend is None:
            out["reason"] = self.reason
        else:
            out.update({"delegate": self.delegate, "npu_cycles": self.npu_cycles, "macs": self.macs,
                        "sram_access_cycles": self.sram_access_cycles, "dram_access_cycles": self.dram_access_cycles,
                        "flash_access_cycles": self.flash_access_cycles, "layout_cycles": self.layout_cycles,
                        "vela_layers": list(self.layers)})
        return out


@dataclass
class LayerMapping:
    """One Vela row and where it landed."""

    partition: int
    layer: VelaLayer
    tosa_op: str | None        # the TOSA operator (RESCALE, CONV2D …) whose tensor the row writes
    node: str | None           # the edge node charged
    how: str                   # "tensor", "prefix", "inserted" (Vela's own op), "neighbour" or "unmapped"

    def to_json(self) -> dict[str, Any]:
        return {"partition": self.partition, **self.layer.to_json(), "tosa_op": self.tosa_op, "node": self.node,
                "mapped_by": self.how}


@dataclass
class EthosUDelegation:
    """Per-node estimates, per-layer mapping and Vela's totals of one Ethos-U program."""

    nodes: list[NodeEstimate]
    layers: list[LayerMapping]
    sidecar: VelaSidecar
    notes: list[str] = field(default_factory=list)

    def totals(self) -> dict[str, Any]:
        t = self.sidecar.totals()
        mapped = [m for m in self.layers if m.node is not None]
        t.update({
            "cpu_nodes": sum(1 for n in self.nodes if n.backend is None),
            "npu_nodes": sum(1 for n in self.nodes if n.backend is not None),
            "layers": len(self.layers),
            "layers_mapped": len(mapped),
            "layers_by_name": sum(1 for m in self.layers if m.how in ("tensor", "prefix")),
            "layers_inserted": sum(1 for m in self.layers if m.how == "inserted"),
            "mapped_share": (len(mapped) / len(self.layers)) if self.layers else 1.0,
            "node_cycles_sum": sum(n.npu_cycles or 0.0 for n in self.nodes),
            "layout_cycles": sum(n.layout_cycles for n in self.nodes),
        })
        return t

    def to_json(self) -> dict[str, Any]:
        return {"nodes": [n.to_json() for n in self.nodes], "ethos_u": self.totals(),
                "vela_layers": [m.to_json() for m in self.layers], "ethos_u_notes": list(self.notes)}


def _is_qdq(node: Node) -> bool:
    return any(q in (node.target or "") for q in _QDQ)


def _cpu_reason(node: Node, delegated_inputs: bool, delegated_users: bool) -> str:
    target = node.target or ""
    if _is_qdq(node):
        side = "input" if not delegated_inputs and delegated_users else \
            "output" if delegated_inputs and not delegated_users else "boundary"
        return (f"{side} (de)quantization of the Ethos-U partition: the NPU takes and returns int8 tensors, so "
                "the float<->int8 conversion at the partition's edge runs on the CPU (the partitioner leaves "
                "boundary quantize/dequantize nodes out)")
    if target.startswith("getitem") or target == "operator.getitem" or node.name.startswith("getitem"):
        return "reads one output of a multi-output node that runs on the CPU"
    return ("not rejected by an operator-support check, but left out when the partitions were formed "
            "(no Ethos-U neighbour to join, or only a no-op on its own)")


def _resolve(name: str, tensors: dict[str, dict[str, Any]]) -> tuple[dict[str, Any] | None, str]:
    if name in tensors:
        return tensors[name], "tensor"
    parts = name.split("_")
    for k in range(len(parts) - 1, 0, -1):
        cand = "_".join(parts[:k])
        if cand in tensors:
            return tensors[cand], "prefix"
    return None, "unmapped"


def _partition_nodes(inner: Graph | None) -> list[Node]:
    if inner is None:
        return []
    return [n for n in inner.nodes if n.kind not in ("input", "output", "placeholder", "param", "constant")]


def _pick(nodes: list[Node], origin: list[str] | None = None) -> Node | None:
    """The node a row is charged to: among nodes sharing a debug handle (a decomposition such as
    ``mean`` -> ``sum`` + ``mul``), the one whose name or lineage has the TOSA operator's nearest
    ``from_node`` ancestor, else the first that is not a quantize/dequantize."""
    compute = [n for n in nodes if not _is_qdq(n)]
    if origin and len(compute) > 1:
        for name in origin:
            for n in compute:
                if name == n.name or name in {s.name for s in n.lineage} or n.name.startswith(f"aten_{name}_"):
                    return n
    if compute:
        return compute[0]
    return nodes[0] if nodes else None


def _map_partition(part: VelaPartition, inner_nodes: list[Node], mapped: list[LayerMapping],
                   est: dict[str, NodeEstimate], notes: list[str]) -> None:
    tensors = {str(o.get("tensor")): o for o in part.tosa_ops if o.get("tensor")}
    by_handle: dict[int, list[Node]] = {}
    by_root: dict[str, list[Node]] = {}
    for n in inner_nodes:
        for h in n.debug_handles:
            by_handle.setdefault(int(h), []).append(n)
        root = n.lineage_root
        if root:
            by_root.setdefault(root, []).append(n)

    def nodes_of(op: dict[str, Any]) -> list[Node]:
        h = op.get("debug_handle")
        handles = h if isinstance(h, list) else [h] if isinstance(h, int) else []
        hits = [n for x in handles for n in by_handle.get(int(x), [])]
        if hits:
            return hits
        for name in reversed(op.get("origin") or []):
            if name in by_root:
                return by_root[name]
        return []

    rows: list[tuple[VelaLayer, dict[str, Any] | None, Node | None, str]] = []
    for layer in part.layers:
        op, how = _resolve(layer.name, tensors)
        node = _pick(nodes_of(op), op.get("origin")) if op is not None else None
        if op is not None and node is None:
            how = "unmapped"
        rows.append((layer, op, node, how))
    # Vela-inserted (or unresolvable) rows: charge the next mapped row's node, else the previous one.
    for i, (layer, op, node, how) in enumerate(rows):
        if node is not None:
            continue
        nxt = next((r[2] for r in rows[i + 1:] if r[2] is not None), None)
        prv = next((r[2] for r in reversed(rows[:i]) if r[2] is not None), None)
        node = nxt or prv or (_pick(inner_nodes) if inner_nodes else None)
        how = "inserted" if layer.name.startswith("#") else "neighbour"
        rows[i] = (layer, op, node, how if node is not None else "unmapped")
    for layer, op, node, how in rows:
        mapped.append(LayerMapping(part.index, layer, str(op.get("op")) if op else None,
                                   node.name if node is not None else None, how))
        if node is None:
            notes.append(f"partition {part.index}: Vela row {layer.name!r} ({layer.cycles:.0f} cycles) has no node "
                         "to charge (the delegate's inner graph is unknown)")
            continue
        e = est[node.name]
        e.npu_cycles = (e.npu_cycles or 0.0) + layer.cycles
        e.macs += layer.macs
        e.sram_access_cycles += layer.sram_access_cycles
        e.dram_access_cycles += layer.dram_access_cycles
        e.flash_access_cycles += layer.on_flash_access_cycles + layer.off_flash_access_cycles
        if layer.op in LAYOUT_OPS:
            e.layout_cycles += layer.cycles
        e.layers.append(layer.name)


def _handles(op: dict[str, Any]) -> set[int]:
    h = op.get("debug_handle")
    return {int(x) for x in (h if isinstance(h, list) else [h]) if isinstance(x, int)}


def _pair(parts: list[VelaPartition], inner_of: list[tuple[int, list[Node]]]) -> list[tuple[VelaPartition,
                                                                                             list[Node]]]:
    """Each Vela compile with the delegate it belongs to. ExecuTorch lowers partitions in its own order,
    not the graph's, so pair them by the debug handles they share (greedy, best overlap first)."""
    node_handles = [{h for n in inner for h in n.debug_handles} for _, inner in inner_of]
    scores = sorted(((len(set().union(*(_handles(o) for o in p.tosa_ops)) & nh) if p.tosa_ops else 0, -i, -j, i, j)
                     for i, p in enumerate(parts) for j, nh in enumerate(node_handles)), reverse=True)
    used_p: set[int] = set()
    used_d: set[int] = set()
    pairs: dict[int, int] = {}
    for score, _, _, i, j in scores:
        if score and i not in used_p and j not in used_d:
            pairs[i] = j
            used_p.add(i)
            used_d.add(j)
    free = [j for j in range(len(inner_of)) if j not in used_d]
    for i in range(len(parts)):  # no shared handle: fall back to the order
        if i not in pairs and free:
            pairs[i] = free.pop(0)
    return [(parts[i], inner_of[j][1]) for i, j in sorted(pairs.items())]


def map_delegation(lowered: Graph, sidecar: VelaSidecar) -> EthosUDelegation:
    """Per-node rows for every ATen node of ``lowered`` (the lowered view of an ETRecord's edge program,
    :func:`etlens.analysis.delegation.delegation_graph`) with Vela's estimates from ``sidecar``."""
    nodes: list[NodeEstimate] = []
    est: dict[str, NodeEstimate] = {}
    inner_of: list[tuple[int, list[Node]]] = []
    delegated_names: set[str] = set()
    k = 0
    for n in lowered.nodes:
        if n.kind == "delegate" and n.delegate is not None:
            backend = n.delegate.backend_id
            inner = _partition_nodes(n.delegate.inner)
            if backend in _ETHOSU_IDS:
                inner_of.append((k, inner))
                k += 1
            for m in inner:
                e = NodeEstimate(m.name, m.target or "", m.module_path, backend,
                                 delegate=inner_of[-1][0] if backend in _ETHOSU_IDS else None,
                                 npu_cycles=0.0 if backend in _ETHOSU_IDS else None)
                nodes.append(e)
                est[m.name] = e
                delegated_names.add(m.name)
            delegated_names.add(n.name)
    users: dict[str, list[str]] = {}
    for n in lowered.nodes:
        for i in n.inputs:
            users.setdefault(i, []).append(n.name)
    for n in lowered.nodes:
        if n.kind != "op" or n.name in est:
            continue
        if (n.target or "").startswith(("call_method:", "call_module:")):
            continue
        if "getitem" in (n.target or "") and n.inputs and all(i in delegated_names for i in n.inputs):
            continue  # reads a delegate's output: made by the lowering, not a node of the edge program
        reason = sidecar.cpu_reasons.get(n.name)
        if reason is None:
            d_in = any(i in delegated_names or i.startswith("getitem") for i in n.inputs)
            d_out = any(u in delegated_names for u in users.get(n.name, []))
            reason = _cpu_reason(n, d_in, d_out)
        e = NodeEstimate(n.name, n.target or "", n.module_path, None, reason=reason)
        nodes.append(e)
        est[n.name] = e
    notes: list[str] = []
    if len(inner_of) != len(sidecar.partitions):
        notes.append(f"the program has {len(inner_of)} Ethos-U delegate(s) but the sidecar has "
                     f"{len(sidecar.partitions)} Vela compile(s); mapped the first "
                     f"{min(len(inner_of), len(sidecar.partitions))}")
    layers: list[LayerMapping] = []
    for part, inner in _pair(sidecar.partitions, inner_of):
        _map_partition(part, inner, layers, est, notes)
    return EthosUDelegation(nodes=nodes, layers=layers, sidecar=sidecar, notes=notes)
