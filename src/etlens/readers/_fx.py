"""Turn a ``torch.fx`` graph (of an ``ExportedProgram`` or a ``GraphModule``) into an etlens Graph.

Every torch-side graph in etlens goes through :func:`graph_from_fx`: the ``.pt2`` reader, in-memory
programs, every ETRecord stage, pass-trace snapshots. One conversion means one spelling of
operators, one reading of node metadata and one way of folding lowered modules into delegate
nodes, whatever file the program came from.

Mapping (fx node → etlens node):

* ``placeholder`` → ``input``, or ``param`` when the program's graph signature says it is a
  parameter, buffer, constant tensor or custom object (``attrs["target"]`` names the state entry);
* ``call_function`` → ``op`` with a readable target (``aten.convolution.default``; edge-dialect ops
  spelled the same way; ``operator.getitem`` → ``getitem``);
* ``executorch_call_delegate`` → ``delegate`` with a :class:`~etlens.model.DelegateInfo`
  (backend id, payload size, compile specs, the lowered module's original program as ``inner``);
* ``get_attr`` of a lowered backend module → folded into the delegate node (no node of its own);
  other ``get_attr`` nodes (constants of a plain ``GraphModule``) → ``param``;
* ``output`` → ``output``.

Per node: ``outputs`` from ``meta['val']``, ``module_stack`` / ``attrs['nn_module_stack']`` from
``nn_module_stack``, ``stack_trace``, ``debug_handles`` from ``debug_handle`` and ``lineage`` from
``from_node``. Nothing here imports torch at module level, so the module is cheap to import.
"""

from __future__ import annotations

from typing import Any

from ..model import DelegateInfo, Graph, LineageStep, Node, TensorMeta

__all__ = ["graph_from_fx", "target_name", "tensor_metas", "module_stack_of", "lineage_of",
           "debug_handles_of", "ORIGINAL_TARGET_META", "ORIGINAL_ARGS_META"]

#: ``node.meta`` key where the ETRecord loader keeps the stored (edge-dialect) target of a node whose
#: operator it replaced by a plain-torch equivalent; the Graph shows the stored name.
ORIGINAL_TARGET_META = "etlens_original_target"
#: ...and the argument text of the stored call (``dim_order=[0, 1, 2, 3]`` rather than the replacement's).
ORIGINAL_ARGS_META = "etlens_original_args"

_EDGE_PREFIX = "executorch.exir.dialects.edge.ops."
MAX_ARG_TEXT = 120
_DELEGATE_NAMES = ("executorch_call_delegate",)


def target_name(target: Any) -> str:
    """Readable operator name: ``aten.convolution.default``, ``getitem``, ``dim_order_ops._clone_dim_order.default``.

    Handles ATen ``OpOverload`` (``str`` is already readable), ExecuTorch's ``EdgeOpOverload`` (whose
    ``str`` is a long schema text: we use the wrapped op), higher-order operators, plain Python
    callables and the serialized spellings ``torch.ops.aten.x.y`` / ``executorch.exir.dialects.edge.ops.aten.x.y``.
    """
    if isinstance(target, str):
        name = target
    else:
        inner = getattr(target, "_op", None)
        if inner is not None and type(target).__name__.startswith("EdgeOp"):
            return target_name(inner)
        import torch

        if isinstance(target, torch._ops.HigherOrderOperator):
            name = target.name()
        elif isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            name = str(target)
        elif callable(target):
            name = getattr(target, "__name__", None) or repr(target)
        else:
            name = str(target)
    if name.startswith(_EDGE_PREFIX):
        name = name[len(_EDGE_PREFIX):]
    elif name.startswith("torch.ops."):
        name = name[len("torch.ops."):]
    if name in ("_operator.getitem", "operator.getitem"):
        return "getitem"
    if name.startswith("higher_order."):
        name = name[len("higher_order."):]
    return name


def _dtype_name(dtype: Any) -> str:
    s = str(dtype)
    return s[len("torch."):] if s.startswith("torch.") else s


