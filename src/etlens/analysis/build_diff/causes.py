"""Why B differs from A: each aligned row classified, rows grouped into causes, causes ranked by share.

A row's *kind* says what the build did differently to that source op (first that applies):

``placement``     it runs on another backend, or moved between a delegate and the portable kernels;
``quantization``  it computes on quantized values on one side only, or its constants changed dtype;
``decomposition`` the same source op became other ATen ops (``linear`` vs ``permute_copy`` + ``addmm``);
``copies``        layout / dtype copies added or removed (``_to_dim_order_copy``, ``clone``) — what a
                  memory format or a delegate boundary adds;
``kernel``        same ops, same placement, other kernels or backend operations ran them;
``pass``          an op only one build has that is none of the above (a pass added or removed it).

Two causes belong to the whole program (``module_path`` ``""``): ``memory_plan`` — the arena changed
beyond what the live tensors need (the planner, not the ops: its share is the change of the planned
bytes the peak of live tensors does not explain) — and ``runtime`` — the same program ran at another
speed (the device or the runtime changed), only when nothing structural differs and the change is
beyond the noise floor.

Causes are ``(module path, kind)`` groups of rows. Each has its part of every measured change: time
(the ops' median time per run, B - A), file bytes (constants), arena bytes (planned tensors the ops
produce) and structure (how many source ops changed, a moved or requantized op counting three, a
decomposition, copy or plan change two, a kernel swap or a pass's op one). The *share* of a cause
weights its part of each change by how large that change is for the program (``|delta| / max(A, B)``; time only when
``Method::execute`` moved beyond the noise floor), structure always a little, so a change that costs
nothing measurable is still listed, and ranked last.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .align import Aligned
from .facts import COPY_OPS, PORTABLE, QDQ_OPS, SourceOp

__all__ = ["Cause", "KINDS", "row_kind", "find_causes", "machine_shift", "STRUCTURE_WEIGHT"]

KINDS = ("placement", "kernel", "decomposition", "quantization", "memory_plan", "copies", "pass", "runtime")
#: how much one changed source op of a kind counts in the structure part (a kernel swap next to a moved
#: op is usually its consequence), and the order of kinds when shares tie
_STRUCTURE = {"placement": 3.0, "quantization": 3.0, "decomposition": 2.0, "copies": 2.0, "memory_plan": 2.0,
              "pass": 1.0, "kernel": 1.0, "runtime": 1.0}
#: the weight of "how many source ops changed" beside measured changes (alone it decides the ranking)
STRUCTURE_WEIGHT = 0.05


@dataclass
class Cause:
    """One cause: rows of one module path and kind, and its parts of each change."""

    module_path: str
    kind: str
    rows: list[Aligned] = field(default_factory=list)
    time_ms: float = 0.0
    const_bytes: int = 0
    arena_bytes: int = 0
    share: float = 0.0
    explanation: str = ""
    parts: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"module_path": self.module_path, "kind": self.kind, "share": round(self.share, 4),
                "explanation": self.explanation, "time_delta_ms": self.time_ms, "bytes_delta": self.const_bytes,
                "arena_delta": self.arena_bytes, "ops": len(self.rows),
                "parts": {k: round(v, 4) for k, v in self.parts.items()}}


def _copies(s: SourceOp | None) -> int:
    return sum(1 for o in s.ops if o in COPY_OPS) if s is not None else 0


def _qdq(s: SourceOp) -> list[str]:
    return sorted(o for o in s.ops if o in QDQ_OPS)


def row_kind(r: Aligned) -> str | None:
    """The kind of change of one aligned row (``None``: the build did the same to it)."""
    a, b = r.a, r.b
    if a is None or b is None:
        s = a or b
        assert s is not None
        return "copies" if s.is_copy else "quantization" if s.is_qdq else "pass"
    if a.placement != b.placement:
        return "placement"
    if a.quantized != b.quantized or a.const_dtypes != b.const_dtypes or _qdq(a) != _qdq(b):
        return "quantization"   # on one side only, other constant dtypes, or another scheme (per-channel, dynamic)
    if a.compute_ops() != b.compute_ops():
        return "decomposition"
    if _copies(a) != _copies(b):
        return "copies"
    if a.time_ms.size and b.time_ms.size and sorted(a.kernels) != sorted(b.kernels):
        return "kernel"
    return None


def _module_of(s: SourceOp, by_key: dict[int, SourceOp]) -> str:
    """A glue op (q/dq, copy) written at the model's top level belongs to the module it serves."""
    if s.module_path or not (s.is_qdq or s.is_copy):
        return s.module_path
    for k in s.neighbours:
        n = by_key.get(k)
        if n is not None and n.module_path and not (n.is_qdq or n.is_copy):
            return n.module_path
    return s.module_path


def _delta(r: Aligned, attr: str, shift: float = 0.0) -> float:
    """B - A of one attribute of a row (a missing side counts 0); time: A scaled by the machine ``shift``."""
    va = getattr(r.a, attr) if r.a is not None else 0
    vb = getattr(r.b, attr) if r.b is not None else 0
    if attr == "median_ms":
        va = 0.0 if not np.isfinite(va) else va * float(np.exp(shift))
        vb = 0.0 if not np.isfinite(vb) else vb
    return float(vb - va)


