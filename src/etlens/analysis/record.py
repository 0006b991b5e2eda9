"""One interface for "an ETRecord", whether etlens read it or ExecuTorch built it.

Analyses accept both an etlens :class:`~etlens.readers.etrecord.ETRecord` and an ExecuTorch
``executorch.devtools.etrecord.ETRecord``. Both have the attributes of :class:`ETRecordLike`
(ExecuTorch's own spelling: string-keyed ``_debug_handle_map`` …, programs as properties); the
etlens one adds :class:`EtlensRecordLike` (stored program JSON, stage names, lazy program loading)
which the fast paths use. :class:`Record` is the adapter built once around either: the analyses
ask it, and it is the one place that tells the two kinds apart.

Example::

    rec = as_record(etlens.readers.etrecord.read("model.etrecord"))   # or an ExecuTorch ETRecord
    rec.stages()                      # ['exported_program', 'edge_dialect_exported_program/forward']
    handle_map, delegate_map, num_outs = rec.raw_maps("forward")
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

__all__ = ["ETRecordLike", "EtlensRecordLike", "Record", "as_record",
           "EXPORTED_PROGRAM", "EDGE_PROGRAM"]

EXPORTED_PROGRAM = "exported_program"
EDGE_PROGRAM = "edge_dialect_exported_program"


class ETRecordLike(Protocol):
    """What both ETRecord kinds have (ExecuTorch's attribute names and shapes)."""

    exported_program: Any  # the ATen ExportedProgram, or None
    edge_dialect_program: Any  # an ExportedProgram, or {method: ExportedProgram}
    graph_map: Any  # {name: ExportedProgram} or None
    _debug_handle_map: Any  # {method: {"instruction id": handle(s)}}
    _delegate_map: Any  # {method: {"instruction id": {"name": backend, "delegate_map": {...}}}}
    _instruction_id_to_num_outs_map: Any  # {method: {"instruction id": n}}
    _representative_inputs: Any
    _reference_outputs: Any


class EtlensRecordLike(ETRecordLike, Protocol):
    """The etlens ETRecord's extras: stored program JSON and lazily loaded stages."""

    path: str
    stages: list[str]
    entries: list[str]
    export_graph_id: int | None

    def program_json(self, stage: str) -> dict: ...

    def load_exported_program(self, stage: str = EXPORTED_PROGRAM) -> Any: ...

    def stage_tensors(self, stage: str, decode: Any = None) -> tuple[Any, Any]: ...


def _probe(obj: Any, name: str) -> Any:
    """``obj.name`` if the class defines it (without calling a property), else ``None``."""
    return getattr(obj, name) if hasattr(type(obj), name) or name in getattr(obj, "__dict__", {}) else None


class Record:
    """An ETRecord of either kind behind one interface (build with :func:`as_record`).

    ``raw`` is the record as given. ``etlens`` is the record when it is an etlens one (it has the
    stored program JSON), else ``None``: code that takes a fast path asks ``rec.etlens``.
    """

    def __init__(self, raw: ETRecordLike) -> None:
        self.raw = raw
        self.etlens: EtlensRecordLike | None = raw if callable(_probe(raw, "program_json")) else None  # type: ignore
        self.path: str = _probe(raw, "path") or "the ETRecord"
        self.export_graph_id: int | None = _probe(raw, "export_graph_id")

    # -- debug maps (string keys, as stored) ----------------------------------------------------
    def handle_maps(self) -> dict:
        """``{method: {"instruction id": debug handle(s)}}`` (empty when the record has none)."""
        return self.raw._debug_handle_map or {}

    def raw_maps(self, method: str = "forward") -> tuple[dict | None, dict | None, dict | None]:
        """The raw ``(debug_handle_map, delegate_map, num_outs_map)`` of ``method``."""
        dm = self.raw._delegate_map
        nom = self.raw._instruction_id_to_num_outs_map or {}
        return self.handle_maps().get(method), (dm.get(method) if dm is not None else None), nom.get(method)

    # -- programs -----------------------------------------------------------------------------------
    def stages(self) -> list[str]:
        """Program names: ``exported_program``, ``edge_dialect_exported_program/<method>``, graph-map names."""
        if self.etlens is not None:
            return list(self.etlens.stages)
        out = []
        if self.raw.exported_program is not None:
            out.append(EXPORTED_PROGRAM)
        if self.raw.edge_dialect_program is not None:
            out.append(EDGE_PROGRAM + "/forward")
        out.extend((self.raw.graph_map or {}).keys())
        return out

    def load_program(self, stage: str) -> Any:
        """The ``ExportedProgram`` of ``stage`` (deserialized on demand for etlens records)."""
        if self.etlens is not None:
            return self.etlens.load_exported_program(stage)
        if stage == EXPORTED_PROGRAM:
            return self.raw.exported_program
        if stage.startswith(EDGE_PROGRAM):
            edge = self.raw.edge_dialect_program
            if isinstance(edge, dict):
                return edge.get(stage.split("/", 1)[1] if "/" in stage else "forward")
            return edge
        return (self.raw.graph_map or {}).get(stage)

    def edge_program(self, method: str = "forward", graph: str | None = None) -> Any:
        """The edge program of ``method`` (or graph-map entry ``graph``) as an ``ExportedProgram``."""
        ep = self.raw.edge_dialect_program if graph is None else (self.raw.graph_map or {}).get(graph)
        return ep.get(method) if isinstance(ep, dict) else ep

    # -- tensors ------------------------------------------------------------------------------------
    def representative_inputs(self) -> Any:
        """The recorded inputs (a list of input tuples, or what ExecuTorch stored), or ``None``."""
        if self.etlens is not None:
            return self.etlens.representative_inputs  # type: ignore[attr-defined]
        return self.raw._representative_inputs

    def may_have_reference_outputs(self) -> bool:
        """False when the record certainly has no reference outputs (checked without loading them)."""
        entries = _probe(self.raw, "entries")
        return entries is None or "reference_outputs" in entries

    def reference_outputs(self) -> Any:
        """``{method: [outputs]}`` as ExecuTorch stores them, or ``None`` (may load tensors)."""
        return self.raw._reference_outputs


def as_record(record: Any) -> Record:
    """The :class:`Record` adapter of ``record`` (returned as is when it already is one)."""
    return record if isinstance(record, Record) else Record(record)


#: a function that loads a program by stage name (see :meth:`Record.load_program`)
ProgramLoader = Callable[[str], Any]
