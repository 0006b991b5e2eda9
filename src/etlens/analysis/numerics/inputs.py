"""What the reference program runs on: recorded, given, or recovered from the device's own dump.

The numeric gap re-runs the ETRecord's reference program on the inputs the device ran. Three
sources, tried in this order by :func:`reference_inputs`:

1. inputs the caller gives (``etlens gap --inputs inputs.pt``: a ``torch.save``-d tuple of the
   method's inputs, loaded with ``weights_only=True``; for ``--run N`` a list of such tuples, one per
   run ``0..N``);
2. the ETRecord's ``representative_inputs`` (``etrecord.update_representative_inputs(...)``);
3. **recovery from the debug buffer**. ExecuTorch's runtime does not log a method's inputs (only
   each kernel's ``out`` tensor, every argument of a delegate call, and the method's outputs), but
   what the first ops write determines them. ExecuTorch's own ``export_llama`` writes no
   representative inputs, and its programs start exactly like this: ``tokens`` go into an
   ``embedding`` (portable kernel, output logged) and ``input_pos`` into a ``select`` whose scalar is
   logged. For each user input the first rule that applies gives its value:

   * ``embedding(weight, x)``: each logged output row is a row of ``weight`` (a constant of the
     ETRecord); its index is the token id (exact row match, else the nearest row);
   * an op that keeps the values of a one-element input (``select``, ``view``, ``clone``,
     ``_to_copy``, ``squeeze``/``unsqueeze``…): the logged scalar reshaped to the input's shape;
   * an argument of a delegate call, logged by the runtime with the call's other arguments: the
     one logged tensor of exactly the input's static shape and dtype.

   The recovered inputs are checked by the comparison itself (the first rows compare the
   re-computed embedding / select with the logged one: gap 0 when the recovery is right).

When none applies, :class:`~etlens.errors.MissingDataError` names both ways out (``--inputs`` and
``update_representative_inputs``).
"""

from __future__ import annotations

import os
from typing import Any

from ...errors import MissingDataError

__all__ = ["reference_inputs", "inputs_for_run", "load_inputs_file", "recover_inputs", "INPUTS_HINT"]

#: how to give inputs, named in every error of this module
INPUTS_HINT = ("give the method's inputs with --inputs inputs.pt (torch.save((tokens, input_pos), 'inputs.pt'); "
               "Python: calculate_numeric_gap(..., inputs=...)) or record them in the ETRecord at export: "
               "to_edge_transform_and_lower(..., generate_etrecord=True), then etrecord = program.get_etrecord(); "
               "etrecord.update_representative_inputs([example_inputs]); etrecord.save(path)")

#: ops whose output holds exactly the values of their (first) input, in memory order
_VALUE_KEEPING = ("select_copy", "select", "view_copy", "view", "clone", "_to_copy", "squeeze_copy", "squeeze",
                  "unsqueeze_copy", "unsqueeze", "reshape", "alias_copy", "alias", "_clone_dim_order",
                  "_to_dim_order_copy", "expand_copy", "contiguous")


def load_inputs_file(path: str, run: int = 0) -> tuple:
    """The input tuple in ``path`` (``torch.save``-d; a list of tuples: the one of ``run``)."""
    import torch

    if not os.path.exists(path):
        raise MissingDataError(f"--inputs {path}: no such file; {INPUTS_HINT}")
    try:
        val = torch.load(path, weights_only=True)
    except Exception as exc:  # pickle errors, weights_only refusals, truncated files
        raise MissingDataError(f"--inputs {path}: cannot load it with torch.load(weights_only=True) "
                               f"({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}); "
                               f"save a tuple of tensors: torch.save((tokens, input_pos), '{path}')") from exc
    return as_input_tuple(val, run, f"--inputs {path}")


def as_input_tuple(val: Any, run: int = 0, what: str = "inputs") -> tuple:
    """One run's input tuple from a tensor, a tuple of inputs, or a list with one tuple per run."""
    import torch

    if isinstance(val, torch.Tensor):
        return (val,)
    if isinstance(val, list) and val and all(isinstance(v, (list, tuple)) for v in val):
        if run >= len(val):
            raise MissingDataError(f"{what}: holds inputs for {len(val)} run(s), run {run} was asked for")
        return tuple(val[run])
    if isinstance(val, (list, tuple)):
        if run:
            raise MissingDataError(f"{what}: holds one run's inputs; comparing run {run} needs a list with one "
                                   f"input tuple per run 0..{run} (the earlier runs fill the KV cache)")
        return tuple(val)
    raise MissingDataError(f"{what}: expected a tuple of tensors, found {type(val).__name__}; {INPUTS_HINT}")


