"""The profiling events of an ETDump as flat numpy columns: the fleet's fast path.

:func:`~etlens.readers.etdump.read_etdump` decodes every field of every event (debug values,
allocations, interned names) because the Inspector may ask for any of them. A device farm's dump
usually holds only ``ProfileEvent`` timings, the same few thousand events in every run, and
``etlens collect`` needs just their start/end ticks, instruction ids, delegate ids and names.
This reader decodes exactly that, for all runs at once:

1. the ``Event`` tables of every run (one vector gather), their vtables classified once: a writer
   shares a handful of vtables among all tables, so each field's offset is a lookup per vtable,
   not a read per table;
2. from the ``ProfileEvent`` tables, ``instruction_id``, ``chain_index``, ``delegate_debug_id_int``
   and ``start_time``/``end_time`` with one gather each, and the ``name`` and
   ``delegate_debug_id_str`` strings as (position, length) spans — not decoded;
3. :meth:`ProfileColumns.patterns` finds the runs whose events are *identical* apart from their
   timestamps (same ids, and the same name bytes, compared 4 bytes at a time over all runs at
   once). Only one run per pattern is turned into a :class:`~etlens.readers.etdump.RunEvents`
   (:meth:`ProfileColumns.run_events`, names interned) for the Inspector's block grouping; every
   other run reuses its grouping and only its timestamps are gathered.

A dump with ``DebugEvent`` s (intermediate outputs) is not read here (:func:`read_profile_columns`
returns None): its runs need the general reader.

Example::

    from etlens.readers.etdump_columns import read_profile_columns
    cols = read_profile_columns("run.etdp")          # None: use read_etdump
    pattern, templates, _ = cols.patterns()          # pattern id per run (-1: no profile event)
    run = cols.run_events(templates[0], {}, strings := [])
    cols.start_time[cols.bounds[3]:cols.bounds[4]]   # run 3's start ticks
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..schema import etdump_fbs as efb
from ..schema.fbs import Field
from ._flatbuffers.columns import FB, Arr
from .etdump import PROFILE, ETDump, RunEvents, open_etdump

__all__ = ["ProfileColumns", "DumpColumns", "read_profile_columns", "string_words", "string_masks"]

#: more distinct vtables than this among one kind of table: classify them with a sort instead of compares
_FEW_VTABLES = 16

#: longest string compared as a row of words; longer ones (not names a runtime writes) are interned instead
_MAX_WORDS_BYTES = 1024

#: byte masks of the first 0..4 bytes of a little-endian u32 word
_MASKS = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], dtype=np.uint32)


class _Vtables:
    """The vtable of each of many tables, classified: ``cls[i]`` indexes ``uvt`` (None: all share ``uvt[0]``)."""

    def __init__(self, fb: FB, tables: Arr, what: str) -> None:
        self.fb, self.what, self.n = fb, what, len(tables)
        self.cls: Arr | None = None
        if not self.n:
            self.uvt = np.zeros(0, np.int64)
            self.sizes = np.zeros(0, np.int64)
            return
        vt = tables - fb.i32(tables, f"{what} header")
        covered = vt == vt[0]
        if covered.all():
            self.uvt = vt[:1].copy()
        else:
            # a few vtables: one compare per vtable (no sort); many (a hand-made file): one sort
            uniq = [int(vt[0])]
            cls = np.zeros(self.n, np.uint8)
            while len(uniq) <= _FEW_VTABLES:
                i = int(np.argmin(covered))
                if covered[i]:
                    break
                m = vt == vt[i]
                cls[m] = len(uniq)
                covered |= m
                uniq.append(int(vt[i]))
            if len(uniq) > _FEW_VTABLES:
                u, inv = np.unique(vt, return_inverse=True)
                self.uvt, self.cls = u, inv.ravel()
            else:
                self.uvt, self.cls = np.asarray(uniq, np.int64), cls
        self.sizes = fb.u16(self.uvt, f"{what} vtable").astype(np.int64)

    def slot_offsets(self, slot: int) -> Arr:
        """Byte offset of field ``slot`` inside a table of each vtable (0: absent)."""
        at = 4 + 2 * slot
        out = np.zeros(len(self.uvt), np.int64)
        has = self.sizes > at
        if has.any():
            out[has] = self.fb.u16(self.uvt[has] + at, f"{self.what} vtable field {slot}")
        return out

    def field_offsets(self, slot: int) -> Arr:
        """Byte offset of field ``slot`` inside each table (0: absent)."""
        per = self.slot_offsets(slot)
        if self.cls is None:
            return np.full(self.n, per[0] if len(per) else 0, np.int64)
        out: Arr = per[self.cls]
        return out


#: widest table a record gather reads at once; wider (a corrupt vtable's offsets) → one gather per field
_MAX_RECORD = 256


def _fields(fb: FB, tables: Arr, vts: _Vtables, fields: dict[str, tuple[Field, str]]) -> dict[str, Arr]:
    """Scalar fields of every table, ``{key: column}``; ``fields`` maps key -> (field, numpy format).

    Every table is copied once as a fixed-size record (a gather over a sliding-window view of the
    bytes); each vtable's tables are then seen through a structured dtype placing each field at
    that vtable's offset — the columns are views, no per-field gathers. Absent fields read their
    schema default. Offset fields (strings, tables) read as their raw ``u32`` offset (0: absent).
    """
    n = len(tables)
    per = {k: vts.slot_offsets(f.slot) for k, (f, _) in fields.items()}
    width = {k: np.dtype(fmt).itemsize for k, (_, fmt) in fields.items()}
    size = max([4] + [int(per[k].max()) + width[k] for k in fields if len(per[k])])

    def default(k: str) -> Arr:
        f, fmt = fields[k]
        return np.full(n, 0 if f.kind != "scalar" else f.default, dtype=fmt)

    if not n:
        return {k: default(k) for k in fields}
    out: dict[str, Arr] = {}
    if size > _MAX_RECORD:
        out = {k: default(k) for k in fields}
        for k, (f, fmt) in fields.items():
            fo = vts.field_offsets(f.slot)
            has = fo != 0
            if has.any():
                out[k][has] = fb._gather(tables[has] + fo[has], np.arange(width[k]), fmt, f.path)
        return out
    fb.check(tables, size, f"{vts.what} table")
    recs = np.lib.stride_tricks.sliding_window_view(fb.buf, size).view(f"V{size}")[tables].ravel()

    def dtype(j: int) -> tuple[list[str], np.dtype[Any]]:
        present = [k for k in fields if per[k][j]]
        return present, np.dtype({"names": present, "formats": [fields[k][1] for k in present],
                                  "offsets": [int(per[k][j]) for k in present], "itemsize": size})

    # the most common vtable is read for every table (contiguous copies); the others patch their rows
    cls = vts.cls
    main = 0 if cls is None else int(np.argmax(np.bincount(cls, minlength=len(vts.uvt))))
    present, dt = dtype(main)
    view = recs.view(dt)
    for k in fields:
        out[k] = np.ascontiguousarray(view[k]) if k in present else default(k)
    if cls is not None:
        for j in range(len(vts.uvt)):
            if j == main:
                continue
            rows = np.flatnonzero(cls == j)
            here, dtj = dtype(j)
            sub = recs[rows].view(dtj)
            for k, (f, _) in fields.items():
                if k in here:
                    out[k][rows] = sub[k]
                elif k in present:
                    out[k][rows] = 0 if f.kind != "scalar" else f.default
    return out


def _spans(fb: FB, tables: Arr, vts: _Vtables, f: Field, rel: Arr) -> tuple[Arr, Arr]:
    """``(first byte, length)`` of string field ``f`` of every table (length -1: absent) from its raw offsets."""
    starts = np.zeros(len(tables), np.int64)
    lens = np.full(len(tables), -1, np.int64)
    fo = vts.slot_offsets(f.slot)
    if not fo.any():
        return starts, lens
    at = vts.field_offsets(f.slot)
    has = at != 0
    whole = bool(has.all())
    target = tables + at + rel.astype(np.int64)
    if not whole:
        target = target[has]
    n = fb.u32(target, f"{f.path} length").astype(np.int64)
    fb.check(target + 4 + n, 0, f"{f.path} bytes")
    if whole:
        return target + 4, n
    starts[has], lens[has] = target + 4, n
    return starts, lens


def string_masks(lens: Arr, words: int) -> Arr:
    """``(n, words)`` uint32 masks keeping the first ``lens[i]`` bytes of row ``i`` (absent: -1 → none)."""
    width = max(int(lens.max()) if len(lens) else 0, 0)
    k = np.arange(words, dtype=np.int64)
    table = _MASKS[np.clip(np.arange(width + 1, dtype=np.int64)[:, None] - 4 * k[None, :], 0, 4)]
    out: Arr = table[np.maximum(lens, 0)]
    return out


def string_words(fb: FB, starts: Arr, lens: Arr, *, masked: bool = True) -> Arr:
    """The bytes of many strings as a ``(n, words)`` uint32 matrix, zero past each string's end.

    Two strings are equal exactly when their lengths and rows are: a cheap, exact comparison of
    thousands of names without decoding them. Strings in a FlatBuffer are 4-byte aligned (after
    their u32 length), so a row is one copy of ``words`` consecutive words (a gather over a
    sliding-window view, not one per byte); unaligned ones are read byte by byte. ``masked=False``
    leaves the bytes after each string's end in place (compare with :func:`string_masks` applied).
    """
    n = len(starts)
    width = int(lens.max()) if n else 0
    if not n or width <= 0:
        return np.zeros((n, 1), np.uint32)
    words = -(-width // 4)
    u32 = np.frombuffer(fb.data, dtype="<u4", count=fb.size // 4)
    first = starts >> 2
    if not (starts & 3).any() and len(u32) >= words and int(first.max()) <= len(u32) - words:
        rows = np.lib.stride_tricks.sliding_window_view(u32, words).view(f"V{4 * words}")
        out: Arr = rows[first].view("<u4").reshape(n, words)
    else:
        b = np.arange(words * 4, dtype=np.int64)
        idx = starts[:, None] + b[None, :]
        np.minimum(idx, fb.size - 1, out=idx)          # past the buffer's end: masked below
        out = np.ascontiguousarray(fb.buf[idx]).view("<u4").reshape(n, words)
    if masked:
        out &= string_masks(lens, words)
    return out


@dataclass(eq=False)
class ProfileColumns:
    """The ``ProfileEvent`` s of every run of one ETDump, runs concatenated (file order inside a run).

    ``bounds[r]:bounds[r + 1]`` are run ``r``'s rows; ``run_names``/``bundled`` are per run. Per
    row: ``instruction_id``, ``chain_index``, ``delegate_id_int`` (-1: unset), ``start_time``,
    ``end_time`` (raw ticks, uint64), and the spans (first byte, length; -1: absent) of ``name``
    and ``delegate_debug_id_str`` in :attr:`fb`.
    """

    path: str
    version: int
    run_names: list[str]
    bundled: list[int]
    bounds: Arr
    instruction_id: Arr
    chain_index: Arr
    delegate_id_int: Arr
    name_start: Arr
    name_len: Arr
    dstr_start: Arr
    dstr_len: Arr
    start_time: Arr
    end_time: Arr
    fb: FB

    @property
    def events(self) -> int:
        """Profile events in the dump (all runs)."""
        return len(self.start_time)

    def run_length(self, r: int) -> int:
        return int(self.bounds[r + 1] - self.bounds[r])

    def patterns(self) -> tuple[Arr, list[int], list[bytes]]:
        """``(pattern per run, template run per pattern, signature per pattern)``.

        Two runs share a pattern when their profile events agree on everything but the timestamps:
        instruction ids, chain indices, delegate ids and the bytes of names and delegate id strings
        — so the Inspector's grouping of one run (the pattern's template) holds for all of them.
        Runs without profile events have pattern -1. Templates are in run order. A pattern's
        signature (its events without timestamps, as bytes) is equal in two dumps exactly when
        their runs of that pattern are, so callers can key caches on it.
        """
        nruns = len(self.run_names)
        pattern = np.full(nruns, -1, np.int64)
        # runs can share a pattern only with the same event count, name and bundled input
        groups: dict[tuple[int, str, int], list[int]] = {}
        for r, c in enumerate(np.diff(self.bounds).tolist()):
            if c:
                groups.setdefault((c, self.run_names[r], self.bundled[r]), []).append(r)
        assign: dict[int, tuple[int, bytes]] = {}
        for (c, _, _), runs in groups.items():
            parts, extra = self._key_parts(np.asarray(runs, np.int64), c)
            rest = np.arange(len(runs))
            while rest.size:
                t = int(rest[0])
                whole = len(rest) == len(runs)      # first pass: no row copies
                same = np.ones(len(rest), bool)
                tmpl = []
                for part, lens in parts:
                    row = part[t]
                    if lens is None:
                        if len(rest) > 1:
                            same &= ((part if whole else part[rest]) == row).all(axis=1)
                    else:       # string bytes: compared up to the template's lengths (lengths compared too)
                        mask = string_masks(lens[t], part.shape[1] // c).ravel()
                        row = row & mask
                        if len(rest) > 1:
                            diff = np.bitwise_xor(part if whole else part[rest], row)
                            np.bitwise_and(diff, mask, out=diff)
                            same &= ~diff.any(axis=1)
                    tmpl.append(row.tobytes())
                sig = b"P" + repr((self.run_names[runs[t]], self.bundled[runs[t]], c)).encode() + extra + \
                    b"".join(tmpl)
                for i in rest[same].tolist():
                    assign[runs[i]] = (runs[t], sig)
                rest = rest[~same]
        templates = sorted({t for t, _ in assign.values()})
        pid = {t: i for i, t in enumerate(templates)}
        sigs: list[bytes] = [b""] * len(templates)
        for r, (t, sig) in assign.items():
            pattern[r] = pid[t]
            sigs[pid[t]] = sig
        return pattern, templates, sigs

    def _key_parts(self, runs: Arr, c: int) -> tuple[list[tuple[Arr, Arr | None]], bytes]:
        """Everything but the timestamps of ``runs`` (each with ``c`` events): ``(2-D array, lengths)``
        pairs, one row per run; ``lengths`` (runs x c) is set for string bytes, which are unmasked.
        The bytes returned go into the signature: the strings behind interned ids (very long strings)."""
        lo = self.bounds[runs]
        m = len(runs)
        if (np.diff(lo) == c).all():      # consecutive runs: views, no copies
            rows: Arr | slice = slice(int(lo[0]), int(lo[0]) + c * m)
        else:
            rows = (lo[:, None] + np.arange(c, dtype=np.int64)[None, :]).ravel()
        out: list[tuple[Arr, Arr | None]] = [
            (col[rows].reshape(m, c), None)
            for col in (self.instruction_id, self.chain_index, self.delegate_id_int, self.name_len, self.dstr_len)]
        strings = [(self.name_start, self.name_len)]
        if (self.dstr_len[rows] > 0).any():
            strings.append((self.dstr_start, self.dstr_len))
        extra = b""
        for start, lens in strings:
            ln = lens[rows]
            if ln.size and int(ln.max()) > _MAX_WORDS_BYTES:   # very long strings: compare interned ids
                names: list[str] = []
                ids = self.fb.intern(start[rows], ln, {}, names)
                out.append((ids.reshape(m, c), None))
                extra += "\0".join(names).encode("utf-8", "surrogatepass") + b"\1"
                continue
            words = string_words(self.fb, start[rows], ln, masked=False)
            out.append((words.reshape(m, -1), ln.reshape(m, c)))
        return out, extra

    def mini_dump(self, runs: list[int]) -> ETDump:
        """An :class:`~etlens.readers.etdump.ETDump` of just ``runs`` (e.g. the templates), names interned."""
        table: dict[bytes, int] = {}
        strings: list[str] = []
        return ETDump(self.version, [self.run_events(r, table, strings) for r in runs], strings, self.path, self.fb)

    def run_events(self, r: int, table: dict[bytes, int], strings: list[str]) -> RunEvents:
        """Run ``r``'s profile events as a :class:`RunEvents` (names interned into ``table``/``strings``)."""
        sl = slice(int(self.bounds[r]), int(self.bounds[r + 1]))
        n = sl.stop - sl.start
        fb = self.fb
        return RunEvents(
            name=self.run_names[r], bundled_input_index=self.bundled[r], allocators=[],
            kind=np.full(n, PROFILE, np.uint8),
            name_id=fb.intern(self.name_start[sl], self.name_len[sl], table, strings),
            chain_index=self.chain_index[sl].astype(np.int64), chain_unsigned=np.zeros(n, bool),
            instruction_id=self.instruction_id[sl].astype(np.int32),
            delegate_id_int=self.delegate_id_int[sl].astype(np.int32),
            delegate_id_str=fb.intern(self.dstr_start[sl], self.dstr_len[sl], table, strings),
            metadata_pos=np.zeros(n, np.int64), metadata_len=np.full(n, -1, np.int64),
            start_time=self.start_time[sl], end_time=self.end_time[sl],
            allocator_id=np.full(n, -1, np.int32), allocation_size=np.zeros(n, np.uint64),
            value_pos=np.zeros(n, np.int64), value_type=np.full(n, -1, np.int8), is_output=np.zeros(n, bool),
            tensor_pos=np.zeros(n, np.int64), scalar_type=np.full(n, -1, np.int8),
            tensor_offset=np.zeros(n, np.int64), sizes_pos=np.zeros(n, np.int64), ndim=np.zeros(n, np.int32))


