"""Corpus fixtures: each (architecture, config) is built once per source version.

``corpus_case(case)`` returns the namespace of one built case (its report, artifacts and ExecuTorch's
delegation info recorded at lowering time). Builds are cached under
``$ETLENS_FIXTURE_CACHE/corpus-<hash>/`` where the hash covers :data:`BUILD_SOURCES`, so a second
session reuses them. A case builds in the test process that first needs it, its lowering and runs in the worker
child that process keeps warm (one toolchain start-up per test process instead of two per case: about
20 CPU-s a case). Under pytest-xdist every case's
tests share one ``xdist_group``, so with ``--dist loadgroup`` the builds of different cases run in
parallel processes and each is built once.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import CACHE, HAS_EXECUTORCH, ROOT

HERE = Path(__file__).resolve().parent


#: what a build depends on: the models, the build script, and the toolchain steps of the pipeline (as
#: tests/conftest.py keys the fixtures); CI starts from an empty cache, so every build there is fresh
BUILD_SOURCES = ("tests/corpus/models.py", "tests/corpus/build.py", "tests/corpus/child_hook/sitecustomize.py",
                 "src/etlens/builder/pipeline.py",
                 "src/etlens/builder/quantize.py", "src/etlens/builder/backends.py")


def _source_key() -> str:
    h = hashlib.sha256()
    files = [ROOT / p for p in BUILD_SOURCES if (ROOT / p).exists()]
    for p in files:
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def corpus_dir() -> Path:
    return CACHE / f"corpus-{_source_key()}"


def build_case(arch: str, config: str) -> SimpleNamespace:
    """Build ``arch`` in ``config`` (or reuse the cached build); return what it wrote."""
    from filelock import FileLock

    out = corpus_dir()
    out.mkdir(parents=True, exist_ok=True)
    case_dir = out / f"{arch}-{config}"
    result = case_dir / "result.json"
    with FileLock(str(out / f".{arch}-{config}.lock")):
        if not result.exists():
            from tests.corpus.build import build

            build(str(out), arch, config)  # in this process; never raises (the error goes into result.json)
    data = json.loads(result.read_text())
    arts = case_dir / "report_artifacts"
    return SimpleNamespace(
        name=f"{arch}-{config}", arch=arch, config=config, dir=str(case_dir), result=data,
        report=str(case_dir / "report.html"), pte=str(arts / f"{arch}.pte"),
        etrecord=str(arts / f"{arch}.etrecord"), etdump=str(arts / f"{arch}.etdp"),
        debug_buffer=str(arts / f"{arch}.debug.bin"), trace=str(arts / f"{arch}.trace.json"))


def plain_files(arch: str, config: str) -> dict:
    """The plain ExecuTorch flow's files of a content case (:func:`tests.corpus.build.plain`, run once in this
    process, cached): ``plain.json`` (``ok``, ``files`` or ``error``)."""
    from filelock import FileLock

    out = corpus_dir()
    case_dir = out / f"{arch}-{config}"
    doc = case_dir / "plain.json"
    with FileLock(str(out / f".{arch}-{config}.plain.lock")):
        if not doc.exists():
            from tests.corpus.build import plain

            plain(str(out), arch, config)  # never raises (the error goes into plain.json)
    return json.loads(doc.read_text())


@pytest.fixture(scope="session")
def corpus_case():
    """``(arch, config) -> namespace`` of the built case (skips without ExecuTorch)."""
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to build the corpus")
    cache: dict = {}

    def get(case: str) -> SimpleNamespace:
        if case not in cache:
            arch, config = case.split(":")
            cache[case] = build_case(arch, config)
        return cache[case]

    return get


def record_row(case: SimpleNamespace, **values) -> None:
    """Merge ``values`` into the case's row of the corpus table (``row.json`` next to the build)."""
    path = Path(case.dir) / "row.json"
    from filelock import FileLock

    with FileLock(str(path) + ".lock"):
        row = json.loads(path.read_text()) if path.exists() else {
            "arch": case.arch, "config": case.config, "build_s": case.result.get("seconds"), "checks": {}}
        checks = values.pop("checks", {})
        row.update(values)
        row["checks"].update(checks)
        path.write_text(json.dumps(row, indent=1, default=str))
