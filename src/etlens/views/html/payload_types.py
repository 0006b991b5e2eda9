"""The viewer payload's shape as Python types, mirroring ``assets/payload.schema.json``.

The JSON Schema is the one written description of what Python embeds in a viewer page and what the
page's JavaScript reads; these TypedDicts let the Python side type-check against it, and
``tests/viewer/test_viewer_schema.py`` checks both stay in sync (same keys, same required keys).

Every ``str``-typed column of the payload holds *string ids*: indexes into the top-level
``strings`` table (``-1`` for "no string"). Columns are per node so a 10k-node graph costs a few
bytes per field, not a repeated key name::

    payload["graphs"][0]["nodes"]["label"][i]        # string id of node i's box label
    payload["strings"][that_id]                      # the label itself

Load the schema itself with :func:`payload_schema`.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, Dict, List, Optional, TypedDict, Union

__all__ = [
    "PAYLOAD_VERSION",
    "Payload",
    "GraphPayload",
    "NodeColumns",
    "GroupColumns",
    "SnapshotRecord",
    "SnapshotError",
    "OverlayScale",
    "NodeDetails",
    "DelegateDetails",
    "payload_schema",
]

#: bumped whenever a key is renamed or its meaning changes (1: the terse keys before the schema)
PAYLOAD_VERSION = 2

StringId = int
Runs = List[int]  # sorted indices as [start, length, start, length, ...]


class _NodeColumnsRequired(TypedDict):
    name: List[StringId]
    label: List[StringId]
    kind: List[int]
    target: List[StringId]
    category: List[StringId]
    shape: List[StringId]
    group: List[int]
    module_stack: List[int]
    stack_trace: List[StringId]
    debug_handles: List[Union[List[int], int]]
    details: List[StringId]
    lineage: List[Union[List[StringId], int]]


class NodeColumns(_NodeColumnsRequired, total=False):
    """One column per node field; ``kind`` uses :data:`etlens.views.html.payload.KIND_CODES`."""

    overlay: List[Optional[float]]


class GroupColumns(TypedDict):
    """The compound-node tree: group 0 is the root; parents come before their children."""

    parent: List[int]
    kind: List[int]
    label: List[StringId]
    type: List[StringId]
    representative: List[int]


class SnapshotError(TypedDict):
    type: StringId
    message: StringId
    traceback: StringId


class _SnapshotRequired(TypedDict):
    name: StringId
    stage: StringId
    wall_time_s: Optional[float]
    nodes_delta: Optional[int]
    node_count: int
    present_runs: Runs
    edge_runs: Runs
    added: List[int]
    rewritten: List[int]
    removed: List[int]
    removed_count: int


class SnapshotRecord(_SnapshotRequired, total=False):
    """One pass of a trace over the union graph (see :mod:`etlens.views.html.passes`)."""

    target_overrides: List[int]
    error: SnapshotError


class _GraphRequired(TypedDict):
    name: StringId
    nodes: NodeColumns
    module_stacks: List[List[StringId]]
    edges: List[int]
    groups: GroupColumns


class GraphPayload(_GraphRequired, total=False):
    """One graph; pass-trace pages add ``snapshots``."""

    snapshots: List[SnapshotRecord]


class OverlayScale(TypedDict):
    label: str
    min: float
    max: float


class _PayloadRequired(TypedDict):
    version: int
    mode: str
    title: str
    graphs: List[GraphPayload]
    strings: List[str]


class Payload(_PayloadRequired, total=False):
    """The whole document embedded in a viewer page."""

    overlay: OverlayScale
    matches: Dict[str, List[int]]


class DelegateDetails(TypedDict, total=False):
    backend: str
    payload_size: Optional[int]
    compile_specs: Dict[str, Any]
    ops: List[str]
    index: Optional[int]
    inner_nodes: Optional[int]


class NodeDetails(TypedDict, total=False):
    """Click-time details, stored as one JSON string per node (``nodes.details``)."""

    outputs: List[str]
    attrs: Dict[str, Any]
    delegate: DelegateDetails


@lru_cache(maxsize=1)
def payload_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of :class:`Payload`, as shipped in ``assets/``."""
    text = resources.files("etlens.views.html").joinpath("assets", "payload.schema.json").read_text("utf-8")
    return json.loads(text)
