"""Run the real ExecuTorch toolchain on a model and keep every artifact a device run would give.

This is the "from a model" half of ``etlens report``: export (optionally pt2e-quantize), lower
with a backend partitioner while recording an ETRecord, write the ``.pte``, run it in the
ExecuTorch runtime with ETDump and a debug buffer (so intermediate outputs are logged), and write
``.etdp`` + debug buffer — the same files an engineer would pull off a phone.

Needs the ``executorch`` extra. Example::

    from etlens.demos import get_demo
    from etlens.report.pipeline import build_and_run

    model, inputs = get_demo("cnn")
    arts = build_and_run(model, inputs, "out/", name="cnn", backend="xnnpack", runs=5)
    arts.pte, arts.etrecord, arts.etdump, arts.debug_buffer
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import BackendUnavailableError

__all__ = ["DeviceArtifacts", "quantize_pt2e", "lower", "run_with_etdump", "build_and_run"]

#: Debug buffer for intermediate outputs; the runtime writes the whole preallocated buffer.
DEFAULT_DEBUG_BUFFER = 1 << 20


@dataclass
class DeviceArtifacts:
    """Paths of the files one build-and-run produced (``None`` when not produced)."""

    pte: str
    etrecord: str
    etdump: str
    debug_buffer: str | None
    pt2: str | None = None


def _require_executorch(what: str) -> None:
    try:
        import executorch.exir  # noqa: F401
    except Exception as exc:  # ImportError or a broken install
        raise BackendUnavailableError(
            f"{what} needs ExecuTorch: pip install 'etlens[executorch]' (executorch==1.5.1)") from exc


def quantize_pt2e(model, inputs, quantizer=None, *, backend: str | Any = "xnnpack", calibration=None):
    """pt2e-quantize ``model`` with ``backend``'s quantizer (default: XNNPACK, symmetric int8 per-channel).

    A thin wrapper over :func:`etlens.passes.quantize.quantize_pt2e` (the step the pass tracer runs
    too) that says what to install when ExecuTorch is missing.
    """
    _require_executorch("quantization")
    from ..passes.quantize import quantize_pt2e as _quantize

    return _quantize(model, inputs, backend, calibration=calibration, quantizer=quantizer)


#: names that mean "delegate nothing" (the portable kernels run the whole program)
_PORTABLE = ("", "portable", "none")


def _backend(backend: str | Any | None) -> Any:
    from ..passes.backends import get_backend

    return get_backend("portable" if backend is None or backend in _PORTABLE else backend)


def lower(model, inputs, *, delegate: bool = True, quant: bool = False, backend: str | None = None,
          partitioners: list | None = None):
    """Export and lower; return ``(exported_program, edge_manager, executorch_manager)``.

    ``backend`` (a registered backend name or :class:`~etlens.passes.backends.BackendConfig`;
    ``'portable'``: no partitioner) wins over the older ``delegate`` flag when given. Its
    :class:`BackendConfig` supplies the quantizer (``quant=True``) and the partitioners.
    """
    _require_executorch("lowering")
    import torch
    from executorch.exir import to_edge_transform_and_lower

    cfg = _backend(backend if backend is not None else ("xnnpack" if delegate else None))
    cfg.check_available()
    if quant:
        model = quantize_pt2e(model, inputs, backend=cfg)
    ep = torch.export.export(model, inputs)
    if partitioners is None:
        partitioners = cfg.partitioners()
    # ExecuTorch's default edge compile config, as the fixtures and reports have always been built
    edge = to_edge_transform_and_lower(ep, partitioner=partitioners, generate_etrecord=True)
    return ep, edge, edge.to_executorch()


def run_with_etdump(pte_bytes: bytes, inputs, runs: int, etdump_path: str, debug_path: str | None,
                    debug_buffer_size: int = DEFAULT_DEBUG_BUFFER, on_run: Callable[[int], Any] | None = None):
    """Run ``runs`` times in the ExecuTorch runtime with ETDump (and a debug buffer) enabled."""
    _require_executorch("running a program")
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    module = _load_for_executorch_from_buffer(
        pte_bytes, enable_etdump=True, debug_buffer_size=debug_buffer_size if debug_path else 0)
    outputs = None
    for i in range(runs):
        outputs = module.forward(list(inputs))
        if on_run is not None:
            on_run(i)
    if debug_path:
        module.write_etdump_result_to_file(etdump_path, debug_path)
    else:
        module.write_etdump_result_to_file(etdump_path)
    return outputs


def build_and_run(model, inputs, out_dir: str, *, name: str = "model", backend: str = "xnnpack",
                  quantize: bool = False, runs: int = 5, debug_buffer_size: int = DEFAULT_DEBUG_BUFFER,
                  save_pt2: bool = False) -> DeviceArtifacts:
    """Lower ``model``, write ``.pte``/``.etrecord``, run it with ETDump; return the paths."""
    os.makedirs(out_dir, exist_ok=True)
    ep, _edge, et = lower(model, inputs, quant=quantize, backend=backend)
    base = os.path.join(out_dir, name)
    arts = DeviceArtifacts(pte=base + ".pte", etrecord=base + ".etrecord", etdump=base + ".etdp",
                           debug_buffer=base + ".debug.bin", pt2=base + ".pt2" if save_pt2 else None)
    with open(arts.pte, "wb") as f:
        f.write(et.buffer)
    record = et.get_etrecord()
    record.update_representative_inputs([tuple(inputs)])
    record.save(arts.etrecord)
    if save_pt2:
        import torch

        torch.export.save(ep, arts.pt2)
    run_with_etdump(et.buffer, inputs, runs, arts.etdump, arts.debug_buffer, debug_buffer_size)
    return arts
