"""Measured memory beside the plan: the process's peak, stage by stage, split by owner.

The plan (:mod:`etlens.analysis.memory`) says what the memory planner reserved; the process uses
more: the interpreter and the runtime's libraries, the program's bytes (mapped from the file or
copied into memory), what each delegate allocates for itself when it initialises (XNNPACK, for
one, packs the weights of its linear and convolution nodes into buffers of its own), temporaries
while running, and the allocator's own overhead. :func:`measured_memory` takes the samples of the
``memory-measure`` job (:mod:`etlens.builder.jobs_memory`: ``VmRSS``, each stage's own ``VmHWM``,
the ``.pte``'s resident mapped bytes, glibc's heap counters) and the parsed program, and returns:

* ``peak_rss_bytes``: the highest resident set of the process (the largest stage peak);
* ``stages``: ``{stage, rss_bytes, peak_rss_bytes, heap_bytes, …}`` in order;
* ``owners``: ``{owner, bytes, inferred, reason}`` that add up to the peak. An owner read off one
  counter is measured (``inferred: false``); one that needs an assumption says so
  (``inferred: true``) and its ``reason`` names the assumption. The last owner, *runtime and
  allocator overhead*, is what the others leave of the peak;
* ``largest``: the largest owner after the libraries, with the reason in one sentence;
* ``plan_bytes`` (the planned arenas of the method), ``plan_vs_actual``: the difference explained;
* ``dynamic`` (programs whose inputs have dynamic shapes): the plan's upper bound against what the
  run at the given shape needs (planned tensors scaled by the inputs' size ratio; inferred).

How the owners are found (``L`` = end of the ``imports`` stage, ``M`` = end of ``method load``):

=====================================  ======================================================
owner                                  evidence
=====================================  ======================================================
interpreter and runtime libraries      ``VmRSS`` at ``L`` minus the inputs' bytes
inputs                                 the input tensors' bytes
program copied into memory (buffer)    the file's size (the bytes read before loading)
program mapped from the file (mmap)    resident bytes of the ``.pte``'s mappings (``smaps``)
planned arena                          the plan's arena bytes (the heap grows by them at load)
delegate ``<id>`` init                 heap growth ``L`` -> ``M`` minus the arena and the copy;
                                       split between delegates by their data bytes (inferred)
transient during ``<stage>``           the stage's ``VmHWM`` minus its end ``VmRSS``: memory
                                       held and released within the stage
run growth                             resident growth after ``M`` not from the mapped file
=====================================  ======================================================

Example::

    from etlens.builder.jobs_memory import measure_program
    from etlens.analysis.memory_measured import input_specs, measured_memory
    from etlens.readers.pte import read
    art = read("model.pte")
    raw = measure_program("model.pte", input_specs=input_specs(art.program))
    m = measured_memory(raw, art.program, file_size=art.program.file_size)
    m["peak_rss_bytes"], m["largest"]["reason"]
"""

from __future__ import annotations

from typing import Any

from ..errors import EtlensError

__all__ = ["input_specs", "measured_memory", "need_at_shape", "parse_shapes", "STATIC"]

#: ``TensorShapeDynamism.STATIC``; other values mean the sizes in the program are upper bounds
STATIC = 0
_MB = 1024 * 1024


def _plan(program: Any, method: str) -> Any:
    for p in program.execution_plan:
        if p.name == method:
            return p
    raise EtlensError(f"no method {method!r} in the program; methods: "
                      f"{', '.join(p.name for p in program.execution_plan)}")


def parse_shapes(text: str | None) -> list[list[int]] | None:
    """``"1x8x16;1x4"`` (one shape per tensor input, ``;`` between inputs) -> ``[[1, 8, 16], [1, 4]]``."""
    if not text:
        return None
    try:
        return [[int(d) for d in part.replace(",", "x").split("x") if d.strip()] for part in text.split(";")]
    except ValueError:
        raise EtlensError(f"--shapes {text!r}: write one shape per input, e.g. '1x128x256;1x4'") from None


