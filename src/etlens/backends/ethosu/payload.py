"""Decode an Arm Ethos-U delegate payload (the bytes ``EthosUBackend`` receives at load time).

ExecuTorch's Arm backend compiles the delegated TOSA graph with Vela and stores Vela's output as a
*Vela bin stream*: a sequence of blocks, each a 32-byte header followed by its data padded to a
multiple of 16 bytes. The header is a 16-byte NUL-padded block name, a ``uint32`` length (the
unpadded data size), a ``uint8`` *external* flag (1: the data is a 64-character key of a
``named_data`` entry of the program holding the real bytes) and 11 reserved bytes. The blocks, in
the order the runtime expects them:

==================  ===============================================================================
``vela_bin_stream``  empty; must come first
``cmd_data``         the NPU command stream (starts with the driver magic ``COP1`` or ``COP2``)
``weight_data``      encoded weights and biases (Vela's compressed format)
``scratch_size``     ``uint32``: bytes of scratch (feature maps, the tensor arena of the NPU) the
                     runtime must provide in SRAM
``inputs``           ``int32`` count, then per tensor 6 ``int32`` dims, element size, offset in the
                     scratch region and the region number
``outputs``          the same for the outputs
``vela_end_stream``  empty; must end the payload exactly
==================  ===============================================================================

The *fast scratch* (Vela's arena cache in dedicated SRAM, Ethos-U65/U85 ``Dedicated_Sram``
memory modes) is not in the payload: Vela writes its size in its raw output (``scratch_fast_size``
in ``out_vela.npz``), but the Arm backend packs only ``scratch_size`` and the runtime is configured
with the fast scratch separately. etlens's Ethos-U build keeps Vela's value in the sidecar
(:mod:`etlens.backends.ethosu.vela`, ``memory``), and ``etlens memory`` reports it from there
(:func:`etlens.backends.ethosu.memory.ethos_u_memory`); from the payload alone it is ``None``.

:func:`decode_ethosu` returns an :class:`EthosUPayload`; nothing here needs Vela, the Arm backend or
ExecuTorch. Malformed payloads raise :class:`~etlens.errors.FormatError` naming the block and the
byte offset.

Example::

    p = decode_ethosu(payload_bytes, name="model.pte delegate 0")
    p.command_stream_size, p.weights_size, p.scratch_size, [io.shape for io in p.inputs]
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from etlens.errors import FormatError, TruncatedFileError

__all__ = ["ETHOSU_BACKEND_IDS", "VelaBlock", "VelaIO", "EthosUPayload", "decode_ethosu", "is_ethosu_backend"]

#: Backend ids whose payload is a Vela bin stream.
ETHOSU_BACKEND_IDS = frozenset({"EthosUBackend", "ArmBackendEthosU"})

_HEADER = struct.Struct("<16sIB11s")  # 32 bytes
_IO = struct.Struct("<9i")             # 6 dims, element size, offset, region
_FIRST, _LAST = "vela_bin_stream", "vela_end_stream"
_KNOWN = (_FIRST, "cmd_data", "weight_data", "scratch_size", "inputs", "outputs", _LAST)
_CMD_MAGICS = (b"COP1", b"COP2")
_EXTERNAL_KEY_SIZE = 64
_MAX_IOS = 4096
_HINT = "re-export the program with the Arm backend (to_edge_transform_and_lower + EthosUPartitioner)"


def is_ethosu_backend(backend_id: str) -> bool:
    """True when ``backend_id`` names the Ethos-U backend (its payload is a Vela bin stream)."""
    return backend_id in ETHOSU_BACKEND_IDS


@dataclass(slots=True)
class VelaBlock:
    """One block of the stream: ``name``, where its data starts in the payload and its unpadded size."""

    name: str
    offset: int
    size: int
    external: bool = False
    key: str = ""  # the named-data key when external


@dataclass(slots=True)
class VelaIO:
    """One NPU input or output: 6-D ``shape`` as Vela pads it, element size, offset and region."""

    shape: tuple[int, ...]
    elem_size: int
    offset: int
    region: int

    @property
    def nbytes(self) -> int:
        n = self.elem_size
        for d in self.shape:
            n *= max(d, 0)
        return n

    def squeezed_shape(self) -> tuple[int, ...]:
        """The shape without Vela's leading 1-padding (at least one dim)."""
        dims = list(self.shape)
        while len(dims) > 1 and dims[0] == 1:
            dims.pop(0)
        return tuple(dims)

    def to_json(self) -> dict[str, Any]:
        return {"shape": list(self.squeezed_shape()), "vela_shape": list(self.shape), "elem_size": self.elem_size,
                "bytes": self.nbytes, "offset": self.offset, "region": self.region}


