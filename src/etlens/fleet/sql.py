"""SQL over a fleet dataset: the documented views and the engines that run them (DuckDB here, Spark in :mod:`.spark`).

Views (the same names, columns and meaning on every engine):

``events``
    every row of the dataset (:mod:`etlens.fleet.columns`), all part files unioned by column name.
``runs``
    one row per run of the model: ``file, run, block, device, build, model, events`` (rows of the run),
    ``latency_ms`` (the run's ``Method::execute``), ``ops_ms`` (sum of the operator / delegate events,
    framework and ``OPERATOR_CALL`` rows left out), ``phase`` / ``session`` (an LLM's forward runs: ``prefill``
    / ``decode`` and the generate session, :mod:`.phases`; null otherwise). Only ``Execute`` blocks (runs of a method).
``ops``
    a roll-up per ``event_name, module_path, node, device, build, model``: ``count``, ``p10_ms``,
    ``p50_ms``, ``p90_ms`` (linear-interpolated percentiles, as ``numpy.percentile`` and the Inspector),
    ``avg_ms``, ``total_ms``; operator events only (as ``runs.ops_ms``).

Canned questions: :func:`top_ops_sql` (``--top-ops N``) and :func:`by_sql` (``--by device``).

Example::

    from etlens.fleet.sql import query
    rows = query("fleet/", "SELECT device, count(*) AS n FROM events GROUP BY device ORDER BY device")
    # [{'device': 'pixel7', 'n': 520}, ...]
"""

from __future__ import annotations

from typing import Any

from ..errors import EtlensError
from .views import OP_FILTER, VIEWS, part_files, percentile_sql, view_sql

__all__ = ["VIEWS", "view_sql", "part_files", "query", "query_table", "top_ops_sql", "by_sql", "duckdb_connection",
           "OP_FILTER"]

def duckdb_connection(dataset: str | None = None, table: Any = None):
    """A DuckDB connection with the views over ``dataset`` (or over an Arrow ``table`` of events)."""
    try:
        import duckdb
    except ImportError as exc:  # pragma: no cover - duckdb is a core dependency
        raise EtlensError("the DuckDB engine needs duckdb: pip install duckdb") from exc
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")   # DuckDB's own bar would print on long queries, piped or not
    if table is not None:
        con.register("events_arrow", table)
        con.execute("CREATE VIEW events AS SELECT * FROM events_arrow")
    else:
        files = part_files(dataset or "")
        listing = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        con.execute(f"CREATE VIEW events AS SELECT * FROM read_parquet([{listing}], union_by_name = true)")
        have = {r[0] for r in con.execute("DESCRIBE events").fetchall()}
        if "phase" not in have:  # parts collected before the LLM columns (fleet.phases): null there
            con.execute(f"CREATE OR REPLACE VIEW events AS SELECT *, NULL::VARCHAR AS phase, NULL::INTEGER AS session "
                        f"FROM read_parquet([{listing}], union_by_name = true)")
    for name, sql in view_sql("duckdb").items():
        con.execute(f"CREATE VIEW {name} AS {sql}")
    return con


def query_table(dataset: str, sql: str, engine: str = "duckdb"):
    """Run ``sql`` over ``dataset``'s views; ``(column names, list of row tuples)``."""
    if engine == "spark":
        from .spark import spark_query

        return spark_query(dataset, sql)
    if engine != "duckdb":
        raise EtlensError(f"--engine {engine}: choose duckdb or spark")
    con = duckdb_connection(dataset)
    try:
        cur = con.execute(sql)
    except Exception as exc:  # duckdb.Error: a bad query is the user's one-line error
        raise EtlensError(f"query failed: {' '.join(str(exc).split())[:500]} (views: events, runs, ops; "
                          "see `etlens query --help`)") from exc
    cols = [d[0] for d in cur.description]
    return cols, cur.fetchall()


def query(dataset: str, sql: str, engine: str = "duckdb") -> list[dict[str, Any]]:
    """Run ``sql`` over ``dataset``; a list of row dicts."""
    cols, rows = query_table(dataset, sql, engine)
    return [dict(zip(cols, r)) for r in rows]


def top_ops_sql(n: int = 20, dialect: str = "duckdb") -> str:
    """The ``n`` operator events with the most total time over the whole dataset."""
    p50 = percentile_sql(dialect, "duration_ms", 0.5)
    return (f"SELECT event_name, module_path, count(*) AS count, {p50} AS p50_ms, "
            f"sum(duration_ms) AS total_ms FROM events WHERE {OP_FILTER} GROUP BY event_name, module_path "
            f"ORDER BY total_ms DESC, event_name, module_path LIMIT {int(n)}")


def by_sql(column: str, dialect: str = "duckdb") -> str:
    """Runs and whole-model latency grouped by ``column`` (``device``, ``build``, ``model`` or a ``--meta`` key)."""
    if not column.isidentifier():
        raise EtlensError(f"--by {column!r}: give a column name (device, build, model or a --meta key)")
    p = [percentile_sql(dialect, "latency_ms", q) for q in (0.1, 0.5, 0.9)]
    return (f"SELECT {column}, count(DISTINCT file) AS files, count(*) AS runs, sum(events) AS events, "
            f"{p[0]} AS p10_ms, {p[1]} AS p50_ms, {p[2]} AS p90_ms FROM runs GROUP BY {column} ORDER BY {column}")
