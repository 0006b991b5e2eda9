"""Two builds of one model, aligned op by op, with the causes of the time and size change ranked.

``etlens diff DIR_A DIR_B`` in library form. Each build is a directory of one lowering's artifacts
(``.pte``, ``.etrecord``, one or more ``.etdp``, optional debug buffers and pass trace). The parts:

* :mod:`.load` — read a build once with the existing readers (program, lowered graph, memory plan,
  per-node times from the inspector's attribution);
* :mod:`.facts` — per *source op* (the ATen nodes that share a debug handle): module path, main op,
  shapes, placement, kernels, bytes, time per run;
* :mod:`.align` — pair the source ops of A and B by what survives a rebuild (module path, op, shapes,
  source line, position), robust to renames, partitions, fusions and decompositions; unpaired ops are
  listed, never guessed;
* :mod:`.causes` — classify each pair (placement, kernel, decomposition, quantization, copies, pass;
  memory_plan and runtime for the whole program) and rank the causes by their share of the change;
* :mod:`.headline` — ratios, the verdict and one sentence.

Example::

    from etlens.analysis.build_diff import diff_builds
    d = diff_builds("builds/a", "builds/b")
    d.summary["time_ratio"], d.summary["verdict"]
    d.causes[0].module_path, d.causes[0].kind, d.causes[0].share
    d.headline        # 'B is 3.1x slower (...); 92% of it is layers.1 (placement): ...'
    d.to_json()       # the `etlens diff --format json` document
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from .align import Aligned, align
from .causes import KINDS, Cause, find_causes, machine_shift, row_kind
from .facts import SourceOp, source_ops
from .headline import FLOOR_SAME_PROGRAM, FLOOR_STRUCTURAL, headline, summary, time_test
from .load import Build, BuildFiles, find_artifacts, load_build

__all__ = ["BuildDiff", "diff_builds", "diff_loaded", "Build", "BuildFiles", "find_artifacts", "load_build",
           "SourceOp", "source_ops", "Aligned", "align", "Cause", "KINDS", "find_causes", "row_kind"]


@dataclass
class BuildDiff:
    """The result of :func:`diff_builds`: ``summary``, ``causes`` (ranked), ``rows`` (aligned), ``headline``."""

    a: Build
    b: Build
    summary: dict[str, Any]
    causes: list[Cause]
    rows: list[Aligned]
    headline: str
    program: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    #: row index -> numeric gap A vs B (:mod:`.numerics`; only with debug buffers on both sides)
    gaps: dict[int, dict[str, float]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def unaligned(self) -> list[Aligned]:
        return [r for r in self.rows if r.a is None or r.b is None]

    def row_json(self, r: Aligned, gap: dict[str, float] | None = None) -> dict[str, Any]:
        """One ``ops[]`` row of the JSON (``gap``: its numeric gap, when both builds logged it)."""
        ta = r.a.median_ms if r.a is not None else 0.0
        tb = r.b.median_ms if r.b is not None else 0.0
        delta = (tb if tb == tb else 0.0) - (ta if ta == ta else 0.0)
        return {"module_path": r.module_path, "op": r.op, "how": r.how, "kind": row_kind(r) or "same",
                "a": r.a.side_json() if r.a is not None else None,
                "b": r.b.side_json() if r.b is not None else None, "time_delta_ms": delta, "gap": gap}

    def to_json(self) -> dict[str, Any]:
        ops = [self.row_json(r, self.gaps.get(i)) for i, r in enumerate(self.rows)]
        return {"a": self.a.files.__dict__, "b": self.b.files.__dict__, "summary": self.summary,
                "headline": self.headline, "causes": [c.to_json() for c in self.causes],
                "ops": ops,
                "unaligned": [{"side": "a" if r.b is None else "b", "module_path": r.module_path, "op": r.op,
                               "ops": list((r.a or r.b).ops)} for r in self.unaligned],  # type: ignore[union-attr]
                "alignment": _alignment_counts(self.rows), "program": self.program,
                "notes": self.notes, "seconds": round(self.seconds, 3)}


def _alignment_counts(rows: list[Aligned]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        out[r.how] = out.get(r.how, 0) + 1
    return out


def diff_loaded(a: Build, b: Build, *, noise: float | None = None, program_diff: bool = True,
                gaps: bool = True) -> BuildDiff:
    """:func:`diff_builds` on builds already loaded (:func:`load_build`); ``gaps``: numeric gaps where both
    builds logged values (their debug buffers were read)."""
    t0 = time.perf_counter()
    ops_a, ops_b = source_ops(a), source_ops(b)
    rows = align(ops_a, ops_b)
    structural = any(row_kind(r) is not None for r in rows) or a.arena_bytes != b.arena_bytes or a.size != b.size
    floor = noise if noise is not None else (FLOOR_STRUCTURAL if structural else FLOOR_SAME_PROGRAM)
    # programs that differ: what every unchanged op did alike is the machine, not the build (one program
    # run twice: that is all there is, and it is judged as measured, against the wider floor)
    shift = machine_shift(rows) if structural else 0.0
    scale = math.exp(shift)
    spread_k = 0.0 if noise is not None else (1.0 if structural else 2.0)
    test = time_test([x * scale for x in a.steady_execute_ms], b.steady_execute_ms, floor, spread_k=spread_k)
    causes = find_causes(rows, ops_a, ops_b, a=a, b=b, time_moved=test["moved"], time_floor_ratio=test["floor"],
                         shift=shift)
    s = summary(a, b, test, causes)
    s["machine_shift"] = scale
    program = _program_part(a, b) if program_diff else None
    notes = [*a.notes, *b.notes]
    if test.get("note"):
        notes.append(test["note"])
    d = BuildDiff(a=a, b=b, summary=s, causes=causes, rows=rows, headline=headline(s, causes), program=program,
                  notes=notes)
    if gaps:
        from .numerics import numeric_gaps

        d.gaps = numeric_gaps(d)
        last = max(d.gaps, default=None)
        s["output_gap"] = d.gaps[last] if last is not None else None
    d.seconds = time.perf_counter() - t0
    return d


def _program_part(a: Build, b: Build) -> dict[str, Any]:
    """The ``.pte``-level diff (``diff_pte``'s per-plan fields, :func:`etlens.analysis.program_diff.diff_plan`)
    and the arena deltas, from the programs and memory plans already read (``etlens diff A.pte B.pte`` adds the
    byte breakdown by kind)."""
    from ...readers.base import read_limited
    from ..program_diff import diff_plan

    da, db = read_limited(a.files.pte), read_limited(b.files.pte)
    pa, pb = a.pte.program, b.pte.program
    n = min(len(pa.execution_plan), len(pb.execution_plan))
    sizes = (pa.constant_sizes(), pb.constant_sizes())
    plans = [diff_plan(i, pa.execution_plan[i], pb.execution_plan[i], da, db, pa, pb, sizes) for i in range(n)]
    changed = [p for p in plans if any(v not in (None, [], False) for k, v in p.items()
                                       if k not in ("plan_index", "name"))]
    memory = []
    for ma, mb in zip(a.memory.methods, b.memory.methods, strict=False):
        ids = sorted({x.id for x in ma.arenas} | {x.id for x in mb.arenas})
        xa, xb = {x.id: x for x in ma.arenas}, {x.id: x for x in mb.arenas}
        memory.append({"method": ma.name, "arenas": [
            {"id": i, "size_a": xa[i].size if i in xa else 0, "size_b": xb[i].size if i in xb else 0,
             "peak_live_a": xa[i].peak_live if i in xa else 0, "peak_live_b": xb[i].peak_live if i in xb else 0}
            for i in ids]})
    return {"path_a": a.files.pte, "path_b": b.files.pte, "size_a": len(da), "size_b": len(db),
            "bitwise_equal": bytes(da) == bytes(db), "plans": changed,
            "extra_plans_in_a": [p.name for p in pa.execution_plan[n:]],
            "extra_plans_in_b": [p.name for p in pb.execution_plan[n:]], "memory": memory}


def diff_builds(path_a: Any, path_b: Any, *, noise: float | None = None, program_diff: bool = True,
                with_debug: bool = True) -> BuildDiff:
    """Diff two builds (directories, ``.pte`` paths or :class:`BuildFiles`); see the package docstring.

    ``noise``: the minimum relative change of ``Method::execute`` that counts (default: 5 % when the
    programs differ, 25 % when they are the same program, raised to the runs' own spread;
    :mod:`.headline`); ``program_diff``: also the ``.pte``-level
    structural diff (:func:`etlens.analysis.program_diff.diff_programs`) under ``program``;
    ``with_debug``: read the debug buffers (numeric gaps per op, ``summary.output_gap``).
    """
    t0 = time.perf_counter()
    a = load_build(path_a, with_debug=with_debug)
    b = load_build(path_b, with_debug=with_debug)
    d = diff_loaded(a, b, noise=noise, program_diff=program_diff, gaps=with_debug)
    d.seconds = time.perf_counter() - t0
    return d
