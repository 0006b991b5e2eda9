"""Views of an :class:`~etlens.analysis.llm.LlmProfile`: a text summary (``etlens inspect --llm``) and
an inline SVG of the runs (the report's "LLM: prefill and decode" section).

Example::

    from etlens.analysis.llm import llm_profile
    from etlens.views.llm import llm_text, runs_svg
    prof = llm_profile(inspector)
    print(llm_text(prof))
"""

from __future__ import annotations

import html
import math
from typing import Any

__all__ = ["llm_text", "runs_svg", "classes_svg", "sessions_rows", "SESSION_HEADERS", "PHASE_COLORS", "CLASS_LABELS"]

PHASE_COLORS = {"prefill": "#f59e0b", "decode": "#3b82f6", "unknown": "#9ca3af"}
CLASS_LABELS = {"attention": "attention (SDPA, RoPE)", "kv_update": "KV-cache update", "linear": "linear / 8da4w",
                "norm": "norm", "embedding": "embedding", "other": "other"}


def _f(v: float, unit: str = "", digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:.{digits}g}{unit}"


#: columns of :func:`sessions_rows`
SESSION_HEADERS = ["session", "first run", "prompt tokens", "decode tokens", "TTFT (ms)", "prefill tok/s",
                   "decode tok/s", "p50 ms", "p90 ms", "p99 ms", "drift ms/100 tok"]


def sessions_rows(prof: Any) -> list[tuple]:
    """One row per generate session: prompt and decode tokens, time to first token, tokens/s, decode
    latency percentiles and drift (``~`` marks an inferred prompt length)."""
    rows = []
    for s in getattr(prof, "sessions", []) or []:
        tok = "?" if s.prompt_tokens is None else (f"~{s.prompt_tokens}" if s.prompt_tokens_source == "inferred"
                                                   else s.prompt_tokens)
        rows.append((s.session, s.first_run, tok, s.decode_tokens, _f(s.ttft_ms), _f(s.prefill_tokens_per_s, "", 5),
                     _f(s.decode_tokens_per_s, "", 5), _f(s.p50_ms), _f(s.p90_ms), _f(s.p99_ms),
                     _f(s.drift_ms_per_100, "", 3)))
    return rows


def _pos(r: Any) -> Any:
    if r.input_pos is not None:
        return r.input_pos
    p = getattr(r, "position", None)
    return "?" if p is None else f"~{p}"


def llm_text(prof: Any) -> str:
    """Phases, per-run labels, time per operator class by phase, and runs by sequence length, as text."""
    from tabulate import tabulate

    out = [f"LLM view of method '{prof.method}' ({len(prof.runs)} runs"
           + (", dynamic shapes" if prof.dynamic_shapes else ", one token per run" if prof.dynamic_shapes is False
              else "") + ")"]
    rows = [(p, s.runs, s.tokens, _f(s.total_ms), _f(s.ms_per_token), _f(s.tokens_per_s, "", 5))
            for p, s in prof.phases.items() if s.runs]
    out.append(tabulate(rows, headers=["phase", "runs", "tokens", "total (ms)", "ms/token", "tokens/s"],
                        tablefmt="simple"))
    out.append("")
    sess = sessions_rows(prof)
    if sess:
        out.append(tabulate(sess, headers=SESSION_HEADERS, tablefmt="simple"))
        out.append("")
    rows = [(r.index, getattr(r, "session", 0), r.label, getattr(r, "phase_source", "read"), _pos(r),
             r.n_tokens or "?", _f(r.time_ms), _f(r.ms_per_token)) for r in prof.runs]
    out.append(tabulate(rows, headers=["run", "session", "phase", "source", "input_pos", "tokens", "ms", "ms/token"],
                        tablefmt="simple"))
    table = prof.class_table()
    if table:
        out.append("")
        rows = [(CLASS_LABELS.get(c, c), _f(a), _f(b), _f(100 * x if x == x else x, "%", 3),
                 _f(100 * y if y == y else y, "%", 3)) for c, a, b, x, y in table]
        out.append(tabulate(rows, headers=["operator class", "prefill ms/token", "decode ms/token", "prefill share",
                                           "decode share"], tablefmt="simple"))
    if len(prof.by_tokens) > 1:
        out.append("")
        rows = [(n, s.runs, _f(s.ms_per_run), _f(s.ms_per_token)) for n, s in sorted(prof.by_tokens.items())]
        out.append(tabulate(rows, headers=["tokens per run", "runs", "ms/run", "ms/token"], tablefmt="simple"))
    for n in prof.notes:
        out.append(f"note: {n}")
    return "\n".join(out)


