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
        import torch

        ta, tb = aligned_pair(a, b)
        signal = ta.pow(2).mean()
        try:
            noise = (ta - tb).pow(2).mean()
        except RuntimeError as exc:
            raise ValueError(f"SNR: cannot compare shapes {tuple(ta.shape)} and {tuple(tb.shape)}: {exc}") from exc
        # float64 division by zero gives inf (identical) or nan (0/0: both all-zero), like ExecuTorch
        return float(10 * torch.log10(signal / noise))
