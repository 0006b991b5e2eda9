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

from ..model.spans import span
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
    #: share of the run time spent in delegate calls (0-1; None when unknown)
    delegated_share: float | None = None
    #: the :class:`~etlens.build.session.BuildSession` that built the model (``report_from_model``)
    session: Any = None

    def page(self) -> str:
        """The report page's HTML (read from :attr:`path`)."""
        with open(self.path, encoding="utf-8") as f:
            return f.read()

    def __repr__(self) -> str:
        """One line; a notebook shows the page itself (``_repr_mimebundle_``, :mod:`etlens.views.notebook`)."""
        parts = [] if self.total_latency_ms is None else [f"latency {self.total_latency_ms:.4g} ms"]
        if self.delegated_share is not None:
            parts.append(f"{100 * self.delegated_share:.0f}% delegated")
        if self.worst_gap is not None:
            parts.append(f"worst {self.gap_metric} {self.worst_gap:.3g}")
        return f"<etlens ReportResult {os.path.basename(self.path)!r}: {', '.join(parts) or 'no timings'}>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from ..views.notebook import frame_bundle

        return frame_bundle(self.page(), repr(self), height=820)


def report_from_artifacts(etdump: str, output: str, *, etrecord: str | None = None,
                          debug_buffer: str | None = None, pte: str | None = None, trace: Any = None,
                          title: str = "etlens report", subtitle: str = "", metric: str = "MSE",
                          gap_threshold: float | None = None, extra_files: dict[str, str] | None = None,
                          on_stage: Any = None, inside: Any = None, method: str | None = None) -> ReportResult:
    """Write the report for device artifacts to ``output``; side files go next to it.

    ``method``: the method whose runs make the headline and the operator table (default: the one
    that did the work, e.g. ``forward`` next to an LLM's metadata methods).

    ``on_stage(name)`` (optional) is told when ``analyze`` (Inspector, numerics, delegation) and
    ``render`` start. ``inside`` (from :func:`report_from_model`) holds the per-op values inside the
    delegates (:mod:`etlens.build.inside`).
    """
    out_dir = os.path.dirname(os.path.abspath(output)) or "."
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(output))[0]
    inputs = ReportInputs(etdump=etdump, etrecord=etrecord, debug_buffer=debug_buffer, pte=pte, trace=trace,
                          title=title, subtitle=subtitle, metric=metric, gap_threshold=gap_threshold,
                          method=method)
    if on_stage is not None:
        on_stage("analyze")
    with span("analyze"):
        data = collect(inputs)
    if inside is not None:  # per-op values inside delegates (report.inside), from report_from_model
        from .inside_section import attach

        attach(data, inside)
    if on_stage is not None:
        on_stage("render")
    files = dict(extra_files or {})
    with span("render/side files"):
        files.update(write_side_files(data, out_dir, stem))
    with span("render/page"):
        page = build_page(data, out_dir, stem, files)
        with open(output, "w", encoding="utf-8") as f:
            f.write(render_report(page))
    return ReportResult(path=output, files=files, total_latency_ms=data.total_latency_ms,
                        worst_gap=data.worst_gap[0] if data.worst_gap else None, gap_metric=data.gap_metric,
                        gap_higher_is_better=data.gap_higher_is_better, data=data,
                        delegated_share=data.delegated_time_share)