def runs_svg(prof: Any, width: int = 760, height: int = 180) -> str:
    """Bars of each run's time in dump order, coloured by phase, labelled with tokens and position."""
    runs = prof.runs
    if not runs:
        return "<p class='muted'>No runs.</p>"
    top = max(r.time_ms for r in runs) or 1.0
    pad_l, pad_b, pad_t = 48, 34, 10
    w = (width - pad_l - 8) / len(runs)
    h = height - pad_b - pad_t
    parts = [f"<svg class='llm-runs' width='{width}' height='{height}' role='img' "
             f"aria-label='time per run by phase' xmlns='http://www.w3.org/2000/svg'>"]
    parts.append(f"<text x='4' y='{pad_t + 8}' font-size='10' fill='#555'>{top:.3g} ms</text>")
    for k, r in enumerate(runs):
        bh = max(1.0, h * r.time_ms / top)
        x = pad_l + k * w
        tip = html.escape(f"run {r.index}: {r.label}, position {r.input_pos}, {r.time_ms:.4g} ms "
                          f"({_f(r.ms_per_token)} ms/token)")
        parts.append(f"<rect x='{x + 1:.1f}' y='{pad_t + h - bh:.1f}' width='{max(1.0, w - 2):.1f}' height='{bh:.1f}' "
                     f"fill='{PHASE_COLORS.get(r.phase, '#999')}'><title>{tip}</title></rect>")
        if w >= 18:
            lab = f"{r.n_tokens}t" if r.n_tokens else "?"
            parts.append(f"<text x='{x + w / 2:.1f}' y='{height - 20}' font-size='10' "
                         f"text-anchor='middle'>{lab}</text>")
            parts.append(f"<text x='{x + w / 2:.1f}' y='{height - 8}' font-size='9' fill='#666' "
                         f"text-anchor='middle'>@{r.input_pos if r.input_pos is not None else '?'}</text>")
    lx = pad_l
    for p, c in PHASE_COLORS.items():
        if prof.phases.get(p) is not None and prof.phases[p].runs:
            parts.append(f"<rect x='{lx}' y='0' width='10' height='8' fill='{c}'/>"
                         f"<text x='{lx + 13}' y='8' font-size='10'>{p}</text>")
            lx += 70
    parts.append("</svg>")
    return "".join(parts)


def classes_svg(prof: Any, width: int = 760) -> str:
    """Stacked bars (one per phase) of the share of time per operator class."""
    colors = {"attention": "#8b5cf6", "kv_update": "#ef4444", "linear": "#3b82f6", "norm": "#10b981",
              "embedding": "#f59e0b", "other": "#9ca3af"}
    table = prof.class_table()
    if not table:
        return ""
    phases = [p for p in ("prefill", "decode") if prof.phases[p].runs]
    bar_h, label_w = 22, 70
    height = 30 + len(phases) * (bar_h + 8)
    parts = [f"<svg class='llm-classes' width='{width}' height='{height}' xmlns='http://www.w3.org/2000/svg'>"]
    for row, p in enumerate(phases):
        y = 24 + row * (bar_h + 8)
        parts.append(f"<text x='0' y='{y + 15}' font-size='12'>{p}</text>")
        x = float(label_w)
        for c, _, _, xs, ys in table:
            share = xs if p == "prefill" else ys
            if not share or share != share:
                continue
            wd = (width - label_w - 4) * share
            tip = html.escape(f"{p}: {CLASS_LABELS.get(c, c)} {100 * share:.1f}%")
            parts.append(f"<rect x='{x:.1f}' y='{y}' width='{wd:.1f}' height='{bar_h}' fill='{colors[c]}'>"
                         f"<title>{tip}</title></rect>")
            if wd > 60:
                parts.append(f"<text x='{x + 4:.1f}' y='{y + 15}' font-size='11' fill='white'>{html.escape(c)} "
                             f"{100 * share:.0f}%</text>")
            x += wd
    lx = label_w
    for c, col in colors.items():
        if any(r[0] == c for r in table):
            parts.append(f"<rect x='{lx}' y='2' width='10' height='10' fill='{col}'/>"
                         f"<text x='{lx + 13}' y='11' font-size='10'>{html.escape(CLASS_LABELS[c])}</text>")
            lx += 20 + 6 * len(CLASS_LABELS[c])
    parts.append("</svg>")
    return "".join(parts)
