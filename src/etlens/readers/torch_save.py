"""The ``torch.save`` reader: plain tensors, quickly and safely (state dicts, constants, inputs of an ETRecord).

``torch.load(weights_only=True)`` runs a pure-Python unpickler: for a 1000-layer state dict
(2000 tensors) that is seconds, more than the rest of the numeric comparison. The same safety comes
from the C unpickler with a closed ``find_class``: the only globals a tensor checkpoint needs are
resolved to small local functions (rebuild a tensor from a storage, wrap a ``Parameter``, an
``OrderedDict``, a storage type naming a dtype); anything else stops the load with
``UnpicklingError`` and the caller falls back to ``torch.load(weights_only=True)``. No code from the
file is ever run.

The archive itself (a zip file: ``<prefix>/data.pkl``, ``<prefix>/byteorder``, one ``<prefix>/data/<key>``
entry per storage, all stored uncompressed) is indexed straight from its central directory
(:func:`_stored_entries`), falling back to :mod:`zipfile` for any layout torch does not write.

Example::

    from etlens.readers.torch_save import load_tensors_fast
    tensors = load_tensors_fast(zip_entry_bytes)   # {"0.weight": tensor, ...}
"""

from __future__ import annotations

import collections
import io
import pickle
import struct
import zipfile
from typing import Any, Callable

__all__ = ["load_tensors_fast"]

_STORAGE_DTYPES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16",
    "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128",
}


class _StorageType:
    __slots__ = ("dtype",)

    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype


def _rebuild_tensor(storage: Any, storage_offset: int, size: Any, stride: Any, requires_grad: bool = False,
                    backward_hooks: Any = None, metadata: Any = None) -> Any:
    t = storage.as_strided(tuple(size), tuple(stride), storage_offset)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_parameter(data: Any, requires_grad: bool, backward_hooks: Any = None, *rest: Any) -> Any:
    import torch

    return torch.nn.Parameter(data, requires_grad)


class _TensorUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, archive: zipfile.ZipFile | None, prefix: str, data: bytes,
                 spans: dict[str, tuple[int, int]]) -> None:
        super().__init__(file)
        self._archive = archive
        self._prefix = prefix
        self._storages: dict[str, Any] = {}
        self._data = memoryview(data)
        # torch writes storages uncompressed: they are sliced straight out of the archive bytes
        # (one ZipExtFile per storage costs more than the rest of the load)
        self._spans = spans

    def _read(self, name: str) -> bytes | memoryview:
        span = self._spans.get(name)
        if span is None:
            if self._archive is None:
                raise pickle.UnpicklingError(f"no entry {name!r} in the checkpoint")
            return self._archive.read(name)
        start, size = span
        return self._data[start:start + size]

    def find_class(self, module: str, name: str) -> Any:
        import torch

        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor
        if module == "torch._utils" and name == "_rebuild_parameter":
            return _rebuild_parameter
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(getattr(torch, _STORAGE_DTYPES[name]))
        raise pickle.UnpicklingError(f"refusing global {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        import torch

        if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] != "storage" or not isinstance(pid[1], _StorageType):
            raise pickle.UnpicklingError(f"unexpected persistent id {pid!r:.80}")
        key = str(pid[2])
        if key not in self._storages:
            raw = self._read(f"{self._prefix}data/{key}")
            dtype = pid[1].dtype
            self._storages[key] = (torch.frombuffer(bytearray(raw), dtype=dtype) if len(raw)
                                   else torch.empty(0, dtype=dtype))
        return self._storages[key]


