"""``etlens report``: one joined, offline HTML report — the compiler, the device, the numbers.

Two ways in:

* from device artifacts: :func:`report_from_artifacts` (``.etdp`` [+ ``.etrecord``, debug buffer,
  ``.pte``, pass trace]);
* from a model: :func:`report_from_model` traces the passes, lowers with the real ExecuTorch
  toolchain, runs the program with ETDump and intermediate outputs, then reports on what it wrote
  (``etlens report --demo`` does this for a built-in demo model).

The report holds a summary (total latency, delegated share, worst gap, first divergence), the
graph with latency and numeric-gap overlays, the pass stepper, the delegation table, per-op
latency table and chart, the numeric-gap table with unpaired ops explained; a Perfetto trace and a
TSV of all events are written alongside.

Example::

    from etlens.report import report_from_artifacts
    result = report_from_artifacts("run.etdp", "out/report.html", etrecord="model.etrecord",
                                   debug_buffer="run.bin", pte="model.pte")
    result.path, result.total_latency_ms, result.worst_gap
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .collect import ReportData, ReportInputs, collect, write_side_files
from .page import build_page
from .render import render_report

__all__ = ["ReportResult", "report_from_artifacts", "report_from_model", "ReportInputs", "ReportData"]


@dataclass
class ReportResult:
    """Where the report went and its headline numbers (used by the CLI's CI gates)."""

    path: str
    files: dict[str, str] = field(default_factory=dict)
    total_latency_ms: float | None = None
    worst_gap: float | None = None
    gap_metric: str = "MSE"
    #: True when the metric is a similarity (a gap below the threshold crosses it)
    gap_higher_is_better: bool = False
    data: ReportData | None = None


def report_from_artifacts(etdump: str, output: str, *, etrecord: str | None = None,
                          debug_buffer: str | None = None, pte: str | None = None, trace: Any = None,
                          title: str = "etlens report", subtitle: str = "", metric: str = "MSE",
                          gap_threshold: float | None = None, extra_files: dict[str, str] | None = None,
                          inside: Any = None) -> ReportResult:
    """Write the report for device artifacts to ``output``; side files go next to it."""
    out_dir = os.path.dirname(os.path.abspath(output)) or "."
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(output))[0]
    inputs = ReportInputs(etdump=etdump, etrecord=etrecord, debug_buffer=debug_buffer, pte=pte, trace=trace,
                          title=title, subtitle=subtitle, metric=metric, gap_threshold=gap_threshold)
    data = collect(inputs)
    if inside is not None:  # per-op values inside delegates (report.inside), from report_from_model
        from .inside.section import attach

        attach(data, inside)
    files = dict(extra_files or {})
    files.update(write_side_files(data, out_dir, stem))
    page = build_page(data, out_dir, stem, files)
    with open(output, "w", encoding="utf-8") as f:
        f.write(render_report(page))
    return ReportResult(path=output, files=files, total_latency_ms=data.total_latency_ms,
                        worst_gap=data.worst_gap[0] if data.worst_gap else None, gap_metric=data.gap_metric,
                        gap_higher_is_better=data.gap_higher_is_better, data=data)


def report_from_model(model: Any, example_inputs: tuple, output: str, *, name: str = "model",
                      backend: str = "xnnpack", quantize: bool = False, runs: int = 5, trace: bool = True,
                      metric: str = "MSE", gap_threshold: float | None = None, progress: bool | None = None,
                      inside_delegates: bool = True) -> ReportResult:
    """Trace, lower, run and report on ``model`` (needs the ``executorch`` extra).

    ``inside_delegates`` (default on): also lower + run an instrumented build and show the per-op
    values inside each delegate (:mod:`etlens.report.inside`).
    """
    from .._progress import progress as bar
    from .pipeline import build_and_run

    out_dir = os.path.dirname(os.path.abspath(output)) or "."
    stem = os.path.splitext(os.path.basename(output))[0]
    art_dir = os.path.join(out_dir, f"{stem}_artifacts")
    steps = ["trace passes", "lower + run on the ExecuTorch runtime", "inspect + numerics + render"]
    if not trace:
        steps = steps[1:]
    if inside_delegates:
        steps.append("inside the delegates")
    pbar = bar(total=len(steps), desc="etlens report", unit="step", enabled=progress)
    the_trace = None
    files: dict[str, str] = {}
    try:
        if trace:
            pbar.set_postfix_str(steps[0])
            from ..passes.tracer import trace_passes

            trace_path = os.path.join(art_dir, f"{name}.trace.json")
            os.makedirs(art_dir, exist_ok=True)
            the_trace = trace_passes(model, example_inputs, backend=backend, quantize=quantize, name=name,
                                     output=trace_path, progress=False, record_times=True)
            files["pass trace (etlens trace JSON)"] = trace_path
            pbar.update(1)
        pbar.set_postfix_str("lower + run")
        arts = build_and_run(model, example_inputs, art_dir, name=name, backend=backend, quantize=quantize,
                             runs=runs)
        files.update({"program (.pte)": arts.pte, "ETRecord": arts.etrecord, "ETDump": arts.etdump,
                      "debug buffer": arts.debug_buffer})
        pbar.update(1)
        inside = None
        if inside_delegates:
            pbar.set_postfix_str("inside the delegates")
            from .inside.section import run_for_report

            inside = run_for_report(model, example_inputs, backend=backend, quantize=quantize, metric=metric,
                                    threshold=gap_threshold)
            pbar.update(1)
        pbar.set_postfix_str("inspect + render")
        subtitle = (f"model {name} · backend {backend}{' · int8 (pt2e)' if quantize else ''} · "
                    f"{runs} runs on the ExecuTorch runtime")
        result = report_from_artifacts(arts.etdump, output, etrecord=arts.etrecord, debug_buffer=arts.debug_buffer,
                                       pte=arts.pte, trace=the_trace, title=f"etlens report: {name}",
                                       subtitle=subtitle, metric=metric, gap_threshold=gap_threshold,
                                       extra_files=files, inside=inside)
        pbar.update(1)
    finally:
        pbar.close()
    return result
