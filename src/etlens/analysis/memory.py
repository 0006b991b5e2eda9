"""Where a program's planned memory goes: arenas, tensor lifetimes, the peak and the waste.

ExecuTorch's memory planner gives every non-constant tensor an ``allocation_info`` (memory id
and byte offset) inside one of the plan's *arenas*; ``ExecutionPlan.non_const_buffer_sizes[id]``
is the size of arena ``id`` (id 0 is reserved and always 0). Two tensors may share bytes only
when they are never live at the same time, or when one is a view of the other.

:func:`analyze_memory` reads that from a parsed ``.pte`` (no torch, no ExecuTorch) and computes,
per method and per arena:

* every planned tensor: value index, arena, offset, size, and the first and last instruction that
  touches it. Instructions are numbered across the chains in order; every value id an instruction
  names counts (kernel and delegate arguments, the items of tensor lists, move sources and
  destinations, jump conditions, frees). Method inputs are live from instruction 0 and outputs
  until the last one; a backward jump (a loop) stretches every tensor live inside the loop over
  the whole loop;
* the live bytes at every instruction (the union of live byte ranges, so aliases count once), the
  peak and where it is, the tensors live at the peak, and the waste (arena size minus peak);
* overlaps: two tensors live at the same instruction whose byte ranges intersect. When they start
  at the same offset and one is produced from the other by a view-like instruction (``et_view``,
  ``view``/``alias``/``reshape`` kernels, a move) the overlap is an *alias* (intended: the runtime
  reuses the base's memory). ExecuTorch's emitter also *elides* a static, memory-planned view: the view
  gets a value of its own with its base's bytes and no instruction writes it. So two tensors with the
  same offset and size of which one is written by nothing (no kernel's last argument, no delegate
  argument, no move destination, not a method input) are an alias too. Otherwise the overlap is a
  *conflict*, i.e. a planner bug that would corrupt data at run time.

With an ETRecord, :func:`attach_etrecord` names the ATen node and module that produce each tensor
(the instruction's debug handles, looked up in the ETRecord's graph).

Example::

    from etlens.readers.pte import read
    from etlens.analysis.memory import analyze_memory
    rep = analyze_memory(read("model.pte"))
    m = rep.methods[0]
    m.arenas[0].size, m.arenas[0].peak_live, m.arenas[0].peak_at
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..schema import SCALAR_TYPES

__all__ = ["PlannedTensor", "Arena", "Overlap", "MethodMemory", "MemoryReport", "analyze_memory",
           "attach_etrecord", "tensor_nbytes", "instruction_uses"]

#: operators whose output shares its input's memory (``*_copy`` variants copy, so they are not here)
_VIEW_OPS = frozenset({"et_view", "view", "alias", "reshape", "_reshape_alias", "_unsafe_view", "squeeze",
                       "unsqueeze", "expand", "permute", "transpose", "slice", "select", "as_strided", "t",
                       "flatten", "detach", "narrow", "unfold", "split", "chunk", "unbind"})


def tensor_nbytes(scalar_type: int, sizes: tuple[int, ...]) -> int:
    """Bytes of a dense tensor (sizes are upper bounds for dynamic shapes, as the planner uses)."""
    info = SCALAR_TYPES.get(scalar_type)
    n = info.itemsize if info is not None else 1
    for s in sizes:
        n *= max(int(s), 0)
    return n


@dataclass
class PlannedTensor:
    """One tensor the planner placed: ``value`` index, ``arena`` (memory id), ``offset``/``size`` in bytes,
    ``first``/``last`` instruction that uses it (``-1`` when no instruction names it)."""

    value: int
    arena: int
    offset: int
    size: int
    first: int
    last: int
    dtype: str = ""
    shape: tuple[int, ...] = ()
    producer: str = ""          # the instruction's operator or delegate, e.g. "aten::add.out"
    node: str | None = None     # the ATen node (ETRecord)
    module: str | None = None   # the nn.Module path (ETRecord)
    role: str = ""              # "input", "output" or ""

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "arena": self.arena, "offset": self.offset, "size": self.size,
                "first": self.first, "last": self.last, "dtype": self.dtype, "shape": list(self.shape),
                "op": self.producer, "node": self.node, "module": self.module, "role": self.role}


@dataclass
class Arena:
    """One memory arena of a method: planned ``size`` and what is live over time."""

    id: int
    size: int
    used_extent: int = 0            # max(offset + size) over its tensors
    peak_live: int = 0
    peak_at: int = -1               # instruction index of the peak
    live_at_peak: list[int] = field(default_factory=list)  # value indices
    live_bytes: list[int] = field(default_factory=list)    # per instruction

    @property
    def waste(self) -> int:
        return max(0, self.size - self.peak_live)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "size": self.size, "peak_live": self.peak_live, "peak_at": self.peak_at,
                "waste": self.waste, "used_extent": self.used_extent, "live_at_peak": self.live_at_peak,
                "live_bytes": self.live_bytes}


@dataclass
class Overlap:
    """Two tensors live at the same time whose bytes intersect in one arena."""

    a: int
    b: int
    arena: int
    instructions: tuple[int, int]   # the span where both are live
    bytes: int                       # size of the shared byte range
    kind: str                        # "alias" or "conflict"
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "arena": self.arena, "instructions": list(self.instructions),
                "bytes": self.bytes, "kind": self.kind, "reason": self.reason}


@dataclass
class MethodMemory:
    name: str
    instructions: list[str]          # a short label per instruction ("aten::add.out", "delegate XnnpackBackend")
    arenas: list[Arena]
    tensors: list[PlannedTensor]
    overlaps: list[Overlap]
    non_const_buffer_sizes: tuple[int, ...] = ()
    #: the program's ``get_max_seq_len`` (an LLM's context length), when it has that method
    max_seq_len: int | None = None

    @property
    def state(self) -> list[PlannedTensor]:
        """Tensors that hold state between runs (mutable buffers: an LLM's KV cache), live all method long."""
        return [t for t in self.tensors if t.role == "state"]

    def kv_cache(self) -> dict[str, Any]:
        """``{tensors, bytes, max_seq_len, bytes_per_token, names}`` of :attr:`state`."""
        from .kv_cache import kv_summary

        return kv_summary(self.state, self.max_seq_len)

    def to_json(self) -> dict[str, Any]:
        kv = self.kv_cache()
        kv["bytes_per_token"] = None if kv["bytes_per_token"] != kv["bytes_per_token"] else kv["bytes_per_token"]
        return {"name": self.name, "non_const_buffer_sizes": list(self.non_const_buffer_sizes), "state": kv,
                "instruction_count": len(self.instructions), "instructions": self.instructions,
                "arenas": [a.to_json() for a in self.arenas], "tensors": [t.to_json() for t in self.tensors],
                "overlaps": [o.to_json() for o in self.overlaps]}


@dataclass
class MemoryReport:
    path: str
    methods: list[MethodMemory]

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "methods": [m.to_json() for m in self.methods]}

    def __repr__(self) -> str:
        """One line (a notebook shows the memory timeline, see :mod:`etlens.views.notebook`)."""
        arenas = [a for m in self.methods for a in m.arenas]
        peak = max((a.peak_live for a in arenas), default=0)
        return (f"<etlens MemoryReport {os.path.basename(self.path)!r}: {len(self.methods)} method(s), "
                f"{len(arenas)} arena(s), {sum(a.size for a in arenas):,} B planned, peak live {peak:,} B>")

    def method(self, name: str) -> MethodMemory:
        for m in self.methods:
            if m.name == name:
                return m
        raise KeyError(name)


