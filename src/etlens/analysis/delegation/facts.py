"""Facts the delegation table and the partitioner reasons share (one home, no import between them)."""

from __future__ import annotations

__all__ = ["STRUCTURAL"]

#: Why these non-delegated nodes are not operators a backend could take (no partitioner needed).
STRUCTURAL = {
    "getitem": "not an operator: it reads one output of the previous call (a delegate or a multi-output op)",
    "alloc": "not an operator: a memory-planning allocation added by to_executorch",
}
