"""Trace a compilation pass by pass: a graph snapshot after every stage, with diffs and handles.

:func:`trace_passes` runs the pipeline of a registered backend (see :mod:`etlens.builder.backends`)
and records a :class:`~etlens.model.trace.Snapshot` after each stage:

1. ``quantize`` — pt2e with the backend's quantizer (when ``quantize=True``;
   :func:`~etlens.builder.quantize.quantize_pt2e`, the step the report uses too);
2. ``export`` — ``torch.export.export``;
3. ``to_edge`` — ExecuTorch's edge dialect (for ``aten``: ``run_decompositions``);
4. ``quantize_io`` — :class:`~etlens.passes.quantize_io.QuantizeInputs`/``QuantizeOutputs`` when
   ``quantize_io=True`` (before any backend pass renames the quantize ops);
5. one ``pass`` snapshot per backend pass, run one at a time on the edge program;
6. ``lower`` — ``to_edge_transform_and_lower`` with the backend's partitioner (a backend whose
   passes run inside its preprocess, Ethos-U, adds a ``partition`` snapshot per delegate and a
   ``pass`` snapshot per pass it runs there, before ``lower``: :mod:`etlens.passes.preprocess`); or, for a backend
   whose passes rewrite the whole program (``BackendConfig.to_executorch``, e.g. Cortex-M),
   ``to_executorch`` on the transformed edge program (memory-planned, out-variant ops: what the
   ``.pte`` holds; ``pte=path`` writes it).

Each snapshot stores the graph, the stage's own wall time, the node-count delta, the structural
diff against the previous snapshot and a debug-handle report (handles lost by the pass, and
propagated from the nodes they were built from). A failing stage is recorded with its traceback as
``pass X failed after [A, B]`` and the trace is still returned (and written, with ``output=``).

Example::

    import etlens
    from etlens.demos import get_demo
    model, inputs = get_demo("cnn")
    trace = etlens.trace_passes(model, inputs, backend="xnnpack", output="trace.json")
    for s in trace.snapshots:
        print(f"{s.index:2} {s.stage:8} {s.name:32} {len(s.graph):4} nodes  {s.nodes_delta:+4}")
    trace.lineage("aten_linear_default")   # back through every pass to the model's source line
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Iterable

from ..errors import EtlensError, PassFailedError
from ..model import Graph
from ..model.trace import Snapshot, Trace
from . import snapshot as snap
from ..builder.backends import BackendConfig, PassSpec, get_backend, instantiate_pass, pass_name
from ..builder.quantize import quantize_pt2e
from ..builder.toolchain import edge_config, export, lower_edge, to_edge, to_executorch
from .debug_handles import back_annotate, check_handles, fx_sources, generate_debug_handles

__all__ = ["trace_passes", "PipelineTracer", "lowering_stages"]

_WRAPPED_PREFIX = "An error occurred when running the"


def _pass_specs(items: Iterable[Any]) -> list[PassSpec]:
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


def _unwrap(exc: BaseException) -> BaseException:
    """ExecuTorch's pass manager wraps a pass's exception in a generic ``Exception``; use the original."""
    while (type(exc) is Exception and str(exc).startswith(_WRAPPED_PREFIX)
           and exc.__cause__ is not None):
        exc = exc.__cause__
    return exc


class PipelineTracer:
    """Runs one backend pipeline and records snapshots (use :func:`trace_passes`).

    ``record=False`` runs the same steps without snapshots (the baseline the overhead is measured
    against).
    """

    def __init__(self, backend: BackendConfig, model_name: str, *, record: bool = True,
                 record_times: bool = True, show_progress: bool | None = None) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:  # the installed distribution's version (etlens._version is the facade's copy)
            __version__ = version("etlens")
        except PackageNotFoundError:
            __version__ = "unknown"
        self.backend = backend
        self.record = record
        self.record_times = record_times
        self.trace = Trace(model=model_name, backend=backend.name, created_by=f"etlens {__version__}")
        self.ids = snap.GraphIds()
        self.done: list[str] = []  # passes that ran, for "failed after [...]"
        self.error: PassFailedError | None = None
        self._bar = None
        self._show_progress = show_progress
        #: when set, the next snapshot's diff is taken against this graph, not the previous one
        #: (the ``lower`` snapshot after a backend's preprocess passes, :mod:`etlens.passes.preprocess`)
        self.diff_base: Graph | None = None

    @classmethod
    def resume(cls, backend: BackendConfig, trace: Trace, ids: dict[str, int], *,
               record_times: bool = True) -> PipelineTracer:
        """Continue ``trace`` (its snapshots so far, and the graph-id numbering ``ids`` they used).

        A :class:`~etlens.builder.session.BuildSession` records ``quantize`` and ``export`` where the
        user's code runs and hands the trace to its worker child, which records the lowering.
        """
        t = cls(backend, trace.model, record_times=record_times, show_progress=False)
        t.trace = trace
        t.ids = snap.GraphIds.from_json(ids)
        t.done = [s.name for s in trace.snapshots if s.error is None]
        return t

    # -- bookkeeping ----------------------------------------------------------------------
    def _start_progress(self, total: int) -> None:
        from .._progress import progress

        self._bar = progress(total=total, desc=f"trace {self.backend.name}", unit="stage",
                             enabled=self._show_progress)

    def _tick(self, name: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(name[:40], refresh=False)
            self._bar.update(1)

    def _close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    @property
    def last_graph(self) -> Graph | None:
        return self.trace.snapshots[-1].graph if self.trace.snapshots else None

    def add(self, name: str, stage: str, graph: Graph, seconds: float, *, error: dict | None = None,
            sources: dict[str, list[str]] | None = None, modified: bool | None = None,
            base: Graph | None = None) -> Snapshot:
        """Append a snapshot: diff and handle report against the previous one (or ``base``, or
        :attr:`diff_base`; the diff then names it as ``diff["base"]``)."""
        base, self.diff_base = base if base is not None else self.diff_base, None
        prev = base if base is not None else self.last_graph
        snap.delegate_handles(graph)
        if prev is None:
            diff = {"added": [n.name for n in graph], "removed": [], "rewritten": [], "replaced": []}
            report = check_handles(Graph("empty"), graph, name, {})
        else:
            diff = snap.diff_json(prev, graph)
            report = check_handles(prev, graph, name, sources)
            if prev is not self.last_graph:
                diff["base"] = prev.name
        s = Snapshot(
            name=self._unique(name), stage=stage, index=len(self.trace.snapshots), graph=graph,
            wall_time_s=seconds if self.record_times else 0.0, diff=diff,
            nodes_delta=len(graph) - (len(prev) if prev is not None else 0), error=error,
            handle_report=report, modified=modified)
        graph.name = s.name
        self.trace.snapshots.append(s)
        self._tick(s.name)
        return s

    def _unique(self, name: str) -> str:
        names = {s.name for s in self.trace.snapshots}
        if name not in names:
            return name
        i = 2
        while f"{name}#{i}" in names:
            i += 1
        return f"{name}#{i}"

    def fail(self, name: str, stage: str, exc: BaseException, message: str, graph: Graph | None) -> None:
        """Record a failed stage (graph: the program as the failure left it, else the previous one)."""
        err = PassFailedError(message)
        err.__cause__ = exc
        self.error = err
        if not self.record:
            return
        if graph is None:
            prev = self.last_graph
            graph = Graph.from_json(prev.to_json()) if prev is not None else Graph(name)
        self.add(name, stage, graph, 0.0, error=snap.error_dict(exc, message))

    # -- stages ---------------------------------------------------------------------------
    def stage(self, name: str, stage: str, fn: Callable[[], Any],
              to_graph: Callable[[Any, str], Graph] | None) -> Any:
        """Run ``fn`` timed; snapshot its result with ``to_graph``. On failure record and return None."""
        t0 = time.perf_counter()
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001 - every failure becomes a recorded snapshot
            exc = _unwrap(exc)
            self.fail(name, stage, exc, f"stage {name!r} failed after {self.done}: "
                                        f"{type(exc).__name__}: {exc}", None)
            return None
        seconds = time.perf_counter() - t0
        self.done.append(name)
        if self.record and to_graph is not None:
            self.add(name, stage, to_graph(result, name), seconds)
        return result

    def run_pass(self, spec: PassSpec, program: Any) -> Any:
        """Run one pass on ``program``; snapshot; return the new program (None when it failed)."""
        t0 = time.perf_counter()
        modified = None
        try:
            instance = spec.make(program)
            if spec.on_program:  # a whole-program step (ExportedProgram -> ExportedProgram)
                new_program, modified = instance(program), None
            else:
                new_program, modified = _apply_pass(program, instance, self.backend)
        except Exception as exc:  # noqa: BLE001
            exc = _unwrap(exc)
            message = f"pass {spec.name} failed after {self.done}: {type(exc).__name__}: {exc}"
            graph = None
            if self.record:
                try:  # show the program as the failing pass left it (in-place passes may have begun)
                    graph = snap.program_graph(program, spec.name, "pass", self.ids)
                except Exception:  # noqa: BLE001 - fall back to the previous snapshot's graph
                    graph = None
            self.fail(spec.name, "pass", exc, message, graph)
            settle_shape_envs(program)
            return None
        seconds = time.perf_counter() - t0
        self.done.append(spec.name)
        if self.record:
            prev = self.last_graph
            sources = fx_sources(new_program.graph_module, [n.name for n in prev]) if prev is not None else None
            graph = snap.program_graph(new_program, spec.name, "pass", self.ids)
            self.add(spec.name, "pass", graph, seconds, sources=sources, modified=modified)
        return new_program


def _relaxed_verifiers(backend: BackendConfig) -> list[Any] | None:
    """A class-only edge verifier, the way backends run their passes inside preprocess."""
    if not backend.uses_executorch or not backend.relax_verifier:
        return None
    from executorch.exir import EdgeCompileConfig
    from executorch.exir.verification.verifier import EXIREdgeDialectVerifier

    return [EXIREdgeDialectVerifier(edge_compile_config=EdgeCompileConfig(_check_ir_validity=False),
                                    class_only=True)]


def _apply_pass(program: Any, instance: Any, backend: BackendConfig) -> tuple[Any, bool | None]:
    """Run one pass instance; return ``(program after, modified)``."""
    if backend.uses_executorch:
        from executorch.exir.program._program import _transform

        new = _transform(program, instance, override_verifiers=_relaxed_verifiers(backend))
        return new, new is not program
    # pure torch: the torch.fx.passes.infra shape, graph module in, PassResult out
    result = instance(program.graph_module)
    if result is None:
        raise EtlensError(f"pass {pass_name(instance)} returned None; it must return a PassResult "
                          "(torch.fx.passes.infra.pass_base.PassResult)")
    gm = getattr(result, "graph_module", None)
    modified = bool(getattr(result, "modified", True))
    if gm is not None and gm is not program.graph_module:
        program = _rebuild_program(program, gm)
    elif modified:
        program.graph_module.recompile()
    return program, modified


def _rebuild_program(ep: Any, gm: Any) -> Any:
    from torch.export import ExportedProgram

    return ExportedProgram(
        root=gm, graph=gm.graph, graph_signature=ep.graph_signature, state_dict=ep.state_dict,
        range_constraints=ep.range_constraints, module_call_graph=ep.module_call_graph,
        example_inputs=ep.example_inputs, constants=ep.constants, verifiers=ep.verifiers)


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


def settle_shape_envs(*programs: Any) -> None:
    """Forget the unbacked symbols a failed stage left pending in the programs' shape environments.

    A data-dependent operator (``llama::update_cache``, ``custom_sdpa``, ``nonzero`` …) allocates
    unbacked symbols when its fake kernel runs; torch binds them to the operator's outputs right
    after. A pass that fails between the two leaves them pending in the exported program's
    ``ShapeEnv``, and every later trace of that program (the production lowering included) then
    stops with ``PendingUnbackedSymbolNotFound``. The failed stage's symbols belong to no graph: dropping
    them gives the program back as the failed stage found it.
    """
    seen: set[int] = set()
    for program in programs:
        gm = getattr(program, "graph_module", program)
        for node in getattr(getattr(gm, "graph", None), "nodes", ()):
            val = node.meta.get("val")
            for v in val if isinstance(val, (list, tuple)) else (val,):
                env = getattr(getattr(v, "fake_mode", None), "shape_env", None)
                if env is not None and id(env) not in seen:
                    seen.add(id(env))
                    for name in ("pending_fresh_unbacked_symbols", "ignorable_fresh_unbacked_symbols"):
                        pending = getattr(env, name, None)
                        if isinstance(pending, list):
                            pending.clear()


def _replay(t: PipelineTracer, cfg: BackendConfig, ep: Any, program: Any, quantize_io: bool,
            passes: Iterable[Any] | None, extra: Iterable[Any], total: int | None) -> Any:
    """[``quantize_io``] and each backend pass on the whole edge ``program``, a snapshot after each.

    Returns the last program, or ``None`` when a pass failed (recorded in ``t``; the exported
    program's shape environment settled, see :func:`settle_shape_envs`).
    """
    if program is None:
        return None
    if quantize_io:
        from .quantize_io import QuantizeInputs, QuantizeOutputs

        for p in (QuantizeInputs(), QuantizeOutputs()):
            new = t.run_pass(PassSpec(type(p).__name__, lambda prog, _p=p: _p), program)
            if new is None:
                settle_shape_envs(ep, program)
                return None
            program = new
            if t.record:
                t.trace.snapshots[-1].stage = "quantize_io"
    specs = _pass_specs(passes) if passes is not None else cfg.passes(program)
    specs += _pass_specs(extra)
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
                from .quantize_io import QuantizeInputs, QuantizeOutputs

                tp = [QuantizeInputs(), QuantizeOutputs()]
            if production:  # the program's one real lowering, as the report has always built it
                return lower_edge(ep, cfg, transform_passes=tp, etrecord=True)
            return lower_edge(ep, cfg, config=config, transform_passes=tp)

        from .preprocess import observed_stage  # a backend's own passes inside preprocess (Ethos-U)

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
