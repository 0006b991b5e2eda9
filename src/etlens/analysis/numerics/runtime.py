"""Runtime side: which intermediate output each debug-handle set has in the ETDump.

Reads the Inspector's events through the ExecuTorch-compatible ``Event`` fields (``name``,
``debug_handles``, ``op_types``, ``debug_data``, ``_instruction_id``, ``num_outputs``,
``is_delegated_op``, ``delegate_backend_name``), so it works on ``etlens.Inspector`` and on
``executorch.devtools.Inspector`` alike. The selection is ExecuTorch's:

* events named ``OPERATOR_CALL`` (a wrapper around the kernel event) and events without op types
  (framework events, handles that resolve to no graph node) are not outputs;
* a ``DELEGATE_CALL`` is dropped when the same backend logged per-operator intermediates for any of
  its handles (the fine-grained events are compared instead);
* events with the same handle tuple: the one with the highest instruction id wins (the last
  instruction of a decomposition, e.g. ``addmm`` after ``permute_copy``); ties keep the first block;
* overlapping handle tuples are then merged (:func:`~etlens.analysis.numerics.match.merge_runtime_handles`).

``debug_data`` is read only for the winners, so lazily decoded tensors of superseded events are
never materialised. Every event that is not used gets a reason, for ``explain_unpaired``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ...errors import EtlensError
from ..protocols import InspectorLike
from .match import merge_runtime_handles
from .reasons import Reason
from ...schema import DELEGATE_CALL, FRAMEWORK_EVENT_NAMES, OPERATOR_CALL

__all__ = ["RuntimeOutputs", "RuntimeEvent", "collect_runtime_outputs", "runtime_blocks", "FRAMEWORK_EVENTS"]

#: events the runtime logs around the model, never tied to an operator
FRAMEWORK_EVENTS = set(FRAMEWORK_EVENT_NAMES)
_EXCLUDED = {OPERATOR_CALL}


@dataclass
class RuntimeEvent:
    """One runtime event that is not an output of the comparison, and why."""

    block: str
    name: str
    instruction_id: Any
    debug_handle: tuple | None
    reason: Reason
    detail: str = ""
    delegated: bool = False


@dataclass
class RuntimeOutputs:
    """The runtime half of the comparison."""

    outputs: dict = field(default_factory=dict)  # merged handle tuple -> (debug_data list, num_outputs)
    op_names: dict = field(default_factory=dict)  # unmerged handle tuple -> [event name]
    unused: list[RuntimeEvent] = field(default_factory=list)
    #: unmerged handle tuple -> info about the winning event (name, block, delegated, backend)
    winners: dict = field(default_factory=dict)
    n_debug_events: int = 0  # events that logged any intermediate output


def _norm(handles: Any) -> tuple | None:
    if handles is None:
        return None
    if isinstance(handles, int):
        return (handles,)
    return tuple(handles)


class _Ev:
    """An ``Event``-shaped view of an ``etlens.Inspector`` ``RuntimeOutput`` (no Event objects built)."""

    __slots__ = ("name", "debug_handles", "op_types", "debug_data", "_instruction_id", "num_outputs",
                 "is_delegated_op", "delegate_backend_name")

    def __init__(self, ro: Any) -> None:
        self.name = ro.name
        self.debug_handles = ro.debug_handles if ro.debug_handles else None
        self.op_types = ro.op_types
        self.debug_data = ro.outputs
        self._instruction_id = ro.instruction_id
        self.num_outputs = ro.num_outputs
        self.is_delegated_op = ro.is_delegated_op
        self.delegate_backend_name = ro.delegate_backend_name


@dataclass
class _Block:
    name: str
    events: list


def runtime_blocks(inspector: InspectorLike, fast: bool = True, run: int = 0, method: str | None = None) -> list:
    """The inspector's event blocks, or with ``fast`` and an ``etlens.Inspector``, light blocks built
    from its columnar ``runtime_intermediate_outputs()`` holding only events that logged outputs
    (the same selection, without building an ``Event`` for each of the dump's events).

    ``run``: which run of each block gives the values (0: the first, as ExecuTorch; an LLM's
    prefill); ``method``: only that method's blocks (an etlens Inspector that knows it; the
    metadata methods of an LLM program log their returned constants, which are no operator's).
    """
    from ..protocols import is_columnar

    if is_columnar(inspector):
        methods = set(getattr(inspector, "block_methods", ()) or ())
        method = method if method in methods else None
        if run or method is not None:
            fast = True
    elif run:
        raise EtlensError("comparing a run other than the first needs an etlens Inspector")
    if fast and is_columnar(inspector):
        blocks: dict[str, _Block] = {}
        for ro in inspector.runtime_intermediate_outputs(run, method):
            blocks.setdefault(ro.block, _Block(ro.block, [])).events.append(_Ev(ro))
        return list(blocks.values())
    return list(inspector.event_blocks)


def collect_runtime_outputs(event_blocks: Any) -> RuntimeOutputs:
    """Select and merge the runtime intermediate outputs of ``event_blocks`` (see module docstring)."""
    blocks = list(event_blocks)
    inner_by_backend: dict[Any, set] = defaultdict(set)
    for block in blocks:
        for ev in block.events:
            if ev.is_delegated_op and ev.op_types and ev.debug_handles is not None and ev.debug_data:
                inner_by_backend[getattr(ev, "delegate_backend_name", None)].update(_norm(ev.debug_handles))

    out = RuntimeOutputs()
    best: dict[tuple, tuple] = {}  # handle -> (instruction id, event, block name)
    superseded: list[RuntimeEvent] = []
    for block in blocks:
        bname = getattr(block, "name", "")
        for ev in block.events:
            name = ev.name
            handle = _norm(ev.debug_handles)
            delegated = bool(ev.is_delegated_op)

            def unused(reason: Reason, detail: str = "", bname=bname, name=name, ev=ev, handle=handle,
                       delegated=delegated) -> None:
                out.unused.append(RuntimeEvent(bname, name, ev._instruction_id, handle, reason, detail, delegated))

            if name in _EXCLUDED:
                continue  # a wrapper of the kernel event right before it: not listed separately
            if not ev.op_types:
                if name in FRAMEWORK_EVENTS:
                    unused(Reason.FRAMEWORK_EVENT, "runtime bookkeeping, not an operator")
                elif handle is None and delegated:
                    unused(Reason.NO_DEBUG_HANDLE, "a delegate-internal event whose delegate debug id has no entry "
                                              "in the ETRecord's delegate map, so no op can be tied to it")
                elif handle is None:
                    unused(Reason.NO_DEBUG_HANDLE, "the event has no debug handle (its instruction id is not in the "
                                              "ETRecord's debug handle map)")
                else:
                    unused(Reason.NO_GRAPH_NODE, f"handles {handle} match no node of the ETRecord graph")
                continue
            if name == DELEGATE_CALL:
                inner = inner_by_backend.get(getattr(ev, "delegate_backend_name", None))
                if inner and not inner.isdisjoint(handle):
                    unused(Reason.COVERED_BY_INNER_EVENTS, "the backend logged per-operator intermediates inside "
                                                      "this delegate call; those are compared instead")
                    continue
            prev = best.get(handle)
            iid = ev._instruction_id if ev._instruction_id is not None else -1
            if prev is None or iid > prev[0]:
                if prev is not None:
                    _, pev, pblock = prev
                    superseded.append(RuntimeEvent(pblock, pev.name, pev._instruction_id, handle, Reason.SUPERSEDED, "",
                                                   bool(pev.is_delegated_op)))
                best[handle] = (iid, ev, bname)
                out.op_names[handle] = [name]
            else:
                superseded.append(RuntimeEvent(bname, name, ev._instruction_id, handle, Reason.SUPERSEDED, "",
                                               delegated))

    for ev in superseded:
        iid, win, _ = best[ev.debug_handle]
        ev.detail = (f"instruction {iid} ({win.name}) has the same handles and runs later; its output is compared"
                     if iid != ev.instruction_id else
                     "the same instruction in an earlier block is compared")
        out.unused.append(ev)

    _decode_together([ev.debug_data for _, ev, _ in best.values()])
    staged: dict[tuple, tuple] = {}
    for handle, (iid, ev, bname) in best.items():
        data = ev.debug_data
        if data:
            out.n_debug_events += 1
        staged[handle] = (iid, data, getattr(ev, "num_outputs", 1) or 1)
        out.winners[handle] = {"name": ev.name, "block": bname, "instruction_id": iid,
                               "delegated": bool(ev.is_delegated_op) or ev.name == DELEGATE_CALL,
                               "backend": getattr(ev, "delegate_backend_name", None),
                               "has_data": bool(data)}
    merged = merge_runtime_handles(staged)
    out.outputs = {k: (v[1], v[2]) for k, v in merged.items()}
    return out


def _decode_together(lists: list) -> None:
    """Decode the winners' lazily decoded outputs in batches (an etlens ``LazyList`` type offers
    ``load_all``: one vectorised decode per run instead of one per event); plain lists are left alone."""
    kinds: dict[type, list] = {}
    for x in lists:
        if getattr(type(x), "load_all", None) is not None:
            kinds.setdefault(type(x), []).append(x)
    for kind, members in kinds.items():
        kind.load_all(members)
