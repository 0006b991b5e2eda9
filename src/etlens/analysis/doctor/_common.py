"""Shared functions of the doctor's rules: robust node times, op families, the win-to-score scales."""

from __future__ import annotations

from typing import Any

#: share of a portable op's time a delegate is assumed to save when it takes the op (kept low on
#: purpose: a promised win the fix does not deliver is worse than a modest one it beats)
DELEGATE_RECOVERY = 0.7

#: ops that only change a tensor's layout or memory format (dim order), never its values
LAYOUT_OPS = ("_clone_dim_order", "_to_dim_order_copy", "permute_copy", "transpose_copy", "clone")

#: ops that move no data (reading a tuple item, a view): never a finding of their own
FREE_OPS = ("getitem", "view_copy", "alias", "unsqueeze_copy", "squeeze_copy", "expand_copy", "sym_size")

#: a dB of output SNR counts as this share of the budget (40 dB is "clean": 1 dB = 2.5%)
DB_BUDGET = 40.0


def op_base(op: str) -> str:
    """``avg_pool2d`` for ``aten.avg_pool2d.default`` / ``aten::avg_pool2d.out``."""
    name = op.replace("::", ".").split(".")
    if len(name) >= 3:
        return name[-2]
    if len(name) == 2:
        return name[0] if name[1] in ("default", "out", "Tensor", "Scalar", "int", "dim") else name[1]
    return name[0]


def is_layout_op(op: str) -> bool:
    return op_base(op) in LAYOUT_OPS


def is_free_op(op: str) -> bool:
    return not op or op_base(op) in FREE_OPS or op.startswith("getitem")


def where(module_path: str) -> str:
    """A module path as people read it: ``(root)`` for the model itself."""
    return module_path or "(root)"


def share(win: float, total: float | None) -> float:
    """``win / total`` (0 when the total is unknown)."""
    return float(win) / float(total) if total else 0.0


def uniq(items: Any) -> list:
    """Items in first-seen order, once."""
    seen: dict = {}
    for x in items:
        seen.setdefault(x, None)
    return list(seen)
