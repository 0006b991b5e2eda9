"""Lowering and running programs in a child process, as one-call functions.

Thin wrappers over :class:`etlens.builder.worker.Worker` (the one child-process launcher; its
docstring explains why native work never runs in the user's process and the job protocol):

* :func:`run_program` — job ``run``: a ``.pte`` ``runs`` times with ETDump (+ debug buffer, sized
  from the program by :func:`~etlens.builder.debug_buffer.debug_buffer_bytes`); returns the last outputs.

A model's whole build (export, quantize, lower with the pass trace, run, the inside-the-delegates
cycles) is :class:`etlens.builder.session.BuildSession`, which keeps one worker for all of it.

Example::

    from etlens.builder.runner import run_program
    outputs = run_program("model.pte", (torch.randn(1, 3, 32, 32),), runs=5, etdump_path="run.etdp",
                          debug_path="run.debug.bin")          # debug buffer sized from the program
"""

from __future__ import annotations

from typing import Any, Callable

from .debug_buffer import debug_buffer_bytes, has_quantized_ops
from .worker import NativeStageError, Worker, last_native_line

__all__ = ["NativeStageError", "debug_buffer_bytes", "has_quantized_ops", "run_program", "last_native_line"]


def run_program(pte_path: str, inputs: Any, *, runs: int = 1, etdump_path: str, debug_path: str | None = None,
                debug_buffer_size: int | None = None, load_quantized_kernels: bool | None = None,
                on_run: Callable[[int], Any] | None = None, verbose: bool = False) -> list:
    """Run ``pte_path`` ``runs`` times in the ExecuTorch runtime in a child; return the last outputs.

    Args:
        pte_path: the program.
        inputs: a tuple/list of tensors (and Python scalars) for ``forward``.
        runs: how many runs ETDump records.
        etdump_path: where the ``.etdp`` goes.
        debug_path: where the debug buffer (intermediate outputs) goes; ``None``: no debug buffer.
        debug_buffer_size: bytes; ``None``: :func:`debug_buffer_bytes` of the program for ``runs``.
        load_quantized_kernels: load ExecuTorch's quantized kernels; ``None``: when the program
            has ``quantized_decomposed`` ops.
        on_run: called with the run index after each run (from the child's progress lines).
        verbose: show the child's stderr (warnings, native log lines) instead of hiding it.

    Raises:
        NativeStageError: the runtime failed or aborted (the message names the cause and the
            ``--debug-buffer-size`` / ``--runs`` flags).
    """
    with Worker(verbose=verbose) as w:
        return w.run(pte_path, inputs, runs=runs, etdump=etdump_path, debug=debug_path,
                     debug_buffer_size=debug_buffer_size, quantized=load_quantized_kernels, on_run=on_run)
