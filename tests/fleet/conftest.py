"""Fleet fixtures: a real two-build fleet (built once, cached) and one Spark session per test session."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CACHE, HAS_EXECUTORCH, ROOT

MAKER = Path(__file__).with_name("make_fleet.py")


def fleet_manifest() -> dict:
    """``manifest.json`` of :mod:`tests.fleet.make_fleet`: two builds (``n``, ``n+1`` with ``block`` wider), four
    real ETDumps each on two devices. Built with the real toolchain and runtime, cached by source hash."""
    from filelock import FileLock

    h = hashlib.sha256(MAKER.read_bytes() + (ROOT / "src/etlens/report/pipeline.py").read_bytes()).hexdigest()[:16]
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
    """:func:`fleet_manifest` (built on first use; its tests tolerate a neighbour's load, see test_fleet.py)."""
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to build the fleet")
    return fleet_manifest()


#: the replicas the CI test uses: groups, runs per process, drivers, processes per role per driver
REPLICAS = (4, 8, 1, 5)


def replicas_manifest() -> dict:
    """``manifest.json`` of :mod:`tests.fleet.make_replicas`: real repeated runtime processes of one program
    (roles ``A``/``B``: the same build, ``P``: its head layer doing 1.3x the work), :data:`REPLICAS` of them.
    Built with the real toolchain and runtime in children, cached by source hash."""
    from filelock import FileLock

    maker = MAKER.with_name("make_replicas.py")
    h = hashlib.sha256(maker.read_bytes() + (ROOT / "src/etlens/report/pipeline.py").read_bytes()
                       + repr(REPLICAS).encode()).hexdigest()[:16]
    out = CACHE / f"replicas-{h}"
    out.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out / ".lock")):
        if not (out / "manifest.json").exists():
            proc = subprocess.run([sys.executable, str(maker), str(out), *map(str, REPLICAS)], capture_output=True,
                                  text=True)
            if proc.returncode:
                raise RuntimeError(f"replicas build failed:\n{proc.stderr[-4000:]}")
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="session")
def replicas() -> dict:
    """:func:`replicas_manifest` (measured before the parallel tests by scripts/test.sh: tests/fleet/prebuild.py)."""
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to run real processes")
    return replicas_manifest()


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
