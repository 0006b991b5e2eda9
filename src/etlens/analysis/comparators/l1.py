"""L1 distance: ``sum(|a - b|)`` in float64 (a sum, not a mean, as in ExecuTorch). 0 means identical."""

from __future__ import annotations

from typing import Any

from .base import ElementwiseMetric

__all__ = ["L1Comparator"]


class L1Comparator(ElementwiseMetric):
    """Sum of absolute differences (lower is better)."""

    name = "L1"
    higher_is_better = False  # a distance: 0 is identical

    def _reduce(self, np: Any, x: Any, d: Any) -> float:
        return float(np.abs(d).sum())

    def _rowwise(self, np: Any, x: Any, y: Any) -> Any:
        return np.abs(x - y).sum(axis=1)
