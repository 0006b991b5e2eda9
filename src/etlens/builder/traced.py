"""The traced build: ``etlens trace``'s pipeline, stage by stage, with the pass tracer watching.

The stages, each one snapshot of :class:`~etlens.passes.tracer.PipelineTracer`:

1. ``quantize`` (optional) — the one pt2e step (:func:`etlens.builder.quantize.quantize_pt2e`);
2. ``export`` — ``torch.export.export`` (:mod:`etlens.builder.toolchain`);
3. ``to_edge`` — ExecuTorch's edge dialect (for ``aten``: ``run_decompositions``);
4. ``quantize_io`` (optional) and each pass of the backend's list, one at a time on the edge program;
5. ``lower`` — the one lowering (``to_edge_transform_and_lower`` with the backend's partitioner; a
   backend's passes inside its preprocess are observed there: :mod:`etlens.passes.preprocess`), or, for a
   backend whose passes rewrite the whole program (Cortex-M), ``to_executorch`` on the edge program.

The build calls the toolchain here, in the builder; the tracer only observes (it records what each
stage hands it and runs the backend passes it is given). :func:`lowering_stages` is the part after
``export``, shared by ``etlens trace`` (:func:`trace_passes`), the worker child's ``trace-lowering`` job
and the production lowering of :func:`etlens.builder.lower.lower_program` (``production=True``).

Example::

    import etlens
    trace = etlens.trace_passes(model, inputs, backend="xnnpack", output="trace.json")
"""

from __future__ import annotations

import os
from typing import Any, Iterable

from ..errors import EtlensError
from ..model import Graph
from ..model.trace import Trace
from ..passes import snapshot as snap
from ..passes.debug_handles import back_annotate, generate_debug_handles
from ..passes.tracer import PipelineTracer, settle_shape_envs
from .backends import BackendConfig, PassSpec, get_backend, instantiate_pass, pass_name
from .quantize import quantize_pt2e
from .toolchain import edge_config, export, lower_edge, to_edge, to_executorch

__all__ = ["trace_passes", "lowering_stages", "pass_specs"]


def pass_specs(items: Iterable[Any]) -> list[PassSpec]:
    out = []
    for p in items:
        if isinstance(p, PassSpec):
            out.append(p)
        elif isinstance(p, type):
            out.append(PassSpec(p.__name__, lambda prog, _c=p: instantiate_pass(_c, prog)))
        elif callable(p):
            out.append(PassSpec(pass_name(p), lambda prog, _p=p: _p))
        else:
            raise EtlensError(f"not a pass: {p!r} (expected a pass class, a callable graph_module -> "
                              "PassResult, or a PassSpec)")
    return out



def _model_name(model: Any, name: str | None) -> str:
    if name:
        return name
    return type(model).__name__ if model is not None else "model"


def trace_passes(model: Any, example_inputs: tuple, backend: str | BackendConfig = "xnnpack",
                 quantize: bool = False, *, quantize_io: bool = False, passes: Iterable[Any] | None = None,
                 extra_passes: Iterable[Any] = (), lower: bool = True, name: str | None = None,
                 output: str | os.PathLike | None = None, record_times: bool = True,
                 progress: bool | None = None, raise_on_error: bool = False, record: bool = True,
                 pte: str | os.PathLike | None = None) -> Trace:
    """Compile ``model`` for ``backend`` stage by stage and return the :class:`Trace`.

    Args:
        model: an ``nn.Module`` (or anything ``torch.export.export`` accepts).
        example_inputs: tuple of example inputs.
        backend: a registered backend name (``aten``, ``xnnpack``, ``cortex_m``, ``vulkan``, ``qnn``,
            ``cadence``) or a :class:`BackendConfig`.
        quantize: pt2e-quantize first with the backend's quantizer (error if it has none).
        quantize_io: strip the float (de)quantize wrapper so the program takes/returns int8
            (needs ``quantize``); also applied before partitioning in the lowering stage.
        passes: replace the backend's pass list (pass classes, callables ``gm -> PassResult``,
            or :class:`PassSpec`); ``extra_passes`` are appended after it.
        lower: run the partition/lower stage when the backend has a partitioner.
        output: also write the trace JSON there (written even when a stage failed).
        record_times: store wall times (``False`` gives byte-identical files for identical runs).
        progress: show a progress bar (default: when stderr is a terminal).
        raise_on_error: raise :class:`~etlens.errors.PassFailedError` (original exception chained)
            after recording a failure, instead of returning the trace with ``trace.failed`` set.
        record: ``False`` runs the pipeline without snapshots (for overhead measurements).
        pte: write the ExecuTorch program there when the pipeline emits one (backends with
            ``to_executorch``, e.g. ``cortex_m``); ``trace.meta["pte"]`` then names the file.

    Raises:
        BackendUnavailableError: the backend's packages do not import (names what to install).
    """
    cfg = get_backend(backend)
    cfg.check_available()
    if quantize and cfg.quantizer_factory is None:
        raise EtlensError(f"backend {cfg.name!r} has no quantizer; run without quantize=True (--quantize)")
    if quantize_io and not quantize:
        raise EtlensError("quantize_io needs a quantized program: pass quantize=True (--quantize) as well")
    inputs = tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) else (example_inputs,)
    if cfg.prepare_inputs is not None and quantize:
        inputs = cfg.prepare_inputs(inputs)
    t = PipelineTracer(cfg, _model_name(model, name), record=record, record_times=record_times,
                       show_progress=progress)
    t.trace.meta = {"quantize": bool(quantize), "quantize_io": bool(quantize_io)}
    try:
        _run(t, cfg, model, inputs, quantize, quantize_io, passes, list(extra_passes), lower,
             None if pte is None else os.fspath(pte))
    finally:
        t._close()
    if output is not None and record:
        t.trace.save(output)
    if t.error is not None and raise_on_error:
        raise t.error
    return t.trace


