"""Which bytes of a FlatBuffer belong to which table: an exact, byte-for-byte layout map.

A FlatBuffer is a heap of objects (tables, their vtables, vectors, strings) addressed by
offsets. :func:`flatbuffer_layout` walks every object reachable from the root, guided by a
generated schema module of :mod:`etlens.schema` (``program_fbs`` …), and gives each object's
bytes to a *group* chosen by the caller from the object's field path (``("execution_plan", 0,
"values", 12)`` …). Every byte of ``[start, end)`` ends up in exactly one group: bytes no object
claims (alignment padding between objects, the root offset and identifier) go to ``"padding"`` and
``"header"``. A vtable shared by many tables goes to the first table that uses it.

The map is what ``etlens size`` uses to split the program FlatBuffer by table so the parts add up
exactly to the file size. Example::

    from etlens.readers.layout import flatbuffer_layout
    from etlens.schema import program_fbs
    groups = flatbuffer_layout(data, program_fbs, "Program", lambda path: str(path[0]) if path else "root",
                               end=program_size)
    sum(groups.values()) == program_size   # True
"""

from __future__ import annotations

import struct
from types import ModuleType
from typing import Any, Callable

from ._flatbuffers import FlatBuffer, Table

__all__ = ["flatbuffer_layout"]

_u32 = struct.Struct("<I").unpack_from
_MAX_OBJECTS = 5_000_000


def flatbuffer_layout(data: Any, schema: ModuleType, root_table: str, group: Callable[[tuple[Any, ...]], str], *,
                      start: int = 0, end: int | None = None, name: str = "<bytes>",
                      size_prefixed: bool = False, reserved: tuple[tuple[int, int, str], ...] = ()) -> dict[str, int]:
    """``{group: bytes}`` over ``data[start:end]`` whose values sum to ``end - start`` exactly.

    ``group(path)`` names the group of the object at ``path`` (a tuple of field names and vector
    indices from the root; ``()`` is the root table itself). ``reserved`` spans ``(lo, hi, group)``
    are claimed first (e.g. the ``.pte`` extended header inside the FlatBuffer region). Raises the reader's
    :class:`~etlens.errors.FormatError` / ``TruncatedFileError`` on offsets outside the buffer.
    """
    end = len(data) if end is None else end
    fb = FlatBuffer(data, name, start=start, end=end, size_prefixed=size_prefixed)
    spans: list[tuple[int, int, str]] = [(start, fb.start + 8, "header"), *reserved]
    seen: set[int] = set()

    def claim(pos: int, n: int, path: tuple[Any, ...]) -> None:
        if n > 0 and pos not in seen:
            seen.add(pos)
            spans.append((pos, pos + n, group(path)))
            if len(spans) > _MAX_OBJECTS:
                raise _TooMany

    def walk(t: Table, cls: Any, path: tuple[Any, ...]) -> None:
        claim(t.pos, t.tlen, path)
        vt = t.pos - struct.unpack_from("<i", data, t.pos)[0]
        claim(vt, 4 + 2 * len(t.offs), path)
        for f in cls.FIELDS:
            if f.kind in ("scalar", "struct"):
                continue
            sub = path + (f.name,)
            if f.kind == "string":
                p = t._ref(f.slot, f.name)
                if p:
                    fb.string_at(p, sub)
                    claim(p, 4 + _u32(data, p)[0] + 1, sub)
            elif f.kind == "table":
                child = t.table(f.slot, f.name)
                if child is not None:
                    walk(child, getattr(schema, f.type), sub)
            elif f.kind == "union":
                tag, child = t.union(f.slot, f.name)
                union = getattr(schema, f.type)
                if child is not None and 0 < tag < len(union.TABLES):
                    walk(child, getattr(schema, union.TABLES[tag]), sub)
            elif f.kind == "vector":
                esize = 4 if f.elem_kind in ("table", "string") else f.size
                first, n = t.vector(f.slot, esize, f.name)
                if not first:
                    continue
                claim(first - 4, 4 + n * esize, sub)
                if f.elem_kind == "table":
                    ecls = getattr(schema, f.type)
                    for i, child in enumerate(t.tables(f.slot, f.name)):
                        walk(child, ecls, sub + (i,))
                elif f.elem_kind == "string":
                    for i in range(n):
                        p = first + 4 * i
                        q = p + _u32(data, p)[0]
                        fb.string_at(q, sub)
                        claim(q, 4 + _u32(data, q)[0] + 1, sub + (i,))

    try:
        walk(fb.root(root_table), getattr(schema, root_table), ())
    except _TooMany:
        pass
    spans.sort()
    out: dict[str, int] = {}
    cursor = start
    for lo, hi, g in spans:
        lo, hi = max(lo, cursor), min(hi, end)
        if hi <= lo:
            continue
        if lo > cursor:
            out["padding"] = out.get("padding", 0) + lo - cursor
        out[g] = out.get(g, 0) + hi - lo
        cursor = hi
    if end > cursor:
        out["padding"] = out.get("padding", 0) + end - cursor
    return out


class _TooMany(Exception):
    """More objects than :data:`_MAX_OBJECTS`: the rest count as padding (a corrupt or hostile file)."""
