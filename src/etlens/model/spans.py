"""Where a command's time goes: stage timing on ``ETLENS_TIMING=1`` (wall and CPU, this process and its child).

``ETLENS_TIMING=1 etlens report --model m.py`` prints one line per stage to the console (the real
stderr) as each stage ends::

    etlens timing: parent  export                 start   3.10 s  wall  1.52 s  cpu  1.49 s
    etlens timing: child   lower                  start   4.70 s  wall  6.80 s  cpu  6.71 s

``start`` is seconds since this process began (the child's stages are placed on the same clock,
so overlap shows), ``cpu`` the process's own user+system seconds spent in the stage. At exit a
last line gives the totals (this process, and its finished children, as the OS counts them).
Stages nest (``collect/numerics`` inside ``analyze``). Off (the default) a :func:`span` costs one
dictionary lookup.

The worker child (:mod:`etlens.builder.child`) times its steps with the same :func:`span` and
hands each to the parent as a protocol line (``time LABEL START WALL CPU``) read by
:meth:`etlens.builder.worker.Worker.submit`, which calls :func:`record`.

Example::

    from etlens.model.spans import span

    with span("analyze"):
        ...
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import time
from typing import Any, Callable, Iterator

__all__ = ["enabled", "span", "record", "set_sink", "process_start"]

_ENV = "ETLENS_TIMING"
#: where a child sends its stage lines instead of printing them (``set_sink``)
_SINK: Callable[[str, float, float, float], None] | None = None
_REGISTERED = False


def enabled() -> bool:
    """True when ``ETLENS_TIMING`` is set to something other than ``""`` / ``0``."""
    return os.environ.get(_ENV, "") not in ("", "0")


def process_start() -> float:
    """This process's start as a ``time.time()`` value (Linux: from ``/proc``; else the first call)."""
    global _START
    if _START is None:
        _START = time.time()
        try:
            with open("/proc/self/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks = int(fields[19])  # starttime, clock ticks after boot
            with open("/proc/uptime", encoding="ascii") as f:
                uptime = float(f.read().split()[0])
            _START = time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            pass
    return _START


_START: float | None = None


def set_sink(sink: Callable[[str, float, float, float], None] | None) -> None:
    """Send finished stages to ``sink(label, start, wall, cpu)`` (``start``: a ``time.time()``) instead of printing."""
    global _SINK
    _SINK = sink


def _console() -> Any:
    from .._progress import console

    return console()


def record(label: str, start: float, wall: float, cpu: float, *, side: str = "parent") -> None:
    """Print one stage line (``start``: a ``time.time()`` value, placed on this process's clock)."""
    global _REGISTERED
    if not _REGISTERED:
        _REGISTERED = True
        atexit.register(_totals)
    print(f"etlens timing: {side:6} {label:28} start {start - process_start():7.2f} s  wall {wall:6.2f} s  "
          f"cpu {cpu:6.2f} s", file=_console(), flush=True)


def _totals() -> None:
    t = os.times()
    wall = time.time() - process_start()
    print(f"etlens timing: total  {'(process exit)':28} start {0.0:7.2f} s  wall {wall:6.2f} s  "
          f"cpu {t.user + t.system:6.2f} s  children cpu {t.children_user + t.children_system:6.2f} s",
          file=sys.stderr, flush=True)


@contextlib.contextmanager
def span(label: str) -> Iterator[None]:
    """Time the ``with`` body as stage ``label`` when timing is on (see the module docstring)."""
    if not enabled():
        yield
        return
    process_start()
    t0, c0 = time.time(), time.process_time()
    try:
        yield
    finally:
        wall, cpu = time.time() - t0, time.process_time() - c0
        if _SINK is not None:
            _SINK(label, t0, wall, cpu)
        else:
            record(label, t0, wall, cpu)
