"""mypy --strict passes on the readers and the schema facts (config: ``[tool.mypy]`` in pyproject.toml)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_mypy_strict_on_readers_and_schema():
    pytest.importorskip("mypy")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "src/etlens/readers", "src/etlens/schema"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
