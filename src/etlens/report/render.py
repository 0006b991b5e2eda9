"""Render the joined report as one self-contained, offline HTML page.

The page is plain HTML + CSS with a few lines of inline script (tab-free, no libraries): summary
cards, tables, an inline-SVG bar chart, and the interactive graph viewers embedded as
``<iframe srcdoc>`` documents (each viewer is itself a complete offline page). Every string that
comes from a model is escaped; the page carries a Content-Security-Policy that forbids any fetch.

:func:`render_report` takes a :class:`ReportPage` — a title, summary cards and ordered sections —
so collecting numbers (``collect.py``) and drawing them stay separate.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ..model.html_policy import REPORT_CSP
from ..views.page import esc as _e
from ..views.page import page as page_shell

__all__ = ["Card", "Section", "ReportPage", "render_report", "table_html", "bar_chart_svg", "iframe_html", "viewer_frame"]

#: the report's Content-Security-Policy (:data:`etlens.model.html_policy.REPORT_CSP`)
CSP = REPORT_CSP


@dataclass
class Card:
    """One headline number in the summary strip (``tone``: ok | warn | bad | info)."""

    label: str
    value: str
    detail: str = ""
    tone: str = "info"


@dataclass
class Section:
    """One report section; ``body`` is trusted HTML built with the functions of this module."""

    id: str
    title: str
    body: str
    intro: str = ""


@dataclass
class ReportPage:
    title: str
    subtitle: str = ""
    cards: list[Card] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if value != 0 and (abs(value) < 10 ** -(digits - 1) or abs(value) >= 1e6):
            return f"{value:.{digits - 1}e}"
        return f"{value:.{digits}g}" if abs(value) < 1 else f"{value:,.{max(digits - 2, 1)}f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v, digits) for v in value)
    return str(value)


def table_html(rows: Iterable[Sequence[Any]], columns: Sequence[str], *, table_id: str = "",
               numeric: Sequence[int] = (), highlight: dict[int, str] | None = None, limit: int = 2000) -> str:
    """An escaped HTML table; ``numeric`` column indexes are right-aligned, ``highlight`` maps
    row index → CSS class (``bad``/``warn``). Rows past ``limit`` are summarised, not dropped silently."""
    highlight = highlight or {}
    rows = list(rows)
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = []
    for i, row in enumerate(rows[:limit]):
        cells = "".join(
            f"<td class='num'>{_e(_fmt(v))}</td>" if j in numeric else f"<td>{_e(_fmt(v))}</td>"
            for j, v in enumerate(row))
        cls = f" class='{highlight[i]}'" if i in highlight else ""
        body.append(f"<tr{cls}>{cells}</tr>")
    more = (f"<p class='muted'>{len(rows) - limit} more rows not shown; see the TSV/JSON outputs.</p>"
            if len(rows) > limit else "")
    tid = f" id='{_e(table_id)}'" if table_id else ""
    return (f"<div class='tablewrap'><table{tid} class='data'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>{more}")


def bar_chart_svg(items: Sequence[tuple[str, float]], *, unit: str = "ms", width: int = 760,
                  bar_height: int = 18, color: str = "#3b82f6") -> str:
    """Horizontal bar chart as inline SVG (labels escaped, values printed at the bar end)."""
    if not items:
        return "<p class='muted'>No data.</p>"
    label_w = 300
    top = max(v for _, v in items) or 1.0
    h = bar_height + 6
    parts = [f"<svg class='chart' role='img' width='{width}' height='{len(items) * h + 4}' "
             f"viewBox='0 0 {width} {len(items) * h + 4}' xmlns='http://www.w3.org/2000/svg'>"]
    for i, (label, value) in enumerate(items):
        y = i * h + 2
        w = max(1.0, (width - label_w - 90) * (value / top))
        short = label if len(label) <= 44 else label[:41] + "…"
        parts.append(
            f"<text x='{label_w - 6}' y='{y + bar_height - 5}' text-anchor='end' class='lbl'>{_e(short)}"
            f"<title>{_e(label)}</title></text>"
            f"<rect x='{label_w}' y='{y}' width='{w:.1f}' height='{bar_height}' rx='3' fill='{color}'/>"
            f"<text x='{label_w + w + 6:.1f}' y='{y + bar_height - 5}' class='val'>{_e(_fmt(value))} {_e(unit)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def iframe_html(document: str, *, title: str, height: int = 640) -> str:
    """Embed a complete HTML document (a viewer page) inline through ``srcdoc``."""
    return (f"<iframe class='viewer' title='{_e(title)}' style='height:{height}px' "
            f"sandbox='allow-scripts allow-downloads' srcdoc=\"{_e(document)}\"></iframe>")


_CSS = """
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{padding:18px 28px;background:#0f172a;color:#f8fafc}header h1{margin:0;font-size:22px}header p{margin:4px 0 0;color:#cbd5e1}
nav{position:sticky;top:0;z-index:5;background:#fff;border-bottom:1px solid var(--line);padding:8px 28px;display:flex;gap:16px;flex-wrap:wrap}
nav a{color:var(--info);text-decoration:none;font-weight:500}main{padding:18px 28px;max-width:1500px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(220px,1fr));gap:12px;margin-bottom:8px}
.card{background:var(--card);border:1px solid var(--line);border-left:5px solid var(--info);border-radius:8px;padding:12px 14px}
.card.ok{border-left-color:var(--ok)}.card.warn{border-left-color:var(--warn)}.card.bad{border-left-color:var(--bad)}
.card .label{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}.card .value{font-size:22px;font-weight:600;margin:2px 0}
.card .detail{color:var(--muted);font-size:12px;word-break:break-word;white-space:pre-wrap}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:14px 18px;margin:16px 0}
section h2{margin:0 0 8px;font-size:18px}.muted{color:var(--muted)}
.tablewrap{max-height:520px;overflow:auto;border:1px solid var(--line);border-radius:6px}
table.data{border-collapse:collapse;width:100%;font-size:13px}table.data th{position:sticky;top:0;background:#f1f5f9;text-align:left;padding:6px 8px;border-bottom:1px solid var(--line)}
table.data td{padding:4px 8px;border-bottom:1px solid #f1f5f9;vertical-align:top;max-width:520px;overflow-wrap:anywhere}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.bad td{background:#fef2f2}tr.warn td{background:#fffbeb}
iframe.viewer{width:100%;border:1px solid var(--line);border-radius:6px;background:#fff}
svg.chart .lbl{font-size:12px;fill:#374151}svg.chart .val{font-size:11px;fill:#374151}
pre{background:#f1f5f9;padding:8px;border-radius:6px;overflow:auto;max-height:300px}
ul.notes li{margin:2px 0}
"""


def render_report(page: ReportPage) -> str:
    """The whole report as one HTML string (deterministic for the same input)."""
    cards = "".join(
        f"<div class='card {_e(c.tone)}' data-card='{_e(c.label)}'><div class='label'>{_e(c.label)}</div>"
        f"<div class='value'>{_e(c.value)}</div><div class='detail'>{_e(c.detail)}</div></div>"
        for c in page.cards)
    nav = "".join(f"<a href='#{_e(s.id)}'>{_e(s.title)}</a>" for s in page.sections)
    sections = "".join(
        f"<section id='{_e(s.id)}'><h2>{_e(s.title)}</h2>"
        + (f"<p class='muted'>{_e(s.intro)}</p>" if s.intro else "") + s.body + "</section>"
        for s in page.sections)
    notes = ("<section id='notes'><h2>Notes</h2><ul class='notes'>"
             + "".join(f"<li>{_e(n)}</li>" for n in page.notes) + "</ul></section>") if page.notes else ""
    return page_shell(
        page.title,
        f"<header><h1>{_e(page.title)}</h1><p>{_e(page.subtitle)}</p></header>"
        f"<nav><a href='#summary'>Summary</a>{nav}</nav><main>"
        f"<section id='summary'><h2>Summary</h2><div class='cards'>{cards}</div></section>"
        f"{sections}{notes}</main>",
        css=_CSS, csp=REPORT_CSP)


def viewer_frame(path: str, title: str, height: int = 620) -> str:
    """A viewer page written beside the report (``path``) embedded as a frame, with a link to open it alone."""
    with open(path, encoding="utf-8") as f:
        doc = f.read()
    name = _e(os.path.basename(path))
    return (iframe_html(doc, title=title, height=height)
            + f"<p class='muted'>Also written as <a href='{name}'>{name}</a> (opens full-screen).</p>")
