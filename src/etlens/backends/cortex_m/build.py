"""Compile for Arm Cortex-M (builder floor): CortexMPassManager's passes on the whole program.

No partitioner: the passes rewrite the program into CMSIS-NN operators, so the tracer's last stage
is ``to_executorch`` on the transformed edge program (``to_executorch=True``).
"""

from __future__ import annotations

import inspect
from typing import Any

from etlens.builder.backends import BackendConfig, PassSpec

__all__ = ["config", "TOSA_ADVICE"]

#: tosa-tools provides tosa_serializer, which the Arm TOSA passes (reused by the Cortex-M passes) import
TOSA_ADVICE = ("pip install 'etlens[cortex-m]' && pip install --no-deps tosa-tools==2026.5.0 (tosa-tools "
               "provides tosa_serializer, which the Arm TOSA passes the Cortex-M passes reuse import; "
               "--no-deps because its exact pins would downgrade numpy and flatbuffers)")


def _quantizer() -> Any:
    from executorch.backends.cortex_m.quantizer.quantizer import CortexMQuantizer

    return CortexMQuantizer()


def _passes(program: Any) -> list[Any]:
    # CortexMPassManager.transform(): its pass classes in order (built with the program and the
    # target config, as the manager builds them), then lift_constant_tensor_pass on the result.
    from executorch.backends.cortex_m.passes import CortexMPassManager

    specs = [PassSpec(cls.__name__, lambda prog, _c=cls: _instantiate(_c, prog))
             for cls in CortexMPassManager(program).passes]
    specs.append(PassSpec("lift_constant_tensor_pass", lambda prog: _lift_constants, on_program=True))
    return specs


def _lift_constants(program: Any) -> Any:
    from executorch.exir.program._program import lift_constant_tensor_pass

    return lift_constant_tensor_pass(program)


def _instantiate(cls: type, program: Any) -> Any:
    kwargs: dict[str, Any] = {}
    params = inspect.signature(cls).parameters
    if "exported_program" in params:
        kwargs["exported_program"] = program
    if "target_config" in params:
        from executorch.backends.cortex_m.target_config import CortexM, CortexMTargetConfig

        kwargs["target_config"] = CortexMTargetConfig(cpu=CortexM.M55)  # the manager's default
    return cls(**kwargs)


def _channels_last(inputs: tuple) -> tuple:
    """4-D tensors channels-last: the Cortex-M quantizer only annotates NHWC convolutions and pools
    (ExecuTorch's Arm compiler and Cortex-M tests convert their inputs the same way)."""
    import torch

    return tuple(x.to(memory_format=torch.channels_last) if isinstance(x, torch.Tensor) and x.dim() == 4 else x
                 for x in inputs)


def _edge_config() -> Any:
    from executorch.backends.cortex_m.edge_compile_config import cortex_m_edge_compile_config

    return cortex_m_edge_compile_config()


def config(name: str) -> BackendConfig:
    """The ``build`` hook: how to compile for Cortex-M."""
    return BackendConfig(
        name=name,
        description="Arm Cortex-M (CMSIS-NN ops): CortexMPassManager's passes on the whole program",
        requires=["executorch.exir", "executorch.backends.cortex_m.passes"],
        install_hint="pip install 'etlens[cortex-m]' && pip install --no-deps tosa-tools==2026.5.0",
        quantizer_factory=_quantizer,
        pass_list=_passes,
        edge_compile_config=_edge_config,
        prepare_inputs=_channels_last,
        to_executorch=True,
        module_advice={"tosa_serializer": TOSA_ADVICE},
    )
