"""Build an etlens Graph straight from torch.export-schema JSON, without deserializing the program.

Rebuilding a runnable ``ExportedProgram`` costs seconds on a large model (torch creates a fake
tensor for every value and checks the whole program). Showing a graph, matching debug handles or
reading module stacks needs none of that, so ETRecord graphs are built from the stored JSON
directly: on a 1000-layer program this takes a fraction of a second instead of ~10 s, works for
programs that call lowered backend modules without ExecuTorch installed, and keeps the stored
(edge-dialect) operator names.

The result mirrors what :func:`etlens.readers._fx.graph_from_fx` gives for the deserialized
program — same node names (torch's naming rules: a node is named after its output value, multi-
output ops get one ``getitem`` node per output), targets, kinds, inputs, tensor metadata, module
stacks, debug handles and lineage; the tests check this node by node. Argument text is rendered
from the stored arguments (edge-only ops show their stored arguments, e.g. ``dim_order``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from typing import Any

from ..model import DelegateInfo, Graph, Node, TensorMeta
from ..schema.export import EXPORT_DTYPES
from ._fx import MAX_ARG_TEXT, debug_handles_of, lineage_of, target_name
from .export_args import arg_text, decode_arg, refs

__all__ = ["graph_from_program_json", "parse_nn_module_stack"]

# torch.export schema enums → the names torch prints (etlens.schema.export); arguments: .export_args
_DTYPES = EXPORT_DTYPES
_INPUT_KINDS = {"parameter": ("parameter", "parameter_name"), "buffer": ("buffer", "buffer_name"),
                "tensor_constant": ("constant_tensor", "tensor_constant_name"),
                "custom_obj": ("custom_obj", "custom_obj_name"), "token": ("token", None)}
_DELEGATE_TARGET = "torch.ops.higher_order.executorch_call_delegate"
ST_DELIMITER = ";"


def split_module_entry(item: str) -> list[str]:
    """One ``key,path,type`` entry of a serialized ``nn_module_stack`` → its comma-separated parts.

    Commas inside brackets (``Sequential[(0, 1)]``-style names) do not split; the common entry
    without brackets takes the fast path.
    """
    if "[" not in item and "(" not in item and ")" not in item and "]" not in item:
        return item.split(",")
    parts, start, depth = [], 0, 0
    for i, c in enumerate(item):
        if c in "[(":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(item[start:i])
            start = i + 1
    parts.append(item[start:])
    return parts


def parse_nn_module_stack(text: str) -> dict[str, list[str]]:
    """``"key,path,type;key,path,type"`` (torch's serialized form) → ``{key: [path, type]}``."""
    out: dict[str, list[str]] = {}
    for item in text.split(ST_DELIMITER):
        parts = split_module_entry(item)
        if len(parts) == 3:
            out[parts[0]] = [parts[1], parts[2]]
    return out


def _meta_of(metadata: dict[str, Any]) -> dict[str, Any]:
    """Serialized node metadata → the fx ``node.meta`` entries the converter reads."""
    meta: dict[str, Any] = {}
    if metadata.get("stack_trace"):
        meta["stack_trace"] = metadata["stack_trace"]
    if metadata.get("nn_module_stack"):
        meta["nn_module_stack"] = {k: tuple(v) for k, v in parse_nn_module_stack(metadata["nn_module_stack"]).items()}
    if metadata.get("debug_handle"):
        meta["debug_handle"] = metadata["debug_handle"]
    if metadata.get("from_node"):
        try:
            meta["from_node"] = json.loads(metadata["from_node"])
        except (TypeError, ValueError):
            pass
    return meta


def _size(s: dict[str, Any]) -> int | str:
    if "as_int" in s:
        return int(s["as_int"])
    expr = s.get("as_expr") or {}
    return str(expr.get("expr_str", "?"))


def _value_meta(graph: dict[str, Any], name: str) -> list[TensorMeta]:
    tv = graph.get("tensor_values", {}).get(name)
    if tv is not None:
        return [TensorMeta(tuple(_size(s) for s in tv.get("sizes", [])), _DTYPES.get(tv.get("dtype"), "unknown"))]
    if name in graph.get("sym_int_values", {}):
        return [TensorMeta((), "int")]
    if name in graph.get("sym_float_values", {}):
        return [TensorMeta((), "float")]
    if name in graph.get("sym_bool_values", {}):
        return [TensorMeta((), "bool")]
    return []


@functools.lru_cache(maxsize=4096)
def _keyword_args(target: str) -> frozenset[str] | None:
    """Arguments torch's deserializer passes by keyword: keyword-only or with a default value.

    ``None`` when torch does not know the operator (then every argument is shown by name).
    """
    readable = target_name(target)
    parts = readable.split(".")
    if len(parts) != 3:
        return None
    from ..schema.op_kwargs import KEYWORD_ARGS

    known = KEYWORD_ARGS.get(readable)
    if known is not None:  # recorded from torch's schemas: no torch import (seconds) just to print arguments
        return frozenset(known.split(",")) if known else frozenset()
    try:
        import keyword

        import torch

        try:  # registers quantized_decomposed.* (as readers._torch_compat.ensure_quant_ops; no import cycle)
            import torch.ao.quantization.fx._decomposed  # noqa: F401
        except Exception:  # noqa: BLE001 - older/newer torch layouts
            pass
        op = getattr(getattr(getattr(torch.ops, parts[0]), parts[1]), parts[2])
        return frozenset(a.name for a in op._schema.arguments
                         if (a.kwarg_only or a.has_default_value()) and not keyword.iskeyword(a.name))
    except Exception:
        return None


def _arg_text(arg: Any) -> str:
    return arg_text(decode_arg(arg))


def json_args_text(node: dict[str, Any]) -> str:
    by_keyword = _keyword_args(node.get("target", ""))
    positional, keywords = [], []
    for inp in node.get("inputs", []):
        text = _arg_text(inp.get("arg"))
        kind = inp.get("kind")  # 1 positional, 2 keyword (newer schemas); else the schema decides
        if kind == 1 or (kind != 2 and by_keyword is not None and inp.get("name") not in by_keyword):
            positional.append(text)
        else:
            keywords.append(f"{inp.get('name')}={text}")
    text = ", ".join(positional + keywords)
    return text if len(text) <= MAX_ARG_TEXT else text[: MAX_ARG_TEXT - 1] + "…"


def _names_in(arg: Any, out: list[str]) -> None:
    """Producer names referenced by one serialized argument (tensors and symbolic ints)."""
    out.extend(r.name for r in refs(decode_arg(arg)))


def _decode_b64(text: str) -> bytes:
    try:
        return base64.b64decode(text or "")
    except (binascii.Error, ValueError):
        return b""


def _delegate_info(arg_json: str, index: int, node_name: str) -> tuple[DelegateInfo, str | None]:
    """DelegateInfo from ExecuTorch's serialized lowered module (a JSON string argument)."""
    try:
        lowered = json.loads(arg_json)
    except (TypeError, ValueError):
        return DelegateInfo("unknown", index=index), None
    specs: dict[str, str] = {}
    for cs in lowered.get("compile_specs") or []:
        raw = _decode_b64(cs.get("value", ""))
        try:
            text = raw.decode("utf-8")
            value = text if text.isprintable() else "0x" + raw.hex()
        except UnicodeDecodeError:
            value = "0x" + raw.hex()
        specs[str(cs.get("key"))] = value
    inner = None
    original = lowered.get("original_module")
    if isinstance(original, dict) and "graph_module" in original:
        try:
            inner = graph_from_program_json(original, f"{node_name}.inner",
                                            {"format": "lowered_module", "stage": "original_module"})
        except Exception:  # a malformed inner program must not hide the delegate itself
            inner = None
    payload = lowered.get("processed_bytes")
    return DelegateInfo(backend_id=str(lowered.get("backend_id", "unknown")),
                        payload_size=len(_decode_b64(payload)) if isinstance(payload, str) else None,
                        compile_specs=specs, inner=inner, index=index), lowered.get("backend_id")


def _node_target_name(target: str) -> str:
    """A serialized node target as fx spells it: operators readable, Python callables by name.

    ``torch.ops.aten.add.Tensor`` → ``aten.add.Tensor``; edge ops likewise; a Python function
    serialized by its path (``executorch.exir.memory.alloc``, ``_operator.getitem``) → its name.
    """
    if target.startswith(("torch.ops.", "executorch.exir.dialects.edge.ops.")):
        return target_name(target)
    return target.rsplit(".", 1)[-1] if target else target


class _Namer:
    """torch.fx's naming: a taken name gets ``_1``, ``_2``… appended (per base name)."""

    def __init__(self) -> None:
        self.taken: set[str] = set()
        self.next: dict[str, int] = {}

    def __call__(self, candidate: str) -> str:
        if candidate not in self.taken:
            self.taken.add(candidate)
            return candidate
        base = candidate
        i = self.next.get(base, 1)
        while f"{base}_{i}" in self.taken:
            i += 1
        self.next[base] = i + 1
        name = f"{base}_{i}"
        self.taken.add(name)
        return name


def graph_from_program_json(doc: dict[str, Any], name: str, meta: dict[str, Any] | None = None) -> Graph:  # noqa: C901
    """An etlens :class:`Graph` from a serialized ``ExportedProgram`` (the dict of its JSON)."""
    gm = doc["graph_module"]
    graph = gm["graph"]
    signature = gm.get("signature") or {}
    g = Graph(name, meta or {})
    namer = _Namer()
    # tensor name -> graph node name (they differ only when fx had to rename on a clash)
    alias: dict[str, str] = {}

    specs = signature.get("input_specs") or []
    for i, inp in enumerate(graph.get("inputs", [])):
        spec = specs[i] if i < len(specs) else {}
        spec_kind: Any
        spec_val: Any
        (spec_kind, spec_val), = spec.items() if spec else ((None, {}),)
        arg = inp
        if "as_tensor" in arg:
            tname = arg["as_tensor"]["name"]
        elif "as_sym_int" in arg and "as_name" in arg["as_sym_int"]:
            tname = arg["as_sym_int"]["as_name"]
        else:
            tname = ((spec_val or {}).get("arg") or {}).get("name") or f"arg{i}"
        node_name = namer(tname)
        alias[tname] = node_name
        attrs: dict[str, Any] = {}
        if spec_kind in _INPUT_KINDS:
            kind_name, field = _INPUT_KINDS[spec_kind]
            attrs["param_kind"] = kind_name
            if field and spec_val.get(field):
                attrs["target"] = str(spec_val[field])
            g.add(Node(node_name, kind="param", outputs=_value_meta(graph, tname), attrs=attrs))
        else:
            g.add(Node(node_name, kind="input", outputs=_value_meta(graph, tname), attrs=attrs))

    delegate_index = 0
    for snode in graph.get("nodes", []):
        target = snode.get("target", "")
        m = _meta_of(snode.get("metadata") or {})
        pairs = [tuple(v) for v in m.get("nn_module_stack", {}).values()]
        common: dict[str, Any] = dict(module_stack=[(str(p), str(t)) for p, t in pairs],
                                      stack_trace=m.get("stack_trace") or None,
                                      debug_handles=debug_handles_of(m), lineage=lineage_of(m))
        attrs = {}
        if m.get("nn_module_stack"):
            attrs["nn_module_stack"] = {k: list(v) for k, v in m["nn_module_stack"].items()}
        inputs_json = snode.get("inputs", [])
        delegate = None
        if target == _DELEGATE_TARGET and inputs_json and "as_string" in (inputs_json[0].get("arg") or {}):
            delegate, _ = _delegate_info(inputs_json[0]["arg"]["as_string"], delegate_index, snode.get("name", ""))
            delegate_index += 1
            attrs["lowered_module"] = inputs_json[0].get("name")
            inputs_json = inputs_json[1:]
        refs: list[str] = []
        for inp in inputs_json:
            _names_in(inp.get("arg"), refs)
        inputs = [alias.get(r, r) for r in refs]
        outputs = snode.get("outputs", [])
        readable = _node_target_name(target)
        if delegate is not None:  # as fx prints it: the lowered module first, then the operands
            rest = json_args_text({"target": target, "inputs": inputs_json})
            attrs["args"] = f"%{attrs['lowered_module']}" + (f", {rest}" if rest else "")
        else:
            attrs["args"] = json_args_text(snode)
        kind = "delegate" if delegate is not None else "op"
        single = len(outputs) == 1 and next(iter(outputs[0]), None) in ("as_tensor", "as_sym_int", "as_sym_float",
                                                                          "as_sym_bool")
        hop_multi = target.startswith("torch.ops.higher_order") and snode.get("is_hop_single_tensor_return") is False
        if single and not hop_multi:
            v = outputs[0][next(iter(outputs[0]))]
            tname = v["name"] if "name" in v else v.get("as_name", snode.get("name", "node"))
            node_name = namer(tname)
            alias[tname] = node_name
            g.add(Node(node_name, kind=kind, target=readable, inputs=inputs, outputs=_value_meta(graph, tname),
                       delegate=delegate, attrs=attrs, **common))
            continue
        if len(outputs) == 1 and "as_none" in outputs[0] and not hop_multi:
            node_name = namer(f"{readable.replace('.', '_')}_unused")
            g.add(Node(node_name, kind=kind, target=readable, inputs=inputs, outputs=[], delegate=delegate,
                       attrs=attrs, **common))
            continue
        if len(outputs) == 0:
            node_name = namer(snode.get("name") or readable.replace(".", "_"))
            g.add(Node(node_name, kind=kind, target=readable, inputs=inputs, outputs=[], delegate=delegate,
                       attrs=attrs, **common))
            continue
        # several outputs: the op node, then one getitem node per output (nested lists: a getitem
        # per list, then one per element), all sharing the op's metadata
        node_name = namer(snode.get("name") or readable.replace(".", "_"))
        op_node = g.add(Node(node_name, kind=kind, target=readable, inputs=inputs, outputs=[], delegate=delegate,
                             attrs=attrs, **common))
        items = outputs[0]["as_tensors"] if len(outputs) == 1 and "as_tensors" in outputs[0] else outputs
        op_node.outputs = _emit_getitems(g, namer, alias, graph, op_node.name, items, m, attrs)
    # the output node
    out_refs: list[str] = []
    for arg in graph.get("outputs", []):
        _names_in(arg, out_refs)
    out_metas: list[TensorMeta] = []
    for arg in graph.get("outputs", []):
        refs = []
        _names_in(arg, refs)
        for r in refs:
            out_metas.extend(_value_meta(graph, r))
    g.add(Node(namer("output"), kind="output", inputs=[alias.get(r, r) for r in out_refs if alias.get(r, r) in g],
               outputs=out_metas))
    return g


def _emit_getitems(g: Graph, namer: _Namer, alias: dict[str, str], graph: dict[str, Any], parent: str, items: list[Any],
                   m: dict[str, Any], parent_attrs: dict[str, Any]) -> list[TensorMeta]:
    metas: list[TensorMeta] = []
    pairs = [tuple(v) for v in m.get("nn_module_stack", {}).values()]

    def common(idx: int) -> dict[str, Any]:
        attrs: dict[str, Any] = {"args": f"%{parent}, {idx}"}
        if "nn_module_stack" in parent_attrs:
            attrs["nn_module_stack"] = parent_attrs["nn_module_stack"]
        return dict(module_stack=[(str(p), str(t)) for p, t in pairs], stack_trace=m.get("stack_trace") or None,
                    debug_handles=debug_handles_of(m), lineage=lineage_of(m), attrs=attrs)

    for idx, item in enumerate(items):
        if "name" in item and len(item) == 1:  # a bare TensorArgument inside as_tensors
            item = {"as_tensor": item}
        kind = next(iter(item), None)
        if kind in ("as_tensor", "as_sym_int", "as_sym_float"):
            v = item[kind]
            tname = v["name"] if "name" in v else v["as_name"]
            name = namer(tname)
            alias[tname] = name
            out = _value_meta(graph, tname)
            g.add(Node(name, kind="op", target="getitem", inputs=[parent], outputs=out, **common(idx)))
            metas.extend(out)
        elif kind == "as_none":
            name = namer("as_none")
            g.add(Node(name, kind="op", target="getitem", inputs=[parent], outputs=[], **common(idx)))
            metas.append(TensorMeta((), "none"))
        elif kind in ("as_tensors", "as_sym_ints", "as_sym_floats"):
            name = namer("getitem")
            node = g.add(Node(name, kind="op", target="getitem", inputs=[parent], outputs=[], **common(idx)))
            node.outputs = _emit_getitems(g, namer, alias, graph, name, item[kind], m, parent_attrs)
            metas.extend(node.outputs)
        # constant outputs (as_ints, …) create list getitems in torch too; they carry no tensors
    return metas
