"""Session fixtures: the attribution test programs, built once into the fixture cache."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import CACHE, HAS_EXECUTORCH, ROOT

BUILDER = Path(__file__).with_name("build_cases.py")


def build_cases(*cases: str) -> dict[str, SimpleNamespace]:
    """Build (or reuse) ``cases`` of :mod:`build_cases`; ``{case: namespace(pte, etrecord, etdump, ...)}``."""
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to build real artifacts")
    from filelock import FileLock

    h = hashlib.sha256()
    for p in (BUILDER, ROOT / "src" / "etlens" / "builder" / "pipeline.py", ROOT / "tests" / "corpus" / "models.py"):
        h.update(p.read_bytes())
    out = CACHE / f"attribution-{h.hexdigest()[:16]}"
    out.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out / ".lock")):
        manifest = out / "manifest.json"
        have = json.loads(manifest.read_text()) if manifest.exists() else {}
        missing = [c for c in cases if c not in have]
        if missing:
            proc = subprocess.run([sys.executable, str(BUILDER), str(out), *missing], capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"building {missing} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
        have = json.loads(manifest.read_text())
    return {c: SimpleNamespace(name=c, **{k: str(out / v) for k, v in have[c].items()}) for c in cases}


@pytest.fixture(scope="session")
def one_per_delegate() -> SimpleNamespace:
    return build_cases("one_per_delegate")["one_per_delegate"]
