"""Fixtures of the robustness tests: ``open_page`` opens an etlens page in Chromium, watching it.

Each page is an :class:`tests.robustness.test_html_safety.Opened` (dialogs, page errors and every
request that would leave the machine are recorded); pages are closed when the test ends.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def open_page(browser):
    from tests.robustness.test_html_safety import Opened

    opened: list[Opened] = []

    def _open(path: str) -> Opened:
        o = Opened(browser, path)
        opened.append(o)
        return o

    yield _open
    for o in opened:
        o.page.close()
