"""The one way etlens starts a child process: a :class:`Worker` that runs named jobs (and :func:`run_tool`
for an external binary, such as the TOSA reference model).

ExecuTorch's native code reacts to some conditions by aborting the process: the ETDump writer's
debug buffer running full ("Ran out of space to store intermediate outputs"), a kernel's
``ET_CHECK``, a backend's assertion. Run in-process, that kills the user's Python with exit 134 and
no message. So every piece of native work — lowering, running a program, running bundled test
cases, asking the runtime which kernels it has — is a *job* of a :class:`Worker`, which runs it in
a ``python`` child (:mod:`etlens.builder.child`). Jobs by name:

=================== ==========================================================================
``lower``           load a saved ExportedProgram and lower it (:func:`etlens.builder.lower.lower_program`,
                    the one lowering); writes ``.pte`` (+ ``.etrecord``); optionally traces the
                    passes while doing it (the traced lowering *is* the production lowering) and
                    describes which delegate computes each output
``trace-lowering``  the pass tracer's stages on a saved ExportedProgram (``etlens trace``), no run
``run``             load a ``.pte`` in the runtime with ETDump (+ debug buffer), run it N times,
                    write ``.etdp`` (+ trimmed debug buffer); outputs come back via ``torch.save``
``bundled-run``     run every test case of a bundled program, one result line per case
``list-operators``  the operator names the runtime has kernels for
``llm-run``         an LLM ``.pte`` fed a token sequence with teacher forcing, logits per position
                    (+ ETDump and debug buffer): :mod:`etlens.builder.jobs_llm`, for ``etlens llm-diff``
``memory-measure``  load and run a ``.pte`` stage by stage, sampling the process's memory after each
                    (:mod:`etlens.builder.jobs_memory`; in a child of its own, started for it alone)
=================== ==========================================================================

One child serves many jobs (``import torch`` + executorch, about 8 s of CPU, is paid once): a
:class:`~etlens.builder.session.BuildSession` lowers, runs and lowers the instrumented program of
the inside-the-delegates view in the same child. A Python error in a job is reported (the job
raises :class:`NativeStageError`) and the child goes on; a native abort kills only the child: the
job raises :class:`NativeStageError` naming the job and the cause (the child's last native log
line), and the next job starts a fresh child.

The protocol (parsed in one place, :meth:`Worker.submit`): the parent writes a job file's path on
the child's stdin, one a line; the child answers on its stdout, which it keeps for this alone
(stray ``print`` output goes to its log): ``stage NAME`` when a job (or a step of it) starts,
``size N`` when it sized the debug buffer, ``run I`` after each run, ``time LABEL START WALL CPU``
when ``ETLENS_TIMING`` is set (:mod:`etlens.model.spans`), then ``done`` or ``failed``.
Data crosses the boundary as files: JSON jobs and results, tensors through ``torch.save`` /
``torch.load(weights_only=True)`` (no pickles of arbitrary objects), programs as ``.pt2`` / ``.pte``.

Example::

    with Worker() as w:
        w.lower("model.pt2", "model.pte", backend="xnnpack", etrecord="model.etrecord")
        outputs = w.run("model.pte", inputs, runs=5, etdump="run.etdp", debug="run.debug.bin")
        kernels = w.list_operators()
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Any, Callable

from ..errors import EtlensError

__all__ = ["Worker", "NativeStageError", "JOBS", "last_native_line", "save_inputs", "run_tool"]

#: the jobs a child knows (see :mod:`etlens.builder.child`)
JOBS = ("lower", "trace-lowering", "run", "bundled-run", "list-operators", "llm-run", "memory-measure")

#: an ExecuTorch native log line: ``[file.cpp:42] message`` (or ``E 00:00:00.123 executorch:file.cpp:42] …``)
_NATIVE_LOG = re.compile(r"^(?:[DIWEF] \d\d:\d\d:\d\d\.\d+ executorch:|\[)[\w./-]+:\d+\] (.*)$")

#: stage (as the child announces it) -> (name in messages, what to change when it crashes)
_STAGES = {
    "lower": ("lower", "backend {backend!r}: try --backend portable{verbose_hint}"),
    "trace": ("lower", "backend {backend!r}: rerun with --no-trace{verbose_hint}"),
    "trace-lowering": ("trace", "backend {backend!r}: try --no-lower{verbose_hint}"),
    "run": ("run on the ExecuTorch runtime",
            "debug buffer: {size} for {runs} run(s); a larger --debug-buffer-size (bytes) or fewer --runs avoids "
            "'Ran out of space' aborts"),
    "bundled-run": ("bundled test cases", "{log_hint}"),
    "list-operators": ("list the runtime's operators", "check the executorch install (executorch==1.5.1)"),
    "llm-run": ("run the LLM on the ExecuTorch runtime", "debug buffer: {size}; --no-layers runs it without "
                "intermediate outputs"),
    "memory-measure": ("measure memory on the ExecuTorch runtime", "{log_hint}"),
}


class NativeStageError(EtlensError):
    """A job (lowering, the runtime) failed in its child process; the message says why.

    ``details``: what the child recorded before failing (``lower`` jobs with ``describe``: the
    edge names of the program's outputs at partition time), else ``{}``.
    """

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details or {}


def last_native_line(log: str) -> str | None:
    """The cause in the child's log: its last native line (with the one before when that is an assert).

    ``[buffer_data_sink.cpp:47] Ran out of space …`` is followed by ``[etdump_flatcc.cpp:650] … assert
    failed …``: both are returned, the cause first. Without native lines: the log's last line.
    """
    lines = [ln.rstrip() for ln in log.splitlines() if ln.strip()]
    native = [m.group(1).strip() for ln in lines if (m := _NATIVE_LOG.match(ln))]
    if native:
        if "assert failed" in native[-1] and len(native) > 1:
            return f"{native[-2]} ({native[-1]})"
        return native[-1]
    return lines[-1] if lines else None


def save_inputs(inputs: Any, path: str) -> str:
    """``torch.save`` a model's positional arguments as a list, nested structure kept (the child flattens)."""
    import torch

    from .inputs import as_args

    torch.save(list(as_args(inputs)), path)
    return path


def run_tool(cmd: list[str], *, timeout: float, what: str) -> subprocess.CompletedProcess:
    """Run an external program (not Python: e.g. the TOSA reference model) to its end, output captured.

    The one place besides :class:`Worker` where etlens starts a process: a tool binary that cannot
    run as a job of the Python child. Raises :class:`~etlens.errors.EtlensError` naming ``what`` when
    it does not finish in ``timeout`` seconds; the caller reads ``returncode``, ``stdout``, ``stderr``.
    """
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise EtlensError(f"{what} did not finish in {timeout:.0f} s") from exc
    except OSError as exc:
        raise EtlensError(f"{what} could not start ({cmd[0]}: {exc})") from exc


def child_env() -> dict[str, str]:
    """The parent's environment, with this etlens first on the path (the child imports the same code)."""
    env = dict(os.environ)
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("PYTHONWARNINGS", "default")
    return env


class Worker:
    """One child process that runs named jobs in turn (see the module docstring for the jobs).

    ``verbose`` shows the child's stderr (warnings, native log lines) instead of keeping it in a
    log file that is read back when the child dies. ``jobs`` counts the jobs submitted,
    ``by_job`` per name (tests use it to check a report lowers once). Use as a context manager
    or call :meth:`close`.
    """

    def __init__(self, *, verbose: bool = False, prewarm: list[str] | None = None, warm: bool = True) -> None:
        self.verbose = verbose
        #: modules the child imports as soon as it starts, before its first job (see :meth:`start`)
        self.prewarm = list(prewarm or [])
        #: take a warm child kept by an earlier worker, and leave ours for a later one (:mod:`etlens.builder.warm`,
        #: off unless turned on there); False for jobs that measure the child itself
        self.warm = warm and not verbose
        self.jobs = 0
        self.by_job: dict[str, int] = {}
        #: children this worker used: started, or taken warm from an earlier worker
        self.children = 0
        self._dir = tempfile.mkdtemp(prefix="etlens-worker-")
        self._proc: subprocess.Popen | None = None
        self._log: Any = None
        self._log_path: str | None = None
        self._adopted = False  # the child came warm: its "ready" line was read by its first worker
        self._busy = False  # a job is in flight: its answer not read yet (such a child is never handed on)
        self._killed = False  # kill() cancels: no later job starts a new child

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The running child's process id (``None`` before the first job or after a crash)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def start(self) -> None:
        """Start the child now (it imports :attr:`prewarm` while this process does other work).

        A :class:`~etlens.builder.session.BuildSession` starts it before exporting the model, so the
        child's ``import torch`` + executorch overlaps the export instead of following it.
        """
        self._start()

    def _start(self) -> subprocess.Popen:
        from . import warm

        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self._killed:
            raise NativeStageError("the worker was stopped (its work was cancelled): no new job starts")
        warm.release_log(self._log, self._log_path)  # a child that died leaves its log behind
        env = child_env()
        idle = warm.take(warm.key(env)) if self.warm else None
        self.children += 1
        if idle is not None:
            self._proc, self._log, self._log_path, self._adopted = idle.proc, idle.log, idle.log_path, True
            return idle.proc
        self._adopted = False
        self._log_path = os.path.join(self._dir, "child.log")
        self._log = open(self._log_path, "ab")  # noqa: SIM115 - lives with the child
        cmd = [sys.executable, "-c", "from etlens.builder.child import main; main()", *self.prewarm]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=None if self.verbose else self._log, env=env, text=True,
                                      bufsize=1)
        return self._proc

    def ready(self) -> bool:
        """Whether the child has finished its :attr:`prewarm` imports and waits for jobs (never blocks).

        The child writes ``ready`` once its imports are done; until the first job is submitted
        nobody reads its stdout, so the line waiting there is the answer. After a job it is
        ready by definition; a child that died reads as ready (the next job reports why).
        """
        import select

        proc = self._proc
        if proc is None or proc.stdout is None:
            return False
        if self.jobs or self._adopted or proc.poll() is not None:
            return True
        readable, _, _ = select.select([proc.stdout], [], [], 0)
        return bool(readable)

    def kill(self) -> None:
        """Stop the child now, whatever it is doing (a job in flight then fails), and clean up; a job submitted
        later fails at once instead of starting a new child (the work was cancelled: e.g. the build it raced
        failed)."""
        self._killed = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        self.close()

    def workdir(self) -> str:
        """A fresh scratch directory for the next job (removed by :meth:`close`)."""
        if self._killed:
            raise NativeStageError("the worker was stopped (its work was cancelled): no new job starts")
        path = os.path.join(self._dir, f"job{self.jobs + 1}")
        os.makedirs(path, exist_ok=True)
        return path

    def submit(self, job: str, params: dict[str, Any], *, work: str | None = None,
               on_stage: Callable[[str], Any] | None = None, on_run: Callable[[int], Any] | None = None,
               facts: dict[str, Any] | None = None, timeout: float | None = None) -> dict[str, Any]:
        """Run job ``job`` with ``params`` in the child; return the result the job wrote (a dict).

        The one place the stage-line protocol is read: ``stage`` lines go to ``on_stage``,
        ``run I`` to ``on_run``, ``size N`` into the crash advice. ``facts`` fill the advice of
        :data:`_STAGES` (backend, runs). ``timeout`` (seconds): the child is killed when the job
        takes longer. Raises :class:`NativeStageError` when the job raised or the child died.
        """
        import threading

        if job not in JOBS:
            raise EtlensError(f"unknown worker job {job!r}; known: {', '.join(JOBS)}")
        work = work or self.workdir()
        self.jobs += 1
        self.by_job[job] = self.by_job.get(job, 0) + 1
        spec = dict(params, job=job, result=os.path.join(work, "result.json"), error=os.path.join(work, "error.json"))
        job_path = os.path.join(work, "job.json")
        with open(job_path, "w", encoding="utf-8") as f:
            json.dump(spec, f)
        state: dict[str, Any] = {"stage": job, "backend": None, "runs": None, "size": "none"}
        state.update(facts or {})
        proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None
        log_start = self._log.tell() if self._log is not None else 0
        answer = ""
        timer = threading.Timer(timeout, proc.kill) if timeout else None
        if timer is not None:
            timer.start()
        self._busy = True
        try:
            proc.stdin.write(job_path + "\n")
            proc.stdin.flush()
            for line in proc.stdout:
                word, _, rest = line.strip().partition(" ")
                if word == "stage":
                    state["stage"] = rest
                    if on_stage is not None:
                        on_stage(rest)
                elif word == "size":
                    state["size"] = f"{rest} bytes (sized from the program)"
                elif word == "run":
                    if on_run is not None:
                        on_run(int(rest))
                elif word == "time":  # ETLENS_TIMING: a stage the child timed (etlens.model.spans)
                    from ..model.spans import record

                    label, start, wall, cpu = rest.rsplit(" ", 3)
                    record(label, float(start), float(wall), float(cpu), side="child")
                elif word in ("done", "failed"):
                    answer = word
                    break
        except BrokenPipeError:
            answer = ""
        finally:
            if timer is not None:
                timer.cancel()
            self._busy = not answer
        if timer is not None and not answer and timer.finished.is_set() and proc.poll() is not None:
            state["timed_out"] = timeout
        if answer == "done":
            if os.path.exists(spec["result"]):
                with open(spec["result"], encoding="utf-8") as f:
                    return dict(json.load(f))
            return {}
        code = proc.wait() if not answer else None
        log = ""
        if not answer:
            self._proc = None
            if not self.verbose:
                with open(str(self._log_path), encoding="utf-8", errors="replace") as f:
                    f.seek(log_start)
                    log = f.read()
        raise self._error(state, spec, code, log, params.get("describe"))

    def _error(self, state: dict[str, Any], spec: dict[str, Any], code: int | None, log: str,
               describe: str | None) -> NativeStageError:
        """The job's own report (``error.json``) or, after a crash, the cause from the child's log."""
        stage = str(state["stage"]).split(":", 1)[0]  # "trace:<pass>": a stage of the traced lowering
        label, advice = _STAGES.get(stage, _STAGES.get(spec["job"], (spec["job"], "{log_hint}")))
        # hints match the flags given: no "rerun with -v" when the log is already shown
        hints = {"verbose_hint": "" if self.verbose else ", or rerun with -v to see the lowering log",
                 "log_hint": "the log is above" if self.verbose else "rerun with -v to see the runtime's log"}
        advice = advice.format(**{**state, **hints})
        details: dict[str, Any] = {}
        if describe and os.path.exists(describe):
            with open(describe, encoding="utf-8") as f:
                details = json.load(f)
        if os.path.exists(spec["error"]):
            with open(spec["error"], encoding="utf-8") as f:
                err = json.load(f)
            hint = "" if self.verbose else " (rerun with -v for the child's log)"
            return NativeStageError(f"{label} failed: {err['type']}: {err['message']}{hint}", details)
        if state.get("timed_out"):
            return NativeStageError(f"{label} did not finish within {state['timed_out']:.0f} s (the child was "
                                    "stopped)", details)
        cause = last_native_line(log)
        how = "no exit status" if code is None else f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        shown = f": {cause}" if cause else (" (rerun with -v to see its log)" if not self.verbose else "")
        return NativeStageError(f"{label} crashed in its child process ({how}){shown}; {advice}", details)

    # -- the named jobs ----------------------------------------------------------------------
    def lower(self, ep_path: str, pte_path: str, *, backend: str = "xnnpack", etrecord: str | None = None,
              representative_inputs: Any = None, quantized: bool = False, describe: bool = False,
              trace: dict[str, Any] | None = None, on_stage: Callable[[str], Any] | None = None) -> dict[str, Any]:
        """Job ``lower``: the saved ExportedProgram ``ep_path`` → ``pte_path`` (+ ``etrecord``).

        ``representative_inputs`` go into the ETRecord. ``quantized`` loads the quantized kernels
        library first. ``describe``: the result's ``outputs`` names, for each program output, its
        edge node at partition time and the delegate computing it (``backend``, ``delegate``;
        ``None`` when a kernel outside any delegate does); on failure the same record is the
        error's ``details``. ``trace`` (from :class:`~etlens.builder.session.BuildSession`):
        ``{"seed": partial trace JSON, "ids": graph-id map, "output": where the finished trace goes}``
        — the pass tracer records its snapshots while this one lowering goes.
        """
        work = self.workdir()
        params: dict[str, Any] = {
            "ep": os.path.abspath(ep_path), "pte": os.path.abspath(pte_path), "backend": backend,
            "etrecord": os.path.abspath(etrecord) if etrecord else None, "quantized": bool(quantized),
            "representative_inputs": None if representative_inputs is None else
            save_inputs(representative_inputs, os.path.join(work, "representative.pt")),
            "describe": os.path.join(work, "describe.json") if describe else None, "trace": trace}
        result = self.submit("lower", params, work=work, on_stage=on_stage, facts={"backend": backend})
        if describe and os.path.exists(params["describe"]):
            with open(params["describe"], encoding="utf-8") as f:
                result.update(json.load(f))
        return result

    def trace_lowering(self, ep_path: str, *, backend: str, trace: dict[str, Any], quantize_io: bool = False,
                       lower: bool = True, pte: str | None = None, quantized: bool = False,
                       on_stage: Callable[[str], Any] | None = None) -> dict[str, Any]:
        """Job ``trace-lowering``: the pass tracer's stages after ``export`` on the saved program
        (``etlens trace``, no run). ``trace`` as for :meth:`lower`; ``pte``: where a backend whose
        passes emit the program writes it. Each recorded stage is told to ``on_stage``
        (``trace:<name>``)."""
        params = {"ep": os.path.abspath(ep_path), "backend": backend, "trace": trace, "quantize_io": bool(quantize_io),
                  "lower": bool(lower), "pte": pte, "quantized": bool(quantized)}
        return self.submit("trace-lowering", params, on_stage=on_stage, facts={"backend": backend})

    def run(self, pte_path: str, inputs: Any, *, runs: int = 1, etdump: str | None = None,
            debug: str | None = None, debug_buffer_size: int | None = None, quantized: bool | None = None,
            on_run: Callable[[int], Any] | None = None, on_stage: Callable[[str], Any] | None = None) -> list:
        """Job ``run``: ``pte_path`` ``runs`` times in the runtime; return the outputs of the last run.

        ``etdump`` / ``debug``: where the ``.etdp`` and the debug buffer go (``None``: not
        written). ``debug_buffer_size`` ``None``: sized from the program by the child
        (:func:`etlens.builder.runner.debug_buffer_bytes`); the written buffer is trimmed to the
        bytes the ETDump references. ``quantized`` ``None``: load the quantized kernels when the
        program calls them.
        """
        import torch

        work = self.workdir()
        params = {"pte": os.path.abspath(pte_path), "inputs": save_inputs(inputs, os.path.join(work, "inputs.pt")),
                  "outputs": os.path.join(work, "outputs.pt"), "runs": int(runs),
                  "etdump": os.path.abspath(etdump) if etdump else None,
                  "debug": os.path.abspath(debug) if debug else None,
                  "debug_buffer_size": None if debug_buffer_size is None else int(debug_buffer_size),
                  "quantized": quantized}
        size = f"{debug_buffer_size} bytes" if debug and debug_buffer_size is not None else "none"
        self.submit("run", params, work=work, on_stage=on_stage, on_run=on_run, facts={"runs": runs, "size": size})
        return list(torch.load(params["outputs"], weights_only=True))

    def bundled_run(self, work: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Job ``bundled-run``: ``work/program.pte`` with the cases in ``work/cases.json`` + ``cases.npz``.

        One line per case is appended to ``work/results.jsonl`` as it finishes (lines written
        before a crash survive it); outputs go to ``work/out_<suite>_<case>.npz``.
        """
        return self.submit("bundled-run", {"work": os.path.abspath(work)}, timeout=timeout)

    def list_operators(self) -> list[str]:
        """Job ``list-operators``: the operator names (``aten::add.out``) the runtime has kernels for."""
        return list(self.submit("list-operators", {}).get("operators", []))

    def close(self) -> None:
        """Stop the child (it finishes its current job first) and remove the scratch files."""
        import shutil

        from . import warm

        proc, self._proc = self._proc, None
        if (proc is not None and self.warm and not self._busy and self._log is not None and self._log_path is not None
                and warm.give(proc, self._log, self._log_path, warm.key(child_env()))):
            proc = None
            self._log = self._log_path = None
        if proc is not None:
            try:
                if proc.poll() is None and proc.stdin is not None:
                    proc.stdin.write("\n")
                    proc.stdin.close()
                proc.wait(timeout=60)
            except Exception:  # noqa: BLE001 - a child that does not stop is killed
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        warm.release_log(self._log, self._log_path)
        self._log = self._log_path = None
        shutil.rmtree(self._dir, ignore_errors=True)
