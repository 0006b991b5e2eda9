"""``etlens memory PTE --measure``: the program loaded and run in a fresh runtime process, its memory
measured stage by stage and split by owner beside the plan (:mod:`etlens.analysis.memory_measured`).

The flags live here; :mod:`etlens.cli.memory` adds them to its parser and calls :func:`measure` when
``--measure`` (or the peak gate) is given.
"""

from __future__ import annotations

from typing import Any

from .options import add_gate

__all__ = ["add_measure_args", "measure", "peak_gate", "data_file"]


def add_measure_args(p: Any) -> None:
    """``--measure``, ``--load``, ``--runs``, ``--inputs``, ``--shapes``, ``--data``, ``--fail-on-peak-bytes``."""
    p.add_argument("--measure", action="store_true",
                   help="load and run the program in a fresh runtime process and measure its memory at each stage "
                        "(program load, method load, first run, steady runs), split by owner beside the plan")
    p.add_argument("--load", choices=("mmap", "buffer"), default="mmap",
                   help="with --measure: how the runtime gets the program: 'mmap' maps the file (constants mapped, "
                        "default), 'buffer' reads it into memory first (constants copied)")
    p.add_argument("--runs", type=int, default=3, help="with --measure: runs of the method (the first + steady ones)")
    p.add_argument("--inputs", metavar="FILE.pt",
                   help="with --measure: the inputs (a torch.save'd list or tuple of tensors); default: random "
                        "tensors of the program's input sizes (the upper bound of dynamic inputs)")
    p.add_argument("--shapes", metavar="SHAPES",
                   help="with --measure: run dynamic inputs at these shapes, one per tensor input, e.g. "
                        "'1x64x256;1x4' (each within the program's upper bound)")
    p.add_argument("--data", metavar="FILE.ptd",
                   help="with --measure: the .ptd holding the program's external constants (default: <program>.ptd "
                        "when it exists, or the one .ptd beside a program whose tensors live outside it)")
    add_gate(p, "peak-bytes", "fail when the measured peak resident memory exceeds N bytes (implies --measure)",
             metavar="N", type=int)


def measure(args: Any, report: Any, doc: dict[str, Any]) -> dict[str, Any]:
    """Measure ``args.pte`` (see :func:`add_measure_args`) and store the result as ``doc['measured']``."""
    from ..analysis.memory_measured import input_specs, measured_memory, parse_shapes
    from ..builder.jobs_memory import measure_program
    from ..errors import EtlensError
    from ..readers.pte import read

    art = read(args.pte)
    method = args.method or "forward"
    if not any(p.name == method for p in art.program.execution_plan):
        method = art.program.execution_plan[0].name
    specs = input_specs(art.program, method, parse_shapes(args.shapes))
    inputs = None
    if args.inputs:
        import torch

        try:
            inputs = torch.load(args.inputs, weights_only=True)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's to fix
            raise EtlensError(f"--inputs {args.inputs}: not a torch.save'd list of tensors ({exc})") from exc
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        tensors = [t for t in inputs if hasattr(t, "shape")]
        for spec, t in zip([s for s in specs if "shape" in s], tensors):
            spec["shape"] = [int(d) for d in t.shape]
    if args.runs < 1:
        raise EtlensError(f"--runs {args.runs}: give at least 1")
    raw = measure_program(args.pte, load=args.load, runs=args.runs, method=method, inputs=inputs,
                          input_specs=specs, data=args.data or data_file(args.pte, art.program),
                          verbose=getattr(args, "verbose", False))
    mm = next((m for m in report.methods if m.name == method), None)
    measured = measured_memory(raw, art.program, method_memory=mm, file_size=art.program.file_size or None,
                               specs=specs)
    doc["measured"] = measured
    return measured


def data_file(pte: str, program: Any) -> str | None:
    """The ``.ptd`` beside ``pte`` the runtime needs: ``<stem>.ptd``, else the only ``.ptd`` in its folder when
    some tensor of the program lives outside it; ``None`` otherwise."""
    import glob
    import os

    own = os.path.splitext(pte)[0] + ".ptd"
    if os.path.exists(own):
        return own
    external = any(v.kind == "tensor" and getattr(v.val, "external", False)
                   for plan in program.execution_plan for v in plan.values)
    found = glob.glob(os.path.join(os.path.dirname(os.path.abspath(pte)), "*.ptd"))
    return found[0] if external and len(found) == 1 else None


def peak_gate(args: Any, measured: dict[str, Any] | None) -> int | None:
    """Exit status of ``--fail-on-peak-bytes`` (``None``: the gate is not set or passes)."""
    from .options import gate_failed

    limit = getattr(args, "fail_on_peak_bytes", None)
    if limit is None or measured is None:
        return None
    if measured["peak_rss_bytes"] > limit:
        return gate_failed(f"{args.pte}: measured peak resident memory {measured['peak_rss_bytes']} bytes "
                           f"(at {measured['peak_stage']}) is over the {limit}-byte budget (--fail-on-peak-bytes); "
                           f"largest owner: {measured['largest']['reason']}")
    return None
