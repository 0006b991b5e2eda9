"""Read an ExecuTorch program (``.pte``) without ExecuTorch.

A ``.pte`` file is a FlatBuffer (identifier ``ET12``) whose root ``Program`` holds one
``ExecutionPlan`` per method. A plan has a table of *values* (tensors, ints, lists …), the ids of
its input and output values, *chains* of *instructions* (kernel call, delegate call, move,
jump-if-false, free), an *operator table* (``aten::add`` + overload ``out``) and the *delegates*
(backend id, compile specs and where the backend's payload lives).

Big data usually sits after the FlatBuffer in *segments*. Bytes 8-40 then hold an *extended
header*: magic ``eh00``, ``uint32`` header length, ``uint64`` program (FlatBuffer) size,
``uint64`` segment base offset and (when the length allows) ``uint64`` segment data size. Segment
``i`` starts at ``segment_base_offset + segments[i].offset``. Delegate payloads are either INLINE
(``Program.backend_delegate_data[index]``) or in a SEGMENT; constant tensors are either inline
``constant_buffer`` entries or sub-ranges of the ``constant_segment``; backends may keep weights
in ``named_data`` entries (key -> segment).

:func:`read` returns a :class:`PteArtifact` whose ``program`` is a tree of small dataclasses
(:class:`Program`, :class:`ExecutionPlan`, :class:`Instruction`, :class:`Delegate` …); its
:meth:`~PteArtifact.graphs` turn each plan's data flow into an :class:`etlens.model.Graph` (built
on first use) and :meth:`~PteArtifact.summary` is what ``etlens info`` prints.

Example::

    from etlens.readers.pte import read
    art = read("model.pte")
    plan = art.program.execution_plan[0]
    print(plan.name, len(plan.instructions()), [op.qualified for op in plan.operators])
    graph = art.graphs()["forward"]
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Any

from ..errors import FormatError, TruncatedFileError
from ..model import Graph
from ._flatbuffers import FlatBuffer, Table
from .base import Artifact, read_limited

__all__ = [
    "SCALAR_TYPES",
    "ExtendedHeader",
    "AllocationInfo",
    "TensorValue",
    "Value",
    "Operator",
    "Instruction",
    "Frame",
    "Chain",
    "CompileSpec",
    "Delegate",
    "DataSegment",
    "NamedData",
    "ExecutionPlan",
    "Program",
    "PteArtifact",
    "read",
    "read_pte_bytes",
]

#: ExecuTorch ScalarType enum value -> torch dtype name (``6`` -> ``float32``).
SCALAR_TYPES: dict[int, str] = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
    8: "complex32", 9: "complex64", 10: "complex128", 11: "bool", 12: "qint8", 13: "quint8", 14: "qint32",
    15: "bfloat16", 16: "quint4x2", 17: "quint2x4", 22: "bits16", 23: "float8_e5m2", 24: "float8_e4m3fn",
    25: "float8_e5m2fnuz", 26: "float8_e4m3fnuz", 27: "uint16", 28: "uint32", 29: "uint64",
}

_VALUE_KINDS = ("none", "null", "int", "bool", "double", "tensor", "string", "int_list", "double_list",
                "bool_list", "tensor_list", "optional_tensor_list")
_INSTRUCTION_KINDS = ("none", "KernelCall", "DelegateCall", "MoveCall", "JumpFalseCall", "FreeCall")
_LOCATIONS = {0: "INLINE", 1: "SEGMENT"}
_EH_MAGIC = b"eh00"
_EH_MIN_LENGTH = 24
_HINT = "re-export the program (to_executorch().save()) or copy the file again"


# ---------------------------------------------------------------------------------------------
# The parsed structure
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class ExtendedHeader:
    """The ``eh00`` header after the FlatBuffer identifier: where the segments start."""

    length: int
    program_size: int
    segment_base_offset: int
    segment_data_size: int = 0


@dataclass(slots=True)
class AllocationInfo:
    """Where the memory planner put a non-constant tensor: memory arena id and byte offset."""

    memory_id: int
    memory_offset: int


@dataclass(slots=True)
class TensorValue:
    """A tensor value: dtype, sizes, dim order, and either constant data or a planned allocation.

    ``data_buffer_idx > 0`` with no ``allocation`` means a constant (weights) whose bytes are
    ``constant_buffer[data_buffer_idx]`` (index 0 is reserved for "no data").
    """

    scalar_type: int
    sizes: tuple[int, ...]
    dim_order: tuple[int, ...]
    data_buffer_idx: int = 0
    allocation: AllocationInfo | None = None
    storage_offset: int = 0
    requires_grad: bool = False
    layout: int = 0
    shape_dynamism: int = 0
    fully_qualified_name: str | None = None
    external: bool = False  # data lives outside the program (a .ptd file), by name

    @property
    def dtype(self) -> str:
        return SCALAR_TYPES.get(self.scalar_type, f"scalar_type_{self.scalar_type}")

    @property
    def is_constant(self) -> bool:
        return self.allocation is None and (self.data_buffer_idx > 0 or self.external)


@dataclass(slots=True)
class Value:
    """One entry of a plan's value table. ``kind`` is one of ``none null int bool double tensor
    string int_list double_list bool_list tensor_list optional_tensor_list``; ``val`` is the Python
    value (a :class:`TensorValue` for tensors, a tuple of value ids for tensor lists)."""

    kind: str
    val: Any = None


@dataclass(slots=True)
class Operator:
    """An operator-table entry: ``name`` (``aten::add``) and ``overload`` (``out``)."""

    name: str
    overload: str = ""

    @property
    def qualified(self) -> str:
        """ExecuTorch's spelling: ``aten::add.out`` (``name`` alone when there is no overload)."""
        return f"{self.name}.{self.overload}" if self.overload else self.name

    @property
    def readable(self) -> str:
        """etlens' display spelling: ``aten.add.out``."""
        return self.qualified.replace("::", ".")


