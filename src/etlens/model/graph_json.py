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

from typing import Any

from ..errors import FormatError
from .graph import DelegateInfo, Graph, LineageStep, Node, TensorMeta

__all__ = ["graph_to_json", "graph_from_json"]


class _Strings:
    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.table: list[str] = []

    def __call__(self, s: str | None) -> int:
        if s is None:
            return -1
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.table)
            self.table.append(s)
        return i


def graph_to_json(graph: Graph) -> dict[str, Any]:
    sid = _Strings()
    modules: dict[tuple[Any, ...], int] = {}
    pos = {n.name: i for i, n in enumerate(graph)}
    cols: dict[str, list[Any]] = {k: [] for k in (
        "name", "kind", "target", "category", "inputs", "outputs", "module", "stack", "handles",
        "lineage", "delegate", "attrs")}
    for n in graph:
        cols["name"].append(sid(n.name))
        cols["kind"].append(sid(n.kind))
        cols["target"].append(sid(n.target))
        cols["category"].append(sid(n.category))
        cols["inputs"].append([pos.get(s, -1) for s in n.inputs])
        cols["outputs"].append([[list(t.shape), sid(t.dtype)] for t in n.outputs])
        key = tuple((sid(p), sid(t)) for p, t in n.module_stack)
        cols["module"].append(modules.setdefault(key, len(modules)) if key else -1)
        cols["stack"].append(sid(n.stack_trace))
        cols["handles"].append(list(n.debug_handles))
        cols["lineage"].append([[sid(s.name), sid(s.target), sid(s.pass_name), s.graph_id] for s in n.lineage])
        cols["delegate"].append(n.delegate.to_json() if n.delegate is not None else None)
        cols["attrs"].append(n.attrs or None)
    return {
        "schema": Graph.SCHEMA,
        "version": Graph.VERSION,
        "name": graph.name,
        "meta": graph.meta,
        "strings": sid.table,
        "modules": [[list(pair) for pair in key] for key in modules],
        "nodes": cols,
    }


def graph_from_json(data: Any) -> Graph:
    if not isinstance(data, dict) or data.get("schema") != Graph.SCHEMA:
        raise FormatError("not an etlens graph JSON object (field 'schema' must be 'etlens.graph')")
    if data.get("version") != Graph.VERSION:
        raise FormatError(
            f"etlens graph JSON version {data.get('version')!r} is not supported (this etlens reads "
            f"version {Graph.VERSION}); upgrade etlens or re-create the file")
    try:
        strings: list[str] = data["strings"]
        cols: dict[str, list[Any]] = data["nodes"]
        _check_types(data, strings, cols)
        modules = [[(strings[p], strings[t]) for p, t in key] for key in data.get("modules", [])]

        def s(i: int) -> str | None:
            return None if i < 0 else strings[i]

        names = [strings[i] for i in cols["name"]]
        g = Graph(data.get("name", "graph"), data.get("meta") or {})
        for i, name in enumerate(names):
            m = cols["module"][i]
            delegate = cols["delegate"][i]
            g.add(Node(
                name=name,
                kind=strings[cols["kind"][i]],
                target=s(cols["target"][i]),
                category=strings[cols["category"][i]],
                inputs=[names[j] for j in cols["inputs"][i]],
                outputs=[TensorMeta(tuple(shape), strings[d]) for shape, d in cols["outputs"][i]],
                module_stack=list(modules[m]) if m >= 0 else [],
                stack_trace=s(cols["stack"][i]),
                debug_handles=tuple(cols["handles"][i]),
                lineage=[LineageStep(strings[a], s(b) or "", s(c) or "", d) for a, b, c, d in cols["lineage"][i]],
                delegate=DelegateInfo.from_json(delegate) if delegate is not None else None,
                attrs=dict(cols["attrs"][i] or {}),
            ))
        return g
    except FormatError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise FormatError(f"etlens graph JSON {str(data.get('name', '?'))[:200]!r} is malformed: "
                          f"{str(exc)[:300]}") from exc


def _check_types(data: dict[str, Any], strings: Any, cols: Any) -> None:
    # JSON from outside may hold any type anywhere; a wrong one must fail here, not later in
    # summary() or the viewer (hashing a list target, sorting str against int handles)
    if not isinstance(strings, list) or not all(isinstance(x, str) for x in strings):
        raise FormatError("etlens graph JSON: field 'strings' must be a list of strings")
    if not isinstance(cols, dict):
        raise FormatError("etlens graph JSON: field 'nodes' must be an object of columns")
    if not isinstance(data.get("name", "graph"), str) or not isinstance(data.get("meta") or {}, dict):
        raise FormatError("etlens graph JSON: 'name' must be a string and 'meta' an object")
    for col in ("name", "kind", "target", "category", "module", "stack"):
        if not all(type(v) is int for v in cols[col]):
            raise FormatError(f"etlens graph JSON: column {col!r} must hold integer string ids")
    for col in ("inputs", "handles"):
        if not all(isinstance(v, list) and all(type(x) is int for x in v) for v in cols[col]):
            raise FormatError(f"etlens graph JSON: column {col!r} must hold lists of integers")
    for col in ("outputs", "lineage"):
        if not all(isinstance(v, list) and all(isinstance(x, list) for x in v) for v in cols[col]):
            raise FormatError(f"etlens graph JSON: column {col!r} must hold lists of lists")
    for out in cols["outputs"]:
        for t in out:
            if len(t) != 2 or not isinstance(t[0], list) or type(t[1]) is not int or not all(
                    type(d) is int or isinstance(d, str) for d in t[0]):
                raise FormatError("etlens graph JSON: an output must be [[dims], dtype string id]")
    for col in ("delegate", "attrs"):
        if not all(v is None or isinstance(v, dict) for v in cols[col]):
            raise FormatError(f"etlens graph JSON: column {col!r} must hold objects or null")
    for lin in cols["lineage"]:
        for st in lin:
            if len(st) != 4 or not all(type(x) is int for x in st[:3]) or not (st[3] is None or type(st[3]) is int):
                raise FormatError("etlens graph JSON: a lineage step must be [name id, target id, pass id, graph id]")
    for d in cols["delegate"]:
        if d is None:
            continue
        specs = d.get("compile_specs", {})
        if not (isinstance(d.get("backend_id"), str) and all(
                d.get(k) is None or type(d.get(k)) is int for k in ("payload_size", "index"))
                and isinstance(d.get("ops", []), list) and all(isinstance(o, str) for o in d.get("ops", []))
                and isinstance(specs, dict) and all(isinstance(v, str) for v in specs.values())):
            raise FormatError("etlens graph JSON: a delegate needs a string 'backend_id', integer "
                              "'payload_size'/'index', string 'ops' and string 'compile_specs'")
