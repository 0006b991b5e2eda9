"""The nodes of a stored program as flat columns: what the analyses read, without the JSON tree.

An ETRecord stores each program as torch.export JSON; the 1000-layer edge program is ~6 MB of it,
parsed into some hundreds of thousands of dicts and lists. The inspector (op types, stack traces,
module hierarchy per debug handle) and the numeric comparison (the provenance chains that give the
ATen program its debug handles) each need only a few strings per node. :class:`ProgramNodes` keeps
exactly those, one list per field, so one parse serves both and nothing tree-shaped stays alive
(the cyclic garbage collector walks every container a process keeps; a kept tree slowed it more
than a second parse cost).

Example::

    from etlens.readers.etrecord import read
    nodes = read("model.etrecord").program_nodes("edge_dialect_exported_program/forward")
    nodes.names[:3], nodes.targets[:3], nodes.debug_handles[:3]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ProgramNodes"]


@dataclass
class ProgramNodes:
    """One entry per node of the graph, in graph order (values as serialized; ``None`` when absent).

    ``names`` (``""`` when the node has none), ``output_names`` (the first ``as_tensor`` output's
    name, or None), ``targets``, ``debug_handles`` (the ``debug_handle`` metadata: an int or a string
    such as ``"3"`` / ``"[3, 4]"``), ``stack_traces``, ``module_stacks`` (the serialized
    ``nn_module_stack`` text), ``from_nodes`` (the serialized provenance chain).
    """

    names: list[str] = field(default_factory=list)
    output_names: list[str | None] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    debug_handles: list[Any] = field(default_factory=list)
    stack_traces: list[str | None] = field(default_factory=list)
    module_stacks: list[str | None] = field(default_factory=list)
    from_nodes: list[Any] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.names)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "ProgramNodes":
        """From a parsed torch.export program (``{"graph_module": {"graph": {"nodes": [...]}}}``)."""
        out = cls()
        names, outs, targets = out.names, out.output_names, out.targets
        handles, traces, stacks, sources = out.debug_handles, out.stack_traces, out.module_stacks, out.from_nodes
        for n in ((doc.get("graph_module") or {}).get("graph") or {}).get("nodes") or []:
            names.append(n.get("name") or "")
            first = None
            o = n.get("outputs") or []
            if o and isinstance(o[0], dict) and "as_tensor" in o[0] and isinstance(o[0]["as_tensor"], dict):
                first = o[0]["as_tensor"].get("name")
            outs.append(first)
            targets.append(n.get("target", ""))
            meta = n.get("metadata") or {}
            handles.append(meta.get("debug_handle"))
            traces.append(meta.get("stack_trace") or None)
            stacks.append(meta.get("nn_module_stack") or None)
            sources.append(meta.get("from_node"))
        return out
