"""Why an op or event has no row of its own in the gap table (``explain_unpaired``).

ExecuTorch drops whatever it cannot pair without a word. Here every reference node (call_function,
``getitem`` excluded) and every runtime event that is not the compared output of a row is listed
with a reason code from :data:`REASONS` and a sentence saying what to do about it.
"""

from __future__ import annotations

from typing import Any

from ._numerics_runtime import collect_runtime_outputs, runtime_blocks
from .comparators import MSEComparator
from ..schema import DELEGATE_CALL

__all__ = ["REASONS", "explain", "EXPLAIN_COLUMNS"]

#: reason code -> what it means
REASONS: dict[str, str] = {
    # reference side
    "no_debug_handle": "no debug handle: nothing ties this reference node / runtime event to the other side",
    "removed_by_pass": "no edge-dialect node descends from this ATen node: a to_edge pass removed or folded it",
    "no_runtime_event": "no runtime event carries this handle (a free view / memory-planned alias, a constant, "
                        "or an op the runtime never ran)",
    "delegate_no_intermediates": "inside a delegate call whose backend logged no intermediate output for it; "
                                 "only the delegate call's output is compared",
    "fused": "grouped with other ops under one runtime event; only the group's last output is compared",
    "shares_handle": "shares its debug handle with later nodes (a decomposition); the last one is compared",
    "multi_output": "the op returns several tensors and the runtime logged a different number of them "
                    "(ExecuTorch skips such ops; pass multi_output=True to compare by position)",
    "shape_mismatch": "paired, but the runtime tensor's shape cannot be matched to the reference output",
    "not_comparable": "paired, but the comparator could not compare the two values",
    "ambiguous": "the reference handles overlap several separate runtime events",
    "not_compared": "grouped with a runtime event, but no output position of that event maps to it",
    # runtime side
    "framework_event": "runtime bookkeeping (method init/execute), not an operator",
    "no_graph_node": "the event's handles match no node of the ETRecord graph",
    "covered_by_inner_events": "a delegate call whose backend logged per-op intermediates, compared instead",
    "superseded": "another event with the same handles and a later instruction id is compared instead",
    "no_intermediate_output": "the event logged no tensor (intermediate outputs were not recorded for it)",
    "no_reference_output": "no reference node has the handle the event's output maps to",
    "handles_not_covered": "some reference handles of the group are not among the event's handles",
}

EXPLAIN_COLUMNS = ["side", "name", "op", "debug_handle", "reason", "detail", "module_path", "stack_trace", "row",
                   "block", "instruction_id"]


def _row(side: str, name: str, op: Any, handle: Any, reason: str, detail: str = "", module_path: Any = None,
         stack_trace: Any = None, row: Any = None, block: Any = None, instruction_id: Any = None) -> dict:
    return {"side": side, "name": name, "op": op, "debug_handle": handle, "reason": reason,
            "detail": detail or REASONS.get(reason, ""), "module_path": module_path, "stack_trace": stack_trace,
            "row": row, "block": block, "instruction_id": instruction_id}


