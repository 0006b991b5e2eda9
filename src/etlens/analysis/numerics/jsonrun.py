"""Run a program of an ETRecord straight from its torch.export JSON, without rebuilding an fx graph.

Rebuilding an ``ExportedProgram`` with torch's deserializer creates a fake tensor for every value
(about 17 s for a 1000-layer program here), which is more than the whole numeric comparison should
cost. The reference run needs much less: each node's operator, its arguments and the order. This
module reads exactly that from the JSON (``ETRecord.program_json(stage)``) and calls the ATen
operators eagerly, so the reference capture costs about as much as one eager forward pass.

Only plain operator graphs are handled (ATen / edge ops, ``getitem``); anything else (higher-order
operators with subgraphs, custom objects, symbolic shapes) raises :class:`Unsupported` and the
caller falls back to the deserialized program. Edge-dialect targets are mapped to their ATen
equivalents by the ETRecord reader's :func:`~etlens.readers.rewrite_edge_targets`.

Example::

    prog = JsonProgram.from_record(record, "exported_program")
    for node in prog.nodes: print(node.name, node.target)
    prog.run(user_inputs, on_node=lambda node, value, overwritten: ...)
"""

from __future__ import annotations

import json
import operator
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ..record import EtlensRecordLike, Record
from ...readers.export_args import (DeviceArg, EnumArg, GraphArg, OperatorArg, Ref, UnknownArg, decode_arg,
                                    tensor_names)

__all__ = ["JsonProgram", "JsonNode", "Unsupported", "alias_args", "parse_handle", "parse_module_stack",
           "written_later"]


class Unsupported(Exception):
    """The JSON uses something this runner does not execute; use the deserialized program instead."""


def parse_handle(raw: Any) -> Any:
    """A serialized ``debug_handle`` (``"3"``, ``"[3, 4]"``, 3) as an int or a tuple of ints; None if absent."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, (list, tuple)):
        return tuple(int(x) for x in raw)
    text = str(raw).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        val = json.loads(text.replace("(", "[").replace(")", "]"))
    except ValueError:
        return None
    if isinstance(val, int):
        return val
    if isinstance(val, list):
        return tuple(int(x) for x in val)
    return None


def parse_module_stack(raw: str | None) -> tuple[str | None, str | None]:
    """The innermost ``(module path, module type)`` of a serialized ``nn_module_stack``."""
    if not raw:
        return None, None
    from ...readers import split_module_entry

    parts = split_module_entry(raw.rpartition(";")[2])
    return (parts[1], parts[2]) if len(parts) == 3 else (None, None)


@dataclass
class JsonNode:
    """One serialized node: enough to run it and to explain it."""

    name: str
    target: str
    inputs: list
    outputs: list
    meta: dict
    _ancestors: list | None = field(default=None, repr=False)
    _outs: list | None = field(default=None, repr=False)

    @property
    def decoded_outputs(self) -> list:
        """The outputs, decoded once (:func:`etlens.readers.export_args.decode_arg`)."""
        if self._outs is None:
            self._outs = [decode_arg(o) for o in self.outputs]
        return self._outs

    @property
    def debug_handle(self) -> Any:
        return parse_handle(self.meta.get("debug_handle"))

    @property
    def stack_trace(self) -> str | None:
        return self.meta.get("stack_trace")

    @property
    def ancestors(self) -> list[tuple[str, str]]:
        """``[(name, graph_id as text), ...]``: the provenance chain, following the last source at each
        level (pairs straight from the regex: no string built per level)."""
        if self._ancestors is None:
            raw = self.meta.get("from_node")
            out: list[str] = []
            if isinstance(raw, str) and "}, {" not in raw and "},{" not in raw and "\\" not in raw:
                # one source per level (the usual case): the entries appear outermost first, so the
                # chain is the (name, graph_id) pairs in text order; no need to parse the JSON (and
                # with no backslash in the text, no name has an escape to undo)
                found = _SOURCE_RE.findall(raw)
                if found or raw.strip() in ("", "[]", "null"):
                    self._ancestors = found
                    return self._ancestors
            if raw:
                try:
                    chain = json.loads(raw) if isinstance(raw, str) else raw
                except ValueError:
                    chain = None
                src = chain[-1] if chain else None
                while src:
                    out.append((str(src.get("name")), str(src.get("graph_id"))))
                    parents = src.get("from_node") or []
                    src = parents[-1] if parents else None
            self._ancestors = out
        return self._ancestors


class NodeLineage:
    """A program's nodes with only their names, debug handles and provenance chains (no arguments):
    all that propagating debug handles back to the ATen program reads from the edge program, made
    from the record's kept :class:`~etlens.readers.program_nodes.ProgramNodes` instead of a second
    parse of its JSON."""

    def __init__(self, nodes: Any, name: str = "") -> None:
        self.name = name
        self.nodes = [JsonNode(str(n or first or "node"), target, [], [], {"debug_handle": dh, "from_node": src})
                      for n, first, target, dh, src in zip(nodes.names, nodes.output_names, nodes.targets,
                                                            nodes.debug_handles, nodes.from_nodes)]

    @classmethod
    def from_record(cls, record: EtlensRecordLike | Record, stage: str) -> "NodeLineage | None":
        """From an etlens ETRecord that keeps its programs' node columns, else None."""
        if isinstance(record, Record):
            record = record.etlens
        nodes_of = getattr(record, "program_nodes", None)
        return cls(nodes_of(stage), stage) if callable(nodes_of) else None


