"""One model's journey through the toolchain, each step done once: :class:`BuildSession`.

A session owns one model (and its example inputs) for one backend and quantization, and does
each step once:

* **export** — :func:`etlens.builder.toolchain.export` of the model, once (:attr:`exported`); its
  ``.module()`` is the float reference of the inside view;
* **quantize** — pt2e from that same export (:attr:`quantized_module`, no second capture; the
  backend's quantizer or the session's ``quantizer=``), then one export of the quantized module
  (:attr:`program`: what is lowered);
* **lower** — once, :func:`etlens.builder.lower.lower_program` in the session's worker child
  (:class:`~etlens.builder.worker.Worker`); with ``trace=True`` the pass tracer records its
  snapshots *while* that lowering goes (the trace's ``lower`` stage is the production lowering);
  the ``quantize`` / ``export`` snapshots come from this process's objects;
* **run** — in the same child (``import torch`` + executorch paid once): :meth:`run` runs any
  ``.pte`` with any inputs, with or without ETDump and debug buffer;
* **trace only** — :meth:`trace_lowering` (``etlens trace``): the tracer's stages in the child, no run;
* **scheduling** — :meth:`while_lowering` (work for this process while the child lowers, e.g.
  imports, or :meth:`etlens.builder.inside.race.InsideRace.on`: the inside-the-delegates build raced
  on a second child) and :meth:`on_close`.

:meth:`variant` makes a session of the same model with another quantizer / backend that shares
this one's export and warm child (re-lower and run many candidates in one child).
:meth:`load` starts the child, then loads the user's model (``--model file.py:fn``) while the
child imports torch + the backend.

The user's code (export, calibration) runs in this process, so its errors are
:class:`~etlens.builder.loader.ModelError` naming the stage and the user's frame; native work runs
in the child. ``counts`` records how often each step ran (tests assert a report exports,
quantizes and lowers once). Example inputs are kept as given (a tuple of positional arguments,
each possibly a nested structure): never flattened here.

Example::

    from etlens.demos import get_demo
    from etlens.builder import BuildSession

    model, inputs = get_demo("cnn")
    with BuildSession(model, inputs, name="cnn", backend="xnnpack", trace=True) as s:
        arts = s.build("out/", runs=5)          # .pte, .etrecord, .etdp, debug buffer
        s.trace.snapshots[-1].stage             # 'lower': the lowering that wrote arts.pte
        s.counts                                # {'export': 1, 'quantize': 0, 'lower': 1, 'run': 1}
        outs = s.run(arts.pte, inputs)          # any .pte, in the same warm child
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..model.spans import span
from .loader import user_code

__all__ = ["BuildSession", "DeviceArtifacts", "start_worker"]


@dataclass
class DeviceArtifacts:
    """Paths of the files one build-and-run produced (``None`` when not produced)."""

    pte: str
    etrecord: str
    etdump: str
    debug_buffer: str | None
    pt2: str | None = None


class BuildSession:
    """Export, quantize, lower (traced) and run one model, each once; share the results.

    Args:
        model: an ``nn.Module`` (anything ``torch.export.export`` accepts).
        example_inputs: its positional example inputs (a tuple; a single input is wrapped).
        name: the model's name in files, messages and the trace.
        backend: a registered backend name, a :class:`~etlens.builder.backends.BackendConfig`, or
            ``portable`` / ``None`` (nothing delegated).
        quantize: pt2e-quantize with the backend's quantizer (``calibration``: input tuples).
        quantizer: a pt2e ``Quantizer`` used instead of the backend's (e.g. an ``XNNPACKQuantizer``
            with a filter function or per-module configs); implies ``quantize``.
        trace: record the pass trace during :meth:`build` (see :attr:`trace`).
        verbose: show the worker child's log.
        on_stage: told ``export``, ``quantize``, ``lower``, ``run`` as they start (``lower`` once the program
            is handed to the worker child: from then on this process only waits).
        worker: a :class:`~etlens.builder.worker.Worker` already started; the session owns it from then on.
    """

    def __init__(self, model: Any, example_inputs: Any, *, name: str = "model", backend: Any = "xnnpack",
                 quantize: bool = False, calibration: list | None = None, quantizer: Any = None, trace: bool = False,
                 verbose: bool = False, on_stage: Callable[[str], Any] | None = None, worker: Any = None) -> None:
        from .inputs import as_args
        from .toolchain import backend_config

        self.model = model
        self.name = name
        self.backend = backend
        self.config = backend_config(backend)
        # int8-only targets (Ethos-U) always quantize: a float program would delegate nothing
        self.quantize = bool(quantize) or quantizer is not None or getattr(self.config, "int8_only", False)
        self.quantizer = quantizer
        self.calibration = calibration
        self.record_trace = bool(trace)
        self.verbose = verbose
        self.on_stage = on_stage
        args = as_args(example_inputs)
        if self.quantize and self.config.prepare_inputs is not None:  # the layout the backend quantizes in
            args = self.config.prepare_inputs(args)
        #: the positional example inputs, as given (nested structures kept)
        self.inputs: tuple = args
        #: how often each step ran: export (torch.export calls), quantize, lower, run
        self.counts: dict[str, int] = {"export": 0, "quantize": 0, "lower": 0, "run": 0}
        #: seconds per step (export, quantize, export_quantized, lower, run)
        self.seconds: dict[str, float] = {}
        #: the pass trace recorded by :meth:`build` (``trace=True``) or :meth:`trace_lowering`, else ``None``
        self.trace: Any = None
        self._exported: Any = None
        self._quantized: Any = None
        self._program: Any = None
        self._worker: Any = worker
        self._owns_worker = True
        self._snapshots: list[tuple[str, Any]] = []  # (stage, graph) recorded as the objects are made
        self._ids: Any = None
        self._on_lowering: list[Callable[[], Any]] = []  # run in threads once the child lowers
        self._threads: list[Any] = []
        self._closers: list[Callable[[], Any]] = []
        #: optional stages that failed without stopping the build: ``{"trace": one line}``
        self.failures: dict[str, str] = {}
        #: what :meth:`load`'s spec named (``build`` of ``models.py:build``), else ``None``
        self.attr: str | None = None

    @classmethod
    def load(cls, spec: str, *, input_shapes: list[str] | None = None, **kwargs: Any) -> BuildSession:
        """A session for ``--model`` / ``--demo`` ``spec`` (:func:`etlens.builder.loader.load_model`).

        The worker child is started first, so its ``import torch`` + backend overlaps the loading of
        the user's model here. ``name`` defaults to :func:`~etlens.builder.loader.model_title`.
        """
        from .loader import load_model, model_title

        backend = kwargs.get("backend", "xnnpack")
        worker = start_worker(backend, verbose=kwargs.get("verbose", False))
        try:
            with span("load model (user code, import torch)"):
                model, inputs, _attr = load_model(spec, input_shapes)
        except BaseException:
            if worker is not None:
                worker.close()
            raise
        kwargs.setdefault("name", model_title(model, spec))
        session = cls(model, inputs, worker=worker, **kwargs)
        session.attr = _attr  # the function or module attribute the spec named ("build"; a demo's name)
        return session

    def variant(self, *, name: str | None = None, backend: Any = None, quantize: bool | None = None,
                quantizer: Any = None, calibration: list | None = None, trace: bool = False) -> BuildSession:
        """A session of the same model and inputs with another quantization (or backend) that reuses
        this session's export and worker child (closing the variant leaves the child running).

        ``variant(quantizer=q)`` builds the same model with the pt2e quantizer ``q`` (e.g. keeping
        some modules in float); ``variant(quantize=False)`` the float build.
        """
        v = BuildSession(self.model, self.inputs, name=name or self.name,
                         backend=self.backend if backend is None else backend,
                         quantize=self.quantize if quantize is None and quantizer is None else bool(quantize),
                         calibration=self.calibration if calibration is None else calibration,
                         quantizer=quantizer, trace=trace, verbose=self.verbose, worker=self.worker)
        v._owns_worker = False
        v._exported = self._exported
        v.inputs = self.inputs
        return v

    @property
    def in_process(self) -> bool:
        """True when lowering happens in this process: a backend given as an unregistered
        :class:`~etlens.builder.backends.BackendConfig` object, which no child can rebuild."""
        return not isinstance(self.backend, str) and self.backend is not None

    # -- context -------------------------------------------------------------------------------
    def __enter__(self) -> BuildSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop the inside race and the worker child (if this session started or was given it)."""
        for thread in self._threads:
            thread.join()
        self._threads.clear()
        closers, self._closers = self._closers, []
        for fn in closers:
            fn()
        if self._worker is not None and self._owns_worker:
            self._worker.close()
        self._worker = None

    def _stage(self, label: str) -> None:
        if self.on_stage is not None:
            self.on_stage(label)

    def prewarm_modules(self) -> list[str]:
        """What a child imports before its first job: torch and the backend's modules."""
        return ["torch", *self.config.requires]

    @property
    def worker(self) -> Any:
        """The session's :class:`~etlens.builder.worker.Worker` (one child for every native job)."""
        if self._worker is None:
            from .worker import Worker

            self._worker = Worker(verbose=self.verbose, prewarm=self.prewarm_modules())
        return self._worker

    def start_worker(self) -> None:
        """Start the worker child now: its imports overlap the export and quantization done here."""
        if not self.in_process:
            self.worker.start()

    # -- scheduling ------------------------------------------------------------------------------
    def while_lowering(self, fn: Callable[[], Any]) -> None:
        """Run ``fn()`` in a thread once the program is handed to the child (this process only waits
        then): e.g. the imports the report's analyses need. Joined by :meth:`build` before it returns."""
        self._on_lowering.append(fn)

    def on_close(self, fn: Callable[[], Any]) -> None:
        """Call ``fn()`` when the session closes (before its child stops): e.g. cancel a raced build."""
        self._closers.append(fn)

    def _lowering_started(self) -> None:
        import threading

        self._stage("lower")  # from here this process only waits for the child
        for fn in self._on_lowering:
            thread = threading.Thread(target=fn, name="etlens-while-lowering", daemon=True)
            thread.start()
            self._threads.append(thread)
        self._on_lowering.clear()

    # -- export and quantize, once ---------------------------------------------------------------
    @property
    def exported(self) -> Any:
        """The model's export (:func:`etlens.builder.toolchain.export`), computed on first use."""
        if self._exported is None:
            from .toolchain import export

            self.start_worker()
            self._stage("export")
            t0 = time.perf_counter()
            with user_code("export", self.name), span("export"):
                self._exported = export(self.model, self.inputs)
            self.counts["export"] += 1
            self.seconds["export"] = time.perf_counter() - t0
        return self._exported

    @property
    def quantized_module(self) -> Any:
        """The pt2e-converted ``GraphModule`` (prepared from :attr:`exported`), computed on first use."""
        if self._quantized is None:
            from .quantize import quantize_pt2e

            exported = self.exported
            self._stage("quantize")
            t0 = time.perf_counter()
            with user_code("quantize", self.name), span("quantize"):
                self._quantized = quantize_pt2e(self.model, self.inputs, self.config, calibration=self.calibration,
                                                exported=exported, quantizer=self.quantizer)
            self.counts["quantize"] += 1
            self.seconds["quantize"] = time.perf_counter() - t0
            if self.record_trace:  # as the tracer sees it, before the export below touches it
                self._snapshot("quantize", self._quantized)
        return self._quantized

    @property
    def program(self) -> Any:
        """The ExportedProgram that is lowered: :attr:`exported`, or the export of :attr:`quantized_module`."""
        if self._program is None:
            if not self.quantize:
                self._program = self.exported
            else:
                from .toolchain import export

                quantized = self.quantized_module
                t0 = time.perf_counter()
                with user_code("quantize", self.name), span("export quantized"):
                    self._program = export(quantized, self.inputs)
                self.counts["export"] += 1
                self.seconds["export_quantized"] = time.perf_counter() - t0
            if self.record_trace:
                with span("trace/export snapshot"):
                    self._snapshot("export", self._program)
        return self._program

    def float_module(self) -> Any:
        """The float model as a ``GraphModule`` (``exported.module()``; no new export)."""
        return self.exported.module()

    @property
    def quantized(self) -> bool:
        """Whether the lowered program calls ExecuTorch's quantized kernels (pt2e here, or in the model)."""
        from .toolchain import has_quantized_nodes

        return self.quantize or has_quantized_nodes(self.program)

    # -- the pass trace ----------------------------------------------------------------------------
    def _snapshot(self, stage: str, obj: Any) -> None:
        try:
            self._take_snapshot(stage, obj)
        except Exception as exc:  # noqa: BLE001 - the trace is optional: the build goes on without it
            self._trace_failed(f"{stage} snapshot: {type(exc).__name__}: {_first_line(exc)}")

    def _trace_failed(self, why: str) -> None:
        """The pass trace is an optional stage: record why it failed and build without it."""
        self.failures.setdefault("trace", why)
        self.record_trace = False

    def _take_snapshot(self, stage: str, obj: Any) -> None:
        from ..passes import snapshot as snap

        if self._ids is None:
            self._ids = snap.GraphIds()
        if stage == "quantize":
            graph = snap.module_graph(obj, stage, stage, self._ids)
        else:
            graph = snap.program_graph(obj, stage, stage, self._ids)
        self._snapshots.append((stage, graph))

    def _seed(self, *, record_times: bool = True, quantize_io: bool = False) -> Any:
        """A tracer holding the ``quantize`` / ``export`` snapshots, with their measured times."""
        from ..passes.tracer import PipelineTracer

        t = PipelineTracer(self.config, self.name, record_times=record_times, show_progress=False)
        t.trace.meta = {"quantize": self.quantize, "quantize_io": bool(quantize_io)}
        if self._ids is not None:
            t.ids = self._ids
        times = {"quantize": self.seconds.get("export", 0.0) + self.seconds.get("quantize", 0.0),
                 "export": self.seconds.get("export_quantized" if self.quantize else "export", 0.0)}
        for stage, graph in self._snapshots:
            t.add(stage, stage, graph, times[stage])
            t.done.append(stage)
        return t

    def _seed_job(self, tmp: str, output: str, **kw: Any) -> tuple[Any, dict[str, Any]]:
        with span("trace/seed"):
            seed = self._seed(**kw)
        seed_path = os.path.join(tmp, "seed.trace.json")
        seed.trace.save(seed_path)
        return seed, {"seed": seed_path, "ids": seed.ids.to_json(), "output": output,
                      "record_times": kw.get("record_times", True)}

    def _saved_program(self, tmp: str, path: str | None = None) -> str:
        import torch

        ep_path = path or os.path.join(tmp, "program.pt2")
        with span("save program"):
            torch.export.save(self.program, ep_path)
        return ep_path

    # -- lower (traced) and run --------------------------------------------------------------------
    def lower(self, out_dir: str, *, save_pt2: bool = False, trace_path: str | None = None) -> DeviceArtifacts:
        """Lower :attr:`program` once (recording the trace when ``trace=True``): ``<name>.pte`` and
        ``.etrecord`` in ``out_dir`` (``.pt2`` with ``save_pt2``); the trace goes to ``trace_path``
        (default ``<name>.trace.json``) and :attr:`trace`. The ``etdump`` / ``debug_buffer`` paths of
        the result are where :meth:`build` runs write them."""
        from .lower import lower_program

        if self.in_process:  # else the worker child checks it (importing ExecuTorch here costs seconds)
            self.config.check_available()
        os.makedirs(out_dir, exist_ok=True)
        base = os.path.join(out_dir, self.name)
        arts = DeviceArtifacts(pte=base + ".pte", etrecord=base + ".etrecord", etdump=base + ".etdp",
                               debug_buffer=base + ".debug.bin", pt2=base + ".pt2" if save_pt2 else None)
        program, quantized = self.program, self.quantized
        t0 = time.perf_counter()
        trace_out = trace_path or base + ".trace.json"
        with tempfile.TemporaryDirectory(prefix="etlens-ep-") as tmp:
            if self.in_process:  # a BackendConfig object: no child can rebuild it; the same lowering, here
                self._lowering_started()
                tracer = self._seed() if self.record_trace else None
                result = lower_program(program, self.config, arts.pte, etrecord=arts.etrecord,
                                       representative_inputs=self.inputs, quantized=quantized, tracer=tracer,
                                       trace_output=trace_out if tracer is not None else None)
                if arts.pt2:
                    self._saved_program(tmp, arts.pt2)
            else:
                ep_path = self._saved_program(tmp, arts.pt2)
                trace_job = None
                if self.record_trace:
                    try:
                        trace_job = self._seed_job(tmp, trace_out)[1]
                    except Exception as exc:  # noqa: BLE001 - the trace is optional
                        self._trace_failed(f"seed: {type(exc).__name__}: {_first_line(exc)}")
                self._lowering_started()
                with span("lower (waiting for the child)"):
                    result = self._lower_in_child(ep_path, arts, quantized, trace_job)
        if result.get("trace_error"):
            self.failures.setdefault("trace", str(result["trace_error"]).splitlines()[0][:500])
        if self.record_trace and os.path.exists(trace_out):
            from ..model.trace import Trace

            self.trace = Trace.load(trace_out)
        self.counts["lower"] += 1
        self.seconds["lower"] = time.perf_counter() - t0
        return arts

    def _lower_in_child(self, ep_path: str, arts: DeviceArtifacts, quantized: bool,
                        trace_job: dict[str, Any] | None) -> dict[str, Any]:
        """The ``lower`` job; when the traced lowering takes the child down, the plain lowering again
        (the trace is optional: its failure is recorded in :attr:`failures`, the build goes on)."""
        from .worker import NativeStageError

        def lower(trace: dict[str, Any] | None) -> dict[str, Any]:
            return dict(self.worker.lower(ep_path, arts.pte, backend=self.config.name, etrecord=arts.etrecord,
                                          representative_inputs=self.inputs, quantized=quantized, trace=trace))

        if trace_job is None:
            return lower(None)
        try:
            return lower(trace_job)
        except NativeStageError as exc:
            self._trace_failed(f"traced lowering: {_first_line(exc)}")
            return lower(None)

    def run(self, pte: str, inputs: Any = None, *, runs: int = 1, etdump: str | None = None, debug: str | None = None,
            debug_buffer_size: int | None = None, on_run: Callable[[int], Any] | None = None) -> list:
        """Run any ``pte`` ``runs`` times in the session's warm child; return the last run's outputs.

        ``inputs`` default to the session's example inputs. ``etdump`` / ``debug``: where the ETDump
        and the debug buffer (intermediate outputs; ``debug_buffer_size`` bytes, ``None``: sized from
        the program) go; ``None``: not recorded.
        """
        from .toolchain import has_quantized_nodes

        quantized = None if self._program is None else (self.quantize or has_quantized_nodes(self._program))
        return self.worker.run(pte, self.inputs if inputs is None else inputs, runs=runs, etdump=etdump, debug=debug,
                               debug_buffer_size=debug_buffer_size, quantized=quantized, on_run=on_run)

    def build(self, out_dir: str, *, runs: int = 5, debug_buffer_size: int | None = None, save_pt2: bool = False,
              on_run: Callable[[int], Any] | None = None, trace_path: str | None = None) -> DeviceArtifacts:
        """:meth:`lower`, then run the program ``runs`` times with ETDump + debug buffer (``.etdp``,
        ``.debug.bin``); the :meth:`while_lowering` work is finished before it returns.

        ``debug_buffer_size`` (bytes; ``None``: sized from the program) is the runtime's buffer for
        intermediate outputs.
        """
        arts = self.lower(out_dir, save_pt2=save_pt2, trace_path=trace_path)
        self._stage("run")
        t0 = time.perf_counter()
        with span("run (waiting for the child)"):
            self.worker.run(arts.pte, self.inputs, runs=runs, etdump=arts.etdump, debug=arts.debug_buffer,
                            debug_buffer_size=debug_buffer_size, quantized=self.quantized, on_run=on_run)
        self.counts["run"] += 1
        self.seconds["run"] = time.perf_counter() - t0
        for thread in self._threads:
            thread.join()
        self._threads.clear()
        return arts

    def trace_lowering(self, output: str, *, quantize_io: bool = False, lower: bool = True,
                       record_times: bool = True, pte: str | None = None) -> Any:
        """The pass trace of this model's lowering, recorded in the child (``etlens trace``); no run.

        The ``quantize`` / ``export`` snapshots come from this session's objects, the rest (``to_edge``,
        [``quantize_io``], each backend pass, ``lower``) from :func:`etlens.builder.lower.trace_lowering`.
        ``pte``: where a backend whose passes emit the program (Cortex-M) writes it. The trace is
        written to ``output`` (also when a stage failed: ``trace.failed``) and returned.
        """
        from ..model.trace import Trace
        from .lower import trace_lowering

        self.record_trace = True
        try:
            program = self.program
        except Exception as exc:  # noqa: BLE001 - a failed export / quantize is a recorded stage of the trace
            return _failed_before_lowering(self, output, exc, record_times=record_times, quantize_io=quantize_io)
        self._stage("lower")
        with tempfile.TemporaryDirectory(prefix="etlens-trace-") as tmp:
            if self.in_process:
                tracer = self._seed(record_times=record_times, quantize_io=quantize_io)
                trace_lowering(program, self.config, tracer, quantize_io=quantize_io, lower=lower, pte=pte,
                               trace_output=output)
            else:
                ep_path = self._saved_program(tmp)
                job = self._seed_job(tmp, os.path.abspath(output), record_times=record_times,
                                     quantize_io=quantize_io)[1]
                self.worker.trace_lowering(ep_path, backend=self.config.name, trace=job, quantize_io=quantize_io,
                                           lower=lower, pte=None if pte is None else os.path.abspath(pte),
                                           quantized=self.quantized, on_stage=self.on_stage)
        self.trace = Trace.load(output)
        self.counts["lower"] += 1
        return self.trace


def _failed_before_lowering(session: BuildSession, output: str, exc: BaseException, **seed: Any) -> Any:
    """The trace of a model whose export (or pt2e quantization) failed: the snapshots so far and the
    failed stage with its traceback (as :func:`etlens.builder.traced.trace_passes` records it), written
    to ``output``."""
    stage = "quantize" if session.quantize and session._quantized is None else "export"
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    t = session._seed(**seed)
    t.fail(stage, stage, cause, f"stage {stage!r} failed after {t.done}: {type(cause).__name__}: {cause}", None)
    t.trace.save(output)
    session.trace = t.trace
    return t.trace


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__


def start_worker(backend: Any = "xnnpack", *, verbose: bool = False) -> Any:
    """A started :class:`~etlens.builder.worker.Worker` for ``backend`` (``None`` for an in-process backend).

    Its child imports torch and the backend's modules right away, while this process does other
    work; hand it to :class:`BuildSession` (``worker=``). :meth:`BuildSession.load` does this.
    """
    from .toolchain import backend_config
    from .worker import Worker

    if not isinstance(backend, str) and backend is not None:
        return None
    worker = Worker(verbose=verbose, prewarm=["torch", *backend_config(backend).requires])
    worker.start()
    return worker
