"""The fleet's fast path: an ETDump's profiling events → dataset rows without building an Inspector.

``etlens collect`` writes one row per timed event per run. The reference path
(:func:`etlens.fleet.ingest.reference_rows`) builds a full :class:`~etlens.analysis.inspector.Inspector`
per file — every field of every event decoded, every run grouped on its own. A device farm's dumps
repeat themselves: the same few thousand operator events in every run, the same program in every
file. So here:

1. :func:`~etlens.readers.etdump_columns.read_profile_columns` reads only the profile events'
   ids, name spans and timestamps, as flat columns for all runs at once;
2. runs whose events are identical except for their timestamps share a *pattern*; the
   Inspector's own grouping (:func:`~etlens.analysis.inspector.build.build_blocks`) runs on one
   template run per pattern, and its result — blocks, event names, delegate ids, which profile
   event each block event is — holds for every run of the pattern;
3. everything that depends only on that structure (and on the ETRecord's attribution, computed
   once per block as in the reference path) is cached per process: the static columns of a
   file (names, module paths, occurrences … as dictionary indices) are reused for every later
   dump of the same program and shape; a new file costs the read, one gather of its start/end
   ticks and the duration arithmetic.

Durations follow the Inspector's rules exactly (nanoseconds → milliseconds; 32-bit wrap-around;
delegate events converted to milliseconds before subtracting). A dump with debug events
(intermediate outputs) is read by the general reader (:class:`~etlens.readers.etdump_columns.DumpColumns`)
and then takes the same pattern shortcut. The test ``tests/fleet/test_fastpath.py`` compares
this path's tables with the reference's row by row.

Example::

    from etlens.fleet.fastpath import fast_rows
    table = fast_rows("run.etdp", record=None, meta={"device": "pixel7"})   # pyarrow.Table or None
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.events import TimeScale, calculate_time_scale_factor
from ..model.timing import elapsed
from .columns import COLUMNS, arrow_schema, occurrences

__all__ = ["fast_rows", "durations_ms", "clear_caches"]

#: raw ticks are nanoseconds, rows are milliseconds (the Inspector's defaults)
_SCALE = calculate_time_scale_factor(TimeScale.NS, TimeScale.MS)

#: the string columns whose values come from the block structure (and the ETRecord)
_STATIC_STRINGS = ("block", "event_name", "delegate_debug_id", "debug_handles", "op_types", "module_path", "node",
                   "backend")

#: cached structures / static columns kept per process (a worker sees few programs; one entry of a
#: 300k-event dump holds about 20 MB of arrays, so memory stays bounded)
_MAX_CACHED = 4


def _elapsed(s: np.ndarray, e: np.ndarray, path: str) -> np.ndarray:
    """``e - s`` as float64 with the Inspector's 32-bit wrap-around rule (:func:`etlens.model.timing.elapsed`)."""
    return elapsed(s, e, path)


def durations_ms(start: np.ndarray, end: np.ndarray, delegated: np.ndarray | bool, path: str = "<etdump>"
                 ) -> np.ndarray:
    """Durations in ms of events with raw ``start``/``end`` ticks (uint64), as the Inspector computes them.

    Operator events: integer ticks subtracted, then scaled; ``delegated`` events (timed inside a
    backend): both ends scaled to ms first, then subtracted (ExecuTorch's order, which rounds
    differently).
    """
    if isinstance(delegated, (bool, np.bool_)):
        if not delegated:
            return _elapsed(start, end, path) / _SCALE
        return _elapsed(start.astype(np.float64) / _SCALE, end.astype(np.float64) / _SCALE, path)
    out = np.empty(len(start), np.float64)
    plain = ~delegated
    if plain.any():
        out[plain] = _elapsed(start[plain], end[plain], path) / _SCALE
    if delegated.any():
        out[delegated] = _elapsed(start[delegated].astype(np.float64) / _SCALE,
                                  end[delegated].astype(np.float64) / _SCALE, path)
    return out


@dataclass
class _Block:
    """One event block of a file's structure: the Inspector's block plus where its rows' ticks are."""

    columns: Any          # BlockColumns of the template runs (names, delegate ids, instruction ids …)
    runs: np.ndarray      # real run indices (ascending)
    rows: np.ndarray      # block events with a timing (the rows of each run)
    rel: np.ndarray       # (runs x rows) position of each row's profile event inside its run
    delegated: np.ndarray | bool   # per row of one run: timed inside a delegate (or one flag for all)


