"""The one page shell (etlens.views.page): every page type gets its CSP first, its title escaped, and a
hostile node name shown as text, never as markup.

Page types: the report, the size treemap, the memory timeline, the fleet compare page, the fleet
dashboard, a notebook table page. Each is built from real objects (the committed .pte / .etdp) with a
hostile string planted where a model's node name shows; the string must come out escaped, once
or more, and never raw. (tests/robustness/test_html_safety_pages.py opens the same kinds in Chromium.)
"""

from __future__ import annotations

import html
import re

import pytest

from etlens.model.html_policy import CSP, REPORT_CSP
from etlens.views.page import THEME_CSS, esc, page

HOSTILE = "<img src=x onerror=alert(1)>\"'&</script><script>window.__pwned=1</script>"
META = re.compile(r"<meta http-equiv=\"Content-Security-Policy\" content=\"([^\"]*)\">")


def _check(doc: str, policy: str = CSP) -> None:
    head = doc[:doc.index("</head>")]
    m = META.search(head)
    assert m and m.group(1) == policy, "the page's policy"
    assert m.start() < head.index("<title>") and head.index("<meta charset") < m.start()
    assert THEME_CSS in head
    assert HOSTILE not in doc and "<script>window.__pwned" not in doc and "<img src=x" not in doc
    assert esc(HOSTILE) in doc or html.escape(HOSTILE, quote=True) in doc, "the name is shown, escaped"


def test_shell_escapes_title_and_keeps_body():
    doc = page(HOSTILE, "<p>trusted</p>", css="p{color:red}", script="1+1", heading="h1", body_class="x'y")
    _check(doc)
    assert "<h1>" + esc(HOSTILE) + "</h1><p>trusted</p><script>1+1</script></body>" in doc
    assert "class='x&#x27;y'" in doc
    assert esc(None) == "" and esc(3) == "3"


def _pages(committed) -> dict[str, tuple[str, str]]:
    from etlens.analysis.memory import analyze_memory
    from etlens.analysis.size import size_of_file
    from etlens.fleet import Side, compare
    from etlens.fleet.dashboard import DashboardData
    from etlens.readers.pte import read
    from etlens.report.render import Card, ReportPage, Section, render_report, table_html
    from etlens.views.fleet_pages import compare_html, dashboard_html
    from etlens.views.memory_timeline import memory_page
    from etlens.views.notebook import table_page
    from etlens.views.treemap import treemap_page

    pte, etdp = committed["mlp_portable"].pte, committed["mlp_portable"].etdump
    out: dict[str, tuple[str, str]] = {}
    size = size_of_file(pte)
    size.parts[0].name = HOSTILE
    out["size"] = (treemap_page(size), CSP)
    mem = analyze_memory(read(pte))
    tensors = [t for m in mem.methods for t in m.tensors]
    assert tensors
    for m in mem.methods:
        m.name = HOSTILE
    out["memory"] = (memory_page(mem), CSP)
    res = compare(Side.of_etdumps([etdp]), Side.of_etdumps([etdp]))
    res["rows"][0]["event_name"] = HOSTILE
    out["fleet_compare"] = (compare_html(res), CSP)
    data = DashboardData(dataset="/tmp/fleet", counts=(1, 1, 1, 1), builds=["n"], latency=[("d", "n", [1.0, 2.0])],
                         slow=[{"event_name": HOSTILE, "module_path": "m", "device": "d", "build": "n", "count": 1,
                                "p10_ms": 1.0, "p50_ms": 1.0, "p90_ms": 1.0}])
    out["dashboard"] = (dashboard_html(data), CSP)
    report = ReportPage(title="r", cards=[Card("first divergence", HOSTILE)],
                        sections=[Section("ops", "ops", table_html([[HOSTILE, 1.0]], ["node", "ms"]))])
    out["report"] = (render_report(report), REPORT_CSP)
    pd = pytest.importorskip("pandas")
    out["notebook_table"] = (table_page(pd.DataFrame({"node": [HOSTILE], "ms": [1.0]})), CSP)
    return out


PAGE_KINDS = ["size", "memory", "fleet_compare", "dashboard", "report", "notebook_table"]


@pytest.fixture(scope="module")
def pages(committed):
    return _pages(committed)


@pytest.mark.parametrize("kind", PAGE_KINDS)
def test_every_page_type_uses_the_shell(pages, kind):
    doc, policy = pages[kind]
    assert doc.startswith("<!doctype html><html lang='en'><head><meta charset='utf-8'>")
    _check(doc, policy)


def test_no_page_builds_its_own_head():
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "etlens"
    own = [str(p.relative_to(src)) for p in src.rglob("*.py")
           if p.name != "page.py" and re.search(r"f[\"']<!doctype html>", p.read_text(encoding="utf-8"), re.I)]
    assert not own, f"pages with their own <!doctype> (use etlens.views.page.page): {own}"
