"""Tie event blocks to an ETRecord: debug handles, op types, stack traces, module hierarchy.

Same rules as ``executorch.devtools.Inspector``:

* an event's instruction id (as a string key) looks up its debug handles in the record's
  ``debug_handle_map[method]``; a delegated event instead looks its delegate debug identifier up
  in ``delegate_map[method][instruction id]["delegate_map"]`` (int key, then string key, then any
  key that is a substring of the identifier); ``DELEGATE_CALL`` events get the backend name;
* each handle names the operator nodes of the reference graph (the edge-dialect program by
  default) whose ``debug_handle`` is that handle; for each node the event gains its target in
  ``op_types`` and, keyed by ``<node name>_``, its ``stack_trace`` and ``nn_module_stack``.

The node metadata is read from the record's stored program JSON when the record is an etlens
:class:`~etlens.readers.etrecord.ETRecord` (no torch deserialisation: fast on big models), or
from the FX graph of an ``ExportedProgram`` otherwise (e.g. an ExecuTorch ``ETRecord`` object).
"""

from __future__ import annotations

import warnings
from typing import Any

from ...model.events import BlockColumns
from ..record import Record, as_record
from ...schema import DELEGATE_CALL, FRAMEWORK_EVENT_NAMES

__all__ = ["RESERVED_FRAMEWORK_EVENT_NAMES", "NodeInfo", "handle_to_nodes", "resolve_block", "record_maps"]
# (kernel_matches and method_score are used by the inspector to check and attribute records)

RESERVED_FRAMEWORK_EVENT_NAMES = list(FRAMEWORK_EVENT_NAMES)

#: (name as ExecuTorch keys it, op type, stack trace, nn_module_stack dict)
NodeInfo = tuple


def _op_name_from_target(target: str) -> str:
    """``target.__name__`` of a serialized target string, as the live op object would give."""
    edge = "executorch.exir.dialects.edge.ops."
    if target.startswith(edge):
        return target[len(edge):]
    if target.startswith("torch.ops.higher_order."):
        return target.rsplit(".", 1)[1]
    if target.startswith("torch.ops."):
        parts = target.split(".")
        return ".".join(parts[3:]) if len(parts) > 4 else parts[-1]
    return target.rsplit(".", 1)[-1]


def _parse_module_stack(s: str | None, cache: dict, split: Any = None) -> dict:
    """``{key: (path, type)}`` of a serialized ``nn_module_stack``; ``cache`` (owned by the caller,
    one per program) memoizes whole texts, and under the key ``None`` a dict of single
    ``key,path,type`` entries: the nodes of a program share their outer modules' entries even when
    no two stacks are equal. ``split`` is :func:`etlens.readers.split_module_entry`, passed in by
    callers that parse many stacks (an import statement per call cost more than the parse)."""
    if not s:
        return {}
    hit = cache.get(s)
    if hit is not None:
        return dict(hit)
    if split is None:
        from ...readers import split_module_entry as split
    items = cache.get(None)
    if items is None:
        items = cache[None] = {}
    stack = {}
    for item in s.split(";"):
        entry = items.get(item)
        if entry is None:
            parts = split(item)
            entry = (parts[0], (parts[1], parts[2])) if len(parts) == 3 else ()
            if len(items) < 100_000:
                items[item] = entry
        if entry:
            stack[entry[0]] = entry[1]
    if len(cache) < 100_000:
        cache[s] = stack
    return dict(stack)


_SKIPPED_TARGETS = ("_operator.getitem", "executorch.exir.memory.alloc")


def _nodes_from_json(doc: Any) -> list[tuple[int, NodeInfo]]:
    """Node infos of a program, from its :class:`~etlens.readers.program_nodes.ProgramNodes` (or its
    parsed JSON). Op names are computed once per distinct target (a program repeats a few)."""
    if isinstance(doc, dict):
        from ...readers.program_nodes import ProgramNodes

        doc = ProgramNodes.from_json(doc)
    from ...readers import split_module_entry

    out = []
    stacks: dict[str, dict] = {}
    ops: dict[str, str] = {}
    for name, first, target, dh, trace, stack in zip(doc.names, doc.output_names, doc.targets, doc.debug_handles,
                                                      doc.stack_traces, doc.module_stacks):
        if target in _SKIPPED_TARGETS or dh in (None, ""):
            continue
        try:
            handle = int(dh)
        except (TypeError, ValueError):
            continue
        op = ops.get(target) if isinstance(target, str) else None
        if op is None:
            op = _op_name_from_target(target)
            if isinstance(target, str):
                ops[target] = op
        out.append((handle, ((name or first or "") + "_", op, trace,
                             _parse_module_stack(stack, stacks, split_module_entry))))
    return out


def _nodes_from_fx(graph_module) -> list[tuple[int, NodeInfo]]:
    import operator

    out = []
    for node in graph_module.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        if getattr(node.target, "__name__", "") == "alloc":
            continue
        handle = node.meta.get("debug_handle")
        if handle is None:
            continue
        out.append((handle, (node.name + "_", getattr(node.target, "__name__", str(node.target)),
                             node.meta.get("stack_trace"), node.meta.get("nn_module_stack"))))
    return out


