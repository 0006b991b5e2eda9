"""Text views of a program's planned memory (``etlens memory``) and of a file's size (``etlens size``).

They take the reports of :mod:`etlens.analysis.memory` and :mod:`etlens.analysis.size` and print only;
the same reports feed the HTML views (:mod:`.memory_timeline`, :mod:`.treemap`) and ``--format json``.
"""

from __future__ import annotations

from typing import Any

from .text import format_bytes

__all__ = ["format_memory", "format_size"]


def format_memory(report: Any, top: int = 10) -> str:
    """The planned memory of every method as text: arenas with their peak and waste, the ``top``
    largest tensors of each with lifetime, producer and (with an ETRecord) node and module, and overlaps."""
    lines = [f"{report.path}"]
    for m in report.methods:
        lines.append(f"\nmethod {m.name}: {len(m.instructions)} instructions, {len(m.tensors)} planned tensors, "
                     f"non_const_buffer_sizes {list(m.non_const_buffer_sizes)}")
        if m.state:
            kv = m.kv_cache()
            per = kv["bytes_per_token"]
            lines.append(f"  state (mutable buffers, e.g. the KV cache; live for the whole method, not waste): "
                         f"{kv['tensors']} tensors, {kv['bytes']} B ({format_bytes(kv['bytes'])})"
                         + (f" = {per:g} B per token x max_seq_len {kv['max_seq_len']}" if per == per else "")
                         + ": " + ", ".join(kv["names"][:8]) + (" …" if len(kv["names"]) > 8 else ""))
        for a in m.arenas:
            op = m.instructions[a.peak_at] if 0 <= a.peak_at < len(m.instructions) else "-"
            lines.append(f"  arena {a.id}: size {a.size} B ({format_bytes(a.size)}), peak live {a.peak_live} B at "
                         f"instruction {a.peak_at} ({op}), waste {a.waste} B, {len(a.live_at_peak)} tensors live at "
                         "the peak")
            big = sorted((t for t in m.tensors if t.arena == a.id), key=lambda t: -t.size)[:top]
            for t in big:
                where = f"  {t.node} ({t.module})" if t.node else ""
                lines.append(f"    v{t.value:<5} off {t.offset:>9} size {t.size:>9} live {t.first:>4}..{t.last:<4} "
                             f"{t.dtype}{list(t.shape)} {t.producer}{where}")
        for o in m.overlaps:
            lines.append(f"  overlap ({o.kind}): v{o.a} and v{o.b} share {o.bytes} B of arena {o.arena} during "
                         f"instructions {o.instructions[0]}..{o.instructions[1]}: {o.reason}")
    return "\n".join(lines)


def format_size(report: Any, top: int = 20) -> str:
    """Where the bytes of a file go, as text: bytes and share per group, then the ``top`` largest parts."""
    total = report.total_bytes or 1
    groups: dict[str, int] = {}
    for p in report.parts:
        groups[p.group] = groups.get(p.group, 0) + p.bytes
    lines = [f"{report.path}: {report.total_bytes} bytes ({format_bytes(report.total_bytes)}), "
             f"{len(report.parts)} parts"]
    for g, b in sorted(groups.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {g:<34} {b:>12} B  {100 * b / total:5.1f}%")
    lines.append(f"largest {min(top, len(report.parts))} parts:")
    for p in sorted(report.parts, key=lambda p: -p.bytes)[:top]:
        lines.append(f"  {p.bytes:>12} B  {p.kind:<16} {p.name}")
    return "\n".join(lines)
