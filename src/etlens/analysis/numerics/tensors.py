"""Load ``torch.save``-d plain tensors quickly and safely (state dicts, constants, inputs of an ETRecord).

``torch.load(weights_only=True)`` runs a pure-Python unpickler: for a 1000-layer state dict
(2000 tensors) that is seconds, more than the rest of the numeric comparison. The same safety comes
from the C unpickler with a closed ``find_class``: the only globals a tensor checkpoint needs are
resolved to small local functions (rebuild a tensor from a storage, wrap a ``Parameter``, an
``OrderedDict``, a storage type naming a dtype); anything else stops the load with
``UnpicklingError`` and the caller falls back to ``torch.load(weights_only=True)``. No code from the
file is ever run.

Example::

    tensors = load_tensors_fast(zip_entry_bytes)   # {"0.weight": tensor, ...}
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from typing import Any

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


def _rebuild_tensor(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                    metadata=None):
    t = storage.as_strided(tuple(size), tuple(stride), storage_offset)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_parameter(data, requires_grad, backward_hooks=None, *rest):
    import torch

    return torch.nn.Parameter(data, requires_grad)


class _TensorUnpickler(pickle.Unpickler):
    def __init__(self, file, archive: zipfile.ZipFile, prefix: str, data: bytes) -> None:
        super().__init__(file)
        self._archive = archive
        self._prefix = prefix
        self._storages: dict[str, Any] = {}
        self._data = memoryview(data)
        # torch writes storages uncompressed: slice them straight out of the archive bytes
        # (one ZipExtFile per storage costs more than the rest of the load)
        self._spans: dict[str, tuple[int, int]] = {}
        for info in archive.infolist():
            if info.compress_type != zipfile.ZIP_STORED:
                continue
            h = info.header_offset
            head = data[h:h + 30]
            if len(head) < 30 or head[:4] != b"PK\x03\x04":
                continue
            name_len = int.from_bytes(head[26:28], "little")
            extra_len = int.from_bytes(head[28:30], "little")
            start = h + 30 + name_len + extra_len
            if start + info.file_size <= len(data):
                self._spans[info.filename] = (start, info.file_size)

    def _read(self, name: str) -> bytes:
        span = self._spans.get(name)
        if span is None:
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
            self._storages[key] = (torch.frombuffer(bytearray(raw), dtype=dtype) if raw
                                   else torch.empty(0, dtype=dtype))
        return self._storages[key]


def load_tensors_fast(data: bytes) -> Any:
    """Tensors (and dicts/lists/tuples of them) from ``torch.save`` bytes; raises on anything else."""
    archive = zipfile.ZipFile(io.BytesIO(data))
    pkl = next((n for n in archive.namelist() if n.endswith("data.pkl")), None)
    if pkl is None:
        raise pickle.UnpicklingError("not a torch zip checkpoint (no data.pkl)")
    prefix = pkl[: -len("data.pkl")]
    order = f"{prefix}byteorder"
    if order in archive.namelist() and archive.read(order).strip() not in (b"little", b""):
        raise pickle.UnpicklingError("big-endian checkpoint")
    return _TensorUnpickler(io.BytesIO(archive.read(pkl)), archive, prefix, data).load()
