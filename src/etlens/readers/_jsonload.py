"""Parse JSON text with orjson when it is installed (a core dependency), else the standard library.

An ETRecord stores its programs as torch.export JSON (the 1000-layer edge program is ~6 MB);
orjson parses it 2-3x faster than ``json``. Anything orjson refuses that ``json`` accepts (the
non-standard ``NaN``/``Infinity`` tokens Python writes for non-finite floats, integers beyond 64
bits) is parsed again with ``json``, so the result never depends on which parser ran; text neither
accepts raises ``json``'s own ``JSONDecodeError`` (a ``ValueError``).
"""

from __future__ import annotations

import json
from typing import Any

_orjson: Any
try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency; the fallback keeps a bare install working
    _orjson = None

__all__ = ["loads"]


def loads(data: bytes | str) -> Any:
    """The parsed value of ``data`` (bytes or str), exactly as ``json.loads`` gives it."""
    if _orjson is not None:
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:
            pass  # json decides: it accepts NaN/Infinity and big integers, or raises its own error
    return json.loads(data)
