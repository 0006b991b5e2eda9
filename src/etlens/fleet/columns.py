"""The fleet dataset's columns: one row per profiling event per run, as Apache Arrow / Parquet.

A *dataset* is a directory of Parquet files (``part-*.parquet``); every ``etlens collect`` adds
new files, so appending never rewrites what is there. Readers (DuckDB, Spark, pyarrow) take the
union of the files by column name, so a ``--meta`` key added later is simply null in older parts.

Columns (see :data:`COLUMNS`, in this order, then any extra ``--meta`` keys):

=================== =========== =====================================================================
``file``            string      the ETDump path as given to ``collect``
``run``             int32       index of the run (``RunData``) in the file
``block``           string      event block name (``Execute``, ``Default`` …, ExecuTorch's grouping)
``event_index``     int32       position of the event in its block (the same in every run of it)
``event_name``      string      ``native_call_addmm.out``, ``DELEGATE_CALL``, ``Method::execute`` …
``instruction_id``  int32       the runtime's instruction id (-1: none)
``delegate_debug_id`` string    delegate debug identifier (int or string id, as text; null: none)
``debug_handles``   string      debug handles from the ETRecord, comma-separated (null: no record)
``op_types``        string      operators the event covers, ``;``-separated (null: no record)
``module_path``     string      innermost ``nn.Module`` path of the event's nodes (``block.0``; ``""``: root)
``node``            string      graph node names of the event, ``;``-separated
``inside_delegate`` bool        the event was logged by a delegate (timed inside the backend)
``backend``         string      the delegate's backend (``XnnpackBackend``; null: portable kernels)
``start``           int64       raw start timestamp (runtime ticks)
``duration_ms``     double      duration in milliseconds (ExecuTorch's rules, 32-bit wrap-around included)
``occurrence``      int32       n-th event with the same (block, name, handles, module path) in the run
``device``          string      ``--meta device=…``
``build``           string      ``--meta build=…``
``model``           string      ``--meta model=…``, else the first 16 hex digits of the ``.pte``'s sha256
``phase``           string      an LLM's forward run: ``prefill`` / ``decode`` (null: other runs; :mod:`.phases`)
``session``         int32       an LLM's forward run: its generate session in the file (0, 1 …; null: other runs)
``peak_rss_bytes``  int64       the program's measured peak resident memory, when the dump comes with a
                                ``<dump>.measured.json`` (``etlens memory --measure --format json -o``; null: none)
``source``          string      identity: the first 32 hex digits of the sha256 of the ETDump's bytes
=================== =========== =====================================================================

``source`` (:data:`IDENTITY_COLUMNS`) comes last, after any extra ``--meta`` keys; with ``run`` and the
metadata it is the identity of a source run, so collecting a dump again adds nothing
(:mod:`etlens.fleet.store`). Parts written before identities existed have no ``source`` (null there).
"""

from __future__ import annotations

from typing import Any

__all__ = ["COLUMNS", "META_COLUMNS", "IDENTITY_COLUMNS", "LLM_COLUMNS", "MEASURED_COLUMNS", "STRING",
           "arrow_schema", "writer_options", "measured_peak", "with_measured",
           "PART_GLOB", "ROW_GROUP", "occurrences"]

STRING = "string"

#: (name, arrow type name) of the event columns, in file order
COLUMNS: list[tuple[str, str]] = [
    ("file", STRING), ("run", "int32"), ("block", STRING), ("event_index", "int32"), ("event_name", STRING),
    ("instruction_id", "int32"), ("delegate_debug_id", STRING), ("debug_handles", STRING), ("op_types", STRING),
    ("module_path", STRING), ("node", STRING), ("inside_delegate", "bool_"), ("backend", STRING),
    ("start", "int64"), ("duration_ms", "float64"), ("occurrence", "int32"),
]

#: metadata columns every dataset has (null when not given); ``--meta`` keys are added after them
META_COLUMNS = ["device", "build", "model"]

#: identity columns the part writer appends after the metadata (:func:`etlens.fleet.store.with_source`)
IDENTITY_COLUMNS: list[tuple[str, str]] = [("source", STRING)]

#: LLM columns appended to every dump's rows (:func:`etlens.fleet.phases.with_phases`); parts written
#: before them have none (null there)
LLM_COLUMNS: list[tuple[str, str]] = [("phase", STRING), ("session", "int32")]