def _label(plan: Any, ins: Any) -> str:
    if ins.kind == "KernelCall" and ins.op_index is not None and ins.op_index < len(plan.operators):
        return str(plan.operators[ins.op_index].qualified)
    if ins.kind == "DelegateCall" and ins.delegate_index is not None and ins.delegate_index < len(plan.delegates):
        return f"delegate {plan.delegates[ins.delegate_index].id}"
    return str(ins.kind)


def instruction_uses(plan: Any, ins: Any) -> list[int]:
    """Every value id instruction ``ins`` names, with tensor lists expanded to their items."""
    if ins.kind in ("KernelCall", "DelegateCall"):
        ids = list(ins.args)
    elif ins.kind == "MoveCall":
        ids = [ins.move_from, ins.move_to]
    elif ins.kind == "JumpFalseCall":
        ids = [ins.cond_value_index]
    elif ins.kind == "FreeCall":
        ids = [ins.value_index]
    else:
        ids = []
    return _expand(plan, ids)


def _expand(plan: Any, ids: list[Any]) -> list[int]:
    """The value ids in ``ids`` that exist, each tensor list followed by its items."""
    out: list[int] = []
    n = len(plan.values)
    for v in ids:
        if v is None or not 0 <= v < n:
            continue
        out.append(v)
        val = plan.values[v]
        if val.kind in ("tensor_list", "optional_tensor_list") and isinstance(val.val, tuple):
            out.extend(i for i in val.val if isinstance(i, int) and 0 <= i < n)
    return out


