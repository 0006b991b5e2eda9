"""Rule ``duplicate-constant``: the same weight bytes stored more than once in the program.

A weight shared by two modules (tied embeddings, a reused projection) that export or a pass
copies ends up as two constant buffers; the same can happen inside a delegate's own data. This
rule hashes every constant tensor of the ``.pte`` (the data the program stores itself) and reports
the groups with equal bytes. Estimated win: the bytes of every copy after the first.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .finding import Finding, severity_for
from ._common import share

__all__ = ["RULE", "check", "MIN_BYTES"]

RULE = "duplicate-constant"

#: constants smaller than this are not worth a finding (biases, scales)
MIN_BYTES = 1024


def _constant_bytes(data: bytes, program: Any, idx: int, sizes: list[int]) -> bytes | None:
    """The stored bytes of constant buffer ``idx`` of the constant segment (``None`` when unknown)."""
    offs = program.constant_segment_offsets
    if offs and program.constant_segment_index is not None and idx < len(offs) and idx < len(sizes):
        seg = program.segments[program.constant_segment_index]
        start = program.segment_base_offset + seg.offset + offs[idx]
        return bytes(data[start:start + sizes[idx]])
    return None


def check(ctx: Any) -> list[Finding]:
    pte = ctx.program
    data = ctx.artifacts.pte_bytes() if pte is not None else None
    if pte is None or getattr(pte, "program", None) is None or not data:
        return []
    sizes = pte.program.constant_sizes()
    groups: dict[str, list[tuple[str, int, str]]] = {}
    seen_idx: set[int] = set()
    for plan in pte.program.execution_plan:
        for v in plan.values:
            t = v.val if v.kind == "tensor" else None
            if t is None or not t.is_constant or t.external or t.data_buffer_idx in seen_idx:
                continue
            seen_idx.add(t.data_buffer_idx)
            blob = _constant_bytes(data, pte.program, t.data_buffer_idx, sizes)
            if blob is None or len(blob) < MIN_BYTES:
                continue
            key = hashlib.sha1(blob).hexdigest()
            groups.setdefault(key, []).append((t.fully_qualified_name or f"buffer {t.data_buffer_idx}", len(blob),
                                               plan.name))
    dups = [g for g in groups.values() if len(g) > 1]
    if not dups:
        return []
    win = sum(size for g in dups for _, size, _ in g[1:])
    total = getattr(pte.program, "file_size", 0) or win
    score = share(win, total)
    names = [n for g in dups for n, _, _ in g]
    return [Finding(
        rule=RULE, severity=severity_for(score),
        title=f"{sum(len(g) - 1 for g in dups)} constant(s) stored twice ({win:,} bytes)",
        module_paths=sorted({n.rsplit(".", 1)[0] for n in names if "." in n}), nodes=names,
        evidence={"groups": [[{"name": n, "bytes": s, "method": m} for n, s, m in g] for g in dups],
                  "program_bytes": total},
        estimated_win={"bytes": win}, score=score,
        fix="share one parameter instead of copies (tie the weights: assign the same nn.Parameter), or "
            "de-duplicate the constants before emitting the program",
        action={"kind": "code"}, verify_command=ctx.command("size", "--format json"))]