def reference_inputs(record: Any, given: Any = None, *, run: int = 0, recover: Any = None) -> tuple[tuple, str]:
    """``(inputs, source)``: what the reference runs on, and where it came from (see the module docstring).

    ``given``: a path or the inputs themselves; ``recover``: a thunk trying :func:`recover_inputs`
    (``None`` when there is nothing to recover from), returning a tuple or raising
    :class:`MissingDataError` with the reason.
    """
    if given is not None:
        if isinstance(given, (str, os.PathLike)):
            return load_inputs_file(str(given), run), f"--inputs {given}"
        return as_input_tuple(given, run), "given inputs"
    inputs = record.representative_inputs() if run == 0 else None
    if inputs:
        first = inputs[0] if isinstance(inputs, list) else inputs
        return (first if isinstance(first, tuple) else (first,)), "the ETRecord's representative inputs"
    why = "no representative inputs recorded" if run == 0 else f"run {run} needs that run's inputs"
    if recover is not None:
        try:
            return recover(), "recovered from the debug buffer"
        except MissingDataError as exc:
            why += f", and they cannot be recovered from the debug buffer ({exc})"
    raise MissingDataError(f"{record.path}: {why}, so there is nothing to run the reference on; {INPUTS_HINT}")


def inputs_for_run(record: Any, given: Any, run: int, ref: Any, runtime_of: Any) -> tuple[tuple, str, list]:
    """``(inputs of run, source, inputs of runs 0..run-1)`` for the reference ``ref`` (a ``ReferenceProgram``).

    ``runtime_of(k)``: the :class:`~etlens.analysis.numerics.runtime.RuntimeOutputs` of run ``k``,
    from which the inputs are recovered when neither ``given`` nor the record has them.
    """
    def recover(k: int) -> tuple:
        rt = runtime_of(k)
        delegated = {h for key, w in rt.winners.items() if w["delegated"] for h in key}
        return recover_inputs(ref.program, ref.handles, rt.outputs, delegated)

    inputs, source = reference_inputs(record, given, run=run, recover=lambda: recover(run))
    warmup = [reference_inputs(record, given, run=k, recover=lambda k=k: recover(k))[0] for k in range(run)]
    return inputs, source, warmup


# -- recovery -------------------------------------------------------------------------------------
def _short(target: str) -> str:
    """``torch.ops.aten.select_copy.int`` -> ``select_copy``."""
    parts = str(target).split(".")
    if len(parts) >= 2 and parts[-1] in ("default", "int", "Tensor", "dims", "dim", "out"):
        return parts[-2]
    return parts[-1]


def recover_inputs(program: Any, handles: dict | None, runtime_outputs: dict, delegated: set | None = None) -> tuple:
    """Recover a program's user inputs from the runtime's logged outputs (rules in the module docstring).

    Args:
        program: a :class:`~etlens.analysis.numerics.jsonrun.JsonProgram` or an ``ExportedProgram``.
        handles: ``{node name: handle}`` overriding the nodes' own ``debug_handle`` (the ATen
            reference's back-propagated handles), or ``None``.
        runtime_outputs: :attr:`RuntimeOutputs.outputs` (merged handle tuple -> (debug data, n)).
        delegated: the handles whose logged event is a delegate call (its arguments are logged).

    Raises:
        MissingDataError: naming the first input no rule recovers.
    """
    from .jsonrun import JsonProgram

    view = _JsonView(program, handles) if isinstance(program, JsonProgram) else _FxView(program, handles)
    logged = _by_handle(runtime_outputs)
    out = []
    for name, dtype, shape in view.user_inputs():
        value = None
        for target, handle, first_arg, weight_name in view.consumers(name):
            data = logged.get(handle) if handle is not None else None
            if not data:
                continue
            value = _recover_one(target, dtype, shape, first_arg, data, weight_name, view,
                                 handle in (delegated or ()))
            if value is not None:
                break
        if value is None:
            raise MissingDataError(f"no logged value determines the program input {name!r} "
                                   f"(its first ops log nothing that holds it)")
        out.append(value)
    return tuple(out)


def _recover_one(target: str, dtype: Any, shape: tuple | None, first_arg: bool, data: list, weight_name: str | None,
                 view: Any, delegated: bool) -> Any:
    import torch

    op = _short(target)
    tensors = [t for t in data if isinstance(t, torch.Tensor)]
    if op == "embedding" and not first_arg and weight_name is not None:
        weight = view.tensor(weight_name)
        if weight is None or weight.dim() != 2:
            return None
        for t in tensors:
            if t.dim() >= 1 and t.shape[-1] == weight.shape[1] and t.is_floating_point():
                rows = t.reshape(-1, weight.shape[1]).to(weight.dtype)
                ids = torch.cdist(rows.double(), weight.double()).argmin(dim=1)
                return ids.reshape(t.shape[:-1]).to(dtype or torch.long)
        return None
    if op in _VALUE_KEEPING and first_arg and shape is not None and all(isinstance(d, int) for d in shape):
        numel = 1
        for d in shape:
            numel *= d
        for t in tensors:
            if t.numel() == numel:
                return t.reshape(shape).to(dtype or t.dtype).clone()
        return None
    if delegated and shape is not None and all(isinstance(d, int) for d in shape):  # a delegate's logged argument
        same = [t for t in tensors if tuple(t.shape) == tuple(shape) and (dtype is None or t.dtype == dtype)]
        if len(same) == 1:
            return same[0].clone()
    return None


