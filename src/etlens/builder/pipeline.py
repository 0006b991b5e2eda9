"""Run the real ExecuTorch toolchain on a model and keep every artifact a device run would give.

This is the "from a model" half of ``etlens report``: export (optionally pt2e-quantize), lower
with a backend partitioner while recording an ETRecord, write the ``.pte``, run it in the
ExecuTorch runtime with ETDump and a debug buffer (so intermediate outputs are logged), and write
``.etdp`` + debug buffer — the same files an engineer would pull off a phone.

Where each step runs: the user's code (export, pt2e quantization with calibration) runs in this
process, so its errors carry the user's frame (:class:`ModelError`: ``export of build() failed at
export: …  (models.py:12 in forward)``); ExecuTorch's native work — lowering + ``to_executorch`` and
the runtime — runs in child processes (:mod:`etlens.builder.runner`), so a native abort (a full
debug buffer, a kernel check) becomes an :class:`~etlens.errors.EtlensError` naming the stage, the
cause and the flag to change instead of killing this process. The debug buffer is sized from the
written ``.pte`` (:func:`etlens.builder.runner.debug_buffer_bytes`) unless ``debug_buffer_size`` is
given.

Needs the ``executorch`` extra. Example::

    from etlens.demos import get_demo
    from etlens.builder.pipeline import build_and_run

    model, inputs = get_demo("cnn")
    arts = build_and_run(model, inputs, "out/", name="cnn", backend="xnnpack", runs=5)
    arts.pte, arts.etrecord, arts.etdump, arts.debug_buffer
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Callable

from ..errors import BackendUnavailableError
from .loader import ModelError
from .session import DeviceArtifacts

__all__ = ["DeviceArtifacts", "ModelError", "quantize_pt2e", "lower", "run_with_etdump", "build_and_run"]

#: Fixed debug buffer size of earlier versions (bytes); ``None`` now means "sized from the program".
DEFAULT_DEBUG_BUFFER = 1 << 20


def require_executorch(what: str) -> None:
    """Raise :class:`BackendUnavailableError` when ExecuTorch is not installed.

    Only looks the package up (no import: ``import executorch.exir`` costs seconds, and the report's
    process never needs it when the native work runs in the worker child, which checks the backend
    itself and names what to install).
    """
    import importlib.util

    try:
        found = importlib.util.find_spec("executorch.exir") is not None
    except Exception as exc:  # noqa: BLE001 - a broken install
        raise BackendUnavailableError(
            f"{what} needs ExecuTorch: pip install 'etlens[executorch]' (executorch==1.5.1)") from exc
    if not found:
        raise BackendUnavailableError(f"{what} needs ExecuTorch: pip install 'etlens[executorch]' (executorch==1.5.1)")


def quantize_pt2e(model, inputs, quantizer=None, *, backend: str | Any = "xnnpack", calibration=None):
    """pt2e-quantize ``model`` with ``backend``'s quantizer (default: XNNPACK, symmetric int8 per-channel).

    A thin wrapper over :func:`etlens.builder.quantize.quantize_pt2e` (the step the pass tracer runs
    too) that says what to install when ExecuTorch is missing.
    """
    require_executorch("quantization")
    from .quantize import quantize_pt2e as _quantize

    return _quantize(model, inputs, backend, calibration=calibration, quantizer=quantizer)


def lower(model, inputs, *, delegate: bool = True, quant: bool = False, backend: str | None = None,
          partitioners: list | None = None):
    """Export and lower in this process; return ``(exported_program, edge_manager, executorch_manager)``.

    For scripts and tests that need the toolchain's own objects (the report builds in the worker
    child, :class:`~etlens.builder.session.BuildSession`); the steps are the same functions
    (:mod:`etlens.builder.toolchain`). ``backend`` (a registered backend name or
    :class:`~etlens.builder.backends.BackendConfig`; ``'portable'``: no partitioner) wins over the
    older ``delegate`` flag when given. Its :class:`BackendConfig` supplies the quantizer
    (``quant=True``) and the partitioners.
    """
    require_executorch("lowering")
    from . import oplibs
    from .toolchain import backend_config, export, lower_edge

    cfg = backend_config(backend if backend is not None else ("xnnpack" if delegate else None))
    cfg.check_available()
    if quant:
        model = quantize_pt2e(model, inputs, backend=cfg)
    ep = export(model, inputs)
    # ExecuTorch's default edge compile config, as the fixtures and reports have always been built
    edge = lower_edge(ep, cfg, partitioners=partitioners, etrecord=True)
    oplibs.load_for(ep)  # the operator libraries ep calls (quantized out variants, llama::*)
    return ep, edge, edge.to_executorch()


def run_with_etdump(pte_bytes: bytes, inputs, runs: int, etdump_path: str, debug_path: str | None,
                    debug_buffer_size: int | None = None, on_run: Callable[[int], Any] | None = None, *,
                    verbose: bool = False, load_quantized_kernels: bool | None = None):
    """Run ``runs`` times in the ExecuTorch runtime (a child process) with ETDump and a debug buffer.

    ``debug_buffer_size=None`` sizes the buffer from the program
    (:func:`etlens.builder.runner.debug_buffer_bytes`). Returns the outputs of the last run.
    """
    require_executorch("running a program")
    from .runner import run_program

    with tempfile.TemporaryDirectory(prefix="etlens-pte-") as tmp:
        pte = os.path.join(tmp, "program.pte")
        with open(pte, "wb") as f:
            f.write(pte_bytes)
        return run_program(pte, inputs, runs=runs, etdump_path=etdump_path, debug_path=debug_path,
                           debug_buffer_size=debug_buffer_size, load_quantized_kernels=load_quantized_kernels,
                           on_run=on_run, verbose=verbose)


def build_and_run(model, inputs, out_dir: str, *, name: str = "model", backend: str = "xnnpack",
                  quantize: bool = False, runs: int = 5, debug_buffer_size: int | None = None,
                  save_pt2: bool = False, verbose: bool = False, on_stage: Callable[[str], Any] | None = None,
                  on_run: Callable[[int], Any] | None = None) -> DeviceArtifacts:
    """Export (+ quantize) here, lower and run in a child process; write ``.pte``/``.etrecord``/``.etdp``.

    Stages, each announced to ``on_stage``: ``export`` and ``quantize`` run the user's model in this
    process (errors: :class:`ModelError` with the user's frame); ``lower`` and ``run`` are jobs of
    one worker child (:mod:`etlens.builder.worker`; ``on_run(i)`` after each run).
    ``debug_buffer_size`` (bytes) overrides the size computed from the program; ``verbose`` shows
    the child's logs. A backend given as a :class:`~etlens.builder.backends.BackendConfig` object
    (not a registered name) is lowered in this process: a child cannot rebuild it. The steps are a
    :class:`~etlens.builder.session.BuildSession`'s (use one directly to also trace the passes).
    """
    require_executorch("lowering")
    from .session import BuildSession

    with BuildSession(model, inputs, name=name, backend=backend, quantize=quantize, verbose=verbose,
                      on_stage=on_stage) as session:
        return session.build(out_dir, runs=runs, debug_buffer_size=debug_buffer_size, save_pt2=save_pt2,
                             on_run=on_run)
