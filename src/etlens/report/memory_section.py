"""Report sections on memory and size: planned memory, file size and runtime allocations.

:func:`memory_sections` is the one hook :func:`etlens.report.page.build_page` calls. With a
``.pte`` it writes the arena occupancy chart (``<stem>.memory.html``) and the size treemap
(``<stem>.size.html``) next to the report and embeds both; with an ETDump that recorded
allocation events it adds the runtime allocations (bytes per allocator, largest allocations,
timeline). Each part is skipped, with a note, when it cannot be computed.

Measured memory (:mod:`etlens.analysis.memory_measured`) joins the plan when the report has it:
``inputs.measured`` (the ``measured`` record, or a path to the JSON ``etlens memory --measure
--format json -o`` writes), else a sidecar ``<program>.measured.json`` next to the ``.pte``, else a
measurement made now in a fresh runtime process when ``inputs.measure_memory`` is true.
"""

from __future__ import annotations

import html
import os
from typing import Any

from ..errors import EtlensError
from .render import Section, iframe_html

__all__ = ["memory_sections", "measured_for", "write_measured_sidecar"]


def write_measured_sidecar(pte: str, method: str | None = None) -> str:
    """Measure ``pte`` in a fresh runtime process and write ``<program>.measured.json`` beside it (the
    sidecar :func:`measured_for` reads); return its path. ``report --measure-memory`` calls it."""
    import json

    from ..analysis.memory import analyze_memory
    from ..readers.pte import read

    m = measured_for(_Measure(method), pte, analyze_memory(read(pte)), sidecar=False)
    path = os.path.splitext(pte)[0] + ".measured.json"
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"measured": m}, f)
    return path


class _Measure:
    """Report inputs that ask for a fresh measurement (:func:`write_measured_sidecar`)."""

    measured = None
    measure_memory = True

    def __init__(self, method: str | None) -> None:
        self.method = method


def measured_for(inputs: Any, pte: str, report: Any, *, sidecar: bool = True) -> dict[str, Any] | None:
    """The measured memory of ``pte`` for the report (see the module docstring), or ``None``."""
    import json

    given = getattr(inputs, "measured", None)
    if given is None and sidecar:
        sidecar = os.path.splitext(pte)[0] + ".measured.json"
        given = sidecar if os.path.exists(sidecar) else None
    if isinstance(given, str):
        try:
            with open(given, encoding="utf-8") as f:
                given = json.load(f)
        except (OSError, ValueError) as exc:
            raise EtlensError(f"{given}: not the JSON of `etlens memory --measure --format json` ({exc})") from exc
    if isinstance(given, dict):
        return given.get("measured", given)
    if not getattr(inputs, "measure_memory", False):
        return None
    from ..analysis.memory_measured import input_specs, measured_memory
    from ..builder.jobs_memory import measure_program
    from ..readers.pte import read

    program = read(pte).program
    method = getattr(inputs, "method", None) or "forward"
    if not any(p.name == method for p in program.execution_plan):
        method = program.execution_plan[0].name
    specs = input_specs(program, method)
    raw = measure_program(pte, method=method, input_specs=specs)
    mm = next((m for m in report.methods if m.name == method), None)
    return measured_memory(raw, program, method_memory=mm, specs=specs)


def _embed(path: str, title: str, height: int) -> str:
    with open(path, encoding="utf-8") as f:
        doc = f.read()
    name = html.escape(os.path.basename(path))
    return (iframe_html(doc, title=title, height=height)
            + f"<p class='muted'>Also written as <a href='{name}'>{name}</a> (opens full-screen).</p>")


def memory_sections(inputs: Any, out_dir: str, stem: str, files: dict[str, str],
                    notes: list[str] | None = None, artifacts: Any = None) -> list[Section]:
    """The memory, size and allocation sections for ``inputs`` (a ``ReportInputs``).

    ``artifacts``: the report's :class:`~etlens.readers.artifacts.ArtifactSet` (files parsed once,
    shared with the other sections); default: a new one for ``inputs``' paths.
    """
    from ..readers.artifacts import ArtifactSet

    out: list[Section] = []
    notes = notes if notes is not None else []
    if artifacts is None:
        artifacts = ArtifactSet(etdump=getattr(inputs, "etdump", None), etrecord=getattr(inputs, "etrecord", None),
                                pte=getattr(inputs, "pte", None))
    pte = getattr(inputs, "pte", None)
    if pte:
        try:
            from ..analysis.memory import analyze_memory, attach_etrecord
            from ..analysis.size import analyze_size
            from ..views.memory_timeline import write_memory_html
            from ..views.treemap import write_treemap_html

            rep = analyze_memory(artifacts.pte())
            etrecord = None
            if getattr(inputs, "etrecord", None):
                etrecord = artifacts.etrecord()
                attach_etrecord(rep, etrecord)
            measured = None
            try:
                measured = measured_for(inputs, pte, rep)
            except EtlensError as exc:
                notes.append(f"measured memory: {exc}")
            p = write_memory_html(rep, os.path.join(out_dir, f"{stem}.memory.html"), measured=measured)
            files["planned memory"] = p
            if measured is not None:
                from ..views.memory_measured import measured_html

                peak_mb = measured["peak_rss_bytes"] / (1 << 20)
                out.append(Section("measured-memory", "Memory: planned vs measured", measured_html(measured),
                                   f"peak {peak_mb:.1f} MB resident during {measured['peak_stage']} "
                                   f"({measured['load']} load) against {measured['plan_bytes']} planned arena bytes; "
                                   "the owners add up to the peak."))
            arenas = sum(len(m.arenas) for m in rep.methods)
            out.append(Section("memory", "Planned memory", _embed(p, "planned memory", 540),
                               f"{arenas} arena(s): each bar is a planned tensor at its offset (y) over the "
                               "instructions it is live for (x); hover for the tensor and its operator."))
            size = analyze_size(artifacts.pte_bytes(), pte, etrecord, artifact=artifacts.pte())
            p = write_treemap_html(size, os.path.join(out_dir, f"{stem}.size.html"))
            files["size treemap"] = p
            out.append(Section("size", "Where the bytes go", _embed(p, "size treemap", 640),
                               f"{size.total_bytes} bytes, split into {len(size.parts)} parts that add up exactly "
                               "to the file size."))
        except EtlensError as exc:
            notes.append(f"memory/size: {exc}")
    etdump = getattr(inputs, "etdump", None)
    if etdump:
        try:
            from ..analysis.allocations import allocation_summary, has_allocations
            from ..views.allocations import allocations_html

            dump = artifacts.etdump()
            if has_allocations(dump):
                out.append(Section("allocations", "Runtime allocations", allocations_html(allocation_summary(dump)),
                                   "Allocation events the runtime recorded per run (allocators tracked by ETDump)."))
        except EtlensError as exc:
            notes.append(f"allocations: {exc}")
    return out
