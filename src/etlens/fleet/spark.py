"""Apache Spark engine: the same dataset, the same views, the same SQL — and a distributed ``collect``.

``etlens query DATASET SQL --engine spark`` registers ``events`` (every Parquet part, schemas merged
by name) and the ``runs`` / ``ops`` views of :mod:`etlens.fleet.sql` in Spark's dialect, so a query
gives the same rows as on DuckDB. ``etlens collect … --engine spark`` reads the ETDumps with
``binaryFiles``, parses each partition's files with etlens' own parser (:func:`~.ingest.dump_rows`,
no torch needed on executors) and writes one Parquet part per partition into the collect's staging
directory; the driver commits them (:class:`~.store.Committer`: the same identities, ``skip`` /
``replace`` / ``append`` and crash safety as the local engine).

The session: ``local[*]`` unless ``$ETLENS_SPARK_MASTER`` (or ``spark-submit``'s ``--master``) says
otherwise; one per process (:func:`session`). On a real cluster the dataset directory must be on a
file system every executor writes to (HDFS, NFS, a mounted bucket) and etlens must be installed on
the executors (``pip install etlens``: no torch). Submit with::

    spark-submit --master yarn "$(python -c 'import etlens.fleet.spark as s; print(s.__file__)')" \\
        collect /data/etdumps -o /data/fleet --meta build=n --etrecord model.etrecord
    spark-submit … query /data/fleet "SELECT * FROM ops ORDER BY p50_ms DESC LIMIT 10"
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from typing import Any, Iterator

from etlens.errors import BackendUnavailableError, EtlensError  # absolute: this file is also a spark-submit script

__all__ = ["session", "register_views", "spark_query", "spark_collect", "main"]

_SESSION: Any = None


def session():
    """The process's SparkSession (created on first use; quiet logs, no UI)."""
    global _SESSION
    if _SESSION is not None:
        return _SESSION
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise BackendUnavailableError("--engine spark needs pyspark and Java: pip install pyspark, "
                                      "apt-get install default-jre-headless") from exc
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("etlens")
    master = os.environ.get("ETLENS_SPARK_MASTER")
    if master or not _under_spark_submit():
        builder = builder.master(master or "local[*]")
    builder = (builder.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "1g"))
    try:
        _SESSION = builder.getOrCreate()
    except Exception as exc:  # Java missing or failing to start: one line, not a JVM stack
        raise BackendUnavailableError(f"Spark failed to start ({' '.join(str(exc).split())[:300]}); it needs Java "
                                      "(apt-get install default-jre-headless)") from exc
    _SESSION.sparkContext.setLogLevel("ERROR")
    return _SESSION


def _under_spark_submit() -> bool:
    """Started by ``spark-submit`` (its JVM gateway is already up; its ``--master`` decides), or with
    ``--master`` in ``$PYSPARK_SUBMIT_ARGS``."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or "--master" in os.environ.get("PYSPARK_SUBMIT_ARGS", "")


def register_views(spark: Any, dataset: str) -> None:
    """``events`` over ``dataset``'s Parquet parts plus the ``runs`` and ``ops`` views, in ``spark``."""
    from .views import part_files, view_sql

    files = part_files(dataset)
    spark.read.option("mergeSchema", "true").parquet(*files).createOrReplaceTempView("events")
    for name, sql in view_sql("spark").items():
        spark.sql(sql).createOrReplaceTempView(name)


def spark_query(dataset: str, sql: str) -> tuple[list[str], list[tuple]]:
    """Run ``sql`` over ``dataset`` on Spark; ``(column names, row tuples)`` like the DuckDB engine."""
    spark = session()
    register_views(spark, dataset)
    try:
        df = spark.sql(sql)
        rows = df.collect()
    except Exception as exc:  # AnalysisException / ParseException: the user's query
        raise EtlensError(f"query failed on Spark: {' '.join(str(exc).split())[:500]}") from exc
    return list(df.columns), [tuple(r) for r in rows]


