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
    "MissingDependencyError",
    "INSTALL_HINTS",
    "missing_dependency",
    "dependency_error",
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


class MissingDependencyError(EtlensError):
    """An optional dependency is not installed; the message names the extra that brings it.

    Example: ``gap needs torch: pip install 'etlens[torch]'``. Build one with :func:`dependency_error`.
    """


#: top-level module of an optional dependency -> how to install it (the etlens extra that brings it)
INSTALL_HINTS = {
    "torch": "pip install 'etlens[torch]'",
    "executorch": "pip install 'etlens[executorch]'",
    "tensorboard": "pip install 'etlens[tensorboard]'",
    "pyspark": "pip install 'etlens[spark]' (and a Java runtime)",
    "tosa_serializer": "pip install 'etlens[cortex-m]' && pip install --no-deps tosa-tools==2026.5.0",
    "model_explorer": "pip install ai-edge-model-explorer",
    "transformers": "pip install transformers",
    "mcp": "pip install 'etlens[mcp]'",
}


def missing_dependency(exc: BaseException | None) -> str | None:
    """The optional dependency (a key of :data:`INSTALL_HINTS`) whose failed import caused ``exc``, or None.

    Follows ``__cause__`` / ``__context__``, so an error raised while handling the
    ``ModuleNotFoundError`` (a reader's "could not read …") still points at the real cause.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            top = exc.name.split(".")[0]
            if top in INSTALL_HINTS:
                return top
        exc = exc.__cause__ or exc.__context__
    return None


def dependency_error(module: str, what: str) -> MissingDependencyError:
    """``MissingDependencyError("<what> needs <module>: pip install 'etlens[<extra>]'")``."""
    hint = INSTALL_HINTS.get(module.split(".")[0], f"pip install {module.split('.')[0]}")
    return MissingDependencyError(f"{what} needs {module.split('.')[0]}: {hint}")



def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of ``exc``'s message, at most ``limit`` characters (its type name when empty).

    What an etlens message quotes of a third-party exception: torch and ExecuTorch errors often run
    to pages (a graph dump, a C++ backtrace) after a first line that says what went wrong.
    """
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__
