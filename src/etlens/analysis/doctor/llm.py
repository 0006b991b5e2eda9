"""Rule ``llm-kv-cache``: an LLM's KV cache against its planned memory.

A program with mutable buffers live over the whole method (an LLM's KV cache, :mod:`etlens.analysis.kv_cache`)
keeps them planned at the context length it was exported with. This rule reports the cache's bytes, the
bytes per token and the share of the planned memory; when the cache is most of it, a shorter
``max_seq_len`` (or a quantized cache) is the lever. Estimated win: half the cache (a context
length halved).
"""

from __future__ import annotations

from typing import Any

from ._common import share
from .finding import Finding, severity_for

__all__ = ["RULE", "check"]

RULE = "llm-kv-cache"


def check(ctx: Any) -> list[Finding]:
    mem = ctx.memory
    if mem is None:
        return []
    out = []
    for m in mem.methods:
        kv = m.kv_cache()
        if not kv.get("tensors") or not kv.get("bytes"):
            continue
        planned = sum(a.size for a in m.arenas) + kv["bytes"]
        win = kv["bytes"] // 2
        score = share(win, planned) * 0.5
        out.append(Finding(
            rule=RULE, severity=severity_for(score),
            title=f"KV cache of {m.name!r}: {kv['bytes']:,} bytes "
                  f"({share(kv['bytes'], planned):.0%} of planned memory)",
            evidence={"method": m.name, "kv_bytes": kv["bytes"], "tensors": kv["tensors"],
                      "max_seq_len": kv.get("max_seq_len"), "bytes_per_token": kv.get("bytes_per_token"),
                      "planned_bytes": planned},
            estimated_win={"bytes": win}, score=score,
            fix="export with the context length the device needs (max_seq_len / max_context_length) or a quantized "
                "KV cache (export_llama --quantize_kv_cache)",
            action={"kind": "export_bound"}, verify_command=ctx.command("memory", "--format json")))
    return out