def handle_to_nodes(record: Record | Any, method: str = "forward",
                    graph: str | None = None) -> dict[Any, list[NodeInfo]]:
    """``{debug handle: [NodeInfo, ...]}`` of the reference graph of ``record`` (either ETRecord kind)."""
    rec = as_record(record)
    nodes: list[tuple[int, NodeInfo]] = []
    if rec.etlens is not None:
        stages = rec.stages()
        stage = graph
        if stage is None:
            edge = [s for s in stages if s.startswith("edge_dialect_exported_program/")]
            stage = f"edge_dialect_exported_program/{method}" if f"edge_dialect_exported_program/{method}" in edge \
                else (edge[0] if edge else None)
        if stage is None:
            warnings.warn(f"{rec.path}: no edge-dialect program; op types, stack "
                          "traces and module hierarchy stay empty (debug handles still resolve)", stacklevel=3)
            return {}
        nodes_of = getattr(rec.etlens, "program_nodes", None)
        nodes = _nodes_from_json(nodes_of(stage) if callable(nodes_of) else rec.etlens.program_json(stage))
    else:
        ep = rec.edge_program(method, graph)
        if ep is None:
            return {}
        nodes = _nodes_from_fx(ep.graph_module)
    table: dict[Any, list[NodeInfo]] = {}
    for handle, info in nodes:
        table.setdefault(handle, []).append(info)
    return table


def record_maps(record: Record | Any, method: str = "forward") -> tuple[dict | None, dict | None, dict | None]:
    """The raw ``(debug_handle_map, delegate_map, num_outs_map)`` of ``method`` (string keys, as stored)."""
    return as_record(record).raw_maps(method)


def resolve_block(block: BlockColumns, handle_map: dict | None, delegate_map: dict | None,
                  num_outs_map: dict | None, nodes: dict[Any, list[NodeInfo]]) -> int:
    """Fill the ETRecord-derived columns of ``block``; returns how many events got handles."""
    resolved = 0
    handle_map = handle_map or {}
    for i in range(len(block)):
        key = str(int(block.instruction_ids[i]))
        if key not in handle_map:
            continue
        if num_outs_map is not None:
            block.num_outputs[i] = num_outs_map.get(key, 1)
        ident = block.delegate_ids[i]
        name = block.names[i]
        if ident is None:
            block.debug_handles[i] = handle_map[key]
            if name == DELEGATE_CALL and delegate_map is not None and (meta := delegate_map.get(key)) is not None:
                block.backend_names[i] = meta.get("name", "")
        elif delegate_map is None or (meta := delegate_map.get(key)) is None:
            block.debug_handles[i] = handle_map[key]
        else:
            block.backend_names[i] = meta.get("name", "")
            dmap = meta.get("delegate_map") or {}
            handles = dmap.get(ident)
            if handles is not None:
                block.debug_handles[i] = handles
            else:
                handles = dmap.get(str(ident))
                for k, v in dmap.items():
                    if isinstance(k, str) and k in str(ident):
                        handles = v
                block.debug_handles[i] = handles
        if block.debug_handles[i] is not None:
            resolved += 1
        _associate(block, i, nodes)
    return resolved


def _associate(block: BlockColumns, i: int, nodes: dict[Any, list[NodeInfo]]) -> None:
    if block.names[i] in RESERVED_FRAMEWORK_EVENT_NAMES:
        return
    handles = block.debug_handles[i]
    if handles is None:
        return
    if isinstance(handles, int):
        handles = [handles]
    st, mh, ops = block.stack_traces[i], block.module_hierarchy[i], block.op_types[i]
    for h in handles:
        for name, op, trace, stack in nodes.get(h, ()):
            if name not in st:
                st[name] = trace
                mh[name] = stack
            if op:
                ops.append(op)


def kernel_matches(name: str, op_types: list[str]) -> bool | None:
    """Whether a portable kernel event (``native_call_addmm.out``) names one of its op types; None when
    there is nothing to check."""
    if not name.startswith("native_call_") or not op_types:
        return None
    kernel = name[len("native_call_"):].split(".")[0]
    bases = [op.split(".")[-2] if op.count(".") >= 1 else op for op in op_types]
    return any(base and (base in kernel or kernel in base) for base in bases)


def method_score(block: BlockColumns, handle_map: dict, nodes: dict) -> int:
    """How well a method's maps explain a block: +1 per known instruction, +2 / -2 per kernel whose
    name does / does not match the operators its debug handles point to."""
    score = 0
    for i, name in enumerate(block.names):
        instr = int(block.instruction_ids[i])
        if instr < 0 or block.is_delegated[i] or name in FRAMEWORK_EVENT_NAMES:
            continue
        handles = handle_map.get(str(instr))
        if handles is None:
            score -= 1
            continue
        score += 1
        hs = [handles] if isinstance(handles, int) else handles
        ops = [info[1] for h in hs for info in nodes.get(h, ())]
        ok = kernel_matches(name, ops)
        if ok is not None:
            score += 2 if ok else -2
    return score
