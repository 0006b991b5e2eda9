"""What did the backend take, and what fell back to the portable kernels?

:func:`get_delegation_info` answers with the same object as ExecuTorch's
``executorch.devtools.backend_debug.get_delegation_info``: ``num_delegated_subgraphs``,
``num_delegated_nodes``, ``num_non_delegated_nodes``, ``delegation_by_operator``,
``get_summary()`` and ``get_operator_delegation_dataframe()`` (same text, same columns, same
numbers). It accepts more than a ``GraphModule``:

* an in-memory lowered program: ``torch.fx.GraphModule``, ``ExportedProgram``,
  ``EdgeProgramManager`` / ``ExecutorchProgramManager`` (the method is chosen with ``method=``);
* an ``.etrecord`` path: ExecuTorch records the edge program *before* partitioning, so ExecuTorch's
  own function reports zero delegates on it. etlens rebuilds the lowered view from the record's
  ``debug_handle_map`` / ``delegate_map`` / ``instruction_id_to_num_outs_map`` (each delegate lists
  the debug handle of every node it swallowed), which gives the numbers ExecuTorch reports on the
  lowered program itself. ``etrecord_view="recorded"`` gives ExecuTorch's answer on the recorded
  program instead;
* a ``.pte`` path: a program file has no fx nodes inside delegates. Delegated rows are the backend's
  own operations when etlens can decode the payload (XNNPACK: ``FullyConnected`` … after fusion,
  so one row may stand for several fx nodes), non-delegated rows are the kernel calls spelled like fx
  names (``aten::cumsum.out`` → ``aten_cumsum_out``), and there are no ``getitem`` nodes;
* a ``.pt2`` (never delegated), pass-trace JSON (last snapshot) or an etlens :class:`Graph`.

Beyond ExecuTorch the result carries a per-backend breakdown (:attr:`DelegationInfo.backends`),
the delegated share per operator and overall (:meth:`DelegationInfo.get_share_dataframe`,
:attr:`DelegationInfo.delegated_share`), every non-delegated node, and - when you pass the
``partitioner=`` you lowered with - the partitioner's own reason for each fallback
(:attr:`DelegationInfo.reasons`).

Example::

    from etlens import get_delegation_info, print_delegated_graph
    info = get_delegation_info(edge_manager, partitioner=XnnpackPartitioner())
    print(info.get_summary())
    print(info.get_operator_delegation_dataframe())
    print(info.format_report())          # backends, shares, fallbacks and why
    print_delegated_graph(edge_manager.exported_program().graph_module)
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from ...errors import EtlensError
from ...model import Graph, Node
from .facts import STRUCTURAL
from ...readers.program import ProgramResolver, ResolvedProgram, default_resolver, is_graph_module, resolve_program

__all__ = [
    "DelegationBreakdown",
    "DelegationInfo",
    "NonDelegatedNode",
    "KNOWN_BACKENDS",
    "get_delegation_info",
    "format_delegated_graph",
    "print_delegated_graph",
    "delegation_graph",
    "info_from_graph",
    "format_graph_text",
    "ResolvedProgram",
    "ProgramResolver",
    "resolve_program",
    "default_resolver",
]

#: Column names of :meth:`DelegationInfo.get_operator_delegation_dataframe` (as in ExecuTorch).
DELEGATED_COLUMN = "occurrences_in_delegated_graphs"
NON_DELEGATED_COLUMN = "occurrences_in_non_delegated_graphs"

#: Backend ids of the backends ExecuTorch ships. Another id is reported as unknown (still counted).
KNOWN_BACKENDS = frozenset(
    """XnnpackBackend CoreMLBackend MPSBackend QnnBackend VulkanBackend ArmBackend EthosUBackend
    VgfBackend TOSABackend NeuronBackend CadenceBackend NnapiBackend OpenvinoBackend
    SamsungBackend EnnBackend NeutronBackend CortexMBackend BackendWithCompilerDemo
    BackendWithDelegateMappingDemo ExecutorBackend DemoBackend""".split()
)

_SUFFIX = re.compile(r"_[\d]+$")



def _op_type(node_name: str) -> str:
    """ExecuTorch's operator type: the fx node name without its ``_<n>`` uniquifying suffix."""
    return _SUFFIX.sub("", node_name)


