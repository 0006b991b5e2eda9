"""A pass trace: the graph after every compilation stage, with timings, diffs and errors.

:func:`etlens.trace_passes` produces a :class:`Trace`; ``Trace.save(path)`` writes the versioned
``etlens.trace`` JSON documented in ``docs/trace-json.md``; :func:`etlens.readers.trace.read` (or
``etlens.read(path)``) loads it back. Nothing here imports torch: a trace file is readable on a
machine without PyTorch internals or ExecuTorch.

Example::

    from etlens.model.trace import Trace
    t = Trace.load("trace.json")
    for snap in t.snapshots:
        print(snap.index, snap.stage, snap.name, len(snap.graph), snap.nodes_delta, snap.diff["added"])
    t.lineage("aten_linear_default", snapshot=-1)   # back to the export node and its source line
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..errors import FormatError, MissingDataError
from .graph import Graph

__all__ = ["Trace", "Snapshot", "LineageHop", "SCHEMA", "VERSION", "STAGES"]

SCHEMA = "etlens.trace"
VERSION = 1

#: Stage names the tracer writes (readers accept any string).
STAGES = ("quantize", "export", "to_edge", "decompose", "pass", "partition", "lower", "quantize_io")

_DIFF_KEYS = ("added", "removed", "rewritten", "replaced")


def _empty_diff() -> dict[str, Any]:
    return {k: [] for k in _DIFF_KEYS}


@dataclass
class Snapshot:
    """The program after one stage or pass.

    Fields:
        name: unique within the trace (``export``, ``to_edge``, ``FuseBatchNormPass`` …).
        stage: ``quantize`` | ``export`` | ``to_edge`` | ``pass`` | ``partition`` | ``lower`` | …
        index: position in the trace (0-based).
        wall_time_s: time the stage itself took (not the tracer's bookkeeping).
        graph: the program after the stage (for a failed pass: the program before it).
        diff: ``{"added", "removed", "rewritten", "replaced": [node names]}`` against the previous
            snapshot, plus optional ``origin`` (``{new node: old node}`` where the names differ) and
            ``delegated`` (``{delegate node: [absorbed nodes]}``) and ``base`` (the name of the
            snapshot the diff was taken against when it is not the previous one: ``lower`` after a
            backend's preprocess passes, :mod:`etlens.passes.preprocess`).
        nodes_delta: ``len(graph) - len(previous graph)``.
        error: ``None`` or ``{"type", "message", "traceback"}`` when the stage raised.
        handle_report: debug-handle bookkeeping (see :mod:`etlens.passes.debug_handles`).
        modified: what the pass reported (``PassResult.modified``), when known.
    """

    name: str
    stage: str
    index: int
    graph: Graph
    wall_time_s: float = 0.0
    diff: dict[str, Any] = field(default_factory=_empty_diff)
    nodes_delta: int = 0
    error: dict[str, str] | None = None
    handle_report: dict[str, Any] = field(default_factory=dict)
    modified: bool | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "stage": self.stage,
            "index": self.index,
            "wall_time_s": round(float(self.wall_time_s), 6),
            "graph": self.graph.to_json(),
            "diff": self.diff,
            "nodes_delta": self.nodes_delta,
            "error": self.error,
            "handle_report": self.handle_report,
        }
        if self.modified is not None:
            out["modified"] = self.modified
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = "snapshot") -> "Snapshot":
        if not isinstance(data, dict):
            raise FormatError(f"{where}: expected an object, got {type(data).__name__}")
        try:
            diff = data.get("diff") or {}
            if not isinstance(diff, dict):
                raise FormatError(f"{where}.diff: expected an object, got {type(diff).__name__}")
            diff = {**_empty_diff(), **diff}
            if not all(isinstance(diff[k], list) for k in _DIFF_KEYS):
                raise FormatError(f"{where}.diff: 'added', 'removed', 'rewritten', 'replaced' must be lists")
            report = data.get("handle_report") or {}
            if not isinstance(report, dict) or not isinstance(report.get("lost") or [], list):
                raise FormatError(f"{where}.handle_report: expected an object whose 'lost' is a list")
            error = data.get("error")
            if error is not None and not isinstance(error, dict):
                raise FormatError(f"{where}.error: expected null or an object")
            return cls(
                name=str(data["name"]),
                stage=str(data.get("stage", "")),
                index=int(data.get("index", 0)),
                graph=Graph.from_json(data["graph"]),
                wall_time_s=float(data.get("wall_time_s") or 0.0),
                diff=diff,
                nodes_delta=int(data.get("nodes_delta") or 0),
                error={k: str(error.get(k, "")) for k in ("type", "message", "traceback")} if error else None,
                handle_report=dict(data.get("handle_report") or {}),
                modified=data.get("modified"),
            )
        except KeyError as exc:
            raise FormatError(f"{where}: missing field {exc.args[0]!r}") from exc
        except FormatError as exc:
            if str(exc).startswith(where):
                raise
            raise FormatError(f"{where}: {exc}") from exc
        except (TypeError, ValueError) as exc:
            raise FormatError(f"{where}: malformed ({exc})") from exc


@dataclass(frozen=True)
class LineageHop:
    """One step of :meth:`Trace.lineage`: a node as it was in one snapshot."""

    snapshot: str
    node: str
    target: str | None
    debug_handles: tuple[int, ...]
    stack_trace: str | None = None

    @property
    def source_line(self) -> str | None:
        """The innermost ``File "...", line N`` entry of the stack trace, with the code line."""
        if not self.stack_trace:
            return None
        lines = [ln.rstrip() for ln in self.stack_trace.strip().splitlines() if ln.strip()]
        # torch stack traces list user frames outer → inner; the first frame is the model's own line
        for i, ln in enumerate(lines):
            if ln.lstrip().startswith("File "):
                has_code = i + 1 < len(lines) and not lines[i + 1].lstrip().startswith("File ")
                code = lines[i + 1].strip() if has_code else ""
                return f"{ln.strip()}: {code}" if code else ln.strip()
        return lines[0]


@dataclass
class Trace:
    """A whole pass trace: which model, which backend, and the ordered snapshots."""

    model: str
    backend: str
    snapshots: list[Snapshot] = field(default_factory=list)
    created_by: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    # -- access ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.snapshots)

    def __iter__(self) -> Iterator[Snapshot]:
        return iter(self.snapshots)

    def __getitem__(self, key: int | str) -> Snapshot:
        if isinstance(key, int):
            return self.snapshots[key]
        for s in self.snapshots:
            if s.name == key:
                return s
        raise KeyError(f"no snapshot named {key!r}; have: {', '.join(s.name for s in self.snapshots)}")

    def graphs(self) -> dict[str, Graph]:
        return {s.name: s.graph for s in self.snapshots}

    @property
    def failed(self) -> Snapshot | None:
        """The first failed snapshot, if any."""
        return next((s for s in self.snapshots if s.error is not None), None)

    def pass_names(self) -> list[str]:
        return [s.name for s in self.snapshots if s.stage == "pass"]

    # -- lineage --------------------------------------------------------------------------
    def lineage(self, node: str, snapshot: int | str = -1) -> list[LineageHop]:
        """Follow ``node`` of ``snapshot`` back through every earlier snapshot to the export node.

        Each hop uses the recorded diff ``origin`` (renames, decompositions, fusions), then the
        node's own ``from_node`` lineage, then the same name. The last hop is the oldest version
        found; its ``source_line`` is the model line that created the node.
        """
        snaps = self.snapshots
        start = snapshot if isinstance(snapshot, int) else snaps.index(self[snapshot])
        if start < 0:
            start += len(snaps)
        hops: list[LineageHop] = []
        name: str | None = node
        index = {s.name: k for k, s in enumerate(snaps)}
        i = start
        while i >= 0:
            snap = snaps[i]
            if name is None:
                break
            n = snap.graph.get(name)
            if n is None:
                break
            hops.append(LineageHop(snap.name, n.name, n.target, n.debug_handles, n.stack_trace))
            if i == 0:
                break
            # the snapshot the diff was taken against: the previous one, unless the diff names its
            # "base" (``lower`` after a backend's preprocess passes: the whole program before them)
            i = min(index.get(str(snap.diff.get("base")), i - 1), i - 1)
            prev = snaps[i].graph
            origin = (snap.diff.get("origin") or {}).get(name)
            if origin and origin in prev:
                name = origin
            elif name in prev:
                pass
            else:
                name = next((s.name for s in n.lineage if s.name in prev), None)
                if name is None:  # provenance the pass did not record: the handle report's sources
                    lost = next((x for x in (snap.handle_report or {}).get("lost") or []
                                 if x.get("node") == n.name), None)
                    srcs = [x for x in (lost or {}).get("from") or [] if x in prev]
                    name = srcs[-1] if srcs else None  # in graph order: the op that produced the value
        return hops

    # -- JSON -----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "version": VERSION,
            "model": self.model,
            "backend": self.backend,
            "created_by": self.created_by,
        }
        if self.meta:
            out["meta"] = self.meta
        out["snapshots"] = [s.to_json() for s in self.snapshots]
        return out

    def dumps(self) -> str:
        """Byte-stable text for the same trace (no timestamps unless ``meta`` holds them)."""
        return json.dumps(self.to_json(), separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                          default=_json_default)

    def save(self, path: str | os.PathLike[str]) -> str:
        """Write the trace JSON to ``path`` (atomically: a partial file never replaces a good one)."""
        path = os.fspath(path)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(self.dumps())
        os.replace(tmp, path)
        return path

    @classmethod
    def from_json(cls, data: Any, where: str = "trace") -> "Trace":
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise FormatError(f"{where}: not an etlens trace (field 'schema' must be {SCHEMA!r})")
        if data.get("version") != VERSION:
            raise FormatError(
                f"{where}: etlens trace version {data.get('version')!r} is not supported (this etlens reads "
                f"version {VERSION}); upgrade etlens or re-create the trace with 'etlens trace'")
        raw = data.get("snapshots")
        if not isinstance(raw, list):
            raise FormatError(f"{where}: field 'snapshots' must be a list")
        snaps = [Snapshot.from_json(s, f"{where}: snapshots[{i}]") for i, s in enumerate(raw)]
        if not isinstance(data.get("meta") or {}, dict):
            raise FormatError(f"{where}: field 'meta' must be an object")
        return cls(model=str(data.get("model", "")), backend=str(data.get("backend", "")),
                   snapshots=snaps, created_by=str(data.get("created_by", "")), meta=dict(data.get("meta") or {}))

    @classmethod
    def loads(cls, text: str | bytes, where: str = "trace") -> "Trace":
        try:
            data = json.loads(text)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # RecursionError: absurd nesting
            raise FormatError(f"{where}: not valid JSON ({exc}); the file may be truncated") from exc
        return cls.from_json(data, where)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "Trace":
        from .files import read_limited

        path = os.fspath(path)
        if not os.path.exists(path):
            raise MissingDataError(f"{path}: no such file")
        return cls.loads(read_limited(path), where=path)

    def __repr__(self) -> str:
        """One line (a notebook shows the pass stepper, see :mod:`etlens.views.notebook`)."""
        failed = self.failed
        tail = f", failed at {failed.name!r}" if failed is not None else ""
        return (f"<etlens Trace {self.model!r} · {self.backend}: {len(self.snapshots)} snapshots, "
                f"{len(self.pass_names())} passes{tail}>")


def _json_default(obj: Any) -> Any:
    # node attrs may carry tuples/sets/enums from fx metadata; keep the file valid JSON
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=str)
    if isinstance(obj, tuple):
        return list(obj)
    return str(obj)
