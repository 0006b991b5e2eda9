"""The ``memory-measure`` job: a program's memory as the process sees it, stage by stage.

Runs in a *fresh* worker child (:func:`measure_program` starts one for this job alone), so nothing
else the parent or an earlier job did counts. The child samples itself at each stage:

``start``         the interpreter and etlens' child loop, nothing else imported
``imports``       after ``import torch`` and ExecuTorch's runtime (``portable_lib``), the operator
                  libraries the program calls, and the inputs made
``program load``  after ``_load_program`` (the file mapped: ``mmap``) or ``_load_program_from_buffer``
                  (the file read into memory first: ``buffer``)
``method load``   after ``load_method``: planned arenas allocated, every delegate initialised
``first run``     after the first ``execute``
``steady runs``   after ``runs - 1`` more

At each stage: ``VmRSS`` and the stage's own peak (``VmHWM``, reset at the stage's start by writing
``5`` to ``/proc/self/clear_refs``, so a stage's peak is its own), anonymous vs file-backed resident
bytes (``/proc/self/smaps_rollup``), the resident bytes of the ``.pte``'s own mappings
(``/proc/self/smaps``) and the heap in use from glibc's own counters (``mallinfo2``: ``uordblks`` +
``hblkhd``, the small-chunk arena and the ``mmap``-ed large chunks). Where a counter is not
available (another libc, another OS) its field is ``None``.

The result is raw numbers; :mod:`etlens.analysis.memory_measured` splits them by owner.
"""

from __future__ import annotations

import os
import time
from typing import Any

__all__ = ["memory_measure_job", "measure_program", "sample", "reset_peak", "heap_in_use", "make_inputs"]

_KB = 1024


def _status() -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                    out[key] = int(rest.split()[0]) * _KB
    except OSError:
        pass
    return out


def _smaps_for(path: str | None, *more: str | None) -> int | None:
    """Resident bytes of the mappings of ``path`` (the ``.pte`` when the runtime mapped it) and of ``more``
    (its ``.ptd`` data file)."""
    real = {os.path.realpath(p) for p in (path, *more) if p}
    if not real:
        return None
    total = 0
    inside = False
    try:
        with open("/proc/self/smaps", encoding="utf-8", errors="replace") as f:
            for line in f:
                head = line.split(None, 5)
                if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
                    inside = len(head) == 6 and head[5].strip() in real
                elif inside and line.startswith("Rss:"):
                    total += int(line.split()[1]) * _KB
    except OSError:
        return None
    return total