def _run(t: PipelineTracer, cfg: BackendConfig, model: Any, inputs: tuple, quantize: bool,
         quantize_io: bool, passes: Iterable[Any] | None, extra: list, lower: bool, pte: str | None) -> None:
    ids = t.ids
    emits = lower and cfg.to_executorch and cfg.uses_executorch
    total = 3 + int(quantize) + (2 if quantize_io else 0) + int(lower and cfg.partitioner_factory is not None) \
        + int(emits)
    t._start_progress(total)

    if quantize:
        model = t.stage("quantize", "quantize", lambda: quantize_pt2e(model, inputs, cfg),
                        lambda gm, n: snap.module_graph(gm, n, "quantize", ids))
        if model is None:
            return
    ep = t.stage("export", "export", lambda: export(model, inputs),
                 lambda p, n: snap.program_graph(p, n, "export", ids))
    if ep is None:
        return
    lowering_stages(t, cfg, ep, quantize_io=quantize_io, passes=passes, extra=extra, lower=lower, pte=pte,
                    total=total)


def _replay(t: PipelineTracer, cfg: BackendConfig, ep: Any, program: Any, quantize_io: bool,
            passes: Iterable[Any] | None, extra: Iterable[Any], total: int | None) -> Any:
    """[``quantize_io``] and each backend pass on the whole edge ``program``, a snapshot after each.

    Returns the last program, or ``None`` when a pass failed (recorded in ``t``; the exported
    program's shape environment settled, see :func:`settle_shape_envs`).
    """
    if program is None:
        return None
    if quantize_io:
        from ..passes.quantize_io import QuantizeInputs, QuantizeOutputs

        for p in (QuantizeInputs(), QuantizeOutputs()):
            new = t.run_pass(PassSpec(type(p).__name__, lambda prog, _p=p: _p), program)
            if new is None:
                settle_shape_envs(ep, program)
                return None
            program = new
            if t.record:
                t.trace.snapshots[-1].stage = "quantize_io"
    specs = pass_specs(passes) if passes is not None else cfg.passes(program)
    specs += pass_specs(extra)
    if t._bar is not None and total is not None:
        t._bar.total = total + len(specs)
    for spec in specs:
        new = t.run_pass(spec, program)
        if new is None:
            settle_shape_envs(ep, program)
            return None
        program = new
    return program


