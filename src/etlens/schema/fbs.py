"""The shape of a FlatBuffer schema as data: :class:`Field` of a table, by name.

The modules :mod:`.program_fbs`, :mod:`.etdump_fbs` (and a backend's ``schema.py``) are *generated* by
``scripts/gen_schema.py`` from the ``.fbs`` files shipped in the ExecuTorch wheel. Each table
there is a class whose attributes are :class:`Field` objects, so a reader names what it reads::

    from etlens.schema.etdump_fbs import ProfileEvent
    ProfileEvent.start_time.slot      # 6: where the field sits in the table's vtable
    ProfileEvent.start_time.fmt       # 'Q': a little-endian uint64
    ProfileEvent.instruction_id.default  # -1, the schema default

A *slot* is the field's index in the table's vtable. A union field ``u`` takes two slots in
FlatBuffers (``u_type``, a ``uint8`` tag, then ``u`` itself); its :class:`Field` has ``kind``
``"union"`` and ``slot`` pointing at the tag, the value being at ``slot + 1``.

Nothing here reads bytes: the bounds-checked reading stays in :mod:`etlens.readers`.
"""

from __future__ import annotations

from typing import Final

__all__ = ["Field", "SCALAR_FORMATS"]

#: FlatBuffers scalar type -> (``struct`` format code, byte width).
SCALAR_FORMATS: Final[dict[str, tuple[str, int]]] = {
    "bool": ("?", 1), "byte": ("b", 1), "ubyte": ("B", 1), "int8": ("b", 1), "uint8": ("B", 1),
    "short": ("h", 2), "ushort": ("H", 2), "int16": ("h", 2), "uint16": ("H", 2),
    "int": ("i", 4), "uint": ("I", 4), "int32": ("i", 4), "uint32": ("I", 4),
    "long": ("q", 8), "ulong": ("Q", 8), "int64": ("q", 8), "uint64": ("Q", 8),
    "float": ("f", 4), "double": ("d", 8), "float32": ("f", 4), "float64": ("d", 8),
}


class Field:
    """One field of a FlatBuffer table.

    Attributes:
        table: the table's name (``"ProfileEvent"``), for error messages.
        name: the field's name (``"start_time"``).
        slot: its vtable index (for a union, the tag's; the value follows at ``slot + 1``).
        kind: ``"scalar"``, ``"string"``, ``"table"``, ``"struct"``, ``"union"`` or ``"vector"``.
        type: the declared type: a scalar (``"ulong"``), ``"string"``, or a table/enum/union name;
            for a vector, the element type.
        fmt: ``struct`` code of a scalar field, or of a vector's scalar elements (``""`` otherwise).
        size: byte width of a scalar (or of one vector element; 4 for offsets).
        default: the schema default of a scalar field (0, -1, ``False`` …).
        enum: the enum a scalar (or vector element) is typed with, ``""`` for plain scalars.
        elem_kind: for vectors, what the elements are: ``"scalar"``, ``"string"``, ``"table"``,
            ``"struct"`` (``""`` for other fields).
        deprecated: the schema marks the field ``deprecated`` (writers leave it out).
    """

    __slots__ = ("table", "name", "slot", "kind", "type", "fmt", "size", "default", "enum", "elem_kind",
                 "deprecated", "path")

    def __init__(self, table: str, name: str, slot: int, kind: str, type: str, *, fmt: str = "", size: int = 4,
                 default: int | float | bool = 0, enum: str = "", elem_kind: str = "",
                 deprecated: bool = False) -> None:
        self.table = table
        self.name = name
        self.slot = slot
        self.kind = kind
        self.type = type
        self.fmt = fmt
        self.size = size
        self.default = default
        self.enum = enum
        self.elem_kind = elem_kind
        self.deprecated = deprecated
        #: ``"Table.field"``, what error messages name when no better path is known.
        self.path = f"{table}.{name}"

    def __repr__(self) -> str:
        return f"Field({self.path}, slot={self.slot}, {self.kind} {self.type})"
