"""The fleet's pages: the ``etlens compare --html`` page and the ``etlens report --dataset`` dashboard.

The numbers come from :mod:`etlens.fleet` (:func:`etlens.fleet.compare`,
:func:`etlens.fleet.dashboard.dashboard_data`); this module only draws them, in the one page shell
(:func:`etlens.views.page.page`). Plots are SVG drawn here (no script, no CDN): each distribution is a
box (p25–p75, p50 line, whiskers at p10/p90) with every run as a dot, on a log axis when the values
span more than 20x.

Example::

    from etlens.fleet import Side, compare
    from etlens.views.fleet_pages import compare_html
    html = compare_html(compare(Side.of_etdumps(["a.etdp"]), Side.of_etdumps(["b.etdp"])))
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .page import esc, page

__all__ = ["distribution_svg", "compare_html", "dashboard_html"]

_CSS = ("body{font:14px system-ui,sans-serif;margin:24px;color:#222}h1{font-size:20px}h2{font-size:16px;"
        "margin-top:28px}table{border-collapse:collapse;font-size:12px}td,th{padding:3px 8px;border-bottom:1px solid"
        " #ddd;text-align:left;vertical-align:top}td.n{text-align:right;font-variant-numeric:tabular-nums}"
        ".regression{background:#fde2e1}"
        ".improvement{background:#e0f5e3}.muted{color:#777}svg text{font:11px system-ui,sans-serif}")
_COLORS = {"A": "#4c78a8", "B": "#e45756"}


def distribution_svg(groups: list[tuple[str, Any, str]], unit: str = "ms", width: int = 640) -> str:
    """One row per ``(label, samples, colour)``: box p25–p75, p50 tick, whiskers p10–p90, a dot per sample."""
    groups = [(lab, np.asarray(s, float)[np.isfinite(np.asarray(s, float))], c) for lab, s, c in groups]
    groups = [g for g in groups if g[1].size]
    if not groups:
        return "<p class=muted>no samples</p>"
    allv = np.concatenate([g[1] for g in groups])
    lo, hi = float(allv.min()), float(allv.max())
    log = lo > 0 and hi / lo > 20
    f = (lambda v: math.log10(v)) if log else (lambda v: v)
    a, b = f(lo), f(hi)
    if b <= a:
        a, b = a - 1, b + 1
    left, right, row = 180, width - 20, 22
    h = row * len(groups) + 30

    def x(v: float) -> float:
        return left + (f(max(v, lo)) - a) / (b - a) * (right - left)

    out = [f'<svg width="{width}" height="{h}" role="img" xmlns="http://www.w3.org/2000/svg">']
    for i, (lab, s, c) in enumerate(groups):
        y = 10 + i * row + row / 2
        p10, p25, p50, p75, p90 = np.percentile(s, [10, 25, 50, 75, 90])
        out.append(f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">{esc(lab[:28])}</text>')
        out.append(f'<line x1="{x(p10):.1f}" x2="{x(p90):.1f}" y1="{y}" y2="{y}" stroke="{c}"/>')
        out.append(f'<rect x="{x(p25):.1f}" y="{y - 6}" width="{max(1.0, x(p75) - x(p25)):.1f}" height="12" '
                   f'fill="{c}" fill-opacity="0.25" stroke="{c}"/>')
        out.append(f'<line x1="{x(p50):.1f}" x2="{x(p50):.1f}" y1="{y - 7}" y2="{y + 7}" stroke="{c}" '
                   f'stroke-width="2"><title>p50 {p50:.4g} {unit}</title></line>')
        for v in s[:400].tolist():
            out.append(f'<circle cx="{x(v):.1f}" cy="{y}" r="1.6" fill="{c}" fill-opacity="0.6"/>')
    ay = h - 12
    for k in range(5):
        t = a + (b - a) * k / 4
        v = 10 ** t if log else t
        out.append(f'<text x="{left + (right - left) * k / 4:.1f}" y="{ay}" text-anchor="middle" '
                   f'class="muted">{v:.3g}</text>')
    out.append(f'<text x="{right}" y="{ay + 10}" text-anchor="end">{unit}{" (log)" if log else ""}</text></svg>')
    return "".join(out)


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    return f"{v:.4g}" if isinstance(v, float) else esc(v)


def _table(rows: list[dict], cols: list[str], limit: int = 200) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in cols)
    body = []
    for r in rows[:limit]:
        cells = "".join(f'<td class="{"n" if isinstance(r.get(c), (int, float)) else ""}">{_fmt(r.get(c))}</td>'
                        for c in cols)
        body.append(f'<tr class="{esc(r.get("verdict", ""))}">{cells}</tr>')
    more = f"<p class=muted>{len(rows) - limit} more rows in the JSON</p>" if len(rows) > limit else ""
    return f"<table><tr>{head}</tr>{''.join(body)}</table>{more}"


_ROW_COLS = ["verdict", "event_name", "module_path", "node", "debug_handles", "a_p50_ms", "b_p50_ms", "delta_ms",
             "ratio", "unit_ratio", "floor", "p_value", "a_units", "b_units", "a_runs", "b_runs", "match"]


def _rule(s: dict[str, Any]) -> str:
    th = s["thresholds"]
    if s.get("prior_spread") is not None:
        test = (f"Unit of replication: one {esc(s['unit'])} (its runs reduced to their median); each process's "
                f"speed state (scatter {_fmt(100 * s.get('speed_spread', 0.0))} %) taken off every op by the op's own "
                f"sensitivity, and the share the sides got by chance; moderated t test across them p &lt; "
                f"{th['alpha']}")
    else:
        test = f"One process a side ({esc(s.get('unit', 'run'))}): Mann-Whitney U over runs p &lt; {th['alpha']}"
    if th.get("fdr"):
        test += f", Benjamini-Hochberg q &lt; {th['fdr']} over all ops"
    return (f"Verdict: {test} and the change beyond the row's floor (at least {th['min_effect']:.0%}, or "
            f"{th.get('noise_k', 3)} x the op's own process-to-process spread) and ≥ {th['min_delta_ms']} ms.")


def _noisy(s: dict[str, Any]) -> str:
    noisy = s.get("noisy") or []
    if not noisy:
        return ""
    items = "".join(f"<li>{esc(n['event_name'])} <span class=muted>{esc(n['module_path'] or '')}</span>: "
                    f"spread {_fmt(100 * (n.get('spread') or 0))} %, floor ×{_fmt(n['floor'])}</li>" for n in noisy)
    return (f"<details><summary>Unchanged but noisy: {len(noisy)} op(s) whose own run-to-run spread hides changes "
            f"below their floor</summary><ul>{items}</ul></details>")


def compare_html(result: dict[str, Any]) -> str:
    """The ``etlens compare --html`` page: summary, whole-model latency per device/build, per-op distributions."""
    s = result["summary"]
    m = s["model_latency"]
    body = [f"<p>A: <b>{esc(s['a'])}</b> &nbsp; B: <b>{esc(s['b'])}</b></p>",
            f"<p>{s['regressions']} regression(s), {s['improvements']} improvement(s) over {s['ops']} ops. "
            f"Whole-model latency (Method::execute) p50: A {_fmt(m['a_p50_ms'])} ms, B {_fmt(m['b_p50_ms'])} ms "
            f"→ <b class='{esc(m['verdict'])}'>{esc(m['verdict'])}</b>. {_rule(s)}</p>",
            _noisy(s), "<h2>Whole-model latency per device and build</h2>"]
    body.append(distribution_svg([(f"{g['side']} {g['device']} {g['build']}", g["samples"], _COLORS[g["side"]])
                                  for g in s["latency_by_group"]]))
    body.append("<h2>Ops</h2>" + _table(result["rows"], _ROW_COLS))
    body.append("<h2>Modules</h2>" + _table(result["modules"], ["verdict", "module_path", "a_p50_ms", "b_p50_ms",
                                                                 "delta_ms", "ratio", "p_value"]))
    body.append("<h2>Distributions of the most changed ops</h2>")
    samples = result.get("samples", {})
    for i, r in enumerate(result["rows"][:12]):
        if i not in samples:
            continue
        a, b = samples[i]
        body.append(f"<p><b>{esc(r['event_name'])}</b> <span class=muted>{esc(r['module_path'])} · "
                    f"{esc(r['verdict'])}</span></p>" + distribution_svg([("A", a, _COLORS["A"]),
                                                                           ("B", b, _COLORS["B"])]))
    return page("etlens compare", "".join(body), css=_CSS, heading="h1")


def dashboard_html(data: Any, title: str | None = None) -> str:
    """The fleet dashboard page of a :class:`etlens.fleet.dashboard.DashboardData`: latency per device and
    build, top regressions between the last two builds (sorted by name), the slowest ops. ``title``
    defaults to ``etlens fleet dashboard: <dataset dir>``."""
    palette = ["#4c78a8", "#e45756", "#54a24b", "#f58518", "#b279a2", "#72b7b2"]
    counts, builds = data.counts, data.builds
    body = [f"<p>{counts[0]} events from {counts[1]} files, {counts[2]} device(s), {counts[3]} build(s): "
            f"<code>{esc(data.dataset)}</code></p>", "<h2>Whole-model latency per device and build</h2>"]
    groups = [(f"{d} · {b}", samples, palette[builds.index(b) % 6 if b in builds else 0])
              for d, b, samples in data.latency]
    body.append(distribution_svg(groups))
    if data.last_two is not None:
        a, b = data.last_two
        bad = data.regressions
        body.append(f"<h2>Top regressions: build {esc(a)} → {esc(b)} ({len(bad)})</h2>")
        body.append(_table(bad, _ROW_COLS[:-1], limit=data.top) if bad else "<p>none</p>")
    body.append("<h2>Slowest ops (p50)</h2>" + _table(data.slow, ["event_name", "module_path", "device", "build",
                                                                 "count", "p10_ms", "p50_ms", "p90_ms"]))
    return page(title or f"etlens fleet dashboard: {data.name}", "".join(body), css=_CSS, heading="h1")
