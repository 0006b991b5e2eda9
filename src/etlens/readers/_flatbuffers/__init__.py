"""The one FlatBuffer engine of etlens: .pte programs, ETDumps, bundled programs and delegate payloads.

A small, fast, bounds-checked FlatBuffer reader (no schema compiler, no generated code) with two
front-ends over the same buffer object, bounds checks and error messages:

* :class:`Table` (here) — one table at a time, for the tree-shaped files: ``.pte`` programs
  (:mod:`etlens.readers.pte`), bundled programs (:mod:`etlens.readers.bpte`), the XNNPACK payload
  (:mod:`etlens.readers.xnnpack`), the byte layout (:mod:`etlens.readers.layout`);
* :class:`~etlens.readers._flatbuffers.columns.FB` (``columns``, needs numpy) — every table of a
  vector at once, one numpy gather per field, for the ETDump's hundred thousand event tables
  (:mod:`etlens.readers.etdump`, :mod:`etlens.readers.etdump_columns`). It is a
  :class:`FlatBuffer` too: the same ``fail`` / ``hint`` and the same layout rules, read column-wise.

FlatBuffers lay a tree of *tables* out in one byte buffer. Everything is little-endian:

* the buffer starts with a ``uint32`` offset to the root table (``[uint32 size]`` first when the
  buffer is *size-prefixed*, as ETDump is), optionally followed by a 4-byte file identifier;
* a table starts with an ``int32`` *soffset*: ``table_pos - soffset`` is its *vtable*;
* a vtable is ``uint16 vtable_bytes, uint16 table_bytes, uint16 field_offset[...]``; field ``i``
  lives at ``table_pos + field_offset[i]`` and is absent (use the default) when the offset is 0
  or ``i`` lies beyond the vtable;
* a scalar or struct field is stored inline; a string, vector, table or union value field holds a
  ``uint32`` offset *relative to the field's own position*;
* a vector is ``uint32 count`` then the elements (offsets, for vectors of tables/strings);
  a string is a vector of bytes followed by a NUL;
* a union field ``u`` occupies two slots: ``u_type`` (``uint8``, 0 = NONE) then ``u`` itself.

Every read here checks its bounds first and raises :class:`~etlens.errors.TruncatedFileError`
(the data ends too early) or :class:`~etlens.errors.FormatError` (an offset or count points
outside the buffer) naming the file, the field path and the byte offset. Counts are checked
against the bytes that remain before anything is allocated, and offsets only move forward, so
corrupt input can neither hang the reader nor make it allocate more than the file size.

Readers address fields by name through the generated schema descriptions of
:mod:`etlens.schema` (a :class:`~etlens.schema.fbs.Field` knows its slot, type and default);
the slot-number accessors underneath stay for hand-made buffers and tests. Example::

    from etlens.readers._flatbuffers import FlatBuffer
    from etlens.schema.program_fbs import ExecutionPlan, Program

    fb = FlatBuffer(data, name="model.pte", identifier=b"ET12")
    program = fb.root("program")
    version = program.get(Program.version)                # default from the schema
    for plan in program.children(Program.execution_plan):
        print(plan.text(ExecutionPlan.name))
"""

from __future__ import annotations

import struct
from typing import Any, Callable

from ...errors import FormatError, TruncatedFileError
from ...schema.fbs import Field

__all__ = ["FlatBuffer", "Table", "field_path", "render_path"]

_u8 = struct.Struct("<B").unpack_from
_i8 = struct.Struct("<b").unpack_from
_u16 = struct.Struct("<H").unpack_from
_i16 = struct.Struct("<h").unpack_from
_u32: Callable[[Any, int], tuple[int]] = struct.Struct("<I").unpack_from
_i32 = struct.Struct("<i").unpack_from
_u64 = struct.Struct("<Q").unpack_from
_i64 = struct.Struct("<q").unpack_from
_f32 = struct.Struct("<f").unpack_from
_f64 = struct.Struct("<d").unpack_from