def machine_shift(rows: list[Aligned], min_ms: float = 1e-3) -> float:
    """How much every unchanged op moved between the two measurements (log ratio, the median over the
    rows the builds did the same to; 0 with fewer than 3 such rows): the machine's state, not the build."""
    logs = [np.log(r.b.median_ms / r.a.median_ms) for r in rows
            if r.a is not None and r.b is not None and row_kind(r) is None
            and r.a.median_ms > min_ms and r.b.median_ms > min_ms]
    return float(np.median(logs)) if len(logs) >= 3 else 0.0


def _fmt_ms(x: float) -> str:
    return f"{x:+.3f} ms" if abs(x) >= 0.0005 else f"{x * 1000:+.1f} us"


def _explain(c: Cause, origins: tuple[dict[str, str], dict[str, str]] = ({}, {}),
             reasons: dict[str, str] | None = None) -> str:
    reasons = reasons or {}
    r = max(c.rows, key=lambda x: abs(_delta(x, "median_ms")), default=None)
    where = c.module_path or "the model's top level"
    ops = sorted({(x.a or x.b).op for x in c.rows})  # type: ignore[union-attr]
    cost = f"; time {_fmt_ms(c.time_ms)} per run" if c.time_ms else ""
    if c.kind == "placement" and r is not None and r.a is not None and r.b is not None:
        a, b = r.a, r.b
        how_b = f"{b.placement} kernels ({', '.join(b.kernels[:3]) or ', '.join(b.ops)})" if b.placement == PORTABLE \
            else b.placement
        how_a = f"{a.placement} kernels" if a.placement == PORTABLE else a.placement
        why = next((reasons[n] for n in b.nodes if n in reasons), reasons.get("*")) if b.placement == PORTABLE \
            else None
        return (f"{where} ({', '.join(ops)}) moved from {how_a} in A to {how_b} in B: the partitioner "
                f"{'left it out' if b.placement == PORTABLE else 'placed it differently'}"
                f"{f' ({why})' if why else ''}{cost}")
    if c.kind == "quantization":
        fa = sorted({d for x in c.rows if x.a for d in x.a.const_dtypes + x.a.dtypes})
        fb = sorted({d for x in c.rows if x.b for d in x.b.const_dtypes + x.b.dtypes})
        qa = any(x.a.quantized for x in c.rows if x.a)
        qb = any(x.b.quantized for x in c.rows if x.b)
        state = {(True, False): "quantized in A, float in B", (False, True): "float in A, quantized in B"}.get(
            (qa, qb), "quantized differently")
        return (f"{where} is {state} (dtypes A {'/'.join(fa) or '-'}, B {'/'.join(fb) or '-'}; constants "
                f"{c.const_bytes:+d} B){cost}")
    if c.kind == "decomposition" and r is not None:
        oa = ", ".join(r.a.ops) if r.a else "-"
        ob = ", ".join(r.b.ops) if r.b else "-"
        return f"{where}: the same source op is [{oa}] in A and [{ob}] in B{cost}"
    if c.kind == "copies":
        na = sum(_copies(x.a) for x in c.rows)
        nb = sum(_copies(x.b) for x in c.rows)
        edge = " at a delegate boundary" if any((x.b or x.a).boundary for x in c.rows) else ""  # type: ignore[union-attr]
        return f"{where}: {na} layout/dtype copies in A, {nb} in B{edge} ({', '.join(ops)}){cost}"
    if c.kind == "kernel" and r is not None and r.a is not None and r.b is not None:
        return (f"{where} ({', '.join(ops)}): same ops and placement, other kernels: "
                f"[{', '.join(r.a.kernels)}] in A, [{', '.join(r.b.kernels)}] in B{cost}")
    if c.kind == "pass":
        only_a = [o for x in c.rows if x.b is None and x.a for o in x.a.ops]
        only_b = [o for x in c.rows if x.a is None and x.b for o in x.b.ops]
        parts = ([f"only in A: {', '.join(only_a)}"] if only_a else []) + (
            [f"only in B: {', '.join(only_b)}"] if only_b else [])
        passes = sorted({o[n] for x in c.rows for o, side in zip(origins, (x.a, x.b), strict=True)
                         if side is not None for n in side.nodes if n in o})
        by = f"; added by {', '.join(passes)} (pass trace)" if passes else ""
        return f"{where}: ops a pass added or removed ({'; '.join(parts)}){by}{cost}"
    return f"{where}: {c.kind}{cost}"


