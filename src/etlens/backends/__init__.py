"""The backend registry: one :class:`Backend` spec per backend, found by delegate id or build name.

etlens reads, analyses, builds and reports programs for many backends (XNNPACK, Arm Ethos-U,
Cortex-M, the portable kernels …). Everything one backend needs lives in its own folder,
``etlens/backends/<name>/``; the rest of etlens (the *core*) never names a backend: it asks this
registry and calls the backend's *hooks*.

A backend folder's ``__init__.py`` registers one spec::

    from etlens.backends import Backend, register

    BACKEND = register(Backend(
        name="xnnpack",                      # the folder, the key of its decoded facts
        ids=("XnnpackBackend",),             # delegate backend ids (a prefix matches, case-insensitive)
        builds=("xnnpack",),                 # names for ``--backend`` (etlens.builder)
        label="XNNPACK",                     # how pages and tables name it
        hooks={"payload": "etlens.backends.xnnpack.payload:decode",
               "events": "etlens.backends.xnnpack.events:XnnpackAttributor",
               "build": "etlens.backends.xnnpack.build:config"},
    ))

A hook is ``"module:attr"`` (imported only when a caller asks for it) or, for a backend defined in
a script, the object itself. Each role belongs to one floor of the layering (``tests/test_layers.py``,
``docs/design.md``): a reader asks only for reader roles, an analysis for analysis roles, and so on.
The module a hook names is called after its role (``payload.py`` holds the ``payload`` hook), and
its file name decides its floor. :data:`ROLES` lists the roles, their floors and the signatures the
core calls; ``docs/backends.md`` walks through adding a backend.

The built-in backends are the sub-packages of this package (found on first lookup, in
:attr:`Backend.rank` order); a backend shipped in another distribution registers through the entry
point group ``etlens.backends`` (the entry point's module registers on import).

This module imports only :mod:`etlens.errors`: every floor may loop over it.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from ..errors import EtlensError

__all__ = ["Backend", "ROLES", "ROLE_FLOORS", "register", "for_delegate", "for_build", "by_name",
           "all_backends", "hook", "hooks", "has_hook", "role_of_module", "NO_DECODER_NOTE"]

#: ``{role: (floor, what the hook is)}``. The floor is a top-level layer of etlens (tests/test_layers.py);
#: a backend module named after the role (or ``<role>_<anything>.py``) sits on that floor.
ROLES: Mapping[str, tuple[str, str]] = MappingProxyType({
    # schema floor: generated bindings of the backend's own formats
    "schema": ("schema", "generated FlatBuffer bindings of the payload format (no hook: imported by payload)"),
    # readers floor: bytes -> facts
    "payload": ("readers", "decode(payload: memoryview, *, name: str, program) -> decoded object (with attrs() "
                           "-> dict, optionally op_names(), to_graph(name), input_ids/output_ids, summary(program), "
                           "nodes); raise FormatError when it does not decode"),
    "compile_spec": ("readers", "decode compile specs: (list[CompileSpec]) -> dict"),
    "vela": ("readers", "sidecar reader: find_sidecar(pte_path) / read_sidecar(path)"),
    "sidecar": ("readers", "a compile-time sidecar reader"),
    # analysis floor: facts -> results
    "events": ("analysis", "an attributor: object with match(event_names, delegate) -> list[EventMatch]"),
    "mapping": ("analysis", "compiled layers -> graph nodes"),
    "numerics": ("analysis", "intermediate outputs -> graph nodes"),
    "tosa_values": ("analysis", "values inside the delegate"),
    "memory": ("analysis", "memory facts of a delegate: payload_regions(delegate) -> [(name, bytes)], "
                           "program_memory(pte_path, program) -> dict | None"),
    "delegation": ("analysis", "per-delegate delegation facts: delegate_rows(pte_path, program) -> list[dict]"),
    # builder floor: compile for the backend
    "build": ("builder", "config(build_name: str) -> etlens.builder.BackendConfig"),
    # views floor
    "text": ("views", "text renderings of the backend's results"),
    "views": ("views", "views of the backend's results"),
    # report floor
    "section": ("report", "report section(s) of the backend"),
    "page": ("report", "the backend's report page"),
})
ROLE_FLOORS: Mapping[str, str] = MappingProxyType({role: floor for role, (floor, _) in ROLES.items()})

#: The note an unknown backend (no folder, no decoder) gets beside its generic facts.
NO_DECODER_NOTE = "etlens has no decoder for backend {id} yet: its size, events by name and time as one block only"



@dataclass(frozen=True)
class Backend:
    """What etlens knows about one backend: how to recognise it and where its hooks live.

    Fields:
        name: short, lower-case; the key of its decoded facts in outputs (``attrs_key`` overrides it).
        ids: delegate backend ids (``BackendDelegate.id`` in the ``.pte``); a delegate matches when its
            id equals one or starts with one, ignoring case. Empty for a backend that delegates nothing.
        builds: the names ``etlens.builder`` compiles for (``--backend``); each one is passed to the
            ``build`` hook.
        label: the name pages and tables show (``"Arm Ethos-U"``).
        hooks: ``{role: "module:attr" | object}`` (see :data:`ROLES`).
        rank: order among the built-in backends (listings, ``--list-backends``); lower first.
        attrs_key: the key its decoded facts get in node attributes and JSON (default: ``name``).
    """

    name: str
    ids: tuple[str, ...] = ()
    builds: tuple[str, ...] = ()
    label: str = ""
    hooks: Mapping[str, Any] = field(default_factory=dict)
    rank: int = 100
    attrs_key: str = ""

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.strip():
            raise EtlensError(f"Backend name {self.name!r} must be a non-empty word")
        for role in self.hooks:
            if role not in ROLES:
                raise EtlensError(f"backend {self.name!r}: unknown hook role {role!r}; roles: {', '.join(ROLES)}")
        object.__setattr__(self, "ids", tuple(self.ids))
        object.__setattr__(self, "builds", tuple(self.builds))
        object.__setattr__(self, "hooks", MappingProxyType(dict(self.hooks)))
        if not self.label:
            object.__setattr__(self, "label", self.name)
        if not self.attrs_key:
            object.__setattr__(self, "attrs_key", self.name)

    def __hash__(self) -> int:
        return hash(self.name)

    def matches(self, backend_id: str) -> bool:
        """True when a delegate with ``backend_id`` belongs to this backend (exact, then prefix, any case)."""
        low = backend_id.lower()
        return any(low == i.lower() or low.startswith(i.lower()) for i in self.ids)


_BY_NAME: dict[str, Backend] = {}
_LOADED = False


def register(backend: Backend, *, replace: bool = False) -> Backend:
    """Add ``backend`` to the registry and return it (``replace=True`` to override one of the same name).

    A build name or delegate id claimed by another registered backend is an error, unless ``replace``.
    """
    if not isinstance(backend, Backend):
        raise EtlensError(f"register expects an etlens.backends.Backend, got {type(backend).__name__}")
    old = _BY_NAME.get(backend.name)
    if old is not None and not replace and old != backend:
        raise EtlensError(f"backend {backend.name!r} is already registered; pass replace=True to override it")
    if not replace:
        for other in _BY_NAME.values():
            if other.name == backend.name:
                continue
            taken = set(other.builds) & set(backend.builds)
            if taken:
                raise EtlensError(f"backend {backend.name!r}: build name(s) {sorted(taken)} already belong to "
                                  f"{other.name!r}; pass replace=True to override")
    else:
        for other in list(_BY_NAME.values()):
            if other.name != backend.name and set(other.builds) & set(backend.builds):
                left = tuple(b for b in other.builds if b not in backend.builds)
                _BY_NAME[other.name] = Backend(other.name, other.ids, left, other.label, other.hooks, other.rank,
                                               other.attrs_key)
    _BY_NAME[backend.name] = backend
    return backend


def _load_builtin() -> None:
    """Import every sub-package (each registers its spec) and the ``etlens.backends`` entry points, once."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    try:
        from importlib.metadata import entry_points

        for ep in entry_points(group="etlens.backends"):
            ep.load()
    except Exception:  # a broken third-party plug-in must not break reading files
        pass


