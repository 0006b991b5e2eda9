"""Progress bars that show on a terminal and stay silent when output is piped, and a quiet mode.

* :func:`progress` — a tqdm bar on the console (stderr) when it is a terminal, else a no-op bar;
* :class:`StageBar` — one bar for a multi-stage job (``export``, ``lower``, ``run 3/5`` …): the
  current stage and the elapsed time;
* :func:`quiet` — hide third-party noise (Python warnings, torch/torchao log lines, native
  ``[cpuinfo_utils.cpp:…]`` lines — all of them written to stderr) for the duration of a job by
  pointing file descriptor 2 at a log file; stdout (the command's own output) and the bars (a
  duplicate of the real stderr) still reach the terminal. On an exception a log with something
  in it is kept (in :func:`log_dir`, at most :data:`MAX_LOGS` of them, the oldest removed first)
  and its path is attached to the exception as ``etlens_log``; an empty log is always removed.

Example::

    with quiet(enabled=not verbose):
        bar = StageBar(total=4, desc="etlens report")
        bar.stage("export"); ...; bar.advance()
        bar.close()
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
import warnings
from typing import Any, Iterable, Iterator, TypeVar

__all__ = ["progress", "StageBar", "quiet", "console", "log_dir", "MAX_LOGS"]

T = TypeVar("T")

#: where bars write while :func:`quiet` holds stderr (a duplicate of the real stderr)
_CONSOLE: Any = None

#: how many kept third-party logs :func:`log_dir` holds; keeping one more removes the oldest
MAX_LOGS = 20

_LOG_PREFIX = "etlens-"


def log_dir() -> str:
    """The per-user directory of kept third-party logs.

    ``$ETLENS_LOG_DIR`` when set, else ``$XDG_STATE_HOME/etlens/logs``, else
    ``~/.local/state/etlens/logs`` (the XDG default for logs). Not created here.
    """
    explicit = os.environ.get("ETLENS_LOG_DIR")
    if explicit:
        return explicit
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "etlens", "logs")


def _open_log() -> tuple[int, str]:
    """A new log file in :func:`log_dir` (the temporary directory when that cannot be created)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        os.makedirs(log_dir(), exist_ok=True)
        return tempfile.mkstemp(prefix=f"{_LOG_PREFIX}{stamp}-", suffix=".log", dir=log_dir())
    except OSError:
        return tempfile.mkstemp(prefix=f"{_LOG_PREFIX}{stamp}-", suffix=".log")


def _prune_logs(directory: str, keep: int = MAX_LOGS) -> None:
    """Remove the oldest ``etlens-*.log`` files of ``directory`` beyond the newest ``keep``."""
    try:
        names = [n for n in os.listdir(directory) if n.startswith(_LOG_PREFIX) and n.endswith(".log")]
    except OSError:
        return
    dated = []
    for name in names:
        path = os.path.join(directory, name)
        with contextlib.suppress(OSError):
            dated.append((os.stat(path).st_mtime, name, path))
    dated.sort(reverse=True)
    for _, _, path in dated[keep:]:
        with contextlib.suppress(OSError):
            os.unlink(path)


def console() -> Any:
    """The stream the user sees: the real stderr, even while :func:`quiet` redirects fd 2.

    When ``sys.stderr`` is not the fd-2 stream (pytest's ``capsys``, a notebook), it is what the
    user sees, so it is returned as is.
    """
    if _CONSOLE is None:
        return sys.stderr
    try:
        fd = sys.stderr.fileno()
    except Exception:  # noqa: BLE001 - a replaced, non-file stream
        return sys.stderr
    return _CONSOLE if fd == 2 else sys.stderr


def progress(iterable: Iterable[T] | None = None, *, total: int | None = None, desc: str = "",
             unit: str = "it", enabled: bool | None = None, bar_format: str | None = None):
    """Wrap ``iterable`` in a tqdm bar on the console when it is a terminal, else return a no-op bar."""
    out = console()
    if enabled is None:
        enabled = bool(getattr(out, "isatty", lambda: False)())
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=not enabled, file=out,
                leave=False, dynamic_ncols=True, bar_format=bar_format)


class StageBar:
    """One bar over the stages of a job: ``etlens report: lower |████   | 3/9 [00:41]``."""

    def __init__(self, total: int, desc: str, enabled: bool | None = None):
        self.desc = desc
        self.bar = progress(total=total, desc=desc, unit="step", enabled=enabled,
                            bar_format="{desc} |{bar}| {n_fmt}/{total_fmt} [{elapsed}]")

    def stage(self, name: str) -> None:
        """Show ``name`` as the current stage."""
        self.bar.set_description_str(f"{self.desc}: {name}")

    def advance(self, n: int = 1) -> None:
        self.bar.update(n)

    def step(self, name: str) -> None:
        """Stage ``name`` starts: the previous one is done (``run`` stages advance per run instead)."""
        if getattr(self, "_current", None) is not None and not getattr(self, "_ran", False):
            self.advance()
        self._current, self._ran = name, False
        self.stage(f"run 1/{getattr(self, '_runs', 1)}" if name == "run" else name)

    def runs(self, total: int) -> Any:
        """The ``on_run(i)`` callback of a ``run`` stage of ``total`` runs: one step per run."""
        self._runs = total

        def on_run(i: int) -> None:
            self.advance()
            self._ran = True
            if i + 1 < total:
                self.stage(f"run {i + 2}/{total}")

        return on_run

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> StageBar:
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None and getattr(self, "_current", None) is not None:
            self.advance()  # the last stage is done
        self.close()


@contextlib.contextmanager
def quiet(enabled: bool = True) -> Iterator[str | None]:
    """Send stderr (fd 2: warnings, log lines, native output) to a log file; yield its path.

    Disabled: a no-op yielding ``None``. The log is deleted when the block succeeds, and when it
    raises with nothing written to the log (an error of etlens' own, such as a missing file). When
    the block raises and the log has something in it, the log is kept in :func:`log_dir` (the
    oldest logs beyond :data:`MAX_LOGS` are removed) and its path is set as ``exc.etlens_log``, so
    the error message can point at it.
    """
    global _CONSOLE
    if not enabled:
        yield None
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    fd, log_path = _open_log()
    saved_err = os.dup(2)
    previous_console = _CONSOLE
    _CONSOLE = os.fdopen(os.dup(saved_err), "w", buffering=1)
    os.dup2(fd, 2)
    failed: BaseException | None = None
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    try:
        with warnings.catch_warnings():
            log_warning = warnings.showwarning

            def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                     line: Any = None) -> None:
                if os.path.abspath(filename).startswith(here):  # etlens' own warnings are for the user
                    print(f"etlens: warning: {message}", file=console())
                else:
                    log_warning(message, category, filename, lineno, file, line)

            warnings.showwarning = show
            yield log_path
    except BaseException as exc:
        failed = exc
        raise
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(saved_err, 2)
        try:
            written = os.fstat(fd).st_size > 0
        except OSError:
            written = False
        for f in (saved_err, fd):
            os.close(f)
        with contextlib.suppress(Exception):
            _CONSOLE.close()
        _CONSOLE = previous_console
        if failed is not None and written and os.path.exists(log_path):
            with contextlib.suppress(Exception):
                failed.etlens_log = log_path  # type: ignore[attr-defined]
            _prune_logs(os.path.dirname(log_path))
        else:
            with contextlib.suppress(OSError):
                os.unlink(log_path)
