"""Readers for etlens's own JSON files: pass traces (``etlens.trace``) and bare graphs (``etlens.graph``).

Both are plain JSON, so they load without torch or ExecuTorch. The registry picks them by the
``schema`` string near the start of the file.

Example::

    from etlens.readers import read
    art = read("trace.json")             # format 'trace'
    art.trace.snapshots[3].diff["added"]
    art.graphs()                          # {snapshot name: Graph}
    read("graph.json").graphs()           # format 'graph': {graph name: Graph}
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import FormatError
from ..model import Graph
from ..model.trace import Trace
from .base import Artifact, read_limited

__all__ = ["TraceArtifact", "read", "read_graph_json"]


@dataclass
class TraceArtifact(Artifact):
    """A pass trace file: ``.trace`` is the :class:`~etlens.model.trace.Trace`."""

    trace: Trace | None = field(default=None, repr=False)

    def graphs(self) -> dict[str, Graph]:
        return self.trace.graphs() if self.trace is not None else {}

    def summary(self) -> dict[str, Any]:
        t = self.trace
        assert t is not None
        failed = t.failed
        return {
            "format": self.format,
            "path": self.path,
            "model": t.model,
            "backend": t.backend,
            "created_by": t.created_by,
            "snapshots": len(t.snapshots),
            "failed": None if failed is None else f"{failed.name}: {(failed.error or {}).get('type')}: "
                                                  f"{(failed.error or {}).get('message')}",
            "stages": {f"{s.index} {s.name}": _stage_line(s) for s in t.snapshots},
        }


def _stage_line(s: Any) -> str:
    """One readable line per snapshot: stage, size, diff counts (+added -removed ~rewritten >replaced),
    time, lost handles, error."""
    d = s.diff or {}
    lost = len((s.handle_report or {}).get("lost") or [])
    parts = [f"{s.stage}: {len(s.graph)} nodes ({s.nodes_delta:+d})",
             f"+{len(d.get('added') or [])} -{len(d.get('removed') or [])} "
             f"~{len(d.get('rewritten') or [])} >{len(d.get('replaced') or [])}",
             f"{s.wall_time_s:.3f}s"]
    if lost:
        parts.append(f"{lost} lost debug handle(s)")
    if s.error is not None:
        parts.append(f"FAILED: {s.error.get('type')}")
    return ", ".join(parts)


def read(path: str | os.PathLike[str]) -> TraceArtifact:
    """Load a pass-trace JSON file written by ``etlens trace`` / ``Trace.save``."""
    path = os.fspath(path)
    trace = Trace.loads(read_limited(path), where=path)
    return TraceArtifact(format="trace", path=path, trace=trace)


def read_graph_json(path: str | os.PathLike[str]) -> Artifact:
    """Load a bare ``etlens.graph`` JSON file (``Graph.to_json()`` written to disk)."""
    path = os.fspath(path)
    try:
        data = json.loads(read_limited(path))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # RecursionError: absurd nesting
        raise FormatError(f"{path}: not valid JSON ({exc}); the file may be truncated") from exc
    try:
        graph = Graph.from_json(data)
    except FormatError as exc:
        raise FormatError(f"{path}: {exc}") from exc
    return Artifact(format="graph", path=path, _graphs={graph.name: graph})
