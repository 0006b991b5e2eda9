"""Backend registry: what "compile for backend X" means, stage by stage, for every flow.

A :class:`BackendConfig` says how to quantize (optional), which edge compile config to use, where
the backend's pass list comes from (so the tracer can run and snapshot the passes one at a time),
and how to partition/lower. It is the only place that knows this: the pass tracer, the report's
build-and-run (:mod:`etlens.builder.pipeline`) and the shared quantization step
(:func:`etlens.builder.quantize.quantize_pt2e`) all ask it. Everything that touches ExecuTorch is a
factory called lazily, so the registry imports nothing heavy and the ``aten`` backend works without
ExecuTorch installed.

Built in:

* ``aten`` — pure PyTorch: ``torch.export`` + ``run_decompositions`` (no ExecuTorch needed);
* ``portable`` — ExecuTorch's edge stages with nothing delegated (the portable kernels run it);
* ``xnnpack`` — ExecuTorch's XNNPACK pass list (the one its ``XNNPACKPassManager`` runs inside the
  delegate's preprocess), then ``to_edge_transform_and_lower`` with ``XnnpackPartitioner``;
* ``cortex_m`` — ``CortexMPassManager``'s pass list on the whole program (no partitioner);
* ``vulkan`` — export/edge stages, then lowering with ``VulkanPartitioner`` (its passes are inline in
  its preprocess, so there is no static list to step through);
* ``qnn`` — the Qualcomm to-edge transform passes one by one (lowering needs the QNN SDK);
* ``cadence`` — export/edge stages (its passes run inside its own compiler entry point);
* ``ethos-u55-128``, ``ethos-u65-256``, ``ethos-u85-256`` — Arm's Ethos-U NPUs: the Arm quantizer,
  ``EthosUPartitioner`` and Vela (:mod:`etlens.builder.ethosu`); compiled and estimated, not run
  (``runs=False``); the Arm TOSA passes inside the backend's preprocess are traced too.

Register your own::

    from etlens import BackendConfig, register_backend
    register_backend(BackendConfig(
        name="mybackend",
        pass_list=lambda program: [MyPassA, MyPassB],   # classes or instances, run in order
        partitioner_factory=lambda: MyPartitioner(),
        requires=["mybackend_py"],
    ))
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import BackendUnavailableError, EtlensError

__all__ = [
    "BackendConfig",
    "PassSpec",
    "register_backend",
    "get_backend",
    "backend_names",
    "available_backends",
    "backend_advice",
    "import_advice",
    "MISSING_MODULE_ADVICE",
    "instantiate_pass",
]


@dataclass
class PassSpec:
    """One pass of a backend's list: a display name and how to build it for the current program.

    ``make(program)`` returns a callable ``graph_module -> PassResult`` (the ``torch.fx.passes.infra``
    shape) or an ExecuTorch ``ExportedProgramPassBase``. With ``on_program=True`` it returns a
    function ``ExportedProgram -> ExportedProgram`` instead (a step a pass manager runs on the whole
    program, e.g. ExecuTorch's ``lift_constant_tensor_pass``).
    """

    name: str
    make: Callable[[Any], Any]
    on_program: bool = False


@dataclass
class BackendConfig:
    """How to compile for one backend, as a sequence of traceable stages.

    Fields:
        name: registry key (``etlens trace --backend NAME``).
        description: one line for ``etlens trace --list-backends``.
        requires: importable Python modules the backend needs (checked before anything runs).
        install_hint: what to tell the user when ``requires`` is not met.
        quantizer_factory: ``() -> pt2e Quantizer`` (``None``: the backend has no quantizer).
        pass_list: ``(edge_program) -> [pass class | pass instance | PassSpec]`` run one at a time
            after to_edge; ``None``: no static list (export/edge/lower stages only).
        edge_compile_config: ``() -> EdgeCompileConfig`` (``None``: ExecuTorch's default).
        partitioner_factory: ``() -> Partitioner`` (``None``: no partition/lower stage).
        uses_executorch: ``False`` only for pure-torch backends (``aten``).
        relax_verifier: run passes under a class-only edge verifier, as backends do in preprocess
            (their passes may produce ops outside the core ATen set, e.g. ``aten.linear``).
        to_edge: optional override ``(exported_program, config) -> program`` for the edge stage.
        prepare_inputs: ``(example_inputs) -> example_inputs`` laid out the way the backend's
            quantizer expects, applied when quantizing (Cortex-M: 4-D tensors channels-last, as
            ExecuTorch's Arm compiler does); ``None``: as given.
        to_executorch: the pass list rewrites the whole program instead of delegating parts of it
            (Cortex-M), so the tracer's last stage is ``to_executorch`` on the transformed edge
            program: its snapshot is the program a ``.pte`` holds, and ``trace_passes(pte=…)``
            writes it.
        lowering_context: ``(pte_path) -> context manager`` entered around the lowering and the emit of
            the program (Ethos-U: records what Vela reports at compile time and writes it beside the
            ``.pte`` as ``<stem>.vela.json``); ``None``: nothing.
        preprocess_observer: ``(recorder) -> context manager`` that reports the passes the backend
            runs inside its own ``preprocess`` (Ethos-U: the Arm TOSA pipeline,
            :func:`etlens.builder.ethosu.observe_arm_passes`); the tracer turns them into snapshots
            (:mod:`etlens.passes.preprocess`). ``None``: not observable.
        runs: ``False`` when programs for this backend cannot run on this machine (an NPU with no
            simulator here): the report builds them and skips the run stages.
        int8_only: the target computes in int8 only (Ethos-U): a build always quantizes (pt2e with
            ``quantizer_factory``), as if ``--quantize`` were given.
    """

    name: str
    description: str = ""
    requires: list[str] = field(default_factory=list)
    install_hint: str = ""
    quantizer_factory: Callable[[], Any] | None = None
    pass_list: Callable[[Any], list[Any]] | None = None
    edge_compile_config: Callable[[], Any] | None = None
    partitioner_factory: Callable[[], Any] | None = None
    uses_executorch: bool = True
    relax_verifier: bool = True
    to_edge: Callable[[Any, Any], Any] | None = None
    prepare_inputs: Callable[[tuple], tuple] | None = None
    to_executorch: bool = False
    lowering_context: Callable[[str], Any] | None = None
    preprocess_observer: Callable[[Any], Any] | None = None
    runs: bool = True
    int8_only: bool = False

    def import_errors(self) -> list[tuple[str, BaseException]]:
        """``(module, exception)`` for each module of ``requires`` that does not import."""
        out = []
        for mod in self.requires:
            try:
                importlib.import_module(mod)
            except Exception as exc:  # ImportError, or a broken install raising anything else
                out.append((mod, exc))
        return out

    def missing(self) -> list[str]:
        """The modules of ``requires`` that do not import (empty when the backend is usable)."""
        return [f"{mod} ({_describe(exc)})" for mod, exc in self.import_errors()]

    def advice(self) -> str | None:
        """What to install (or change) to make the backend usable, derived from the actual import
        error (``None`` when it imports). See :func:`import_advice`."""
        errors = self.import_errors()
        if not errors:
            return None
        return "; ".join(dict.fromkeys(import_advice(exc, self.install_hint) for _, exc in errors))

    def check_available(self) -> None:
        """Raise :class:`BackendUnavailableError` naming what to install when ``requires`` fails."""
        errors = self.import_errors()
        if errors:
            missing = "; ".join(f"{mod} ({_describe(exc)})" for mod, exc in errors)
            hint = "; ".join(dict.fromkeys(import_advice(exc, self.install_hint) for _, exc in errors))
            raise BackendUnavailableError(
                f"backend {self.name!r} is not available: cannot import {missing}. {hint}. "
                f"The 'aten' backend needs only PyTorch.")

    def quantizer(self) -> Any:
        """A fresh pt2e ``Quantizer`` for this backend (see :func:`etlens.builder.quantize.quantize_pt2e`).

        Raises :class:`EtlensError` when the backend has no quantizer.
        """
        if self.quantizer_factory is None:
            raise EtlensError(f"backend {self.name!r} has no quantizer; run without quantization (--quantize)")
        return self.quantizer_factory()

    def partitioners(self) -> list[Any]:
        """The partitioners to lower with: ``[partitioner_factory()]``, or ``[]`` when the backend
        delegates nothing (the program then runs on ExecuTorch's portable kernels)."""
        return [] if self.partitioner_factory is None else [self.partitioner_factory()]

    def passes(self, program: Any) -> list[PassSpec]:
        """The backend's pass list for ``program`` as :class:`PassSpec` objects (empty when none)."""
        if self.pass_list is None:
            return []
        out = []
        for p in self.pass_list(program):
            if isinstance(p, PassSpec):
                out.append(p)
            elif isinstance(p, type):
                out.append(PassSpec(p.__name__, lambda prog, _cls=p: instantiate_pass(_cls, prog)))
            else:
                out.append(PassSpec(pass_name(p), lambda prog, _p=p: _p))
        return out


def pass_name(p: Any) -> str:
    """A readable name for a pass class, instance or function."""
    if isinstance(p, type):
        return p.__name__
    name = getattr(p, "__name__", None)
    if name and name != "<lambda>":
        return name
    return type(p).__name__


def _describe(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"


#: ``{missing top-level module: what to do}`` for modules a backend's import chain needs that no
#: ExecuTorch wheel brings. Add to it for your own backends.
MISSING_MODULE_ADVICE: dict[str, str] = {
    "torch": "install PyTorch: pip install 'etlens[torch]'",
    "executorch": "install ExecuTorch: pip install 'etlens[executorch]' (executorch==1.5.1)",
    "tosa_serializer": "pip install 'etlens[cortex-m]' && pip install --no-deps tosa-tools==2026.5.0 (tosa-tools "
                       "provides tosa_serializer, which the Arm TOSA passes the Cortex-M passes reuse import; "
                       "--no-deps because its exact pins would downgrade numpy and flatbuffers)",
    "PyQnnManagerAdaptor": "build ExecuTorch with the Qualcomm backend (QNN SDK); the pip wheel does not "
                           "include PyQnnManagerAdaptor",
}


def import_advice(exc: BaseException, fallback: str = "") -> str:
    """Turn the exception a backend's import raised into one sentence saying what to do.

    A missing module is looked up in :data:`MISSING_MODULE_ADVICE`; a name missing from the
    standard library (``cannot import name 'override' from 'typing'``) means the interpreter is too
    old for the backend; anything else falls back to the backend's ``install_hint``.
    """
    import sys

    name = getattr(exc, "name", None)
    if isinstance(exc, ModuleNotFoundError) and name:
        top = name.split(".")[0]
        if top in MISSING_MODULE_ADVICE:
            return MISSING_MODULE_ADVICE[top]
        return fallback or f"install the Python package that provides the module {name!r}"
    text = str(exc)
    if isinstance(exc, ImportError) and "from 'typing'" in text and "cannot import name" in text:
        missing = text.split("cannot import name ", 1)[1].split(" ", 1)[0].strip("'\"")
        here = ".".join(map(str, sys.version_info[:3]))
        new_in = _TYPING_ADDED.get(missing)
        if new_in is None:
            return f"it needs typing.{missing}, which Python {here} lacks: use a newer Python"
        return (f"it needs typing.{missing}, new in Python {new_in}; this is Python {here}: "
                f"install etlens into a Python {new_in}+ environment")
    return fallback or f"fix the import error ({_describe(exc)})"


#: typing names newer than the oldest Python etlens supports (3.10), with the version adding them
_TYPING_ADDED = {"override": "3.12", "Self": "3.11", "Never": "3.11", "TypeVarTuple": "3.11",
                 "Unpack": "3.11", "ReadOnly": "3.13", "TypeIs": "3.13"}


def instantiate_pass(cls: type, program: Any) -> Any:
    """Build a pass class, handing it the program if its constructor asks for one.

    Backends disagree on the argument name (``exported_program``, ``edge_program``, ``ep``) and on
    whether it is positional; we look at the signature instead of guessing per backend.
    """
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return cls()
    kwargs = {}
    positional_needed = []
    for pname, p in params.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if pname in ("exported_program", "edge_program", "ep", "program"):
            kwargs[pname] = program
        elif p.default is p.empty:
            positional_needed.append(pname)
    if positional_needed:
        raise EtlensError(f"pass {cls.__name__} needs constructor arguments {positional_needed}; "
                          "give the backend a PassSpec that builds it")
    return cls(**kwargs)


_REGISTRY: dict[str, BackendConfig] = {}


def register_backend(config: BackendConfig, *, replace: bool = False) -> BackendConfig:
    """Add ``config`` to the registry (``replace=True`` to override an existing name)."""
    if not isinstance(config, BackendConfig):
        raise EtlensError(f"register_backend expects a BackendConfig, got {type(config).__name__}")
    if config.name in _REGISTRY and not replace:
        raise EtlensError(f"backend {config.name!r} is already registered; pass replace=True to override it")
    _REGISTRY[config.name] = config
    return config


def get_backend(name: str | BackendConfig) -> BackendConfig:
    """The registered backend ``name`` (a :class:`BackendConfig` is returned as is)."""
    if isinstance(name, BackendConfig):
        return name
    try:
        return _REGISTRY[name]
    except KeyError:
        raise EtlensError(f"unknown backend {name!r}; registered: {', '.join(_REGISTRY)} "
                          "(add one with etlens.register_backend(BackendConfig(...)))") from None


def backend_names() -> list[str]:
    """The registered backend names, in registration order."""
    return list(_REGISTRY)


def available_backends() -> dict[str, str | None]:
    """``{name: None if usable else the reason}`` for every registered backend, in registration order.

    Iterating it gives the registered names (``list(available_backends())``); look a backend's
    description up with :func:`get_backend`.
    """
    out: dict[str, str | None] = {}
    for name, cfg in _REGISTRY.items():
        missing = cfg.missing()
        out[name] = None if not missing else "cannot import " + "; ".join(missing)
    return out


def backend_advice() -> dict[str, str | None]:
    """``{name: None if usable else what to install and why}`` (``etlens trace --list-backends``)."""
    return {name: cfg.advice() for name, cfg in _REGISTRY.items()}


# -- built-in backends -----------------------------------------------------------------------

_ET_HINT = "install ExecuTorch: pip install 'etlens[executorch]' (executorch==1.5.1)"


def _xnnpack_quantizer():
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))


def _xnnpack_passes(program: Any) -> list[Any]:
    # The list XNNPACK runs inside its preprocess; reading it from the manager keeps us in step
    # with whatever ExecuTorch version is installed.
    from executorch.backends.xnnpack._passes import XNNPACKPassManager

    return list(XNNPACKPassManager(program).passes)


def _xnnpack_config():
    from executorch.backends.xnnpack.utils.configs import get_xnnpack_edge_compile_config

    return get_xnnpack_edge_compile_config()


def _xnnpack_partitioner():
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return XnnpackPartitioner()


def _ethosu() -> Any:
    from . import ethosu

    return ethosu


def _cortex_m_quantizer():
    from executorch.backends.cortex_m.quantizer.quantizer import CortexMQuantizer

    return CortexMQuantizer()


def _cortex_m_passes(program: Any) -> list[Any]:
    # CortexMPassManager.transform(): its pass classes in order (built with the program and the
    # target config, as the manager builds them), then lift_constant_tensor_pass on the result.
    from executorch.backends.cortex_m.passes import CortexMPassManager

    specs = [PassSpec(cls.__name__, lambda prog, _c=cls: _cortex_m_instantiate(_c, prog))
             for cls in CortexMPassManager(program).passes]
    specs.append(PassSpec("lift_constant_tensor_pass", lambda prog: _lift_constants, on_program=True))
    return specs


def _lift_constants(program: Any) -> Any:
    from executorch.exir.program._program import lift_constant_tensor_pass

    return lift_constant_tensor_pass(program)


def _cortex_m_instantiate(cls: type, program: Any) -> Any:
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


def _cortex_m_config():
    from executorch.backends.cortex_m.edge_compile_config import cortex_m_edge_compile_config

    return cortex_m_edge_compile_config()


def _vulkan_partitioner():
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

    return VulkanPartitioner()


def _vulkan_quantizer():
    from executorch.backends.vulkan.quantizer.vulkan_quantizer import (
        VulkanQuantizer,
        get_symmetric_quantization_config,
    )

    return VulkanQuantizer().set_global(get_symmetric_quantization_config())


def _qnn_passes(program: Any) -> list[Any]:
    from executorch.backends.qualcomm._passes.qnn_pass_manager import QnnPassManager

    return [PassSpec(pass_name(p), lambda prog, _p=p: _p)
            for p in QnnPassManager().get_to_edge_transform_passes(program)]


def _cadence_quantizer():
    from executorch.backends.cadence.aot.quantizer.quantizer import CadenceDefaultQuantizer

    return CadenceDefaultQuantizer()


def _aten_to_edge(ep: Any, config: Any) -> Any:
    return ep.run_decompositions()


register_backend(BackendConfig(
    name="aten",
    description="pure PyTorch: torch.export + run_decompositions (no ExecuTorch needed)",
    requires=["torch"],
    install_hint="install PyTorch: pip install 'etlens[torch]'",
    uses_executorch=False,
    relax_verifier=False,
    to_edge=_aten_to_edge,
))
register_backend(BackendConfig(
    name="xnnpack",
    description="XNNPACK CPU delegate: its passes one by one, then XnnpackPartitioner lowering",
    requires=["executorch.exir", "executorch.backends.xnnpack.partition.xnnpack_partitioner"],
    install_hint=_ET_HINT,
    quantizer_factory=_xnnpack_quantizer,
    pass_list=_xnnpack_passes,
    edge_compile_config=_xnnpack_config,
    partitioner_factory=_xnnpack_partitioner,
))
register_backend(BackendConfig(
    name="portable",
    description="ExecuTorch portable kernels: export/edge stages, nothing delegated (no partitioner)",
    requires=["executorch.exir"],
    install_hint=_ET_HINT,
    # what `etlens report --backend portable --quantize` has always used: quantized_decomposed ops
    # that the portable runtime runs as they are
    quantizer_factory=_xnnpack_quantizer,
))
register_backend(BackendConfig(
    name="cortex_m",
    description="Arm Cortex-M (CMSIS-NN ops): CortexMPassManager's passes on the whole program",
    requires=["executorch.exir", "executorch.backends.cortex_m.passes"],
    install_hint="pip install 'etlens[cortex-m]' && pip install --no-deps tosa-tools==2026.5.0",
    quantizer_factory=_cortex_m_quantizer,
    pass_list=_cortex_m_passes,
    edge_compile_config=_cortex_m_config,
    prepare_inputs=_channels_last,
    to_executorch=True,
))
for _target in ("ethos-u55-128", "ethos-u65-256", "ethos-u85-256"):
    register_backend(BackendConfig(
        name=_target,
        description=f"Arm Ethos-U NPU ({_target}): Arm quantizer, EthosUPartitioner, Vela (compiled, estimated, "
                    "not run: no FVP here)",
        requires=["executorch.exir", "executorch.backends.arm.ethosu", "ethosu.vela"],
        install_hint="pip install 'etlens[ethos-u]' && pip install --no-deps tosa-tools==2026.5.0",
        quantizer_factory=lambda _t=_target: _ethosu().ethosu_quantizer(_t),
        edge_compile_config=lambda: _ethosu().ethosu_edge_compile_config(),
        partitioner_factory=lambda _t=_target: _ethosu().ethosu_partitioner(_t),
        lowering_context=lambda pte, _t=_target: _ethosu().vela_sidecar(_t, pte),
        preprocess_observer=lambda rec: _ethosu().observe_arm_passes(rec),
        runs=False,
        int8_only=True,
    ))
register_backend(BackendConfig(
    name="vulkan",
    description="Vulkan GPU delegate: export/edge stages, then VulkanPartitioner lowering",
    requires=["executorch.exir", "executorch.backends.vulkan.partitioner.vulkan_partitioner"],
    install_hint=_ET_HINT,
    quantizer_factory=_vulkan_quantizer,
    partitioner_factory=_vulkan_partitioner,
))
register_backend(BackendConfig(
    name="qnn",
    description="Qualcomm QNN: its to-edge transform passes one by one (lowering needs the QNN SDK)",
    requires=["executorch.exir", "executorch.backends.qualcomm._passes.qnn_pass_manager"],
    install_hint="install ExecuTorch built with the Qualcomm backend (QNN SDK + PyQnnManagerAdaptor)",
    pass_list=_qnn_passes,
))
register_backend(BackendConfig(
    name="cadence",
    description="Cadence DSPs: export/edge stages (its passes run inside its compiler entry point)",
    requires=["executorch.exir", "executorch.backends.cadence.aot.compiler"],
    install_hint="the Cadence AOT compiler needs Python >= 3.12 (it imports typing.override)",
    quantizer_factory=_cadence_quantizer,
))
