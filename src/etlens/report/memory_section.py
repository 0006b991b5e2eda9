"""Report sections on memory and size: planned memory, file size and runtime allocations.

:func:`memory_sections` is the one hook :func:`etlens.report.page.build_page` calls. With a
``.pte`` it writes the arena occupancy chart (``<stem>.memory.html``) and the size treemap
(``<stem>.size.html``) next to the report and embeds both; with an ETDump that recorded
allocation events it adds the runtime allocations (bytes per allocator, largest allocations,
timeline). Each part is skipped, with a note, when it cannot be computed.
"""

from __future__ import annotations

import html
import os
from typing import Any

from ..errors import EtlensError
from .render import Section, iframe_html

__all__ = ["memory_sections"]


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
            p = write_memory_html(rep, os.path.join(out_dir, f"{stem}.memory.html"))
            files["planned memory"] = p
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
