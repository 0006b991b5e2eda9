"""The report's prewarm list (``etlens.report.warm``) and CPython's ast beside the build's threads.

CPython's ``ast.parse`` is not safe in two threads at once before 3.13 (a shared recursion counter: ``SystemError:
AST constructor recursion depth mismatch``), and the prewarm thread runs beside the build, which parses too. Checked:

* the list is found without ast (the import statements, scanned), once per process, and holds every module an
  ast walk of the same sources finds;
* through ``report_from_session`` itself (a stand-in session whose ``build`` runs the ``while_lowering`` callbacks in
  a thread, as ``BuildSession`` does, then stops the report): nothing parses but the prewarm thread's imports,
  each under the parse lock;
* what an import parses in the prewarm thread holds the one parse lock, and ``ast.parse`` is the original again
  after the block;
* two threads parsing at once under the lock never overlap.
"""

from __future__ import annotations

import ast
import threading
from types import SimpleNamespace

import pytest

from etlens.report import warm


@pytest.fixture
def parse_threads(monkeypatch):
    """The names of the threads that call ``ast.parse`` while the test runs."""
    seen: list[str] = []
    real = ast.parse

    def parse(*args, **kwargs):
        name = threading.current_thread().name
        seen.append(name if name == "MainThread" or _lock_owned() else f"{name} (without the lock)")
        return real(*args, **kwargs)

    monkeypatch.setattr(warm.ast, "parse", parse)
    warm._report_modules.cache_clear()
    yield seen
    warm._report_modules.cache_clear()


def _lock_owned() -> bool:
    return warm._PARSE_LOCK._is_owned()


def _ast_imports(name, path):
    """The same walk with ast (what the scan must find, in the test's own thread)."""
    pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = (".".join(pkg[:len(pkg) - node.level + 1] + ([node.module] if node.module else []))
                    if node.level else node.module or "")
            for alias in node.names:
                full = f"{base}.{alias.name}"
                out.add(full if warm._file(full) is not None else base)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


def test_list_follows_the_report_imports(parse_threads, monkeypatch):
    mods = warm.report_modules(["torch"])
    assert "pandas" in mods and "etlens.report.page" in mods and "torch" not in mods
    assert not any(m.startswith(("etlens.builder", "etlens.cli")) for m in mods)
    assert parse_threads == []  # no ast at all
    assert warm.report_modules(["torch"]) == mods
    assert warm._report_modules.cache_info().hits >= 1  # scanned once per process
    monkeypatch.setattr(warm, "_imports", _ast_imports)
    warm._report_modules.cache_clear()
    by_ast = warm.report_modules(["torch"])
    assert set(by_ast) <= set(mods) and len(set(mods) - set(by_ast)) <= 5, sorted(set(mods) ^ set(by_ast))


def test_scan_reads_every_import_form(tmp_path):
    src = ("import os, json as j\nfrom .render import _fmt\nfrom . import page  # noqa\n"
           "def f():\n    from ..analysis import (\n        memory,  # planned\n        size as s,\n    )\n"
           "    import numpy.linalg\n# from pandas import nothing\n")
    (tmp_path / "m.py").write_text(src)
    got = warm._imports("etlens.report.m", tmp_path / "m.py")
    assert got == {"os", "json", "etlens.report.render", "etlens.report.page", "etlens.analysis.memory",
                   "etlens.analysis.size", "numpy.linalg"}, got


class _Stop(Exception):
    pass


class _Session:
    """What ``report_from_session`` uses of a ``BuildSession`` up to the build."""

    name, quantize, backend, failures = "m", False, "xnnpack", {}
    config = SimpleNamespace(runs=True)
    on_stage = None

    def __init__(self) -> None:
        self.lowering: list = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def prewarm_modules(self) -> list[str]:
        return ["torch"]

    def while_lowering(self, fn) -> None:
        self.lowering.append(fn)

    def build(self, *args, **kwargs):
        threads = [threading.Thread(target=fn, name="etlens-while-lowering") for fn in self.lowering]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        raise _Stop


def test_prewarm_thread_parses_only_under_the_lock(parse_threads, monkeypatch, tmp_path):
    from etlens.report import report_from_session

    pytest.importorskip("executorch")
    ran: list[tuple[str, int]] = []
    real = warm.prewarm

    def prewarm(modules):
        modules = list(modules)
        ran.append((threading.current_thread().name, len(modules)))
        return real(modules)

    monkeypatch.setattr(warm, "prewarm", prewarm)
    with pytest.raises(_Stop):
        report_from_session(_Session(), str(tmp_path / "r.html"), runs=1, inside_delegates=False, progress=False)
    assert len(ran) == 1 and ran[0][0] == "etlens-while-lowering" and ran[0][1] > 20, ran
    # the list: no ast; the thread: only what its imports parse, each under the lock
    assert set(parse_threads) <= {"etlens-while-lowering"}, parse_threads


def test_imports_parse_under_the_lock(parse_threads, tmp_path, monkeypatch):
    """A module that parses at import time (as ``numpy.ma`` does through ``inspect.signature``)."""
    (tmp_path / "parses_on_import.py").write_text("import ast\nTREE = ast.parse('x = 1')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    original = ast.parse
    t = threading.Thread(target=warm.prewarm, args=(["parses_on_import"],), name="prewarm")
    t.start()
    t.join()
    assert parse_threads == ["prewarm"], parse_threads
    assert ast.parse is original


def test_parses_never_overlap_under_the_lock():
    import sys

    if sys.version_info >= (3, 13):
        pytest.skip("CPython 3.13 keeps the counter per call: no lock")
    src = "\n".join(f"def f{i}(a, b):\n    return [a + b * {i} for _ in range(3)]" for i in range(40))
    inside, overlaps = [0], []
    real = ast.parse

    def counting(*args, **kwargs):
        inside[0] += 1
        overlaps.append(inside[0])
        try:
            return real(*args, **kwargs)
        finally:
            inside[0] -= 1

    ast.parse = counting
    try:
        with warm.serialized_parse():
            threads = [threading.Thread(target=lambda: [ast.parse(src) for _ in range(15)]) for _ in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        ast.parse = real
    assert len(overlaps) == 45 and max(overlaps) == 1
