"""Idempotent, crash-safe, concurrent fleet ingestion.

Collecting the same dumps twice adds nothing (it used to double every event); ``--replace`` swaps a
source's rows and ``--append-duplicates`` keeps the old behaviour. ``etlens collect`` run as a real
subprocess and killed with SIGKILL — at deterministic points (``$ETLENS_FAULT_AT``: during a parse,
inside a part write, between a staged part and its commit, between commits, half way through a
``--replace`` journal) and at seeded random times — leaves a dataset every reader can read, holding
whole sources only; re-running the same collect then gives, row for row, the dataset of one clean
collect. Two or three collects into one dataset at once neither lose nor double a run.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess

import pyarrow.parquet as pq
import pytest

from etlens.cli.main import main
from etlens.fleet import collect, query
from etlens.fleet.store import STAGING_DIR, part_sources
from etlens.fleet.views import part_files
from tests.fleet._ingest_inputs import collect_cmd, env, make_inputs, per_source, rows

META = {"build": "n", "device": "pixel7"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return make_inputs(tmp_path_factory.mktemp("ingest"))


@pytest.fixture(scope="module")
def reference(inputs, tmp_path_factory):
    """One clean collect of the inputs (in this process, one worker): ``(dataset, rows, rows per source)``."""
    ds = str(tmp_path_factory.mktemp("ref") / "ds")
    res = collect([str(inputs)], ds, meta=META, jobs=1, progress=False)
    assert res.files == len(os.listdir(inputs)) and not res.skipped and res.runs_present == 0
    return ds, rows(ds), per_source(ds)


def _count(ds: str) -> int:
    return query(ds, "SELECT count(*) AS n FROM events")[0]["n"]


def test_collect_twice_adds_nothing(inputs, reference, tmp_path, capsys):
    ds = str(tmp_path / "ds")
    argv = ["collect", str(inputs), "-o", ds, "--meta", "build=n", "--meta", "device=pixel7", "-j", "1"]
    assert main(argv) == 0
    first = capsys.readouterr().out.strip().splitlines()[-1]
    n = _count(ds)
    assert n == len(reference[1])
    runs = query(ds, "SELECT count(DISTINCT (source, run)) AS n FROM events")[0]["n"]
    assert first.endswith(f"{runs} runs new, 0 already present")
    assert main(argv) == 0                      # the bug: 2 x n rows
    second = capsys.readouterr().out.strip().splitlines()[-1]
    assert f"0 runs new, {runs} already present" in second and second.startswith("collected 0 events")
    assert _count(ds) == n
    assert rows(ds) == reference[1]
    # the same content under another path is the same source
    other = tmp_path / "copy.etdp"
    other.write_bytes((inputs / "mm.etdp").read_bytes())
    res = collect([str(other)], ds, meta=META, progress=False)
    assert res.events == 0 and res.files_present == 1 and _count(ds) == n
    # a file given twice in one collect counts once
    ds2 = str(tmp_path / "ds2")
    res = collect([str(other), str(inputs / "mm.etdp")], ds2, meta=META, jobs=1, progress=False)
    assert res.files_present == 1 and _count(ds2) == reference[2][next(iter(per_source(ds2)))]


def test_append_duplicates_and_other_metadata(inputs, reference, tmp_path, capsys):
    ds = str(tmp_path / "ds")
    one = str(inputs / "mlp_xnnpack.etdp")
    collect([one], ds, meta=META, progress=False)
    n = _count(ds)
    assert main(["collect", one, "-o", ds, "--meta", "build=n", "--meta", "device=pixel7",
                 "--append-duplicates"]) == 0
    assert "already present" in capsys.readouterr().out
    assert _count(ds) == 2 * n                 # the behaviour before identities, when asked for
    # the same dump under other metadata is another identity (filed under two builds on purpose)
    res = collect([one], ds, meta={"build": "n+1", "device": "pixel7"}, progress=False)
    assert res.runs_new > 0 and res.runs_present == 0 and _count(ds) == 3 * n


def test_replace_swaps_a_sources_rows(inputs, reference, tmp_path, capsys):
    ds = str(tmp_path / "ds")
    collect([str(inputs)], ds, meta=META, jobs=1, progress=False)
    parts_before = part_files(ds)
    assert any(len(part_sources(p) or []) > 1 for p in parts_before)     # parts shared by several sources
    # relabel two dumps (one part holds them with others): their rows swap, the rest stay
    swap = [str(inputs / "farm1.etdp"), str(inputs / "farm2.etdp")]
    assert main(["collect", *swap, "-o", ds, "--meta", "build=fixed", "--meta", "device=pixel7", "--replace"]) == 0
    out = capsys.readouterr().out
    assert "old runs replaced" in out
    assert _count(ds) == len(reference[1])
    by = {(r["file"], r["build"]) for r in query(ds, "SELECT DISTINCT file, build FROM events")}
    assert {b for f, b in by if f in swap} == {"fixed"} and {b for f, b in by if f not in swap} == {"n"}
    assert sorted(per_source(ds).items()) == sorted(reference[2].items())
    # replacing again with the same metadata: still one copy
    collect(swap, ds, meta={"build": "fixed", "device": "pixel7"}, mode="replace", progress=False)
    assert _count(ds) == len(reference[1])


def _assert_valid(ds: str, reference) -> None:
    """What a killed collect may leave: readable parts holding whole sources, none twice, no staged file listed."""
    if not os.path.isdir(ds) or not [f for f in os.listdir(ds) if f.endswith(".parquet")]:
        return
    for p in part_files(ds):
        assert p.endswith(".parquet") and STAGING_DIR not in p
        pq.read_table(p)                                         # whole (a partial part would not read)
    got = per_source(ds)
    for src, n in got.items():
        assert n == reference[2][src], f"source {src}: {n} rows, one clean collect has {reference[2][src]}"


def _kill_and_recollect(inputs, reference, ds, fault: str | None, jobs: str, delay: float | None = None,
                        engine: str = "local") -> str:
    extra = ["-j", jobs, "--engine", engine]
    e = env(ETLENS_FAULT_AT=fault) if fault else env()
    proc = subprocess.Popen(collect_cmd(inputs, ds, *extra), env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    if delay is not None:
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    with_group = proc.returncode
    print(f"collect {fault or f'killed after {delay:.2f} s'}: exit {with_group}")   # -9: killed mid-way
    try:
        os.killpg(proc.pid, signal.SIGKILL)      # orphans of the killed collect (its workers, a JVM)
    except ProcessLookupError:
        pass
    if fault:
        assert with_group == -signal.SIGKILL, (fault, with_group, err.decode()[-2000:])
    _assert_valid(str(ds), reference)
    again = subprocess.run(collect_cmd(inputs, ds, *extra), env=env(), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert rows(str(ds)) == reference[1], (fault, delay)
    staging = os.path.join(ds, STAGING_DIR)
    assert not os.path.isdir(staging) or not os.listdir(staging), "the killed collect's staging was not swept"
    return again.stdout.strip().splitlines()[-1]


#: deterministic kill points of a one-worker collect of the 9 inputs (5 batches of 2, 2, 2, 2, 1 dumps)
FAULTS = ["parse:1", "parse:4", "write:1", "write:3", "commit:1", "commit:4", "committed:2", "committed:5"]


@pytest.mark.parametrize("fault", FAULTS)
def test_killed_collect_then_recollect(inputs, reference, tmp_path, fault):
    line = _kill_and_recollect(inputs, reference, tmp_path / "ds", fault, "1")
    if fault.startswith("committed"):
        assert "already present" in line and not line.endswith(" 0 already present")


def test_killed_workers_collect(inputs, reference, tmp_path):
    """Two workers: a worker hitting the fault kills its collect (and the other worker dies with it)."""
    _kill_and_recollect(inputs, reference, tmp_path / "a", "parse:2", "2")
    _kill_and_recollect(inputs, reference, tmp_path / "b", "write:1", "2")


def test_killed_replace_journal(inputs, reference, tmp_path):
    """``--replace`` killed after the journal removed the old part, before the new ones came in: no source
    twice; the next collect finishes the journal, and re-running the replace gives one clean collect's rows."""
    ds = tmp_path / "ds"
    collect([str(inputs)], str(ds), meta={"build": "old", "device": "pixel7"}, jobs=1, progress=False)
    proc = subprocess.run(collect_cmd(inputs, ds, "-j", "1", "--replace"), env=env(ETLENS_FAULT_AT="journal:1"),
                          capture_output=True, start_new_session=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL
    assert os.path.exists(ds / ".etlens-journal.json")
    _assert_valid(str(ds), reference)
    again = subprocess.run(collect_cmd(inputs, ds, "-j", "1", "--replace"), env=env(), capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert not os.path.exists(ds / ".etlens-journal.json")
    assert rows(str(ds)) == reference[1]


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(6))
def test_killed_at_random_times(inputs, reference, tmp_path, trial):
    """SIGKILL at a seeded random moment (start-up, parse, write or commit, whichever it is then)."""
    delay = random.Random(trial).uniform(0.3, 4.0)
    _kill_and_recollect(inputs, reference, tmp_path / "ds", None, "2", delay=delay)


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(6))
def test_killed_at_random_points(inputs, reference, tmp_path, trial):
    """A seeded random kill point of a two-worker collect (a worker's n-th parse or write: some worker reaches
    n <= 4 of the 9 dumps; the parent's n-th commit or rename)."""
    rng = random.Random(1000 + trial)
    point = ["parse", "write", "commit", "committed"][trial % 4]
    n = rng.randint(1, 4) if point in ("parse", "write") else rng.randint(1, 9)
    _kill_and_recollect(inputs, reference, tmp_path / "ds", f"{point}:{n}", "2")


