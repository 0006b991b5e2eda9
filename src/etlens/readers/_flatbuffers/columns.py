"""The FlatBuffer engine's column-wise front-end: one field of many tables per numpy gather (the ETDump hot path).

A FlatBuffer table starts with a signed 32-bit offset back to its *vtable*; the vtable lists,
per field, the byte offset of that field inside the table (0 = absent, use the default). An
ETDump holds one small table per event, so reading 150k events one object at a time costs
seconds in Python. Here every accessor takes a **numpy array of table positions** and reads the
same field of all of them at once with gathers over one ``uint8`` view of the file.

:class:`FB` is a :class:`~etlens.readers._flatbuffers.FlatBuffer` (the engine's buffer: its
``name``, ``what``, ``hint`` and error rule :meth:`~etlens.readers._flatbuffers.FlatBuffer.fail`),
so a file can be read table by table and column-wise through one object. All positions are
bounds-checked against the buffer before they are gathered: a corrupt or truncated file raises
:class:`~etlens.errors.FormatError` / :class:`TruncatedFileError` naming the structure and offset
instead of an ``IndexError``.

Fields are named through the generated schema description :mod:`etlens.schema.etdump_fbs`
(a :class:`~etlens.schema.fbs.Field` carries the slot, type and default). Example::

    from etlens.schema.etdump_fbs import ETDump, RunData
    fb = FB(data, path="run.etdp")
    runs = fb.vector_tables(int(fb.target(root, ETDump.run_data)[0]), "ETDump.run_data")
    bundled = fb.get(runs, RunData.bundled_input_index)      # int32 column, -1 where absent
"""

from __future__ import annotations

import mmap
import os
from typing import Any

import numpy as np
import numpy.typing as npt

from ...errors import FormatError, TruncatedFileError
from ...schema import etdump_fbs as efb
from ...schema.fbs import Field
from ..base import file_errors
from . import FlatBuffer

#: a numpy column (positions, offsets or values, one per table)
Arr = npt.NDArray[Any]

__all__ = ["FB", "Layout", "open_etdump", "ETDUMP_HINT"]

#: what to do about a bad ETDump (the end of its error messages)
ETDUMP_HINT = "re-copy it from the device, or rerun and call write_etdump_result_to_file"

#: ``struct`` code of a schema field -> the kind :meth:`FB.scalar` reads.
_KIND = {"B": "u8", "?": "u8", "b": "i8", "i": "i32", "I": "u32", "q": "i64", "Q": "u64", "f": "f4", "d": "f8"}

_R2 = np.arange(2, dtype=np.int64)
_R4 = np.arange(4, dtype=np.int64)
_R8 = np.arange(8, dtype=np.int64)


