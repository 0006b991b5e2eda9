"""The one-way data flow, enforced: every import in ``src/etlens`` goes to its own package or a lower layer.

:data:`LAYERS` is the one place the order is written down (docs/design.md explains it). Each
entry is a set of top-level names under ``etlens`` (a package ``etlens/<name>/`` or a module
``etlens/<name>.py``; ``__init__`` is the package root). Names in one entry are on the same level: they
may import each other's public names, never each other's private ones.

Every ``import`` / ``from … import`` statement is checked — at module level and inside functions (the
lazy imports that keep ``import etlens`` light), relative and absolute. Two rules:

* **upward**: a module may import only its own top-level package and lower layers;
* **private**: a module may not import another package's private names: a ``_x`` module inside it
  (``etlens.readers._fx``) or a ``_x`` name from it (``from etlens.passes.backends import _REGISTRY``).
  Root-level modules listed in :data:`LAYERS` (``etlens._progress`` …) are layer members, not private.

Two more, inside packages too:

* **sibling private**: a module may not import a private ``_x`` *name* of another module, even in its
  own package (``from .core import _STRUCTURAL``): a shared name is public, or lives in one home both
  import. A private ``_x`` *module* of its own package (``from . import _snapshot``) is that package's
  own and allowed;
* **cycles**: the import graph between modules (every import, lazy ones included; ``from pkg import
  mod`` is an edge to ``pkg.mod``) has no cycle. A package ``__init__`` re-exporting its modules is an
  edge like any other, so a module must not import its own package's ``__init__`` back.

A failure prints one line per violation: ``module -> imported (rule)``; a cycle prints its modules.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "etlens"

#: Lowest first. Top-level names under ``etlens`` on each level.
LAYERS: list[frozenset[str]] = [
    # facts and plumbing; ``backends`` is the backend registry (etlens/backends/__init__.py) only: the
    # modules of a backend's folder sit on the floor of their role (see backend_level below)
    frozenset({"errors", "schema", "_progress", "backends"}),
    frozenset({"model"}),  # the format-free graph/trace/events model (+ model.files: bounded, safe reads)
    frozenset({"readers"}),  # files -> model
    # model -> results (inspector, numerics, delegation); pass tracer; the build (export, quantize, lower,
    # run: etlens.builder). One level: the tracer uses the build's backend registry and the build traces
    # with the tracer; analyses run programs in the build's worker and the inside view compares with
    # analysis.comparators. No module cycle (checked below).
    frozenset({"analysis", "passes", "fleet", "builder"}),
    frozenset({"views"}),  # model objects and results -> HTML, tables, Perfetto, Model Explorer
    frozenset({"report"}),  # the one-page report: runs analyses, renders views
    frozenset({"__init__", "compat", "demos", "_version"}),  # facade: public names, compat classes, re-exports
    frozenset({"cli", "__main__"}),  # one thin module per subcommand, on top of everything
]
LEVEL: dict[str, int] = {name: i for i, names in enumerate(LAYERS) for name in names}


def _role_floors() -> dict[str, str]:
    """``{role: top-level layer name}`` from the registry (etlens.backends.ROLES), read as text: no import."""
    tree = ast.parse((SRC / "backends" / "__init__.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "ROLES":
            table = node.value.args[0]
            return {k.value: v.elts[0].value for k, v in zip(table.keys, table.values)}
    raise AssertionError("etlens/backends/__init__.py defines no ROLES table")


def backend_folder(dotted: str) -> str | None:
    """``xnnpack`` for ``etlens.backends.xnnpack[.payload]``, None for anything else (the registry included)."""
    parts = dotted.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["etlens", "backends"] else None


def backend_level(dotted: str) -> tuple[int | None, str]:
    """The floor of a module inside a backend folder: its role's layer (``payload`` -> readers).

    A folder's ``__init__`` (its :class:`~etlens.backends.Backend` spec) sits with the registry on the
    lowest floor. A module is named after its role, or ``<role>_<more>`` (``mapping_tosa.py``); any other
    name has no floor: ``(None, reason)``.
    """
    parts = dotted.split(".")
    if len(parts) == 3:
        return 0, "backend spec"
    stem = parts[3].lstrip("_")
    floors = _role_floors()
    role = stem if stem in floors else next((r for r in sorted(floors, key=len, reverse=True)
                                             if stem.startswith(r + "_")), None)
    if role is None:
        return None, f"{parts[3]!r} is no role of etlens.backends.ROLES: name the module after its role"
    return LEVEL[floors[role]], role


def _level(dotted: str) -> int | None:
    if backend_folder(dotted):
        return backend_level(dotted)[0]
    return LEVEL.get(_top(dotted) or "")


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


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (never run: not an edge of the import graph)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                out.update(id(n) for n in ast.walk(child) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return out


def _imports(path: Path, runtime_only: bool = False):
    """``(imported module, imported names)`` for every import statement in ``path``, resolved to absolute.

    ``runtime_only``: leave out imports under ``if TYPE_CHECKING:``.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    skip = _type_checking_only(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
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


def backend_violations() -> list[str]:
    """Imports to and from backend folders (etlens/backends/<name>/).

    * a backend module imports lower-or-equal floors only: etlens layers up to its role's floor, and
      the modules of its own folder on a lower or equal floor;
    * nothing outside a backend's folder imports it: the core and other backends reach it through the
      registry (``etlens.backends.hook``), never by module name.
    """
    out: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        me = _module_name(path)
        folder = backend_folder(me)
        mine = None
        if folder:
            mine, why = backend_level(me)
            if mine is None:
                out.append(f"{me} -> {me} ({why})")
                continue
        for module, names in _imports(path):
            if _top(module) is None:
                continue
            for target in _targets(module, names):
                theirs_folder = backend_folder(target)
                if theirs_folder and theirs_folder != folder:
                    out.append(f"{me} -> {target} (outside its folder a backend is reached through the "
                               "registry: etlens.backends.hook)")
                    continue
                if folder is None:
                    continue
                level = _level(target)
                if level is None:
                    out.append(f"{me} -> {target} (not in the layer list)")
                elif level > mine:
                    out.append(f"{me} -> {target} (upward: floor {mine} imports floor {level})")
    return out


def violations() -> list[str]:
    out: list[str] = backend_violations()
    for path in sorted(SRC.rglob("*.py")):
        me = _module_name(path)
        mine = _top(me)
        if backend_folder(me):
            for module, names in _imports(path):
                theirs = _top(module)
                if theirs is None or theirs == "backends":
                    continue
                inner = module.split(".")[2:]
                if any(_private(part) for part in inner):
                    out.append(f"{me} -> {module} (private module of another package)")
                for name in names:
                    if _private(name):
                        out.append(f"{me} -> {module}.{name} (private name of another package)")
            continue
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


def _is_module(dotted: str) -> bool:
    rel = Path(*dotted.split(".")[1:]) if "." in dotted else Path()
    return (SRC / rel).with_suffix(".py").exists() or (SRC / rel / "__init__.py").exists()


def _targets(module: str, names: list[str]) -> list[str]:
    """The etlens modules an import statement loads: ``module`` or, for ``from pkg import mod``, ``pkg.mod``."""
    out = []
    for name in names or [None]:
        sub = f"{module}.{name}" if name else None
        out.append(sub if sub and _is_module(sub) else module)
    return out


def import_graph() -> dict[str, set[str]]:
    """``{module: modules it imports}`` over ``src/etlens`` (every import that runs, lazy ones included)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        me = _module_name(path)
        edges = graph.setdefault(me, set())
        for module, names in _imports(path, runtime_only=True):
            if _top(module) is None:
                continue
            edges.update(t for t in _targets(module, names) if t != me and _is_module(t))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def sibling_private() -> list[str]:
    """``from .x import _name`` between modules (a private module of the importer's own package is allowed)."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        me = _module_name(path)
        package = me if path.name == "__init__.py" else me.rpartition(".")[0]
        for module, names in _imports(path):
            if _top(module) is None or module == me:
                continue
            for name in names:
                if not _private(name):
                    continue
                sub = f"{module}.{name}"
                if _is_module(sub) and module == package:
                    continue  # the package's own private module
                if _is_module(sub):
                    out.append(f"{me} -> {sub} (private module of another package)")
                else:
                    out.append(f"{me} -> {module}.{name} (private name of another module)")
    return out


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, f"{len(found)} import cycle(s):\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_private_names_of_sibling_modules():
    found = sibling_private()
    assert not found, f"{len(found)} import(s) of another module's private names:\n" + "\n".join(found)


def test_the_checker_sees_cycles_and_sibling_private_names(tmp_path, monkeypatch):
    pkg = tmp_path / "etlens"
    (pkg / "analysis").mkdir(parents=True)
    for d in (pkg, pkg / "analysis"):
        (d / "__init__.py").write_text("")
    (pkg / "analysis" / "a.py").write_text("def f():\n    from .b import g\n    return g\n")
    (pkg / "analysis" / "b.py").write_text("from .a import f\nfrom .c import _X\nfrom . import _h\n")
    (pkg / "analysis" / "c.py").write_text("_X = 1\n")
    (pkg / "analysis" / "_h.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "SRC", pkg)
    assert cycles(import_graph()) == [["etlens.analysis.a", "etlens.analysis.b"]]
    assert sibling_private() == ["etlens.analysis.b -> etlens.analysis.c._X (private name of another module)"]


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


def test_backend_modules_sit_on_their_roles_floor():
    found = backend_violations()
    assert not found, f"{len(found)} backend import(s) break the floors:\n" + "\n".join(found)


def test_backend_hooks_name_a_module_of_their_role():
    """Each registered hook ``"module:attr"`` points into its own folder, at a module named after the role."""
    from etlens.backends import all_backends

    bad = []
    for backend in all_backends():
        for role, target in backend.hooks.items():
            if not isinstance(target, str):
                continue
            module = target.partition(":")[0]
            if not backend_folder(module) or backend_level(module)[1] != role:
                bad.append(f"{backend.name}: {role} -> {target} (expected etlens.backends.<folder>.{role}[_x])")
    assert not bad, "\n".join(bad)


def test_the_checker_sees_backend_floors(tmp_path, monkeypatch):
    """A backend's payload decoder (readers floor) importing the analyses is upward; the core importing a
    backend module by name is reported; a module named after no role has no floor."""
    pkg = tmp_path / "etlens"
    for d in ("backends/npu", "analysis", "readers"):
        (pkg / d).mkdir(parents=True)
    for d in (pkg, pkg / "backends" / "npu", pkg / "analysis", pkg / "readers"):
        (d / "__init__.py").write_text("")
    (pkg / "backends" / "__init__.py").write_text((SRC / "backends" / "__init__.py").read_text())
    (pkg / "backends" / "npu" / "payload.py").write_text("from etlens.analysis import x\n")
    (pkg / "backends" / "npu" / "events.py").write_text("from .payload import decode\nfrom etlens.readers import y\n")
    (pkg / "backends" / "npu" / "misc.py").write_text("")
    (pkg / "readers" / "r.py").write_text("from etlens.backends.npu.payload import decode\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", pkg)
    assert backend_violations() == [
        "etlens.backends.npu.misc -> etlens.backends.npu.misc ('misc' is no role of etlens.backends.ROLES: "
        "name the module after its role)",
        "etlens.backends.npu.payload -> etlens.analysis (upward: floor 2 imports floor 3)",
        "etlens.readers.r -> etlens.backends.npu.payload (outside its folder a backend is reached through the "
        "registry: etlens.backends.hook)",
    ]