_SOURCE_RE = re.compile(r'"name": "([^"\\]*)", "target": "[^"\\]*", "graph_id": (-?\d+)')


#: ``operator`` functions a program may call on symbolic ints / bools (``_operator.ge`` in a guard)
_SYM_OPERATORS = frozenset({"add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "neg", "ge", "gt", "le",
                            "lt", "eq", "ne", "and_", "or_", "not_"})
#: higher-order operators run eagerly (their subject is an ``as_operator`` argument)
_HIGHER_ORDER = frozenset({"torch.ops.higher_order.auto_functionalized",
                           "torch.ops.higher_order.auto_functionalized_v2"})


class JsonProgram:
    """A serialized program: its operator nodes in order, its inputs, and the tensors it needs."""

    def __init__(self, doc: dict, state_dict: Any, constants: dict | None = None, name: str = "") -> None:
        from ...readers import rewrite_edge_targets

        self.name = name
        rewrite_edge_targets(doc)
        gm = doc.get("graph_module") or {}
        graph = gm.get("graph") or {}
        self.nodes = [JsonNode(str(n.get("name") or _first_output_name(n)), n.get("target", ""), n.get("inputs", []),
                               n.get("outputs", []), n.get("metadata") or {}) for n in graph.get("nodes", [])]
        self._graph_inputs = graph.get("inputs", [])
        #: ``{value name: serialized tensor meta}`` (dtype, sizes) of the graph's values
        self.tensor_meta: dict = graph.get("tensor_values", {})
        self._specs = (gm.get("signature") or {}).get("input_specs", [])
        # {value name: buffer name} of the values the program writes back into its buffers (a KV cache)
        self._mutations = {(b.get("arg") or {}).get("name"): b.get("buffer_name")
                           for spec in (gm.get("signature") or {}).get("output_specs", [])
                           for kind, b in spec.items() if kind == "buffer_mutation"}
        # ``state_dict`` may be a thunk returning (state_dict, constants): loaded on the first run only
        self._tensors = state_dict if callable(state_dict) else None
        self.state_dict = {} if callable(state_dict) else (state_dict or {})
        self.constants = constants or {}
        self._plan: tuple[list, set[str]] | None = None  # compiled steps (see _compiled)

    @classmethod
    def from_record(cls, record: EtlensRecordLike | Record, stage: str) -> "JsonProgram":
        """Read ``stage`` of an ``etlens`` ETRecord (its JSON and its state dict / constants)."""
        if isinstance(record, Record):
            if record.etlens is None:
                raise Unsupported("only an etlens ETRecord stores its programs as JSON")
            record = record.etlens
        doc = record.program_json(stage)
        return cls(doc, lambda: _stage_tensors(record, stage), None, stage)

    # -- running -------------------------------------------------------------------------------
    def _lifted_inputs(self, user_inputs: list) -> dict:
        env: dict[str, Any] = {}
        it = iter(user_inputs)
        if not self._specs:
            for arg in self._graph_inputs:
                name = _tensor_name(arg)
                if name is not None:
                    env[name] = next(it)
            return env
        for spec in self._specs:
            (kind, body), = spec.items()
            arg = body.get("arg")
            if kind == "user_input":
                name = _tensor_name(arg) or _sym_name(arg)
                try:
                    value = next(it)
                except StopIteration:
                    raise ValueError(f"the program takes more inputs than the {len(user_inputs)} given") from None
                if name is not None:
                    env[name] = value
            elif kind == "parameter":
                env[arg["name"]] = self._state(body["parameter_name"])
            elif kind == "buffer":
                env[arg["name"]] = self._state(body["buffer_name"])
            elif kind == "tensor_constant":
                env[arg["name"]] = self.constants[body["tensor_constant_name"]]
            elif kind == "token":
                env[arg["name"]] = None
            elif kind == "constant_input":
                env[body["name"]] = self._arg(body.get("value", {"as_none": True}), env)
            else:
                raise Unsupported(f"input kind {kind!r}")
        return env

    def load_tensors(self) -> None:
        """Read the state dict and constants now (they are loaded on the first run otherwise)."""
        if self._tensors is not None:
            self.state_dict, self.constants = self._tensors()
            self._tensors = None

    def _state(self, key: str) -> Any:
        if key in self.state_dict:
            return self.state_dict[key]
        if key in self.constants:
            return self.constants[key]
        raise Unsupported(f"state entry {key!r} is in neither the state dict nor the constants")

    def _arg(self, arg: dict, env: dict) -> Any:
        return self.value(decode_arg(arg), env)

    def value(self, v: Any, env: dict) -> Any:
        """A decoded argument (:func:`etlens.readers.export_args.decode_arg`) as the value an operator
        takes: references looked up in ``env``, enums and devices as torch objects, an operator resolved."""
        if isinstance(v, Ref):
            return env[v.name]
        if isinstance(v, list):
            return [self.value(x, env) for x in v]
        if isinstance(v, EnumArg):
            import torch

            if not v.known:
                raise Unsupported(f"{v.kind} code {v.name}")
            return getattr(torch, v.name)
        if isinstance(v, DeviceArg):
            import torch

            return torch.device(v.type, v.index) if v.index is not None else torch.device(v.type)
        if isinstance(v, OperatorArg):
            return self.resolve(v.target)
        if isinstance(v, (GraphArg, UnknownArg)):
            raise Unsupported(f"argument kind {v.kind if isinstance(v, UnknownArg) else 'as_graph'!r}")
        return v

    def resolve(self, target: str) -> Any:
        """The torch operator a serialized target names (``torch.ops.aten.add.Tensor``), or :class:`Unsupported`."""
        import torch

        if target in ("_operator.getitem", "operator.getitem"):
            return operator.getitem
        module, _, fname = target.rpartition(".")
        if module in ("_operator", "operator") and fname in _SYM_OPERATORS:
            return getattr(operator, fname)  # arithmetic / comparisons on symbolic ints (guards, slice ends)
        if target in _HIGHER_ORDER:
            # functionalized custom in-place ops (``llama::update_cache`` on a KV cache): eager, the
            # op itself is an ``as_operator`` argument
            return getattr(torch.ops.higher_order, target.rpartition(".")[2])
        if not target.startswith("torch.ops.") or target.startswith("torch.ops.higher_order."):
            raise Unsupported(f"operator {target!r}")
        parts = target[len("torch.ops."):].split(".")
        if len(parts) != 3:
            raise Unsupported(f"operator {target!r}")
        try:
            return getattr(getattr(getattr(torch.ops, parts[0]), parts[1]), parts[2])
        except (AttributeError, RuntimeError) as exc:
            raise Unsupported(f"operator {target!r} is not registered with torch ({exc})") from exc

    def run(self, user_inputs: list, on_node: Callable[[JsonNode, Any, bool], None] | None = None,
            keep: Callable[[str], bool] | None = None, carry_state: bool = False) -> None:
        """Execute every node in order on ``user_inputs`` (flat list), calling ``on_node(node, result,
        overwritten)``; ``overwritten``: a later in-place op writes ``result``'s memory (keep a copy).

        Values are dropped after their last use unless ``keep(name)`` says otherwise, so memory stays
        at the live set of the forward pass plus what ``on_node`` keeps. With ``carry_state`` the
        values the program writes back into its buffers (``buffer_mutation`` outputs: an LLM's KV
        cache) replace those buffers afterwards, so the next run starts from this run's state, as
        on the device.
        """
        if carry_state and self._mutations:
            kept = keep
            mutated = set(self._mutations)

            def keep(name: str) -> bool:  # noqa: F811 - the written-back values must survive their last use
                return name in mutated or (kept is not None and kept(name))
        steps, written = self._compiled()
        self.load_tensors()
        env = self._lifted_inputs(user_inputs)
        if on_node is None:
            written = set()
        bind = self._bind
        for step in steps:
            if step.names is not None:
                result = step.fn(*[env[n] for n in step.names])
            else:
                args, kwargs = step.args(env)
                result = step.fn(*args, **kwargs)
            node = step.node
            if step.out is not None and result is not None:
                env[step.out] = result
            else:
                bind(node, result, env)
            if on_node is not None:
                # a value a later in-place op overwrites (``hidden += residual`` exports as ``add_``)
                # must be copied by a caller that keeps it, to keep the value this node computed
                on_node(node, result, node.name in written)
            for name in step.drop:
                if keep is None or not keep(name):
                    env.pop(name, None)
        if carry_state and self._mutations:
            self.state_dict = dict(self.state_dict)  # never write into a dict the record may share
            for value, buffer in self._mutations.items():
                if env.get(value) is not None and buffer:
                    self.state_dict[buffer] = env[value].detach().clone()

    def _compiled(self) -> tuple[list, set[str]]:
        """The program's steps (:mod:`.jsonplan`) and the names later in-place ops overwrite, made once."""
        if self._plan is None:
            from ...readers import ensure_quant_ops
            from .jsonplan import compile_program

            if any("quantized_decomposed" in n.target for n in self.nodes):
                ensure_quant_ops()  # importing torch.ao.quantization costs ~1 s: only when needed
            ops = {}
            for node in self.nodes:
                if node.target not in ops:
                    ops[node.target] = self.resolve(node.target)
            self._plan = (compile_program(self, ops), _written_later(self.nodes, ops))
        return self._plan

    #: the public name of the argument decoder (:mod:`.jsonplan` decodes constants with it once)
    def decode_arg(self, arg: dict, env: dict) -> Any:
        return self._arg(arg, env)

    @staticmethod
    def _bind(node: JsonNode, result: Any, env: dict) -> None:
        outs = node.outputs
        if result is None or not outs:
            # ops run for their effect (``_assert_tensor_metadata``, ``_assert_scalar``, ``copy_`` into a
            # buffer …) return None and declare no value (or one ``as_none``): nothing to bind
            for o in node.decoded_outputs:
                if isinstance(o, Ref) and not o.sym:
                    env[o.name] = None
            return
        outs = node.decoded_outputs
        if len(outs) == 1:
            o = outs[0]
            if isinstance(o, Ref):   # a tensor, or a symbol (``sym_size``)
                env[o.name] = result
            elif isinstance(o, list):
                for t, r in zip(o, result):
                    if isinstance(t, Ref):
                        env[t.name] = r
            return
        for o, r in zip(outs, result):
            if isinstance(o, Ref) and not o.sym:
                env[o.name] = r
            elif isinstance(o, list):
                for t, rr in zip(o, r):
                    if isinstance(t, Ref):
                        env[t.name] = rr