def _dim(d: Any) -> int | str:
    if isinstance(d, int):
        return d
    if type(d).__name__ == "SymInt":
        # int() would give the example's size (the hint); a dynamic dim must stay symbolic
        expr = getattr(getattr(d, "node", None), "expr", None)
        if expr is not None and getattr(expr, "is_number", False):
            return int(expr)
        return str(expr if expr is not None else d)
    try:
        return int(d)
    except Exception:  # an expression without a value
        return str(d)


def tensor_metas(val: Any) -> list[TensorMeta]:
    """One :class:`TensorMeta` per tensor in ``meta['val']`` (tensor, list/tuple of tensors, or none)."""
    if val is None:
        return []
    if isinstance(val, (list, tuple)):
        out: list[TensorMeta] = []
        for v in val:
            out.extend(tensor_metas(v) if v is not None else [TensorMeta((), "none")])
        return out
    shape = getattr(val, "shape", None)
    dtype = getattr(val, "dtype", None)
    if shape is not None and dtype is not None:
        return [TensorMeta(tuple(_dim(d) for d in shape), _dtype_name(dtype))]
    tname = type(val).__name__
    if tname in ("SymInt", "int"):
        return [TensorMeta((), "int")]
    if tname in ("SymFloat", "float"):
        return [TensorMeta((), "float")]
    if tname in ("SymBool", "bool"):
        return [TensorMeta((), "bool")]
    return []


def _type_str(ty: Any) -> str:
    if isinstance(ty, str):
        return ty
    mod, qual = getattr(ty, "__module__", None), getattr(ty, "__qualname__", None)
    return f"{mod}.{qual}" if mod and qual else str(ty)


def module_stack_of(meta: dict[str, Any]) -> tuple[list[tuple[str, str]], dict[str, list[str]]]:
    """``(module_stack outer→inner, raw {key: [path, type]})`` from ``meta['nn_module_stack']``."""
    stack = meta.get("nn_module_stack") or {}
    raw: dict[str, list[str]] = {}
    pairs: list[tuple[str, str]] = []
    if isinstance(stack, dict):
        for key, val in stack.items():
            try:
                path, ty = val
            except (TypeError, ValueError):
                continue
            path, ty = str(path), _type_str(ty)
            raw[str(key)] = [path, ty]
            pairs.append((path, ty))
    return pairs, raw


def debug_handles_of(meta: dict[str, Any]) -> tuple[int, ...]:
    """``meta['debug_handle']`` as a tuple: an int, a tuple/list of ints, or their string forms."""
    dh = meta.get("debug_handle")
    if dh is None or dh == "":
        return ()
    if isinstance(dh, bool):
        return ()
    if isinstance(dh, int):
        return (dh,)
    if isinstance(dh, str):
        digits = dh.replace("(", " ").replace(")", " ").replace("[", " ").replace("]", " ").replace(",", " ")
        try:
            return tuple(int(p) for p in digits.split())
        except ValueError:
            return ()
    if isinstance(dh, (list, tuple)):
        out: list[Any] = []
        for h in dh:
            out.extend(debug_handles_of({"debug_handle": h}))
        return tuple(out)
    return ()


def lineage_of(meta: dict[str, Any], limit: int = 64) -> list[LineageStep]:
    """The ``from_node`` chain, nearest ancestor first, root last (first source at each level).

    ``from_node`` is a list of ``NodeSource`` objects (or their dict form, as stored in serialized
    metadata), each with its own ``from_node``. We follow the first source at every level, which is
    the provenance chain ExecuTorch uses for debug handles.
    """
    out: list[LineageStep] = []
    sources = meta.get("from_node") or []
    while sources and len(out) < limit:
        src = sources[0]
        if isinstance(src, dict):
            name, target = src.get("name", ""), src.get("target", "")
            pass_name, graph_id = src.get("pass_name", ""), src.get("graph_id")
            nxt = src.get("from_node") or []
        else:
            name, target = getattr(src, "name", ""), getattr(src, "target", "")
            pass_name, graph_id = getattr(src, "pass_name", ""), getattr(src, "graph_id", None)
            nxt = getattr(src, "from_node", None) or []
        out.append(LineageStep(str(name), target_name(target) if target else "", str(pass_name or ""),
                               int(graph_id) if isinstance(graph_id, int) else None))
        sources = nxt
    return out


