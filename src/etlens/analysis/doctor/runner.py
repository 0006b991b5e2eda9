"""Run the doctor's rules over one context and order what they find: :func:`diagnose`.

Rules are plain modules with ``check(ctx) -> list[Finding]`` (:data:`RULES`, in the order they
run); a rule that raises is recorded in the result's notes and the others go on. Findings are
sorted by estimated win (:attr:`Finding.score`: the win as a share of the latency, the planned
memory or a 40 dB SNR), the ``info`` ones last.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from . import (constants, dynamic_shapes, fragmentation, layout, llm, partitions, portable, profiling,
               quantization)
from .finding import SEVERITIES, Finding, severity_rank

__all__ = ["RULES", "RULE_IDS", "DoctorResult", "diagnose", "SCHEMA_VERSION"]

#: the rule modules, in the order they run
RULES = [partitions, portable, layout, quantization, dynamic_shapes, constants, fragmentation, llm, profiling]

#: every stable rule id and what it looks for
RULE_IDS = {
    "portable-op": "time on portable kernels a delegate could take (with the partitioner's reason)",
    "fragmented-delegate": "a delegate cut into many partitions: the cuts, boundary copies and call overheads",
    "layout-copy": "dim-order / layout copies around delegates",
    "quant-culprit": "int8 error introduced by one op, and the keep-in-float recipe that removes it",
    "quant-no-gain": "quantize/dequantize pairs around ops that run in float anyway",
    "dynamic-shape-bound": "dynamic shapes planned at a bound far above the sizes used",
    "duplicate-constant": "the same constant bytes stored more than once",
    "arena-fragmentation": "planned arena bytes never live at the same time",
    "llm-kv-cache": "an LLM's KV cache against its planned memory",
    "llm-phases": "an LLM's prefill and decode ms per token and the op class decode spends most on (info)",
    "profiling-overhead": "what ETDump's own events add per run (info)",
}

#: the version of the JSON document (``schema/doctor.schema.json``)
SCHEMA_VERSION = 1


@dataclass
class DoctorResult:
    """The findings (sorted), what the doctor read, and why a rule or analysis could not run."""

    findings: list[Finding]
    source: dict[str, Any] = field(default_factory=dict)
    latency_ms: float | None = None
    notes: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    def worst(self) -> str | None:
        """The highest severity among the findings (``None`` when there are none)."""
        return max((f.severity for f in self.findings), key=severity_rank, default=None)

    def at_least(self, severity: str) -> list[Finding]:
        """The findings of ``severity`` or higher."""
        floor = severity_rank(severity)
        return [f for f in self.findings if severity_rank(f.severity) >= floor]

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "source": self.source, "latency_ms": self.latency_ms,
                "findings": [f.to_json() for f in self.findings],
                "summary": {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITIES},
                "notes": self.notes}


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Biggest estimated win first; ``info`` findings after every other one."""
    return sorted(findings, key=lambda f: (f.severity == "info", -f.score))


def diagnose(ctx: Any, *, rules: list[Any] | None = None, skip: tuple[str, ...] = (),
             on_rule: Callable[[str], Any] | None = None) -> DoctorResult:
    """Run ``rules`` (default :data:`RULES`) on ``ctx`` (:class:`~etlens.analysis.doctor.context.DoctorContext`).

    ``skip``: module names of rules not to run (e.g. ``("profiling",)``, which runs the program again).
    """
    found: list[Finding] = []
    notes: list[str] = []
    seconds: dict[str, float] = {}
    for rule in rules if rules is not None else RULES:
        name = rule.__name__.rsplit(".", 1)[-1]
        if name in skip:
            continue
        if on_rule is not None:
            on_rule(name)
        t0 = time.perf_counter()
        try:
            found.extend(rule.check(ctx))
        except Exception as exc:  # noqa: BLE001 - one rule failing never hides the others
            text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            notes.append(f"rule {name} failed: {type(exc).__name__}: {text}")
        seconds[name] = time.perf_counter() - t0
    notes += [f"{k}: {v}" for k, v in ctx.notes.items()]
    source = {k: v for k, v in ctx.paths.items() if v}
    if ctx.model_args:
        source["model_args"] = ctx.model_args
    return DoctorResult(findings=sort_findings(found), source=source, latency_ms=ctx.latency_ms, notes=notes,
                        seconds=seconds)
