"""Ethos-U memory (the ``memory`` hook, analysis floor): SRAM and flash of every Ethos-U delegate.

Each delegate's Vela bin stream (:mod:`.payload`) gives the command stream, weights, SRAM scratch and
I/O shapes; :func:`ethos_u_memory` turns them into the SRAM/flash budget ``etlens memory`` shows (and
its ``--fail-on-sram-bytes`` / ``--fail-on-flash-bytes`` gates), with Vela's own summary beside it when
the sidecar (:mod:`.vela`) is there. :func:`payload_parts` splits the payload for ``etlens size``.

Example::

    from etlens.backends.ethosu.memory import ethos_u_memory
    ethos_u_memory(read("out/model.pte"))["sram_bytes"]
"""

from __future__ import annotations

from typing import Any

from etlens.analysis.size import Part

from .vela import find_sidecar, read_sidecar

__all__ = ["ethos_u_memory", "program_memory", "payload_parts"]


def payload_parts(d: Any, di: int, plan_name: str, group: str, data: Any,
                  named: dict[str, str]) -> list[tuple[int, int, Part]] | None:
    """Split an Ethos-U payload (Vela bin stream) into its command stream and weights (what the NPU reads
    from flash); block headers and I/O tables stay in the payload's rest. None when it did not decode."""
    eu = d.decoded
    if eu is None:
        return None
    who = f"{plan_name} delegate[{di}]"
    out = []
    for b in eu.blocks:
        if b.external:
            continue
        if b.name == "cmd_data":
            out.append((d.payload_offset + b.offset, b.size,
                        Part(f"{who} Ethos-U command stream ({eu.command_stream_version})", 0,
                             "ethos_u_command_stream", group, {"delegate": di, "method": plan_name})))
        elif b.name == "weight_data":
            out.append((d.payload_offset + b.offset, b.size,
                        Part(f"{who} Ethos-U weights (Vela-encoded)", 0, "ethos_u_weights", group,
                             {"delegate": di, "method": plan_name})))
    return out


def _memory_mode(flags: str) -> str | None:
    """Vela's ``--memory-mode=`` from a delegate's ``compile_flags`` compile spec."""
    for flag in flags.split():
        if flag.startswith("--memory-mode="):
            return flag.split("=", 1)[1] or None
    return None


def _total(values: list[int | None]) -> int | None:
    return None if any(v is None for v in values) else sum(v or 0 for v in values)


def _peak(values: list[int | None]) -> int | None:
    """What the runtime needs at once for per-call buffers: the largest (None when one is unknown)."""
    return None if any(v is None for v in values) else max((v or 0 for v in values), default=0)


