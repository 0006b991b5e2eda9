"""Rule ``arena-fragmentation``: planned arena bytes that are never live at the same time.

An arena's size is what the planner reserved; its peak is the most bytes live at one instruction
(:mod:`etlens.analysis.memory`). The difference is fragmentation: holes between tensors whose
lifetimes the greedy placement could not pack. Estimated win: half the waste (a repack rarely
recovers all), when it is at least :data:`MIN_SHARE` of the arena and :data:`MIN_BYTES`.
"""

from __future__ import annotations

from typing import Any

from .finding import Finding, severity_for
from ._common import share

__all__ = ["RULE", "check", "MIN_SHARE", "MIN_BYTES"]

RULE = "arena-fragmentation"

#: waste below this share of the arena is normal packing slack
MIN_SHARE = 0.25

#: waste below this many bytes is not worth a finding on any device
MIN_BYTES = 64 * 1024


def check(ctx: Any) -> list[Finding]:
    mem = ctx.memory
    if mem is None:
        return []
    out = []
    for m in mem.methods:
        for a in m.arenas:
            if a.size <= 0 or a.waste < MIN_SHARE * a.size or a.waste < MIN_BYTES:
                continue
            score = share(a.waste, a.size) * 0.5  # a repack rarely recovers all of it
            out.append(Finding(
                rule=RULE, severity=severity_for(score),
                title=f"arena {a.id} of {m.name!r}: {a.waste:,} of {a.size:,} planned bytes never live at once",
                module_paths=[], nodes=[],
                evidence={"method": m.name, "arena": a.id, "size": a.size, "peak_live": a.peak_live,
                          "waste": a.waste, "peak_at_instruction": a.peak_at},
                estimated_win={"bytes": int(a.waste * 0.5)}, score=score,
                fix="plan memory with lifetimes packed tighter: to_executorch(ExecutorchBackendConfig("
                    "memory_planning_pass=MemoryPlanningPass(alloc_graph_input=…, algo='greedy')) or split "
                    "long-lived tensors; see `etlens memory` for the lifetimes at the peak",
                action={"kind": "memory_plan"}, verify_command=ctx.command("memory", "--format json")))
    return out
