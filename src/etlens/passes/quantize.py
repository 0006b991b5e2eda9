"""The one pt2e quantization step every flow uses (pass tracer, report build-and-run, fixtures).

``quantize_pt2e(model, inputs, backend)`` exports ``model``, prepares it with the backend's
quantizer (from its :class:`~etlens.passes.backends.BackendConfig`), calibrates and converts. The
tracer's ``quantize`` stage and :func:`etlens.report.pipeline.lower` both call it, so a change to how
etlens quantizes (more calibration batches, integer inputs, extra submodules that torch.export adds)
is made here once.

Example::

    from etlens.demos import get_demo
    from etlens.passes.quantize import quantize_pt2e

    model, inputs = get_demo("cnn")
    quantized = quantize_pt2e(model, inputs, "xnnpack")          # calibrated on ``inputs``
    quantized = quantize_pt2e(model, inputs, "xnnpack", calibration=[inputs, other_inputs])
"""

from __future__ import annotations

from typing import Any, Iterable

from ..errors import EtlensError
from .backends import BackendConfig, get_backend

__all__ = ["quantize_pt2e", "capture_for_pt2e"]


def capture_for_pt2e(model: Any, inputs: tuple) -> Any:
    """Export ``model`` and return the ``GraphModule`` pt2e prepares: no ``_guards_fn`` submodule.

    Recent torch (2.13 here) ``ExportedProgram.module()`` inserts a ``call_module`` to a ``_guards_fn``
    submodule right after the placeholders (it re-checks input shapes when the module is called).
    Quantizers that run ExecuTorch ``ExportPass`` rewrites before annotating (Cortex-M's
    ``transform_for_annotation``, Arm's, …) cannot trace a ``call_module`` and fail with
    ``ExportPassBaseError: call_module is not supported … %_guards_fn``. The guard only protects
    calls with wrongly shaped inputs, which calibration never makes, so we ask torch not to generate
    it (``module(check_guards=False)``; torch then checks with a forward pre-hook instead) and strip
    any ``_guards_fn`` call that is still there (an older torch, or a ``model`` that is itself the
    ``.module()`` of an exported program).
    """
    import inspect

    import torch

    ep = torch.export.export(model, inputs)
    if "check_guards" in inspect.signature(ep.module).parameters:
        gm = ep.module(check_guards=False)
    else:  # an older torch: no check_guards argument
        gm = ep.module()
    guards = [n for n in gm.graph.nodes if n.op == "call_module" and n.target == "_guards_fn"]
    for node in guards:
        gm.graph.erase_node(node)  # returns nothing: no users
    if guards:
        gm.delete_submodule("_guards_fn")
        gm.recompile()
    return gm


def quantize_pt2e(model: Any, inputs: tuple, backend_config: str | BackendConfig = "xnnpack", *,
                  calibration: Iterable[tuple] | None = None, quantizer: Any = None) -> Any:
    """pt2e-quantize ``model`` with ``backend_config``'s quantizer; return the converted ``GraphModule``.

    Args:
        model: an ``nn.Module`` (anything ``torch.export.export`` accepts).
        inputs: the example inputs the model is exported with (a tuple).
        backend_config: a registered backend name or a :class:`BackendConfig` with a
            ``quantizer_factory``.
        calibration: the input tuples run through the prepared model to collect ranges
            (default: ``[inputs]``).
        quantizer: a pt2e ``Quantizer`` to use instead of the backend's (the backend then only
            names the flow in error messages).

    Raises:
        EtlensError: the backend has no quantizer and none was given.
    """
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    cfg = get_backend(backend_config)
    if quantizer is None:
        if cfg.quantizer_factory is None:
            raise EtlensError(f"backend {cfg.name!r} has no quantizer; run without quantization or pass "
                              "quantizer=… (a pt2e Quantizer)")
        quantizer = cfg.quantizer_factory()
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    gm = capture_for_pt2e(model, inputs)
    prepared = prepare_pt2e(gm, quantizer)
    for batch in (calibration if calibration is not None else [inputs]):
        prepared(*batch)
    return convert_pt2e(prepared)
