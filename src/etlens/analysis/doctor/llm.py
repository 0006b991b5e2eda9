"""Rules ``llm-kv-cache`` and ``llm-phases``: an LLM's KV cache against its planned memory, and where
its prefill and decode time goes.

A program with mutable buffers live over the whole method (an LLM's KV cache, :mod:`etlens.analysis.kv_cache`)
keeps them planned at the context length it was exported with. This rule reports the cache's bytes, the
bytes per token and the share of the planned memory; when the cache is most of it, a shorter
``max_seq_len`` (or a quantized cache) is the lever. Estimated win: half the cache (a context
length halved).

``llm-phases`` (``info``, when the ETDump looks like an LLM's: :func:`etlens.analysis.llm.llm_profile`):
prefill and decode ms per token and the op class that takes most of the decode time (linear
layers: weight quantization is the lever; attention / KV-cache update: the fused SDPA and
cache-update ops).
"""

from __future__ import annotations

from typing import Any

from ._common import share
from .finding import Finding, severity_for

__all__ = ["RULE", "RULE_PHASES", "check"]

RULE = "llm-kv-cache"
RULE_PHASES = "llm-phases"


def _phases(ctx: Any) -> list[Finding]:
    if ctx.inspector is None:
        return []
    from ..llm import llm_profile

    prof = llm_profile(ctx.inspector)
    if prof is None or not prof.phases:
        return []
    per = {}
    for p in ("prefill", "decode"):
        st = prof.phases.get(p)
        if st is not None and st.tokens:
            per[p] = sum(r.time_ms for r in prof.runs if r.phase == p) / st.tokens
    rows = [r for r in prof.class_table() if r[4] == r[4]]
    top = max(rows, key=lambda r: r[4]) if rows else None
    ev = {"ms_per_token": per, "runs": len(prof.runs),
          "decode_top_class": {"class": top[0], "share": top[4]} if top else None}
    return [Finding(
        rule=RULE_PHASES, severity="info",
        title="LLM: " + ", ".join(f"{p} {v:.3g} ms/token" for p, v in per.items())
              + (f"; decode mostly {top[0]} ({top[4]:.0%})" if top else ""),
        evidence=ev, estimated_win={"ms": 0.0}, score=0.0,
        fix="decode bound by linear layers: quantize the weights (8da4w); by attention or the cache update: the "
            "fused SDPA-with-KV-cache ops; prefill slow per token: export with dynamic sequence length",
        action={"kind": "measurement"}, verify_command=ctx.command("inspect", "--llm --format json"))]


def check(ctx: Any) -> list[Finding]:
    out = _phases(ctx)
    mem = ctx.memory
    if mem is None:
        return out
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
