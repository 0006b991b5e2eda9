"""Turning programs into snapshot graphs: conversion, stable ids, diffs with delegation, handles.

Private functions of :mod:`etlens.passes.tracer`. The fx → Graph conversion itself lives in
:mod:`etlens.readers.exported` (one converter for every torch object in etlens); this module only
adds what a *sequence* of graphs needs.
"""

from __future__ import annotations

import dataclasses
import traceback
from typing import Any

from ..model import Graph
from ..model.diff import diff_graphs

__all__ = ["GraphIds", "program_graph", "module_graph", "diff_json", "delegate_handles", "error_dict"]


class GraphIds:
    """Maps torch's ``from_node`` graph ids (``id(graph)``, a memory address) to 0, 1, 2 …

    Raw addresses change from run to run; renumbering them in order of appearance keeps a trace
    file byte-stable for the same model and pipeline.
    """

    def __init__(self) -> None:
        self._ids: dict[int, int] = {}

    def __call__(self, gid: int | None) -> int | None:
        if gid is None:
            return None
        out = self._ids.get(gid)
        if out is None:
            out = self._ids[gid] = len(self._ids)
        return out

    def to_json(self) -> dict[str, int]:
        """The numbering so far (raw id as text -> number), to continue it in another process."""
        return {str(k): v for k, v in self._ids.items()}

    @classmethod
    def from_json(cls, data: dict[str, int]) -> GraphIds:
        ids = cls()
        ids._ids = {int(k): int(v) for k, v in data.items()}
        return ids

    def normalize(self, graph: Graph) -> Graph:
        for node in graph:
            if node.lineage:
                node.lineage = [dataclasses.replace(s, graph_id=self(s.graph_id)) if s.graph_id is not None else s
                                for s in node.lineage]
            if node.delegate is not None and node.delegate.inner is not None:
                self.normalize(node.delegate.inner)
        return graph


def program_graph(program: Any, name: str, stage: str, ids: GraphIds) -> Graph:
    """The Graph of an ``ExportedProgram`` (or an ExecuTorch program manager's ``forward``)."""
    from ..readers.exported import graph_from_exported_program

    if not hasattr(program, "graph_signature") and hasattr(program, "exported_program"):
        program = program.exported_program()
    g = graph_from_exported_program(program, name, format="trace_snapshot", stage=stage)
    return ids.normalize(g)


def module_graph(gm: Any, name: str, stage: str, ids: GraphIds) -> Graph:
    """The Graph of a ``torch.fx.GraphModule`` (the pt2e-converted model)."""
    from ..readers.exported import graph_from_graph_module

    return ids.normalize(graph_from_graph_module(gm, name, format="trace_snapshot", stage=stage))


def _roots(graph: Graph) -> set[str]:
    out: set[str] = set()
    for n in graph:
        out.add(n.name)
        if n.lineage:
            out.add(n.lineage[-1].name)
    return out


def delegate_handles(graph: Graph) -> None:
    """A delegate call carries the union of the handles of the nodes it runs (ExecuTorch's delegate map)."""
    for node in graph.delegates():
        inner = node.delegate.inner if node.delegate is not None else None
        if inner is None or node.debug_handles:
            continue
        hs = sorted({h for n in inner for h in n.debug_handles})
        if hs:
            node.debug_handles = tuple(hs)
            node.attrs["handles_from_inner"] = True


def diff_json(old: Graph, new: Graph) -> dict[str, Any]:
    """The snapshot ``diff``: added/removed/rewritten/replaced plus ``origin`` and ``delegated``.

    ``origin`` lists only renamed ancestry (``{new: old}`` with different names) to keep files small.
    Nodes of ``old`` absorbed into a delegate of ``new`` count as *replaced*, and ``delegated`` maps
    each delegate node to them.
    """
    d = diff_graphs(old, new)
    out: dict[str, Any] = d.to_json()
    origin = {k: v for k, v in d.origin.items() if k != v}
    delegated: dict[str, list[str]] = {}
    if any(True for _ in new.delegates()):
        removed = set(out["removed"])
        for node in new.delegates():
            inner = node.delegate.inner if node.delegate is not None else None
            if inner is None:
                continue
            roots = _roots(inner)
            absorbed = [n.name for n in old
                        if n.name in removed and (n.name in roots or (n.lineage and n.lineage[-1].name in roots))]
            if absorbed:
                delegated[node.name] = absorbed
                removed.difference_update(absorbed)
        if delegated:
            moved = {n for names in delegated.values() for n in names}
            out["removed"] = [n for n in out["removed"] if n not in moved]
            out["replaced"] = out["replaced"] + [n for n in (x.name for x in old) if n in moved]
    if origin:
        out["origin"] = origin
    if delegated:
        out["delegated"] = delegated
    return out


def error_dict(exc: BaseException, message: str) -> dict[str, str]:
    """``{"type", "message", "traceback"}`` for a snapshot; the traceback includes the chained cause."""
    return {
        "type": type(exc).__name__,
        "message": message,
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }
