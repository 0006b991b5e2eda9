"""Choosing one graph from an artifact's ``{stage or method name: Graph}``.

Readers return every graph a file holds (:meth:`etlens.readers.base.Artifact.graphs`); a view, a
report section or a compatibility function usually wants one. :func:`pick_graph` is that choice,
with an error that lists what is there::

    from etlens.model.select import pick_graph
    g = pick_graph(art.graphs(), prefer=("forward",), where="model.pte")
"""

from __future__ import annotations

from typing import Iterable, Mapping

from ..errors import EtlensError
from .graph import Graph

__all__ = ["pick_graph"]


def pick_graph(graphs: Mapping[str, Graph], prefer: Iterable[str] = (), where: str = "artifact",
               name: str | None = None) -> Graph:
    """The graph called ``name`` if given (an error naming the choices if absent); else the first
    key equal to, or ending in ``/`` + , a ``prefer`` entry (in ``prefer`` order); else the first graph.

    ``where`` (usually the file path) starts the error messages.
    """
    if not graphs:
        raise EtlensError(f"{where}: contains no graph to show")
    if name is not None:
        if name in graphs:
            return graphs[name]
        raise EtlensError(f"{where}: no stage/method {name!r}; available: {', '.join(graphs)}")
    for wanted in prefer:
        for key, g in graphs.items():
            if key == wanted or key.endswith("/" + wanted):
                return g
    return next(iter(graphs.values()))
