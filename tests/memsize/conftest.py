"""Artifacts of the memory/size/diff/bundled tests, built once per source hash into the fixture cache.

``bundled``: two ``.bpte`` written by ExecuTorch's own serializer (one with a wrong expected
output) and a pair of small programs; ``corpus``: real architectures of ``tests/corpus/models.py``
lowered fp32 and int8 (``tests/memsize/build_corpus.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CACHE, HAS_EXECUTORCH, ROOT

HERE = Path(__file__).resolve().parent


def _build(script: str, extra: tuple[Path, ...] = ()) -> Path:
    from filelock import FileLock

    h = hashlib.sha256()
    for p in (HERE / script, *extra):
        h.update(p.read_bytes())
    out = CACHE / f"memsize-{Path(script).stem}-{h.hexdigest()[:12]}"
    out.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out / ".lock")):
        if not (out / "done").exists():
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT),
                                                                 os.environ.get("PYTHONPATH", "")])}
            proc = subprocess.run([sys.executable, str(HERE / script), str(out)], capture_output=True, text=True,
                                  env=env)
            if proc.returncode != 0:
                raise RuntimeError(f"{script} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
            (out / "done").write_text("ok")
    return out


@pytest.fixture(scope="session")
def bundled() -> Path:
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to write .bpte files")
    return _build("make_bpte.py")


@pytest.fixture(scope="session")
def corpus() -> dict[str, Path]:
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to lower the corpus")
    pytest.importorskip("transformers")
    out = _build("build_corpus.py", (ROOT / "tests" / "corpus" / "models.py",))
    return {k: out / v for k, v in json.loads((out / "manifest.json").read_text()).items()}
