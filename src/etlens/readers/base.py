"""What every reader returns: an :class:`Artifact` with graphs and a summary.

A reader module exposes ``read(path) -> Artifact`` (and may expose ``read_bytes``). The artifact
keeps the parsed, format-specific structure (``.program`` for a ``.pte``, ``.record`` for an
ETRecord …) and offers the format-free view the rest of etlens uses:

* :meth:`Artifact.graphs` — ``{stage or method name: Graph}``;
* :meth:`Artifact.summary` — a JSON-ready dict that ``etlens info`` prints.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

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


@contextmanager
def file_errors(path: str | os.PathLike[str], what: str = "file") -> Iterator[None]:
    """Turn the OS errors of opening ``path`` into :class:`MissingDataError` naming it.

    ``what`` names the expected kind (``"an .etdp file"``) for the is-a-directory message.
    """
    from ..errors import MissingDataError

    try:
        yield
    except FileNotFoundError as exc:
        raise MissingDataError(f"{path}: no such file") from exc
    except IsADirectoryError as exc:
        raise MissingDataError(f"{path}: is a directory, expected {what}") from exc
    except PermissionError as exc:
        raise MissingDataError(f"{path}: permission denied") from exc


def read_limited(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """Read a whole file, refusing files larger than ``limit`` bytes (default 8 GiB)."""
    from ..errors import FormatError

    limit = limit if limit is not None else 8 << 30
    with file_errors(path, "a file"):
        size = os.path.getsize(path)
        if size > limit:
            raise FormatError(f"{path}: {size} bytes is larger than the {limit}-byte limit for this format")
        with open(path, "rb") as f:
            return f.read()
