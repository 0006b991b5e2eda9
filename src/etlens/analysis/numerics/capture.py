"""Reference capture: pick the reference program of an ETRecord, give its nodes debug handles, run it.

The reference is what the runtime is compared against (ExecuTorch's ``reference_graph``):

* ``"exported_program"`` — the ATen program from ``torch.export``. It has no debug handles of its
  own: each ATen node gets the handle of the edge node that descends from it (edge nodes carry
  ``from_node`` chains back to ATen nodes, named ``<node name>.<graph id>``, with the ATen graph's
  id stored as ``export_graph_id``). ATen nodes with no edge descendant (removed by a pass) get 0.
  The program is usable only if every edge handle was found (unless validation is disabled).
* ``"edge_dialect_exported_program"`` — the edge program, whose nodes carry handles already.
* any other name — a ``graph_map`` program (``"<module>"`` means ``"<module>/forward"``).
* ``None`` — the ATen program when the propagation succeeds, else the edge program.

Unlike ExecuTorch, the propagated handles are kept in a side table: the cached program is never
mutated, so asking twice (or for another reference) gives the same answer.

:func:`capture_reference` runs the program once on the representative inputs with an fx
``Interpreter`` and records, per debug handle, the output of the last node carrying it (the same
choice as ExecuTorch's ``IntermediateOutputCapturer``), plus names, stack traces and module paths.
With ``keep=`` only the handles that can be compared are stored, and tensors nobody needs any more
are freed as the run goes (the interpreter drops values after their last use).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ...errors import MissingDataError, first_line
from ..record import EDGE_PROGRAM, EXPORTED_PROGRAM, ETRecordLike, Record, as_record

__all__ = ["ReferenceProgram", "RefNode", "Capture", "resolve_reference", "propagate_back_handles",
           "capture_reference", "handle_key", "EXPORTED_PROGRAM", "EDGE_PROGRAM", "UNSET_DEBUG_HANDLE",
           "RUNNER_JSON", "RUNNER_FX"]

log = logging.getLogger(__name__)

UNSET_DEBUG_HANDLE = 0
_HINT_INPUTS = ("export with to_edge_transform_and_lower(..., generate_etrecord=True), then "
                "etrecord = et_program.get_etrecord(); etrecord.update_representative_inputs([example_inputs]); "
                "etrecord.save(path)")


def handle_key(handle: Any) -> tuple:
    """A node's ``debug_handle`` meta (int or list) as a tuple key: ``3 -> (3,)``."""
    return (handle,) if isinstance(handle, int) else tuple(handle)


@dataclass
class ReferenceProgram:
    """The resolved reference: its name, the program, and handles given by back-propagation (or None).

    ``program`` is a deserialized ``ExportedProgram`` / ``GraphModule``, or a
    :class:`~etlens.analysis.numerics.jsonrun.JsonProgram` run straight from the ETRecord's JSON
    (then ``fallback()`` gives the deserialized program if the JSON runner meets something it does
    not support).
    """

    name: str
    program: Any
    handles: dict | None = None  # node name -> int, for the ATen program
    fallback: Callable[[], Any] | None = None


# -- lineage ------------------------------------------------------------------------------------
def _src_field(src: Any, name: str, default: Any = None) -> Any:
    if isinstance(src, dict):
        return src.get(name, default)
    return getattr(src, name, default)


def _ancestor_ids(node: Any) -> list[tuple[str, str]]:
    """``[(name, graph_id as text), ...]`` of a node's provenance chain, nearest first (ExecuTorch's
    walk: always the last entry of each ``from_node`` list)."""
    chain = node.meta.get("from_node")
    if not chain:
        return []
    src = chain[-1]
    out = [(str(_src_field(src, "name")), str(_src_field(src, "graph_id")))]
    while True:
        parents = _src_field(src, "from_node") or []
        if not parents:
            return out
        src = parents[-1]
        out.append((str(_src_field(src, "name")), str(_src_field(src, "graph_id"))))


