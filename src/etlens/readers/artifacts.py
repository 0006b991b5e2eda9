"""The files of one report, each read and parsed at most once: :class:`ArtifactSet`.

A report on a run needs the same files in many places: the Inspector (ETDump, ETRecord, ``.pte``
for method names), the delegation table (ETRecord + the ``.pte``'s kernel list), the attribution
inside delegates (``.pte``), the lowered-program graph, planned memory and the size treemap
(``.pte`` + ETRecord), runtime allocations (ETDump). An :class:`ArtifactSet` parses each file
the first time one of them asks and hands every later caller the same object; ``parses`` counts
the parses per file (a test fails when a report parses one twice).

Example::

    from etlens.readers.artifacts import ArtifactSet

    arts = ArtifactSet(etdump="run.etdp", etrecord="model.etrecord", pte="model.pte")
    arts.etrecord().graphs(), arts.pte().program, arts.etdump().runs
    arts.parses          # {'etrecord': 1, 'pte': 1, 'etdump': 1}
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["ArtifactSet"]


class ArtifactSet:
    """Paths of a run's files and, parsed on first use and kept, what they hold.

    Every accessor returns ``None`` when its path was not given; errors are the readers' own
    (:class:`~etlens.errors.EtlensError` naming the file).
    """

    def __init__(self, *, etdump: str | None = None, etrecord: str | None = None, pte: str | None = None,
                 debug_buffer: str | None = None) -> None:
        self.etdump_path = os.fspath(etdump) if etdump else None
        self.etrecord_path = os.fspath(etrecord) if etrecord else None
        self.pte_path = os.fspath(pte) if pte else None
        self.debug_buffer_path = os.fspath(debug_buffer) if debug_buffer else None
        #: parses per file kind (``etrecord``, ``pte``, ``etdump``): 1 at most in a report
        self.parses: dict[str, int] = {}
        self._cache: dict[str, Any] = {}

    def _get(self, kind: str, parse: Any) -> Any:
        if kind not in self._cache:
            self.parses[kind] = self.parses.get(kind, 0) + 1
            self._cache[kind] = parse()
        return self._cache[kind]

    def etrecord(self) -> Any:
        """The parsed ETRecord (:class:`~etlens.readers.etrecord.ETRecord`), or ``None``."""
        if not self.etrecord_path:
            return None
        from .etrecord import read

        return self._get("etrecord", lambda: read(self.etrecord_path))

    def pte_bytes(self) -> bytes | None:
        """The ``.pte`` file's bytes (read once, bounded), or ``None``."""
        if not self.pte_path:
            return None
        from .base import read_limited

        data: bytes = self._get("pte bytes", lambda: read_limited(self.pte_path))
        return data

    def pte(self) -> Any:
        """The parsed ``.pte`` (:class:`~etlens.readers.pte.PteArtifact`), or ``None``."""
        if not self.pte_path:
            return None
        from .pte import read_pte_bytes

        return self._get("pte", lambda: read_pte_bytes(self.pte_bytes() or b"", name=self.pte_path))

    def etdump(self) -> Any:
        """The parsed ETDump (:class:`~etlens.readers.etdump.ETDump`), or ``None``."""
        if not self.etdump_path:
            return None
        from .etdump import read_etdump

        return self._get("etdump", lambda: read_etdump(self.etdump_path))
