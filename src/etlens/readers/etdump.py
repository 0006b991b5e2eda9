"""Native ETDump (``.etdp``) reader: the FlatBuffer bytes straight into numpy columns.

An ETDump is a size-prefixed FlatBuffer (file identifier ``ED00``) written by the ExecuTorch
runtime: ``ETDump{version, run_data: [RunData]}``, each ``RunData{name, bundled_input_index,
allocators, events}`` and each event one of ``ProfileEvent`` (timings), ``AllocationEvent``
(allocator id + size) or ``DebugEvent`` (a ``Value`` whose tensors point by offset into the
separate *debug buffer* file).

ExecuTorch's own loader shells out to ``flatc``, converts the dump to JSON and builds one Python
object per event. This reader decodes every field of every event with a handful of vectorised
gathers (the FlatBuffer engine's column-wise front-end, :mod:`._flatbuffers.columns`) and keeps
them as columns (:class:`RunEvents`); names are interned.
Tensor payloads are never copied: :class:`DebugBuffer` memory-maps the debug buffer and
:meth:`ETDump.debug_value` decodes one value on demand (bounds-checked, every scalar type
including bf16, fp16, int8/uint8, bool and float8).

Example::

    from etlens.readers.etdump import read_etdump, DebugBuffer
    dump = read_etdump("run.etdp")
    run = dump.runs[1]
    run.kind, run.start_time[:5], dump.strings[run.name_id[0]]
    buf = DebugBuffer("run.debug.bin")
    dump.debug_value(1, int(run.debug_indices()[0]), buf)   # -> torch.Tensor
"""

from __future__ import annotations

import math
import mmap
import os
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import FormatError, MissingDataError
from ..schema import ETDUMP_VALUE_TYPES, SCALAR_TYPES as _ALL_SCALAR_TYPES, ScalarTypeInfo
from ..schema import etdump_fbs as efb
from ..schema.etdump_fbs import ValueType
from ._flatbuffers.columns import FB, open_etdump
from .base import Artifact

__all__ = [
    "PROFILE", "ALLOCATION", "DEBUG", "EMPTY", "VALUE_TYPES", "SCALAR_TYPES",
    "RunEvents", "ETDump", "DebugBuffer", "TensorRef", "EtdumpArtifact", "read_etdump", "open_etdump", "read",
]

#: event kinds (``RunEvents.kind``)
PROFILE, ALLOCATION, DEBUG, EMPTY = 0, 1, 2, 3
KIND_NAMES = {PROFILE: "profile", ALLOCATION: "allocation", DEBUG: "debug", EMPTY: "empty"}

#: ``etdump.ValueType`` names by value (``VALUE_TYPES[5] == "Tensor"``), from :mod:`etlens.schema`.
VALUE_TYPES = list(ETDUMP_VALUE_TYPES)
V_NULL, V_INT, V_BOOL, V_FLOAT = ValueType.Null, ValueType.Int, ValueType.Bool, ValueType.Float
V_DOUBLE = ValueType.Double
V_TENSOR, V_TENSOR_LIST, V_STRING = ValueType.Tensor, ValueType.TensorList, ValueType.String

#: ScalarType code -> :class:`etlens.schema.ScalarTypeInfo` ``(name, storage, view, dtype, itemsize)``: the
#: numpy ``storage`` dtype is how the bytes are read, the torch ``view`` dtype what the tensor is viewed as
#: (bf16 and float8 have no numpy dtype, so they are read as raw ints and reinterpreted). Only the codes a
#: debug buffer can hold (those with a storage dtype).
SCALAR_TYPES: dict[int, ScalarTypeInfo] = {code: info for code, info in _ALL_SCALAR_TYPES.items() if info.storage}

TS = efb.Tensor
#: ValueType of a scalar -> (``Value`` field holding its table, that table's value field).
_SCALAR_MEMBERS = {
    V_INT: (efb.Value.int_value, efb.Int.int_val), V_BOOL: (efb.Value.bool_value, efb.Bool.bool_val),
    V_FLOAT: (efb.Value.float_value, efb.Float.float_val), V_DOUBLE: (efb.Value.double_value, efb.Double.double_val),
}


