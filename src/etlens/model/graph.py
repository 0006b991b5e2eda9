"""The shared graph model: every reader produces it, every view and analysis consumes it.

A :class:`Graph` is an ordered collection of :class:`Node` objects in topological order. Edges are
stored on the consumer: ``node.inputs`` lists the names of the producer nodes in argument order
(a producer may appear more than once). Nothing here knows about file formats: a ``.pte`` method,
an ETRecord stage, an ``ExportedProgram`` and a pass-trace snapshot all become the same shape.

Example::

    from etlens.model import Graph, Node, TensorMeta

    g = Graph("tiny")
    g.add(Node("x", kind="input", outputs=[TensorMeta((1, 3), "float32")]))
    g.add(Node("relu", kind="op", target="aten.relu.default", inputs=["x"]))
    g.add(Node("output", kind="output", inputs=["relu"]))
    g.lint()                       # raises GraphLintError if an invariant is broken
    g.counts_by_category()         # {'placeholder': 1, 'aten_compute': 1, 'output': 1}
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..errors import FormatError, GraphLintError

__all__ = [
    "KINDS",
    "CATEGORIES",
    "TensorMeta",
    "DelegateInfo",
    "LineageStep",
    "Node",
    "Graph",
    "categorize",
    "graph_to_json",
    "graph_from_json",
]

#: Node kinds: graph inputs, parameters/buffers/constants, operator calls, delegate calls, outputs.
KINDS = ("input", "param", "op", "delegate", "output")

#: The seed visualizer's categories (kept open: a reader may use any other string).
CATEGORIES = (
    "placeholder",
    "param",
    "aten_compute",
    "quantize",
    "memory",
    "backend",
    "delegate",
    "output",
)

_MEMORY_OPS = frozenset(
    """view view_copy _unsafe_view reshape permute permute_copy transpose t t_copy expand expand_copy
    squeeze squeeze_copy unsqueeze unsqueeze_copy clone _clone_dim_order contiguous copy copy_ _to_copy
    _to_dim_order_copy to slice slice_copy select select_copy cat concat split split_copy
    split_with_sizes split_with_sizes_copy unbind unbind_copy getitem flatten alias alias_copy
    alloc empty empty_like zeros zeros_like full full_like move detach detach_copy as_strided
    as_strided_copy index_select chunk narrow stack""".split()
)
_QUANT_PREFIXES = ("quantize_", "dequantize_", "choose_qparams")
_QUANT_NAMESPACES = frozenset({"quantized_decomposed", "torchao", "quant"})
_CORE_NAMESPACES = frozenset({"aten", "prim", "prims", "", "builtins", "operator", "_operator"})


def categorize(target: str | None, kind: str = "op") -> str:
    """Return the display category for an operator name such as ``aten.convolution.default``.

    Categories follow the seed visualizer: inputs are ``placeholder``, weights ``param``, delegate
    calls ``delegate``, (de)quantize ops ``quantize``, data-movement ops ``memory``, ops from a
    non-core namespace (``cortex_m::``, ``cadence.``) ``backend``, everything else ``aten_compute``.
    ``aten::add.out`` (ExecuTorch operator-table spelling) and ``aten.add.Tensor`` both work.
    """
    if kind == "input":
        return "placeholder"
    if kind == "param":
        return "param"
    if kind == "output":
        return "output"
    if kind == "delegate":
        return "delegate"
    if not target:
        return "aten_compute"
    name = target.replace("::", ".")
    parts = name.split(".")
    low = name.lower()
    if "call_delegate" in low or "lowered_module" in low:
        return "delegate"
    namespace, op = (parts[0], parts[1]) if len(parts) >= 2 else ("", parts[0])
    if op.startswith(_QUANT_PREFIXES) or op in ("quantize", "dequantize") or (
            namespace in _QUANT_NAMESPACES and "quant" in op):
        return "quantize"
    if namespace in ("dim_order_ops",):
        return "memory"
    if op in _MEMORY_OPS or parts[-1] in _MEMORY_OPS:
        return "memory"
    if namespace not in _CORE_NAMESPACES:
        return "backend"
    return "aten_compute"


@dataclass(frozen=True, slots=True)
class TensorMeta:
    """Shape and dtype of one tensor value. ``shape`` entries are ints or symbolic names (``'s0'``)."""

    shape: tuple[int | str, ...] = ()
    dtype: str = ""

    def to_json(self) -> list[Any]:
        return [list(self.shape), self.dtype]

    @classmethod
    def from_json(cls, data: list[Any]) -> "TensorMeta":
        return cls(tuple(data[0]), data[1])

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(str(s) for s in self.shape)}]"


@dataclass(frozen=True, slots=True)
class LineageStep:
    """One ancestor in a node's ``from_node`` chain: the node it came from and the pass that made it."""

    name: str
    target: str = ""
    pass_name: str = ""
    graph_id: int | None = None

    def to_json(self) -> list[Any]:
        return [self.name, self.target, self.pass_name, self.graph_id]

    @classmethod
    def from_json(cls, data: list[Any]) -> "LineageStep":
        return cls(*data)


