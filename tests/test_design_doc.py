"""docs/design.md stays true: what it names exists, and it names every package and every doc.

Checked on the page's text:

* every repository path it writes (``src/…``, ``tests/…``, ``docs/…``, ``scripts/…``, ``benchmarks/…``,
  ``.ci/…``; globs must match something) and every dotted ``etlens.…`` module exists;
* in the package layout (the code block that starts with ``src/etlens/``), every top-level entry exists, and
  every ``name.py`` / ``name/`` its description names exists inside that entry (at any depth);
* every ``*.md`` it names is a file in ``docs/`` (or the repository root);
* every package of ``src/etlens`` and of its first-level packages is named in the layout (``name/``), and
  every ``docs/*.md`` and notebook is named on the page.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "design.md"
SRC = ROOT / "src" / "etlens"


def _text() -> str:
    return PAGE.read_text(encoding="utf-8")


def _layout() -> str:
    blocks = re.findall(r"```\n(src/etlens/\n.*?)```", _text(), re.S)
    assert len(blocks) == 1, "docs/design.md: no package layout block starting with 'src/etlens/'"
    return blocks[0]


def _entries() -> list[tuple[Path, str]]:
    """(where the entry lives, its name + description) for each entry of the layout block."""
    out: list[tuple[Path, str]] = []
    for line in _layout().splitlines()[1:]:
        top = re.match(r"^(\S+)\s", line + " ")  # tests/, benchmarks/, docs/ at the left margin
        sub = re.match(r"^  (\w[\w.]*/?)\s", line + " ")  # a module or package of src/etlens
        if top:
            out.append((ROOT / top.group(1).rstrip("/"), line))
        elif sub:
            out.append((SRC / sub.group(1).rstrip("/"), line))
        elif out:
            out[-1] = (out[-1][0], out[-1][1] + "\n" + line)
    return out


def _exists_glob(rel: str) -> bool:
    return any(ROOT.glob(rel)) if "*" in rel else (ROOT / rel).exists()


def test_named_paths_exist():
    paths = set(re.findall(r"(?<![\w/.<-])((?:src|tests|docs|scripts|benchmarks|\.ci)/[\w./*-]*[\w*])", _text()))
    assert len(paths) > 10
    missing = sorted(p for p in paths if not _exists_glob(p))
    assert not missing, f"docs/design.md names paths that do not exist: {missing}"


def test_named_modules_exist():
    missing = []
    names = set(re.findall(r"\betlens(?:\.\w+)+", _text()))
    for name in names:
        parts = name.split(".")[1:]
        # the longest prefix that is a module; at most one name after it (a function, class or constant)
        for n in range(len(parts), -1, -1):
            base = SRC.joinpath(*parts[:n])
            found = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
            if found.is_file():
                rest = parts[n:]
                if len(rest) > 1 or (rest and not re.search(rf"\b{re.escape(rest[0])}\b", found.read_text())):
                    missing.append(name)
                break
        else:
            missing.append(name)
    assert not missing, f"docs/design.md names modules that do not exist: {sorted(missing)}"


def test_layout_entries_and_their_names_exist():
    entries = _entries()
    assert len(entries) > 10
    missing = []
    for where, text in entries:
        if not where.exists() and not where.with_suffix(".py").exists():
            missing.append(str(where.relative_to(ROOT)))
            continue
        if not where.is_dir():
            continue
        body = text.split(None, 1)[1] if len(text.split(None, 1)) > 1 else ""
        body = re.sub(r"(?:src|tests|docs|scripts|benchmarks)/[\w./*-]+", " ", body)  # full paths: checked above
        if where.name == "docs":
            names = set(re.findall(r"(?<![\w/.*-])([\w-]+\.(?:md|ipynb))\b", body))
        else:
            names = set(re.findall(r"(?<![\w/.*])(\w+\.py)\b", body))
        names |= {n + "/" for n in re.findall(r"(?<![\w/.*-])(\w+)/(?![\w.])", body)}
        for name in sorted(names):
            if not any(where.rglob(name.rstrip("/"))) and not (ROOT / name).exists():  # or a top-level folder
                missing.append(f"{where.relative_to(ROOT)}: {name}")
    assert not missing, f"docs/design.md's package layout names what does not exist: {missing}"


def test_every_doc_named_exists():
    text = re.sub(r"(?:src|tests|scripts|benchmarks)/[\w./*-]+", " ", _text())
    docs = set(re.findall(r"(?<![\w/.*-])([\w-]+\.md)\b", text))
    missing = sorted(d for d in docs if not (ROOT / "docs" / d).is_file() and not (ROOT / d).is_file())
    assert not missing, f"docs/design.md names docs that do not exist: {missing}"


def test_every_doc_is_named():
    text = _text()
    docs = sorted(p.name for p in (ROOT / "docs").iterdir() if p.suffix in {".md", ".ipynb"})
    assert len(docs) > 20
    unnamed = [d for d in docs if not re.search(rf"(?<![\w-]){re.escape(d)}", text)]
    assert not unnamed, f"docs/design.md does not name these docs (add them to the docs/ line): {unnamed}"


def test_every_package_is_in_the_layout():
    layout = _layout()
    packages = sorted(p.parent for p in [*SRC.glob("*/__init__.py"), *SRC.glob("*/*/__init__.py")])
    unnamed = []
    for pkg in packages:
        if not re.search(rf"(?<![\w/]){re.escape(pkg.name)}/", layout):
            unnamed.append(str(pkg.relative_to(SRC)))
    assert not unnamed, f"docs/design.md's package layout does not name these packages: {unnamed}"