@dataclass(slots=True)
class Instruction:
    """One instruction. ``kind`` is the schema name: ``KernelCall``, ``DelegateCall``,
    ``MoveCall``, ``JumpFalseCall`` or ``FreeCall`` (``none`` for an empty union)."""

    kind: str
    op_index: int | None = None            # KernelCall
    delegate_index: int | None = None      # DelegateCall
    args: tuple[int, ...] = ()             # KernelCall / DelegateCall value ids
    move_from: int | None = None           # MoveCall
    move_to: int | None = None
    cond_value_index: int | None = None    # JumpFalseCall
    destination_instruction: int | None = None
    value_index: int | None = None         # FreeCall


@dataclass(slots=True)
class Frame:
    filename: str | None = None
    lineno: int = 0
    name: str | None = None
    context: str | None = None


@dataclass(slots=True)
class Chain:
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    instructions: list[Instruction]
    stacktrace: list[list[Frame]] | None = None


@dataclass(slots=True)
class CompileSpec:
    key: str
    value: bytes

    def text(self) -> str:
        """The value as text when it is printable UTF-8, else as hex."""
        try:
            s = self.value.decode("utf-8")
            if s.isprintable():
                return s
        except UnicodeDecodeError:
            pass
        return self.value.hex()


@dataclass(slots=True)
class Delegate:
    """A backend delegate: id, compile specs, and where its payload lives in the file.

    ``payload_offset``/``payload_size`` are absolute byte positions in the file (resolved from the
    INLINE data table or from the segment); ``xnnpack`` is the decoded XNNPACK graph when the
    backend is XNNPACK and the payload decodes (``decode_error`` says why when it does not).
    """

    id: str
    location: str
    index: int
    compile_specs: list[CompileSpec] = field(default_factory=list)
    payload_offset: int = 0
    payload_size: int = 0
    xnnpack: Any = None
    decode_error: str | None = None

    @property
    def backend_id(self) -> str:
        return self.id


@dataclass(slots=True)
class DataSegment:
    offset: int
    size: int


@dataclass(slots=True)
class NamedData:
    key: str
    segment_index: int


