"""The one HTML page shell: every page etlens writes starts here (CSP, escaping, head, theme).

A page is one offline file. :func:`page` wraps a page's body in the same head everywhere:

* the Content-Security-Policy first in ``<head>`` (:mod:`etlens.model.html_policy`: the viewer's
  :data:`~etlens.model.html_policy.CSP` by default; the report passes
  :data:`~etlens.model.html_policy.REPORT_CSP`, which adds the ``srcdoc`` frames it embeds), so
  nothing the page shows can load or send anything;
* ``charset``, ``viewport``, the escaped ``<title>``;
* the theme — :data:`THEME_CSS`, the colour variables every page may use (``var(--bad)`` …) — then
  the page's own CSS;
* optionally the title again as a heading, the body, and one inline script.

:func:`esc` is the one escaping function of the pages: every string that comes from a model, a
file name, fleet metadata or the command line goes through it (``None`` is empty). The body is
trusted HTML built by the caller with :func:`esc`; the shell escapes the title itself.

Who uses it: the report (:mod:`etlens.report.render`), the size treemap (:mod:`.treemap`), the
memory timeline (:mod:`.memory_timeline`), the fleet pages (:mod:`.fleet_pages`) and the notebook
pages (:mod:`.notebook`). The graph viewer is the exception: its page is a template file
(``views/html/assets/viewer.html``) that spells the same policy (a test checks they agree).

Example::

    from etlens.views.page import esc, page

    doc = page(f"size of {path}", f"<p>{esc(part.name)}: {part.bytes} bytes</p>",
               css="body{margin:16px}", heading="h2")
"""

from __future__ import annotations

import html
from typing import Any

from ..model.html_policy import CSP, csp_meta

__all__ = ["THEME_CSS", "esc", "page"]

#: the colours of every page, as CSS variables (foreground, muted text, lines, background, cards, verdicts)
THEME_CSS = (":root{--fg:#1f2937;--muted:#6b7280;--line:#e5e7eb;--bg:#f8fafc;--card:#fff;--ok:#15803d;"
             "--warn:#b45309;--bad:#b91c1c;--info:#1d4ed8}")


def esc(value: Any) -> str:
    """``value`` as HTML text, safe in element content and in quoted attributes (``None`` -> ``""``)."""
    return html.escape("" if value is None else str(value), quote=True)


def page(title: str, body: str, *, css: str = "", script: str = "", heading: str | None = None,
         body_class: str = "", csp: str = CSP) -> str:
    """A whole offline HTML page: the shared head (CSP, charset, viewport, title, theme + ``css``), then
    ``<body>`` with the escaped ``title`` as a ``heading`` element (``"h1"``, ``"h2"``; None: no heading),
    ``body`` (trusted HTML) and ``script`` (inline JavaScript, allowed by the policy)."""
    cls = f" class='{esc(body_class)}'" if body_class else ""
    head = f"<{heading}>{esc(title)}</{heading}>" if heading else ""
    tail = f"<script>{script}</script>" if script else ""
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>{csp_meta(csp)}"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{esc(title)}</title><style>{THEME_CSS}{css}</style></head>"
            f"<body{cls}>{head}{body}{tail}</body></html>")
