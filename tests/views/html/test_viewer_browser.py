"""The viewer in real headless Chromium: loads offline with zero errors, clicks, search, passes,
compare, overlays, export, and the hostile-name corpus rendering as inert text."""

from __future__ import annotations

import pytest

from etlens.model import Graph, Node
from etlens.views.html import generate_compare_html, generate_html, generate_multi_pass_html
from etlens.views.html.synthetic import synthetic_graph

from tests.views.html._viewer_graphs import HOSTILE, hostile, lowered, tiny

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    d = tmp_path_factory.mktemp("viewer")
    a, b = tiny("export"), tiny("edge")
    b.add(Node("neg", target="aten.neg.default", inputs=["relu"]))
    b._nodes.pop("output")
    b.add(Node("output", kind="output", inputs=["neg"]))
    return {
        "tiny": generate_html(tiny(), d / "tiny.html"),
        "hostile": generate_html(hostile(), d / "hostile.html"),
        "big": generate_html(synthetic_graph(3000), d / "big.html"),
        "passes": generate_multi_pass_html([("export", a), ("add_neg", b)], d / "passes.html"),
        "compare": generate_compare_html({"aten": tiny(), "lowered": lowered()}, d / "compare.html"),
        "overlay": generate_html(tiny(), d / "overlay.html", overlay={"linear": 3.0, "relu": 1.0},
                                 overlay_label="latency (ms)"),
        "lowered": generate_html(lowered(), d / "lowered.html"),
        "empty": generate_html(Graph("empty"), d / "empty.html"),
        "cycle": generate_html(_cycle(), d / "cycle.html"),
    }


def _cycle() -> Graph:
    g = Graph("not a DAG")  # malformed input must still draw, not hang
    g.add(Node("a", inputs=["c"]))
    g.add(Node("b", inputs=["a"]))
    g.add(Node("c", inputs=["b"]))
    return g


def test_degenerate_graphs_load(open_page, pages):
    assert open_page(pages["empty"]).errors == []
    pg = open_page(pages["cycle"])
    assert pg.errors == [] and pg.page.evaluate("() => window.etlens.visibleCount()") == 3


def test_loads_offline_without_errors(open_page, pages):
    pg = open_page(pages["tiny"])
    assert pg.errors == [] and pg.requests == [] and pg.dialogs == []
    assert pg.page.evaluate("() => window.etlens.visibleCount()") == 5
    # something was drawn: the canvas is not blank
    blank = pg.page.evaluate("""() => { const c = document.querySelector('canvas.etl-canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        for (let i = 0; i < d.length; i += 4) if (d[i] < 200) return false; return true; }""")
    assert not blank


def test_click_node_shows_details(open_page, pages):
    pg = open_page(pages["tiny"])
    pg.click_node("linear")
    text = pg.details()
    for expected in ("linear", "aten.linear.default", "f32[1,16]", "fc", "torch.nn.Linear", "m.py", "Lineage",
                     "export"):
        assert expected in text, (expected, text)
    assert pg.errors == []


def test_search_finds_a_node(open_page, pages):
    pg = open_page(pages["big"])
    pg.page.fill("#etl-search", "op:gelu")
    pg.page.press("#etl-search", "Enter")
    info = pg.wait("() => document.getElementById('etl-search-info').textContent")
    assert info.startswith("1 / ")
    assert "aten.gelu.default" in pg.details()
    assert pg.errors == []


def test_module_boxes_collapse_and_expand(open_page, pages):
    pg = open_page(pages["big"])
    before = pg.page.evaluate("() => window.etlens.visibleCount()")
    assert before < 300  # 3000 nodes open as module boxes
    pg.page.click("#etl-expand")
    assert pg.page.evaluate("() => window.etlens.visibleCount()") > 2000


def test_stepping_passes_changes_the_view(open_page, pages):
    pg = open_page(pages["passes"])
    shot0 = pg.page.locator("canvas.etl-canvas").screenshot()
    info0 = pg.page.inner_text("#etl-pass-info")
    pg.page.locator("canvas.etl-canvas").focus()
    pg.page.keyboard.press("ArrowRight")
    assert pg.page.evaluate("() => window.etlens.snapIndex()") == 1
    pg.page.wait_for_timeout(100)
    info1 = pg.page.inner_text("#etl-pass-info")
    assert info0 != info1 and "1 added" in info1
    assert pg.page.locator("canvas.etl-canvas").screenshot() != shot0
    pg.page.click("#etl-prev")
    assert pg.page.evaluate("() => window.etlens.snapIndex()") == 0
    pg.page.select_option("#etl-pass-select", "1")
    assert pg.page.evaluate("() => window.etlens.snapIndex()") == 1
    assert pg.errors == []


