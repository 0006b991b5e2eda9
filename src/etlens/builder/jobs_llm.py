"""Worker job ``llm-run``: an LLM ``.pte`` fed a token sequence with teacher forcing, logits per position.

The job runs in the worker's child (:mod:`etlens.builder.child`; the runtime aborts the process on
some errors, never the user's). It reads the ``forward`` method's input specs to decide how to feed:

* **KV cache** (two inputs, ``tokens [1, S]`` and ``input_pos [1]``, as ``export_llama -kv`` writes):
  one token per call at ``input_pos = i`` (prefill then decode, step by step); works for static
  (``S == 1``) and dynamic shapes. With dynamic shapes the whole prompt is then prefilled once more
  in one call, for the prefill time (by a second instance without ETDump: it is not in the dump);
* **no KV cache** (one input, ``tokens [1, S]``): the whole sequence in one call (every position's
  intermediate outputs; every position's logits when the program returns them all), else the
  growing prefix ``t[0..i]`` per call for the other positions' logits (``logits_only`` runs).

The child loads the operator libraries the program calls (``llama::custom_sdpa`` /
``update_cache``, quantized kernels: :func:`etlens.builder.oplibs.load_for`), writes the logits
(``[positions, vocab]`` float32) with ``torch.save``, and, when asked, the ETDump (+ debug buffer:
intermediate outputs, one ``RunData`` per call). The result: ``mode`` (``kv`` / ``prefix`` /
``full``), ``runs`` (per call: the positions it added and the number of tokens it was fed),
wall-clock ``load_ms``, ``call_ms`` per call and ``prefill_ms`` (+ ``prefill_tokens``).

**Free-running greedy decoding** (``generate=N``): after the teacher-forced run, a fresh instance
(no ETDump, no debug buffer: the one above is sized for its own calls) is fed the prompt the same
way (one token per call with a KV cache, so its last logits equal the teacher-forced ones) and then
decodes ``N`` tokens on its own, each step's argmax fed back (``generated`` in the result). A KV
build's ``get_max_seq_len`` method (``export_llama`` writes it) bounds prompt + ``N``; a no-KV
build is fed the whole growing sequence per step, bounded by its input's length.

Parent side::

    from etlens.builder.jobs_llm import llm_run
    with Worker() as w:
        res = llm_run(w, "model.pte", tokens, etdump="run.etdp", debug="run.bin")
    res["logits"].shape      # (len(tokens), vocab)
"""

from __future__ import annotations

import os
import time
from typing import Any, Optional, Sequence

__all__ = ["llm_run", "llm_run_job", "debug_bytes_for", "JOB_NAME"]

JOB_NAME = "llm-run"


def _input_specs(module: Any) -> list[tuple[int, tuple[int, ...]]]:
    """``(scalar type, sizes)`` of each input of ``forward`` (what the program was exported with)."""
    meta = module.method_meta("forward")
    out = []
    for i in range(meta.num_inputs()):
        t = meta.input_tensor_meta(i)
        out.append((int(t.dtype()), tuple(int(s) for s in t.sizes())))
    return out


def debug_bytes_for(pte: str, fed: Sequence[int], max_tokens: int) -> int:
    """Debug buffer for calls fed ``fed[i]`` tokens each: what the runtime logs, sized per call.

    What is logged per call (see :mod:`etlens.builder.debug_buffer`): each kernel's ``out`` tensor, every
    tensor argument of a delegate call, the outputs; 64-byte aligned. The ``.pte`` gives upper bounds
    for the ``max_tokens``-long call; a tensor with a ``max_tokens``-long dimension scales with the
    tokens a call is fed (the KV caches, ``max_seq_len`` long, do not). Twice that, plus 4 MiB: the
    runtime aborts the process when the buffer runs full, and the buffer is allocated, not written.
    """
    from ..readers.pte import read
    from ..schema import SCALAR_TYPES

    plans = [p for p in read(pte).program.execution_plan if p.name == "forward"]
    fixed = per_token = 0
    for plan in plans[:1]:
        values = plan.values

        def add(vid: int, values: list = values) -> None:
            nonlocal fixed, per_token
            if vid < 0 or vid >= len(values):
                return
            v = values[vid]
            if v.kind in ("tensor_list", "optional_tensor_list"):
                for i in v.val or ():
                    if i is not None:
                        add(i, values)
                return
            if v.kind != "tensor":
                return
            sizes = [max(int(d), 1) for d in v.val.sizes]
            info = SCALAR_TYPES.get(v.val.scalar_type)
            nbytes = (info.itemsize if info else 8)
            for d in sizes:
                nbytes *= d
            if max_tokens > 1 and max_tokens in sizes:
                per_token += nbytes // max_tokens + 64
            else:
                fixed += (nbytes + 63) // 64 * 64

        for chain in plan.chains:
            for ins in chain.instructions:
                if ins.kind == "KernelCall" and ins.args:
                    add(ins.args[-1])
                elif ins.kind == "DelegateCall":
                    for a in ins.args:
                        add(a)
        for o in plan.outputs:
            add(o)
    total = sum(fixed + per_token * max(int(t), 1) for t in fed)
    return 2 * total + (4 << 20)


