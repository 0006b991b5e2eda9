"""Compile for XNNPACK (builder floor): its quantizer, its pass list, its edge config, its partitioner.

:func:`config` is the ``build`` hook: :func:`etlens.builder.get_backend` calls it with the build name
``xnnpack``. Everything touching ExecuTorch is imported inside the factories, so reading the registry
costs nothing and etlens works without ExecuTorch installed.
"""

from __future__ import annotations

from typing import Any

from etlens.builder.backends import ET_HINT, BackendConfig

__all__ = ["config", "quantizer", "recipe_apply"]


def quantizer() -> Any:
    """XNNPACK's pt2e quantizer: symmetric int8, per-channel weights."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))


def _passes(program: Any) -> list[Any]:
    # The list XNNPACK runs inside its preprocess; reading it from the manager keeps us in step
    # with whatever ExecuTorch version is installed.
    from executorch.backends.xnnpack._passes import XNNPACKPassManager

    return list(XNNPACKPassManager(program).passes)


def _edge_config() -> Any:
    from executorch.backends.xnnpack.utils.configs import get_xnnpack_edge_compile_config

    return get_xnnpack_edge_compile_config()


def _partitioner() -> Any:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return XnnpackPartitioner()


def config(name: str) -> BackendConfig:
    """The ``build`` hook: how to compile for XNNPACK."""
    return BackendConfig(
        name=name,
        description="XNNPACK CPU delegate: its passes one by one, then XnnpackPartitioner lowering",
        requires=["executorch.exir", "executorch.backends.xnnpack.partition.xnnpack_partitioner"],
        install_hint=ET_HINT,
        quantizer_factory=quantizer,
        pass_list=_passes,
        edge_compile_config=_edge_config,
        partitioner_factory=_partitioner,
    )


_RECIPE_CALLS = '''

from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
    XNNPACKQuantizer, get_symmetric_quantization_config)
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
quantizer.set_filter_function(quantize_node)
prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
prepared(*inputs)                                    # calibrate
quantized = convert_pt2e(prepared)                   # then export and lower as usual (XnnpackPartitioner)
'''


def recipe_apply(build_name: str) -> dict[str, str]:
    """How XNNPACK's own quantizer keeps a recipe's modules in float (the recipe file's ``apply`` block)."""
    from etlens.builder.recipe_apply import FILTER_PREAMBLE

    return {
        "quantizer": "XNNPACKQuantizer",
        "method": "filter",
        "calls": FILTER_PREAMBLE + _RECIPE_CALLS,
        "consumer_weights": "XNNPACK cannot run a float input against int8 weights (the runtime refuses the "
                            "graph): its weights stay float with its input",
    }
