"""The inside-the-delegates build of a session, raced on a second child against the production build.

:meth:`InsideRace.on` attaches a race to a :class:`~etlens.builder.session.BuildSession`: it starts
the moment the session's child starts lowering (this process only waits from then on;
:meth:`~etlens.builder.session.BuildSession.while_lowering`), :meth:`InsideRace.result` collects it
after the build, and closing the session cancels it.

The instrumented program depends only on the session's export (or quantized module), not on the
production lowering. So when the production lowering starts, the race starts a second worker
child and, in a thread, prepares what the analysis needs from the export
(:func:`~etlens.builder.inside.engine.prepare`). If that child has finished its ``import torch`` +
backend before the production build is done, it lowers and runs the instrumented build there,
overlapping the production build (on a big model most of the inside view's cost disappears from
the wall clock). If it has not, it is stopped and :meth:`InsideRace.result` runs the analysis in
the session's warm child, exactly as without the race: a report never waits longer for its inside
view than with one child (its cost is the second child's CPU, on a core the waiting parent leaves
free).

``ETLENS_INSIDE_CHILD=0`` (or one CPU, or a backend lowered in this process): no second child;
``=1``: always use the second child (tests).
"""

from __future__ import annotations

from typing import Any

__all__ = ["InsideRace", "inside_for_session"]


def inside_for_session(session: Any, *, metric: str, threshold: float | None, prepared: dict | None = None,
                       worker: Any = None) -> Any:
    """:func:`~etlens.builder.inside.engine.inside_delegates` on ``session``'s model, export and child;
    ``None`` when the backend delegates nothing (no partitioner: nothing is inside a delegate).

    The session already lowered and ran the production program: one more cycle, the instrumented one
    (``observe=False``). ``worker``: another child for it (the race's).
    """
    from ..toolchain import delegates
    from .engine import inside_delegates

    if not delegates(session.config):
        return None
    return inside_delegates(session.model, session.inputs, backend=session.backend, quantize=session.quantize,
                            metric=metric, threshold=threshold, progress=False, observe=False, session=session,
                            prepared=prepared, worker=worker)


class InsideRace:
    """The inside view of ``session`` (see the module docstring); :meth:`start` when lowering starts."""

    def __init__(self, session: Any, *, metric: str, threshold: float | None, verbose: bool = False) -> None:
        self._session, self._metric, self._threshold, self._verbose = session, metric, threshold, verbose
        self.prepared: dict = {}
        #: whether the second child ran the analysis (False: the session's child does, in result())
        self.raced = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._built: Any = None
        self._thread: Any = None
        self._worker: Any = None
        self._force = False

    @classmethod
    def on(cls, session: Any, *, metric: str = "MSE", threshold: float | None = None) -> InsideRace:
        """A race for ``session``: started when its lowering starts, cancelled when it closes."""
        race = cls(session, metric=metric, threshold=threshold, verbose=session.verbose)
        session.while_lowering(race.start)
        session.on_close(race.cancel)
        return race

    def start(self) -> None:
        """Prepare from the export in a thread and, when worth it, start the second child."""
        import os
        import threading

        from ..toolchain import delegates

        session = self._session
        self._built = threading.Event()
        mode = os.environ.get("ETLENS_INSIDE_CHILD", "auto")
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self._force = mode == "1"
        if mode != "0" and (cpus >= 2 or self._force) and not session.in_process and delegates(session.config):
            from ..worker import Worker

            self._worker = Worker(verbose=self._verbose, prewarm=session.prewarm_modules())
            self._worker.start()
        self._thread = threading.Thread(target=self._run, name="etlens-inside", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from .engine import prepare

        self.prepared.update(prepare(self._session))
        w = self._worker
        if w is None:
            return
        while not self._force and not w.ready():
            if self._built.wait(0.05) and not w.ready():  # the production build won: its warm child does it
                w.kill()
                self._worker = None
                return
        self.raced = True
        try:
            self._value = inside_for_session(self._session, metric=self._metric, threshold=self._threshold,
                                             prepared=self.prepared, worker=w)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by result()
            self._error = exc
        finally:
            w.close()

    def result(self) -> Any:
        """Call when the production build is done: the analysis (an ``InsideResult``, or ``None``)."""
        if self._thread is None:  # never started (the build did not reach its lowering): run it now
            self.start()
        self._built.set()
        self._thread.join()
        if self.raced:
            if self._error is not None:
                raise self._error
            value = self._value
        else:
            value = inside_for_session(self._session, metric=self._metric, threshold=self._threshold,
                                       prepared=self.prepared)
        if value is not None:
            value.method["child"] = "second child (raced the build)" if self.raced else "the session's child"
        return value

    def cancel(self) -> None:
        """The build failed: stop the second child and the thread."""
        if self._built is not None:
            self._built.set()
        if self._worker is not None:
            self._worker.kill()
        if self._thread is not None:
            self._thread.join()
