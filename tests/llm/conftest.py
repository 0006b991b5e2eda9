"""The LLM corpus (``tests/llm/build.py``), built once per generator source into the fixture cache.

``llm_corpus`` is session-scoped: the first test that asks for it runs the generator (ExecuTorch's
own ``export_llama`` plus the real runtime, ~2-3 minutes on 2 cores) into
``$ETLENS_FIXTURE_CACHE/llm-<hash of build.py>/`` under a file lock; later sessions reuse it while
``build.py`` is unchanged. Each case is a ``SimpleNamespace`` with absolute paths (``pte``,
``etrecord``, ``etdump``, ``debug_buffer``, ``etdump_profile``, ``dir``) and the manifest entry
(``calls``, ``params``, ``dynamic_shape``, ``quantization``, ``max_seq_len`` ...).
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

from tests.conftest import CACHE, HAS_EXECUTORCH, ROOT

BUILD = Path(__file__).resolve().parent / "build.py"
PATH_KEYS = ("pte", "etrecord", "etdump", "debug_buffer", "etdump_profile")


def llm_corpus_dir() -> Path:
    """Build (or reuse) the corpus and return its directory (holds ``manifest.json``)."""
    from filelock import FileLock

    out = CACHE / f"llm-{hashlib.sha256(BUILD.read_bytes()).hexdigest()[:12]}"
    out.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out / ".lock")):
        if not (out / "done").exists():
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT),
                                                                 os.environ.get("PYTHONPATH", "")])}
            proc = subprocess.run([sys.executable, str(BUILD), str(out)], capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                raise RuntimeError(f"tests/llm/build.py failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
            (out / "done").write_text("ok")
    return out


@pytest.fixture(scope="session")
def llm_corpus() -> dict[str, SimpleNamespace]:
    """``{case: namespace}`` of the LLM corpus (see the module docstring); skipped without ExecuTorch."""
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to export and run the LLM corpus")
    out = llm_corpus_dir()
    manifest = json.loads((out / "manifest.json").read_text())
    cases = {}
    for name, entry in manifest.items():
        ns = SimpleNamespace(name=name, dir=str(out / name), **entry)
        for k in PATH_KEYS:
            setattr(ns, k, str(out / entry[k]))
        cases[name] = ns
    return cases
