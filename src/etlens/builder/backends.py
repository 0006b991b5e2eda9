"""Backend registry: what "compile for backend X" means, stage by stage, for every flow.

A :class:`BackendConfig` says how to quantize (optional), which edge compile config to use, where
the backend's pass list comes from (so the tracer can run and snapshot the passes one at a time),
and how to partition/lower. It is the only place that knows this: the pass tracer, the report's
build-and-run (:mod:`etlens.builder.pipeline`) and the shared quantization step
(:func:`etlens.builder.quantize.quantize_pt2e`) all ask it. Everything that touches ExecuTorch is a
factory called lazily, so the registry imports nothing heavy and the ``aten`` backend works without
ExecuTorch installed.

Built in: ``aten`` here (pure PyTorch: ``torch.export`` + ``run_decompositions``, no ExecuTorch
needed: the reference every backend is compared with); every other name comes from a backend folder
of :mod:`etlens.backends`: its ``build`` hook (``etlens/backends/<name>/build.py``) turns a build name
(``xnnpack``, ``ethos-u55-128`` …) into a :class:`BackendConfig`. ``etlens trace --list-backends``
lists them all.

Register your own (a shortcut for a :class:`etlens.backends.Backend` whose only hook is ``build``;
a backend with a folder gives ``build`` as a hook like its other roles, ``docs/backends.md``)::

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

from ..backends import Backend, all_backends, for_build, hook, register
from ..errors import BackendUnavailableError, EtlensError

__all__ = [
    "ATEN",
    "ET_HINT",
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
        module_advice: ``{missing top-level module: what to do}`` for modules of this backend's import
            chain that no ExecuTorch wheel brings (consulted before :data:`MISSING_MODULE_ADVICE`).
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
    module_advice: dict[str, str] = field(default_factory=dict)

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
        return "; ".join(dict.fromkeys(import_advice(exc, self.install_hint, self.module_advice)
                                       for _, exc in errors))

    def check_available(self) -> None:
        """Raise :class:`BackendUnavailableError` naming what to install when ``requires`` fails."""
        errors = self.import_errors()
        if errors:
            missing = "; ".join(f"{mod} ({_describe(exc)})" for mod, exc in errors)
            hint = "; ".join(dict.fromkeys(import_advice(exc, self.install_hint, self.module_advice)
                                           for _, exc in errors))
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


#: ``{missing top-level module: what to do}`` for modules every flow needs. A backend's own ones are
#: its config's ``module_advice`` (etlens/backends/<name>/build.py).
MISSING_MODULE_ADVICE: dict[str, str] = {
    "torch": "install PyTorch: pip install 'etlens[torch]'",
    "executorch": "install ExecuTorch: pip install 'etlens[executorch]' (executorch==1.5.1)",
}


def import_advice(exc: BaseException, fallback: str = "", advice: dict[str, str] | None = None) -> str:
    """Turn the exception a backend's import raised into one sentence saying what to do.

    A missing module is looked up in ``advice`` (the backend's ``module_advice``), then in
    :data:`MISSING_MODULE_ADVICE`; a name missing from the
    standard library (``cannot import name 'override' from 'typing'``) means the interpreter is too
    old for the backend; anything else falls back to the backend's ``install_hint``.
    """
    import sys

    name = getattr(exc, "name", None)
    if isinstance(exc, ModuleNotFoundError) and name:
        top = name.split(".")[0]
        table = {**MISSING_MODULE_ADVICE, **(advice or {})}
        if top in table:
            return table[top]
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


#: what to install for any flow that runs ExecuTorch (a backend's ``install_hint`` when it needs nothing more)
ET_HINT = "install ExecuTorch: pip install 'etlens[executorch]' (executorch==1.5.1)"

_ATEN_NAME = "aten"
_CACHE: dict[str, tuple[Backend, BackendConfig]] = {}


def _aten_to_edge(ep: Any, config: Any) -> Any:
    return ep.run_decompositions()


#: the reference flow: pure PyTorch, no backend, no ExecuTorch
ATEN = BackendConfig(
    name=_ATEN_NAME,
    description="pure PyTorch: torch.export + run_decompositions (no ExecuTorch needed)",
    requires=["torch"],
    install_hint="install PyTorch: pip install 'etlens[torch]'",
    uses_executorch=False,
    relax_verifier=False,
    to_edge=_aten_to_edge,
)


class _Fixed:
    """The ``build`` hook of a backend registered from one ready :class:`BackendConfig`."""

    def __init__(self, config: BackendConfig) -> None:
        self.config = config

    def __call__(self, name: str) -> BackendConfig:
        return self.config


def register_backend(config: BackendConfig, *, replace: bool = False) -> BackendConfig:
    """Register ``config`` as a backend of its own (``replace=True`` to override an existing name).

    The same registry as every backend folder: this adds an :class:`etlens.backends.Backend` named
    ``config.name`` whose one build name is ``config.name`` and whose ``build`` hook returns ``config``.
    """
    if not isinstance(config, BackendConfig):
        raise EtlensError(f"register_backend expects a BackendConfig, got {type(config).__name__}")
    if config.name == _ATEN_NAME or (not replace and config.name in backend_names()):
        raise EtlensError(f"backend {config.name!r} is already registered; pass replace=True to override it")
    register(Backend(name=config.name, builds=(config.name,), label=config.name, hooks={"build": _Fixed(config)},
                     rank=1000), replace=replace)
    _CACHE.pop(config.name, None)
    return config


def get_backend(name: str | BackendConfig) -> BackendConfig:
    """The :class:`BackendConfig` of build name ``name`` (a :class:`BackendConfig` is returned as is).

    ``aten`` is the reference flow; any other name belongs to a registered backend
    (:func:`etlens.backends.for_build`), whose ``build`` hook makes the config (cached per name).
    """
    if isinstance(name, BackendConfig):
        return name
    if name == _ATEN_NAME:
        return ATEN
    backend = for_build(name)
    if backend is None:
        raise EtlensError(f"unknown backend {name!r}; registered: {', '.join(backend_names())} "
                          "(add one with etlens.register_backend(BackendConfig(...)))")
    hit = _CACHE.get(name)
    if hit is not None and hit[0] is backend:
        return hit[1]
    config = hook(backend, "build")(name)
    _CACHE[name] = (backend, config)
    return config


def backend_names() -> list[str]:
    """The build names: ``aten``, then every registered backend's, in registry order."""
    return [_ATEN_NAME] + [n for b in all_backends() if "build" in b.hooks for n in b.builds]


def available_backends() -> dict[str, str | None]:
    """``{name: None if usable else the reason}`` for every registered backend, in registration order.

    Iterating it gives the registered names (``list(available_backends())``); look a backend's
    description up with :func:`get_backend`.
    """
    out: dict[str, str | None] = {}
    for name in backend_names():
        missing = get_backend(name).missing()
        out[name] = None if not missing else "cannot import " + "; ".join(missing)
    return out


def backend_advice() -> dict[str, str | None]:
    """``{name: None if usable else what to install and why}`` (``etlens trace --list-backends``)."""
    return {name: get_backend(name).advice() for name in backend_names()}
