"""The report with time attributed inside delegates, in headless Chromium: the latency overlay gives
each node of one delegate its own value, and the module-time icicle puts delegate time in its modules."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.browser

SHOTS = os.environ.get("ETLENS_SCREENSHOTS")   # set to a directory to keep the screenshots (docs/screenshots)


@pytest.fixture(scope="module")
def cnn_report(artifacts, tmp_path_factory):
    from etlens.report import report_from_artifacts

    case = artifacts["cnn_xnnpack"]
    out = tmp_path_factory.mktemp("report-attr") / "report.html"
    return report_from_artifacts(case.etdump, str(out), etrecord=case.etrecord, debug_buffer=case.debug_buffer,
                                 pte=case.pte)


def _open(browser, path: str):
    pg = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:", "about:", "blob:"))
             else r.abort())
    pg.goto(f"file://{path}")
    return pg, errors


def test_overlay_has_per_node_values_inside_one_delegate(cnn_report, browser):
    data = cnn_report.data
    att = data.attribution
    assert att is not None and att.summary()["attributed_fraction"] >= 0.9
    # the whole CNN is one delegate: its convolutions must read their own times, not the delegate's
    path = os.path.join(os.path.dirname(cnn_report.path), "report.graph-latency.html")
    pg, errors = _open(browser, path)
    t = 0
    while not pg.evaluate("() => window.etlensReady === true") and t < 200:
        pg.wait_for_timeout(50)
        t += 1
    values = pg.evaluate("""() => { const M = window.etlens.views[0].M, out = {};
        for (const [name, i] of M.byName) {
          const v = M.overlayValue(i);
          if (v !== null && v !== undefined) out[name] = v;
        }
        return out; }""")
    convs = {k: v for k, v in values.items() if "conv" in k}
    assert len(convs) >= 7
    assert len({round(v, 9) for v in convs.values()}) >= 4, convs
    delegate_ms = att.summary()["delegate_ms"]
    assert max(convs.values()) < delegate_ms     # no node carries the whole delegate's time
    legend = pg.inner_text("#etl-legend")
    assert "latency (ms)" in legend
    assert errors == []
    pg.close()


def test_icicle_puts_delegate_time_in_modules(cnn_report, browser):
    pg, errors = _open(browser, cnn_report.path)
    sec = pg.locator("#module-time")
    assert sec.count() == 1
    boxes = pg.evaluate("""() => Array.from(document.querySelectorAll('#module-time .ic-box')).map(
        g => [g.dataset.path, +g.dataset.ms, g.dataset.kind])""")
    paths = {p: (ms, kind) for p, ms, kind in boxes}
    for module in ("stem", "stem.0", "blocks", "blocks.0", "blocks.0.pointwise"):
        assert module in paths and paths[module][0] > 0, module
    assert any(kind == "delegate" for _, kind in paths.values())
    # a module's box holds its children's time
    assert paths["blocks"][0] >= paths["blocks.0"][0] >= paths["blocks.0.pointwise"][0]
    # the per-operator table names the module and ATen op of delegate-internal rows
    table = pg.inner_text("#latency-table")
    assert "blocks.0.pointwise" in table and "aten.convolution.default" in table
    if SHOTS:
        os.makedirs(SHOTS, exist_ok=True)
        sec.scroll_into_view_if_needed()
        pg.locator("#module-time .etlens-icicle-wrap").screenshot(path=os.path.join(SHOTS, "icicle-cnn.png"))
    assert errors == []
    pg.close()
