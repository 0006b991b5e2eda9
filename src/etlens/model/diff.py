"""Structural diff and node matching between two graphs, by lineage first.

Passes rename, decompose and fuse nodes, so "same name" is a weak notion of "same node". A node
remembers where it came from (``Node.lineage``, from torch's ``from_node``) and which debug handles
it carries; :func:`match_nodes` uses, in order: the lineage root (the export-time node), debug-handle
intersection, then the name. :func:`diff_graphs` classifies every node of the newer graph as
kept, added or rewritten, and every node of the older graph that vanished as removed or replaced.

Example::

    d = diff_graphs(edge_graph, lowered_graph)
    d.added        # new nodes with no ancestor in edge_graph
    d.rewritten    # nodes of lowered_graph that replace or changed an edge_graph node
    d.removed      # edge_graph nodes gone without a descendant
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .graph import Graph, Node

__all__ = ["GraphDiff", "diff_graphs", "match_nodes"]


@dataclass
class GraphDiff:
    """How ``new`` differs from ``old``; every list holds node names, in graph order.

    ``origin`` maps each node of ``new`` that derives from a node of ``old`` to that node's name.
    """

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    origin: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"added": self.added, "removed": self.removed, "rewritten": self.rewritten,
                "replaced": self.replaced}

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.rewritten or self.replaced)


def _signature(node: Node) -> tuple[Any, ...]:
    return node.kind, node.target, tuple(node.inputs)


def _ancestor_in(node: Node, old: Graph) -> str | None:
    for step in node.lineage:
        if step.name in old:
            return step.name
    return None


def diff_graphs(old: Graph, new: Graph) -> GraphDiff:
    """Classify nodes of ``new`` against ``old`` (see the module docstring)."""
    d = GraphDiff()
    descended: set[str] = set()
    for node in new:
        prev = old.get(node.name)
        if prev is not None and prev.kind == node.kind and prev.target == node.target:
            d.origin[node.name] = prev.name
            (d.kept if _signature(prev) == _signature(node) else d.rewritten).append(node.name)
            descended.add(prev.name)
            continue
        anc = _ancestor_in(node, old)
        if anc is None and prev is not None:
            anc = prev.name  # same name, different op: rewritten in place
        if anc is None:
            d.added.append(node.name)
        else:
            d.origin[node.name] = anc
            descended.add(anc)
            (d.added if anc in new and anc != node.name else d.rewritten).append(node.name)
    for node in old:
        if node.name in new:
            continue
        (d.replaced if node.name in descended else d.removed).append(node.name)
    return d


def match_nodes(a: Graph, b: Graph) -> dict[str, list[str]]:
    """For each node of ``a``, the nodes of ``b`` that represent it (possibly several, possibly none).

    Tried in order: shared lineage root, then debug-handle intersection, then equal names.
    Used to synchronise selection between side-by-side graphs (ATen → edge → lowered).
    """
    by_root: dict[str, list[str]] = {}
    by_handle: dict[int, list[str]] = {}
    for n in b:
        if n.lineage_root:
            by_root.setdefault(n.lineage_root, []).append(n.name)
        for h in n.debug_handles:
            by_handle.setdefault(h, []).append(n.name)
    out: dict[str, list[str]] = {}
    for n in a:
        root = n.lineage_root or n.name
        hits = by_root.get(root) or by_root.get(n.name)
        if not hits and n.debug_handles:
            seen: dict[str, None] = {}
            for h in n.debug_handles:
                for m in by_handle.get(h, ()):
                    seen.setdefault(m, None)
            hits = list(seen)
        if not hits and n.name in b:
            hits = [n.name]
        out[n.name] = list(hits or [])
    return out
