"""Signal-to-noise ratio in dB: ``10*log10(mean(a**2) / mean((a-b)**2))``. Higher is better; identical -> inf."""

from __future__ import annotations

from typing import Any

from .base import NumericalComparatorBase, aligned_pair

__all__ = ["SNRComparator"]


class SNRComparator(NumericalComparatorBase):
    """Signal (reference power) over noise (error power), in decibels (higher is better)."""

    name = "SNR"
    higher_is_better = True

    def element_compare(self, a: Any, b: Any) -> float:
        import numpy as np

        with np.errstate(all="ignore"):  # inf - inf and 0/0 give nan / inf silently, as in torch
            return self._compare(np, a, b)

    def _compare(self, np: Any, a: Any, b: Any) -> float:
        x, y = aligned_pair(a, b)
        try:
            d = x - y
        except ValueError as exc:
            raise ValueError(f"SNR: cannot compare shapes {x.shape} and {y.shape}: {exc}") from exc
        # float64 division by zero gives inf (identical) or nan (0/0: both all-zero), like ExecuTorch
        signal = np.float64(np.mean(x * x)) if x.size else np.float64("nan")
        noise = np.float64(np.mean(d * d)) if d.size else np.float64("nan")
        return float(10 * np.log10(signal / noise))

    def _rowwise(self, np: Any, x: Any, y: Any) -> Any:
        d = x - y
        return 10 * np.log10(np.mean(x * x, axis=1) / np.mean(d * d, axis=1))
