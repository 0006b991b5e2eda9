"""A :class:`~etlens.analysis.numerics.jsonrun.JsonProgram` compiled once into steps that run cheaply.

Running a node used to mean decoding its serialized arguments again (one ``{"as_tensor": …}``
dict at a time), finding the values it frees, and binding its outputs: on a 1000-layer program
that bookkeeping cost several times the ATen calls themselves. :func:`compile_program` does it once
per program: each node becomes a :class:`Step` with its resolved operator, its arguments already
decoded (constants as values, tensors as the names to look up), the values whose last use it is,
and how its result binds. :meth:`JsonProgram.run <etlens.analysis.numerics.jsonrun.JsonProgram.run>`
then only looks names up, calls, and binds.

The decoding rules are :meth:`JsonProgram._arg`'s, applied ahead of time: an argument kind it does
not know raises :class:`~etlens.analysis.numerics.jsonrun.Unsupported` here, before anything runs.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

from ...readers.export_args import Ref, decode_arg, decode_float, tensor_names

__all__ = ["Step", "compile_program", "float_value", "input_names", "CONST", "NAME", "THUNK"]

#: argument encodings: a decoded constant, a value name looked up at run time, a thunk ``env -> value``
CONST, NAME, THUNK = 0, 1, 2


class Step:
    """One node, ready to run: ``fn(*args, **kwargs)`` with ``args``/``kwargs`` from ``pos``/``kw``.

    ``names``: the positional arguments when all of them are value names and there are no keyword
    arguments (the usual ATen call; looked up in one comprehension); ``drop``: input names whose last
    use is this node; ``out``: the one tensor name the result binds to, or None (then the node's
    outputs are bound by :meth:`JsonProgram._bind`).
    """

    __slots__ = ("node", "fn", "pos", "kw", "names", "drop", "out")

    def __init__(self, node: Any, fn: Any, pos: list, kw: list, drop: list[str], out: str | None):
        self.node, self.fn, self.pos, self.kw, self.drop, self.out = node, fn, pos, kw, drop, out
        self.names = [v for _, v in pos] if not kw and all(t == NAME for t, _ in pos) else None

    def args(self, env: dict) -> tuple[list, dict]:
        if self.names is not None:
            return [env[n] for n in self.names], {}
        args = [v if t == CONST else env[v] if t == NAME else v(env) for t, v in self.pos]
        kwargs = {k: (v if t == CONST else env[v] if t == NAME else v(env)) for k, t, v in self.kw}
        return args, kwargs


#: a serialized float (``1.5``, ``"Infinity"``, ``"NaN"``) as a Python float (the readers' decoder)
float_value = decode_float
#: the tensor names a node's serialized inputs read (the readers' decoder)
input_names = tensor_names


def _list_thunk(parts: list[tuple[int, Any]]) -> Callable[[dict], list]:
    return lambda env: [v if t == CONST else env[v] for t, v in parts]


def compile_arg(prog: Any, arg: dict) -> tuple[int, Any]:
    """The encoding of one serialized argument (see :data:`CONST`, :data:`NAME`, :data:`THUNK`), from the
    readers' decoder (:func:`etlens.readers.export_args.decode_arg`)."""
    d = decode_arg(arg)
    if isinstance(d, Ref):
        return NAME, d.name
    if isinstance(d, list) and any(isinstance(x, Ref) for x in d):
        return THUNK, _list_thunk([(NAME, x.name) if isinstance(x, Ref) else (CONST, prog.value(x, {})) for x in d])
    # everything else is a constant: turned into its value once, exactly as the node-by-node runner does
    return CONST, prog.value(d, {})


def _single_tensor_output(node: Any) -> str | None:
    outs = node.decoded_outputs
    if len(outs) == 1 and isinstance(outs[0], Ref) and not outs[0].sym:
        return outs[0].name
    return None


def _to_positional(fn: Any, pos: list, kw: list, names_of: dict) -> None:
    """Move keyword arguments that the operator's schema takes positionally, in schema order, into
    ``pos`` (an ATen call with positional arguments skips building a kwargs dict and the binder's
    name matching; the call is the same). ``names_of`` memoizes each operator's positional names."""
    if not kw:
        return
    positional = _positional_names(fn, names_of)
    while kw and len(pos) < len(positional) and kw[0][0] == positional[len(pos)]:
        _, t, v = kw.pop(0)
        pos.append((t, v))


def _positional_names(fn: Any, names_of: dict) -> list[str]:
    """The names of ``fn``'s positional (not keyword-only) schema arguments, memoized in ``names_of``."""
    positional = names_of.get(fn)
    if positional is None:
        schema = getattr(fn, "_schema", None)
        positional = names_of[fn] = [a.name for a in schema.arguments if not a.kwarg_only] if schema else []
    return positional


def _tensor_call(fn: Any, inputs: list, names_of: dict) -> list | None:
    """``[(NAME, value name), ...]`` when every input of a node is one tensor passed under the name of
    the schema's next positional argument (what :func:`compile_arg` and :func:`_to_positional` make
    of such a node, in one pass); ``None`` for anything else (the general path decides)."""
    if not inputs:
        return None
    positional = _positional_names(fn, names_of)
    if len(inputs) > len(positional):
        return None
    pos = []
    for a, want in zip(inputs, positional):
        arg = a["arg"]
        if a["name"] != want or len(arg) != 1 or "as_tensor" not in arg:
            return None
        pos.append((NAME, arg["as_tensor"]["name"]))
    return pos


def compile_program(prog: Any, ops: dict[str, Any]) -> list[Step]:
    """The steps of ``prog``'s nodes in order (``ops``: ``{target: resolved operator}``)."""
    inputs = [input_names(node.inputs) for node in prog.nodes]
    last_use: dict[str, int] = {}
    for i, names in enumerate(inputs):
        for name in names:
            last_use[name] = i
    steps = []
    names_of: dict[Any, list[str]] = {}
    for i, node in enumerate(prog.nodes):
        fn = ops[node.target]
        pos = _tensor_call(fn, node.inputs, names_of)
        if pos is not None:  # the usual ATen call: tensors in schema order (linear, relu, add …)
            kw: list = []
        elif fn is operator.getitem or getattr(fn, "__module__", None) in ("_operator", "operator"):
            pos = [compile_arg(prog, a["arg"]) for a in node.inputs]
            kw = []
        else:
            # unnamed inputs are positional (a higher-order op's operator argument)
            pos = [compile_arg(prog, a["arg"]) for a in node.inputs if not a["name"]]
            kw = [(a["name"], *compile_arg(prog, a["arg"])) for a in node.inputs if a["name"]]
            _to_positional(fn, pos, kw, names_of)
        drop = list(dict.fromkeys(n for n in inputs[i] if last_use[n] == i))
        steps.append(Step(node, fn, pos, kw, drop, _single_tensor_output(node)))
    return steps