def all_backends() -> list[Backend]:
    """Every registered backend, built-in ones first in :attr:`Backend.rank` order."""
    _load_builtin()
    return sorted(_BY_NAME.values(), key=lambda b: (b.rank, b.name))


def by_name(name: str) -> Backend | None:
    """The backend called ``name`` (its folder name), or None."""
    _load_builtin()
    return _BY_NAME.get(name)


def for_delegate(backend_id: str | None) -> Backend | None:
    """The backend a delegate with ``backend_id`` belongs to (exact id first, then the longest prefix), or None.

    None means etlens has no folder for it: callers give it the generic treatment (size, events by name,
    time as one block) and :data:`NO_DECODER_NOTE`.
    """
    if not backend_id:
        return None
    backends = all_backends()
    low = backend_id.lower()
    for b in backends:
        if any(low == i.lower() for i in b.ids):
            return b
    best: tuple[int, Backend] | None = None
    for b in backends:
        for i in b.ids:
            if low.startswith(i.lower()) and (best is None or len(i) > best[0]):
                best = (len(i), b)
    return best[1] if best else None


def for_build(name: str) -> Backend | None:
    """The backend that compiles for build name ``name`` (``"ethos-u55-128"``), or None."""
    for b in all_backends():
        if name in b.builds:
            return b
    return None


def has_hook(backend: Backend | None, role: str) -> bool:
    """True when ``backend`` has a hook for ``role``."""
    return backend is not None and role in backend.hooks


def hook(backend: Backend | None, role: str, default: Any = None) -> Any:
    """The object ``backend`` gives for ``role``, imported now (``default`` when it has none).

    A ``"module:attr"`` hook whose module does not import raises the ImportError: the backend's
    folder is broken, which is a bug to see, not to hide.
    """
    if role not in ROLES:
        raise EtlensError(f"unknown hook role {role!r}; roles: {', '.join(ROLES)}")
    if backend is None or role not in backend.hooks:
        return default
    target = backend.hooks[role]
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


def hooks(role: str) -> Iterable[tuple[Backend, Any]]:
    """``(backend, hook object)`` for every registered backend with a ``role`` hook, in rank order."""
    for b in all_backends():
        if role in b.hooks:
            yield b, hook(b, role)


def role_of_module(stem: str) -> str | None:
    """The role a backend module's file name gives it (``payload``, ``mapping_tosa`` -> ``mapping``), or None."""
    if stem in ROLES:
        return stem
    for role in sorted(ROLES, key=len, reverse=True):
        if stem.startswith(role + "_"):
            return role
    return None
