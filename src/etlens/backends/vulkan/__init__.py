"""Vulkan, ExecuTorch's GPU delegate. etlens builds for it; it has no payload decoder yet (its delegates
get the generic facts: size, events by name, time as one block)."""

from etlens.backends import Backend, register

BACKEND = register(Backend(
    name="vulkan",
    ids=("VulkanBackend",),
    builds=("vulkan",),
    label="Vulkan",
    rank=50,
    hooks={"build": "etlens.backends.vulkan.build:config"},
))
