"""Why an op or event has no row of its own in the gap table (``explain_unpaired``).

ExecuTorch drops whatever it cannot pair without a word. Here every reference node (call_function,
``getitem`` excluded) and every runtime event that is not the compared output of a row is listed
with a :class:`~.reasons.Reason` code and a sentence saying what to do about it.

The steps: index the gap-table rows, the runtime's merged handles, the comparison errors and the
pairing's leftovers (:class:`_Context`); then explain each reference node in graph order
(:func:`_explain_node`), the runtime events that were never candidates (:func:`_unused_events`)
and the winning runtime events that made no row (:func:`_unpaired_winners`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...schema import DELEGATE_CALL
from ..comparators import MSEComparator
from .reasons import EXPLAIN_COLUMNS, REASONS, Explanation, Reason
from .runtime import collect_runtime_outputs, runtime_blocks

__all__ = ["REASONS", "Reason", "Explanation", "explain", "EXPLAIN_COLUMNS"]


def _handle_text(handle: tuple) -> Any:
    return handle[0] if len(handle) == 1 else handle


@dataclass
class _Context:
    """Everything the explanations look up, indexed once."""

    cap: Any  # Capture
    rows: list[dict]
    infos: list
    multi_output: bool
    compared: dict[str, int] = field(default_factory=dict)  # node name whose output is compared -> row
    covered: dict[str, int] = field(default_factory=dict)  # node name listed in a row's aot_ops -> row
    row_rt: dict[tuple, int] = field(default_factory=dict)  # runtime handle of a row -> row
    owner: dict[int, tuple] = field(default_factory=dict)  # handle -> merged runtime key holding it
    merged_delegated: dict[tuple, bool] = field(default_factory=dict)
    merged_has_data: dict[tuple, bool] = field(default_factory=dict)
    err_by_aot: dict[tuple, dict] = field(default_factory=dict)
    #: errors by the reference handle whose output was chosen for the pair (e.g. sizes differ)
    err_by_chosen: dict[tuple, dict] = field(default_factory=dict)
    err_by_rt: dict[tuple, dict] = field(default_factory=dict)
    unp_ref: dict[tuple, Any] = field(default_factory=dict)
    unp_rt: dict[tuple, Any] = field(default_factory=dict)


def _index_rows(ctx: _Context) -> None:
    for i, (row, info) in enumerate(zip(ctx.rows, ctx.infos)):
        ctx.row_rt.setdefault(tuple(row["runtime_debug_handle"]), i)
        for name in row["aot_ops"]:
            ctx.covered.setdefault(name, i)
        if info is not None and info.aot_handle in ctx.cap.last_node:
            ctx.compared.setdefault(ctx.cap.last_node[info.aot_handle], i)


def _index_runtime(ctx: _Context, rt: Any) -> None:
    """The merged runtime key of each handle, and whether its winning events are delegated / logged data."""
    for key in rt.outputs:
        for h in key:
            ctx.owner[h] = key
    for key, win in rt.winners.items():
        m = ctx.owner.get(key[0]) if key else None
        if m is None:
            continue
        ctx.merged_delegated[m] = ctx.merged_delegated.get(m, False) or win["delegated"]
        ctx.merged_has_data[m] = ctx.merged_has_data.get(m, False) or win["has_data"]


def _index_leftovers(ctx: _Context, errors: list[dict], unpaired: list) -> None:
    """Comparison errors and pairing leftovers, by reference handle and by runtime handle."""
    for err in errors:
        ctx.err_by_rt.setdefault(tuple(err["runtime_debug_handle"]), err)
        info = err.get("info")
        for h in (info.aot_handles if info is not None else [err["debug_handle"]]):
            ctx.err_by_aot.setdefault(tuple(h), err)
        if info is not None:
            ctx.err_by_chosen.setdefault(tuple(info.aot_handle), err)
    for u in unpaired:
        if u.side == "reference":
            ctx.unp_ref.setdefault(tuple(u.debug_handle), u)
        else:
            ctx.unp_rt.setdefault(tuple(u.runtime_debug_handle or u.debug_handle), u)


def _explain_covered(ctx: _Context, node: Any, common: dict) -> Explanation:
    """A node listed in a row's ``aot_ops`` whose own output is not the one compared."""
    name, handle, cap = node.name, node.handle, ctx.cap
    r = ctx.covered[name]
    last = cap.last_node.get(handle)
    info = ctx.infos[r]
    rt_handle = tuple(ctx.rows[r]["runtime_debug_handle"])
    target = cap.last_node.get(info.aot_handle) if info is not None else None
    err = ctx.err_by_chosen.get(handle)
    if err is not None and last == name:  # this op's own output was paired but could not be compared
        return Explanation("reference", name, node.target, handle, err["reason"], err["detail"], row=None,
                           **common)
    if info is not None and handle == info.aot_handle and last != name:
        return Explanation("reference", name, node.target, handle, Reason.SHARES_HANDLE,
                           f"shares debug handle {_handle_text(handle)} with {last}, "
                           f"whose output is compared (row {r})", row=r, **common)
    ops = ", ".join(ctx.rows[r]["runtime_ops"])
    if ctx.merged_delegated.get(rt_handle):
        return Explanation("reference", name, node.target, handle, Reason.DELEGATE_NO_INTERMEDIATES,
                           f"inside a delegate call ({ops}) that logged no intermediate output for it; the "
                           f"call's output is compared with {target} (row {r})", row=r, **common)
    return Explanation("reference", name, node.target, handle, Reason.FUSED,
                       f"grouped with handles {rt_handle} under {ops}; only {target}'s output is compared "
                       f"(row {r})", row=r, **common)


