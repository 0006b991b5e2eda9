"""HTML safety: every page kind carries a CSP, and hostile strings in every field stay inert text.

Pages: the viewer (single graph), compare, pass stepper and the report. The hostile corpus goes
into node names, targets, module paths and types, stack traces, dtypes, attrs, delegate backend ids
and compile specs, graph names and meta, snapshot names and a failed pass's traceback, the report
title and subtitle. In headless Chromium (network blocked) each page must open no dialog, set no
``window.__pwned``, add no ``<img>``/``<svg onload>``, make no request, and show the text when the
hostile node is clicked.
"""

from __future__ import annotations

import re
import time

import pytest

from etlens.model.graph import DelegateInfo, Graph, Node, TensorMeta
from etlens.model.trace import Snapshot, Trace

from tests.conftest import block_remote
from tests.robustness import _harness as H

PWN = "window.__pwned=1"
HOSTILE = [
    f"</script><script>{PWN};alert(1)</script>",
    f"<img src=x onerror=\"{PWN};alert(1)\">",
    f"javascript:{PWN};alert(1)",
    f"\"'><svg onload={PWN};alert(1)>",
    "line\u2028sep\u2029para",
    "rtl \u202egnp.exe",
    "emoji 🚀🔥 名前 ünïcødé",
    "L" * 10_000,
    "{{constructor.constructor('alert(1)')()}}",
    "</style><style>body{display:none}</style>",
    "<!--", "]]>", "\\u003cscript\\u003e",
]
CSP = re.compile(r"<meta[^>]+http-equiv=[\"']Content-Security-Policy[\"'][^>]*>", re.I)


def hostile_graph(tag: str = "") -> Graph:
    g = Graph(f"{HOSTILE[0]}{tag}", {"note": HOSTILE[1], HOSTILE[3]: HOSTILE[2]})
    g.add(Node("x", kind="input", outputs=[TensorMeta((1, 4), HOSTILE[1])]))
    prev = "x"
    for i, s in enumerate(HOSTILE):
        name = f"{s}{tag}" if i != 7 else s
        g.add(Node(name, target=f"evil.{s}.default", inputs=[prev], outputs=[TensorMeta((1, 4), "float32")],
                   module_stack=[(f"m{i}.{s[:40]}", s), (s[:80], HOSTILE[(i + 1) % len(HOSTILE)])],
                   stack_trace=f'File "{s[:300]}", line 1, in forward\n    {s[:300]}', debug_handles=(i + 1,),
                   attrs={s[:60]: s[:60], "k": HOSTILE[0]}))
        prev = name
    inner = Graph(HOSTILE[2])
    inner.add(Node(HOSTILE[3], target=HOSTILE[0]))
    g.add(Node(f"{HOSTILE[1]}delegate{tag}", kind="delegate", target="executorch_call_delegate", inputs=[prev],
               delegate=DelegateInfo(backend_id=HOSTILE[0], payload_size=10, compile_specs={HOSTILE[1]: HOSTILE[3]},
                                     ops=[HOSTILE[2]], inner=inner)))
    g.add(Node("output", kind="output", inputs=[f"{HOSTILE[1]}delegate{tag}"]))
    return g


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    from etlens.views.html import generate_compare_html, generate_html, generate_multi_pass_html

    d = tmp_path_factory.mktemp("hostile")
    g1, g2 = hostile_graph(), hostile_graph()
    snaps = [Snapshot(name=HOSTILE[0], stage="export", index=0, graph=g1),
             Snapshot(name=HOSTILE[3], stage=HOSTILE[1], index=1, graph=g2,
                      error={"type": HOSTILE[1], "message": HOSTILE[0], "traceback": "\n".join(HOSTILE[:4])})]
    trace = Trace(model=HOSTILE[0], backend=HOSTILE[1], snapshots=snaps)
    out = {
        "viewer": generate_html(g1, d / "viewer.html", title=HOSTILE[0],
                                overlay={HOSTILE[3]: 1.0}, overlay_label=HOSTILE[1]),
        "compare": generate_compare_html([g1, g2], d / "compare.html", title=HOSTILE[1]),
        "passes": generate_multi_pass_html(trace, d / "passes.html", title=HOSTILE[3]),
    }
    from etlens.report import report_from_artifacts

    trace.save(d / "trace.json")
    report = report_from_artifacts(str(H.DATA / "mlp_portable.etdp"), str(d / "report.html"),
                                   etrecord=str(H.DATA / "mlp_portable.etrecord"),
                                   debug_buffer=str(H.DATA / "mlp_portable.debug.bin"),
                                   pte=str(H.DATA / "mlp_portable.pte"), trace=trace,
                                   title=HOSTILE[0], subtitle=HOSTILE[3])
    out["report"] = report.path
    return {k: str(v) for k, v in out.items()}


