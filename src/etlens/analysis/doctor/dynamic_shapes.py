"""Rule ``dynamic-shape-bound``: a dynamic shape planned at an upper bound far above its use.

The memory planner sizes every tensor of a dynamic shape (``Dim("n", max=…)`` at export) at the
bound: a sequence dimension exported with ``max=1024`` but run with 16 plans 64x the memory it
uses. This rule reads the ``.pte``'s method inputs (their sizes are the bounds, ``shape_dynamism``
says which are dynamic) against the shapes the model is run with (the build's example inputs, else
the ETRecord's representative inputs), and every planned tensor whose shape is dynamic. Estimated
win (bytes): the dynamic tensors' share of the planned arenas times what the bound over-asks.
"""

from __future__ import annotations

from typing import Any

from ._common import share, uniq, where
from .finding import Finding, severity_for

__all__ = ["RULE", "check", "used_shapes"]

RULE = "dynamic-shape-bound"

#: a bound this many times the size used is a finding
MIN_RATIO = 2.0


def used_shapes(ctx: Any) -> list[tuple[int, ...]] | None:
    """Shapes of the tensors the model runs with (the build's inputs, else the ETRecord's)."""
    inputs = getattr(ctx.session, "inputs", None)
    if inputs is None and ctx.etrecord is not None:
        try:
            reps = ctx.etrecord.representative_inputs
        except Exception:  # noqa: BLE001 - no representative inputs recorded
            reps = None
        inputs = reps[0] if reps else None
    if inputs is None:
        return None
    shapes = []
    for x in (inputs if isinstance(inputs, (list, tuple)) else (inputs,)):
        if hasattr(x, "shape"):
            shapes.append(tuple(int(s) for s in x.shape))
    return shapes


def check(ctx: Any) -> list[Finding]:
    pte = ctx.program
    if pte is None or getattr(pte, "program", None) is None:
        return []
    used = used_shapes(ctx)
    if not used:
        return []
    mem = ctx.memory
    out = []
    for plan in pte.program.execution_plan:
        tensors = [plan.values[i].val for i in plan.inputs if plan.values[i].kind == "tensor"]
        dims = []
        for t, shape in zip(tensors, used):
            if t.shape_dynamism and len(t.sizes) == len(shape):
                dims += [(b, u, k) for k, (b, u) in enumerate(zip(t.sizes, shape)) if u and b / u >= MIN_RATIO]
        if not dims:
            continue
        ratio = max(b / u for b, u, _ in dims)
        mm = next((m for m in (mem.methods if mem is not None else []) if m.name == plan.name), None)
        if mm is None:
            continue
        arena = sum(a.size for a in mm.arenas)
        dyn = [t for t in mm.tensors if plan.values[t.value].kind == "tensor"
               and plan.values[t.value].val.shape_dynamism]
        dyn_bytes, all_bytes = sum(t.size for t in dyn), sum(t.size for t in mm.tensors) or 1
        win = int(arena * min(dyn_bytes / all_bytes, 1.0) * (1.0 - 1.0 / ratio))
        if win <= 0:
            continue
        big = sorted(dyn, key=lambda t: -t.size)
        modules = uniq(t.module for t in big if t.module is not None)[:5] or [""]
        score = share(win, arena)
        bounds = ", ".join(f"dim {k}: bound {b}, used {u}" for b, u, k in dims)
        out.append(Finding(
            rule=RULE, severity=severity_for(score),
            title=f"method {plan.name!r} plans dynamic shapes at {ratio:.0f}x the size it runs with ({bounds})",
            module_paths=modules, nodes=uniq(t.node for t in big[:10] if t.node),
            evidence={"method": plan.name, "bounds": [{"dim": k, "bound": b, "used": u} for b, u, k in dims],
                      "arena_bytes": arena, "dynamic_tensor_bytes": dyn_bytes, "dynamic_tensors": len(dyn),
                      "largest": [{"node": t.node, "module": t.module, "shape": list(t.shape), "bytes": t.size}
                                  for t in big[:5]]},
            estimated_win={"bytes": win}, score=score,
            fix=f"export with a bound near the sizes used (torch.export.Dim(..., max=...) of the input dims: "
                f"{bounds}); the planner sizes every dynamic tensor at the bound. Largest: "
                f"{', '.join(where(m) for m in modules[:3])}",
            action={"kind": "export_bound", "bounds": [{"dim": k, "bound": b, "used": u} for b, u, k in dims]},
            verify_command=ctx.command("memory" if not ctx.session else "doctor", "--format json")))
    return out
