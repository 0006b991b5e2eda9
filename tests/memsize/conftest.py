"""Artifacts of the memory/size/diff/bundled tests, built once per source hash into the fixture cache.

``bundled``: two ``.bpte`` written by ExecuTorch's own serializer (one with a wrong expected
output) and a pair of small programs; ``corpus``: real architectures of ``tests/corpus/models.py``
lowered fp32 and int8 (``tests/memsize/build_corpus.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import HAS_EXECUTORCH, ROOT, build_once

HERE = Path(__file__).resolve().parent


def _build(script: str, extra: tuple[Path, ...] = ()) -> Path:
    return build_once(f"memsize-{Path(script).stem}", HERE / script, extra)


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
