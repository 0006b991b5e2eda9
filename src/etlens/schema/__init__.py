"""ExecuTorch facts in one place: names, enums and tables that the formats and the runtime define.

Everything here is data taken from ExecuTorch's schemas (``program.fbs``, ``scalar_type.fbs``,
``etdump_schema_flatcc.fbs``) and runtime (the framework event names its profiler logs). It sits at
the lowest layer with :mod:`etlens.errors`: every other package may import it, it imports nothing
of etlens. When ExecuTorch changes one of these facts, this package is the one place to edit.
"""

from __future__ import annotations

from .facts import (
    DELEGATE_CALL,
    FRAMEWORK_EVENT_NAMES,
    METHOD_EXECUTE,
    METHOD_INIT,
    OPERATOR_CALL,
    PROGRAM_LOAD_METHOD,
)

__all__ = [
    "DELEGATE_CALL",
    "FRAMEWORK_EVENT_NAMES",
    "METHOD_EXECUTE",
    "METHOD_INIT",
    "OPERATOR_CALL",
    "PROGRAM_LOAD_METHOD",
]