@dataclass(slots=True)
class ExecutionPlan:
    """One method: values, inputs/outputs (value ids), chains, operator table, delegates."""

    name: str
    values: list[Value]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    chains: list[Chain]
    operators: list[Operator]
    delegates: list[Delegate]
    non_const_buffer_sizes: tuple[int, ...] = ()
    encoded_inp_str: str | None = None
    encoded_out_str: str | None = None

    def instructions(self) -> list[Instruction]:
        """All instructions of all chains, in order."""
        return [ins for c in self.chains for ins in c.instructions]


@dataclass(slots=True)
class Program:
    """The root of a ``.pte``: version, execution plans, constants, segments, named data."""

    version: int
    execution_plan: list[ExecutionPlan]
    constant_buffer_sizes: list[int] = field(default_factory=list)
    backend_delegate_data_sizes: list[int] = field(default_factory=list)
    segments: list[DataSegment] = field(default_factory=list)
    constant_segment_index: int | None = None
    constant_segment_offsets: tuple[int, ...] = ()
    mutable_data_segments: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)
    named_data: list[NamedData] = field(default_factory=list)
    extended_header: ExtendedHeader | None = None
    file_size: int = 0

    @property
    def segment_base_offset(self) -> int:
        return self.extended_header.segment_base_offset if self.extended_header else 0

    def constant_data_size(self) -> int:
        """Bytes of constant tensor data (the constant segment, or the inline constant buffers)."""
        if self.constant_segment_offsets and self.constant_segment_index is not None \
                and self.constant_segment_index < len(self.segments):
            return self.segments[self.constant_segment_index].size
        return sum(self.constant_buffer_sizes)

    def num_constant_buffers(self) -> int:
        return len(self.constant_segment_offsets) if self.constant_segment_offsets else len(self.constant_buffer_sizes)


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------
_u32 = struct.Struct("<I").unpack_from
_i32 = struct.Struct("<i").unpack_from
_u16 = struct.Struct("<H").unpack_from
_i8 = struct.Struct("<b").unpack_from
_i64 = struct.Struct("<q").unpack_from
_EH = struct.Struct("<4sIQQ")


def _extended_header(data: bytes | memoryview, name: str) -> ExtendedHeader | None:
    if len(data) < 8 + _EH.size or bytes(data[8:12]) != _EH_MAGIC:
        return None
    magic, length, program_size, base = _EH.unpack_from(data, 8)
    if length < _EH_MIN_LENGTH:
        return None
    seg_size = struct.unpack_from("<Q", data, 32)[0] if length >= 32 and len(data) >= 40 else 0
    size = len(data)
    if program_size < 8 or program_size > size:
        raise TruncatedFileError(
            f"{name}: extended header (bytes 8-{8 + length}) says the program is {program_size} bytes but the file "
            f"has {size}; the file is truncated or corrupt; {_HINT}")
    if base and (base < program_size or base > size):
        raise FormatError(f"{name}: extended header puts the segments at byte {base}, outside "
                          f"{program_size}..{size}; the file is corrupt; {_HINT}")
    if base and seg_size and base + seg_size > size:
        raise TruncatedFileError(f"{name}: extended header declares {seg_size} bytes of segment data from byte "
                                 f"{base}, but the file ends at byte {size}; the file is truncated; {_HINT}")
    return ExtendedHeader(length, program_size, base, seg_size)


_VEC_STRUCTS: dict[tuple[int, str], Any] = {}
_ZEROS10 = (0,) * 10


def _vector(fb: FlatBuffer, p: int, size: int, code: str, path: Any, name: str) -> tuple:
    """Scalars of the vector referenced by the offset field at absolute byte ``p`` (checked)."""
    data = fb.data
    q = p + _u32(data, p)[0]
    if q < fb.start or q + 4 > fb.end:
        fb.fail((path, name, None), "vector offset points outside the buffer", p)
    n = _u32(data, q)[0]
    if n * size > fb.end - q - 4:
        fb.fail((path, name, None), f"vector declares {n} elements of {size} bytes, more than the buffer holds", q)
    if not n:
        return ()
    key = (n, code)
    unpack = _VEC_STRUCTS.get(key)
    if unpack is None:
        unpack = struct.Struct(f"<{n}{code}").unpack_from
        if len(_VEC_STRUCTS) < 4096:
            _VEC_STRUCTS[key] = unpack
    return unpack(data, q + 4)


