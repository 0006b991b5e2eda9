"""Compile for Qualcomm QNN (builder floor): ``--backend qnn-htp`` (HTP NPU) and ``--backend qnn`` (passes only).

``qnn-htp`` lowers with ExecuTorch's own QNN flow (the steps of ``to_edge_transform_and_lower_to_qnn``:
QNN's export transforms, its to-edge passes, ``QnnPartitioner`` under a ``QnnManagerContext``, QNN's
edge config) for an HTP SoC (``qnn-htp`` = SM8650 / HTP v75; ``qnn-htp-sm8750`` … pick another),
fp16 by default, int8 with ``--quantize`` (``QnnQuantizer``). Programs are compiled with
``profile_level=2`` so each run logs per-op cycles. Lowering and running need the QNN libraries:
``QNN_SDK_ROOT`` set, ``$QNN_SDK_ROOT/lib/x86_64-linux-clang`` on ``LD_LIBRARY_PATH`` (on x86-64 the
programs run on the HTP simulator inside ``libQnnHtp.so``). Without them the build stops with an error
naming ``QNN_SDK_ROOT``.

``qnn`` keeps what etlens had before: QNN's to-edge transform passes, one by one (``etlens trace``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from etlens.builder.backends import BackendConfig, PassSpec, pass_name
from etlens.errors import BackendUnavailableError

__all__ = ["config", "QnnHtpConfig", "SOCS", "DEFAULT_SOC", "recipe_apply"]

DEFAULT_SOC = "SM8650"
#: build-name suffix -> QcomChipset member (``qnn-htp-sm8750``)
SOCS = ("SM8450", "SM8475", "SM8550", "SM8650", "SM8750", "SM8850")
LIB = os.path.join("lib", "x86_64-linux-clang")
_REQUIRES = ["executorch.exir", "executorch.backends.qualcomm.utils.utils",
             "executorch.backends.qualcomm.partition.qnn_partitioner"]


def _passes(program: Any) -> list[Any]:
    from executorch.backends.qualcomm._passes.qnn_pass_manager import QnnPassManager

    return [PassSpec(pass_name(p), lambda prog, _p=p: _p)
            for p in QnnPassManager().get_to_edge_transform_passes(program)]


def sdk_problem(environ: Any = None) -> str | None:
    """Why the QNN libraries cannot be used from this process (None when they can)."""
    env = os.environ if environ is None else environ
    root = env.get("QNN_SDK_ROOT")
    if not root:
        return "QNN_SDK_ROOT is not set"
    lib = os.path.join(root, LIB)
    if not os.path.exists(os.path.join(lib, "libQnnHtp.so")):
        return f"QNN_SDK_ROOT={root} has no {os.path.join(LIB, 'libQnnHtp.so')}"
    paths = [os.path.realpath(p) for p in (env.get("LD_LIBRARY_PATH") or "").split(os.pathsep) if p]
    if os.path.realpath(lib) not in paths:
        return f"{lib} is not on LD_LIBRARY_PATH (ExecuTorch's QNN backend loads libQnnHtp.so by name)"
    return None


@dataclass
class QnnHtpConfig(BackendConfig):
    """A :class:`BackendConfig` that lowers with ExecuTorch's QNN flow (``lower_edge``) for one SoC."""

    soc: str = DEFAULT_SOC
    profile_level: int = 2

    def check_available(self) -> None:
        super().check_available()
        why = sdk_problem()
        if why:
            raise BackendUnavailableError(
                f"backend {self.name!r} needs the Qualcomm QNN libraries: {why}. Set QNN_SDK_ROOT to a QNN SDK "
                f"(a folder whose {LIB} holds libQnnHtp.so, libQnnHtpPrepare.so and libQnnSystem.so) and put "
                f"$QNN_SDK_ROOT/{LIB} on LD_LIBRARY_PATH before starting etlens; docs/qnn.md shows how")

    def compile_specs(self, quantized: bool = False) -> list[Any]:
        from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
        from executorch.backends.qualcomm.utils.utils import (
            generate_htp_compiler_spec,
            generate_qnn_executorch_compiler_spec,
        )

        options = generate_htp_compiler_spec(use_fp16=not quantized)
        return generate_qnn_executorch_compiler_spec(soc_model=getattr(QcomChipset, self.soc),
                                                     backend_options=options, profile_level=self.profile_level)

    def lower_edge(self, ep: Any, *, etrecord: bool = False, **_: Any) -> Any:
        """``to_edge_transform_and_lower`` as ``to_edge_transform_and_lower_to_qnn`` does it, on an exported program."""
        from executorch.backends.qualcomm.partition.qnn_partitioner import QnnPartitioner
        from executorch.backends.qualcomm.utils.utils import (
            QnnManagerContext,
            get_qnn_pass_manager_cls,
            qnn_edge_config,
        )
        from executorch.exir import to_edge_transform_and_lower

        quantized = any("quantize_per" in str(n.target) for n in ep.graph.nodes)
        specs = self.compile_specs(quantized)
        from executorch.backends.qualcomm.serialization.qc_schema import QnnExecuTorchBackendType

        manager = get_qnn_pass_manager_cls(QnnExecuTorchBackendType.kHtpBackend)()
        aten = manager.transform_for_export_pipeline(ep)
        passes = manager.get_to_edge_transform_passes(ep, compiler_specs=specs)
        with QnnManagerContext({"forward": specs}):
            return to_edge_transform_and_lower(aten, transform_passes=passes, partitioner=[QnnPartitioner(specs)],
                                               compile_config=qnn_edge_config(), generate_etrecord=etrecord)


