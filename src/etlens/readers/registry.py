"""One table of readers, chosen by magic bytes first and file extension second.

``read(path)`` returns the :class:`~etlens.readers.base.Artifact` of whichever reader claims the
file; ``sniff(path)`` only names the format. In-memory torch objects (``ExportedProgram``,
``GraphModule``) go through :func:`read_object`.

Example::

    from etlens.readers import read
    art = read("model.pte")          # format 'pte', whatever the extension says
    for name, graph in art.graphs().items():
        print(name, len(graph))
"""

from __future__ import annotations

import importlib
import os
import zipfile
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import MissingDataError, UnsupportedFormatError
from ..schema.bundled_program_fbs import FILE_IDENTIFIER as BPTE_IDENTIFIER
from ..schema.etdump_fbs import FILE_IDENTIFIER as ETDUMP_IDENTIFIER
from .base import Artifact, file_errors

__all__ = ["ReaderSpec", "READERS", "sniff", "read", "read_object"]


def _zip_names(path: str) -> list[str]:
    try:
        with zipfile.ZipFile(path) as z:
            return z.namelist()[:10000]
    except (zipfile.BadZipFile, OSError, ValueError):
        return []


def _is_pte(head: bytes, path: str) -> bool:
    return len(head) >= 8 and head[4:6] == b"ET" and head[6:8].isdigit()


def _is_bpte(head: bytes, path: str) -> bool:
    return len(head) >= 8 and head[4:8] == BPTE_IDENTIFIER


def _is_etdump(head: bytes, path: str) -> bool:
    # size-prefixed flatbuffer: [u32 size][u32 root][ED00]; plain flatbuffer: [u32 root][ED00]
    ident = ETDUMP_IDENTIFIER
    return (len(head) >= 12 and head[8:12] == ident) or (len(head) >= 8 and head[4:8] == ident)


def _is_etrecord(head: bytes, path: str) -> bool:
    return head[:2] == b"PK" and "ETRECORD_V0" in _zip_names(path)


def _is_pt2(head: bytes, path: str) -> bool:
    if head[:2] != b"PK":
        return False
    names = _zip_names(path)
    return any(n.endswith("archive_format") or "/models/" in n or n.endswith(".json") for n in names) and (
        "ETRECORD_V0" not in names)


def _is_trace(head: bytes, path: str) -> bool:
    return head.lstrip()[:1] == b"{" and b"etlens.trace" in head


def _is_graph_json(head: bytes, path: str) -> bool:
    return head.lstrip()[:1] == b"{" and b"etlens.graph" in head


@dataclass(frozen=True)
class ReaderSpec:
    """A reader: its format name, magic test, extensions and ``module:function`` loader."""

    format: str
    description: str
    magic: Callable[[bytes, str], bool]
    extensions: tuple[str, ...]
    loader: str  # "etlens.readers.pte:read"

    def load(self, path: str) -> Artifact:
        mod, func = self.loader.split(":")
        fn: Callable[[str], Artifact] = getattr(importlib.import_module(mod), func)
        return fn(path)


#: Order matters: more specific magic tests first.
READERS: list[ReaderSpec] = [
    ReaderSpec("bpte", "ExecuTorch bundled program (FlatBuffer, identifier BP08)", _is_bpte, (".bpte",),
               "etlens.readers.bpte:read"),
    ReaderSpec("pte", "ExecuTorch program (FlatBuffer, identifier ET12)", _is_pte, (".pte",),
               "etlens.readers.pte:read"),
    ReaderSpec("etdump", "ExecuTorch ETDump (size-prefixed FlatBuffer, identifier ED00)", _is_etdump,
               (".etdp", ".etdump"), "etlens.readers.etdump:read"),
    ReaderSpec("etrecord", "ExecuTorch ETRecord (zip with ETRECORD_V0)", _is_etrecord, (".etrecord", ".bin"),
               "etlens.readers.etrecord:read"),
    ReaderSpec("pt2", "torch.export archive (torch.export.save)", _is_pt2, (".pt2",),
               "etlens.readers.exported:read"),
    ReaderSpec("trace", "etlens pass-trace JSON", _is_trace, (".json",), "etlens.readers.trace:read"),
    ReaderSpec("graph", "etlens graph JSON", _is_graph_json, (".json",), "etlens.readers.trace:read_graph_json"),
]


def _head(path: str, n: int = 4096) -> bytes:
    with file_errors(path, "a file"):
        try:
            with open(path, "rb") as f:
                return f.read(n)
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            raise
        except OSError as exc:
            raise MissingDataError(f"{path}: cannot be read ({exc.strerror or exc})") from exc


def sniff(path: str | os.PathLike[str]) -> ReaderSpec:
    """The reader for ``path``: by magic bytes, then by extension; raise if none fits."""
    path = os.fspath(path)
    head = _head(path)
    for spec in READERS:
        if spec.magic(head, path):
            return spec
    ext = os.path.splitext(path)[1].lower()
    for spec in READERS:
        if ext in spec.extensions and ext != ".json":
            return spec
    known = ", ".join(sorted({e for s in READERS for e in s.extensions}))
    raise UnsupportedFormatError(
        f"{path}: not a file etlens can read (first bytes {head[:8]!r}); expected one of: {known} "
        "(.pte program, .etdp ETDump, .etrecord, .pt2 from torch.export.save, etlens trace JSON)")


def read(path: str | os.PathLike[str]) -> Artifact:
    """Parse ``path`` with the reader that claims it."""
    return sniff(path).load(os.fspath(path))


def read_object(obj: Any, name: str = "program") -> Artifact:
    """Wrap an in-memory ``ExportedProgram`` or ``GraphModule`` as an artifact."""
    from .exported import read_object as _read_object

    return _read_object(obj, name=name)
