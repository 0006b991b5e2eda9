"""Read an ExecuTorch program (``.pte``) without ExecuTorch.

A ``.pte`` file is a FlatBuffer (identifier ``ET12``) whose root ``Program`` holds one
``ExecutionPlan`` per method. A plan has a table of *values* (tensors, ints, lists …), the ids of
its input and output values, *chains* of *instructions* (kernel call, delegate call, move,
jump-if-false, free), an *operator table* (``aten::add`` + overload ``out``) and the *delegates*
(backend id, compile specs and where the backend's payload lives).

Big data usually sits after the FlatBuffer in *segments*. Bytes 8-40 then hold an *extended
header*: magic ``eh00``, ``uint32`` header length, ``uint64`` program (FlatBuffer) size,
``uint64`` segment base offset and (when the length allows) ``uint64`` segment data size. Segment
``i`` starts at ``segment_base_offset + segments[i].offset``. Delegate payloads are either INLINE
(``Program.backend_delegate_data[index]``) or in a SEGMENT; constant tensors are either inline
``constant_buffer`` entries or sub-ranges of the ``constant_segment``; backends may keep weights
in ``named_data`` entries (key -> segment).

:func:`read` returns a :class:`PteArtifact` whose ``program`` is a tree of small dataclasses
(:class:`Program`, :class:`ExecutionPlan`, :class:`Instruction`, :class:`Delegate` …); its
:meth:`~PteArtifact.graphs` turn each plan's data flow into an :class:`etlens.model.Graph` (built
on first use) and :meth:`~PteArtifact.summary` is what ``etlens info`` prints.

The work is split by responsibility: the dataclasses live in :mod:`._pte_model`, the table
decoding in :mod:`._pte_decode`, the graph building and summary in :mod:`._pte_graph`; this module
handles the file layout (header, segments, payloads) and is the public entry point.

Example::

    from etlens.readers.pte import read
    art = read("model.pte")
    plan = art.program.execution_plan[0]
    print(plan.name, len(plan.instructions()), [op.qualified for op in plan.operators])
    graph = art.graphs()["forward"]
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any

from ..backends import for_delegate, hook
from ..errors import FormatError, TruncatedFileError
from ..model import Graph
from ..schema import program_fbs as pfb
from ._flatbuffers import FlatBuffer
from ._pte_decode import decode_plan
from ._pte_model import (SCALAR_TYPES, AllocationInfo, Chain, CompileSpec, DataSegment, Delegate, ExecutionPlan,
                         ExtendedHeader, Frame, Instruction, NamedData, Operator, Program, TensorValue, Value)
from .base import Artifact, read_limited

__all__ = [
    "SCALAR_TYPES",
    "ExtendedHeader",
    "AllocationInfo",
    "TensorValue",
    "Value",
    "Operator",
    "Instruction",
    "Frame",
    "Chain",
    "CompileSpec",
    "Delegate",
    "DataSegment",
    "NamedData",
    "ExecutionPlan",
    "Program",
    "PteArtifact",
    "read",
    "read_pte_bytes",
]

_EH_MAGIC = b"eh00"
_EH_MIN_LENGTH = 24
_HINT = "re-export the program (to_executorch().save()) or copy the file again"
_EH = struct.Struct("<4sIQQ")


def _extended_header(data: bytes | bytearray | memoryview, name: str) -> ExtendedHeader | None:
    if len(data) < 8 + _EH.size or bytes(data[8:12]) != _EH_MAGIC:
        return None
    magic, length, program_size, base = _EH.unpack_from(data, 8)
    if length < _EH_MIN_LENGTH:
        return None
    seg_size = struct.unpack_from("<Q", data, 32)[0] if length >= 32 and len(data) >= 40 else 0
    size = len(data)
    if program_size < 8 or program_size > size:
        raise TruncatedFileError(
            f"{name}: extended header (bytes 8-{8 + length}) says the program is {program_size} bytes but the file "
            f"has {size}; the file is truncated or corrupt; {_HINT}")
    if base and (base < program_size or base > size):
        raise FormatError(f"{name}: extended header puts the segments at byte {base}, outside "
                          f"{program_size}..{size}; the file is corrupt; {_HINT}")
    if base and seg_size and base + seg_size > size:
        raise TruncatedFileError(f"{name}: extended header declares {seg_size} bytes of segment data from byte "
                                 f"{base}, but the file ends at byte {size}; the file is truncated; {_HINT}")
    return ExtendedHeader(length, program_size, base, seg_size)


def _resolve_payloads(program: Program, inline_spans: list[tuple[int, int]], data: Any, name: str,
                      decode: bool) -> None:
    """Find each delegate's payload bytes (inline or segment) and decode them with their backend's hook."""
    base = program.segment_base_offset
    size = len(data)
    for pi, plan in enumerate(program.execution_plan):
        for di, d in enumerate(plan.delegates):
            where = f"execution_plan[{pi}].delegates[{di}].processed"
            if d.location == "INLINE":
                if d.index >= len(inline_spans):
                    raise FormatError(f"{name}: {where} points at inline data {d.index} but the program has "
                                      f"{len(inline_spans)} backend_delegate_data entries; {_HINT}")
                d.payload_offset, d.payload_size = inline_spans[d.index]
            elif d.location == "SEGMENT":
                if d.index >= len(program.segments):
                    raise FormatError(f"{name}: {where} points at segment {d.index} but the program has "
                                      f"{len(program.segments)} segments; {_HINT}")
                seg = program.segments[d.index]
                d.payload_offset, d.payload_size = base + seg.offset, seg.size
                if not base or d.payload_offset + d.payload_size > size:
                    raise TruncatedFileError(
                        f"{name}: {where} payload (segment {d.index}) spans bytes {d.payload_offset}.."
                        f"{d.payload_offset + d.payload_size} but the file ends at byte {size}"
                        f"{'' if base else ' and has no extended header'}; the file is truncated; {_HINT}")
            else:
                raise FormatError(f"{name}: {where} has unknown data location {d.location}; {_HINT}")
            _decode_payload(program, d, memoryview(data)[d.payload_offset:d.payload_offset + d.payload_size],
                            f"{name}: {where}", decode)


def _decode_payload(program: Program, d: Delegate, payload: memoryview, where: str, decode: bool) -> None:
    """Give ``d`` its backend's name and (with ``decode``) its decoded payload (the ``payload`` hook).

    A delegate of a backend etlens has no decoder for keeps only its generic facts (id, size, specs);
    a payload that does not decode is not a broken program either: ``decode_error`` says why.
    """
    backend = for_delegate(d.id)
    if backend is None:
        return
    d.backend = backend.name
    decoder = hook(backend, "payload") if decode else None
    if decoder is None:
        return
    try:
        d.decoded = decoder(payload, name=f"{where} ({backend.label} payload)", program=program)
    except FormatError as exc:
        d.decode_error = str(exc)


def read_pte_bytes(data: bytes | bytearray | memoryview, name: str = "<bytes>", *,
                   decode_delegates: bool = True) -> "PteArtifact":
    """Parse the bytes of a ``.pte`` into a :class:`PteArtifact` (graphs are built on first use)."""
    n = len(data)
    if n < 8:
        raise TruncatedFileError(f"{name}: {n} bytes is too short for an ExecuTorch program (a FlatBuffer needs "
                                 f"at least 8 bytes); {_HINT}")
    ident = bytes(data[4:8])
    if not (ident[:2] == b"ET" and ident[2:4].isdigit()):
        raise FormatError(f"{name}: not an ExecuTorch program (identifier {ident!r} at bytes 4-8, expected "
                          f"b'ET12'); pass a .pte written by to_executorch().save()")
    if ident != pfb.FILE_IDENTIFIER:
        raise FormatError(f"{name}: ExecuTorch program version {ident.decode()} is not supported (expected ET12); "
                          "re-export it with ExecuTorch 1.x")
    eh = _extended_header(data, name)
    fb = FlatBuffer(data, name, end=eh.program_size if eh else n, what="ExecuTorch program")
    root = fb.root("program")
    P = pfb.Program
    program = Program(
        version=root.get(P.version),
        execution_plan=[decode_plan(p) for p in root.children(P.execution_plan)],
        extended_header=eh,
        file_size=n,
    )
    program.constant_buffer_sizes = [b.blob_span(pfb.Buffer.storage)[1] for b in root.children(P.constant_buffer)]
    inline_spans = [b.blob_span(pfb.BackendDelegateInlineData.data) for b in root.children(P.backend_delegate_data)]
    program.backend_delegate_data_sizes = [s for _, s in inline_spans]
    program.segments = [DataSegment(s.get(pfb.DataSegment.offset), s.get(pfb.DataSegment.size))
                        for s in root.children(P.segments)]
    SO = pfb.SubsegmentOffsets
    cs = root.child(P.constant_segment)
    if cs is not None:
        program.constant_segment_index = cs.get(SO.segment_index)
        program.constant_segment_offsets = cs.items(SO.offsets)
    program.mutable_data_segments = [(m.get(SO.segment_index), m.items(SO.offsets))
                                     for m in root.children(P.mutable_data_segments)]
    program.named_data = [NamedData(t.text(pfb.NamedData.key, "") or "", t.get(pfb.NamedData.segment_index))
                          for t in root.children(P.named_data)]
    _check_segments(program, n, name)
    _resolve_payloads(program, inline_spans, data, name, decode_delegates)
    return PteArtifact(format="pte", path=name, program=program)


def _check_segments(program: Program, size: int, name: str) -> None:
    base = program.segment_base_offset
    for i, seg in enumerate(program.segments):
        # an empty segment needs no bytes (a program whose constants all live in a .ptd has one, and no
        # extended header)
        if (not base and seg.size) or base + seg.offset + seg.size > size:
            raise TruncatedFileError(
                f"{name}: program.segments[{i}] spans bytes {base + seg.offset}..{base + seg.offset + seg.size} "
                f"but the file ends at byte {size}{'' if base else ' and has no extended header'}; "
                f"the file is truncated; {_HINT}")
    nseg = len(program.segments)
    if program.constant_segment_offsets and (program.constant_segment_index or 0) >= nseg:
        raise FormatError(f"{name}: program.constant_segment.segment_index {program.constant_segment_index} "
                          f">= {nseg} segments; {_HINT}")
    for i, nd in enumerate(program.named_data):
        if nd.segment_index >= nseg:
            raise FormatError(f"{name}: program.named_data[{i}] ({nd.key!r}) points at segment {nd.segment_index} "
                              f"but the program has {nseg}; {_HINT}")


def read(path: str | os.PathLike[str]) -> "PteArtifact":
    """Parse a ``.pte`` file (see :func:`read_pte_bytes`)."""
    path = os.fspath(path)
    return read_pte_bytes(read_limited(path), name=path)


# ---------------------------------------------------------------------------------------------
# The artifact
# ---------------------------------------------------------------------------------------------
@dataclass
class PteArtifact(Artifact):
    """A parsed ``.pte``: ``program`` (the structure) plus graphs and a summary."""

    program: Program | None = None

    def graphs(self) -> dict[str, Graph]:
        if not self._graphs and self.program is not None:
            from ._pte_graph import plan_graph

            for plan in self.program.execution_plan:
                self._graphs[plan.name] = plan_graph(self.program, plan)
        return dict(self._graphs)

    def summary(self) -> dict[str, Any]:
        """The generic per-graph summary (``graphs``) plus the program's facts (``methods`` …)."""
        from ._pte_graph import program_summary

        out = program_summary(self)
        out["graphs"] = super().summary()["graphs"]
        return out
