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

__all__ = ["ReportResult", "report_from_artifacts", "report_from_model", "report_from_session", "ReportInputs",
           "ReportData"]


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
    #: the :class:`~etlens.builder.session.BuildSession` that built the model (``report_from_model``)
    session: Any = None
    #: optional stages that failed while the report completed: ``{stage: one line}`` (trace, inside the
    #: delegates, numeric gap); ``etlens report --strict`` exits 1 when there is any
    failures: dict[str, str] = field(default_factory=dict)

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
                          on_stage: Any = None, inside: Any = None, introduced: Any = None,
                          method: str | None = None,
                          failures: dict[str, str] | None = None,
                          prompt_lens: list[int] | None = None) -> ReportResult:
    """Write the report for device artifacts to ``output``; side files go next to it.

    ``method``: the method whose runs make the headline and the operator table (default: the one
    that did the work, e.g. ``forward`` next to an LLM's metadata methods).
    ``prompt_lens``: an LLM's prompt length in tokens, one for every generate session or one per session in
    order; on a timing-only dump it makes the LLM section's token counts, TTFT and tokens/s exact.

    ``on_stage(name)`` (optional) is told when ``analyze`` (Inspector, numerics, delegation) and
    ``render`` start. ``inside`` (from :func:`report_from_model`) holds the per-op values inside the
    delegates (:mod:`etlens.builder.inside`). ``failures``: optional stages of the build that failed
    (``{stage: one line}``), shown first among the page's notes and in :attr:`ReportResult.failures`
    with the analyses that failed here (the numeric gap).
    """
    out_dir = os.path.dirname(os.path.abspath(output)) or "."
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(output))[0]
    inputs = ReportInputs(etdump=etdump, etrecord=etrecord, debug_buffer=debug_buffer, pte=pte, trace=trace,
                          title=title, subtitle=subtitle, metric=metric, gap_threshold=gap_threshold,
                          method=method, prompt_lens=list(prompt_lens) if prompt_lens else None)
    if on_stage is not None:
        on_stage("analyze")
    with span("analyze"):
        data = collect(inputs)
    if inside is not None:  # per-op values inside delegates (report.inside), from report_from_model
        from .inside_section import attach

        attach(data, inside)
    data.introduced = introduced  # culprits by introduced error (report.fix_section), quantized builds
    for stage, why in (failures or {}).items():  # optional stages of the build that failed
        data.failures.setdefault(stage, why)
    for stage, why in data.failures.items():
        data.notes.insert(0, f"{stage} failed (the rest of the report is complete): {why}")
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
                        delegated_share=data.delegated_time_share, failures=dict(data.failures))


def report_from_model(model: Any, example_inputs: tuple, output: str, *, name: str = "model",
                      backend: str = "xnnpack", quantize: bool = False, runs: int = 5, trace: bool = True,
                      metric: str = "MSE", gap_threshold: float | None = None, progress: bool | None = None,
                      debug_buffer_size: int | None = None, verbose: bool = False,
                      inside_delegates: bool = True, title: str | None = None) -> ReportResult:
    """Export, lower, run, trace and report on ``model`` (needs the ``executorch`` extra).

    ``name`` names the model in the subtitle and the artifact files; ``title`` is the page title
    (default ``etlens report: <name>``). The build is a
    :class:`~etlens.builder.session.BuildSession` (export, quantize, lower once; with ``trace`` the
    pass tracer records while that one lowering goes, in the session's worker child); see
    :func:`report_from_session` for the stages. The user's code runs here (its errors:
    :class:`~etlens.builder.loader.ModelError` naming the stage and the user's frame); lowering and
    the runtime run in a child process (a native abort becomes an :class:`~etlens.errors.EtlensError`).
    """
    from ..builder.session import BuildSession

    session = BuildSession(model, example_inputs, name=name, backend=backend, quantize=quantize, trace=trace,
                           verbose=verbose)
    return report_from_session(session, output, runs=runs, metric=metric, gap_threshold=gap_threshold,
                               progress=progress, debug_buffer_size=debug_buffer_size,
                               inside_delegates=inside_delegates, title=title)


