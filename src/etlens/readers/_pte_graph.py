"""Turn a parsed ``.pte`` execution plan into a :class:`~etlens.model.Graph`, and summarise it.

The graph follows the data flow of the instructions: a value written by instruction *i* and read
by instruction *j* is an edge *i* → *j*. Which arguments a call writes is not stored in the file,
so it is recovered from how ExecuTorch's emitter lays calls out:

* a kernel call lists its arguments, out arguments included, then its return values, which repeat
  the out arguments (``add.out(self, other, alpha, out) -> out`` is emitted as
  ``[self, other, alpha, out, out]``; a multi-output op returns a tensor list of its out tensors);
* a delegate call lists its inputs then its outputs (for XNNPACK the payload's ``input_ids`` /
  ``output_ids`` give the split; otherwise the trailing tensors nobody has written yet);
* views are not instructions: the emitter gives a view its own value id sharing the base's memory,
  so reading a never-written value follows its ``(memory_id, offset)`` to the last writer there.

Nodes: plan inputs → ``input``; constant tensors → ``param`` (only those some call reads, added
just before their first reader); kernel calls → ``op`` (target ``aten.add.out``, the operator
table's ``aten::add.out`` kept in ``attrs['operator']``); delegate calls → ``delegate``; one
``output`` node. Move, jump and free instructions make no nodes: a move aliases a value, the
others are counted in ``graph.meta``.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from ..backends import NO_DECODER_NOTE, by_name, has_hook
from ..model import DelegateInfo, Graph, Node, TensorMeta, categorize

if TYPE_CHECKING:
    from .pte import Delegate, ExecutionPlan, Instruction, Program, PteArtifact, TensorValue, Value

__all__ = ["plan_graph", "program_summary", "delegate_info"]

_TENSORISH = ("tensor", "tensor_list", "optional_tensor_list")


def _meta(values: "list[Value]", vid: int) -> list[TensorMeta]:
    if not 0 <= vid < len(values):
        return []
    v = values[vid]
    if v.kind == "tensor":
        t = v.val
        return [TensorMeta(tuple(t.sizes), t.dtype)]
    if v.kind in ("tensor_list", "optional_tensor_list"):
        out: list[TensorMeta] = []
        for item in v.val or ():
            if 0 <= item < len(values) and values[item].kind == "tensor":
                t = values[item].val
                out.append(TensorMeta(tuple(t.sizes), t.dtype))
        return out
    return []


def delegate_info(program: "Program", plan: "ExecutionPlan", index: int) -> DelegateInfo:
    """The :class:`DelegateInfo` of ``plan.delegates[index]`` (ops and the inner graph when its backend's
    decoded payload lists them: ``op_names()``, ``to_graph(name)``)."""
    d = plan.delegates[index]
    op_names = getattr(d.decoded, "op_names", None)
    to_graph = getattr(d.decoded, "to_graph", None)
    return DelegateInfo(
        backend_id=d.id,
        payload_size=d.payload_size,
        compile_specs={c.key: c.text() for c in d.compile_specs},
        ops=op_names() if op_names else [],
        inner=to_graph(f"{plan.name}.delegate_{index}") if to_graph else None,
        index=index,
    )


def decoded_key(d: "Delegate") -> str:
    """The key a delegate's decoded facts go under in attributes and summaries (its backend's ``attrs_key``)."""
    backend = by_name(d.backend) if d.backend else None
    return backend.attrs_key if backend is not None else "decoded"


def _op_base(qualified: str) -> str:
    # "aten::add.out" -> "add"; "quantized_decomposed::quantize_per_tensor.out" -> "quantize_per_tensor"
    return qualified.split("::")[-1].split(".")[0] or "op"


def plan_graph(program: "Program", plan: "ExecutionPlan") -> Graph:
    """Build the data-flow graph of one execution plan (see the module docstring)."""
    return _PlanGraph(program, plan).build()


class _PlanGraph:
    """The state of one :func:`plan_graph` run: the graph being built and who wrote what.

    ``producer`` maps a value id to the node that last wrote it; ``memory`` maps a planned
    ``(memory_id, offset)`` to the node that last wrote a tensor there. Views (reshape, squeeze of
    a whole tensor …) are not instructions: the emitter gives the view its own value id with the
    base's memory, so a read of a never-written value follows the memory to its writer.
    """

    def __init__(self, program: "Program", plan: "ExecutionPlan") -> None:
        self.program = program
        self.plan = plan
        self.values = plan.values
        self.nvalues = len(plan.values)
        self.g = Graph(plan.name, meta={"format": "pte", "method": plan.name})
        self.producer: dict[int, str] = {}
        self.memory: dict[tuple[int, int], str] = {}
        self.const_sizes = program.constant_sizes()
        # operator index -> (qualified, target, name base, category), computed once per operator
        self.op_names: dict[int | None, tuple[str, str, str, str]] = {}

    def build(self) -> Graph:
        g, plan, values = self.g, self.plan, self.values
        for k, vid in enumerate(plan.inputs):
            node = g.add(Node(g.unique_name(f"input_{k}"), kind="input", outputs=_meta(values, vid),
                              attrs={"value_id": vid, "input_index": k}))
            self.producer[vid] = node.name
        counts: Counter[str] = Counter()
        for ci, chain in enumerate(plan.chains):
            # ``index`` is the index within its chain, as ETDump's ``instruction_id`` counts.
            for index, ins in enumerate(chain.instructions):
                counts[ins.kind] += 1
                if ins.kind == "KernelCall" or ins.kind == "DelegateCall":
                    self.call(ci, index, ins)
                elif ins.kind == "MoveCall":
                    src = self.producer.get(ins.move_from) if ins.move_from is not None else None
                    if src is not None and ins.move_to is not None:
                        self.producer[ins.move_to] = src
        out_inputs: list[str] = []
        for vid in plan.outputs:
            out_inputs.extend(self.source(vid))
        g.add(Node(g.unique_name("output"), kind="output", inputs=out_inputs,
                   outputs=[m for vid in plan.outputs for m in _meta(values, vid)],
                   attrs={"value_ids": list(plan.outputs)}))
        g.meta["instructions"] = dict(counts)
        g.meta["num_values"] = self.nvalues
        return g

    # -- values ---------------------------------------------------------------------------
    def is_const(self, vid: int) -> bool:
        if not 0 <= vid < self.nvalues:
            return False
        v = self.values[vid]
        return v.kind == "tensor" and v.val.is_constant

    def source(self, vid: int) -> list[str]:
        """Producer names of value ``vid`` (a tensor list yields its items' producers)."""
        name = self.producer.get(vid)
        if name is not None:
            return [name]
        if not 0 <= vid < self.nvalues:
            return []
        v = self.values[vid]
        if v.kind == "tensor":
            t = v.val
            if t.is_constant:
                return [self.add_param(vid, t)]
            if t.allocation is not None:
                name = self.memory.get((t.allocation.memory_id, t.allocation.memory_offset))
                if name is not None:
                    return [name]
            return []
        if v.kind in ("tensor_list", "optional_tensor_list"):
            out: list[str] = []
            for item in v.val or ():
                # only tensor items: a damaged file could make two lists contain each other
                if 0 <= item < self.nvalues and self.values[item].kind == "tensor":
                    out.extend(n for n in self.source(item) if n not in out)
            return out
        return []

    def add_param(self, vid: int, t: "TensorValue") -> str:
        """Add the ``param`` node of constant value ``vid`` (just before its first reader)."""
        attrs: dict[str, Any] = {"value_id": vid, "data_buffer_idx": t.data_buffer_idx}
        if 0 <= t.data_buffer_idx < len(self.const_sizes):
            attrs["nbytes"] = self.const_sizes[t.data_buffer_idx]
        if t.fully_qualified_name:
            attrs["fqn"] = t.fully_qualified_name
        node = self.g.add(Node(self.g.unique_name(f"const_{vid}"), kind="param", category="param",
                               outputs=_meta(self.values, vid), attrs=attrs))
        self.producer[vid] = node.name
        return node.name

    def mark_written(self, node_name: str, outs: list[int]) -> None:
        values, nvalues, producer = self.values, self.nvalues, self.producer
        for vid in outs:
            producer[vid] = node_name
            if not 0 <= vid < nvalues:
                continue
            v = values[vid]
            if v.kind == "tensor" and v.val.allocation is not None:
                self.memory[(v.val.allocation.memory_id, v.val.allocation.memory_offset)] = node_name
            elif v.kind in ("tensor_list", "optional_tensor_list"):
                for item in v.val or ():
                    if 0 <= item < nvalues and values[item].kind == "tensor":
                        self.mark_written(node_name, [item])

    # -- which arguments a call writes --------------------------------------------------------
    def unwritten_tensorish(self, vid: int) -> bool:
        return (0 <= vid < self.nvalues and vid not in self.producer and self.values[vid].kind in _TENSORISH
                and not self.is_const(vid))

    def trailing_unwritten(self, args: tuple[int, ...]) -> tuple[list[int], list[int]]:
        k = len(args)
        unwritten = self.unwritten_tensorish
        while k > 0 and unwritten(args[k - 1]):
            k -= 1
        if k == len(args) and args:  # nothing new: an in-place update of the last argument
            k -= 1
        return list(args[:k]), list(dict.fromkeys(args[k:]))

    def split_kernel(self, args: tuple[int, ...]) -> tuple[list[int], list[int]]:
        """(input ids, output ids) of a kernel call: the return values repeat the out arguments."""
        n = len(args)
        if n >= 2:
            last = args[-1]
            v = self.values[last] if 0 <= last < self.nvalues else None
            if v is not None and v.kind == "tensor_list" and v.val and set(v.val) <= set(args[:-1]):
                items = set(v.val)
                return [a for a in args[:-1] if a not in items], list(v.val) + [last]
            for k in range(1, n // 2 + 1):
                if args[n - k:] == args[n - 2 * k:n - k]:
                    return list(args[:n - 2 * k]), list(dict.fromkeys(args[n - k:]))
        return self.trailing_unwritten(args)

    def split_delegate(self, args: tuple[int, ...], di: int | None) -> tuple[list[int], list[int]]:
        """(input ids, output ids) of a delegate call: inputs then outputs."""
        if di is not None and 0 <= di < len(self.plan.delegates):
            x = self.plan.delegates[di].decoded
            if (getattr(x, "output_ids", None) and getattr(x, "input_ids", None) is not None
                    and len(x.input_ids) + len(x.output_ids) == len(args)):
                k = len(args) - len(x.output_ids)
                return list(args[:k]), list(args[k:])
        return self.trailing_unwritten(args)

    # -- nodes ----------------------------------------------------------------------------
    def call(self, ci: int, index: int, ins: "Instruction") -> None:
        """Add the node of kernel or delegate call ``ins`` (instruction ``index`` of chain ``ci``)."""
        kernel = ins.kind == "KernelCall"
        in_ids, out_ids = self.split_kernel(ins.args) if kernel else self.split_delegate(ins.args,
                                                                                            ins.delegate_index)
        values, nvalues, producer = self.values, self.nvalues, self.producer
        inputs: list[str] = []
        for vid in in_ids:
            name = producer.get(vid)
            if name is not None:
                inputs.append(name)
            elif 0 <= vid < nvalues and values[vid].kind in _TENSORISH:
                inputs.extend(self.source(vid))
        outputs: list[TensorMeta] = []
        listed = set(out_ids)
        for vid in out_ids:
            v = values[vid] if 0 <= vid < nvalues else None
            # a returned tensor list whose items are listed already adds nothing new
            if v is not None and v.kind in _TENSORISH[1:] and v.val and set(v.val) <= listed:
                continue
            outputs.extend(_meta(values, vid))
        attrs: dict[str, Any] = {"instruction": index, "chain": ci, "args": list(ins.args),
                                 "inputs": in_ids, "outputs": out_ids}
        node = self.kernel_node(ins, inputs, outputs, attrs) if kernel else \
            self.delegate_node(ins, inputs, outputs, attrs)
        self.g.add(node)
        self.mark_written(node.name, out_ids)

    def kernel_node(self, ins: "Instruction", inputs: list[str], outputs: list[TensorMeta],
                    attrs: dict[str, Any]) -> Node:
        oi = ins.op_index
        spelled = self.op_names.get(oi)
        if spelled is None:
            operators = self.plan.operators
            if oi is not None and 0 <= oi < len(operators):
                qualified, target = operators[oi].qualified, operators[oi].readable
            else:
                qualified = target = f"<bad operator index {oi}>"
            spelled = self.op_names[oi] = (qualified, target, _op_base(qualified), categorize(target, "op"))
        qualified, target, base, category = spelled
        attrs["operator"] = qualified
        attrs["op_index"] = oi
        return Node(self.g.unique_name(base), kind="op", target=target, category=category, inputs=inputs,
                    outputs=outputs, attrs=attrs)

    def delegate_node(self, ins: "Instruction", inputs: list[str], outputs: list[TensorMeta],
                      attrs: dict[str, Any]) -> Node:
        di = ins.delegate_index
        attrs["delegate_index"] = di
        if di is not None and 0 <= di < len(self.plan.delegates):
            info = delegate_info(self.program, self.plan, di)
            d = self.plan.delegates[di]
            attrs["location"] = d.location
            if d.decoded is not None:
                attrs[decoded_key(d)] = d.decoded.attrs()
            elif d.decode_error:
                attrs["decode_error"] = d.decode_error
        else:
            info = DelegateInfo(backend_id=f"<bad delegate index {di}>", index=di)
        return Node(self.g.unique_name(f"delegate_{di}"), kind="delegate", target="executorch_call_delegate",
                    inputs=inputs, outputs=outputs, delegate=info, attrs=attrs)


def _delegate_summary(program: "Program", plan: "ExecutionPlan", i: int) -> dict[str, Any]:
    d = plan.delegates[i]
    out: dict[str, Any] = {
        "index": i,
        "backend_id": d.id,
        "payload_size": d.payload_size,
        "location": d.location,
        "data_index": d.index,
        "compile_specs": {c.key: c.text() for c in d.compile_specs},
    }
    summary = getattr(d.decoded, "summary", None)
    if summary is not None:
        out.update(summary(program))
    else:
        out["ops"] = []
        if d.decoded is not None:
            out[decoded_key(d)] = d.decoded.attrs()
        if d.decode_error:
            out["decode_error"] = d.decode_error
        elif d.backend is None or not has_hook(by_name(d.backend), "payload"):
            out["note"] = NO_DECODER_NOTE.format(id=d.id)
    return out


def program_summary(art: "PteArtifact") -> dict[str, Any]:
    """JSON-ready summary of a ``.pte`` (what ``etlens info`` prints)."""
    program = art.program
    assert program is not None
    graphs = art.graphs()
    methods = []
    for plan in program.execution_plan:
        g = graphs.get(plan.name)
        kinds = Counter(i.kind for c in plan.chains for i in c.instructions)
        calls = Counter(plan.operators[i.op_index].qualified for c in plan.chains for i in c.instructions
                        if i.kind == "KernelCall" and i.op_index is not None and 0 <= i.op_index < len(plan.operators))
        delegates = [_delegate_summary(program, plan, i) for i in range(len(plan.delegates))]
        by_backend: dict[str, dict[str, int]] = {}
        for d in delegates:
            b = by_backend.setdefault(d["backend_id"], {"count": 0, "payload_size": 0})
            b["count"] += 1
            b["payload_size"] += d["payload_size"] or 0
        methods.append({
            "name": plan.name,
            "num_instructions": sum(kinds.values()),
            "instructions": dict(kinds),
            "num_values": len(plan.values),
            "inputs": list(plan.inputs),
            "outputs": list(plan.outputs),
            "num_chains": len(plan.chains),
            "operators": [op.qualified for op in plan.operators],
            "operator_calls": dict(calls),
            "delegates": delegates,
            "delegates_by_backend": by_backend,
            "nodes": len(g) if g is not None else 0,
            "by_category": g.counts_by_category() if g is not None else {},
            "non_const_buffer_sizes": list(plan.non_const_buffer_sizes),
        })
    eh = program.extended_header
    inner: dict[str, list[Any]] = {}  # backend label -> its decoded nodes that may carry debug handles
    for p in program.execution_plan:
        for dg in p.delegates:
            if dg.decoded is not None and getattr(dg.decoded, "nodes", None):
                known = by_name(dg.backend) if dg.backend else None
                inner.setdefault(known.label if known is not None else dg.id, []).extend(dg.decoded.nodes)
    if inner:
        handles = "; ".join(f"{sum(1 for n in nodes if getattr(n, 'debug_handle', None))}/{len(nodes)} {label} "
                            "nodes carry a debug handle" for label, nodes in inner.items())
        handles += "; kernel calls carry none (the ETRecord maps instructions to handles)"
    else:
        handles = "not stored in .pte (the ETRecord maps instructions to debug handles)"
    return {
        "format": "pte",
        "path": art.path,
        "file_size": program.file_size,
        "version": program.version,
        "program_size": eh.program_size if eh else program.file_size,
        "segment_base_offset": program.segment_base_offset,
        "num_segments": len(program.segments),
        "segment_data_size": sum(s.size for s in program.segments),
        "constant_data_size": program.constant_data_size(),
        "num_constant_buffers": program.num_constant_buffers(),
        "num_named_data": len(program.named_data),
        "named_data_size": sum(program.segments[nd.segment_index].size for nd in program.named_data
                               if nd.segment_index < len(program.segments)),
        # A .pte stores no handles for kernel calls; XNNPACK payloads keep one per node.
        "debug_handles": handles,
        "methods": methods,
    }