def _arg_text(arg: Any, depth: int = 0) -> str:
    if depth > 3:
        return "…"
    if hasattr(arg, "op") and hasattr(arg, "name") and hasattr(arg, "graph"):  # fx.Node
        return f"%{arg.name}"
    if isinstance(arg, (list, tuple)):
        inner = ", ".join(_arg_text(a, depth + 1) for a in arg)
        return f"[{inner}]" if isinstance(arg, list) else f"({inner}{',' if len(arg) == 1 else ''})"
    if isinstance(arg, dict):
        return "{" + ", ".join(f"{k}: {_arg_text(v, depth + 1)}" for k, v in arg.items()) + "}"
    if isinstance(arg, float):
        return repr(arg)
    s = str(arg)
    if s.startswith("torch."):
        s = s[len("torch."):]
    return s


def _args_text(node: Any) -> str:
    parts = [_arg_text(a) for a in node.args]
    parts += [f"{k}={_arg_text(v)}" for k, v in node.kwargs.items()]
    text = ", ".join(parts)
    return text if len(text) <= MAX_ARG_TEXT else text[: MAX_ARG_TEXT - 1] + "…"


def _flat_inputs(node: Any) -> list[str]:
    """Names of producer nodes in argument order (nested lists flattened, duplicates kept)."""
    out: list[str] = []

    def visit(a: Any) -> None:
        if hasattr(a, "op") and hasattr(a, "name") and hasattr(a, "graph"):
            out.append(a.name)
        elif isinstance(a, (list, tuple)):
            for x in a:
                visit(x)
        elif isinstance(a, dict):
            for x in a.values():
                visit(x)

    for a in node.args:
        visit(a)
    for a in node.kwargs.values():
        visit(a)
    return out


def _is_lowered_module(obj: Any) -> bool:
    return obj is not None and hasattr(obj, "backend_id") and hasattr(obj, "processed_bytes")


