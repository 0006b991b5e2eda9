"""Quantizer pattern graphs made once per process instead of once per quantization.

To find conv + batch-norm [+ ReLU] partitions, pt2e quantizers (ExecuTorch's XNNPACK quantizer among them)
turn small pattern functions into ATen graphs with torchao's ``_get_aten_graph_module_for_pattern``: a
strict ``torch.export`` (TorchDynamo) of each pattern, twelve of them on every ``annotate``. The patterns and
their example inputs are the same for every model, yet each quantization traced them again: about 5 s of CPU
per ``quantize_pt2e`` on an idle core, most of the time a small model takes to quantize, paid once per
candidate in ``etlens fix`` and per build in a notebook or a sweep.

:func:`install` (called by :func:`etlens.builder.quantize.quantize_pt2e`) wraps that function so that a
pattern seen before returns a copy of the graph traced the first time. A pattern is the same when its
function's code and the values it closes over (the conv function, ``has_relu``, in-place ReLU or not) are,
with example inputs of the same shapes and dtypes and the same flags; anything that cannot be compared that
way (an unhashable value in the closure, a non-tensor input) is traced as before. Each caller gets its own
``deepcopy`` (callers tidy the graph they get), so a cached graph is never shared.
"""

from __future__ import annotations

import copy
import functools
import threading
from typing import Any, Callable

__all__ = ["install", "pattern_key", "stats"]

#: modules that hold the tracing function under its own name (``from ... import``), patched beside torchao's
_CONSUMERS = ("executorch.backends.xnnpack.quantizer.xnnpack_quantizer_utils",
              "executorch.backends.apple.coreml.quantizer._coreml_quantizer_utils")
_FUNCTION = "_get_aten_graph_module_for_pattern"

_lock = threading.Lock()
_graphs: dict[tuple, Any] = {}
_counts = {"traced": 0, "reused": 0}


def pattern_key(pattern: Any, example_inputs: tuple, is_cuda: bool, kwargs: dict) -> tuple | None:
    """What makes two pattern requests the same graph, or None when it cannot be told safely.

    The pattern is a ``WrapperModule`` around a closure (or a plain function): its code and the values of its
    closure cells identify it; the example inputs count by shape and dtype only (the graph does not depend
    on their values).
    """
    import torch

    fn = getattr(pattern, "fn", pattern)
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    try:
        cells = tuple(c.cell_contents for c in (fn.__closure__ or ()))
        defaults = tuple(fn.__defaults__ or ())
        hash((cells, defaults))
    except (TypeError, ValueError):  # an unhashable or empty cell
        return None
    shapes = []
    for x in example_inputs:
        if not isinstance(x, torch.Tensor):
            return None
        shapes.append((tuple(x.shape), x.dtype))
    try:
        extra = tuple(sorted(kwargs.items()))
        hash(extra)
    except TypeError:
        return None
    return (type(pattern), code, cells, defaults, tuple(shapes), bool(is_cuda), extra)


def _cached(trace: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(trace)
    def get(pattern: Any, example_inputs: tuple, is_cuda: bool = False, **kwargs: Any) -> Any:
        key = pattern_key(pattern, example_inputs, is_cuda, kwargs)
        if key is None:
            return trace(pattern, example_inputs, is_cuda, **kwargs)
        with _lock:
            graph = _graphs.get(key)
        if graph is None:
            graph = trace(pattern, example_inputs, is_cuda, **kwargs)
            with _lock:
                _graphs.setdefault(key, graph)
                _counts["traced"] += 1
        else:
            with _lock:
                _counts["reused"] += 1
        return copy.deepcopy(graph)

    get.etlens_pattern_cache = True  # type: ignore[attr-defined]
    return get


def install() -> None:
    """Wrap the pattern tracer where the quantizers look it up (idempotent; a missing module is skipped)."""
    import importlib
    import sys

    try:
        utils = importlib.import_module("torchao.quantization.pt2e.utils")
    except ImportError:
        return
    original = getattr(utils, _FUNCTION, None)
    if original is None:
        return
    if not getattr(original, "etlens_pattern_cache", False):
        with _lock:
            if not getattr(getattr(utils, _FUNCTION), "etlens_pattern_cache", False):
                setattr(utils, _FUNCTION, _cached(original))
    wrapped = getattr(utils, _FUNCTION)
    for name in _CONSUMERS:
        module = sys.modules.get(name)
        if module is not None and getattr(module, _FUNCTION, None) is not None and \
                not getattr(getattr(module, _FUNCTION), "etlens_pattern_cache", False):
            setattr(module, _FUNCTION, wrapped)


def stats() -> dict[str, int]:
    """How many pattern graphs were traced and how many requests were served from the cache (this process)."""
    with _lock:
        return dict(_counts)
