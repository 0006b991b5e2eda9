"""Trace a compilation pass by pass: a graph snapshot after every stage, with diffs and handles.

:class:`PipelineTracer` observes a build; it never exports or lowers anything itself. The build
(:func:`etlens.builder.traced.trace_passes` and :func:`~etlens.builder.traced.lowering_stages`, the
stages of the one lowering in :mod:`etlens.builder`) hands it each stage and each backend pass to run,
and it records a :class:`~etlens.model.trace.Snapshot` after each:

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

import time
from typing import Any, Callable

from ..errors import EtlensError, PassFailedError
from ..model import Graph
from ..model.trace import Snapshot, Trace
from . import snapshot as snap
from ..builder.backends import BackendConfig, PassSpec, pass_name
from .debug_handles import check_handles, fx_sources

__all__ = ["PipelineTracer", "settle_shape_envs"]

_WRAPPED_PREFIX = "An error occurred when running the"


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