def alias_args(fn: Any) -> tuple[set[str], set[str]]:
    """``(written, aliased)``: the argument names ``fn`` writes in place, and those its result shares memory with.

    Read from the operator's schema: ``Tensor(a!) self`` is written; an argument whose alias set
    (``a`` in ``Tensor(a) self -> Tensor(a)``, or ``a!`` of an in-place op) is also a return's is
    aliased by the result. An op without a schema (``getitem``) neither writes nor aliases.
    """
    if fn is operator.getitem:
        return set(), {"*"}  # an element of a list of views (``unbind``, ``split``) is still a view
    schema = getattr(fn, "_schema", None)
    if schema is None:
        return set(), set()
    written = {a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write}
    returned: set[str] = set()
    for r in schema.returns:
        if r.alias_info is not None:
            # ``Tensor(a)[]`` keeps its set on the elements: the list aliases every annotated argument
            returned.update(r.alias_info.before_set or {"*"})
    aliased = {a.name for a in schema.arguments
               if a.alias_info is not None and ("*" in returned or returned & set(a.alias_info.before_set))}
    return written, aliased


def written_later(steps: list[tuple[str, Any, Callable[[], dict[str, list[str]]]]]) -> set[str]:
    """Names of the values whose memory some in-place op overwrites after they were computed.

    Values that share memory (a view and its base, two views of one base, an in-place op's result and
    its target) share one *storage root*; a value is overwritten later when an in-place op after it
    writes any value of its root. ``relative_coords[:, :, 0] += 6`` then ``relative_coords[:, :, 0] *= 13``
    (BEiT's relative position index) overwrite ``add_``'s result through a sibling view.

    ``steps``: the program's ops in order, each ``(value name, op, thunk -> {argument name: [value
    names]})``; the thunk is only called for the ops that write or alias, so the walk stays cheap.
    Conservative: a write to any part of a base counts for every view of it.
    """
    root: dict[str, str] = {}
    born: dict[str, int] = {}
    last_write: dict[str, int] = {}
    schemas: dict[Any, tuple[set[str], set[str]]] = {}  # alias_args per operator (reading a schema is slow)
    for i, (name, fn, bound) in enumerate(steps):
        try:
            w, a = schemas[fn]
        except KeyError:
            w, a = schemas[fn] = alias_args(fn)
        except TypeError:  # an unhashable callable
            w, a = alias_args(fn)
        mine = name
        if w or a:
            for arg, values in bound().items():
                if arg in w:
                    for value in values:
                        last_write[root.get(value, value)] = i
                if (arg in a or "*" in a) and values:
                    mine = root.get(values[0], values[0])
        root[name] = mine
        born[name] = i
    return {name for name, i in born.items() if last_write.get(root[name], -1) > i}


