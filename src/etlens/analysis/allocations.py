"""Runtime allocations recorded in an ETDump: bytes per allocator, largest allocations, timeline.

When the runtime's ``ETDumpGen`` tracks a ``MemoryAllocator`` (``track_allocator``), every
allocation through it becomes an ``AllocationEvent`` (allocator id, size) in the run's event
stream, and the run's ``allocators`` table names the allocators (id = 1-based index into it, as
ExecuTorch's ETDump writer assigns them). :func:`allocation_summary` groups them per run:

* ``allocators``: name, number of allocations and total bytes, per allocator;
* ``largest``: the biggest allocations with the event index and the profiled event running
  around them (the last profile event that started before the allocation, e.g. the delegate call
  or ``Program::load_method`` that allocated);
* ``timeline``: cumulative bytes per allocator after each allocation (event order).

Example::

    from etlens.readers.etdump import read_etdump
    summary = allocation_summary(read_etdump("run.etdp"))
    summary["runs"][0]["allocators"]   # [{"id": 1, "name": "method_allocator", "count": 12, "bytes": 4096}]
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["allocation_summary", "has_allocations"]


def has_allocations(dump: Any) -> bool:
    from ..readers.etdump import ALLOCATION

    return any(bool((r.kind == ALLOCATION).any()) for r in dump.runs)


def allocation_summary(dump: Any, top: int = 10) -> dict[str, Any]:
    """``{"runs": [{"run", "name", "allocators", "largest", "timeline", "total_bytes"}]}``."""
    from ..readers.etdump import ALLOCATION, PROFILE

    runs = []
    for ri, r in enumerate(dump.runs):
        idx = np.flatnonzero(r.kind == ALLOCATION)
        if not len(idx) and not r.allocators:
            continue
        # ETDumpGen numbers allocators from 1 (the length of the table after adding one); an id 0
        # can only come from a writer that counts from 0, so then the table is read 0-based
        base = 0 if len(idx) and bool((r.allocator_id[idx] == 0).any()) else 1
        names = {i + base: n for i, n in enumerate(r.allocators)}
        per: dict[int, dict[str, Any]] = {}
        timeline: list[dict[str, Any]] = []
        running: dict[int, int] = {}
        prof = np.flatnonzero(r.kind == PROFILE)
        allocs = []
        for i in idx:
            aid, size = int(r.allocator_id[i]), int(r.allocation_size[i])
            a = per.setdefault(aid, {"id": aid, "name": names.get(aid, f"allocator {aid}"), "count": 0, "bytes": 0})
            a["count"] += 1
            a["bytes"] += size
            running[aid] = running.get(aid, 0) + size
            before = prof[prof < i]
            ctx = dump.string(int(r.name_id[before[-1]])) if len(before) and r.name_id[before[-1]] >= 0 else None
            allocs.append({"event": int(i), "allocator": a["name"], "allocator_id": aid, "bytes": size,
                           "during": ctx})
            timeline.append({"event": int(i), "allocator_id": aid, "cumulative_bytes": running[aid]})
        for aid, n in names.items():
            per.setdefault(aid, {"id": aid, "name": n, "count": 0, "bytes": 0})
        runs.append({"run": ri, "name": r.name, "allocators": sorted(per.values(), key=lambda a: a["id"]),
                     "total_bytes": sum(a["bytes"] for a in per.values()),
                     "largest": sorted(allocs, key=lambda a: -a["bytes"])[:top], "timeline": timeline})
    return {"runs": runs}
