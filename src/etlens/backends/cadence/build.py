"""Compile for Cadence DSPs (builder floor): export/edge stages (its passes run inside its own
compiler entry point)."""

from __future__ import annotations

from typing import Any

from etlens.builder.backends import BackendConfig

__all__ = ["config"]


def _quantizer() -> Any:
    from executorch.backends.cadence.aot.quantizer.quantizer import CadenceDefaultQuantizer

    return CadenceDefaultQuantizer()


def config(name: str) -> BackendConfig:
    """The ``build`` hook."""
    return BackendConfig(
        name=name,
        description="Cadence DSPs: export/edge stages (its passes run inside its compiler entry point)",
        requires=["executorch.exir", "executorch.backends.cadence.aot.compiler"],
        install_hint="the Cadence AOT compiler needs Python >= 3.12 (it imports typing.override)",
        quantizer_factory=_quantizer,
    )
