"""Fully-int8 I/O: strip the float-in/float-out (de)quantize wrapper of a pt2e-quantized program.

A program quantized with pt2e still takes and returns float tensors: its first op quantizes each
input (``quantize_per_tensor``) and its last op dequantizes each output. Microcontroller and DSP
deployments want the int8 tensors directly, with the scale/zero point published once.
:class:`QuantizeInputs` removes the input quantize ops (the input placeholder becomes int8) and
:class:`QuantizeOutputs` removes the output dequantize ops (the output is int8); both record the
parameters in ``.qparams`` so the caller can (de)quantize at the boundary.

Both follow the ``torch.fx.passes.infra`` shape (``pass(graph_module) -> PassResult``), so they
work in ExecuTorch's pass managers. Run them on the edge program after ``to_edge`` and before any
backend pass renames the quantize ops, e.g. as ``transform_passes`` of
``to_edge_transform_and_lower`` (which also runs them before the partitioner sees the graph)::

    qin, qout = QuantizeInputs(), QuantizeOutputs()
    edge = to_edge_transform_and_lower(ep, transform_passes=[qin, qout], partitioner=[XnnpackPartitioner()])
    x_q = qin.qparams[0].quantize(x)            # int8 input for the runtime
    y = qout.qparams[0].dequantize(y_q)        # float result from the int8 output

Nothing here imports ExecuTorch: the ops are matched by name, so the passes also run on ATen
programs that use ``torch.ops.quantized_decomposed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ..errors import EtlensError

__all__ = ["QParams", "QuantizeInputs", "QuantizeOutputs"]

_QUANT = "quantized_decomposed.quantize_per_tensor"
_DEQUANT = "quantized_decomposed.dequantize_per_tensor"


def _op_name(target: Any) -> str:
    inner = getattr(target, "_op", None)  # ExecuTorch's EdgeOpOverload wraps the torch op
    return str(inner if inner is not None else target)


def _is(node: Any, prefix: str) -> bool:
    if node.op != "call_function":
        return False
    name = _op_name(node.target)
    return name == prefix or name.startswith(prefix + ".")


@dataclass(frozen=True)
class QParams:
    """Per-tensor quantization parameters of one program input or output."""

    scale: float
    zero_point: int
    quant_min: int
    quant_max: int
    dtype: Any  # torch.dtype

    def quantize(self, x: Any) -> Any:
        """Float tensor → integer tensor, the way the removed quantize op did it."""
        import torch

        q = torch.clamp(torch.round(x / self.scale) + self.zero_point, self.quant_min, self.quant_max)
        return q.to(self.dtype)

    def dequantize(self, q: Any) -> Any:
        """Integer tensor → float tensor, the way the removed dequantize op did it."""
        import torch

        return (q.to(torch.float32) - self.zero_point) * self.scale

    def to_json(self) -> dict[str, Any]:
        return {"scale": self.scale, "zero_point": self.zero_point, "quant_min": self.quant_min,
                "quant_max": self.quant_max, "dtype": str(self.dtype).replace("torch.", "")}


def _qparams(node: Any) -> QParams:
    args = list(node.args[1:6])
    for i, key in enumerate(("scale", "zero_point", "quant_min", "quant_max", "dtype")):
        if i >= len(args) and key in node.kwargs:
            args.append(node.kwargs[key])
    scale, zp, qmin, qmax, dtype = args
    if hasattr(scale, "op"):
        raise EtlensError(f"node {node.name!r}: scale is a tensor computed in the graph (dynamic "
                          "quantization); only static per-tensor quantization has fixed I/O parameters")
    return QParams(float(scale), int(zp), int(qmin), int(qmax), dtype)


def _pass_result(gm: Any, modified: bool) -> Any:
    from torch.fx.passes.infra.pass_base import PassResult

    if modified:
        gm.graph.eliminate_dead_code()
        gm.graph.lint()
        gm.recompile()
    return PassResult(gm, modified)


class QuantizeInputs:
    """Make the program take integer inputs: remove each user input's leading ``quantize_per_tensor``.

    ``indices``: which user inputs (0-based, in placeholder order among inputs that feed a quantize
    op… see below); ``None`` means every input whose only consumer is a quantize op. With
    ``strict=True`` (the default when ``indices`` is given) an input that is not quantized raises.
    After the pass, ``qparams[i]`` holds the parameters input ``i`` must be quantized with.

    Inputs are the graph's placeholders that are not parameters: when the pass runs inside an
    ExecuTorch pass manager it only sees the graph module, so a placeholder counts as a user input
    when ``user_inputs`` (names, e.g. from ``ep.graph_signature.user_inputs``) lists it, or — if no
    names were given — when its single consumer is a ``quantize_per_tensor`` op (weights of a pt2e
    program are stored already quantized and feed ``dequantize`` ops instead).
    """

    def __init__(self, indices: Iterable[int] | None = None, *, user_inputs: Iterable[str] | None = None,
                 strict: bool | None = None) -> None:
        self.indices = None if indices is None else sorted(set(indices))
        self.user_inputs = None if user_inputs is None else list(user_inputs)
        self.strict = (indices is not None) if strict is None else strict
        self.qparams: dict[int, QParams] = {}
        self.__name__ = type(self).__name__

    def _inputs(self, graph: Any) -> list[Any]:
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        if self.user_inputs is not None:
            by_name = {n.name: n for n in placeholders}
            return [by_name[n] for n in self.user_inputs if n in by_name]
        return [n for n in placeholders if len(n.users) == 1 and _is(next(iter(n.users)), _QUANT)]

    def __call__(self, gm: Any) -> Any:
        inputs = self._inputs(gm.graph)
        wanted = range(len(inputs)) if self.indices is None else self.indices
        modified = False
        for i in wanted:
            if i >= len(inputs):
                raise EtlensError(f"QuantizeInputs: input {i} does not exist (the program has "
                                  f"{len(inputs)} quantized user inputs)")
            ph = inputs[i]
            users = list(ph.users)
            if len(users) != 1 or not _is(users[0], _QUANT):
                if self.strict:
                    what = ", ".join(f"{u.name} ({_op_name(u.target)})" for u in users) or "nothing"
                    raise EtlensError(f"QuantizeInputs: input {i} ({ph.name!r}) is not consumed by a single "
                                      f"quantize_per_tensor op but by {what}")
                continue
            q = users[0]
            qp = _qparams(q)
            val = ph.meta.get("val")
            if val is not None and hasattr(val, "to"):
                ph.meta["val"] = val.to(qp.dtype)
            if "tensor_meta" in ph.meta:
                ph.meta.pop("tensor_meta")
            q.replace_all_uses_with(ph)
            gm.graph.erase_node(q)
            self.qparams[i] = qp
            modified = True
        return _pass_result(gm, modified)


class QuantizeOutputs:
    """Make the program return integer outputs: drop each output's trailing ``dequantize_per_tensor``.

    ``indices``: which outputs (0-based); ``None`` means every output produced by a dequantize op.
    After the pass, ``qparams[i]`` holds the parameters to dequantize output ``i`` with.
    """

    def __init__(self, indices: Iterable[int] | None = None, *, strict: bool | None = None) -> None:
        self.indices = None if indices is None else sorted(set(indices))
        self.strict = (indices is not None) if strict is None else strict
        self.qparams: dict[int, QParams] = {}
        self.__name__ = type(self).__name__

    def __call__(self, gm: Any) -> Any:
        out = next(n for n in gm.graph.nodes if n.op == "output")
        values = out.args[0]
        single = not isinstance(values, (list, tuple))
        values = [values] if single else list(values)
        wanted = range(len(values)) if self.indices is None else self.indices
        modified = False
        for i in wanted:
            if i >= len(values):
                raise EtlensError(f"QuantizeOutputs: output {i} does not exist (the program has {len(values)})")
            v = values[i]
            if not hasattr(v, "op") or not _is(v, _DEQUANT):
                if self.strict:
                    what = _op_name(v.target) if hasattr(v, "target") else type(v).__name__
                    raise EtlensError(f"QuantizeOutputs: output {i} is produced by {what}, not by a "
                                      "dequantize_per_tensor op")
                continue
            self.qparams[i] = _qparams(v)
            values[i] = v.args[0]
            modified = True
        if modified:
            out.args = (values[0] if single else type(out.args[0])(values),) + tuple(out.args[1:])
        return _pass_result(gm, modified)
