"""The plug-in interface: how a backend says which of its nodes each delegate-internal event ran.

A delegate logs its own profiling events inside a ``DELEGATE_CALL`` (XNNPACK logs one per runtime
operator: ``Convolution (NHWC, F32) IGEMM #1``). Those names mean nothing to the ETRecord; only
the backend knows which nodes of its payload ran under each. A :class:`BackendAttributor` turns
the ordered event names of one delegate call plus the delegate's payload into one
:class:`EventMatch` per event: the debug handles it ran (which the ETRecord maps to ATen nodes,
module paths and source lines), the backend ops, and how sure the match is.

A backend gives its attributor as the ``events`` hook of its :class:`etlens.backends.Backend`
(the one registry every floor uses; ``docs/backends.md``)::

    from etlens.backends import Backend, register

    class MyNpu:
        def match(self, event_names, delegate):       # delegate: readers' Delegate (delegate.decoded)
            return [EventMatch(name, handles=(...,), backend_ops=("npu.conv",)) for name in event_names]

    register(Backend("mynpu", ids=("MyNpuBackend",), hooks={"events": MyNpu()}))

Lookup is by exact id first, then case-insensitive prefix (``xnnpack`` matches ``XnnpackBackend``).
A backend without an ``events`` hook keeps its events by name, its time as one block.
"""

from __future__ import annotations

from ...backends import all_backends, for_delegate, hook
from .types import BackendAttributor, EventMatch

__all__ = ["EventMatch", "BackendAttributor", "attributor_for", "registered_backends"]


def registered_backends() -> list[str]:
    """The names of the registered backends with an attributor (``events`` hook)."""
    return sorted(b.name for b in all_backends() if "events" in b.hooks)


def attributor_for(backend_id: str | None) -> BackendAttributor | None:
    """The attributor of the backend ``backend_id`` belongs to (exact id, then case-insensitive prefix), or None."""
    att = hook(for_delegate(backend_id), "events")
    return att() if isinstance(att, type) else att