def _graph_modules(gm: Any) -> Iterator[Any]:
    """The graph module and its nested graph modules (control-flow branches), breadth first."""
    import torch

    queue = [gm]
    seen = set()
    while queue:
        cur = queue.pop(0)
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        yield cur
        for node in cur.graph.nodes:
            if node.op == "get_attr":
                sub = _get_attr(cur, node.target)
                if isinstance(sub, torch.fx.GraphModule):
                    queue.append(sub)


def _get_attr(gm: Any, target: str) -> Any:
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _op_nodes(gm: Any) -> Iterator[Any]:
    for sub in _graph_modules(gm):
        for node in sub.graph.nodes:
            if node.op not in ("placeholder", "output"):
                yield node


def _graph_module(program: Any) -> Any:
    return getattr(program, "graph_module", program)


def _fx_views(program: Any) -> list[tuple]:
    """``(name, debug_handle meta, ancestors thunk, top_level)`` for every op node of an fx program."""
    gm = _graph_module(program)
    top = set(gm.graph.nodes)
    return [(n.name, n.meta.get("debug_handle"), (lambda n=n: _ancestor_ids(n)), n in top) for n in _op_nodes(gm)]


def _json_views(program: Any) -> list[tuple]:
    return [(n.name, n.debug_handle, (lambda n=n: n.ancestors), True) for n in program.nodes]


def _views(program: Any) -> list[tuple]:
    from .jsonrun import JsonProgram, NodeLineage

    return _json_views(program) if isinstance(program, (JsonProgram, NodeLineage)) else _fx_views(program)


def propagate_back_handles(aten_program: Any, export_graph_id: Any, edge_program: Any,
                           disable_validation: bool = False) -> dict | None:
    """Debug handles for the ATen program's nodes, from the edge program's provenance chains.

    Works on deserialized programs and on :class:`~etlens.analysis.numerics.jsonrun.JsonProgram`.
    Returns ``{node name: handle}`` for the top-level ATen nodes (0 for nodes no edge node descends
    from), or ``None`` when some edge handle has no ATen node and ``disable_validation`` is false
    (the ATen program is then not a faithful reference). Linear in the total length of the chains.
    """
    ancestor_handle: dict[tuple[str, str], Any] = {}  # (name, graph id as text) -> edge handle
    graph_id = str(export_graph_id)
    edge_handles: list[Any] = []
    for _, handle, ancestors, _top in _views(edge_program):
        edge_handles.append(handle)
        for anc in ancestors():
            # ExecuTorch asserts every descendant agrees; the first one wins here
            ancestor_handle.setdefault(anc, handle)

    handles: dict[str, Any] = {}
    matched: set = set()
    for name, _, ancestors, top in _views(aten_program):
        found = ancestor_handle.get((name, graph_id))
        if found is None:
            for anc in ancestors():
                found = ancestor_handle.get(anc)
                if found is not None:
                    break
        if found is not None:
            try:
                matched.add(found)
            except TypeError:
                pass
        if top:
            handles.setdefault(name, UNSET_DEBUG_HANDLE if found is None else found)

    if not disable_validation:
        for handle in edge_handles:
            try:
                ok = handle in matched
            except TypeError:  # an unhashable (list) handle cannot have been matched
                ok = False
            if not ok:
                return None
    return handles


# -- resolving the reference program -----------------------------------------------------------------
def pick_edge_stage(stages: list[str]) -> str | None:
    for s in stages:
        if s == EDGE_PROGRAM or s.startswith(EDGE_PROGRAM + "/"):
            if s in (EDGE_PROGRAM, EDGE_PROGRAM + "/forward"):
                return s
    edge = [s for s in stages if s.startswith(EDGE_PROGRAM)]
    return edge[0] if edge else None


def _json_loader(record: Record) -> Callable[[str], Any] | None:
    """``stage -> JsonProgram`` for etlens ETRecords (they expose ``program_json``), else None."""
    if record.etlens is None:
        return None
    from .jsonrun import JsonProgram

    cache: dict[str, Any] = {}

    def load(stage: str) -> Any:
        if stage not in cache:
            cache[stage] = JsonProgram.from_record(record.etlens, stage)
        return cache[stage]

    return load