@dataclass
class _Static:
    """The columns of a file that do not depend on its timestamps, as Arrow arrays (cached per
    structure and record: immutable, shared by every table built from them)."""

    arrays: dict[str, Any]
    rows: int
    record: Any = None    # the ETRecord attributed with (held, so its id() is not reused while cached)


_STRUCTURES: dict[tuple, list[_Block]] = {}
_STATICS: dict[tuple, _Static] = {}


def clear_caches() -> None:
    """Forget cached structures and static columns (tests; a long-lived process reading many programs)."""
    _STRUCTURES.clear()
    _STATICS.clear()


def _bounded_put(cache: dict, key: tuple, value: Any) -> None:
    if len(cache) >= _MAX_CACHED:
        cache.pop(next(iter(cache)))
    cache[key] = value


def _structure(cols: Any) -> tuple[tuple, list[_Block]]:
    """The blocks of a dump (cached by its run patterns): the Inspector's grouping on one run per pattern."""
    from ..analysis.inspector.build import build_blocks

    pattern, templates, sigs = cols.patterns()
    key = (tuple(sigs), pattern.tobytes())
    hit = _STRUCTURES.get(key)
    if hit is not None:
        return key, hit
    blocks = []
    for b in build_blocks(cols.mini_dump(templates), _SCALE):
        members = np.flatnonzero(np.isin(pattern, b.runs))       # real runs of the block's patterns, ascending
        col_of = {p: j for j, p in enumerate(b.runs)}
        cols_of_runs = np.array([col_of[int(p)] for p in pattern[members]], np.int64)
        rows = np.flatnonzero(b.has_perf)
        rel = b.prof_events[rows][:, cols_of_runs].T.copy() if rows.size else np.zeros((len(members), 0), np.int64)
        deleg = np.asarray(b.is_delegated, bool)[rows] if rows.size else np.zeros(0, bool)
        delegated: np.ndarray | bool = bool(deleg.all()) if deleg.all() or not deleg.any() else deleg
        blocks.append(_Block(b, members, rows, rel, delegated))
    _bounded_put(_STRUCTURES, key, blocks)
    return key, blocks


def _dictionary(values: list[str | None], ids: np.ndarray):
    """``(indices, null mask or None, dictionary)`` of a column whose rows are ``values[ids]``."""
    import pyarrow as pa

    uniq = list(dict.fromkeys(values))
    pos = {v: j for j, v in enumerate(uniq)}
    remap = np.array([pos[v] for v in values], np.int32)
    idx = remap[ids] if len(values) else np.zeros(len(ids), np.int32)
    mask = None
    if None in pos:
        mask = idx == pos[None]
        uniq[pos[None]] = ""
        if not mask.any():
            mask = None
    return idx, mask, pa.array(uniq, pa.string())


def _static(blocks: list[_Block], attrs_of: list[list[tuple]] | None) -> _Static:
    """Every column of a file's rows except file, start, duration and the metadata."""
    values: dict[str, list[str | None]] = {c: [] for c in _STATIC_STRINGS}
    ids: dict[str, list[np.ndarray]] = {c: [] for c in _STATIC_STRINGS}
    nums: dict[str, list[np.ndarray]] = {c: [] for c in ("run", "event_index", "instruction_id", "inside_delegate",
                                                         "occurrence")}
    rows = 0
    for bi, blk in enumerate(blocks):
        b, k = blk.columns, len(blk.runs)
        if not blk.rows.size or not k:
            continue
        n = len(b.names)
        attrs = attrs_of[bi] if attrs_of is not None else [(None, None, None, None, None)] * n
        per_event: dict[str, list[str | None]] = {
            "block": [b.name] * n, "event_name": list(b.names),
            "delegate_debug_id": [None if d is None else str(d) for d in b.delegate_ids],
            "debug_handles": [a[0] for a in attrs], "op_types": [a[1] for a in attrs],
            "module_path": [a[2] for a in attrs], "node": [a[3] for a in attrs], "backend": [a[4] for a in attrs]}
        occ = occurrences(b.names, attrs)
        ev = np.tile(blk.rows, k)
        for c in _STATIC_STRINGS:
            ids[c].append(ev + len(values[c]))         # into the file's value list of the column
            values[c] += per_event[c]
        nums["run"].append(np.repeat(blk.runs.astype(np.int32), blk.rows.size))
        nums["event_index"].append(ev.astype(np.int32))
        nums["instruction_id"].append(b.instruction_ids.astype(np.int32)[ev])
        nums["inside_delegate"].append(np.asarray(b.is_delegated, bool)[ev])
        nums["occurrence"].append(occ[ev])
        rows += len(ev)
    import pyarrow as pa

    arrays: dict[str, Any] = {}
    for c in _STATIC_STRINGS:
        idx, mask, dictionary = _dictionary(values[c], np.concatenate(ids[c]) if ids[c] else np.zeros(0, np.int64))
        arrays[c] = pa.DictionaryArray.from_arrays(pa.array(idx, pa.int32(), mask=mask), dictionary)
    for c, v in nums.items():
        arrays[c] = pa.array(np.concatenate(v) if v else np.zeros(0, bool if c == "inside_delegate" else np.int32))
    return _Static(arrays, rows)


