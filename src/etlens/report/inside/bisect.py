"""Bisect the exposed values for the first one crossing the threshold, on near-production builds.

The instrumented build exposes every value at once, which splits fusions across each exposed
value. The bisect asks the same question of programs that differ from the production one by a
single extra output: probe ``k`` lowers the production graph with only value ``k`` exposed, runs
it, and checks whether that value crosses the threshold against its reference. Assuming drift,
once it appears, persists downstream (the usual shape of a bad layer), the earliest crossing value
is found by binary search in ``ceil(log2 N) + 1`` lower + run cycles, each keeping every fusion the
production program has except at the probe.

The answer says how many cycles it took and whether it agrees with the instrumented rows' first
divergence.
"""

from __future__ import annotations

from typing import Any

from .graph import Exposure, instrument

__all__ = ["bisect_first_crossing"]


def bisect_first_crossing(cycles: Any, src: Any, exposures: list[Exposure], rows: list[dict],
                          float_values: dict, comparator: Any, threshold: float, quantized: bool) -> dict[str, Any]:
    """Binary search over ``exposures`` (graph order) for the earliest one crossing ``threshold``.

    ``cycles`` lowers + runs a graph module (counted); returns the bisect's answer as a dict:
    ``first_crossing`` (node), ``module_path``, ``cycles``, ``probes`` and ``agrees`` (same node as the
    instrumented rows' first divergence).
    """
    import copy

    import torch

    start = cycles.count
    order = sorted((e for e in exposures if e.float_node or quantized), key=lambda e: e.meta.get("order", 0))
    probes: list[dict] = []
    cache: dict[int, bool] = {}

    def crosses(k: int) -> bool:
        if k in cache:
            return cache[k]
        e = copy.copy(order[k])
        gm, _n = instrument(src, [e])
        try:
            outs, _edge = cycles(gm, f"bisect probe {len(probes) + 1}: {e.node}")
        except Exception as exc:  # noqa: BLE001 - a probe that cannot be built counts as not crossing
            probes.append({"node": e.node, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
            cache[k] = False
            return False
        value = outs[e.output_index]
        if e.float_node and e.float_node in float_values:
            ref = float_values[e.float_node]
        else:
            with torch.no_grad():
                ref = gm(*cycles.inputs)[e.output_index]
        gap = float(comparator.element_compare(ref, value))
        hit = bool(comparator.crosses(gap, threshold))
        probes.append({"node": e.node, "module_path": e.meta.get("module_path"), "gap": gap, "crosses": hit})
        cache[k] = hit
        return hit

    found = None
    if order:
        lo, hi = 0, len(order) - 1
        if crosses(hi):
            while lo < hi:
                mid = (lo + hi) // 2
                if crosses(mid):
                    hi = mid
                else:
                    lo = mid + 1
            found = order[lo]
    first_row = next((r for r in rows if r.get("crosses_threshold")), None)
    return {
        "first_crossing": found.node if found else None,
        "module_path": found.meta.get("module_path") if found else None,
        "aot_ops": list(found.ops) if found else [],
        "cycles": cycles.count - start,
        "candidates": len(order),
        "probes": probes,
        "agrees": (first_row["node"] if first_row else None) == (found.node if found else None),
    }