@dataclass
class TensorRef:
    """A tensor logged in a debug event: its type, shape and where its bytes are in the debug buffer."""

    scalar_type: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int

    @property
    def dtype_name(self) -> str:
        return SCALAR_TYPES.get(self.scalar_type, (f"ScalarType({self.scalar_type})",))[0]

    @property
    def nbytes(self) -> int:
        spec = SCALAR_TYPES.get(self.scalar_type)
        if spec is None:
            return 0
        return int(np.prod(self.sizes, dtype=np.int64)) * spec.itemsize


@dataclass(eq=False)
class RunEvents:
    """The events of one ``RunData`` as parallel numpy columns (one row per event, file order).

    Columns: ``kind`` (PROFILE/ALLOCATION/DEBUG/EMPTY), ``name_id`` and ``delegate_id_str``
    (ids into :attr:`ETDump.strings`, -1 = absent), ``chain_index`` (int64; a debug event's
    unsigned chain is reinterpreted, so ``2**64-1`` reads -1 — see ``chain_key``),
    ``instruction_id`` and ``delegate_id_int`` (-1 = unset), ``metadata_pos``/``metadata_len``
    (delegate debug metadata bytes, len -1 = absent), ``start_time``/``end_time`` (uint64, raw
    runtime ticks), ``allocator_id``/``allocation_size``, and for debug events ``value_type``
    (index into :data:`VALUE_TYPES`, -1 = no value), ``is_output`` (run output, not an
    intermediate), ``tensor_pos`` (0 = none), ``scalar_type``, ``tensor_offset``,
    ``sizes_pos``/``ndim``, ``value_pos``.
    """

    name: str
    bundled_input_index: int
    allocators: list[str]
    kind: np.ndarray
    name_id: np.ndarray
    chain_index: np.ndarray
    chain_unsigned: np.ndarray
    instruction_id: np.ndarray
    delegate_id_int: np.ndarray
    delegate_id_str: np.ndarray
    metadata_pos: np.ndarray
    metadata_len: np.ndarray
    start_time: np.ndarray
    end_time: np.ndarray
    allocator_id: np.ndarray
    allocation_size: np.ndarray
    value_pos: np.ndarray
    value_type: np.ndarray
    is_output: np.ndarray
    tensor_pos: np.ndarray
    scalar_type: np.ndarray
    tensor_offset: np.ndarray
    sizes_pos: np.ndarray
    ndim: np.ndarray

    def __len__(self) -> int:
        return len(self.kind)

    @property
    def chain_key(self) -> np.ndarray:
        """Chain index as a collision-free int64 key (a debug event's unsigned ``2**64-1`` stays
        distinct from a profile event's signed -1, as in the schema)."""
        return self.chain_index * 2 + self.chain_unsigned.astype(np.int64)

    def debug_indices(self) -> np.ndarray:
        return np.flatnonzero(self.kind == DEBUG)

    def counts(self) -> dict[str, int]:
        c = np.bincount(self.kind, minlength=4)
        return {KIND_NAMES[k]: int(c[k]) for k in range(4) if c[k]}


