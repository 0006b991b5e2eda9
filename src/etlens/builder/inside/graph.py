"""Which values inside a delegate can be exposed, and how: the torch-level half of the inside view.

An *exposure* is one value the instrumented program returns as an extra output: a node of the
(float or pt2e-converted) ``GraphModule`` plus the ATen ops whose result it is (the *group*). The
rules, each one a way upstream's tap breaks that we avoid:

* **fp32**: every floating-point compute op is exposed directly. View-like ops (``view``,
  ``permute``, ``clone``, ``dropout`` …) are not: their value is their input's, and exposing one can
  make a partition return one of its own inputs ("pass through arguments, which are not supported
  in XNNPACK Delegate"). An op whose only user is an activation the backend fuses (``relu``,
  ``hardtanh``, ``clamp``) is folded into the activation's group, so the fusion survives.
* **int8 (pt2e)**: the value the backend keeps between two quantized ops is the int8 output of a
  ``quantize`` node. We return that int8 tensor itself and dequantize it here (exact: ``(q - zp)
  * scale``), so no extra node is left for the partitioner to place. Exposing the ``dequantize``
  a quantized op consumes makes XNNPACK fold it into that op and return zeros; a second
  ``dequantize`` only for the output is the fallback when the scale is not a constant. The group
  is the float-graph ops between the previous quantization boundary and this one (``linear`` +
  ``relu`` for a fused quantized linear); ops that run in float between ``dequantize`` and the
  next ``quantize`` (``softmax`` …) are exposed as in fp32.
* values already returned by the program are not exposed twice; non-float values (token ids,
  masks) and multi-output ops (their ``getitem`` children are exposed instead) are skipped.

Everything here is torch only (no ExecuTorch): :func:`plan` chooses, :func:`instrument` builds the
program with extra outputs, :func:`capture` runs a graph in torch and keeps every node's value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Exposure", "plan", "instrument", "capture", "value_of", "node_module_path", "node_source_line", "VIEW_LIKE",
           "FUSED_ACTIVATIONS", "user_frame"]

#: ops whose output is their input's data (or a no-op): nothing new to compare, and exposing one
#: can turn an output of a partition into one of its inputs
VIEW_LIKE = frozenset({
    "view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "flatten", "clone", "contiguous", "dropout",
    "alias", "detach", "expand", "permute", "transpose", "t", "select", "slice", "unflatten", "lift_fresh_copy",
    "_assert_tensor_metadata", "_assert_scalar", "sym_size", "to", "_to_copy", "type_as", "split", "chunk",
    "unbind", "expand_as", "view_as", "identity", "alias_copy", "view_copy", "permute_copy", "squeeze_copy",
    "unsqueeze_copy", "slice_copy", "select_copy", "transpose_copy", "expand_copy", "split_with_sizes",
    "split_copy", "split_with_sizes_copy",
})
#: activations a backend fuses into the op before them (output clamping)
FUSED_ACTIVATIONS = frozenset({"relu", "relu_", "hardtanh", "hardtanh_", "clamp", "relu6"})

_QUANT = ("quantize_per_tensor", "quantize_per_channel")
_DEQUANT = ("dequantize_per_tensor", "dequantize_per_channel")


@dataclass
class Exposure:
    """One value of the program the instrumented build returns as an extra output.

    Attributes:
        node: name of the exposed node in the source graph (the op, or the activation ``quantize``).
        ops: the ATen ops (node names, graph order) whose result it is.
        targets: their operator names (``aten.linear.default`` …).
        float_node: the float-model node whose value is the end-to-end reference (``None``: none).
        quantized: True when the value is an int8 activation, exposed through a ``dequantize``.
        output_index: index of the value among the program's outputs, set by :func:`instrument`.
    """

    node: str
    ops: list[str]
    targets: list[str]
    float_node: str | None
    quantized: bool = False
    output_index: int = -1
    meta: dict[str, Any] = field(default_factory=dict, repr=False)


def _op_name(node: Any) -> str:
    """``aten.linear.default`` -> ``linear``; ``operator.getitem`` -> ``getitem``."""
    target = node.target
    name = getattr(target, "__name__", str(target))
    overload = getattr(target, "_overloadpacket", None)
    if overload is not None:
        name = getattr(overload, "__name__", name)
    return name.split(".")[0]


def _target(node: Any) -> str:
    """``aten.linear.default`` for an ATen overload, the function's name otherwise."""
    name = str(node.target)
    return str(getattr(node.target, "__name__", name)) if name.startswith("<") else name


def _is_q(node: Any) -> bool:
    return node.op == "call_function" and any(q in str(node.target) for q in _QUANT) and \
        not any(d in str(node.target) for d in _DEQUANT)


