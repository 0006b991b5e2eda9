"""Opening files safely, for every layer: OS errors become :class:`~etlens.errors.MissingDataError`
naming the path, and whole-file reads refuse files past a size limit.

It lives in the lowest layer that opens files (the model: ``Trace.load``) so the readers share it.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

__all__ = ["file_errors", "read_limited"]


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
