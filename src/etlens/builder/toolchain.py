"""The toolchain's calls, each written once: export, edge, partition + lower, emit.

Every ``torch.export.export``, ``to_edge_transform_and_lower`` and ``to_executorch`` of etlens goes
through here (pt2e's ``prepare_pt2e`` / ``convert_pt2e`` are in :mod:`etlens.builder.quantize`):
the production lowering (:mod:`etlens.builder.lower`, in the worker child or in process), the
pass tracer's stages (:mod:`etlens.passes.tracer`), the one-call functions of
:mod:`etlens.builder.pipeline` and the inside-delegates cycles. Two facts have one home here:
a backend named ``portable`` (or ``none``, empty, ``None``) delegates nothing (:func:`backend_config`),
and a program with ``quantized_decomposed`` calls needs ExecuTorch's quantized kernels
(:func:`has_quantized_nodes`).

Nothing here imports torch or ExecuTorch at module level.

Example::

    from etlens.builder import toolchain

    cfg = toolchain.backend_config("xnnpack")
    ep = toolchain.export(model, inputs)
    edge = toolchain.lower_edge(ep, cfg, etrecord=True)        # ExecuTorch's default edge config
    et = toolchain.emit(edge, "model.pte", etrecord="model.etrecord", representative_inputs=inputs)
"""

from __future__ import annotations

from typing import Any

from .backends import BackendConfig, get_backend

__all__ = ["PORTABLE", "backend_config", "delegates", "has_quantized_nodes", "export", "edge_config", "to_edge",
           "lower_edge", "to_executorch", "emit"]

#: names that mean "delegate nothing" (the portable kernels run the whole program)
PORTABLE = ("", "portable", "none")


def backend_config(backend: str | BackendConfig | None) -> BackendConfig:
    """The :class:`BackendConfig` of ``backend``: a registered name, a config object, or one of
    :data:`PORTABLE` / ``None`` (the ``portable`` backend: no partitioner)."""
    if backend is None or (isinstance(backend, str) and backend in PORTABLE):
        return get_backend("portable")
    return get_backend(backend)


def delegates(backend: str | BackendConfig | None) -> bool:
    """Whether lowering for ``backend`` hands anything to a delegate (it has a partitioner)."""
    return backend_config(backend).partitioner_factory is not None


def has_quantized_nodes(ep: Any) -> bool:
    """True when an ExportedProgram calls ``quantized_decomposed`` ops (out variants in a separate library)."""
    return any(str(getattr(n, "target", "")).startswith("quantized_decomposed")
               for n in ep.graph_module.graph.nodes if n.op == "call_function")


def export(model: Any, inputs: tuple) -> Any:
    """``torch.export.export(model, inputs)``: the one export of a model (session, tracer, inside view)."""
    import torch

    return torch.export.export(model, tuple(inputs) if isinstance(inputs, list) else inputs)


def edge_config(cfg: BackendConfig) -> Any:
    """The backend's ``EdgeCompileConfig`` (ExecuTorch's default when it names none; ``None`` for pure torch)."""
    if not cfg.uses_executorch:
        return None
    if cfg.edge_compile_config is not None:
        return cfg.edge_compile_config()
    from executorch.exir import EdgeCompileConfig

    return EdgeCompileConfig()


def to_edge(ep: Any, cfg: BackendConfig, config: Any = None, transform_passes: list | None = None) -> Any:
    """The edge program of ``ep`` with nothing partitioned (the backend's ``to_edge`` override first)."""
    if cfg.to_edge is not None:
        return cfg.to_edge(ep, config)
    from executorch.exir import to_edge_transform_and_lower

    return to_edge_transform_and_lower(ep, transform_passes=transform_passes, compile_config=config)


def lower_edge(ep: Any, cfg: BackendConfig, *, config: Any = None, transform_passes: list | None = None,
               partitioners: list | None = None, etrecord: bool = False) -> Any:
    """``to_edge_transform_and_lower`` with the backend's partitioners (``partitioners`` to override).

    ``config`` ``None``: ExecuTorch's default edge compile config (the production lowering, as
    the report and the fixtures have always built their ``.pte``). Returns the ``EdgeProgramManager``.
    """
    own = getattr(cfg, "lower_edge", None)
    if callable(own):  # a backend with its own lowering flow (QNN: its export transforms and manager context)
        return own(ep, config=config, transform_passes=transform_passes, partitioners=partitioners,
                   etrecord=etrecord)
    from executorch.exir import to_edge_transform_and_lower

    return to_edge_transform_and_lower(ep, transform_passes=transform_passes,
                                       partitioner=cfg.partitioners() if partitioners is None else partitioners,
                                       compile_config=config, generate_etrecord=etrecord)


def to_executorch(program: Any, config: Any = None) -> Any:
    """The ExecuTorch program manager of an edge ``EdgeProgramManager``, or of a transformed edge
    ``ExportedProgram`` (backends whose passes rewrite the whole program, e.g. Cortex-M)."""
    if hasattr(program, "to_executorch"):
        return program.to_executorch()
    from executorch.exir import EdgeProgramManager

    return EdgeProgramManager({"forward": program}, compile_config=config).to_executorch()


def emit(edge: Any, pte: str, *, etrecord: str | None = None, representative_inputs: Any = None,
         quantized: bool = False, program: Any = None) -> Any:
    """``to_executorch`` an edge manager, write ``pte`` (+ the ETRecord); return the ExecuTorch manager.

    The operator libraries the program calls are loaded first (:mod:`etlens.builder.oplibs`:
    quantized kernels when ``quantized``, ``llama::*`` … found in ``program``, the ExportedProgram
    that was lowered). ``representative_inputs`` (a tuple) go into the ETRecord.
    """
    from . import oplibs

    oplibs.load(["executorch.kernels.quantized"] if quantized else [])
    if program is not None:
        oplibs.load_for(program)  # the out variants to_executorch needs (quantized, llama::* …)
    et = edge.to_executorch()
    with open(pte, "wb") as f:
        f.write(et.buffer)
    if etrecord:
        record = et.get_etrecord()
        if representative_inputs is not None:
            record.update_representative_inputs([tuple(representative_inputs)])
        record.save(etrecord)
    return et