def llm_run_job(job: dict[str, Any], proto: Any) -> dict[str, Any]:
    """Child side of ``llm-run`` (see the module docstring)."""
    import torch
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    from . import oplibs

    clock = {"start": time.perf_counter()}
    pte, tokens = job["pte"], [int(t) for t in job["tokens"]]
    oplibs.load_for(pte, eager=True)
    clock["oplibs"] = time.perf_counter()
    n = len(tokens)
    debug = job.get("debug")
    with open(pte, "rb") as f:
        program = f.read()  # kept alive: the runtime reads the program from this buffer
    specs = _input_specs(_load_for_executorch_from_buffer(program))  # how to feed decides the buffer's size
    max_tokens = specs[0][1][1] if specs and len(specs[0][1]) == 2 else 1
    kv = len(specs) == 2
    size = 0
    if debug:
        fed = [1] * n if kv else [n] + list(range(1, n))
        size = job.get("debug_buffer_size") or debug_bytes_for(pte, fed, max_tokens)
        proto.write(f"size {size}\n")
    t0 = time.perf_counter()
    module = _load_for_executorch_from_buffer(program, enable_etdump=bool(job.get("etdump")), debug_buffer_size=size)
    load_ms = (time.perf_counter() - t0) * 1e3
    if len(specs) not in (1, 2) or len(specs[0][1]) != 2:
        raise ValueError(f"forward takes {len(specs)} inputs {[s for _, s in specs]}; an LLM build takes "
                         "tokens [1, S] (and input_pos [1] with a KV cache)")
    if not kv and n > max_tokens:
        raise ValueError(f"{n} tokens but the program takes at most {max_tokens} per call (no KV cache)")
    if kv and job.get("max_seq_len") and n > job["max_seq_len"]:
        raise ValueError(f"{n} tokens but the KV cache holds {job['max_seq_len']} positions")

    rows: list[Any] = []
    runs: list[dict[str, Any]] = []
    call_ms: list[float] = []

    def call(inputs: tuple, positions: list[int], fed: int) -> Any:
        t = time.perf_counter()
        out = module.forward(inputs)
        call_ms.append((time.perf_counter() - t) * 1e3)
        runs.append({"positions": positions, "tokens_fed": fed})
        proto.write(f"run {len(runs) - 1}\n")
        logits = out[0]
        return logits.reshape(-1, logits.shape[-1])

    mode = "kv" if kv else "prefix"
    if kv:
        for i, tok in enumerate(tokens):
            lg = call((torch.tensor([[tok]], dtype=torch.long), torch.tensor([i], dtype=torch.long)), [i], 1)
            rows.append(lg[-1])
    else:  # the whole sequence first: every position's activations (and logits, if the program returns all)
        lg = call((torch.tensor([tokens], dtype=torch.long),), list(range(n)), n)
        if lg.shape[0] == n:
            rows, mode = list(lg), "full"
        else:  # logits of the last position only: the growing prefix for the others
            for i in range(n - 1):
                rows.append(call((torch.tensor([tokens[:i + 1]], dtype=torch.long),), [i], i + 1)[-1])
                runs[-1]["logits_only"] = True
            rows.append(lg[-1])
    logits = torch.stack([r.float() for r in rows])
    clock["calls"] = time.perf_counter()
    if job.get("etdump"):
        if debug:
            module.write_etdump_result_to_file(job["etdump"], debug)
        else:
            module.write_etdump_result_to_file(job["etdump"])
    clock["etdump"] = time.perf_counter()
    prefill_ms = None
    if kv and max_tokens > 1 and n > 1 and job.get("time_prefill", True):
        # a fresh instance without ETDump: the first one's debug buffer is sized for the steps above
        del module
        module = _load_for_executorch_from_buffer(program, enable_etdump=False, debug_buffer_size=0)
        t = time.perf_counter()
        module.forward((torch.tensor([tokens[:max_tokens]], dtype=torch.long), torch.tensor([0], dtype=torch.long)))
        prefill_ms = (time.perf_counter() - t) * 1e3
    generated = None
    if job.get("generate"):
        del module
        generated = _greedy(_load_for_executorch_from_buffer(program, enable_etdump=False, debug_buffer_size=0),
                            tokens, int(job["generate"]), kv, max_tokens)
        clock["generate"] = time.perf_counter()
    torch.save(logits, job["logits"])
    clock["end"] = time.perf_counter()
    stages = list(clock.items())
    steps = {name: round((t - prev) * 1e3, 1) for (name, t), (_, prev) in zip(stages[1:], stages[:-1])}
    return {"mode": mode, "runs": runs, "load_ms": load_ms, "call_ms": call_ms, "prefill_ms": prefill_ms,
            "prefill_tokens": min(n, max_tokens) if prefill_ms is not None else None,
            "inputs": [list(s) for _, s in specs],
            "debug_buffer_size": size or None, "child_ms": steps, "generated": generated}


