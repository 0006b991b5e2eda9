"""Runtime allocations (from :func:`etlens.analysis.allocations.allocation_summary`) as text and HTML.

:func:`format_allocations` is what ``etlens inspect --allocations`` prints; :func:`allocations_html`
the report section (bytes per allocator, largest allocations, and a cumulative-bytes timeline
drawn as inline SVG, one line per allocator).
"""

from __future__ import annotations

import html
from typing import Any

from .text import format_bytes

__all__ = ["format_allocations", "allocations_html"]

_COLORS = ("#2d6cdf", "#d9480f", "#2f9e44", "#9c36b5", "#e67700", "#1098ad")


def format_allocations(summary: dict[str, Any]) -> str:
    if not summary["runs"]:
        return ("no allocation events in this ETDump (the runtime records them only for allocators passed to "
                "ETDumpGen::track_allocator)")
    lines = []
    for r in summary["runs"]:
        lines.append(f"run {r['run']} ({r['name']}): {r['total_bytes']} B ({format_bytes(r['total_bytes'])}) in "
                     f"{sum(a['count'] for a in r['allocators'])} allocations")
        for a in r["allocators"]:
            lines.append(f"  allocator {a['id']} {a['name']:<24} {a['count']:>6} allocations {a['bytes']:>12} B")
        for a in r["largest"]:
            lines.append(f"    event {a['event']:>5}  {a['bytes']:>12} B  {a['allocator']}"
                         + (f"  during {a['during']}" if a["during"] else ""))
    return "\n".join(lines)


def _timeline_svg(r: dict[str, Any], width: int = 900, height: int = 160) -> str:
    tl = r["timeline"]
    if not tl:
        return ""
    n = max(t["event"] for t in tl) + 1
    top = max(t["cumulative_bytes"] for t in tl) or 1
    out = [f"<svg width='{width}' height='{height + 20}' style='background:#fbfcfe;border:1px solid #d8dde8'>"]
    for k, a in enumerate(r["allocators"]):
        pts = [(0, 0)] + [(t["event"], t["cumulative_bytes"]) for t in tl if t["allocator_id"] == a["id"]]
        path = " ".join(f"{10 + (width - 20) * e / n:.1f},{height - (height - 10) * b / top:.1f}" for e, b in pts)
        out.append(f"<polyline points='{path}' fill='none' stroke='{_COLORS[k % len(_COLORS)]}' stroke-width='2'>"
                   f"<title>{html.escape(a['name'])}: {a['bytes']} B</title></polyline>")
        out.append(f"<text x='{width - 12}' y='{14 + 12 * k}' font-size='11' text-anchor='end' "
                   f"fill='{_COLORS[k % len(_COLORS)]}'>{html.escape(a['name'])}</text>")
    out.append(f"<text x='10' y='{height + 14}' font-size='10' fill='#666'>event 0</text>"
               f"<text x='{width - 10}' y='{height + 14}' font-size='10' fill='#666' text-anchor='end'>"
               f"event {n - 1} · max {html.escape(format_bytes(top))}</text></svg>")
    return "".join(out)


def allocations_html(summary: dict[str, Any]) -> str:
    """HTML fragment: per run, a table per allocator, the largest allocations and the timeline."""
    parts = []
    for r in summary["runs"]:
        rows = "".join(f"<tr><td>{a['id']}</td><td>{html.escape(a['name'])}</td><td>{a['count']}</td>"
                       f"<td>{a['bytes']}</td></tr>" for a in r["allocators"])
        big = "".join(f"<tr><td>{a['event']}</td><td>{html.escape(a['allocator'])}</td><td>{a['bytes']}</td>"
                      f"<td>{html.escape(a['during'] or '')}</td></tr>" for a in r["largest"])
        parts.append(f"<h3>run {r['run']} · {html.escape(r['name'])} · {html.escape(format_bytes(r['total_bytes']))}"
                     f"</h3><table><tr><th>id</th><th>allocator</th><th>allocations</th><th>bytes</th></tr>{rows}"
                     f"</table><h4>Largest allocations</h4><table><tr><th>event</th><th>allocator</th><th>bytes</th>"
                     f"<th>during</th></tr>{big}</table>{_timeline_svg(r)}")
    return "".join(parts)
