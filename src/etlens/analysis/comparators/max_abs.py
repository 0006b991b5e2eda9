"""Largest absolute element difference: ``max(|a - b|)``. 0 means identical; empty tensors give 0."""

from __future__ import annotations

from typing import Any

from .base import NumericalComparatorBase, aligned_pair

__all__ = ["MaxAbsComparator"]


class MaxAbsComparator(NumericalComparatorBase):
    """Worst single-element error (lower is better): catches one bad channel that MSE averages away."""

    name = "max_abs"

    def element_compare(self, a: Any, b: Any) -> float:
        ta, tb = aligned_pair(a, b)
        try:
            diff = (ta - tb).abs()
        except RuntimeError as exc:
            raise ValueError(f"max_abs: cannot compare shapes {tuple(ta.shape)} and {tuple(tb.shape)}: "
                             f"{exc}") from exc
        return float(diff.max()) if diff.numel() else 0.0
