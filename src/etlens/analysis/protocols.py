"""The interface analyses ask of an inspector, whichever library built it.

``etlens.analysis.numerics`` works on an etlens :class:`~etlens.analysis.inspector.Inspector`
and also on an ``executorch.devtools.Inspector``, which only offers the compatible surface
described by :class:`InspectorLike`. The etlens one offers more (:class:`ColumnarInspector`:
columnar runtime outputs, the parsed ETRecord behind ``record``, whether a debug buffer was
given); analyses ask :func:`is_columnar` instead of importing the Inspector class, so the
inspector can call into them (``Inspector.calculate_numeric_gap``) without an import cycle.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["InspectorLike", "ColumnarInspector", "is_columnar"]


class InspectorLike(Protocol):
    """ExecuTorch's ``Inspector`` surface: event blocks with events, and the ETRecord it was given."""

    @property
    def event_blocks(self) -> list[Any]: ...  # EventBlock objects whose .events have debug data

    _etrecord: Any  # the ETRecord (either kind), or None


class ColumnarInspector(InspectorLike, Protocol):
    """What etlens' own Inspector adds: the fast paths of the numerics."""

    record: Any  # the parsed ETRecord (etlens.analysis.record.Record) or None

    @property
    def has_debug_buffer(self) -> bool: ...

    def runtime_intermediate_outputs(self) -> list[Any]: ...


def is_columnar(inspector: Any) -> bool:
    """True for an inspector with :class:`ColumnarInspector`'s surface (etlens' own), False for ExecuTorch's."""
    return (callable(getattr(inspector, "runtime_intermediate_outputs", None))
            and hasattr(inspector, "has_debug_buffer") and hasattr(inspector, "record"))