def ethos_u_memory(pte: Any, sidecar: str | None = None) -> dict[str, Any] | None:
    """SRAM and flash of every Ethos-U delegate of a parsed ``.pte`` (``None`` when it has none).

    ``sram_bytes``: the SRAM scratch the program needs, the *largest* of its delegates': the runtime
    allocates a delegate's scratch from the method's temp allocator when it calls the delegate and the
    method releases it when the call returns, so partitions never hold scratch at the same time
    (``sram_bytes_sum`` is the sum, for a runtime that gives each delegate its own buffer; each delegate's
    own figure is in ``delegates``, equal to Vela's *Total SRAM used* for that partition);
    ``flash_bytes`` and ``command_stream_bytes`` add up over delegates (all are stored);
    ``flash_bytes``: the encoded weights (what Vela reports as flash); ``command_stream_bytes`` and
    ``flash_with_command_stream_bytes``: the command stream stored with them. ``arena_bytes`` is the
    program's own planned memory (the CPU side: method inputs/outputs and CPU operators), and
    ``sram_with_arena_bytes`` the sum when both live in SRAM. With a sidecar (``<stem>.vela.json``
    next to the file, or ``sidecar``) Vela's summary is attached under ``vela`` for comparison, and
    ``fast_scratch_bytes`` — Vela's arena cache in a dedicated fast SRAM, which the payload does not
    carry (the runtime is configured with it) — is taken from Vela's raw output recorded there
    (0 in the ``Shared_Sram`` / ``Sram_Only`` memory modes of the default U55/U85 configurations);
    without a sidecar it stays ``None``.

    Where the scratch lives depends on Vela's memory mode (``memory_mode``, from the delegate's
    ``compile_flags``): in ``Shared_Sram`` (U55 default) and ``Sram_Only`` (U85 default) it is the
    SRAM, as above; in ``Dedicated_Sram*`` (U65 default, ``ethos-u65-256``) the scratch goes to DRAM
    (``dram_bytes``) and the SRAM holds the fast scratch, so ``sram_bytes`` is the fast scratch —
    ``None`` without the sidecar (then ``etlens memory --fail-on-sram-bytes`` says so).
    """
    program = getattr(pte, "program", None)
    if program is None:
        return None
    delegates = []
    for plan in program.execution_plan:
        for i, d in enumerate(plan.delegates):
            if d.backend != "ethosu":
                continue
            row: dict[str, Any] = {"method": plan.name, "index": i, "backend_id": d.id,
                                   "payload_size": d.payload_size}
            specs = {c.key: c.text() for c in d.compile_specs}
            row["target"] = specs.get("target")
            row["compile_flags"] = specs.get("compile_flags", "")
            if d.decoded is not None:
                row.update(d.decoded.attrs())
            else:
                row["decode_error"] = d.decode_error or "payload not decoded"
            delegates.append(row)
    if not delegates:
        return None
    ok = [d for d in delegates if "decode_error" not in d]
    path = sidecar or (find_sidecar(pte.path) if getattr(pte, "path", None) else None)
    vela = read_sidecar(path) if path else None
    fast = [p.fast_scratch_bytes for p in vela.partitions] if vela is not None else []
    if len(fast) != len(ok) or any(v is None for v in fast):
        fast = [None] * len(ok)  # not from this sidecar (or none): the payload alone cannot tell
    summaries = [p.summary for p in vela.partitions] if vela is not None else []
    if len(summaries) != len(ok):
        summaries = [None] * len(ok)
    for row, fast_bytes, summary in zip(ok, fast, summaries, strict=True):  # partitions = delegates in order
        row["fast_scratch_bytes"] = fast_bytes
        if summary is not None:  # this partition's own Vela compile, beside the payload's figures
            row["vela"] = {"sram_bytes": summary.sram_bytes, "flash_bytes": summary.flash_bytes,
                           "dram_bytes": summary.dram_bytes, "npu_cycles": summary.cycles_total,
                           "cycles_npu_only": summary.cycles_npu}
        row["memory_mode"] = _memory_mode(row.get("compile_flags") or "")
        if (row["memory_mode"] or "").startswith("Dedicated_Sram"):
            # the scratch (feature maps) lives in DRAM; the NPU's SRAM holds Vela's arena cache
            row["dram_bytes"], row["sram_bytes"] = row["scratch_bytes"], fast_bytes
        else:
            row["dram_bytes"] = 0
    arena = sum(sum(p.non_const_buffer_sizes) for p in program.execution_plan)
    sram = _peak([d["sram_bytes"] for d in ok])
    out: dict[str, Any] = {
        "delegates": delegates,
        "target": next((d["target"] for d in delegates if d.get("target")), None),
        "memory_mode": next((d["memory_mode"] for d in ok if d.get("memory_mode")), None),
        "sram_bytes": sram,
        "sram_bytes_sum": _total([d["sram_bytes"] for d in ok]),
        "partitions": len(ok),
        "flash_bytes": sum(d["flash_bytes"] for d in ok),
        "command_stream_bytes": sum(d["command_stream_bytes"] for d in ok),
        "flash_with_command_stream_bytes": sum(d["flash_with_command_stream_bytes"] for d in ok),
        "fast_scratch_bytes": _peak([d["fast_scratch_bytes"] for d in ok]),
        "dram_bytes": _peak([d["dram_bytes"] for d in ok]) or 0,
        "arena_bytes": arena,
        "sram_with_arena_bytes": None if sram is None else sram + arena,
    }
    if vela is not None:
        totals = vela.totals()
        out["vela"] = {k: totals[k] for k in ("target", "sram_bytes", "flash_bytes", "dram_bytes", "npu_cycles",
                                              "macs", "npu_ops", "cpu_ops", "partitions", "fast_scratch_bytes")}
    return out


def program_memory(pte: Any) -> dict[str, Any] | None:
    """The ``memory`` hook ``etlens memory`` calls: :func:`ethos_u_memory` (None without Ethos-U delegates)."""
    return ethos_u_memory(pte)
