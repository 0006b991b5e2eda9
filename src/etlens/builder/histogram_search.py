"""The histogram observer's range search, same answer, without a tensor operation per step.

pt2e quantizers observe activations with torchao's ``HistogramObserver`` (ExecuTorch's XNNPACK and Arm
quantizers do, for every static int8 activation). When a prepared model is converted, each observer picks
its clipping range with ``_non_linear_param_search``: starting from the whole histogram, it moves the lower
or upper quantile bound inwards by 1e-5 of the mass per step and stops when the L2 quantization error
grows. Each step compares cumulative-histogram entries with the bound as 0-dimensional tensors, so a single
search runs tens of thousands of tiny tensor operations: about 0.14 s per observer on an idle core, 1,900
of them (4 minutes) when ``etlens fix`` ranks an Arm model's candidates.

:func:`search` walks the same steps over the cumulative histogram as Python floats and calls the
observer's own error function only where the original does (when a bound moves). The comparisons keep the
original's arithmetic: a 0-dimensional ``float32`` tensor compared with a Python float compares in
``float32``, so each bound is rounded to ``float32`` first. The returned range is the same tensors, bit for
bit (tests/builder/test_histogram_search.py compares both on many histograms). Histograms in another
dtype go to the original method.

:func:`install` (called by :func:`etlens.builder.quantize.quantize_pt2e`) puts :func:`search` on the
observer class; :func:`uninstall` restores the original.
"""

from __future__ import annotations

import math
import struct
import threading
from typing import Any

__all__ = ["install", "uninstall", "search", "original"]

_ATTR = "_non_linear_param_search"
_lock = threading.Lock()
_originals: dict[type, Any] = {}

#: where the observer class lives (torchao's pt2e observers; ``torch.ao`` keeps an older copy with the same
#: method, used by the FX-graph-mode flow)
_CLASSES = (("torchao.quantization.pt2e.observer", "HistogramObserver"),
            ("torch.ao.quantization.observer", "HistogramObserver"))

_F32 = struct.Struct("f")


def _f32(x: float) -> float:
    """``x`` rounded to the nearest ``float32`` (as a Python float): how torch compares it with a float32 tensor."""
    if math.isnan(x) or math.isinf(x):
        return x
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:  # beyond float32's range: rounds to infinity
        return math.copysign(math.inf, x)


def original(observer: Any) -> Any:
    """The observer class's own search (also after :func:`install`)."""
    for cls in type(observer).__mro__:
        if cls in _originals:
            return _originals[cls]
    return getattr(type(observer), _ATTR)


def search(self: Any) -> tuple[Any, Any]:
    """``(new_min, new_max)`` of the observer ``self``: what its ``_non_linear_param_search`` returns."""
    import torch

    hist = self.histogram
    if hist.dtype != torch.float32 or hist.dim() != 1:
        return original(self)(self)
    assert hist.size()[0] == self.bins, "bins mismatch"
    bin_width = (self.max_val - self.min_val) / self.bins
    total = torch.sum(hist).item()
    csum = torch.cumsum(hist, dim=0).tolist()  # float32 values, exact as Python floats

    stepsize = 1e-5
    alpha, beta = 0.0, 1.0
    start_bin, end_bin = 0, self.bins - 1
    norm_min = float("inf")
    while alpha < beta:
        next_alpha = alpha + stepsize
        next_beta = beta - stepsize
        low = _f32(next_alpha * total)
        high = _f32(next_beta * total)
        left, right = start_bin, end_bin
        while left < end_bin and csum[left] < low:
            left += 1
        while right > start_bin and csum[right] > high:
            right -= 1
        next_start, next_end = start_bin, end_bin
        if (left - start_bin) > (end_bin - right):
            next_start = left
            alpha = next_alpha
        else:
            next_end = right
            beta = next_beta
        if next_start == start_bin and next_end == end_bin:
            continue
        norm = self._compute_quantization_error(next_start, next_end)
        if norm > norm_min:
            break
        norm_min = norm
        start_bin, end_bin = next_start, next_end

    new_min = self.min_val + bin_width * start_bin
    new_max = self.min_val + bin_width * (end_bin + 1)
    return new_min, new_max


search.etlens_histogram_search = True  # type: ignore[attr-defined]


def _classes() -> list[type]:
    import importlib

    found = []
    for module_name, name in _CLASSES:
        try:
            cls = getattr(importlib.import_module(module_name), name, None)
        except ImportError:
            continue
        if cls is not None and callable(getattr(cls, _ATTR, None)):
            found.append(cls)
    return found


def install() -> None:
    """Use :func:`search` on every histogram observer class found (idempotent; a missing module is skipped)."""
    with _lock:
        for cls in _classes():
            current = cls.__dict__.get(_ATTR)
            if current is None or getattr(current, "etlens_histogram_search", False):
                continue
            _originals[cls] = current
            setattr(cls, _ATTR, search)


def uninstall() -> None:
    """Put the observer classes' own search back."""
    with _lock:
        for cls, method in _originals.items():
            setattr(cls, _ATTR, method)
        _originals.clear()