@dataclass(eq=False)
class DumpColumns:
    """A fully read ETDump (debug events and all) behind :class:`ProfileColumns`' interface.

    For dumps :func:`read_profile_columns` does not take: the general reader decodes them, and
    runs still share patterns — compared on the Inspector's grouping inputs (event kinds, interned
    names, instruction ids, chain indices, delegate ids, run-output flags), the timestamps gathered
    from ``start_time``/``end_time`` (all runs' events concatenated, ``bounds`` as in
    :class:`ProfileColumns`).
    """

    dump: ETDump
    bounds: Arr
    start_time: Arr
    end_time: Arr

    @classmethod
    def of(cls, dump: ETDump) -> "DumpColumns":
        lens = [len(r) for r in dump.runs]
        bounds = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        empty = np.zeros(0, np.uint64)
        return cls(dump, bounds, np.concatenate([r.start_time for r in dump.runs] or [empty]),
                   np.concatenate([r.end_time for r in dump.runs] or [empty]))

    @property
    def path(self) -> str:
        return self.dump.path

    @property
    def version(self) -> int:
        return self.dump.version

    @property
    def events(self) -> int:
        return len(self.start_time)

    def patterns(self) -> tuple[Arr, list[int], list[bytes]]:
        """As :meth:`ProfileColumns.patterns`; runs without events have pattern -1 (the Inspector skips them)."""
        pattern = np.full(len(self.dump.runs), -1, np.int64)
        strings = "\0".join(self.dump.strings).encode("utf-8", "surrogatepass")
        seen: dict[bytes, int] = {}
        templates: list[int] = []
        sigs: list[bytes] = []
        for r, run in enumerate(self.dump.runs):
            if not len(run):
                continue
            key = repr((run.name, run.bundled_input_index, len(run))).encode() + b"".join(
                np.ascontiguousarray(c).tobytes() for c in (
                    run.kind, run.name_id, run.instruction_id, run.chain_index, run.chain_unsigned,
                    run.delegate_id_int, run.delegate_id_str, run.is_output))
            p = seen.get(key)
            if p is None:
                p = seen[key] = len(templates)
                templates.append(r)
                sigs.append(b"D" + strings + b"\1" + key)
            pattern[r] = p
        return pattern, templates, sigs

    def mini_dump(self, runs: list[int]) -> ETDump:
        """An :class:`~etlens.readers.etdump.ETDump` of just ``runs`` (the same strings)."""
        d = self.dump
        return ETDump(d.version, [d.runs[r] for r in runs], d.strings, d.path, d._fb)


