"""Mean squared error: ``mean((a - b)**2)`` in float64. 0 means identical."""

from __future__ import annotations

from typing import Any

from .base import ElementwiseMetric

__all__ = ["MSEComparator"]


class MSEComparator(ElementwiseMetric):
    """Mean squared error between reference and runtime outputs (lower is better)."""

    name = "MSE"
    higher_is_better = False  # a distance: 0 is identical

    def _reduce(self, np: Any, x: Any, d: Any) -> float:
        return float(np.mean(d * d)) if d.size else float("nan")

    def _rowwise(self, np: Any, x: Any, y: Any) -> Any:
        d = x - y
        return np.mean(d * d, axis=1)
