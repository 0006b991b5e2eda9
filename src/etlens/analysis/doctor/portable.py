"""Rule ``portable-op``: time on portable kernels that a delegate could take.

A program lowered for a delegate still runs every node the partitioner left out on ExecuTorch's
portable kernels, often 10-100x slower than the delegate's own. This rule takes the measured time
of each such node (its median over the runs), groups the nodes by op and by the partitioner's
reason (replayed from its support checks: :mod:`etlens.analysis.delegation.reasons`), and says
what would let the delegate take them: a call argument the partitioner refuses, an op it has no
kernel for, a dtype. Nodes that cut one delegate into several partitions are left to
``fragmented-delegate``; layout copies to ``layout-copy``.

Estimated win: :data:`DELEGATE_RECOVERY` of the portable time (a delegate is rarely free).
"""

from __future__ import annotations

from typing import Any

from ._common import DELEGATE_RECOVERY, is_free_op, is_layout_op, op_base, share, uniq, where
from .finding import Finding, severity_for

__all__ = ["RULE", "check", "portable_costs", "fix_text", "reasons"]

RULE = "portable-op"


def delegating(ctx: Any) -> bool:
    """True when the program delegates (or its build has a partitioner): portable time is then a choice."""
    info = ctx.delegation
    if info is not None and info.num_delegated_subgraphs > 0:
        return True
    cfg = getattr(ctx.session, "config", None)
    return cfg is not None and getattr(cfg, "partitioner_factory", None) is not None


def portable_costs(ctx: Any) -> list[Any]:
    """The timed nodes outside every delegate that do work (no layout copies, no getitem/views)."""
    return [c for c in ctx.costs if not c.inside_delegate and not is_free_op(c.op) and not is_layout_op(c.op)
            and c.ms > 0]


def reasons(ctx: Any) -> dict[str, str]:
    """``{node: the partitioner's reason}`` for the nodes left out (the build's own edge program when
    the recorded one lost the call's arguments)."""
    info = ctx.delegation
    out = {n.name: n.reason for n in (info.non_delegated if info is not None else []) if n.reason}
    vague = [n for n, r in out.items() if "left out when partitions were formed" in r]
    if vague and ctx.session is not None and ctx.partitioner is not None:
        out.update(_fresh_reasons(ctx, vague))
    return out


def _fresh_reasons(ctx: Any, names: list[str]) -> dict[str, str]:
    """Ask the partitioner again on the build's own edge program (the ETRecord's copy may have lost
    trailing call arguments such as ``ceil_mode``)."""
    if "fresh reasons" in ctx._cache:
        return ctx._cache["fresh reasons"]
    got: dict[str, str] = {}
    try:
        from ...builder.toolchain import to_edge
        from ..delegation.reasons import explain

        edge = to_edge(ctx.session.program, ctx.session.config).exported_program()
        got = {k: v for k, v in explain(edge, ctx.partitioner, names).items()
               if "left out when partitions were formed" not in v}
    except Exception as exc:  # noqa: BLE001 - the recorded reason stays
        ctx.notes["partitioner reasons (build)"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    ctx._cache["fresh reasons"] = got
    return got


def fix_text(op: str, reason: str, where_text: str) -> str:
    """What would let the delegate take ``op``, from the partitioner's ``reason``."""
    base = op_base(op)
    if "rejected it" in reason:
        why = reason.split("rejected it", 1)[1].lstrip(": ").strip()
        return (f"change the call of {base} at {where_text} so the partitioner accepts it ({why}); for a "
                f"call argument that means the value it accepts (e.g. the default)")
    if "no support config" in reason:
        return (f"the delegate has no kernel for {base}: replace it at {where_text} by ops it supports, or move it "
                f"before the first / after the last delegated op")
    if "left out when partitions were formed" in reason:
        return (f"the partitioner supports {base} but not this call: use the op's default arguments at "
                f"{where_text} (pooling: ceil_mode=False, count_include_pad only without padding)")
    if reason:
        return f"make {base} at {where_text} delegable: {reason}"
    return f"make {base} at {where_text} run on the delegate (an op or argument it supports)"


def check(ctx: Any) -> list[Finding]:
    costs = portable_costs(ctx)
    if not costs or not delegating(ctx):
        return []
    from .partitions import MIN_PARTITIONS, cuts

    parts, cut, _ = cuts(ctx)
    if parts >= MIN_PARTITIONS:  # those are the fragmented-delegate finding's
        costs = [c for c in costs if c not in cut]
    why = reasons(ctx)
    groups: dict[tuple[str, str], list[Any]] = {}
    for c in costs:
        groups.setdefault((op_base(c.op), why.get(c.node, "")), []).append(c)
    total = ctx.latency_ms
    out = []
    for (base, reason), items in groups.items():
        ms = sum(c.ms for c in items)
        win = DELEGATE_RECOVERY * ms
        modules = uniq(c.module_path for c in items)
        lines = uniq(c.source_line for c in items if c.source_line)
        kind = items[0].module_type.rsplit(".", 1)[-1]
        facts = [p for p in (kind, lines[0] if lines else "") if p]
        at = ", ".join(where(m) for m in modules[:3]) + (f" ({', '.join(facts)})" if facts else "")
        score = share(win, total)
        out.append(Finding(
            rule=RULE, severity=severity_for(score),
            title=f"{base} runs on portable kernels ({ms:.3g} ms/run, {len(items)} node(s))",
            module_paths=modules, nodes=[c.node for c in items],
            evidence={"op": items[0].op, "portable_ms": ms, "latency_ms": total, "share": share(ms, total),
                      "nodes": len(items), "partitioner_reason": reason or None, "source_lines": lines,
                      "per_node_ms": {c.node: c.ms for c in items}},
            estimated_win={"ms": win}, score=score, fix=fix_text(items[0].op, reason, at),
            action={"kind": "code", "op": base, "reason": reason or None, "source_lines": lines},
            verify_command=ctx.command("doctor", "--format json")))
    return out
