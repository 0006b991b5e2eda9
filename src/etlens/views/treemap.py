"""A file-size treemap as a self-contained HTML page (inline SVG, squarified layout, no network).

The leaves of a :class:`~etlens.analysis.size.SizeReport` are grouped by ``group`` (header,
program, constants, ``delegate XnnpackBackend``, named data, segments); each group is a rectangle
with an area proportional to its bytes, split into its leaves. Hover a leaf for its name, bytes
and share of the file. A table under the map lists the groups and the largest leaves.

Example::

    from etlens.analysis.size import size_of_file
    write_treemap_html(size_of_file("model.pte"), "size.html")
"""

from __future__ import annotations

import os
from typing import Any

from .memory_timeline import TOOLTIP_JS
from .page import esc, page
from .text import format_bytes

__all__ = ["squarify", "treemap_svg", "treemap_page", "write_treemap_html", "TREEMAP_CSS"]

TREEMAP_CSS = """
.etl-size{font:13px system-ui,sans-serif;color:#1d2433}
.etl-size td{overflow-wrap:anywhere}
.etl-size svg{background:#fff;border:1px solid #d8dde8}
.etl-size rect.leaf{stroke:#fff;stroke-width:1}
.etl-size rect.leaf:hover{stroke:#000;stroke-width:2}
.etl-size table{border-collapse:collapse;margin-top:10px}
.etl-size td,.etl-size th{padding:2px 10px;border-bottom:1px solid #eee;text-align:left}
.etl-size td.n{text-align:right;font-variant-numeric:tabular-nums}
.etl-tip{position:fixed;pointer-events:none;background:#1d2433;color:#fff;padding:6px 8px;border-radius:4px;
 font:12px ui-monospace,monospace;white-space:pre;display:none;z-index:10}
"""

_KIND_COLORS = {"header": "#8c96a8", "program": "#4c78a8", "constant": "#f58518", "delegate": "#54a24b",
                "named_data": "#b279a2", "mutable_data": "#e45756", "padding": "#d8dde8", "segment": "#9d755d"}
#: a backend's own constants inside its payload (kind ``<backend>_constant``, e.g. XNNPACK's)
_BACKEND_CONSTANT_COLOR = "#88d27a"


def _kind_colors(kinds: set[str]) -> dict[str, str]:
    """``{kind: colour}`` for the legend, in the order of :data:`_KIND_COLORS` (backend constants after delegate)."""
    out = {}
    for k, c in _KIND_COLORS.items():
        if k in kinds:
            out[k] = c
        if k == "delegate":
            out.update({b: _BACKEND_CONSTANT_COLOR for b in sorted(kinds)
                        if b.endswith("_constant") and b != "constant"})
    return out


def _color(kind: str) -> str:
    if kind in _KIND_COLORS:
        return _KIND_COLORS[kind]
    return _BACKEND_CONSTANT_COLOR if kind.endswith("_constant") else "#bbb"


def squarify(values: list[float], x: float, y: float, w: float, h: float) -> list[tuple[float, float, float, float]]:
    """Squarified treemap layout (Bruls et al.): one rectangle per value (sorted descending by the
    caller), areas proportional to the values, aspect ratios close to 1."""
    out: list[tuple[float, float, float, float]] = []
    total = sum(values)
    if total <= 0 or not values:
        return [(x, y, 0.0, 0.0) for _ in values]
    scale = w * h / total
    areas = [v * scale for v in values]
    i = 0
    while i < len(areas):
        short = min(w, h)
        row = [areas[i]]
        j = i + 1

        while j < len(areas) and _worst(row + [areas[j]], short) <= _worst(row, short):
            row.append(areas[j])
            j += 1
        s = sum(row)
        if w >= h:  # lay the row out as a column on the left
            cw = s / h if h else 0
            cy = y
            for a in row:
                ch = a / cw if cw else 0
                out.append((x, cy, cw, ch))
                cy += ch
            x, w = x + cw, w - cw
        else:
            rh = s / w if w else 0
            cx = x
            for a in row:
                cw2 = a / rh if rh else 0
                out.append((cx, y, cw2, rh))
                cx += cw2
            y, h = y + rh, h - rh
        i = j
    return out


def _worst(row: list[float], short: float) -> float:
    """The worst aspect ratio of a row of areas laid along a side of length ``short``."""
    s = sum(row)
    if s <= 0:
        return 1e18
    return max(max(s * s / (short * short * a), short * short * a / (s * s)) if a > 0 else 1e18 for a in row)