def lowering_stages(t: PipelineTracer, cfg: BackendConfig, ep: Any, *, quantize_io: bool = False,
                    passes: Iterable[Any] | None = None, extra: Iterable[Any] = (), lower: bool = True,
                    pte: str | None = None, total: int | None = None, production: bool = False) -> Any:
    """The stages after ``export``: ``to_edge``, [``quantize_io``], each backend pass, ``lower``.

    ``t`` already holds the snapshots up to ``export`` (in this process, or a trace seeded by a
    :class:`~etlens.builder.session.BuildSession` and continued in its worker child).
    ``production=True`` makes the ``lower`` stage the program's real lowering: ExecuTorch's default
    edge compile config, an ETRecord generated, and the resulting ``EdgeProgramManager`` returned
    (``to_executorch`` it for the ``.pte``); the ``to_edge`` and pass snapshots are the tracer's
    view of the whole edge program before the partitioner (no partitioning, no backend preprocess).
    A backend runs its passes on the partitions it takes, so a pass may not replay on the whole
    program (XNNPACK's layout pass next to ``llama::custom_sdpa``): with ``production`` such a
    failure is recorded (``t.error``, a snapshot with the error) and the replay stops, but the
    ``lower`` stage still runs, so the trace ends with the real lowering whenever the plain
    lowering works. Returns that manager, or ``None`` (a stage failed, no lower stage, or not
    ``production``).
    """
    ids = t.ids
    prog_graph = snap.program_graph
    emits = lower and cfg.to_executorch and cfg.uses_executorch
    config = edge_config(cfg)

    def edge_stage() -> Any:
        out = to_edge(ep, cfg, config)
        program = out.exported_program() if hasattr(out, "exported_program") and callable(out.exported_program) else out
        if not cfg.uses_executorch:
            generate_debug_handles(program.graph_module)  # ExecuTorch does this at the end of to_edge
        return program

    edge_name = "run_decompositions" if not cfg.uses_executorch else "to_edge"
    program = t.stage(edge_name, "to_edge", edge_stage, lambda p, n: prog_graph(p, n, "to_edge", ids))
    if program is None:
        settle_shape_envs(ep)
        if not production:
            return None
    elif t.record:  # ATen snapshots have no handles: give them their edge descendants' handles
        edge_graph = t.trace.snapshots[-1].graph
        for s in reversed(t.trace.snapshots[:-1]):
            count = back_annotate(s.graph, edge_graph)
            if count:
                s.graph.meta["debug_handles"] = f"back-annotated from {edge_graph.name!r}"
                s.handle_report["back_annotated"] = count
                s.handle_report["with_handles"] = s.graph.debug_handle_coverage()[0]
            edge_graph = s.graph

    program = _replay(t, cfg, ep, program, quantize_io, passes, extra, total)
    if program is None and not production:
        return None

    if lower and cfg.partitioner_factory is not None:
        def lower_fn() -> Any:
            tp = None
            if quantize_io:
                from ..passes.quantize_io import QuantizeInputs, QuantizeOutputs

                tp = [QuantizeInputs(), QuantizeOutputs()]
            if production:  # the program's one real lowering, as the report has always built it
                return lower_edge(ep, cfg, transform_passes=tp, etrecord=True)
            return lower_edge(ep, cfg, config=config, transform_passes=tp)

        from ..passes.preprocess import observed_stage  # a backend's own passes inside preprocess (Ethos-U)

        lowered = observed_stage(t, cfg, "lower", "lower", lower_fn, lambda m, n: prog_graph(m, n, "lower", ids))
        return lowered if production else None
    if emits and program is not None:
        def et_graph(m: Any, n: str) -> Graph:
            graph = prog_graph(m, n, "lower", ids)
            _memory_plan(m, graph)
            return graph

        et = t.stage("to_executorch", "lower", lambda: to_executorch(program, config), et_graph)
        if et is not None and pte is not None:
            with open(pte, "wb") as f:
                f.write(et.buffer)
            t.trace.meta["pte"] = os.path.basename(pte)
    return None


def _memory_plan(et: Any, graph: Graph) -> None:
    """Copy the memory planner's decisions onto the snapshot: ``attrs["memory"]`` of each planned
    node (``{"mem_id", "offset", "bytes"}``) and ``graph.meta["memory_arenas"]`` (bytes per arena;
    arena 0 is reserved by ExecuTorch). Best effort: a program without specs keeps its graph as is."""
    try:
        program = et.exported_program()
        plan = et.executorch_program.execution_plan[0]
        arenas = [int(b) for b in plan.non_const_buffer_sizes]
    except Exception:  # noqa: BLE001 - the plan is extra information, never a reason to fail
        return
    by_name = {n.name: n for n in graph}
    for fx_node in program.graph.nodes:
        node = by_name.get(fx_node.name)
        spec = fx_node.meta.get("spec")
        if node is None or spec is None or isinstance(spec, (list, tuple)):
            continue
        mem_id, offset = getattr(spec, "mem_id", None), getattr(spec, "mem_offset", None)
        if mem_id is None or offset is None:
            continue
        node.attrs["memory"] = {"mem_id": int(mem_id), "offset": int(offset),
                                "bytes": int(getattr(spec, "allocated_memory", 0) or 0)}
    graph.meta["memory_arenas"] = arenas
