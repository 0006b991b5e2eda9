"""DataFrames of event blocks, column for column as ``executorch.devtools.Inspector`` builds them.

ExecuTorch concatenates one single-row frame per event, so a column's dtype follows from its
values: float64 when every event has timings, object (floats and None) when some do not;
int64 for integer delegate identifiers, object when mixed with None or strings. This module
builds the same frame directly from :class:`~etlens.model.events.BlockColumns`.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
from ...schema import OPERATOR_CALL

__all__ = ["STAT_NAMES", "EXCLUDED_COLUMNS_WHEN_PRINTING", "EXCLUDED_EVENTS_WHEN_PRINTING", "LazyList",
           "truncated_op_types", "build_frame"]

STAT_NAMES = ["p10", "p50", "p90", "avg", "min", "max"]
EXCLUDED_COLUMNS_WHEN_PRINTING = ["raw", "delegate_debug_identifier", "stack_traces", "module_hierarchy",
                                  "debug_data"]
EXCLUDED_EVENTS_WHEN_PRINTING = {OPERATOR_CALL}


class LazyList(list):
    """A list whose items are produced on first access (debug tensors are decoded only when read).

    ``len()`` is known up front; iterating, indexing, printing or comparing decodes everything once.
    Made either from a thunk (``LazyList(n, thunk)``, ``thunk() -> list``) or, for debug events, from
    a source and its arguments (``LazyList(n, source, run, idxs)``: ``source.values(run, idxs) ->
    list``). The second form holds no closure (one object per list, which matters for the cyclic
    collector when a frame has thousands of them), and :meth:`load_all` decodes many such lists in
    one batch per source and run.
    """

    __slots__ = ("_src", "_run", "_idxs")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, n: int, source: Any, run: Any = None, idxs: Any = None):
        super().__init__([None] * n)
        self._src, self._run, self._idxs = source, run, idxs

    def _values(self) -> list:
        src, self._src = self._src, None
        return src() if self._idxs is None else src.values(self._run, self._idxs)

    def _load(self) -> None:
        if self._src is not None:
            list.__setitem__(self, slice(None), self._values())

    @staticmethod
    def load_all(lists: Iterable[Any]) -> None:
        """Decode every not-yet-loaded ``LazyList(n, source, run, idxs)`` of ``lists`` (others are left
        alone), with one ``source.values`` call per (source, run): what a numeric comparison does with
        the thousands of outputs it reads."""
        groups: dict[tuple[int, Any], list[LazyList]] = {}
        for x in lists:
            if isinstance(x, LazyList) and x._src is not None and x._idxs is not None:
                groups.setdefault((id(x._src), x._run), []).append(x)
        for members in groups.values():
            if len(members) == 1:
                members[0]._load()
                continue
            src, run = members[0]._src, members[0]._run
            values = src.values(run, np.concatenate([m._idxs for m in members]))
            at = 0
            for m in members:
                n = len(m._idxs)
                m._src = None
                list.__setitem__(m, slice(None), values[at:at + n])
                at += n

    def __getitem__(self, i):
        self._load()
        return list.__getitem__(self, i)

    def __iter__(self):
        self._load()
        return list.__iter__(self)

    def __reversed__(self):
        self._load()
        return list.__reversed__(self)

    def __contains__(self, x):
        self._load()
        return list.__contains__(self, x)

    def __repr__(self):
        self._load()
        return list.__repr__(self)

    __str__ = __repr__

    def __eq__(self, other):
        self._load()
        return list.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    def copy(self):
        self._load()
        return list(list.__iter__(self))

    def __reduce_ex__(self, protocol):
        self._load()
        return (list, (list(list.__iter__(self)),))


def truncated_op_types(ops: list[str]) -> Any:
    if len(ops) < 5:
        return ops
    return f"['{ops[0]}', '{ops[1]}' ... '{ops[-1]}'] ({len(ops)} total)"


def _obj(values) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        arr[i] = v
    return arr


def build_frame(cols: dict[str, list], units: str):
    """A DataFrame with ExecuTorch's columns from per-row column lists.

    ``cols`` keys: block, name, raw, stats (list of 6-tuples or None), op_types, delegate_id,
    stack_traces, module_hierarchy, is_delegated, backend, debug_data, start_time.
    """
    import pandas as pd

    n = len(cols["name"])
    data: dict[str, Any] = {}
    data["event_block_name"] = _obj(cols["block"])
    data["event_name"] = _obj(cols["name"])
    data["raw"] = _obj(cols["raw"])
    stats = cols["stats"]
    all_perf = all(s is not None for s in stats)
    for j, stat in enumerate(STAT_NAMES):
        if all_perf and n:
            data[stat + units] = np.array([s[j] for s in stats], dtype=np.float64)
        else:
            data[stat + units] = _obj([None if s is None else s[j] for s in stats])
    data["op_types"] = _obj([truncated_op_types(o) for o in cols["op_types"]])
    dids = cols["delegate_id"]
    if n and all(isinstance(d, int) and not isinstance(d, bool) for d in dids):
        data["delegate_debug_identifier"] = np.array(dids, dtype=np.int64)
    else:
        data["delegate_debug_identifier"] = _obj(dids)
    data["stack_traces"] = _obj(cols["stack_traces"])
    data["module_hierarchy"] = _obj(cols["module_hierarchy"])
    isd = cols["is_delegated"]
    data["is_delegated_op"] = np.array(isd, dtype=bool) if all(isinstance(x, bool) for x in isd) else _obj(isd)
    data["delegate_backend_name"] = _obj(cols["backend"])
    data["debug_data"] = _obj(cols["debug_data"])
    data["start_time"] = _obj(cols["start_time"])
    index = pd.RangeIndex(n)
    # pandas gives an all-string column its string dtype (as ExecuTorch's concat does); any other
    # object column (lists, dicts, None mixed in) stays object
    frame = {}
    for k, v in data.items():
        if v.dtype == object and n and all(type(x) is str for x in v):
            frame[k] = pd.Series(list(v), index=index)
        elif v.dtype == object:
            frame[k] = pd.Series(v, index=index, dtype=object, copy=False)
        else:
            frame[k] = v
    return pd.DataFrame(frame, index=index, copy=False)
