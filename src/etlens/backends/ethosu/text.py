"""Text views of an Ethos-U program: Vela's estimates per ATen node, CPU fallbacks, layout cost.

:func:`format_ethos_u_delegation` renders an :class:`etlens.analysis.ethosu.EthosUDelegation`
(``etlens delegation MODEL.etrecord`` appends it when a Vela sidecar sits beside the record).
"""

from __future__ import annotations

from typing import Any

__all__ = ["format_ethos_u_delegation"]


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
