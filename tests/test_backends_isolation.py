"""Outside its own folder, a backend is not named by code: only the registry and user-facing text name it.

The core (every module of ``src/etlens`` outside ``src/etlens/backends/<name>/``) reaches a backend only
through :mod:`etlens.backends`. This test reads every core module with :mod:`ast` and :mod:`tokenize`
and reports each place where one of :data:`NAMES` (case-insensitive, ``ethos`` covers ``ethos_u`` and
``EthosU``) appears in *code*:

* an identifier: a name, an attribute, a function/class/argument name, an imported module or name
  (``from .xnnpack import …``, ``d.ethos_u``, ``def _xnnpack_passes``);
* a string literal the code *acts on*: an operand of a comparison (``backend == "ethos-u55-128"``,
  ``"xnnpack" in name``), the argument of a string test (``.startswith("xnnpack")``, ``.endswith``,
  ``.find``, ``re.search``/``re.match``), a subscript key (``attrs["xnnpack"]``) or a dict key.

Everything else is *user-facing text* and allowed: docstrings, comments, messages, help texts, the
default value of an option (``--backend xnnpack``), the names of a backend in an example. The
registry (``src/etlens/backends/__init__.py``) is exempt; so is each backend's own folder for its own
name. Generated schema bindings listed in :data:`EXEMPT` are exempt (they name the format they decode).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "etlens"
BACKENDS = SRC / "backends"

#: ``{name in code: the backend folder allowed to use it}`` (``ethos`` and ``vela`` belong to Ethos-U).
NAMES = {"xnnpack": "xnnpack", "ethos": "ethosu", "vela": "ethosu", "cortex_m": "cortex_m", "cortexm": "cortex_m",
         "qnn": "qnn", "qualcomm": "qnn"}
PATTERN = re.compile("|".join(sorted(NAMES, key=len, reverse=True)), re.IGNORECASE)
EXEMPT = {BACKENDS / "__init__.py"}

_STRING_TESTS = {"startswith", "endswith", "find", "index", "search", "match", "fullmatch", "rfind"}


def _owner(path: Path) -> str | None:
    """The backend folder ``path`` lives in (``xnnpack`` for ``backends/xnnpack/payload.py``), or None."""
    try:
        rel = path.relative_to(BACKENDS)
    except ValueError:
        return None
    return rel.parts[0] if len(rel.parts) > 1 else None


def _hits(text: str, owner: str | None) -> list[str]:
    return [m.group(0) for m in PATTERN.finditer(text) if NAMES[m.group(0).lower()] != owner]


def _acted_on_strings(tree: ast.AST) -> list[ast.Constant]:
    """String constants the code compares, tests, or uses as a key."""
    out: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            out.extend([node.left, *node.comparators])
        elif isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in _STRING_TESTS:
                out.extend(node.args)
        elif isinstance(node, ast.Subscript):
            out.append(node.slice)
        elif isinstance(node, ast.Dict):
            out.extend(k for k in node.keys if k is not None)
    consts = []
    for expr in out:
        for sub in ast.walk(expr):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                consts.append(sub)
    return consts


def violations(root: Path = SRC) -> list[str]:
    out: list[str] = []
    for path in sorted(root.rglob("*.py")):
        if path in EXEMPT:
            continue
        owner = _owner(path)
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(root.parent)
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NAME:
                for hit in _hits(tok.string, owner):
                    out.append(f"{rel}:{tok.start[0]}: identifier {tok.string!r} names {hit!r}")
        for const in _acted_on_strings(ast.parse(text)):
            for hit in _hits(const.value, owner):
                out.append(f"{rel}:{const.lineno}: code acts on the string {const.value!r} (names {hit!r})")
    return out


def test_the_core_names_no_backend():
    found = violations()
    assert not found, f"{len(found)} place(s) name a backend outside its folder:\n" + "\n".join(found)


def test_the_checker_tells_code_from_text(tmp_path):
    pkg = tmp_path / "etlens"
    (pkg / "readers").mkdir(parents=True)
    (pkg / "readers" / "m.py").write_text(
        '"""Reads XNNPACK payloads (a docstring: text)."""\n'
        "from .xnnpack import decode  # comment: text\n"
        "def f(d, backend='xnnpack'):\n"
        "    if backend == 'ethos-u55-128':\n"
        "        return d.attrs['vela']\n"
        "    raise ValueError(f'no Qnn decoder for {backend}')\n")
    found = violations(pkg)
    assert [line.split(": ", 1)[1] for line in found] == [
        "identifier 'xnnpack' names 'xnnpack'",
        "code acts on the string 'ethos-u55-128' (names 'ethos')",
        "code acts on the string 'vela' (names 'vela')",
    ]