def resolve_reference(record: ETRecordLike | Record, reference_graph: str | None = None,
                      disable_validation: bool = False, fast: bool = True) -> ReferenceProgram:
    """Pick the reference program as ExecuTorch does (see the module docstring).

    With ``fast`` (default) and an etlens ETRecord, programs are read from their JSON and run
    directly (no fx deserialization); ``fast=False`` always uses the deserialized programs.

    Raises :class:`~etlens.errors.MissingDataError` when the requested program is not in the record
    or the ATen program was asked for explicitly and the handle propagation failed.
    """
    from .jsonrun import Unsupported

    record = as_record(record)
    loader = _json_loader(record) if fast else None
    if loader is not None:
        from .jsonrun import NodeLineage

        try:
            ref = _resolve(record, reference_graph, disable_validation, loader,
                           lambda stage: NodeLineage.from_record(record, stage) or loader(stage))
        except Unsupported as exc:
            log.info("reading the reference from JSON is not supported here (%s); deserializing it", exc)
        else:
            stage = ref.program.name
            ref.fallback = lambda: record.load_program(stage)
            return ref
    return _resolve(record, reference_graph, disable_validation, record.load_program)


def _resolve(record: Record, reference_graph: str | None, disable_validation: bool,
             load: Callable[[str], Any], lineage: Callable[[str], Any] | None = None) -> ReferenceProgram:
    """``load(stage)``: a program to run; ``lineage(stage)``: one whose nodes' names, handles and
    provenance are enough (the edge program when propagating handles; default ``load``)."""
    stages = record.stages()
    edge_stage = pick_edge_stage(stages)
    if reference_graph in (None, EXPORTED_PROGRAM):
        aten = load(EXPORTED_PROGRAM) if EXPORTED_PROGRAM in stages else None
        handles = None
        if aten is not None and edge_stage is not None:
            handles = propagate_back_handles(aten, record.export_graph_id,
                                             (lineage or load)(edge_stage), disable_validation)
        if handles is not None:
            return ReferenceProgram(EXPORTED_PROGRAM, aten, handles)
        if reference_graph == EXPORTED_PROGRAM:
            raise MissingDataError(
                "cannot use 'exported_program' as the reference: " + (
                    "the ETRecord has no ATen program" if aten is None else
                    "some edge-dialect debug handles have no ATen node (lineage lost in a pass)")
                + "; use reference_graph='edge_dialect_exported_program', or pass "
                  "disable_debug_handle_validation=True for a best-effort comparison")
        log.warning("the ATen program is missing or its debug handles could not be propagated back; "
                    "using 'edge_dialect_exported_program' as the reference")
        reference_graph = EDGE_PROGRAM
    if reference_graph == EDGE_PROGRAM:
        if edge_stage is None:
            raise MissingDataError(f"the ETRecord has no edge-dialect program (stages: {stages}); "
                                   f"{_HINT_INPUTS}")
        return ReferenceProgram(EDGE_PROGRAM, load(edge_stage))
    lookup = reference_graph if "/" in reference_graph else f"{reference_graph}/forward"
    if lookup not in stages:
        options = ["exported_program", "edge_dialect_exported_program"] + [
            s for s in stages if s != EXPORTED_PROGRAM and not s.startswith(EDGE_PROGRAM)]
        raise MissingDataError(f"reference graph {lookup!r} is not in the ETRecord; choose one of {options}")
    return ReferenceProgram(reference_graph, load(lookup))


# -- capture -------------------------------------------------------------------------------------------
#: the reference ran straight from the ETRecord's JSON (:mod:`.jsonrun`)
RUNNER_JSON = "etlens JSON runner (ETRecord program JSON, eager ATen calls)"
#: the reference ran on the program rebuilt by torch's deserializer (``torch.export`` load)
RUNNER_FX = "torch.fx interpreter on the deserialized program"