def _soc(name: str) -> str:
    tail = name.rsplit("-", 1)[-1].upper()
    if tail in SOCS:
        return tail
    if name in ("qnn-htp",):
        return DEFAULT_SOC
    raise BackendUnavailableError(f"unknown QNN build {name!r}: use qnn-htp (SM8650) or one of "
                                  + ", ".join(f"qnn-htp-{s.lower()}" for s in SOCS))


def config(name: str) -> BackendConfig:
    """The ``build`` hook."""
    if name == "qnn":
        return BackendConfig(
            name=name,
            description="Qualcomm QNN: its to-edge transform passes one by one (lowering: --backend qnn-htp)",
            requires=["executorch.exir", "executorch.backends.qualcomm._passes.qnn_pass_manager"],
            install_hint="install ExecuTorch (pip install executorch==1.5.1)",
            pass_list=_passes,
        )
    soc = _soc(name)

    def quantizer() -> Any:
        from executorch.backends.qualcomm.quantizer.quantizer import QnnQuantizer
        from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset

        return QnnQuantizer(soc_model=getattr(QcomChipset, soc))

    cfg = QnnHtpConfig(
        name=name,
        description=f"Qualcomm QNN HTP ({soc}): ExecuTorch's QNN flow, fp16 (int8 with --quantize), per-op cycles; "
                    "needs QNN_SDK_ROOT",
        requires=list(_REQUIRES),
        install_hint="install ExecuTorch (pip install executorch==1.5.1) and set QNN_SDK_ROOT",
        quantizer_factory=quantizer,
        pass_list=_passes,
        soc=soc,
    )
    cfg.partitioner_factory = lambda: _partitioner(cfg)
    return cfg


def _partitioner(cfg: QnnHtpConfig) -> Any:
    from executorch.backends.qualcomm.partition.qnn_partitioner import QnnPartitioner

    return QnnPartitioner(cfg.compile_specs())


_RECIPE_CALLS = '''

from executorch.backends.qualcomm.quantizer.quantizer import QnnQuantizer
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

gm = torch.export.export(model, inputs).module()
quantizer = QnnQuantizer()                           # your backend / SoC / default quant config
quantizer.add_discard_nodes([n.name for n in gm.graph.nodes if not quantize_node(n)])
prepared = prepare_pt2e(gm, quantizer)
prepared(*inputs)                                    # calibrate
quantized = convert_pt2e(prepared)                   # then export and lower as usual (QnnPartitioner)
'''


def recipe_apply(build_name: str) -> dict[str, str]:
    """How QnnQuantizer keeps a recipe's modules in float (the recipe file's ``apply`` block)."""
    from etlens.builder.recipe_apply import FILTER_PREAMBLE

    return {
        "quantizer": "QnnQuantizer",
        "method": "discard_nodes",
        "calls": FILTER_PREAMBLE + _RECIPE_CALLS,
        "consumer_weights": "the module is left unquantized as a whole (QNN runs it in float)",
    }