def _lifetimes(plan: Any, instrs: list[Any], starts: list[int]) -> dict[int, list[int]]:
    """``{value: [first, last]}`` over the flat instruction list, loops and I/O included."""
    span: dict[int, list[int]] = {}
    for i, ins in enumerate(instrs):
        for v in instruction_uses(plan, ins):
            s = span.setdefault(v, [i, i])
            s[0] = min(s[0], i)
            s[1] = max(s[1], i)
    last = max(len(instrs) - 1, 0)
    for v in plan.inputs:
        span.setdefault(v, [0, 0])[0] = 0
    for v in plan.outputs:
        span.setdefault(v, [last, last])[1] = last
    # backward jumps: JumpFalseCall.destination_instruction is an index inside the jump's own chain
    loops = []
    for i, ins in enumerate(instrs):
        if ins.kind == "JumpFalseCall" and ins.destination_instruction is not None:
            chain_start = max(s for s in starts if s <= i)
            dest = chain_start + ins.destination_instruction
            if dest <= i:
                loops.append((dest, i))
    changed = bool(loops)
    while changed:
        changed = False
        for lo, hi in loops:
            for s in span.values():
                if s[0] <= hi and s[1] >= lo and (s[0] > lo or s[1] < hi):
                    s[0], s[1] = min(s[0], lo), max(s[1], hi)
                    changed = True
    return span


def _union_bytes(ranges: list[tuple[int, int]]) -> int:
    total, end = 0, -1
    for lo, hi in sorted(ranges):
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total


def _is_view_like(label: str) -> bool:
    """A view operator (``executorch_prim::et_view``, ``aten::view`` …) or a move."""
    low = label.lower()
    return low == "movecall" or low.split("::")[-1].split(".")[0] in _VIEW_OPS


def _written(plan: Any, instrs: list[Any]) -> set[int]:
    """Values something may write: the method inputs (the caller), every kernel's last argument (ExecuTorch's
    out-variant kernels take their output last), every delegate argument (inputs and outputs are not told
    apart there), move destinations. A tensor outside this set is only ever read."""
    out = set(plan.inputs)
    for ins in instrs:
        if ins.kind == "KernelCall" and ins.args:
            out.update(_expand(plan, list(ins.args[-1:])))
        elif ins.kind == "DelegateCall":
            out.update(instruction_uses(plan, ins))
        elif ins.kind == "MoveCall" and ins.move_to is not None:
            out.add(ins.move_to)
    return out