@dataclass
class RefNode:
    """What the explanations need to know about one reference node."""

    name: str
    target: str
    handle: tuple | None  # None: the node has no debug handle
    order: int  # position in the (topologically sorted) graph
    module_path: str | None = None
    module_type: str | None = None
    stack_trace: str | None = None
    multi_output: bool = False


@dataclass
class Capture:
    """Reference outputs and their metadata, keyed like ExecuTorch's (``{(handle,): output}``)."""

    graph_name: str
    outputs: dict = field(default_factory=dict)  # handle tuple -> output of the last node with it
    op_names: dict = field(default_factory=dict)  # handle tuple -> [node names]
    nodes: dict = field(default_factory=dict)  # node name -> RefNode (call_function nodes, no getitem)
    last_node: dict = field(default_factory=dict)  # handle tuple -> name of the node whose output is kept
    #: handle tuple -> the whole tensor an in-place op wrote into through a view, right after the write
    #: (``index[0].fill_(v)``: the runtime runs it functionalized and logs the whole updated tensor)
    bases: dict = field(default_factory=dict)
    skipped: set = field(default_factory=set)  # handle tuples not stored because keep() said no
    #: which path ran the reference: :data:`RUNNER_JSON` or :data:`RUNNER_FX`
    runner: str = RUNNER_FX
    #: why the JSON runner was not used (None when it ran, or was never tried)
    fallback_reason: str | None = None

    @property
    def stack_traces(self) -> dict:
        return {name: n.stack_trace for name, n in self.nodes.items() if n.handle is not None}


def _module_of(meta: dict) -> tuple[str | None, str | None]:
    stack = meta.get("nn_module_stack")
    if not stack:
        return None, None
    try:
        path, typ = list(stack.values())[-1]
    except (TypeError, ValueError):
        return None, None
    return str(path), (typ if isinstance(typ, str) else getattr(typ, "__qualname__", str(typ)))


def _lifted_inputs(program: Any, user_inputs: list) -> list:
    """Values for every placeholder of an ExportedProgram's graph: state, constants, then user inputs."""
    sig = getattr(program, "graph_signature", None)
    if sig is None:
        return user_inputs
    state = program.state_dict
    constants = getattr(program, "constants", {}) or {}
    it = iter(user_inputs)
    values = []
    for spec in sig.input_specs:
        kind = spec.kind.name
        if kind == "USER_INPUT":
            try:
                values.append(next(it))
            except StopIteration:
                raise MissingDataError(
                    f"the representative inputs have {len(user_inputs)} values but the reference program "
                    f"takes more; record inputs matching the model with {_HINT_INPUTS}") from None
        elif kind in ("PARAMETER", "BUFFER"):
            values.append(state[spec.target] if spec.target in state else constants[spec.target])
        elif kind in ("CONSTANT_TENSOR", "CUSTOM_OBJ"):
            values.append(constants[spec.target])
        else:  # effect tokens and the like: nothing to feed
            values.append(None)
    return values


def capture_reference(ref: ReferenceProgram, inputs: Any,
                      keep: Callable[[tuple], bool] | None = None, warmup: list | tuple = ()) -> Capture:
    """Run ``ref`` on one set of ``inputs`` and capture each debug handle's output.

    Args:
        ref: from :func:`resolve_reference` (or any program/GraphModule with ``debug_handle`` meta).
        inputs: one tuple of model inputs (nested structures are flattened).
        keep: optional ``handle tuple -> bool``; outputs of other handles are not kept (names and
            metadata still are), which bounds memory to what can be compared.
        warmup: input tuples of earlier runs, run first (nothing captured) with the program's
            buffer writes carried from run to run, so ``inputs`` runs on the state the device had
            (an LLM decode step after its prefill); needs the JSON runner.
    """
    from .jsonrun import JsonProgram, Unsupported

    fallback_reason = None
    if warmup and not isinstance(ref.program, JsonProgram):
        raise MissingDataError(f"comparing a later run needs the reference {ref.name!r} run from the ETRecord's JSON "
                               "with its state carried across runs; this program is not read that way: compare the "
                               "first run")
    if isinstance(ref.program, JsonProgram):
        try:
            return _capture_json(ref, inputs, keep, warmup)
        except Unsupported as exc:
            if ref.fallback is None:
                raise MissingDataError(f"cannot run the reference program {ref.name!r}: {exc}") from exc
            log.info("the JSON runner cannot run %s (%s); deserializing it", ref.name, exc)
            fallback_reason = str(exc)
            try:
                program = ref.fallback()
            except Exception as load_exc:  # torch's deserializer on a program it cannot rebuild
                raise MissingDataError(
                    f"cannot run the reference program {ref.name!r}: {exc}; torch's deserializer failed too "
                    f"({type(load_exc).__name__}: {str(load_exc)[:300]})") from load_exc
            ref = ReferenceProgram(ref.name, program, ref.handles)
    cap = _capture_fx(ref, inputs, keep)
    cap.fallback_reason = fallback_reason
    return cap