def _attributions(blocks: list[_Block], record: Any, path: str, data: bytes | None) -> list[list[tuple]] | None:
    """Per block, per event: ``(handles, op types, module path, node, backend)`` from the ETRecord (cached)."""
    from .attrs import attributions, block_key

    return attributions(record, [block_key(blk.columns) for blk in blocks], path, data)


#: rows -> (Arrow int32 zeros, the same all null): the indices of constant columns
_ZEROS: dict[int, tuple[Any, Any]] = {}


def fast_rows(path: str, record: Any = None, meta: dict[str, str | None] | None = None,
              extra_meta: list[str] | None = None, data: bytes | None = None):
    """The dataset rows of one ETDump (:func:`etlens.fleet.ingest.dump_rows`' table), or None when the
    dump needs the reference path (an ETRecord attribution that does not match its blocks)."""
    import pyarrow as pa

    from ..readers.etdump import read_etdump
    from ..readers.etdump_columns import DumpColumns, read_profile_columns

    meta = meta or {}
    schema = arrow_schema(extra_meta or [])
    source = data if data is not None else path
    cols: Any = read_profile_columns(source, path=path)
    if cols is None:        # debug events: the general reader, then the same run patterns
        cols = DumpColumns.of(read_etdump(source, path=path))
    skey, blocks = _structure(cols)
    key = (skey, id(record) if record is not None else None)
    static = _STATICS.get(key)
    if static is None or static.record is not record:
        attrs_of = None
        if record is not None:
            attrs_of = _attributions(blocks, record, path, data)
            if attrs_of is None:
                return None
        static = _static(blocks, attrs_of)
        static.record = record
        _bounded_put(_STATICS, key, static)
    m = static.rows
    if not m:
        return schema.empty_table()
    starts, durs = [], []
    for blk in blocks:
        if not blk.rows.size or not len(blk.runs):
            continue
        idx = (cols.bounds[blk.runs][:, None] + blk.rel).ravel()
        s, e = cols.start_time[idx], cols.end_time[idx]
        deleg = blk.delegated if isinstance(blk.delegated, bool) else np.tile(blk.delegated, len(blk.runs))
        starts.append(s.astype(np.int64))
        durs.append(durations_ms(s, e, deleg, path))

    zeros = _ZEROS.get(m)
    if zeros is None:
        _ZEROS.clear()
        zeros = _ZEROS[m] = (pa.array(np.zeros(m, np.int32)), pa.array(np.zeros(m, np.int32), mask=np.ones(m, bool)))

    def const(v: str | None):
        if v is None:
            return pa.DictionaryArray.from_arrays(zeros[1], pa.array([""], pa.string()))
        return pa.DictionaryArray.from_arrays(zeros[0], pa.array([v], pa.string()))

    columns: dict[str, Any] = {"file": const(path), **static.arrays}
    columns["start"] = pa.array(np.concatenate(starts))
    columns["duration_ms"] = pa.array(np.concatenate(durs))
    for c in schema.names[len(COLUMNS):]:
        columns[c] = const(meta.get(c))
    return pa.table([columns[n] for n in schema.names], schema=schema)
