"""Text views of an Ethos-U program (the ``text`` hook, views floor).

* :func:`format_ethos_u_delegation` renders an :class:`~etlens.backends.ethosu.mapping.EthosUDelegation`:
  Vela's estimates per ATen node, CPU fallbacks, layout cost (``etlens delegation MODEL.etrecord``
  appends it when a Vela sidecar sits beside the record);
* :func:`format_ethos_u_memory` the SRAM/flash budget (``etlens memory``);
* :func:`delegate_line` one line per delegate for ``etlens info``.
"""

from __future__ import annotations

from typing import Any

from etlens.views.text import format_bytes

__all__ = ["format_ethos_u_delegation", "format_ethos_u_memory", "delegate_line", "format_memory",
           "format_delegation"]


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:5.1f}%" if whole else "    -"


def format_ethos_u_delegation(result: Any, top: int = 40) -> str:
    """Vela's totals, the NPU nodes by estimated cycles, the layout changes and every CPU node with its reason."""
    t = result.totals()
    total = t["npu_cycles"] or 0.0
    clock = t.get("clock_hz") or 0.0
    us = f" = {1e6 * total / clock:.1f} us at {clock / 1e6:.0f} MHz" if clock else ""
    lines = [f"Ethos-U ({t['target']}), Vela's estimate: {total:.0f} NPU cycles{us}; SRAM {t['sram_bytes']} B, "
             f"flash {t['flash_bytes']} B; {t['npu_ops']} NPU / {t['cpu_ops']} CPU operators (Vela), "
             f"{t['npu_nodes']} ATen nodes on the NPU, {t['cpu_nodes']} on the CPU",
             f"  Vela rows mapped to ATen nodes: {t['layers_mapped']}/{t['layers']} ({t['layers_by_name']} by tensor "
             f"name, {t['layers_inserted']} inserted by Vela and charged to their consumer); per-node cycles sum to "
             f"{t['node_cycles_sum']:.0f}"]
    npu = sorted((n for n in result.nodes if n.backend is not None and n.npu_cycles),
                 key=lambda n: -(n.npu_cycles or 0))
    if npu:
        lines.append("")
        lines.append(f"  {'NPU node':<40} {'module':<24} {'cycles':>9} {'share':>6} {'MACs':>10} {'layout':>8}")
        for n in npu[:top]:
            lines.append(f"  {n.name[:40]:<40} {n.module_path[:24]:<24} {n.npu_cycles:>9.0f} "
                         f"{_pct(n.npu_cycles or 0.0, total)} {n.macs:>10.0f} {n.layout_cycles:>8.0f}")
        if len(npu) > top:
            lines.append(f"  … {len(npu) - top} more")
    layout = t.get("layout_cycles") or 0.0
    if layout:
        rows = [m for m in result.layers if m.layer.op in ("Transpose", "Reshape", "MemoryCopy", "Copy")]
        lines += ["", f"  layout changes on the NPU: {layout:.0f} cycles ({_pct(layout, total).strip()} of the NPU "
                      f"time) in {len(rows)} operation(s):"]
        for m in rows[:top]:
            lines.append(f"    {m.layer.op:<10} {m.layer.name[:44]:<44} {m.layer.cycles:>8.0f} cycles -> {m.node}")
    cpu = [n for n in result.nodes if n.backend is None]
    if cpu:
        lines += ["", f"  on the CPU ({len(cpu)} node(s)):"]
        for n in cpu:
            lines.append(f"    {n.name} ({n.target}): {n.reason}")
    for note in result.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines) + "\n"


def format_ethos_u_memory(npu: dict[str, Any]) -> str:
    """The Ethos-U budget of a program (``etlens memory``): SRAM and flash per delegate, the totals and,
    with the Vela sidecar, Vela's own figures beside them."""
    sram, dedicated = npu["sram_bytes"], bool(npu.get("dram_bytes"))
    sram_text = ("SRAM unknown (the fast scratch is only known from the Vela sidecar <stem>.vela.json)"
                 if sram is None else
                 f"SRAM {sram} B ({format_bytes(sram)}) {'fast scratch' if dedicated else 'NPU scratch'} + "
                 f"{npu['arena_bytes']} B program arena = {npu['sram_with_arena_bytes']} B")
    if sram is not None and (npu.get("partitions") or 1) > 1:
        sram_text += (f" (the largest scratch of {npu['partitions']} partitions: each lives only during its "
                      f"delegate's call; {npu.get('sram_bytes_sum')} B summed)")
    if dedicated:
        sram_text += f"; DRAM {npu['dram_bytes']} B scratch ({npu.get('memory_mode')})"
    lines = [f"Ethos-U ({npu.get('target') or 'target unknown'}): {sram_text}; flash {npu['flash_bytes']} B weights + "
             f"{npu['command_stream_bytes']} B command stream = {npu['flash_with_command_stream_bytes']} B "
             f"({format_bytes(npu['flash_with_command_stream_bytes'])})"]
    for d in npu["delegates"]:
        if "decode_error" in d:
            lines.append(f"  delegate {d['method']}[{d['index']}]: payload not decoded ({d['decode_error']})")
            continue
        ios = ", ".join("x".join(map(str, io["shape"])) for io in d["inputs"])
        outs = ", ".join("x".join(map(str, io["shape"])) for io in d["outputs"])
        lines.append(f"  delegate {d['method']}[{d['index']}]: scratch {d['scratch_bytes']} B, weights "
                     f"{d['weights_bytes']} B, command stream {d['command_stream_bytes']} B "
                     f"({d['command_stream_version']}); inputs {ios or '-'}; outputs {outs or '-'}")
    vela = npu.get("vela")
    if vela:
        lines.append(f"  Vela's summary ({vela['partitions']} compile(s)): SRAM {vela['sram_bytes']} B (largest), "
                     "flash "
                     f"{vela['flash_bytes']} B, {vela['npu_cycles']:.0f} NPU cycles, {vela['npu_ops']} NPU / "
                     f"{vela['cpu_ops']} CPU operators"
                     + (f", fast scratch {npu['fast_scratch_bytes']} B" if npu.get("fast_scratch_bytes") is not None
                        else ""))
    return "\n".join(lines)


def delegate_line(eu: dict[str, Any]) -> str:
    """One line for an Ethos-U delegate: command stream, weights, SRAM scratch, I/O shapes."""
    ios = " ".join("x".join(map(str, io["shape"])) for io in eu.get("inputs", []))
    outs = " ".join("x".join(map(str, io["shape"])) for io in eu.get("outputs", []))
    return (f"Vela {eu.get('command_stream_version') or 'stream'}: command stream "
            f"{format_bytes(eu['command_stream_bytes'])}, weights {format_bytes(eu['weights_bytes'])} (flash), "
            f"scratch {format_bytes(eu['scratch_bytes'])} (SRAM); in {ios or '-'} -> out {outs or '-'}")


def format_memory(npu: dict[str, Any]) -> str:
    """The ``text`` hook ``etlens memory`` calls: :func:`format_ethos_u_memory`."""
    return format_ethos_u_memory(npu)


def format_delegation(result: Any) -> str:
    """The ``text`` hook ``etlens delegation`` calls: :func:`format_ethos_u_delegation`."""
    return format_ethos_u_delegation(result)
