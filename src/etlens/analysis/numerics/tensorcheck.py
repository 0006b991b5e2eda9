"""Small tensor functions of the gap table: sizes, shapes, descriptions, relative error."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["is_tensor", "relative_mse", "describe", "shapes_differ", "sizes_differ", "numel", "align_multi"]


def is_tensor(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "numel")


def relative_mse(a: Any, b: Any) -> float | None:
    """MSE of ``a`` against ``b`` over the mean square of ``b`` (memory order; None: sizes differ)."""
    if a.numel() != b.numel() or a.numel() == 0 or a.is_complex() or b.is_complex():
        return None
    x = a.detach().reshape(-1).double()
    y = b.detach().reshape(-1).double()
    mse = float(((x - y) ** 2).mean())
    scale = float((y ** 2).mean())
    return mse / scale if scale > 0 else (0.0 if mse == 0 else float("inf"))


def describe(x: Any) -> str:
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}"
    if isinstance(x, Sequence):
        return "[" + ", ".join(describe(v) for v in x) + "]"
    return type(x).__name__


def shapes_differ(a: Any, b: Any) -> bool:
    sa, sb = getattr(a, "shape", None), getattr(b, "shape", None)
    return sa is not None and sb is not None and tuple(sa) != tuple(sb)


def sizes_differ(a: Any, b: Any) -> bool:
    """Both tensors, with different element counts (a same-size reshape is compared in memory order)."""
    na, nb = numel(a), numel(b)
    return na is not None and nb is not None and na != nb and shapes_differ(a, b)


def numel(x: Any) -> int | None:
    n = getattr(x, "numel", None)
    return n() if callable(n) else None


def align_multi(aot_out: Sequence, rt_out: Any) -> tuple[Any, Any]:
    """Pair a multi-output reference with what the runtime logged, counting from the last output."""
    rt = list(rt_out) if isinstance(rt_out, Sequence) else [rt_out]
    if not rt or len(rt) > len(aot_out):
        return None, None
    ref = list(aot_out)[len(aot_out) - len(rt):]
    if any(numel(r) is None or numel(r) != numel(a) for a, r in zip(ref, rt)):
        return None, None
    return ref, rt
