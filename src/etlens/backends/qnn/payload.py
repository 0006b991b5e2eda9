"""Decode a QnnBackend delegate payload (readers floor): ExecuTorch's QNN wrapper and the context binary inside.

The bytes ``QnnBackend`` receives at load time are ExecuTorch's ``QnnContextCustomProtocol``:

* a 16-byte header: magic ``0x5678ABCD`` (uint32, little-endian), a 64-bit signature, the size of the
  QNN context binary (uint32);
* padding up to the context binary, which fills the rest of the payload (it is the last
  ``binary size`` bytes);
* the context binary: Qualcomm's own serialized QNN context (graphs, tensors, the HTP program). Its
  layout is not published; what can be read without QNN are its names: the graph name
  (``forward``), the QNN build that made it (``v2.51.0...``) and each tensor as ``<op>@<output>``, in
  the order the graph lists them. QNN ops are named after the fx node that produced them
  (``aten_convolution_default``) or, for ops the backend inserted (layout permutes,
  quantize/dequantize at the boundary), after the node ExecuTorch's QNN passes created for them.

Facts from the delegate's compile spec (SoC, HTP arch, precision, profile level: ``compile_spec.py``)
join the payload's in :meth:`QnnPayload.attrs` (``etlens info``: ``methods[].delegates[].qnn``).

Example::

    p = decode(payload_bytes, name="model.pte delegate 0", program=program)
    p.attrs()["context_binary_bytes"], p.op_names()
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Any

from etlens.errors import FormatError

from .compile_spec import decode_specs

__all__ = ["MAGIC", "QnnPayload", "decode", "decode_qnn"]

MAGIC = 0x5678ABCD
_HEADER = struct.Struct("<IqI")
_NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_.:]{1,200}@[0-9]{1,4}")
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_.:@]{2,200}")
_VERSION = re.compile(rb"v[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")
_MAX_SCAN = 64 << 20


@dataclass
class QnnPayload:
    """What etlens reads of one QNN delegate payload (see the module docstring)."""

    payload_bytes: int = 0
    signature: int = 0
    header_bytes: int = 0
    context_binary_bytes: int = 0
    qnn_build: str = ""
    tensor_names: list[str] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    spec: dict[str, Any] = field(default_factory=dict)

    def op_names(self) -> list[str]:
        """The QNN ops of the context binary in graph order (its op table; else its tensor names without
        ``@<output>``, inputs left out)."""
        if self.ops:
            return list(self.ops)
        seen: dict[str, None] = {}
        for t in self.tensor_names:
            op = t.rsplit("@", 1)[0]
            if not op.startswith("input_"):
                seen.setdefault(op)
        return list(seen)

    def attrs(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "soc_model": self.spec.get("soc_model"),
            "htp_arch": self.spec.get("htp_arch"),
            "precision": self.spec.get("precision"),
            "profile_level": self.spec.get("profile_level"),
            "context_binary_bytes": self.context_binary_bytes,
            "payload_bytes": self.payload_bytes,
            "header_bytes": self.header_bytes,
            "signature": self.signature,
            "qnn_build": self.qnn_build,
            "ops": len(self.op_names()),
            "op_names": self.op_names(),
            "tensors": len(self.tensor_names),
        }
        out.update({k: v for k, v in self.spec.items() if k not in out})
        return out


def _spec_for(program: Any, size: int) -> dict[str, Any]:
    """The compile spec facts of the program's QNN delegate whose payload has ``size`` bytes (the first QNN
    delegate when sizes do not tell them apart)."""
    found: list[Any] = []
    for plan in getattr(program, "execution_plan", None) or ():
        for d in getattr(plan, "delegates", ()):
            if str(getattr(d, "id", "")).lower().startswith("qnn"):
                found.append(d)
    same = [d for d in found if getattr(d, "payload_size", None) == size] or found
    for d in same:
        try:
            facts = decode_specs(d.compile_specs)
        except FormatError:
            continue
        if facts:
            return facts
    return {}


def decode_qnn(payload: bytes | memoryview, name: str = "<QNN payload>", program: Any = None) -> QnnPayload:
    """Decode one payload (raises :class:`FormatError` when it is not ExecuTorch's QNN wrapper)."""
    data = memoryview(payload)
    n = len(data)
    if n < _HEADER.size:
        raise FormatError(f"{name}: {n} bytes is too short for ExecuTorch's QNN payload header (16 bytes)")
    magic, signature, size = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise FormatError(f"{name}: not ExecuTorch's QnnContextCustomProtocol (magic {magic:#010x} at byte 0, "
                          f"expected {MAGIC:#010x}); the delegate id says QNN but the data is something else")
    if size > n - _HEADER.size:
        raise FormatError(f"{name}: the header gives a {size}-byte context binary but the payload has only "
                          f"{n - _HEADER.size} bytes after it; the program is truncated or not a QNN payload")
    out = QnnPayload(payload_bytes=n, signature=signature, header_bytes=n - size, context_binary_bytes=size)
    binary = bytes(data[n - size:n - size + min(size, _MAX_SCAN)])
    v = _VERSION.search(binary)
    out.qnn_build = v.group(0).decode("ascii") if v else ""
    names: dict[str, None] = {}
    for m in _NAME.finditer(binary):
        names.setdefault(m.group(0).decode("ascii"))
    # the binary lists a graph's tensors from its outputs back to its inputs
    out.tensor_names = list(reversed(list(names)))
    out.ops = _op_table(binary)
    if program is not None:
        out.spec = _spec_for(program, n)
    return out


def _op_table(binary: bytes) -> list[str]:
    """The op names the binary lists after a repeat of its graph name (``forward``), last op first, up to the
    next tensor name (the longest such run); [] when there is none."""
    words = [w.decode("ascii") for w in _WORD.findall(binary[:4 << 20])]
    graph = words[0] if words else ""
    best: list[str] = []
    for k in range(1, len(words)):
        if words[k] != graph:
            continue
        ops = []
        for w in words[k + 1:]:
            if "@" in w or w == graph:
                break
            ops.append(w)
        if len(ops) > len(best):
            best = ops
    return list(reversed(best)) if len(best) > 1 else []


def decode(payload: memoryview, *, name: str = "<QNN payload>", program: Any = None) -> QnnPayload:
    """The ``payload`` hook."""
    return decode_qnn(payload, name=name, program=program)
