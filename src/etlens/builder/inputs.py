"""A model's example inputs as a pytree, end to end; flattened only where a runtime needs a flat list.

``torch.export`` takes the positional arguments of ``forward`` as a tuple whose items may be nested
tuples, lists or dicts of tensors — an LSTM's ``(x, (h0, c0))``. Everything that runs the model in
Python (export, quantization, calibration, the reference) keeps that structure. The ExecuTorch
runtime's ``forward`` takes one flat list of tensors in the pytree order ``torch.export`` uses for the
program's placeholders, so the runner flattens right before the call (:func:`flatten_inputs`).

Example::

    args = as_args((x, (h0, c0)))        # (x, (h0, c0)): a tuple of positional arguments, kept nested
    flatten_inputs(args)                 # [x, h0, c0]: what Module.forward of the runtime takes
    describe_inputs(args)                # "(f32[5, 3, 10], (f32[2, 3, 20], f32[2, 3, 20]))"
"""

from __future__ import annotations

from typing import Any

from ..errors import EtlensError

__all__ = ["as_args", "flatten_inputs", "describe_inputs", "is_nested", "check_inputs", "args_for"]


def as_args(inputs: Any) -> tuple:
    """The positional arguments of ``forward``: a tuple (a list becomes one, a lone value a 1-tuple).

    Items are kept as they are: nested tuples, lists and dicts stay nested.
    """
    if isinstance(inputs, tuple):
        return inputs
    if isinstance(inputs, list):
        return tuple(inputs)
    return (inputs,)


def flatten_inputs(inputs: Any) -> list:
    """The leaves of ``inputs`` in ``torch.export``'s pytree order (the runtime's input order).

    Also flattens a model's nested outputs (``(out, (h, c))`` -> ``[out, h, c]``), the order in which
    the runtime returns them.
    """
    from torch.utils._pytree import tree_flatten

    leaves, _ = tree_flatten(as_args(inputs))
    return leaves


def is_nested(inputs: Any) -> bool:
    """True when some positional argument is itself a container (tuple, list, dict)."""
    return any(isinstance(a, (tuple, list, dict)) for a in as_args(inputs))


def describe_inputs(inputs: Any) -> str:
    """A short text of the structure and shapes: ``(f32[5, 3, 10], (f32[2, 3, 20], f32[2, 3, 20]))``."""

    def one(x: Any) -> str:
        if isinstance(x, tuple):
            return "(" + ", ".join(one(v) for v in x) + ("," if len(x) == 1 else "") + ")"
        if isinstance(x, list):
            return "[" + ", ".join(one(v) for v in x) + "]"
        if isinstance(x, dict):
            return "{" + ", ".join(f"{k!r}: {one(v)}" for k, v in x.items()) + "}"
        shape = getattr(x, "shape", None)
        if shape is not None and hasattr(x, "dtype"):
            dt = str(x.dtype).replace("torch.", "").replace("float", "f").replace("int", "i")
            return f"{dt}{list(shape)}"
        return type(x).__name__ if x is not None else "None"

    return one(as_args(inputs))


def check_inputs(inputs: Any, where: str = "example inputs") -> tuple:
    """``as_args(inputs)`` after checking every leaf is a tensor, a number, a bool or None.

    Raises :class:`~etlens.errors.EtlensError` naming the offending position (``[1][0]``) otherwise.
    """
    args = as_args(inputs)

    def walk(x: Any, path: str) -> None:
        if isinstance(x, (tuple, list)):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]")
        elif isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{path}[{k!r}]")
        elif not (x is None or isinstance(x, (bool, int, float)) or (hasattr(x, "shape") and hasattr(x, "dtype"))):
            raise EtlensError(f"{where}{path}: a {type(x).__name__}; inputs must be tensors, numbers or nested "
                              "tuples/lists/dicts of them")

    for i, a in enumerate(args):
        walk(a, f"[{i}]")
    return args


def args_for(gm: Any, inputs: Any) -> tuple:
    """The positional arguments ``gm`` takes: nested as given when its graph flattens a pytree itself
    (``ExportedProgram.module()``), else the flat leaves (a graph module built with plain calling
    conventions, e.g. one rewritten to return extra values)."""
    codegen = getattr(getattr(gm, "graph", None), "_codegen", None)
    if getattr(codegen, "pytree_info", None) is not None:
        return as_args(inputs)
    return tuple(flatten_inputs(inputs))