_vthead = struct.Struct("<HH").unpack_from
_VT_CACHE: dict[int, Any] = {}

_UNPACK: dict[str, Callable[[Any, int], tuple[Any, ...]]] = {
    "B": _u8, "b": _i8, "?": struct.Struct("<?").unpack_from, "H": _u16, "h": _i16, "I": _u32, "i": _i32,
    "Q": _u64, "q": _i64, "f": _f32, "d": _f64,
}

_SIZES = {"B": 1, "b": 1, "?": 1, "H": 2, "h": 2, "I": 4, "i": 4, "f": 4, "Q": 8, "q": 8, "d": 8}

_HINT = "re-export it or copy it again (is it the file you meant?)"


def field_path(parent: Any, field: str, index: int | None = None) -> tuple[Any, ...]:
    """A field path for error messages, built lazily as a tuple ``(parent, field, index)``.

    A path is ``None``, a string (the root's name) or such a tuple; :func:`render_path` turns
    ``field_path(field_path("program", "execution_plan", 0), "chains", 1)`` into
    ``program.execution_plan[0].chains[1]``. Rendering happens only when an error is raised, so
    building a path costs one small tuple.
    """
    return (parent, field, index)


def render_path(path: Any) -> str:
    """The dotted text of a path made by :func:`field_path` (``''`` for ``None``)."""
    parts: list[str] = []
    node = path
    while isinstance(node, tuple):
        parent, fld, index = node
        parts.append(f"{fld}[{index}]" if index is not None else fld)
        node = parent
    if node:
        parts.append(str(node))
    return ".".join(reversed(parts))