class DebugBuffer:
    """The debug buffer file, memory-mapped; tensors are views decoded on demand.

    The runtime writes the whole preallocated buffer, so trailing bytes are unused. Reading past
    its end (a truncated copy, or a buffer from another run) raises :class:`FormatError` for that
    tensor only.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, data: bytes | None = None):
        self.path = os.fspath(path) if path is not None else "<debug buffer>"
        if data is not None:
            self._data: bytes | mmap.mmap = data
        else:
            try:
                size = os.path.getsize(self.path)
                with open(self.path, "rb") as f:
                    self._data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
            except FileNotFoundError as exc:
                raise MissingDataError(f"{self.path}: debug buffer not found; pass the .bin written next to "
                                       "the .etdp (write_etdump_result_to_file(etdp, debug_bin))") from exc
            except IsADirectoryError as exc:
                raise MissingDataError(f"{self.path}: is a directory, expected the debug buffer file") from exc
        self.size = len(self._data)
        self._quiet = False  # set once a tensor went through _from_readonly (torch warns once)
        self._u8: np.ndarray | None = None  # the whole buffer as bytes (made on first use)

    def array(self, ref: TensorRef) -> np.ndarray:
        """The tensor's bytes as a numpy array (storage dtype), bounds-checked, zero-copy."""
        spec, count, _ = self._locate(ref.scalar_type, ref.sizes, ref.offset)
        dt = np.dtype(spec.storage)
        if count == 0:
            return np.zeros(0, dtype=dt).reshape(ref.sizes)
        return np.frombuffer(self._data, dtype=dt, count=count, offset=ref.offset).reshape(ref.sizes)

    def tensor(self, ref: TensorRef) -> Any:
        """A ``torch.Tensor`` (read-only view of the mapped file; bf16/float8 reinterpreted)."""
        return self.tensor_at(ref.scalar_type, ref.sizes, ref.offset)

    def _locate(self, scalar_type: int, sizes: tuple[Any, ...], offset: int) -> tuple[ScalarTypeInfo, int, int]:
        """``(scalar type spec, element count, end byte)`` of a tensor, or :class:`FormatError`."""
        spec = SCALAR_TYPES.get(scalar_type)
        if spec is None:
            raise FormatError(f"{self.path}: unknown scalar type {scalar_type} in a debug event tensor")
        if _implausible(sizes):
            raise FormatError(f"{self.path}: debug event tensor has negative or absurd sizes {sizes} (corrupt ETDump)")
        count = math.prod(sizes)  # Python ints: a corrupt shape must not wrap around int64
        end = offset + count * _ITEMSIZE[scalar_type]
        if count and (offset < 0 or end > self.size):
            raise FormatError(
                f"{self.path}: tensor of {count} x {spec.name} at offset {offset} ends at byte {end}, "
                f"past the {self.size}-byte debug buffer (wrong or truncated debug buffer)")
        return spec, count, end

    def tensor_at(self, scalar_type: int, sizes: tuple[Any, ...], offset: int) -> Any:
        """The tensor of ``sizes`` x ``scalar_type`` at byte ``offset``: a zero-copy ``torch.Tensor``
        whose storage is exactly its own bytes (so pickling or copying one tensor never drags the
        whole mapped buffer along)."""
        import torch

        spec, count, _ = self._locate(scalar_type, sizes, offset)
        if count == 0:
            return torch.zeros(sizes, dtype=_torch_dtype(spec))
        return self.tensor_from(scalar_type, sizes, offset, count * spec.itemsize)

    def tensor_from(self, scalar_type: int, sizes: tuple[Any, ...], offset: int, nbytes: int) -> Any:
        """:meth:`tensor_at` without its checks, for a caller that made them (``etdump_values``): a
        known ``scalar_type`` and ``nbytes > 0`` bytes inside the buffer at ``offset``."""
        import torch

        if self._u8 is None:
            self._u8 = np.frombuffer(self._data, dtype=np.uint8)
        spec = SCALAR_TYPES[scalar_type]
        storage = str(spec.storage)  # every code of SCALAR_TYPES has a storage dtype
        t = _from_readonly(torch, self._u8[offset:offset + nbytes].view(storage).reshape(sizes), self._quiet)
        self._quiet = True
        target = _torch_dtype(spec)
        return t.view(target) if t.dtype != target else t


