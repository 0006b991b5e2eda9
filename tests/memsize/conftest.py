"""Artifacts of the memory/size/diff/bundled tests, built once per source hash into the fixture cache.

``bundled``: two ``.bpte`` written by ExecuTorch's own serializer (one with a wrong expected
output) and a pair of small programs. The real architectures the memory/size checks read are the corpus'
own builds (tests/corpus/conftest.py ``build_case``: shared, not lowered again here).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import HAS_EXECUTORCH, build_once

HERE = Path(__file__).resolve().parent


def _build(script: str, extra: tuple[Path, ...] = (), args: tuple[str, ...] = ()) -> Path:
    return build_once(f"memsize-{Path(script).stem}", HERE / script, extra, args)


@pytest.fixture(scope="session")
def bundled() -> Path:
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to write .bpte files")
    return _build("make_bpte.py")
