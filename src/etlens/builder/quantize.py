"""The one pt2e quantization step every flow uses (pass tracer, report build-and-run, fixtures).

``quantize_pt2e(model, inputs, backend)`` exports ``model``, prepares it with the backend's
quantizer (from its :class:`~etlens.builder.backends.BackendConfig`), calibrates and converts. The
tracer's ``quantize`` stage and :func:`etlens.builder.pipeline.lower` both call it, so a change to how
etlens quantizes (more calibration batches, integer inputs, extra submodules that torch.export adds)
is made here once.

Example::

    from etlens.demos import get_demo
    from etlens.builder.quantize import quantize_pt2e

    model, inputs = get_demo("cnn")
    quantized = quantize_pt2e(model, inputs, "xnnpack")          # calibrated on ``inputs``
    quantized = quantize_pt2e(model, inputs, "xnnpack", calibration=[inputs, other_inputs])
"""

from __future__ import annotations

from typing import Any, Iterable

from ..errors import EtlensError
from .backends import BackendConfig, get_backend

__all__ = ["quantize_pt2e", "capture_for_pt2e", "module_for_pt2e", "integer_safe", "drop_integer_annotations",
           "restore_integer_scalars", "calibration_batches"]


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
    import torch

    return module_for_pt2e(torch.export.export(model, inputs))


