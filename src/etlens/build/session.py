"""One model's journey through the toolchain, each step done once: :class:`BuildSession`.

``etlens report --model`` needs, from one model: the exported program, the pt2e-quantized one
(``--quantize``), the lowered ``.pte`` + ``.etrecord``, a pass-by-pass trace of that lowering, the
runtime's ``.etdp`` + debug buffer, and the float / quantized graphs again for the
inside-the-delegates view. A session owns all of it and does each step once:

* **export** — ``torch.export.export`` of the model, once (:attr:`exported`); its ``.module()``
  is the float reference of the inside view;
* **quantize** — pt2e from that same export (:attr:`quantized_module`, no second capture), then
  one export of the quantized module (:attr:`program`: what is lowered);
* **lower** — once, in the session's worker child (:class:`~etlens.build.worker.Worker`): with
  ``trace=True`` the pass tracer records its snapshots *while* that lowering goes — the trace's
  ``lower`` stage is the production lowering whose ``to_executorch`` becomes the ``.pte`` — and the
  ``quantize`` / ``export`` snapshots come from this process's objects (:meth:`build`);
* **run** — in the same child (``import torch`` + executorch paid once);
* the inside view's instrumented builds reuse :attr:`exported` / :attr:`quantized_module` and the
  same worker (:func:`etlens.build.inside.inside_delegates` with ``session=``).

The user's code (export, calibration) runs in this process, so its errors are
:class:`~etlens.build.loader.ModelError` naming the stage and the user's frame; native work
runs in the child. ``counts`` records how often each step ran (tests assert a report exports,
quantizes and lowers once). Example inputs are kept as given (a tuple of positional arguments,
each possibly a nested structure): never flattened here.

Example::

    from etlens.demos import get_demo
    from etlens.build.session import BuildSession

    model, inputs = get_demo("cnn")
    with BuildSession(model, inputs, name="cnn", backend="xnnpack", trace=True) as s:
        arts = s.build("out/", runs=5)          # .pte, .etrecord, .etdp, debug buffer
        s.trace.snapshots[-1].stage             # 'lower': the lowering that wrote arts.pte
        s.counts                                # {'export': 1, 'quantize': 0, 'lower': 1, 'run': 1}
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


#: names that mean "delegate nothing" (the portable kernels run the whole program)
PORTABLE = ("", "portable", "none")


class BuildSession:
    """Export, quantize, lower (traced) and run one model, each once; share the results.

    Args:
        model: an ``nn.Module`` (anything ``torch.export.export`` accepts).
        example_inputs: its positional example inputs (a tuple; a single input is wrapped).
        name: the model's name in files, messages and the trace.
        backend: a registered backend name or a :class:`~etlens.build.backends.BackendConfig`.
        quantize: pt2e-quantize with the backend's quantizer (``calibration``: input tuples).
        quantizer: a pt2e ``Quantizer`` used instead of the backend's (e.g. an ``XNNPACKQuantizer``
            with a filter function or per-module configs); implies ``quantize``.
        trace: record the pass trace during :meth:`build` (see :attr:`trace`).
        verbose: show the worker child's log.
        on_stage: told ``export``, ``quantize``, ``lower``, ``run`` as they start (``lower`` once the program
            is handed to the worker child: from then on this process only waits).
        worker: a :class:`~etlens.build.worker.Worker` already started (:func:`start_worker`, e.g.
            by the CLI before it loads the user's model); the session owns it from then on.
    """

    def __init__(self, model: Any, example_inputs: Any, *, name: str = "model", backend: Any = "xnnpack",
                 quantize: bool = False, calibration: list | None = None, quantizer: Any = None, trace: bool = False,
                 verbose: bool = False, on_stage: Callable[[str], Any] | None = None, worker: Any = None) -> None:
        from .backends import get_backend

        self.model = model
        self.name = name
        self.backend = backend
        self.config = get_backend("portable" if backend is None or backend in PORTABLE else backend)
        self.quantize = bool(quantize) or quantizer is not None
        self.quantizer = quantizer
        self.calibration = calibration
        self.record_trace = bool(trace)
        self.verbose = verbose
        self.on_stage = on_stage
        from .inputs import as_args

        args = as_args(example_inputs)
        if self.quantize and self.config.prepare_inputs is not None:  # the layout the backend quantizes in
            args = self.config.prepare_inputs(args)
        #: the positional example inputs, as given (nested structures kept)
        self.inputs: tuple = args
        #: how often each step ran: export (torch.export calls), quantize, lower, run
        self.counts: dict[str, int] = {"export": 0, "quantize": 0, "lower": 0, "run": 0}
        #: seconds per step (export, quantize, export_quantized, lower, run)
        self.seconds: dict[str, float] = {}
        #: the pass trace recorded by :meth:`build` (``trace=True``), else ``None``
        self.trace: Any = None
        self._exported: Any = None
        self._quantized: Any = None
        self._program: Any = None
        self._worker: Any = worker
        self._snapshots: list[tuple[str, Any]] = []  # (stage, graph) recorded as the objects are made

    @property
    def in_process(self) -> bool:
        """True when lowering happens in this process: a backend given as an unregistered
        :class:`~etlens.build.backends.BackendConfig` object, which no child can rebuild."""
        return not isinstance(self.backend, str) and self.backend is not None

    # -- context -------------------------------------------------------------------------------
    def __enter__(self) -> BuildSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker child (if one was started)."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def _stage(self, label: str) -> None:
        if self.on_stage is not None:
            self.on_stage(label)

    @property
    def worker(self) -> Any:
        """The session's :class:`~etlens.build.worker.Worker` (one child for every native job)."""
        if self._worker is None:
            from .worker import Worker

            self._worker = Worker(verbose=self.verbose, prewarm=["torch", *self.config.requires])
        return self._worker

    def start_worker(self) -> None:
        """Start the worker child now: its imports overlap the export and quantization done here."""
        if not self.in_process:
            self.worker.start()

    # -- export and quantize, once ---------------------------------------------------------------
    @property
    def exported(self) -> Any:
        """``torch.export.export(model, inputs)``, computed on first use."""
        if self._exported is None:
            import torch

            self.start_worker()
            self._stage("export")
            t0 = time.perf_counter()
            with user_code("export", self.name), span("export"):
                self._exported = torch.export.export(self.model, self.inputs)
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
                import torch

                quantized = self.quantized_module
                t0 = time.perf_counter()
                with user_code("quantize", self.name), span("export quantized"):
                    self._program = torch.export.export(quantized, self.inputs)
                self.counts["export"] += 1
                self.seconds["export_quantized"] = time.perf_counter() - t0
            if self.record_trace:
                with span("trace/export snapshot"):
                    self._snapshot("export", self._program)
        return self._program

    def float_module(self) -> Any:
        """The float model as a ``GraphModule`` (``exported.module()``; no new export)."""
        return self.exported.module()

    def _snapshot(self, stage: str, obj: Any) -> None:
        from ..passes import snapshot as snap

        if not hasattr(self, "_ids"):
            self._ids = snap.GraphIds()
        if stage == "quantize":
            graph = snap.module_graph(obj, stage, stage, self._ids)
        else:
            graph = snap.program_graph(obj, stage, stage, self._ids)
        self._snapshots.append((stage, graph))

    def _seed(self) -> tuple[Any, dict[str, int]]:
        """A tracer holding the ``quantize`` / ``export`` snapshots, with their measured times."""
        from ..passes.tracer import PipelineTracer

        t = PipelineTracer(self.config, self.name, record_times=True, show_progress=False)
        t.trace.meta = {"quantize": self.quantize, "quantize_io": False}
        if self.record_trace and hasattr(self, "_ids"):
            t.ids = self._ids
        times = {"quantize": self.seconds.get("export", 0.0) + self.seconds.get("quantize", 0.0),
                 "export": self.seconds.get("export_quantized" if self.quantize else "export", 0.0)}
        for stage, graph in self._snapshots:
            t.add(stage, stage, graph, times[stage])
            t.done.append(stage)
        return t, t.ids.to_json()

    # -- lower (traced) and run, once ----------------------------------------------------------------
    def build(self, out_dir: str, *, runs: int = 5, debug_buffer_size: int | None = None, save_pt2: bool = False,
              on_run: Callable[[int], Any] | None = None, trace_path: str | None = None) -> DeviceArtifacts:
        """Lower :attr:`program` once (recording the trace when ``trace=True``) and run it ``runs`` times.

        Writes ``<name>.pte``, ``.etrecord``, ``.etdp``, ``.debug.bin`` (and ``.pt2`` with
        ``save_pt2``) into ``out_dir``; the trace goes to ``trace_path`` (default
        ``<name>.trace.json``) and :attr:`trace`. ``debug_buffer_size`` (bytes; ``None``: sized
        from the program) is the runtime's buffer for intermediate outputs.
        """
        import torch

        if self.in_process:  # else the worker child checks it (importing ExecuTorch here costs seconds)
            self.config.check_available()
        os.makedirs(out_dir, exist_ok=True)
        base = os.path.join(out_dir, self.name)
        arts = DeviceArtifacts(pte=base + ".pte", etrecord=base + ".etrecord", etdump=base + ".etdp",
                               debug_buffer=base + ".debug.bin", pt2=base + ".pt2" if save_pt2 else None)
        program = self.program
        quantized = self.quantize or _has_quantized_nodes(program)
        t0 = time.perf_counter()
        trace_out = trace_path or base + ".trace.json"
        if self.in_process:
            self._stage("lower")
            self._lower_here(program, arts, trace_out, quantized)  # a BackendConfig object: no child can rebuild it
        else:
            with tempfile.TemporaryDirectory(prefix="etlens-ep-") as tmp:
                ep_path = arts.pt2 or os.path.join(tmp, "program.pt2")
                with span("save program"):
                    torch.export.save(program, ep_path)
                trace_job = None
                if self.record_trace:
                    with span("trace/seed"):
                        seed, ids = self._seed()
                    seed_path = os.path.join(tmp, "seed.trace.json")
                    seed.trace.save(seed_path)
                    trace_job = {"seed": seed_path, "ids": ids, "output": trace_out}
                # from here this process only waits for the child ("lower" listeners may use it)
                self._stage("lower")
                with span("lower (waiting for the child)"):
                    self.worker.lower(ep_path, arts.pte, backend=self.config.name, etrecord=arts.etrecord,
                                      representative_inputs=self.inputs, quantized=quantized, trace=trace_job)
            if self.record_trace:
                from ..model.trace import Trace

                self.trace = Trace.load(trace_out)
        self.counts["lower"] += 1
        self.seconds["lower"] = time.perf_counter() - t0
        self._stage("run")
        t0 = time.perf_counter()
        with span("run (waiting for the child)"):
            self.worker.run(arts.pte, self.inputs, runs=runs, etdump=arts.etdump, debug=arts.debug_buffer,
                            debug_buffer_size=debug_buffer_size, quantized=quantized, on_run=on_run)
        self.counts["run"] += 1
        self.seconds["run"] = time.perf_counter() - t0
        return arts

    def _lower_here(self, program: Any, arts: DeviceArtifacts, trace_out: str, quantized: bool) -> None:
        """Lower in this process (a backend given as an unregistered :class:`BackendConfig` object)."""
        import torch

        from ..passes.tracer import lowering_stages

        edge = None
        if self.record_trace:
            t, _ids = self._seed()
            edge = lowering_stages(t, self.config, program, production=True)
            t.trace.save(trace_out)
            self.trace = t.trace
        if edge is None:
            from executorch.exir import to_edge_transform_and_lower

            edge = to_edge_transform_and_lower(program, partitioner=self.config.partitioners(), generate_etrecord=True)
        from . import oplibs

        oplibs.load(["executorch.kernels.quantized"] if quantized else [])
        oplibs.load_for(program)  # the out variants to_executorch needs (quantized, llama::* …)
        et = edge.to_executorch()
        with open(arts.pte, "wb") as f:
            f.write(et.buffer)
        record = et.get_etrecord()
        record.update_representative_inputs([self.inputs])
        record.save(arts.etrecord)
        if arts.pt2:
            torch.export.save(program, arts.pt2)


def start_worker(backend: Any = "xnnpack", *, verbose: bool = False) -> Any:
    """A started :class:`~etlens.build.worker.Worker` for ``backend`` (``None`` for an in-process backend).

    Its child imports torch and the backend's modules right away, while this process does other
    work (the CLI loads the user's model meanwhile); hand it to :class:`BuildSession` (``worker=``).
    """
    from .backends import get_backend
    from .worker import Worker

    if not isinstance(backend, str) and backend is not None:
        return None
    config = get_backend("portable" if backend is None or backend in PORTABLE else backend)
    worker = Worker(verbose=verbose, prewarm=["torch", *config.requires])
    worker.start()
    return worker


def _has_quantized_nodes(ep: Any) -> bool:
    """True when an ExportedProgram calls ``quantized_decomposed`` ops (out variants in a separate library)."""
    return any(str(getattr(n, "target", "")).startswith("quantized_decomposed")
               for n in ep.graph_module.graph.nodes if n.op == "call_function")
