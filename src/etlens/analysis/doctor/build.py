"""The doctor on a model: build it once (:class:`~etlens.builder.session.BuildSession`), diagnose the
run, and with ``verify`` apply and measure the fixes a build can apply."""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any, Callable

from .context import DoctorContext
from .runner import DoctorResult, diagnose

__all__ = ["diagnose_session", "diagnose_artifacts"]


def diagnose_session(session: Any, *, model_args: str, runs: int = 5, verify: bool = False,
                     work_dir: str | None = None, skip: tuple[str, ...] = (),
                     on_stage: Callable[[str], Any] | None = None) -> DoctorResult:
    """Lower and run ``session``'s model ``runs`` times (ETDump + debug buffer), then :func:`diagnose`.

    ``model_args``: the command line naming the model (``--model m.py:build --backend xnnpack``), which the
    findings' verify commands repeat. ``work_dir``: where the build's files go (default: a temporary
    directory, removed after). Does not close the session.
    """
    say = on_stage or (lambda _s: None)
    with tempfile.TemporaryDirectory(prefix="etlens-doctor-") as tmp:
        work = work_dir or tmp
        t0 = time.perf_counter()
        say("build")
        arts = session.build(os.path.join(work, "build"), runs=runs)
        built = time.perf_counter() - t0
        ctx = DoctorContext.from_session(session, arts, model_args)
        say("diagnose")
        res = diagnose(ctx, skip=skip, on_rule=lambda r: say(f"rule {r}"))
        res.seconds["build"] = built
        if verify:
            from .verify import verify_findings

            say("verify")
            t1 = time.perf_counter()
            verify_findings(res.findings, session, arts, work, runs=runs, latency_ms=res.latency_ms)
            res.seconds["verify"] = time.perf_counter() - t1
        if not work_dir:
            res.source = {k: v for k, v in res.source.items() if k == "model_args"}
    return res


def diagnose_artifacts(etdump: str, *, etrecord: str | None = None, pte: str | None = None,
                       debug_buffer: str | None = None, skip: tuple[str, ...] = ()) -> DoctorResult:
    """:func:`diagnose` on a device run's files (no build: no partitioner replay, no ``--verify``)."""
    return diagnose(DoctorContext(etdump=etdump, etrecord=etrecord, pte=pte, debug_buffer=debug_buffer), skip=skip)
