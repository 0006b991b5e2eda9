"""The shared in-memory model that every reader builds and every view reads.

``Graph``/``Node`` describe programs (see :mod:`etlens.model.graph`); ETDump events live in
columns (see :mod:`etlens.model.events`, added by the inspector).
"""

from .graph import (
    CATEGORIES,
    KINDS,
    DelegateInfo,
    Graph,
    LineageStep,
    Node,
    TensorMeta,
    categorize,
)

__all__ = [
    "CATEGORIES",
    "KINDS",
    "DelegateInfo",
    "Graph",
    "LineageStep",
    "Node",
    "TensorMeta",
    "categorize",
]
