"""ETRecord attribution of ETDump events, as dataset columns: the one home the reference and fast paths share.

Both :func:`etlens.fleet.ingest.reference_rows` and the fast path (:mod:`.fastpath`) give each
event its debug handles, op types, module path, node and backend from the ETRecord. That
attribution depends only on the program (a block's event names, instructions and delegate ids,
:func:`block_key`), so it is computed once per program with an Inspector and reused for every
dump of that program: :func:`attributions` keeps it with the parsed ETRecord object it came from
(and drops it when that object goes).
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

import numpy as np

__all__ = ["attributions", "block_key", "inspector_blocks", "event_attribution"]

#: id(parsed ETRecord) -> {block key: per-event (handles, op types, module path, node, backend)}
_BY_RECORD: dict[int, dict[tuple, list[tuple]]] = {}


def handles_text(h: Any) -> str | None:
    if h is None:
        return None
    if isinstance(h, (int, np.integer)):
        return str(int(h))
    return ",".join(str(int(x)) for x in h)


def event_attribution(block: Any, i: int, has_record: bool) -> tuple[str | None, str | None, str | None, str | None]:
    """``(debug_handles, op_types, module_path, node)`` of event ``i`` of a block, as text."""
    if not has_record:
        return None, None, None, None
    hier = block.module_hierarchy[i] or {}
    paths: list[str] = []
    for stack in hier.values():
        p = ""
        if stack:
            last = list(stack.values())[-1]
            p = str(last[0]) if isinstance(last, (tuple, list)) else str(last)
        if p not in paths:
            paths.append(p)
    nodes = [k[:-1] if k.endswith("_") else k for k in (block.stack_traces[i] or hier)]
    module = ";".join(paths) if paths else None
    return (handles_text(block.debug_handles[i]), ";".join(block.op_types[i]) or None, module,
            ";".join(nodes) or None)


def inspector_blocks(inspector: Any, path: str, data: bytes | None, record: Any) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # "no debug buffer" and record-mismatch warnings: timings are complete
        insp = inspector(etdump_path=path, etrecord=record) if data is None else \
            inspector(etdump_data=data, etrecord=record)
    return insp.block_columns


def block_key(b: Any) -> tuple:
    """What the ETRecord attribution of a block depends on: its events' names, instructions, delegate ids."""
    return (b.name, b.instruction_ids.tobytes(), tuple(b.names), tuple(map(str, b.delegate_ids)))


def _cache_for(record: Any) -> dict[tuple, list[tuple]]:
    key = id(record)
    cache = _BY_RECORD.get(key)
    if cache is None:
        cache = _BY_RECORD[key] = {}
        try:
            weakref.finalize(record, _BY_RECORD.pop, key, None)
        except TypeError:  # not weakly referenceable: kept for the process, as before
            pass
    return cache


def attributions(record: Any, keys: list[tuple], path: str, data: bytes | None) -> list[list[tuple]] | None:
    """Per block (by :func:`block_key`), per event: ``(handles, op types, module path, node, backend)``.

    The first dump of a program in this process is attributed by an Inspector with ``record``;
    later dumps of the same program reuse it. ``None`` when the dump's blocks do not match what the
    record attributes (the caller then takes the reference path).
    """
    from ..analysis.inspector import Inspector

    cache = _cache_for(record)
    if any(k not in cache for k in keys):
        for b in inspector_blocks(Inspector, path, data, record):
            rows = [(*event_attribution(b, i, True), b.backend_names[i]) for i in range(len(b.names))]
            cache[block_key(b)] = _named_delegate_events(b, rows, record)
        if any(k not in cache for k in keys):
            return None
    return [cache[k] for k in keys]


def _named_delegate_events(block: Any, rows: list[tuple], record: Any) -> list[tuple]:
    """Give delegate-internal events that carry no debug handle but name their graph node (QNN's
    ``<node>:OpId_<n> (cycles)``) the node and module the backend's attributor maps them to."""
    todo = [i for i, r in enumerate(rows) if r[3] is None and block.is_delegated[i] and r[4]]
    if not todo:
        return rows
    from ..analysis.attribution import attributor_for
    from ..analysis.inspector.etrecord import handle_to_nodes

    groups: dict[tuple, list[int]] = {}
    for i in todo:
        groups.setdefault((int(block.instruction_ids[i]), rows[i][4]), []).append(i)
    named = {b: attributor_for(b) for _, b in groups}
    named = {b: a for b, a in named.items() if a is not None and getattr(a, "takes_graph_nodes", False)}
    if not named:
        return rows
    try:
        nodes = handle_to_nodes(record)
    except Exception:  # noqa: BLE001 - an ETRecord without an edge program: events stay by name
        return rows
    by_name: dict[str, tuple[int, Any]] = {}
    for h, infos in nodes.items():
        for x in infos:
            by_name.setdefault(str(x[0]).rstrip("_"), (h, x))
    out = list(rows)
    for (_, backend), idxs in groups.items():
        att = named.get(backend)
        if att is None:
            continue
        for i, m in zip(idxs, att.match([block.names[i] for i in idxs], None, graph_nodes=tuple(by_name)),
                        strict=True):
            if not m.nodes or m.nodes[0] not in by_name:
                continue
            h, (name, op, _trace, stack) = by_name[m.nodes[0]]
            module = ""
            if stack:
                last = list(stack.values())[-1]
                module = str(last[0]) if isinstance(last, (tuple, list)) else str(last)
            out[i] = (handles_text(h), op or None, module, str(name).rstrip("_"), rows[i][4])
    return out
