"""Bounded, name-checked reading of zip archives (ETRecord, ``.pt2``).

Zip headers are untrusted: a crafted file can declare a 4 GiB entry that inflates from 1 KiB, name
an entry ``../../etc/passwd``, or list the same name twice. :class:`SafeZip` checks names once,
bounds every read by the archive's own size (and a compression-ratio cap), and turns every
failure into an :class:`~etlens.errors.EtlensError` naming the file and the entry.
"""

from __future__ import annotations

import os
import zipfile
import zlib

from ..errors import FormatError, MissingDataError, TruncatedFileError
from .base import file_errors

#: what decoding an entry's bytes can raise besides zipfile's own errors: zlib.error / LZMAError when a header
#: says "deflated" (or "lzma") over bytes that are not (found by scripts/fuzz_readers.py)
_DECODE_ERRORS: tuple[type[Exception], ...] = (OSError, ValueError, RuntimeError, NotImplementedError, zlib.error)
try:
    import lzma

    _DECODE_ERRORS += (lzma.LZMAError,)
except ImportError:  # a Python built without lzma: zipfile cannot open such entries at all
    pass

__all__ = ["SafeZip"]

#: Largest decompression ratio we believe (real torch/ETRecord entries are stored, ratio 1).
_MAX_RATIO = 200
_SLACK = 1 << 20


class SafeZip:
    """A read-only zip whose entries are read with size bounds and clear errors.

    Example::

        with SafeZip("model.etrecord", what="ETRecord") as z:
            if "ETRECORD_V0" in z: data = z.read("debug_handle_map")
    """

    def __init__(self, path: str | os.PathLike[str], what: str = "archive", hint: str = "") -> None:
        self.path = os.fspath(path)
        self.what = what
        self.hint = hint
        try:
            with file_errors(self.path, f"a {what} file"):
                self.size = os.path.getsize(self.path)
                self._zip = zipfile.ZipFile(self.path, "r")
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, NotImplementedError) as exc:
            raise FormatError(f"{self.path}: not a {what} (not a readable zip archive: {exc}){self._hint()}") from exc
        try:
            infos = self._zip.infolist()
        except Exception as exc:  # pragma: no cover - zipfile parses the directory eagerly
            raise FormatError(f"{self.path}: corrupt zip directory ({exc}){self._hint()}") from exc
        self._infos: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            self._check_name(info.filename)
            if info.filename in self._infos:
                raise FormatError(f"{self.path}: entry {info.filename!r} appears twice in the zip{self._hint()}")
            self._infos[info.filename] = info

    def _hint(self) -> str:
        return f"; {self.hint}" if self.hint else ""

    def _check_name(self, name: str) -> None:
        parts = name.replace("\\", "/").split("/")
        if name.startswith(("/", "\\")) or ".." in parts or "\x00" in name or (len(name) > 1 and name[1] == ":"):
            raise FormatError(f"{self.path}: entry name {name!r} escapes the archive (absolute path or '..'); "
                              f"refusing to read this {self.what}{self._hint()}")

    # -- queries ---------------------------------------------------------------------------
    def names(self) -> list[str]:
        return list(self._infos)

    def __contains__(self, name: object) -> bool:
        return name in self._infos

    def entry_size(self, name: str) -> int:
        return self._infos[name].file_size

    def check_sizes(self) -> None:
        """Refuse the archive if any entry declares more bytes than the file can back.

        For archives handed to another library (``torch.export.load``) that reads entries itself.
        """
        for name, info in self._infos.items():
            self._check_size(name, info, None)

    def _check_size(self, name: str, info: zipfile.ZipInfo, limit: int | None) -> None:
        declared = info.file_size
        bound = self.size if info.compress_type == zipfile.ZIP_STORED else self.size * _MAX_RATIO + _SLACK
        if limit is not None:
            bound = min(bound, limit)
        if declared > bound or info.compress_size > self.size:
            raise FormatError(f"{self.path}: entry {name!r} declares {declared} bytes, more than this "
                              f"{self.size}-byte file can hold; the {self.what} is corrupt{self._hint()}")

    def read(self, name: str, limit: int | None = None) -> bytes:
        """The bytes of entry ``name``, refusing sizes the archive cannot back."""
        info = self._infos.get(name)
        if info is None:
            raise MissingDataError(f"{self.path}: {self.what} has no entry {name!r}{self._hint()}")
        declared = info.file_size
        self._check_size(name, info, limit)
        try:
            with self._zip.open(info) as f:
                data = f.read(declared + 1)
        except (zipfile.BadZipFile, EOFError) as exc:
            raise TruncatedFileError(
                f"{self.path}: entry {name!r} is truncated or corrupt ({exc}){self._hint()}") from exc
        except _DECODE_ERRORS as exc:
            raise FormatError(f"{self.path}: entry {name!r} cannot be read ({exc}){self._hint()}") from exc
        if len(data) != declared:
            raise FormatError(f"{self.path}: entry {name!r} holds {len(data)} bytes but declares {declared}"
                              f"{self._hint()}")
        return data

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> "SafeZip":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
