"""Which debug handle each output of a delegate call belongs to.

A ``DELEGATE_CALL`` event logs every tensor argument of the call (inputs first, then the
``num_outputs`` outputs) under one handle tuple: the handles of the delegated nodes in graph order.
ExecuTorch's rule pairs output ``i`` counted from the end with the handle at position ``-(i+1)`` of
that tuple, which holds when the delegate's last nodes are its outputs in reverse order. A recurrent
cell breaks it: an XNNPACK partition of an LSTM step returns ``(c, h, gates)`` — ``c`` is computed
before ``h``, and nodes of the next step follow both — so the rule compares ``c`` with ``h``'s
reference (MSE 0.09 on an exact program) or the ``(5, 3, 20)`` stacked sequence with a ``(3, 20)``
state.

The outputs of a partition are its *boundary* nodes: nodes of the partition whose values are read by
a node outside it or returned by the program. The lowering (torch.fx's ``fuse_as_graphmodule``, which
ExecuTorch's partitioners use) returns them in graph order. :class:`DelegateOutputs` computes that list
from the edge program of the ETRecord (the program the partitioner saw; its nodes carry the handles
the runtime logs), for any set of handles::

    outs = DelegateOutputs.from_record(record)
    outs.output_handles((26, 16, 17, 18, 19, 20, 21, 22, 23, 24, 27, 28))   # [22, 24, 28]

``None`` means "cannot tell" (no edge program, a program already lowered, a handle without a node):
the caller then keeps ExecuTorch's rule and its shape checks.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

__all__ = ["DelegateOutputs", "lazy_output_handles"]

log = logging.getLogger(__name__)


class DelegateOutputs:
    """Boundary nodes of a set of handles in one program, in graph order.

    Built from a flat node list: ``(handle or None, output value names, input value names)`` per
    operator node in graph order, and the names the program returns.
    """

    def __init__(self, nodes: list[tuple[int | None, list[str], list[str]]], graph_outputs: Iterable[str]):
        self._handles = [h for h, _, _ in nodes]
        self._outs = [o for _, o, _ in nodes]
        self._producer: dict[str, int] = {}
        for i, (_, outs, _) in enumerate(nodes):
            for name in outs:
                self._producer[name] = i
        # value name -> positions of the nodes that read it
        self._readers: dict[str, list[int]] = {}
        for i, (_, _, ins) in enumerate(nodes):
            for name in ins:
                self._readers.setdefault(name, []).append(i)
        self._returned = set(graph_outputs)
        self._by_handle: dict[int, list[int]] = {}
        for i, h in enumerate(self._handles):
            if h is not None:
                self._by_handle.setdefault(h, []).append(i)
        self._cache: dict[frozenset, list[int] | None] = {}

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_record(cls, record: Any) -> "DelegateOutputs | None":
        """From the edge program of an ETRecord (etlens' or ExecuTorch's); None when it has none."""
        from ..record import as_record
        from .capture import pick_edge_stage

        rec = as_record(record)
        try:
            stage = pick_edge_stage(rec.stages())
            if stage is None:
                return None
            if rec.etlens is not None:
                return cls.from_json(rec.etlens.program_json(stage))
            return cls.from_fx(rec.load_program(stage))
        except Exception as exc:  # an unreadable edge program only costs the refinement
            log.info("delegate outputs unavailable: %s: %s", type(exc).__name__, exc)
            return None

    @classmethod
    def from_json(cls, doc: dict) -> "DelegateOutputs":
        """From a torch.export-schema JSON program (the ETRecord's own entry)."""
        from .jsonrun import input_names, output_names, parse_handle

        graph = (doc.get("graph_module") or {}).get("graph") or {}
        nodes = []
        for n in graph.get("nodes", []):
            handle = parse_handle((n.get("metadata") or {}).get("debug_handle"))
            nodes.append((_one_handle(handle), output_names(n.get("outputs", [])),
                          input_names(n.get("inputs", []))))
        returned = []
        for out in graph.get("outputs", []):
            for kind, v in out.items():
                if kind == "as_tensor":
                    returned.append(v["name"])
                elif kind == "as_tensors":
                    returned.extend(t["name"] for t in v)
        return cls(nodes, returned)

    @classmethod
    def from_fx(cls, program: Any) -> "DelegateOutputs":
        """From an ``ExportedProgram`` / ``GraphModule`` (getitem nodes fold into their producer)."""
        import operator

        gm = getattr(program, "graph_module", program)
        nodes = []
        alias: dict[str, str] = {}  # getitem name -> producer name
        for n in gm.graph.nodes:
            if n.op != "call_function":
                continue
            ins = [alias.get(a.name, a.name) for a in n.all_input_nodes]
            if n.target is operator.getitem and n.args and hasattr(n.args[0], "name"):
                alias[n.name] = alias.get(n.args[0].name, n.args[0].name)
                continue
            nodes.append((_one_handle(n.meta.get("debug_handle")), [n.name], ins))
        returned = [alias.get(a.name, a.name) for a in gm.graph.output_node().all_input_nodes]
        return cls(nodes, returned)

    # -- the answer ------------------------------------------------------------------------------
    def output_handles(self, handles: Iterable[int]) -> list[int] | None:
        """Handles of the nodes a partition made of ``handles`` returns, in the order it returns them.

        ``None`` when a handle has no node in this program (another program, or already lowered).
        """
        key = frozenset(handles)
        if key in self._cache:
            return self._cache[key]
        members: set[int] = set()
        for h in key:
            found = self._by_handle.get(h)
            if not found:
                self._cache[key] = None
                return None
            members.update(found)
        outs: list[int] = []
        for i in sorted(members):
            if any(name in self._returned or any(r not in members for r in self._readers.get(name, ()))
                   for name in self._outs[i]):
                h = self._handles[i]
                if h is not None:
                    outs.append(h)
        self._cache[key] = outs
        return outs


def _one_handle(handle: Any) -> int | None:
    if isinstance(handle, int):
        return handle
    if isinstance(handle, (list, tuple)) and len(handle) == 1 and isinstance(handle[0], int):
        return handle[0]
    if isinstance(handle, str) and handle.strip().isdigit():
        return int(handle)
    return None


def lazy_output_handles(record: Any) -> Callable[[Iterable[int]], list[int] | None]:
    """``DelegateOutputs.from_record(record).output_handles``, built on the first call only.

    Pairing asks only for events with several outputs; a program without one never parses its edge
    program again (a 1000-layer program's JSON costs a noticeable part of the first gap table).
    """
    state: dict[str, Any] = {}

    def output_handles(handles: Iterable[int]) -> list[int] | None:
        if "outs" not in state:
            state["outs"] = DelegateOutputs.from_record(record)
        outs = state["outs"]
        return outs.output_handles(handles) if outs is not None else None

    return output_handles
