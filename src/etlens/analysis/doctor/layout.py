"""Rule ``layout-copy``: dim-order / layout copies around delegates.

A memory-format change in the model (``x.contiguous(memory_format=torch.channels_last)``,
``.to(memory_format=…)``) becomes a ``_clone_dim_order`` / ``_to_dim_order_copy`` node. Delegates
that pick their own layout refuse clones that change the dim order, so the copy runs on a portable
kernel between two delegate calls, and the delegate before it converts its output back to the
contiguous layout first (an inserted transpose). A ``_to_dim_order_copy`` the delegate takes still
copies every byte inside it. This rule takes every such copy, its time, and the inserted layout
events of the delegate calls right next to one outside.
Estimated win: the copy's time plus half of those neighbours' inserted time (one side of each).
"""

from __future__ import annotations

from typing import Any

from ._common import is_layout_op, op_base, share, uniq, where
from .finding import Finding, severity_for

__all__ = ["RULE", "check"]

RULE = "layout-copy"


def _neighbour_inserted_ms(ctx: Any, handles: set[int]) -> float:
    tl = ctx.timeline
    idx = [i for i, e in enumerate(tl) if e["kind"] == "op" and handles & set(e["handles"])]
    near: set[int] = set()
    for i in idx:
        for j in (i - 1, i + 1):
            if 0 <= j < len(tl) and tl[j]["kind"] == "delegate":
                near.add(tl[j]["instruction"])
    att = ctx.attribution
    if att is None or not near:
        return 0.0
    total = 0.0
    for ev in att.events:
        if ev.match.quality == "inserted" and int(ev.instruction) in near:
            total += float(ctx.inspector.block_columns[ev.block].stats()[ev.index, 3])
    return total


#: ops that only exist to change the dim order: a finding wherever they run next to a delegate
DIM_ORDER_OPS = ("_clone_dim_order", "_to_dim_order_copy")


def _next_to_delegate(ctx: Any, c: Any) -> bool:
    tl = ctx.timeline
    for i, e in enumerate(tl):
        if e["kind"] == "op" and set(c.handles) & set(e["handles"]):
            if any(0 <= j < len(tl) and tl[j]["kind"] == "delegate" for j in (i - 1, i + 1)):
                return True
    return False


def check(ctx: Any) -> list[Finding]:
    if not any(e["kind"] == "delegate" for e in ctx.timeline):
        return []  # nothing delegated: a permute of a portable linear is its own business
    # outside: dim-order copies (and permutes next to a delegate); inside: a dim-order copy the delegate took
    # (``.to(memory_format=…)``) still moves every byte
    copies = [c for c in ctx.costs if is_layout_op(c.op) and c.ms > 0 and (
              op_base(c.op) in DIM_ORDER_OPS or (not c.inside_delegate and _next_to_delegate(ctx, c)))]
    if not copies:
        return []
    ms = sum(c.ms for c in copies)
    around = _neighbour_inserted_ms(ctx, {h for c in copies if not c.inside_delegate for h in c.handles})
    win = ms + 0.5 * around
    total = ctx.latency_ms
    score = share(win, total)
    modules = uniq(c.module_path for c in copies)
    lines = uniq(c.source_line for c in copies if c.source_line)
    ops = uniq(op_base(c.op) for c in copies)
    at = ", ".join(where(m) for m in modules[:3]) + (f" ({lines[0]})" if lines else "")
    fix = (f"remove the memory-format change at {at} (a .contiguous(memory_format=…), .to(memory_format=…) or "
           f"permute that only changes the layout): the delegate picks its own layout, so the {', '.join(ops)} copy "
           "and the layout conversions of the delegate calls around it go away")
    return [Finding(
        rule=RULE, severity=severity_for(score),
        title=f"layout copies ({', '.join(ops)}) around the delegates: {ms:.3g} ms/run",
        module_paths=modules, nodes=[c.node for c in copies],
        evidence={"copy_ops": ops, "copy_ms": ms,
                  "inside_delegate": [c.node for c in copies if c.inside_delegate],
                  "inserted_layout_ms_around": around, "latency_ms": total,
                  "source_lines": lines, "per_node_ms": {c.node: c.ms for c in copies}},
        estimated_win={"ms": win}, score=score, fix=fix,
        action={"kind": "code", "op": ops, "source_lines": lines},
        verify_command=ctx.command("doctor", "--format json"))]
