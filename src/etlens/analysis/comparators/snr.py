"""Signal-to-noise ratio in dB: ``10*log10(mean(a**2) / mean((a-b)**2))``. Higher is better; identical -> inf."""

from __future__ import annotations

from typing import Any

from .base import ElementwiseMetric

__all__ = ["SNRComparator"]


class SNRComparator(ElementwiseMetric):
    """Signal (reference power) over noise (error power), in decibels (higher is better)."""

    name = "SNR"
    higher_is_better = True  # a similarity

    def _reduce(self, np: Any, x: Any, d: Any) -> float:
        # float64 division by zero gives inf (identical) or nan (0/0: both all-zero), like ExecuTorch
        signal = np.float64(np.mean(x * x)) if x.size else np.float64("nan")
        noise = np.float64(np.mean(d * d)) if d.size else np.float64("nan")
        return float(10 * np.log10(signal / noise))

    def _rowwise(self, np: Any, x: Any, y: Any) -> Any:
        d = x - y
        return 10 * np.log10(np.mean(x * x, axis=1) / np.mean(d * d, axis=1))