def _tensor_fast(fb: FlatBuffer, pos: int, path: Any, ref: int) -> Value:
    """Decode a Tensor table with direct field access (the hot path of big programs).

    Tensor fields are 1 or 4 bytes wide, so two checks (all 4-byte fields and all 1-byte fields end
    inside the table) replace the per-field checks; a table that fails them, or has the rare
    ``extra_tensor_info``, takes the generic path.
    """
    vo, tlen = fb.locate(pos, path, ref)
    if len(vo) < 10:
        vo = vo + _ZEROS10[len(vo):]
    if vo[9] or max(vo[1], vo[2], vo[3], vo[5], vo[6]) + 4 > tlen or max(vo[0], vo[4], vo[7], vo[8]) >= tlen:
        return _value_generic_tensor(fb.table_at(pos, path, ref))
    data = fb.data
    alloc = None
    if vo[6]:
        p = pos + vo[6]
        apos = p + _u32(data, p)[0]
        apath = (path, "allocation_info", None)
        ao, atl = fb.locate(apos, apath, p)
        if len(ao) >= 3 and max(ao[0], ao[1], ao[2]) + 4 <= atl:
            lo = _u32(data, apos + ao[1])[0] if ao[1] else 0
            hi = _u32(data, apos + ao[2])[0] if ao[2] else 0
            alloc = AllocationInfo(_u32(data, apos + ao[0])[0] if ao[0] else 0, lo | (hi << 32))
        else:
            a = fb.table_at(apos, apath, p)
            alloc = AllocationInfo(a.u32(0), a.u32(1) | (a.u32(2) << 32))
    st = data[pos + vo[0]] if vo[0] else 0
    return Value("tensor", TensorValue(
        scalar_type=st - 256 if st > 127 else st,
        sizes=_vector(fb, pos + vo[2], 4, "i", path, "sizes") if vo[2] else (),
        dim_order=_vector(fb, pos + vo[3], 1, "B", path, "dim_order") if vo[3] else (),
        data_buffer_idx=_u32(data, pos + vo[5])[0] if vo[5] else 0,
        allocation=alloc,
        storage_offset=_i32(data, pos + vo[1])[0] if vo[1] else 0,
        requires_grad=bool(data[pos + vo[4]]) if vo[4] else False,
        layout=_i8(data, pos + vo[7])[0] if vo[7] else 0,
        shape_dynamism=_i8(data, pos + vo[8])[0] if vo[8] else 0,
    ))


def _values(plan: Table) -> list[Value]:
    """Decode the plan's value table; tensors and ints take a direct path, the rest the generic one."""
    start, n = plan.vector(2, 4, name="values")
    if not n:
        return []
    fb = plan.fb
    data = fb.data
    locate = fb.locate
    ppath = plan.path
    out: list[Value] = []
    append = out.append
    for i, rel in enumerate(struct.unpack_from(f"<{n}I", data, start)):
        path = (ppath, "values", i)
        pos = start + 4 * i + rel
        offs, tlen = locate(pos, path, start + 4 * i)
        if len(offs) >= 2 and offs[0] and offs[1] and offs[0] < tlen and offs[1] + 4 <= tlen:
            tag = data[pos + offs[0]]
            p = pos + offs[1]
            vpos = p + _u32(data, p)[0]
            vpath = (path, "val", None)
            if tag == 5:
                append(_tensor_fast(fb, vpos, vpath, p))
                continue
            if tag == 2:
                vo, vl = locate(vpos, vpath, p)
                if vo and vo[0] and vo[0] + 8 <= vl:
                    append(Value("int", _i64(data, vpos + vo[0])[0]))
                    continue
        append(_value(fb.table_at(pos, path)))
    return out


def _value(t: Table) -> Value:
    """Decode one EValue table field by field (the generic path)."""
    tag, v = t.union(0, name="val")
    if v is None:
        if tag:
            t.fb.fail((t.path, "val", None), f"value of type {tag} has no data", t.pos, truncated=False)
        return Value("none")
    if tag == 5:
        return _value_generic_tensor(v)
    if tag == 2:
        return Value("int", v.i64(0))
    return _value_rest(tag, v)


