"""Mean squared error: ``mean((a - b)**2)`` in float64. 0 means identical."""

from __future__ import annotations

from typing import Any

from .base import NumericalComparatorBase, aligned_pair

__all__ = ["MSEComparator"]


class MSEComparator(NumericalComparatorBase):
    """Mean squared error between reference and runtime outputs (lower is better)."""

    name = "MSE"

    def element_compare(self, a: Any, b: Any) -> float:
        import numpy as np

        with np.errstate(all="ignore"):  # inf - inf and 0/0 give nan / inf silently, as in torch
            return self._compare(np, a, b)

    def _compare(self, np: Any, a: Any, b: Any) -> float:
        x, y = aligned_pair(a, b)
        try:
            d = x - y
        except ValueError as exc:
            raise ValueError(f"MSE: cannot compare shapes {x.shape} and {y.shape}: {exc}") from exc
        return float(np.mean(d * d)) if d.size else float("nan")

    def _rowwise(self, np: Any, x: Any, y: Any) -> Any:
        d = x - y
        return np.mean(d * d, axis=1)