def _is_dq(node: Any) -> bool:
    return node.op == "call_function" and any(d in str(node.target) for d in _DEQUANT)


def _float_tensor(node: Any) -> bool:
    val = node.meta.get("val")
    return hasattr(val, "dtype") and getattr(val.dtype, "is_floating_point", False)


#: ops whose result is no activation: quantization bookkeeping (the dynamic int8 activation path of an
#: 8da4w linear, which XNNPACK fuses into the GEMM: exposed alone it returns zeros) and in-place cache
#: writes (``llama::update_cache`` returns a dummy tensor)
_NOT_VALUES = ("choose_qparams", "quantize_affine", "update_cache")


def _compute(node: Any) -> bool:
    """A float op that computes something new (not q/dq, not view-like, not a placeholder)."""
    if node.op != "call_function" or _is_q(node) or _is_dq(node) or any(k in str(node.target) for k in _NOT_VALUES):
        return False
    src = node.args[0] if node.args and _op_name(node) == "getitem" else None
    if src is not None and any(k in str(getattr(src, "target", "")) for k in _NOT_VALUES):
        return False
    if _op_name(node) in VIEW_LIKE:
        return False
    return _float_tensor(node)


def node_module_path(node: Any) -> str | None:
    """The innermost ``nn.Module`` path the node came from (``encoder.layer.0.attention``), if recorded."""
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return None
    path = list(stack.values())[-1]
    path = path[0] if isinstance(path, tuple) else path
    path = str(path)
    # export records "L['self'].encoder.layer[0]" style paths in some versions
    path = re.sub(r"^L\['self'\]\.?", "", path)
    return re.sub(r"\[(\d+)\]", r".\1", path) or None


def user_frame(stack_trace: str | None) -> str | None:
    """``file:line in fn: source`` of the innermost frame of the user's code (not torch's, not an installed
    package's) in a Python stack trace (an FX node's ``stack_trace``); its first line when it has no frames."""
    if not stack_trace:
        return None
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', stack_trace)
    if not frames:
        return stack_trace.strip().splitlines()[0]
    mine = [f for f in frames if "site-packages" not in f[0] and "/torch/" not in f[0]] or frames
    path, line, fn, src = mine[-1]
    return f"{path}:{line} in {fn}: {src.strip()}"


def node_source_line(node: Any) -> str | None:
    """``file:line in fn: source`` of the innermost user frame (not torch's) in the node's stack trace."""
    return user_frame(node.meta.get("stack_trace"))


def _outputs(graph: Any) -> list:
    out = next(n for n in graph.nodes if n.op == "output")
    vals = out.args[0]
    return list(vals) if isinstance(vals, (tuple, list)) else [vals]


def _cone(start: Any, assigned: set) -> list:
    """``start`` and its unassigned float-op ancestors back to the previous quantization boundary."""
    seen, stack, out = set(), [start], []
    while stack:
        n = stack.pop()
        if n.name in seen or n.name in assigned or not _compute(n):
            continue
        seen.add(n.name)
        out.append(n)
        stack.extend(a for a in n.all_input_nodes)
    return out


def plan(gm: Any, float_names: set[str] | None = None) -> list[Exposure]:
    """The exposures of ``gm`` (float or pt2e-converted ``GraphModule``), in graph order.

    ``float_names``: node names of the float model's graph (a converted graph keeps the float
    graph's names for its compute ops); ``None`` means ``gm`` is the float graph itself.
    """
    nodes = list(gm.graph.nodes)
    order = {n.name: i for i, n in enumerate(nodes)}
    already_out = {n.name for n in _outputs(gm.graph) if hasattr(n, "name")}
    assigned: set[str] = set()
    out: list[Exposure] = []

    def ref(name: str) -> str | None:
        return name if float_names is None or name in float_names else None

    # values computed from weights alone (an 8da4w weight's dequantize, a rope table) are no activations:
    # lowering folds them into constants, and a constant returned as an output is refused by the partitioner
    # ("constant data node … is tagged with (tag0) but has user (output)")
    live: set[str] = set()
    for n in nodes:
        if n.op == "placeholder" or any(a.name in live for a in n.all_input_nodes):
            live.add(n.name)

    for n in nodes:
        if n.name not in live:
            continue
        if _is_q(n) and n.args and hasattr(n.args[0], "op") and _compute(n.args[0]):
            group = sorted(_cone(n.args[0], assigned), key=lambda x: order[x.name])
            assigned.update(g.name for g in group)
            out.append(Exposure(node=n.name, ops=[g.name for g in group], targets=[_target(g) for g in group],
                                float_node=ref(n.args[0].name), quantized=True))
            continue
        if not _compute(n) or n.name in assigned:
            continue
        users = list(n.users)
        if any(_is_q(u) for u in users):
            continue  # its value leaves through the quantization boundary handled above
        if len(users) == 1 and _op_name(users[0]) in FUSED_ACTIVATIONS and n.name not in already_out:
            continue  # folded into the activation's group
        if _is_multi_output(n):
            continue
        group = [n]
        prev = n.args[0] if n.args and hasattr(n.args[0], "op") else None
        if _op_name(n) in FUSED_ACTIVATIONS and prev is not None and _compute(prev) and len(prev.users) == 1 \
                and prev.name not in assigned:
            group = [prev, n]
        assigned.update(g.name for g in group)
        out.append(Exposure(node=n.name, ops=[g.name for g in group], targets=[_target(g) for g in group],
                            float_node=ref(n.name)))
    by_name = {n.name: n for n in nodes}
    for e in out:
        first = by_name.get(e.ops[0]) if e.ops else None
        e.meta = {"order": order[e.node], "module_path": node_module_path(first) if first is not None else None,
                  "source_line": node_source_line(first) if first is not None else None}
    return out