def _value_generic_tensor(v: Table) -> Value:
    alloc = None
    a = v.table(6, name="allocation_info")
    if a is not None:
        alloc = AllocationInfo(a.u32(0), a.u32(1) | (a.u32(2) << 32))
    fqn = None
    external = False
    extra = v.table(9, name="extra_tensor_info")
    if extra is not None:
        fqn = extra.string(1, name="fully_qualified_name")
        external = extra.u8(2) == 1
    return Value("tensor", TensorValue(
        scalar_type=v.i8(0),
        sizes=v.scalars(2, "i", name="sizes"),
        dim_order=v.scalars(3, "B", name="dim_order"),
        data_buffer_idx=v.u32(5),
        allocation=alloc,
        storage_offset=v.i32(1),
        requires_grad=v.bool(4),
        layout=v.i8(7),
        shape_dynamism=v.i8(8),
        fully_qualified_name=fqn,
        external=external,
    ))


def _value_rest(tag: int, v: Table) -> Value:
    """Values other than tensors and ints, from the union's tag and table."""
    if tag == 3:
        return Value("bool", v.bool(0))
    if tag == 4:
        return Value("double", v.f64(0))
    if tag == 6:
        return Value("string", v.string(0, ""))
    if tag == 7:
        return Value("int_list", v.scalars(0, "q", name="items"))
    if tag == 8:
        return Value("double_list", v.scalars(0, "d", name="items"))
    if tag == 9:
        return Value("bool_list", tuple(b != 0 for b in v.scalars(0, "B", name="items")))
    if tag == 10:
        return Value("tensor_list", v.scalars(0, "i", name="items"))
    if tag == 11:
        return Value("optional_tensor_list", v.scalars(0, "i", name="items"))
    if tag == 1:
        return Value("null")
    return Value(f"unknown_{tag}")


def _instruction(t: Table) -> Instruction:
    tag, a = t.union(0, name="instr_args")
    kind = _INSTRUCTION_KINDS[tag] if tag < len(_INSTRUCTION_KINDS) else f"unknown_{tag}"
    if a is None:
        return Instruction(kind)
    if tag == 1:
        return Instruction(kind, op_index=a.i32(0), args=a.scalars(1, "i", name="args"))
    if tag == 2:
        return Instruction(kind, delegate_index=a.i32(0), args=a.scalars(1, "i", name="args"))
    if tag == 3:
        return Instruction(kind, move_from=a.i32(0), move_to=a.i32(1))
    if tag == 4:
        return Instruction(kind, cond_value_index=a.i32(0), destination_instruction=a.i32(1))
    if tag == 5:
        return Instruction(kind, value_index=a.i32(0))
    return Instruction(kind)


def _instructions(chain: Table) -> list[Instruction]:
    """Decode a chain's instructions; kernel and delegate calls take a direct path."""
    start, n = chain.vector(2, 4, name="instructions")
    if not n:
        return []
    fb = chain.fb
    data = fb.data
    locate = fb.locate
    cpath = chain.path
    out: list[Instruction] = []
    append = out.append
    for i, rel in enumerate(struct.unpack_from(f"<{n}I", data, start)):
        path = (cpath, "instructions", i)
        pos = start + 4 * i + rel
        offs, tlen = locate(pos, path, start + 4 * i)
        if len(offs) >= 2 and offs[0] and offs[1] and offs[0] < tlen and offs[1] + 4 <= tlen:
            tag = data[pos + offs[0]]
            if tag == 1 or tag == 2:
                p = pos + offs[1]
                apos = p + _u32(data, p)[0]
                apath = (path, "instr_args", None)
                ao, al = locate(apos, apath, p)
                if len(ao) >= 2 and max(ao[0], ao[1]) + 4 <= al:
                    index = _i32(data, apos + ao[0])[0] if ao[0] else 0
                    args = _vector(fb, apos + ao[1], 4, "i", apath, "args") if ao[1] else ()
                    if tag == 1:
                        append(Instruction("KernelCall", op_index=index, args=args))
                    else:
                        append(Instruction("DelegateCall", delegate_index=index, args=args))
                    continue
        append(_instruction(fb.table_at(pos, path)))
    return out


