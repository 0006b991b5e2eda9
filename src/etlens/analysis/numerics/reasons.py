"""Why something has no row of its own in the gap table: reason codes and the explanation record.

:class:`Reason` is the closed set of codes (its values are the strings ``explain_unpaired`` has
always returned, so tables and JSON stay the same); :data:`REASONS` maps each code to its meaning;
:class:`Explanation` is one line of ``explain_unpaired``'s table.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

__all__ = ["Reason", "REASONS", "Explanation", "EXPLAIN_COLUMNS"]


class Reason(str, Enum):
    """A reason code; compares equal to (and prints as) its string value."""

    # reference side
    NO_DEBUG_HANDLE = "no_debug_handle"
    REMOVED_BY_PASS = "removed_by_pass"
    NO_RUNTIME_EVENT = "no_runtime_event"
    DELEGATE_NO_INTERMEDIATES = "delegate_no_intermediates"
    FUSED = "fused"
    SHARES_HANDLE = "shares_handle"
    MULTI_OUTPUT = "multi_output"
    SHAPE_MISMATCH = "shape_mismatch"
    NOT_COMPARABLE = "not_comparable"
    AMBIGUOUS = "ambiguous"
    NOT_COMPARED = "not_compared"
    # runtime side
    FRAMEWORK_EVENT = "framework_event"
    NO_GRAPH_NODE = "no_graph_node"
    COVERED_BY_INNER_EVENTS = "covered_by_inner_events"
    SUPERSEDED = "superseded"
    NO_INTERMEDIATE_OUTPUT = "no_intermediate_output"
    NO_REFERENCE_OUTPUT = "no_reference_output"
    HANDLES_NOT_COVERED = "handles_not_covered"

    def __str__(self) -> str:
        return self.value

    @property
    def meaning(self) -> str:
        """One sentence: what the code means."""
        return REASONS[self.value]


#: reason code -> what it means
REASONS: dict[str, str] = {
    # reference side
    "no_debug_handle": "no debug handle: nothing ties this reference node / runtime event to the other side",
    "removed_by_pass": "no edge-dialect node descends from this ATen node: a to_edge pass removed or folded it",
    "no_runtime_event": "no runtime event carries this handle (a free view / memory-planned alias, a constant, "
                        "or an op the runtime never ran)",
    "delegate_no_intermediates": "inside a delegate call whose backend logged no intermediate output for it; "
                                 "only the delegate call's output is compared",
    "fused": "grouped with other ops under one runtime event; only the group's last output is compared",
    "shares_handle": "shares its debug handle with later nodes (a decomposition); the last one is compared",
    "multi_output": "the op returns several tensors and the runtime logged a different number of them "
                    "(ExecuTorch skips such ops; pass multi_output=True to compare by position)",
    "shape_mismatch": "paired, but the runtime tensor's shape cannot be matched to the reference output",
    "not_comparable": "paired, but the comparator could not compare the two values",
    "ambiguous": "the reference handles overlap several separate runtime events",
    "not_compared": "grouped with a runtime event, but no output position of that event maps to it",
    # runtime side
    "framework_event": "runtime bookkeeping (method init/execute), not an operator",
    "no_graph_node": "the event's handles match no node of the ETRecord graph",
    "covered_by_inner_events": "a delegate call whose backend logged per-op intermediates, compared instead",
    "superseded": "another event with the same handles and a later instruction id is compared instead",
    "no_intermediate_output": "the event logged no tensor (intermediate outputs were not recorded for it)",
    "no_reference_output": "no reference node has the handle the event's output maps to",
    "handles_not_covered": "some reference handles of the group are not among the event's handles",
}

EXPLAIN_COLUMNS = ["side", "name", "op", "debug_handle", "reason", "detail", "module_path", "stack_trace", "row",
                   "block", "instruction_id"]


@dataclass
class Explanation:
    """One reference node or runtime event without a row of its own, and why.

    ``detail`` defaults to the reason's meaning; :meth:`to_row` gives the table row (the reason as
    its plain string code).
    """

    side: str  # "reference" | "runtime"
    name: str
    op: Any
    debug_handle: Any
    reason: Reason
    detail: str = ""
    module_path: Any = None
    stack_trace: Any = None
    row: Any = None  # the gap-table row that covers it, if any
    block: Any = None
    instruction_id: Any = None

    def __post_init__(self) -> None:
        self.reason = Reason(self.reason)
        if not self.detail:
            self.detail = self.reason.meaning

    def to_row(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["reason"] = self.reason.value
        return out