def _compile_specs(lowered: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for cs in getattr(lowered, "compile_specs", None) or []:
        key = getattr(cs, "key", None)
        value = getattr(cs, "value", b"")
        if key is None:
            continue
        if isinstance(value, (bytes, bytearray)):
            try:
                text = bytes(value).decode("utf-8")
                value = text if text.isprintable() else "0x" + bytes(value).hex()
            except UnicodeDecodeError:
                value = "0x" + bytes(value).hex()  # type: ignore[arg-type]  # bytes or bytearray here
        out[str(key)] = str(value)
    return out


def delegate_info_of(lowered: Any, index: int | None, name: str) -> DelegateInfo:
    """A :class:`DelegateInfo` for an in-memory ``LoweredBackendModule`` (inner = original program)."""
    payload = getattr(lowered, "processed_bytes", None)
    inner = None
    original = getattr(lowered, "original_module", None)
    if original is not None:
        try:
            if hasattr(original, "graph_signature"):
                inner = graph_from_fx(original.graph_module, f"{name}.inner", original.graph_signature,
                                      {"format": "lowered_module", "stage": "original_module"})
            elif hasattr(original, "graph"):
                inner = graph_from_fx(original, f"{name}.inner", None,
                                      {"format": "lowered_module", "stage": "original_module"})
        except Exception:  # an exotic original program must not hide the delegate itself
            inner = None
    return DelegateInfo(
        backend_id=str(getattr(lowered, "backend_id", "unknown")),
        payload_size=len(payload) if isinstance(payload, (bytes, bytearray, memoryview)) else None,
        compile_specs=_compile_specs(lowered),
        inner=inner,
        index=index,
    )


def _param_kinds(signature: Any) -> dict[str, tuple[str, str | None]]:
    """``{placeholder name: (kind, state target)}`` for non-user inputs of a graph signature."""
    out: dict[str, tuple[str, str | None]] = {}
    if signature is None:
        return out
    for spec in getattr(signature, "input_specs", []) or []:
        kind = getattr(getattr(spec, "kind", None), "name", str(getattr(spec, "kind", "")))
        arg_name = getattr(getattr(spec, "arg", None), "name", None)
        if arg_name is None:
            continue
        if kind != "USER_INPUT":
            out[arg_name] = (kind.lower(), getattr(spec, "target", None))
    return out


def graph_from_fx(gm: Any, name: str, signature: Any = None, meta: dict[str, Any] | None = None) -> Graph:
    """Convert ``gm`` (a ``torch.fx.GraphModule`` or ``torch.fx.Graph``) into an etlens :class:`Graph`.

    ``signature`` is the ``ExportedProgram.graph_signature`` when there is one: it decides which
    placeholders are parameters/buffers/constants. ``meta`` becomes ``Graph.meta``.

    Example::

        ep = torch.export.export(model, inputs)
        g = graph_from_fx(ep.graph_module, "model", ep.graph_signature, {"format": "exported_program"})
    """
    fx_graph = gm.graph if hasattr(gm, "graph") else gm
    owner = gm if hasattr(gm, "graph") else getattr(gm, "owning_module", None)
    params = _param_kinds(signature)
    g = Graph(name, meta or {})
    lowered_nodes: dict[str, Any] = {}  # get_attr name -> lowered module (folded into delegates)
    delegate_index = 0
    for fx_node in fx_graph.nodes:
        op = fx_node.op
        m = fx_node.meta
        pairs, raw_stack = module_stack_of(m)
        attrs: dict[str, Any] = {}
        if raw_stack:
            attrs["nn_module_stack"] = raw_stack
        common: dict[str, Any] = dict(
            outputs=tensor_metas(m.get("val")),
            module_stack=pairs,
            stack_trace=m.get("stack_trace") or None,
            debug_handles=debug_handles_of(m),
            lineage=lineage_of(m),
        )
        if op == "placeholder":
            if fx_node.name in params:
                kind_name, state = params[fx_node.name]
                attrs["param_kind"] = kind_name
                if state:
                    attrs["target"] = str(state)
                g.add(Node(fx_node.name, kind="param", attrs=attrs, **common))
            else:
                g.add(Node(fx_node.name, kind="input", attrs=attrs, **common))
        elif op == "get_attr":
            obj = None
            if owner is not None:
                try:
                    obj = owner
                    for part in str(fx_node.target).split("."):
                        obj = getattr(obj, part)
                except AttributeError:
                    obj = None
            if _is_lowered_module(obj):
                lowered_nodes[fx_node.name] = obj
                continue
            attrs["target"] = str(fx_node.target)
            attrs["param_kind"] = "get_attr"
            g.add(Node(fx_node.name, kind="param", attrs=attrs, **common))
        elif op == "output":
            inputs = [n for n in _flat_inputs(fx_node) if n in g]
            g.add(Node(fx_node.name, kind="output", inputs=inputs, attrs=attrs, **common))
        elif op in ("call_function", "call_method", "call_module"):
            original = m.get(ORIGINAL_TARGET_META)
            tname = original or target_name(fx_node.target)
            inputs = _flat_inputs(fx_node)
            if tname in _DELEGATE_NAMES and inputs and inputs[0] in lowered_nodes:
                lowered_name = inputs[0]
                info = delegate_info_of(lowered_nodes[lowered_name], delegate_index, fx_node.name)
                delegate_index += 1
                attrs["lowered_module"] = lowered_name
                attrs["args"] = _args_text(fx_node)
                g.add(Node(fx_node.name, kind="delegate", target=tname, inputs=inputs[1:],
                           delegate=info, attrs=attrs, **common))
                continue
            if op != "call_function":
                tname = f"{op}:{fx_node.target}"
            attrs["args"] = m.get(ORIGINAL_ARGS_META) or _args_text(fx_node)
            inputs = [n for n in inputs if n in g or n not in lowered_nodes]
            g.add(Node(fx_node.name, kind="op", target=tname, inputs=inputs, attrs=attrs, **common))
    return g
