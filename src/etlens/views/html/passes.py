"""Pass-by-pass payload: one union graph laid out once, plus what each snapshot shows and changed.

Positions stay stable from pass to pass because the page lays out the *union* of every snapshot
(nodes keyed by name) a single time; each snapshot then says which union nodes and edges exist
(``present_runs``/``edge_runs`` as ``[start, length, …]`` runs), which were added or rewritten
relative to the previous snapshot, and which disappeared (``removed``: drawn as dashed ghosts). The
record's keys are declared in ``assets/payload.schema.json`` (:class:`.payload_types.SnapshotRecord`).

Accepted inputs (see :func:`normalize_snapshots`): an object with ``.snapshots`` (the tracer's
``Trace``), an artifact with ``.trace``, the trace JSON dict (``schema: etlens.trace``) or a list of
``(name, Graph)`` pairs, for which diffs are computed with :func:`etlens.model.diff.diff_graphs`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...errors import EtlensError
from ...model import Graph
from ...model.diff import diff_graphs
from .payload import Strings, graph_payload_flat
from .payload_types import GraphPayload, SnapshotRecord

__all__ = ["Snapshot", "normalize_snapshots", "passes_payload"]


@dataclasses.dataclass
class Snapshot:
    """One step of a pass trace, in the form the viewer needs."""

    name: str
    graph: Graph
    stage: str = ""
    wall_time_s: float | None = None
    diff: dict[str, list[str]] | None = None
    nodes_delta: int | None = None
    error: dict[str, str] | None = None


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _diff_dict(d: Any) -> dict[str, list[str]] | None:
    if d is None:
        return None
    if hasattr(d, "to_json"):
        d = d.to_json()
    if not isinstance(d, dict):
        return None
    return {k: list(d.get(k) or []) for k in ("added", "removed", "rewritten", "replaced")}


def _error_dict(e: Any) -> dict[str, str] | None:
    if e is None:
        return None
    if isinstance(e, BaseException):
        import traceback

        return {"type": type(e).__name__, "message": str(e),
                "traceback": "".join(traceback.format_exception(type(e), e, e.__traceback__))}
    if isinstance(e, str):
        return {"type": "Error", "message": e, "traceback": ""}
    return {k: str(_get(e, k, "") or "") for k in ("type", "message", "traceback")}


def normalize_snapshots(trace: Any) -> list[Snapshot]:
    """Accept every supported trace form and return a list of :class:`Snapshot`."""
    if isinstance(trace, dict) and trace.get("schema") == "etlens.trace":
        raw = trace.get("snapshots") or []
    elif hasattr(trace, "trace") and hasattr(trace.trace, "snapshots"):
        raw = trace.trace.snapshots
    elif hasattr(trace, "snapshots"):
        raw = trace.snapshots
    elif isinstance(trace, dict):
        raw = list(trace.items())
    else:
        raw = list(trace)
    snaps: list[Snapshot] = []
    for i, item in enumerate(raw):
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Graph):
            snaps.append(Snapshot(name=str(item[0]), graph=item[1]))
            continue
        if isinstance(item, Graph):
            snaps.append(Snapshot(name=item.name, graph=item))
            continue
        g = _get(item, "graph")
        if isinstance(g, dict):
            g = Graph.from_json(g)
        if not isinstance(g, Graph):
            raise EtlensError(f"pass trace snapshot {i}: expected a graph, got {type(g).__name__}; pass a "
                              "trace object, trace JSON or a list of (name, Graph) pairs")
        snaps.append(Snapshot(
            name=str(_get(item, "name", f"pass {i}")), graph=g, stage=str(_get(item, "stage", "") or ""),
            wall_time_s=_get(item, "wall_time_s"), diff=_diff_dict(_get(item, "diff")),
            nodes_delta=_get(item, "nodes_delta"), error=_error_dict(_get(item, "error"))))
    if not snaps:
        raise EtlensError("the pass trace has no snapshots; nothing to show")
    for i, snap in enumerate(snaps):
        if snap.diff is None:
            if i == 0:
                snap.diff = {"added": [], "removed": [], "rewritten": [], "replaced": []}
            else:
                snap.diff = _diff_dict(diff_graphs(snaps[i - 1].graph, snap.graph))
        if snap.nodes_delta is None:
            snap.nodes_delta = len(snap.graph) - (len(snaps[i - 1].graph) if i else len(snap.graph))
    return snaps


def _union(snaps: list[Snapshot]) -> Graph:
    """Every node of every snapshot (latest version wins), inputs merged across versions."""
    nodes: dict[str, Any] = {}
    inputs: dict[str, list[str]] = {}
    for snap in snaps:
        for node in snap.graph:
            nodes[node.name] = node
            ins = inputs.setdefault(node.name, [])
            for s in node.inputs:
                if s not in ins:
                    ins.append(s)
    u = Graph(snaps[-1].graph.name, dict(snaps[-1].graph.meta))
    for name, node in nodes.items():
        u.add(dataclasses.replace(node, inputs=inputs[name]))
    return u


def _runs(indices: list[int]) -> list[int]:
    """Sorted indices as ``[start, length, …]`` runs (a snapshot keeps long stretches of nodes)."""
    out: list[int] = []
    for i in sorted(indices):
        if out and out[-2] + out[-1] == i:
            out[-1] += 1
        else:
            out += [i, 1]
    return out


def passes_payload(snaps: list[Snapshot], strings: Strings) -> GraphPayload:
    """The union graph's columns plus one record per snapshot (see the module docstring)."""
    union = _union(snaps)
    gp, flat = graph_payload_flat(union, strings)
    by_owner: dict[str, list[int]] = {}
    for i, owner in enumerate(flat.owner):
        by_owner.setdefault(owner, []).append(i)
    top_index = {name: i for i, (name, owner) in enumerate(zip(flat.names, flat.owner, strict=True)) if name == owner}
    e = gp["edges"]
    edge_pairs = [(e[k], e[k + 1]) for k in range(0, len(e), 2)]
    out: list[SnapshotRecord] = []
    prev_present: set[int] = set()
    for snap in snaps:
        g = snap.graph
        present: set[int] = set()
        for name in g._nodes:  # noqa: SLF001 - fast membership walk over names
            present.update(by_owner.get(name, ()))
        snap_edges = {(src, dst) for src, dst, _ in g.edges()}
        ep = []
        for k, (a, b) in enumerate(edge_pairs):
            if a not in present or b not in present:
                continue
            na, nb = flat.names[a], flat.names[b]
            inner = na != flat.owner[a] or nb != flat.owner[b]
            if inner or (na, nb) in snap_edges:
                ep.append(k)
        overrides: list[int] = []
        for name, i in top_index.items():
            node = g.get(name)
            if node is not None and node.target != union[name].target:
                from .payload import short_label

                overrides += [i, strings(node.target), strings(short_label(node))]
        diff = snap.diff or {}

        def idx(names: list[str]) -> list[int]:
            return sorted({top_index[n] for n in names if n in top_index})

        gone = sorted(prev_present - present)
        first = not out  # the first snapshot has nothing to differ from: show it plain
        rec: SnapshotRecord = {
            "name": strings(snap.name), "stage": strings(snap.stage),
            "wall_time_s": snap.wall_time_s, "nodes_delta": snap.nodes_delta, "node_count": len(g),
            "present_runs": _runs(list(present)), "edge_runs": _runs(ep),
            "added": [] if first else idx(diff.get("added", [])),
            "rewritten": [] if first else idx(diff.get("rewritten", [])),
            "removed": gone, "removed_count": len(diff.get("removed", [])) + len(diff.get("replaced", [])),
        }
        if overrides:
            rec["target_overrides"] = overrides
        if snap.error:
            rec["error"] = {"type": strings(snap.error.get("type", "")),
                            "message": strings(snap.error.get("message", "")),
                            "traceback": strings(snap.error.get("traceback", ""))}
        out.append(rec)
        prev_present = present
    gp["snapshots"] = out
    return gp
