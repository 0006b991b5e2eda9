"""The one-way data flow, enforced: every import in ``src/etlens`` goes to its own package or a lower layer.

:data:`LAYERS` is the one place the order is written down (README "How it is built" explains it). Each
entry is a set of top-level names under ``etlens`` (a package ``etlens/<name>/`` or a module
``etlens/<name>.py``; ``__init__`` is the package root). Names in one entry are on the same level: they
may import each other's public names, never each other's private ones.

Every ``import`` / ``from … import`` statement is checked — at module level and inside functions (the
lazy imports that keep ``import etlens`` light), relative and absolute. Two rules:

* **upward**: a module may import only its own top-level package and lower layers;
* **private**: a module may not import another package's private names: a ``_x`` module inside it
  (``etlens.readers._fx``) or a ``_x`` name from it (``from etlens.passes.backends import _REGISTRY``).
  Root-level modules listed in :data:`LAYERS` (``etlens._progress`` …) are layer members, not private.

A failure prints one line per violation: ``module -> imported (rule)``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "etlens"

#: Lowest first. Top-level names under ``etlens`` on each level.
LAYERS: list[frozenset[str]] = [
    frozenset({"errors", "schema", "_progress", "_html"}),  # facts and plumbing (_html: the pages' CSP)
    frozenset({"model"}),  # the format-free graph/trace/events model (+ model.files: bounded, safe reads)
    frozenset({"readers"}),  # files -> model
    frozenset({"analysis", "passes", "fleet"}),  # model -> results (inspector, numerics, delegation); pass tracer
    frozenset({"views"}),  # model objects and results -> HTML, tables, Perfetto, Model Explorer
    frozenset({"report"}),  # the one-page report: runs analyses, renders views
    frozenset({"__init__", "compat", "demos", "_version"}),  # facade: public names, compat classes, re-exports
    frozenset({"cli", "__main__"}),  # one thin module per subcommand, on top of everything
]
LEVEL: dict[str, int] = {name: i for i, names in enumerate(LAYERS) for name in names}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _top(dotted: str) -> str | None:
    """The top-level name of ``etlens.<top>…`` (``__init__`` for ``etlens`` itself), None outside etlens."""
    parts = dotted.split(".")
    if parts[0] != "etlens":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path):
    """``(imported module, imported names)`` for every import statement in ``path``, resolved to absolute."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield module, [alias.name for alias in node.names]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def violations() -> list[str]:
    out: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        me = _module_name(path)
        mine = _top(me)
        if mine not in LEVEL:
            out.append(f"{me} -> {me} (not in the layer list: add {mine!r} to LAYERS in tests/test_layers.py)")
            continue
        for module, names in _imports(path):
            theirs = _top(module)
            if theirs is None or theirs == mine:
                continue
            if theirs not in LEVEL:
                out.append(f"{me} -> {module} (not in the layer list)")
                continue
            if LEVEL[theirs] > LEVEL[mine]:
                out.append(f"{me} -> {module} (upward: {mine} is below {theirs})")
            inner = module.split(".")[2:]  # below the top-level package: etlens.<top>.<inner…>
            if any(_private(part) for part in inner):
                out.append(f"{me} -> {module} (private module of another package)")
            for name in names:
                if _private(name):
                    out.append(f"{me} -> {module}.{name} (private name of another package)")
    return out


def test_layer_list_covers_the_package():
    tops = {p.stem if p.is_file() else p.name for p in SRC.iterdir()
            if (p.suffix == ".py") or (p.is_dir() and (p / "__init__.py").exists())}
    assert not tops - set(LEVEL), f"top-level names missing from LAYERS: {sorted(tops - set(LEVEL))}"


def test_imports_follow_the_layers():
    found = violations()
    assert not found, f"{len(found)} import(s) break the layers:\n" + "\n".join(found)


def test_the_checker_sees_lazy_relative_and_private_imports(tmp_path, monkeypatch):
    """The checker itself: a function-level relative import upward and a private name are both reported."""
    pkg = tmp_path / "etlens"
    (pkg / "model").mkdir(parents=True)
    (pkg / "passes").mkdir()
    for d in (pkg, pkg / "model", pkg / "passes"):
        (d / "__init__.py").write_text("")
    (pkg / "passes" / "backends.py").write_text("_REGISTRY = {}\n")
    (pkg / "model" / "m.py").write_text("def f():\n    from ..passes.backends import _REGISTRY\n    return _REGISTRY\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", pkg)
    assert violations() == [
        "etlens.model.m -> etlens.passes.backends (upward: model is below passes)",
        "etlens.model.m -> etlens.passes.backends._REGISTRY (private name of another package)",
    ]
