"""The compatibility facade: the public functions that take *files* or toolchain objects.

Everything below the facade takes model objects (:class:`etlens.model.Graph`, traces, analysis
results); the functions here open files or in-memory ExecuTorch programs, turn them into those
objects with :mod:`etlens.readers`, and hand them on. ``etlens.<name>`` re-exports them.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

from .errors import EtlensError
from .model import Graph
from .views.html import generate_html

__all__ = [
    "extract_from_pte",
    "extract_from_etrecord",
    "extract_from_exported_program",
    "visualize_edge_manager",
]


# --- viewer compatibility functions ---------------------------------------------------------------
def _pick(graphs: dict[str, Graph], prefer: Iterable[str], path: str, stage: str | None) -> Graph:
    if not graphs:
        raise EtlensError(f"{path}: contains no graph to show")
    if stage is not None:
        if stage in graphs:
            return graphs[stage]
        raise EtlensError(f"{path}: no stage/method {stage!r}; available: {', '.join(graphs)}")
    for name in prefer:
        for key, g in graphs.items():
            if key == name or key.endswith("/" + name):
                return g
    return next(iter(graphs.values()))


def extract_from_pte(pte_path: str | os.PathLike, method: str | None = None) -> Graph:
    """The graph of ``method`` (default ``forward``) in a ``.pte`` program."""
    from .readers import read

    graphs = read(pte_path).graphs()
    return _pick(graphs, ("forward",), os.fspath(pte_path), method)


def extract_from_etrecord(etrecord_path: str | os.PathLike, stage: str | None = None) -> Graph:
    """One stage of an ETRecord (default: the edge-dialect ``forward``, else the first)."""
    from .readers import read

    graphs = read(etrecord_path).graphs()
    return _pick(graphs, ("edge_dialect_exported_program/forward", "edge_dialect_exported_program", "forward"),
                 os.fspath(etrecord_path), stage)


def extract_from_exported_program(exported_program: Any, name: str = "program") -> Graph:
    """The graph of an in-memory ``ExportedProgram`` or ``GraphModule``."""
    from .readers import read_object

    graphs = read_object(exported_program, name=name).graphs()
    return _pick(graphs, ("forward",), name, None)


def visualize_edge_manager(edge_manager: Any, path: str | os.PathLike, method: str = "forward") -> str:
    """Write the graph of an ``EdgeProgramManager`` (after ``to_edge``/lowering) as HTML."""
    try:
        ep = edge_manager.exported_program(method)
    except TypeError:
        ep = edge_manager.exported_program()
    except AttributeError as exc:
        raise EtlensError(f"visualize_edge_manager: expected an EdgeProgramManager, got "
                          f"{type(edge_manager).__name__}") from exc
    return generate_html(extract_from_exported_program(ep, name=method), path, title=f"edge program · {method}")
