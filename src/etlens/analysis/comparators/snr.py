"""Signal-to-noise ratio in dB: ``10*log10(mean(a**2) / mean((a-b)**2))``. Higher is better; identical -> inf.

Where the two sides are equal the noise is 0 and the SNR is ``inf``, also when both are all zeros (where
ExecuTorch's ``0/0`` gives NaN, which reads as a crossing): an undefined ratio between equal values is
reported as equal, so a flag only ever marks values that differ.
"""

from __future__ import annotations

from typing import Any

from .base import ElementwiseMetric

__all__ = ["SNRComparator"]


class SNRComparator(ElementwiseMetric):
    """Signal (reference power) over noise (error power), in decibels (higher is better)."""

    name = "SNR"
    higher_is_better = True  # a similarity

    def _reduce(self, np: Any, x: Any, d: Any) -> float:
        # float64 division by zero gives inf (identical), like ExecuTorch; 0/0 (both all-zero) is equal too
        signal = np.float64(np.mean(x * x)) if x.size else np.float64("nan")
        noise = np.float64(np.mean(d * d)) if d.size else np.float64("nan")
        if noise == 0:
            return float("inf")
        return float(10 * np.log10(signal / noise))

    def _rowwise(self, np: Any, x: Any, y: Any) -> Any:
        d = x - y
        noise = np.mean(d * d, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = 10 * np.log10(np.mean(x * x, axis=1) / noise)
        return np.where(noise == 0, np.inf, out)
