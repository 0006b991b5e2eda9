"""Lint and type checks as tests, so the README's test command runs them.

* ``ruff check src tests benchmarks scripts`` with the rules in pyproject.toml (``[tool.ruff]``:
  pycodestyle E/W, pyflakes F, bugbear B; lines up to 120 characters);
* ``mypy`` strict on ``src/etlens/model`` (in the strict ``[[tool.mypy.overrides]]`` of pyproject.toml; the
  readers and schema facts: tests/test_typecheck_readers.py).

A finding fails the test with the tool's own output. Each check is skipped when its tool is not
installed (both are in the ``dev`` extra that ``scripts/setup.sh`` installs).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[dev]')")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_ruff_is_clean():
    proc = _run("ruff", "check", "--no-cache", "--output-format", "concise", "src", "tests", "benchmarks", "scripts")
    assert proc.returncode == 0, f"ruff findings:\n{proc.stdout}{proc.stderr}"


@pytest.mark.parametrize("package", ["src/etlens/model"])
def test_mypy_strict(package):
    proc = _run("mypy", "--no-incremental", "--cache-dir", "/dev/null", package)
    assert proc.returncode == 0, f"mypy findings:\n{proc.stdout}{proc.stderr}"
