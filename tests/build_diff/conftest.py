"""The build-diff corpus (:mod:`tests.build_diff.corpus`), built once per content of its scripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import HAS_EXECUTORCH, build_once

HERE = Path(__file__).resolve().parent


def _corpus(which: str) -> Path:
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to build real artifacts")
    return build_once(f"build_diff-{which}", HERE / f"corpus_{which}.py", (HERE / "corpus.py",))


@pytest.fixture(scope="module")
def fast_corpus() -> Path:
    """``base``, ``naive``, ``rebuild``, ``offload`` build directories."""
    return _corpus("fast")


@pytest.fixture(scope="module")
def slow_corpus() -> Path:
    """``decomp``, ``copies``, ``q8``, ``q8_keep`` build directories (diff ``decomp``/``copies`` against the fast
    corpus's ``base``)."""
    return _corpus("slow")