def test_hostile_names_render_as_text(open_page, pages):
    pg = open_page(pages["hostile"])
    for name in HOSTILE[:3] + HOSTILE[4:]:
        pg.click_node(name)
        assert name.strip()[:40] in pg.details().replace("\n", " ") or name[:40] in pg.details()
    pg.page.fill("#etl-search", "onerror")
    pg.page.press("#etl-search", "Enter")
    assert pg.dialogs == [] and pg.errors == []
    assert pg.page.evaluate("() => document.querySelectorAll('img').length") == 0
    assert pg.page.evaluate("() => document.querySelectorAll('script').length") == 2
    assert "alert('title')" in pg.page.title()
    svg = pg.page.evaluate("() => window.etlens.svg()")
    assert "<img" not in svg and "<script" not in svg


def test_compare_syncs_selection_by_lineage(open_page, pages):
    pg = open_page(pages["compare"])
    pg.click_node("linear", 0)
    marked = pg.page.evaluate("() => window.etlens.marked(1)")
    names = pg.page.evaluate("(ids) => ids.map(i => window.etlens.nodeName(i, 1))", marked)
    assert "call_delegate" in names
    assert pg.errors == []


def test_overlay_legend_and_delegate_details(open_page, pages):
    pg = open_page(pages["overlay"])
    assert "latency (ms)" in pg.page.inner_text("#etl-legend")
    pg.click_node("linear")
    assert "latency (ms)" in pg.details() and "3" in pg.details()
    pg2 = open_page(pages["lowered"])
    pg2.click_node("call_delegate")
    text = pg2.details()
    assert "XnnpackBackend" in text and "1,234 bytes" in text and "mm" in text
    assert pg.errors == [] and pg2.errors == []


def test_keyboard_and_export(open_page, pages):
    pg = open_page(pages["tiny"])
    pg.click_node("linear")
    pg.page.keyboard.press("ArrowDown")
    assert "aten.relu.default" in pg.details()
    png = pg.page.evaluate("() => document.querySelector('canvas.etl-canvas').toDataURL('image/png').length")
    assert png > 1000
    with pg.page.expect_download() as dl:
        pg.page.click("#etl-svg")
    assert dl.value.suggested_filename == "etlens-graph.svg"
    assert pg.errors == []


def _chain(name: str, prefix: str, length: int) -> Graph:
    g = Graph(name)
    g.add(Node("x", kind="input"))
    prev = "x"
    for i in range(length):
        g.add(Node(f"{prefix}{i}", target="aten.relu.default", inputs=[prev]))
        prev = f"{prefix}{i}"
    g.add(Node(f"out_{prefix}", kind="output", inputs=[prev]))
    return g


def test_pass_stepper_opens_fitted_on_the_first_pass(open_page, tmp_path):
    # the union of all passes is ten times taller than the first pass; the stepper used to
    # open readable at the top of the union, cutting the first pass off on a mostly empty canvas
    first, later = _chain("export", "a", 30), _chain("lowered", "b", 300)
    pg = open_page(generate_multi_pass_html([("export", first), ("lower", later)], tmp_path / "fit.html"))
    assert pg.page.evaluate("() => window.etlens.snapIndex()") == 0
    vp = pg.page.evaluate("() => window.etlens.visibleBounds()")
    rects = [pg.page.evaluate("([n]) => window.etlens.nodeRect(n)", [n.name]) for n in first]
    for r in rects:  # every node of the first pass is on screen
        assert vp["x"] <= r["x"] and r["x"] + r["w"] <= vp["x"] + vp["w"] + 0.5, (r, vp)
        assert vp["y"] <= r["y"] and r["y"] + r["h"] <= vp["y"] + vp["h"] + 0.5, (r, vp)
    # ... and they fill the screen's height, not a corner of it
    top, bottom = min(r["y"] for r in rects), max(r["y"] + r["h"] for r in rects)
    assert bottom - top >= 0.6 * vp["h"], (top, bottom, vp)
    assert pg.errors == []
