"""Fleet benchmarks: ingest rate (events/s), dataset bytes per million events, per-op p50 query time.

The fleet is built from REAL ETDumps: the 1000-layer portable ``deep_mlp`` (:mod:`benchmarks._artifacts`)
run ``RUNS`` times in the ExecuTorch runtime without a debug buffer (as a device farm would: timings
only), then replicated (hard links / copies) to ``FILES`` files so the dataset has >= 10M events.

    python benchmarks/bench_fleet.py            # DuckDB + local processes
    python benchmarks/bench_fleet.py --spark    # also Spark local[*] (JVM start included)

Goals (issue #17): ingest >= 5M events/s across both cores; per-op p50 over >= 10M events < 1 s on DuckDB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "src"))

RUNS = 50
FILES = 40
P50_SQL = ("SELECT event_name, module_path, quantile_cont(duration_ms, 0.5) AS p50_ms, count(*) AS n FROM events "
           "WHERE event_name <> 'OPERATOR_CALL' GROUP BY event_name, module_path")


def device_dump() -> tuple[str, str]:
    """``(etdump, etrecord)``: the deep model run RUNS times with ETDump only (cached)."""
    from _artifacts import deep_artifacts

    arts = deep_artifacts(1000, 10)
    out = os.path.join(HERE, ".cache", "fleet", f"deep1000_r{RUNS}.etdp")
    if not os.path.exists(out):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        import subprocess

        code = ("import sys; sys.path.insert(0, %r); from etlens.demos import deep_mlp; "
                "from etlens.report.pipeline import run_with_etdump; m, x = deep_mlp(1000); "
                "run_with_etdump(open(%r, 'rb').read(), x, %d, %r, None)"
                % (os.path.join(HERE, "..", "src"), arts.pte, RUNS, out))
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return out, arts.etrecord


def replicate(src: str, n: int) -> str:
    d = os.path.join(HERE, ".cache", "fleet", f"x{n}")
    if not os.path.isdir(d) or len(os.listdir(d)) != n:
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for i in range(n):
            dst = os.path.join(d, f"dev{i % 8}_{i}.etdp")
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy(src, dst)
    return d


def du(path: str) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spark", action="store_true")
    ap.add_argument("--files", type=int, default=FILES)
    args = ap.parse_args()
    from etlens.fleet import collect
    from etlens.fleet.sql import duckdb_connection

    etdp, rec = device_dump()
    src = replicate(etdp, args.files)
    print(f"input: {args.files} x {os.path.basename(etdp)} ({os.path.getsize(etdp) / 1e6:.1f} MB each), "
          f"{os.cpu_count()} cores")
    for label, record in (("no ETRecord", None), ("with ETRecord", rec)):
        ds = os.path.join(HERE, ".cache", "fleet", "ds")
        shutil.rmtree(ds, ignore_errors=True)
        cpu0 = _cpu()
        res = collect([src], ds, meta={"build": "n"}, etrecord=record, progress=False)
        cpu = _cpu() - cpu0
        size = du(ds)
        print(f"collect ({label}): {res.events / 1e6:.2f}M events in {res.seconds:.2f} s wall = "
              f"{res.events_per_s / 1e6:.2f}M events/s; {cpu:.1f} CPU-s = {res.events / cpu / 1e6:.2f}M events "
              f"per CPU-second; dataset {size / 1e6:.1f} MB = "
              f"{size / (res.events / 1e6) / 1e6:.2f} MB per million events")
    con = duckdb_connection(ds)
    con.execute(P50_SQL).fetchall()
    best = min(_timed(lambda: con.execute(P50_SQL).fetchall()) for _ in range(3))
    cpu0 = time.process_time()
    con.execute(P50_SQL).fetchall()
    print(f"duckdb per-op p50 over {res.events / 1e6:.1f}M events: {best:.3f} s wall (best of 3), "
          f"{time.process_time() - cpu0:.2f} CPU-s (all threads); load average {os.getloadavg()[0]:.1f}")
    if args.spark:
        from etlens.fleet.spark import register_views, session, spark_collect

        t0 = time.perf_counter()
        spark = session()
        print(f"spark session start: {time.perf_counter() - t0:.1f} s")
        register_views(spark, ds)
        sql = P50_SQL.replace("quantile_cont(", "percentile(")
        spark.sql(sql).collect()
        best = min(_timed(lambda: spark.sql(sql).collect()) for _ in range(2))
        print(f"spark per-op p50 over {res.events / 1e6:.1f}M events: {best:.2f} s (best of 2)")
        ds2 = os.path.join(HERE, ".cache", "fleet", "ds_spark")
        shutil.rmtree(ds2, ignore_errors=True)
        r2 = spark_collect([src], ds2, meta={"build": "n"})
        print(f"spark collect: {r2.events / 1e6:.2f}M events in {r2.seconds:.2f} s = "
              f"{r2.events / r2.seconds / 1e6:.2f}M events/s")


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the collect workers)."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
