"""The one exception root of etlens.

Every error etlens raises on purpose derives from :class:`EtlensError`. The CLI maps
``EtlensError`` to a one-line message and exit status 1, so messages must stand on their
own: name the file, the field or byte offset, and what the user can do about it.

Example::

    from etlens.errors import FormatError
    raise FormatError("model.pte: not an ExecuTorch program (identifier b'PK\\x03\\x04' at bytes 4-8, "
                      "expected b'ET12'); pass a .pte written by to_executorch().save()")
"""

from __future__ import annotations

__all__ = [
    "EtlensError",
    "FormatError",
    "TruncatedFileError",
    "UnsupportedFormatError",
    "MissingDataError",
    "GraphLintError",
    "BackendUnavailableError",
    "PassFailedError",
    "first_line",
]


class EtlensError(Exception):
    """Root of every error etlens raises deliberately."""


class FormatError(EtlensError):
    """The bytes of a file do not follow its format (corrupt, wrong offsets, bad counts)."""


class TruncatedFileError(FormatError):
    """A file ends before a structure it declares (a partial download or copy)."""


class UnsupportedFormatError(EtlensError):
    """No reader recognises the file (neither by magic bytes nor by extension)."""


class MissingDataError(EtlensError):
    """An artifact lacks something the request needs (an entry, a debug buffer, inputs)."""


class GraphLintError(EtlensError):
    """A :class:`etlens.model.Graph` breaks one of its invariants (see ``Graph.lint``)."""


class BackendUnavailableError(EtlensError):
    """A backend was asked for whose Python packages are not installed."""


class PassFailedError(EtlensError):
    """A compiler pass raised; the original exception is chained as ``__cause__``."""


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of ``exc``'s message, at most ``limit`` characters (its type name when empty).

    What an etlens message quotes of a third-party exception: torch and ExecuTorch errors often run
    to pages (a graph dump, a C++ backtrace) after a first line that says what went wrong.
    """
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__
