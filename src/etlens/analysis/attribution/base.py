"""The plug-in interface: how a backend says which of its nodes each delegate-internal event ran.

A delegate logs its own profiling events inside a ``DELEGATE_CALL`` (XNNPACK logs one per runtime
operator: ``Convolution (NHWC, F32) IGEMM #1``). Those names mean nothing to the ETRecord; only
the backend knows which nodes of its payload ran under each. A :class:`BackendAttributor` turns
the ordered event names of one delegate call plus the delegate's payload into one
:class:`EventMatch` per event: the debug handles it ran (which the ETRecord maps to ATen nodes,
module paths and source lines), the backend ops, and how sure the match is.

Backends register by id (the ``BackendDelegate.id`` of the ``.pte``, e.g. ``XnnpackBackend``)::

    from etlens.analysis.attribution import register_backend

    class MyNpu:
        def match(self, event_names, delegate):       # delegate: readers' Delegate (payload facts)
            return [EventMatch(name, handles=(...,), backend_ops=("npu.conv",)) for name in event_names]

    register_backend("MyNpuBackend", MyNpu())

Lookup is by exact id first, then case-insensitive prefix (``xnnpack`` matches ``XnnpackBackend``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .types import BackendAttributor, EventMatch

__all__ = ["EventMatch", "BackendAttributor", "register_backend", "attributor_for", "registered_backends"]


@dataclass
class _Registry:
    by_id: dict[str, BackendAttributor] = field(default_factory=dict)


_REGISTRY = _Registry()


def register_backend(backend_id: str, attributor: BackendAttributor) -> None:
    """Make ``attributor`` handle the delegates whose id is (or starts with) ``backend_id``."""
    _REGISTRY.by_id[backend_id] = attributor


def registered_backends() -> list[str]:
    """The backend ids with an attributor (built-in: XNNPACK)."""
    _load_builtin()
    return sorted(_REGISTRY.by_id)


def attributor_for(backend_id: str | None) -> BackendAttributor | None:
    """The attributor of ``backend_id`` (exact id, then case-insensitive prefix), or None."""
    if not backend_id:
        return None
    _load_builtin()
    hit = _REGISTRY.by_id.get(backend_id)
    if hit is not None:
        return hit
    low = backend_id.lower()
    for key, value in _REGISTRY.by_id.items():
        if low.startswith(key.lower()):
            return value
    return None


def _load_builtin() -> None:
    if "xnnpack" not in _REGISTRY.by_id:
        from .xnnpack import XnnpackAttributor

        _REGISTRY.by_id.setdefault("xnnpack", XnnpackAttributor())
