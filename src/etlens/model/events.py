"""Columnar inspector events: one :class:`BlockColumns` per event block, plus ``PerfData``.

An *event block* groups runs with the same signature (the same sequence of operator events),
exactly as ``executorch.devtools.Inspector`` does. Inside a block every event has one timing per
run, so timings are an ``(events x runs)`` float matrix and statistics are computed for all
events at once. ``Event`` objects (the ExecuTorch-compatible API) are built from these columns
only when someone asks for them.

Example::

    from etlens.model.events import PerfData, TimeScale
    p = PerfData([1.0, 2.0, 4.0])
    p.p50, p.avg, p.max          # (2.0, 2.333..., 4.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Iterable, cast

import numpy as np

__all__ = ["TimeScale", "TIME_SCALE_DICT", "calculate_time_scale_factor", "PerfData", "BlockColumns"]


class TimeScale(Enum):
    """Units of runtime timestamps and of reported times (same values as ExecuTorch's)."""

    NS = "ns"
    US = "us"
    MS = "ms"
    S = "s"
    CYCLES = "cycles"


#: ticks per second of each scale (cycles are left as they are)
TIME_SCALE_DICT = {TimeScale.NS: 1_000_000_000, TimeScale.US: 1_000_000, TimeScale.MS: 1000, TimeScale.S: 1,
                   TimeScale.CYCLES: 1}


def calculate_time_scale_factor(source: TimeScale, target: TimeScale) -> float:
    """How many ``source`` units make one ``target`` unit (divide raw durations by this)."""
    return TIME_SCALE_DICT[TimeScale(source)] / TIME_SCALE_DICT[TimeScale(target)]


class PerfData:
    """Timings of one event across runs, in the target time scale.

    ``raw`` is the list of durations; ``p10``/``p50``/``p90`` are numpy (linear) percentiles,
    ``avg`` the mean, ``min``/``max`` the extremes — the same definitions ExecuTorch uses, so
    values compare equal.
    """

    __slots__ = ("raw", "_stats")

    def __init__(self, raw: Iterable[float], _stats: tuple[float, ...] | None = None):
        self.raw = list(raw)
        self._stats = _stats

    def _stat(self, i: int, fn: Callable[[], Any]) -> float:
        if self._stats is not None:
            return self._stats[i]
        return cast(float, fn())  # numpy scalars (np.float64 is a float)

    @property
    def p10(self) -> float:
        return self._stat(0, lambda: np.percentile(self.raw, 10))

    @property
    def p50(self) -> float:
        return self._stat(1, lambda: np.percentile(self.raw, 50))

    @property
    def p90(self) -> float:
        return self._stat(2, lambda: np.percentile(self.raw, 90))

    @property
    def avg(self) -> float:
        return self._stat(3, lambda: np.mean(self.raw))

    @property
    def min(self) -> float:
        return min(self.raw)

    @property
    def max(self) -> float:
        return max(self.raw)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PerfData) and self.raw == other.raw

    def __repr__(self) -> str:
        return f"PerfData(raw={self.raw!r})"


@dataclass
class BlockColumns:
    """One event block as columns (``n`` events, ``k`` runs).

    Runtime-derived: ``names``, ``delegate_ids`` (int, str or None), ``is_delegated``,
    ``instruction_ids``, ``has_perf``, ``raw`` (n x k durations in the target scale, NaN where an
    event has no timing), ``start`` (n x k raw start ticks), ``prof_events`` (n x k index of the
    profile event inside run ``runs[j]``, -1 = none), ``debug_events`` (per event: indices of
    its intermediate-output debug events in run ``runs[0]``, or None).

    ETRecord-derived (filled by the inspector when a record is given): ``debug_handles``,
    ``num_outputs``, ``op_types``, ``stack_traces``, ``module_hierarchy``, ``backend_names``.
    """

    name: str
    bundled_input_index: int
    runs: list[int]
    names: list[str]
    delegate_ids: list[Any]
    is_delegated: list[bool]
    instruction_ids: np.ndarray
    has_perf: np.ndarray
    raw: np.ndarray
    start: np.ndarray
    prof_events: np.ndarray
    debug_events: list[np.ndarray | None]
    output_events: np.ndarray
    debug_handles: list[Any] = field(default_factory=list)
    num_outputs: list[int] = field(default_factory=list)
    op_types: list[list[str]] = field(default_factory=list)
    stack_traces: list[dict[str, Any]] = field(default_factory=list)
    module_hierarchy: list[dict[str, Any]] = field(default_factory=list)
    backend_names: list[str | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.names)
        if not self.debug_handles:
            self.debug_handles = [None] * n
            self.num_outputs = [1] * n
            self.op_types = [[] for _ in range(n)]
            self.stack_traces = [{} for _ in range(n)]
            self.module_hierarchy = [{} for _ in range(n)]
            self.backend_names = [None] * n

    def __len__(self) -> int:
        return len(self.names)

    def stats(self) -> np.ndarray:
        """``(n, 6)`` matrix of p10, p50, p90, avg, min, max (NaN rows for events without timings)."""
        n, k = self.raw.shape
        out = np.full((n, 6), np.nan)
        rows = np.flatnonzero(self.has_perf)
        if rows.size and k:
            m = self.raw[rows]
            out[rows, 0:3] = np.percentile(m, [10, 50, 90], axis=1).T
            out[rows, 3] = np.mean(m, axis=1)
            out[rows, 4] = m.min(axis=1)
            out[rows, 5] = m.max(axis=1)
        return out