def _frames(fl: Table) -> list[Frame]:
    return [Frame(f.string(0, name="filename"), f.i32(1), f.string(2, name="name"), f.string(3, name="context"))
            for f in fl.tables(0, name="items")]


def _chain(t: Table) -> Chain:
    st = t.tables(3, name="stacktrace")
    return Chain(
        inputs=t.scalars(0, "i", name="inputs"),
        outputs=t.scalars(1, "i", name="outputs"),
        instructions=_instructions(t),
        stacktrace=[_frames(f) for f in st] if st else None,
    )


def _delegate(t: Table) -> Delegate:
    ref = t.table(1, name="processed")
    loc, idx = (ref.i8(0), ref.u32(1)) if ref is not None else (0, 0)
    specs = [CompileSpec(c.string(0, "", name="key") or "", bytes(c.bytes(1, name="value")))
             for c in t.tables(2, name="compile_specs")]
    return Delegate(t.string(0, "", name="id") or "", _LOCATIONS.get(loc, f"location_{loc}"), idx, specs)


def _plan(t: Table) -> ExecutionPlan:
    meta = t.table(1, name="container_meta_type")
    return ExecutionPlan(
        name=t.string(0, "", name="name") or "",
        values=_values(t),
        inputs=t.scalars(3, "i", name="inputs"),
        outputs=t.scalars(4, "i", name="outputs"),
        chains=[_chain(c) for c in t.tables(5, name="chains")],
        operators=[Operator(o.string(0, "", name="name") or "", o.string(1, "", name="overload") or "")
                   for o in t.tables(6, name="operators")],
        delegates=[_delegate(d) for d in t.tables(7, name="delegates")],
        non_const_buffer_sizes=t.scalars(8, "q", name="non_const_buffer_sizes"),
        encoded_inp_str=meta.string(0, name="encoded_inp_str") if meta is not None else None,
        encoded_out_str=meta.string(1, name="encoded_out_str") if meta is not None else None,
    )


def _resolve_payloads(program: Program, inline_spans: list[tuple[int, int]], data: Any, name: str,
                      decode: bool) -> None:
    """Find each delegate's payload bytes (inline or segment) and decode XNNPACK ones."""
    base = program.segment_base_offset
    size = len(data)
    for pi, plan in enumerate(program.execution_plan):
        for di, d in enumerate(plan.delegates):
            where = f"execution_plan[{pi}].delegates[{di}].processed"
            if d.location == "INLINE":
                if d.index >= len(inline_spans):
                    raise FormatError(f"{name}: {where} points at inline data {d.index} but the program has "
                                      f"{len(inline_spans)} backend_delegate_data entries; {_HINT}")
                d.payload_offset, d.payload_size = inline_spans[d.index]
            elif d.location == "SEGMENT":
                if d.index >= len(program.segments):
                    raise FormatError(f"{name}: {where} points at segment {d.index} but the program has "
                                      f"{len(program.segments)} segments; {_HINT}")
                seg = program.segments[d.index]
                d.payload_offset, d.payload_size = base + seg.offset, seg.size
                if not base or d.payload_offset + d.payload_size > size:
                    raise TruncatedFileError(
                        f"{name}: {where} payload (segment {d.index}) spans bytes {d.payload_offset}.."
                        f"{d.payload_offset + d.payload_size} but the file ends at byte {size}"
                        f"{'' if base else ' and has no extended header'}; the file is truncated; {_HINT}")
            else:
                raise FormatError(f"{name}: {where} has unknown data location {d.location}; {_HINT}")
            if decode and d.id.lower().startswith("xnnpack"):
                from .xnnpack import decode_xnnpack

                payload = memoryview(data)[d.payload_offset:d.payload_offset + d.payload_size]
                try:
                    d.xnnpack = decode_xnnpack(payload, name=f"{name}: {where} (XNNPACK payload)")
                except FormatError as exc:
                    # A delegate we cannot look inside is not a broken program: keep the size.
                    d.decode_error = str(exc)


