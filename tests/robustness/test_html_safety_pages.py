"""HTML safety of the pages outside the viewer: size treemap, memory timeline, fleet dashboard, compare page.

The same hostile corpus as :mod:`tests.robustness.test_html_safety` goes into every string these
pages show: part names and groups, method names, instruction labels, tensor producers / nodes /
modules, page titles, fleet metadata (device, build), the dataset directory and the compare sides'
labels. Each page must carry the viewer's Content-Security-Policy (:data:`etlens.model.html_policy.CSP`), keep
the raw payloads out of its markup, and in headless Chromium (network blocked) open no dialog, set
no ``window.__pwned``, add no ``<img>``/``<svg onload>``, make no request, and show the strings as
text (also in the hover tooltips). Screenshots go to ``$ETLENS_SCREENSHOTS`` when it is set.
"""

from __future__ import annotations

import os
import re

import pytest

from etlens.model.html_policy import CSP

from tests.robustness import _harness as H
from tests.robustness.test_html_safety import CSP as CSP_TAG
from tests.robustness.test_html_safety import HOSTILE, Opened

PAGES = ["size", "memory", "dashboard", "fleet_compare"]


def _h(i: int) -> str:
    return HOSTILE[i % len(HOSTILE)][:400]


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    from etlens.analysis.memory import analyze_memory
    from etlens.analysis.size import size_of_file
    from etlens.fleet import Side, collect, compare
    from etlens.fleet.dashboard import dashboard_data
    from etlens.views.fleet_pages import compare_html, dashboard_html
    from etlens.readers.pte import read
    from etlens.views.memory_timeline import write_memory_html
    from etlens.views.treemap import write_treemap_html

    d = tmp_path_factory.mktemp("hostile_pages")
    pte = str(H.DATA / "mlp_portable.pte")
    out = {}

    size = size_of_file(pte)
    for i, p in enumerate(size.parts):
        p.name, p.group = _h(i) + p.name, _h(i + 3)
    out["size"] = write_treemap_html(size, str(d / "size.html"), title=HOSTILE[0])

    mem = analyze_memory(read(pte))
    assert any(m.tensors for m in mem.methods), "the fixture program plans no tensors: nothing to show"
    for m in mem.methods:
        m.name = HOSTILE[3]
        m.instructions = [_h(i) for i in range(len(m.instructions))]
        for i, t in enumerate(m.tensors):
            t.producer, t.node, t.module = _h(i), _h(i + 1), _h(i + 2)
    out["memory"] = write_memory_html(mem, str(d / "memory.html"), title=HOSTILE[1])

    ds = str(d / "fleet_<img src=x onerror=window.__pwned=1>")
    etdp = str(H.DATA / "mlp_portable.etdp")
    collect([etdp], ds, meta={"device": HOSTILE[1], "build": "a" + HOSTILE[3]}, progress=False)
    collect([etdp], ds, meta={"device": HOSTILE[1], "build": "b" + HOSTILE[0]}, progress=False)
    (d / "dashboard.html").write_text(dashboard_html(dashboard_data(ds)), encoding="utf-8")
    out["dashboard"] = str(d / "dashboard.html")

    a, b = Side.of_etdumps([etdp]), Side.of_etdumps([etdp])
    a.label, b.label = HOSTILE[0], HOSTILE[1]
    (d / "fleet_compare.html").write_text(compare_html(compare(a, b)), encoding="utf-8")
    out["fleet_compare"] = str(d / "fleet_compare.html")
    return out


def test_viewer_template_spells_the_shared_policy():
    from importlib import resources

    template = resources.files("etlens.views.html").joinpath("assets/viewer.html").read_text(encoding="utf-8")
    assert f'content="{CSP}"' in template


