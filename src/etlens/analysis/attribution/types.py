"""What a backend attributor returns (:class:`EventMatch`) and what it is (:class:`BackendAttributor`).

Kept apart from the registry (:mod:`.base`) so a backend's attributor (:mod:`.xnnpack`) imports the
types without importing the registry that loads it.
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
    """

    event: str
    handles: tuple[int, ...] = ()
    backend_ops: tuple[str, ...] = ()
    fused: tuple[str, ...] = ()
    quality: str = "unattributed"
    note: str = ""

    @property
    def attributed(self) -> bool:
        return bool(self.handles)


class BackendAttributor(Protocol):
    """Match the internal events of one delegate call to the delegate's nodes."""

    def match(self, event_names: Sequence[str], delegate: Any) -> list[EventMatch]:
        """One :class:`EventMatch` per name, same order. ``delegate`` is the ``.pte``'s delegate
        (``etlens.readers`` ``Delegate``: ``id``, payload facts such as ``xnnpack``), or None when
        no program was given."""
        ...
