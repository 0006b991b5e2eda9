"""Where the bytes of a ``.pte`` go: a breakdown whose leaves add up exactly to the file size.

A ``.pte`` is a FlatBuffer (the *program*: methods, values, instructions, operator tables …)
followed by *segments* (constant tensor data, delegate payloads, named data) at
``segment_base_offset``, each aligned, with padding between them. :func:`analyze_size` assigns every
byte of the file to one leaf :class:`Part`:

* ``header``: the FlatBuffer root offset and identifier (8 bytes) and the ``eh00`` extended header;
* ``program``: the program FlatBuffer, by table (``plan forward: values``, ``plan forward: chains``,
  ``operators``, ``delegates`` …; :func:`etlens.readers.layout.flatbuffer_layout` walks every object);
* ``constant``: one part per constant tensor of the constant segment (or inline constant buffer),
  named by the tensor's fully qualified name, else by the operator and module that read it
  (from the ETRecord when given);
* ``delegate``: each delegate payload by backend; a backend whose ``memory`` hook has ``payload_parts``
  splits its payload further (XNNPACK: header, XNNGraph FlatBuffer, constants per entry named by the
  node that reads them; Ethos-U: command stream and weights);
* ``named_data``, ``mutable_data``: segments referenced by key or by mutable-data tables;
* ``padding``: alignment between objects and segments (and inside buffers past a tensor's bytes).

Leaves are disjoint and cover the file, so ``sum(p.bytes for p in parts) == total_bytes`` by
construction; ``group`` says which branch of the treemap a leaf belongs to.

Example::

    from etlens.readers.pte import read_pte_bytes
    from etlens.analysis.size import analyze_size
    rep = analyze_size(open("model.pte", "rb").read(), "model.pte")
    rep.total_bytes == sum(p.bytes for p in rep.parts)       # True
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..readers.layout import flatbuffer_layout
from ..readers.pte import read_pte_bytes
from ..schema import program_fbs
from .memory import tensor_nbytes

__all__ = ["Part", "SizeReport", "analyze_size", "size_of_file"]


@dataclass
class Part:
    """One leaf: ``name``, ``bytes``, ``kind`` (header/program/constant/delegate/…) and ``group``
    (the branch it hangs from in the treemap), plus optional ``detail``."""

    name: str
    bytes: int
    kind: str
    group: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "bytes": self.bytes, "kind": self.kind, "group": self.group}
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass
class SizeReport:
    path: str
    total_bytes: int
    parts: list[Part]

    def by_kind(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for p in self.parts:
            out[p.kind] += p.bytes
        return dict(out)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "total_bytes": self.total_bytes, "by_kind": self.by_kind(),
                "parts": [p.to_json() for p in self.parts]}

    def __repr__(self) -> str:
        """One line (a notebook shows the treemap, see :mod:`etlens.views.notebook`)."""
        kinds = sorted(self.by_kind().items(), key=lambda kv: -kv[1])[:3]
        top = ", ".join(f"{k} {v:,} B" for k, v in kinds)
        return (f"<etlens SizeReport {self.path.replace(chr(92), '/').rsplit('/', 1)[-1]!r}: "
                f"{self.total_bytes:,} B in {len(self.parts)} parts ({top})>")


def _user_labels(program: Any, etrecord: Any = None) -> dict[int, str]:
    """``{data_buffer_idx: "aten::addmm.out (fc1)"}``: who reads each constant, for naming it."""
    out: dict[int, str] = {}
    for plan in program.execution_plan:
        handles = etrecord.debug_handle_map.get(plan.name, {}) if etrecord is not None else {}
        modules: dict[int, str] = {}
        if handles:
            try:
                g = etrecord.graph(plan.name)
                for node in g.nodes:
                    for h in node.debug_handles:
                        if node.module_stack:
                            modules.setdefault(h, node.module_stack[-1][0])
            except Exception:  # noqa: BLE001 - names are a bonus; a broken ETRecord names nothing
                modules = {}
        for i, ins in enumerate(plan.instructions()):
            if ins.kind not in ("KernelCall", "DelegateCall"):
                continue
            if ins.kind == "KernelCall" and ins.op_index is not None and ins.op_index < len(plan.operators):
                op = plan.operators[ins.op_index].qualified
            else:
                op = f"delegate {plan.delegates[ins.delegate_index].id}" \
                    if ins.delegate_index is not None and ins.delegate_index < len(plan.delegates) else ins.kind
            mod = next((modules[h] for h in handles.get(i, []) if h in modules), "")
            for v in ins.args:
                if 0 <= v < len(plan.values) and plan.values[v].kind == "tensor":
                    t = plan.values[v].val
                    if t is not None and t.data_buffer_idx > 0 and t.data_buffer_idx not in out:
                        out[t.data_buffer_idx] = f"{op}" + (f" ({mod})" if mod else "")
    return out


def _constant_tensors(program: Any) -> dict[int, Any]:
    out: dict[int, Any] = {}
    for plan in program.execution_plan:
        for v in plan.values:
            if v.kind == "tensor" and v.val is not None and v.val.data_buffer_idx > 0:
                out.setdefault(v.val.data_buffer_idx, v.val)
    return out


def _const_name(idx: int, t: Any, users: dict[int, str]) -> tuple[str, int]:
    if t is None:
        return f"constant[{idx}]", 0
    shape = "x".join(str(s) for s in t.sizes)
    who = t.fully_qualified_name or users.get(idx, "")
    return f"constant[{idx}] {t.dtype}[{shape}]" + (f" {who}" if who else ""), tensor_nbytes(t.scalar_type, t.sizes)


class _Spans:
    """Positional spans of the file; gaps become padding and overlaps are clipped (first wins).

    A *fill* span only takes the bytes no ordinary span claims (the rest of a delegate payload
    after its header, graph and constants are named)."""

    def __init__(self) -> None:
        self.items: list[tuple[int, int, Part]] = []
        self.fills: list[tuple[int, int, Part]] = []

    def add(self, lo: int, n: int, part: Part, fill: bool = False) -> None:
        if n > 0:
            (self.fills if fill else self.items).append((lo, lo + n, part))

    def _gap(self, lo: int, hi: int, pad_group: str, out: list[Part]) -> None:
        for flo, fhi, part in sorted(self.fills, key=lambda s: s[0]):
            a, b = max(lo, flo), min(hi, fhi)
            if b <= a:
                continue
            if a > lo:
                out.append(Part("alignment padding", a - lo, "padding", pad_group))
            part.bytes += b - a
            if part not in out:
                out.append(part)
            lo = b
        if hi > lo:
            out.append(Part("alignment padding", hi - lo, "padding", pad_group))

    def leaves(self, start: int, end: int, pad_group: str) -> list[Part]:
        out: list[Part] = []
        cursor = start
        for lo, hi, part in sorted(self.items, key=lambda s: (s[0], -s[1])):
            lo, hi = max(lo, cursor), min(hi, end)
            if hi <= lo:
                continue
            if lo > cursor:
                self._gap(cursor, lo, pad_group, out)
            part.bytes = hi - lo
            out.append(part)
            cursor = hi
        if end > cursor:
            self._gap(cursor, end, pad_group, out)
        return out


def _backend_parts(d: Any, di: int, plan_name: str, spans: _Spans, group: str, data: Any,
                   named: dict[str, str]) -> bool:
    """Split one delegate payload the way its backend's ``memory`` hook says (``payload_parts``); False when
    the backend has none or cannot split this payload (the payload then stays one part)."""
    from ..backends import for_delegate, hook

    memory = hook(for_delegate(d.id), "memory")
    split = getattr(memory, "payload_parts", None)
    parts = split(d, di, plan_name, group, data, named) if split else None
    if parts is None:
        return False
    for lo, n, part in parts:
        spans.add(lo, n, part)
    return True


def analyze_size(data: bytes | bytearray | memoryview, name: str = "<bytes>", etrecord: Any = None, *,
                 artifact: Any = None) -> SizeReport:
    """The :class:`SizeReport` of a ``.pte``'s bytes (``etrecord``, an ETRecord, names constants).

    ``artifact``: those bytes already parsed (a :class:`~etlens.readers.pte.PteArtifact`), not parsed again.
    """
    art = artifact if artifact is not None else read_pte_bytes(data, name)
    program = art.program
    assert program is not None
    n = len(data)
    eh = program.extended_header
    fb_end = eh.program_size if eh else n
    plan_names = [p.name for p in program.execution_plan]
    users = _user_labels(program, etrecord)
    consts = _constant_tensors(program)

    def group(path: tuple[Any, ...]) -> str:
        if not path:
            return "program root"
        head = path[0]
        if head == "execution_plan" and len(path) > 1:
            pn = plan_names[path[1]] if path[1] < len(plan_names) else str(path[1])
            return f"plan {pn}: {path[2] if len(path) > 2 else 'table'}"
        if head == "constant_buffer" and len(path) > 2:
            return f"@const:{path[1]}"
        if head == "backend_delegate_data" and len(path) > 2:
            return f"@inline:{path[1]}"
        return str(head)

    reserved = ((8, 8 + eh.length, "@eh"),) if eh else ()
    layout = flatbuffer_layout(data, program_fbs, "Program", group, end=fb_end, name=name, reserved=reserved)
    parts: list[Part] = []
    inline_owner: dict[int, tuple[str, str]] = {}
    for plan in program.execution_plan:
        for di, d in enumerate(plan.delegates):
            if d.location == "INLINE":
                inline_owner.setdefault(d.index, (f"{plan.name} delegate[{di}] {d.id}", d.id))
    for g, b in layout.items():
        if g == "header":
            parts.append(Part("FlatBuffer root offset + file identifier", b, "header", "header"))
        elif g == "@eh":
            parts.append(Part("extended header (eh00)", b, "header", "header"))
        elif g == "padding":
            parts.append(Part("FlatBuffer alignment padding", b, "padding", "program"))
        elif g.startswith("@const:"):
            idx = int(g.split(":")[1])
            label, _ = _const_name(idx, consts.get(idx), users)
            parts.append(Part(label + " (inline)", b, "constant", "constants", {"buffer": idx}))
        elif g.startswith("@inline:"):
            idx = int(g.split(":")[1])
            who, backend = inline_owner.get(idx, (f"backend_delegate_data[{idx}]", "unknown"))
            parts.append(Part(who + " (inline payload)", b, "delegate", f"delegate {backend}"))
        else:
            parts.append(Part(f"FlatBuffer {g}", b, "program", "program"))

    # ---- the segments -----------------------------------------------------------------
    spans = _Spans()
    base = program.segment_base_offset
    seg_done: set[int] = set()
    named: dict[str, str] = {}
    ci = program.constant_segment_index
    offs = program.constant_segment_offsets
    if offs and ci is not None and ci < len(program.segments):
        seg = program.segments[ci]
        seg_done.add(ci)
        sizes = program.constant_sizes()
        for idx, off in enumerate(offs):
            label, tensor_bytes = _const_name(idx, consts.get(idx), users)
            cap = sizes[idx] if idx < len(sizes) else 0
            used = min(tensor_bytes, cap) if tensor_bytes else cap
            spans.add(base + seg.offset + off, used, Part(label, 0, "constant", "constants", {"buffer": idx}))
    for plan in program.execution_plan:
        for di, d in enumerate(plan.delegates):
            if d.location != "SEGMENT" or d.index in seg_done:
                continue
            seg_done.add(d.index)
            grp = f"delegate {d.id}"
            if not _backend_parts(d, di, plan.name, spans, grp, data, named):
                spans.add(d.payload_offset, d.payload_size,
                          Part(f"{plan.name} delegate[{di}] {d.id} payload", 0, "delegate", grp))
            else:
                # whatever of the payload the split did not name stays with the delegate, not the file padding
                spans.add(d.payload_offset, d.payload_size,
                          Part(f"{plan.name} delegate[{di}] {d.id} payload (rest)", 0, "delegate", grp), fill=True)
    for nd in program.named_data:
        if nd.segment_index in seg_done or nd.segment_index >= len(program.segments):
            continue
        seg_done.add(nd.segment_index)
        seg = program.segments[nd.segment_index]
        who = named.get(nd.key)
        spans.add(base + seg.offset, seg.size, Part(f"named data {who or repr(nd.key)}", 0, "named_data",
                                                    "named data", {"key": nd.key}))
    for mi, (si, _moffs) in enumerate(program.mutable_data_segments):
        if si in seg_done or si >= len(program.segments):
            continue
        seg_done.add(si)
        seg = program.segments[si]
        spans.add(base + seg.offset, seg.size, Part(f"mutable data[{mi}]", 0, "mutable_data", "mutable data"))
    for si, seg in enumerate(program.segments):
        if si not in seg_done:
            spans.add(base + seg.offset, seg.size, Part(f"segment[{si}]", 0, "segment", "segments"))
    parts.extend(spans.leaves(fb_end, n, "segments"))
    parts = [p for p in parts if p.bytes > 0]
    return SizeReport(path=name, total_bytes=n, parts=parts)


def size_of_file(path: str, etrecord: Any = None) -> SizeReport:
    """:func:`analyze_size` of a file on disk."""
    from ..readers.base import read_limited

    return analyze_size(read_limited(path), path, etrecord)