def _is_multi_output(node: Any) -> bool:
    val = node.meta.get("val")
    return isinstance(val, (tuple, list))


def instrument(gm: Any, exposures: list[Exposure]) -> tuple[Any, int]:
    """A copy of ``gm`` returning ``(*original outputs, *exposed values)`` as a flat tuple.

    Sets each exposure's ``output_index``; returns ``(graph_module, number of original outputs)``.
    The copy has plain (non-pytree) calling conventions: flat positional tensors in, a tuple out.
    """
    import copy

    import torch

    new = copy.deepcopy(gm)
    graph = new.graph
    by_name = {n.name: n for n in graph.nodes}
    originals = _outputs(graph)
    index_of = {n.name: i for i, n in enumerate(originals) if hasattr(n, "name")}
    extra: list = []
    for e in exposures:
        node = by_name[e.node]
        scale, zero = (node.args[1:3] if len(node.args) >= 3 else (None, None)) if e.quantized else (None, None)
        if e.quantized and isinstance(scale, float) and isinstance(zero, int) and node.name not in index_of:
            # the int8 value itself leaves the partition that computed it (no extra node for the
            # partitioner to place); the parent dequantizes it exactly (see :func:`value_of`)
            e.meta["dequantize"] = (scale, zero)
            e.output_index = len(originals) + len(extra)
            extra.append(node)
        elif e.quantized:
            with graph.inserting_after(node):
                qargs = list(node.args)
                # quantize(x, scale, zp, qmin, qmax, dtype) -> dequantize(q, scale, zp, qmin, qmax, dtype)
                deq = (torch.ops.quantized_decomposed.dequantize_per_tensor.default if "per_tensor" in str(node.target)
                       else torch.ops.quantized_decomposed.dequantize_per_channel.default)
                value = graph.call_function(deq, (node, *qargs[1:]), dict(node.kwargs))
                value.meta = dict(node.args[0].meta)
            e.output_index = len(originals) + len(extra)
            extra.append(value)
        elif node.name in index_of:
            e.output_index = index_of[node.name]
        else:
            e.output_index = len(originals) + len(extra)
            extra.append(node)
    out = next(n for n in graph.nodes if n.op == "output")
    out.args = (tuple(originals) + tuple(extra),)
    graph._codegen = torch.fx.graph.CodeGen()
    new.recompile()
    return new, len(originals)


def value_of(e: Exposure, outputs: list) -> Any:
    """The float value of exposure ``e`` among a program's ``outputs`` (an int8 one dequantized exactly)."""
    import torch

    value = outputs[e.output_index]
    if "dequantize" in e.meta:
        scale, zero = e.meta["dequantize"]
        return (torch.as_tensor(value).to(torch.float32) - zero) * scale
    return value


def capture(gm: Any, inputs: tuple, names: set[str] | None = None) -> dict[str, Any]:
    """Run ``gm`` in torch and keep the value of every node in ``names`` (all nodes when ``None``)."""
    import torch

    keep: dict[str, Any] = {}

    class _Keep(torch.fx.Interpreter):
        def run_node(self, n):  # noqa: D102 - Interpreter hook
            value = super().run_node(n)
            if (names is None or n.name in names) and isinstance(value, torch.Tensor):
                keep[n.name] = value.detach().clone()
            return value

    with torch.no_grad():
        _Keep(gm).run(*inputs)
    return keep