class FlatBuffer:
    """One FlatBuffer inside ``data[start:end]``; offsets are relative to ``start``.

    Args:
        data: the bytes (``bytes``, ``bytearray`` or ``memoryview``; not copied).
        name: what to call the data in error messages (usually the file path).
        identifier: the expected 4-byte file identifier, or ``None`` to skip the check.
        size_prefixed: the buffer starts with a ``uint32`` byte count (ETDump does this).
        start, end: the region of ``data`` holding this buffer (e.g. a payload inside a ``.pte``).
        what: a short description of the expected content for error messages ("ExecuTorch program").
    """

    __slots__ = ("data", "name", "start", "end", "what", "hint", "_vtables")

    def __init__(self, data: Any, name: str = "<bytes>", *,
                 identifier: bytes | None = None, size_prefixed: bool = False, start: int = 0,
                 end: int | None = None, what: str = "FlatBuffer", hint: str = _HINT, header: bool = True) -> None:
        self.data = data
        self.name = name
        self.what = what
        #: what to tell the user to do when the data is bad (the end of every error message)
        self.hint = hint
        self._vtables: dict[int, tuple[tuple[int, ...], int]] = {}
        end = len(data) if end is None else min(end, len(data))
        if not header:  # a region whose header the caller has checked (or that has none: tests, fragments)
            self.start, self.end = start, end
            return
        if start < 0 or start > end:
            raise FormatError(f"{name}: {what} region starts at byte {start}, outside the {len(data)}-byte data; "
                              f"{hint}")
        if size_prefixed:
            if end - start < 4:
                raise TruncatedFileError(f"{name}: {what} is {end - start} bytes, too short for its size prefix; "
                                         f"{hint}")
            size = _u32(data, start)[0]
            if size > end - start - 4:
                raise TruncatedFileError(
                    f"{name}: {what} declares {size} bytes after its size prefix but only {end - start - 4} "
                    f"follow; the file is truncated ({hint})")
            start += 4
            end = start + size
        self.start = start
        self.end = end
        if end - start < 8:
            raise TruncatedFileError(f"{name}: {what} is only {end - start} bytes, too short for a FlatBuffer "
                                     f"header (8 bytes); {hint}")
        if identifier is not None:
            got = bytes(data[start + 4:start + 8])
            if got != identifier:
                raise FormatError(f"{name}: not a{'n' if what[:1] in 'AEIOU' else ''} {what} (identifier {got!r} "
                                  f"at bytes {start + 4}-{start + 8}, expected {identifier!r}); {hint}")

    @property
    def identifier(self) -> bytes:
        return bytes(self.data[self.start + 4:self.start + 8])

    def root(self, path: str = "root") -> "Table":
        """The root table."""
        return self.table_at(self.start + _u32(self.data, self.start)[0], path, self.start)

    # -- errors --------------------------------------------------------------------------
    def fail(self, path: Any, msg: str, pos: int, truncated: bool = True) -> None:
        cls = TruncatedFileError if truncated else FormatError
        rendered = render_path(path)
        where = f" (field {rendered})" if rendered else ""
        cause = "the file is truncated or an offset in it is corrupt" if truncated else "the data is corrupt"
        raise cls(f"{self.name}: {self.what}{where}: {msg} at byte {pos} (data ends at byte {self.end}); "
                  f"{cause}: {self.hint}")

    # -- raw access ----------------------------------------------------------------------
    def check_span(self, pos: int, size: int, path: Any, what: str) -> None:
        """Raise unless ``size`` bytes at absolute ``pos`` lie inside the buffer (for readers that
        unpack raw regions themselves)."""
        if pos < self.start or pos + size > self.end:
            self.fail(path, f"{what} ({size} bytes) points outside the buffer", pos)

    def table_at(self, pos: int, path: Any, ref: int | None = None) -> "Table":
        """The table starting at absolute byte ``pos`` (``ref`` is where the offset to it was read)."""
        offs, tlen = self.locate(pos, path, ref)
        return Table(self, pos, offs, tlen, path)

    def locate(self, pos: int, path: Any, ref: int | None = None) -> tuple[tuple[int, ...], int]:
        """``(field offsets, inline size)`` of the table at ``pos``, checked: the fast path under
        :meth:`table_at` for readers that decode hot tables by hand."""
        if pos < self.start or pos + 4 > self.end:
            self.fail(path, "table offset points outside the buffer", pos if ref is None else ref)
        vt = pos - _i32(self.data, pos)[0]
        # Writers share one vtable among all tables of the same shape, so a cache of decoded
        # vtables (keyed by position) skips most of the work for big vectors of tables.
        hit = self._vtables.get(vt)
        if hit is None:
            hit = self._vtable(vt, pos, path)
        if pos + hit[1] > self.end:
            self.fail(path, f"table declares {hit[1]} inline bytes", pos)
        return hit

    def _vtable(self, vt: int, pos: int, path: Any) -> tuple[tuple[int, ...], int]:
        data = self.data
        if vt < self.start or vt + 4 > self.end:
            self.fail(path, f"vtable of the table at byte {pos} points outside the buffer", vt)
        vlen, tlen = _vthead(data, vt)
        if vlen < 4 or vlen & 1 or vt + vlen > self.end:
            self.fail(path, f"vtable of the table at byte {pos} has a bad size {vlen}", vt, truncated=False)
        n = (vlen - 4) >> 1
        unpack = _VT_CACHE.get(n)
        if unpack is None:
            unpack = _VT_CACHE[n] = struct.Struct(f"<{n}H").unpack_from
        hit = (unpack(data, vt + 4), tlen)
        self._vtables[vt] = hit
        return hit

    def string_at(self, pos: int, path: Any) -> str:
        """The UTF-8 string whose length prefix is at absolute byte ``pos``."""
        if pos < self.start or pos + 4 > self.end:
            self.fail(path, "string offset points outside the buffer", pos)
        n = _u32(self.data, pos)[0]
        if pos + 4 + n > self.end:
            self.fail(path, f"string of {n} bytes runs past the end", pos)
        try:
            return bytes(self.data[pos + 4:pos + 4 + n]).decode("utf-8")
        except UnicodeDecodeError:
            return bytes(self.data[pos + 4:pos + 4 + n]).decode("utf-8", errors="replace")

    def vector_at(self, pos: int, elem_size: int, path: Any) -> tuple[int, int]:
        """``(first element position, count)`` of the vector whose count is at ``pos``."""
        if pos < self.start or pos + 4 > self.end:
            self.fail(path, "vector offset points outside the buffer", pos)
        n = _u32(self.data, pos)[0]
        if n * elem_size > self.end - pos - 4:
            self.fail(path, f"vector declares {n} elements of {elem_size} bytes, more than the buffer holds", pos)
        return pos + 4, n


