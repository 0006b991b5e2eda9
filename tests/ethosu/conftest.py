"""Fixtures of the Ethos-U tests: the corpus compiled by the real Arm backend + Vela, cached.

``ethosu_small`` (the CNN for ethos-u55-128 and ethos-u85-256, about a minute, each compile also
recording the Arm backend's passes as a trace) serves the fast tests; ``ethosu_corpus`` (the other
models of tests/ethosu/models.py, ``build_corpus.CORPUS``: both targets, the transformer block on the
U55 only; several minutes) the ``corpus``-marked ones. Both are built once per content of the
builder, the models, etlens.backends.ethosu.build and etlens.passes.preprocess into ``$ETLENS_FIXTURE_CACHE``
and reused.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import HAS_EXECUTORCH, ROOT, build_once

HERE = Path(__file__).resolve().parent
SOURCES = (HERE / "models.py", ROOT / "src" / "etlens" / "backends" / "ethosu" / "build.py",
           ROOT / "src" / "etlens" / "passes" / "preprocess.py")


def _has_vela() -> bool:
    try:
        import ethosu.vela  # noqa: F401
    except Exception:
        return False
    return True


def _load(prefix: str) -> dict[str, SimpleNamespace]:
    if not HAS_EXECUTORCH or not _has_vela():
        pytest.skip("needs the executorch and ethos-u extras (ethos-u-vela)")
    out = build_once(prefix, HERE / "build_corpus.py", SOURCES)
    manifest = json.loads((out / "manifest.json").read_text())
    return {key: SimpleNamespace(key=key, model=key.split("@")[0], target=key.split("@")[1],
                                 **{k: str(out / v) for k, v in files.items() if isinstance(v, str)})
            for key, files in manifest.items()}


@pytest.fixture(scope="session")
def ethosu_small() -> dict[str, SimpleNamespace]:
    """``{"cnn@ethos-u55-128": ns(pte, etrecord, vela, stdout, trace), "cnn@ethos-u85-256": …}``."""
    return _load("ethosu_small")


@pytest.fixture(scope="session")
def ethosu_corpus() -> dict[str, SimpleNamespace]:
    """The corpus builds of ``build_corpus.CORPUS`` (keys ``<model>@<target>``; the CNN is in ``ethosu_small``)."""
    return _load("ethosu_corpus")
