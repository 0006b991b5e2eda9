"""Numeric gap between two builds, op by op, when both sides logged intermediate outputs (debug buffers).

For every aligned row whose source op logged a value in both builds (the first run of the first
ETDump a side; an op run by a delegate logs through its delegate call, whose value lands on the last
source op it ran), the two tensors are compared when their shapes agree: ``max_abs`` (largest
absolute difference), ``rel`` (``||B - A|| / ||A||``) and ``snr_db`` (``10 log10(||A||^2 / ||B - A||^2)``,
``inf`` when equal). The row's ``gap`` in the JSON carries them; ``summary.output_gap`` is the gap of the
last row of the program that has one (the model's output, or the nearest logged value before it).

Example::

    gaps = numeric_gaps(diff)          # {row index: {"max_abs", "rel", "snr_db"}}
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["numeric_gaps", "logged_values"]


def logged_values(build: Any) -> dict[int, np.ndarray]:
    """``debug handle -> logged tensor`` (numpy, read straight from the debug buffer: no torch) of the
    first run of the first ETDump; empty without a debug buffer. Events that logged a list of tensors or a
    scalar are left out."""
    from ...readers.etdump import V_TENSOR, DebugBuffer, TensorRef
    from ...schema import OPERATOR_CALL

    if not build.inspectors or not build.files.debug_buffers or not build.files.debug_buffers[0]:
        return {}
    ins = build.inspectors[0]
    if not ins.has_debug_buffer:
        return {}
    buf = DebugBuffer(build.files.debug_buffers[0])
    dump = ins.etdump
    out: dict[int, np.ndarray] = {}
    for b in ins.block_columns:
        if not b.runs:
            continue
        run = b.runs[0]
        for i, name in enumerate(b.names):
            idxs = b.debug_events[i]
            h = b.debug_handles[i]
            if idxs is None or not len(idxs) or name == OPERATOR_CALL or h is None:
                continue
            handles = (h,) if isinstance(h, int) else tuple(h)
            if not handles:
                continue
            r, j = dump.runs[run], int(idxs[-1])
            if int(r.value_type[j]) != V_TENSOR or not r.tensor_pos[j] or not r.value_pos[j]:
                continue  # a list of tensors or a scalar: no gap for it
            try:  # straight from the event columns (a logged tensor is contiguous: no strides needed)
                nd, sp = int(r.ndim[j]), int(r.sizes_pos[j])
                sizes = tuple(int(x) for x in dump.read_i64(sp + 8 * np.arange(nd), "Tensor.sizes")) if nd else ()
                ref = TensorRef(int(r.scalar_type[j]), sizes, (), int(r.tensor_offset[j]))
                out[max(handles)] = np.asarray(buf.array(ref), dtype=np.float64)
            except Exception:  # noqa: BLE001 - a value past the buffer's end or of an odd dtype: no gap for it
                continue
    return out


def _gap(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    d = b - a
    na = float(np.sum(a * a))
    nd = float(np.sum(d * d))
    return {"max_abs": float(np.max(np.abs(d))) if d.size else 0.0,
            "rel": math.sqrt(nd / na) if na > 0 else (0.0 if nd == 0 else math.inf),
            "snr_db": math.inf if nd == 0 else (10 * math.log10(na / nd) if na > 0 else -math.inf)}


def numeric_gaps(diff: Any) -> dict[int, dict[str, float]]:
    """``row index -> gap`` for the aligned rows both builds logged (see the module docstring)."""
    va, vb = logged_values(diff.a), logged_values(diff.b)
    if not va or not vb:
        return {}
    out: dict[int, dict[str, float]] = {}
    for i, r in enumerate(diff.rows):
        if r.a is None or r.b is None:
            continue
        ka = [h for h in _handles(r.a) if h in va]
        kb = [h for h in _handles(r.b) if h in vb]
        if not ka or not kb:
            continue
        a, b = va[ka[-1]], vb[kb[-1]]
        if a.shape != b.shape:
            continue
        out[i] = _gap(a, b)
    return out


def _handles(s: Any) -> list[int]:
    return [s.key, *getattr(s, "handles", [])]
