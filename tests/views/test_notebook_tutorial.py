"""The tutorial notebook (docs/tutorial.ipynb) executed by a real Jupyter kernel, exported to HTML, opened in Chromium.

* the notebook runs top to bottom in an ipykernel through nbclient (export, XNNPACK lowering and the
  runtime with ETDump in a child process, Inspector, numeric gap, overlays, memory/size, the report);
  it is committed without outputs (checked here too);
* its nbconvert HTML export opens in headless Chromium with every non-file request aborted and
  recorded: each etlens display is a sandboxed ``srcdoc`` frame, and inside each one the page must
  have drawn (the viewer: ``etlensReady`` and nodes on its canvas; the other pages: SVG shapes or
  table rows); no console errors; no request attempted;
* a 10k-node graph shown inline in a notebook is interactive (the viewer ready and a click on a node
  showing its details); the budget is 2 s from the notebook page loading (measured 1.2-1.6 s on the
  shared 2-core machine: ``test_10k_node_graph_inline_is_interactive`` prints it, and
  ``benchmarks/bench_viewer.py`` measures the viewer at 10k nodes). The test asserts only what holds
  under any load: interactive within 10x that budget (20 s) — a viewer that became an order of magnitude
  slower fails, a busy machine does not (wall time is what a CPU hog stretches).

Screenshots of every frame go to ``$ETLENS_NOTEBOOK_SHOTS`` when set (for a person to look at).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.conftest import block_remote, requires_executorch

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial.ipynb"

#: executing the tutorial and the browser checks are the heavy tier; that it is committed clean is the fast one
pytestmark = [pytest.mark.xdist_group("notebook")]


def _execute(nb, cwd: Path, timeout: int = 1800):
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def _export_html(nb, path: Path) -> Path:
    """nbconvert's HTML export with its CDN script URLs (MathJax, require.js, …) left empty: the page is offline."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(mathjax_url="", require_js_url="", jquery_url="", mermaid_js_url="",
                            mermaid_layout_elk_js_url="", widget_renderer_url="", jupyter_widgets_base_url="")
    body, _ = exporter.from_notebook_node(nb)
    path.write_text(body, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    import nbformat

    work = tmp_path_factory.mktemp("tutorial")
    nb = nbformat.read(TUTORIAL, as_version=4)
    t = time.perf_counter()
    _execute(nb, work)
    print(f"tutorial executed in {time.perf_counter() - t:.1f} s")
    nbformat.write(nb, work / "tutorial.executed.ipynb")
    return nb, _export_html(nb, work / "tutorial.html")


def test_tutorial_is_committed_without_outputs():
    nb = json.loads(TUTORIAL.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)


def _outputs(nb):
    return [(i, o) for i, c in enumerate(nb.cells) if c.cell_type == "code" for o in c.outputs]


@pytest.mark.slow
@requires_executorch
def test_tutorial_executes_and_every_result_displays_inline(executed):
    nb, _ = executed
    outs = _outputs(nb)
    assert not [o for _, o in outs if o.output_type == "error"]
    frames = [o for _, o in outs if "text/html" in o.get("data", {}) and "<iframe sandbox='allow-scripts'"
              in o["data"]["text/html"]]
    texts = [o["data"]["text/plain"] for o in frames]
    for kind in ("Graph 'cnn · ATen'", "Trace 'cnn'", "Graph 'forward'", "DelegationInfo", "Inspector",
                 "Graph 'edge_dialect_exported_program/forward'", "MemoryReport", "SizeReport", "ReportResult"):
        assert any(t.startswith(f"<etlens {kind}") for t in texts), (kind, texts)
    tables = [o for _, o in outs if "<table" in o.get("data", {}).get("text/html", "") and o not in frames]
    assert len(tables) >= 2  # the Inspector DataFrame and the numeric gap, as pandas renders them
    printed = "".join(o.get("text", "") for _, o in outs if o.output_type == "stream")
    assert printed.count("<etlens ") >= 6  # the last cell: one line per object


_DRAWN = """() => ({
    title: document.title,
    viewerPage: !!window.etlens,
    viewer: window.etlensReady === true,
    nodes: window.etlens && window.etlens.visibleCount ? window.etlens.visibleCount() : 0,
    shapes: document.querySelectorAll('svg rect, svg path, svg circle, svg line').length,
    rows: document.querySelectorAll('table tr').length,
    frames: document.querySelectorAll('iframe').length,
})"""


def _drawn(d: dict) -> bool:
    if d["viewerPage"]:  # the graph viewer: ready, with nodes on its canvas
        return d["viewer"] and d["nodes"] > 0
    return d["shapes"] > 0 or d["rows"] > 1 or d["frames"] > 0


def _check_frames(page, shots: str | None = None) -> list[dict]:
    """Scroll each etlens frame into view (Chromium draws offscreen frames lazily, as a person scrolling
    would see them) and wait until its page drew: viewer nodes, SVG shapes, table rows or its own frames."""
    out = []
    for k, box in enumerate(page.query_selector_all("div.etlens-frame")):
        box.scroll_into_view_if_needed()
        frame = box.query_selector("iframe").content_frame()
        t = time.perf_counter()
        while True:
            d = frame.evaluate(_DRAWN)
            if _drawn(d):
                break
            assert time.perf_counter() - t < 30, f"frame {k} ({d['title']!r}) drew nothing: {d}"
            time.sleep(0.05)
        for child in frame.child_frames:  # the report's own frames (viewers, memory, size)
            child.frame_element().scroll_into_view_if_needed()
            t = time.perf_counter()
            while not _drawn(child.evaluate(_DRAWN)):
                assert time.perf_counter() - t < 30, f"a page inside frame {k} ({d['title']!r}) drew nothing"
                time.sleep(0.05)
            d.setdefault("children", 0)
            d["children"] += 1
        if shots:
            box.scroll_into_view_if_needed()
            page.wait_for_timeout(200)
            box.screenshot(path=os.path.join(shots, f"tutorial-{k:02d}.png"))
        out.append(d)
    return out


class _Opened:
    def __init__(self, browser, path: Path) -> None:
        self.errors: list[str] = []
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.requests = block_remote(self.page.context)
        self.t0 = time.perf_counter()
        self.page.goto(path.as_uri(), wait_until="load")


def _wait(fn, timeout: float = 30.0):
    t = time.perf_counter()
    while True:
        v = fn()
        if v:
            return v
        if time.perf_counter() - t > timeout:
            raise AssertionError("timed out")
        time.sleep(0.02)


def _shots(page, name: str) -> None:
    where = os.environ.get("ETLENS_NOTEBOOK_SHOTS")
    if not where:
        return
    os.makedirs(where, exist_ok=True)
    for k, el in enumerate(page.query_selector_all("div.etlens-frame")):
        el.scroll_into_view_if_needed()
        page.wait_for_timeout(150)
        el.screenshot(path=os.path.join(where, f"{name}-{k:02d}.png"))


@pytest.mark.slow
@requires_executorch
@pytest.mark.browser
def test_exported_notebook_renders_offline_in_chromium(executed, browser):
    _, html_path = executed
    pg = _Opened(browser, html_path)
    try:
        page = pg.page
        n_frames = page.evaluate("() => document.querySelectorAll('iframe[sandbox=\"allow-scripts\"]').length")
        assert n_frames >= 9
        shots = os.environ.get("ETLENS_NOTEBOOK_SHOTS")
        if shots:
            os.makedirs(shots, exist_ok=True)
        drawn = _check_frames(page, shots)
        assert len(drawn) == n_frames
        viewers = [d for d in drawn if d["viewer"]]
        assert len(viewers) >= 4 and all(d["nodes"] > 0 for d in viewers), viewers  # ATen, passes, lowered, overlay
        assert any(d["rows"] > 3 for d in drawn)  # delegation / Inspector tables
        assert any(d.get("children", 0) >= 1 for d in drawn)  # the report, its viewers drawn inside it
        assert pg.errors == []
        assert pg.requests == []
    finally:
        pg.page.close()


@pytest.mark.slow
@pytest.mark.browser
def test_10k_node_graph_inline_is_interactive(browser, tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(cells=[new_code_cell("from etlens.views.html.synthetic import synthetic_graph\n"
                                           "big = synthetic_graph(10_000)\nbig")],
                      metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    _execute(nb, tmp_path, timeout=300)
    out = nb.cells[0].outputs[0]
    assert out["data"]["text/plain"].startswith("<etlens Graph 'synthetic_10000': 9986 nodes")
    size = len(out["data"]["text/html"])
    nbformat.write(nb, tmp_path / "big.ipynb")
    pg = _Opened(browser, _export_html(nb, tmp_path / "big.html"))
    try:
        page = pg.page
        frame = _wait(lambda: next((f for f in page.frames if f != page.main_frame), None), timeout=60)
        while not frame.evaluate("() => window.etlensReady === true"):
            time.sleep(0.005)
            assert time.perf_counter() - pg.t0 < 60, "the 10k-node viewer never became ready"
        ready = time.perf_counter() - pg.t0
        times = frame.evaluate("() => window.etlens.times")
        # interactive: a click on a node (in page coordinates: the frame's box + the node's position) selects it
        box = page.query_selector("iframe").bounding_box()
        name = frame.evaluate("() => window.etlens.nodeName(0, 0)")
        pos = frame.evaluate("([n]) => window.etlens.screenPos(n, 0)", [name])
        t1 = time.perf_counter()
        page.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])
        while name not in frame.inner_text("#etl-details"):
            time.sleep(0.005)
            assert time.perf_counter() - t1 < 10, "the click on a node was not answered"
        click = time.perf_counter() - t1
        print(f"10k-node graph inline: srcdoc output {size / 1e6:.2f} MB; viewer ready {ready:.2f} s after the "
              f"notebook page started loading (viewer's own first paint {times.get('firstPaint', 0):.0f} ms, layout "
              f"{times.get('layout', 0):.0f} ms), node click answered in {1000 * click:.0f} ms")
        _shots(page, "big")
        assert ready + click < 20.0, (ready, click)  # budget 2 s; only 10x is asserted (module docstring)
        assert pg.errors == [] and pg.requests == []
    finally:
        pg.page.close()


@pytest.mark.slow
@requires_executorch
@pytest.mark.browser
def test_llm_view_displays_inline(browser, tmp_path):
    """An LlmProfile of the real LLM corpus (ExecuTorch's export_llama, run with ETDump) shows its runs chart."""
    from tests.llm.conftest import llm_corpus_dir

    from etlens.analysis.inspector import Inspector
    from etlens.analysis.llm import llm_profile
    from etlens.views.notebook import mimebundle

    out = llm_corpus_dir()
    name, entry = next(iter(json.loads((out / "manifest.json").read_text()).items()))
    insp = Inspector(etdump_path=str(out / entry["etdump"]), etrecord=str(out / entry["etrecord"]),
                     debug_buffer_path=str(out / entry["debug_buffer"]), pte=str(out / entry["pte"]))
    prof = llm_profile(insp)
    bundle = mimebundle(prof)
    runs = [c for c in entry["calls"] if c["method"] == "forward"]
    assert bundle["text/plain"].startswith(f"<etlens LlmProfile 'forward': {len(runs)} runs ("), bundle["text/plain"]
    page = tmp_path / "llm.html"
    page.write_text(f"<!doctype html><html><body>{bundle['text/html']}</body></html>", encoding="utf-8")
    pg = _Opened(browser, page)
    try:
        frame = _wait(lambda: next((f for f in pg.page.frames if f != pg.page.main_frame), None))
        bars = _wait(lambda: frame.evaluate("() => document.querySelectorAll('svg.llm-runs rect').length"))
        assert bars >= len(runs), name
        _shots(pg.page, "llm")
        assert pg.errors == [] and pg.requests == []
    finally:
        pg.page.close()
