"""The report's view of the inside-the-delegate rows: a section, the summary card, the gap overlay.

``etlens report --model/--demo`` runs :func:`etlens.builder.inside.inside_delegates` after the
device build (``--no-inside-delegates`` skips it) and hands the result to the page through three
hooks:

* :func:`attach` stores it on the :class:`~etlens.report.collect.ReportData` and puts every row's
  gap on the reference-graph nodes of its ops (the numeric-gap overlay then colours ops *inside*
  the delegate, not only the delegate's output);
* :func:`adjust_cards` makes the summary's "First divergence" card name the op inside the delegate;
* :func:`section` is the "Inside the delegates" table with the observer effect and the method.
"""

from __future__ import annotations

import html
from typing import Any

from .render import Card, Section, table_html

__all__ = ["attach", "adjust_cards", "section", "default_threshold", "finish"]

#: gaps below this (MSE / L1 / max_abs) are float rounding noise, not a divergence
NOISE_FLOOR = 1e-8


def default_threshold(rows: list[dict], higher_is_better: bool) -> float | None:
    """The report's default: 1% of the worst distance (where drift starts), never below rounding noise.

    Similarities (SNR, cosine) have no default: pass ``--fail-on-gap``.
    """
    gaps = [r["gap"] for r in rows if isinstance(r.get("gap"), float) and r["gap"] == r["gap"]]
    if higher_is_better or not gaps:
        return None
    worst = max(gaps)
    return max(worst * 0.01, NOISE_FLOOR) if worst > NOISE_FLOOR else None


def attach(data: Any, result: Any) -> None:
    """Store ``result`` on ``data`` and overlay its gaps on the matching reference-graph nodes."""
    data.inside = result
    if result is None:
        return
    names = {n.name for n in data.reference_graph} if data.reference_graph is not None else set()
    for r in result.rows:
        if r.get("gap") is None:
            continue
        for op in r["aot_ops"]:
            if op in names:
                data.gap_overlay[op] = float(r["gap"])


def adjust_cards(cards: list[Card], data: Any) -> None:
    """Point the "First divergence" card at the first op inside a delegate crossing the threshold."""
    result = getattr(data, "inside", None)
    if result is None:
        return
    fd = result.first_divergence
    if fd is None:
        value, detail, tone = "none", (f"no value inside the delegates crosses {result.threshold:.3g}"
                                       if result.threshold is not None else "no threshold"), "ok"
    else:
        where = f" inside {fd['backend']}" if fd.get("inside_delegate") else ""
        detail = (f"{', '.join(fd['aot_ops'])} in {fd.get('module_path') or '?'}{where}\n"
                  f"{result.metric} {fd['gap']:.3g} vs float (threshold {result.threshold:.3g})")
        value, tone = (fd["aot_ops"][0] if fd["aot_ops"] else fd["node"]), "warn"
    card = Card("First divergence", value, detail, tone)
    for i, c in enumerate(cards):
        if c.label == "First divergence":
            cards[i] = card
            return
    cards.append(card)


def _fmt(v: Any) -> Any:
    return "-" if v is None else v


def section(data: Any) -> Section | None:
    """The "Inside the delegates" section (``None`` when the analysis did not run)."""
    result = getattr(data, "inside", None)
    if result is None:
        return None
    rows, hl = [], {}
    fd = result.first_divergence
    for i, r in enumerate(result.rows):
        rows.append((", ".join(r["aot_ops"]), r.get("module_path") or "",
                     r.get("backend") if r.get("inside_delegate") else "portable",
                     str(tuple(r["debug_handles"])), str(r.get("shape")), _fmt(r.get("gap")),
                     _fmt(r.get("kernel_gap")), r.get("source_line") or ""))
        if fd is not None and i == fd["row"]:
            hl[i] = "bad"
        elif r.get("crosses_threshold"):
            hl[i] = "warn"
    oe, m = result.observer_effect, result.method
    lines = []
    if fd is not None:
        lines.append(f"first divergence: {', '.join(fd['aot_ops'])} in {fd.get('module_path')}, "
                     f"{result.metric} {fd['gap']:.4g} vs float" + (f"\n  at {fd['source_line']}"
                                                                    if fd.get("source_line") else ""))
    if not oe:
        lines.append("observer effect: not measured here (etlens gap --model … --inside-delegates measures it)")
    else:
        lines.append(f"observer effect: instrumented vs production final output max_abs {oe.get('max_abs'):.3g} "
                     f"({'identical' if oe.get('identical') else 'changed by the instrumentation'})")
    lines.append(f"method: {m.get('name')}, {m.get('cycles')} lower+run cycles; "
                 f"{m.get('exposed')} values exposed, {len(m.get('unexposed') or [])} could not be")
    body = f"<pre>{html.escape(chr(10).join(lines))}</pre>" + table_html(
        rows, ["ops", "module", "where", "debug handles", "shape", f"{result.metric} vs float",
               f"{result.metric} vs qdq (kernel)", "source"], table_id="inside-table", numeric=(5, 6), highlight=hl)
    intro = ("Values computed by the backend's own kernels inside each delegate (exposed as extra program outputs "
             "of an instrumented build), paired with the float model" + (
                 " and, for the kernel error alone, with the quantize-dequantize-simulated graph" if result.quantized
                 else "") + ".")
    return Section("inside", "Inside the delegates", body, intro)


def finish(result: Any, metric: str, threshold: float | None) -> Any:
    """The report's inside view: ``result`` (from the session, or ``None``) with the default threshold
    (:func:`default_threshold` of its rows) when none was given, so the first divergence marks
    where the drift starts."""
    if result is None or threshold is not None:
        return result
    from ..analysis.comparators import get_comparator
    from ..builder.inside.engine import rethreshold

    t = default_threshold(result.rows, bool(getattr(get_comparator(metric), "higher_is_better", False)))
    return rethreshold(result, t) if t is not None else result