def _classify(a: PlannedTensor, b: PlannedTensor, plan: Any, instrs: list[Any], labels: list[str],
              written: set[int]) -> tuple[str, str]:
    """Alias (a view instruction ties the two at the same offset) or conflict (a planner bug)."""
    if a.offset == b.offset:
        for i in range(max(a.first, b.first), min(a.last, b.last) + 1):
            uses = instruction_uses(plan, instrs[i])
            if a.value in uses and b.value in uses and _is_view_like(labels[i]):
                return "alias", (f"instruction {i} ({labels[i]}) makes one a view of the other: both start at byte "
                                 f"{a.offset}, the runtime reuses the base's memory")
        if labels and any(_is_view_like(labels[i]) for i in (a.first, b.first) if 0 <= i < len(labels)):
            return "alias", f"same start offset {a.offset} and produced by a view-like instruction"
        if a.size == b.size:
            for view, base in ((a, b), (b, a)):
                if view.value not in written:
                    return "alias", (f"value {view.value} is written by no instruction: a static view ExecuTorch "
                                     f"emitted without one, on the bytes of value {base.value}")
    return "conflict", ("live at the same time with intersecting bytes and no view between them: a memory-planning "
                        "bug (one tensor overwrites the other at run time)")


def _method_memory(program: Any, plan: Any) -> MethodMemory:
    instrs, starts = [], []
    for chain in plan.chains:
        starts.append(len(instrs))
        instrs.extend(chain.instructions)
    if not starts:
        starts = [0]
    labels = [_label(plan, ins) for ins in instrs]
    span = _lifetimes(plan, instrs, starts)
    producer: dict[int, str] = {}
    for i, ins in enumerate(instrs):
        for v in instruction_uses(plan, ins):
            producer.setdefault(v, labels[i])
    ins_set, out_set = set(plan.inputs), set(plan.outputs)
    tensors: list[PlannedTensor] = []
    for vi, val in enumerate(plan.values):
        if val.kind != "tensor" or val.val is None or val.val.allocation is None:
            continue
        t = val.val
        first, last = span.get(vi, (-1, -1))
        tensors.append(PlannedTensor(
            value=vi, arena=t.allocation.memory_id, offset=t.allocation.memory_offset,
            size=tensor_nbytes(t.scalar_type, t.sizes), first=first, last=last, dtype=t.dtype,
            shape=tuple(t.sizes), producer=producer.get(vi, ""),
            role="input" if vi in ins_set else "output" if vi in out_set else ""))
    sizes = tuple(plan.non_const_buffer_sizes)
    n = len(instrs)
    from .kv_cache import state_values

    state = set(state_values(plan))
    for t in tensors:  # state (a KV cache) keeps its bytes between runs: live over the whole method
        if t.value in state:
            t.role, t.first, t.last = "state", 0, max(n - 1, 0)
    arenas = []
    ids = sorted({i for i in range(1, len(sizes))} | {t.arena for t in tensors})
    for aid in ids:
        mine = [t for t in tensors if t.arena == aid]
        arena = Arena(id=aid, size=sizes[aid] if aid < len(sizes) else 0,
                      used_extent=max((t.offset + t.size for t in mine), default=0))
        starts_at: dict[int, list[PlannedTensor]] = {}
        for t in mine:
            if t.first >= 0:
                starts_at.setdefault(t.first, []).append(t)
        active: list[PlannedTensor] = []
        live = []
        for i in range(n):  # sweep: tensors join at ``first`` and leave after ``last``
            active = [t for t in active if t.last >= i] + starts_at.get(i, [])
            live.append(_union_bytes([(t.offset, t.offset + t.size) for t in active]))
        arena.live_bytes = live
        if live:
            peak = max(live)
            arena.peak_live, arena.peak_at = peak, live.index(peak)
            arena.live_at_peak = [t.value for t in mine if t.first <= arena.peak_at <= t.last]
        arenas.append(arena)
    return MethodMemory(name=plan.name, instructions=labels, arenas=arenas, tensors=tensors,
                        overlaps=_overlaps(tensors, plan, instrs, labels), non_const_buffer_sizes=sizes,
                        max_seq_len=program_seq_len(program))


