"""Run ExecuTorch's native work (lowering, the runtime) in a child process, never in the user's.

ExecuTorch's native code reacts to some conditions by aborting the process: the ETDump writer's
debug buffer running full ("Ran out of space to store intermediate outputs"), a kernel's
``ET_CHECK``, a backend's assertion. Run in-process, that kills the user's Python with exit 134 and
no message. Here both native stages run in a fresh ``python`` child:

* :func:`lower_program` — ``torch.export.load`` an ExportedProgram the parent exported, then
  ``to_edge_transform_and_lower`` (the backend's partitioners) + ``to_executorch``; writes the
  ``.pte`` and the ``.etrecord``;
* :func:`run_program` — load a ``.pte`` in the ExecuTorch runtime with ETDump (and a debug buffer
  for intermediate outputs), run it ``runs`` times, write the ``.etdp`` (+ debug buffer); returns
  the outputs of the last run.

One child per job, not per run: a child pays the ``import torch`` + ``executorch`` cost once
(about 8 s of CPU; 30 s of wall time on a loaded 2-core machine), so :func:`lower_and_run` does
both stages in one child, announcing each stage so a failure still names the one it happened in.

Data crosses the boundary as files: a JSON job, tensors through ``torch.save`` and
``torch.load(weights_only=True)`` (no pickles of arbitrary objects), the program as ``.pte`` /
``.pt2``. The child's stderr (Python warnings and native log lines) goes to a log file that is
shown when ``verbose`` and read back when the child dies: a crash becomes a
:class:`~etlens.errors.EtlensError` naming the stage, the child's last native log line (the
cause) and what to change. Progress (one line per finished run) comes back on the child's
stdout, which the child keeps for that alone (stray ``print`` output goes to the log).

Sizing the debug buffer (:func:`debug_buffer_bytes`): with intermediate outputs on, the runtime
logs, on every run, the last argument (the ``out`` tensor) of every kernel call, every argument of
every delegate call (ExecuTorch cannot tell a delegate's inputs from its outputs, so it logs all of
them) and the method's outputs; each tensor is written 64-byte aligned. Those sizes are all in the
``.pte`` (etlens' own reader), so the buffer is the per-run sum x ``runs`` plus 25 % and 1 MiB
headroom. Logging only one run and timing the others without a buffer would need a second runtime
instance (the pybindings cannot turn logging off between runs) and would lose the per-run
intermediate outputs the Inspector pairs with each run's events, so every run logs; the written
debug buffer is then trimmed to the bytes the ETDump references, so a generous buffer costs
memory in the child, not disk.

Example::

    from etlens.passes.runner import debug_buffer_bytes, run_program
    outputs = run_program("model.pte", (torch.randn(1, 3, 32, 32),), runs=5, etdump_path="run.etdp",
                          debug_path="run.debug.bin")          # debug buffer sized from the program
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
from . import oplibs

__all__ = ["NativeStageError", "NativeWorker", "debug_buffer_bytes", "has_quantized_ops", "run_program",
           "lower_program", "lower_and_run"]

#: bytes per logged tensor are rounded up to this (ExecuTorch's BufferDataSink default alignment)
_ALIGN = 64
#: how the children are told where the quantized kernels are needed
_QUANT_NAMESPACE = "quantized_decomposed"
#: an ExecuTorch native log line: ``[file.cpp:42] message`` (or ``E 00:00:00.123 executorch:file.cpp:42] …``)
_NATIVE_LOG = re.compile(r"^(?:[DIWEF] \d\d:\d\d:\d\d\.\d+ executorch:|\[)[\w./-]+:\d+\] (.*)$")


class NativeStageError(EtlensError):
    """A native stage (lowering, the runtime) failed in its child process; the message says why.

    ``details``: what the child recorded before failing (:class:`NativeWorker` jobs with
    ``describe``: the edge names of the program's outputs at partition time), else ``{}``.
    """

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details or {}


# ---------------------------------------------------------------------------------------------
# Sizing the debug buffer from the program
# ---------------------------------------------------------------------------------------------
def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def debug_buffer_bytes(pte: str | bytes, runs: int = 1, *, method: str = "forward") -> int:
    """Bytes of debug buffer a run of ``method`` needs ``runs`` times, with headroom.

    Counts what the runtime logs with intermediate outputs on (see the module docstring): the
    ``out`` tensor of each kernel call, every tensor argument of each delegate call and the method
    outputs, each 64-byte aligned, using the tensor sizes in the ``.pte`` (upper bounds for dynamic
    shapes). Returns ``per_run * runs * 1.25 + 1 MiB``.
    """
    from ..readers.pte import read, read_pte_bytes
    from ..schema import SCALAR_TYPES

    art = read_pte_bytes(pte) if isinstance(pte, (bytes, bytearray)) else read(pte)
    plans = [p for p in art.program.execution_plan if p.name == method] or art.program.execution_plan[:1]
    per_run = 0
    for plan in plans:
        values = plan.values

        def tensor_bytes(vid: int, values: list = values) -> int:
            if vid < 0 or vid >= len(values):
                return 0
            v = values[vid]
            if v.kind == "tensor":
                n = 1
                for d in v.val.sizes:
                    n *= max(int(d), 1)
                info = SCALAR_TYPES.get(v.val.scalar_type)
                return _aligned(n * (info.itemsize if info else 8))
            if v.kind in ("tensor_list", "optional_tensor_list"):
                return sum(tensor_bytes(i) for i in (v.val or ()) if i is not None)
            return 0

        for chain in plan.chains:
            for ins in chain.instructions:
                if ins.kind == "KernelCall" and ins.args:
                    per_run += tensor_bytes(ins.args[-1])
                elif ins.kind == "DelegateCall":
                    per_run += sum(tensor_bytes(a) for a in ins.args)
        per_run += sum(tensor_bytes(o) for o in plan.outputs)
    return int(per_run * max(runs, 1) * 1.25) + (1 << 20)


def has_quantized_ops(pte: str | bytes) -> bool:
    """True when the program calls ``quantized_decomposed`` kernels (they live in a separate library)."""
    from ..readers.pte import read, read_pte_bytes

    art = read_pte_bytes(pte) if isinstance(pte, (bytes, bytearray)) else read(pte)
    return any(op.name.startswith(_QUANT_NAMESPACE) for plan in art.program.execution_plan for op in plan.operators)


# ---------------------------------------------------------------------------------------------
# The parent side
# ---------------------------------------------------------------------------------------------
def _child_env() -> dict[str, str]:
    """The parent's environment, with this etlens first on the path (the child imports the same code)."""
    env = dict(os.environ)
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("PYTHONWARNINGS", "default")
    return env


def _last_native_line(log: str) -> str | None:
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


#: stage key (as the child announces it) -> (name in messages, what to change when it crashes)
_STAGES = {
    "lower": ("lower", "backend {backend!r}: try --backend portable, or rerun with -v to see the lowering log"),
    "run": ("run on the ExecuTorch runtime",
            "debug buffer: {size} for {runs} run(s); a larger --debug-buffer-size (bytes) or fewer --runs avoids "
            "'Ran out of space' aborts"),
}


def _spawn(job: dict[str, Any], work: str, *, verbose: bool, on_stage: Callable[[str], Any] | None = None,
           on_run: Callable[[int], Any] | None = None) -> None:
    """Run the child for ``job``; raise :class:`NativeStageError` naming the stage it was in when it failed.

    The child announces ``stage lower`` / ``stage run`` / ``size N`` / ``run I`` on its stdout.
    """
    job_path = os.path.join(work, "job.json")
    log_path = os.path.join(work, "child.log")
    with open(job_path, "w", encoding="utf-8") as f:
        json.dump(job, f)
    facts: dict[str, Any] = {"stage": job["stages"][0], "backend": job.get("backend"), "runs": job.get("runs"),
                             "size": f"{job.get('debug_buffer_size')} bytes" if job.get("debug") else "none"}
    cmd = [sys.executable, "-c", "from etlens.passes.runner import _child_main; _child_main()", job_path]
    with open(log_path, "wb") as log, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=None if verbose else log,
                                                       env=_child_env(), text=True, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            word, _, rest = line.strip().partition(" ")
            if word == "stage":
                facts["stage"] = rest
                if on_stage is not None:
                    on_stage(rest)
            elif word == "size":
                facts["size"] = f"{rest} bytes (sized from the program)"
            elif word == "run" and on_run is not None:
                on_run(int(rest))
        code = proc.wait()
    if code == 0:
        return
    with open(log_path, encoding="utf-8", errors="replace") as f:
        raise _stage_error(facts, work, code, f.read(), verbose)


def _stage_error(facts: dict[str, Any], work: str, code: int | None, log: str, verbose: bool) -> NativeStageError:
    """The error for a failed job: the child's own report (``error.json``) or, after a crash, its log's cause."""
    label, advice = _STAGES[facts["stage"]]
    advice = advice.format(**facts)
    details: dict[str, Any] = {}
    if facts.get("describe") and os.path.exists(facts["describe"]):
        with open(facts["describe"], encoding="utf-8") as f:
            details = json.load(f)
    err_path = os.path.join(work, "error.json")
    if os.path.exists(err_path):
        with open(err_path, encoding="utf-8") as f:
            err = json.load(f)
        return NativeStageError(f"{label} failed: {err['type']}: {err['message']} (rerun with -v for the child's "
                                "log)", details)
    cause = _last_native_line(log)
    how = "no exit status" if code is None else f"killed by signal {-code}" if code < 0 else f"exit status {code}"
    shown = f": {cause}" if cause else (" (rerun with -v to see its log)" if not verbose else "")
    return NativeStageError(f"{label} crashed in its child process ({how}){shown}; {advice}", details)


def _save_inputs(inputs: Any, path: str) -> str:
    """Save the positional arguments as a list, nested structure kept (the child flattens for the runtime)."""
    import torch

    from .inputs import as_args

    torch.save(list(as_args(inputs)), path)
    return path


def run_program(pte_path: str, inputs: Any, *, runs: int = 1, etdump_path: str, debug_path: str | None = None,
                debug_buffer_size: int | None = None, load_quantized_kernels: bool | None = None,
                on_run: Callable[[int], Any] | None = None, verbose: bool = False) -> list:
    """Run ``pte_path`` ``runs`` times in the ExecuTorch runtime in a child; return the last outputs.

    Args:
        pte_path: the program.
        inputs: a tuple/list of tensors (and Python scalars) for ``forward``.
        runs: how many runs ETDump records.
        etdump_path: where the ``.etdp`` goes.
        debug_path: where the debug buffer (intermediate outputs) goes; ``None``: no debug buffer.
        debug_buffer_size: bytes; ``None``: :func:`debug_buffer_bytes` of the program for ``runs``.
        load_quantized_kernels: load ExecuTorch's quantized kernels; ``None``: when the program
            has ``quantized_decomposed`` ops.
        on_run: called with the run index after each run (from the child's progress lines).
        verbose: show the child's stderr (warnings, native log lines) instead of hiding it.

    Raises:
        NativeStageError: the runtime failed or aborted (the message names the cause and the
            ``--debug-buffer-size`` / ``--runs`` flags).
    """
    import torch

    if debug_path and debug_buffer_size is None:
        debug_buffer_size = debug_buffer_bytes(pte_path, runs)
    if load_quantized_kernels is None:
        load_quantized_kernels = has_quantized_ops(pte_path)
    with tempfile.TemporaryDirectory(prefix="etlens-run-") as work:
        job = _run_job(work, pte_path, inputs, runs, etdump_path, debug_path, debug_buffer_size)
        job.update(stages=["run"], quantized=bool(load_quantized_kernels))
        _spawn(job, work, verbose=verbose, on_run=on_run)
        outputs = torch.load(job["outputs"], weights_only=True)
    if debug_path:
        _trim_debug_buffer(etdump_path, debug_path)
    return outputs


def _run_job(work: str, pte_path: str, inputs: Any, runs: int, etdump_path: str, debug_path: str | None,
             debug_buffer_size: int | None) -> dict[str, Any]:
    return {"pte": os.path.abspath(pte_path), "inputs": _save_inputs(inputs, os.path.join(work, "inputs.pt")),
            "outputs": os.path.join(work, "outputs.pt"), "runs": int(runs), "etdump": os.path.abspath(etdump_path),
            "debug": os.path.abspath(debug_path) if debug_path else None,
            "debug_buffer_size": None if debug_buffer_size is None else int(debug_buffer_size)}


def _trim_debug_buffer(etdump_path: str, debug_path: str) -> None:
    """Cut the written debug buffer after the last byte the ETDump points into (it is written whole)."""
    try:
        from ..readers.etdump import read as read_etdump

        dump = read_etdump(etdump_path).dump
        end = 0
        for r, run in enumerate(dump.runs):
            for i in run.debug_indices():
                _kind, payload = dump.debug_entry(r, int(i))
                for ref in payload if isinstance(payload, list) else [payload]:
                    if hasattr(ref, "offset") and hasattr(ref, "nbytes"):
                        end = max(end, int(ref.offset) + int(ref.nbytes))
    except Exception:  # noqa: BLE001 - trimming is an optimisation; the untrimmed file is valid
        return
    if end and end < os.path.getsize(debug_path):
        os.truncate(debug_path, _aligned(end))


def lower_program(ep_path: str, pte_path: str, etrecord_path: str, *, backend: str = "xnnpack",
                  representative_inputs: Any = None, load_quantized_kernels: bool = False,
                  verbose: bool = False) -> None:
    """Lower a saved ExportedProgram (``torch.export.save``) for ``backend`` in a child; write .pte + .etrecord.

    ``backend`` is a registered backend name (``'portable'``: nothing delegated). The child runs
    ``to_edge_transform_and_lower`` (ExecuTorch's default edge compile config, the backend's
    partitioners, an ETRecord) and ``to_executorch``; ``load_quantized_kernels`` loads the
    quantized kernels library first (needed when the program has ``quantized_decomposed`` ops).

    Raises:
        NativeStageError: lowering raised or crashed (the message names the stage "lower").
    """
    with tempfile.TemporaryDirectory(prefix="etlens-lower-") as work:
        job = _lower_job(work, ep_path, pte_path, etrecord_path, backend, representative_inputs)
        job.update(stages=["lower"], quantized=bool(load_quantized_kernels))
        _spawn(job, work, verbose=verbose)


def _lower_job(work: str, ep_path: str, pte_path: str, etrecord_path: str, backend: str,
               representative_inputs: Any) -> dict[str, Any]:
    return {"ep": os.path.abspath(ep_path), "pte": os.path.abspath(pte_path),
            "etrecord": os.path.abspath(etrecord_path), "backend": backend,
            "representative_inputs": None if representative_inputs is None else
            _save_inputs(representative_inputs, os.path.join(work, "representative.pt"))}


def lower_and_run(ep_path: str, pte_path: str, etrecord_path: str, inputs: Any, *, backend: str = "xnnpack",
                  runs: int = 1, etdump_path: str, debug_path: str | None = None,
                  debug_buffer_size: int | None = None, load_quantized_kernels: bool = False,
                  on_stage: Callable[[str], Any] | None = None, on_run: Callable[[int], Any] | None = None,
                  verbose: bool = False) -> list:
    """:func:`lower_program` then :func:`run_program` in ONE child (one ``import torch`` + executorch, not two).

    The child announces each stage (``on_stage("lower")``, ``on_stage("run")``) and sizes the
    debug buffer from the ``.pte`` it wrote when ``debug_buffer_size`` is ``None``; a failure
    names the stage it happened in. Returns the outputs of the last run.
    """
    import torch

    with tempfile.TemporaryDirectory(prefix="etlens-lower-run-") as work:
        job = _lower_job(work, ep_path, pte_path, etrecord_path, backend, inputs)
        job.update(_run_job(work, pte_path, inputs, runs, etdump_path, debug_path, debug_buffer_size))
        job.update(stages=["lower", "run"], quantized=bool(load_quantized_kernels))
        _spawn(job, work, verbose=verbose, on_stage=on_stage, on_run=on_run)
        outputs = torch.load(job["outputs"], weights_only=True)
    if debug_path:
        _trim_debug_buffer(etdump_path, debug_path)
    return outputs


class NativeWorker:
    """One child process that lowers and runs many programs in turn: ``import torch`` + executorch once.

    :func:`lower_and_run` spawns a child per call, which costs the imports (about 8 s of CPU) each
    time; an analysis that lowers several programs one after the other (the inside-the-delegate
    view: production program, instrumented program, retries, bisect probes) keeps one worker
    instead. A Python error in a job (a backend refusing the graph) is reported and the worker goes
    on; a native abort kills only the child: that job raises :class:`NativeStageError` naming the
    stage and the cause, and the next job starts a fresh child.

    Example::

        with NativeWorker() as worker:
            outputs, info = worker.lower_and_run("a.pt2", inputs, backend="xnnpack", describe=True)
            info["outputs"][0]["backend"]        # 'XnnpackBackend' when a delegate computes output 0
    """

    def __init__(self, *, verbose: bool = False) -> None:
        self.verbose = verbose
        self.jobs = 0
        self._dir = tempfile.mkdtemp(prefix="etlens-worker-")
        self._proc: subprocess.Popen | None = None
        self._log: Any = None

    def __enter__(self) -> NativeWorker:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _start(self) -> subprocess.Popen:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._log = open(os.path.join(self._dir, "child.log"), "ab")  # noqa: SIM115 - lives with the child
        cmd = [sys.executable, "-c", "from etlens.passes.runner import _child_main; _child_main()", "--serve"]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=None if self.verbose else self._log, env=_child_env(), text=True,
                                      bufsize=1)
        return self._proc

    def lower_and_run(self, ep_path: str, inputs: Any, *, backend: str = "xnnpack", runs: int = 1,
                      pte_path: str | None = None, etrecord_path: str | None = None, etdump_path: str | None = None,
                      load_quantized_kernels: bool = False, describe: bool = False,
                      on_stage: Callable[[str], Any] | None = None) -> tuple[list, dict[str, Any]]:
        """Lower the saved ExportedProgram ``ep_path`` for ``backend`` and run it ``runs`` times.

        ``pte_path`` / ``etrecord_path`` / ``etdump_path``: where to keep those files (``None``: the
        ``.pte`` goes to a scratch file, no ETRecord, no ETDump — the cheapest cycle).
        ``describe``: also return, in ``info["outputs"]``, for each program output its edge node
        name at partition time (``name``, ``args``: its inputs' names), ``backend`` (the delegate's
        backend id, ``None`` when a kernel outside any delegate computes it) and ``delegate`` (index
        of the delegate call). On failure the same record is the error's ``details`` (the names
        let a caller map a backend's error naming an edge node back to an output).

        Returns ``(outputs of the last run, info)``.
        """
        import torch

        self.jobs += 1
        work = os.path.join(self._dir, f"job{self.jobs}")
        os.makedirs(work)
        pte = pte_path or os.path.join(work, "program.pte")
        job = {"ep": os.path.abspath(ep_path), "pte": os.path.abspath(pte), "backend": backend,
               "etrecord": os.path.abspath(etrecord_path) if etrecord_path else None,
               "representative_inputs": None, "describe": os.path.join(work, "describe.json") if describe else None,
               "stages": ["lower", "run"], "quantized": bool(load_quantized_kernels)}
        job.update(_run_job(work, pte, inputs, runs, etdump_path or "", None, None))
        job["etdump"] = os.path.abspath(etdump_path) if etdump_path else None
        job_path = os.path.join(work, "job.json")
        with open(job_path, "w", encoding="utf-8") as f:
            json.dump(job, f)
        facts: dict[str, Any] = {"stage": "lower", "backend": backend, "runs": runs, "size": "none",
                                 "describe": job["describe"]}
        proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None
        log_start = self._log.tell() if self._log is not None else 0
        answer = ""
        try:
            proc.stdin.write(job_path + "\n")
            proc.stdin.flush()
            for line in proc.stdout:
                word, _, rest = line.strip().partition(" ")
                if word == "stage":
                    facts["stage"] = rest
                    if on_stage is not None:
                        on_stage(rest)
                elif word in ("done", "failed"):
                    answer = word
                    break
        except BrokenPipeError:
            answer = ""
        if answer != "done":
            code = proc.wait() if not answer else None
            log = ""
            if not answer and not self.verbose:
                with open(os.path.join(self._dir, "child.log"), encoding="utf-8", errors="replace") as f:
                    f.seek(log_start)
                    log = f.read()
            if not answer:
                self._proc = None
            raise _stage_error(facts, work, code, log, self.verbose)
        outputs = torch.load(job["outputs"], weights_only=True)
        info: dict[str, Any] = {}
        if describe and os.path.exists(job["describe"]):
            with open(job["describe"], encoding="utf-8") as f:
                info = json.load(f)
        return outputs, info

    def close(self) -> None:
        """Stop the child (it finishes its current job first) and remove the scratch files."""
        import shutil

        proc, self._proc = self._proc, None
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
        if self._log is not None:
            self._log.close()
            self._log = None
        shutil.rmtree(self._dir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# The child side
# ---------------------------------------------------------------------------------------------
def _child_main() -> None:
    """Entry point of the child (``python -c ... job.json``): run the job, report errors as JSON.

    With ``--serve`` instead of a job path the child is a :class:`NativeWorker`: it reads job paths
    from stdin, one a line, and answers each with ``done`` or ``failed`` on the protocol stream.
    """
    # keep stdout for the progress protocol; anything else printed goes to stderr (the log)
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    if sys.argv[1] == "--serve":
        for line in sys.stdin:
            job_path = line.strip()
            if not job_path:
                break
            proto.write("done\n" if _child_job(job_path, proto) else "failed\n")
        proto.close()
        sys.stderr.flush()
        return
    ok = _child_job(sys.argv[1], proto)
    sys.stderr.flush()
    if not ok:
        os._exit(1)
    proto.close()


def _child_job(job_path: str, proto: Any) -> bool:
    """Run the job at ``job_path``; on a Python error write ``error.json`` next to it and return False."""
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    try:
        oplibs.load(["executorch.kernels.quantized"] if job.get("quantized") else [])
        for stage in job["stages"]:
            proto.write(f"stage {stage}\n")
            oplibs.load_for(job["ep"] if stage == "lower" else job["pte"])  # llama::*, torchao::* … (passes.oplibs)
            if stage == "lower":
                _child_lower(job)
            else:
                if job["debug"] and job["debug_buffer_size"] is None:
                    job["debug_buffer_size"] = debug_buffer_bytes(job["pte"], job["runs"])
                    proto.write(f"size {job['debug_buffer_size']}\n")
                _child_run(job, proto)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises an EtlensError
        import traceback

        traceback.print_exc()
        text = str(exc).strip()
        with open(os.path.join(os.path.dirname(job_path), "error.json"), "w", encoding="utf-8") as f:
            json.dump({"type": type(exc).__name__, "message": text.splitlines()[0] if text else "",
                       "traceback": traceback.format_exc()}, f)
        sys.stderr.flush()
        return False
    return True


def _Recording(inner: Any, path: str) -> Any:  # noqa: N802 - builds an instance, reads as a class
    """A partitioner that behaves as ``inner`` and first writes the program's output names to ``path``.

    The names are the edge dialect's (``aten__softmax_default``), the ones a backend's error
    message uses; written before partitioning, so they survive the backend refusing the graph.
    """
    from executorch.exir.backend.partitioner import Partitioner

    class Recording(Partitioner):
        def __init__(self) -> None:
            super().__init__(getattr(inner, "spec", {}))

        def __getattr__(self, name: str) -> Any:
            return getattr(inner, name)

        def ops_to_not_decompose(self, ep: Any) -> Any:
            return inner.ops_to_not_decompose(ep)

        def transform_for_pre_decomposition(self, ep: Any) -> Any:
            return inner.transform_for_pre_decomposition(ep)

        def partition(self, exported_program: Any) -> Any:
            args = _user_outputs(exported_program)
            record = [{"name": getattr(a, "name", None),
                       "target": str(getattr(getattr(a, "target", None), "__name__", "")),
                       "args": [i.name for i in getattr(a, "all_input_nodes", [])]} for a in args]
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"outputs": record}, f)
            return inner.partition(exported_program)

    return Recording()


