"""Line up the source ops of two builds of one model, by what survives a rebuild.

Node names, debug handles and partitions change from build to build; what stays is where an op came
from. :func:`align` pairs the source ops of A and B (:class:`~.facts.SourceOp`) in passes, each on
the ops the passes before left over, and records which key paired them (``how``):

1. ``exact`` — module path, main ATen op and output shapes, the n-th such op of A with the n-th of B;
2. ``op`` — module path and main op (shapes changed, e.g. a layout or a dtype the op computes in);
3. ``line`` — the source line the ops were written at (``file:line``), in order;
4. ``module`` — module path alone, in graph order, when the ops differ (a decomposition: A's
   ``linear`` is B's ``permute_copy`` + ``addmm``; a fusion the other way round). Quantize/dequantize
   and layout-copy ops are not paired this way: they are what a build adds, not what the model has;
5. ``position`` — what is left of one module path on both sides, nearest graph position first.

Everything still unpaired is an explicit row with one side missing (``only_a`` / ``only_b``), never a guess.

Example::

    rows = align(ops_a, ops_b)
    [(r.a.op if r.a else None, r.b.op if r.b else None, r.how) for r in rows]
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable

from .facts import SourceOp

__all__ = ["Aligned", "align"]


@dataclass
class Aligned:
    """One row: the source op in A and in B (``None`` where one build has no counterpart) and how they paired."""

    a: SourceOp | None
    b: SourceOp | None
    how: str

    @property
    def module_path(self) -> str:
        return (self.b or self.a).module_path if (self.a or self.b) else ""  # type: ignore[union-attr]

    @property
    def op(self) -> str:
        if self.a is not None and self.b is not None and self.a.op != self.b.op:
            return f"{self.a.op} -> {self.b.op}"
        return (self.a or self.b).op  # type: ignore[union-attr]


def _pair_by(left_a: list[SourceOp], left_b: list[SourceOp], key: Callable[[SourceOp], Any], how: str,
             out: list[Aligned]) -> tuple[list[SourceOp], list[SourceOp]]:
    """Pair the n-th op of A with the n-th op of B among the ops that share ``key`` (None: not paired)."""
    ka: dict[Any, list[SourceOp]] = defaultdict(list)
    kb: dict[Any, list[SourceOp]] = defaultdict(list)
    for s in left_a:
        k = key(s)
        if k is not None:
            ka[k].append(s)
    for s in left_b:
        k = key(s)
        if k is not None:
            kb[k].append(s)
    used_a: set[int] = set()
    used_b: set[int] = set()
    for k, xs in ka.items():
        ys = kb.get(k)
        if not ys:
            continue
        for x, y in zip(xs, ys, strict=False):
            out.append(Aligned(x, y, how))
            used_a.add(id(x))
            used_b.add(id(y))
    return [s for s in left_a if id(s) not in used_a], [s for s in left_b if id(s) not in used_b]


def _glue(s: SourceOp) -> bool:
    return s.is_qdq or s.is_copy


def _by_position(left_a: list[SourceOp], left_b: list[SourceOp], out: list[Aligned]) -> tuple[list, list]:
    """Within one module path, pair what is left nearest graph position first (relative positions)."""
    na = max((s.position for s in left_a), default=0) or 1
    nb = max((s.position for s in left_b), default=0) or 1
    by_mod_b: dict[str, list[SourceOp]] = defaultdict(list)
    for s in left_b:
        if not _glue(s) and s.module_path:
            by_mod_b[s.module_path].append(s)
    rest_a = []
    taken: set[int] = set()
    for s in left_a:
        cands = [y for y in by_mod_b.get(s.module_path, []) if id(y) not in taken] if not _glue(s) else []
        if not cands:
            rest_a.append(s)
            continue
        y = min(cands, key=lambda c: abs(c.position / nb - s.position / na))
        taken.add(id(y))
        out.append(Aligned(s, y, "position"))
    return rest_a, [s for s in left_b if id(s) not in taken]


def _line(s: SourceOp) -> Any:
    return (s.source_line, s.op) if s.source_line else None


def align(ops_a: list[SourceOp], ops_b: list[SourceOp]) -> list[Aligned]:
    """Pair the source ops of two builds (see the module docstring); rows in B's program order, A-only rows
    where A had them."""
    out: list[Aligned] = []
    la, lb = list(ops_a), list(ops_b)
    la, lb = _pair_by(la, lb, lambda s: (s.module_path, s.op, s.shapes), "exact", out)
    la, lb = _pair_by(la, lb, lambda s: (s.module_path, s.op), "op", out)
    la, lb = _pair_by(la, lb, _line, "line", out)
    la, lb = _pair_by(la, lb, lambda s: None if _glue(s) else (s.module_path, tuple(sorted(map(str, s.shapes)))),
                      "module", out)
    la, lb = _pair_by(la, lb, lambda s: None if _glue(s) or not s.module_path else (s.module_path, len(s.ops) > 0),
                      "module", out)
    la, lb = _by_position(la, lb, out)
    out += [Aligned(s, None, "only_a") for s in la]
    out += [Aligned(None, s, "only_b") for s in lb]
    na = max((s.position for s in ops_a), default=0) or 1
    nb = max((s.position for s in ops_b), default=0) or 1
    out.sort(key=lambda r: (r.b.position / nb) if r.b is not None else (r.a.position / na))  # type: ignore[union-attr]
    return out
