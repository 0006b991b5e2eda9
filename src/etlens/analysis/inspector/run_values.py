"""Values an event logged in any run of its block (not only the first), without torch.

``Event.debug_data`` holds the first run's values only (as in ExecuTorch). Runs grouped in one
block log the same events in the same order, so the same positions in another run hold that
run's values -- which is how an LLM's runs differ: the prefill logs ``[1, n, dim]`` activations
and position 0, a decode step ``[1, 1, dim]`` and its position.

Example::

    from etlens.analysis.inspector.run_values import run_values
    shape = run_values(dump, buffer, block, event_index, column)[0].shape
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ...errors import FormatError
from ...model.events import BlockColumns
from ...readers.etdump import DebugBuffer, ETDump, TensorRef

__all__ = ["run_values", "run_outputs"]


def run_values(dump: ETDump, buffer: Optional[DebugBuffer], block: BlockColumns, event: int, column: int) -> list:
    """Event ``event``'s logged values in run ``column`` of ``block``: numpy arrays (storage dtype,
    zero-copy; zeros of the logged shape without a buffer), scalars, or None for an unreadable tensor."""
    idxs = block.debug_events[event]
    if idxs is None or column >= len(block.runs):
        return []
    run = block.runs[column]
    if len(idxs) and int(idxs.max()) >= len(dump.runs[run].kind):
        return []
    out: list[Any] = []
    for i in idxs.tolist():
        try:
            _, payload = dump.debug_entry(run, i)
            for p in payload if isinstance(payload, list) else [payload]:
                if isinstance(p, TensorRef):
                    p = buffer.array(p) if buffer is not None else np.zeros(p.sizes)
                out.append(p)
        except FormatError:
            out.append(None)
    return out


def run_outputs(dump: ETDump, buffer: Optional[DebugBuffer], block: BlockColumns, column: int) -> list:
    """The method outputs logged in run ``column`` of ``block`` (numpy arrays or scalars)."""
    idxs = block.output_events
    if idxs is None or not len(idxs) or column >= len(block.runs):
        return []
    run = block.runs[column]
    if int(np.max(idxs)) >= len(dump.runs[run].kind):
        return []
    out: list[Any] = []
    for i in np.asarray(idxs).tolist():
        try:
            _, payload = dump.debug_entry(run, i)
            for p in payload if isinstance(payload, list) else [payload]:
                out.append(buffer.array(p) if isinstance(p, TensorRef) and buffer is not None else p)
        except FormatError:
            out.append(None)
    return out