def report_from_session(session: Any, output: str, *, runs: int = 5, metric: str = "MSE",
                        gap_threshold: float | None = None, progress: bool | None = None,
                        debug_buffer_size: int | None = None, inside_delegates: bool = True,
                        title: str | None = None, measure_memory: bool = False) -> ReportResult:
    """Build ``session``'s model, run it ``runs`` times and write the report to ``output``; closes the session.

    Stages (one progress bar on a terminal): ``export`` [``quantize``] ``lower`` ``run`` x ``runs``
    [``inside the delegates``] ``analyze`` ``render``. While the child lowers, this process
    imports what the analyses need and (``inside_delegates``, default on) the session builds the
    per-op values inside each delegate on a second child (:mod:`etlens.builder.inside`).
    ``debug_buffer_size`` (bytes; ``None``: sized from the program) is the runtime's buffer for
    intermediate outputs. The CLI makes the session with
    :meth:`~etlens.builder.session.BuildSession.load` (its child starts before the model loads).
    """
    from .._progress import StageBar
    from ..builder.inside.race import InsideRace
    from ..builder.pipeline import require_executorch
    from .inside_section import finish
    from .warm import prewarm, report_modules, serialized_parse

    require_executorch("lowering")
    if not getattr(session.config, "runs", True):  # e.g. Ethos-U: compiled and estimated, nothing to run here
        from ..backends import for_build, hook
        from ..errors import EtlensError

        report_from_estimates = hook(for_build(session.config.name), "page")
        if report_from_estimates is None:
            raise EtlensError(f"backend {session.config.name!r} builds programs that do not run here and has no "
                              "report page of its own yet")
        result = ReportResult(path=output, files=report_from_estimates(session, output, title=title,
                                                                       progress=progress))
        result.session = session  # no run: no latency, no gap, no time share
        return result
    out_dir = os.path.dirname(os.path.abspath(output)) or "."
    stem = os.path.splitext(os.path.basename(output))[0]
    art_dir = os.path.join(out_dir, f"{stem}_artifacts")
    name, trace_path = session.name, os.path.join(art_dir, f"{session.name}.trace.json")
    bar = StageBar(total=1 + int(session.quantize) + 1 + runs + int(inside_delegates) + 2, desc="etlens report",
                   enabled=progress)
    session.on_stage = bar.step
    # the prewarm list (import statements scanned, no ast); while the report builds, the threads beside it (prewarm,
    # the inside view's export) parse one at a time: CPython's ast is not thread-safe (see report.warm)
    modules = report_modules(session.prewarm_modules())
    with session, bar, serialized_parse():
        session.while_lowering(lambda: prewarm(modules))
        race = InsideRace.on(session, metric=metric, threshold=gap_threshold) if inside_delegates else None
        arts = session.build(art_dir, runs=runs, debug_buffer_size=debug_buffer_size, trace_path=trace_path,
                             on_run=bar.runs(runs))
        files = {"program (.pte)": arts.pte, "ETRecord": arts.etrecord, "ETDump": arts.etdump,
                 "debug buffer": arts.debug_buffer}
        if session.record_trace:
            files["pass trace (etlens trace JSON)"] = trace_path
        inside = None
        if race is not None:
            bar.step("inside the delegates")
            with span("inside the delegates"):
                inside = _optional(session.failures, "inside the delegates",
                                   lambda: finish(race.result(), metric, gap_threshold))
        introduced = None
        if session.quantize:  # culprits by introduced error, in PyTorch (report.fix_section)
            from .fix_section import compute

            with span("introduced error"):
                introduced = _optional(session.failures, "introduced error", lambda: compute(session))
        subtitle = (f"model {name} · backend {session.backend}{' · int8 (pt2e)' if session.quantize else ''} · "
                    f"{runs} runs on the ExecuTorch runtime")
        if measure_memory and arts.pte:  # the memory section reads <program>.measured.json beside the .pte
            from .memory_section import write_measured_sidecar

            with span("measured memory"):
                sidecar = _optional(session.failures, "measured memory", lambda: write_measured_sidecar(arts.pte))
            if sidecar:
                files["measured memory (JSON)"] = sidecar
        result = report_from_artifacts(arts.etdump, output, etrecord=arts.etrecord, debug_buffer=arts.debug_buffer,
                                       pte=arts.pte, trace=session.trace, title=title or f"etlens report: {name}",
                                       subtitle=subtitle, metric=metric, gap_threshold=gap_threshold,
                                       extra_files=files, on_stage=bar.step, inside=inside, introduced=introduced,
                                       failures=session.failures)
        result.session = session
    return result


def _optional(failures: dict[str, str], stage: str, fn: Any) -> Any:
    """``fn()``, or ``None`` with ``failures[stage]`` set to why, in one line (an optional stage never
    takes the report down; a native abort is already an EtlensError from the worker)."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - reported in the page and on the terminal
        text = str(exc).strip()
        failures[stage] = f"{type(exc).__name__}: {text.splitlines()[0][:500] if text else ''}".rstrip(": ")
        return None