def _event_tables(fb: FB, vectors: Arr) -> tuple[Arr, Arr]:
    """``(Event table positions, run of each)`` of every run's ``events`` vector (0: none), in one gather."""
    has = vectors != 0
    lens = np.zeros(len(vectors), np.int64)
    if has.any():
        lens[has] = fb.u32(vectors[has], f"{efb.RunData.events.path} length")
    starts = vectors + 4
    fb.check(starts[has] + 4 * lens[has], 0, f"{efb.RunData.events.path} ({int(lens.sum())} entries)")
    total = int(lens.sum())
    run_of = np.repeat(np.arange(len(vectors), dtype=np.int64), lens)
    if not total:
        return np.zeros(0, np.int64), run_of
    first = np.concatenate([[0], np.cumsum(lens)[:-1]])
    slots = np.repeat(starts - 4 * first, lens) + 4 * np.arange(total, dtype=np.int64)
    ev = slots + fb.u32(slots, f"{efb.RunData.events.path} entry").astype(np.int64)
    fb.check(ev, 4, f"{efb.RunData.events.path} entry")
    return ev, run_of


def read_profile_columns(source: str | os.PathLike[str] | bytes | bytearray | memoryview, *,
                         path: str | None = None) -> ProfileColumns | None:
    """The profile events of an ETDump as :class:`ProfileColumns`; None when it has debug events.

    Allocation and empty events are skipped (the Inspector ignores them too). Errors are those of
    :func:`~etlens.readers.etdump.read_etdump`: :class:`~etlens.errors.FormatError` for a foreign
    or corrupt file, :class:`~etlens.errors.TruncatedFileError` for a cut one.
    """
    fb, root_pos = open_etdump(source, path=path)
    root = np.array([root_pos], dtype=np.int64)
    version = int(fb.get(root, efb.ETDump.version)[0])
    run_vec = int(fb.target(root, efb.ETDump.run_data)[0])
    RD, PE, EV = efb.RunData, efb.ProfileEvent, efb.Event
    empty = np.zeros(0, np.int64)
    if run_vec:
        run_tabs = fb.vector_tables(run_vec, efb.ETDump.run_data.path)
    else:
        run_tabs = empty
    rn_start, rn_len = fb.string_spans(fb.target(run_tabs, RD.name), RD.name.path)
    run_names = ["" if n <= 0 else bytes(fb.buf[a:a + n]).decode("utf-8", errors="replace")
                 for a, n in zip(rn_start.tolist(), rn_len.tolist())]
    bundled = [int(x) for x in fb.get(run_tabs, RD.bundled_input_index)]
    ev, run_of = _event_tables(fb, fb.target(run_tabs, RD.events))
    nruns = len(run_tabs)
    evt = _Vtables(fb, ev, "Event")
    has_dbg = evt.slot_offsets(EV.debug_event.slot) != 0
    if has_dbg.any():
        return None
    fo = evt.field_offsets(EV.profile_event.slot)
    if not (evt.slot_offsets(EV.profile_event.slot) != 0).all():   # allocation / empty events: not timings
        keep = np.flatnonzero(fo != 0)
        ev, run_of, fo = ev[keep], run_of[keep], fo[keep]
    pos = ev + fo
    P = pos + fb.u32(pos, f"{EV.profile_event.path} offset").astype(np.int64)
    fb.check(P, 4, "ProfileEvent table")
    pvt = _Vtables(fb, P, "ProfileEvent")
    bounds = np.searchsorted(run_of, np.arange(nruns + 1, dtype=np.int64), "left").astype(np.int64)
    c = _fields(fb, P, pvt, {
        "name": (PE.name, "<u4"), "dstr": (PE.delegate_debug_id_str, "<u4"), "instr": (PE.instruction_id, "<i4"),
        "chain": (PE.chain_index, "<i4"), "did": (PE.delegate_debug_id_int, "<i4"),
        "start": (PE.start_time, "<u8"), "end": (PE.end_time, "<u8")})
    name_start, name_len = _spans(fb, P, pvt, PE.name, c["name"])
    dstr_start, dstr_len = _spans(fb, P, pvt, PE.delegate_debug_id_str, c["dstr"])
    return ProfileColumns(
        path=fb.path, version=version, run_names=run_names, bundled=bundled, bounds=bounds,
        instruction_id=c["instr"], chain_index=c["chain"], delegate_id_int=c["did"],
        name_start=name_start, name_len=name_len, dstr_start=dstr_start, dstr_len=dstr_len,
        start_time=c["start"], end_time=c["end"],
        fb=fb)
