"""Numeric comparators: one file per metric, all built on :class:`NumericalComparatorBase`.

Built-in metrics (names are case-insensitive): ``"MSE"``, ``"L1"``, ``"SNR"`` (as in ExecuTorch),
``"cosine"`` and ``"max_abs"``. :func:`get_comparator` turns a name or an instance into a
comparator::

    from etlens.analysis.comparators import get_comparator
    cmp = get_comparator("snr")
    cmp.element_compare(ref, out)   # 38.2 (dB)
"""

from __future__ import annotations

from typing import Any

from ...errors import EtlensError
from ..protocols import InspectorLike
from .base import DebugHandle, IntermediateOutputMapping, NumericalComparatorBase, aligned_pair, to_float64, to_numpy64
from .cosine import CosineComparator
from .l1 import L1Comparator
from .max_abs import MaxAbsComparator
from .mse import MSEComparator
from .snr import SNRComparator

__all__ = ["NumericalComparatorBase", "IntermediateOutputMapping", "DebugHandle", "MSEComparator",
           "L1Comparator", "SNRComparator", "CosineComparator", "MaxAbsComparator", "COMPARATORS",
           "METRIC_NAMES", "UnknownMetricError", "get_comparator", "to_float64", "to_numpy64", "aligned_pair"]

#: upper-cased metric name -> comparator class
COMPARATORS: dict[str, type[NumericalComparatorBase]] = {
    "MSE": MSEComparator,
    "L1": L1Comparator,
    "SNR": SNRComparator,
    "COSINE": CosineComparator,
    "MAX_ABS": MaxAbsComparator,
}
#: the spellings shown to users (CLI choices, docs)
METRIC_NAMES = ["MSE", "L1", "SNR", "cosine", "max_abs"]


class UnknownMetricError(EtlensError, ValueError):
    """A metric name etlens does not know (a ``ValueError`` too, as in ExecuTorch)."""


def get_comparator(distance: Any, inspector: InspectorLike | None = None) -> NumericalComparatorBase:
    """A comparator for ``distance``: a metric name or a :class:`NumericalComparatorBase` instance.

    An instance without an inspector gets ``inspector`` attached (what ExecuTorch does too).
    Objects that only quack like a comparator (``element_compare`` + ``compare``, e.g. one written
    against ExecuTorch's base class) are accepted as they are.
    """
    if isinstance(distance, NumericalComparatorBase) or (
            hasattr(distance, "element_compare") and hasattr(distance, "compare")):
        if getattr(distance, "inspector", None) is None and inspector is not None:
            try:
                distance.inspector = inspector
            except AttributeError:
                pass
        return distance
    if not isinstance(distance, str):
        raise UnknownMetricError(f"distance must be one of {METRIC_NAMES} or a NumericalComparatorBase, got "
                         f"{type(distance).__name__}")
    key = distance.strip().upper().replace("-", "_")
    cls = COMPARATORS.get(key)
    if cls is None:
        raise UnknownMetricError(f"Unsupported distance metric {distance!r}: use one of {', '.join(METRIC_NAMES)} "
                         f"or pass a NumericalComparatorBase subclass instance")
    return cls(inspector=inspector)
