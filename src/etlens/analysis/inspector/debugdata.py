"""Where an inspector's lazily decoded ``debug_data`` lists get their values.

:class:`DebugData` pairs a parsed ETDump with its debug buffer; a
:class:`~etlens.analysis.inspector.frame.LazyList` holds it with a run and event indices and asks
:meth:`DebugData.values` on first access (or, through ``LazyList.load_all``, for many lists at once).
Decoding goes through :func:`etlens.readers.etdump_values.debug_values`: entries that cannot be read
(past the end of a truncated buffer, a corrupt shape) are ``None``, the rest as ExecuTorch inflates them.
"""

from __future__ import annotations

from typing import Any

from ...readers.etdump import DebugBuffer, ETDump
from ...readers.etdump_values import debug_values

__all__ = ["DebugData"]


class DebugData:
    """The values of debug events: ``values(run, idxs)`` -> one decoded value (or None) per index."""

    __slots__ = ("dump", "buffer")

    def __init__(self, dump: ETDump, buffer: DebugBuffer | None) -> None:
        self.dump = dump
        self.buffer = buffer

    def values(self, run: int, idxs: Any) -> list:
        return debug_values(self.dump, run, idxs, self.buffer)