def _explain_uncovered(ctx: _Context, node: Any, common: dict) -> Explanation:
    """A node with a handle that no row lists: an error, a silent event, a multi-output op, or nothing ran."""
    name, handle, cap = node.name, node.handle, ctx.cap
    err = ctx.err_by_aot.get(handle)
    if err is not None:
        return Explanation("reference", name, node.target, handle, err["reason"], err["detail"], **common)
    m = ctx.owner.get(handle[0]) if handle else None
    if m is not None and not ctx.merged_has_data.get(m, True):
        delegated = bool(ctx.merged_delegated.get(m))
        reason = Reason.DELEGATE_NO_INTERMEDIATES if delegated else Reason.NO_INTERMEDIATE_OUTPUT
        hint = (" (the delegate logged no intermediates)" if delegated
                else "; run with a debug buffer (debug_buffer_size) to record intermediates")
        return Explanation("reference", name, node.target, handle, reason,
                           f"the runtime event for handles {m} logged no tensor" + hint, **common)
    outputs = cap.outputs.get(handle)
    if node.multi_output and not ctx.multi_output and isinstance(outputs, list) and len(outputs) > 1 \
            and m is not None:
        return Explanation("reference", name, node.target, handle, Reason.MULTI_OUTPUT,
                           f"returns {len(outputs)} tensors; ExecuTorch's table skips such ops "
                           f"(pass multi_output=True to compare them by position)", **common)
    u = ctx.unp_ref.get(handle) or (ctx.unp_rt.get(m) if m is not None else None)
    if u is not None:
        return Explanation("reference", name, node.target, handle, u.reason, u.detail, **common)
    return Explanation("reference", name, node.target, handle, Reason.NO_RUNTIME_EVENT,
                       f"no runtime event carries handle {_handle_text(handle)} "
                       f"(a free view or memory-planned alias, a constant, or an op the runtime never ran)",
                       **common)


def _explain_node(ctx: _Context, node: Any) -> Explanation | None:
    """Why reference ``node`` has no row of its own (``None`` when its output is compared)."""
    if node.name in ctx.compared:
        return None
    common = {"module_path": node.module_path, "stack_trace": node.stack_trace}
    handle = node.handle
    if handle is None:
        return Explanation("reference", node.name, node.target, None, Reason.NO_DEBUG_HANDLE, **common)
    if handle == (0,) and ctx.cap.graph_name == "exported_program":
        return Explanation("reference", node.name, node.target, handle, Reason.REMOVED_BY_PASS, **common)
    if node.name in ctx.covered:
        return _explain_covered(ctx, node, common)
    return _explain_uncovered(ctx, node, common)


def _unused_events(analysis: Any, include_framework_events: bool) -> list[Explanation]:
    """Runtime events that were never candidates for a row (framework events, no handle, superseded …)."""
    from ..protocols import is_columnar

    rt = analysis.runtime
    unused = rt.unused
    if include_framework_events or is_columnar(analysis.inspector):
        # the fast runtime path saw only events that logged outputs: list the others from the full blocks
        try:
            unused = collect_runtime_outputs(runtime_blocks(analysis.inspector, fast=False)).unused
        except Exception:  # noqa: BLE001 - explanations must not fail because of an odd event
            unused = rt.unused
    return [Explanation("runtime", ev.name, DELEGATE_CALL if ev.name == DELEGATE_CALL else None,
                        ev.debug_handle, ev.reason, ev.detail, block=ev.block, instruction_id=ev.instruction_id)
            for ev in unused if include_framework_events or ev.reason != Reason.FRAMEWORK_EVENT]


def _unpaired_winners(ctx: _Context, rt: Any) -> list[Explanation]:
    """Runtime events chosen for their handles that still made no row."""
    out = []
    for key, win in rt.winners.items():
        m = ctx.owner.get(key[0]) if key else None
        if m is None or m in ctx.row_rt:
            continue
        err = ctx.err_by_rt.get(m)
        u = ctx.unp_rt.get(m)
        if err is not None:
            reason, detail = err["reason"], err["detail"]
        elif u is not None:
            reason, detail = u.reason, u.detail
        elif not win["has_data"]:
            reason, detail = Reason.NO_INTERMEDIATE_OUTPUT, ""
        else:
            reason, detail = Reason.NO_REFERENCE_OUTPUT, (
                f"no reference node has handles {key}" if not any((h,) in ctx.cap.op_names for h in key) else "")
        out.append(Explanation("runtime", win["name"], None, key, reason, detail, block=win["block"],
                               instruction_id=win["instruction_id"]))
    return out


def explain(analysis: Any, include_framework_events: bool = False, multi_output: bool = False):
    """Build the explanation DataFrame for a :class:`~etlens.analysis.numerics.NumericalAnalysis`."""
    import pandas as pd

    rows, infos, errors = analysis._rows(MSEComparator(), multi_output)
    ctx = _Context(analysis.capture, rows, infos, multi_output)
    _index_rows(ctx)
    _index_runtime(ctx, analysis.runtime)
    _index_leftovers(ctx, errors, analysis.paired.unpaired)

    found: list[Explanation] = []
    for node in sorted(ctx.cap.nodes.values(), key=lambda n: n.order):
        why = _explain_node(ctx, node)
        if why is not None:
            found.append(why)
    found += _unused_events(analysis, include_framework_events)
    found += _unpaired_winners(ctx, analysis.runtime)
    return pd.DataFrame([e.to_row() for e in found], columns=EXPLAIN_COLUMNS)