@dataclass(slots=True)
class EthosUPayload:
    """What :func:`decode_ethosu` learned about one Ethos-U delegate.

    ``flash_bytes`` is the weights (what Vela's summary calls *Off-chip Flash used* in the
    ``Shared_Sram`` memory mode); the command stream is stored next to them in the program, so
    ``flash_with_command_stream_bytes`` is what the payload occupies in flash. ``sram_bytes`` is the
    scratch the runtime must allocate in SRAM (Vela's *Total SRAM used*).
    """

    size: int = 0
    blocks: list[VelaBlock] = field(default_factory=list)
    command_stream_version: str = ""
    command_stream_size: int = 0
    weights_size: int = 0
    scratch_size: int = 0
    inputs: list[VelaIO] = field(default_factory=list)
    outputs: list[VelaIO] = field(default_factory=list)
    #: blocks stored outside the payload as named data (key -> block name); sizes come from the program
    external: dict[str, str] = field(default_factory=dict)

    @property
    def sram_bytes(self) -> int:
        return self.scratch_size

    @property
    def flash_bytes(self) -> int:
        return self.weights_size

    @property
    def flash_with_command_stream_bytes(self) -> int:
        return self.weights_size + self.command_stream_size

    def attrs(self) -> dict[str, Any]:
        """JSON-ready facts (``etlens info``, ``Node.attrs['ethos_u']``)."""
        return {
            "payload_size": self.size,
            "command_stream_version": self.command_stream_version,
            "command_stream_bytes": self.command_stream_size,
            "weights_bytes": self.weights_size,
            "scratch_bytes": self.scratch_size,
            "fast_scratch_bytes": None,  # not in the payload (Vela's value is in the sidecar, see above)
            "sram_bytes": self.sram_bytes,
            "flash_bytes": self.flash_bytes,
            "flash_with_command_stream_bytes": self.flash_with_command_stream_bytes,
            "inputs": [io.to_json() for io in self.inputs],
            "outputs": [io.to_json() for io in self.outputs],
            "blocks": [{"name": b.name, "offset": b.offset, "size": b.size, "external": b.external}
                       for b in self.blocks],
        }


def _ios(data: memoryview, block: VelaBlock, name: str) -> list[VelaIO]:
    where = f"{name}: block {block.name!r} at byte {block.offset}"
    if block.size < 4:
        raise FormatError(f"{where} is {block.size} bytes, too short for its int32 count; {_HINT}")
    (count,) = struct.unpack_from("<i", data, block.offset)
    if count < 0 or count > _MAX_IOS or 4 + count * _IO.size > block.size:
        raise FormatError(f"{where} says {count} tensors ({4 + max(count, 0) * _IO.size} bytes) but holds "
                          f"{block.size} bytes; the payload is corrupt; {_HINT}")
    out = []
    for i in range(count):
        v = _IO.unpack_from(data, block.offset + 4 + i * _IO.size)
        out.append(VelaIO(tuple(v[:6]), v[6], v[7], v[8]))
    return out


