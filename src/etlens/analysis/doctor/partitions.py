"""Rule ``fragmented-delegate``: one delegate cut into many partitions by the nodes between them.

Each node a partitioner leaves out in the middle of a delegated chain ends one partition and starts
the next: one more delegate call per run (its fixed overhead), and the tensors crossing each
boundary are copied (and, for a backend that computes in another layout, transposed in and out).
This rule reads the main method's first run in execution order (:attr:`DoctorContext.timeline`):
when one backend runs :data:`MIN_PARTITIONS` or more partitions, the portable nodes between its
calls are the cuts. Evidence: partitions, the cuts and their modules, the per-call overhead, the
layout copies inserted at the inner boundaries. Estimated win: what the cut nodes cost on portable
kernels (at :data:`DELEGATE_RECOVERY`), plus the overhead of the calls that would disappear, plus
the inner boundaries' inserted copies.
"""

from __future__ import annotations

from typing import Any

from ._common import DELEGATE_RECOVERY, is_free_op, op_base, share, uniq, where
from .finding import Finding, severity_for

__all__ = ["RULE", "check", "MIN_PARTITIONS", "cuts"]

RULE = "fragmented-delegate"

#: partitions of one backend from which the delegate counts as fragmented
MIN_PARTITIONS = 3


def cuts(ctx: Any) -> tuple[int, list[Any], list[int]]:
    """``(partitions, cut nodes, instruction ids of the delegate calls)`` of the busiest backend."""
    tl = ctx.timeline
    calls = [e for e in tl if e["kind"] == "delegate"]
    if len(calls) < 2:
        return len(calls), [], [e["instruction"] for e in calls]
    by_handle: dict[int, Any] = {}
    for c in ctx.costs:
        if not c.inside_delegate:
            for h in c.handles:
                by_handle.setdefault(h, c)
    first = tl.index(calls[0])
    last = len(tl) - 1 - tl[::-1].index(calls[-1])
    nodes = []
    for e in tl[first:last + 1]:
        if e["kind"] != "op":
            continue
        c = next((by_handle[h] for h in e["handles"] if h in by_handle), None)
        if c is not None and not is_free_op(c.op) and c not in nodes:
            nodes.append(c)
    return len(calls), nodes, [e["instruction"] for e in calls]


def _inserted_ms(ctx: Any, instructions: list[int]) -> float:
    """Median ms per run of the events a backend inserted (layout transposes/copies) in the inner
    boundaries: the tail of every call but the last, the head of every call but the first."""
    att = ctx.attribution
    if att is None or len(instructions) < 2:
        return 0.0
    total = 0.0
    for ev in att.events:
        if ev.match.quality != "inserted" or int(ev.instruction) not in instructions:
            continue
        b = ctx.inspector.block_columns[ev.block]
        total += float(b.stats()[ev.index, 3])
    # an outer boundary (the program's own input and output) stays: keep the inner share only
    inner = (len(instructions) - 1) * 2
    return total * inner / (inner + 2)


def check(ctx: Any) -> list[Finding]:
    parts, nodes, instrs = cuts(ctx)
    if parts < MIN_PARTITIONS or not nodes:
        return []
    total = ctx.latency_ms
    att = ctx.attribution
    overhead = att.summary()["delegate_overhead_ms"] if att is not None else 0.0
    per_call = overhead / parts if parts else 0.0
    cut_ms = sum(c.ms for c in nodes)
    copies = _inserted_ms(ctx, instrs)
    win = DELEGATE_RECOVERY * cut_ms + per_call * (parts - 1) + copies
    ops = uniq(op_base(c.op) for c in nodes)
    modules = uniq(c.module_path for c in nodes)
    lines = uniq(c.source_line for c in nodes if c.source_line)
    reasons = {}
    info = ctx.delegation
    for n in (info.non_delegated if info is not None else []):
        if n.reason and any(n.name == c.node for c in nodes):
            reasons[op_base(n.target or n.op_type)] = n.reason
    score = share(win, total)
    at = ", ".join(where(m) for m in modules[:4]) + (f" ({lines[0]})" if lines else "")
    fix = (f"the delegate runs as {parts} partitions, cut by {len(nodes)} node(s) of {', '.join(ops)} at {at}: "
           f"replace {', '.join(ops)} by ops the delegate supports (or make the call one it accepts"
           + (f": {'; '.join(reasons.values())}" if reasons else "")
           + "), or move them before the first / after the last delegated op, so the chain stays one partition")
    return [Finding(
        rule=RULE, severity=severity_for(score),
        title=f"the delegate is cut into {parts} partitions by {', '.join(ops)}",
        module_paths=modules, nodes=[c.node for c in nodes],
        evidence={"partitions": parts, "cut_ops": ops, "cut_ms": cut_ms, "delegate_overhead_ms_per_call": per_call,
                  "boundary_copies_ms": copies, "latency_ms": total, "partitioner_reasons": reasons,
                  "source_lines": lines},
        estimated_win={"ms": win}, score=score, fix=fix,
        action={"kind": "code", "op": ops, "reason": reasons or None, "source_lines": lines},
        verify_command=ctx.command("doctor", "--format json"))]
