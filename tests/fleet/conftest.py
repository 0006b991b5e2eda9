"""Fleet fixtures: a real two-build fleet (built once, cached) and one Spark session per test session.

The fleet's *timings* are measured live, whenever the cache is cold, on whatever machine runs the tests (a
busy one included): its tests assert only what holds under any load (test_fleet.py says which). Verdicts that
need a known truth are tested on recorded data and simulations (test_recorded.py, test_simulated.py).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CACHE, HAS_EXECUTORCH, ROOT

MAKER = Path(__file__).with_name("make_fleet.py")


def _pipeline_source() -> bytes:
    """The build pipeline's source (part of the cache key): etlens.builder.pipeline (earlier etlens.report.pipeline)."""
    for rel in ("src/etlens/builder/pipeline.py", "src/etlens/report/pipeline.py"):
        if (ROOT / rel).exists():
            return (ROOT / rel).read_bytes()
    return b""


def fleet_manifest() -> dict:
    """``manifest.json`` of :mod:`tests.fleet.make_fleet`: two builds (``n``, ``n+1`` with ``block`` wider), four
    real ETDumps each on two devices. Built with the real toolchain and runtime, cached by source hash."""
    from filelock import FileLock

    h = hashlib.sha256(MAKER.read_bytes() + _pipeline_source()).hexdigest()[:16]
    out = CACHE / f"fleet-{h}"
    out.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out / ".lock")):
        if not (out / "manifest.json").exists():
            proc = subprocess.run([sys.executable, str(MAKER), str(out)], capture_output=True, text=True)
            if proc.returncode:
                raise RuntimeError(f"fleet build failed:\n{proc.stderr[-4000:]}")
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="session")
def fleet() -> dict:
    """:func:`fleet_manifest` (built on first use, timed on whatever the machine is doing: see test_fleet.py)."""
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to build the fleet")
    return fleet_manifest()


@pytest.fixture(scope="session")
def dataset(fleet, tmp_path_factory) -> str:
    """The fleet collected into one dataset: one ``collect`` per ETDump (appending), device/build metadata."""
    from etlens.fleet import collect

    ds = str(tmp_path_factory.mktemp("fleet") / "ds")
    for d in fleet["dumps"]:
        collect([d["etdump"]], ds, meta={"device": d["device"], "build": d["build"]}, etrecord=d["etrecord"],
                pte=d["pte"], jobs=1, progress=False)
    return ds


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole test session (JVM start is the cost)."""
    pytest.importorskip("pyspark")
    import shutil

    if not shutil.which("java"):
        pytest.skip("Spark needs Java (apt-get install default-jre-headless)")
    from etlens.fleet.spark import session

    return session()