@dataclass
class DelegationBreakdown:
    """Delegated and non-delegated occurrences of one operator type (ExecuTorch's fields)."""

    op_type: str = ""
    delegated: int = 0
    non_delegated: int = 0

    @property
    def delegated_share(self) -> float:
        total = self.delegated + self.non_delegated
        return self.delegated / total if total else 0.0


@dataclass
class NonDelegatedNode:
    """One node that runs outside every delegate, with the partitioner's reason when known."""

    name: str
    op_type: str
    target: str | None
    reason: str | None = None


@dataclass
class DelegationInfo:
    """Delegation of one program: ExecuTorch's four fields first, etlens' extras after.

    ExecuTorch fields: ``num_delegated_subgraphs``, ``num_delegated_nodes``,
    ``num_non_delegated_nodes``, ``delegation_by_operator`` (``{op_type: DelegationBreakdown}``).

    Extras: ``backends`` (``{backend_id: {"subgraphs", "delegated_nodes", "operators"}}``),
    ``non_delegated`` (:class:`NonDelegatedNode` list in graph order), ``source`` (what was read
    and how), ``notes`` (caveats such as unknown backend ids or .pte fusion), ``subgraphs``
    (per delegate: index, backend, node count, payload size).
    """

    num_delegated_subgraphs: int
    num_delegated_nodes: int
    num_non_delegated_nodes: int
    delegation_by_operator: dict[str, DelegationBreakdown]
    backends: dict[str, dict[str, Any]] = field(default_factory=dict)
    non_delegated: list[NonDelegatedNode] = field(default_factory=list)
    subgraphs: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""
    notes: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        """One line (a notebook shows the summary and tables, see :mod:`etlens.views.notebook`)."""
        backends = ", ".join(self.backends) or "no backend"
        return (f"<etlens DelegationInfo: {self.num_delegated_subgraphs} delegated subgraph(s) ({backends}), "
                f"{self.num_delegated_nodes} delegated node(s), {self.num_non_delegated_nodes} non-delegated>")

    # -- ExecuTorch-compatible views ------------------------------------------------------------
    def get_summary(self) -> str:
        """The three-line summary, word for word as ExecuTorch prints it."""
        return (
            f"Total delegated subgraphs: {self.num_delegated_subgraphs}\n"
            f"Number of delegated nodes: {self.num_delegated_nodes}\n"
            f"Number of non-delegated nodes: {self.num_non_delegated_nodes}\n"
        )

    def get_operator_delegation_dataframe(self):
        """``op_type``, ``occurrences_in_delegated_graphs``, ``occurrences_in_non_delegated_graphs``.

        Rows sorted by ``op_type`` with a final ``Total`` row, as in ExecuTorch.
        """
        import pandas as pd

        rows = [asdict(b) for b in self.delegation_by_operator.values()]
        df = pd.DataFrame(rows, columns=["op_type", "delegated", "non_delegated"])
        df = df.rename(columns={"delegated": DELEGATED_COLUMN, "non_delegated": NON_DELEGATED_COLUMN})
        df = df.sort_values(by="op_type", ignore_index=True)
        df.loc[len(df)] = ["Total", df[DELEGATED_COLUMN].sum(), df[NON_DELEGATED_COLUMN].sum()]
        return df

    # -- etlens extras ----------------------------------------------------------------------------
    @property
    def delegated_share(self) -> float:
        """Delegated nodes / all counted nodes (0.0 for an empty program)."""
        total = self.num_delegated_nodes + self.num_non_delegated_nodes
        return self.num_delegated_nodes / total if total else 0.0

    @property
    def reasons(self) -> dict[str, str]:
        """``{non-delegated node name: reason}`` for the nodes whose reason is known."""
        return {n.name: n.reason for n in self.non_delegated if n.reason}

    def get_share_dataframe(self):
        """The operator table plus ``delegated_share`` (0..1) per operator type and overall."""
        df = self.get_operator_delegation_dataframe()
        total = df[DELEGATED_COLUMN] + df[NON_DELEGATED_COLUMN]
        df["delegated_share"] = (df[DELEGATED_COLUMN] / total.where(total > 0)).fillna(0.0).round(4)
        return df

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ExecuTorch's numbers, the per-op table, backends, fallbacks, notes."""
        ops = []
        for b in sorted(self.delegation_by_operator.values(), key=lambda b: b.op_type):
            ops.append({"op_type": b.op_type, DELEGATED_COLUMN: b.delegated, NON_DELEGATED_COLUMN: b.non_delegated,
                        "delegated_share": round(b.delegated_share, 4)})
        return {
            "source": self.source,
            "num_delegated_subgraphs": self.num_delegated_subgraphs,
            "num_delegated_nodes": self.num_delegated_nodes,
            "num_non_delegated_nodes": self.num_non_delegated_nodes,
            "delegated_share": round(self.delegated_share, 4),
            "operators": ops,
            "backends": self.backends,
            "subgraphs": self.subgraphs,
            "non_delegated": [asdict(n) for n in self.non_delegated],
            "notes": list(self.notes),
        }

    def format_report(self, tablefmt: str = "simple") -> str:
        """Everything in one terminal-readable text: summary, table with shares, backends, fallbacks."""
        from tabulate import tabulate

        lines = [self.get_summary().rstrip("\n")]
        lines.append(f"Delegated share: {self.delegated_share:.1%}")
        if self.source:
            lines.append(f"Source: {self.source}")
        if self.num_delegated_subgraphs == 0:
            lines.append("No delegates: every operator runs on ExecuTorch's portable/optimized kernels.")
        lines.append("")
        df = self.get_share_dataframe()
        df["delegated_share"] = [f"{v:.0%}" for v in df["delegated_share"]]
        lines.append(tabulate(df, headers="keys", tablefmt=tablefmt, showindex=False))
        if self.backends:
            lines.append("")
            lines.append("Per backend:")
            for backend, b in self.backends.items():
                ops = ", ".join(f"{k} x{v}" for k, v in sorted(b["operators"].items()))
                lines.append(f"  {backend}: {b['subgraphs']} subgraph(s), {b['delegated_nodes']} node(s): {ops}")
        if self.non_delegated:
            lines.append("")
            lines.append("Not delegated:")
            for n in self.non_delegated:
                why = f"  <- {n.reason}" if n.reason else ""
                lines.append(f"  {n.name} ({n.target or n.op_type}){why}")
        for note in self.notes:
            lines.append(f"Note: {note}")
        return "\n".join(lines) + "\n"