def _written_later(nodes: list[JsonNode], ops: dict[str, Any]) -> set[str]:
    steps: list = []
    for n in nodes:
        steps.append((n.name, ops[n.target], lambda n=n: {a["name"]: tensor_names([a]) for a in n.inputs}))
        # the other tensors a node returns (``unbind``'s pieces) are elements of its result
        steps.extend((t, operator.getitem, lambda n=n: {"self": [n.name]})
                     for t in output_names(n.outputs) if t != n.name)
    return written_later(steps)


def output_names(outputs: list) -> list[str]:
    """The tensor names a node's serialized outputs bind."""
    return tensor_names(outputs)


#: the tensor names a node's serialized inputs read (re-exported for the other numerics modules)
input_names = tensor_names


def _first_output_name(node: dict) -> str:
    outs = node.get("outputs") or []
    first = decode_arg(outs[0]) if outs else None
    return first.name if isinstance(first, Ref) and not first.sym else "node"


def _tensor_name(arg: Any) -> str | None:
    d = decode_arg(arg)
    return d.name if isinstance(d, Ref) and not d.sym else None


def _sym_name(arg: Any) -> str | None:
    d = decode_arg(arg)
    return d.name if isinstance(d, Ref) and d.sym else None


def _stage_tensors(record: EtlensRecordLike, stage: str) -> tuple[dict, dict]:
    """The state dict and constants of ``stage`` from an etlens ETRecord.

    Tries the fast restricted unpickler (:mod:`etlens.readers.torch_save`) first and the reader's
    ``torch.load(weights_only=True)`` when that refuses something.
    """
    from ...readers.torch_save import load_tensors_fast

    state_dict, constants = record.stage_tensors(stage, decode=load_tensors_fast)
    return state_dict or {}, constants or {}
