"""Inputs and oracles for the idempotent-ingestion tests (tests/fleet/test_ingest_idempotent.py).

:func:`make_inputs` writes a directory of ETDumps: the committed real ones (ExecuTorch 1.5.1's runtime:
portable and XNNPACK MLPs, a two-method program) plus farm-like many-run dumps (60 runs each,
:func:`tests.readers.etdump_synth.many_runs`, one seed each), so a collect has several batches, parts
and commits to be killed between. :func:`rows` reads a dataset row for row in one fixed order;
:func:`collect_cmd` is the ``etlens collect`` command line the subprocess tests run.

Run as a script it prints the per-source row counts of a dataset (a debugging aid)::

    python -m tests.fleet._ingest_inputs DATASET
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from tests.conftest import ROOT

REAL = [ROOT / "tests" / "data" / "mlp_portable.etdp", ROOT / "tests" / "data" / "mlp_xnnpack.etdp",
        ROOT / "tests" / "analysis" / "inspector" / "data" / "mm.etdp"]


def make_inputs(where: Path, farm: int = 6, runs: int = 20) -> Path:
    """``where/dumps/``: the real dumps and ``farm`` many-run dumps; returns the directory."""
    from tests.readers.etdump_synth import many_runs

    d = where / "dumps"
    d.mkdir(parents=True, exist_ok=True)
    for p in REAL:
        shutil.copy(p, d / p.name)
    for i in range(farm):
        (d / f"farm{i}.etdp").write_bytes(many_runs(runs=runs, seed=100 + i, allocations=False))
    return d


def rows(dataset: str) -> list[tuple]:
    """Every row of ``dataset`` (columns by name, sorted), ordered by file, run, block, event position."""
    from etlens.fleet.sql import duckdb_connection

    con = duckdb_connection(dataset)
    cols = sorted(c[0] for c in con.execute("DESCRIBE events").fetchall())
    sel = ", ".join(f'"{c}"' for c in cols)
    return con.execute(f"SELECT {sel} FROM events ORDER BY file, run, block, event_index").fetchall()


def per_source(dataset: str) -> dict[str, int]:
    """``{source: rows}`` of ``dataset``."""
    from etlens.fleet.sql import duckdb_connection

    con = duckdb_connection(dataset)
    return dict(con.execute("SELECT source, count(*) FROM events GROUP BY source").fetchall())


def collect_cmd(inputs: Path, dataset: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "etlens", "collect", str(inputs), "-o", str(dataset), "--meta", "build=n",
            "--meta", "device=pixel7", *extra]


def env(**kw: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("ETLENS_FAULT")}
    e.update(kw)
    return e


if __name__ == "__main__":
    for src, n in sorted(per_source(sys.argv[1]).items()):
        print(f"{src}  {n}")