# -- computing the info from a Graph ---------------------------------------------------------------
def _is_call_function(node: Node) -> bool:
    """An fx ``call_function`` node as ExecuTorch counts it (etlens ``op`` nodes from fx)."""
    return node.kind == "op" and not (node.target or "").startswith(("call_method:", "call_module:"))


def _pte_op_type(target: str | None, name: str) -> str:
    """fx-style operator type for a .pte kernel call: ``aten::cumsum.out`` → ``aten_cumsum_out``."""
    if not target:
        return _op_type(name)
    return re.sub(r"[.:]+", "_", target.replace("::", "."))


def info_from_graph(graph: Graph, source: str = "", notes: list[str] | None = None) -> DelegationInfo:
    """Count delegated / non-delegated nodes of an etlens :class:`Graph` the way ExecuTorch does.

    Top-level ``op`` nodes are non-delegated; each ``delegate`` node is one subgraph whose inner
    graph's ``op`` nodes are delegated (or, for a ``.pte``, whose decoded backend ops are).
    """
    by_op: dict[str, DelegationBreakdown] = {}
    backends: dict[str, dict[str, Any]] = {}
    non_delegated: list[NonDelegatedNode] = []
    subgraphs: list[dict[str, Any]] = []
    notes = list(notes or [])
    from_pte = graph.meta.get("format") == "pte"

    def add(op_type: str, delegated: bool) -> None:
        b = by_op.setdefault(op_type, DelegationBreakdown(op_type=op_type))
        if delegated:
            b.delegated += 1
        else:
            b.non_delegated += 1

    unknown: set[str] = set()
    opaque: list[str] = []
    for node in graph:
        if node.kind == "delegate" and node.delegate is not None:
            d = node.delegate
            backend = d.backend_id or "unknown"
            entry = backends.setdefault(backend, {"subgraphs": 0, "delegated_nodes": 0, "operators": {}})
            entry["subgraphs"] += 1
            ops: list[str] = []
            if d.inner is not None:
                ops = [_op_type(n.name) for n in d.inner if _is_call_function(n)]
            elif d.ops:
                ops = list(d.ops)
            else:
                opaque.append(node.name)
            for op in ops:
                add(op, True)
            counts = Counter(ops)
            for k, v in counts.items():
                entry["operators"][k] = entry["operators"].get(k, 0) + v
            entry["delegated_nodes"] += len(ops)
            subgraphs.append({"node": node.name, "index": d.index, "backend_id": backend, "nodes": len(ops),
                              "payload_size": d.payload_size,
                              "contents": ("backend_graph" if from_pte else "fx") if d.inner is not None
                              else ("backend_ops" if d.ops else "unknown")})
            if backend not in KNOWN_BACKENDS:
                unknown.add(backend)
        elif _is_call_function(node):
            op_type = _pte_op_type(node.target, node.name) if from_pte else _op_type(node.name)
            add(op_type, False)
            non_delegated.append(NonDelegatedNode(node.name, op_type, node.target, STRUCTURAL.get(node.target or "")))
    for backend in sorted(unknown):
        notes.append(f"unknown backend id {backend!r}: not one of the backends ExecuTorch ships; its "
                     "subgraphs are counted, but etlens cannot decode their payloads")
    if opaque:
        notes.append(f"{len(opaque)} delegate(s) ({', '.join(opaque[:5])}) have no readable contents "
                     "(no lowered graph and a payload etlens cannot decode): their nodes are not counted")
    if from_pte and subgraphs:
        notes.append("from a .pte: delegated rows are the backend's own operations after its fusions "
                     "(e.g. one FullyConnected for linear+relu), non-delegated rows are kernel calls; "
                     "a .pte has no getitem nodes. Pass the .etrecord for ExecuTorch's fx-level numbers")
    return DelegationInfo(
        num_delegated_subgraphs=len(subgraphs),
        num_delegated_nodes=sum(b.delegated for b in by_op.values()),
        num_non_delegated_nodes=sum(b.non_delegated for b in by_op.values()),
        delegation_by_operator=by_op,
        backends=backends,
        non_delegated=non_delegated,
        subgraphs=subgraphs,
        source=source,
        notes=notes,
    )


