"""Bisect the exposed values for the first one crossing the threshold, on near-production builds.

The instrumented build exposes every value at once, which splits fusions across each exposed
value. The bisect asks the question of programs closer to the production one: probe ``k`` lowers
the production graph with the values ``0..k`` exposed (everything after the cut keeps the
production program's partitions and fusions), runs it, and asks "does any of them cross the
threshold?". That predicate is monotone in ``k`` even when drift recovers downstream (a bad layer
followed by layers that wash it out), so a binary search finds the earliest crossing value in at
most ``ceil(log2 N) + 1`` lower + run cycles.

The answer says how many cycles it took and whether it agrees with the instrumented rows' first
divergence.
"""

from __future__ import annotations

from typing import Any

from ..inputs import args_for
from .graph import Exposure, instrument, value_of

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
        """Whether any value of ``order[0..k]`` crosses, in a build exposing exactly those."""
        if k in cache:
            return cache[k]
        prefix = [copy.copy(e) for e in order[:k + 1]]
        gm, _n = instrument(src, prefix)
        try:
            outs, _where = cycles(gm, f"bisect probe {len(probes) + 1}: values 0..{k}")
        except Exception as exc:  # noqa: BLE001 - a probe that cannot be built counts as not crossing
            probes.append({"upto": order[k].node, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
            cache[k] = False
            return False
        with torch.no_grad():
            sim = gm(*args_for(gm, cycles.inputs))
        first = None
        for i, e in enumerate(prefix):
            ref = float_values.get(e.float_node) if e.float_node else None
            ref = value_of(e, sim) if ref is None else ref
            if comparator.crosses(float(comparator.element_compare(ref, value_of(e, outs))), threshold):
                first = i
                break
        probes.append({"upto": order[k].node, "values": k + 1, "first_crossing": None if first is None
                       else order[first].node, "crosses": first is not None})
        cache[k] = first is not None
        return cache[k]

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