def input_specs(program: Any, method: str = "forward", shapes: list[list[int]] | None = None) -> list[dict[str, Any]]:
    """What the measuring child makes for each input of ``method``: ``{"dtype", "shape", "upper_bound",
    "dynamic"}`` for a tensor (shape from ``shapes`` when given, else the program's sizes, which are the
    upper bounds of dynamic inputs) or ``{"value": v}`` for a scalar input."""
    plan = _plan(program, method)
    out: list[dict[str, Any]] = []
    k = 0
    for vi in plan.inputs:
        v = plan.values[vi]
        if v.kind != "tensor":
            val = v.val if v.kind in ("int", "bool", "double") else None
            out.append({"value": val})
            continue
        t = v.val
        shape = list(t.sizes)
        if shapes is not None and k < len(shapes):
            given = shapes[k]
            if len(given) != len(shape):
                raise EtlensError(f"--shapes: input {k} has {len(shape)} dimensions {shape}, not {given}")
            if any(g > u for g, u in zip(given, shape)):
                raise EtlensError(f"--shapes: input {k} shape {given} exceeds the program's upper bound {shape}")
            shape = list(given)
        out.append({"dtype": t.dtype, "shape": shape, "upper_bound": list(t.sizes),
                    "dynamic": int(t.shape_dynamism) != STATIC})
        k += 1
    return out


def _numel(shape: Any) -> int:
    n = 1
    for s in shape:
        n *= max(int(s), 0)
    return n


def need_at_shape(method_memory: Any, plan: Any, ratio: float) -> tuple[int, int]:
    """``(live peak at the upper bound, live peak at the run's shape)`` of a method's planned tensors.

    Tensors whose shape is dynamic are scaled by ``ratio`` (the run's input elements over the upper
    bound's); tensors at the same arena offset live at once count once (views share their base).
    """
    def peak(scale: float) -> int:
        n = len(method_memory.instructions) or 1
        best = 0
        for i in range(n):
            spots: dict[tuple[int, int], int] = {}
            for t in method_memory.tensors:
                if t.first <= i <= t.last or t.first < 0:
                    tv = plan.values[t.value].val
                    dyn = getattr(tv, "shape_dynamism", STATIC) != STATIC
                    size = int(t.size * scale) if dyn else t.size
                    key = (t.arena, t.offset)
                    spots[key] = max(spots.get(key, 0), size)
            best = max(best, sum(spots.values()))
        return best

    return peak(1.0), peak(ratio)


def _delegate_data(program: Any, plan: Any) -> list[tuple[str, int]]:
    """``[(delegate id, bytes of its data in the program)]``: its payload plus, split by payload size
    when several delegates share them, the program's named data (where delegates keep constants)."""
    dels = [(d.id, int(d.payload_size)) for d in plan.delegates]
    if not dels:
        return []
    named = 0
    segs = program.segments
    for nd in program.named_data:
        if 0 <= nd.segment_index < len(segs):
            named += int(segs[nd.segment_index].size)
    total_payload = sum(b for _, b in dels) or 1
    return [(i, b + round(named * b / total_payload)) for i, b in dels]


def _init_reason(delegate_id: str, alloc: int, data: int) -> str:
    """The sentence for one delegate's init allocation; a backend's ``memory`` hook may say more
    (``init_note(delegate_id, alloc_bytes, data_bytes) -> str | None``)."""
    try:
        from ..backends import for_delegate, hook

        backend = for_delegate(delegate_id)
        if backend is not None and "memory" in backend.hooks:
            note = getattr(hook(backend, "memory"), "init_note", None)
            if note is not None:
                text = note(delegate_id, alloc, data)
                if text:
                    return str(text)
    except (ImportError, EtlensError):
        pass
    ratio = f" ({alloc / data:.2f}x its {data / _MB:.1f} MB of data in the program)" if data else ""
    return (f"{delegate_id} allocated {alloc / _MB:.1f} MB for itself at init{ratio}: a copy of its constants "
            "in its own layout (packed weights) and workspaces")


def _owner(owner: str, nbytes: int, inferred: bool, reason: str) -> dict[str, Any]:
    return {"owner": owner, "bytes": int(nbytes), "inferred": bool(inferred), "reason": reason}