@dataclass(slots=True)
class DelegateInfo:
    """What a delegate call hands to its backend.

    ``ops`` lists the operations that run inside the payload when the reader can decode it (for
    XNNPACK: the node types of the serialized XNNGraph); ``inner`` is the delegated subgraph when it
    is known (an ETRecord or in-memory lowered module); ``payload_size`` is in bytes.
    """

    backend_id: str
    payload_size: int | None = None
    compile_specs: dict[str, str] = field(default_factory=dict)
    ops: list[str] = field(default_factory=list)
    inner: "Graph | None" = None
    index: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"backend_id": self.backend_id}
        if self.payload_size is not None:
            out["payload_size"] = self.payload_size
        if self.compile_specs:
            out["compile_specs"] = dict(self.compile_specs)
        if self.ops:
            out["ops"] = list(self.ops)
        if self.index is not None:
            out["index"] = self.index
        if self.inner is not None:
            out["inner"] = self.inner.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "DelegateInfo":
        inner = data.get("inner")
        return cls(
            backend_id=data["backend_id"],
            payload_size=data.get("payload_size"),
            compile_specs=dict(data.get("compile_specs", {})),
            ops=list(data.get("ops", [])),
            inner=Graph.from_json(inner) if inner is not None else None,
            index=data.get("index"),
        )


@dataclass(slots=True)
class Node:
    """One node of a :class:`Graph`.

    Fields:
        name: unique within the graph.
        kind: one of :data:`KINDS`.
        target: readable operator name (``aten.convolution.default``), ``None`` for non-ops.
        category: display category; derived from ``target``/``kind`` when left empty.
        inputs: producer node names, in argument order.
        outputs: metadata of each output tensor (one entry per output).
        module_stack: ``nn_module_stack`` outer → inner as ``(path, type)`` pairs.
        stack_trace: the user's source lines that created the node.
        debug_handles: ExecuTorch debug handles (a decomposition shares one; a fusion has several).
        lineage: the ``from_node`` chain, nearest ancestor first, root (export node) last.
        delegate: set for delegate calls.
        attrs: free-form, JSON-serialisable details (arguments, instruction ids, value ids, …).
    """

    name: str
    kind: str = "op"
    target: str | None = None
    category: str = ""
    inputs: list[str] = field(default_factory=list)
    outputs: list[TensorMeta] = field(default_factory=list)
    module_stack: list[tuple[str, str]] = field(default_factory=list)
    stack_trace: str | None = None
    debug_handles: tuple[int, ...] = ()
    lineage: list[LineageStep] = field(default_factory=list)
    delegate: DelegateInfo | None = None
    attrs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.category:
            self.category = categorize(self.target, self.kind)

    @property
    def module_path(self) -> str:
        """Dotted path of the innermost module (``''`` at top level)."""
        return self.module_stack[-1][0] if self.module_stack else ""

    @property
    def lineage_root(self) -> str | None:
        """Name of the oldest known ancestor (the export-time node), if any."""
        return self.lineage[-1].name if self.lineage else None