def _partition(records: Iterator[tuple[str, bytes]], staging: str, record_path: str | None, meta: dict,
               extra: list[str], mode: str, present: dict, prompt_lens: list[int] | None = None) -> Iterator[Any]:
    """One Spark partition: its ETDumps into one staged part (:class:`~.ingest.BatchResult`, committed by the
    driver)."""
    from .ingest import BatchResult, dump_rows, one_line, record_at
    from .store import PartWriter, SourceInfo, content_id, fault, meta_key

    record = record_at(record_path)
    name = f"part-spark-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:10]}.parquet"
    writer = PartWriter(os.path.join(staging, name + ".tmp"), name)
    out = BatchResult()
    mkey = meta_key(meta)
    runs_of: dict = {}
    try:
        for path, data in records:
            local = path[5:] if path.startswith("file:") else path
            data = bytes(data)
            key = (content_id(data), mkey)
            if mode != "append" and (writer.seen(key) or (mode == "skip" and key in present)):
                out.files += 1
                out.present.append((local, runs_of[key] if writer.seen(key) else present[key]))
                continue
            try:
                table = dump_rows(local, record, meta, extra, data=data, prompt_lens=prompt_lens)
            except (EtlensError, OSError, ValueError, IndexError, KeyError, OverflowError) as exc:
                out.skipped.append((local, one_line(exc).replace("<etdump bytes>", local)))
                continue
            out.files += 1
            runs = len(set(table["run"].to_pylist())) if table.num_rows else 0
            runs_of[key] = runs
            writer.add(table, SourceInfo(key[0], mkey, runs, table.num_rows, local))
            fault("spark-write")
        out.staged = writer.close()
    except BaseException:
        writer.abort()
        raise
    yield out


def spark_collect(inputs: list[str], dataset: str, *, meta: dict[str, str] | None = None, etrecord: str | None = None,
                  pte: str | None = None, partitions: int | None = None, mode: str = "skip",
                  prompt_lens: list[int] | None = None):
    """:func:`etlens.fleet.ingest.collect` on Spark: ``binaryFiles`` → etlens' parser per partition → staged
    Parquet parts → committed by this driver (``mode`` as in :func:`~etlens.fleet.ingest.collect`)."""
    from .columns import META_COLUMNS
    from .ingest import CollectResult, find_etdumps, model_id
    from .store import Committer, Staging

    t0 = time.perf_counter()
    meta = dict(meta or {})
    if meta.get("model") is None and pte:
        meta["model"] = model_id(pte)
    extra = [k for k in meta if k not in META_COLUMNS]
    paths = find_etdumps(inputs)
    if not paths:
        raise EtlensError("collect: no ETDumps found in " + ", ".join(inputs))
    os.makedirs(dataset, exist_ok=True)
    dataset = os.path.abspath(dataset)
    if os.environ.get("ETLENS_FAULT_AT"):
        os.environ.setdefault("ETLENS_FAULT_PID", str(os.getpid()))   # a task's fault kills the driver
    res = CollectResult(dataset=dataset, mode=mode)
    with Staging(dataset) as staging:
        committer = Committer(dataset, mode, staging)
        present = {k: s.runs for k, s in committer.present().items()} if mode == "skip" else {}
        spark = session()
        sc = spark.sparkContext
        n = partitions or max(1, min(len(paths), sc.defaultParallelism * 2))
        uris = ",".join(os.path.abspath(p) for p in paths)
        rdd = sc.binaryFiles(uris, minPartitions=n)
        rec = os.path.abspath(etrecord) if etrecord else None
        where = staging.dir
        known = sc.broadcast(present)      # shipped once per executor, not with every task
        outs = rdd.mapPartitions(lambda it: _partition(it, where, rec, meta, extra, mode, known.value,
                                                       prompt_lens)).collect()
        known.unpersist()
        for out in outs:
            res.add_batch(out, committer)
    res.seconds = time.perf_counter() - t0
    return res


def main(argv: list[str] | None = None) -> int:
    """``spark-submit …/etlens/fleet/spark.py collect|query …`` (see the module doc)."""
    ap = argparse.ArgumentParser(prog="etlens.fleet.spark", description="etlens fleet jobs for spark-submit")
    sub = ap.add_subparsers(dest="job", required=True)
    c = sub.add_parser("collect")
    c.add_argument("inputs", nargs="+")
    c.add_argument("-o", "--output", required=True)
    c.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE")
    c.add_argument("--etrecord")
    c.add_argument("--pte")
    how = c.add_mutually_exclusive_group()
    how.add_argument("--replace", action="store_true")
    how.add_argument("--append-duplicates", action="store_true")
    q = sub.add_parser("query")
    q.add_argument("dataset")
    q.add_argument("sql")
    args = ap.parse_args(argv)
    if args.job == "collect":
        meta = dict(kv.split("=", 1) for kv in args.meta)
        mode = "replace" if args.replace else "append" if args.append_duplicates else "skip"
        res = spark_collect(args.inputs, args.output, meta=meta, etrecord=args.etrecord, pte=args.pte, mode=mode)
        for path, reason in res.skipped:
            print(f"skipped {path}: {reason}", file=sys.stderr)
        print(res.message())
        return 0
    cols, rows = spark_query(args.dataset, args.sql)
    for r in rows:
        print(json.dumps(dict(zip(cols, r)), default=str))
    return 0


if __name__ == "__main__":  # pragma: no cover - spark-submit entry point: run the package's copy
    from etlens.fleet.spark import main as _main

    sys.exit(_main())
