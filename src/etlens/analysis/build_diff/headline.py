"""The summary of a build diff: the ratios, the verdict and one sentence a user can act on.

``time_ratio`` is B/A of the per-run mean of ``Method::execute`` (every run of every ETDump of a
side), ``size_ratio`` of the ``.pte`` files, ``arena_ratio`` of the planned memory (the sum of the
method's arenas). Whether the time moved is decided on the runs, not the means, each process's
cold start left out (:attr:`~.load.Build.steady_execute_ms`), with the fleet compare's test
(:func:`etlens.fleet.stats.verdict`: Mann-Whitney on the runs; a change must be significant
*and* beyond the noise floor). The floor is :data:`FLOOR_STRUCTURAL` when the programs differ and
:data:`FLOOR_SAME_PROGRAM` when they do not (two runs of one program on a shared machine drift by
10-20 %: only a larger change is the device's or the runtime's), raised to the runs' own spread
(:func:`spread`, once when the programs differ, twice for one program: on a loaded machine the
same program's medians move by as much as its runs scatter).

The verdict is ``slower`` / ``faster`` (time moved), else ``bigger`` / ``smaller`` (file or arena
bytes, by more than :data:`BYTES_FLOOR`), else ``changed`` (the build differs, at no measurable cost),
else ``same``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["time_test", "spread", "summary", "headline", "FLOOR_STRUCTURAL", "FLOOR_SAME_PROGRAM", "BYTES_FLOOR"]

#: minimum relative time change when the programs differ
FLOOR_STRUCTURAL = 0.05
#: minimum relative time change of one program run twice (machine and load noise)
FLOOR_SAME_PROGRAM = 0.25
#: relative change of file or arena bytes below which they count as the same
BYTES_FLOOR = 0.001


def spread(x: list[float]) -> float:
    """The runs' own relative spread: interquartile range over median (0 for fewer than 3 runs)."""
    if len(x) < 3:
        return 0.0
    q1, med, q3 = np.percentile(np.asarray(x, dtype=np.float64), [25, 50, 75])
    return float((q3 - q1) / med) if med > 0 else 0.0


def time_test(exec_a: list[float], exec_b: list[float], floor: float, *, spread_k: float = 0.0) -> dict[str, Any]:
    """``{"moved", "direction", "p", "floor"}`` of the two sides' ``Method::execute`` runs.

    The floor (a minimum relative change) is ``floor``, raised to ``spread_k`` times the wider of the two
    sides' own relative spread (:func:`spread`): a machine that makes one program's runs scatter by
    50 % cannot vouch for a 30 % change between two measurements.
    """
    from ...fleet.stats import REGRESSION, verdict

    eff = max(floor, spread_k * max(spread(exec_a), spread(exec_b)))
    if len(exec_a) < 3 or len(exec_b) < 3:
        return {"moved": False, "direction": None, "p": None, "floor": 1 + eff,
                "note": "fewer than 3 runs a side: time is shown, never judged"}
    v = verdict(exec_a, exec_b, min_effect=eff)
    moved = v.verdict != "same"
    return {"moved": moved, "direction": ("slower" if v.verdict == REGRESSION else "faster") if moved else None,
            "p": v.p, "floor": 1 + eff}


def _ratio(a: float, b: float) -> float | None:
    if a > 0:
        return b / a
    return 1.0 if b == 0 else None


def summary(a: Any, b: Any, test: dict[str, Any], causes: list[Any]) -> dict[str, Any]:
    """The ``summary`` object (see the module docstring)."""
    ea, eb = a.execute_ms, b.execute_ms
    mean_a = float(np.mean(ea)) if ea else None
    mean_b = float(np.mean(eb)) if eb else None
    size_ratio = _ratio(a.size, b.size)
    arena_ratio = _ratio(a.arena_bytes, b.arena_bytes)
    if test["moved"]:
        verdict = test["direction"]
    elif size_ratio is not None and abs(size_ratio - 1) > BYTES_FLOOR and size_ratio > 1 or (
            arena_ratio is None or abs(arena_ratio - 1) > BYTES_FLOOR and arena_ratio > 1):
        verdict = "bigger"
    elif (size_ratio is not None and size_ratio < 1 - BYTES_FLOOR) or (
            arena_ratio is not None and arena_ratio < 1 - BYTES_FLOOR):
        verdict = "smaller"
    elif causes:
        verdict = "changed"
    else:
        verdict = "same"
    return {"time_ratio": _ratio(mean_a, mean_b) if mean_a is not None and mean_b is not None else None,
            "size_ratio": size_ratio, "arena_ratio": arena_ratio, "verdict": verdict,
            "time_ratio_median": _ratio(float(np.median(ea)), float(np.median(eb))) if ea and eb else None,
            "execute_mean_ms": {"a": mean_a, "b": mean_b},
            "execute_median_ms": {"a": float(np.median(ea)) if ea else None, "b": float(np.median(eb)) if eb else None},
            "runs": {"a": len(ea), "b": len(eb)},
            "processes": {"a": len(a.attributions), "b": len(b.attributions)},
            "size_bytes": {"a": a.size, "b": b.size}, "arena_bytes": {"a": a.arena_bytes, "b": b.arena_bytes},
            "noise_floor": test["floor"], "p": test["p"]}


def headline(s: dict[str, Any], causes: list[Any]) -> str:
    """One sentence: how B differs and the top cause (``same within noise`` when it is)."""
    tr = s["time_ratio"]
    med = s["execute_median_ms"]
    if s["verdict"] == "same":
        t = f"time x{tr:.2f} of A" if tr is not None else "no times"
        return (f"B is the same as A within noise ({t}, noise floor x{s['noise_floor']:.2f}; "
                "same program structure, file and arena bytes)")
    if s["verdict"] in ("slower", "faster") and med["a"] and med["b"]:
        r = med["b"] / (med["a"] * s.get("machine_shift", 1.0))
        x = r if r >= 1 else 1 / r
        shift = s.get("machine_shift", 1.0)
        machine = f", {x:.2f}x after the x{shift:.2f} every unchanged op moved" if abs(shift - 1) > 0.05 else ""
        lead = (f"B is {x:.2f}x {s['verdict']} (Method::execute median {med['a']:.3f} -> {med['b']:.3f} ms, "
                f"mean ratio {tr:.2f}{machine})")
    elif s["verdict"] in ("bigger", "smaller"):
        lead = (f"B is {s['verdict']}: file x{s['size_ratio']:.3f}, planned arena "
                f"{s['arena_bytes']['a']:,} -> {s['arena_bytes']['b']:,} B; time within noise")
    else:
        lead = "B's program differs from A's at no measurable cost (time, file and arena within noise)"
    if not causes:
        return lead
    top = causes[0]
    by_kind: dict[str, list[Any]] = {}
    for c in causes:
        by_kind.setdefault(c.kind, []).append(c)
    kind, group = max(by_kind.items(), key=lambda kv: sum(c.share for c in kv[1]))
    total = sum(c.share for c in group)
    if top.share < 0.25 and len(group) >= 5 and total > 2 * top.share:  # a change spread over many modules
        return (f"{lead}; {total:.0%} of it is {len(group)} modules changing the same way ({kind}), the largest "
                f"{top.module_path or 'the whole program'} at {top.share:.0%}: {top.explanation}")
    return f"{lead}; {top.share:.0%} of it is {top.module_path or 'the whole program'} ({top.kind}): {top.explanation}"
