"""Rebuild the lowered program's delegation from an ETRecord.

Why this is needed: ``to_edge_transform_and_lower(..., generate_etrecord=True)`` records the edge
program *before* the partitioner runs, so the stored ``edge_dialect_exported_program/<method>`` has
no delegate calls at all (ExecuTorch's ``get_delegation_info`` on it reports 0 subgraphs). What the
record does keep, from the emitter, is:

* ``delegate_map[method][instruction]`` → ``{"name": backend_id, ...}`` for each delegate call;
* ``debug_handle_map[method][instruction]`` → for a delegate, the debug handle of *every*
  ``call_function`` node of the lowered module's original graph (one entry per node, so a handle
  repeats when a decomposition produced several nodes);
* ``instruction_id_to_num_outs_map[method][instruction]`` → how many outputs the delegate returns
  (the lowered program reads each with one ``getitem`` node).

Matching the recorded nodes to those handle lists (in graph order, with multiplicity) rebuilds the
lowered graph: each delegate becomes a ``delegate`` node whose ``inner`` graph holds the nodes it
swallowed, followed by one ``getitem`` per output; everything else stays at top level. Counting that
graph gives the numbers ExecuTorch reports on the in-memory lowered program.

Two artefacts of deserialization are handled: unused outputs of multi-output ops come back as
``<name>_unused_<i>`` getitem nodes that the in-memory program never had (skipped), and when a
handle list asks for more nodes than the record has for that handle, the extras are the ``getitem``
nodes that read a multi-output op inside the delegate.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from ..errors import MissingDataError
from ..model import DelegateInfo, Graph, Node
from .etrecord import ETRecord

__all__ = ["etrecord_graph"]

_EDGE_PREFIX = "edge_dialect_exported_program/"
_UNUSED = re.compile(r"_unused_\d+$")


def _is_counted(node: Node) -> bool:
    return node.kind == "op" and not (node.target or "").startswith(("call_method:", "call_module:"))


def etrecord_graph(record: ETRecord, method: str, view: str,
                   kernels: dict[int, str] | None = None) -> tuple[Graph, str, list[str]]:
    """``(graph, source, notes)`` for ``method`` of an ETRecord; ``view`` is lowered|recorded.

    ``kernels`` (instruction → operator, from the ``.pte``) places nodes that share a debug handle
    with delegated ones exactly (see :func:`_rebuild`).
    """
    stage = _EDGE_PREFIX + method
    stages = list(record.stages)
    path = record.path or "ETRecord"
    if stage not in stages:
        edge = [s[len(_EDGE_PREFIX):] for s in stages if s.startswith(_EDGE_PREFIX)]
        if not edge:
            raise MissingDataError(
                f"{path}: this ETRecord has no edge program (entries: {', '.join(stages) or 'none'}), so "
                "there is nothing to count; record it with to_edge_transform_and_lower(..., "
                "generate_etrecord=True) or generate_etrecord(..., edge_dialect_program=...)")
        raise MissingDataError(f"{path}: no edge program for method {method!r} (methods: {', '.join(edge)})")
    recorded = record.graph(stage)
    if view == "recorded":
        return recorded, f"etrecord {path} ({stage}, as recorded: before partitioning)", []
    delegates = dict(record.delegate_map.get(method, {}) or {})
    handles = dict(record.debug_handle_map.get(method, {}) or {})
    outs = dict(record.instruction_id_to_num_outs_map.get(method, {}) or {})
    if not handles:
        note = ("the ETRecord has no debug_handle_map for this method (it was saved before "
                "to_executorch), so delegation cannot be rebuilt: counting the recorded edge program, "
                "which is the program before partitioning")
        return recorded, f"etrecord {path} ({stage}, as recorded)", [note]
    if not delegates:  # still drop the deserializer's ``_unused_`` getitems, as for a lowered program
        graph = _rebuild(recorded, {}, handles, outs, method)
        return graph, f"etrecord {path} ({stage}; the emitted program has no delegate calls)", []
    graph = _rebuild(recorded, delegates, handles, outs, method, kernels)
    return graph, f"etrecord {path} ({stage}, lowered view rebuilt from delegate_map + debug_handle_map)", []


def _key(k: object) -> int:
    return int(k) if str(k).lstrip("-").isdigit() else 0  # type: ignore[call-overload]


def _handle_list(raw: Any) -> list[int]:
    return [raw] if isinstance(raw, int) else [int(h) for h in (raw or [])]


def _op_base(target: str | None) -> str:
    """``aten.mul.Scalar`` / ``aten.mul.Scalar_out`` / ``aten::mul`` → ``aten.mul`` (operator without overload)."""
    t = (target or "").replace("::", ".")
    for prefix in ("torch.ops.", "executorch.exir.dialects.edge.ops."):
        if t.startswith(prefix):
            t = t[len(prefix):]
    return t.rsplit(".", 1)[0] if t.count(".") >= 2 else t


def _rebuild(recorded: Graph, delegates: dict[Any, Any], handles: dict[Any, Any], outs: dict[Any, Any], method: str,
             kernels: dict[int, str] | None = None) -> Graph:
    """The lowered graph: which recorded nodes each delegate swallowed, from the instruction maps.

    A debug handle is shared by every node a decomposition produced (a ``matmul`` becomes
    ``expand_copy``, ``view_copy``, ``bmm``, ``view_copy``), and the partitioner may take only some
    of them. ``debug_handle_map`` says how many nodes of each handle every delegate holds and which
    non-delegate instructions (CPU kernels) carry the handle; ``kernels`` (instruction → operator,
    from the ``.pte``) says which operator each of those kernels ran. Nodes are assigned in
    execution order: kernel instructions claim the node of their operator (with the ``.pte``) or
    the next node of their handle (without), delegates claim the next unclaimed nodes of their
    handles. Nodes nobody claims ran outside the delegates (views the emitter turned into memory
    aliases have no instruction of their own).
    """
    # candidate recorded nodes per debug handle, in graph order
    by_handle: dict[int, list[Node]] = {}
    for node in recorded:
        if _is_counted(node) and not _UNUSED.search(node.name):
            for h in node.debug_handles:
                by_handle.setdefault(h, []).append(node)
    delegate_ids = {_key(k) for k in delegates}
    delegate_entry = {_key(k): v for k, v in delegates.items()}
    handle_lists = {_key(k): _handle_list(v) for k, v in handles.items()}
    taken: set[str] = set()  # swallowed by a delegate
    outside: set[str] = set()  # claimed by a kernel instruction
    plan: list[tuple[int, str, list[Node | str]]] = []  # (instruction, backend, inner members)

    def free(h: int) -> list[Node]:
        return [n for n in by_handle.get(h, []) if n.name not in taken and n.name not in outside]

    if kernels:  # exact: each CPU kernel claims the node of its own operator first
        for instr in sorted(i for i in handle_lists if i not in delegate_ids):
            op = kernels.get(instr)
            for h in handle_lists[instr]:
                match = next((n for n in free(h) if op and _op_base(n.target) == op), None)
                if match is not None:
                    outside.add(match.name)
    for instr in sorted(set(handle_lists) | delegate_ids):
        if instr not in delegate_ids:
            if not kernels:  # execution order: the kernel ran the next node of its handle
                for h in handle_lists[instr]:
                    nxt = free(h)
                    if nxt:
                        outside.add(nxt[0].name)
            continue
        entry = delegate_entry[instr]
        backend = str(entry.get("name", "unknown")) if isinstance(entry, dict) else str(entry)
        members: list[Node | str] = []
        for h, count in Counter(handle_lists.get(instr, [])).items():
            cands = free(h)
            for n in cands[:count]:
                taken.add(n.name)
                members.append(n)
            members.extend("getitem" for _ in range(max(0, count - len(cands))))
        plan.append((instr, backend, members))

    out = Graph(recorded.name, dict(recorded.meta, view="lowered (rebuilt from ETRecord maps)"))
    order = {n.name: i for i, n in enumerate(recorded)}
    first_member: dict[int, list[int]] = {}
    for idx, (_instr, _backend, members) in enumerate(plan):
        real = [m for m in members if isinstance(m, Node)]
        pos = min((order[m.name] for m in real), default=len(order))
        first_member.setdefault(pos, []).append(idx)
    used_names = {n.name for n in recorded}
    remap: dict[str, str] = {}  # swallowed node -> the getitem that reads the delegate's output

    def fresh(base: str) -> str:
        name, i = base, 1
        while name in used_names:
            name, i = f"{base}_{i}", i + 1
        used_names.add(name)
        return name

    def emit_delegate(idx: int) -> None:
        instr, backend, members = plan[idx]
        inner = Graph(f"{method}.delegate_{idx}.inner", {"format": "etrecord", "stage": "lowered (rebuilt)"})
        member_names = {m.name for m in members if isinstance(m, Node)}
        # the lowered module reads what it does not compute through placeholders of the same name
        for m in members:
            if isinstance(m, Node):
                for i in m.inputs:
                    if i not in member_names and i not in inner:
                        src = recorded.get(i)
                        kind = "param" if src is not None and src.kind == "param" else "input"
                        inner.add(Node(i, kind=kind, outputs=list(src.outputs) if src is not None else []))
        for m in members:
            if isinstance(m, Node):
                inner.add(Node(m.name, kind="op", target=m.target, inputs=[i for i in m.inputs if i in inner],
                               outputs=list(m.outputs), module_stack=list(m.module_stack),
                               stack_trace=m.stack_trace, debug_handles=m.debug_handles, attrs=dict(m.attrs)))
            else:
                inner.add(Node(inner.unique_name("getitem"), kind="op", target="getitem"))
        ext_inputs = []
        for m in members:
            if isinstance(m, Node):
                for i in m.inputs:
                    source = remap.get(i, i)
                    if i not in member_names and source in out and source not in ext_inputs:
                        ext_inputs.append(source)
        name = fresh("executorch_call_delegate")
        out.add(Node(name, kind="delegate", target="executorch_call_delegate", inputs=ext_inputs,
                     delegate=DelegateInfo(backend_id=backend, inner=inner, index=idx),
                     attrs={"instruction": instr}))
        n_out = outs.get(instr, outs.get(str(instr), 1))
        n_out = n_out if isinstance(n_out, int) else len(n_out)
        getitems = [fresh("getitem") for _ in range(max(1, n_out))]
        for g in getitems:
            out.add(Node(g, kind="op", target="getitem", inputs=[name]))
        for m in member_names:
            remap[m] = getitems[0]

    emitted: set[int] = set()
    for i, node in enumerate(recorded):
        for idx in first_member.get(i, []):
            emit_delegate(idx)
            emitted.add(idx)
        if node.name in taken:
            continue
        if _is_counted(node):
            if _UNUSED.search(node.name):
                continue  # deserializer artefact, absent from the in-memory program
        inputs = [remap.get(x, x) for x in node.inputs if remap.get(x, x) in out]
        attrs = dict(node.attrs)
        if isinstance(attrs.get("args"), str):  # show what the lowered program reads: the getitem
            attrs["args"] = re.sub(r"%(\w+)", lambda m: "%" + remap.get(m.group(1), m.group(1)), attrs["args"])
        out.add(Node(node.name, kind=node.kind, target=node.target, inputs=inputs, outputs=list(node.outputs),
                     module_stack=list(node.module_stack), stack_trace=node.stack_trace,
                     debug_handles=node.debug_handles, delegate=node.delegate, attrs=attrs))
    for idx in range(len(plan)):
        if idx not in emitted:
            emit_delegate(idx)
    return out