# -- public API --------------------------------------------------------------------------------------
def get_delegation_info(obj: Any, *, method: str | None = None, partitioner: Any = None,
                        etrecord_view: str = "lowered", pte: str | None = None) -> DelegationInfo:
    """Delegation summary of a lowered program (ExecuTorch-compatible, plus extras).

    Args:
        obj: a lowered ``torch.fx.GraphModule``, an ``ExportedProgram``, an ``EdgeProgramManager`` /
            ``ExecutorchProgramManager``, an etlens ``Graph`` or artifact, or the path of a
            ``.etrecord``, ``.pte``, ``.pt2`` or pass-trace JSON.
        method: which method of a multi-method program (default ``forward``).
        partitioner: the partitioner (or list of partitioners) you lowered with; for each
            non-delegated node etlens runs its support check and records why it said no (on the
            in-memory program, or on an ETRecord's recorded edge program - the one the partitioner
            saw; a .pte has no fx nodes to ask about).
        etrecord_view: ``"lowered"`` (default) rebuilds the lowered program from an ETRecord's
            maps; ``"recorded"`` counts the stored edge program as ExecuTorch does (which is the
            program before partitioning, so it never has delegates).
        pte: with an ETRecord, the ``.pte`` it was emitted with: its kernel list names the operator
            of every instruction that ran outside the delegates, so nodes that share a debug handle
            with delegated ones (the ``view_copy``/``expand_copy`` pieces of a decomposed ``matmul``)
            are placed exactly; without it they are placed in execution order.

    Raises :class:`~etlens.errors.EtlensError` subclasses for unreadable or unsuitable input.
    """
    if etrecord_view not in ("lowered", "recorded"):
        raise EtlensError(f"etrecord_view must be 'lowered' or 'recorded', got {etrecord_view!r}")
    res = resolve_program(obj, method, etrecord_view, pte)
    info = info_from_graph(res.graph, res.source, res.notes)
    if partitioner is not None:
        from .reasons import explain

        program = res.exported_program
        if program is None and res.load_program is not None:
            # an ETRecord keeps the edge program the partitioner saw: replay its checks there
            program = res.load_program()
        if program is None:
            info.notes.append("partitioner reasons need the program the partitioner saw (an ExportedProgram, "
                              "an EdgeProgramManager or an ETRecord); none were computed for this input")
        else:
            reasons = explain(program, partitioner, [n.name for n in info.non_delegated])
            for n in info.non_delegated:
                n.reason = reasons.get(n.name, n.reason)
    return info