def program_seq_len(program: Any) -> int | None:
    from .kv_cache import max_seq_len

    return max_seq_len(program)


def _overlaps(tensors: list[PlannedTensor], plan: Any, instrs: list[Any], labels: list[str]) -> list[Overlap]:
    """Pairs live at the same instruction with intersecting bytes, by a sweep over time: each tensor is
    checked, when it starts, against the tensors of its arena still live then (two lifetimes intersect
    exactly when one starts while the other is live)."""
    out = []
    written = _written(plan, instrs)
    by_arena: dict[int, list[PlannedTensor]] = {}
    for t in tensors:
        if t.first >= 0 and t.size > 0:
            by_arena.setdefault(t.arena, []).append(t)
    for aid, ts in by_arena.items():
        ts.sort(key=lambda t: (t.first, t.offset, t.value))
        active: list[PlannedTensor] = []
        for b in ts:
            active = [a for a in active if a.last >= b.first]
            for a in active:
                if a.offset < b.offset + b.size and b.offset < a.offset + a.size:
                    lo, hi = b.first, min(a.last, b.last)
                    first, second = (a, b) if (a.offset, a.value) <= (b.offset, b.value) else (b, a)
                    shared = min(a.offset + a.size, b.offset + b.size) - max(a.offset, b.offset)
                    kind, reason = _classify(first, second, plan, instrs, labels, written)
                    out.append(Overlap(first.value, second.value, aid, (lo, hi), shared, kind, reason))
            active.append(b)
    return out


def analyze_memory(artifact: Any) -> MemoryReport:
    """The :class:`MemoryReport` of a parsed ``.pte`` (:class:`~etlens.readers.pte.PteArtifact`)."""
    program = artifact.program
    return MemoryReport(path=artifact.path, methods=[_method_memory(program, p) for p in program.execution_plan])


def attach_etrecord(report: MemoryReport, etrecord: Any) -> int:
    """Name each tensor's producing ATen node and module from an ETRecord; return how many were named.

    The ETRecord's ``debug_handle_map`` gives each instruction's debug handles; the node of the
    ETRecord's graph carrying one of them (the edge program, else the exported one) is the node.
    """
    named = 0
    for m in report.methods:
        named += _name_state(m, etrecord)
        handles = etrecord.debug_handle_map.get(m.name, {})
        try:
            graph = etrecord.graph(m.name)
        except Exception:  # noqa: BLE001 - an ETRecord without a readable graph still names nothing
            continue
        by_handle: dict[int, list[Any]] = {}
        for node in graph.nodes:
            for h in node.debug_handles:
                by_handle.setdefault(h, []).append(node)
        for t in m.tensors:
            if t.first < 0 or t.role in ("input", "state"):
                continue
            label = m.instructions[t.first] if t.first < len(m.instructions) else ""
            base = label.split("::")[-1].split(".")[0]
            nodes = [n for h in handles.get(t.first, []) for n in by_handle.get(h, [])]
            if not nodes:
                continue
            node = next((n for n in nodes if base and base in (n.target or "")), nodes[-1])
            t.node = node.name
            t.module = node.module_stack[-1][0] if node.module_stack else None
            named += 1
    return named


def _name_state(m: MethodMemory, etrecord: Any) -> int:
    """Name the state tensors after the mutated buffers of the ETRecord's edge program (placeholder order)."""
    from ..errors import EtlensError
    from .kv_cache import mutated_buffer_names

    state = m.state
    if not state or not hasattr(etrecord, "program_json"):
        return 0
    try:
        names = mutated_buffer_names(etrecord.program_json(f"edge_dialect_exported_program/{m.name}"))
    except EtlensError:
        return 0
    if len(names) != len(state):
        return 0  # cannot pair them safely
    for t, name in zip(sorted(state, key=lambda t: t.value), names):
        t.node = name
        t.module = name.rsplit(".", 1)[0] if "." in name else None
    return len(state)
