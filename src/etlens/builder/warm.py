"""Warm worker children kept for the next :class:`~etlens.builder.worker.Worker` of this process.

A worker child pays ``import torch`` + ExecuTorch (about 10 s of CPU) before its first job. One
command builds one model and needs that once; a process that builds many models one after
another — a notebook trying quantization recipes, a sweep over seeds, a test suite — pays it per
:class:`~etlens.builder.session.BuildSession`. With warm children kept, a closing ``Worker`` hands
its idle child to this pool instead of stopping it, and the next ``Worker`` takes it: the second
build starts with torch and the backend already imported.

Off by default (an idle child holds its memory, several hundred MB). Turn it on with
:func:`keep_warm` or the environment variable ``ETLENS_WARM_CHILDREN=N`` (N idle children at most;
``0`` turns it off)::

    from etlens.builder.warm import keep_warm
    keep_warm(1)          # each later BuildSession reuses the child the previous one left

A child is handed on only when it is alive, its job finished, its log was captured (not
``verbose``), and the next worker would start it with the same interpreter, working directory and
environment; a
child that crashed is never kept. Jobs that measure the child itself (``memory-measure``) ask
for a fresh one (``Worker(warm=False)``). Kept children stop when this process exits (and on
their own when it dies: their stdin closes).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import IO, Any

__all__ = ["keep_warm", "warm_limit", "Idle", "key", "take", "give", "release_log", "stop_all"]

#: variables that change while a process runs without changing what a child computes
_VOLATILE = ("PYTEST_CURRENT_TEST",)

_lock = threading.Lock()
_idle: list[Idle] = []
_limit: int | None = None  # None: read ETLENS_WARM_CHILDREN
_dir: str | None = None


@dataclass
class Idle:
    """An idle child: its process, the log file its stderr goes to (open, and its path), and its key."""

    proc: subprocess.Popen
    log: IO[bytes]
    log_path: str
    key: tuple


def keep_warm(n: int = 1) -> None:
    """Keep up to ``n`` idle worker children for later workers of this process (``0``: stop keeping any)."""
    global _limit
    _limit = max(0, int(n))
    if _limit == 0:
        stop_all()


def warm_limit() -> int:
    """How many idle children may be kept: :func:`keep_warm`'s ``n``, else ``ETLENS_WARM_CHILDREN`` (default 0)."""
    if _limit is not None:
        return _limit
    raw = os.environ.get("ETLENS_WARM_CHILDREN", "").strip()
    try:
        return max(0, int(raw)) if raw else 0
    except ValueError:
        return 0


def key(env: dict[str, str]) -> tuple:
    """What must match for a child to serve another worker: the interpreter, the working directory and the
    environment."""
    return (sys.executable, os.getcwd(), tuple(sorted((k, v) for k, v in env.items() if k not in _VOLATILE)))


def take(want: tuple) -> Idle | None:
    """An idle child started with key ``want`` (removed from the pool), else ``None``."""
    with _lock:
        for i, entry in enumerate(_idle):
            if entry.key == want and entry.proc.poll() is None:
                return _idle.pop(i)
    return None


def give(proc: subprocess.Popen, log: IO[bytes], log_path: str, key: tuple) -> bool:
    """Keep ``proc`` (idle, alive) for a later worker; False when the pool is off (the caller stops it).

    A full pool stops its oldest child for it (the newest is the likeliest to match the next worker).
    The log file moves into the pool's own directory (the worker's scratch directory is removed).
    """
    global _dir
    if proc.poll() is not None:
        return False
    evicted: list[Idle] = []
    with _lock:
        limit = warm_limit()
        if limit == 0:
            return False
        while len(_idle) >= limit:
            evicted.append(_idle.pop(0))
        if _dir is None:
            _dir = tempfile.mkdtemp(prefix="etlens-warm-")
        if not log_path.startswith(_dir + os.sep):
            moved = os.path.join(_dir, f"child-{proc.pid}.log")
            os.replace(log_path, moved)
            log_path = moved
        _idle.append(Idle(proc, log, log_path, key))
    for entry in evicted:
        _stop(entry)
    return True


def _stop(entry: Idle) -> None:
    proc = entry.proc
    try:
        if proc.poll() is None and proc.stdin is not None:
            proc.stdin.write("\n")  # type: ignore[arg-type]
            proc.stdin.close()
        proc.wait(timeout=10)
    except Exception:  # noqa: BLE001 - a child that does not stop is killed
        proc.kill()
        proc.wait()
    for stream in (proc.stdout,):
        if stream is not None:
            stream.close()
    entry.log.close()
    try:
        os.unlink(entry.log_path)
    except OSError:
        pass


def stop_all() -> None:
    """Stop every idle child now (also run when this process exits)."""
    global _dir
    with _lock:
        entries, _idle[:] = list(_idle), []
        folder, _dir = _dir, None
    for entry in entries:
        _stop(entry)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def release_log(log: Any, log_path: str | None) -> None:
    """Close a log a worker no longer needs, and delete it when it was a warm child's (in the pool's folder)."""
    if log is not None:
        log.close()
    folder = _dir
    if log_path and folder and log_path.startswith(folder + os.sep):
        try:
            os.unlink(log_path)
        except OSError:
            pass


atexit.register(stop_all)
