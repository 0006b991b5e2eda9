"""XNNPACK memory facts: how its payload's bytes split (the ``memory`` hook, analysis floor).

:func:`payload_parts` is what :func:`etlens.analysis.size.analyze_size` asks for every XNNPACK
delegate: the ``XH00`` header, the XNNGraph FlatBuffer and each constant entry (named by the node
that reads it). Constants kept in the program's named data are recorded in ``named`` (key -> label)
so the named-data parts say which node reads them.
"""

from __future__ import annotations

import struct
from typing import Any

from etlens.analysis.size import Part

__all__ = ["payload_parts", "init_note"]


def payload_parts(d: Any, di: int, plan_name: str, group: str, data: Any,
                  named: dict[str, str]) -> list[tuple[int, int, Part]] | None:
    """``[(file offset, bytes, Part)]`` of one XNNPACK payload, or None when it cannot be split."""
    x = d.decoded
    if x is None or not getattr(x, "has_header", False):
        return None
    out: list[tuple[int, int, Part]] = []
    base = d.payload_offset
    # the XH00 header: its own length, then graph and constant regions (see payload.py)
    _, _, hlen, fb_off, fb_size, const_off, _ = struct.unpack_from("<4s4sHIIIQ", data, base)
    who = f"{plan_name} delegate[{di}]"
    out.append((base, hlen, Part(f"{who} XNNPACK header", 0, "delegate", group)))
    out.append((base + fb_off, fb_size, Part(f"{who} XNNGraph FlatBuffer ({len(x.nodes)} nodes)", 0, "delegate",
                                             group)))
    users: dict[int, str] = {}
    vals = {v.constant_buffer_idx: v for v in x.values if v.constant_buffer_idx}
    by_vid = {v.id: v for v in x.values}
    for n in x.nodes:
        for vid in n.inputs:
            v = by_vid.get(vid)
            if v is not None and v.constant_buffer_idx and v.constant_buffer_idx not in users:
                users[v.constant_buffer_idx] = n.type + (f" #handle{n.debug_handle}" if n.debug_handle else "")
    for idx, (off, size, key) in enumerate(x.constant_spans):
        v = vals.get(idx)
        shape = f" {v.datatype}[{'x'.join(map(str, v.dims))}]" if v is not None else ""
        if key:
            named.setdefault(key, f"{who} const[{idx}]{shape} {users.get(idx, '')}".rstrip())
        if key or not size:
            continue
        out.append((base + const_off + off, size,
                    Part(f"{who} const[{idx}]{shape} {users.get(idx, '')}".rstrip(), 0, "xnnpack_constant", group,
                         {"delegate": di, "method": plan_name})))
    return out


def init_note(delegate_id: str, alloc_bytes: int, data_bytes: int) -> str | None:
    """Why an XNNPACK delegate allocates at init (:mod:`etlens.analysis.memory_measured` asks).

    XNNPACK repacks the weights of its fully-connected and convolution nodes into its own layout
    when the runtime initialises the delegate, so the packed copy is about the size of the weights;
    the program's copy is read once (its mapped pages are released after init when the file was
    mapped; it stays when the program was copied into memory).
    """
    mb = 1024 * 1024
    ratio = f" ({alloc_bytes / data_bytes:.2f}x)" if data_bytes else ""
    return (f"XNNPACK keeps a packed copy of its weights: {alloc_bytes / mb:.1f} MB allocated at init for the "
            f"{data_bytes / mb:.1f} MB of weights and graph it reads from the program{ratio}; the program's copy is "
            "released after init when the file is mapped, kept when it was loaded into a buffer")