def _from_readonly(torch: Any, arr: np.ndarray, quiet: bool) -> Any:
    """``torch.from_numpy`` on a read-only (memory-mapped) array, without torch's "not writable"
    warning: we never write through these tensors. torch emits that warning once per process, so a
    caller that has already passed one array through here (``quiet``) skips the comparatively costly
    (~7 µs) ``catch_warnings`` context."""
    if quiet or arr.flags.writeable:
        return torch.from_numpy(arr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.from_numpy(arr)


def _torch_dtype(spec: ScalarTypeInfo) -> Any:
    import torch

    return getattr(torch, spec.view)


#: element size in bytes of each scalar type code (for bounds checks without building dtypes)
_ITEMSIZE = {code: spec.itemsize for code, spec in SCALAR_TYPES.items()}


@dataclass(eq=False)
class ETDump:
    """A parsed ETDump: schema ``version``, one :class:`RunEvents` per run, interned ``strings``."""

    version: int
    runs: list[RunEvents]
    strings: list[str]
    path: str
    _fb: FB = field(repr=False)

    def string(self, sid: int) -> str | None:
        return None if sid < 0 else self.strings[sid]

    def read_i64(self, positions: Any, field_path: str) -> Any:
        """The little-endian int64 values at byte ``positions`` of the dump (vectorised, bounds-checked).

        ``field_path`` names what is read (``"Tensor.sizes"``) for the error when a position lies
        outside the file. Used to decode many tensors' shapes at once from :class:`RunEvents` columns.
        """
        return self._fb.i64(positions, field_path)

    def metadata(self, run: int, i: int) -> bytes | None:
        """Delegate debug metadata bytes of event ``i`` of run ``run`` (None when absent)."""
        r = self.runs[run]
        n = int(r.metadata_len[i])
        if n < 0:
            return None
        p = int(r.metadata_pos[i])
        return bytes(self._fb.buf[p:p + n])

    def tensor_ref(self, tensor_pos: int, run: RunEvents | None = None, i: int | None = None) -> TensorRef:
        fb = self._fb
        if run is not None and i is not None:
            st, off, sp, nd = int(run.scalar_type[i]), int(run.tensor_offset[i]), int(run.sizes_pos[i]), int(
                run.ndim[i])
        else:
            t = np.array([tensor_pos], dtype=np.int64)
            st = int(fb.get(t, TS.scalar_type)[0])
            off = int(fb.get(t, TS.offset)[0])
            sp, nd = _vec_span(fb, int(fb.target(t, TS.sizes)[0]), 8, TS.sizes.path)
        sizes = tuple(np.frombuffer(fb.data, "<i8", count=nd, offset=sp).tolist()) if nd else ()
        t = np.array([tensor_pos], dtype=np.int64)
        stp, snd = _vec_span(fb, int(fb.target(t, TS.strides)[0]), 8, TS.strides.path)
        strides = tuple(np.frombuffer(fb.data, "<i8", count=snd, offset=stp).tolist()) if snd else ()
        return TensorRef(st, sizes, strides, off)

    def debug_entry(self, run: int, i: int) -> tuple[int, Any]:
        """``(value type, payload)`` of debug event ``i``: payload is a :class:`TensorRef`, a list of
        them, a Python scalar, a string, or None — tensors are *not* read yet."""
        r = self.runs[run]
        vt = int(r.value_type[i])
        vpos = int(r.value_pos[i])
        if vt < 0 or not vpos:
            return -1, None
        fb = self._fb
        v = np.array([vpos], dtype=np.int64)
        if vt == V_TENSOR:
            tp = int(r.tensor_pos[i])
            if not tp:
                raise FormatError(f"{self.path}: run {run} event {i}: Tensor value without a tensor table")
            return vt, self.tensor_ref(tp, r, i)
        if vt == V_TENSOR_LIST:
            tl = int(fb.target(v, efb.Value.tensor_list)[0])
            if not tl:
                return vt, []
            vec = int(fb.target(np.array([tl]), efb.TensorList.tensors)[0])
            if not vec:
                return vt, []
            tabs = fb.vector_tables(vec, efb.TensorList.tensors.path)
            return vt, [self.tensor_ref(int(p)) for p in tabs]
        member = _SCALAR_MEMBERS.get(vt)
        if member is None:
            return vt, None
        holder, inner = member
        sub = int(fb.target(v, holder)[0])
        if not sub:
            return vt, None
        val = fb.get(np.array([sub], dtype=np.int64), inner)[0]
        if vt == V_FLOAT or vt == V_DOUBLE:
            return vt, float(val)
        return vt, bool(val) if vt == V_BOOL else int(val)

    def debug_value(self, run: int, i: int, buffer: DebugBuffer | None) -> Any:
        """Debug event ``i`` of run ``run`` inflated as ExecuTorch does: tensors become
        ``torch.Tensor`` (zeros of the right shape when there is no buffer), lists of tensors a
        list, scalars Python values."""
        r = self.runs[run]
        if r.value_type[i] == V_TENSOR and r.tensor_pos[i] and r.value_pos[i]:
            # the common case, read straight from the columns: no TensorRef, and no strides
            # (ExecuTorch ignores them too; a logged tensor is contiguous)
            nd = int(r.ndim[i])
            sizes = tuple(np.frombuffer(self._fb.data, "<i8", count=nd, offset=int(r.sizes_pos[i])).tolist()) \
                if nd else ()
            return _inflate_tensor(int(r.scalar_type[i]), sizes, int(r.tensor_offset[i]), buffer)
        vt, payload = self.debug_entry(run, i)
        if vt == V_TENSOR:
            return _inflate_tensor(payload.scalar_type, payload.sizes, payload.offset, buffer)
        if vt == V_TENSOR_LIST:
            return [_inflate_tensor(t.scalar_type, t.sizes, t.offset, buffer) for t in payload]
        if vt in (V_INT, V_BOOL, V_FLOAT, V_DOUBLE):
            return payload
        return None


def _inflate_tensor(scalar_type: int, sizes: tuple[Any, ...], offset: int, buffer: DebugBuffer | None) -> Any:
    if buffer is not None:
        return buffer.tensor_at(scalar_type, sizes, offset)
    import torch

    spec = SCALAR_TYPES.get(scalar_type)
    if spec is None:
        raise FormatError(f"unknown scalar type {scalar_type} in a debug event tensor")
    nbytes = math.prod(sizes) * _ITEMSIZE[scalar_type]
    if _implausible(sizes) or nbytes > _MAX_ZEROS_BYTES:
        # (no byte count in the message: for thousands of huge dims it has more digits than str() allows)
        raise FormatError(f"debug event tensor of shape {str(sizes)[:200]} is not plausible "
                          "(corrupt ETDump); pass the debug buffer or a dump from the same run")
    return torch.zeros(sizes, dtype=_torch_dtype(spec))


#: Largest all-zeros placeholder built for a debug tensor when no debug buffer is given; a corrupt
#: shape must not make us allocate tens of GB.
_MAX_ZEROS_BYTES = 1 << 30


def _implausible(sizes: tuple[Any, ...]) -> bool:
    """Negative dims, or more than 2^40 elements even ignoring zero dims (no real tensor has that;
    numpy/torch overflow computing the storage of e.g. ``[2**62, 0]``)."""
    return any(d < 0 for d in sizes) or math.prod(d for d in sizes if d) > (1 << 40)


def _vec_span(fb: FB, vec_pos: int, elem: int, what: str) -> tuple[int, int]:
    if not vec_pos:
        return 0, 0
    start, n = fb.vector(vec_pos, what)
    fb.check(np.array([start]), n * elem, what)
    return start, n


def read_etdump(source: str | os.PathLike[str] | bytes | bytearray | memoryview, *, path: str | None = None) -> ETDump:
    """Parse an ETDump from a path (memory-mapped) or bytes into columnar :class:`RunEvents`.

    Raises :class:`FormatError` for a wrong identifier or corrupt offsets and
    :class:`TruncatedFileError` when the file ends before what it declares.
    """
    fb, root_pos = open_etdump(source, path=path)
    path = fb.path
    root = np.array([root_pos], dtype=np.int64)
    version = int(fb.get(root, efb.ETDump.version)[0])
    run_vec = int(fb.target(root, efb.ETDump.run_data)[0])
    strings: list[str] = []
    table: dict[bytes, int] = {}
    runs: list[RunEvents] = []
    if not run_vec:
        return ETDump(version, runs, strings, path, fb)
    run_tabs = fb.vector_tables(run_vec, efb.ETDump.run_data.path)
    RD = efb.RunData
    run_names = [fb.string(int(p), RD.name.path) or "" for p in fb.target(run_tabs, RD.name)]
    bundled = fb.get(run_tabs, RD.bundled_input_index)
    alloc_vecs = fb.target(run_tabs, RD.allocators)
    ev_vecs = fb.target(run_tabs, RD.events)
    per_run = [fb.vector_tables(int(v), RD.events.path) if v else np.zeros(0, np.int64) for v in ev_vecs]
    counts = [len(p) for p in per_run]
    ev = np.concatenate(per_run) if per_run else np.zeros(0, np.int64)
    cols = _decode_events(fb, ev, table, strings)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    for r in range(len(run_tabs)):
        allocators = []
        if alloc_vecs[r]:
            atabs = fb.vector_tables(int(alloc_vecs[r]), RD.allocators.path)
            AL = efb.Allocator.name
            allocators = [fb.string(int(p), AL.path) or "" for p in fb.target(atabs, AL)]
        sl = slice(int(bounds[r]), int(bounds[r + 1]))
        runs.append(RunEvents(name=run_names[r], bundled_input_index=int(bundled[r]), allocators=allocators,
                              **{k: v[sl] for k, v in cols.items()}))
    return ETDump(version, runs, strings, path, fb)


def _decode_events(fb: FB, ev: np.ndarray, table: dict[bytes, int], strings: list[str]) -> dict[str, np.ndarray]:
    n = len(ev)
    L = fb.layout(ev, "Event")
    prof = fb.target(ev, efb.Event.profile_event, L)
    alloc = fb.target(ev, efb.Event.allocation_event, L)
    dbg = fb.target(ev, efb.Event.debug_event, L)
    kind = np.full(n, EMPTY, dtype=np.uint8)
    kind[dbg != 0] = DEBUG
    kind[alloc != 0] = ALLOCATION
    kind[prof != 0] = PROFILE
    c: dict[str, np.ndarray] = {
        "kind": kind,
        "name_id": np.full(n, -1, np.int32),
        "chain_index": np.zeros(n, np.int64),
        "chain_unsigned": np.zeros(n, bool),
        "instruction_id": np.full(n, -1, np.int32),
        "delegate_id_int": np.full(n, -1, np.int32),
        "delegate_id_str": np.full(n, -1, np.int32),
        "metadata_pos": np.zeros(n, np.int64),
        "metadata_len": np.full(n, -1, np.int64),
        "start_time": np.zeros(n, np.uint64),
        "end_time": np.zeros(n, np.uint64),
        "allocator_id": np.full(n, -1, np.int32),
        "allocation_size": np.zeros(n, np.uint64),
        "value_pos": np.zeros(n, np.int64),
        "value_type": np.full(n, -1, np.int8),
        "is_output": np.zeros(n, bool),
        "tensor_pos": np.zeros(n, np.int64),
        "scalar_type": np.full(n, -1, np.int8),
        "tensor_offset": np.zeros(n, np.int64),
        "sizes_pos": np.zeros(n, np.int64),
        "ndim": np.zeros(n, np.int32),
    }
    ip = np.flatnonzero(kind == PROFILE)
    if ip.size:
        P = prof[ip]
        LP = fb.layout(P, "ProfileEvent")
        PE = efb.ProfileEvent
        c["name_id"][ip] = fb.intern(*fb.string_spans(fb.target(P, PE.name, LP), PE.name.path), table, strings)
        c["chain_index"][ip] = fb.get(P, PE.chain_index, LP)
        c["instruction_id"][ip] = fb.get(P, PE.instruction_id, LP)
        c["delegate_id_int"][ip] = fb.get(P, PE.delegate_debug_id_int, LP)
        c["delegate_id_str"][ip] = fb.intern(*fb.string_spans(fb.target(P, PE.delegate_debug_id_str, LP),
                                                              PE.delegate_debug_id_str.path), table, strings)
        st, ln = fb.string_spans(fb.target(P, PE.delegate_debug_metadata, LP), PE.delegate_debug_metadata.path)
        c["metadata_pos"][ip], c["metadata_len"][ip] = st, ln
        c["start_time"][ip] = fb.get(P, PE.start_time, LP)
        c["end_time"][ip] = fb.get(P, PE.end_time, LP)
    ia = np.flatnonzero(kind == ALLOCATION)
    if ia.size:
        A = alloc[ia]
        LA = fb.layout(A, "AllocationEvent")
        c["allocator_id"][ia] = fb.get(A, efb.AllocationEvent.allocator_id, LA)
        c["allocation_size"][ia] = fb.get(A, efb.AllocationEvent.allocation_size, LA)
    idb = np.flatnonzero(kind == DEBUG)
    if idb.size:
        D = dbg[idb]
        LD = fb.layout(D, "DebugEvent")
        DE = efb.DebugEvent
        ch = fb.get(D, DE.chain_index, LD)
        c["chain_index"][idb] = ch.view(np.int64)
        c["chain_unsigned"][idb] = ch >= np.uint64(1 << 63)
        c["instruction_id"][idb] = fb.get(D, DE.instruction_id, LD)
        c["delegate_id_int"][idb] = fb.get(D, DE.delegate_debug_id_int, LD)
        c["delegate_id_str"][idb] = fb.intern(*fb.string_spans(fb.target(D, DE.delegate_debug_id_str, LD),
                                                               DE.delegate_debug_id_str.path), table, strings)
        c["name_id"][idb] = fb.intern(*fb.string_spans(fb.target(D, DE.name, LD), DE.name.path), table, strings)
        V = fb.target(D, DE.debug_entry, LD)
        c["value_pos"][idb] = V
        hv = V != 0
        if hv.any():
            iv, Vh = idb[hv], V[hv]
            LV = fb.layout(Vh, "Value")
            VA = efb.Value
            c["value_type"][iv] = fb.get(Vh, VA.val, LV)
            out_tab = fb.target(Vh, VA.output, LV)
            ho = out_tab != 0
            if ho.any():
                c["is_output"][iv[ho]] = fb.get(out_tab[ho], efb.Bool.bool_val) != 0
            T = fb.target(Vh, VA.tensor, LV)
            ht = T != 0
            if ht.any():
                it, Th = iv[ht], T[ht]
                LT = fb.layout(Th, "Tensor")
                c["tensor_pos"][it] = Th
                c["scalar_type"][it] = fb.get(Th, TS.scalar_type, LT)
                c["tensor_offset"][it] = fb.get(Th, TS.offset, LT)
                sv = fb.target(Th, TS.sizes, LT)
                hs = sv != 0
                if hs.any():
                    nd = fb.u32(sv[hs], "Tensor.sizes length").astype(np.int64)
                    fb.check(sv[hs] + 4 + 8 * nd, 0, "Tensor.sizes")
                    c["sizes_pos"][it[hs]] = sv[hs] + 4
                    c["ndim"][it[hs]] = nd
    return c


class EtdumpArtifact(Artifact):
    """``etlens.read("run.etdp")``: the parsed :class:`ETDump` plus an ``etlens info`` summary."""

    def __init__(self, path: str, dump: ETDump):
        super().__init__(format="etdump", path=path)
        self.dump = dump

    def summary(self) -> dict[str, Any]:
        d = self.dump
        runs = []
        by_kind: dict[str, int] = {}
        t_lo, t_hi = None, None
        for r in d.runs:
            cnt = r.counts()
            by_kind.update({k: by_kind.get(k, 0) + v for k, v in cnt.items()})
            prof = r.kind == PROFILE
            if prof.any():
                lo, hi = int(r.start_time[prof].min()), int(r.end_time[prof].max())
                t_lo, t_hi = (lo, hi) if t_lo is None or t_hi is None else (min(t_lo, lo), max(t_hi, hi))
            runs.append({"name": r.name, "bundled_input_index": r.bundled_input_index, "events": len(r),
                         "by_kind": cnt, "allocators": r.allocators})
        return {
            "format": "etdump",
            "path": self.path,
            "version": d.version,
            "runs": len(d.runs),
            "events": sum(len(r) for r in d.runs),
            "events_by_kind": by_kind,
            "allocators": sorted({a for r in d.runs for a in r.allocators}),
            "time_span": None if t_lo is None or t_hi is None else {"start": t_lo, "end": t_hi, "ticks": t_hi - t_lo},
            "run_list": runs,
        }


def read(path: str | os.PathLike[str]) -> EtdumpArtifact:
    """Registry entry point: ``etlens.read("run.etdp")``."""
    path = os.fspath(path)
    return EtdumpArtifact(path, read_etdump(path))
