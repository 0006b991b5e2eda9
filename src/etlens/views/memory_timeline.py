"""Arena occupancy over time as a self-contained HTML page (inline SVG, no network).

For every method and arena of a :class:`~etlens.analysis.memory.MemoryReport` the page draws:

* the *occupancy map*: x is the instruction index, y the byte offset inside the arena; each
  planned tensor is a bar at its offset, as tall as its size and as wide as its lifetime (first to
  last instruction). Hovering a bar shows the value index, shape, dtype, offset, size, lifetime,
  the producing operator and (with an ETRecord) the ATen node and module. Bars involved in a
  *conflict* overlap (a planner bug) have a red outline, *aliases* a dashed one;
* the *live bytes* curve above it, with the peak marked and the arena size as a line, so the
  waste (size minus peak) is the gap between the two.

:func:`memory_svg` returns the SVG+HTML fragment (the report embeds it); :func:`write_memory_html`
writes a whole page. Example::

    from etlens.analysis.memory import analyze_memory
    from etlens.readers.pte import read
    write_memory_html(analyze_memory(read("model.pte")), "memory.html")
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from .page import esc, page
from .text import format_bytes

__all__ = ["memory_svg", "memory_page", "write_memory_html", "MEMORY_CSS", "TOOLTIP_JS"]

MEMORY_CSS = """
.etl-mem{font:13px system-ui,sans-serif;color:#1d2433}
.etl-mem h3{margin:18px 0 4px;font-size:15px}
.etl-mem .facts{color:#4a5468;margin:2px 0 6px}
.etl-mem svg{background:#fbfcfe;border:1px solid #d8dde8;border-radius:4px}
.etl-mem rect.t{stroke:#fff;stroke-width:.5}
.etl-mem rect.t:hover{stroke:#000;stroke-width:1.5}
.etl-mem rect.conflict{stroke:#d11;stroke-width:2}
.etl-mem rect.alias{stroke:#333;stroke-dasharray:3 2}
.etl-mem .bad{color:#b00;font-weight:600}
.etl-tip{position:fixed;pointer-events:none;background:#1d2433;color:#fff;padding:6px 8px;border-radius:4px;
 font:12px ui-monospace,monospace;white-space:pre;display:none;z-index:10;max-width:520px}
"""

TOOLTIP_JS = """
(function(){var tip=document.createElement('div');tip.className='etl-tip';document.body.appendChild(tip);
document.addEventListener('mousemove',function(e){var t=e.target.closest&&e.target.closest('[data-tip]');
if(!t){tip.style.display='none';return;}tip.textContent=t.getAttribute('data-tip');tip.style.display='block';
var x=e.clientX+14,y=e.clientY+14;if(x+tip.offsetWidth>innerWidth)x=e.clientX-tip.offsetWidth-8;
if(y+tip.offsetHeight>innerHeight)y=e.clientY-tip.offsetHeight-8;tip.style.left=x+'px';tip.style.top=y+'px';});})();
"""


def _color(key: str) -> str:
    h = int(hashlib.md5(key.encode()).hexdigest()[:6], 16)
    return f"hsl({h % 360},{55 + h % 25}%,{58 + (h >> 8) % 14}%)"


def _tip(t: Any, labels: list[str]) -> str:
    lines = [f"value {t.value}  {t.dtype}{list(t.shape)}", f"arena {t.arena}  offset {t.offset}  "
             f"size {t.size} ({format_bytes(t.size)})", f"live instructions {t.first}..{t.last}"]
    if t.producer:
        lines.append(f"op: {t.producer}")
    if t.first >= 0 and t.first < len(labels) and labels[t.first] != t.producer:
        lines.append(f"first use: {labels[t.first]}")
    if t.node:
        lines.append(f"node: {t.node}")
    if t.module:
        lines.append(f"module: {t.module}")
    if t.role == "state":
        lines.append("state: a mutable buffer (e.g. KV cache), kept between runs, live for the whole method")
    elif t.role:
        lines.append(f"method {t.role}")
    return "\n".join(lines)


def _arena_svg(m: Any, arena: Any, width: int = 960) -> str:
    n = max(len(m.instructions), 1)
    mine = [t for t in m.tensors if t.arena == arena.id and t.first >= 0]
    top = max(arena.size, arena.used_extent, 1)
    left, plot_w, curve_h, map_h = 64, width - 80, 70, 260
    x = lambda i: left + plot_w * i / n  # noqa: E731
    bad = {o.a: o.kind for o in m.overlaps if o.arena == arena.id} | {o.b: o.kind for o in m.overlaps
                                                                        if o.arena == arena.id}
    parts = [f"<svg width='{width}' height='{curve_h + map_h + 52}' role='img' "
             f"aria-label='arena {arena.id} occupancy'>"]
    # live-bytes curve
    y0 = 10 + curve_h
    pts = " ".join(f"{x(i):.1f},{y0 - curve_h * b / top:.1f} {x(i + 1):.1f},{y0 - curve_h * b / top:.1f}"
                   for i, b in enumerate(arena.live_bytes))
    parts.append(f"<line x1='{left}' x2='{left + plot_w}' y1='10' y2='10' stroke='#999' stroke-dasharray='4 3'/>")
    parts.append("<text x='4' y='14' font-size='10' fill='#666'>size</text>")
    if pts:
        parts.append(f"<polyline points='{pts}' fill='none' stroke='#2d6cdf' stroke-width='1.5'/>")
    if arena.peak_at >= 0:
        px = x(arena.peak_at + 0.5)
        py = y0 - curve_h * arena.peak_live / top
        parts.append(f"<circle cx='{px:.1f}' cy='{py:.1f}' r='4' fill='#d9480f' data-tip='peak "
                     f"{arena.peak_live} B ({format_bytes(arena.peak_live)}) at instruction {arena.peak_at}: "
                     f"{esc(m.instructions[arena.peak_at] if arena.peak_at < len(m.instructions) else '')}'/>")
        parts.append(f"<line x1='{px:.1f}' x2='{px:.1f}' y1='10' y2='{y0 + 20 + map_h}' stroke='#d9480f' "
                     f"stroke-width='1' stroke-dasharray='2 2'/>")
    parts.append(f"<text x='4' y='{y0 - 2}' font-size='10' fill='#666'>live</text>")
    # occupancy map
    my = y0 + 20
    parts.append(f"<rect x='{left}' y='{my}' width='{plot_w}' height='{map_h}' fill='#f1f3f8'/>")
    for t in sorted(mine, key=lambda t: -t.size):
        h = max(map_h * t.size / top, 1.0)
        cls = "t" + (f" {bad[t.value]}" if t.value in bad else "")
        tip = esc(_tip(t, m.instructions))
        parts.append(f"<rect class='{cls}' x='{x(t.first):.1f}' y='{my + map_h * t.offset / top:.1f}' "
                     f"width='{max(x(t.last + 1) - x(t.first), 1.5):.1f}' height='{h:.1f}' "
                     f"fill='{'#64748b' if t.role == 'state' else _color(t.producer or str(t.value))}' "
                     f"data-value='{t.value}' data-tip='{tip}'/>")
    parts.append(f"<text x='4' y='{my + 10}' font-size='10' fill='#666'>0</text>")
    parts.append(f"<text x='4' y='{my + map_h}' font-size='10' fill='#666'>{format_bytes(top)}</text>")
    parts.append(f"<text x='{left}' y='{my + map_h + 14}' font-size='10' fill='#666'>instruction 0</text>")
    parts.append(f"<text x='{left + plot_w}' y='{my + map_h + 14}' font-size='10' fill='#666' "
                 f"text-anchor='end'>{n - 1}</text>")
    parts.append("</svg>")
    return "".join(parts)


def memory_svg(report: Any, width: int = 960) -> str:
    """The occupancy charts of every method and arena (an HTML fragment; needs :data:`MEMORY_CSS`
    and :data:`TOOLTIP_JS` on the page for styling and hover)."""
    out = ["<div class='etl-mem'>"]
    for m in report.methods:
        for a in m.arenas:
            conflicts = [o for o in m.overlaps if o.arena == a.id and o.kind == "conflict"]
            aliases = [o for o in m.overlaps if o.arena == a.id and o.kind == "alias"]
            out.append(f"<h3>{esc(m.name)} · arena {a.id}</h3>")
            facts = (f"size {a.size} B ({format_bytes(a.size)}) · peak live {a.peak_live} B at instruction "
                     f"{a.peak_at} · waste {a.waste} B · {sum(1 for t in m.tensors if t.arena == a.id)} tensors, "
                     f"{len(a.live_at_peak)} live at the peak")
            if aliases:
                facts += f" · {len(aliases)} intended alias(es)"
            state = [t for t in m.state if t.arena == a.id]
            if state:
                kv = m.kv_cache()
                per = kv["bytes_per_token"]
                facts += (f" · state (KV cache, grey, live all method long, not waste): {len(state)} tensors, "
                          f"{format_bytes(sum(t.size for t in state))}"
                          + (f" = {per:g} B/token × max_seq_len {kv['max_seq_len']}" if per == per else ""))
            out.append(f"<p class='facts'>{esc(facts)}"
                       + (f" · <span class='bad'>{len(conflicts)} conflicting overlap(s): planner bug</span>"
                          if conflicts else "") + "</p>")
            out.append(_arena_svg(m, a, width))
        if not m.arenas:
            out.append(f"<h3>{esc(m.name)}</h3><p class='facts'>no planned memory arena</p>")
    out.append("</div>")
    return "".join(out)


def write_memory_html(report: Any, path: str, title: str | None = None, measured: dict[str, Any] | None = None) -> str:
    """Write the whole page (offline) and return ``path`` (``measured``: see :func:`memory_page`)."""
    doc = memory_page(report, title, measured=measured)
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)
    return path


def memory_page(report: Any, title: str | None = None, measured: dict[str, Any] | None = None) -> str:
    """The whole offline page :func:`write_memory_html` writes, as a string (the notebook display embeds it).

    ``measured`` (:func:`etlens.analysis.memory_measured.measured_memory`): the process's measured
    memory, owners and plan-vs-actual, shown above the plan.
    """
    title = title or f"memory · {os.path.basename(report.path)}"
    top = ""
    if measured is not None:
        from .memory_measured import measured_html

        top = "<h3>Measured: the plan beside what the process used</h3>" + measured_html(measured) + \
            "<h3>Planned arenas</h3>"
    return page(title, top + "<p class='facts'>Each bar is a planned tensor: x = the instructions it is live for, "
                "y = its bytes in the arena. The blue curve is the live bytes; the orange dot the peak. "
                "Hover for details.</p>"
                + memory_svg(report), css="body{margin:16px}" + MEMORY_CSS, script=TOOLTIP_JS, heading="h2",
                body_class="etl-mem")
