"""The one Content-Security-Policy of the pages etlens writes (a constant every layer that writes HTML reads).

Every page is a single offline file: inline script and style, ``data:`` images and fonts, and
nothing else — no fetch, no form, no ``<base>``, no frame from elsewhere. A hostile string that
slipped past escaping still could not load or send anything. The viewer's template
(``views/html/assets/viewer.html``) spells the same policy (a test checks they agree); the report,
which embeds viewer pages as ``srcdoc`` frames, adds only the frame sources it needs.

Example::

    from etlens.model.html_policy import csp_meta
    head = "<meta charset='utf-8'>" + csp_meta() + "<title>…"   # the policy before anything it governs

(Every page builds its head with :func:`etlens.views.page.page`, which puts this tag first.)
"""

from __future__ import annotations

__all__ = ["CSP", "REPORT_CSP", "csp_meta"]

#: the viewer's policy: inline script/style, data: images and fonts, no network, no forms, no <base>
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
       "font-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'")

#: the report's policy: the viewer's sources plus the ``srcdoc``/``blob:`` frames it embeds (each frame is a
#: viewer page carrying :data:`CSP` itself)
REPORT_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; "
              "frame-src 'self' data: blob:; child-src 'self' data: blob:; connect-src 'none'; base-uri 'none'; "
              "form-action 'none'")


def csp_meta(policy: str = CSP) -> str:
    """The ``<meta http-equiv="Content-Security-Policy">`` tag for ``policy`` (put it first in ``<head>``)."""
    return f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
