"""Fixtures for viewer tests: one headless Chromium per module, network blocked, CSP enforced."""

from __future__ import annotations

import time

import pytest


class Page:
    """An opened viewer page plus what it logged: console errors, dialogs, blocked requests."""

    def __init__(self, browser, path: str) -> None:
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page(viewport={"width": 1300, "height": 850})
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("dialog", self._dialog)

        def route(r):
            url = r.request.url
            if url.startswith(("file:", "data:")):
                r.continue_()
            else:
                self.requests.append(url)
                r.abort()

        self.page.route("**/*", route)
        self.page.goto("file://" + str(path))
        self.wait("() => window.etlensReady === true")

    def _dialog(self, d) -> None:
        self.dialogs.append(d.message)
        d.dismiss()

    def wait(self, expr: str, timeout: float = 20.0):
        # page.wait_for_function evaluates strings, which the page's CSP (rightly) forbids
        t = time.time()
        while True:
            v = self.page.evaluate(expr)
            if v:
                return v
            if time.time() - t > timeout:
                raise AssertionError(f"timed out waiting for {expr}; errors: {self.errors}")
            time.sleep(0.02)

    def details(self) -> str:
        return self.page.inner_text("#etl-details")

    def click_node(self, name: str, view: int = 0) -> None:
        pos = self.page.evaluate("([n, v]) => window.etlens.screenPos(n, v)", [name, view])
        assert pos, f"node {name!r} not in the page"
        self.page.wait_for_timeout(50)
        self.page.mouse.click(pos["x"], pos["y"])

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def open_page(browser):
    pages: list[Page] = []

    def _open(path) -> Page:
        pg = Page(browser, path)
        pages.append(pg)
        return pg

    yield _open
    for pg in pages:
        pg.close()