def measured_memory(raw: dict[str, Any], program: Any, *, method_memory: Any = None, file_size: int | None = None,
                    specs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The ``measured`` record of ``etlens memory --measure`` from the job's samples (see the module doc).

    ``method_memory``: the plan of the measured method (:class:`etlens.analysis.memory.MethodMemory`),
    needed for the dynamic-shape comparison; ``specs``: the inputs made (:func:`input_specs`).
    """
    stages = {s["stage"]: s for s in raw["stages"]}
    order = [s["stage"] for s in raw["stages"]]
    method = raw.get("method", "forward")
    plan = _plan(program, method)
    plan_bytes = int(sum(plan.non_const_buffer_sizes))
    load = raw.get("load", "mmap")
    size = int(file_size if file_size is not None else program.file_size or 0)

    def at(name: str, key: str) -> int:
        v = stages.get(name, {}).get(key)
        return int(v) if v is not None else 0

    peaks = {n: max(at(n, "peak_rss_bytes"), at(n, "rss_bytes")) for n in order}
    peak_stage = max(order, key=lambda n: peaks[n])
    peak = peaks[peak_stage]
    idx = order.index(peak_stage)

    def reached(name: str) -> bool:
        return name in order and order.index(name) <= idx

    inputs = int(raw.get("input_bytes", 0))
    owners = [_owner("interpreter and runtime libraries (python, torch, ExecuTorch)",
                     at("imports", "rss_bytes") - inputs if reached("imports") else at(order[0], "rss_bytes"),
                     False, "resident after importing torch and the runtime, before the program")]
    if reached("imports") and inputs:
        owners.append(_owner("inputs", inputs, False, "the input tensors made for the run"))
    loaded = reached("method load")
    heap_growth = at("method load", "heap_bytes") - at("imports", "heap_bytes") if loaded else 0
    if reached("program load"):
        if load == "buffer":
            owners.append(_owner("program copied into memory (constants copied)", size, False,
                                 f"the {size / _MB:.1f} MB file read into a buffer the runtime reads its constants "
                                 "from"))
            if raw.get("data"):
                ext = at(peak_stage, "pte_resident_bytes")
                owners.append(_owner("external constants mapped from the .ptd", ext, False,
                                     f"{ext / _MB:.1f} MB of {raw['data']} resident in its mapping"))
        else:
            mapped = at(peak_stage, "pte_resident_bytes")
            ptd = f" + {int(raw.get('data_bytes') or 0) / _MB:.1f} MB .ptd" if raw.get("data") else ""
            owners.append(_owner("program mapped from the file (constants mapped)", mapped, False,
                                 f"{mapped / _MB:.1f} MB of the {size / _MB:.1f} MB .pte{ptd} resident in its mapping "
                                 "(file-backed: the kernel can drop and re-read clean pages)"))
    arena = plan_bytes if reached("program load") else 0
    if arena:
        owners.append(_owner("planned arena", arena, heap_growth < arena,
                             f"the plan's {arena / _MB:.2f} MB of arenas, allocated whole at load (the upper bound "
                             "for dynamic shapes)"))
    delegates: list[dict[str, Any]] = []
    if loaded:
        left = heap_growth - arena - (size if load == "buffer" else 0)
        data = _delegate_data(program, plan)
        if data and left > 0:
            total = sum(b for _, b in data) or 1
            for i, (did, b) in enumerate(data):
                share = left if len(data) == 1 else round(left * b / total)
                d = _owner(f"delegate {did} (#{i}) init: its own buffers" if len(data) > 1 else
                           f"delegate {did} init: its own buffers", share, len(data) > 1, _init_reason(did, share, b))
                d["delegate"] = did
                delegates.append(d)
                owners.append(d)
        elif left > 0:
            owners.append(_owner("program and method objects (runtime)", left, False,
                                 "heap growth while loading, beyond the arena"))
    if reached("first run"):
        grew = (at(peak_stage, "rss_bytes") - at("method load", "rss_bytes")
                - (at(peak_stage, "pte_resident_bytes") - at("method load", "pte_resident_bytes")))
        if grew > 0:
            owners.append(_owner("run: outputs, kernel scratch, thread pool", grew, False,
                                 "resident growth once the program runs (not from the mapped file)"))
    transient = peak - at(peak_stage, "rss_bytes")
    if transient > 0:
        why = {"imports": "import-time temporaries of torch and the runtime, released before the program loads",
               "program load": "memory held while the program was parsed and verified, released after",
               "method load": ("program data read while the delegates initialised (mapped or copied), released once "
                               "they had made their own copy" if load == "mmap" else
                               "buffers held while the delegates initialised, released after"),
               "first run": "temporaries while the program ran (kernel scratch, intermediate copies)",
               "steady runs": "temporaries while the program ran (kernel scratch, intermediate copies)"}
        owners.append(_owner(f"transient during {peak_stage}", transient, True,
                             why.get(peak_stage, "held and released within the stage") +
                             " (the stage's VmHWM above its end VmRSS)"))
    rest = peak - sum(o["bytes"] for o in owners)
    owners.append(_owner("runtime and allocator overhead", max(rest, 0), True,
                         "what the owners above leave of the peak: runtime objects, allocator slack, page rounding"
                         + ("" if rest >= 0 else f" (the owners above overcount by {-rest / _MB:.1f} MB)")))
    doc: dict[str, Any] = {
        "peak_rss_bytes": peak, "peak_stage": peak_stage, "load": load, "method": method,
        "stages": [{"stage": s["stage"], "rss_bytes": s.get("rss_bytes"), "peak_rss_bytes": s.get("peak_rss_bytes"),
                    "heap_bytes": s.get("heap_bytes"), "anon_bytes": s.get("anon_bytes"),
                    "file_bytes": s.get("file_bytes"), "pte_resident_bytes": s.get("pte_resident_bytes")}
                   for s in raw["stages"]],
        "owners": owners, "plan_bytes": plan_bytes, "file_bytes": size,
        "input_shapes": raw.get("input_shapes"), "runs": raw.get("runs"),
    }
    doc["largest"] = _largest(owners)
    doc["delegate_init_bytes"] = sum(d["bytes"] for d in delegates)
    doc["plan_vs_actual"] = _plan_vs_actual(doc, at("imports", "rss_bytes"))
    if specs is not None:
        dyn = _dynamic(specs, raw, method_memory, plan, plan_bytes)
        if dyn is not None:
            doc["dynamic"] = dyn
    return doc


def _largest(owners: list[dict[str, Any]]) -> dict[str, Any]:
    """The largest owner the program brings (the libraries are there for any program)."""
    mine = [o for o in owners[1:] if o["bytes"] > 0] or owners
    top = max(mine, key=lambda o: o["bytes"])
    return {"owner": top["owner"], "bytes": top["bytes"], "reason": f"{top['owner']}: {top['bytes'] / _MB:.1f} MB — "
            f"{top['reason']}"}


def _plan_vs_actual(doc: dict[str, Any], libs: int) -> dict[str, Any]:
    """The program's own memory (peak minus the libraries) against the plan, and why they differ."""
    own = doc["peak_rss_bytes"] - libs
    by = {o["owner"]: o["bytes"] for o in doc["owners"]}
    parts = [f"{o['owner']} {o['bytes'] / _MB:.1f} MB" for o in doc["owners"][1:]
             if o["bytes"] >= _MB // 4 and o["owner"] != "planned arena"]
    text = (f"the plan reserves {doc['plan_bytes'] / _MB:.2f} MB of arenas; the program's peak above the libraries is "
            f"{own / _MB:.1f} MB" + (f": beyond the arena, {', '.join(parts)}" if parts else ""))
    return {"plan_bytes": doc["plan_bytes"], "program_peak_bytes": own, "beyond_plan_bytes": own - doc["plan_bytes"],
            "arena_bytes": by.get("planned arena", 0), "explained": text}


def _dynamic(specs: list[dict[str, Any]], raw: dict[str, Any], method_memory: Any, plan: Any,
             plan_bytes: int) -> dict[str, Any] | None:
    dyn = [s for s in specs if s.get("dynamic")]
    if not dyn:
        return None
    run = sum(_numel(s["shape"]) for s in dyn)
    upper = sum(_numel(s["upper_bound"]) for s in dyn) or 1
    ratio = run / upper
    out: dict[str, Any] = {
        "upper_bound_planning": True,
        "inputs": [{"input": i, "upper_bound": s["upper_bound"], "run_shape": s["shape"]}
                   for i, s in enumerate(specs) if s.get("dynamic")],
        "plan_bytes": plan_bytes, "run_to_upper_ratio": round(ratio, 6),
    }
    if method_memory is not None:
        at_upper, at_shape = need_at_shape(method_memory, plan, ratio)
        out.update({"live_peak_at_upper_bound_bytes": at_upper, "need_at_shape_bytes": at_shape, "inferred": True,
                    "explained": (f"the plan reserves {plan_bytes / _MB:.2f} MB, sized for the upper bound of the "
                                  f"dynamic inputs; at the run's shape ({ratio:.0%} of the upper bound's elements) the "
                                  f"live tensors need about {at_shape / _MB:.2f} MB (dynamic tensors scaled by that "
                                  "ratio); the arena is allocated whole at load either way")})
    return out
