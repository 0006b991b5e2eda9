"""Debug handles: how they are generated, how they flow through passes, and who drops them.

A debug handle is the integer that ties a runtime event (an ETDump profile or debug event) back to
graph nodes. The rules etlens follows (the same as ExecuTorch's):

* **Generation** — handles start at 1; every operator node gets one; nodes whose oldest ``from_node``
  ancestor (the export-time node) is the same share one handle. A decomposition therefore yields
  several nodes with one handle. Placeholders and the output node get none.
* **Propagation** — a node a pass builds from nodes {a, b} carries the union of their handles (a
  fusion has several).
* **Validation** — after each pass, an operator node with no handle whose sources had one *lost*
  it; the report names the node, where it came from and the pass that dropped it.

Functions work on ``torch.fx`` graph modules (:func:`generate_debug_handles`, :func:`fx_sources`) or
on etlens graphs (:func:`check_handles`, :func:`back_annotate`); the tracer uses both.

Example::

    from etlens.passes.debug_handles import generate_debug_handles, validate_handles
    generate_debug_handles(ep.graph_module)            # sets node.meta["debug_handle"]
    problems = validate_handles(graph_before, graph_after, "MyPass")
    for p in problems: print(p)    # node 'add_1' (aten.add.Tensor) lost debug handles (3,) in pass 'MyPass' …
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ..model import Graph, Node

__all__ = [
    "HandleLoss",
    "generate_debug_handles",
    "greatest_ancestor",
    "fx_sources",
    "check_handles",
    "validate_handles",
    "back_annotate",
    "HANDLE_KINDS",
]

#: Node kinds that must carry a debug handle (placeholders, params and outputs do not).
HANDLE_KINDS = ("op", "delegate")

_DEBUG_HANDLE = "debug_handle"
_FROM_NODE = "from_node"


# -- generation on torch.fx graphs -----------------------------------------------------------

def greatest_ancestor(node: Any) -> tuple[str, Any]:
    """``(name, graph_id)`` of the oldest ``from_node`` ancestor of an fx node (itself if none).

    At every level the most recent source (the last entry of ``from_node``) is followed, which is
    the chain torch records for a node that was rewritten several times.
    """
    sources = node.meta.get(_FROM_NODE) or []
    if not sources:
        return node.name, id(node.graph)
    src = sources[-1]
    while True:
        nxt = getattr(src, "from_node", None) or []
        if not nxt:
            return str(getattr(src, "name", "")), getattr(src, "graph_id", None)
        src = nxt[-1]


def _graph_modules(gm: Any) -> Iterable[Any]:
    """``gm`` then the graph modules its ``get_attr`` nodes reach (control-flow bodies), breadth first."""
    import torch

    queue = [gm]
    seen = {id(gm)}
    while queue:
        cur = queue.pop(0)
        yield cur
        for node in cur.graph.nodes:
            if node.op != "get_attr":
                continue
            obj = cur
            try:
                for part in str(node.target).split("."):
                    obj = getattr(obj, part)
            except AttributeError:
                continue
            if isinstance(obj, torch.fx.GraphModule) and id(obj) not in seen:
                seen.add(id(obj))
                queue.append(obj)


def generate_debug_handles(gm: Any, *, overwrite: bool = True) -> dict[tuple[str, Any], int]:
    """Give every operator node of ``gm`` (and its control-flow bodies) a debug handle.

    Handles are numbered from 1 in graph order; nodes sharing their greatest ``from_node`` ancestor
    share a handle. Returns ``{ancestor identifier: handle}``. With ``overwrite=False`` nodes that
    already have a handle keep it (new ones continue after the largest existing handle).
    """
    by_ancestor: dict[tuple[str, Any], int] = {}
    next_handle = 1
    if not overwrite:
        for sub in _graph_modules(gm):
            for node in sub.graph.nodes:
                h = node.meta.get(_DEBUG_HANDLE)
                if isinstance(h, int) and h > 0:
                    next_handle = max(next_handle, h + 1)
                    by_ancestor.setdefault(greatest_ancestor(node), h)
    for sub in _graph_modules(gm):
        for node in sub.graph.nodes:
            if node.op in ("placeholder", "output"):
                continue
            if not overwrite and isinstance(node.meta.get(_DEBUG_HANDLE), int) and node.meta[_DEBUG_HANDLE] > 0:
                continue
            key = greatest_ancestor(node)
            handle = by_ancestor.get(key)
            if handle is None:
                handle = by_ancestor[key] = next_handle
                next_handle += 1
            node.meta[_DEBUG_HANDLE] = handle
    return by_ancestor


def fx_sources(gm: Any, previous: Iterable[str]) -> dict[str, list[str]]:
    """For each node of ``gm``: the nodes of the previous graph (names in ``previous``) it was built from.

    Every entry of a node's ``from_node`` is followed down its own chain until a name of the previous
    graph is met, so a node fused from {a, b} maps to ``[a, b]``. A node whose name exists in the
    previous graph maps to itself (an in-place pass kept it). Nodes with no known source are absent.
    """
    prev = set(previous)
    out: dict[str, list[str]] = {}
    fx_graph = gm.graph if hasattr(gm, "graph") else gm
    for node in fx_graph.nodes:
        if node.name in prev:
            # the same node, kept by an in-place pass or renamed identically by a retrace; its
            # from_node may still point at what it was first built from, which is history
            out[node.name] = [node.name]
            continue
        found: list[str] = []
        for src in node.meta.get(_FROM_NODE) or []:
            cur, depth = src, 0
            while cur is not None and depth < 64:
                name = getattr(cur, "name", None)
                if name in prev:
                    if name not in found:
                        found.append(name)
                    break
                nxt = getattr(cur, "from_node", None) or []
                cur = nxt[-1] if nxt else None
                depth += 1
        if found:
            out[node.name] = found
    return out


# -- validation and propagation on etlens graphs ---------------------------------------------

@dataclass(frozen=True)
class HandleLoss:
    """A node that lost its debug handle in a pass."""

    node: str
    target: str | None
    sources: tuple[str, ...]
    handles: tuple[int, ...]
    pass_name: str

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "target": self.target, "from": list(self.sources),
                "handles": list(self.handles), "pass": self.pass_name}

    def __str__(self) -> str:
        src = ", ".join(repr(s) for s in self.sources)
        return (f"node {self.node!r} ({self.target}) lost debug handles {self.handles} in pass "
                f"{self.pass_name!r} (built from {src}, which carried them)")


def _sources_by_lineage(node: Node, prev: Graph) -> list[str]:
    if node.name in prev:
        return [node.name]
    for step in node.lineage:
        if step.name in prev:
            return [step.name]
    return []


def _needs_handle(node: Node) -> bool:
    return node.kind in HANDLE_KINDS


def check_handles(prev: Graph, new: Graph, pass_name: str,
                  sources: dict[str, list[str]] | None = None, *, propagate: bool = True) -> dict[str, Any]:
    """Validate (and by default propagate) debug handles of ``new`` after ``pass_name`` ran on ``prev``.

    ``sources`` maps nodes of ``new`` to the nodes of ``prev`` they were built from (see
    :func:`fx_sources`); without it, node lineage and equal names are used. Returns the snapshot's
    ``handle_report``::

        {"ops": 40, "with_handles": 38, "lost": [HandleLoss.to_json(), ...],
         "propagated": ["node", ...], "unattributed": ["node", ...], "inferred": ["node", ...]}

    Nodes whose sources are unknown (no ``from_node`` reaching ``prev``, a new name) are matched by
    data flow to the nodes the pass removed (``inferred``); nodes with no plausible source at all
    (a brand-new copy or layout conversion) are ``unattributed``.

    With ``propagate=True`` every node that lost its handle gets the union of its sources' handles
    in ``new`` (marked ``attrs["handles_propagated"] = True``), so later passes and the viewer can
    still follow it; the loss stays in the report.
    """
    lost: list[HandleLoss] = []
    propagated: list[str] = []
    unattributed: list[str] = []
    inferred: list[str] = []
    ops = with_handles = 0
    prev_has_handles = any(n.debug_handles for n in prev)
    vanished: set[str] | None = None
    for node in new:
        if not _needs_handle(node):
            continue
        ops += 1
        if node.debug_handles:
            with_handles += 1
            continue
        srcs = (sources or {}).get(node.name) or _sources_by_lineage(node, prev)
        if not srcs and prev_has_handles:
            if vanished is None:
                vanished = _vanished(prev, new, sources)
            srcs = _sources_by_dataflow(node, prev, new, vanished)
            if srcs:
                inferred.append(node.name)
        handles: list[int] = []
        for s in srcs:
            p = prev.get(s)
            if p is not None:
                handles.extend(h for h in p.debug_handles if h not in handles)
        if not handles:
            if not srcs and prev_has_handles:
                unattributed.append(node.name)
            continue
        loss = HandleLoss(node.name, node.target, tuple(srcs), tuple(sorted(handles)), pass_name)
        # a source whose handles were themselves propagated lost them in an earlier pass: that pass
        # is the culprit, this one only carries the gap forward
        if not all(prev[s].attrs.get("handles_propagated") for s in srcs if s in prev):
            lost.append(loss)
        if propagate:
            node.debug_handles = loss.handles
            node.attrs["handles_propagated"] = True
            propagated.append(node.name)
    report: dict[str, Any] = {"ops": ops, "with_handles": with_handles, "lost": [x.to_json() for x in lost],
                              "propagated": propagated, "unattributed": unattributed}
    if inferred:
        report["inferred"] = inferred
    return report


def _vanished(prev: Graph, new: Graph, sources: dict[str, list[str]] | None) -> set[str]:
    """Nodes of ``prev`` that are gone from ``new`` and that no node of ``new`` claims as a source."""
    claimed = {s for srcs in (sources or {}).values() for s in srcs}
    for n in new:
        claimed.update(step.name for step in n.lineage[:1])
    return {n.name for n in prev if n.name not in new and n.name not in claimed and _needs_handle(n)}


def _sources_by_dataflow(node: Node, prev: Graph, new: Graph, vanished: set[str]) -> list[str]:
    """For a node with no recorded provenance: the vanished nodes it replaced, found by data flow.

    A pass that builds ``linear`` from ``permute`` + ``addmm`` without recording ``from_node``
    leaves the new node touching the same producers/consumers as the nodes it removed. We take the
    vanished nodes that share an input or a consumer with ``node`` and grow that set through
    vanished neighbours (the whole replaced cluster).
    """
    if not vanished:
        return []
    new_users = {m.name for m in new if node.name in m.inputs}
    ins = set(node.inputs)
    prev_users: dict[str, set[str]] = {}
    for m in prev:
        for i in m.inputs:
            prev_users.setdefault(i, set()).add(m.name)
    seeds = [v for v in vanished
             if ins.intersection(prev[v].inputs) or new_users.intersection(prev_users.get(v, ()))]
    # grow only through nodes of the same origin (same handles): a decomposition's pieces, not
    # the neighbouring ops that happen to vanish in the same pass
    seed_handles = {h for v in seeds for h in prev[v].debug_handles}
    cluster = set(seeds)
    todo = list(seeds)
    while todo:
        v = todo.pop()
        for nb in list(prev[v].inputs) + sorted(prev_users.get(v, ())):
            if nb in vanished and nb not in cluster and set(prev[nb].debug_handles) <= seed_handles:
                cluster.add(nb)
                todo.append(nb)
    return [n.name for n in prev if n.name in cluster]


def validate_handles(prev: Graph, new: Graph, pass_name: str,
                     sources: dict[str, list[str]] | None = None) -> list[HandleLoss]:
    """The nodes of ``new`` that lost the debug handles their sources in ``prev`` carried (no changes)."""
    report = check_handles(prev, new, pass_name, sources, propagate=False)
    return [HandleLoss(d["node"], d["target"], tuple(d["from"]), tuple(d["handles"]), d["pass"])
            for d in report["lost"]]


def back_annotate(early: Graph, later: Graph) -> int:
    """Give nodes of ``early`` (export, quantize) the handles ExecuTorch later assigned to their descendants.

    ATen programs carry no handles; the edge program does, and each edge node remembers its export
    node as its lineage root. An export node's handles are the union over its descendants. Returns
    the number of nodes annotated.
    """
    by_root: dict[str, list[int]] = {}
    for n in later:
        root = n.lineage[-1].name if n.lineage else n.name
        acc = by_root.setdefault(root, [])
        acc.extend(h for h in n.debug_handles if h not in acc)
    count = 0
    for n in early:
        if n.debug_handles or not _needs_handle(n):
            continue
        hs = by_root.get(n.name)
        if hs:
            n.debug_handles = tuple(sorted(hs))
            count += 1
    return count
