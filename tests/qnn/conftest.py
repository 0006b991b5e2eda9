"""The QNN corpus (tests/qnn/build_corpus.py), built once per content of its sources and shared by every test here.

Building needs ExecuTorch, gcc and pip access to the onnxruntime-qnn 2.7.0 wheel (the QNN libraries are
fetched at build time, never committed); reading the built artifacts needs neither.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import HAS_EXECUTORCH, build_once

HERE = Path(__file__).resolve().parent
SOURCES = (HERE / "sdk.py", HERE / "models.py", HERE / "qnn_htp_shim.c")


@pytest.fixture(scope="session")
def qnn_corpus() -> Path:
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra")
    return build_once("qnn", HERE / "build_corpus.py", SOURCES)


@pytest.fixture(scope="session")
def manifest(qnn_corpus: Path) -> dict:
    return json.loads((qnn_corpus / "manifest.json").read_text())


def run_json(argv: list[str], out: Path) -> tuple[int, dict]:
    """Run ``etlens ARGV --format json -o OUT`` in process; (exit status, the JSON document)."""
    from etlens.cli.main import main

    code = main([*argv, "--format", "json", "-o", str(out)])
    return code, json.loads(out.read_text())