def find_causes(rows: list[Aligned], ops_a: list[SourceOp], ops_b: list[SourceOp], *, a: Any, b: Any,
                time_moved: bool, time_floor_ratio: float, shift: float = 0.0) -> list[Cause]:
    """Causes of the difference, sorted by share (see the module docstring).

    ``a``/``b``: the loaded builds (arena and file sizes); ``time_moved``: ``Method::execute`` changed
    beyond the noise floor (time then counts in the shares, and with nothing structural a ``runtime``
    cause is named); ``time_floor_ratio``: that floor, for the explanation; ``shift``: the machine's
    state (:func:`machine_shift`), taken off every op's time change.
    """
    by_a = {s.key: s for s in ops_a}
    by_b = {s.key: s for s in ops_b}
    causes: dict[tuple[str, str], Cause] = {}
    kinds = [(r, row_kind(r)) for r in rows]
    placed: dict[tuple[str, int], tuple[str, str]] = {}  # (side, source op key) -> (module, kind) of changed rows
    for r, kind in kinds:
        if kind is None:
            continue
        s = r.b if r.b is not None else r.a
        assert s is not None
        path = _module_of(s, by_b if r.b is not None else by_a)
        for side, x in (("a", r.a), ("b", r.b)):
            if x is not None:
                placed[(side, x.key)] = (path, kind)
    for r, kind in kinds:
        if kind is None:
            continue
        s = r.b if r.b is not None else r.a
        assert s is not None
        side = "b" if r.b is not None else "a"
        path = placed[(side, s.key)][0]
        if not path:  # a change at the top level next to the same change in a module: that module's
            path = next((placed[(side, k)][0] for k in s.neighbours
                         if placed.get((side, k), ("", ""))[1] == kind and placed[(side, k)][0]), "")
        c = causes.setdefault((path, kind), Cause(path, kind))
        c.rows.append(r)
        c.time_ms += _delta(r, "median_ms", shift)
        c.const_bytes += int(_delta(r, "const_bytes"))
        c.arena_bytes += int(_delta(r, "arena_bytes"))
    out = list(causes.values())
    # the planner's part: planned bytes beyond what the live tensors need
    waste_a = a.arena_bytes - a.peak_live_bytes
    waste_b = b.arena_bytes - b.peak_live_bytes
    plan_delta = waste_b - waste_a
    if plan_delta != 0 or (not out and _offsets(a) != _offsets(b)):
        mp = Cause("", "memory_plan", arena_bytes=plan_delta)
        mp.explanation = (f"the memory plan changed: arena {a.arena_bytes:,} -> {b.arena_bytes:,} B while the "
                          f"peak of live tensors went {a.peak_live_bytes:,} -> {b.peak_live_bytes:,} B (unused "
                          f"planned bytes {waste_a:,} -> {waste_b:,} B: the planner, not the ops)")
        out.append(mp)
    if not out and time_moved:
        ea, eb = np.median(a.execute_ms), np.median(b.execute_ms)
        rt = Cause("", "runtime", time_ms=float(eb - ea))
        rt.explanation = (f"the same program ran at another speed: Method::execute median {ea:.3f} -> {eb:.3f} ms "
                          f"(beyond the noise floor x{time_floor_ratio:.2f}): the device, its load or the runtime "
                          "changed, not the build")
        out.append(rt)
    _shares(out, a, b, time_moved, shift)
    origins = (a.pass_origins(), b.pass_origins()) if any(c.kind == "pass" for c in out) else ({}, {})
    for c in out:
        if not c.explanation:
            c.explanation = _explain(c, origins, getattr(b, "reasons", None))
    out.sort(key=lambda c: (-round(c.share, 9), -_STRUCTURE.get(c.kind, 1.0), not c.module_path, c.module_path))
    return out


def _offsets(build: Any) -> list[tuple[int, int, int]]:
    m = build._method_memory()
    return sorted((t.arena, t.offset, t.size) for t in m.tensors) if m is not None else []


def _shares(causes: list[Cause], a: Any, b: Any, time_moved: bool, shift: float = 0.0) -> None:
    if not causes:
        return
    ea = float(np.median(a.execute_ms)) * float(np.exp(shift)) if a.execute_ms else 0.0
    eb = float(np.median(b.execute_ms)) if b.execute_ms else 0.0

    def rel(x: float, y: float) -> float:
        m = max(abs(x), abs(y))
        return abs(y - x) / m if m > 0 else 0.0

    weights = {"time": rel(ea, eb) if time_moved else 0.0, "bytes": rel(a.size, b.size),
               "arena": rel(a.arena_bytes, b.arena_bytes)}
    if weights["bytes"] < 1e-3:
        weights["bytes"] = 0.0
    parts = {"time": [abs(c.time_ms) for c in causes], "bytes": [abs(c.const_bytes) for c in causes],
             "arena": [abs(c.arena_bytes) for c in causes],
             "structure": [float(len(c.rows) or 1) * _STRUCTURE.get(c.kind, 1.0) for c in causes]}
    for k in ("time", "bytes", "arena"):
        if sum(parts[k]) <= 0:
            weights[k] = 0.0
    measured = sum(weights.values())
    weights["structure"] = STRUCTURE_WEIGHT * measured if measured > 0 else 1.0
    total_w = sum(weights.values())
    for i, c in enumerate(causes):
        share = 0.0
        for k, w in weights.items():
            tot = sum(parts[k])
            if w > 0 and tot > 0:
                p = parts[k][i] / tot
                c.parts[k] = p
                share += w * p
        c.share = share / total_w if total_w > 0 else 0.0