def _unique(v: Arr, limit: int = 16) -> tuple[Arr, Arr, Arr]:
    """``np.unique(v, return_index=True, return_inverse=True)`` (same arrays), fast when ``v`` holds
    few distinct values: one comparison pass per value instead of a sort of the whole column.

    The columns :class:`FB` deduplicates are like that: a writer shares two or three vtables among
    all the tables of a kind, and a run repeats a handful of event names. A first sample with more
    than ``limit`` distinct values goes straight to ``np.unique``.
    """
    n = len(v)
    if n == 0 or len(np.unique(v[:512])) > limit:
        return _np_unique(v)
    inv = np.full(n, -1, dtype=np.int64)
    vals: list[Any] = []
    firsts: list[int] = []
    pos = 0
    while True:
        if len(vals) == limit:
            return _np_unique(v)
        inv[v == v[pos]] = len(vals)
        vals.append(v[pos])
        firsts.append(pos)
        open_ = inv < 0
        pos = int(open_.argmax())
        if not open_[pos]:
            break
    uniq = np.array(vals, dtype=v.dtype)
    order = np.argsort(uniq, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return uniq[order], np.array(firsts, dtype=np.int64)[order], rank[inv]


def _np_unique(v: Arr) -> tuple[Arr, Arr, Arr]:
    uniq, first, inv = np.unique(v, return_index=True, return_inverse=True)
    return uniq, first, np.asarray(inv).ravel()


class FB(FlatBuffer):
    """A read-only FlatBuffer with vectorised readers (positions are ``int64`` arrays).

    ``data`` is the whole file (positions are absolute); its header is the caller's to check
    (:func:`open_etdump` does it for an ETDump).
    """

    __slots__ = ("buf", "size", "path", "_views")

    def __init__(self, data: Any, path: str = "<bytes>", *, what: str = "ETDump", hint: str = ETDUMP_HINT) -> None:
        super().__init__(data, path, what=what, hint=hint, header=False)
        self.buf = np.frombuffer(data, dtype=np.uint8)
        self.size = len(self.buf)
        self.path = path
        self._views: dict[tuple[str, int], Arr] = {}

    # -- bounds -------------------------------------------------------------------------------
    def check(self, pos: Arr, width: int, what: str) -> None:
        """Raise (the engine's :meth:`fail`) if any of ``pos .. pos+width`` falls outside the buffer."""
        if pos.size == 0:
            return
        lo, hi = int(pos.min()), int(pos.max())
        if lo < 0 or hi + width > self.size:
            bad = hi if hi + width > self.size else lo
            truncated = bad + width > self.size and bad < (1 << 32)
            self.fail(what, f"{width} byte(s) {'reach past the end of the data' if truncated else 'lie outside it'}",
                      bad, truncated=truncated)

    # -- scalar gathers -------------------------------------------------------------------------
    def _view(self, dtype: str, width: int, shift: int) -> Arr:
        """``self.data`` seen as ``dtype`` starting at byte ``shift`` (cached)."""
        key = (dtype, shift)
        v = self._views.get(key)
        if v is None:
            count = (self.size - shift) // width
            v = self._views[key] = np.frombuffer(self.data, dtype=dtype, count=max(count, 0), offset=shift)
        return v

    def _gather(self, pos: Arr, rng: Arr, dtype: str, what: str) -> Arr:
        # FlatBuffers align scalars to their size, so almost always one aligned 1-D gather does;
        # misaligned positions (hand-made files) are read from a view shifted by the residue.
        pos = np.asarray(pos, dtype=np.int64)
        width = len(rng)
        self.check(pos, width, what)
        if pos.size == 0:
            return np.zeros(0, dtype=dtype)
        res = pos & (width - 1)
        if not res.any():
            aligned: Arr = self._view(dtype, width, 0)[pos // width]
            return aligned
        out = np.empty(pos.shape, dtype=dtype)
        for r in np.unique(res).tolist():
            m = res == r
            out[m] = self._view(dtype, width, r)[(pos[m] - r) // width]
        return out

    def u8(self, pos: Any, what: str = "byte") -> Arr:
        pos = np.asarray(pos, dtype=np.int64)
        self.check(pos, 1, what)
        out: Arr = self.buf[pos]
        return out

    def u16(self, pos: Any, what: str = "u16") -> Arr:
        return self._gather(pos, _R2, "<u2", what)

    def i32(self, pos: Any, what: str = "i32") -> Arr:
        return self._gather(pos, _R4, "<i4", what)

    def u32(self, pos: Any, what: str = "u32") -> Arr:
        return self._gather(pos, _R4, "<u4", what)

    def i64(self, pos: Any, what: str = "i64") -> Arr:
        return self._gather(pos, _R8, "<i8", what)

    def u64(self, pos: Any, what: str = "u64") -> Arr:
        return self._gather(pos, _R8, "<u8", what)

    def f32(self, pos: Any, what: str = "f32") -> Arr:
        return self._gather(pos, _R4, "<f4", what)

    def f64(self, pos: Any, what: str = "f64") -> Arr:
        return self._gather(pos, _R8, "<f8", what)

    # -- tables -------------------------------------------------------------------------------
    def layout(self, tables: Arr, what: str = "table") -> "Layout":
        """Vtables of ``tables`` decoded once (a writer shares a few vtables among thousands of tables)."""
        return Layout(self, np.asarray(tables, dtype=np.int64), what)

    def field_offset(self, tables: Any, index: int, what: str = "table", layout: "Layout | None" = None) -> Arr:
        """Byte offset of field ``index`` inside each table (0 where absent)."""
        if layout is not None:
            return layout.fo(index)
        tables = np.asarray(tables, dtype=np.int64)
        if tables.size == 0:
            return np.zeros(0, dtype=np.int64)
        vt = tables - self.i32(tables, f"{what} header").astype(np.int64)
        vt_size = self.u16(vt, f"{what} vtable").astype(np.int64)
        slot = 4 + 2 * index
        has = vt_size > slot
        fo = np.zeros(tables.shape, dtype=np.int64)
        if has.any():
            fo[has] = self.u16(vt[has] + slot, f"{what} vtable field {index}")
        return fo

    def scalar(self, tables: Any, index: int, kind: str, default: Any, what: str = "table",
               layout: "Layout | None" = None) -> Arr:
        """Field ``index`` of scalar type ``kind`` (u8/i32/u32/i64/u64) with its default."""
        tables = np.asarray(tables, dtype=np.int64)
        fo = self.field_offset(tables, index, what, layout)
        dtype = {"u8": np.uint8, "i8": np.int8, "i32": np.int32, "u32": np.uint32, "i64": np.int64,
                 "u64": np.uint64, "f4": np.float32, "f8": np.float64}[kind]
        out = np.full(tables.shape, default, dtype=dtype)
        has = fo != 0
        if has.any():
            pos = tables[has] + fo[has]
            reader = {"u8": self.u8, "i8": self.u8, "i32": self.i32, "u32": self.u32, "i64": self.i64,
                      "u64": self.u64, "f4": self.f32, "f8": self.f64}[kind]
            vals = reader(pos, f"{what} field {index}")
            out[has] = vals.view(np.int8) if kind == "i8" else vals
        return out

    def get(self, tables: Arr, f: Field, layout: "Layout | None" = None) -> Arr:
        """Scalar field ``f`` of every table (its schema default where absent)."""
        kind = _KIND[f.fmt]
        return self.scalar(tables, f.slot, kind, f.default, f.path, layout)

    def target(self, tables: Arr, f: Field, layout: "Layout | None" = None) -> Arr:
        """Absolute position of what offset field ``f`` (table, vector, string) points to; 0 = absent."""
        return self.ref(tables, f.slot, f.path, layout)

    def ref(self, tables: Any, index: int, what: str = "table", layout: "Layout | None" = None) -> Arr:
        """Absolute position of the table/vector/string referenced by field ``index`` (0 = absent)."""
        tables = np.asarray(tables, dtype=np.int64)
        fo = self.field_offset(tables, index, what, layout)
        out = np.zeros(tables.shape, dtype=np.int64)
        has = fo != 0
        if has.any():
            pos = tables[has] + fo[has]
            out[has] = pos + self.u32(pos, f"{what} field {index} offset").astype(np.int64)
            self.check(out[has], 4, f"{what} field {index} target")
        return out

    def vector(self, vec_pos: int, what: str) -> tuple[int, int]:
        """``(first element position, length)`` of the vector at ``vec_pos``."""
        n = int(self.u32(np.array([vec_pos]), f"{what} length")[0])
        start = vec_pos + 4
        return start, n

    def vector_tables(self, vec_pos: int, what: str, elem_size: int = 4) -> Arr:
        """Positions of the tables referenced by a vector of offsets."""
        start, n = self.vector(vec_pos, what)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        self.check(np.array([start]), n * 4, f"{what} ({n} entries)")
        slots = start + 4 * np.arange(n, dtype=np.int64)
        rel = np.frombuffer(self.data, dtype="<u4", count=n, offset=start)
        tables = slots + rel.astype(np.int64)
        self.check(tables, 4, f"{what} entry")
        return tables

    # -- strings --------------------------------------------------------------------------------
    def string_spans(self, pos: Arr, what: str = "string") -> tuple[Arr, Arr]:
        """``(start, length)`` of the strings at ``pos`` (``pos`` 0 = absent → length -1)."""
        pos = np.asarray(pos, dtype=np.int64)
        lens = np.full(pos.shape, -1, dtype=np.int64)
        starts = np.zeros(pos.shape, dtype=np.int64)
        has = pos != 0
        if has.any():
            lens[has] = self.u32(pos[has], f"{what} length")
            starts[has] = pos[has] + 4
            self.check(starts[has] + lens[has], 0, f"{what} bytes")
        return starts, lens

    def intern(self, starts: Arr, lens: Arr, table: dict[bytes, int],
               names: list[str]) -> Arr:
        """Ids (into ``names``) of each byte string; -1 where absent. Extends ``table``/``names``.

        Vectorised: equal strings are found with one ``np.unique`` over a fixed-width view, so
        150k event names cost a few milliseconds instead of 150k Python slices.
        """
        ids = np.full(starts.shape, -1, dtype=np.int32)
        has = lens >= 0
        if not has.any():
            return ids
        st, ln = starts[has], lens[has]
        width = int(ln.max())
        if width == 0:
            uniq_bytes, inv = [b""], np.zeros(len(st), dtype=np.int64)
        elif width <= 256:
            w8 = (width + 7) // 8 * 8
            mat = self._string_bytes(st, ln, w8)
            # a 64-bit hash per string (wrapping multiply-add over 8-byte words, plus the length),
            # then one integer unique; every group is verified byte-for-byte against its first
            # member, and a collision falls back to the exact (slower) row-unique
            words = np.ascontiguousarray(mat).view("<u8")
            h = ln.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
            with np.errstate(over="ignore"):
                for k in range(words.shape[1]):
                    h = (h ^ words[:, k]) * np.uint64(0x100000001B3) + np.uint64(k + 1)
            _, first, inv = _unique(h)
            rep = first[inv]
            if not (np.array_equal(ln, ln[rep]) and np.array_equal(words, words[rep])):
                key = np.concatenate([ln.astype("<u4").view(np.uint8).reshape(-1, 4), mat], axis=1)
                key = np.ascontiguousarray(key).view(f"V{w8 + 4}").ravel()
                _, first, inv = np.unique(key, return_index=True, return_inverse=True)
            uniq_bytes = [bytes(self.buf[st[i]:st[i] + ln[i]]) for i in first]
        else:
            seen: dict[bytes, int] = {}
            uniq_bytes, inv_list = [], []
            for s, n in zip(st.tolist(), ln.tolist()):
                b = bytes(self.buf[s:s + n])
                at = seen.get(b)
                if at is None:
                    at = seen[b] = len(uniq_bytes)
                    uniq_bytes.append(b)
                inv_list.append(at)
            inv = np.asarray(inv_list, dtype=np.int64)
        remap = np.empty(len(uniq_bytes), dtype=np.int32)
        for i, b in enumerate(uniq_bytes):
            sid = table.get(b)
            if sid is None:
                sid = table[b] = len(names)
                names.append(b.decode("utf-8", errors="replace"))
            remap[i] = sid
        ids[has] = remap[np.asarray(inv).ravel()]
        return ids

    def _string_bytes(self, st: Arr, ln: Arr, w8: int) -> Arr:
        """The strings as rows of ``w8`` bytes, zero past each one's end (the input of :meth:`intern`).

        Rows are copied out of a strided ``w8``-byte window over the buffer with one 1-D index: no
        ``n x w8`` index matrix to build and gather through (the costly part of interning 60k event
        names). Strings within ``w8`` bytes of the buffer's end are read byte by byte, clamped.
        """
        n_win = self.size - w8 + 1
        tail = st >= n_win
        if n_win > 0:
            win = np.lib.stride_tricks.as_strided(self.buf, shape=(n_win, w8), strides=(1, 1), writeable=False)
            mat: Arr = win[np.where(tail, 0, st)] if tail.any() else win[st]
        else:
            mat = np.zeros((len(st), w8), dtype=np.uint8)
        if tail.any():
            idx = np.minimum(st[tail][:, None] + np.arange(w8, dtype=np.int64), self.size - 1)
            mat[tail] = self.buf[idx]   # bytes past a string's end are masked below
        # widths are <= 256, so int16 keeps the mask comparison narrow
        mat *= np.arange(w8, dtype=np.int16)[None, :] < ln.astype(np.int16)[:, None]
        return mat

    def string(self, pos: int, what: str = "string") -> str | None:
        """One string (``pos`` 0 = absent → None)."""
        if not pos:
            return None
        n = int(self.u32(np.array([pos]), f"{what} length")[0])
        self.check(np.array([pos + 4]), n, f"{what} bytes")
        return bytes(self.buf[pos + 4:pos + 4 + n]).decode("utf-8", errors="replace")


class Layout:
    """Field offsets of many tables through their (few, shared) vtables."""

    def __init__(self, fb: FB, tables: Arr, what: str) -> None:
        self.fb, self.what = fb, what
        if tables.size == 0:
            self.uvt = np.zeros(0, np.int64)
            self.inv = np.zeros(0, np.int64)
            self.sizes = np.zeros(0, np.int64)
            return
        vt = tables - fb.i32(tables, f"{what} header").astype(np.int64)
        self.uvt, _, self.inv = _unique(vt)
        self.sizes = fb.u16(self.uvt, f"{what} vtable").astype(np.int64)

    def fo(self, index: int) -> Arr:
        slot = 4 + 2 * index
        u = np.zeros(len(self.uvt), dtype=np.int64)
        has = self.sizes > slot
        if has.any():
            u[has] = self.fb.u16(self.uvt[has] + slot, f"{self.what} vtable field {index}")
        return u[self.inv]


# -- opening a dump (shared by the event reader and the fleet's column reader) ---------------------
def _open_bytes(path: str) -> bytes | mmap.mmap:
    with file_errors(path, "an .etdp file"):
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            if size == 0:
                return b""
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def open_etdump(source: str | os.PathLike[str] | bytes | bytearray | memoryview, *,
                path: str | None = None) -> tuple[FB, int]:
    """``(FB over the bytes, position of the ETDump root table)`` after checking the identifier and size prefix.

    The shared first step of :func:`read_etdump` and of the fleet's profile-column reader
    (:mod:`etlens.readers.etdump_columns`): a path is memory-mapped, bytes are used as they are.
    """
    data: bytes | bytearray | mmap.mmap
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source) if isinstance(source, memoryview) else source
        path = path or "<etdump bytes>"
    else:
        path = os.fspath(source)
        data = _open_bytes(path)
    n = len(data)
    if n < 8:
        raise TruncatedFileError(f"{path}: {n} bytes is too short for an ETDump (a FlatBuffer needs at least 12)")
    head = bytes(data[:12])
    if head[8:12] == efb.FILE_IDENTIFIER:
        declared = int.from_bytes(head[:4], "little")
        if declared + 4 > n:
            raise TruncatedFileError(
                f"{path}: size prefix says {declared + 4} bytes but the file has {n}; the ETDump is truncated "
                "(copy it again from the device, or rerun and call write_etdump_result_to_file)")
        base = 4
    elif head[4:8] == efb.FILE_IDENTIFIER:
        base = 0
    else:
        got = head[8:12] if len(head) >= 12 else head[4:8]
        raise FormatError(f"{path}: not an ETDump (identifier {got!r} at bytes 8-12, expected b'ED00'); "
                          "pass the .etdp file written by write_etdump_result_to_file")
    fb = FB(data, path)
    root = base + int.from_bytes(head[base:base + 4], "little")
    fb.check(np.array([root], dtype=np.int64), 4, "ETDump root table")
    return fb, root
