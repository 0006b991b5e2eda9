"""The build: one model's journey through the ExecuTorch toolchain, in one place.

Everything that exports, quantizes, lowers or runs a model lives here; the rest of etlens reads
what it produced. The way in is :class:`BuildSession` (see docs/build.md):

* :mod:`.session` — :class:`BuildSession`: export, pt2e-quantize, lower (optionally traced) and run
  one model, each step once, native work in one warm worker child;
* :mod:`.toolchain` — every ``torch.export.export`` / ``to_edge_transform_and_lower`` /
  ``to_executorch`` call, once; :mod:`.lower` — :func:`~.lower.lower_program`, the one lowering
  (traced or plain), run by the child's ``lower`` job and by in-process sessions;
* :mod:`.backends` — :class:`BackendConfig`, :func:`register_backend`, :func:`get_backend`: the
  one source of quantizer, partitioners, passes and compile config of every backend;
* :mod:`.quantize` — :func:`quantize_pt2e` (prepare / calibrate / convert with a backend's quantizer);
* :mod:`.worker` / :mod:`.child` — :class:`Worker`, the child process every native job runs in
  (``lower``, ``run``, ``bundled-run``, ``list-operators``);
* :mod:`.runner` — :func:`run_program`: run any ``.pte`` with ETDump (+ debug buffer) in a child;
* :mod:`.loader`, :mod:`.inputs`, :mod:`.demos` — the user's model (``--model file.py:fn``), its
  example inputs, the built-in demo models;
* :mod:`.oplibs`, :mod:`.debug_buffer`, :mod:`.describe` — operator libraries a program needs,
  the runtime's debug-buffer sizing, the partitioner's recorded decisions;
* :mod:`.pipeline` — one-call functions (:func:`~.pipeline.lower`, :func:`~.pipeline.build_and_run`)
  for scripts and test fixtures;
* :mod:`.inside` — the instrumented inside-the-delegates build (:func:`~.inside.inside_delegates`;
  :class:`~.inside.race.InsideRace`: raced on a second child while the session lowers).

Names are imported lazily so ``import etlens.builder`` stays cheap (no torch).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BuildSession": ".session",
    "DeviceArtifacts": ".session",
    "start_worker": ".session",
    "BackendConfig": ".backends",
    "PassSpec": ".backends",
    "register_backend": ".backends",
    "get_backend": ".backends",
    "available_backends": ".backends",
    "backend_names": ".backends",
    "quantize_pt2e": ".quantize",
    "Worker": ".worker",
    "NativeStageError": ".worker",
    "run_program": ".runner",
    "load_model": ".loader",
    "ModelError": ".loader",
    "get_demo": ".demos",
    "inside_delegates": ".inside",
    "InsideResult": ".inside",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'etlens.builder' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value
