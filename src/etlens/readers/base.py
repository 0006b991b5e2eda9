"""What every reader returns: an :class:`Artifact` with graphs and a summary.

A reader module exposes ``read(path) -> Artifact`` (and may expose ``read_bytes``). The artifact
keeps the parsed, format-specific structure (``.program`` for a ``.pte``, ``.record`` for an
ETRecord …) and offers the format-free view the rest of etlens uses:

* :meth:`Artifact.graphs` — ``{stage or method name: Graph}``;
* :meth:`Artifact.summary` — a JSON-ready dict that ``etlens info`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._files import file_errors, read_limited
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
