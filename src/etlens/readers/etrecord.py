"""Read an ExecuTorch ETRecord (``.etrecord``) without ExecuTorch.

An ETRecord is an uncompressed zip written by ``generate_etrecord=True``. It holds the programs
of each compilation stage in torch.export's JSON schema, the maps that tie the runtime back to
them, and optionally the inputs and outputs of a reference run:

=====================================  ==========================================================
entry                                  what it is
=====================================  ==========================================================
``ETRECORD_V0``                        marker (empty)
``exported_program``                   the ATen program from ``torch.export`` (+ ``_state_dict``,
                                       ``_constants``, ``_example_inputs`` entries)
``edge_dialect_exported_program/<m>``  the edge-dialect program of method ``<m>`` (same 4 entries)
``<module>/<method>``                  extra programs the user recorded (the "graph map")
``debug_handle_map``                   JSON ``{method: {instruction id: handle or [handles]}}``
``delegate_map``                       JSON ``{method: {instruction id: {name, delegate_map}}}``
``instruction_id_to_num_outs_map``     JSON ``{method: {instruction id: number of outputs}}``
``export_graph_id``                    JSON int: ``id()`` of the exported graph (lineage roots)
``representative_inputs``              ``torch.save``-d list of input tuples
``reference_outputs``                  ``torch.save``-d ``{method: [outputs]}``
=====================================  ==========================================================

Example::

    from etlens.readers.etrecord import read
    rec = read("model.etrecord")
    rec.stages                         # ['exported_program', 'edge_dialect_exported_program/forward']
    rec.graphs()["exported_program"]   # an etlens Graph with debug handles, lineage, module stacks
    rec.debug_handle_map["forward"]    # {0: [1, 2], 1: [3], ...}  (instruction id -> handles)
    ep = rec.load_exported_program("exported_program")
    ep.module()(*rec.representative_inputs[0])   # runs the reference program

Tensors are only ever loaded with ``torch.load(weights_only=True)``: an ETRecord from somewhere
else cannot run code on your machine through etlens.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any, Iterable

from ..errors import EtlensError, FormatError, MissingDataError, dependency_error, first_line, missing_dependency
from ..model import Graph
from .base import Artifact
from ._jsonload import loads
from ._zipsafe import SafeZip

__all__ = ["ETRecord", "read", "IDENTIFIER", "EXPORTED_PROGRAM", "EDGE_PREFIX"]

IDENTIFIER = "ETRECORD_V0"
EXPORTED_PROGRAM = "exported_program"
EDGE_PROGRAM = "edge_dialect_exported_program"
EDGE_PREFIX = EDGE_PROGRAM + "/"
_SUFFIXES = ("_state_dict", "_constants", "_example_inputs")
_MAPS = ("debug_handle_map", "delegate_map", "instruction_id_to_num_outs_map")
_RESERVED = {IDENTIFIER, "export_graph_id", "et_dialect_graph_module", "reference_outputs",
             "representative_inputs", *_MAPS}
_HINT = "regenerate it with to_edge_transform_and_lower(..., generate_etrecord=True) and etrecord.save(path)"
#: JSON entries are small; refuse absurd ones before parsing them.
_MAX_JSON = 1 << 30


def _int_key(k: Any) -> Any:
    if isinstance(k, str) and (k.isdigit() or (k.startswith("-") and k[1:].isdigit())):
        return int(k)
    return k


def _as_list(v: Any) -> list[int]:
    if isinstance(v, list):
        return [int(x) for x in v]
    if isinstance(v, (tuple, set)):
        return [int(x) for x in v]
    return [int(v)]


class ETRecord(Artifact):
    """A parsed ETRecord. Construct with :func:`read`; programs are rebuilt lazily on first use.

    Attributes:
        stages: program names in file order (``exported_program`` first, then edge programs,
            then graph-map entries).
        debug_handle_map: ``{method: {instruction id: [debug handles]}}`` (int keys, list values).
        delegate_map: ``{method: {instruction id: {"name": backend, "delegate_map": {id: [handles]}}}}``
            (int keys restored where they were ints; otherwise as ExecuTorch stores it).
        instruction_id_to_num_outs_map: ``{method: {instruction id: number of outputs}}``.
        export_graph_id: ``id()`` of the exported graph when recorded, else ``None``.
        entries: every zip entry name.
    """

    def __init__(self, path: str) -> None:
        super().__init__(format="etrecord", path=path)
        self.stages: list[str] = []
        self.entries: list[str] = []
        self.debug_handle_map: dict[str, dict[int, list[int]]] = {}
        self.delegate_map: dict[str, dict[int, dict]] = {}
        self.instruction_id_to_num_outs_map: dict[str, dict[int, int]] = {}
        self.export_graph_id: int | None = None
        self._raw_maps: dict[str, Any] = {}
        self._programs: dict[str, Any] = {}  # stage -> ExportedProgram (cache)
        self._stage_graphs: dict[str, Graph] = {}
        self._tensors: dict[str, Any] = {}
        self._schema_versions: dict[str, str] = {}
        self._nodes: dict[str, Any] = {}  # stage -> ProgramNodes (see program_nodes)

    # -- loading ----------------------------------------------------------------------------
    def _zip(self) -> SafeZip:
        return SafeZip(self.path, what="ETRecord", hint=_HINT)  # type: ignore[arg-type]  # set by the loaders

    def _read_json(self, z: SafeZip, name: str) -> Any:
        data = z.read(name, limit=_MAX_JSON)
        try:
            return loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise FormatError(f"{self.path}: entry {name!r} is not valid JSON ({exc}); the ETRecord is corrupt; "
                              f"{_HINT}") from exc

    def _load_index(self) -> None:
        with self._zip() as z:
            names = z.names()
            self.entries = names
            if IDENTIFIER not in z:
                raise FormatError(f"{self.path}: zip has no {IDENTIFIER!r} entry, so it is not an ETRecord "
                                  f"(entries: {', '.join(names[:5]) or 'none'}); {_HINT}")
            stages: list[str] = []
            for name in names:
                if name in _RESERVED or name.endswith(_SUFFIXES):
                    continue
                stages.append(name)
            # ExecuTorch's order: ATen program, edge programs, then the graph map.
            order = {EXPORTED_PROGRAM: 0}
            stages.sort(key=lambda s: order.get(s, 1 if s == EDGE_PROGRAM or s.startswith(EDGE_PREFIX) else 2))
            for stage in stages:
                for suffix in _SUFFIXES:
                    if stage + suffix not in z:
                        raise MissingDataError(f"{self.path}: program {stage!r} has no {stage + suffix!r} entry; "
                                               f"the ETRecord is incomplete; {_HINT}")
            self.stages = [self._stage_name(s) for s in stages]
            self._entry_of = {self._stage_name(s): s for s in stages}
            for name in _MAPS:
                if name in z:
                    raw = self._read_json(z, name)
                    if not isinstance(raw, dict):
                        raise FormatError(f"{self.path}: entry {name!r} should be a JSON object "
                                          f"{{method: {{...}}}}, got {type(raw).__name__}; {_HINT}")
                    self._raw_maps[name] = raw
            if "export_graph_id" in z:
                gid = self._read_json(z, "export_graph_id")
                if gid is not None and not isinstance(gid, int):
                    raise FormatError(f"{self.path}: entry 'export_graph_id' should be an integer, got {gid!r}")
                self.export_graph_id = gid
        self._normalise_maps()

    @staticmethod
    def _stage_name(entry: str) -> str:
        # the old single-method layout stored the edge program without a method suffix
        return EDGE_PREFIX + "forward" if entry == EDGE_PROGRAM else entry

    def _normalise_maps(self) -> None:
        where = self.path
        try:
            for method, table in self._raw_maps.get("debug_handle_map", {}).items():
                self.debug_handle_map[method] = {int(k): _as_list(v) for k, v in table.items()}
            for method, table in self._raw_maps.get("instruction_id_to_num_outs_map", {}).items():
                self.instruction_id_to_num_outs_map[method] = {
                    int(k): (v if isinstance(v, int) else _as_list(v))  # type: ignore[misc]  # ints or lists
                    for k, v in table.items()}
            for method, table in self._raw_maps.get("delegate_map", {}).items():
                out: dict[int, dict] = {}
                for k, v in table.items():
                    entry = dict(v) if isinstance(v, dict) else v
                    if isinstance(entry, dict) and isinstance(entry.get("delegate_map"), dict):
                        entry["delegate_map"] = {_int_key(dk): (_as_list(dv) if isinstance(dv, (int, list)) else dv)
                                                 for dk, dv in entry["delegate_map"].items()}
                    out[_int_key(k)] = entry
                self.delegate_map[method] = out
        except (TypeError, ValueError, AttributeError) as exc:
            raise FormatError(f"{where}: a debug/delegate map has unexpected contents ({exc}); {_HINT}") from exc

    # -- raw pieces ---------------------------------------------------------------------------
    def _entry(self, stage: str) -> str:
        entry = getattr(self, "_entry_of", {}).get(stage)
        if entry is None:
            raise MissingDataError(f"{self.path}: no program {stage!r} in this ETRecord "
                                   f"(stages: {', '.join(self.stages) or 'none'})")
        return entry

    def program_json(self, stage: str) -> dict[str, Any]:
        """The stored torch.export-schema JSON of ``stage`` (a fresh dict each call)."""
        entry = self._entry(stage)
        with self._zip() as z:
            doc = self._read_json(z, entry)
        if not isinstance(doc, dict) or "graph_module" not in doc:
            raise FormatError(f"{self.path}: entry {entry!r} is not a serialized ExportedProgram "
                              f"(no 'graph_module'); {_HINT}")
        v = doc.get("schema_version") or {}
        if not isinstance(v, dict):
            raise FormatError(f"{self.path}: entry {entry!r} has a malformed 'schema_version' ({str(v)[:80]!r}); "
                              f"{_HINT}")
        self._schema_versions[stage] = f"{v.get('major')}.{v.get('minor')}"
        return doc

    def program_nodes(self, stage: str) -> Any:
        """The nodes of ``stage`` as flat columns (:class:`~etlens.readers.program_nodes.ProgramNodes`),
        parsed once and kept: a few strings per node instead of the whole JSON tree."""
        hit = self._nodes.get(stage)
        if hit is None:
            from .program_nodes import ProgramNodes

            hit = self._nodes[stage] = ProgramNodes.from_json(self.program_json(stage))
        return hit

    def _load_tensor_entry(self, z: SafeZip, name: str) -> Any:
        from ._torch_compat import load_tensors

        data = z.read(name)
        try:
            return load_tensors(data)
        except ModuleNotFoundError as exc:
            if missing_dependency(exc):
                raise dependency_error(missing_dependency(exc) or "torch",
                                       f"{self.path}: reading entry {name!r} (tensors)") from exc
            raise
        except Exception as exc:
            raise FormatError(
                f"{self.path}: entry {name!r} holds something other than plain tensors "
                f"(torch.load with weights_only=True refused it: {first_line(exc, 200)}); etlens never "
                f"unpickles arbitrary objects; {_HINT}") from exc

    def stage_tensors(self, stage: str, decode: Any = None) -> tuple[Any, Any]:
        """The state dict and the constants of program ``stage``, read in one pass over the zip.

        ``decode(data: bytes)`` (optional) is tried first on each entry, e.g. a faster restricted
        unpickler; when it raises, the entry is loaded with ``torch.load(weights_only=True)``.
        """
        entry = self._entry(stage)
        out = []
        with self._zip() as z:
            for suffix in ("_state_dict", "_constants"):
                name = entry + suffix
                if decode is not None:
                    try:
                        out.append(decode(z.read(name)))
                        continue
                    except Exception:  # noqa: BLE001 - anything unusual: let torch's safe loader decide
                        pass
                out.append(self._load_tensor_entry(z, name))
        return out[0], out[1]

    def _optional_tensors(self, name: str) -> Any:
        if name not in self._tensors:
            with self._zip() as z:
                self._tensors[name] = self._load_tensor_entry(z, name) if name in z else None
        return self._tensors[name]

    @property
    def representative_inputs(self) -> list[Any] | None:
        """Inputs recorded for calibration/comparison: a list of input tuples, or ``None``."""
        val = self._optional_tensors("representative_inputs")
        if val is None:
            return None
        if isinstance(val, tuple):  # a single input tuple stored directly
            return [val]
        return [tuple(x) if isinstance(x, (list, tuple)) else (x,) for x in val]

    @property
    def reference_outputs(self) -> Any:
        """Outputs of a reference run (``{method: [outputs]}`` as ExecuTorch stores them), or ``None``."""
        return self._optional_tensors("reference_outputs")

    # -- programs -----------------------------------------------------------------------------
    def load_exported_program(self, stage: str = EXPORTED_PROGRAM) -> Any:
        """A runnable ``torch.export.ExportedProgram`` for ``stage`` (cached; do not mutate it).

        Uses torch's deserializer with ExecuTorch's schema version accepted and edge-dialect ops
        mapped to their ATen equivalents (see :mod:`etlens.readers._torch_compat`); node metadata
        (``debug_handle``, ``from_node``, ``stack_trace``, ``nn_module_stack``) is kept. Works for
        the ATen program, edge programs and graph-map programs without delegate calls; programs
        that call lowered backend modules are rebuilt with ExecuTorch's deserializer when it is
        installed, else :class:`MissingDataError` says so.
        """
        if stage in self._programs:
            return self._programs[stage]
        entry = self._entry(stage)
        from ._torch_compat import deserialize_program, has_delegate_calls

        doc = self.program_json(stage)
        with self._zip() as z:
            state = self._load_tensor_entry(z, entry + "_state_dict")
            consts = self._load_tensor_entry(z, entry + "_constants")
            inputs = self._load_tensor_entry(z, entry + "_example_inputs")
        delegated = has_delegate_calls(doc)
        ours_error: Exception | None = None
        if not delegated:
            try:
                ep = deserialize_program(doc, state, consts, inputs)
                self._programs[stage] = ep
                return ep
            except EtlensError:
                raise
            except Exception as exc:  # torch refused something: try ExecuTorch's deserializer
                ours_error = exc
        ep = self._executorch_deserialize(stage, self.program_json(stage), state, consts, inputs, ours_error)
        self._programs[stage] = ep
        return ep

    def _executorch_deserialize(self, stage: str, doc: dict[str, Any], state: Any, consts: Any, inputs: Any,
                                ours_error: Exception | None) -> Any:
        why = (f"torch's deserializer failed: {first_line(ours_error)}" if ours_error
               else "it calls lowered backend modules (executorch_call_delegate)")
        try:
            from executorch.exir.serde import serialize as et_serde  # optional dependency
        except Exception as exc:
            raise MissingDataError(
                f"{self.path}: cannot rebuild program {stage!r}: {why}; install the executorch extra "
                f"(pip install etlens[executorch]) to rebuild it, or use the stage's Graph "
                f"(ETRecord.graphs()) which does not need a runnable program") from exc
        try:
            from ._torch_compat import to_schema

            # ExecuTorch's deserializer wants its own copy of the schema classes
            serialized = to_schema(et_serde.schema.ExportedProgram, doc, et_serde.schema)
            if not isinstance(inputs, tuple):
                inputs = None
            return et_serde.ExportedProgramDeserializer().deserialize(serialized, state, consts, inputs)
        except Exception as exc:
            raise FormatError(f"{self.path}: cannot rebuild program {stage!r} ({why}; ExecuTorch's deserializer "
                              f"failed too: {first_line(exc)})") from exc

    # -- graphs -------------------------------------------------------------------------------
    def graph(self, method: str | None = None, stage: str | None = None, *, prefer: Iterable[str] = (),
              rebuild: bool = False) -> Graph:
        """The etlens :class:`Graph` of one stage (built on first use, then cached).

        ``record.graph("exported_program")`` names a stage, as it always has; ``graph("forward")``
        finds the one stage ending in ``/forward``; ``graph(stage=…, method=…)`` and ``graph()``
        pick as :meth:`Artifact.graph` does. An unknown stage raises :class:`MissingDataError`
        listing the stages.

        By default the graph is built straight from the stored JSON (fast, no program rebuild,
        works for programs with delegate calls without ExecuTorch). ``rebuild=True`` converts the
        runnable program of :meth:`load_exported_program` instead; both give the same nodes,
        targets, edges and metadata (the tests check it).
        """
        if stage is None and method is not None:
            hits = [s for s in self.stages if s.endswith("/" + method)]
            stage = hits[0] if method not in self.stages and len(hits) == 1 else method
        else:
            stage = self._pick_key(list(self.stages), method, stage, prefer)
        if rebuild:
            from ._fx import graph_from_fx

            ep = self.load_exported_program(stage)
            return graph_from_fx(ep.graph_module, stage, ep.graph_signature, self._graph_meta(stage))
        if stage not in self._stage_graphs:
            from ._export_json import graph_from_program_json

            doc = self.program_json(stage)
            try:
                graph = graph_from_program_json(doc, stage, self._graph_meta(stage))
            except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
                raise FormatError(f"{self.path}: program {stage!r} does not follow the torch.export schema "
                                  f"({type(exc).__name__}: {first_line(exc)}); {_HINT}") from exc
            self._stage_graphs[stage] = graph
        return self._stage_graphs[stage]

    def _graph_meta(self, stage: str) -> dict[str, Any]:
        method = stage.rsplit("/", 1)[1] if "/" in stage else "forward"
        if stage not in self._schema_versions:
            self.program_json(stage)
        return {"format": "etrecord", "stage": stage, "method": method,
                "dialect": "aten" if stage == EXPORTED_PROGRAM else (
                    "edge" if stage.startswith(EDGE_PREFIX) else "graph_map"),
                "schema_version": self._schema_versions.get(stage)}

    def graphs(self) -> dict[str, Graph]:
        """``{stage: Graph}`` for every program in the record, in :attr:`stages` order."""
        return {stage: self.graph(stage) for stage in self.stages}

    @property
    def edge_stages(self) -> list[str]:
        return [s for s in self.stages if s.startswith(EDGE_PREFIX)]

    @property
    def graph_map_stages(self) -> list[str]:
        return [s for s in self.stages if s != EXPORTED_PROGRAM and not s.startswith(EDGE_PREFIX)]

    # -- ExecuTorch-compatible views (``executorch.devtools.etrecord.ETRecord`` attribute names) --------
    @property
    def exported_program(self) -> Any:
        return self.load_exported_program(EXPORTED_PROGRAM) if EXPORTED_PROGRAM in self.stages else None

    @property
    def edge_dialect_program(self) -> Any:
        """The edge program (a dict ``{method: program}`` when there are several methods)."""
        stages = self.edge_stages
        if not stages:
            return None
        if len(stages) == 1:
            return self.load_exported_program(stages[0])
        return {s[len(EDGE_PREFIX):]: self.load_exported_program(s) for s in stages}

    @property
    def graph_map(self) -> dict[str, Any]:
        return {s: self.load_exported_program(s) for s in self.graph_map_stages}

    @property
    def _debug_handle_map(self) -> Any:  # as ExecuTorch keeps it: string keys, int or list values
        return self._raw_maps.get("debug_handle_map")

    @property
    def _delegate_map(self) -> Any:
        return self._raw_maps.get("delegate_map")

    @property
    def _instruction_id_to_num_outs_map(self) -> Any:
        return self._raw_maps.get("instruction_id_to_num_outs_map")

    @property
    def _representative_inputs(self) -> Any:
        return self._optional_tensors("representative_inputs")

    @property
    def _reference_outputs(self) -> Any:
        return self._optional_tensors("reference_outputs")

    # -- summary ------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """What ``etlens info`` prints: stages with node counts, operators, handle coverage, maps."""
        out = super().summary()
        out["stages"] = list(self.stages)
        for stage, info in out["graphs"].items():
            info["schema_version"] = self._schema_versions.get(stage)
        out["maps"] = {
            "debug_handle_map": {m: len(t) for m, t in self.debug_handle_map.items()},
            "delegate_map": {m: len(t) for m, t in self.delegate_map.items()},
            "instruction_id_to_num_outs_map": {m: len(t) for m, t in self.instruction_id_to_num_outs_map.items()},
        }
        backends = Counter(str(e.get("name")) for t in self.delegate_map.values() for e in t.values()
                           if isinstance(e, dict))
        out["delegates"] = dict(backends)
        out["export_graph_id"] = self.export_graph_id
        with self._zip() as z:
            out["has_representative_inputs"] = "representative_inputs" in z
            out["has_reference_outputs"] = "reference_outputs" in z
        return out

    def __repr__(self) -> str:
        return f"ETRecord({self.path!r}, stages={self.stages})"


def read(path: str | os.PathLike[str]) -> ETRecord:
    """Open an ETRecord: check the zip, list its stages, load the debug/delegate maps.

    Programs, graphs and tensors are loaded lazily on first access. Raises
    :class:`~etlens.errors.FormatError` / :class:`~etlens.errors.MissingDataError` naming the file
    and the entry for anything that is not a well-formed ETRecord.
    """
    record = ETRecord(os.fspath(path))
    record._load_index()
    return record
