"""What the report imports, found by reading its code: imported ahead while the build's child works.

``report_from_model`` hands :func:`prewarm` to :meth:`etlens.builder.session.BuildSession.while_lowering`:
while the worker child lowers and runs (this process only waits then), a thread imports every
module the analyses and the page will import on first use (pandas alone ~0.6 s). The list is not
kept by hand: :func:`report_modules` follows the imports (module-level and inside functions) from
the report's own modules through etlens, scanning the import statements of the source, and adds
the third-party packages they name. Packages of the toolchain (``skip_roots``: the session's
``torch`` + backend modules) are left to the child; the build's and the CLI's modules are not
followed. Only imports: no file is read, nothing computed.

Threads and :mod:`ast`: before 3.13, CPython keeps one per-interpreter recursion counter while it
converts a parsed tree to Python objects, so ``ast.parse`` in two threads at once can fail either
of them with ``SystemError: AST constructor recursion depth mismatch`` (CPython gh-106905). Beside
the prewarm thread other threads parse (torch's export of the inside view, an in-process
lowering: ``inspect.signature`` of a builtin parses its text signature, and imports such as
``numpy.ma`` call it). So the list is found without :mod:`ast` (a regular expression over the
import statements: 0.04 s of CPU where ``ast`` took 0.8 s; a docstring's example import only adds
a module), computed in the calling thread and cached per process, and while the report builds,
every ``ast.parse`` of the process goes through one lock (:func:`serialized_parse`).

Example::

    modules = report_modules(session.prewarm_modules())   # here: scans the sources' imports
    session.while_lowering(lambda: prewarm(modules))       # the thread: imports only
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import re
import sys
import threading
from pathlib import Path
from typing import Any, Iterable, Iterator

__all__ = ["report_modules", "prewarm", "serialized_parse"]

_ROOT = Path(__file__).resolve().parents[1]  # src/etlens
#: the report's modules whose imports are followed
_START = ("etlens.report.collect", "etlens.report.page")
#: etlens packages not followed: the build (its child does the native work) and the command line
_NOT_FOLLOWED = ("builder", "passes", "cli", "fleet")


@functools.lru_cache(maxsize=None)
def _file(name: str) -> Path | None:
    p = _ROOT.parent.joinpath(*name.split("."))
    if p.with_suffix(".py").is_file():
        return p.with_suffix(".py")
    return p / "__init__.py" if (p / "__init__.py").is_file() else None


#: ``from .x import a, b as c`` / ``from x import (a,\n b)`` at the start of a line (any indent)
_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
#: ``import a.b, c as d``
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n]+)", re.M)


def _names(clause: str) -> list[str]:
    """The imported names of an import clause: ``(a,  # note\n b as c)`` -> ``['a', 'b']``."""
    clause = re.sub(r"#[^\n]*", "", clause.split(";")[0] if "(" not in clause else clause)
    out = []
    for part in clause.replace("(", " ").replace(")", " ").replace("\\", " ").split(","):
        words = part.split()
        if words and re.fullmatch(r"[\w.]+", words[0]):
            out.append(words[0])
    return out


def _imports(name: str, path: Path) -> set[str]:
    """The modules ``name`` (at ``path``) imports, from its import statements (no :mod:`ast`)."""
    pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    text = path.read_text(encoding="utf-8")
    out: set[str] = set()
    for m in _FROM.finditer(text):
        level, module = len(m.group(1)), m.group(2)
        base = ".".join(pkg[:len(pkg) - level + 1] + ([module] if module else [])) if level else module
        for alias in _names(m.group(3)):
            full = f"{base}.{alias}"
            out.add(full if _file(full) is not None else base)
    for m in _IMPORT.finditer(text):
        out.update(_names(m.group(1)))
    return out


def report_modules(skip_roots: Iterable[str] = ()) -> list[str]:
    """Third-party packages first, then etlens modules, that the report's code imports (see the module doc).

    Scans the sources' import statements (no :mod:`ast`: safe beside any thread); cached per process.
    """
    return list(_report_modules(frozenset(r.split(".")[0] for r in skip_roots)))


@functools.lru_cache(maxsize=8)
def _report_modules(skip_roots: frozenset[str]) -> tuple[str, ...]:
    skip = set(skip_roots) | set(sys.stdlib_module_names) | {"__future__"}
    seen: set[str] = set()
    third: set[str] = set()
    todo = list(_START)
    while todo:
        name = todo.pop()
        path = _file(name)
        if name in seen or path is None:
            continue
        seen.add(name)
        for imported in _imports(name, path):
            parts = imported.split(".")
            if parts[0] == "etlens":
                if len(parts) > 1 and parts[1] not in _NOT_FOLLOWED:
                    todo.append(imported)
            elif parts[0] not in skip and importlib.util.find_spec(parts[0]) is not None:
                third.add(parts[0])
    return tuple(sorted(third) + sorted(seen))


def prewarm(modules: Iterable[str]) -> Any:
    """Import ``modules`` (:func:`report_modules`' list; errors left to the analysis that needs the module).

    Runs in a thread beside the build: it reads no source itself, and what the imports parse is
    serialized with every other thread's ``ast.parse`` (see the module doc).
    """
    import importlib

    with serialized_parse():
        for name in list(modules):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001, S112 - the analysis that needs it reports the error
                continue


_PARSE_LOCK = threading.RLock()
_ACTIVE = 0  # how many serialized_parse blocks are open (guarded by _STATE_LOCK)
_STATE_LOCK = threading.Lock()
_REAL_PARSE: Any = None


def _locked_parse(*args: Any, **kwargs: Any) -> Any:
    with _PARSE_LOCK:
        return _REAL_PARSE(*args, **kwargs)


@contextlib.contextmanager
def serialized_parse() -> Iterator[None]:
    """Within the block, ``ast.parse`` of every thread of the process takes one lock (Pythons before 3.13).

    Nested and concurrent blocks share the one wrapper; the last to leave puts the original back.
    """
    global _ACTIVE, _REAL_PARSE
    if sys.version_info >= (3, 13):
        yield
        return
    with _STATE_LOCK:
        if _ACTIVE == 0:
            _REAL_PARSE = ast.parse
            ast.parse = _locked_parse
        _ACTIVE += 1
    try:
        yield
    finally:
        with _STATE_LOCK:
            _ACTIVE -= 1
            if _ACTIVE == 0 and ast.parse is _locked_parse:
                ast.parse = _REAL_PARSE
