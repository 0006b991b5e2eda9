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
            cache[block_key(b)] = [(*event_attribution(b, i, True), b.backend_names[i]) for i in range(len(b.names))]
        if any(k not in cache for k in keys):
            return None
    return [cache[k] for k in keys]
