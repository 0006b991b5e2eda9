"""Largest absolute element difference: ``max(|a - b|)``. 0 means identical; empty tensors give 0."""

from __future__ import annotations

from typing import Any

from .base import NumericalComparatorBase, aligned_pair

__all__ = ["MaxAbsComparator"]


class MaxAbsComparator(NumericalComparatorBase):
    """Worst single-element error (lower is better): catches one bad channel that MSE averages away."""

    name = "max_abs"

    def element_compare(self, a: Any, b: Any) -> float:
        import numpy as np

        with np.errstate(all="ignore"):  # inf - inf and 0/0 give nan / inf silently, as in torch
            return self._compare(np, a, b)

    def _compare(self, np: Any, a: Any, b: Any) -> float:
        x, y = aligned_pair(a, b)
        try:
            d = np.abs(x - y)
        except ValueError as exc:
            raise ValueError(f"max_abs: cannot compare shapes {x.shape} and {y.shape}: {exc}") from exc
        return float(d.max()) if d.size else 0.0

    def _rowwise(self, np: Any, x: Any, y: Any) -> Any:
        return np.abs(x - y).max(axis=1)
