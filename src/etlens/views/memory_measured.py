"""Measured memory (:func:`etlens.analysis.memory_measured.measured_memory`) as text and as an HTML fragment.

Both put the plan beside what the process used: the stages (resident, its own peak, heap), the
owners that add up to the peak (inferred ones marked), the largest owner with its reason, the
difference from the plan explained and, for dynamic shapes, the plan's upper bound against the
need at the run's shape.
"""

from __future__ import annotations

import html
from typing import Any

__all__ = ["format_measured", "measured_html"]

_MB = 1024 * 1024


def _mb(n: Any) -> str:
    """Bytes as MB, or as kB below a tenth of a MB (a small program's owners stay visible)."""
    if n is None:
        return "—"
    return f"{n / _MB:,.1f} MB" if abs(n) >= _MB // 10 or n == 0 else f"{n / 1024:,.1f} kB"


def format_measured(m: dict[str, Any]) -> str:
    """Plain-text block for ``etlens memory --measure``."""
    lines = [f"measured ({m['load']} load, method {m['method']!r}, {m.get('runs')} run(s)): peak "
             f"{_mb(m['peak_rss_bytes'])} during {m['peak_stage']}; plan {m['plan_bytes'] / _MB:.2f} MB",
             "", f"  {'stage':14s} {'resident':>12s} {'stage peak':>12s} {'heap':>12s} {'.pte mapped':>12s}"]
    for s in m["stages"]:
        lines.append(f"  {s['stage']:14s} {_mb(s['rss_bytes']):>12s} {_mb(s['peak_rss_bytes']):>12s} "
                     f"{_mb(s['heap_bytes']):>12s} {_mb(s.get('pte_resident_bytes')):>12s}")
    lines += ["", "  owners of the peak (* inferred):"]
    for o in m["owners"]:
        lines.append(f"  {_mb(o['bytes']):>12s} {'*' if o['inferred'] else ' '} {o['owner']}")
    total = sum(o["bytes"] for o in m["owners"])
    lines += [f"  {_mb(total):>12s}   sum", "", f"  largest: {m['largest']['reason']}",
              f"  plan vs actual: {m['plan_vs_actual']['explained']}"]
    dyn = m.get("dynamic")
    if dyn:
        shapes = ", ".join(f"input {d['input']} {d['run_shape']} of upper bound {d['upper_bound']}"
                           for d in dyn["inputs"])
        lines.append(f"  dynamic shapes ({shapes}): {dyn.get('explained', 'the plan is sized for the upper bound')}")
    return "\n".join(lines) + "\n"


def measured_html(m: dict[str, Any]) -> str:
    """An HTML fragment (tables and a stacked bar of the owners) for the memory page and the report."""
    e = html.escape
    peak = max(m["peak_rss_bytes"], 1)
    colors = ["#9aa5b1", "#c9d1d9", "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
              "#ff9da7"]
    own = max(sum(o["bytes"] for o in m["owners"][1:]), 1)

    def bar(first: int, total: int) -> str:
        cells = "".join(
            f"<div title='{e(o['owner'])}: {_mb(o['bytes'])}' style='width:{100 * o['bytes'] / total:.3f}%;"
            f"background:{colors[i % len(colors)]};height:22px;display:inline-block'></div>"
            for i, o in enumerate(m["owners"]) if i >= first and o["bytes"] > 0)
        return f"<div style='width:100%;background:#eee;white-space:nowrap;overflow:hidden'>{cells}</div>"

    legend = "".join(
        f"<tr><td><span style='display:inline-block;width:10px;height:10px;background:{colors[i % len(colors)]}'>"
        f"</span> {e(o['owner'])}{' <i>(inferred)</i>' if o['inferred'] else ''}</td>"
        f"<td style='text-align:right'>{_mb(o['bytes'])}</td><td class='muted'>{e(o['reason'])}</td></tr>"
        for i, o in enumerate(m["owners"]))
    stages = "".join(
        f"<tr><td>{e(s['stage'])}</td><td style='text-align:right'>{_mb(s['rss_bytes'])}</td>"
        f"<td style='text-align:right'>{_mb(s['peak_rss_bytes'])}</td><td style='text-align:right'>"
        f"{_mb(s['heap_bytes'])}</td><td style='text-align:right'>{_mb(s.get('pte_resident_bytes'))}</td></tr>"
        for s in m["stages"])
    pva = m["plan_vs_actual"]
    side = (f"<table class='side'><tr><th>planned (arenas)</th><th>measured peak</th><th>of it, the program's own"
            f"</th></tr><tr><td>{_mb(m['plan_bytes'])}</td><td>{_mb(m['peak_rss_bytes'])} "
            f"<span class='muted'>({e(m['peak_stage'])})</span></td><td>{_mb(pva['program_peak_bytes'])}</td></tr>"
            "</table>")
    dyn = m.get("dynamic")
    dyn_html = ""
    if dyn:
        dyn_html = (f"<p><b>Dynamic shapes.</b> {e(dyn.get('explained', ''))}. Plan (upper bound) "
                    f"{_mb(dyn['plan_bytes'])}; live tensors at the upper bound "
                    f"{_mb(dyn.get('live_peak_at_upper_bound_bytes'))}, at the run's shape "
                    f"{_mb(dyn.get('need_at_shape_bytes'))} <i>(inferred)</i>.</p>")
    return (f"<div class='measured'>{side}<p>{e(pva['explained'])}.</p>"
            f"<p><b>Largest owner.</b> {e(m['largest']['reason'])}</p>{dyn_html}"
            f"<p class='muted'>The whole peak by owner:</p>{bar(0, peak)}"
            f"<p class='muted'>The program's own part (the libraries left out):</p>{bar(1, own)}"
            f"<table><tr><th>owner of the peak</th><th>bytes</th><th>evidence</th></tr>{legend}</table>"
            f"<table><tr><th>stage</th><th>resident</th><th>stage peak</th><th>heap</th><th>.pte mapped</th></tr>"
            f"{stages}</table><p class='muted'>Measured in a fresh process ({e(m['load'])} load): /proc status "
            "(VmRSS, VmHWM reset per stage), smaps, glibc mallinfo2.</p></div>")