def _user_outputs(ep: Any) -> list:
    """The output node's arguments that are the program's user outputs (not buffer mutations, which come first)."""
    out = next(n for n in ep.graph_module.graph.nodes if n.op == "output")
    args = list(out.args[0]) if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
    specs = getattr(ep.graph_signature, "output_specs", None)
    if specs is None or len(specs) != len(args):
        return args
    return [a for a, spec in zip(args, specs) if getattr(spec.kind, "name", "") == "USER_OUTPUT"]


def _describe_delegates(ep: Any, path: str) -> None:
    """Add to the record at ``path`` which delegate (backend id, index) computes each program output."""
    gm = ep.graph_module
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and "executorch_call_delegate" in str(n.target)]
    index = {n: i for i, n in enumerate(calls)}
    args = _user_outputs(ep)
    record: dict[str, Any] = {"outputs": [{} for _ in args]}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    for slot, a in zip(record["outputs"], args):
        call = a if a in index else (a.args[0] if getattr(a, "op", None) == "call_function" and a.args and
                                     a.args[0] in index else None)
        lowered = getattr(gm, call.args[0].target, None) if call is not None else None
        slot["backend"] = str(getattr(lowered, "backend_id", "delegate")) if call is not None else None
        slot["delegate"] = index[call] if call is not None else None
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f)