def _capture_json(ref: ReferenceProgram, inputs: Any, keep: Callable[[tuple], bool] | None,
                  warmup: list | tuple = ()) -> Capture:
    import torch
    from torch.utils._pytree import tree_leaves

    from .jsonrun import parse_module_stack

    prog = ref.program
    override = ref.handles
    cap = Capture(ref.name)
    order = 0
    for node in prog.nodes:
        if "getitem" in node.name:
            continue
        raw = override.get(node.name, UNSET_DEBUG_HANDLE) if override is not None else node.debug_handle
        key = None if raw is None else handle_key(raw)
        path, typ = parse_module_stack(node.meta.get("nn_module_stack"))
        multi = len(node.outputs) > 1 or (len(node.outputs) == 1 and "as_tensors" in node.outputs[0])
        cap.nodes[node.name] = RefNode(node.name, _readable(node.target), key, order, path, typ,
                                       node.stack_trace, multi)
        order += 1
        if key is not None:
            cap.op_names.setdefault(key, []).append(node.name)
            cap.last_node[key] = node.name
    outputs, skipped, nodes = cap.outputs, cap.skipped, cap.nodes

    def on_node(node: Any, result: Any, overwritten: bool) -> None:
        info = nodes.get(node.name)
        key = info.handle if info is not None else None
        if key is None:
            return
        if keep is not None and not keep(key):
            skipped.add(key)
        elif isinstance(result, (tuple, list)):
            outputs[key] = [r.detach() if isinstance(r, torch.Tensor) else r for r in result]
        else:
            outputs[key] = _own(result, overwritten)
            if getattr(result, "_base", None) is not None:  # a view: rare, the schema is read only then
                _keep_base(cap, key, result, lambda: prog.resolve(node.target))

    from .jsonrun import Unsupported

    with _reference_grad_mode(torch):
        try:
            for earlier in warmup:
                prog.run(list(tree_leaves(earlier)), None, carry_state=True)
            prog.run(list(tree_leaves(inputs)), on_node, carry_state=bool(warmup))
        except (Unsupported, MissingDataError):
            raise
        except Exception as exc:
            # an op the JSON runner calls differently from torch's interpreter: let the caller retry
            # with the deserialized program (torch's own deserializer), which runs every op exactly
            raise Unsupported(f"the JSON runner failed ({type(exc).__name__}: "
                              f"{first_line(exc)})") from exc
    cap.runner = RUNNER_JSON
    return cap


def _reference_grad_mode(torch: Any) -> Any:
    """The autograd mode the reference runs in: enabled, as in ExecuTorch's Inspector.

    With autograd on, parameters that require grad steer ``scaled_dot_product_attention`` to another
    CPU kernel, so under ``no_grad`` a Swin block's reference differed from ExecuTorch's in the 4th
    digit of an MSE of 6e-15. Captured values are detached, so no autograd graph outlives its node
    (Swin: 319 vs 317 MiB peak, 0.81 vs 0.70 CPU-s).
    """
    return torch.enable_grad()


def _readable(target: str) -> str:
    for prefix in ("torch.ops.", "executorch.exir.dialects.edge.ops."):
        if target.startswith(prefix):
            return target[len(prefix):]
    return "getitem" if target in ("_operator.getitem", "operator.getitem") else target