def explain(analysis: Any, include_framework_events: bool = False, multi_output: bool = False):
    """Build the explanation DataFrame for a :class:`~etlens.analysis.numerics.NumericalAnalysis`."""
    import pandas as pd

    cap, rt, paired = analysis.capture, analysis.runtime, analysis.paired
    rows, infos, errors = analysis._rows(MSEComparator(), multi_output)

    compared: dict[str, int] = {}  # node name whose output is compared -> row
    covered: dict[str, int] = {}  # node name listed in a row's aot_ops -> row
    row_rt: dict[tuple, int] = {}
    for i, (row, info) in enumerate(zip(rows, infos)):
        row_rt.setdefault(tuple(row["runtime_debug_handle"]), i)
        for name in row["aot_ops"]:
            covered.setdefault(name, i)
        if info is not None and info.aot_handle in cap.last_node:
            compared.setdefault(cap.last_node[info.aot_handle], i)

    # merged runtime key holding each handle, and whether its winning events are delegated / logged data
    owner: dict[int, tuple] = {}
    for key in rt.outputs:
        for h in key:
            owner[h] = key
    merged_delegated: dict[tuple, bool] = {}
    merged_has_data: dict[tuple, bool] = {}
    for key, win in rt.winners.items():
        m = owner.get(key[0]) if key else None
        if m is None:
            continue
        merged_delegated[m] = merged_delegated.get(m, False) or win["delegated"]
        merged_has_data[m] = merged_has_data.get(m, False) or win["has_data"]

    err_by_aot: dict[tuple, dict] = {}
    err_by_rt: dict[tuple, dict] = {}
    for err in errors:
        err_by_rt.setdefault(tuple(err["runtime_debug_handle"]), err)
        info = err.get("info")
        for h in (info.aot_handles if info is not None else [err["debug_handle"]]):
            err_by_aot.setdefault(tuple(h), err)
    unp_ref: dict[tuple, Any] = {}
    unp_rt: dict[tuple, Any] = {}
    for u in paired.unpaired:
        if u.side == "reference":
            unp_ref.setdefault(tuple(u.debug_handle), u)
        else:
            unp_rt.setdefault(tuple(u.runtime_debug_handle or u.debug_handle), u)

    out: list[dict] = []
    ref_nodes = sorted(cap.nodes.values(), key=lambda n: n.order)
    for node in ref_nodes:
        name = node.name
        if name in compared:
            continue
        common = {"module_path": node.module_path, "stack_trace": node.stack_trace}
        handle = node.handle
        if handle is None:
            out.append(_row("reference", name, node.target, None, "no_debug_handle", **common))
            continue
        if handle == (0,) and cap.graph_name == "exported_program":
            out.append(_row("reference", name, node.target, handle, "removed_by_pass", **common))
            continue
        if name in covered:
            r = covered[name]
            last = cap.last_node.get(handle)
            info = infos[r]
            rt_handle = tuple(rows[r]["runtime_debug_handle"])
            target = cap.last_node.get(info.aot_handle) if info is not None else None
            if info is not None and handle == info.aot_handle and last != name:
                out.append(_row("reference", name, node.target, handle, "shares_handle",
                                f"shares debug handle {handle[0] if len(handle) == 1 else handle} with {last}, "
                                f"whose output is compared (row {r})", row=r, **common))
            elif merged_delegated.get(rt_handle):
                out.append(_row("reference", name, node.target, handle, "delegate_no_intermediates",
                                f"inside a delegate call ({', '.join(rows[r]['runtime_ops'])}) that logged no "
                                f"intermediate output for it; the call's output is compared with {target} (row {r})",
                                row=r, **common))
            else:
                out.append(_row("reference", name, node.target, handle, "fused",
                                f"grouped with handles {rt_handle} under {', '.join(rows[r]['runtime_ops'])}; "
                                f"only {target}'s output is compared (row {r})", row=r, **common))
            continue
        err = err_by_aot.get(handle)
        if err is not None:
            out.append(_row("reference", name, node.target, handle, err["reason"], err["detail"], **common))
            continue
        m = owner.get(handle[0]) if handle else None
        if m is not None and not merged_has_data.get(m, True):
            reason = "delegate_no_intermediates" if merged_delegated.get(m) else "no_intermediate_output"
            out.append(_row("reference", name, node.target, handle, reason,
                            f"the runtime event for handles {m} logged no tensor" + (
                                " (the delegate logged no intermediates)" if reason != "no_intermediate_output"
                                else "; run with a debug buffer (debug_buffer_size) to record intermediates"),
                            **common))
            continue
        if node.multi_output and not multi_output and isinstance(cap.outputs.get(handle), list) \
                and len(cap.outputs[handle]) > 1 and m is not None:
            out.append(_row("reference", name, node.target, handle, "multi_output",
                            f"returns {len(cap.outputs[handle])} tensors; ExecuTorch's table skips such ops "
                            f"(pass multi_output=True to compare them by position)", **common))
            continue
        u = unp_ref.get(handle) or (unp_rt.get(m) if m is not None else None)
        if u is not None:
            out.append(_row("reference", name, node.target, handle, u.reason, u.detail, **common))
            continue
        out.append(_row("reference", name, node.target, handle, "no_runtime_event",
                        f"no runtime event carries handle {handle[0] if len(handle) == 1 else handle} "
                        f"(a free view or memory-planned alias, a constant, or an op the runtime never ran)",
                        **common))

    unused = rt.unused
    if include_framework_events or getattr(analysis.inspector, "runtime_intermediate_outputs", None) is not None:
        # the fast runtime path saw only events that logged outputs: list the others from the full blocks
        try:
            unused = collect_runtime_outputs(runtime_blocks(analysis.inspector, fast=False)).unused
        except Exception:  # noqa: BLE001 - explanations must not fail because of an odd event
            unused = rt.unused
    for ev in unused:
        if ev.reason == "framework_event" and not include_framework_events:
            continue
        out.append(_row("runtime", ev.name, DELEGATE_CALL if ev.name == DELEGATE_CALL else None,
                        ev.debug_handle, ev.reason, ev.detail, block=ev.block, instruction_id=ev.instruction_id))
    for key, win in rt.winners.items():
        m = owner.get(key[0]) if key else None
        if m is None or m in row_rt:
            continue
        err = err_by_rt.get(m)
        u = unp_rt.get(m)
        if err is not None:
            reason, detail = err["reason"], err["detail"]
        elif u is not None:
            reason, detail = u.reason, u.detail
        elif not win["has_data"]:
            reason, detail = "no_intermediate_output", ""
        else:
            reason, detail = "no_reference_output", (
                f"no reference node has handles {key}" if not any((h,) in cap.op_names for h in key) else "")
        out.append(_row("runtime", win["name"], None, key, reason, detail, block=win["block"],
                        instruction_id=win["instruction_id"]))
    return pd.DataFrame(out, columns=EXPLAIN_COLUMNS)
