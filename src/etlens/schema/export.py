"""The enums of torch.export's serialized program (``torch/_export/serde/schema.py``).

An ETRecord stores the exported programs it carries in torch.export's JSON form, where dtypes,
layouts and memory formats are small integers of that schema's own numbering (not ExecuTorch's
``ScalarType``: there ``float32`` is 7, not 6). Both the ETRecord graph reader and the numerics
replay decode them with these tables::

    from etlens.schema.export import EXPORT_DTYPES
    EXPORT_DTYPES[7]     # 'float32' (the name torch prints)
"""

from __future__ import annotations

from typing import Final

__all__ = ["EXPORT_DTYPES", "EXPORT_LAYOUTS", "EXPORT_MEMORY_FORMATS"]

#: torch.export ``ScalarType`` value -> torch dtype name.
EXPORT_DTYPES: Final[dict[int, str]] = {
    1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float16", 7: "float32", 8: "float64",
    9: "complex32", 10: "complex64", 11: "complex128", 12: "bool", 13: "bfloat16", 28: "uint16",
    29: "float8_e4m3fn", 30: "float8_e5m2", 31: "float8_e4m3fnuz", 32: "float8_e5m2fnuz",
    33: "float8_e8m0fnu", 34: "uint32", 35: "uint64",
}
#: torch.export ``Layout`` value -> torch layout name.
EXPORT_LAYOUTS: Final[dict[int, str]] = {
    1: "sparse_coo", 2: "sparse_csr", 3: "sparse_csc", 4: "sparse_bsr", 5: "sparse_bsc", 6: "_mkldnn", 7: "strided",
}
#: torch.export ``MemoryFormat`` value -> torch memory format name.
EXPORT_MEMORY_FORMATS: Final[dict[int, str]] = {
    1: "contiguous_format", 2: "channels_last", 3: "channels_last_3d", 4: "preserve_format",
}
