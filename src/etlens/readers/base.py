"""What every reader returns: an :class:`Artifact` with graphs and a summary.

A reader module exposes ``read(path) -> Artifact`` (and may expose ``read_bytes``). The artifact
keeps the parsed, format-specific structure (``.program`` for a ``.pte``, ``.record`` for an
ETRecord …) and offers the format-free view the rest of etlens uses:

* :meth:`Artifact.graphs` — ``{stage or method name: Graph}``;
* :meth:`Artifact.graph` — one of them, by method or stage name, or the default one;
* :meth:`Artifact.summary` — a JSON-ready dict that ``etlens info`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from ..model.files import file_errors, read_limited
from ..model import Graph

__all__ = ["Artifact", "read_limited", "file_errors"]


@dataclass
class Artifact:
    """A parsed file: its format name, where it came from, and its format-free views."""

    format: str
    path: str | None = None
    _graphs: dict[str, Graph] = field(default_factory=dict, repr=False)

    def graphs(self) -> dict[str, Graph]:
        """Every graph in the artifact, keyed by method or stage name."""
        return dict(self._graphs)

    def graph(self, method: str | None = None, stage: str | None = None, *, prefer: Iterable[str] = ()) -> Graph:
        """One graph of :meth:`graphs`: by ``stage``, by ``method``, or the default one.

        * ``stage`` — a key of :meth:`graphs` (``"exported_program"``, a pass-trace snapshot …);
          with ``method`` too, the key ``"<stage>/<method>"``;
        * ``method`` — a method name: the key itself (``"forward"`` of a ``.pte``), else the one
          key ending in ``"/<method>"`` (``"edge_dialect_exported_program/forward"``);
        * neither — the first key matching one of ``prefer`` (equal, ``…/<name>`` or
          ``<name>/…``), else ``"forward"``, else the first graph.

        Raises :class:`~etlens.errors.MissingDataError` naming the file, what was asked for and the
        methods/stages it has.

        Example::

            read("model.pte").graph()                     # forward
            read("model.etrecord").graph(stage="exported_program")
            read("model.etrecord").graph("forward")       # edge_dialect_exported_program/forward
        """
        graphs = self.graphs()
        return graphs[self._pick_key(list(graphs), method, stage, prefer)]

    def graph_key(self, method: str | None = None, stage: str | None = None, *,
                  prefer: Iterable[str] = ()) -> str:
        """The key of :meth:`graphs` that :meth:`graph` picks (same arguments, same errors)."""
        return self._pick_key(list(self.graphs()), method, stage, prefer)

    def _pick_key(self, keys: list[str], method: str | None, stage: str | None, prefer: Iterable[str]) -> str:
        from ..errors import MissingDataError

        where = self.path or f"{self.format} artifact"
        if not keys:
            raise MissingDataError(f"{where}: contains no graph (no program method or stage to show)")
        available = f"available methods/stages: {', '.join(keys)}"
        if stage is not None:
            key = stage if method is None else f"{stage}/{method}"
            if key in keys:
                return key
            what = f"stage {stage!r}" if method is None else f"stage {stage!r} with method {method!r}"
            raise MissingDataError(f"{where}: no {what}; {available} (pass stage= one of them)")
        if method is not None:
            if method in keys:
                return method
            hits = [k for k in keys if k.endswith("/" + method)]
            if len(hits) == 1:
                return hits[0]
            raise MissingDataError(f"{where}: no method {method!r}; {available} "
                                   "(pass method= a method name, or stage= a full key)")
        for name in prefer:
            for key in keys:
                if key == name or key.endswith("/" + name) or key.startswith(name + "/"):
                    return key
        return "forward" if "forward" in keys else keys[0]

    def summary(self) -> dict[str, Any]:
        """JSON-ready facts for ``etlens info``; readers extend it."""
        gs = self.graphs()
        return {
            "format": self.format,
            "path": self.path,
            "graphs": {
                name: {
                    "nodes": len(g),
                    "by_category": g.counts_by_category(),
                    "operators": g.counts_by_target(),
                    "debug_handle_coverage": list(g.debug_handle_coverage()),
                }
                for name, g in gs.items()
            },
        }
