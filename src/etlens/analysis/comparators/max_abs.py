"""Largest absolute element difference: ``max(|a - b|)``. 0 means identical; empty tensors give 0."""

from __future__ import annotations

from typing import Any

from .base import ElementwiseMetric

__all__ = ["MaxAbsComparator"]


class MaxAbsComparator(ElementwiseMetric):
    """Worst single-element error (lower is better): catches one bad channel that MSE averages away."""

    name = "max_abs"
    higher_is_better = False  # a distance: 0 is identical

    def _reduce(self, np: Any, x: Any, d: Any) -> float:
        return float(np.abs(d).max()) if d.size else 0.0

    def _rowwise(self, np: Any, x: Any, y: Any) -> Any:
        return np.abs(x - y).max(axis=1)
