"""ExecuTorch's rule for an event's duration from its raw start/end ticks: the one home of the 32-bit wrap.

Devices with a 32-bit cycle counter log ``end < start`` when the counter wrapped during the event;
ExecuTorch's Inspector then takes ``(2**32 - 1 - start) + end``. An ``end < start`` with a timestamp
above 32 bits cannot be such a wrap: the timestamps are corrupt (a :class:`~etlens.errors.FormatError`).
The Inspector (:mod:`etlens.analysis.inspector.build`) and the fleet fast path
(:mod:`etlens.fleet.fastpath`) both compute durations with :func:`elapsed`.

Example::

    import numpy as np
    from etlens.model.timing import elapsed
    elapsed(np.array([4294967290], np.uint64), np.array([5], np.uint64), "run.etdp")   # array([10.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import FormatError

__all__ = ["MAX_U32", "elapsed"]

#: the largest value of a 32-bit counter
MAX_U32 = 2 ** 32 - 1


def elapsed(start: Any, end: Any, what: str) -> Any:
    """``end - start`` as float64 arrays, with the 32-bit wrap-around rule (integer or float ticks).

    ``what`` names the file or block in the error raised for timestamps that cannot be a wrap.
    """
    floats = start.dtype.kind == "f"
    s = start.astype(np.float64) if floats else start
    e = end.astype(np.float64) if end.dtype.kind == "f" else end
    out = e - s if floats else (e.astype(np.int64) - s.astype(np.int64)).astype(np.float64)
    wrap = s > e
    if wrap.any():
        big = wrap & ((s > MAX_U32) | (e > MAX_U32))
        if big.any():
            i = int(np.flatnonzero(big)[0])
            raise FormatError(f"{what}: an event ends before it starts (start {s.ravel()[i]}, end {e.ravel()[i]}) "
                              "with timestamps above 32 bits, so it is not a 32-bit counter wrap-around; the "
                              "ETDump timestamps are corrupt")
        out[wrap] = (MAX_U32 - s[wrap].astype(np.float64)) + e[wrap].astype(np.float64)
    return out
