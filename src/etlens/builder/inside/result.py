"""The answer of the inside-the-delegate analysis: rows, first divergence, observer effect, method.

:class:`InsideResult` is what :func:`etlens.builder.inside.inside_delegates` returns; ``to_dict()``
is the ``etlens gap --inside-delegates --format json`` document (names kept stable)::

    {"metric": "SNR", "threshold": 20.0, "backend": "xnnpack", "quantized": true,
     "rows": [{"aot_ops": [...], "debug_handles": [...], "module_path": "layers.3",
               "inside_delegate": true, "backend": "XnnpackBackend", "gap": 4.1,
               "reference_kind": "float", "kernel_gap": 41.0, "metrics": {"float": {...},
               "qdq_simulated": {...}}, ...}],
     "first_divergence": {"node": ..., "module_path": ..., "gap": ..., "source_line": ...} | null,
     "observer_effect": {...}, "method": {...}, "bisect": {...} | null}

``to_text()`` is the table the CLI prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["InsideResult", "clean_number"]


def clean_number(v: Any) -> Any:
    """A float JSON can hold: NaN -> None, +-inf -> ``"inf"``/``"-inf"``; other values unchanged."""
    if isinstance(v, float):
        if math.isnan(v):
            return None
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    if isinstance(v, dict):
        return {k: clean_number(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean_number(x) for x in v]
    return v


@dataclass
class InsideResult:
    """Per-op values inside each delegate, paired with their references.

    Attributes:
        metric / threshold: the metric of ``gap`` and the threshold (``None``: no gate).
        backend: the backend name lowered with; ``quantized``: pt2e int8 or not.
        rows: one dict per exposed value (graph order); see the module docstring for the keys.
        first_divergence: the earliest row crossing ``threshold`` (``None`` when none does).
        observer_effect: instrumented vs production final outputs (all metrics), plus the
            production program against the float model.
        method: how the values were obtained (``"instrumented-outputs"``), cycles, seconds, what
            could not be exposed and why.
        bisect: the bisect's answer and cycle count when it ran.
    """

    metric: str
    threshold: float | None
    backend: str
    quantized: bool
    rows: list[dict[str, Any]] = field(default_factory=list)
    first_divergence: dict[str, Any] | None = None
    observer_effect: dict[str, Any] = field(default_factory=dict)
    method: dict[str, Any] = field(default_factory=dict)
    bisect: dict[str, Any] | None = None

    @property
    def crossing(self) -> list[int]:
        """Indices of the rows whose ``gap`` crosses the threshold."""
        return [i for i, r in enumerate(self.rows) if r.get("crosses_threshold")]

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (NaN/inf made JSON-safe)."""
        return clean_number({
            "metric": self.metric, "threshold": self.threshold, "backend": self.backend,
            "quantized": self.quantized, "rows": self.rows, "crossing": len(self.crossing),
            "first_divergence": self.first_divergence, "observer_effect": self.observer_effect,
            "method": self.method, "bisect": self.bisect,
        })

    def to_text(self) -> str:
        """The human table: one line per exposed value, then divergence, observer effect, method."""
        from tabulate import tabulate

        def fmt(v: Any) -> str:
            return "-" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))

        def short(items: list, limit: int = 3) -> str:
            return ", ".join(items[:limit]) + (f", … (+{len(items) - limit})" if len(items) > limit else "")

        kernel = self.quantized
        intro = any(r.get("introduced") is not None for r in self.rows)  # etlens gap --quantize (analysis.fix)
        headers = ["#", "ops", "module", "where", f"{self.metric} vs float"] + (
            [f"{self.metric} vs qdq (kernel)"] if kernel else []) + (["introduced (NSR)"] if intro else []) + [""]
        table = []
        for i, r in enumerate(self.rows):
            where = r.get("backend") if r.get("inside_delegate") else "portable"
            line = [i, short(r["aot_ops"]), r.get("module_path") or "", where, fmt(r.get("gap"))]
            if kernel:
                line.append(fmt(r.get("kernel_gap")))
            if intro:
                line.append(fmt(r.get("introduced")))
            line.append("!" if r.get("crosses_threshold") else "")
            table.append(line)
        inside = sum(1 for r in self.rows if r.get("inside_delegate"))
        lines = [f"inside the delegates ({self.backend}{', int8 pt2e' if self.quantized else ', fp32'}): "
                 f"{len(self.rows)} values, {inside} computed inside a delegate", "",
                 tabulate(table, headers=headers, tablefmt="simple")]
        if self.threshold is not None:
            lines += ["", f"{len(self.crossing)} of {len(self.rows)} values cross {self.metric} threshold "
                      f"{self.threshold:g}"]
        fd = self.first_divergence
        if fd:
            lines.append(f"first divergence: {', '.join(fd['aot_ops'])} in "
                         f"{fd.get('module_path') or '?'}, {self.metric} = {fmt(fd.get('gap'))}"
                         f"{' inside ' + str(fd.get('backend')) if fd.get('inside_delegate') else ''}")
            if fd.get("source_line"):
                lines.append("  at " + fd["source_line"])
        oe = self.observer_effect
        if oe:
            vs_float = oe.get("production_vs_float", {}).get(self.metric)
            lines.append(f"observer effect: instrumented vs production final output max_abs "
                         f"{fmt(oe.get('max_abs'))} ({'identical' if oe.get('identical') else 'changed'}); "
                         f"production vs float model {self.metric} {fmt(vs_float)}")
        m = self.method
        if m:
            lines.append(f"method: {m.get('name')}, {m.get('cycles')} lower+run cycles, "
                         f"{fmt(m.get('instrumented_seconds'))} s (plain lower+run {fmt(m.get('plain_seconds'))} s)"
                         + (f"; not exposed: {len(m['unexposed'])}" if m.get("unexposed") else ""))
        if self.bisect:
            b = self.bisect
            lines.append(f"bisect: first crossing at {b.get('first_crossing')} after {b.get('cycles')} lower+run "
                         f"cycles ({'agrees with' if b.get('agrees') else 'differs from'} the instrumented rows)")
        return "\n".join(lines)
