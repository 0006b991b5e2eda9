"""Attribute every timed event of an ETDump to ATen nodes, inside delegates too; measure the framework tax.

:func:`attribute` walks the inspector's event blocks. Operator events (``native_call_*``) already
carry debug handles from the ETRecord. Events logged *inside* a ``DELEGATE_CALL`` (same
instruction id, ``is_delegated``) are handed, per delegate call, to the backend's attributor
(:mod:`.base` registry; XNNPACK built in) with the ``.pte``'s delegate, which returns the debug
handles each event ran; the ETRecord then names the ATen nodes, module paths and source lines.
Whatever cannot be attributed stays an explicit ``<unattributed>`` row, never spread.

Framework tax, per run: the part of ``Method::execute`` no operator or delegate event covers
(``framework_ms``) and the part of each ``DELEGATE_CALL`` its internal events do not cover
(``delegate_overhead_ms``).

Example::

    from etlens.analysis.attribution import attribute
    att = attribute(inspector, pte="model.pte")
    att.summary()        # {'delegate_ms': ..., 'attributed_ms': ..., 'framework_ms': ..., ...}
    att.rows             # one NodeTime per ATen node (or unattributed remainder)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...model.events import calculate_time_scale_factor
from ...schema import DELEGATE_CALL, FRAMEWORK_EVENT_NAMES, METHOD_EXECUTE, OPERATOR_CALL
from .base import EventMatch, attributor_for

__all__ = ["NodeTime", "EventAttribution", "Attribution", "attribute", "UNATTRIBUTED"]

UNATTRIBUTED = "<unattributed>"
_QUANT_OPS = ("quantize_per", "dequantize_per", "choose_qparams")
# ops that only move or reshape data: a group sharing one handle is named after its compute op
_LAYOUT_OPS = ("view_copy", "expand_copy", "permute_copy", "clone", "squeeze_copy", "unsqueeze_copy", "_to_copy",
               "slice_copy", "select_copy", "transpose_copy", "t_copy", "alias_copy", "getitem")
_LINE = re.compile(r'File "([^"]+)", line (\d+)')


@dataclass
class NodeTime:
    """Time of one ATen node (or group of nodes sharing debug handles), per run, in ms."""

    node: str
    debug_handles: tuple[int, ...]
    op: str = ""
    module_path: str = ""
    module_type: str = ""
    in_module: bool = False      # the node's module stack is known (module_path "" = the root module)
    source_line: str = ""
    inside_delegate: bool = False
    backend: str = ""
    backend_ops: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    runs: dict[int, float] = field(default_factory=dict)     # run index -> ms
    match: str = ""
    cycles: dict[int, float] = field(default_factory=dict)   # run index -> accelerator cycles (never ms)
    estimated: dict[int, float] = field(default_factory=dict)  # run index -> ms estimated from cycles

    def times(self) -> np.ndarray:
        return np.asarray([self.runs[r] for r in sorted(self.runs)], dtype=np.float64)

    def stats(self) -> dict[str, float]:
        t = self.times()
        if not t.size:
            return {"p10": float("nan"), "p50": float("nan"), "p90": float("nan"), "avg": float("nan")}
        p10, p50, p90 = np.percentile(t, [10, 50, 90])
        return {"p10": float(p10), "p50": float(p50), "p90": float(p90), "avg": float(t.mean())}

    def to_json(self) -> dict[str, Any]:
        s = self.stats()
        return {"node": self.node, "debug_handles": list(self.debug_handles), "op": self.op,
                "module_path": self.module_path, "module_type": self.module_type, "in_module": self.in_module,
                "source_line": self.source_line,
                "inside_delegate": self.inside_delegate, "backend": self.backend,
                "backend_ops": list(self.backend_ops), "events": list(self.events), "match": self.match,
                "p10_ms": s["p10"], "p50_ms": s["p50"], "p90_ms": s["p90"], "avg_ms": s["avg"],
                **self.cycle_stats()}

    def cycle_stats(self) -> dict[str, Any]:
        """``cycles_avg`` (accelerator cycles per run) and ``estimated_avg_ms`` (those cycles at the
        delegate's own clock: an estimate, not a measurement); None when the node has no cycle events."""
        if not self.cycles:
            return {"cycles_avg": None, "estimated_avg_ms": None}
        c = np.asarray([self.cycles[r] for r in sorted(self.cycles)], dtype=np.float64)
        e = [self.estimated[r] for r in sorted(self.estimated)]
        return {"cycles_avg": float(c.mean()), "estimated_avg_ms": float(np.mean(e)) if e else None}


@dataclass
class EventAttribution:
    """One delegate-internal event: where it sits (block, row, instruction) and what it ran."""

    block: int
    index: int
    instruction: int
    delegate_index: int | None
    backend: str
    match: EventMatch
    node: str = UNATTRIBUTED
    module_path: str = ""
    op: str = ""


@dataclass
class Attribution:
    """Result of :func:`attribute` (times in ms, averaged over runs unless ``*_per_run``)."""

    rows: list[NodeTime]
    events: list[EventAttribution]
    execute_per_run: list[float]
    framework_per_run: list[float]
    delegate_per_run: list[float]
    delegate_internal_per_run: list[float]
    delegate_overhead_per_run: list[float]
    attributed_per_run: list[float]
    operator_per_run: list[float]
    #: whole-delegate figures kept out of every node row: {event, backend, unit, per_run}
    delegate_metrics: list[dict[str, Any]] = field(default_factory=list)
    cycles_per_run: list[float] = field(default_factory=list)
    cycles_attributed_per_run: list[float] = field(default_factory=list)

    @staticmethod
    def _avg(v: list[float]) -> float:
        return float(np.mean(v)) if v else 0.0

    def summary(self) -> dict[str, Any]:
        """The headline numbers (the JSON keys of ``etlens inspect --by-node``)."""
        delegate = self._avg(self.delegate_per_run)
        internal = self._avg(self.delegate_internal_per_run)
        attributed = self._avg(self.attributed_per_run)
        return {
            "execute_ms": self._avg(self.execute_per_run),
            "operator_ms": self._avg(self.operator_per_run),
            "delegate_ms": delegate,
            "delegate_internal_ms": internal,
            "attributed_ms": attributed,
            "unattributed_ms": max(internal - attributed, 0.0),
            "delegate_overhead_ms": self._avg(self.delegate_overhead_per_run),
            "framework_ms": self._avg(self.framework_per_run),
            "attributed_fraction": attributed / internal if internal > 0 else None,
            "attributed_fraction_of_delegate": attributed / delegate if delegate > 0 else None,
            "runs": len(self.execute_per_run),
            "framework_ms_per_run": list(self.framework_per_run),
            "delegate_overhead_ms_per_run": list(self.delegate_overhead_per_run),
            "matches": _count(m.match.quality for m in self.events),
            **self._cycle_summary(),
        }

    def _cycle_summary(self) -> dict[str, Any]:
        if not self.cycles_per_run and not self.delegate_metrics:
            return {}
        cyc = self._avg(self.cycles_per_run)
        att = self._avg(self.cycles_attributed_per_run)
        return {"cycles_avg": cyc, "cycles_attributed_avg": att,
                "cycles_attributed_fraction": att / cyc if cyc > 0 else None,
                "cycle_events": sum(1 for e in self.events if e.match.unit == "cycles"),
                "delegate_metrics": [{**m, "avg": self._avg(m["per_run"])} for m in self.delegate_metrics]}

    def to_json(self) -> dict[str, Any]:
        return {"rows": [r.to_json() for r in self.rows], **self.summary()}

    def time_by_module(self) -> dict[str, float]:
        """Average ms per module path (every prefix counts its descendants), delegate time included."""
        out: dict[str, float] = {}
        for r in self.rows:
            avg = r.stats()["avg"]
            if not np.isfinite(avg):
                continue
            parts = r.module_path.split(".") if r.module_path else []
            out[""] = out.get("", 0.0) + avg
            for n in range(1, len(parts) + 1):
                key = ".".join(parts[:n])
                out[key] = out.get(key, 0.0) + avg
        return out


def _count(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


def _union_ms(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -float("inf")
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def _node_facts(infos: list, kernel: str = "") -> tuple[str, str, str, str, str, bool]:
    """(node name, op, module path, module type, source line) of the principal node of a handle group:
    the first that is not a quantize/dequantize step."""
    if not infos:
        return "", "", "", "", "", False
    def rank(x: Any) -> int:
        op = x[1] or ""
        return 2 if any(q in op for q in _QUANT_OPS) else 1 if any(q in op for q in _LAYOUT_OPS) else 0

    if kernel.startswith("native_call_"):
        # a portable kernel event: the node whose op the kernel implements (``native_call_expand_copy.out``)
        base = kernel[len("native_call_"):].split(".")[0]
        same = [x for x in infos if (x[1] or "").split(".")[-2:-1] == [base]
                or base in (x[1] or "").split(".")]
        if same:
            infos = same
    best = min(rank(x) for x in infos)
    main = [x for x in infos if rank(x) == best][-1]
    name, op, trace, stack = main
    path = mtype = ""
    if stack:
        last = list(stack.values())[-1]
        if isinstance(last, (tuple, list)) and last:
            path = str(last[0])
            mtype = str(last[1]) if len(last) > 1 else ""
            if path.startswith("L['self']."):
                path = path[len("L['self']."):]
    line = ""
    if trace:
        hits = _LINE.findall(trace)
        if hits:
            f, n = hits[-1]
            line = f"{os.path.basename(f)}:{n}"
    return name.rstrip("_"), op, path, mtype, line, bool(stack)


def _load_pte(pte: Any):
    if pte is None or hasattr(pte, "program"):
        return pte
    from ...readers.pte import read

    return read(pte)


def attribute(inspector: Any, pte: Any = None) -> Attribution:
    """Attribute the inspector's timings to nodes (see module docstring).

    ``inspector``: an :class:`etlens.analysis.inspector.Inspector` (with an ETRecord for node
    names, module paths and source lines); ``pte``: the program (path or a read ``PteArtifact``),
    needed to look inside delegates. Without it delegate-internal time stays unattributed.
    """
    walker = _Walker(inspector, _load_pte(pte))
    for bi, b in enumerate(inspector.block_columns):
        walker.block(bi, b)
    return walker.result()


_TOTALS = ("execute", "framework", "delegate", "internal", "overhead", "attributed", "operator", "cycles",
           "cycles_attributed")


class _Walker:
    """Accumulates rows, events and per-run totals block by block (runs numbered across blocks)."""

    def __init__(self, inspector: Any, program: Any) -> None:
        self.inspector = inspector
        self.program = program
        self.scale = calculate_time_scale_factor(inspector.source_time_scale, inspector.target_time_scale)
        self.methods = getattr(inspector, "_block_methods", None) or []
        self.nodes_of: dict[str, dict] = {}
        self.rows: dict[tuple, NodeTime] = {}
        self.events: list[EventAttribution] = []
        self.metrics: list[dict[str, Any]] = []
        self.per_run: dict[str, dict[int, float]] = {k: {} for k in _TOTALS}
        self.run_base = 0
        # per-block state, set by block()
        self.nodes: dict = {}
        self.raw = np.zeros((0, 0))
        self.k = 0

    def _nodes_for(self, method: str) -> dict:
        from ..inspector.etrecord import handle_to_nodes

        if method not in self.nodes_of:
            rec = self.inspector.record
            self.nodes_of[method] = handle_to_nodes(rec, method) if rec is not None else {}
        return self.nodes_of[method]

    def _row(self, key: tuple, handles: tuple[int, ...], inside: bool, backend: str = "",
             kernel: str = "", only: str = "") -> NodeTime:
        r = self.rows.get(key)
        if r is None:
            infos = [x for h in handles for x in self.nodes.get(h, ())]
            if only:  # the event names its node: that node's facts, not its handle group's principal node
                infos = [x for x in infos if str(x[0]).rstrip("_") == only] or infos
            name, op, path, mtype, line, known = _node_facts(infos, kernel)
            r = self.rows[key] = NodeTime(
                node=name or (UNATTRIBUTED if not handles else f"handles {list(handles)}"), debug_handles=handles,
                op=op, module_path=path, module_type=mtype, in_module=known, source_line=line,
                inside_delegate=inside, backend=backend)
        return r

    def _add(self, r: NodeTime, i: int, event: str, extra: list[str] | tuple = ()) -> None:
        for j in range(self.k):
            g = self.run_base + j
            r.runs[g] = r.runs.get(g, 0.0) + float(self.raw[i, j])
        if event not in r.events:
            r.events.append(event)
        for x in extra:
            if x not in r.backend_ops:
                r.backend_ops.append(x)

    def _total(self, key: str, g: int, v: float) -> None:
        d = self.per_run[key]
        d[g] = d.get(g, 0.0) + v

    def block(self, bi: int, b: Any) -> None:
        method = self.methods[bi] if bi < len(self.methods) else "forward"
        self.nodes = self._nodes_for(method)
        plan = _plan(self.program, method)
        self.k = len(b.runs)
        self.raw = raw = np.nan_to_num(b.raw, nan=0.0)
        start_ms = b.start.astype(np.float64) / self.scale
        end_ms = start_ms + raw
        # group delegate-internal events by instruction (their DELEGATE_CALL's)
        internal: dict[int, list[int]] = {}
        calls: dict[int, int] = {}
        execute_rows: list[int] = []
        top_rows: list[int] = []
        kr = self.k if METHOD_EXECUTE in b.names else 0   # per-run totals: runs of Method::execute only
        for i, name in enumerate(b.names):
            if not b.has_perf[i]:
                continue
            instr = int(b.instruction_ids[i])
            if b.is_delegated[i]:
                internal.setdefault(instr, []).append(i)
            elif name == METHOD_EXECUTE:
                execute_rows.append(i)
            elif name == DELEGATE_CALL:
                calls[instr] = i
                top_rows.append(i)
            elif name == OPERATOR_CALL:
                top_rows.append(i)
            elif name not in FRAMEWORK_EVENT_NAMES:
                # a kernel event (native_call_*) or an operator without OPERATOR_CALL around it
                handles = _handles(b.debug_handles[i])
                self._add(self._row(("op", handles, name), handles, False, kernel=name), i, name)
                for j in range(kr):
                    self._total("operator", self.run_base + j, float(raw[i, j]))
        for instr, idxs in internal.items():
            self._delegate_events(bi, b, instr, idxs, plan, calls, kr)
        for j in range(kr):
            g = self.run_base + j
            for key in ("internal", "attributed", "operator"):
                self.per_run[key].setdefault(g, 0.0)
            dsum = osum = 0.0
            for instr, ci in calls.items():
                dsum += float(raw[ci, j])
                ivs = [(start_ms[i, j], end_ms[i, j]) for i in internal.get(instr, ())]
                osum += max(float(raw[ci, j]) - _union_ms(ivs), 0.0) if ivs else float(raw[ci, j])
            self.per_run["delegate"][g] = dsum
            self.per_run["overhead"][g] = float(osum)
            for ei in execute_rows[:1]:
                ex = float(raw[ei, j])
                ivs = [(start_ms[i, j], end_ms[i, j]) for i in top_rows]
                self.per_run["execute"][g] = ex
                self.per_run["framework"][g] = float(max(ex - _union_ms(ivs), 0.0))
        self.run_base += self.k

    def _delegate_events(self, bi: int, b: Any, instr: int, idxs: list[int], plan: Any, calls: dict[int, int],
                         kr: int) -> None:
        method = self.methods[bi] if bi < len(self.methods) else "forward"
        delegate_index, delegate = _delegate(plan, instr)
        backend = b.backend_names[calls[instr]] if instr in calls else ""
        backend = backend or (delegate.id if delegate is not None else "")
        att = attributor_for(backend)
        names = [b.names[i] for i in idxs]
        if self.program is not None and delegate is None:
            why = (f"the .pte has no delegate call at instruction {instr} of method {method!r}: "
                   "is it the program this ETDump was recorded from?")
            matches = [EventMatch(n, note=why) for n in names]
        elif att is None:
            matches = [EventMatch(n, note=f"etlens has no decoder for backend {backend or '?'} yet: its events "
                                          "stay by name, its time one block") for n in names]
        elif getattr(att, "takes_graph_nodes", False):
            matches = att.match(names, delegate, graph_nodes=tuple(self._by_name()))
        else:
            matches = att.match(names, delegate)
        by_name = self._by_name()
        for mt in matches:  # events named after graph nodes: the ETRecord gives their handles
            if not mt.handles and mt.nodes:
                mt.handles = tuple(by_name[n] for n in mt.nodes if n in by_name)
        # the ETRecord says which handles this delegate holds: a match outside them is a wrong program
        known = set(_handles(b.debug_handles[calls[instr]])) if instr in calls else set()
        if known:
            for mt in matches:
                if mt.nodes:
                    continue  # resolved by node name: the lowered graph's handles need not be the ETRecord's
                stray = [h for h in mt.handles if h not in known]
                if stray:
                    mt.handles = tuple(h for h in mt.handles if h in known)
                    mt.note = (f"debug handle(s) {stray} are not in this delegate per the ETRecord (is the .pte the "
                               "program of this ETDump?)" + (f"; {mt.note}" if mt.note else ""))
                    if not mt.handles:
                        mt.quality = "unattributed"
        ms_per_cycle = self._clock(idxs, matches)
        for i, mt in zip(idxs, matches, strict=True):
            if mt.total or mt.unit in ("count", "us"):
                # a counter or the delegate's own timer: reported per delegate, never inside a node's time
                self._metric(backend, b.names[i], mt.unit or "ms", i)
                self.events.append(EventAttribution(bi, i, instr, delegate_index, backend, mt, ""))
                continue
            if mt.handles:
                # named by the matched node's own (first) handle when the ETRecord knows it; nodes
                # fused into it only add their handles
                main = mt.handles[:1] if self.nodes.get(mt.handles[0]) else mt.handles
                only = mt.nodes[0] if mt.nodes else ""
                name = only or _node_facts([x for h in main for x in self.nodes.get(h, ())])[0]
                r = self._row(("d", backend, name or main), main, True, backend, only=only)
                r.debug_handles = tuple(dict.fromkeys(r.debug_handles + mt.handles))
            else:
                r = self._row(("u", backend, instr), (), True, backend)
            if mt.unit == "cycles":
                self._add_cycles(r, i, b.names[i], list(mt.backend_ops) + list(mt.fused), ms_per_cycle, kr)
            else:
                self._add(r, i, b.names[i], list(mt.backend_ops) + list(mt.fused))
            if not r.match or mt.quality != "exact":
                r.match = mt.quality if not r.match or r.match == "exact" else r.match
            self.events.append(EventAttribution(bi, i, instr, delegate_index, backend, mt, r.node, r.module_path, r.op))
            if mt.unit == "cycles":
                continue
            for j in range(kr):
                g = self.run_base + j
                v = float(self.raw[i, j])
                self._total("internal", g, v)
                if mt.handles and r.in_module:
                    self._total("attributed", g, v)

    def _by_name(self) -> dict[str, int]:
        """``{node name: debug handle}`` of the current method's graph (names as the ETRecord spells them)."""
        out: dict[str, int] = {}
        for h, infos in self.nodes.items():
            for x in infos:
                out.setdefault(str(x[0]).rstrip("_"), h)
        return out

    def _metric(self, backend: str, name: str, unit: str, i: int) -> None:
        scale = self.scale if unit in ("count", "us", "cycles") else 1.0  # raw ticks, not ms
        m = next((x for x in self.metrics if x["event"] == name and x["backend"] == backend), None)
        if m is None:
            m = {"event": name, "backend": backend, "unit": unit, "per_run": []}
            self.metrics.append(m)
        m["per_run"].extend(float(self.raw[i, j]) * scale for j in range(self.k))

    def _clock(self, idxs: list[int], matches: list[EventMatch]) -> list[float | None]:
        """Per run, ms per accelerator cycle from the delegate's own clock (its cycle total and the time of
        the same work), or None when the delegate reports no such pair."""
        out: list[float | None] = []
        for j in range(self.k):
            cyc = sum(float(self.raw[i, j]) * self.scale for i, m in zip(idxs, matches) if m.clock == "cycles")
            ms = sum(float(self.raw[i, j]) * (self.scale / 1000.0 if m.unit == "us" else 1.0)
                     for i, m in zip(idxs, matches) if m.clock == "time")
            out.append(ms / cyc if cyc > 0 and ms > 0 else None)
        return out

    def _add_cycles(self, r: NodeTime, i: int, event: str, extra: list[str], ms_per_cycle: list, kr: int) -> None:
        for j in range(self.k):
            g = self.run_base + j
            c = float(self.raw[i, j]) * self.scale
            r.cycles[g] = r.cycles.get(g, 0.0) + c
            if ms_per_cycle[j] is not None:
                r.estimated[g] = r.estimated.get(g, 0.0) + c * ms_per_cycle[j]
            if j < kr:
                self._total("cycles", g, c)
                if r.debug_handles and r.in_module:
                    self._total("cycles_attributed", g, c)
        if event not in r.events:
            r.events.append(event)
        for x in extra:
            if x not in r.backend_ops:
                r.backend_ops.append(x)

    def result(self) -> Attribution:
        def seq(key: str) -> list[float]:
            d = self.per_run[key]
            return [d[g] for g in sorted(d)]

        # by mean time (what stats()["avg"] is), without its percentiles: 3 per row cost seconds on 1000s of rows
        ordered = sorted(self.rows.values(), key=lambda r: -float(np.mean(list(r.runs.values()))) if r.runs else 0.0)
        return Attribution(rows=ordered, events=self.events, execute_per_run=seq("execute"),
                           framework_per_run=seq("framework"), delegate_per_run=seq("delegate"),
                           delegate_internal_per_run=seq("internal"), delegate_overhead_per_run=seq("overhead"),
                           attributed_per_run=seq("attributed"), operator_per_run=seq("operator"),
                           delegate_metrics=self.metrics, cycles_per_run=seq("cycles"),
                           cycles_attributed_per_run=seq("cycles_attributed"))


def _handles(h: Any) -> tuple[int, ...]:
    return () if h is None else ((h,) if isinstance(h, int) else tuple(h))


def _plan(program: Any, method: str) -> Any:
    if program is None:
        return None
    plans = program.program.execution_plan
    for p in plans:
        if p.name == method:
            return p
    return plans[0] if len(plans) == 1 else None


def _delegate(plan: Any, instr: int) -> tuple[int | None, Any]:
    if plan is None:
        return None, None
    ins = plan.instructions()
    if 0 <= instr < len(ins) and ins[instr].delegate_index is not None:
        di = ins[instr].delegate_index
        if 0 <= di < len(plan.delegates):
            return di, plan.delegates[di]
    return None, None
