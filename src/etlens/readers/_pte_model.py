"""The parsed structure of an ExecuTorch program: small dataclasses mirroring ``program.fbs``.

:mod:`etlens.readers.pte` fills these from the bytes of a ``.pte`` (see :mod:`._pte_decode`) and
re-exports them; use them through ``etlens.readers.pte``::

    from etlens.readers.pte import read
    program = read("model.pte").program          # a Program
    plan = program.execution_plan[0]             # an ExecutionPlan
    [op.qualified for op in plan.operators]      # ['aten::addmm.out', ...]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..schema import SCALAR_TYPES, dtype_name

__all__ = ["SCALAR_TYPES", "ExtendedHeader", "AllocationInfo", "TensorValue", "Value", "Operator", "Instruction",
           "Frame", "Chain", "CompileSpec", "Delegate", "DataSegment", "NamedData", "ExecutionPlan", "Program"]

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
        return dtype_name(self.scalar_type)

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
    INLINE data table or from the segment). ``backend`` is the name of the registered backend the id
    belongs to (:func:`etlens.backends.for_delegate`; None when etlens has no folder for it) and
    ``decoded`` what that backend's ``payload`` hook made of the payload (``decode_error`` says why
    when it does not decode). The core reads ``decoded`` only through its generic methods
    (``attrs()``, and when present ``op_names()``, ``to_graph(name)``, ``input_ids``/``output_ids``).
    """

    id: str
    location: str
    index: int
    compile_specs: list[CompileSpec] = field(default_factory=list)
    payload_offset: int = 0
    payload_size: int = 0
    backend: str | None = None
    decoded: Any = None
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

    def constant_sizes(self) -> list[int]:
        """Bytes of each constant buffer (index = ``TensorValue.data_buffer_idx``; padding included
        for buffers cut from the constant segment, as ExecuTorch's own deserializer reports them)."""
        offs = self.constant_segment_offsets
        if not offs:
            return list(self.constant_buffer_sizes)
        end = self.constant_data_size()
        return [max(0, (offs[i + 1] if i + 1 < len(offs) else end) - offs[i]) for i in range(len(offs))]