def module_for_pt2e(ep: Any) -> Any:
    """The ``GraphModule`` pt2e prepares from an already exported program (see :func:`capture_for_pt2e`).

    A :class:`~etlens.builder.session.BuildSession` exports the model once and quantizes from that
    export instead of exporting again.
    """
    import inspect

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
                  calibration: Iterable[tuple] | None = None, quantizer: Any = None, exported: Any = None) -> Any:
    """pt2e-quantize ``model`` with ``backend_config``'s quantizer; return the converted ``GraphModule``.

    Args:
        model: an ``nn.Module`` (anything ``torch.export.export`` accepts).
        inputs: the example inputs the model is exported with (a tuple).
        backend_config: a registered backend name or a :class:`BackendConfig` with a
            ``quantizer_factory``.
        exported: ``torch.export.export(model, inputs)`` when the caller already has it (not
            exported again).
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
    from . import histogram_search, pattern_cache

    pattern_cache.install()  # the quantizer's module is imported now: its pattern graphs come from the process' cache
    histogram_search.install()  # the same ranges, found without a tensor operation per search step
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    gm = module_for_pt2e(exported) if exported is not None else capture_for_pt2e(model, inputs)
    prepared = prepare_pt2e(gm, integer_safe(quantizer))
    for batch in calibration_batches(inputs, calibration):
        prepared(*batch)
    return convert_pt2e(prepared)


# -- integer tensors (token ids, positions, indices) -------------------------------------------------
def _is_float(node: Any) -> bool:
    """False when ``node`` is known to produce a non-floating-point tensor (ids, positions, masks)."""
    val = getattr(node, "meta", {}).get("val")
    dtype = getattr(val, "dtype", None)
    return dtype is None or bool(dtype.is_floating_point)


def _refers_to_integer(qspec: Any) -> bool:
    """A ``SharedQuantizationSpec`` that shares with an integer node or an edge out of one."""
    target = getattr(qspec, "edge_or_node", None)
    if target is None:
        return False
    first = target[0] if isinstance(target, tuple) else target
    return not _is_float(first)


def drop_integer_annotations(gm: Any) -> int:
    """Remove quantization annotations on integer tensors of an annotated graph; return how many.

    Backend quantizers annotate by operator pattern: a ``view``/``unsqueeze``/``slice`` of the
    position ids, or the token ids feeding an ``embedding``, get the activation spec like any
    tensor, so prepare would insert observers and convert would turn the ids into fake-quantized
    floats (``embedding`` then fails with "Expected tensor for argument #1 'indices' … got
    FloatTensor"). Integer tensors stay integers: their input and output specs are dropped, and
    so are specs shared with them. Embedding tables stay float (weight-only quantization of them is
    a backend choice this step does not make).
    """
    dropped = 0
    for node in gm.graph.nodes:
        ann = node.meta.get("quantization_annotation")
        if ann is None:
            continue
        for inp in list(ann.input_qspec_map):
            spec = ann.input_qspec_map[inp]
            if not _is_float(inp) or _refers_to_integer(spec):
                del ann.input_qspec_map[inp]
                dropped += 1
        if ann.output_qspec is not None and (not _is_float(node) or _refers_to_integer(ann.output_qspec)):
            ann.output_qspec = None
            dropped += 1
    return dropped


def _attr(gm: Any, target: str) -> Any:
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def restore_integer_scalars(gm: Any) -> int:
    """Give back their integer dtype to scalars the quantizer's transform made float tensors; return how many.

    Quantizers turn scalar operands into tensor constants before annotating (so ``x + 1.5`` can be
    observed), always as float. On integer arithmetic (``arange(16) + past_length`` → position ids)
    that turns the ids into floats, and the ``embedding`` they feed fails. A one-element float
    constant whose every user produces an integer tensor is cast back to that integer dtype.
    """
    import torch

    fixed = 0
    for node in gm.graph.nodes:
        if node.op != "get_attr" or not node.users:
            continue
        try:
            value = _attr(gm, node.target)
        except AttributeError:
            continue
        if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.numel() != 1:
            continue
        dtypes = {getattr(u.meta.get("val"), "dtype", None) for u in node.users}
        if len(dtypes) != 1 or None in dtypes:
            continue
        dtype = dtypes.pop()
        if dtype.is_floating_point or dtype == torch.bool:
            continue
        if value != value.round():  # a fractional scalar on an integer op: leave it as torch computed it
            continue
        owner, _, leaf = node.target.rpartition(".")
        setattr(_attr(gm, owner) if owner else gm, leaf, value.to(dtype))
        fixed += 1
    return fixed


def integer_safe(quantizer: Any) -> Any:
    """``quantizer`` with :func:`drop_integer_annotations` applied after its own annotation.

    Everything else (the transform before annotation, validation, the observer callback) is the
    backend quantizer's own.
    """
    from torchao.quantization.pt2e.quantizer import Quantizer

    class IntegerSafeQuantizer(Quantizer):
        """Delegates to the backend quantizer, then leaves integer tensors unquantized."""

        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def transform_for_annotation(self, model: Any) -> Any:
            out = self.inner.transform_for_annotation(model)
            restore_integer_scalars(out if out is not None else model)
            return out if out is not None else model

        def annotate(self, model: Any) -> Any:
            out = self.inner.annotate(model)
            drop_integer_annotations(out if out is not None else model)
            return out if out is not None else model

        def validate(self, model: Any) -> None:
            return self.inner.validate(model)

        def prepare_obs_or_fq_callback(self, model: Any, edge_or_node_to_obs_or_fq: dict) -> None:
            return self.inner.prepare_obs_or_fq_callback(model, edge_or_node_to_obs_or_fq)

    return IntegerSafeQuantizer(quantizer)


# -- calibration ------------------------------------------------------------------------------------
def calibration_batches(inputs: tuple, calibration: Iterable[Any] | None) -> list[tuple]:
    """The input tuples to calibrate on: ``calibration`` (each item a tuple, or one tensor) or ``[inputs]``.

    Raises:
        EtlensError: ``calibration`` is given but empty (nothing would set the ranges).
    """
    if calibration is None:
        return [inputs]
    batches = [tuple(b) if isinstance(b, (list, tuple)) else (b,) for b in calibration]
    if not batches:
        raise EtlensError("calibration= is empty: give at least one tuple of example inputs (or leave it out to "
                          "calibrate on the example inputs)")
    for i, b in enumerate(batches):
        if len(b) != len(inputs):
            raise EtlensError(f"calibration batch {i} has {len(b)} inputs, the model takes {len(inputs)} "
                              "(each batch is a tuple like the example inputs)")
    return batches
