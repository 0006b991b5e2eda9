"""The report's "Culprits" section: introduced vs accumulated error per quantized op, and a recipe.

``etlens report --model … --quantize`` builds an int8 program; the numeric-gap table then shows
each op's **accumulated** error (everything before it also ran in int8), which grows along the
graph. This section ranks the quantized ops by the error each one **introduces** on its own
(:mod:`etlens.analysis.numerics.introduced`: re-run on the float model's inputs, measured at the
model output), next to the accumulated error at the same op, and suggests the keep-in-float recipe
``etlens fix`` would start from: the top-ranked module, with its share of the summed introduced
error. All of it runs in PyTorch on the build's own float and quantized modules (no second
quantization, no lowering). What a recipe removes on the device and costs in latency and bytes
needs re-lowerings: ``etlens fix`` measures them; the section gives the command. A report built
with ``--recipe`` names the modules it kept in float.

Two hooks, both optional stages (a failure is a note, never a broken report):

* :func:`compute` (in :func:`etlens.report.report_from_session`, quantized builds only);
* :func:`section`, which also writes the graph with the introduced error per node as the overlay
  (``<stem>.graph-introduced.html``; nodes of the ETRecord's graph, named as the quantized graph).
"""

from __future__ import annotations

import html
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

from .render import Card, Section, table_html, viewer_frame

__all__ = ["Introduced", "compute", "section", "card", "MAX_CLUSTERS", "SUGGEST_NSR"]

#: a culprit is suggested when its own error alone costs the output at least this NSR (SNR <= 30 dB)
SUGGEST_NSR = 1e-3

#: more quantized clusters than this and the section is skipped (each one re-runs the float model)
MAX_CLUSTERS = 400


@dataclass
class Introduced:
    """What the section shows: the ranked clusters, the suggested recipe and what the build kept float."""

    rows: list[Any]
    backend: str
    int8_snr_db: float | None = None
    suggestion: list[str] = field(default_factory=list)
    suggestion_share: float | None = None
    applied: list[str] = field(default_factory=list)
    seconds: float = 0.0


def compute(session: Any) -> Introduced | None:
    """Introduced errors of ``session``'s quantized model and the top-1 recipe (``None`` for a float
    build). Raises what the analysis raises (the caller records it as a failed stage)."""
    if not session.quantize:
        return None
    from ..analysis.fix.search import output_error
    from ..analysis.numerics.introduced import cluster_count, introduced_errors
    from ..errors import EtlensError

    quant = session.quantized_module  # the build's own (made before the lowering; not timed here)
    t0 = time.perf_counter()
    n = cluster_count(quant)
    if n > MAX_CLUSTERS:
        raise EtlensError(f"{n} op clusters (> {MAX_CLUSTERS}); run etlens fix for the culprits of a model this big")
    float_gm = session.float_module()
    rows = introduced_errors(float_gm, quant, session.inputs)
    backend = getattr(session.config, "name", str(session.backend))
    applied = list(getattr(session.quantizer, "keep_float", []) or [])
    res = Introduced(rows=rows, backend=backend, applied=applied)
    import torch

    with torch.no_grad():  # the build's own quantized module: no second quantization here
        res.int8_snr_db = _finite(output_error(quant(*session.inputs), float_gm(*session.inputs))[0])
    total = sum(r.introduced for r in rows if math.isfinite(r.introduced))
    top = next((r for r in rows if r.module_path), None)
    if top is not None:
        res.suggestion_share = top.introduced / total if total > 0 else None
        if top.introduced >= SUGGEST_NSR:
            res.suggestion = [top.module_path]
    res.seconds = time.perf_counter() - t0
    return res


def _finite(v: float) -> float | None:
    return v if isinstance(v, float) and math.isfinite(v) else None


def _db(v: float | None) -> str:
    return "exact" if v is None else f"{v:.1f} dB"


