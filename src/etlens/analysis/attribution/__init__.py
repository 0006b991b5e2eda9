"""``etlens.analysis.attribution``: where the time goes inside delegates, per ATen node and module.

* :mod:`.core` — :func:`attribute`: every timed event → ATen nodes (delegate-internal events
  through the backend plug-in), per-node times, the framework tax;
* :mod:`.base` — the plug-in interface (:class:`BackendAttributor`; a backend gives one as the
  ``events`` hook of its :class:`etlens.backends.Backend`, e.g. ``etlens/backends/xnnpack/events.py``).
"""

from .base import BackendAttributor, EventMatch, attributor_for, registered_backends
from .core import UNATTRIBUTED, Attribution, EventAttribution, NodeTime, attribute

__all__ = ["attribute", "Attribution", "NodeTime", "EventAttribution", "EventMatch", "BackendAttributor",
           "attributor_for", "registered_backends", "UNATTRIBUTED"]