def read_pte_bytes(data: bytes | bytearray | memoryview, name: str = "<bytes>", *,
                   decode_delegates: bool = True) -> "PteArtifact":
    """Parse the bytes of a ``.pte`` into a :class:`PteArtifact` (graphs are built on first use)."""
    n = len(data)
    if n < 8:
        raise TruncatedFileError(f"{name}: {n} bytes is too short for an ExecuTorch program (a FlatBuffer needs "
                                 f"at least 8 bytes); {_HINT}")
    ident = bytes(data[4:8])
    if not (ident[:2] == b"ET" and ident[2:4].isdigit()):
        raise FormatError(f"{name}: not an ExecuTorch program (identifier {ident!r} at bytes 4-8, expected "
                          f"b'ET12'); pass a .pte written by to_executorch().save()")
    if ident != b"ET12":
        raise FormatError(f"{name}: ExecuTorch program version {ident.decode()} is not supported (expected ET12); "
                          "re-export it with ExecuTorch 1.x")
    eh = _extended_header(data, name)
    fb = FlatBuffer(data, name, end=eh.program_size if eh else n, what="ExecuTorch program")
    root = fb.root("program")
    program = Program(
        version=root.u32(0),
        execution_plan=[_plan(p) for p in root.tables(1, name="execution_plan")],
        extended_header=eh,
        file_size=n,
    )
    program.constant_buffer_sizes = [b.byte_span(0, name="storage")[1] for b in root.tables(2, name="constant_buffer")]
    inline_spans = [b.byte_span(0, name="data") for b in root.tables(3, name="backend_delegate_data")]
    program.backend_delegate_data_sizes = [s for _, s in inline_spans]
    program.segments = [DataSegment(s.u64(0), s.u64(1)) for s in root.tables(4, name="segments")]
    cs = root.table(5, name="constant_segment")
    if cs is not None:
        program.constant_segment_index = cs.u32(0)
        program.constant_segment_offsets = cs.scalars(1, "Q", name="offsets")
    program.mutable_data_segments = [(m.u32(0), m.scalars(1, "Q", name="offsets"))
                                     for m in root.tables(6, name="mutable_data_segments")]
    program.named_data = [NamedData(t.string(0, "", name="key") or "", t.u32(1))
                          for t in root.tables(7, name="named_data")]
    _check_segments(program, n, name)
    _resolve_payloads(program, inline_spans, data, name, decode_delegates)
    return PteArtifact(format="pte", path=name, program=program)


def _check_segments(program: Program, size: int, name: str) -> None:
    base = program.segment_base_offset
    for i, seg in enumerate(program.segments):
        if not base or base + seg.offset + seg.size > size:
            raise TruncatedFileError(
                f"{name}: program.segments[{i}] spans bytes {base + seg.offset}..{base + seg.offset + seg.size} "
                f"but the file ends at byte {size}{'' if base else ' and has no extended header'}; "
                f"the file is truncated; {_HINT}")
    nseg = len(program.segments)
    if program.constant_segment_offsets and (program.constant_segment_index or 0) >= nseg:
        raise FormatError(f"{name}: program.constant_segment.segment_index {program.constant_segment_index} "
                          f">= {nseg} segments; {_HINT}")
    for i, nd in enumerate(program.named_data):
        if nd.segment_index >= nseg:
            raise FormatError(f"{name}: program.named_data[{i}] ({nd.key!r}) points at segment {nd.segment_index} "
                              f"but the program has {nseg}; {_HINT}")


def read(path: str | os.PathLike) -> "PteArtifact":
    """Parse a ``.pte`` file (see :func:`read_pte_bytes`)."""
    path = os.fspath(path)
    return read_pte_bytes(read_limited(path), name=path)


# ---------------------------------------------------------------------------------------------
# The artifact
# ---------------------------------------------------------------------------------------------
@dataclass
class PteArtifact(Artifact):
    """A parsed ``.pte``: ``program`` (the structure) plus graphs and a summary."""

    program: Program | None = None

    def graphs(self) -> dict[str, Graph]:
        if not self._graphs and self.program is not None:
            from ._pte_graph import plan_graph

            for plan in self.program.execution_plan:
                self._graphs[plan.name] = plan_graph(self.program, plan)
        return dict(self._graphs)

    def summary(self) -> dict[str, Any]:
        from ._pte_graph import program_summary

        return program_summary(self)