def load_tensors_fast(data: bytes) -> Any:
    """Tensors (and dicts/lists/tuples of them) from ``torch.save`` bytes; raises on anything else."""
    found = _stored_entries(data)
    if found is None:  # not the plain layout torch writes: let zipfile read (or refuse) the archive
        archive = zipfile.ZipFile(io.BytesIO(data))
        names = archive.namelist()
        spans = _stored_spans(archive, data)
        read: Callable[[str], bytes] = archive.read
    else:
        archive, spans = None, found
        names = list(spans)

        def read(name: str) -> bytes:
            start, size = found[name]
            return data[start:start + size]
    pkl = next((n for n in names if n.endswith("data.pkl")), None)
    if pkl is None:
        raise pickle.UnpicklingError("not a torch zip checkpoint (no data.pkl)")
    prefix = pkl[: -len("data.pkl")]
    order = f"{prefix}byteorder"
    if order in names and read(order).strip() not in (b"little", b""):
        raise pickle.UnpicklingError("big-endian checkpoint")
    return _TensorUnpickler(io.BytesIO(read(pkl)), archive, prefix, data, spans).load()


def _stored_spans(archive: zipfile.ZipFile, data: bytes) -> dict[str, tuple[int, int]]:
    """``{name: (start, size)}`` of the archive's uncompressed entries whose bytes lie inside ``data``."""
    spans: dict[str, tuple[int, int]] = {}
    for info in archive.infolist():
        if info.compress_type != zipfile.ZIP_STORED:
            continue
        start = _data_start(data, info.header_offset)
        if start is not None and start + info.file_size <= len(data):
            spans[info.filename] = (start, info.file_size)
    return spans


def _data_start(data: bytes, header: int) -> int | None:
    """Where an entry's bytes begin: after its local header (30 bytes), name and extra field."""
    head = data[header:header + 30]
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        return None
    return header + 30 + int.from_bytes(head[26:28], "little") + int.from_bytes(head[28:30], "little")


_EOCD = struct.Struct("<4s4H2LH")  # end of central directory: signature, disks, counts, size, offset
_CDIR = struct.Struct("<4s6H3L5H2L")  # one central directory record (46 bytes, then name/extra/comment)


def _stored_entries(data: bytes) -> dict[str, tuple[int, int]] | None:
    """``{name: (start, size)}`` of every entry, read from the central directory in one pass.

    ``zipfile.ZipFile`` builds a ``ZipInfo`` per entry (a 1000-layer state dict has 2000): ~10 µs
    each, more than decoding the tensors. ``torch.save`` writes a plain archive (one disk, no
    compression, no encryption, no zip64 below 4 GiB / 65535 entries, no archive comment), so its
    central directory is a run of fixed 46-byte records read here with one ``struct`` call each.
    Anything else (and any record or local header that does not check out) returns ``None``: the
    caller reads the archive with ``zipfile`` instead, which handles or refuses it.
    """
    end = len(data) - _EOCD.size
    if end < 0 or data[end:end + 4] != b"PK\x05\x06":
        return None  # an archive comment, or not a zip: the general path decides
    sig, disk, cd_disk, n_here, n_total, cd_size, cd_offset, _comment = _EOCD.unpack_from(data, end)
    if disk or cd_disk or n_here != n_total or n_total == 0xFFFF or cd_offset == 0xFFFFFFFF \
            or cd_offset + cd_size > end:
        return None
    spans: dict[str, tuple[int, int]] = {}
    pos, stop = cd_offset, cd_offset + cd_size
    unpack = _CDIR.unpack_from
    for _ in range(n_total):
        if pos + _CDIR.size > stop:
            return None
        (sig, _made, _need, flags, method, _time, _date, _crc, csize, size, name_len, extra_len,
         comment_len, _disk, _iattr, _eattr, header) = unpack(data, pos)
        if sig != b"PK\x01\x02" or method != zipfile.ZIP_STORED or flags & 0x1 or csize != size \
                or size == 0xFFFFFFFF or header == 0xFFFFFFFF:
            return None
        name_at = pos + _CDIR.size
        raw_name = data[name_at:name_at + name_len]
        pos = name_at + name_len + extra_len + comment_len
        start = _data_start(data, header)
        if start is None or start + size > cd_offset or len(raw_name) != name_len:
            return None
        try:
            name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
        except UnicodeDecodeError:
            return None
        spans[name] = (start, size)
    return spans if pos == stop else None
