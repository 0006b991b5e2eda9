"""Assemble the single-file page: template + CSS + JS from ``assets/`` and the JSON payload.

Safety rules this module enforces (node names are user data):

* the payload goes into ``<script type="application/json">`` (never executed) with ``<``, ``>``,
  ``&``, U+2028 and U+2029 written as ``\\uXXXX`` escapes, so no string can close the tag;
* the page reads it with ``JSON.parse`` and renders strings with ``textContent`` only;
* a Content-Security-Policy meta tag allows inline script/style and ``data:`` images, nothing else:
  the page fetches nothing and works offline.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from importlib import resources
from typing import Any

from ...errors import EtlensError

__all__ = ["render_page", "write_page", "embed_json"]

_JS_FILES = ("model.js", "layout.js", "view.js", "app.js")


@lru_cache(maxsize=1)
def _assets() -> tuple[str, str, str]:
    root = resources.files("etlens.views.html").joinpath("assets")
    template = root.joinpath("viewer.html").read_text(encoding="utf-8")
    css = root.joinpath("viewer.css").read_text(encoding="utf-8")
    js = "\n".join(root.joinpath(name).read_text(encoding="utf-8") for name in _JS_FILES)
    if "</script" in js.lower() or "</style" in css.lower():  # would end the inline element early
        raise EtlensError("viewer assets contain a closing tag; they cannot be inlined safely")
    return template, css, js


def embed_json(data: Any) -> str:
    """JSON text that is safe inside ``<script type="application/json">``."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render_page(payload: dict[str, Any]) -> str:
    """The complete HTML document for ``payload`` (see :mod:`etlens.views.html.payload`)."""
    template, css, js = _assets()
    # Substitute the data last and with a function-free split so payload text is never re-scanned.
    head, tail = template.split("/*ETLENS_DATA*/")
    head = head.replace("/*ETLENS_CSS*/", css)
    tail = tail.replace("/*ETLENS_JS*/", js)
    return head + embed_json(payload) + tail


def write_page(payload: dict[str, Any], path: str | os.PathLike) -> str:
    """Write the page to ``path`` and return the path as a string."""
    path = os.fspath(path)
    text = render_page(payload)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise EtlensError(f"{path}: cannot write the HTML file ({exc.strerror or exc})") from exc
    return path
