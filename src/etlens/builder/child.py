"""The child side of :class:`etlens.builder.worker.Worker`: read job files, run them, answer.

Started as ``python -c "from etlens.builder.child import main; main()"``. It reads job file paths
from stdin, one a line (an empty line: stop), runs each job by its name in :data:`JOBS` and
answers on its stdout — which it keeps for the protocol alone (``stage``, ``size``, ``run``,
``done`` / ``failed``; see :mod:`etlens.builder.worker`) while anything else printed goes to stderr,
the worker's log. A Python error in a job is written to the job's ``error.json`` and answered
``failed``; the child then takes the next job. A native abort ends the child; the parent reads the
cause from the log.

Every job first loads the operator libraries it needs in one place, :func:`load_op_libraries`
(today: ExecuTorch's quantized kernels for programs with ``quantized_decomposed`` ops).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

__all__ = ["main", "JOBS", "load_op_libraries"]


def main() -> None:
    """Serve jobs until stdin ends or an empty line arrives, then exit at once (``os._exit``).

    Module names given as arguments are imported first (the worker's ``prewarm``), while the
    parent is still busy; an import error is left for the job that needs the module to report.
    """
    import importlib

    from ..model.spans import set_sink, span

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # keep stdout for the protocol; stray prints go to the log
    # ETLENS_TIMING: this child's stages go to the parent as protocol lines (etlens.model.spans)
    set_sink(lambda label, start, wall, cpu: proto.write(f"time {label} {start:.6f} {wall:.6f} {cpu:.6f}\n"))
    for name in sys.argv[1:]:
        try:
            with span(f"import {name}"):
                importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the job that needs it reports the error
            pass
    proto.write("ready\n")  # imports done: Worker.ready() (the parent may race two children)
    for line in sys.stdin:
        job_path = line.strip()
        if not job_path:
            break
        proto.write("done\n" if run_job_file(job_path, proto) else "failed\n")
    proto.close()
    sys.stdout.flush()
    sys.stderr.flush()
    # no interpreter teardown: with torch + ExecuTorch loaded it costs ~3 s of CPU, and the parent
    # waits for this exit (every job's files are written and closed before its "done")
    os._exit(0)


def run_job_file(job_path: str, proto: Any) -> bool:
    """Run the job at ``job_path``; on a Python error write its ``error.json`` and return False."""
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    from ..model.spans import span

    try:
        proto.write(f"stage {job['job']}\n")
        with span(f"{job['job']}/op libraries"):
            load_op_libraries(job)
        with span(job["job"]):
            result = JOBS[job["job"]](job, proto)
        with open(job["result"], "w", encoding="utf-8") as f:
            json.dump(result or {}, f)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises an EtlensError
        import traceback

        traceback.print_exc()
        text = str(exc).strip()
        with open(job["error"], "w", encoding="utf-8") as f:
            json.dump({"type": type(exc).__name__, "message": text.splitlines()[0] if text else "",
                       "traceback": traceback.format_exc()}, f)
        sys.stderr.flush()
        return False
    return True


def load_op_libraries(job: dict[str, Any]) -> None:
    """Load the operator libraries ``job`` needs before it lowers or runs anything (the one place).

    ``job["quantized"]``: ``True`` loads ExecuTorch's quantized kernels (``quantized_decomposed``
    out variants; needed to lower and to run int8 programs). Then :func:`etlens.builder.oplibs.load_for`
    loads whatever the program to lower (``ep``) or to run (``pte``) calls (``llama::*``,
    ``torchao::*``, ``quantized_decomposed::*`` …).
    """
    from . import oplibs

    oplibs.load(["executorch.kernels.quantized"] if job.get("quantized") else [])
    program = {"lower": job.get("ep"), "trace-lowering": job.get("ep"), "run": job.get("pte")}.get(job["job"])
    if program:
        oplibs.load_for(program)


# ---------------------------------------------------------------------------------------------
# lower
# ---------------------------------------------------------------------------------------------
def _tracer(trace_job: dict[str, Any], cfg: Any, proto: Any) -> Any:
    """The parent's partial trace (``quantize`` / ``export`` snapshots), resumed here."""
    from ..model.trace import Trace
    from ..passes.tracer import PipelineTracer
    from .lower import ProtocolBar

    t = PipelineTracer.resume(cfg, Trace.load(trace_job["seed"]), trace_job["ids"],
                              record_times=trace_job.get("record_times", True))
    t._bar = ProtocolBar(proto)  # each recorded stage: a "stage trace:<name>" line for the parent
    return t


def lower(job: dict[str, Any], proto: Any) -> dict[str, Any]:
    """Lower the saved ExportedProgram (:func:`etlens.builder.lower.lower_program`, the one lowering);
    with ``trace``, the pass tracer records its snapshots during this lowering."""
    import torch

    from ..model.spans import span
    from ..readers.exported import load_exported_program
    from .lower import lower_program
    from .toolchain import backend_config

    cfg = backend_config(job["backend"])
    with span("lower/load program"):
        ep = load_exported_program(job["ep"])  # registers the pytree types of its inputs/outputs first
    trace_job = job.get("trace")
    rep = job.get("representative_inputs")
    return lower_program(ep, cfg, job["pte"], etrecord=job.get("etrecord"),
                         representative_inputs=tuple(torch.load(rep, weights_only=True)) if rep else None,
                         quantized=bool(job.get("quantized")),
                         tracer=_tracer(trace_job, cfg, proto) if trace_job else None,
                         trace_output=trace_job["output"] if trace_job else None,
                         describe=job.get("describe"), proto=proto)


