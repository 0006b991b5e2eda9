"""L1 distance: ``sum(|a - b|)`` in float64 (a sum, not a mean, as in ExecuTorch). 0 means identical."""

from __future__ import annotations

from typing import Any

from .base import NumericalComparatorBase, aligned_pair

__all__ = ["L1Comparator"]


class L1Comparator(NumericalComparatorBase):
    """Sum of absolute differences (lower is better)."""

    name = "L1"

    def element_compare(self, a: Any, b: Any) -> float:
        import numpy as np

        with np.errstate(all="ignore"):  # inf - inf and 0/0 give nan / inf silently, as in torch
            return self._compare(np, a, b)

    def _compare(self, np: Any, a: Any, b: Any) -> float:
        x, y = aligned_pair(a, b)
        try:
            d = x - y
        except ValueError as exc:
            raise ValueError(f"L1: cannot compare shapes {x.shape} and {y.shape}: {exc}") from exc
        return float(np.abs(d).sum())

    def _rowwise(self, np: Any, x: Any, y: Any) -> Any:
        return np.abs(x - y).sum(axis=1)
