"""Shared test fixtures: real ExecuTorch artifacts built once per session into a cache directory.

``artifacts`` builds every case of ``tests/fixtures/generate.py`` (a few seconds each) the first
time and reuses them while the generator and demo models are unchanged. The cache lives in
``$ETLENS_FIXTURE_CACHE`` (default ``.cache/fixtures``). Tests that need them are skipped when
ExecuTorch is not installed; committed tiny artifacts live in ``tests/data``.

Every build in the run keeps one worker child warm for the next (``ETLENS_WARM_CHILDREN=1``,
:mod:`etlens.builder.warm`; inherited by the build scripts the fixtures start): the suite builds
hundreds of programs, and each fresh child imports torch and ExecuTorch again (~10 CPU-s).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

os.environ.setdefault("ETLENS_WARM_CHILDREN", "1")

#: under scripts/test.sh (ETLENS_NO_SKIP=1) a skip is a failure: tests/_no_skip.py
pytest_plugins = ["tests._no_skip"]

ROOT = Path(__file__).resolve().parent.parent
GENERATOR = ROOT / "tests" / "fixtures" / "generate.py"
DATA = ROOT / "tests" / "data"
CACHE = Path(os.environ.get("ETLENS_FIXTURE_CACHE", ROOT / ".cache" / "fixtures"))


def _has_executorch() -> bool:
    """Whether the executorch extra is installed: found, not imported (``import executorch.exir`` costs ~10
    CPU-s, paid by every pytest process at start, the collection check's included)."""
    import importlib.util

    try:
        return importlib.util.find_spec("executorch.exir") is not None
    except (ImportError, ValueError):
        return False


HAS_EXECUTORCH = _has_executorch()


def pytest_configure(config) -> None:
    """Import ExecuTorch once in each process that runs tests, before any test captures output: its import
    writes third-party lines (torchao's library probes, torch's pytree warning) that the CLI hides on a
    terminal but an in-process ``main()`` under ``capsys`` would find in its stderr. Not in the xdist
    controller nor a ``--collect-only`` run, which run no test."""
    controller = bool(getattr(config.option, "numprocesses", None)) and not os.environ.get("PYTEST_XDIST_WORKER")
    if HAS_EXECUTORCH and not config.option.collectonly and not controller:
        import executorch.exir  # noqa: F401

        _corpus_hook()


def _corpus_hook() -> None:
    """Give this test process' children the corpus' start-up hook (tests/corpus/child_hook: it records
    ExecuTorch's delegation info of a corpus build's lowering when tests/corpus/build.py asks for it, and costs
    nothing otherwise). Set once for the whole session, so the warm worker child serves corpus builds and every
    other test alike (its key is the environment)."""
    hook = str(ROOT / "tests" / "corpus" / "child_hook")
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != hook]
    os.environ["PYTHONPATH"] = os.pathsep.join([hook, *path])
    os.environ["ETLENS_CORPUS_DELEGATION_DIR"] = str(CACHE / "corpus-hook" / str(os.getpid()))


requires_executorch = pytest.mark.skipif(not HAS_EXECUTORCH, reason="needs the executorch extra")


def build_once(prefix: str, script: Path, extra: tuple[Path, ...] = (), args: tuple[str, ...] = ()) -> Path:
    """Run ``python SCRIPT OUT [ARGS]`` once per content of ``script`` + ``extra`` (+ ``args``); return ``OUT``.

    ``OUT`` is ``$ETLENS_FIXTURE_CACHE/<prefix>-<sha256 of the sources, 12 hex>``; a file lock makes
    parallel test workers wait for the one that builds, and a ``done`` marker makes later test runs
    reuse the output while the sources are unchanged. The script runs with this checkout's ``src``
    first on ``PYTHONPATH``; its failure raises with the tail of its output.
    """
    from filelock import FileLock

    h = hashlib.sha256()
    for p in (script, *extra):
        h.update(p.read_bytes())
    h.update("\0".join(args).encode())
    out = CACHE / f"{prefix}-{h.hexdigest()[:12]}"
    out.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out / ".lock")):
        if not (out / "done").exists():
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT),
                                                                 os.environ.get("PYTHONPATH", "")])}
            proc = subprocess.run([sys.executable, str(script), str(out), *args], capture_output=True, text=True,
                                  env=env)
            if proc.returncode != 0:
                raise RuntimeError(f"{script.name} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
            (out / "done").write_text("ok")
    return out


def _source_key() -> str:
    h = hashlib.sha256()
    src = ROOT / "src" / "etlens"
    for p in (GENERATOR, *(src / "builder" / f for f in ("demos.py", "pipeline.py", "toolchain.py", "lower.py"))):
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _build_all() -> Path:
    from filelock import FileLock

    out = CACHE / _source_key()
    out.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out / ".lock")):
        manifest = out / "manifest.json"
        from tests.fixtures.generate import CASES

        have = json.loads(manifest.read_text()) if manifest.exists() else {}
        missing = [c for c in CASES if c not in have]
        if missing:
            # two generators at once on disjoint halves (a 2-core machine builds in half the time)
            procs = [subprocess.Popen([sys.executable, str(GENERATOR), str(out), *part], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
                     for part in (missing[0::2], missing[1::2]) if part]
            for proc in procs:
                stdout, stderr = proc.communicate()
                if proc.returncode != 0:
                    raise RuntimeError(f"fixture generation failed:\n{stdout[-3000:]}\n{stderr[-5000:]}")
    return out


@pytest.fixture(scope="session")
def artifacts() -> dict[str, SimpleNamespace]:
    """``{case: namespace(pte, etrecord, pt2, etdump, debug_buffer)}`` of absolute paths (str)."""
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to build real artifacts")
    out = _build_all()
    manifest = json.loads((out / "manifest.json").read_text())
    return {name: SimpleNamespace(name=name, **{k: str(out / v) for k, v in files.items()})
            for name, files in manifest.items()}


@pytest.fixture(scope="session")
def committed() -> dict[str, SimpleNamespace]:
    """Tiny artifacts committed in tests/data (readable without ExecuTorch)."""
    manifest = json.loads((DATA / "manifest.json").read_text())
    return {name: SimpleNamespace(name=name, **{k: str(DATA / v) for k, v in files.items()})
            for name, files in manifest.items()}


#: Debian's chromium, driven by Playwright (never `playwright install`: it downloads a browser)
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run"]


def block_remote(target) -> list[str]:
    """Route every request of ``target`` (a Playwright page or context) so a page stays offline: local ones
    (``file:``, ``data:``, ``about:``) go through, any other is aborted and its URL appended to the list
    returned (a test asserts it stays empty: the page asked the network for nothing)."""
    blocked: list[str] = []

    def route(r) -> None:
        url = r.request.url
        if url.startswith(("file:", "data:", "about:")):
            r.continue_()
        else:
            blocked.append(url)
            r.abort()

    target.route("**/*", route)
    return blocked


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium per test module (skipped when chromium or playwright is missing)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip("needs Debian's chromium at /usr/bin/chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()

