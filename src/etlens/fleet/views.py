"""The fleet dataset's SQL views (``runs``, ``ops`` over ``events``) and its part files, for every engine.

:mod:`.sql` (DuckDB) and :mod:`.spark` both build the views from here, so neither imports the other
for them; see :mod:`.sql` for what each view holds.
"""

from __future__ import annotations

import glob
import os

from ..errors import MissingDataError
from ..schema import FRAMEWORK_EVENT_NAMES, METHOD_EXECUTE, OPERATOR_CALL

__all__ = ["VIEWS", "OP_FILTER", "view_sql", "part_files", "percentile_sql"]

_FRAMEWORK = ", ".join("'" + n.replace("'", "''") + "'" for n in (*FRAMEWORK_EVENT_NAMES, OPERATOR_CALL))
#: the rows that are operator work (what ``ops`` and ``runs.ops_ms`` count): not framework events, not the
#: ``OPERATOR_CALL`` wrapper timed around each kernel (it would count the kernel twice)
OP_FILTER = f"event_name NOT IN ({_FRAMEWORK}) AND duration_ms IS NOT NULL"

#: names of the views, in the order they are created
VIEWS = ("events", "runs", "ops")


def percentile_sql(dialect: str, col: str, q: float) -> str:
    return f"quantile_cont({col}, {q})" if dialect == "duckdb" else f"percentile({col}, {q})"


def view_sql(dialect: str = "duckdb") -> dict[str, str]:
    """``{view: SELECT …}`` for ``runs`` and ``ops`` over ``events`` in ``dialect`` (``duckdb``/``spark``)."""
    meta = "device, build, model"
    runs = (f"SELECT file, run, block, {meta}, count(*) AS events, "
            f"max(CASE WHEN event_name = '{METHOD_EXECUTE}' THEN duration_ms END) AS latency_ms, "
            f"sum(CASE WHEN {OP_FILTER} THEN duration_ms END) AS ops_ms, "
            f"max(phase) AS phase, max(session) AS session "   # an LLM's runs: prefill / decode (fleet.phases)
            f"FROM events WHERE block <> 'Default' GROUP BY file, run, block, {meta}")
    p = [percentile_sql(dialect, "duration_ms", q) for q in (0.1, 0.5, 0.9)]
    ops = (f"SELECT event_name, module_path, node, {meta}, count(*) AS count, {p[0]} AS p10_ms, "
           f"{p[1]} AS p50_ms, {p[2]} AS p90_ms, avg(duration_ms) AS avg_ms, sum(duration_ms) AS total_ms "
           f"FROM events WHERE {OP_FILTER} GROUP BY event_name, module_path, node, {meta}")
    return {"runs": runs, "ops": ops}


def part_files(dataset: str) -> list[str]:
    """The Parquet files of ``dataset`` (a directory, or one ``.parquet`` file); an error when there are none."""
    if os.path.isfile(dataset):
        return [dataset]
    if not os.path.isdir(dataset):
        raise MissingDataError(f"{dataset}: no such dataset; create it with `etlens collect ETDUMPS -o {dataset}`")
    files = sorted(glob.glob(os.path.join(glob.escape(dataset), "**", "*.parquet"), recursive=True))
    if not files:
        raise MissingDataError(f"{dataset}: the dataset has no Parquet files yet; add runs with "
                               f"`etlens collect ETDUMPS -o {dataset}`")
    return files