def trace(job: dict[str, Any], proto: Any) -> dict[str, Any]:
    """``etlens trace``'s lowering (:func:`etlens.builder.lower.trace_lowering`): the tracer's stages after
    ``export``, recorded into ``trace["output"]``; a ``.pte`` only when the backend's passes emit one."""
    from ..readers.exported import load_exported_program
    from .lower import trace_lowering
    from .toolchain import backend_config

    cfg = backend_config(job["backend"])
    ep = load_exported_program(job["ep"])
    return trace_lowering(ep, cfg, _tracer(job["trace"], cfg, proto), quantize_io=bool(job.get("quantize_io")),
                          lower=bool(job.get("lower", True)), pte=job.get("pte"), trace_output=job["trace"]["output"])


# ---------------------------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------------------------
def run(job: dict[str, Any], proto: Any) -> dict[str, Any]:
    """Run the ``.pte`` ``runs`` times with ETDump (+ debug buffer); save the last outputs."""
    import torch
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    from ..model.spans import span
    from .debug_buffer import debug_buffer_bytes, trim_debug_buffer

    size = job.get("debug_buffer_size")
    if job.get("debug") and size is None:
        with span("run/size debug buffer"):
            size = debug_buffer_bytes(job["pte"], job["runs"])
        proto.write(f"size {size}\n")
    from .inputs import flatten_inputs

    flat = flatten_inputs(torch.load(job["inputs"], weights_only=True))  # the runtime takes a flat list
    with open(job["pte"], "rb") as f:
        program = f.read()  # kept alive: the runtime reads from this buffer without copying it
    with span("run/load method"):
        module = _load_for_executorch_from_buffer(program, enable_etdump=bool(job.get("etdump")),
                                                  debug_buffer_size=size if job.get("debug") else 0)
    outputs = None
    with span("run/forward x runs"):
        for i in range(job["runs"]):
            outputs = module.forward(flat)
            proto.write(f"run {i}\n")
    if job.get("debug"):
        with span("run/write etdump"):
            module.write_etdump_result_to_file(job["etdump"], job["debug"])
        with span("run/trim debug buffer"):
            trim_debug_buffer(job["etdump"], job["debug"])
    elif job.get("etdump"):
        module.write_etdump_result_to_file(job["etdump"])
    torch.save(list(outputs or []), job["outputs"])
    return {"debug_buffer_size": size}


# ---------------------------------------------------------------------------------------------
# bundled-run, list-operators
# ---------------------------------------------------------------------------------------------
def bundled_run(job: dict[str, Any], proto: Any) -> dict[str, Any]:
    """Run every case of ``work/cases.json``; one JSON line per case in ``work/results.jsonl``."""
    import numpy as np
    import torch
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    work = job["work"]
    with open(os.path.join(work, "program.pte"), "rb") as f:
        program = f.read()  # kept alive: the runtime reads from this buffer without copying it
    module = _load_for_executorch_from_buffer(program)
    with open(os.path.join(work, "cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    arrays = np.load(os.path.join(work, "cases.npz"))
    with open(os.path.join(work, "results.jsonl"), "a", encoding="utf-8") as out:
        for case in cases:
            s, c = case["suite"], case["index"]
            inputs = [torch.from_numpy(arrays[f"in_{s}_{c}_{k}"]) if spec["kind"] == "tensor" else spec["value"]
                      for k, spec in enumerate(case["inputs"])]
            try:
                outs = module.run_method(case["method"], inputs)
            except Exception as exc:  # noqa: BLE001 - reported per case to the parent
                out.write(json.dumps({"suite": s, "index": c, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
                out.flush()
                continue
            saved = {f"o{k}": o.detach().numpy() if hasattr(o, "detach") else np.asarray(o) for k, o in enumerate(outs)}
            np.savez(os.path.join(work, f"out_{s}_{c}.npz"), **saved)
            out.write(json.dumps({"suite": s, "index": c, "outputs": len(saved)}) + "\n")
            out.flush()
    return {"cases": len(cases)}


def list_operators(job: dict[str, Any], proto: Any) -> dict[str, Any]:
    """The operator names the runtime has kernels for (``aten::add.out``)."""
    from executorch.extension.pybindings import portable_lib

    return {"operators": sorted(portable_lib._get_operator_names())}


def llm_run(job: dict[str, Any], proto: Any) -> dict[str, Any]:
    """An LLM ``.pte`` fed tokens with teacher forcing, logits per position (:mod:`etlens.builder.jobs_llm`)."""
    from .jobs_llm import llm_run_job

    return llm_run_job(job, proto)


def memory_measure(job: dict[str, Any], proto: Any) -> dict[str, Any]:
    """A program's memory stage by stage, in this (fresh) child (:mod:`etlens.builder.jobs_memory`)."""
    from .jobs_memory import memory_measure_job

    return memory_measure_job(job, proto)


#: job name -> function(job, protocol stream) -> result dict
JOBS: dict[str, Callable[[dict[str, Any], Any], dict[str, Any]]] = {
    "lower": lower, "trace-lowering": trace, "run": run, "bundled-run": bundled_run, "list-operators": list_operators,
    "llm-run": llm_run, "memory-measure": memory_measure,
}
