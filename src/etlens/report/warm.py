"""What the report imports, found by reading its code: imported ahead while the build's child works.

``report_from_model`` hands :func:`prewarm` to :meth:`etlens.builder.session.BuildSession.while_lowering`:
while the worker child lowers and runs (this process only waits then), a thread imports every
module the analyses and the page will import on first use (pandas alone ~0.6 s). The list is not
kept by hand: :func:`report_modules` follows the imports (module-level and inside functions) from
the report's own modules through etlens, reading the source with :mod:`ast`, and adds the
third-party packages they name. Packages of the toolchain (``skip_roots``: the session's
``torch`` + backend modules) are left to the child; the build's and the CLI's modules are not
followed. Only imports: no file is read, nothing computed.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import sys
from pathlib import Path
from typing import Any, Iterable

__all__ = ["report_modules", "prewarm"]

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


def _imports(name: str, path: Path) -> set[str]:
    pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = (".".join(pkg[:len(pkg) - node.level + 1] + ([node.module] if node.module else []))
                    if node.level else node.module or "")
            for alias in node.names:
                full = f"{base}.{alias.name}"
                out.add(full if _file(full) is not None else base)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


def report_modules(skip_roots: Iterable[str] = ()) -> list[str]:
    """Third-party packages first, then etlens modules, that the report's code imports (see the module doc)."""
    skip = {r.split(".")[0] for r in skip_roots} | set(sys.stdlib_module_names) | {"__future__"}
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
    return sorted(third) + sorted(seen)


def prewarm(skip_roots: Iterable[str] = ()) -> Any:
    """Import :func:`report_modules` (errors left to the analysis that needs the module)."""
    import importlib

    for name in report_modules(skip_roots):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - the analysis that needs it reports the error
            continue
