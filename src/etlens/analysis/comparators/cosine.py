"""Cosine similarity of the flattened outputs, in [-1, 1]. Higher is better; identical direction -> 1.

Two all-zero tensors count as identical (1.0); one all-zero tensor against a non-zero one gives 0.0.
"""

from __future__ import annotations

from typing import Any

from .base import ElementwiseMetric, aligned_pair

__all__ = ["CosineComparator"]


class CosineComparator(ElementwiseMetric):
    """Cosine similarity between reference and runtime outputs (higher is better)."""

    name = "cosine"
    higher_is_better = True  # a similarity

    def _compare(self, np: Any, a: Any, b: Any) -> float:
        x, y = aligned_pair(a, b)
        if x.shape != y.shape:
            try:
                x, y = np.broadcast_arrays(x, y)
            except ValueError as exc:
                raise ValueError(f"cosine: cannot compare shapes {x.shape} and {y.shape}: {exc}") from exc
        u, v = x.ravel(), y.ravel()
        nu, nv = float(np.linalg.norm(u)), float(np.linalg.norm(v))
        if nu == 0.0 and nv == 0.0:
            return 1.0
        if nu == 0.0 or nv == 0.0:
            return 0.0
        return float(np.dot(u, v)) / (nu * nv)
