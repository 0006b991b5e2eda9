"""Compile for the portable kernels (builder floor): ExecuTorch's edge stages, no partitioner."""

from __future__ import annotations

from typing import Any

from etlens.builder.backends import ET_HINT, BackendConfig, get_backend

__all__ = ["config", "QUANTIZER_FROM", "recipe_apply"]

#: the build whose pt2e quantizer ``--backend portable --quantize`` uses: its quantized_decomposed ops
#: run on the portable runtime as they are (looked up in the registry, not imported)
QUANTIZER_FROM = "xnnpack"


def _quantizer() -> Any:
    return get_backend(QUANTIZER_FROM).quantizer()


def config(name: str) -> BackendConfig:
    """The ``build`` hook: export/edge stages, nothing delegated."""
    return BackendConfig(
        name=name,
        description="ExecuTorch portable kernels: export/edge stages, nothing delegated (no partitioner)",
        requires=["executorch.exir"],
        install_hint=ET_HINT,
        quantizer_factory=_quantizer,
    )





def recipe_apply(build_name: str) -> dict[str, str]:
    """Portable builds are quantized with the CPU delegate's quantizer: its way of keeping modules in float."""
    from etlens.builder.recipe_apply import how_to_apply

    return how_to_apply(QUANTIZER_FROM)