def _own(result: Any, overwritten: bool) -> Any:
    """What the capture keeps of one output: detached, and a copy when a later in-place op overwrites it
    (``hidden += residual`` exports as ``add_`` on the value the residual's last op computed)."""
    if not hasattr(result, "detach"):
        return result
    return result.detach().clone() if overwritten else result.detach()


def _keep_base(cap: Capture, key: tuple, result: Any, op: Callable[[], Any]) -> None:
    """Snapshot the whole tensor an in-place op just wrote through a view (see :attr:`Capture.bases`).

    ``op`` returns the node's operator; it is only asked for when the result is a view (rare), so the
    schema is read for a handful of nodes, not for every node of the program.
    """
    from .jsonrun import alias_args

    base = getattr(result, "_base", None)
    if base is not None and alias_args(op())[0]:
        cap.bases[key] = base.detach().clone()


def _fx_written_later(gm: Any) -> set[str]:
    """Names of the FX nodes whose value a later in-place op overwrites (directly or through views)."""
    from .jsonrun import written_later

    def bound(node: Any) -> dict[str, list[str]]:
        schema_args = getattr(getattr(node.target, "_schema", None), "arguments", None)
        names = [a.name for a in schema_args] if schema_args is not None else [str(i) for i in range(len(node.args))]
        args = dict(zip(names, node.args))
        args.update(node.kwargs)
        return {k: [a.name for a in (v if isinstance(v, (list, tuple)) else [v]) if hasattr(a, "op")]
                for k, v in args.items()}

    return written_later([(n.name, n.target, lambda n=n: bound(n))
                          for n in gm.graph.nodes if n.op == "call_function"])


def _capture_fx(ref: ReferenceProgram, inputs: Any, keep: Callable[[tuple], bool] | None) -> Capture:
    import torch
    from torch.utils._pytree import tree_leaves

    from ...readers import target_name

    program = ref.program
    gm = _graph_module(program)
    override = ref.handles
    cap = Capture(ref.name)
    order = 0
    for node in gm.graph.nodes:
        if node.op != "call_function" or "getitem" in node.name:
            continue
        raw = override.get(node.name, UNSET_DEBUG_HANDLE) if override is not None else node.meta.get("debug_handle")
        key = None if raw is None else handle_key(raw)
        path, typ = _module_of(node.meta)
        val = node.meta.get("val")
        cap.nodes[node.name] = RefNode(node.name, target_name(node.target), key, order, path, typ,
                                       node.meta.get("stack_trace"), isinstance(val, (list, tuple)))
        order += 1
        if key is not None:
            cap.op_names.setdefault(key, []).append(node.name)
            cap.last_node[key] = node.name

    values = _lifted_inputs(program, list(tree_leaves(inputs)))
    outputs = cap.outputs
    skipped = cap.skipped
    written = _fx_written_later(gm)

    class _Capturer(torch.fx.Interpreter):
        def run_node(self, n):  # noqa: D401 - fx hook
            result = super().run_node(n)
            if n.op == "call_function" and "getitem" not in n.name:
                info = cap.nodes.get(n.name)
                key = info.handle if info is not None else None
                if key is not None:
                    if keep is not None and not keep(key):
                        skipped.add(key)
                    elif isinstance(result, torch.Tensor):
                        outputs[key] = _own(result, n.name in written)
                        _keep_base(cap, key, result, lambda: n.target)
                    elif isinstance(result, (tuple, list)):
                        outputs[key] = [r.detach() if isinstance(r, torch.Tensor) else r for r in result]
                    else:
                        outputs[key] = result
            return result

    with _reference_grad_mode(torch):
        try:
            _Capturer(gm).run(*values, enable_io_processing=False)
        except MissingDataError:
            raise
        except Exception as exc:
            raise MissingDataError(
                f"running the reference program {ref.name!r} on the representative inputs failed "
                f"({type(exc).__name__}: {first_line(exc)}); check that the "
                f"recorded inputs match the model ({_HINT_INPUTS})") from exc
    return cap