class _Mallinfo2(__import__("ctypes").Structure):
    _fields_ = [(name, __import__("ctypes").c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


_MALLINFO: Any = False


def heap_in_use() -> int | None:
    """Bytes the C heap has handed out and not taken back (glibc ``mallinfo2``); ``None`` without glibc."""
    global _MALLINFO
    if _MALLINFO is False:
        import ctypes
        import ctypes.util

        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            fn = libc.mallinfo2
            fn.restype = _Mallinfo2
            _MALLINFO = fn
        except (OSError, AttributeError):
            _MALLINFO = None
    if _MALLINFO is None:
        return None
    info = _MALLINFO()
    return int(info.uordblks + info.hblkhd)


def reset_peak() -> bool:
    """Reset this process's ``VmHWM`` to its current ``VmRSS`` (Linux >= 4.0); False when not allowed."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def sample(stage: str, pte: str | None = None, started: float | None = None, data: str | None = None) -> dict[str, Any]:
    """The process's memory now: ``{stage, rss_bytes, peak_rss_bytes, anon_bytes, file_bytes,
    heap_bytes, pte_resident_bytes, seconds}`` (``pte_resident_bytes``: the mapped ``pte`` and ``data``)."""
    st = _status()
    return {"stage": stage, "rss_bytes": st.get("VmRSS"), "peak_rss_bytes": st.get("VmHWM"),
            "anon_bytes": st.get("RssAnon"), "file_bytes": st.get("RssFile"), "heap_bytes": heap_in_use(),
            "pte_resident_bytes": _smaps_for(pte, data),
            "seconds": None if started is None else round(time.perf_counter() - started, 6)}


_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64", "i8": "int8", "u8": "uint8",
           "i16": "int16", "i32": "int32", "i64": "int64", "bool": "bool"}


def make_inputs(specs: list[dict[str, Any]]) -> list:
    """Inputs from specs ``{"dtype": "f32", "shape": [1, 8]}`` (tensors; values drawn with a fixed seed)
    or ``{"value": 3}`` (a scalar input passed as it is)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    out: list = []
    for spec in specs:
        if "value" in spec:
            out.append(spec["value"])
            continue
        dtype = getattr(torch, _DTYPES.get(spec["dtype"], spec["dtype"]))
        shape = [int(s) for s in spec["shape"]]
        if dtype.is_floating_point:
            out.append(torch.randn(shape, generator=gen).to(dtype))
        elif dtype == torch.bool:
            out.append(torch.zeros(shape, dtype=dtype))
        else:
            out.append(torch.randint(0, 2, shape, generator=gen).to(dtype))
    return out


def memory_measure_job(job: dict[str, Any], proto: Any) -> dict[str, Any]:
    """Load and run ``job["pte"]`` stage by stage, sampling memory after each (see the module docstring).

    ``job``: ``pte``, ``data`` (a ``.ptd`` with the program's external constants, or None), ``load``
    (``"mmap"`` or ``"buffer"``), ``method`` (default ``forward``), ``runs``
    (>= 1: the first run plus ``runs - 1`` steady runs), ``inputs`` (a ``torch.save`` file of a list)
    or ``input_specs`` (see :func:`make_inputs`).
    """
    t0 = time.perf_counter()
    pte = job["pte"]
    load = job.get("load") or "mmap"
    ptd = job.get("data") or None
    stages: list[dict[str, Any]] = []
    resettable = reset_peak()

    def stage(name: str) -> None:
        stages.append(sample(name, pte if load == "mmap" else None, t0, ptd))
        proto.write(f"stage memory:{name}\n")
        reset_peak()

    stage("start")
    import torch
    from executorch.extension.pybindings import portable_lib

    from . import oplibs
    from .inputs import flatten_inputs

    oplibs.load(["executorch.kernels.quantized"] if job.get("quantized") else [])
    oplibs.load_for(pte)
    if job.get("inputs"):
        inputs = flatten_inputs(torch.load(job["inputs"], weights_only=True))
    else:
        inputs = make_inputs(job.get("input_specs") or [])
    input_bytes = sum(int(t.numel() * t.element_size()) for t in inputs if isinstance(t, torch.Tensor))
    stage("imports")
    if load == "buffer":
        with open(pte, "rb") as f:
            data = f.read()  # kept alive: the runtime reads constants from this buffer without copying
        program = portable_lib._load_program_from_buffer(data, data_path=ptd)
    else:
        data = None
        program = portable_lib._load_program(pte, data_path=ptd)
    stage("program load")
    method_name = job.get("method") or "forward"
    method = program.load_method(method_name)
    stage("method load")
    outputs = method.call(inputs)
    stage("first run")
    for _ in range(max(0, int(job.get("runs", 1)) - 1)):
        outputs = method.call(inputs)
    stage("steady runs")
    output_bytes = sum(int(t.numel() * t.element_size()) for t in outputs if isinstance(t, torch.Tensor))
    shapes = [list(t.shape) for t in inputs if isinstance(t, torch.Tensor)]
    del data
    return {"stages": stages, "load": load, "method": method_name, "data": ptd,
            "data_bytes": os.path.getsize(ptd) if ptd else 0, "peak_resettable": resettable,
            "input_bytes": input_bytes, "output_bytes": output_bytes, "input_shapes": shapes,
            "runs": int(job.get("runs", 1)), "pid": os.getpid()}


def measure_program(pte: str, *, load: str = "mmap", runs: int = 3, method: str = "forward", data: str | None = None,
                    inputs: Any = None, input_specs: list[dict[str, Any]] | None = None,
                    quantized: bool | None = None, verbose: bool = False) -> dict[str, Any]:
    """Job ``memory-measure`` on ``pte`` in a worker child started for it alone (nothing else counts).

    ``data``: the ``.ptd`` holding the program's external constants (mapped, or read with the program
    under ``load="buffer"``; the runtime maps it in both cases). ``inputs``: the model's positional
    arguments (saved for the child), else ``input_specs`` (see
    :func:`make_inputs`). Returns the job's result: ``stages`` (one sample each, see :func:`sample`),
    ``input_bytes``, ``output_bytes``, ``input_shapes``, ``load``, ``runs``.
    """
    from .worker import Worker, save_inputs

    if load not in ("mmap", "buffer"):
        from ..errors import EtlensError

        raise EtlensError(f"load mode {load!r}: use 'mmap' (the runtime maps the file) or 'buffer' (read into memory)")
    with Worker(verbose=verbose, warm=False) as w:  # measures its own child: never a warm one
        work = w.workdir()
        params: dict[str, Any] = {"pte": os.path.abspath(pte), "load": load, "runs": max(1, int(runs)),
                                  "data": os.path.abspath(data) if data else None,
                                  "method": method, "input_specs": input_specs or [], "quantized": quantized}
        if inputs is not None:
            params["inputs"] = save_inputs(inputs, os.path.join(work, "inputs.pt"))
        return w.submit("memory-measure", params, work=work, facts={"runs": runs})