@pytest.mark.parametrize("kind", PAGES)
def test_page_has_the_viewer_policy_and_no_raw_payload(pages, kind):
    html = open(pages[kind], encoding="utf-8").read()
    metas = CSP_TAG.findall(html)
    assert metas, f"{kind} page has no CSP meta tag"
    assert html.index(metas[0]) < html.index("<title>"), "the policy must come before anything it governs"
    assert re.search(r'content="([^"]*)"', metas[0]).group(1) == CSP
    assert "<script>window.__pwned" not in html and "<img src=x" not in html and "<svg onload" not in html
    assert "</style><style>body{display:none}" not in html


def _shoot(o: Opened, kind: str) -> None:
    where = os.environ.get("ETLENS_SCREENSHOTS")
    if where:
        os.makedirs(where, exist_ok=True)
        o.page.screenshot(path=os.path.join(where, f"hostile_{kind}.png"))


@pytest.mark.browser
@pytest.mark.parametrize("kind", PAGES)
def test_hostile_strings_stay_text(open_page, pages, kind):
    o = open_page(pages[kind])
    o.page.wait_for_timeout(300)
    o.inert()
    body = o.page.inner_text("body")
    assert o.page.evaluate("() => getComputedStyle(document.body).display") != "none"
    expect = {"size": [HOSTILE[0], HOSTILE[1][:20]], "memory": [HOSTILE[1], HOSTILE[3][:20]],
              "dashboard": ["<img src=x onerror=window.__pwned=1>", HOSTILE[1][:20]],
              "fleet_compare": [HOSTILE[0], HOSTILE[1]]}[kind]
    for s in expect:
        assert s in body or s in o.page.title(), f"{kind}: {s[:40]!r} not shown as text"
    tips = o.page.query_selector_all("[data-tip]")
    if kind in ("size", "memory"):
        assert tips, f"{kind}: no hover targets"
        hostile_tip = next(t for t in tips if "onerror" in (t.get_attribute("data-tip") or "")
                           or "<" in (t.get_attribute("data-tip") or ""))
        # the page's own mousemove handler, on that element (it may sit under another one at its centre)
        hostile_tip.evaluate("el => el.dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: 40, "
                             "clientY: 40}))")
        o.page.wait_for_timeout(100)
        shown = o.page.inner_text(".etl-tip")
        assert "<" in shown, f"{kind}: the tooltip did not show the hostile text as text: {shown[:80]!r}"
    _shoot(o, kind)
    o.inert()


def _directives(policy: str) -> dict[str, set[str]]:
    return {d.split()[0]: set(d.split()[1:]) for d in (x.strip() for x in policy.split(";")) if d}


def test_report_policy_is_the_viewer_policy_plus_its_frames():
    """The report embeds viewer pages as frames (and exports blob: images): that is all it adds."""
    from etlens.report.render import CSP as REPORT

    viewer, report = _directives(CSP), _directives(REPORT)
    assert set(report) - set(viewer) <= {"frame-src", "child-src"}
    for name, sources in viewer.items():
        if name in report:
            assert report[name] - sources <= {"blob:"}, name
            assert sources - report[name] == set(), name
        else:
            assert name == "font-src"  # default-src 'none' covers it
    assert report["default-src"] == {"'none'"} and report["connect-src"] == {"'none'"}


def test_every_page_writer_sets_the_policy():
    """Any source file that starts an HTML document also sets a CSP: a new page cannot forget it."""
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "etlens"
    writers = [p for p in src.rglob("*") if p.suffix in (".py", ".html") and p.name != "html_policy.py"
               and "<!doctype html" in p.read_text(encoding="utf-8").lower()]
    # the viewer template and the one page shell (views/page.py: report, fleet, treemap, memory timeline,
    # notebook pages; tests/views/test_page.py checks each of them goes through it)
    assert {p.name for p in writers} >= {"viewer.html", "page.py"}, writers
    for p in writers:
        text = p.read_text(encoding="utf-8")
        assert "csp_meta(" in text or "Content-Security-Policy" in text, f"{p} writes a page without a CSP"
