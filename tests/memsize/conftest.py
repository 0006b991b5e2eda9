"""Artifacts of the memory/size/diff/bundled tests, built once per source hash into the fixture cache.

``bundled``: two ``.bpte`` written by ExecuTorch's own serializer (one with a wrong expected
output) and a pair of small programs; ``corpus`` / ``corpus_rest``: real architectures of
``tests/corpus/models.py`` lowered fp32 and int8 (``tests/memsize/build_corpus.py``; ResNet in the first tier,
ViT and ConvNeXt in the heavy one).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import HAS_EXECUTORCH, ROOT, build_once

HERE = Path(__file__).resolve().parent


def _build(script: str, extra: tuple[Path, ...] = (), args: tuple[str, ...] = ()) -> Path:
    return build_once(f"memsize-{Path(script).stem}", HERE / script, extra, args)


@pytest.fixture(scope="session")
def bundled() -> Path:
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to write .bpte files")
    return _build("make_bpte.py")


def _corpus(archs: tuple[str, ...]) -> dict[str, Path]:
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to lower the corpus")
    pytest.importorskip("transformers")
    out = _build("build_corpus.py", (ROOT / "tests" / "corpus" / "models.py",), archs)
    return {k: out / v for k, v in json.loads((out / "manifest.json").read_text()).items()}


@pytest.fixture(scope="session")
def corpus() -> dict[str, Path]:
    """ResNet lowered fp32 and int8 (the first tier's part of the corpus)."""
    return _corpus(("resnet",))


@pytest.fixture(scope="session")
def corpus_rest() -> dict[str, Path]:
    """ViT and ConvNeXt lowered fp32 and int8 (the heavy tier's part)."""
    return _corpus(("vit", "convnext"))
