"""Assemble the single-file page: template + CSS + JS from ``assets/`` and the JSON payload.

Safety rules this module enforces (node names are user data):

* the payload goes into ``<script type="application/json">`` (never executed) with ``<``, ``>``,
  ``&``, U+2028 and U+2029 written as ``\\uXXXX`` escapes, so no string can close the tag;
* the page reads it with ``JSON.parse`` and renders strings with ``textContent`` only;
* a Content-Security-Policy meta tag allows inline script/style and ``data:`` images, nothing else:
  the page fetches nothing and works offline.

The page's code is a set of small ES2020 modules in ``assets/`` (``main.js`` imports ``app.js``,
which imports ``model.js``, ``view.js`` …). :func:`bundle_js` is the build step that turns them into
the one inline ``<script>``: no bundler and nothing downloaded, just our own few lines. It walks the
imports from ``main.js``, orders the modules so each comes after what it imports, and wraps each one
in a function that returns its exports::

    const { el, trunc } = (() => { /* dom.js without "export " */ return { el, trunc }; })();

so a module's private names stay private, and every ``import { a, b } from './x.js';`` line becomes
a no-op (the names are already in scope). Only that import form is accepted; anything else
(``export default``, ``import * as``, renames) raises, as does importing a name a module does not
export or two modules exporting the same name.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from importlib import resources
from typing import Any, Callable, Mapping

from ...errors import EtlensError

__all__ = ["render_page", "write_page", "write_html", "embed_json", "bundle_js"]

_ENTRY = "main.js"
_IMPORT = re.compile(r"^import\s*\{([^}]*)\}\s*from\s*'\./([\w-]+\.js)';[ \t]*$", re.M)
_EXPORT = re.compile(r"^export\s+(?:async\s+)?(?:class|function\*?|const|let)\s+([\w$]+)", re.M)
_EXPORT_KEYWORD = re.compile(r"^export\s+(?=(?:async\s+)?(?:class|function\*?|const|let)\s)", re.M)
_ANY_MODULE_SYNTAX = re.compile(r"^(?:import\b|export\b)", re.M)


def bundle_js(read: Callable[[str], str], entry: str = _ENTRY) -> str:
    """One classic script from the ES modules reachable from ``entry`` (see the module docstring).

    ``read(name)`` returns a module's source (``name`` like ``"app.js"``).
    """
    order: list[str] = []
    sources: dict[str, str] = {}
    imports: dict[str, list[tuple[list[str], str]]] = {}
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in sources:
            return
        if name in visiting:
            raise EtlensError(f"viewer assets: import cycle through {name}")
        visiting.add(name)
        src = read(name)
        imports[name] = [([x.strip() for x in names.split(",") if x.strip()], dep)
                         for names, dep in _IMPORT.findall(src)]
        for _, dep in imports[name]:
            visit(dep)
        visiting.discard(name)
        sources[name] = src
        order.append(name)

    visit(entry)
    exports = {name: _EXPORT.findall(src) for name, src in sources.items()}
    owner: dict[str, str] = {}
    for name in order:
        for sym in exports[name]:
            if sym in owner:
                raise EtlensError(f"viewer assets: {sym!r} is exported by both {owner[sym]} and {name}")
            owner[sym] = name
    parts = []
    for name in order:
        src = _IMPORT.sub("", sources[name])
        for names, dep in imports[name]:
            missing = [x for x in names if x not in exports[dep]]
            if missing:
                raise EtlensError(f"viewer assets: {name} imports {', '.join(missing)} that {dep} does not export")
        src = _EXPORT_KEYWORD.sub("", src)
        leftover = _ANY_MODULE_SYNTAX.search(src)
        if leftover:
            line = src[leftover.start():].split("\n", 1)[0]
            raise EtlensError(f"viewer assets: {name}: unsupported module syntax {line!r}")
        listed = ", ".join(exports[name])
        if listed:
            parts.append(f"// ---- {name}\nconst {{ {listed} }} = (() => {{\n{src}\nreturn {{ {listed} }};\n}})();")
        else:
            parts.append(f"// ---- {name}\n(() => {{\n{src}\n}})();")
    return "(() => {\n'use strict';\n" + "\n".join(parts) + "\n})();\n"


@lru_cache(maxsize=1)
def _assets() -> tuple[str, str, str]:
    root = resources.files("etlens.views.html").joinpath("assets")
    template = root.joinpath("viewer.html").read_text(encoding="utf-8")
    css = root.joinpath("viewer.css").read_text(encoding="utf-8")
    js = bundle_js(lambda name: root.joinpath(name).read_text(encoding="utf-8"))
    if "</script" in js.lower() or "</style" in css.lower():  # would end the inline element early
        raise EtlensError("viewer assets contain a closing tag; they cannot be inlined safely")
    return template, css, js


def embed_json(data: Any) -> str:
    """JSON text that is safe inside ``<script type="application/json">``."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render_page(payload: Mapping[str, Any]) -> str:
    """The complete HTML document for ``payload`` (see :mod:`etlens.views.html.payload`)."""
    template, css, js = _assets()
    # Substitute the data last and with a function-free split so payload text is never re-scanned.
    head, tail = template.split("/*ETLENS_DATA*/")
    head = head.replace("/*ETLENS_CSS*/", css)
    tail = tail.replace("/*ETLENS_JS*/", js)
    return head + embed_json(payload) + tail


def write_html(text: str, path: str | os.PathLike) -> str:
    """Write a page's HTML ``text`` to ``path`` (an :class:`EtlensError` naming the file when it cannot be
    written) and return the path as a string."""
    path = os.fspath(path)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise EtlensError(f"{path}: cannot write the HTML file ({exc.strerror or exc})") from exc
    return path


def write_page(payload: Mapping[str, Any], path: str | os.PathLike) -> str:
    """Write the page of ``payload`` to ``path`` and return the path as a string."""
    return write_html(render_page(payload), path)
