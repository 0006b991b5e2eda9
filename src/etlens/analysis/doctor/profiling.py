"""Rule ``profiling-overhead``: what ETDump's own events add to the times it reports.

Every profiled operator costs two timestamps and a record; on a small model that is a real share of
the run ("profile once with ETDump and once without"). With a build, the program is run
:data:`RUNS` times with event tracing and :data:`RUNS` times without, in the same warm runtime
child, and the difference of the median run times is the overhead; divided by the events per run,
it is the cost of one event. The framework tax (the run's time outside every operator and
delegate) is corrected for it. Without a build, the events per run and the framework tax are
reported. Always ``info``: the overhead is in the measurement, not in the deployed program.
"""

from __future__ import annotations

import os
import tempfile
import time
from statistics import median
from typing import Any

from .finding import Finding

__all__ = ["RULE", "check", "RUNS", "measure"]

RULE = "profiling-overhead"

#: runs with and without event tracing
RUNS = 20


def _timed(session: Any, pte: str, etdump: str | None) -> float:
    """Median ms between consecutive runs of ``pte`` in the session's child."""
    stamps: list[float] = []
    session.run(pte, runs=RUNS, etdump=etdump, debug=None, on_run=lambda _i: stamps.append(time.perf_counter()))
    deltas = [1000.0 * (b - a) for a, b in zip(stamps, stamps[1:])]
    return median(deltas) if deltas else float("nan")


def measure(session: Any, pte: str) -> tuple[float, float]:
    """``(ms per run with ETDump, ms per run without)`` of ``pte``, measured interleaved."""
    with tempfile.TemporaryDirectory(prefix="etlens-doctor-") as tmp:
        dump = os.path.join(tmp, "probe.etdp")
        without = _timed(session, pte, None)
        with_ = _timed(session, pte, dump)
        without = min(without, _timed(session, pte, None))
        with_ = min(with_, _timed(session, pte, dump))
    return with_, without


def check(ctx: Any) -> list[Finding]:
    t, att = ctx.timing, ctx.attribution
    if t is None or ctx.inspector is None:
        return []
    events = 0
    if t.blocks:
        b = ctx.inspector.block_columns[sorted(t.blocks)[0]]
        events = sum(1 for i in range(len(b.names)) if b.has_perf[i])
    framework = att.summary()["framework_ms"] if att is not None else None
    ev: dict[str, Any] = {"events_per_run": events, "framework_ms": framework, "latency_ms": ctx.latency_ms}
    overhead = None
    pte = ctx.paths.get("pte")
    if ctx.session is not None and pte and getattr(ctx.session.config, "runs", True):
        try:
            with_, without = measure(ctx.session, pte)
            overhead = max(with_ - without, 0.0)
            ev.update({"run_ms_with_etdump": with_, "run_ms_without_etdump": without,
                       "overhead_ms": overhead, "overhead_per_event_us": 1000.0 * overhead / events if events else None,
                       "runs": RUNS})
            if framework is not None and events:
                ev["framework_ms_corrected"] = max(framework - overhead, 0.0)
        except Exception as exc:  # noqa: BLE001 - the measurement is optional
            ctx.notes[RULE] = f"{type(exc).__name__}: {str(exc)[:200]}"
    win = overhead if overhead is not None else 0.0
    return [Finding(
        rule=RULE, severity="info",
        title=(f"event tracing adds {win:.3g} ms per run ({events} events)" if overhead is not None
               else f"{events} profiled events per run"),
        evidence=ev, estimated_win={"ms": win}, score=0.0,
        fix="compare times from one build: production runs without ETDump are faster by the overhead; profile "
            "with fewer events (no intermediate outputs, delegate-level events only) when it matters",
        action={"kind": "measurement"}, verify_command=ctx.command("doctor", "--format json"))]
