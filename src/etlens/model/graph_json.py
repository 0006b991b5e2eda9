"""Compact, versioned JSON form of a :class:`~etlens.model.graph.Graph` (``etlens.graph`` v1).

Layout (documented for users in ``docs/graph-json.md``)::

    {"schema": "etlens.graph", "version": 1, "name": ..., "meta": {...},
     "strings": [...],                       # every repeated string once
     "modules": [[[path, type], ...], ...],  # distinct nn_module_stacks, as string ids
     "nodes": {                              # one column per field, one row per node
        "name": [sid], "kind": [sid], "target": [sid|-1], "category": [sid],
        "inputs": [[node index, ...]], "outputs": [[[shape], dtype sid], ...]],
        "module": [module index|-1], "stack": [sid|-1], "handles": [[int]],
        "lineage": [[[name sid, target sid, pass sid, graph_id]]],
        "delegate": [obj|null], "attrs": [obj|null]}}

Columns and a shared string table keep the file small: a 10k-node graph repeats the same
targets, dtypes and module paths thousands of times.
"""

from __future__ import annotations

from .graph import graph_from_json, graph_to_json

__all__ = ["graph_to_json", "graph_from_json"]