#: measured-memory columns appended to every dump's rows (:func:`with_measured`); null without a measurement
MEASURED_COLUMNS: list[tuple[str, str]] = [("peak_rss_bytes", "int64")]


def measured_peak(dump_path: str) -> int | None:
    """The peak of ``<dump without extension>.measured.json`` beside the dump, or None (no such file)."""
    import json
    import os

    sidecar = os.path.splitext(dump_path)[0] + ".measured.json"
    try:
        with open(sidecar, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    measured = doc.get("measured", doc) if isinstance(doc, dict) else None
    peak = measured.get("peak_rss_bytes") if isinstance(measured, dict) else None
    return int(peak) if isinstance(peak, (int, float)) else None


def with_measured(table: Any, dump_path: str) -> Any:
    """``table`` (one dump's rows) with :data:`MEASURED_COLUMNS` appended (the same value on every row)."""
    import pyarrow as pa

    peak = measured_peak(dump_path)
    return table.append_column("peak_rss_bytes", pa.array([peak] * table.num_rows, pa.int64()))


#: the files of a dataset directory
PART_GLOB = "**/*.parquet"


def arrow_schema(extra_meta: list[str] | tuple[str, ...] = ()):
    """The :mod:`pyarrow` schema of a part file: strings dictionary-encoded (few distinct values)."""
    import pyarrow as pa

    def typ(name: str):
        if name == STRING:
            return pa.dictionary(pa.int32(), pa.string())
        return getattr(pa, name)()

    fields = [pa.field(n, typ(t)) for n, t in COLUMNS]
    fields += [pa.field(m, typ(STRING)) for m in [*META_COLUMNS, *[k for k in extra_meta if k not in META_COLUMNS]]]
    return pa.schema(fields)


#: rows per Parquet row group at most (a part file holds one row group per ETDump below this)
ROW_GROUP = 1 << 20

#: per-value columns whose consecutive values are close (run, event position, ticks): delta-encoded
_DELTA = ("run", "event_index", "instruction_id", "start")

#: numbers with few distinct values per file: durations are whole ticks scaled, and repeat (pyarrow falls
#: back to plain encoding by itself when a file has too many distinct values)
_DICT_NUMBERS = ("duration_ms",)

#: string columns with per-file constant values: their min/max statistics let engines skip row groups
#: (``WHERE build = 'n'``); the other string columns skip statistics (costly to compute for dictionary
#: columns, never used to prune)
_STATS_STRINGS = ("file", "block")


def writer_options(schema, compression: str = "zstd") -> dict:
    """Keyword arguments of :class:`pyarrow.parquet.ParquetWriter` for a part file with ``schema``.

    Strings and durations are written as dictionaries (their few distinct values once per row
    group), run / event / instruction ids and start ticks with DELTA_BINARY_PACKED (consecutive
    values differ little); statistics for numbers, ``file``, ``block`` and the metadata columns.
    Measured on 300k-event dumps (benchmarks/bench_fleet.py): the write costs about half of what
    pyarrow's defaults cost and the files are a third smaller; the values read back are the same.
    """
    names = list(schema.names)
    strings = [n for n in names if n not in {c for c, t in COLUMNS if t != STRING}]
    event_strings = {c for c, t in COLUMNS if t == STRING} - set(_STATS_STRINGS)
    return {
        "compression": compression,
        "use_dictionary": strings + [c for c in _DICT_NUMBERS if c in names],
        "column_encoding": {c: "DELTA_BINARY_PACKED" for c in _DELTA if c in names},
        "write_statistics": [n for n in names if n not in event_strings],
        "write_batch_size": 1 << 16,     # values encoded per batch (pyarrow's 1024 costs ~8 % more time)
    }


def occurrences(names: Any, attrs: Any) -> Any:
    """``occurrence`` column of one block: how many earlier events share this event's name, debug handles
    and module path (0 for the first), so repeated ops of one module stay apart when runs are compared."""
    import numpy as np

    seen: dict[tuple, int] = {}
    occ = np.zeros(len(names), np.int32)
    for i, name in enumerate(names):
        key = (name, attrs[i][0], attrs[i][2])
        occ[i] = seen.get(key, 0)
        seen[key] = occ[i] + 1
    return occ
