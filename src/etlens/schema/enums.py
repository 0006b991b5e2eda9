"""ExecuTorch's enums in the shapes etlens uses: dtypes, value kinds, instruction kinds.

The numbers come from the generated schema modules (:mod:`.scalar_type_fbs`, :mod:`.program_fbs`,
:mod:`.etdump_fbs`; a backend's own enums live with its payload decoder, etlens/backends/<name>/);
this module adds what the schemas do not say — how a
``ScalarType`` is stored in bytes and which torch dtype it is — and the spellings etlens prints::

    from etlens.schema import SCALAR_TYPES, VALUE_KINDS
    SCALAR_TYPES[6]              # ScalarTypeInfo(name='FLOAT', storage='<f4', view='float32', ...)
    SCALAR_TYPES[6].dtype        # 'float32'
    VALUE_KINDS[5]               # 'tensor' (KernelTypes tag 5)
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from .etdump_fbs import ValueType
from .program_fbs import DataLocation, InstructionArguments, KernelTypes
from .scalar_type_fbs import ScalarType

__all__ = [
    "ScalarTypeInfo", "SCALAR_TYPES", "dtype_name",
    "VALUE_KINDS", "INSTRUCTION_KINDS", "DATA_LOCATIONS",
    "ETDUMP_VALUE_TYPES",
]


class ScalarTypeInfo(NamedTuple):
    """What one ``ScalarType`` code means.

    ``name`` is the schema's (``FLOAT``); ``storage`` the numpy dtype its bytes are read as
    (``None`` when etlens cannot read it: the complex types, which the runtime does not implement);
    ``view`` the torch dtype a decoded tensor gets (bf16 and float8 are read as raw ints of the same
    width, then reinterpreted; quantized types keep their integer representation: ``QINT8`` ->
    ``int8``); ``dtype`` the torch spelling of the type itself (``qint8``), what etlens displays;
    ``itemsize`` its bytes per element.
    """

    name: str
    storage: str | None
    view: str
    dtype: str
    itemsize: int


_S = ScalarType
#: ScalarType code -> :class:`ScalarTypeInfo`. Quantized types are stored as their integer
#: representation; QUINT4X2/QUINT2X4 stay packed bytes.
SCALAR_TYPES: Final[dict[int, ScalarTypeInfo]] = {
    _S.BYTE: ScalarTypeInfo("BYTE", "u1", "uint8", "uint8", 1),
    _S.CHAR: ScalarTypeInfo("CHAR", "i1", "int8", "int8", 1),
    _S.SHORT: ScalarTypeInfo("SHORT", "<i2", "int16", "int16", 2),
    _S.INT: ScalarTypeInfo("INT", "<i4", "int32", "int32", 4),
    _S.LONG: ScalarTypeInfo("LONG", "<i8", "int64", "int64", 8),
    _S.HALF: ScalarTypeInfo("HALF", "<f2", "float16", "float16", 2),
    _S.FLOAT: ScalarTypeInfo("FLOAT", "<f4", "float32", "float32", 4),
    _S.DOUBLE: ScalarTypeInfo("DOUBLE", "<f8", "float64", "float64", 8),
    # Declared in scalar_type.fbs as "not implemented" (commented out) but kept by c10's numbering.
    8: ScalarTypeInfo("COMPLEXHALF", None, "complex32", "complex32", 4),
    9: ScalarTypeInfo("COMPLEXFLOAT", None, "complex64", "complex64", 8),
    10: ScalarTypeInfo("COMPLEXDOUBLE", None, "complex128", "complex128", 16),
    _S.BOOL: ScalarTypeInfo("BOOL", "?", "bool", "bool", 1),
    _S.QINT8: ScalarTypeInfo("QINT8", "i1", "int8", "qint8", 1),
    _S.QUINT8: ScalarTypeInfo("QUINT8", "u1", "uint8", "quint8", 1),
    _S.QINT32: ScalarTypeInfo("QINT32", "<i4", "int32", "qint32", 4),
    _S.BFLOAT16: ScalarTypeInfo("BFLOAT16", "<i2", "bfloat16", "bfloat16", 2),
    _S.QUINT4X2: ScalarTypeInfo("QUINT4X2", "u1", "uint8", "quint4x2", 1),
    _S.QUINT2X4: ScalarTypeInfo("QUINT2X4", "u1", "uint8", "quint2x4", 1),
    _S.BITS16: ScalarTypeInfo("BITS16", "<u2", "uint16", "bits16", 2),
    _S.FLOAT8E5M2: ScalarTypeInfo("FLOAT8E5M2", "u1", "float8_e5m2", "float8_e5m2", 1),
    _S.FLOAT8E4M3FN: ScalarTypeInfo("FLOAT8E4M3FN", "u1", "float8_e4m3fn", "float8_e4m3fn", 1),
    _S.FLOAT8E5M2FNUZ: ScalarTypeInfo("FLOAT8E5M2FNUZ", "u1", "float8_e5m2fnuz", "float8_e5m2fnuz", 1),
    _S.FLOAT8E4M3FNUZ: ScalarTypeInfo("FLOAT8E4M3FNUZ", "u1", "float8_e4m3fnuz", "float8_e4m3fnuz", 1),
    _S.UINT16: ScalarTypeInfo("UINT16", "<u2", "uint16", "uint16", 2),
    _S.UINT32: ScalarTypeInfo("UINT32", "<u4", "uint32", "uint32", 4),
    _S.UINT64: ScalarTypeInfo("UINT64", "<u8", "uint64", "uint64", 8),
}


def dtype_name(code: int) -> str:
    """The torch dtype name of a ScalarType code (``6`` -> ``'float32'``; unknown codes
    ``'scalar_type_<code>'``)."""
    info = SCALAR_TYPES.get(code)
    return info.dtype if info is not None else f"scalar_type_{code}"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


#: ``KernelTypes`` union tag -> etlens' ``Value.kind`` (``5`` -> ``'tensor'``, ``7`` -> ``'int_list'``).
VALUE_KINDS: Final[tuple[str, ...]] = tuple(_snake(n) if n != "NONE" else "none" for n in KernelTypes.NAMES)
#: ``InstructionArguments`` union tag -> ``Instruction.kind`` (``1`` -> ``'KernelCall'``; 0 is ``'none'``).
INSTRUCTION_KINDS: Final[tuple[str, ...]] = ("none",) + InstructionArguments.NAMES[1:]
#: ``DataLocation`` value -> name (``0`` -> ``'INLINE'``): where a delegate's payload lives.
DATA_LOCATIONS: Final[dict[int, str]] = dict(DataLocation.NAMES)
#: ETDump ``ValueType`` value -> name (``5`` -> ``'Tensor'``): what a debug event logged.
ETDUMP_VALUE_TYPES: Final[tuple[str, ...]] = tuple(ValueType.NAMES[i] for i in range(len(ValueType.NAMES)))