def test_concurrent_collects(inputs, reference, tmp_path):
    """Three collects at once into one dataset, of overlapping inputs: every run once."""
    ds = tmp_path / "ds"
    files = sorted(str(p) for p in inputs.iterdir())
    sets = [files[:6], files[3:], files]
    procs = [subprocess.Popen(collect_cmd(inputs, ds, "-j", "1")[:4] + s + collect_cmd(inputs, ds)[5:],
                              env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE) for s in sets]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1].decode()[-1500:] for o in outs]
    assert rows(str(ds)) == reference[1]
    new = [int(o[0].decode().split(": ")[-1].split(" runs new")[0]) for o in outs]
    total_runs = query(str(ds), "SELECT count(DISTINCT (source, run)) AS n FROM events")[0]["n"]
    assert sum(new) == total_runs                # each run counted new by exactly one of them


@pytest.mark.slow
def test_spark_collect_idempotent_and_killed(inputs, reference, tmp_path, spark):
    """The Spark engine: the same identities (collecting twice adds nothing) and crash safety (a task
    that kills the driver mid-write, then a clean re-run)."""
    from etlens.fleet.spark import spark_collect

    ds = str(tmp_path / "sp")
    res = spark_collect([str(inputs)], ds, meta=META)
    assert res.runs_present == 0 and rows(ds) == reference[1]
    res = spark_collect([str(inputs)], ds, meta=META)
    assert res.events == 0 and res.runs_present > 0 and rows(ds) == reference[1]
    res = spark_collect([str(inputs / "farm0.etdp")], ds, meta={"build": "x", "device": "pixel7"}, mode="replace")
    assert res.runs_replaced > 0 and _count(ds) == len(reference[1])
    _kill_and_recollect(inputs, reference, tmp_path / "killed", "spark-write:2", "1", engine="spark")


