"""The interface analyses ask of an inspector, whichever library built it.

``etlens.analysis.numerics`` works on an etlens :class:`~etlens.analysis.inspector.Inspector`
(fast paths: columnar runtime outputs, the owned ``numerics_cache``, the parsed ETRecord behind
``record``) and also on an ``executorch.devtools.Inspector``, which only offers the compatible
surface described by :class:`InspectorLike`.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["InspectorLike"]


class InspectorLike(Protocol):
    """ExecuTorch's ``Inspector`` surface: event blocks with events, and the ETRecord it was given."""

    @property
    def event_blocks(self) -> list[Any]: ...  # EventBlock objects whose .events have debug data

    _etrecord: Any  # the ETRecord (either kind), or None