@pytest.mark.parametrize("kind", ["viewer", "compare", "passes", "report"])
def test_every_page_has_a_content_security_policy(pages, kind):
    html = open(pages[kind], encoding="utf-8").read()
    metas = CSP.findall(html)
    assert metas, f"{kind} page has no CSP meta tag"
    policy = metas[0]
    assert "default-src 'none'" in policy or "default-src" in policy
    assert "connect-src" not in policy or "connect-src 'none'" in policy
    # the raw payloads never appear unescaped in markup (they live in JSON data, escaped)
    assert "<script>window.__pwned" not in html and "<img src=x" not in html and "<svg onload" not in html


# -- in the browser --------------------------------------------------------------------------------
class Opened:
    def __init__(self, browser, path: str) -> None:
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.page = browser.new_page(viewport={"width": 1300, "height": 850})
        self.page.on("dialog", lambda dl: (self.dialogs.append(dl.message), dl.dismiss()))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.requests = block_remote(self.page)
        self.page.goto("file://" + path)

    def wait(self, expr: str, frame=None, timeout: float = 20.0):
        t = time.time()
        target = frame or self.page
        while True:
            v = target.evaluate(expr)
            if v:
                return v
            if time.time() - t > timeout:
                raise AssertionError(f"timed out waiting for {expr}: {self.errors}")
            time.sleep(0.03)

    def inert(self) -> None:
        for fr in self.page.frames:
            assert not fr.evaluate("() => !!window.__pwned"), f"hostile script ran in {fr.url[:80]}"
            assert fr.evaluate("() => document.querySelectorAll('img[src=x], svg[onload], [onerror]').length") == 0
        assert self.dialogs == [], self.dialogs
        assert self.requests == [], self.requests


def _click(o: Opened, name: str, view: int = 0) -> str:
    pos = o.page.evaluate("([n, v]) => window.etlens.screenPos(n, v)", [name, view])
    assert pos, f"node {name[:60]!r} not in the page"
    o.page.mouse.click(pos["x"], pos["y"])
    o.page.wait_for_timeout(60)
    return o.page.inner_text("#etl-details")


@pytest.mark.browser
@pytest.mark.parametrize("kind", ["viewer", "compare", "passes"])
def test_hostile_strings_stay_text_in_viewer_pages(open_page, pages, kind):
    o = open_page(pages[kind])
    o.wait("() => window.etlensReady === true")
    o.page.wait_for_timeout(200)
    o.inert()
    shown = 0
    for s in HOSTILE:
        if not o.page.evaluate("([n]) => !!window.etlens.screenPos(n, 0)", [s]):
            continue  # (a node off-canvas in a pane: covered by the other page kinds)
        details = _click(o, s)
        shown += 1
        probe = s.replace("\u2028", " ").replace("\u2029", " ")[:30].strip()
        flat = details.replace("\n", " ").replace("\u2028", " ").replace("\u2029", " ")
        assert probe in flat or s[:30] in details, f"{kind}: {s[:40]!r} not shown as text"
    assert shown >= len(HOSTILE) - 3, f"only {shown} hostile nodes could be clicked"
    o.page.fill("#etl-search", "onerror")
    o.page.press("#etl-search", "Enter")
    o.page.wait_for_timeout(100)
    o.inert()
    body = o.page.inner_text("body")
    assert "<img src=x" in body or "onerror" in body or kind == "compare"


@pytest.mark.browser
def test_hostile_delegate_fields_shown_as_text(open_page, pages):
    o = open_page(pages["viewer"])
    o.wait("() => window.etlensReady === true")
    details = _click(o, f"{HOSTILE[1]}delegate")
    assert HOSTILE[0][:20] in details  # backend id
    o.inert()


@pytest.mark.browser
def test_hostile_report_is_inert(open_page, pages):
    o = open_page(pages["report"])
    o.page.wait_for_timeout(1500)
    o.inert()
    assert HOSTILE[0] in o.page.title() or "window.__pwned" in o.page.inner_text("body")
    assert "svg onload" in o.page.inner_text("body")  # subtitle shown as text
    for fr in o.page.frames[1:]:
        if fr.evaluate("() => !!window.etlens"):
            fr.evaluate("() => window.etlensReady")
    o.inert()
