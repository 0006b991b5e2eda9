"""Per-node views of an inspector's timings, delegate-internal time included (etlens extras).

Built on :func:`etlens.analysis.attribution.attribute`:

* :func:`node_frame` — one row per ATen node (or group of nodes sharing debug handles) with
  columns ``node, debug_handles, op, module_path, source_line, inside_delegate, backend,
  backend_ops, match, p10 (ms), p50 (ms), p90 (ms), avg (ms)``; what no node explains is an
  ``<unattributed>`` row;
* :func:`module_total` — ``find_total_for_module`` that also counts time inside delegates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["NODE_COLUMNS", "node_frame", "module_total"]

NODE_COLUMNS = ["node", "debug_handles", "op", "module_path", "source_line", "inside_delegate", "backend",
                "backend_ops", "match", "p10", "p50", "p90", "avg"]


def node_frame(attribution: Any, include_units: bool = True):
    """The per-node DataFrame of an :class:`~etlens.analysis.attribution.Attribution`."""
    import pandas as pd

    unit = " (ms)" if include_units else ""
    data: dict[str, list] = {c if c not in ("p10", "p50", "p90", "avg") else c + unit: [] for c in NODE_COLUMNS}
    cycles = any(r.cycles for r in attribution.rows)
    if cycles:  # an accelerator that counts cycles (QNN): its own columns, never mixed into the ms ones
        data["cycles"] = []
        data["estimated" + unit] = []
    for r in attribution.rows:
        s = r.stats()
        if cycles:
            c = r.cycle_stats()
            data["cycles"].append(c["cycles_avg"])
            data["estimated" + unit].append(c["estimated_avg_ms"])
        vals = {"node": r.node, "debug_handles": list(r.debug_handles), "op": r.op, "module_path": r.module_path,
                "source_line": r.source_line, "inside_delegate": r.inside_delegate, "backend": r.backend or None,
                "backend_ops": list(r.backend_ops) or list(r.events) if r.inside_delegate else list(r.events),
                "match": r.match or None, "p10": s["p10"], "p50": s["p50"], "p90": s["p90"], "avg": s["avg"]}
        for c in NODE_COLUMNS:
            data[c if c not in ("p10", "p50", "p90", "avg") else c + unit].append(vals[c])
    return pd.DataFrame(data)


def _in_module(module_name: str, path: str) -> bool:
    if not module_name:
        return True
    if module_name in path:
        return True
    # ExecuTorch matches against nn_module_stack keys (``L__self___blocks_0``): accept that spelling too
    return module_name in "L__self___" + path.replace(".", "_")


def module_total(attribution: Any, module_name: str) -> float:
    """Sum of average times (ms) of the nodes inside ``module_name`` (a substring of the module
    path or of ExecuTorch's module-stack key), kernel and delegate-internal time alike."""
    total = 0.0
    for r in attribution.rows:
        if not r.in_module or not _in_module(module_name, r.module_path):
            continue
        avg = r.stats()["avg"]
        if np.isfinite(avg):
            total += avg
    return total
