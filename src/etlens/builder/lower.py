"""The one lowering: an ExportedProgram -> ``.pte`` (+ ETRecord), traced or plain.

:func:`lower_program` is what the worker child's ``lower`` job runs (:mod:`etlens.builder.child`)
and, for a backend no child can rebuild (an unregistered :class:`BackendConfig` object), what a
:class:`~etlens.builder.session.BuildSession` calls in its own process: the same function either way.
:func:`trace_lowering` is ``etlens trace``'s lowering: the pass tracer's stages after ``export``
(``to_edge``, each backend pass, ``lower``), recorded, with no ``.pte`` unless the backend's
passes emit one (Cortex-M). Both take the tracer already holding the ``quantize`` / ``export``
snapshots the session recorded where the user's code ran.

With a tracer, the production lowering *is* the tracer's ``lower`` stage
(:func:`etlens.builder.traced.lowering_stages` with ``production=True``); if a traced stage fails,
the failure is recorded in the trace and the plain lowering below still writes the program, so
tracing never costs the build.
"""

from __future__ import annotations

from typing import Any

from ..model.spans import span
from .toolchain import backend_config, emit, lower_edge

__all__ = ["lower_program", "trace_lowering", "ProtocolBar"]


class ProtocolBar:
    """A progress-bar stand-in for the tracer inside the worker child: each finished stage becomes a
    ``stage <name>`` protocol line, so the parent's ``on_stage`` sees the trace advance."""

    def __init__(self, proto: Any) -> None:
        self.proto, self.total, self._name = proto, None, ""

    def set_postfix_str(self, name: str, refresh: bool = False) -> None:
        self._name = name

    def update(self, n: int = 1) -> None:
        if self.proto is not None:
            self.proto.write(f"stage trace:{self._name}\n")

    def close(self) -> None:
        pass


def lower_program(ep: Any, backend: Any, pte: str, *, etrecord: str | None = None,
                  representative_inputs: Any = None, quantized: bool = False, tracer: Any = None,
                  trace_output: str | None = None, describe: str | None = None, proto: Any = None,
                  _in_context: bool = False) -> dict[str, Any]:
    """Lower ``ep`` for ``backend`` and write ``pte`` (+ ``etrecord``); return facts about the lowering.

    Args:
        ep: the ExportedProgram (float, or the export of the pt2e-converted module).
        backend: a registered name, a :class:`BackendConfig`, or ``portable``/``None`` (nothing delegated).
        etrecord: where the ETRecord goes (``representative_inputs`` recorded in it).
        quantized: load ExecuTorch's quantized kernels before emitting.
        tracer: a :class:`~etlens.passes.tracer.PipelineTracer` holding the snapshots up to ``export``:
            the lowering is then traced (saved to ``trace_output``).
        describe: a path: record which delegate computes each program output (the inside view).
        proto: the worker's protocol stream (``stage`` lines), in the child.

    Returns ``{"traced_lowering": bool, "trace_error": str (when the traced stages failed)}``.
    """
    cfg = backend_config(backend)
    if getattr(cfg, "lowering_context", None) is not None and not _in_context:
        # e.g. Ethos-U: record what Vela says while it compiles, write it beside the .pte (etlens.builder.ethosu)
        with cfg.lowering_context(pte):
            return lower_program(ep, cfg, pte, etrecord=etrecord, representative_inputs=representative_inputs,
                                 quantized=quantized, tracer=tracer, trace_output=trace_output, describe=describe,
                                 proto=proto, _in_context=True)
    with span("lower/check backend"):
        cfg.check_available()
    edge = None
    result: dict[str, Any] = {"traced_lowering": False}
    if tracer is not None:
        from .traced import lowering_stages

        if proto is not None:
            proto.write("stage trace\n")
        try:
            with span("lower/traced lowering"):
                edge = lowering_stages(tracer, cfg, ep, production=True)
        except Exception as exc:  # noqa: BLE001 - the trace is extra: the plain lowering below still runs
            result["trace_error"] = f"{type(exc).__name__}: {exc}"
        if trace_output is not None:
            tracer.trace.save(trace_output)
        result["traced_lowering"] = edge is not None
        failed = tracer.trace.failed if tracer.record else None
        if failed is not None and edge is not None:  # a pass did not replay; the real lowering went on
            err = failed.error or {}
            result["trace_error"] = (f"{failed.stage} {failed.name} could not be replayed on the whole program "
                                     f"({_short(err.get('message', '')) or err.get('type', 'error')}); the trace "
                                     "ends with the real lowering")
        elif edge is None and tracer.error is not None:
            result["trace_error"] = _short(str(tracer.error))
        if proto is not None:
            proto.write("stage lower\n")
    if edge is None:  # no trace, or the traced pipeline stopped early: the plain lowering
        partitioners = cfg.partitioners()
        if describe and partitioners:
            from .describe import recording

            partitioners = [recording(partitioners[0], describe), *partitioners[1:]]
        with span("lower/to_edge_transform_and_lower"):
            edge = lower_edge(ep, cfg, partitioners=partitioners, etrecord=bool(etrecord))
    if describe:
        from .describe import describe_delegates

        describe_delegates(edge.exported_program(), describe)
    with span("lower/to_executorch"):
        emit(edge, pte, etrecord=etrecord, representative_inputs=representative_inputs, quantized=quantized,
             program=ep)
    return result


def _short(text: str) -> str:
    """The cause of a tracer message, one line: ``pass X failed after [...]: E: why`` -> ``E: why``."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    if "]: " in line and line.startswith(("pass ", "stage ")):
        line = line.split("]: ", 1)[-1]
    return line[:300]


def trace_lowering(ep: Any, backend: Any, tracer: Any, *, quantize_io: bool = False, lower: bool = True,
                   pte: str | None = None, trace_output: str | None = None) -> dict[str, Any]:
    """The tracer's stages after ``export`` on ``ep`` (``etlens trace``): no production program.

    ``pte``: where a backend whose passes emit the program (``to_executorch``, Cortex-M) writes it.
    The trace is saved to ``trace_output`` (when given) even when a stage failed; returns
    ``{"failed": bool}``.
    """
    from .traced import lowering_stages

    cfg = backend_config(backend)
    cfg.check_available()
    try:
        lowering_stages(tracer, cfg, ep, quantize_io=quantize_io, lower=lower, pte=pte)
    finally:
        if trace_output is not None:
            tracer.trace.save(trace_output)
    return {"failed": tracer.error is not None}
