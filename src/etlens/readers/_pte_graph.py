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

from ..model import DelegateInfo, Graph, Node, TensorMeta, categorize

if TYPE_CHECKING:
    from .pte import ExecutionPlan, Program, PteArtifact, Value

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
    """The :class:`DelegateInfo` of ``plan.delegates[index]`` (ops listed when XNNPACK decodes)."""
    d = plan.delegates[index]
    return DelegateInfo(
        backend_id=d.id,
        payload_size=d.payload_size,
        compile_specs={c.key: c.text() for c in d.compile_specs},
        ops=d.xnnpack.op_names() if d.xnnpack is not None else [],
        inner=d.xnnpack.to_graph(f"{plan.name}.delegate_{index}") if d.xnnpack is not None else None,
        index=index,
    )


def _op_base(qualified: str) -> str:
    # "aten::add.out" -> "add"; "quantized_decomposed::quantize_per_tensor.out" -> "quantize_per_tensor"
    return qualified.split("::")[-1].split(".")[0] or "op"


def plan_graph(program: "Program", plan: "ExecutionPlan") -> Graph:
    """Build the data-flow graph of one execution plan (see the module docstring)."""
    values = plan.values
    nvalues = len(values)
    g = Graph(plan.name, meta={"format": "pte", "method": plan.name})
    producer: dict[int, str] = {}  # value id -> node name that last wrote it
    taken: dict[str, int] = {}

    def fresh(base: str) -> str:
        # fx-style names (addmm, addmm_1, ...) without Graph.unique_name's linear probing,
        # which is quadratic on a 1000-layer model.
        k = taken.get(base, 0)
        name = base if k == 0 else f"{base}_{k}"
        while name in g:
            k += 1
            name = f"{base}_{k}"
        taken[base] = k + 1
        return name

    for k, vid in enumerate(plan.inputs):
        node = g.add(Node(fresh(f"input_{k}"), kind="input", outputs=_meta(values, vid),
                          attrs={"value_id": vid, "input_index": k}))
        producer[vid] = node.name

    # (memory_id, offset) -> node that last wrote a tensor there. Views (reshape, squeeze of a
    # whole tensor …) are not instructions: the emitter gives the view its own value id with the
    # base's memory, so a read of a never-written value follows the memory to its writer.
    memory: dict[tuple[int, int], str] = {}
    const_sizes = program.constant_sizes()

    def is_const(vid: int) -> bool:
        if not 0 <= vid < nvalues:
            return False
        v = values[vid]
        return v.kind == "tensor" and v.val.is_constant

    def source(vid: int) -> list[str]:
        """Producer names of value ``vid`` (a tensor list yields its items' producers)."""
        name = producer.get(vid)
        if name is not None:
            return [name]
        if not 0 <= vid < nvalues:
            return []
        v = values[vid]
        if v.kind == "tensor":
            t = v.val
            if t.is_constant:
                attrs: dict[str, Any] = {"value_id": vid, "data_buffer_idx": t.data_buffer_idx}
                if 0 <= t.data_buffer_idx < len(const_sizes):
                    attrs["nbytes"] = const_sizes[t.data_buffer_idx]
                if t.fully_qualified_name:
                    attrs["fqn"] = t.fully_qualified_name
                node = g.add(Node(fresh(f"const_{vid}"), kind="param", category="param", outputs=_meta(values, vid), attrs=attrs))
                producer[vid] = node.name
                return [node.name]
            if t.allocation is not None:
                name = memory.get((t.allocation.memory_id, t.allocation.memory_offset))
                if name is not None:
                    return [name]
            return []
        if v.kind in ("tensor_list", "optional_tensor_list"):
            out: list[str] = []
            for item in v.val or ():
                # only tensor items: a damaged file could make two lists contain each other
                if 0 <= item < nvalues and values[item].kind == "tensor":
                    out.extend(n for n in source(item) if n not in out)
            return out
        return []

    def unwritten_tensorish(vid: int) -> bool:
        return (0 <= vid < nvalues and vid not in producer and values[vid].kind in _TENSORISH
                and not is_const(vid))

    def trailing_unwritten(args: tuple[int, ...]) -> tuple[list[int], list[int]]:
        k = len(args)
        while k > 0 and unwritten_tensorish(args[k - 1]):
            k -= 1
        if k == len(args) and args:  # nothing new: an in-place update of the last argument
            k -= 1
        return list(args[:k]), list(dict.fromkeys(args[k:]))

    def split_kernel(args: tuple[int, ...]) -> tuple[list[int], list[int]]:
        """(input ids, output ids) of a kernel call: the return values repeat the out arguments."""
        n = len(args)
        if n >= 2:
            last = args[-1]
            v = values[last] if 0 <= last < nvalues else None
            if v is not None and v.kind == "tensor_list" and v.val and set(v.val) <= set(args[:-1]):
                items = set(v.val)
                return [a for a in args[:-1] if a not in items], list(v.val) + [last]
            for k in range(1, n // 2 + 1):
                if args[n - k:] == args[n - 2 * k:n - k]:
                    return list(args[:n - 2 * k]), list(dict.fromkeys(args[n - k:]))
        return trailing_unwritten(args)

    def split_delegate(args: tuple[int, ...], di: int | None) -> tuple[list[int], list[int]]:
        """(input ids, output ids) of a delegate call: inputs then outputs."""
        if di is not None and 0 <= di < len(plan.delegates):
            x = plan.delegates[di].xnnpack
            if x is not None and x.output_ids and len(x.input_ids) + len(x.output_ids) == len(args):
                k = len(args) - len(x.output_ids)
                return list(args[:k]), list(args[k:])
        return trailing_unwritten(args)

    def mark_written(node_name: str, outs: list[int]) -> None:
        for vid in outs:
            producer[vid] = node_name
            if not 0 <= vid < nvalues:
                continue
            v = values[vid]
            if v.kind == "tensor" and v.val.allocation is not None:
                memory[(v.val.allocation.memory_id, v.val.allocation.memory_offset)] = node_name
            elif v.kind in ("tensor_list", "optional_tensor_list"):
                for item in v.val or ():
                    if 0 <= item < nvalues and values[item].kind == "tensor":
                        mark_written(node_name, [item])

    counts: Counter = Counter()
    # operator index -> (qualified, target, name base, category), computed once per operator
    op_names: dict[int | None, tuple[str, str, str, str]] = {}
    for ci, chain in enumerate(plan.chains):
        # ``instruction`` is the index within its chain, as ETDump's ``instruction_id`` counts.
        for index, ins_ in enumerate(chain.instructions):
            counts[ins_.kind] += 1
            if ins_.kind == "KernelCall" or ins_.kind == "DelegateCall":
                if ins_.kind == "KernelCall":
                    in_ids, out_ids = split_kernel(ins_.args)
                else:
                    in_ids, out_ids = split_delegate(ins_.args, ins_.delegate_index)
                inputs: list[str] = []
                for vid in in_ids:
                    name = producer.get(vid)
                    if name is not None:
                        inputs.append(name)
                    elif 0 <= vid < nvalues and values[vid].kind in _TENSORISH:
                        inputs.extend(source(vid))
                outputs: list[TensorMeta] = []
                listed = set(out_ids)
                for vid in out_ids:
                    v = values[vid] if 0 <= vid < nvalues else None
                    # a returned tensor list whose items are listed already adds nothing new
                    if v is not None and v.kind in _TENSORISH[1:] and v.val and set(v.val) <= listed:
                        continue
                    outputs.extend(_meta(values, vid))
                attrs: dict[str, Any] = {"instruction": index, "chain": ci, "args": list(ins_.args),
                                         "inputs": in_ids, "outputs": out_ids}
                if ins_.kind == "KernelCall":
                    oi = ins_.op_index
                    spelled = op_names.get(oi)
                    if spelled is None:
                        if oi is not None and 0 <= oi < len(plan.operators):
                            op = plan.operators[oi]
                            qualified, target = op.qualified, op.readable
                        else:
                            qualified = target = f"<bad operator index {oi}>"
                        spelled = op_names[oi] = (qualified, target, _op_base(qualified),
                                                  categorize(target, "op"))
                    qualified, target, base, category = spelled
                    attrs["operator"] = qualified
                    attrs["op_index"] = oi
                    node = Node(fresh(base), kind="op", target=target, category=category, inputs=inputs,
                                outputs=outputs, attrs=attrs)
                else:
                    di = ins_.delegate_index
                    attrs["delegate_index"] = di
                    if di is not None and 0 <= di < len(plan.delegates):
                        info = delegate_info(program, plan, di)
                        d = plan.delegates[di]
                        attrs["location"] = d.location
                        if d.xnnpack is not None:
                            attrs["xnnpack"] = d.xnnpack.attrs()
                        elif d.decode_error:
                            attrs["decode_error"] = d.decode_error
                    else:
                        info = DelegateInfo(backend_id=f"<bad delegate index {di}>", index=di)
                    node = Node(fresh(f"delegate_{di}"), kind="delegate",
                                target="executorch_call_delegate", inputs=inputs, outputs=outputs,
                                delegate=info, attrs=attrs)
                g.add(node)
                mark_written(node.name, out_ids)
            elif ins_.kind == "MoveCall":
                src = producer.get(ins_.move_from) if ins_.move_from is not None else None
                if src is not None and ins_.move_to is not None:
                    producer[ins_.move_to] = src
    out_inputs: list[str] = []
    for vid in plan.outputs:
        out_inputs.extend(source(vid))
    g.add(Node(fresh("output"), kind="output", inputs=out_inputs,
               outputs=[m for vid in plan.outputs for m in _meta(values, vid)],
               attrs={"value_ids": list(plan.outputs)}))
    g.meta["instructions"] = dict(counts)
    g.meta["num_values"] = nvalues
    return g


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
    if d.xnnpack is not None:
        x = d.xnnpack
        out["ops"] = x.op_names()
        out["op_counts"] = dict(Counter(out["ops"]))
        out["num_values"] = len(x.values)
        out["constant_data_size"] = x.constant_data_size
        out["named_constants"] = len(x.named_keys)
        out["debug_handle_coverage"] = [sum(1 for n in x.nodes if n.debug_handle), len(x.nodes)]
        named = {nd.key: nd.segment_index for nd in program.named_data}
        nbytes = sum(program.segments[named[k]].size for k in x.named_keys
                     if k in named and named[k] < len(program.segments))
        if nbytes:
            out["named_constant_bytes"] = nbytes
    else:
        out["ops"] = []
        if d.decode_error:
            out["decode_error"] = d.decode_error
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
    xnodes = [n for p in program.execution_plan for d in p.delegates if d.xnnpack is not None for n in d.xnnpack.nodes]
    if xnodes:
        with_handle = sum(1 for n in xnodes if n.debug_handle)
        handles = (f"{with_handle}/{len(xnodes)} XNNPACK nodes carry a debug handle; kernel calls carry none "
                   "(the ETRecord maps instructions to handles)")
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