def report_from_model(model: Any, example_inputs: tuple, output: str, *, name: str = "model",
                      backend: str = "xnnpack", quantize: bool = False, runs: int = 5, trace: bool = True,
                      metric: str = "MSE", gap_threshold: float | None = None, progress: bool | None = None,
                      debug_buffer_size: int | None = None, verbose: bool = False,
                      inside_delegates: bool = True, title: str | None = None, worker: Any = None) -> ReportResult:
    """Export, lower, run, trace and report on ``model`` (needs the ``executorch`` extra).

    ``name`` names the model in the subtitle and the artifact files; ``title`` is the page title
    (default ``etlens report: <name>``).

    Stages (one progress bar on a terminal): ``export`` [``quantize``] ``lower`` ``run`` x ``runs``
    [``inside the delegates``] ``analyze`` ``render``, the steps of one
    :class:`~etlens.build.session.BuildSession` (export, quantize, lower once; with ``trace`` the
    pass tracer records while that one lowering goes, in the session's worker child).
    The user's code runs here (its errors: :class:`~etlens.build.pipeline.ModelError` naming the
    stage and the user's frame); lowering and the runtime run in a child process (a native abort
    becomes an :class:`~etlens.errors.EtlensError`).
    ``debug_buffer_size`` (bytes; ``None``: sized from the program) is the runtime's buffer for
    intermediate outputs; ``verbose`` shows the children's logs. ``inside_delegates`` (default on):
    also lower + run an instrumented build and show the per-op values inside each delegate
    (:mod:`etlens.build.inside`). ``worker``: a child already started for this backend
    (:func:`etlens.build.session.start_worker`; the CLI starts it before loading the model), used
    and closed by the report.
    """
    from .._progress import StageBar
    from ..build.session import BuildSession
    from ..build.pipeline import require_executorch

    require_executorch("lowering")
    out_dir = os.path.dirname(os.path.abspath(output)) or "."
    stem = os.path.splitext(os.path.basename(output))[0]
    art_dir = os.path.join(out_dir, f"{stem}_artifacts")
    total = 1 + int(quantize) + 1 + runs + int(inside_delegates) + 2
    bar = StageBar(total=total, desc="etlens report", enabled=progress)
    seen: list[str] = []

    warm: list = []  # threads running while the child lowers: the analyses' imports
    race: list = []  # the inside view, raced on a second child (InsideRace)

    def on_stage(label: str) -> None:
        if seen:
            bar.advance()
        seen.append(label)
        bar.stage(label if label != "run" else f"run 1/{runs}")
        if label == "lower" and not warm:  # this process waits for the child from here on
            from .collect import prewarm

            warm.append(prewarm())
            if inside_delegates and not session.in_process:  # needs only the export: done while the child lowers
                from .inside_section import InsideRace

                race.append(InsideRace(session, metric=metric, threshold=gap_threshold, verbose=verbose))

    def on_run(i: int) -> None:
        bar.advance()
        if i + 1 < runs:
            bar.stage(f"run {i + 2}/{runs}")

    files: dict[str, str] = {}
    session = BuildSession(model, example_inputs, name=name, backend=backend, quantize=quantize, trace=trace,
                           verbose=verbose, on_stage=on_stage, worker=worker)
    try:
        trace_path = os.path.join(art_dir, f"{name}.trace.json")
        arts = session.build(art_dir, runs=runs, debug_buffer_size=debug_buffer_size, on_run=on_run,
                             trace_path=trace_path)
        seen.clear()  # the run stage advanced the bar per run
        files.update({"program (.pte)": arts.pte, "ETRecord": arts.etrecord, "ETDump": arts.etdump,
                      "debug buffer": arts.debug_buffer})
        if trace:
            files["pass trace (etlens trace JSON)"] = trace_path
        for thread in warm:
            thread.join()
        inside = None
        if inside_delegates:
            on_stage("inside the delegates")
            from .inside_section import run_for_report

            with span("inside the delegates"):
                inside = (race.pop().result() if race else
                          run_for_report(session, metric=metric, threshold=gap_threshold))
        subtitle = (f"model {name} · backend {backend}{' · int8 (pt2e)' if quantize else ''} · "
                    f"{runs} runs on the ExecuTorch runtime")
        result = report_from_artifacts(arts.etdump, output, etrecord=arts.etrecord, debug_buffer=arts.debug_buffer,
                                       pte=arts.pte, trace=session.trace, title=title or f"etlens report: {name}",
                                       subtitle=subtitle, metric=metric, gap_threshold=gap_threshold,
                                       extra_files=files, on_stage=on_stage, inside=inside)
        result.session = session
        bar.advance()
    finally:
        for r in race:  # the build failed before the inside view was collected
            r.cancel()
        session.close()
        bar.close()
    return result
