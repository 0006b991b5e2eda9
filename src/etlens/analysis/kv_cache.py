"""State tensors of a method: mutable buffers such as an LLM's KV cache.

A buffer the graph mutates (``k_cache`` / ``v_cache`` of ExecuTorch's LLM flow, updated in place by
``llama::update_cache``) is planned in the method's arena like any activation, but it is *state*:
it keeps its bytes from one run of the method to the next, so it is live for the whole method and
its bytes are not reusable. Counting it with the lifetime of its first and last use would call
its bytes short-lived and the arena's space around it waste.

The ``.pte`` does not flag these tensors, but two facts do:

- ExecuTorch emits the graph's placeholders first, in the graph signature's order: parameters and
  constants (constant data), then buffers, then the user inputs. A planned (non-constant) tensor
  whose value id comes before the first user input is a mutable buffer;
- the cache argument of a ``llama::update_cache`` kernel (argument 1) is one.

Names come from the ETRecord's edge program (the signature's mutated buffers, in placeholder
order: ``layers.0.attention.kv_cache.k_cache`` ...); without it, ``state[<value id>]``.

Example::

    from etlens.analysis.kv_cache import state_values, kv_summary
    ids = state_values(plan)
"""

from __future__ import annotations

import math
from typing import Any, Optional

__all__ = ["state_values", "mutated_buffer_names", "max_seq_len", "kv_summary"]

_UPDATE_OPS = ("update_cache", "update_quantized_cache")


def state_values(plan: Any) -> list[int]:
    """Value ids of the planned tensors of ``plan`` that hold state between runs, in value order."""
    out: set[int] = set()
    n = len(plan.values)

    def planned(v: int) -> bool:
        if not 0 <= v < n:
            return False
        val = plan.values[v]
        return val.kind == "tensor" and val.val is not None and val.val.allocation is not None

    for ins in plan.instructions():
        if ins.kind == "KernelCall" and ins.op_index is not None and ins.op_index < len(plan.operators):
            name = plan.operators[ins.op_index].name
            if any(k in name for k in _UPDATE_OPS) and len(ins.args) > 1 and planned(ins.args[1]):
                out.add(ins.args[1])
    inputs = [v for v in plan.inputs if 0 <= v < n]
    if inputs:
        first = min(inputs)
        outs = set(plan.outputs)
        out.update(v for v in range(first) if planned(v) and v not in outs)
    return sorted(out)


def mutated_buffer_names(program_json: dict) -> list[str]:
    """FQNs of the buffers the program mutates, in placeholder order (from an export-schema JSON)."""
    sig = (program_json.get("graph_module") or {}).get("signature") or {}
    mutated = {s["buffer_mutation"]["buffer_name"] for s in sig.get("output_specs") or []
               if isinstance(s, dict) and "buffer_mutation" in s}
    names = []
    for s in sig.get("input_specs") or []:
        b = s.get("buffer") if isinstance(s, dict) else None
        if b and b.get("buffer_name") in mutated:
            names.append(b["buffer_name"])
    return names


def max_seq_len(program: Any) -> Optional[int]:
    """The value ``get_max_seq_len`` (or ``get_max_context_len``) returns, read from the program."""
    for want in ("get_max_seq_len", "get_max_context_len"):
        for plan in program.execution_plan:
            if plan.name != want or not plan.outputs:
                continue
            v = plan.values[plan.outputs[0]] if plan.outputs[0] < len(plan.values) else None
            if v is not None and v.kind == "int":
                return int(v.val)
    return None


def kv_summary(tensors: list[Any], seq_len: Optional[int]) -> dict[str, Any]:
    """Bytes of the state tensors, and per token of context when a dim equals ``seq_len``.

    ``tensors``: the state :class:`~etlens.analysis.memory.PlannedTensor` objects of one method.
    """
    total = sum(t.size for t in tensors)
    per_token = 0.0
    known = bool(tensors) and seq_len is not None
    for t in tensors:
        if seq_len is not None and seq_len in t.shape:
            per_token += t.size / seq_len
        else:
            known = False
    return {"tensors": len(tensors), "bytes": total, "max_seq_len": seq_len,
            "bytes_per_token": per_token if known else math.nan,
            "names": [t.node or f"state[{t.value}]" for t in tensors]}
