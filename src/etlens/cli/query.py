"""``etlens query DATASET "SQL"``: SQL over a fleet dataset (DuckDB embedded, or Spark)."""

from __future__ import annotations

from ._common import add_command
from .emit import emit
from .options import EXIT_OK, add_output


def register(sub) -> None:
    p = add_command(
        sub, "query", "SQL over a fleet dataset: views events, runs, ops (DuckDB, or --engine spark)",
        "etlens query fleet \"SELECT device, build, p50_ms FROM ops WHERE module_path = 'block.0'\"",
        description="Views: events (one row per event per run: file, run, block, event_name, debug_handles, "
                    "module_path, node, inside_delegate, backend, duration_ms, device, build, model, --meta keys), "
                    "runs (one row per run: events, latency_ms = Method::execute, ops_ms), ops (per event_name, "
                    "module_path, node, device, build, model: count, p10_ms, p50_ms, p90_ms, avg_ms, total_ms).")
    p.add_argument("dataset", help="dataset directory written by `etlens collect`")
    p.add_argument("sql", nargs="?", help="the query (omit with --top-ops / --by)")
    p.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb", help="default duckdb (embedded)")
    p.add_argument("--top-ops", type=int, nargs="?", const=20, metavar="N",
                   help="canned: the N operators with the most total time (default 20)")
    p.add_argument("--by", metavar="COLUMN", help="canned: runs and latency p10/p50/p90 per device, build, model …")
    add_output(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..errors import EtlensError
    from ..fleet.sql import by_sql, query_table, top_ops_sql
    given = [x for x in (args.sql, args.top_ops, args.by) if x is not None]
    if len(given) != 1:
        raise EtlensError("query: give exactly one of SQL, --top-ops N or --by COLUMN")
    dialect = "spark" if args.engine == "spark" else "duckdb"
    if args.sql is not None:
        sql = args.sql
    elif args.top_ops is not None:
        sql = top_ops_sql(args.top_ops, dialect)
    else:
        sql = by_sql(args.by, dialect)
    cols, rows = query_table(args.dataset, sql, args.engine)
    emit(args, rows=(cols, rows), footer=f"({len(rows)} rows)")
    return EXIT_OK
