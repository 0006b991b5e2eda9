"""Pass tracing, backend registry, debug-handle provenance and int8-I/O passes.

* :mod:`.tracer` — :func:`trace_passes`: compile a model stage by stage, a snapshot after each pass;
* :mod:`.backends` — :class:`BackendConfig`, :func:`register_backend` (aten, xnnpack, cortex_m, …):
  the one source of quantizer, partitioners and pass list for every flow;
* :mod:`.quantize` — :func:`quantize_pt2e`, the pt2e step the tracer and the report share;
* :mod:`.debug_handles` — generation, propagation and validation of debug handles;
* :mod:`.quantize_io` — :class:`QuantizeInputs` / :class:`QuantizeOutputs` (fully-int8 I/O).

Names are imported lazily so ``import etlens.passes`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "trace_passes": ".tracer",
    "BackendConfig": ".backends",
    "PassSpec": ".backends",
    "register_backend": ".backends",
    "get_backend": ".backends",
    "available_backends": ".backends",
    "backend_names": ".backends",
    "quantize_pt2e": ".quantize",
    "QuantizeInputs": ".quantize_io",
    "QuantizeOutputs": ".quantize_io",
    "generate_debug_handles": ".debug_handles",
    "validate_handles": ".debug_handles",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'etlens.passes' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value
