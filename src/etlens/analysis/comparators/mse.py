"""Mean squared error: ``mean((a - b)**2)`` in float64. 0 means identical."""

from __future__ import annotations

from typing import Any

from .base import NumericalComparatorBase, aligned_pair

__all__ = ["MSEComparator"]


class MSEComparator(NumericalComparatorBase):
    """Mean squared error between reference and runtime outputs (lower is better)."""

    name = "MSE"

    def element_compare(self, a: Any, b: Any) -> float:
        ta, tb = aligned_pair(a, b)
        try:
            return float((ta - tb).square().mean())
        except RuntimeError as exc:
            raise ValueError(f"MSE: cannot compare shapes {tuple(ta.shape)} and {tuple(tb.shape)}: {exc}") from exc