def _greedy(module: Any, prompt: list[int], steps: int, kv: bool, max_tokens: int) -> list[int]:
    """``steps`` tokens decoded greedily after ``prompt`` by ``module`` alone (its own argmax fed back)."""
    import torch

    n = len(prompt)
    if kv:
        cap = None
        if "get_max_seq_len" in module.method_names():
            cap = int(module.run_method("get_max_seq_len", ())[0])
        if cap is not None and n + steps > cap:
            raise ValueError(f"{n} prompt tokens + {steps} generated exceed the KV cache's {cap} positions "
                             f"(give at most {max(cap - n, 0)} to generate, or a shorter prompt)")
    elif n + steps - 1 > max_tokens:
        raise ValueError(f"{n} prompt tokens + {steps} generated exceed the {max_tokens} tokens the program "
                         "takes per call (no KV cache)")
    seq, out = list(prompt), []

    def last_logits(res: Any) -> Any:
        lg = res[0]
        return lg.reshape(-1, lg.shape[-1])[-1]

    if kv:
        for i, tok in enumerate(prompt):  # as the teacher-forced run: one token per call
            lg = last_logits(module.forward((torch.tensor([[tok]], dtype=torch.long),
                                             torch.tensor([i], dtype=torch.long))))
        for _ in range(steps):
            nxt = int(torch.argmax(lg.float()))
            out.append(nxt)
            if len(out) == steps:
                break
            lg = last_logits(module.forward((torch.tensor([[nxt]], dtype=torch.long),
                                             torch.tensor([len(seq)], dtype=torch.long))))
            seq.append(nxt)
    else:
        for _ in range(steps):
            lg = last_logits(module.forward((torch.tensor([seq], dtype=torch.long),)))
            nxt = int(torch.argmax(lg.float()))
            out.append(nxt)
            seq.append(nxt)
    return out


def llm_run(worker: Any, pte: str, tokens: Sequence[int], *, etdump: Optional[str] = None,
            debug: Optional[str] = None, debug_buffer_size: Optional[int] = None,
            max_seq_len: Optional[int] = None, generate: int = 0) -> dict[str, Any]:
    """Parent side: submit ``llm-run`` to ``worker``; the result dict plus ``logits`` (a numpy array).

    ``generate``: tokens to decode greedily after the prompt (``res["generated"]``; 0: none)."""
    import torch

    work = worker.workdir()
    params = {"pte": os.path.abspath(pte), "tokens": [int(t) for t in tokens],
              "logits": os.path.join(work, "logits.pt"),
              "etdump": os.path.abspath(etdump) if etdump else None, "debug": os.path.abspath(debug) if debug else None,
              "debug_buffer_size": debug_buffer_size, "max_seq_len": max_seq_len,
              "generate": int(generate or 0)}
    res = worker.submit(JOB_NAME, params, work=work, facts={"runs": len(tokens)})
    res["logits"] = torch.load(params["logits"], weights_only=True).numpy()
    return res
