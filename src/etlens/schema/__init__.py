"""ExecuTorch facts in one place: names, enums and tables that the formats and the runtime define.

Everything here is data taken from ExecuTorch's schemas (``program.fbs``, ``scalar_type.fbs``,
``etdump_schema_flatcc.fbs``) and runtime (the framework event names
its profiler logs). It sits at the lowest layer with :mod:`etlens.errors`: every other package may
import it, it imports nothing of etlens. When ExecuTorch changes one of these facts, this package
is the one place to edit.

Where each fact lives:

* :mod:`.facts` — the runtime's framework event names (``Method::execute``, ``OPERATOR_CALL`` …);
* :mod:`.enums` — ScalarType codes (dtype, storage, size), value kinds, instruction kinds,
  ETDump value types;
* :mod:`.program_fbs`, :mod:`.etdump_fbs`, :mod:`.scalar_type_fbs` — every
  FlatBuffer table, field, enum and union, generated from the wheel's ``.fbs`` files by
  ``scripts/gen_schema.py`` (the shape of that data: :mod:`.fbs`). A backend's payload schema is
  generated into its own folder (``etlens/backends/<name>/schema.py``).
"""

from __future__ import annotations

from .enums import (DATA_LOCATIONS, ETDUMP_VALUE_TYPES, INSTRUCTION_KINDS, SCALAR_TYPES, VALUE_KINDS,
                    ScalarTypeInfo, dtype_name)
from .facts import (
    DELEGATE_CALL,
    FRAMEWORK_EVENT_NAMES,
    METHOD_EXECUTE,
    METHOD_INIT,
    OPERATOR_CALL,
    PROGRAM_LOAD_METHOD,
)
from .fbs import Field

__all__ = [
    "DATA_LOCATIONS",
    "DELEGATE_CALL",
    "ETDUMP_VALUE_TYPES",
    "FRAMEWORK_EVENT_NAMES",
    "Field",
    "INSTRUCTION_KINDS",
    "METHOD_EXECUTE",
    "METHOD_INIT",
    "OPERATOR_CALL",
    "PROGRAM_LOAD_METHOD",
    "SCALAR_TYPES",
    "ScalarTypeInfo",
    "VALUE_KINDS",
    "dtype_name",
]