def _child_run(job: dict[str, Any], proto: Any) -> None:
    import torch
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    from .inputs import flatten_inputs

    flat = flatten_inputs(torch.load(job["inputs"], weights_only=True))  # the runtime takes a flat list
    with open(job["pte"], "rb") as f:
        program = f.read()
    module = _load_for_executorch_from_buffer(program, enable_etdump=bool(job["etdump"]),
                                              debug_buffer_size=job["debug_buffer_size"] if job["debug"] else 0)
    outputs = None
    for i in range(job["runs"]):
        outputs = module.forward(flat)
        proto.write(f"run {i}\n")
    if job["debug"]:
        module.write_etdump_result_to_file(job["etdump"], job["debug"])
    elif job["etdump"]:
        module.write_etdump_result_to_file(job["etdump"])
    torch.save(list(outputs or []), job["outputs"])


def _child_lower(job: dict[str, Any]) -> None:
    import torch
    from executorch.exir import to_edge_transform_and_lower

    from ..readers.exported import load_exported_program
    from .backends import get_backend

    cfg = get_backend(job["backend"])
    cfg.check_available()
    ep = load_exported_program(job["ep"])  # registers the pytree types of its inputs/outputs first
    partitioners = cfg.partitioners()
    if job.get("describe"):
        partitioners = [_Recording(partitioners[0], job["describe"]), *partitioners[1:]] if partitioners else []
    # ExecuTorch's default edge compile config, as the fixtures and reports have always been built
    edge = to_edge_transform_and_lower(ep, partitioner=partitioners, generate_etrecord=bool(job.get("etrecord")))
    if job.get("describe"):
        _describe_delegates(edge.exported_program(), job["describe"])
    et = edge.to_executorch()
    with open(job["pte"], "wb") as f:
        f.write(et.buffer)
    if not job.get("etrecord"):
        return
    record = et.get_etrecord()
    if job.get("representative_inputs"):
        record.update_representative_inputs([tuple(torch.load(job["representative_inputs"], weights_only=True))])
    record.save(job["etrecord"])