class Graph:
    """An ordered, named collection of nodes plus free-form ``meta`` (format, stage, method…).

    Nodes must be added in topological order (producers before consumers); :meth:`lint` checks
    it. Lookups by name are O(1).
    """

    __slots__ = ("name", "meta", "_nodes", "_suffix")

    SCHEMA = "etlens.graph"
    VERSION = 1

    def __init__(self, name: str = "graph", meta: dict[str, Any] | None = None) -> None:
        self.name = name
        self.meta: dict[str, Any] = dict(meta or {})
        self._nodes: dict[str, Node] = {}
        # base name -> the suffix unique_name tries first: every smaller suffix is taken, and nodes
        # are never removed, so naming n nodes after one base costs O(n) in all, not O(n^2).
        self._suffix: dict[str, int] = {}

    # -- building -------------------------------------------------------------------------
    def add(self, node: Node) -> Node:
        """Append ``node``; its name must be new."""
        if node.name in self._nodes:
            raise GraphLintError(f"graph {self.name!r}: duplicate node name {node.name!r}")
        self._nodes[node.name] = node
        return node

    def unique_name(self, base: str) -> str:
        """A node name derived from ``base`` that is not taken yet: ``base``, else the first free
        of ``base_1``, ``base_2`` … (fx's spelling). Amortised O(1): the graph remembers, per base,
        where the free suffixes start."""
        nodes = self._nodes
        if base not in nodes:
            return base
        i = self._suffix.get(base, 1)
        while f"{base}_{i}" in nodes:
            i += 1
        self._suffix[base] = i
        return f"{base}_{i}"

    # -- reading --------------------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def __iter__(self) -> Iterator[Node]:
        return iter(self._nodes.values())

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, name: object) -> bool:
        return name in self._nodes

    def __getitem__(self, name: str) -> Node:
        return self._nodes[name]

    def get(self, name: str) -> Node | None:
        return self._nodes.get(name)

    def edges(self) -> Iterator[tuple[str, str, int]]:
        """Yield ``(producer, consumer, argument_index)`` for every edge."""
        for node in self._nodes.values():
            for i, src in enumerate(node.inputs):
                yield src, node.name, i

    def users(self) -> dict[str, list[str]]:
        """Map each node name to the names of the nodes that consume it."""
        out: dict[str, list[str]] = {n: [] for n in self._nodes}
        for src, dst, _ in self.edges():
            if src in out and dst not in out[src]:
                out[src].append(dst)
        return out

    def ops(self) -> list[Node]:
        """Operator and delegate calls, in order."""
        return [n for n in self._nodes.values() if n.kind in ("op", "delegate")]

    def counts_by_category(self) -> dict[str, int]:
        return dict(Counter(n.category for n in self._nodes.values()))

    def counts_by_target(self) -> dict[str, int]:
        return dict(Counter(n.target for n in self._nodes.values() if n.target))

    def delegates(self) -> list[Node]:
        return [n for n in self._nodes.values() if n.delegate is not None]

    def debug_handle_coverage(self) -> tuple[int, int]:
        """``(ops with at least one debug handle, ops)``."""
        ops = self.ops()
        return sum(1 for n in ops if n.debug_handles), len(ops)

    # -- invariants -----------------------------------------------------------------------
    def problems(self) -> list[str]:
        """Every broken invariant, as readable sentences (empty when the graph is sound)."""
        out: list[str] = []
        seen: set[str] = set()
        for node in self._nodes.values():
            where = f"node {node.name!r}"
            if node.kind not in KINDS:
                out.append(f"{where}: unknown kind {node.kind!r} (expected one of {KINDS})")
            if not node.category:
                out.append(f"{where}: empty category")
            if node.kind in ("input", "param") and node.inputs:
                out.append(f"{where}: a {node.kind} node cannot have inputs")
            if node.kind == "delegate" and node.delegate is None:
                out.append(f"{where}: delegate node without DelegateInfo")
            for src in node.inputs:
                if src not in self._nodes:
                    out.append(f"{where}: input {src!r} is not a node of the graph")
                elif src not in seen:
                    out.append(f"{where}: input {src!r} comes later (graph is not in topological order)")
            if any((not isinstance(h, int)) or h < 0 for h in node.debug_handles):
                out.append(f"{where}: debug handles must be non-negative ints, got {node.debug_handles!r}")
            if node.delegate is not None and node.delegate.inner is not None:
                out.extend(f"{where} (inner): {p}" for p in node.delegate.inner.problems())
            seen.add(node.name)
        return out

    def lint(self) -> "Graph":
        """Raise :class:`GraphLintError` listing every broken invariant; return ``self`` if sound."""
        problems = self.problems()
        if problems:
            shown = "; ".join(problems[:10])
            more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
            raise GraphLintError(f"graph {self.name!r} is inconsistent: {shown}{more}")
        return self

    # -- JSON -----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The compact, versioned JSON form (see docs/graph-json.md)."""
        return graph_to_json(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Graph":
        return graph_from_json(data)

    def __repr__(self) -> str:
        """One line (a plain shell prints it; a notebook shows the viewer, see :mod:`etlens.views.notebook`)."""
        calls = sum(1 for n in self._nodes.values() if n.delegate is not None)
        tail = f", {calls} delegate{'s' if calls != 1 else ''}" if calls else ""
        return f"<etlens Graph {self.name!r}: {len(self)} nodes{tail}>"


# -- the compact JSON form (docs/graph-json.md; etlens.model.graph_json re-exports it) ---------------


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
