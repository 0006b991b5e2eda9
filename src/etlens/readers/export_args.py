"""The one decoder of torch.export's serialized argument union (``{"as_tensor": {"name": "x"}}`` …).

torch.export writes every node input and output as a one-key dict naming its kind: ``as_tensor``,
``as_tensors``, ``as_optional_tensor(s)``, ``as_int``/``as_float``/``as_bool``/``as_string`` and
their lists, ``as_sym_int``/``as_sym_float``/``as_sym_bool`` (a symbol's name or a constant) and their
lists, ``as_scalar_type``/``as_memory_format``/``as_layout`` (enum codes), ``as_device``,
``as_int_lists``, ``as_complex``, ``as_operator``, ``as_graph``, ``as_none``. Floats may be stored as
the strings ``"Infinity"``, ``"-Infinity"``, ``"NaN"``.

:func:`decode_arg` turns one such dict into plain Python: a :class:`Ref` for a value produced by
another node (a tensor, or a symbol with ``sym=True``), ``None``, a number / bool / string, a list of
those, or a small record for the rest (:class:`EnumArg`, :class:`DeviceArg`, :class:`OperatorArg`,
:class:`GraphArg`, :class:`UnknownArg`). Every user reads arguments through it: the graph reader's
argument text and producer names (:mod:`etlens.readers._export_json`), the program-node tables,
and the numerics' JSON runner (which turns the decoded form into torch values).

Example::

    >>> decode_arg({"as_optional_tensors": [{"as_tensor": {"name": "x"}}, {"as_none": True}]})
    [Ref(name='x', sym=False), None]
    >>> decode_arg({"as_float": "Infinity"})
    inf
    >>> [r.name for r in refs(decode_arg({"as_sym_ints": [{"as_name": "s0"}, {"as_int": 3}]}))]
    ['s0']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..schema.export import EXPORT_DTYPES, EXPORT_LAYOUTS, EXPORT_MEMORY_FORMATS

__all__ = ["Ref", "EnumArg", "DeviceArg", "OperatorArg", "GraphArg", "UnknownArg", "decode_arg", "decode_float",
           "refs", "tensor_names", "arg_text"]

_FLOATS = {"Infinity": float("inf"), "-Infinity": float("-inf"), "NaN": float("nan")}
_SYM = ("as_sym_int", "as_sym_float", "as_sym_bool")
_SYMS = ("as_sym_ints", "as_sym_floats", "as_sym_bools")
_ENUMS: dict[str, tuple[str, dict[int, str]]] = {
    "as_scalar_type": ("dtype", EXPORT_DTYPES),
    "as_memory_format": ("memory_format", EXPORT_MEMORY_FORMATS),
    "as_layout": ("layout", EXPORT_LAYOUTS),
}


@dataclass(frozen=True)
class Ref:
    """A value another node produces: a tensor (``sym=False``) or a symbolic scalar (``sym=True``)."""

    name: str
    sym: bool = False


@dataclass(frozen=True)
class EnumArg:
    """A torch enum: ``kind`` is ``dtype`` / ``memory_format`` / ``layout``, ``name`` what torch calls it
    (``float32``, ``contiguous_format``, ``strided``; the code as text when it is not known)."""

    kind: str
    name: str
    known: bool = True


@dataclass(frozen=True)
class DeviceArg:
    """A ``torch.device``: its type and index (None: no index)."""

    type: str
    index: int | None = None


@dataclass(frozen=True)
class OperatorArg:
    """An operator passed as an argument (a higher-order op's subject): its serialized target."""

    target: str


@dataclass(frozen=True)
class GraphArg:
    """A subgraph argument (``as_graph``), kept as stored."""

    value: Any


@dataclass(frozen=True)
class UnknownArg:
    """An argument kind this decoder does not know (a newer schema), kept as stored."""

    kind: str
    value: Any


def decode_float(v: Any) -> float:
    """A serialized float (``1.5``, ``"Infinity"``, ``"-Infinity"``, ``"NaN"``) as a Python float."""
    return _FLOATS[v] if isinstance(v, str) else float(v)


def _sym(v: Any) -> Any:
    if not isinstance(v, dict) or len(v) != 1:
        return UnknownArg("sym", v)
    ((k, x),) = v.items()
    if k == "as_name":
        return Ref(str(x), sym=True)
    if k == "as_float":
        return decode_float(x)
    return x


def decode_arg(arg: Any) -> Any:  # noqa: C901 - one branch per argument kind
    """One serialized argument (a one-key dict) as plain Python (see the module docstring).

    A bare ``{"name": …}`` (a tensor inside some ``as_tensors`` lists) is a tensor :class:`Ref`; anything
    that is not a one-key dict is an :class:`UnknownArg`.
    """
    if not isinstance(arg, dict) or len(arg) != 1:
        return UnknownArg("?", arg)
    ((kind, v),) = arg.items()
    if kind == "as_tensor":
        return Ref(str(v["name"]))
    if kind == "name":
        return Ref(str(v))
    if kind == "as_none":
        return None
    if kind in ("as_int", "as_bool", "as_string"):
        return v
    if kind == "as_float":
        return decode_float(v)
    if kind in ("as_ints", "as_bools", "as_strings"):
        return list(v)
    if kind == "as_floats":
        return [decode_float(x) for x in v]
    if kind == "as_tensors":
        return [Ref(str(t["name"])) if "name" in t else decode_arg(t) for t in v]
    if kind == "as_optional_tensors":
        return [decode_arg(t) for t in v]
    if kind == "as_optional_tensor":
        return decode_arg(v) if isinstance(v, dict) and "as_tensor" in v else None
    if kind in _SYM:
        return _sym(v)
    if kind in _SYMS:
        return [_sym(x) for x in v]
    if kind in _ENUMS:
        what, names = _ENUMS[kind]
        return EnumArg(what, names[v], True) if v in names else EnumArg(what, str(v), False)
    if kind == "as_device":
        index = v.get("index")
        return DeviceArg(str(v.get("type", "?")), None if index is None else int(index))
    if kind == "as_int_lists":
        return [list(x) for x in v]
    if kind == "as_complex":
        return complex(decode_float(v["real"]), decode_float(v["imag"]))
    if kind == "as_operator":
        return OperatorArg(str(v))
    if kind == "as_graph":
        return GraphArg(v)
    return UnknownArg(kind, v)


def refs(value: Any) -> list[Ref]:
    """Every :class:`Ref` in a decoded argument (a list's in order)."""
    if isinstance(value, Ref):
        return [value]
    if isinstance(value, list):
        return [r for x in value for r in refs(x)]
    return []


def tensor_names(args: list[Any]) -> list[str]:
    """The tensor names a node's serialized inputs (``[{"name": …, "arg": {...}}, ...]``) or outputs
    (``[{"as_tensor": …}, ...]``) refer to, in order (symbols left out)."""
    out: list[str] = []
    for a in args:
        raw = a["arg"] if isinstance(a, dict) and "arg" in a else a
        out.extend(r.name for r in refs(decode_arg(raw)) if not r.sym)
    return out


def _scalar_text(v: Any) -> str:
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str) and v in _FLOATS:
        return repr(_FLOATS[v])
    return str(v)


def arg_text(value: Any) -> str:
    """A decoded argument as the text a graph shows: ``%x`` for a reference, ``[%a, None]``, ``float32``,
    ``cpu:0``, ``<graph>``, ``<kind>`` for an unknown kind."""
    if isinstance(value, Ref):
        return f"%{value.name}"
    if value is None:
        return "None"
    if isinstance(value, list):
        if value and all(isinstance(x, list) for x in value):
            return "<as_int_lists>"   # (as graphs have always shown it)
        return "[" + ", ".join(arg_text(x) for x in value) + "]"
    if isinstance(value, EnumArg):
        return value.name
    if isinstance(value, DeviceArg):
        return value.type + (f":{value.index}" if value.index is not None else "")
    if isinstance(value, GraphArg):
        return "<graph>"
    if isinstance(value, OperatorArg):
        return "<as_operator>"
    if isinstance(value, UnknownArg):
        return f"<{value.kind}>" if value.kind != "?" else str(value.value)
    if isinstance(value, complex):
        return "<as_complex>"
    return _scalar_text(value)
