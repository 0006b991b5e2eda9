"""The report's "LLM: prefill and decode" section (when the dump looks like an LLM's).

Runs of the headline method labelled prefill (n tokens) or decode (read from logged shapes, or
inferred from timings on a timing-only dump) and split into generate sessions (TTFT, tokens/s,
decode latency p50/p90/p99 and drift per session), per-token latency and tokens/s per phase,
time per operator class split by phase (table and stacked bars), runs grouped by sequence length,
and the reference graph with per-node decode / prefill time as overlays.
"""

from __future__ import annotations

import html
import math
import os
from typing import Any, Callable

from .render import Section, table_html

__all__ = ["llm_section"]


def _n(v: float) -> float | str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else v


def llm_section(data: Any, out_dir: str, stem: str, files: dict[str, str],
                viewer: Callable[[str, str], str]) -> Section | None:
    """The section, or None when ``data.llm`` is None."""
    from ..views.llm import CLASS_LABELS, SESSION_HEADERS, classes_svg, runs_svg, sessions_rows

    prof = data.llm
    if prof is None:
        return None
    body = []
    rows = [(p, s.runs, s.tokens, s.total_ms, _n(s.ms_per_run), _n(s.ms_per_token), _n(s.tokens_per_s))
            for p, s in prof.phases.items() if s.runs]
    body.append(table_html(rows, ["phase", "runs", "tokens", "total (ms)", "ms/run", "ms/token", "tokens/s"],
                           table_id="llm-phases", numeric=(1, 2, 3, 4, 5, 6)))
    sess = sessions_rows(prof)
    if sess:
        body.append("<h3>Generate sessions</h3>" + table_html(sess, SESSION_HEADERS, table_id="llm-sessions",
                                                               numeric=(0, 1, 3, 4, 5, 6, 7, 8, 9, 10)))
    body.append("<h3>Runs</h3>" + runs_svg(prof))
    rows = [(r.index, r.session, r.label, r.phase_source,
             r.input_pos if r.input_pos is not None else (f"~{r.position}" if r.position is not None else "?"),
             r.n_tokens or "?", r.time_ms, _n(r.ms_per_token)) for r in prof.runs]
    body.append(table_html(rows, ["run", "session", "phase", "source", "input_pos", "tokens", "ms", "ms/token"],
                           table_id="llm-runs", numeric=(0, 1, 5, 6, 7)))
    table = prof.class_table()
    if table:
        body.append("<h3>Time per operator class</h3>" + classes_svg(prof))
        rows = [(CLASS_LABELS.get(c, c), _n(a), _n(b), _n(100 * x if x == x else x), _n(100 * y if y == y else y))
                for c, a, b, x, y in table]
        body.append(table_html(rows, ["operator class", "prefill ms/token", "decode ms/token", "prefill %",
                                      "decode %"], table_id="llm-classes", numeric=(1, 2, 3, 4)))
    if len(prof.by_tokens) > 1:
        rows = [(n, s.runs, s.ms_per_run, s.ms_per_token) for n, s in sorted(prof.by_tokens.items())]
        body.append("<h3>Runs by sequence length</h3>" + table_html(
            rows, ["tokens per run", "runs", "ms/run", "ms/token"], table_id="llm-by-tokens", numeric=(0, 1, 2, 3)))
    g = data.reference_graph
    if g is not None and prof.node_ms:
        from ..views.html import generate_html

        for phase in ("decode", "prefill"):
            overlay = {n: v[phase] for n, (_, v) in prof.node_ms.items() if phase in v}
            if not overlay:
                continue
            p = generate_html(g, os.path.join(out_dir, f"{stem}.graph-{phase}.html"), overlay=overlay,
                              overlay_label=f"{phase} time per run (ms)", title=f"{g.name} · {phase}")
            files[f"graph with {phase} time overlay"] = p
            body.append(f"<h3>Graph: {phase} time per node</h3>" + viewer(p, f"graph with {phase} overlay"))
    for n in prof.notes:
        body.append(f"<p class='muted'>Note: {html.escape(n)}</p>")
    if prof.labels == "read":
        intro = (f"Each run of '{html.escape(prof.method)}' labelled from its logged shapes: the embedding's output "
                 "gives the tokens of the run, input_pos[0] the start position; several tokens (or position 0) = "
                 "prefill, one token later on = decode. Other methods (metadata) are not counted here.")
    else:
        given = (f" (prompt lengths given: {', '.join(map(str, prof.prompt_lens))}; token counts, TTFT and tokens/s "
                 "exact)") if prof.prompt_lens else ""
        intro = (f"A timing-only dump (no intermediate outputs): each run of '{html.escape(prof.method)}' is labelled "
                 "from the program's token input (static or dynamic length), the order of the runs, how much harder "
                 "a run's token-shaped kernels worked than the decode runs around it, and the attention time "
                 f"dropping back when a session restarts; every label is marked inferred{html.escape(given)}. "
                 "Other methods (metadata) are not counted here.")
    return Section("llm", "LLM: prefill and decode", "".join(body), intro)
