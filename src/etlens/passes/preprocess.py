"""Snapshots of the passes a backend runs inside its own ``preprocess``.

Most backends' passes can be replayed one by one on the edge program before partitioning
(:func:`etlens.builder.traced.lowering_stages`). The Arm Ethos-U backend is different: it lowers
each delegated partition to TOSA with its own pass manager *inside* ``preprocess``, called from
``to_edge_transform_and_lower``, on a sub-program that exists only there. A backend that can be
watched doing so names a context manager in ``BackendConfig.preprocess_observer`` (Ethos-U:
:func:`etlens.builder.ethosu.observe_arm_passes`); :func:`observed_stage` runs the tracer's ``lower``
stage inside it with a :class:`PreprocessRecorder`, which turns what it reports into snapshots:

* ``partition <k>`` (stage ``partition``) — the sub-program the backend received, diffed against
  the whole edge program before lowering (the nodes outside the partition show as removed);
* one ``pass`` snapshot per pass, with its own wall time, ``modified`` flag, structural diff and
  debug-handle report, exactly like a replayed pass;
* then ``lower`` as before, diffed against the whole edge program again (``diff["base"]`` names it,
  and :meth:`etlens.model.trace.Trace.lineage` follows it), so the delegation diff is unchanged.

The tracer's bookkeeping time is taken out of the ``lower`` stage's wall time.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from ..model import Graph
from . import snapshot as snap
from .debug_handles import fx_sources

__all__ = ["PreprocessRecorder", "observed_stage"]


class PreprocessRecorder:
    """Receives a backend's preprocess passes and appends them to ``tracer``'s trace."""

    def __init__(self, tracer: Any) -> None:
        self.t = tracer
        self.base: Graph | None = tracer.last_graph  # the whole edge program before lowering
        self.partitions = 0
        self.passes = 0
        self.overhead = 0.0  # seconds of snapshot bookkeeping spent inside the stage

    def _timed(self, fn: Callable[[], Any]) -> None:
        t0 = time.perf_counter()
        try:
            fn()
        finally:
            self.overhead += time.perf_counter() - t0

    def partition(self, program: Any) -> None:
        """A partition's pipeline starts: snapshot the sub-program the backend received."""
        def record() -> None:
            name = f"partition {self.partitions}"
            self.partitions += 1
            graph = snap.program_graph(program, name, "partition", self.t.ids)
            self.t.add(name, "partition", graph, 0.0, base=self.base)
        self._timed(record)

    def passed(self, name: str, program: Any, seconds: float, modified: bool | None) -> None:
        """A pass finished: snapshot the partition's program after it."""
        def record() -> None:
            prev = self.t.last_graph
            sources = fx_sources(program.graph_module, [n.name for n in prev]) if prev is not None else None
            graph = snap.program_graph(program, name, "pass", self.t.ids)
            self.t.add(name, "pass", graph, seconds, sources=sources, modified=modified)
            self.passes += 1
        self._timed(record)

    def failed(self, name: str, program: Any, exc: BaseException) -> None:
        """A pass raised: record it (with the program as the pass left it) before the stage fails."""
        def record() -> None:
            try:
                graph: Graph | None = snap.program_graph(program, name, "pass", self.t.ids)
            except Exception:  # noqa: BLE001 - fall back to the previous snapshot's graph
                graph = None
            self.t.fail(name, "pass", exc, f"pass {name} failed inside the backend's preprocess (partition "
                                           f"{self.partitions - 1}; {self.passes} passes recorded before it): "
                                           f"{type(exc).__name__}: {exc}", graph)
        self._timed(record)


def observed_stage(t: Any, cfg: Any, name: str, stage: str, fn: Callable[[], Any],
                   to_graph: Callable[[Any, str], Graph]) -> Any:
    """``t.stage(name, stage, fn, to_graph)``, with the backend's preprocess passes recorded when
    ``cfg.preprocess_observer`` is set (and the tracer records)."""
    observe = getattr(cfg, "preprocess_observer", None)
    if observe is None or not t.record:
        return t.stage(name, stage, fn, to_graph)
    rec = PreprocessRecorder(t)

    def run() -> Any:
        try:
            with observe(rec):
                return fn()
        finally:
            if rec.partitions:
                t.diff_base = rec.base  # the stage's own snapshot diffs against the whole program

    count = len(t.trace.snapshots)
    result = t.stage(name, stage, run, to_graph)
    last = t.trace.snapshots[-1] if len(t.trace.snapshots) > count else None
    if last is not None and last.stage == stage and t.record_times:
        last.wall_time_s = max(0.0, last.wall_time_s - rec.overhead)
    t.diff_base = None
    return result
