"""Any program-like input resolved once to an etlens graph plus the fx objects behind it (files cached).

:func:`resolve_program` turns what :func:`etlens.analysis.delegation.get_delegation_info` and the
Model Explorer view accept (a lowered ``GraphModule``, an ``ExportedProgram``, an
``EdgeProgramManager``, an etlens ``Graph`` or artifact — a parsed ETRecord stands for the lowered
program it describes —, or the path of a ``.etrecord`` / ``.pte`` / ``.pt2`` / pass trace) into a
:class:`ResolvedProgram`. This is where such paths are read (the readers' registry), once per
(path, size, mtime, method, view) in :data:`default_resolver`'s cache; analyses and views get the
resolved object.

Example::

    from etlens.readers.program import resolve_program

    res = resolve_program("model.etrecord", pte="model.pte")
    res.graph.delegates(), res.source
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import MissingDataError, UnsupportedFormatError
from ..model import Graph

__all__ = ["ResolvedProgram", "ProgramResolver", "resolve_program", "default_resolver", "is_graph_module"]


# -- resolving any input to (Graph, fx objects) ----------------------------------------------------
@dataclass
class ResolvedProgram:
    """Any program-like input, resolved once: the etlens graph plus the fx objects behind it (if any)."""

    graph: Graph
    source: str
    notes: list[str] = field(default_factory=list)
    graph_module: Any = None
    exported_program: Any = None
    #: loads the program a partitioner can be asked about (ETRecord: the recorded edge program)
    load_program: Any = None


def is_graph_module(obj: Any) -> bool:
    return hasattr(obj, "graph") and hasattr(obj.graph, "nodes") and hasattr(obj, "named_modules")


class _LRU:
    """A small least-recently-inserted cache (oldest entry dropped when full)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: dict[tuple[Any, ...], ResolvedProgram] = {}

    def get(self, key: tuple[Any, ...]) -> ResolvedProgram | None:
        return self._items.get(key)

    def put(self, key: tuple[Any, ...], value: ResolvedProgram) -> None:
        if len(self._items) >= self.size:
            self._items.pop(next(iter(self._items)))
        self._items[key] = value

    def clear(self) -> None:
        self._items.clear()


class ProgramResolver:
    """Turns any input :func:`get_delegation_info` accepts into a :class:`ResolvedProgram`.

    Files are cached by (path, size, mtime, method, view): rebuilding an ETRecord program costs
    ~1 s, and the CLI, the report and Model Explorer export often ask for the same file several
    times. The cache belongs to the resolver; :data:`default_resolver` is the one the module-level
    functions share (``default_resolver.clear()`` forgets every file).
    """

    def __init__(self, cache_size: int = 8) -> None:
        self._cache = _LRU(cache_size)

    def clear(self) -> None:
        """Forget every cached file."""
        self._cache.clear()

    def resolve(self, obj: Any, method: str | None = None, etrecord_view: str = "lowered",
                pte: str | None = None) -> ResolvedProgram:
        """Resolve a program object, an etlens ``Graph`` / artifact, or a path.

        ``pte`` (with an ETRecord path): see :func:`get_delegation_info`.
        """
        from .exported import graph_from_exported_program, graph_from_graph_module

        if isinstance(obj, Graph):
            return ResolvedProgram(obj, f"graph {obj.name!r}")
        if isinstance(obj, (str, os.PathLike)):
            return self._resolve_path(os.fspath(obj), method, etrecord_view, pte)
        kind = type(obj).__name__
        if kind in ("EdgeProgramManager", "ExecutorchProgramManager") and hasattr(obj, "exported_program"):
            methods = list(getattr(obj, "methods", []) or ["forward"])
            m = method or ("forward" if "forward" in methods else methods[0])
            if m not in methods:
                raise MissingDataError(f"{kind}: no method {m!r} (methods: {', '.join(methods)})")
            ep = obj.exported_program(m)
            return ResolvedProgram(graph_from_exported_program(ep, m, format=kind), f"{kind} method {m!r}",
                                   graph_module=ep.graph_module, exported_program=ep)
        if hasattr(obj, "graph_module") and hasattr(obj, "graph_signature"):
            return ResolvedProgram(graph_from_exported_program(obj, "program"), "ExportedProgram",
                                   graph_module=obj.graph_module, exported_program=obj)
        if is_graph_module(obj):
            return ResolvedProgram(graph_from_graph_module(obj, "graph_module"), "GraphModule", graph_module=obj)
        if getattr(obj, "format", None) == "etrecord" and hasattr(obj, "load_exported_program"):
            return _resolve_etrecord(obj, method, etrecord_view, pte)  # a parsed ETRecord: its lowered program
        if hasattr(obj, "graphs") and hasattr(obj, "format"):  # an etlens Artifact
            name = obj.graph_key(method)
            g = obj.graphs()[name]
            return ResolvedProgram(g, f"{obj.format} {getattr(obj, 'path', '') or ''} ({name})".strip())
        raise UnsupportedFormatError(
            f"get_delegation_info: cannot read a {type(obj).__module__}.{kind}; pass a lowered GraphModule, "
            "an ExportedProgram, an EdgeProgramManager, an etlens Graph or the path of a .etrecord/.pte/.pt2")

    def _resolve_path(self, path: str, method: str | None, etrecord_view: str,
                      pte: str | None = None) -> ResolvedProgram:
        try:
            st = os.stat(path)
            pst = os.stat(pte) if pte else None
            key: tuple[Any, ...] | None = (os.path.abspath(path), st.st_size, st.st_mtime_ns, method, etrecord_view,
                                 os.path.abspath(pte) if pte else None, pst.st_mtime_ns if pst else None)
        except OSError:
            key = None
        res = self._cache.get(key) if key is not None else None
        if res is None:
            res = _resolve_path_uncached(path, method, etrecord_view, pte)
            if key is not None:
                self._cache.put(key, res)
        # a copy: callers may append notes
        return ResolvedProgram(res.graph, res.source, list(res.notes), load_program=res.load_program)


