"""The fleet dataset's LLM columns: ``phase`` and ``session`` of every row's run.

An LLM's forward runs are prefills (the prompt) and decode steps (one token each); comparing a
build's or a device's decode speed means comparing decode runs only. :func:`with_phases` labels
each run of one ETDump's table (:func:`etlens.analysis.llm_phases.label_rows`: from the rows'
timings and the ETRecord, as ``etlens inspect --llm`` does on a timing-only dump) and appends

- ``phase`` (string): ``prefill`` / ``decode`` for an LLM's forward runs, null for every other run
  (metadata methods, models that are not LLMs);
- ``session`` (int32): the generate session of the run in its file (0, 1 ...), null likewise.

Example (DuckDB)::

    etlens query fleet/ "SELECT device, quantile_cont(latency_ms, 0.5) AS decode_ms FROM runs
                         WHERE phase = 'decode' GROUP BY device"
    etlens compare fleet/ --where "phase = 'decode'" ...
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .columns import LLM_COLUMNS

__all__ = ["with_phases", "LLM_COLUMNS"]


def _codes(table: Any, name: str) -> tuple[np.ndarray, list]:
    """A string column as ``(codes, values)``: each row's index into its distinct values (a null row points
    one past them), straight from the dictionary encoding: no Python object per row."""
    import pyarrow as pa

    col = table.column(name).combine_chunks()
    if not pa.types.is_dictionary(col.type):
        col = col.dictionary_encode()
    values = col.dictionary.to_pylist()
    codes = col.indices.fill_null(len(values)).to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, values


def with_phases(table: Any, record: Any = None, prompt_lens: Any = None) -> Any:
    """``table`` (one ETDump's rows) with the :data:`~.columns.LLM_COLUMNS` appended. ``prompt_lens``: the
    prompt length of every generate session of the dump (one value), or one per session in order
    (``etlens collect --prompt-len``): a static-shape program's prompt runs are then labelled ``prefill``."""
    import pyarrow as pa

    from ..analysis.llm_phases import is_llm_name, label_rows

    n = table.num_rows
    labels: dict[int, tuple[str, int, int]] = {}
    if n:
        names_col = table.column("event_name")
        dictionaries = [c.dictionary.to_pylist() for c in names_col.chunks if hasattr(c, "dictionary")]
        looks = any(is_llm_name(x) for d in dictionaries for x in d) if dictionaries else True
        if looks:
            name_codes, names = _codes(table, "event_name")
            handle_codes, handles = _codes(table, "debug_handles")
            labels = label_rows(table.column("run").to_numpy(), table.column("event_index").to_numpy(),
                                name_codes, names, table.column("duration_ms").to_numpy(zero_copy_only=False),
                                table.column("start").to_numpy(),
                                table.column("inside_delegate").to_numpy(zero_copy_only=False),
                                handle_codes, handles, record, prompt_lens)
    runs = table.column("run").to_numpy()
    if labels:
        ids = np.array(sorted(labels), np.int64)
        pos = np.searchsorted(ids, runs)
        pos = np.clip(pos, 0, len(ids) - 1)
        hit = ids[pos] == runs
        phase_of = np.array([0 if labels[int(r)][0] == "prefill" else 1 for r in ids], np.int32)
        sess_of = np.array([labels[int(r)][1] for r in ids], np.int32)
        phase_idx = np.where(hit, phase_of[pos], 0).astype(np.int32)
        phase = pa.DictionaryArray.from_arrays(pa.array(phase_idx, pa.int32(), mask=~hit),
                                               pa.array(["prefill", "decode"], pa.string()))
        session = pa.array(np.where(hit, sess_of[pos], 0).astype(np.int32), pa.int32(), mask=~hit)
    else:
        phase = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32), pa.int32(), mask=np.ones(n, bool)),
                                               pa.array(["prefill", "decode"], pa.string()))
        session = pa.array(np.zeros(n, np.int32), pa.int32(), mask=np.ones(n, bool))
    table = table.append_column(pa.field("phase", phase.type), phase)
    return table.append_column(pa.field("session", pa.int32()), session)