def card(data: Any) -> Card | None:
    """The summary card: the worst culprit by introduced error."""
    res = getattr(data, "introduced", None)
    if res is None or not res.rows:
        return None
    top = res.rows[0]
    if not res.suggestion:
        return Card("Top culprit (introduced)", "none dominates",
                    f"the worst, {top.module_path or top.op}, alone: {_db(_finite(top.introduced_snr_db))} at the "
                    f"output\nint8 output {_db(res.int8_snr_db)} vs float", "ok")
    return Card("Top culprit (introduced)", top.module_path or top.op,
                f"{top.op}: {top.introduced:.3g} NSR at the output on its own"
                + (f" ({res.suggestion_share:.0%} of all ops' own error)" if res.suggestion_share is not None else "")
                + f"\nint8 output {_db(res.int8_snr_db)} vs float", "warn")


def _overlay(res: Introduced, data: Any) -> dict[str, float]:
    names = {n.name for n in data.reference_graph} if data.reference_graph is not None else set()
    out: dict[str, float] = {}
    for r in res.rows:
        for node in r.nodes:
            if node in names:
                out[node] = float(r.introduced)
    return out


def section(data: Any, out_dir: str, stem: str, files: dict[str, str]) -> Section | None:
    """The "Culprits" section (``None`` when :func:`compute` did not run or found nothing quantized)."""
    res = getattr(data, "introduced", None)
    if res is None:
        return None
    if not res.rows:
        return Section("culprits", "Culprits: introduced vs accumulated error",
                       "<p>No quantized op of a named module: nothing to keep in float.</p>")
    rows, hl = [], {}
    for i, r in enumerate(res.rows[:50]):
        rows.append((r.rank, r.module_path, f"{r.module_type} · {r.op.removesuffix('.default')}", ", ".join(r.nodes),
                     r.introduced, _finite(r.introduced_snr_db), r.accumulated, _finite(r.accumulated_snr_db),
                     r.introduced_local))
        if r.module_path in res.suggestion:
            hl[i] = "bad"
    lines = []
    if res.applied:
        lines.append(f"built with a recipe: kept in float {', '.join(res.applied)}")
    if not res.suggestion:
        top = res.rows[0]
        lines.append(f"no single op dominates: the worst, {top.module_path or top.op}, alone keeps the output at "
                     f"{_db(_finite(top.introduced_snr_db))} SNR; int8 output SNR vs float {_db(res.int8_snr_db)}")
    else:
        recipe = '{"keep_float": [' + ", ".join(f'"{p}"' for p in res.applied + res.suggestion) + "]}"
        share = f"{res.suggestion_share:.0%}" if res.suggestion_share is not None else "n/a"
        lines.append(f"suggested recipe: {recipe}")
        lines.append(f"  the top culprit: {share} of the summed introduced error; int8 output SNR vs float "
                     f"{_db(res.int8_snr_db)} ({res.backend})")
        lines.append("  what it removes on the device and costs in latency and bytes (and whether a bigger set is "
                     "worth it)\n  is measured by re-lowering: etlens fix --model FILE.py:build --quantize "
                     "--recipe-out recipe.json\n  then: etlens report --model FILE.py:build --quantize --recipe "
                     "recipe.json")
    body = f"<pre>{html.escape(chr(10).join(lines))}</pre>" + table_html(
        rows, ["rank", "module", "op", "nodes", "introduced (NSR at output)", "output SNR with only it (dB)",
               "accumulated (NSR at op)", "accumulated SNR at op (dB)", "own error at op (NSR)"],
        table_id="culprits-table", numeric=(4, 5, 6, 7, 8), highlight=hl)
    overlay = _overlay(res, data)
    if overlay:
        from ..views.html import generate_html

        g = data.reference_graph
        p = generate_html(g, os.path.join(out_dir, f"{stem}.graph-introduced.html"), overlay=overlay,
                          overlay_label="introduced error (NSR at the output)", title=f"{g.name} · introduced error")
        files["graph with introduced-error overlay"] = p
        body += "<h3>Introduced-error overlay</h3>" + viewer_frame(p, "graph with introduced-error overlay")
    intro = ("Each quantized op re-run on the float model's own inputs: introduced = the output's noise-to-signal "
             "ratio with only that op's own int8 error (what it does; the ranking), accumulated = the int8 run's "
             "error at the op (what it inherits too; the gap table). The culprit is where introduced is large, "
             f"not where the gap first grows. {len(res.rows)} quantized ops, {res.seconds:.1f} s in PyTorch.")
    return Section("culprits", "Culprits: introduced vs accumulated error", body, intro)
