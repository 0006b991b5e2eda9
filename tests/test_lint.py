"""Lint and type checks as tests, so the README's test command runs them.

* ``ruff check src tests benchmarks scripts docs`` with the rules in pyproject.toml (``[tool.ruff]``:
  pycodestyle E/W, pyflakes F, bugbear B; lines up to 120 characters), and ruff's own file list
  (``--show-files``) holds every ``.py`` file under those folders but the data folders pyproject
  excludes on purpose: ruff's default exclude skips folders such as ``dist``, ``venv``, ``_build``,
  and ignore files can hide more, so a package under such a name would go unchecked without this;
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
#: the folders ruff checks: every folder of the repository with Python in it (docs: the screenshot scripts)
LINTED = ("src", "tests", "benchmarks", "scripts", "docs")
#: folders of input data that ruff skips on purpose (pyproject.toml ``[tool.ruff] extend-exclude``)
DATA_EXCLUDES = ("tests/data", "tests/analysis/inspector/data")
#: folder names git ignores (.gitignore): caches, never source
IGNORED_PARTS = {".cache", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache"}


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[dev]')")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_ruff_is_clean():
    proc = _run("ruff", "check", "--no-cache", "--output-format", "concise", *LINTED)
    assert proc.returncode == 0, f"ruff findings:\n{proc.stdout}{proc.stderr}"


def _python_files() -> set[str]:
    out = set()
    for folder in LINTED:
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT)
            data = rel.as_posix().startswith(tuple(f"{d}/" for d in DATA_EXCLUDES))
            if IGNORED_PARTS.isdisjoint(rel.parts) and not data:
                out.add(rel.as_posix())
    return out


def test_ruff_checks_every_python_file():
    """ruff's file list is every .py file on disk under the linted folders (a folder ruff skips by name fails)."""
    proc = _run("ruff", "check", "--no-cache", "--show-files", *LINTED)
    assert proc.returncode == 0, proc.stderr
    listed = {Path(line.strip()).resolve().relative_to(ROOT).as_posix()
              for line in proc.stdout.splitlines() if line.strip().endswith(".py")}
    on_disk = _python_files()
    assert len(on_disk) > 300 and "src/etlens/builder/session.py" in listed
    missing = sorted(on_disk - listed)
    assert not missing, (f"{len(missing)} .py files ruff does not check (a folder its default exclude skips?): "
                         f"{missing[:20]}")


def test_every_tracked_python_file_is_in_a_linted_folder():
    """No .py file that git tracks lives outside :data:`LINTED` (a new folder of scripts would go unchecked)."""
    proc = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        pytest.skip(f"not a git checkout: {proc.stderr.strip()[:200]}")
    tracked = [p for p in proc.stdout.splitlines() if p.strip()]
    outside = [p for p in tracked if p.split("/", 1)[0] not in LINTED]
    assert len(tracked) > 300 and not outside, outside[:20]


def test_data_excludes_are_pyprojects():
    """The data folders this file allows are exactly the ones pyproject.toml excludes from ruff."""
    tomllib = pytest.importorskip("tomllib")
    with open(ROOT / "pyproject.toml", "rb") as f:
        conf = tomllib.load(f)
    assert tuple(conf["tool"]["ruff"].get("extend-exclude", ())) == DATA_EXCLUDES


@pytest.mark.parametrize("package", ["src/etlens/model"])
def test_mypy_strict(package):
    proc = _run("mypy", "--no-incremental", "--cache-dir", "/dev/null", package)
    assert proc.returncode == 0, f"mypy findings:\n{proc.stdout}{proc.stderr}"
