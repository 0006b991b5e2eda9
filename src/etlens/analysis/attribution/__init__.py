"""``etlens.analysis.attribution``: where the time goes inside delegates, per ATen node and module.

* :mod:`.core` — :func:`attribute`: every timed event → ATen nodes (delegate-internal events
  through the backend plug-in), per-node times, the framework tax;
* :mod:`.base` — the plug-in interface (:class:`BackendAttributor`, :func:`register_backend`);
* :mod:`.xnnpack` — the built-in XNNPACK plug-in (runtime operators ↔ payload XNodes).
"""

from .base import BackendAttributor, EventMatch, attributor_for, register_backend, registered_backends
from .core import UNATTRIBUTED, Attribution, EventAttribution, NodeTime, attribute

__all__ = ["attribute", "Attribution", "NodeTime", "EventAttribution", "EventMatch", "BackendAttributor",
           "register_backend", "attributor_for", "registered_backends", "UNATTRIBUTED"]