def treemap_svg(report: Any, width: int = 960, height: int = 520) -> str:
    """The treemap and tables as an HTML fragment (needs :data:`TREEMAP_CSS` and the tooltip script)."""
    total = report.total_bytes or 1
    groups: dict[str, list[Any]] = {}
    for p in report.parts:
        groups.setdefault(p.group, []).append(p)
    order = sorted(groups.items(), key=lambda kv: -sum(p.bytes for p in kv[1]))
    rects = squarify([sum(p.bytes for p in ps) for _, ps in order], 0, 0, width, height)
    svg = [f"<svg width='{width}' height='{height}' role='img' aria-label='size treemap'>"]
    for (gname, ps), (gx, gy, gw, gh) in zip(order, rects, strict=True):
        ps = sorted(ps, key=lambda p: -p.bytes)
        pad = 14 if gh > 40 and gw > 60 else 0
        inner = squarify([p.bytes for p in ps], gx + 1, gy + pad, max(gw - 2, 0), max(gh - pad - 1, 0))
        gbytes = sum(p.bytes for p in ps)
        svg.append(f"<rect x='{gx:.1f}' y='{gy:.1f}' width='{gw:.1f}' height='{gh:.1f}' fill='#eef1f6' "
                   f"stroke='#1d2433' stroke-width='1'/>")
        if pad:
            svg.append(f"<text x='{gx + 4:.1f}' y='{gy + 11:.1f}' font-size='11' font-weight='600'>"
                       f"{esc(gname)} · {esc(format_bytes(gbytes))}</text>")
        for p, (x, y, w, h) in zip(ps, inner, strict=True):
            if w <= 0 or h <= 0:
                continue
            tip = esc(f"{p.name}\n{p.kind} · {p.bytes} B ({format_bytes(p.bytes)}, "
                              f"{100 * p.bytes / total:.2f}% of the file)\ngroup: {p.group}")
            svg.append(f"<rect class='leaf' x='{x:.1f}' y='{y:.1f}' width='{w:.1f}' height='{h:.1f}' "
                       f"fill='{_color(p.kind)}' data-tip='{tip}'/>")
            if w > 70 and h > 14:
                label = p.name if len(p.name) * 6 < w else p.name[:max(int(w / 6) - 1, 1)] + "…"
                svg.append(f"<text x='{x + 3:.1f}' y='{y + 12:.1f}' font-size='10' pointer-events='none'>"
                           f"{esc(label)}</text>")
    svg.append("</svg>")
    legend = " ".join(f"<span style='display:inline-block;width:10px;height:10px;background:{c}'></span> {k}"
                      for k, c in _kind_colors({p.kind for p in report.parts}).items())
    rows = "".join(f"<tr><td>{esc(g)}</td><td class='n'>{sum(p.bytes for p in ps)}</td>"
                   f"<td class='n'>{100 * sum(p.bytes for p in ps) / total:.1f}%</td></tr>" for g, ps in order)
    top = sorted(report.parts, key=lambda p: -p.bytes)[:15]
    top_rows = "".join(f"<tr><td>{esc(p.name)}</td><td>{esc(p.kind)}</td><td class='n'>{p.bytes}</td></tr>"
                       for p in top)
    return (f"<div class='etl-size'><p>{legend}</p>{''.join(svg)}"
            f"<table><tr><th>group</th><th>bytes</th><th>share</th></tr>{rows}"
            f"<tr><th>total</th><th class='n'>{report.total_bytes}</th><th></th></tr></table>"
            f"<h4>Largest parts</h4><table><tr><th>part</th><th>kind</th><th>bytes</th></tr>{top_rows}</table></div>")


def write_treemap_html(report: Any, path: str, title: str | None = None) -> str:
    """Write the whole treemap page (offline) and return ``path``."""
    doc = treemap_page(report, title)
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)
    return path


def treemap_page(report: Any, title: str | None = None) -> str:
    """The whole offline page :func:`write_treemap_html` writes, as a string (the notebook display embeds it)."""
    title = title or f"size · {os.path.basename(report.path)} · {report.total_bytes} bytes"
    return page(title, "<p>Every byte of the file is in exactly one rectangle (area = bytes). Hover for details.</p>"
                + treemap_svg(report), css="body{margin:16px}" + TREEMAP_CSS, script=TOOLTIP_JS, heading="h2",
                body_class="etl-size")
