"""Pass tracing, debug-handle provenance and int8-I/O passes.

* :mod:`.tracer` — :func:`trace_passes`: compile a model stage by stage, a snapshot after each pass;
* :mod:`.snapshot` — a graph snapshot of a module / program, diffs and handle bookkeeping;
* :mod:`.debug_handles` — generation, propagation and validation of debug handles;
* :mod:`.quantize_io` — :class:`QuantizeInputs` / :class:`QuantizeOutputs` (fully-int8 I/O).

The build itself (export, quantize, lower, run; the backend registry) is :mod:`etlens.builder`;
``BackendConfig``, ``register_backend``, ``get_backend``, ``available_backends``, ``backend_names``
and ``quantize_pt2e`` are still importable from here (they are :mod:`etlens.builder`'s).

Names are imported lazily so ``import etlens.passes`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "trace_passes": "etlens.builder.traced",
    "BackendConfig": "etlens.builder.backends",
    "PassSpec": "etlens.builder.backends",
    "register_backend": "etlens.builder.backends",
    "get_backend": "etlens.builder.backends",
    "available_backends": "etlens.builder.backends",
    "backend_names": "etlens.builder.backends",
    "quantize_pt2e": "etlens.builder.quantize",
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
