"""Ethos-U delegation (the ``delegation`` hook, analysis floor): Vela's estimates per ATen node.

The Vela sidecar (``MODEL.vela.json``, written next to the artifacts at compile time, :mod:`.vela`)
holds Vela's summary and per-layer table, the TOSA operator -> fx node records and the partitioner's
CPU-fallback reasons; :func:`ethos_u_delegation` maps the per-layer estimates to ATen nodes and
modules (:mod:`.mapping`). No ExecuTorch needed.

The core calls the hook names: :func:`estimates` (``etlens delegation``: None when the artifact has no
sidecar) and :func:`node_overlays` (``etlens model-explorer``: per-node values to colour the graph by).

Example::

    from etlens.backends.ethosu.delegation import ethos_u_delegation
    d = ethos_u_delegation("out/model.etrecord")
    d.totals()["npu_cycles"], [(n.name, n.npu_cycles) for n in d.nodes if n.backend]
"""

from __future__ import annotations

import os

from .mapping import EthosUDelegation, map_delegation
from .vela import find_sidecar, read_sidecar

__all__ = ["ethos_u_delegation", "has_ethos_u", "estimates", "node_overlays"]


def has_ethos_u(artifact: str) -> bool:
    """True when a Vela sidecar sits next to ``artifact`` (an Ethos-U build by etlens)."""
    return find_sidecar(artifact) is not None


def ethos_u_delegation(artifact: str, method: str | None = None, sidecar: str | None = None) -> EthosUDelegation:
    """Per-node Vela estimates for an ETRecord (``sidecar``: default ``<stem>.vela.json`` beside it)."""
    from etlens.analysis.delegation import delegation_graph

    path = sidecar or find_sidecar(artifact, required=True)
    assert path is not None
    return map_delegation(delegation_graph(os.fspath(artifact), method=method), read_sidecar(path))


def estimates(artifact: str, method: str | None = None) -> EthosUDelegation | None:
    """The hook ``etlens delegation`` calls for an ETRecord: its estimates, None without a sidecar."""
    return ethos_u_delegation(artifact, method=method) if has_ethos_u(artifact) else None


def node_overlays(artifact: str, method: str | None = None) -> dict[str, dict[str, float]]:
    """``{overlay name: {node: value}}`` for Model Explorer: Vela's estimated NPU cycles per node."""
    if not has_ethos_u(artifact):
        return {}
    return {"npu_cycles": {n.name: float(n.npu_cycles) for n in ethos_u_delegation(artifact, method=method).nodes
                           if n.npu_cycles}}