class Table:
    """One table: typed accessors by field index (``slot``), each taking the schema default.

    A ``Table`` is cheap (a handful of slots, the vtable unpacked once into ``offs``); readers
    typically copy the fields they need into their own dataclasses and let the ``Table`` go.
    """

    __slots__ = ("fb", "pos", "offs", "tlen", "room", "path")

    def __init__(self, fb: FlatBuffer, pos: int, offs: tuple[int, ...], tlen: int, path: Any) -> None:
        self.fb = fb
        self.pos = pos
        self.offs = offs
        #: the inline size the table's vtable declares (what a layout attributes to the table)
        self.tlen = tlen
        # Fields are bounds-checked against the end of the buffer, not against ``tlen``: the Python
        # flatbuffers builder (e.g. 25.2.10, which tosa-tools pins) shares one vtable among tables whose
        # field offsets match while their inline sizes differ, so a valid table may hold fields past the
        # size its (shared) vtable declares. FlatBuffers' own verifier checks fields against the buffer.
        self.room = fb.end - pos
        self.path = path

    def __repr__(self) -> str:
        return f"Table({render_path(self.path)}, pos={self.pos}, fields={len(self.offs)})"

    # -- locating fields -----------------------------------------------------------------
    def offset(self, slot: int) -> int:
        """Byte offset of field ``slot`` inside the table, 0 when absent."""
        offs = self.offs
        return offs[slot] if slot < len(offs) else 0

    def has(self, slot: int) -> bool:
        return self.offset(slot) != 0

    def _field(self, slot: int, size: int, name: str | None) -> int:
        """Absolute position of field ``slot`` (0 when absent), checked to lie inside the table."""
        offs = self.offs
        if slot >= len(offs):
            return 0
        off = offs[slot]
        if not off:
            return 0
        if off + size > self.room:
            self._outside(slot, off, size, name)
        return self.pos + off

    def _outside(self, slot: int, off: int, size: int, name: str | None = None) -> None:
        self.fb.fail(self._p(name, slot), f"field of {size} bytes at table offset {off} lies outside the buffer",
                     self.pos + off, truncated=False)

    def _p(self, name: str | None, slot: int) -> Any:
        return (self.path, name or f"field{slot}", None)

    def _ref(self, slot: int, name: str | None) -> int:
        """Absolute position an offset field points to, or 0 when the field is absent."""
        offs = self.offs
        if slot >= len(offs):
            return 0
        off = offs[slot]
        if not off:
            return 0
        if off + 4 > self.room:
            self._outside(slot, off, 4, name)
        p = self.pos + off
        return p + _u32(self.fb.data, p)[0]

    # -- scalars -------------------------------------------------------------------------
    def scalar(self, slot: int, fmt: str, default: Any = 0, name: str | None = None) -> Any:
        """Field ``slot`` as a struct-module scalar (``'I'``, ``'q'``, ``'d'``, ``'?'`` …)."""
        p = self._field(slot, _SIZES[fmt], name)
        if not p:
            return default
        return struct.unpack_from("<" + fmt, self.fb.data, p)[0]

    def _get(self, slot: int, size: int, unpack: Any, default: Any) -> Any:
        offs = self.offs
        if slot < len(offs):
            off = offs[slot]
            if off:
                if off + size > self.room:
                    self._outside(slot, off, size)
                return unpack(self.fb.data, self.pos + off)[0]
        return default

    def u8(self, slot: int, default: int = 0) -> Any:
        return self._get(slot, 1, _u8, default)

    def i8(self, slot: int, default: int = 0) -> Any:
        return self._get(slot, 1, _i8, default)

    def bool(self, slot: int, default: bool = False) -> bool:
        return self._get(slot, 1, _u8, default) != 0 if self.offset(slot) else default

    def u16(self, slot: int, default: int = 0) -> Any:
        return self._get(slot, 2, _u16, default)

    def i16(self, slot: int, default: int = 0) -> Any:
        return self._get(slot, 2, _i16, default)

    def u32(self, slot: int, default: int = 0) -> Any:
        return self._get(slot, 4, _u32, default)

    def i32(self, slot: int, default: int = 0) -> Any:
        return self._get(slot, 4, _i32, default)

    def u64(self, slot: int, default: int = 0) -> Any:
        return self._get(slot, 8, _u64, default)

    def i64(self, slot: int, default: int = 0) -> Any:
        return self._get(slot, 8, _i64, default)

    def f32(self, slot: int, default: float = 0.0) -> Any:
        return self._get(slot, 4, _f32, default)

    def f64(self, slot: int, default: float = 0.0) -> Any:
        return self._get(slot, 8, _f64, default)

    def struct(self, slot: int, fmt: str, name: str | None = None) -> tuple[Any, ...] | None:
        """An inline struct field unpacked with ``fmt`` (e.g. ``'<QQ'``), ``None`` when absent."""
        st = struct.Struct(fmt)
        p = self._field(slot, st.size, name)
        return st.unpack_from(self.fb.data, p) if p else None

    # -- references ----------------------------------------------------------------------
    def string(self, slot: int, default: str | None = None, name: str | None = None) -> str | None:
        pos = self._ref(slot, name)
        return self.fb.string_at(pos, self._p(name, slot)) if pos else default

    def table(self, slot: int, name: str | None = None) -> "Table | None":
        pos = self._ref(slot, name)
        return self.fb.table_at(pos, self._p(name, slot)) if pos else None

    def union(self, slot: int, name: str | None = None) -> tuple[int, "Table | None"]:
        """``(type, table)`` of the union whose type tag is in ``slot`` and value in ``slot + 1``.

        Type 0 means NONE (``(0, None)``). A type tag without a value reads as ``(type, None)``.
        """
        kind = self.u8(slot)
        if not kind:
            return 0, None
        pos = self._ref(slot + 1, name)
        return kind, (self.fb.table_at(pos, self._p(name, slot + 1)) if pos else None)

    # -- vectors -------------------------------------------------------------------------
    def vector(self, slot: int, elem_size: int = 4, name: str | None = None) -> tuple[int, int]:
        """``(first element position, count)``; ``(0, 0)`` when the field is absent."""
        pos = self._ref(slot, name)
        if not pos:
            return 0, 0
        return self.fb.vector_at(pos, elem_size, self._p(name, slot))

    def vector_len(self, slot: int, name: str | None = None) -> int:
        """Element count of a vector field (0 when absent)."""
        return self.vector(slot, 0, name)[1]

    def scalars(self, slot: int, fmt: str, name: str | None = None) -> tuple[Any, ...]:
        """A vector of scalars in one ``struct.unpack_from`` call (``fmt`` is one code, e.g. ``'q'``)."""
        start, n = self.vector(slot, _SIZES[fmt], name)
        if not n:
            return ()
        return struct.unpack_from(f"<{n}{fmt}", self.fb.data, start)

    def bytes(self, slot: int, name: str | None = None) -> memoryview:
        """A ``[ubyte]`` vector as a zero-copy memoryview (empty when absent)."""
        start, n = self.vector(slot, 1, name)
        return memoryview(self.fb.data)[start:start + n] if n else memoryview(b"")

    def byte_span(self, slot: int, name: str | None = None) -> tuple[int, int]:
        """``(absolute start, length)`` of a ``[ubyte]`` vector, without touching the bytes."""
        return self.vector(slot, 1, name)

    def tables(self, slot: int, name: str | None = None) -> list["Table"]:
        """A vector of tables, each with path ``<name>[i]``."""
        start, n = self.vector(slot, 4, name)
        if not n:
            return []
        fb = self.fb
        offs = struct.unpack_from(f"<{n}I", fb.data, start)
        label = name or f"field{slot}"
        path = self.path
        table_at = fb.table_at
        return [table_at(start + 4 * i + o, (path, label, i)) for i, o in enumerate(offs)]

    def strings(self, slot: int, name: str | None = None) -> list[str]:
        start, n = self.vector(slot, 4, name)
        if not n:
            return []
        fb = self.fb
        offs = struct.unpack_from(f"<{n}I", fb.data, start)
        label = name or f"field{slot}"
        return [fb.string_at(start + 4 * i + o, (self.path, label, i)) for i, o in enumerate(offs)]

    def structs(self, slot: int, fmt: str, name: str | None = None) -> list[tuple[Any, ...]]:
        """A vector of inline structs, each unpacked with ``fmt`` (e.g. ``'<QQ'``)."""
        st = struct.Struct(fmt)
        start, n = self.vector(slot, st.size, name)
        return [st.unpack_from(self.fb.data, start + i * st.size) for i in range(n)]

    def map_tables(self, slot: int, fn: Callable[["Table"], Any], name: str | None = None) -> list[Any]:
        """``[fn(t) for t in tables(slot)]`` (convenience for readers)."""
        return [fn(t) for t in self.tables(slot, name)]

    # -- by field name (etlens.schema.*_fbs) ----------------------------------------------
    def get(self, f: Field) -> Any:
        """Scalar field ``f`` (its schema default when absent), e.g. ``t.get(Program.version)``."""
        offs = self.offs
        slot = f.slot
        if slot < len(offs):
            off = offs[slot]
            if off:
                if off + f.size > self.room:
                    self._outside(slot, off, f.size, f.name)
                return _UNPACK[f.fmt](self.fb.data, self.pos + off)[0]
        return f.default

    def text(self, f: Field, default: str | None = None) -> str | None:
        """String field ``f`` (``default`` when absent)."""
        return self.string(f.slot, default, f.name)

    def child(self, f: Field) -> "Table | None":
        """Table field ``f`` (``None`` when absent)."""
        return self.table(f.slot, f.name)

    def children(self, f: Field) -> list["Table"]:
        """Vector-of-tables field ``f``, each table with path ``<f.name>[i]``."""
        return self.tables(f.slot, f.name)

    def texts(self, f: Field) -> list[str]:
        """Vector-of-strings field ``f``."""
        return self.strings(f.slot, f.name)

    def items(self, f: Field) -> tuple[Any, ...]:
        """Vector-of-scalars field ``f`` as a tuple (one ``struct.unpack_from``)."""
        return self.scalars(f.slot, f.fmt, f.name)

    def variant(self, f: Field) -> tuple[int, "Table | None"]:
        """Union field ``f``: ``(tag, table)``, ``(0, None)`` for NONE (see :meth:`union`)."""
        return self.union(f.slot, f.name)

    def blob(self, f: Field) -> memoryview:
        """``[ubyte]`` field ``f`` as a zero-copy memoryview."""
        return self.bytes(f.slot, f.name)

    def blob_span(self, f: Field) -> tuple[int, int]:
        """``(absolute start, length)`` of ``[ubyte]`` field ``f``."""
        return self.vector(f.slot, 1, f.name)