def delegation_graph(obj: Any, *, method: str | None = None, etrecord_view: str = "lowered") -> Graph:
    """The etlens :class:`Graph` that :func:`get_delegation_info` counts (delegates carry ``inner``)."""
    return resolve_program(obj, method, etrecord_view).graph


def format_delegated_graph(obj: Any, *, method: str | None = None, compact: bool = False) -> str:
    """The whole graph with each delegate's lowered subgraph expanded under it.

    For a ``torch.fx.GraphModule`` (or a program/manager holding one) the text is exactly
    ExecuTorch's ``format_delegated_graph``: fx's one-line node format, with ``backend_id`` and
    ``lowered graph()`` under each ``lowered_module_*``. For files (ETRecord, .pte, …), or with
    ``compact=True`` for anything, etlens prints the same shape from its own graph model in shorter
    lines: ``%name = aten.linear.default(%x, %w)``, tensor types on inputs, payload sizes on delegates.
    """
    if compact:
        return format_graph_text(resolve_program(obj, method, "lowered").graph)
    gm = None
    if is_graph_module(obj):
        gm = obj
    elif hasattr(obj, "graph_module") and hasattr(obj, "graph_signature"):
        gm = obj.graph_module
    elif type(obj).__name__ in ("EdgeProgramManager", "ExecutorchProgramManager"):
        gm = obj.exported_program(method or "forward").graph_module
    if gm is not None:
        return _format_fx(gm)
    return format_graph_text(resolve_program(obj, method, "lowered").graph)


def print_delegated_graph(obj: Any, *, method: str | None = None, compact: bool = False) -> None:
    """Print :func:`format_delegated_graph`."""
    print(format_delegated_graph(obj, method=method, compact=compact))


def _format_fx(gm: Any) -> str:
    indent = "  "
    out = ["graph():\n"]
    for node in gm.graph.nodes:
        out.append(f"{indent}{node.format_node()}\n")
        if node.op == "get_attr" and node.name.startswith("lowered_module_"):
            lowered = getattr(gm, node.name)
            out.append(f"{indent * 2}backend_id: {lowered.backend_id}\n")
            out.append(f"{indent * 2}lowered graph():\n")
            for inner in lowered.original_module.graph.nodes:
                out.append(f"{indent * 3}{inner.format_node()}\n")
    return "".join(out)


def _node_line(node: Node) -> str:
    args = node.attrs.get("args")
    if node.kind in ("input", "param"):
        meta = f" : {node.outputs[0]}" if node.outputs else ""
        return f"%{node.name}{meta} = {node.kind}"
    if node.kind == "output":
        return f"return [{', '.join(node.inputs)}]"
    arg_text = args if isinstance(args, str) and args else ", ".join(f"%{i}" for i in node.inputs)
    if node.kind == "delegate":
        return f"%{node.name} = {node.target or 'executorch_call_delegate'}({arg_text})"
    return f"%{node.name} = {node.target}({arg_text})"


def format_graph_text(graph: Graph, indent: str = "  ") -> str:
    """Readable text of an etlens graph, delegates expanded (used for files)."""
    out = [f"graph {graph.name}():"]
    for node in graph:
        out.append(f"{indent}{_node_line(node)}")
        d = node.delegate
        if d is None:
            continue
        size = f", payload {d.payload_size} bytes" if d.payload_size is not None else ""
        out.append(f"{indent * 2}backend_id: {d.backend_id}{size}")
        if d.inner is not None:
            out.append(f"{indent * 2}lowered graph():")
            out.extend(f"{indent * 3}{_node_line(n)}" for n in d.inner)
        elif d.ops:
            out.append(f"{indent * 2}backend ops ({len(d.ops)}): {', '.join(d.ops)}")
        else:
            out.append(f"{indent * 2}(payload not decoded: contents unknown)")
    return "\n".join(out) + "\n"
