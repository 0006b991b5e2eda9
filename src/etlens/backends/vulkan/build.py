"""Compile for Vulkan (builder floor): export/edge stages, then VulkanPartitioner lowering (its passes
run inline in its preprocess, so there is no static list to step through)."""

from __future__ import annotations

from typing import Any

from etlens.builder.backends import ET_HINT, BackendConfig

__all__ = ["config"]


def _partitioner() -> Any:
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

    return VulkanPartitioner()


def _quantizer() -> Any:
    from executorch.backends.vulkan.quantizer.vulkan_quantizer import (
        VulkanQuantizer,
        get_symmetric_quantization_config,
    )

    return VulkanQuantizer().set_global(get_symmetric_quantization_config())


def config(name: str) -> BackendConfig:
    """The ``build`` hook."""
    return BackendConfig(
        name=name,
        description="Vulkan GPU delegate: export/edge stages, then VulkanPartitioner lowering",
        requires=["executorch.exir", "executorch.backends.vulkan.partitioner.vulkan_partitioner"],
        install_hint=ET_HINT,
        quantizer_factory=_quantizer,
        partitioner_factory=_partitioner,
    )
