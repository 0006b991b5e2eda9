"""The ExecuTorch-compatible ``Event``, ``EventBlock`` and ``RuntimeOutput`` records of the inspector.

``Event`` and ``EventBlock`` have the fields, defaults and methods of their
``executorch.devtools.inspector`` namesakes (so code written against ExecuTorch keeps working);
the :class:`~etlens.analysis.inspector.Inspector` builds them from its columns on demand.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ...errors import EtlensError
from ...model.events import PerfData, TimeScale
from .frame import build_frame

__all__ = ["Event", "EventBlock", "RuntimeOutput"]


@dataclass
class Event:
    """One operator (or framework/delegate) event aggregated over the runs of its block.

    Same fields and meanings as ``executorch.devtools.inspector.Event``: ``name``, ``perf_data``
    (durations in the target time scale), ``op_types``, ``delegate_debug_identifier``,
    ``debug_handles``, ``num_outputs``, ``stack_traces`` / ``module_hierarchy`` (keyed by
    ``<node name>_``), ``is_delegated_op``, ``delegate_backend_name``, ``debug_data``
    (intermediate outputs), ``start_time`` (raw start ticks per run).
    """

    name: str
    perf_data: Optional[PerfData] = None
    op_types: List[str] = dataclasses.field(default_factory=list)
    delegate_debug_identifier: Optional[Union[int, str]] = None
    debug_handles: Optional[Union[int, Sequence[int]]] = None
    num_outputs: int = 1
    stack_traces: Dict[str, str] = dataclasses.field(default_factory=dict)
    module_hierarchy: Dict[str, Dict] = dataclasses.field(default_factory=dict)
    is_delegated_op: Optional[bool] = None
    delegate_backend_name: Optional[str] = None
    _delegate_debug_metadatas: List[Any] = dataclasses.field(default_factory=list)
    debug_data: List[Any] = dataclasses.field(default_factory=list)
    _instruction_id: Optional[int] = None
    _delegate_metadata_parser: Optional[Callable] = None
    _delegate_time_scale_converter: Optional[Callable] = None
    _start_time: Optional[List[int]] = None

    @cached_property
    def delegate_debug_metadatas(self) -> Union[List[Any], Dict[str, Any]]:
        """Parsed delegate metadata when a parser was given (delegated events), else the raw list."""
        if not self.is_delegated_op or self._delegate_metadata_parser is None:
            return self._delegate_debug_metadatas
        return self._delegate_metadata_parser(self._delegate_debug_metadatas)

    @property
    def raw_delegate_debug_metadatas(self) -> List[Any]:
        return self._delegate_debug_metadatas

    @property
    def start_time(self) -> Optional[List[int]]:
        return self._start_time

    def asdict(self, _units: str = "") -> dict:
        from .frame import truncated_op_types

        p = self.perf_data
        return {
            "event_name": self.name,
            "raw": [p.raw if p else None],
            "p10" + _units: p.p10 if p else None,
            "p50" + _units: p.p50 if p else None,
            "p90" + _units: p.p90 if p else None,
            "avg" + _units: p.avg if p else None,
            "min" + _units: p.min if p else None,
            "max" + _units: p.max if p else None,
            "op_types": [truncated_op_types(self.op_types)],
            "delegate_debug_identifier": self.delegate_debug_identifier,
            "stack_traces": [self.stack_traces],
            "module_hierarchy": [self.module_hierarchy],
            "is_delegated_op": self.is_delegated_op,
            "delegate_backend_name": self.delegate_backend_name,
            "debug_data": [self.debug_data],
            "start_time": [self._start_time],
        }

    def to_dataframe(self, _units: str = ""):
        import pandas as pd

        return pd.DataFrame(self.asdict(_units=_units))


@dataclass
class EventBlock:
    """The events of one group of runs with the same signature (``Default``, ``Execute`` …)."""

    name: str
    events: List[Event] = dataclasses.field(default_factory=list)
    source_time_scale: TimeScale = TimeScale.NS
    target_time_scale: TimeScale = TimeScale.MS
    bundled_input_index: Optional[int] = None
    run_output: Optional[List[Any]] = None
    reference_output: Optional[List[Any]] = None
    #: etlens: the program method this block was attributed to (None without an ETRecord)
    method: Optional[str] = None

    def to_dataframe(self, include_units: bool = False, include_delegate_debug_data: bool = False):
        """One row per event (same columns as ExecuTorch's ``EventBlock.to_dataframe``)."""
        units = f" ({TimeScale(self.target_time_scale).value})" if include_units else ""
        df = build_frame(_columns_from_events(self), units)
        if include_delegate_debug_data:
            df = _add_delegate_columns(df, self.events)
        return df


@dataclass
class RuntimeOutput:
    """One operator event's runtime intermediate output, for numeric comparison.

    ``outputs`` is a lazily decoded list (one entry per logged debug value: tensors, lists of
    tensors or scalars); ``debug_handles`` is a tuple.
    """

    block: str
    event_index: int
    name: str
    instruction_id: int
    debug_handles: tuple
    num_outputs: int
    op_types: List[str]
    is_delegated_op: bool
    delegate_backend_name: Optional[str]
    outputs: List[Any]


def _columns_from_events(block: EventBlock) -> dict[str, list]:
    cols: dict[str, list] = {k: [] for k in ("block", "name", "raw", "stats", "op_types", "delegate_id",
                                             "stack_traces", "module_hierarchy", "is_delegated", "backend",
                                             "debug_data", "start_time")}
    for e in block.events:
        p = e.perf_data
        cols["block"].append(block.name)
        cols["name"].append(e.name)
        cols["raw"].append(p.raw if p else None)
        cols["stats"].append((p.p10, p.p50, p.p90, p.avg, p.min, p.max) if p else None)
        cols["op_types"].append(e.op_types)
        cols["delegate_id"].append(e.delegate_debug_identifier)
        cols["stack_traces"].append(e.stack_traces)
        cols["module_hierarchy"].append(e.module_hierarchy)
        cols["is_delegated"].append(e.is_delegated_op)
        cols["backend"].append(e.delegate_backend_name)
        cols["debug_data"].append(e.debug_data)
        cols["start_time"].append(e._start_time)
    return cols


def _add_delegate_columns(df, events: list[Event]):
    import pandas as pd

    rows = []
    for event in events:
        meta = event.delegate_debug_metadatas
        if meta is not None and len(meta) > 0:
            if isinstance(meta, list):
                rows.append(pd.Series([meta], index=["delegate_debug_metadata"]))
            elif isinstance(meta, dict):
                rows.append(pd.Series(meta))
            else:
                raise EtlensError(f"delegate_metadata_parser returned {type(meta).__name__}; expected a list or dict")
        else:
            rows.append(pd.Series())
    if any(not r.empty for r in rows):
        df = pd.concat([df, pd.DataFrame(rows)], axis=1)
    return df
