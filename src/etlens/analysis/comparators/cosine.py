"""Cosine similarity of the flattened outputs, in [-1, 1]. Higher is better; identical direction -> 1.

Two all-zero tensors count as identical (1.0); one all-zero tensor against a non-zero one gives 0.0.
"""

from __future__ import annotations

from typing import Any

from .base import NumericalComparatorBase, aligned_pair

__all__ = ["CosineComparator"]


class CosineComparator(NumericalComparatorBase):
    """Cosine similarity between reference and runtime outputs (higher is better)."""

    name = "cosine"
    higher_is_better = True

    def element_compare(self, a: Any, b: Any) -> float:
        ta, tb = aligned_pair(a, b)
        if ta.shape != tb.shape:
            import torch

            try:
                ta, tb = torch.broadcast_tensors(ta, tb)
            except RuntimeError as exc:
                raise ValueError(f"cosine: cannot compare shapes {tuple(ta.shape)} and {tuple(tb.shape)}: "
                                 f"{exc}") from exc
        va, vb = ta.reshape(-1), tb.reshape(-1)
        na, nb = float(va.norm()), float(vb.norm())
        if na == 0.0 and nb == 0.0:
            return 1.0
        if na == 0.0 or nb == 0.0:
            return 0.0
        return float(va.dot(vb)) / (na * nb)