def test_parts_written_by_other_tools(inputs, tmp_path):
    """A part DuckDB wrote from dataset rows (no etlens footer) still has identities (from its columns); a part
    from before identities (no ``source``) has none and is never left out or swapped."""
    from etlens.fleet.sql import duckdb_connection

    ds = str(tmp_path / "ds")
    one = str(inputs / "mlp_portable.etdp")
    collect([one], ds, meta={"build": "B"}, progress=False)
    n = _count(ds)
    con = duckdb_connection(ds)
    con.execute(f"COPY (SELECT * REPLACE ('S' AS build) FROM events) TO '{ds}/part-s.parquet' (FORMAT PARQUET)")
    con.execute(f"COPY (SELECT * EXCLUDE (source) REPLACE ('L' AS build) FROM events) TO '{ds}/part-legacy.parquet' "
                "(FORMAT PARQUET)")
    assert [s.meta for s in part_sources(f"{ds}/part-s.parquet")] == ['{"build": "S"}']
    assert part_sources(f"{ds}/part-legacy.parquet") is None
    res = collect([one], ds, meta={"build": "S"}, progress=False)
    assert res.events == 0 and res.runs_present > 0 and _count(ds) == 3 * n
    res = collect([one], ds, meta={"build": "L"}, progress=False)     # the legacy rows have no identity
    assert res.events == n and _count(ds) == 4 * n