def _by_handle(runtime_outputs: dict) -> dict[int, list]:
    """Every single handle -> the logged tensors of the (merged) event that covers it."""
    out: dict[int, list] = {}
    for key, (data, _n) in runtime_outputs.items():
        for h in key:
            out.setdefault(h, list(data) if isinstance(data, (list, tuple)) else [data])
    return out


class _JsonView:
    """User inputs and their consumers in a serialized program (:class:`JsonProgram`)."""

    def __init__(self, program: Any, handles: dict | None) -> None:
        self.p = program
        self.handles = handles

    def user_inputs(self) -> list[tuple[str, Any, tuple | None]]:
        import torch

        from ...schema.export import EXPORT_DTYPES

        out = []
        for spec in self.p._specs:
            (kind, body), = spec.items()
            if kind != "user_input":
                continue
            arg = body.get("arg") or {}
            name = (arg.get("as_tensor") or {}).get("name") or arg.get("name")
            if name is None:
                raise MissingDataError("a program input is not a tensor (symbolic or constant inputs are not "
                                       "recovered)")
            meta = self.p.tensor_meta.get(name) or {}
            dt = EXPORT_DTYPES.get(meta.get("dtype"))
            sizes = tuple(s.get("as_int") if "as_int" in s else None for s in meta.get("sizes", [])) \
                if "sizes" in meta else None
            out.append((name, getattr(torch, dt) if dt else None, sizes))
        return out

    def consumers(self, name: str) -> list[tuple[str, Any, bool, str | None]]:
        out = []
        for node in self.p.nodes:
            args = [(a["name"], a["arg"]) for a in node.inputs]
            names = [(v.get("as_tensor") or {}).get("name") if isinstance(v, dict) else None for _, v in args]
            if name not in names:
                continue
            raw = self.handles.get(node.name) if self.handles is not None else node.debug_handle
            handle = raw if isinstance(raw, int) else (raw[-1] if raw else None)
            weight = names[0] if names and names[0] != name else None
            out.append((node.target, handle, names.index(name) == 0, weight))
        return out

    def tensor(self, name: str) -> Any:
        for spec in self.p._specs:
            (kind, body), = spec.items()
            arg = body.get("arg") or {}
            if arg.get("name") == name or (arg.get("as_tensor") or {}).get("name") == name:
                key = body.get("parameter_name") or body.get("buffer_name") or body.get("tensor_constant_name")
                if key is None:
                    return None
                self.p.load_tensors()
                return self.p._state(key)
        return None


class _FxView:
    """The same questions asked of a deserialized ``ExportedProgram``."""

    def __init__(self, program: Any, handles: dict | None) -> None:
        self.ep = program
        self.handles = handles
        self.gm = getattr(program, "graph_module", program)

    def user_inputs(self) -> list[tuple[str, Any, tuple | None]]:
        sig = getattr(self.ep, "graph_signature", None)
        names = list(sig.user_inputs) if sig is not None else [
            n.name for n in self.gm.graph.nodes if n.op == "placeholder"]
        out = []
        for n in self.gm.graph.nodes:
            if n.op == "placeholder" and n.name in names:
                val = n.meta.get("val")
                shape = tuple(int(d) if isinstance(d, int) else None for d in val.shape) if hasattr(val, "shape") \
                    else None
                out.append((n.name, getattr(val, "dtype", None), shape))
        return out

    def consumers(self, name: str) -> list[tuple[str, Any, bool, str | None]]:
        node = next(n for n in self.gm.graph.nodes if n.name == name)
        out = []
        for user in node.users:
            if user.op != "call_function":
                continue
            raw = self.handles.get(user.name) if self.handles is not None else user.meta.get("debug_handle")
            handle = raw if isinstance(raw, int) else (raw[-1] if raw else None)
            first = user.args[0] if user.args else None
            weight = first.name if hasattr(first, "name") and first is not node else None
            out.append((str(user.target), handle, first is node, weight))
        return out

    def tensor(self, name: str) -> Any:
        sig = getattr(self.ep, "graph_signature", None)
        if sig is None:
            return None
        key = sig.inputs_to_parameters.get(name) or sig.inputs_to_buffers.get(name) or \
            sig.inputs_to_lifted_tensor_constants.get(name)
        if key is None:
            return None
        state = self.ep.state_dict
        return state[key] if key in state else (getattr(self.ep, "constants", {}) or {}).get(key)