#: the resolver the module-level functions share (its cache spans the CLI, report and viewer calls)
default_resolver = ProgramResolver()


def resolve_program(obj: Any, method: str | None = None, etrecord_view: str = "lowered",
                    pte: str | None = None) -> ResolvedProgram:
    """Resolve ``obj`` (program, graph, artifact or path) to its graph and fx objects (cached for files)."""
    return default_resolver.resolve(obj, method, etrecord_view, pte)


def _kernel_ops(pte: str, method: str) -> dict[int, str]:
    """``instruction -> operator`` (``aten.expand_copy``) of every CPU kernel call of ``method`` in a ``.pte``."""
    graphs = (pte if hasattr(pte, "graphs") else _read(pte)).graphs()
    graph = graphs.get(method) or next(iter(graphs.values()), None)
    out: dict[int, str] = {}
    for node in graph or []:
        instr = node.attrs.get("instruction")
        if node.kind == "op" and instr is not None and node.attrs.get("chain", 0) == 0 and node.target:
            t = node.target.replace("::", ".")
            out[int(instr)] = t.rsplit(".", 1)[0] if t.count(".") >= 2 else t
    return out


def _read(path: str) -> Any:
    from .registry import read

    return read(path)


def _resolve_etrecord(record: Any, method: str | None, etrecord_view: str, pte: Any = None) -> ResolvedProgram:
    """An ETRecord (parsed) as the lowered program it describes; ``pte``: a path or a parsed ``.pte``."""
    from .etrecord_lowered import etrecord_graph

    kernels = _kernel_ops(pte, method or "forward") if pte is not None and etrecord_view == "lowered" else None
    graph, source, notes = etrecord_graph(record, method or "forward", etrecord_view, kernels)
    if kernels is not None:
        source += f"; CPU kernels named by {getattr(pte, 'path', None) or pte}"
    stage = f"edge_dialect_exported_program/{method or 'forward'}"
    return ResolvedProgram(graph, source, notes, load_program=lambda: record.load_exported_program(stage))


def _resolve_path_uncached(path: str, method: str | None, etrecord_view: str,
                           pte: str | None = None) -> ResolvedProgram:
    from .registry import sniff

    spec = sniff(path)
    if spec.format == "etrecord":
        return _resolve_etrecord(_read(path), method, etrecord_view, pte)
    if spec.format == "etdump":
        raise UnsupportedFormatError(
            f"{path}: an ETDump holds runtime events, not the program; pass the .pte or .etrecord "
            "it was recorded with")
    art = _read(path)
    graphs = art.graphs()
    if spec.format in ("trace",):
        if not graphs:
            raise MissingDataError(f"{path}: the pass trace has no snapshots")
        name = list(graphs)[-1]
        return ResolvedProgram(graphs[name], f"pass trace {path} (last snapshot {name!r})")
    name = art.graph_key(method)
    g = graphs[name]
    notes = []
    if spec.format == "pt2":
        notes.append("a .pt2 is the torch.export program before lowering: it never contains delegates; "
                     "pass the .etrecord or .pte of the lowered program to see what a backend took")
    return ResolvedProgram(g, f"{spec.format} {path} ({name})", notes)
