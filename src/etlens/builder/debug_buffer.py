"""How much debug buffer a program's run needs, and trimming the written buffer to what the ETDump uses.

With intermediate outputs on, the runtime logs, on every run, the last argument (the ``out``
tensor) of every kernel call, every argument of every delegate call (ExecuTorch cannot tell a
delegate's inputs from its outputs, so it logs all of them) and the method's outputs; each tensor
is written 64-byte aligned. Those sizes are all in the ``.pte`` (etlens' own reader), so
:func:`debug_buffer_bytes` is the per-run sum x ``runs`` plus 25 % and 1 MiB headroom. Logging only
one run and timing the others without a buffer would need a second runtime instance (the
pybindings cannot turn logging off between runs) and would lose the per-run intermediate outputs
the Inspector pairs with each run's events, so every run logs; the written debug buffer is then
trimmed (:func:`trim_debug_buffer`, in the ``run`` job's child) to the bytes the ETDump
references, so a generous buffer costs memory in the child, not disk.

Example::

    from etlens.builder.debug_buffer import debug_buffer_bytes
    debug_buffer_bytes("model.pte", runs=5)      # bytes to give the runtime
"""

from __future__ import annotations

import os

__all__ = ["debug_buffer_bytes", "has_quantized_ops", "trim_debug_buffer", "aligned", "QUANT_NAMESPACE"]

#: bytes per logged tensor are rounded up to this (ExecuTorch's BufferDataSink default alignment)
ALIGN = 64
#: the namespace of the ops whose kernels live in ExecuTorch's separate quantized library
QUANT_NAMESPACE = "quantized_decomposed"


def aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


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
                return aligned(n * (info.itemsize if info else 8))
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
    return any(op.name.startswith(QUANT_NAMESPACE) for plan in art.program.execution_plan for op in plan.operators)


def trim_debug_buffer(etdump_path: str, debug_path: str) -> None:
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
        os.truncate(debug_path, aligned(end))
