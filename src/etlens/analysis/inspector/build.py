"""Group ETDump events into event blocks, columnar, with ExecuTorch's exact semantics.

ExecuTorch's Inspector does, per run:

1. collate profile and debug events into *instruction events* keyed by
   ``(instruction_id, chain_index, delegate_debug_id_int, delegate_debug_id_str)``, in order of
   first appearance (run-output debug events are dropped);
2. turn each instruction event into *event signatures*: one per profile event
   ``(instruction id, profile signature, debug signature)``, or one debug-only signature; a
   signature seen twice in a run keeps its first position and its last instance;
3. group runs whose ``(name, signatures, bundled_input_index)`` are equal into one block.

Here each step is a numpy ``unique`` over integer key columns instead of per-event Python
objects; names are already interned ids, so tuple equality is integer equality.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ...model.events import BlockColumns
from ...model.timing import elapsed
from ...readers.etdump import DEBUG, PROFILE, ETDump, RunEvents

__all__ = ["build_blocks"]



def _packed_rows(m: np.ndarray) -> np.ndarray | None:
    """One int64 per row of ``m`` that is equal exactly when the rows are (a mixed-radix number of
    the columns' offsets from their minimum), or ``None`` when the columns' ranges need more than
    62 bits together. The key columns (instruction ids, interned names, flags) span small ranges,
    and ``np.unique`` sorts int64 several times faster than the raw bytes of whole rows. Works on
    the transposed copy: numpy reduces contiguous rows far faster than strided columns."""
    if m.shape[0] == 0:
        return None
    cols = m.T.copy()
    lo = cols.min(axis=1)
    spans = [hi - low + 1 for low, hi in zip(lo.tolist(), cols.max(axis=1).tolist())]  # Python ints: no wrap
    if math.prod(spans) >= 1 << 62:
        return None
    acc = cols[0] - lo[0]
    radix = spans[0]
    for j in range(1, len(spans)):
        if spans[j] > 1:  # a constant column tells no rows apart
            acc += (cols[j] - lo[j]) * radix
            radix *= spans[j]
    return acc


def _unique_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(first index, inverse, last index)`` of equal rows of an int64 matrix (rows are numbered
    in any consistent order: callers only use which rows are equal and where they first/last occur)."""
    m = np.ascontiguousarray(keys, dtype=np.int64)
    packed = _packed_rows(m)
    v = packed if packed is not None else m.view(f"V{8 * m.shape[1]}").ravel()
    _, first, inv = np.unique(v, return_index=True, return_inverse=True)
    inv = inv.ravel()
    last = np.zeros(len(first), dtype=np.int64)
    np.maximum.at(last, inv, np.arange(len(v), dtype=np.int64))
    return first, inv, last


def _norm_str(ids: np.ndarray, empty_id: int) -> np.ndarray:
    """ExecuTorch turns absent and empty strings alike into None: map both to -1."""
    out = ids.astype(np.int64)
    if empty_id >= 0:
        out[out == empty_id] = -1
    return out


def _run_signatures(run: RunEvents, empty_id: int):
    """Event signatures of one run, in ExecuTorch's order.

    Returns ``(keys (k x 7 int64), prof_event (k), debug_lists (k), output_events)``.
    """
    kind = run.kind
    sel = np.flatnonzero((kind == PROFILE) | (kind == DEBUG))
    outputs = np.flatnonzero((kind == DEBUG) & run.is_output)
    if sel.size == 0:
        z = np.zeros(0, np.int64)
        return np.zeros((0, 7), np.int64), z, (z, z, z), outputs
    instr = run.instruction_id[sel].astype(np.int64)
    did = run.delegate_id_int[sel].astype(np.int64)
    dstr_raw = run.delegate_id_str[sel].astype(np.int64)   # -1 absent; "" kept distinct (as ET's IE key)
    ie_keys = np.stack([instr, run.chain_key[sel], did, dstr_raw], axis=1)
    ie_first, ie_of, _ = _unique_rows(ie_keys)
    is_prof = kind[sel] == PROFILE
    is_dbg = (kind[sel] == DEBUG) & ~run.is_output[sel]
    n_ie = len(ie_first)
    # first intermediate debug event of each instruction event (its debug signature)
    dbg_pos = np.flatnonzero(is_dbg)
    first_dbg = np.full(n_ie, -1, np.int64)
    if dbg_pos.size:
        # reversed assignment leaves the smallest position
        first_dbg[ie_of[dbg_pos[::-1]]] = dbg_pos[::-1]
    has_dbg = first_dbg >= 0
    name_norm = _norm_str(run.name_id[sel], empty_id)
    dname = np.where(has_dbg, name_norm[np.maximum(first_dbg, 0)], -1)
    dstr_norm = _norm_str(run.delegate_id_str[sel], empty_id)
    ie_instr = instr[ie_first]
    ie_did = did[ie_first]
    ie_dstr = dstr_norm[ie_first]
    has_prof_ie = np.zeros(n_ie, bool)
    prof_pos = np.flatnonzero(is_prof)
    has_prof_ie[ie_of[prof_pos]] = True
    dbg_only = np.flatnonzero(~has_prof_ie & has_dbg)
    # candidate entries: every profile event + one per debug-only instruction event
    e_ie = np.concatenate([ie_of[prof_pos], dbg_only])
    e_pos = np.concatenate([prof_pos, first_dbg[dbg_only]])
    e_hasp = np.concatenate([np.ones(len(prof_pos), np.int64), np.zeros(len(dbg_only), np.int64)])
    e_pname = np.concatenate([name_norm[prof_pos], np.full(len(dbg_only), -1, np.int64)])
    order = np.lexsort((e_pos, ie_first[e_ie]))
    e_ie, e_pos, e_hasp, e_pname = e_ie[order], e_pos[order], e_hasp[order], e_pname[order]
    keys = np.stack([ie_instr[e_ie], ie_did[e_ie], ie_dstr[e_ie], e_hasp, e_pname,
                     has_dbg[e_ie].astype(np.int64), dname[e_ie]], axis=1)
    first, inv, last = _unique_rows(keys)
    keep = np.sort(first)                    # signature position: first occurrence
    last_of = last[inv[keep]]                # signature value: last occurrence
    keys = keys[keep]
    prof_event = np.where(e_hasp[last_of] == 1, sel[e_pos[last_of]], -1)
    # debug events of the chosen instruction event, in file order
    chosen_ie = e_ie[last_of]
    k = len(keep)
    lo = hi = np.zeros(k, np.int64)
    dbg_ev_sorted = np.zeros(0, np.int64)
    if dbg_pos.size:
        dbg_ie = ie_of[dbg_pos]
        srt = np.argsort(dbg_ie, kind="stable")
        dbg_ie_sorted = dbg_ie[srt]
        dbg_ev_sorted = sel[dbg_pos[srt]]
        lo = np.searchsorted(dbg_ie_sorted, chosen_ie, "left")
        hi = np.searchsorted(dbg_ie_sorted, chosen_ie, "right")
    # slices are materialised only for the first run of each block (the one ExecuTorch reads)
    debug_lists = (dbg_ev_sorted, lo, hi)
    return keys, prof_event, debug_lists, outputs


def _event_identity(dump: ETDump, keys: np.ndarray) -> tuple[list[str], list[Any], list[bool]]:
    """Name, delegate debug identifier and delegation flag of each signature (ExecuTorch rules)."""
    strings = dump.strings
    names, dids, deleg = [], [], []
    for _instr, did, dstr, hasp, pname, hasd, dname in keys.tolist():
        ident = did if did != -1 else (strings[dstr] if dstr >= 0 else None)
        is_del = ident is not None
        name = ""
        if hasp:
            nm = str(ident) if is_del else (strings[pname] if pname >= 0 else "")
            if nm:
                name = nm
        if hasd:
            nm = str(ident) if is_del else (strings[dname] if dname >= 0 else "")
            if nm:
                name = nm
        names.append(name)
        dids.append(ident)
        deleg.append(is_del)
    return names, dids, deleg


def _elapsed(start: np.ndarray, end: np.ndarray, what: str) -> np.ndarray:
    """``end - start`` with ExecuTorch's 32-bit wrap-around rule (:func:`etlens.model.timing.elapsed`)."""
    return elapsed(start, end, what)


def build_blocks(dump: ETDump, scale_factor: float,
                 delegate_time_scale_converter: Callable | None = None) -> list[BlockColumns]:
    """Event blocks of ``dump`` (ExecuTorch's grouping) with timings in the target scale."""
    empty_id = dump.strings.index("") if "" in dump.strings else -1
    groups: dict[tuple, list[int]] = {}
    per_run: dict[int, tuple] = {}
    for r, run in enumerate(dump.runs):
        if len(run) == 0:
            continue  # ExecuTorch skips runs without events
        keys, prof_event, debug_lists, outputs = _run_signatures(run, empty_id)
        per_run[r] = (keys, prof_event, debug_lists, outputs)
        sig = (run.name, run.bundled_input_index, keys.shape[0], keys.tobytes())
        groups.setdefault(sig, []).append(r)
    blocks = []
    for runs in groups.values():
        keys, _, (dbg_ev, lo, hi), outputs = per_run[runs[0]]
        debug_lists: list = [None] * keys.shape[0]
        for j in np.flatnonzero(hi > lo).tolist():
            debug_lists[j] = dbg_ev[lo[j]:hi[j]]
        n, k = keys.shape[0], len(runs)
        names, dids, deleg = _event_identity(dump, keys)
        prof = np.stack([per_run[r][1] for r in runs], axis=1) if n else np.zeros((0, k), np.int64)
        has_perf = keys[:, 3] == 1 if n else np.zeros(0, bool)
        starts = np.zeros((n, k), np.uint64)
        ends = np.zeros((n, k), np.uint64)
        for j, r in enumerate(runs):
            pe = prof[:, j]
            ok = pe >= 0
            starts[ok, j] = dump.runs[r].start_time[pe[ok]]
            ends[ok, j] = dump.runs[r].end_time[pe[ok]]
        raw = np.full((n, k), np.nan)
        deleg_arr = np.asarray(deleg, bool) if n else np.zeros(0, bool)
        plain = has_perf & ~deleg_arr
        if plain.any():
            raw[plain] = _elapsed(starts[plain], ends[plain], dump.path) / scale_factor
        dl = np.flatnonzero(has_perf & deleg_arr)
        if dl.size:
            if delegate_time_scale_converter is None:
                cs = starts[dl].astype(np.float64) / scale_factor
                ce = ends[dl].astype(np.float64) / scale_factor
            else:
                conv = delegate_time_scale_converter
                cs = np.array([[conv(names[i], int(v)) for v in starts[i].tolist()] for i in dl.tolist()],
                              dtype=np.float64).reshape(len(dl), k)
                ce = np.array([[conv(names[i], int(v)) for v in ends[i].tolist()] for i in dl.tolist()],
                              dtype=np.float64).reshape(len(dl), k)
            raw[dl] = _elapsed(cs, ce, dump.path)
        run0 = dump.runs[runs[0]]
        blocks.append(BlockColumns(
            name=run0.name, bundled_input_index=run0.bundled_input_index, runs=list(runs), names=names,
            delegate_ids=dids, is_delegated=deleg, instruction_ids=keys[:, 0].copy(), has_perf=has_perf,
            raw=raw, start=starts, prof_events=prof, debug_events=debug_lists, output_events=outputs))
    return blocks