def decode_ethosu(payload: bytes | bytearray | memoryview, name: str = "<payload>",
                  named_sizes: dict[str, int] | None = None) -> EthosUPayload:
    """Parse a Vela bin stream (see the module docstring).

    ``named_sizes`` (named-data key -> bytes) sizes blocks the compiler stored outside the payload
    (``VelaExternalBlockPlacements``); without it their size is unknown (0).
    """
    data = memoryview(payload).cast("B") if not isinstance(payload, memoryview) else payload.cast("B")
    n = len(data)
    head = bytes(data[:len(_FIRST)])
    if n < _HEADER.size and head and _FIRST.encode().startswith(head):
        raise TruncatedFileError(f"{name}: {n} bytes is too short for a Vela bin stream (its first block header is "
                                 f"{_HEADER.size} bytes); the payload is truncated; {_HINT}")
    if n < _HEADER.size or head != _FIRST.encode():
        raise FormatError(f"{name}: not a Vela bin stream (expected block {_FIRST!r} at byte 0, found "
                          f"{bytes(data[:16])!r}); {_HINT}")
    out = EthosUPayload(size=n)
    pos = 0
    ended = False
    while pos < n:
        if pos + _HEADER.size > n:
            raise TruncatedFileError(f"{name}: block header at byte {pos} needs {_HEADER.size} bytes but the payload "
                                     f"ends at byte {n}; the payload is truncated; {_HINT}")
        raw, size, ext, _ = _HEADER.unpack_from(data, pos)
        bname = raw.split(b"\0", 1)[0].decode("ascii", "replace")
        start = pos + _HEADER.size
        if bname not in _KNOWN:
            raise FormatError(f"{name}: unknown block {bname!r} at byte {pos} (known: {', '.join(_KNOWN)}); "
                              f"the payload is corrupt or from a newer Arm backend; {_HINT}")
        if start + size > n:
            raise TruncatedFileError(f"{name}: block {bname!r} at byte {pos} declares {size} bytes but the payload "
                                     f"ends at byte {n}; the payload is truncated; {_HINT}")
        if bname == _FIRST and pos != 0:
            raise FormatError(f"{name}: block {_FIRST!r} repeated at byte {pos}; {_HINT}")
        block = VelaBlock(bname, start, size, external=ext == 1)
        out.blocks.append(block)
        pos = start + ((size + 15) // 16) * 16
        real = size
        if block.external:
            if size != _EXTERNAL_KEY_SIZE:
                raise FormatError(f"{name}: external block {bname!r} at byte {block.offset - _HEADER.size} holds "
                                  f"{size} bytes, expected a {_EXTERNAL_KEY_SIZE}-character named-data key; {_HINT}")
            block.key = bytes(data[start:start + size]).decode("ascii", "replace")
            out.external[block.key] = bname
            real = (named_sizes or {}).get(block.key, 0)
        if bname == "cmd_data":
            if not block.external:
                magic = bytes(data[start:start + 4])
                if magic not in _CMD_MAGICS:
                    raise FormatError(f"{name}: command stream at byte {start} starts with {magic!r}, not the driver "
                                      f"magic COP1/COP2; the payload is corrupt; {_HINT}")
                out.command_stream_version = magic.decode()
            out.command_stream_size = real
        elif bname == "weight_data":
            out.weights_size = real
        elif bname == "scratch_size":
            if size < 4:
                raise FormatError(f"{name}: block 'scratch_size' at byte {start} is {size} bytes, expected 4; {_HINT}")
            out.scratch_size = struct.unpack_from("<I", data, start)[0]
        elif bname == "inputs":
            out.inputs = _ios(data, block, name)
        elif bname == "outputs":
            out.outputs = _ios(data, block, name)
        elif bname == _LAST:
            if pos != n:
                raise FormatError(f"{name}: block {_LAST!r} at byte {block.offset - _HEADER.size} is followed by "
                                  f"{n - pos} more bytes; the payload is corrupt; {_HINT}")
            ended = True
    if not ended:
        raise TruncatedFileError(f"{name}: no {_LAST!r} block before the payload ends at byte {n}; the payload is "
                                 f"truncated; {_HINT}")
    missing = [b for b in ("cmd_data", "scratch_size", "inputs", "outputs") if b not in {x.name for x in out.blocks}]
    if missing:
        raise FormatError(f"{name}: Vela bin stream lacks block(s) {', '.join(missing)}; {_HINT}")
    return out


def decode(payload: memoryview, *, name: str, program: Any = None) -> EthosUPayload:
    """The ``payload`` hook (etlens.backends.ROLES): decode an Ethos-U delegate's Vela bin stream, its
    external blocks sized from the program's named data."""
    named = {}
    if program is not None:
        named = {nd.key: program.segments[nd.segment_index].size for nd in program.named_data
                 if nd.segment_index < len(program.segments)}
    return decode_ethosu(payload, name=name, named_sizes=named)
