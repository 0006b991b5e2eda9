"""What a backend attributor returns (:class:`EventMatch`) and what it is (:class:`BackendAttributor`).

Kept apart from :mod:`.base` so a backend's attributor (``etlens/backends/<name>/events.py``) imports the
types without importing the lookup that loads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

__all__ = ["EventMatch", "BackendAttributor"]


@dataclass
class EventMatch:
    """What one delegate-internal event ran.

    ``handles``: debug handles of the backend nodes it ran (empty = unattributed);
    ``backend_ops``: those nodes as the backend names them (``xnnpack.Conv2d#3``);
    ``fused``: backend nodes folded into this event (e.g. a Clamp fused into its convolution);
    ``quality``: ``exact`` (kind and datatype agree), ``alias`` (kind agrees through a known
    rewrite, e.g. a 1x1 Conv2d run as Fully Connected), ``inserted`` (a node the backend added,
    charged to the node it serves), ``ambiguous`` (another node could have run it equally well),
    ``unattributed``; ``note`` says why in words.

    Backends that name their events after graph nodes (QNN: ``aten_relu_default:OpId_26 (cycles)``)
    give ``nodes`` (node names as the ETRecord spells them) instead of handles; the core resolves them.
    ``unit`` says what the event's value counts: ``""`` time in the ETDump's unit (the default),
    ``"cycles"`` accelerator cycles (kept apart from time: ``NodeTime.cycles``), ``"count"`` a counter or
    ``"us"`` a microsecond timer the delegate reports as a duration. ``total`` marks a whole-delegate
    figure (a counter, the delegate's own execute time), which belongs to no node row. ``clock`` marks
    the delegate's own clock: ``"cycles"`` its cycle total, ``"time"`` the time of the same work, so
    the core can estimate a per-op time from per-op cycles (labelled estimated).
    """

    event: str
    handles: tuple[int, ...] = ()
    backend_ops: tuple[str, ...] = ()
    fused: tuple[str, ...] = ()
    quality: str = "unattributed"
    note: str = ""
    nodes: tuple[str, ...] = ()
    unit: str = ""
    total: bool = False
    clock: str = ""

    @property
    def attributed(self) -> bool:
        return bool(self.handles)


class BackendAttributor(Protocol):
    """Match the internal events of one delegate call to the delegate's nodes."""

    def match(self, event_names: Sequence[str], delegate: Any) -> list[EventMatch]:
        """One :class:`EventMatch` per name, same order. ``delegate`` is the ``.pte``'s delegate
        (``etlens.readers`` ``Delegate``: ``id``, payload facts such as ``xnnpack``), or None when
        no program was given. An attributor whose ``match`` takes a ``graph_nodes`` keyword (set
        ``takes_graph_nodes = True``) also gets the names of the ETRecord's graph nodes."""
        ...
