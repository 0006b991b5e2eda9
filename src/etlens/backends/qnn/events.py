"""Time inside QNN (analysis floor): which graph node each QNN profiling event belongs to, and in what unit.

With ``profile_level=2`` (``kProfileDetailed``) ExecuTorch's QnnBackend logs, inside each
``DELEGATE_CALL``, the records of QNN's profiler as delegate events whose value is the record's
number (ExecuTorch stores it as a duration):

* per-op cycles: ``<fx node>:OpId_<n> (cycles)``, one per QNN op, named after the fx node its builder
  made it from (``aten_relu_default:OpId_26 (cycles)``); ops the backend inserted carry the name of
  the node ExecuTorch's QNN passes created for them (a layout permute ``aten_permute_copy_default_5``,
  a boundary ``quantize``), and the graph's own I/O ops are ``Input OpId_2`` / ``Output OpId_3``;
* totals of the whole graph: ``Accelerator (execute) time (cycles)`` (the sum of the per-op cycles),
  ``Accelerator (execute) time (us)``, ``QNN (execute) time (us)``, ``Time for initial VTCM acquire (us)``;
* counters: ``Number of HVX threads used (count)``, ``Num times yield occured (count)``.

:class:`QnnAttributor` maps each per-op event to the node it is named after (``nodes``), or, for an
inserted op, to the node it serves (the next op of the graph that is a node of the ETRecord; the
previous one at the graph's end), labelled ``inserted``. Units stay what they are: per-op events are
``cycles`` (the core keeps them apart from milliseconds: ``cycles_avg``), totals and counters belong to
no node (``total``), and the accelerator's cycle total and its µs time form the delegate's own clock
(``clock``), from which the core estimates a per-op time, labelled estimated.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from etlens.analysis.attribution.types import EventMatch

__all__ = ["QnnAttributor", "parse_event", "PER_OP"]

_OP = re.compile(r"^(?P<node>.+?):OpId_(?P<id>\d+) \((?P<unit>[^)]*)\)$")
_IO = re.compile(r"^(?P<io>Input|Output) OpId_(?P<id>\d+) \((?P<unit>[^)]*)\)$")
_BARE = re.compile(r"^OpId_(?P<id>\d+) \((?P<unit>[^)]*)\)$")
_UNIT = re.compile(r"\((?P<unit>[^()]*)\)\s*$")
#: kinds :func:`parse_event` returns for events of one QNN op
PER_OP = ("op", "io", "bare")
_UNITS = {"cycles": "cycles", "us": "us", "count": "count"}


def parse_event(name: str) -> dict[str, Any]:
    """``{kind, node, op_id, unit}`` of one QNN profiling event name.

    ``kind``: ``op`` (named after an fx node), ``io`` (the graph's Input/Output op), ``bare`` (an op
    with only an id), or ``total`` (a whole-graph figure or a counter).
    """
    m = _OP.match(name)
    if m:
        return {"kind": "op", "node": m["node"], "op_id": int(m["id"]), "unit": _UNITS.get(m["unit"], m["unit"])}
    m = _IO.match(name)
    if m:
        return {"kind": "io", "node": m["io"], "op_id": int(m["id"]), "unit": _UNITS.get(m["unit"], m["unit"])}
    m = _BARE.match(name)
    if m:
        return {"kind": "bare", "node": "", "op_id": int(m["id"]), "unit": _UNITS.get(m["unit"], m["unit"])}
    u = _UNIT.search(name)
    unit = _UNITS.get(u["unit"], "") if u else ""
    return {"kind": "total", "node": "", "op_id": None, "unit": unit}


def _known(node: str, graph_nodes: set[str]) -> tuple[str, str]:
    """(graph node, quality) for an op named ``node``: the node itself (``exact``), a node whose name it
    extends with a word (``alias``: one builder made several QNN ops, ``aten_linear_default_reshape``),
    else ("", "")."""
    if node in graph_nodes:
        return node, "exact"
    parts = node.split("_")
    for cut in range(len(parts) - 1, 2, -1):
        tail = parts[cut:]
        if all(p.isdigit() for p in tail):
            continue  # ``aten_permute_copy_default_5`` is another node, never an alias of the first
        head = "_".join(parts[:cut])
        if head in graph_nodes:
            return head, "alias"
    return "", ""


class QnnAttributor:
    """The ``events`` hook of the QNN backend (see the module docstring)."""

    takes_graph_nodes = True

    def match(self, event_names: Sequence[str], delegate: Any, graph_nodes: Sequence[str] = ()) -> list[EventMatch]:
        known = set(graph_nodes)
        parsed = [parse_event(n) for n in event_names]
        # the graph node of each per-op event named after one (None: inserted by the backend, or unknown)
        own: list[tuple[str, str]] = []
        for p in parsed:
            own.append(_known(p["node"], known) if p["kind"] == "op" and known else ("", ""))
        out: list[EventMatch] = []
        for i, (name, p) in enumerate(zip(event_names, parsed, strict=True)):
            if p["kind"] == "total" or p["unit"] in ("us", "count"):
                clock = ""
                if name.startswith("Accelerator (execute) time"):
                    clock = "cycles" if p["unit"] == "cycles" else "time"
                out.append(EventMatch(name, quality="total", note="a whole-delegate figure of QNN's profiler",
                                      unit=p["unit"] or "", total=True, clock=clock))
                continue
            unit = p["unit"] or "cycles"
            op = f"qnn.{p['node'] or 'op'}#{p['op_id']}"
            if not known:
                # no ETRecord: the name is all there is
                out.append(EventMatch(name, backend_ops=(op,), quality="exact" if p["kind"] == "op" else "inserted",
                                      nodes=(p["node"],) if p["kind"] == "op" else (), unit=unit))
                continue
            node, quality = own[i]
            if node:
                out.append(EventMatch(name, backend_ops=(op,), quality=quality, nodes=(node,), unit=unit,
                                      note="" if quality == "exact" else f"a QNN op ExecuTorch's {node} builder made"))
                continue
            served, where = self._served(own, i, p)
            what = {"io": f"the QNN graph's {p['node'].lower()} op",
                    "bare": "an op QNN added without a name"}.get(p["kind"], f"{p['node']}, inserted by the backend")
            if served:
                out.append(EventMatch(name, backend_ops=(op,), quality="inserted", nodes=(served,), unit=unit,
                                      note=f"{what}; serves {served} ({where} op of the graph)"))
            else:
                out.append(EventMatch(name, backend_ops=(op,), quality="unattributed", unit=unit,
                                      note=f"{what}; no node of the ETRecord near it"))
        return out

    @staticmethod
    def _served(own: list[tuple[str, str]], i: int, p: dict[str, Any]) -> tuple[str, str]:
        """The node an inserted op at event ``i`` serves: the next known op (its consumer), or at the graph's
        end (``Output``, a trailing permute/dequantize) the previous one (its producer)."""
        after = [own[j][0] for j in range(i + 1, len(own)) if own[j][0]]
        before = [own[j][0] for j in range(i - 1, -1, -1) if own[j][0]]
        if p["kind"] == "io" and p["node"] == "Output":
            return (before[0], "previous") if before else ("", "")
        if after:
            return after[0], "next"
        return (before[0], "previous") if before else ("", "")
